# SPDX-License-Identifier: Apache-2.0
"""The Git Sentry under load (issue 23; docs/git.md "An audit the sandbox
cannot outpace", docs/escalation.md "What the sandbox can change while a
host command runs").

Attack round i23 held the audit behind for seconds with a rename storm: each
directory rename made the old audit walk the whole tree, the walk never
caught up, and a nested repository the sandbox kept re-making
(src/.git/config with core.fsmonitor) was there for the developer's own
`git status` in src/ — which ran the sandbox's program. The same storm let
an auto-approved host `git status` recurse into a submodule whose `.git`
file pointed at a repository the sandbox built in its persistent state,
and run that repository's clean filter as the developer.

Each attack test has its control: the same script and the same host Git
without Lazaret's defence runs the planted program.
"""

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RUN_TIMEOUT, sh, wait_torn_down, TEARDOWN_TIMEOUT
from test_escalation import Host, esc_profile
from test_git import fsmonitor_config, git, host_identity, new_repo

STORM_DIRS = (60, 50)      # 3,000 directories under big/
SAMPLE_SECONDS = 3.0       # how long the host samples (5 s until make check neared 30 min)


def storm_repo(lz) -> Path:
    """A repository with src/ and a tree of 3,000 directories, big/."""
    ws = new_repo(lz, "ws", {"src/main.c": "int main(void) { return 0; }\n"})
    dirs = [f"big/d{i}/e{j}" for i in range(STORM_DIRS[0]) for j in range(STORM_DIRS[1])]
    p = lz.run_as_user(["mkdir", "-p", *dirs], cwd=ws)
    assert p.returncode == 0, p.stderr
    return ws


def storm_script(marker: Path) -> str:
    """Rename big/ (and one of its subtrees) back and forth without pause,
    and re-make src/.git — a repository whose config runs the marker — as
    soon as it is gone; until the host creates STOP."""
    cfg = fsmonitor_config(marker)
    return ("( while [ ! -e STOP ]; do mv big big.r; mv big.r big; done ) 2>/dev/null &\n"
            "( while [ ! -e STOP ]; do mv big/d7 big/d7.r; mv big/d7.r big/d7; done ) "
            "2>/dev/null &\n"
            "echo STORM-UP\n"
            "while [ ! -e STOP ]; do\n"
            "  if [ ! -e src/.git/config ]; then\n"
            "    mkdir -p src/.git/objects src/.git/refs/heads\n"
            "    echo 'ref: refs/heads/main' > src/.git/HEAD\n"
            f"    cat > src/.git/config <<'LZEOF'\n{cfg}LZEOF\n"
            "  fi\n"
            "done 2>/dev/null\n"
            "wait\n"
            "echo STORM-DONE\n")


def sample_host_git(lz, ws: Path, marker: Path, seconds: float) -> dict:
    """The developer's plain `git status` in src/, again and again, and a
    busy lstat of src/.git/config in between: how often it ran, how often
    the sandbox's config was there, and whether the marker appeared."""
    runs = present = looks = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not marker.exists():
        git(lz, ws / "src", "status", "--porcelain", check=False)
        runs += 1
        for _ in range(50):
            looks += 1
            present += os.path.lexists(ws / "src" / ".git" / "config")
    return {"git_runs": runs, "config_seen": present, "looks": looks,
            "ran": marker.exists()}


def test_control_rename_storm_repository_is_obeyed_without_the_sentry(lz):
    """Control: the storm script run on the host itself (no sandbox, no
    audit): the developer's `git status` in src/ runs the planted program."""
    ws = storm_repo(lz)
    marker = lz.home / "PLANTED-storm-control"
    proc = subprocess.Popen(sh(storm_script(marker)), cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=lz.env(None),
                            user=lz.user.uid, group=lz.user.gid)
    try:
        assert proc.stdout.readline().strip() == b"STORM-UP"
        got = sample_host_git(lz, ws, marker, SAMPLE_SECONDS)
    finally:
        (ws / "STOP").touch()
        proc.communicate(timeout=30)
    assert got["ran"], f"the control did not run the planted program: {got}"


