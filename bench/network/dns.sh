#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# DNS answer latency through the Network Sidecar's resolver (lz-dns) against
# a direct query to the same upstream from the host (bench/README.md).
# Rewrites the "DNS" section of docs/performance.md.
#
#   sudo bench/network/dns.sh [--queries N] [--no-write] [--json FILE]
#
# Runs as root, like bench/network/run.sh: it creates the unprivileged user
# lzbench and the test host's network namespace. The work is done by
# dns.py, with Debian's /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/dns.py" "$@"
