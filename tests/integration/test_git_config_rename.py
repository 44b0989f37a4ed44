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


LOCK_APPENDER = """
import os, sys, time
path, line, stop = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
n = 0
print("LOOP-UP", flush=True)
while not os.path.exists(stop):
    try:  # never creating the lock: only the host's Git does
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError:
        continue
    try:
        os.write(fd, line)
        n += 1
    except OSError:
        pass
    os.close(fd)
print("WROTE:%d" % n, flush=True)
"""


def test_control_the_hosts_lock_file_takes_what_a_loop_appends(lz):
    """Control for the lock name held (attack round a27, F6): without it,
    a loop that appends to .git/config.lock whenever it exists (never
    creating it) — what a sandbox can do in the shared .git — gets its
    line into the host's configuration through the host's own `git
    config` (its rename of config.lock), no mount detached, no race with
    any guard. Here on the host, as the developer's user."""
    ws = new_repo(lz, "ws")
    marker = lz.home / "PLANTED-lock-control"
    # Blank lines first: appended before the host's Git wrote, the start is
    # overwritten by its text, and only blank lines may be cut
    line = "\n" * 512 + f"[core]\n\tfsmonitor = {planted(marker)}\n"
    proc = subprocess.Popen(["python3", "-c", LOCK_APPENDER, str(ws / ".git" / "config.lock"),
                             line, str(ws / "STOP")],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=lz.env(None), user=lz.user.uid, group=lz.user.gid)
    try:
        assert proc.stdout.readline().strip() == b"LOOP-UP", proc.stderr.read()
        for i in range(50):
            git(lz, ws, "config", "user.name", f"Host{i}", check=False)
            if fsmonitor_lines(ws / ".git" / "config"):
                break
    finally:
        (ws / "STOP").touch()
        out, err = proc.communicate(timeout=30)
    assert fsmonitor_lines(ws / ".git" / "config") > 0, (out, err)
    problem = host_git_problem(lz, [ws], marker, may_fail=True)
    assert problem and "ran the command" in problem, problem


def test_host_git_config_is_held_off_while_the_domain_runs(rig):
    """The lock name of .git/config is held while the Domain runs (docs/git.md
    "The host's git config while a Domain runs"): the host's `git config`
    fails at once and changes nothing, the same lock-append loop inside the
    sandbox writes nothing anywhere, the sandbox can neither remove nor
    write the held name, and the Domain runs on. After it ends the name is
    released and the host's `git config` works."""
    ws = new_repo(rig.lz, "ws")
    marker = rig.lz.home / "PLANTED-lock"
    rig.config({"bb": {}})
    before = (ws / ".git" / "config").read_bytes()
    loop = ("rm -f .git/config.lock 2>/dev/null && echo REMOVED\n"
            "echo x >> .git/config.lock 2>/dev/null && echo APPENDED\n" +
            attack_loop("/workspace/.git/config.lock", marker) + "sleep 0.3\n")
    s = rig.start("bb", sh(loop), ws=ws)
    s.read_until("LOOP-UP", timeout=RUN_TIMEOUT)
    time.sleep(SETTLE_S)
    held = (ws / ".git" / "config.lock").read_text()
    fails = [git(rig.lz, ws, "config", "user.name", f"Host{i}", check=False) for i in range(5)]
    (ws / "STOP").touch()
    r = s.finish(timeout=30)
    assert r.returncode == 0, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "REMOVED" not in r.stdout and "APPENDED" not in r.stdout, r.stdout[-500:]
    assert "WROTE:0" in r.stdout, r.stdout[-500:]
    assert "a sandbox runs on this repository" in held, held
    for p in fails:
        assert p.returncode != 0 and "could not lock config file" in p.stderr, p.stderr
    assert (ws / ".git" / "config").read_bytes() == before
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    assert not (ws / ".git" / "config.lock").exists(), "the lock name was not released"
    git(rig.lz, ws, "config", "user.name", "Host-after")
    assert "Host-after" in (ws / ".git" / "config").read_text()
    assert host_git_problem(rig.lz, [ws], marker) is None


