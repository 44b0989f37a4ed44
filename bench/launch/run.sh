#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Launch benchmark (bench/README.md): cold start, warm join and teardown of
# `lazaret run bench -- true`, each against bare runsc on the same rootfs,
# measured in the same run. Rewrites the "Launch" section of
# docs/performance.md.
#
#   sudo bench/launch/run.sh [--cold N] [--warm N] [--no-write] [--keep]
#
# Runs as root: it creates the unprivileged user lzbench (Lazaret refuses
# uid 0) and builds the offline busybox image if it is missing. The work is
# done by launch.py, with Debian's /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/launch.py" "$@"