def test_rename_storm_cannot_hold_the_audit_behind(rig):
    """Attack round i23, A1: a rename storm over 3,000 directories while the
    sandbox re-makes src/.git with core.fsmonitor. The developer's own
    `git status` in src/, sampled for three seconds, never runs the planted
    program; the sessions are told about the quarantines."""
    ws = storm_repo(rig.lz)
    marker = rig.lz.home / "PLANTED-storm"
    rig.config({"bb": {}})
    s = rig.start("bb", sh(storm_script(marker)), ws=ws)
    s.read_until("STORM-UP", timeout=RUN_TIMEOUT)
    try:
        got = sample_host_git(rig.lz, ws, marker, SAMPLE_SECONDS)
    finally:
        (ws / "STOP").touch()
    r = s.finish()
    print(f"host sampling during the storm: {got}")
    assert not got["ran"] and not marker.exists(), \
        f"the developer's git status ran the sandbox's program: {got}\n{r.stderr[-3000:]}"
    assert "STORM-DONE" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert "quarantined: src/.git" in r.stderr, r.stderr[-2000:]
    # The storm really ran against the audit: renames were followed.
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    log = "\n".join(p.read_text(errors="replace")
                    for p in rig.lz.root.rglob("logs/coordinator.log"))
    assert "renames followed" in log, log[-2000:]
    assert not (ws / "src" / ".git").exists()


# ---- the submodule gitfile into persistent state, with an approved host git ------

def evil_state_repo_script(marker: Path) -> str:
    """Inside the sandbox: a repository in the persistent directory
    /opt/state whose clean filter runs the marker, and a submodule `sub`
    of the workspace registered for it (.gitmodules and a gitlink), with a
    file the filter applies to. READY once built."""
    g = "git -c user.name=S -c user.email=s@lazaret.invalid -c init.defaultBranch=main"
    return ("set -e\n"
            "mkdir -p /opt/state/wt && cd /opt/state/wt\n"
            f"{g} init -q . && echo one > f && {g} add f && {g} commit -q -m one\n"
            "mv .git /opt/state/evil.git\n"
            "git --git-dir=/opt/state/evil.git config core.bare false\n"
            f"git --git-dir=/opt/state/evil.git config filter.x.clean "
            f"\"sh -c 'touch {marker}; cat'\"\n"
            "cd /workspace\n"
            "sha=$(git --git-dir=/opt/state/evil.git rev-parse HEAD)\n"
            "printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules\n"
            f"{g} update-index --add --cacheinfo 160000,$sha,sub\n"
            "mkdir -p sub && echo two > sub/f && echo 'f filter=x' > sub/.gitattributes\n"
            "set +e\n"
            "echo READY\n")


ESCALATION_GIT_ENV = {  # what docs/escalation.md says a host command gets
    "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb",
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "safe.bareRepository", "GIT_CONFIG_VALUE_0": "explicit",
    "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false",
}


def test_control_submodule_gitfile_into_state_runs_its_filter(lz):
    """Control: the same layout on the host, without a sandbox (the
    repository in a directory outside the workspace), and the host `git
    status` with exactly the environment an escalated command gets: Git
    recurses into the submodule and runs the filter as the developer."""
    host_identity(lz)
    ws = new_repo(lz, "ws")
    state = lz.mkdir("state")
    marker = lz.home / "PLANTED-submodule-control"
    script = evil_state_repo_script(marker).replace("/opt/state", str(state)) \
                                            .replace("/workspace", str(ws))
    p = lz.run_as_user(sh(script), cwd=ws)
    assert "READY" in p.stdout, (p.stdout, p.stderr)
    (ws / "sub" / ".git").write_text(f"gitdir: {state}/evil.git\n")
    env = dict(ESCALATION_GIT_ENV, HOME=str(lz.home), GIT_DIR=f"{ws}/.git",
               GIT_WORK_TREE=str(ws))
    subprocess.run(["git", "status"], cwd=ws, env=env, user=lz.user.uid, group=lz.user.gid,
                   capture_output=True, timeout=60)
    assert marker.exists(), "control: the escalation's host git should run the filter"


