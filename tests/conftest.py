# SPDX-License-Identifier: Apache-2.0
"""Fixtures shared by every pytest suite under tests/ (see docs/testing.md).

    repo_root       the repository checkout (Path)
    asan_build_dir  the ASan/UBSan build (env LAZARET_ASAN_BUILD, default build-asan)
    sanitizer_env   ASAN_OPTIONS/UBSAN_OPTIONS that make any sanitizer report fatal
    skip_or_fail    skip_or_fail(reason): skip, or fail under LAZARET_REQUIRE_ALL=1
    assert_no_sanitizer_report
                    assert_no_sanitizer_report(proc, what): fail when a finished
                    process (stderr as str) shows a sanitizer report or exit status

scripts/check.sh sets LAZARET_REQUIRE_ALL=1: there every prerequisite (root,
the built binaries) exists, so a would-be skip means something is broken and
must fail instead of hiding in the summary.
"""

import os
import signal
import shutil
from pathlib import Path

import pytest

# The tests send SIGHUP/SIGTERM to Lazaret processes and expect the default
# reaction. A test run started under nohup (or by a CI runner that ignores
# hangups) would pass SIG_IGN on to every process it starts; Lazaret, like
# any program, keeps an inherited "ignore" (that is what nohup is for).
# Give the processes the tests start the default dispositions.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

REPO_ROOT = Path(__file__).resolve().parent.parent

# Any sanitizer finding ends the process with this status, so a test can tell
# "lazaret failed" from "lazaret hit undefined behaviour" even if the report
# itself went somewhere unexpected.
SANITIZER_EXIT = 99

# LeakSanitizer works for an unprivileged user here (verified: a leak in a
# child run via setpriv is reported and exits 99; the kernel has no Yama
# ptrace restriction), so leaks are fatal too.
SANITIZER_ENV = {
    "ASAN_OPTIONS": ":".join([
        "halt_on_error=1",
        "abort_on_error=0",
        f"exitcode={SANITIZER_EXIT}",
        "detect_leaks=1",
        "strict_string_checks=1",
        "check_initialization_order=1",
        "detect_stack_use_after_return=1",
    ]),
    "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:exitcode={SANITIZER_EXIT}",
    "LSAN_OPTIONS": f"exitcode={SANITIZER_EXIT}",
}
_symbolizer = shutil.which("llvm-symbolizer", path="/usr/bin:/usr/local/bin")
if _symbolizer:
    SANITIZER_ENV["ASAN_SYMBOLIZER_PATH"] = _symbolizer

# Markers of a sanitizer report in a process's stderr.
SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "UndefinedBehaviorSanitizer",
)


def require_all() -> bool:
    return os.environ.get("LAZARET_REQUIRE_ALL") == "1"


def _skip_or_fail(reason: str):
    if require_all():
        pytest.fail(f"{reason} (LAZARET_REQUIRE_ALL=1: nothing may be skipped)", pytrace=False)
    pytest.skip(reason)


def _assert_no_sanitizer_report(proc, what: str = ""):
    stderr = proc.stderr if isinstance(proc.stderr, str) else \
        (proc.stderr or b"").decode("utf-8", "replace")
    found = [m for m in SANITIZER_MARKERS if m in stderr]
    label = what or " ".join(map(str, proc.args))
    assert not found and proc.returncode != SANITIZER_EXIT, (
        f"sanitizer report from {label} (exit {proc.returncode}, found {found}):\n{stderr}")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def asan_build_dir() -> Path:
    return Path(os.environ.get("LAZARET_ASAN_BUILD", REPO_ROOT / "build-asan")).resolve()


@pytest.fixture(scope="session")
def sanitizer_env() -> dict:
    return dict(SANITIZER_ENV)


@pytest.fixture(scope="session")
def skip_or_fail():
    return _skip_or_fail


@pytest.fixture(scope="session")
def assert_no_sanitizer_report():
    return _assert_no_sanitizer_report
