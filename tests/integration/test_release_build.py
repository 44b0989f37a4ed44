# SPDX-License-Identifier: Apache-2.0
"""The release build runs end to end (issue 24, item 6).

Every other integration test runs the ASan+UBSan build (build-asan/), which
finds memory errors but is not what users install: the release build
(build/, gcc, optimised, _FORTIFY_SOURCE, full RELRO) has its own compiler,
its own optimisations and its own undefined behaviour to trip over. These
tests run a few of test_run.py's checks — a sandbox started for real, exit
statuses and streams, the workspace both ways, Git's top level, teardown
with nothing left (the rig's own check) — with the release binary
(env LAZARET_RELEASE_BIN, default build/src/cli/lazaret).
"""

import os
from pathlib import Path

import pytest

from conftest import Lz, Rig
import test_run

CHECKS = [
    test_run.test_exit_statuses_and_streams,
    test_run.test_workspace_edits_both_ways,
    test_run.test_a_run_inside_a_git_working_tree_uses_its_top_level,
]


@pytest.fixture
def release_rig(repo_root, test_user, tun_usable, sanitizer_env, assert_no_sanitizer_report,
                write_profiles, skip_or_fail):
    path = Path(os.environ.get("LAZARET_RELEASE_BIN",
                               repo_root / "build" / "src" / "cli" / "lazaret"))
    if not os.access(path, os.X_OK):
        skip_or_fail(f"{path} is not built: run scripts/build.sh release build")
    lz = Lz(path.resolve(), test_user, sanitizer_env, assert_no_sanitizer_report)
    rig = Rig(lz, write_profiles, assert_no_sanitizer_report)
    try:
        yield rig
        problems = rig.finish()
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
    finally:
        if os.environ.get("LAZARET_KEEP_TEST_DIRS") != "1":
            lz.cleanup()


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__)
def test_the_release_binary(release_rig, check):
    # The binary under test is the release one, not the ASan build.
    assert "build-asan" not in str(release_rig.lz.bin), release_rig.lz.bin
    check(release_rig)