@pytest.mark.parametrize("argv", [["/usr/bin/git", "status"],
                                  ["/usr/bin/env", "git", "status"]],
                         ids=["git", "env-git"])
def test_submodule_gitfile_into_state_is_never_obeyed_by_an_approved_git_status(rig, argv):
    """Attack round i23, A2 (and i23b, A1b: the same through `/usr/bin/env
    git status`): with an auto-approval rule for `/usr/bin/git
    status`, the sandbox builds a repository with a clean filter in its
    persistent state, registers a submodule for it, and during a rename
    storm keeps re-making sub/.git (`gitdir:` that repository's host path)
    while asking for the host `git status` again and again. The host Git
    never runs the filter: each git status runs with the audit current and
    the sandbox frozen (docs/escalation.md)."""
    lz = rig.lz
    ws = storm_repo(lz)
    marker = lz.home / "PLANTED-submodule"
    rig.config({"p": esc_profile([{"executable": argv[0], "args": argv[1:]}],
                                 persistent_dirs=["/opt/state"])})
    attack = (evil_state_repo_script(marker) +
              "while [ ! -s .target ]; do sleep 0.05; done\n"
              "T=$(cat .target)\n"
              "( while [ ! -e STOP ]; do mv big big.r; mv big.r big; done ) 2>/dev/null &\n"
              "( while [ ! -e STOP ]; do [ -e sub/.git ] || echo \"gitdir: $T\" > sub/.git; "
              "done ) 2>/dev/null &\n"
              "n=0; ok=0\n"
              "while [ $n -lt 15 ]; do\n"
              f"  lazaret-escalate -- {' '.join(argv)} >/dev/null 2>&1 && ok=$((ok+1))\n"
              "  n=$((n+1))\n"
              "done\n"
              "touch STOP; wait\n"
              "echo \"ESCALATED $ok/$n\"\n")
    s = rig.start("p", sh(attack), ws=ws)
    s.read_until("READY", timeout=RUN_TIMEOUT)
    # The attacker knows the host path of its state (docs/git.md: Lazaret
    # does not rely on hiding it).
    found = [Path(d) for d, subdirs, _ in os.walk(lz.home / ".local" / "share" / "lazaret")
             if Path(d).name == "evil.git"]
    assert len(found) == 1, found
    (ws / ".target").write_text(f"{found[0]}\n")
    r = s.finish(timeout=240)
    print(r.stdout)
    assert not marker.exists(), \
        f"the approved host git status ran the sandbox's filter\n{r.stdout}{r.stderr[-3000:]}"
    # Every request ran (a host git may fail when sub/.git is set aside
    # under it: only that it ran, and what it ran, count).
    assert "/15" in r.stdout and r.returncode == 0, (r.stdout, r.stderr[-3000:])
    assert "quarantined: sub/.git" in r.stderr, r.stderr[-3000:]


def test_gitfile_into_domain_state_is_set_aside_at_start(rig):
    """A `.git` file in the workspace that points into the Domain's own
    state (left by a generation whose audit missed it, say) is set aside
    before the next sandbox starts, and the session is told; the
    developer's git status in that directory then obeys nothing of the
    sandbox's. Control: before that start, the same git status runs the
    state repository's filter."""
    lz = rig.lz
    ws = new_repo(lz, "ws")
    marker = lz.home / "PLANTED-start"
    rig.config({"p": {"persistent_dirs": ["/opt/state"]}})
    r = rig.run("p", sh(evil_state_repo_script(marker)), ws=ws)
    assert "READY" in r.stdout, (r.stdout, r.stderr)
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    found = [Path(d) for d, subdirs, _ in os.walk(lz.home / ".local" / "share" / "lazaret")
             if Path(d).name == "evil.git"]
    assert len(found) == 1, found
    # The leftover, as the developer's own file would be.
    lz.write(ws / "sub" / ".git", f"gitdir: {found[0]}\n", mode=0o644)
    git(lz, ws / "sub", "status", check=False)
    assert marker.exists(), "control: git status in sub/ should run the state's filter"
    marker.unlink()
    r = rig.run("p", ["true"], ws=ws)
    assert r.returncode == 0, r.stderr
    log = "\n".join(p.read_text(errors="replace") for p in lz.root.rglob("logs/coordinator.log"))
    assert "Git Sentry (start): sub/.git" in log, log[-3000:]
    assert not (ws / "sub" / ".git").exists()
    git(lz, ws / "sub", "status", check=False)
    assert not marker.exists()


