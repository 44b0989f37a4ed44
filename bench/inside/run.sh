#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Work inside a running Domain (bench/README.md "inside/"): 200 fork+exec of
# a dynamically linked /bin/true and `git status` of a large tree, inside a
# Domain against inside bare runsc of the same release; cold `runsc run` per
# bare variant (--variant '--platform=ptrace'). Rewrites the "Inside a
# Domain, runsc RELEASE" section of docs/performance.md.
#
#   sudo bench/inside/run.sh [--runsc PATH] [--variant FLAGS]... [--rounds N] [--no-write]
#
# Runs as root (it creates the unprivileged user lzbench). The work is done
# by inside.py, with Debian's /usr/bin/python3 (standard library only).
set -eu
here=$(cd "$(dirname "$0")" && pwd -P)
exec /usr/bin/python3 "$here/inside.py" "$@"
