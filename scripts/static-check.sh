#!/bin/sh
# Static analysis of src/ with cppcheck (Debian's, installed by
# scripts/install-deps.sh): the "warning" and "portability" checks; any
# finding fails. A finding that is wrong is suppressed where it stands, with
# a comment saying why (`// cppcheck-suppress ID`); there is no global
# suppression list. jansson.h is read for its iteration macros; system
# headers are not analysed. Run by scripts/check.sh (make check) after the
# builds; prints nothing on success.
set -eu
cd "$(dirname "$0")/.."
out=$(cppcheck --quiet --std=c11 --enable=warning,portability --inline-suppr \
    --error-exitcode=1 -I src -I build --include=/usr/include/jansson.h src 2>&1) || {
    printf '%s\n' "$out" >&2
    echo "static-check: cppcheck found the problems above in src/" >&2
    echo "  fix them, or suppress a wrong finding where it stands with a reason (scripts/static-check.sh)" >&2
    exit 1
}
if [ -n "$out" ]; then
    printf '%s\n' "$out" >&2
    echo "static-check: cppcheck printed the findings above" >&2
    exit 1
fi

# The layout rules of src/ (HACKING.md): file size, no include cycle between
# directories, no circle of calls between the files of one directory.
python3 scripts/layout-check.py

# Formatting: every C file as .clang-format writes it, with Debian 12's
# clang-format-14 (another version breaks lines differently; the tree was
# formatted in one commit; clang-format-14 -i FILE formats one).
files=$(find src tests -name '*.c' -o -name '*.h' -o -name '*.cpp' | sort)
out=$(clang-format-14 --style=file --dry-run --Werror $files 2>&1) || {
    printf '%s\n' "$out" | grep -E '^[^ ].*: (error|warning):' | sed 's/:[0-9]*:[0-9]*: .*//' | sort -u >&2
    echo "static-check: the files above are not formatted as .clang-format says" >&2
    echo "  fix: clang-format-14 -i FILE (or: clang-format-14 -i \$(git ls-files '*.c' '*.h'))" >&2
    exit 1
}
