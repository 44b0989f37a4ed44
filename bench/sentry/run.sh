#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Git Sentry's audit window (docs/git.md).
#   sudo bench/sentry/run.sh [--count N] [--gap S]          one entry at a time (window.py)
#   sudo bench/sentry/run.sh storm [--seconds S] [--load L]  under deliberate load (storm.py)
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
if [ "${1:-}" = storm ]; then
    shift
    exec /usr/bin/python3 "$here/storm.py" "$@"
fi
exec /usr/bin/python3 "$here/window.py" "$@"
