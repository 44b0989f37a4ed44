# SPDX-License-Identifier: Apache-2.0
"""A host rename over a protected Git file while the Domain runs (brief
i26 "configwatch"; docs/git.md "When the host replaces a protected file").

The developer's own `git config` on the host writes config.lock and renames
it over .git/config. Linux lets that rename happen over a dentry that is a
mount point in another mount namespace, and detaches the mount there: the
sandbox's read-only bind over .git/config is gone, and the sandbox reaches
the host's new file through the workspace bind, writable. The sandbox here
tries, in a tight loop, to append a core.fsmonitor that touches a marker;
the test renames on the host.

The control runs the same loop on the host under `unshare -m` with a
read-only bind over .git/config (what the supervisor's mount namespace
has, without Lazaret's guard): the host rename detaches it, the loop's
writes land in the host's file, and the developer's `git status` runs the
planted program.
"""

import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RUN_TIMEOUT, TEARDOWN_TIMEOUT, sh, wait_torn_down
from test_git import git, host_git_problem, new_repo, planted

SETTLE_S = 0.3  # the loop runs (and is refused) this long before the host's rename


def attack_loop(config: str, marker: Path) -> str:
    """Append a [core] fsmonitor that runs the marker to config, again and
    again, until STOP exists next to it; prints LOOP-UP first and the count
    of appends that succeeded at the end."""
    return ("n=0; i=0\necho LOOP-UP\n"
            "while [ ! -e STOP ]; do\n"
            "  i=$((i+1))\n"
            f"  if printf '[core]\\n\\tfsmonitor = %s #%d\\n' \"{planted(marker)}\" $i "
            f">> {config}; then n=$((n+1)); fi\n"
            "done 2>/dev/null\n"
            "echo WROTE:$n\n")


def fsmonitor_lines(path: Path) -> int:
    return len(re.findall(r"fsmonitor", path.read_text(errors="replace"))) if path.exists() \
        else 0


def test_control_rename_detaches_a_readonly_bind_and_the_loop_plants_fsmonitor(lz):
    """Control: the same loop in a private mount namespace with a read-only
    bind over .git/config, no Lazaret: refused until the host renames over
    the config, then its writes reach the host's file and the developer's
    `git status` runs the planted program."""
    ws = new_repo(lz, "ws")
    marker = lz.home / "PLANTED-rename-control"
    script = ("mount --bind .git/config .git/config && "
              "mount -o remount,bind,ro .git/config && "
              "exec sh -c \"$0\"")
    proc = subprocess.Popen(["unshare", "--map-root-user", "-m", "sh", "-c", script,
                             attack_loop(".git/config", marker)],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=lz.env(None), user=lz.user.uid, group=lz.user.gid)
    try:
        assert proc.stdout.readline().strip() == b"LOOP-UP", proc.stderr.read()
        time.sleep(SETTLE_S)
        refused = fsmonitor_lines(ws / ".git" / "config")
        git(lz, ws, "config", "user.name", "Host2")  # config.lock renamed over config
        deadline = time.monotonic() + 5
        while fsmonitor_lines(ws / ".git" / "config") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        (ws / "STOP").touch()
        out, err = proc.communicate(timeout=30)
    assert refused == 0, "the read-only bind did not refuse the loop before the rename"
    assert fsmonitor_lines(ws / ".git" / "config") > 0, (out, err)
    problem = host_git_problem(lz, [ws], marker, may_fail=True)
    assert problem and "ran the command" in problem, \
        f"the control's planted fsmonitor did not run: {problem}"


