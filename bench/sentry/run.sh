#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Git Sentry's audit window (bench/sentry/window.py, docs/git.md).
#   sudo bench/sentry/run.sh [--count N] [--gap S]
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/window.py" "$@"
