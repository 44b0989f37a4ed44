# SPDX-License-Identifier: Apache-2.0
"""Where the host's Git takes programs from (docs/git.md, "Programs and hooks
named relative to a work tree", "A workspace inside a repository", "Hook
managers"; attack round a27b, G2, G3, G5 and G6).

A relative core.hooksPath (husky v8: `.husky`) names a directory in the top
of whichever work tree Git runs in: a linked worktree or a submodule checkout
has its own. Configuration that names a program (a filter, an alias, ...) by
a path inside the work tree runs that file. The sandbox must not be able to
rewrite either. Each test has a control: the same layout and script without
Lazaret, where the host's Git does run what was written.
"""

from pathlib import Path

from conftest import TEARDOWN_TIMEOUT, sh, wait_torn_down
from test_git import git, hook, marker_for, new_repo, planted, put, put_hook, steps

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


# ---- G2, G3: a workspace below a repository's top; husky v9 --------------------------

# husky v9's generated part (.husky/_, git-ignored by its own .gitignore):
# the dispatcher `h`, trimmed to what decides what runs, and a stub per hook.
# core.hooksPath = .husky/_; the stub runs h, h runs the tracked .husky/<hook>.
HUSKY9_H = ('#!/usr/bin/env sh\nn=$(basename "$0")\ns=$(dirname "$(dirname "$0")")/$n\n'
            '[ ! -f "$s" ] && exit 0\n[ "${HUSKY-}" = "0" ] && exit 0\nsh -e "$s" "$@"\n')
HUSKY9_STUB = '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n'


def _husky9(lz, pkg: Path):
    """husky v9 installed in the package directory pkg (what `husky` writes)."""
    lz.write(pkg / ".husky" / "_" / ".gitignore", "*\n", mode=0o644)
    lz.write(pkg / ".husky" / "_" / "h", HUSKY9_H, mode=0o755)
    lz.write(pkg / ".husky" / "_" / "pre-commit", HUSKY9_STUB, mode=0o755)


def _monorepo(lz, name):
    """mono/ with the package pkgs/app/: husky v9 there (core.hooksPath =
    pkgs/app/.husky/_, as husky sets it for a package below the Git root),
    an include of pkgs/app/git.inc and a clean filter
    ./pkgs/app/tools/clean.sh, all in mono's .git/config, which lies outside
    the workspace pkgs/app/. Returns mono, the workspace and the markers."""
    files = {"app/.husky/pre-commit": "exit 0\n", "app/git.inc": "[user]\n\tname = Mono\n",
             "app/tools/clean.sh": "#!/bin/sh\ncat\n", "app/notes.txt": "n\n",
             "app/.gitattributes": "*.txt filter=strip\n"}
    ws = new_repo(lz, name, files={"README": "hi\n", **{f"pkgs/{k}": v for k, v in files.items()}})
    app = ws / "pkgs" / "app"
    (app / "tools" / "clean.sh").chmod(0o755)
    _husky9(lz, app)
    git(lz, ws, "config", "core.hooksPath", "pkgs/app/.husky/_")
    git(lz, ws, "config", "include.path", "../pkgs/app/git.inc")
    git(lz, ws, "config", "filter.strip.clean", "./pkgs/app/tools/clean.sh")
    return ws, app, {k: marker_for(lz, f"{name}-{k}") for k in ("stub", "hook", "include", "clean")}


def _mono_attack(markers) -> str:
    """Run in pkgs/app/ (the sandbox's /workspace): rewrite every file there
    that mono's configuration names; and, the control inside the same run,
    write a file of app/ that nothing names."""
    return (put("stub", ".husky/_/pre-commit", f"#!/usr/bin/env sh\ntouch {markers['stub']}\n" +
                HUSKY9_STUB.split("\n", 1)[1]) +
            put("hook", ".husky/pre-commit", f"touch {markers['hook']}\n") +
            put("include", "git.inc", f"[core]\n\tfsmonitor = {planted(markers['include'])}\n") +
            put("clean", "tools/clean.sh", f"#!/bin/sh\ntouch {markers['clean']}\ncat\n") +
            put("free", "tools/free.sh", "#!/bin/sh\necho written-by-sandbox\n") +
            "echo changed > notes.txt\n")


def _mono_host_ran(lz, app, markers) -> dict:
    """The developer's Git in app/ on the host afterwards."""
    ran = {"include": _ran(lz, markers["include"], app, "status")}
    git(lz, app, "add", "notes.txt", check=False)
    ran["clean"] = markers["clean"].exists()
    git(lz, app, "commit", "-q", "--allow-empty", "-m", "p", check=False)
    ran["stub"], ran["hook"] = markers["stub"].exists(), markers["hook"].exists()
    return ran


def test_subdir_workspace_enclosing_config_is_protected(rig):
    """G2: --workspace pkgs/app below the monorepo's top mono/. mono's
    configuration (outside the sandbox) names, inside app/, its hooks path,
    an included file and a filter program; G3: husky v9's hooks path
    .husky/_ runs the tracked .husky/pre-commit. The sandbox can rewrite
    none of them; the host's Git in app/ runs nothing it wrote. Control in
    the same run: a file nothing names is written and reaches the host."""
    _, app, markers = _monorepo(rig.lz, "mono")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_mono_attack(markers)), ws=app)
    got = steps(p.stdout)
    assert {k: got.get(k) for k in markers} == {k: "FAIL" for k in markers}, p.stdout + p.stderr
    assert got.get("free") == "OK", p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert "written-by-sandbox" in (app / "tools" / "free.sh").read_text()
    assert _mono_host_ran(rig.lz, app, markers) == {k: False for k in markers}


