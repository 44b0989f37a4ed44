#!/bin/sh
# A longer fuzzing run of every libFuzzer target (docs/testing.md).
#   scripts/fuzz.sh BUILD_DIR SECONDS      (make fuzz FUZZ_SECONDS=600)
#
# Each BUILD_DIR/tests/fuzz/fuzz_* runs for SECONDS, one after another, over
# its seed corpus tests/fuzz/corpus/<name>/ (read only). New interesting
# inputs go to tests/fuzz/corpus-run/<name>/ and crashes, leaks or timeouts to
# tests/fuzz/corpus-run/<name>-artifacts/ (git-ignored), so a run never edits
# the committed corpus. Exit status: 0 when every fuzzer ran clean, 1 otherwise.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: scripts/fuzz.sh BUILD_DIR SECONDS" >&2
    exit 2
fi
build=$1
seconds=$2
case "$seconds" in
''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

# Same settings as the tests: every sanitizer finding is fatal.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

found=0
failed=""
for fuzzer in "$build"/tests/fuzz/fuzz_*; do
    [ -f "$fuzzer" ] && [ -x "$fuzzer" ] || continue
    found=1
    name=$(basename "$fuzzer")
    seeds=tests/fuzz/corpus/$name
    work=tests/fuzz/corpus-run/$name
    artifacts=tests/fuzz/corpus-run/$name-artifacts
    mkdir -p "$work" "$artifacts"
    set -- -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1
    [ -f "tests/fuzz/$name.dict" ] && set -- "$@" -dict="tests/fuzz/$name.dict"
    set -- "$@" "$work"
    [ -d "$seeds" ] && set -- "$@" "$seeds"
    echo "fuzz.sh: $name for ${seconds}s (log: $work.log)"
    if "$fuzzer" "$@" >"$work.log" 2>&1; then
        echo "fuzz.sh: $name: clean, $(find "$work" -type f | wc -l) inputs in $work"
    else
        echo "fuzz.sh: $name: FAILED; artifacts in $artifacts/, log tail:" >&2
        tail -n 40 "$work.log" >&2
        failed="$failed $name"
    fi
done

if [ "$found" -eq 0 ]; then
    echo "fuzz.sh: no fuzz_* binaries in $build/tests/fuzz: build with scripts/build.sh asan $build" >&2
    exit 1
fi
if [ -n "$failed" ]; then
    echo "fuzz.sh: failed:$failed" >&2
    exit 1
fi
echo "fuzz.sh: all fuzzers clean. To keep new coverage, merge it into the seeds:"
echo "  $build/tests/fuzz/NAME -merge=1 tests/fuzz/corpus/NAME tests/fuzz/corpus-run/NAME"
