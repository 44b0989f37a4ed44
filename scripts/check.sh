#!/bin/sh
# make check: install what is missing, build both flavours, run every test.
#
#   1. scripts/install-deps.sh               Debian packages (apt, only what is missing)
#   2. scripts/build.sh release build        gcc, warnings are errors
#   3. scripts/build.sh asan build-asan      clang ASan+UBSan, cmocka tests, libFuzzer targets
#   4. scripts/static-check.sh               (beside step 3) cppcheck over src/, the layout rules of src/
#                                            (scripts/layout-check.py), clang-format: any
#                                            finding fails
#   5. pytest tests/                         integration tests (as an unprivileged user),
#                                            every cmocka binary, a fuzz smoke run
#
# The build steps print nothing on success, so the last line of output is
# pytest's own summary, and pytest's exit status is this script's.
# The tests need root (they create the test user lztest): as another user,
# the pytest step runs under sudo. See docs/testing.md.
set -eu
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# The offline test images (tests/images/build.sh; the first build on a
# machine fetches Debian packages for a minute or two) beside the builds:
# network-bound against CPU-bound. The tests' fixture runs it again, which
# finds the images complete. Only as root (as the fixture does); its output
# is shown only when it fails, and then the tests' fixture says so too.
images_pid=
if [ "$(id -u)" -eq 0 ]; then
    images_log=$(mktemp)
    tests/images/build.sh "${LAZARET_TEST_IMAGES:-/var/cache/lazaret-test-images}" \
        > "$images_log" 2>&1 &
    images_pid=$!
fi
scripts/build.sh release build
# The static check (one cppcheck thread) beside the ASan build (ninja's
# jobs): about 20 s less on two cores than one after the other. Its output
# is shown only when it fails.
static_log=$(mktemp)
scripts/static-check.sh > "$static_log" 2>&1 &
static_pid=$!
scripts/build.sh asan build-asan
if ! wait "$static_pid"; then
    cat "$static_log" >&2
    rm -f "$static_log"
    exit 1
fi
rm -f "$static_log"
if [ -n "$images_pid" ]; then
    wait "$images_pid" || cat "$images_log" >&2
    rm -f "$images_log"
fi

# Debian's pytest is installed for /usr/bin/python3 (root's python3 may be
# another interpreter). LAZARET_REQUIRE_ALL turns every would-be skip into a
# failure: here all prerequisites exist, so a skip would hide a breakage.
# --durations lists the slowest tests before the summary (the budget of
# make check is 30 minutes: this is where to cut first).
set -- /usr/bin/python3 -m pytest -q -p no:cacheprovider -rfEs --durations=40 --rootdir=. tests/
if [ "$(id -u)" -eq 0 ]; then
    exec env PYTHONDONTWRITEBYTECODE=1 LAZARET_REQUIRE_ALL=1 "$@"
fi
exec sudo env PYTHONDONTWRITEBYTECODE=1 LAZARET_REQUIRE_ALL=1 "$@"