def observe_presence(path: Path, seconds: float) -> list:
    """Every interval (ms) during which path exists, busy-polled."""
    windows = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.lexists(path):
            t0 = time.perf_counter_ns()
            while os.path.lexists(path) and time.monotonic() < deadline + 5:
                pass
            windows.append((time.perf_counter_ns() - t0) / 1e6)
    return windows


def test_mode_changes_cannot_hold_a_gitfile_on_the_host(rig):
    """Attack round i23b, A2: before each rename of a prepared `.git` file
    into src/ (`gitdir:` a repository in the Domain's persistent directory,
    with core.fsmonitor), the sandbox changes the mode of big/ (3,000
    directories) four times. Each change once cost a walk of big/ in queue
    order, and the `.git` stayed on the host for seconds (the developer's
    `git status` in src/ ran the program 40 times in round i23b). A `.git`
    file is whole the instant it is renamed in, so what Lazaret controls is
    how long and how often it can be there (docs/git.md "The window"):
    observed from the host by a busy lstat for 3 s, no interval may exceed
    100 ms (it was seconds) and all of them together not 5 % of the time
    (measured here: 88 appearances, the longest 3 ms, 0.7 % in all — a
    developer's git status started in one of them still obeys it: the
    residual race docs/git.md "What remains" states)."""
    lz = rig.lz
    ws = storm_repo(lz)
    marker = lz.home / "PLANTED-chmod"
    rig.config({"p": {"persistent_dirs": ["/opt/state"]}})
    attack = (evil_state_repo_script(marker) +
              f"git --git-dir=/opt/state/evil.git config core.fsmonitor "
              f"\"sh -c 'touch {marker}' x\"\n"
              "while [ ! -s .target ]; do sleep 0.05; done\n"
              "T=$(cat .target)\n"
              "echo HOLDING\n"
              "while [ ! -e STOP ]; do\n"
              "  if [ ! -e src/.git ]; then\n"
              "    echo \"gitdir: $T\" > src/.git.t\n"
              "    chmod 755 big; chmod 755 big; chmod 755 big; chmod 755 big\n"
              "    mv src/.git.t src/.git\n"
              "  fi\n"
              "done 2>/dev/null\n"
              "echo HELD-DONE\n")
    s = rig.start("p", sh(attack), ws=ws)
    s.read_until("READY", timeout=RUN_TIMEOUT)
    found = [Path(d) for d, subdirs, _ in os.walk(lz.home / ".local" / "share" / "lazaret")
             if Path(d).name == "evil.git"]
    assert len(found) == 1, found
    (ws / ".target").write_text(f"{found[0]}\n")
    s.read_until("HOLDING", timeout=RUN_TIMEOUT)
    try:
        windows = observe_presence(ws / "src" / ".git", SAMPLE_SECONDS)
    finally:
        (ws / "STOP").touch()
    r = s.finish()
    total = sum(windows)
    print(f"src/.git on the host {len(windows)} times, longest "
          f"{max(windows, default=0):.2f} ms, in all {total:.1f} ms of "
          f"{SAMPLE_SECONDS * 1000:.0f} ms")
    assert "HELD-DONE" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert windows, "the attack never put src/.git on the host (it would prove nothing)"
    assert max(windows) <= 100, (windows, r.stderr[-2000:])
    assert total <= SAMPLE_SECONDS * 1000 * 0.05, (total, windows)


# ---- a tree the developer cannot look into, opened at once (round i23c) ----------