def test_host_rename_over_protected_config_stops_the_sandbox_and_leaves_nothing(rig):
    """The loop appends to .git/config inside a session, after making the
    name the old guard set files aside under (`config.lazaret-window`,
    attack round a27 F1); the host replaces .git/config by a rename, as an
    editor saves (a harmless line added). The Domain is stopped with a
    message naming the file; whatever is at the path is moved aside under
    a name the sandbox could not make in advance, and the content from
    before put back: any change, not only lines that look like they run a
    program (round a27 F3). The window (appends that landed) is printed
    for docs/git.md."""
    ws = new_repo(rig.lz, "ws")
    marker = rig.lz.home / "PLANTED-rename"
    rig.config({"bb": {}})
    before = (ws / ".git" / "config").read_bytes()
    blocker = "echo blocker > /workspace/.git/config.lazaret-window\n"
    s = rig.start("bb", sh(blocker + attack_loop("/workspace/.git/config", marker)), ws=ws)
    s.read_until("LOOP-UP", timeout=RUN_TIMEOUT)
    time.sleep(SETTLE_S)
    assert fsmonitor_lines(ws / ".git" / "config") == 0
    t0 = time.monotonic()
    edit = rig.lz.write("edited-config", before + b"[user]\n\tname = Editor\n", mode=0o644)
    p = rig.lz.run_as_user(["mv", str(edit), str(ws / ".git" / "config")], cwd=ws)
    assert p.returncode == 0, p.stderr
    try:
        r = s.finish(timeout=20)
    finally:
        (ws / "STOP").touch()
    stopped_s = time.monotonic() - t0
    asides = sorted((ws / ".git").glob("config.lazaret-window-*"))
    window = sum(fsmonitor_lines(a) for a in asides)
    print(f"rename to session end: {stopped_s:.3f} s; appends in the window: {window}")
    assert r.returncode != 0 and "WROTE:" not in r.stdout, (r.returncode, r.stdout[-500:])
    assert ".git/config was replaced or removed on the host" in r.stderr, r.stderr[-3000:]
    assert "moved aside to" in r.stderr and "put back" in r.stderr, r.stderr[-3000:]
    assert (ws / ".git" / "config").read_bytes() == before
    assert len(asides) == 1 and b"name = Editor" in asides[0].read_bytes(), asides
    assert (ws / ".git" / "config.lazaret-window").read_text() == "blocker\n"
    problem = host_git_problem(rig.lz, [ws], marker)
    assert problem is None, problem
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


def test_an_included_configuration_files_lock_name_is_held_too(rig):
    """Attack round a27b, G1: a file the repository's configuration
    includes from the work tree (`include.path = ../team.gitconfig`) is
    rewritten by the host's `git config --file` through team.gitconfig.lock,
    in a directory the sandbox writes. Its lock name is held like config's:
    the host's command fails, the append loop inside writes nothing, and
    the name is released when the Domain ends. (The mechanism's control is
    test_control_the_hosts_lock_file_takes_what_a_loop_appends.)"""
    ws = new_repo(rig.lz, "ws")
    rig.lz.write(ws / "team.gitconfig", "[user]\n\tname = Team\n", mode=0o644)
    git(rig.lz, ws, "config", "include.path", "../team.gitconfig")
    marker = rig.lz.home / "PLANTED-include-lock"
    rig.config({"bb": {}})
    s = rig.start("bb", sh(attack_loop("/workspace/team.gitconfig.lock", marker)), ws=ws)
    s.read_until("LOOP-UP", timeout=RUN_TIMEOUT)
    time.sleep(SETTLE_S)
    held = (ws / "team.gitconfig.lock").read_text()
    p = git(rig.lz, ws, "config", "--file", "team.gitconfig", "user.name", "Host", check=False)
    (ws / "STOP").touch()
    r = s.finish(timeout=30)
    assert r.returncode == 0 and "WROTE:0" in r.stdout, (r.stdout[-500:], r.stderr[-2000:])
    assert "a sandbox runs on this repository" in held, held
    assert p.returncode != 0 and "could not lock config file" in p.stderr, p.stderr
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    assert not (ws / "team.gitconfig.lock").exists()
    assert (ws / "team.gitconfig").read_text() == "[user]\n\tname = Team\n"
    assert host_git_problem(rig.lz, [ws], marker) is None


def test_the_end_of_a_nested_domain_leaves_the_outer_domains_holds(rig):
    """Attack round a27b, G4: Domain A on a workspace, Domain B (another
    profile) on a repository nested in it. Each held inner/.git/config.lock
    (B made it, A reused it); when B ended it removed the name — a mount
    point of A's sandbox — and A's guard stopped A. A running Domain whose
    workspace contains this one (or lies in it) now keeps the names."""
    outer = new_repo(rig.lz, "outer")
    inner = new_repo(rig.lz, "outer/inner")
    rig.config({"a": {}, "b": {}})
    a = rig.hold("a", ws=outer)
    b = rig.hold("b", ws=inner)
    assert (inner / ".git" / "config.lock").exists()
    rig.release(b)
    # B's teardown is over when its coordinator is gone; A must run on.
    deadline = time.monotonic() + TEARDOWN_TIMEOUT
    while len(rig.coordinators()) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(rig.coordinators()) == 1, rig.coordinators()
    assert (inner / ".git" / "config.lock").exists(), "B's end released A's hold"
    r = rig.run("a", sh("echo A-ALIVE"), ws=outer)
    assert "A-ALIVE" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert a.proc.poll() is None, "A's session ended"
    rig.release(a)
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    assert not (inner / ".git" / "config.lock").exists()
    assert not (outer / ".git" / "config.lock").exists()