@pytest.mark.parametrize("key,value", [("user.name", "Host2"), ("core.pager", "less")])
def test_host_rename_over_protected_config_stops_the_sandbox_and_leaves_nothing(rig, key, value):
    """The loop inside a session; the host renames over .git/config. The
    Domain is stopped with a message naming the file, and the host's
    configuration holds no program-running key afterwards: whatever the
    sandbox got in during the window was set aside (.git/config.lazaret-window)
    and the content from before the rename put back. The window (appends
    that landed) is printed for docs/git.md. The developer's own change
    stays when it is harmless (user.name) and nothing landed; one that may
    run a program (core.pager) cannot be told from the sandbox's, so it is
    set aside too (deterministically exercising the set-aside path)."""
    ws = new_repo(rig.lz, "ws")
    marker = rig.lz.home / "PLANTED-rename"
    rig.config({"bb": {}})
    s = rig.start("bb", sh(attack_loop("/workspace/.git/config", marker)), ws=ws)
    s.read_until("LOOP-UP", timeout=RUN_TIMEOUT)
    time.sleep(SETTLE_S)
    assert fsmonitor_lines(ws / ".git" / "config") == 0
    t0 = time.monotonic()
    git(rig.lz, ws, "config", key, value)
    try:
        r = s.finish(timeout=20)
    finally:
        (ws / "STOP").touch()
    stopped_s = time.monotonic() - t0
    aside = ws / ".git" / "config.lazaret-window"
    window = fsmonitor_lines(aside)
    print(f"rename to session end: {stopped_s:.3f} s; appends in the window: {window}; "
          f"set aside: {aside.exists()}")
    assert r.returncode != 0 and "WROTE:" not in r.stdout, (r.returncode, r.stdout[-500:])
    assert ".git/config was replaced or removed on the host" in r.stderr, r.stderr[-3000:]
    assert "config --list --show-origin" in r.stderr, r.stderr[-3000:]
    assert fsmonitor_lines(ws / ".git" / "config") == 0, (ws / ".git" / "config").read_text()
    problem = host_git_problem(rig.lz, [ws], marker)
    assert problem is None, problem
    config = (ws / ".git" / "config").read_text()
    if window or key == "core.pager":
        assert "moved to" in r.stderr and "put back" in r.stderr, r.stderr[-3000:]
        assert value not in config, config
        assert f"{value}" in aside.read_text()
    else:
        assert value in config and not aside.exists(), config
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    # The next run starts with the protection back (a new generation binds
    # the current file read-only).
    r2 = rig.run("bb", sh("echo '#b' >> /workspace/.git/config && echo WROTE || echo REFUSED"),
                 ws=ws)
    assert "REFUSED" in r2.stdout, (r2.stdout, r2.stderr[-2000:])


def test_host_rename_of_protected_hooks_away_stops_the_sandbox(rig):
    """A rename AWAY of a protected path moves its mount with it (the mount
    table does not change): `mv .git/hooks .git/hooks.old && mkdir
    .git/hooks` on the host would leave the sandbox a writable, empty
    hooks directory that the developer's next commit obeys (found while
    checking the brief's "which other binds"; without the watch of the
    guarded names, a loop inside wrote .git/hooks/pre-commit there). The
    guard sees the name leave its directory and stops the sandbox."""
    ws = new_repo(rig.lz, "ws")
    marker = rig.lz.home / "PLANTED-hooks"
    rig.config({"bb": {}})
    loop = ("echo LOOP-UP\nwhile [ ! -e STOP ]; do\n"
            f"  printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit && "
            "chmod +x .git/hooks/pre-commit\ndone 2>/dev/null\necho LOOP-END\n")
    s = rig.start("bb", sh(loop), ws=ws)
    s.read_until("LOOP-UP", timeout=RUN_TIMEOUT)
    time.sleep(SETTLE_S)
    p = rig.lz.run_as_user(["sh", "-c", "mv .git/hooks .git/hooks.old && mkdir .git/hooks"],
                           cwd=ws)
    assert p.returncode == 0, p.stderr
    try:
        r = s.finish(timeout=20)
    finally:
        (ws / "STOP").touch()
    assert r.returncode != 0 and "LOOP-END" not in r.stdout, (r.returncode, r.stdout[-500:])
    assert ".git/hooks was replaced or removed on the host" in r.stderr, r.stderr[-3000:]
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    problem = host_git_problem(rig.lz, [ws], marker)
    assert problem is None, problem
