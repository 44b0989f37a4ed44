#!/bin/sh
# Configure (once) and build one flavour of Lazaret.
#   scripts/build.sh release DIR   gcc, optimised, warnings are errors
#   scripts/build.sh asan DIR      clang, ASan+UBSan, libFuzzer targets
set -eu
flavour=$1
dir=$2
cd "$(dirname "$0")/.."

if [ ! -f "$dir/build.ninja" ]; then
    case "$flavour" in
    release)
        CC=gcc CXX=g++ meson setup "$dir" --buildtype=debugoptimized >/dev/null
        ;;
    asan)
        CC=clang CXX=clang++ meson setup "$dir" --buildtype=debug \
            -Db_sanitize=address,undefined -Db_lundef=false -Dfuzzers=true >/dev/null
        ;;
    *)
        echo "build.sh: unknown flavour $flavour" >&2
        exit 2
        ;;
    esac
fi
ninja -C "$dir" >"$dir/last-build.log" 2>&1 || { cat "$dir/last-build.log" >&2; exit 1; }
