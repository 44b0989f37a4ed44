#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Network benchmark (bench/README.md): TCP throughput, connection set-up and
# a round trip through the Network Sidecar against the host's own stack, to
# a test host in a network namespace of this machine. Rewrites the "Network"
# section of docs/performance.md.
#
#   sudo bench/network/run.sh [--mib N] [--downloads N] [--connects N]
#                             [--no-write] [--keep] [--json FILE]
#
# Runs as root: it creates the unprivileged user lzbench (Lazaret refuses
# uid 0) and the test host's namespace, and builds the offline images if
# they are missing. The work is done by network.py, with Debian's
# /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/network.py" "$@"