def test_control_subdir_workspace_enclosing_config_runs(lz):
    _, app, markers = _monorepo(lz, "mono")
    p = lz.run_as_user(sh(_mono_attack(markers)), cwd=app)
    assert all(v == "OK" for v in steps(p.stdout).values()), p.stdout + p.stderr
    assert _mono_host_ran(lz, app, markers) == {k: True for k in markers}


# ---- G2, nested: the workspace inside a submodule checkout of a superproject ---------

def _superproject(lz, name):
    """super/ with the submodule checkout sub/ (a `.git` file; its Git
    directory super/.git/modules/sub), whose configuration has hooks path
    app/.husky (husky v8); super's own an alias running sub/app/go.sh. The
    workspace is super/sub/app: both repositories enclose it."""
    src = new_repo(lz, f"{name}-subsrc", files={"app/.husky/pre-commit": "#!/bin/sh\nexit 0\n",
                                                "app/go.sh": "#!/bin/sh\nexit 0\n"})
    ws = new_repo(lz, name)
    git(lz, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "sub")
    git(lz, ws, "commit", "-q", "-m", "sub")
    for f in ("app/.husky/pre-commit", "app/go.sh"):
        (ws / "sub" / f).chmod(0o755)
    git(lz, ws / "sub", "config", "core.hooksPath", "app/.husky")
    git(lz, ws, "config", "alias.go", "!sub/app/go.sh")
    return ws, {k: marker_for(lz, f"{name}-{k}") for k in ("hook", "alias")}


def _super_attack(markers) -> str:
    return (put_hook("hook", ".husky/pre-commit", markers["hook"]) +
            put_hook("alias", "go.sh", markers["alias"]) +
            put("free", "free.sh", "#!/bin/sh\necho written-by-sandbox\n"))


def _super_host_ran(lz, ws, markers) -> dict:
    return {"hook": _ran(lz, markers["hook"], ws / "sub" / "app", "commit", "-q", "--allow-empty",
                         "-m", "p"),
            "alias": _ran(lz, markers["alias"], ws, "go")}


def test_workspace_inside_submodule_checkout_is_protected(rig):
    """The chain of enclosing repositories: the submodule's configuration
    (hooks path) and the superproject's (an alias) both name files in the
    workspace super/sub/app."""
    ws, markers = _superproject(rig.lz, "super")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_super_attack(markers)), ws=ws / "sub" / "app")
    got = steps(p.stdout)
    assert {k: got.get(k) for k in markers} == {k: "FAIL" for k in markers}, p.stdout + p.stderr
    assert got.get("free") == "OK", p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert "written-by-sandbox" in (ws / "sub" / "app" / "free.sh").read_text()
    assert _super_host_ran(rig.lz, ws, markers) == {k: False for k in markers}


def test_control_workspace_inside_submodule_checkout_runs(lz):
    ws, markers = _superproject(lz, "super")
    p = lz.run_as_user(sh(_super_attack(markers)), cwd=ws / "sub" / "app")
    assert all(v == "OK" for v in steps(p.stdout).values()), p.stdout + p.stderr
    assert _super_host_ran(lz, ws, markers) == {k: True for k in markers}


def test_unreadable_enclosing_repository_refuses_the_start(rig):
    """What an enclosing repository's configuration names cannot be told
    when the host's Git cannot read it: the start is refused, saying which
    and what to do, before the sandbox runs anything. Control: the same
    workspace once the configuration is repaired starts and runs."""
    ws, app, _ = _monorepo(rig.lz, "mono")
    marker = app / "RAN"
    cfg = ws / ".git" / "config"
    good = cfg.read_text()
    rig.lz.write(cfg, good + "[core\n", mode=0o644)
    rig.config({"bb": {}})
    p = rig.run("bb", ["touch", "RAN"], ws=app)
    assert p.returncode != 0 and not marker.exists(), p.stdout + p.stderr
    assert "Git repository that encloses the workspace" in p.stderr, p.stderr
    assert "bad config line" in p.stderr and "fix: " in p.stderr, p.stderr
    rig.lz.write(cfg, good, mode=0o644)
    p = rig.run("bb", ["touch", "RAN"], ws=app)
    assert p.returncode == 0 and marker.exists(), p.stdout + p.stderr


def test_unreadable_configuration_of_the_workspace_refuses_the_start(rig):
    """The workspace's own repository includes a file of its work tree that
    the host's Git cannot parse: what the configuration names cannot be
    told, and the sandbox could mend the included file into one the host's
    Git obeys. The start is refused before the sandbox runs anything.
    Control: once the file is repaired the same start runs, and the
    included file is then protected (the sandbox cannot rewrite it).
    Without git-ignored isolation, whose listing fails on the same file
    first, the start is the configuration query's alone to refuse (before
    this check it went ahead with nothing protected)."""
    ws = new_repo(rig.lz, "badinc", files={"team.gitconfig": "[core\n"})
    git(rig.lz, ws, "config", "include.path", "../team.gitconfig")
    marker = ws / "RAN"
    rig.config({"bb": {"isolate_gitignored": False}})
    p = rig.run("bb", ["touch", "RAN"], ws=ws)
    assert p.returncode != 0 and not marker.exists(), p.stdout + p.stderr
    assert "cannot read the configuration of the repository" in p.stderr, p.stderr
    assert "git config --list" in p.stderr, p.stderr
    rig.lz.write(ws / "team.gitconfig", "[user]\n\tname = Team\n", mode=0o644)
    p = rig.run("bb", sh("touch RAN; echo '[core] fsmonitor = /bin/false' >> team.gitconfig "
                         "&& echo WROTE || echo REFUSED"), ws=ws)
    assert p.returncode == 0 and marker.exists(), p.stdout + p.stderr
    assert "REFUSED" in p.stdout and "fsmonitor" not in (ws / "team.gitconfig").read_text(), \
        p.stdout + p.stderr
