#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Name-check benchmark (bench/README.md): HTTPS throughput to an address
# learned for an allowed name (through lz-namecheck) against a prefix-allowed
# address of the same server (through slirp4netns), same sandbox, same run.
# Rewrites the "Name check" section of docs/performance.md.
#
#   sudo bench/network/namecheck.sh [--mib N] [--downloads N] [--no-write]
#                                   [--keep] [--json FILE]
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/namecheck.py" "$@"