CLOSED_REPOS = 60          # nested repositories in the closed tree
CLOSED_DIRS_PER_REPO = 50  # and 3,000 directories beside them
CLOSED_SAMPLE_SECONDS = 2.0


def closed_tree_script(marker: Path, how: str) -> str:
    """As root in the image: src/h owned by another user (1000), mode
    0700 — closed to the developer on the host — and in it t/: 60
    directories, each a nested repository whose config runs the marker
    (core.fsmonitor) beside 50 more directories. BUILT, then on GO it opens
    all of it at once: `chmod 755 src/h` ("chmod") or a rename of t out of
    src/h to src/t ("rename"). Relative paths: the control runs it on the
    host."""
    op = "chmod 755 src/h" if how == "chmod" else "mv src/h/t src/t"
    return ("mkdir -p src/h && chown 1000:1000 src/h && chmod 700 src/h || exit 9\n"
            f"cat > .cfg <<'LZEOF'\n{fsmonitor_config(marker)}LZEOF\n"
            f"for i in $(seq 1 {CLOSED_REPOS}); do\n"
            "  d=src/h/t/d$i\n"
            "  mkdir -p $d/.git/objects $d/.git/refs/heads\n"
            "  echo 'ref: refs/heads/main' > $d/.git/HEAD\n"
            "  cp .cfg $d/.git/config\n"
            f"  (cd $d && mkdir $(for j in $(seq 1 {CLOSED_DIRS_PER_REPO}); do echo e$j; done))\n"
            "done 2>/dev/null\n"
            "echo BUILT\n"
            "while [ ! -e GO ]; do sleep 0.02; done\n"
            f"{op}\n"
            "echo OPENED\n"
            "while [ ! -e STOP ]; do sleep 0.05; done\n")


# Run as the developer: from GO on, look again and again for every nested
# repository's config under TOP and run `git status` in one directory after
# another: what the developer can reach, and whether Git obeyed it.
CLOSED_POLLER = r"""
import json, os, subprocess, sys, time
top, marker, n, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
configs = [f"{top}/d{i}/.git/config" for i in range(1, n + 1)]
seen, looks, runs, k = set(), 0, 0, 0
open(sys.argv[5], "w").close()  # GO
deadline = time.monotonic() + seconds
while time.monotonic() < deadline and not os.path.exists(marker):
    for i, c in enumerate(configs):
        looks += 1
        if os.path.lexists(c):
            seen.add(i + 1)
    k = k % n + 1
    try:
        subprocess.run(["git", "status", "--porcelain"], cwd=f"{top}/d{k}",
                       capture_output=True, timeout=30)
        runs += 1
    except OSError:
        pass  # not open yet
for i, c in enumerate(configs):
    if os.path.lexists(c):
        seen.add(i + 1)
print(json.dumps({"seen": sorted(seen), "looks": looks, "git_runs": runs,
                  "ran": os.path.exists(marker)}))
"""


