#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Terminal benchmark (bench/README.md): output throughput (`cat` of a 100 MiB
# file) and keystroke echo latency of an interactive `lazaret run`, each
# against a bare `runsc exec` with a terminal on the same rootfs, measured in
# the same run. Rewrites the "Terminal" section of docs/performance.md.
#
#   sudo bench/terminal/run.sh [--cat N] [--keys N] [--no-write] [--keep] [--json FILE]
#
# Runs as root: it creates the unprivileged user lzbench (Lazaret refuses
# uid 0) and builds the offline busybox image if it is missing, with
# bench/launch's helpers. The work is done by terminal.py, with Debian's
# /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/terminal.py" "$@"
