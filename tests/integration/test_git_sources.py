# SPDX-License-Identifier: Apache-2.0
"""Where the host's Git takes programs from (docs/git.md, "Programs and hooks
named relative to a work tree"; attack round a27b, G5 and G6).

A relative core.hooksPath (husky v8: `.husky`) names a directory in the top
of whichever work tree Git runs in: a linked worktree or a submodule checkout
has its own. Configuration that names a program (a filter, an alias, ...) by
a path inside the work tree runs that file. The sandbox must not be able to
rewrite either. Each test has a control: the same layout and script without
Lazaret, where the host's Git does run what was written.
"""

from pathlib import Path

from conftest import TEARDOWN_TIMEOUT, sh, wait_torn_down
from test_git import git, hook, marker_for, new_repo, put, put_hook, steps

HUSKY = {".husky/pre-commit": "#!/bin/sh\nexit 0\n"}
SCRIPTS = {"tools/clean.sh": "#!/bin/sh\ncat\n", "tools/go.sh": "#!/bin/sh\nexit 0\n",
           "notes.txt": "n\n", ".gitattributes": "*.txt filter=strip\n"}


def _programs(lz, ws):
    """Configuration naming two project scripts: a clean filter (run from the
    work tree's top by `git add`) and an alias whose second word is one."""
    for f in ("tools/clean.sh", "tools/go.sh"):
        (ws / f).chmod(0o755)
    git(lz, ws, "config", "filter.strip.clean", "./tools/clean.sh")
    git(lz, ws, "config", "alias.go", "!sh 'tools/go.sh'")


def _rewrite_programs(markers, top="") -> str:
    return (put("clean", f"{top}tools/clean.sh", f"#!/bin/sh\ntouch {markers['clean']}\ncat\n") +
            put("alias", f"{top}tools/go.sh", hook(markers["alias"])) +
            f"echo changed > {top}notes.txt\n")


def _ran(lz, marker: Path, cwd, *args) -> bool:
    git(lz, cwd, *args, check=False)
    return marker.exists()


# ---- G5b, G5c, G6: a repository with an inner worktree and a submodule --------------

def _layout(lz, name):
    sub_src = new_repo(lz, f"{name}-subsrc", files={"s": "s\n", **HUSKY})
    ws = new_repo(lz, name, files={"README": "hi\n", **HUSKY, **SCRIPTS})
    (ws / ".husky" / "pre-commit").chmod(0o755)
    git(lz, ws, "config", "core.hooksPath", ".husky")
    _programs(lz, ws)
    git(lz, ws, "worktree", "add", "-q", "wt2")
    git(lz, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_src), "sub")
    git(lz, ws, "commit", "-q", "-m", "sub")
    (ws / "sub" / ".husky" / "pre-commit").chmod(0o755)
    git(lz, ws / "sub", "config", "core.hooksPath", ".husky")
    return ws, {k: marker_for(lz, f"{name}-{k}") for k in ("wt2", "sub", "clean", "alias")}


def _attack(markers) -> str:
    return (put_hook("wt2", "wt2/.husky/pre-commit", markers["wt2"]) +
            put_hook("sub", "sub/.husky/pre-commit", markers["sub"]) + _rewrite_programs(markers))


def _host_ran(lz, ws, markers) -> dict:
    return {"wt2": _ran(lz, markers["wt2"], ws / "wt2", "commit", "-q", "--allow-empty", "-m", "p"),
            "sub": _ran(lz, markers["sub"], ws / "sub", "commit", "-q", "--allow-empty", "-m", "p"),
            "clean": _ran(lz, markers["clean"], ws, "add", "notes.txt"),
            "alias": _ran(lz, markers["alias"], ws, "go")}


def test_inner_worktree_submodule_and_programs_are_protected(rig):
    """G5b: a relative hooksPath in a linked worktree inside the workspace;
    G5c: in a submodule's own configuration; G6: a filter and an alias naming
    project scripts. The sandbox cannot rewrite any of them, and the host's
    Git runs nothing it wrote."""
    ws, markers = _layout(rig.lz, "srcs")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_attack(markers)), ws=ws)
    got = steps(p.stdout)
    assert all(got.get(k) == "FAIL" for k in markers), p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not any(_host_ran(rig.lz, ws, markers).values())


def test_control_inner_worktree_submodule_and_programs_run(lz):
    ws, markers = _layout(lz, "srcs")
    p = lz.run_as_user(sh(_attack(markers)), cwd=ws)
    assert all(v == "OK" for v in steps(p.stdout).values()), p.stdout + p.stderr
    assert _host_ran(lz, ws, markers) == {k: True for k in markers}


# ---- G5: the workspace is a linked worktree ----------------------------------------

def _worktree_workspace(lz, name):
    main = new_repo(lz, f"{name}-main", files={"README": "hi\n", **HUSKY, **SCRIPTS})
    (main / ".husky" / "pre-commit").chmod(0o755)
    git(lz, main, "config", "core.hooksPath", ".husky")
    _programs(lz, main)
    wt = lz.home / name
    git(lz, main, "worktree", "add", "-q", str(wt))
    for f in (".husky/pre-commit", "tools/clean.sh", "tools/go.sh"):
        (wt / f).chmod(0o755)  # committed as 0644
    return wt, {k: marker_for(lz, f"{name}-{k}") for k in ("hook", "clean", "alias")}


def _wt_attack(markers) -> str:
    return put_hook("hook", ".husky/pre-commit", markers["hook"]) + _rewrite_programs(markers)


def _wt_host_ran(lz, wt, markers) -> dict:
    return {"hook": _ran(lz, markers["hook"], wt, "commit", "-q", "--allow-empty", "-m", "p"),
            "clean": _ran(lz, markers["clean"], wt, "add", "notes.txt"),
            "alias": _ran(lz, markers["alias"], wt, "go")}


def test_linked_worktree_workspace_is_protected(rig):
    """G5: the agent's workspace is a linked worktree (one per agent): its
    relative hooksPath and the programs its configuration names are asked of
    the host's Git through the protected `.git` file, and protected."""
    wt, markers = _worktree_workspace(rig.lz, "wtws")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_wt_attack(markers)), ws=wt)
    got = steps(p.stdout)
    assert all(got.get(k) == "FAIL" for k in markers), p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not any(_wt_host_ran(rig.lz, wt, markers).values())


def test_control_linked_worktree_workspace_runs(lz):
    wt, markers = _worktree_workspace(lz, "wtws")
    p = lz.run_as_user(sh(_wt_attack(markers)), cwd=wt)
    assert all(v == "OK" for v in steps(p.stdout).values()), p.stdout + p.stderr
    assert _wt_host_ran(lz, wt, markers) == {k: True for k in markers}