def poll_opened(lz, ws: Path, how: str, marker: Path) -> dict:
    import json
    top = ws / "src" / ("h/t" if how == "chmod" else "t")
    p = lz.run_as_user(["python3", "-c", CLOSED_POLLER, str(top), str(marker),
                        str(CLOSED_REPOS), str(CLOSED_SAMPLE_SECONDS), str(ws / "GO")],
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("how", ["chmod", "rename"])
def test_control_closed_tree_opened_at_once_is_obeyed_without_the_sentry(lz, how):
    """Control: the script on the host as root of a user namespace that
    maps the developer's subordinate ids (as the sandbox's gofer does), no
    audit: once the tree opens, the developer reaches the nested
    repositories and their `git status` runs the planted program."""
    ws = new_repo(lz, "ws", {"src/main.c": "int main(void) { return 0; }\n"})
    marker = lz.home / f"PLANTED-closed-control-{how}"
    proc = subprocess.Popen(["unshare", "--map-root-user", "--map-auto", "sh", "-c",
                             closed_tree_script(marker, how)],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=lz.env(None), user=lz.user.uid, group=lz.user.gid)
    try:
        assert proc.stdout.readline().strip() == b"BUILT", proc.stderr.read()
        got = poll_opened(lz, ws, how, marker)
    finally:
        (ws / "STOP").touch()
        proc.communicate(timeout=30)
    print(got)
    assert got["seen"] and got["ran"], f"the control did not reach the repositories: {got}"


@pytest.mark.parametrize("how", ["chmod", "rename"])
def test_closed_tree_opened_at_once_reveals_nothing_unaudited(rig, how):
    """Attack round i23c: a directory of another sandbox user, closed to
    the developer (0700), filled with 3,000 directories and 60 nested
    repositories whose config runs a program, then opened at once (chmod,
    or a rename out of it). The audit watched it through its eye while it
    was closed (docs/git.md "Directories closed to the developer"): from
    the moment it opens, the developer reaches none of the repositories and
    their `git status` never runs the program; the sessions were told."""
    lz = rig.lz
    ws = new_repo(lz, "ws", {"src/main.c": "int main(void) { return 0; }\n"})
    marker = lz.home / f"PLANTED-closed-{how}"
    rig.config({"p": {}})
    s = rig.start("p", sh(closed_tree_script(marker, how)), ws=ws)
    s.read_until("BUILT", timeout=RUN_TIMEOUT)
    try:
        got = poll_opened(lz, ws, how, marker)
        s.read_until("OPENED", timeout=RUN_TIMEOUT)
    finally:
        (ws / "STOP").touch()
    r = s.finish()
    print(f"the developer after the opening: {got}")
    assert not got["ran"] and not marker.exists(), \
        f"the developer's git status ran the sandbox's program: {got}\n{r.stderr[-3000:]}"
    assert got["seen"] == [], (got, r.stderr[-3000:])
    assert got["git_runs"] > 0, got  # the tree was open to the developer
    assert "quarantined: src/h/t/d" in r.stderr, r.stderr[-3000:]


# ---- born closed: a repository in a directory another sandbox user made 0700 ------

def born_closed_script(marker: Path) -> str:
    """Sandbox user 1000 (umask 077) makes d/q — closed to the developer
    from its first instant — and a repository in it whose config runs the
    marker (core.fsmonitor). The directory the audit cannot open as the
    developer was once skipped (and given back, open, at teardown), then
    made the audit fail (attack round i23d, F1). AFTER once done."""
    return ("tmp=$(mktemp -d); mkdir -p $tmp/.git/objects $tmp/.git/refs/heads\n"
            "echo 'ref: refs/heads/main' > $tmp/.git/HEAD\n"
            f"cat > $tmp/.git/config <<'LZEOF'\n{fsmonitor_config(marker)}LZEOF\n"
            "chmod -R a+rX $tmp\n"
            "echo 'u:x:1000:1000::/:/bin/sh' >> /etc/passwd\n"
            "mkdir d && chown 1000:1000 d || exit 9\n"
            "su u -c \"umask 077; mkdir -p d/q && cp -R $tmp/.git d/q/.git\" 2>/dev/null\n"
            "sleep 1; touch AFTER\n")


def test_control_born_closed_repository_is_obeyed_once_given_back(lz):
    """Control: the layout the sandbox makes, given back to the developer
    (what the ownership give-back does at teardown) with nobody setting
    the repository aside: the developer's git status in d/q runs the
    program."""
    ws = new_repo(lz, "ws", {"src/main.c": "int main(void) { return 0; }\n"})
    marker = lz.home / "PLANTED-born-closed-control"
    q = ws / "d" / "q" / ".git"
    for sub in ("objects", "refs/heads"):
        (q / sub).mkdir(parents=True)
    (q / "HEAD").write_text("ref: refs/heads/main\n")
    (q / "config").write_text(fsmonitor_config(marker))
    subprocess.run(["chown", "-R", f"{lz.user.uid}:{lz.user.gid}", str(ws / "d")], check=True)
    git(lz, ws / "d" / "q", "status", check=False)
    assert marker.exists(), "control: git status in d/q should run the planted program"


def test_born_closed_repository_is_set_aside(rig):
    """Attack round i23d, F1: a repository made inside a directory that is
    closed to the developer from its first instant (another sandbox user's,
    umask 077). The audit looks in through its eye and sets it aside at
    once; the session goes on; after the Domain ends (and its ownership
    give-back opens d/q to the developer) the developer's git status there
    runs nothing."""
    lz = rig.lz
    ws = new_repo(lz, "ws", {"src/main.c": "int main(void) { return 0; }\n"})
    marker = lz.home / "PLANTED-born-closed"
    rig.config({"p": {}})
    r = rig.run("p", sh(born_closed_script(marker)), ws=ws)
    assert r.returncode == 0 and (ws / "AFTER").exists(), (r.returncode, r.stderr[-3000:])
    assert "quarantined: d/q/.git" in r.stderr, r.stderr[-3000:]
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    assert not (ws / "d" / "q" / ".git").exists()
    git(lz, ws / "d" / "q", "status", check=False)
    assert not marker.exists(), "the developer's git status ran the sandbox's program"


# ---- the watch bound reached by an ordinary action (round i23e, H) ----------------

WATCH_BOUND = 50000  # src/gitsentry/internal.h MAX_TREE_DIRS


def test_outgrowing_the_watch_bound_stops_without_marking_the_domain_unsafe(rig):
    """Attack round i23e, H: more directories than the audit can watch,
    made by an ordinary action (an unpacked tree, a node_modules/ not yet
    ignored), once stopped the Domain *and* recorded it unsafe, refusing the
    next start with a warning of an attack. Now the sandbox stops with a
    resource message; the final audit, with no sandbox left, walks the
    whole tree without watches — a repository the sandbox made in the part
    past the bound is still set aside — and once the tree is ignored the
    Domain starts again."""
    lz = rig.lz
    ws = new_repo(lz, "ws", {"src/main.c": "int main(void) { return 0; }\n"})
    marker = lz.home / "PLANTED-bound"
    # 49,950 directories from the host (fast), the rest from the sandbox.
    t0 = time.monotonic()
    dirs = [f"nm/p{i}/{j}" for i in range(333) for j in range(149)]
    for k in range(0, len(dirs), 5000):
        p = lz.run_as_user(["mkdir", "-p", *dirs[k:k + 5000]], cwd=ws)
        assert p.returncode == 0, p.stderr
    timings = {"host mkdir": time.monotonic() - t0}
    rig.config({"p": {}})
    script = ("mkdir -p nm/new/r/.git/objects nm/new/r/.git/refs/heads\n"
              "echo 'ref: refs/heads/main' > nm/new/r/.git/HEAD\n"
              f"cat > nm/new/r/.git/config <<'LZEOF'\n{fsmonitor_config(marker)}LZEOF\n"
              "mkdir $(for i in $(seq 1 400); do echo nm/new/d$i; done)\n"
              "sleep 5; touch AFTER\n")
    try:
        t0 = time.monotonic()
        r = rig.run("p", sh(script), ws=ws, timeout=240)
        timings["run"] = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        log = "\n".join(p.read_text(errors="replace")
                        for p in lz.root.rglob("logs/coordinator.log"))
        pytest.fail(f"timed out; coordinator log:\n{log[-4000:]}")
    assert r.returncode != 0 and not (ws / "AFTER").exists(), (r.returncode, r.stderr[-2000:])
    assert f"more than {WATCH_BOUND} directories" in r.stderr, r.stderr[-2000:]
    assert "could not neutralise" not in r.stderr and "Lazaret will not start" not in r.stderr, \
        r.stderr[-2000:]
    t0 = time.monotonic()
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    timings["teardown"] = time.monotonic() - t0
    assert not left, left
    assert not (ws / "nm" / "new" / "r" / ".git").exists()
    git(lz, ws / "nm" / "new" / "r", "status", check=False)
    assert not marker.exists()
    # No unsafe record: the next start is refused for the size only (docs/git.md).
    assert not list(lz.root.rglob("git-sentry-unsafe")), "the Domain was recorded unsafe"
    print(f"timings: {timings}")
