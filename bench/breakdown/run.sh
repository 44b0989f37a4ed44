#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Where a warm join's and a keystroke echo's time goes (bench/README.md
# "breakdown/"): LAZARET_LOG=debug's timing marks and perf's process and
# system-call events on one clock. Prints JSON; writes nothing in docs/.
#
#   sudo bench/breakdown/run.sh [--runsc PATH] [--joins N] [--keys N] [--json FILE]
#
# Runs as root (perf record -a; the unprivileged user lzbench). The work is
# done by breakdown.py, with Debian's /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/breakdown.py" "$@"
