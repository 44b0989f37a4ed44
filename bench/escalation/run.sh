#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Escalation benchmark (bench/README.md): the round trip of an auto-approved
# `lazaret-escalate -- /usr/bin/true` inside a held session, against fork +
# exec + wait of /usr/bin/true on the host, measured in the same run.
# Rewrites the "Escalation" section of docs/performance.md.
#
#   sudo bench/escalation/run.sh [--requests N] [--batch N] [--bin PATH]
#                                [--no-write] [--keep] [--json FILE]
#
# Runs as root: it creates the unprivileged user lzbench (Lazaret refuses
# uid 0) and builds the offline busybox image if it is missing, with
# bench/launch's helpers; it compiles bench/escalation/timer.c with
# `gcc -static`. The work is done by escalation.py, with Debian's
# /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/escalation.py" "$@"
