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

import os
from pathlib import Path

import pytest

from conftest import TEARDOWN_TIMEOUT, sh, wait_torn_down
from test_git import git, hook, marker_for, new_repo, planted, put, put_hook, step, steps

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


# ---- attack round a28: the developer's configuration wherever it lives (F1), every value
# naming a workspace file (F2, F3), paths through the host's symlinks and `~user/` (F4, F7)

def _hooks_repo(lz, name):
    ws = new_repo(lz, name, files={"README": "hi\n", ".githooks/pre-commit": "#!/bin/sh\nexit 0\n"})
    (ws / ".githooks" / "pre-commit").chmod(0o755)
    return ws


def _config_env(lz, where: str) -> dict:
    """The environment of a developer whose Git configuration names the
    relative hooks path .githooks from `where`: $XDG_CONFIG_HOME/git/config,
    a GIT_CONFIG_GLOBAL file (a dotfiles manager's), or the system file
    (GIT_CONFIG_SYSTEM standing in for /etc/gitconfig, shared here)."""
    line = "[core]\n\thooksPath = .githooks\n"
    if where == "xdg":
        xdg = lz.mkdir("xdg")
        lz.mkdir("xdg/git")
        lz.write(xdg / "git" / "config", line, mode=0o644)
        lz.mkdir("xdg/lazaret")
        lz.write(xdg / "lazaret" / "config.toml",
                 (lz.home / ".config" / "lazaret" / "config.toml").read_text(), mode=0o600)
        return {"XDG_CONFIG_HOME": str(xdg)}
    f = lz.home / f"{where}-gitconfig"
    lz.write(f, "[user]\n\tname = Host\n\temail = host@lazaret.invalid\n" + line, mode=0o644)
    return {"GIT_CONFIG_GLOBAL" if where == "global" else "GIT_CONFIG_SYSTEM": str(f)}


def _commit_runs(lz, ws, marker, env) -> bool:
    lz.run_as_user(["git", "-C", str(ws), "commit", "-q", "--allow-empty", "-m", "p"], env=env)
    return marker.exists()


@pytest.mark.parametrize("where", ["xdg", "global", "system"])
def test_the_developers_configuration_is_read_wherever_it_lives(rig, where):
    """A relative core.hooksPath in the developer's configuration outside
    ~/.gitconfig: before the fix only HOME reached the Git Sentry's queries
    and the system file was skipped, so the hooks were writable (a28 F1)."""
    rig.config({"bb": {}})
    env = _config_env(rig.lz, where)
    ws = _hooks_repo(rig.lz, f"cfg-{where}")
    marker = marker_for(rig.lz, f"cfg-{where}")
    p = rig.run("bb", sh(put_hook("hook", ".githooks/pre-commit", marker)), ws=ws, env=env)
    assert p.returncode == 0, p.stderr
    assert steps(p.stdout) == {"hook": "FAIL"}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not _commit_runs(rig.lz, ws, marker, env)


@pytest.mark.parametrize("where", ["xdg", "global", "system"])
def test_control_the_developers_configuration_names_the_hooks(lz, where):
    """Control: the same script on the host, no Lazaret: the host's commit
    runs the rewritten hook, so the configuration really is in force."""
    lz.write(lz.home / ".config" / "lazaret" / "config.toml", "", mode=0o600)
    env = _config_env(lz, where)
    ws = _hooks_repo(lz, f"ccfg-{where}")
    marker = marker_for(lz, f"ccfg-{where}")
    p = lz.run_as_user(sh(put_hook("hook", ".githooks/pre-commit", marker)), cwd=ws)
    assert steps(p.stdout) == {"hook": "OK"}, p.stdout + p.stderr
    assert _commit_runs(lz, ws, marker, env)


SCRIPT = "#!/bin/sh\nexit 0\n"
VALUE_PROBES = ("filter", "cdalias", "difffilter", "tarcmd", "trailer", "subupdate", "keycmd")


def _values_mono(lz, name):
    """mono/ whose configuration names scripts of pkgs/app (the workspace)
    under keys the Git Sentry's list of program keys did not have, and an
    alias that reaches its script through a `cd`."""
    lib = new_repo(lz, f"{name}-lib", files={"l": "1\n"})
    git(lz, lib, "commit", "-q", "--allow-empty", "-m", "second")
    tools = {"clean.sh": "#!/bin/sh\ncat\n", "lintcd.sh": SCRIPT,
             "difffilter.sh": "#!/bin/sh\ncat\n", "tarcmd.sh": "#!/bin/sh\ncat\n",
             "trailer.sh": "#!/bin/sh\necho x\n", "subup.sh": SCRIPT,
             "keycmd.sh": "#!/bin/sh\necho 'key::ssh-ed25519 AAAA'\n"}
    files = {f"pkgs/app/tools/{k}": v for k, v in tools.items()}
    files.update({"README": "hi\n", "pkgs/app/notes.txt": "n\n",
                  "pkgs/app/.gitattributes": "*.txt filter=strip\n"})
    mono = new_repo(lz, name, files=files)
    app = mono / "pkgs" / "app"
    for f in (app / "tools").iterdir():
        f.chmod(0o755)
    git(lz, mono, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(lz, mono, "commit", "-q", "-m", "lib")
    git(lz, mono / "lib", "checkout", "-q", "HEAD~1")  # `git submodule update` has work
    a = str(app)
    for k, v in {"filter.strip.clean": "./pkgs/app/tools/clean.sh",
                 "alias.lintcd": "!cd pkgs/app && ./tools/lintcd.sh",
                 "interactive.diffFilter": f"{a}/tools/difffilter.sh",
                 "tar.tgzx.command": f"{a}/tools/tarcmd.sh",
                 "trailer.sign.command": f"{a}/tools/trailer.sh",
                 "submodule.lib.update": f"!{a}/tools/subup.sh",
                 "gpg.ssh.defaultKeyCommand": f"{a}/tools/keycmd.sh"}.items():
        git(lz, mono, "config", k, v)
    return mono, app, {k: marker_for(lz, f"{name}-{k}") for k in VALUE_PROBES}


def _values_attack(m) -> str:
    files = {"filter": "clean.sh", "cdalias": "lintcd.sh", "difffilter": "difffilter.sh",
             "tarcmd": "tarcmd.sh", "trailer": "trailer.sh", "subupdate": "subup.sh",
             "keycmd": "keycmd.sh"}
    tails = {"trailer": "echo x\n", "subupdate": "exit 0\n",
             "keycmd": "echo 'key::ssh-ed25519 AAAA'\n"}
    return "".join(put(k, f"tools/{f}", f"#!/bin/sh\ntouch {m[k]}\n{tails.get(k, 'cat')}\n")
                   for k, f in files.items()) + "echo changed > notes.txt\n"


def _values_host(lz, mono, app, m) -> dict:
    """The developer's ordinary commands on the host that run those scripts."""
    def run(*args, cwd=app, inp=None):
        lz.run_as_user(["git", "-C", str(cwd), *map(str, args)], input=inp)
    run("add", "notes.txt")
    run("lintcd")
    lz.write(app / "README.md", "x\n", mode=0o644)
    run("add", "README.md")
    lz.write(app / "README.md", "y\n", mode=0o644)
    lz.run_as_user(["script", "-qc", f"git -C {app} add -p", "/dev/null"], input="q\n",
                   env={"TERM": "xterm"})  # the diff filter runs for a terminal only
    run("archive", "--format=tgzx", "-o", "/dev/null", "HEAD")
    run("interpret-trailers", inp="subject\n\nbody\n")
    run("submodule", "update", cwd=mono)
    run("-c", "gpg.format=ssh", "commit", "-q", "-S", "--allow-empty", "-m", "signed")
    return {k: v.exists() for k, v in m.items()}


def test_every_configuration_value_naming_a_workspace_script_is_protected(rig):
    """Keys the list of program keys missed (a28 F2) and an alias whose
    script is named after a `cd` (F3): every script's rewrite is refused and
    the host's commands run none of them."""
    mono, app, m = _values_mono(rig.lz, "vmono")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_values_attack(m)), ws=app)
    assert p.returncode == 0, p.stderr
    assert steps(p.stdout) == {k: "FAIL" for k in VALUE_PROBES}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert _values_host(rig.lz, mono, app, m) == {k: False for k in VALUE_PROBES}


def test_control_every_configuration_value_runs_without_lazaret(lz):
    """Control: the same script on the host: every rewrite lands and each of
    the host's commands runs its script."""
    mono, app, m = _values_mono(lz, "cvmono")
    p = lz.run_as_user(sh(_values_attack(m)), cwd=app)
    assert steps(p.stdout) == {k: "OK" for k in VALUE_PROBES}, p.stdout + p.stderr
    assert _values_host(lz, mono, app, m) == {k: True for k in VALUE_PROBES}


def _linked_names(rig, name, how):
    """mono/pkgs/app/tools/go.sh named by an alias of mono: through HOME
    when HOME is a symlink (`~/`), by an absolute path through a symlinked
    directory, or as `~user/`."""
    import pwd
    mono = new_repo(rig.lz, name, files={"README": "hi\n", "pkgs/app/tools/go.sh": SCRIPT})
    app = mono / "pkgs" / "app"
    (app / "tools" / "go.sh").chmod(0o755)
    link = rig.lz.home.parent / f"homelink-{name}"
    os.symlink(rig.lz.home, link)
    env = None
    if how == "tilde-home-link":
        env = {"HOME": str(link)}
        value = f"!~/{name}/pkgs/app/tools/go.sh"
    elif how == "absolute-link":
        value = f"!{link}/{name}/pkgs/app/tools/go.sh"
    else:
        pw = pwd.getpwuid(rig.lz.user.uid)
        value = f"!~{pw.pw_name}/{os.path.relpath(app, pw.pw_dir)}/tools/go.sh"
    git(rig.lz, mono, "config", "alias.go", value)
    return mono, app, env


@pytest.mark.parametrize("how", ["tilde-home-link", "absolute-link", "tilde-user"])
def test_a_program_named_through_the_hosts_symlinks_or_by_user_is_protected(rig, how):
    """a28 F4, F7: the path reaches the workspace only through a symlink
    of the host (or by `~name/`); the host's Git follows it, so must the
    plan. Control: test_control_a_program_named_through_symlinks_runs."""
    mono, app, env = _linked_names(rig, f"l{how[:5]}", how)
    rig.config({"bb": {}})
    marker = marker_for(rig.lz, how)
    p = rig.run("bb", sh(put("go", "tools/go.sh", hook(marker))), ws=app, env=env)
    assert steps(p.stdout) == {"go": "FAIL"}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    rig.lz.run_as_user(["git", "-C", str(app), "go"], env=env)
    assert not marker.exists()


@pytest.mark.parametrize("how", ["tilde-home-link", "absolute-link", "tilde-user"])
def test_control_a_program_named_through_symlinks_runs(rig, how):
    """Control: the same rewrite on the host: the host's Git runs it."""
    mono, app, env = _linked_names(rig, f"c{how[:5]}", how)
    marker = marker_for(rig.lz, f"c{how}")
    p = rig.lz.run_as_user(sh(put("go", "tools/go.sh", hook(marker))), cwd=app)
    assert steps(p.stdout) == {"go": "OK"}, p.stdout + p.stderr
    rig.lz.run_as_user(["git", "-C", str(app), "go"], env=env)
    assert marker.exists()


def test_a_program_that_is_a_symlink_in_the_workspace_refuses_the_start(rig):
    """An alias names tools/sym.sh, a symlink of the workspace: the sandbox
    could point it at its own program and a symlink cannot be bound
    read-only, so the start is refused, saying what to do. Control: named
    by its target, the same start runs and the target is protected."""
    ws = new_repo(rig.lz, "symprog", files={"README": "hi\n", "tools/real.sh": SCRIPT})
    (ws / "tools" / "real.sh").chmod(0o755)
    os.symlink("real.sh", ws / "tools" / "sym.sh")
    os.lchown(ws / "tools" / "sym.sh", rig.lz.user.uid, rig.lz.user.gid)
    git(rig.lz, ws, "config", "alias.go", "!tools/sym.sh")
    rig.config({"bb": {}})
    marker = ws / "RAN"
    p = rig.run("bb", ["touch", "RAN"], ws=ws)
    assert p.returncode != 0 and not marker.exists(), p.stdout + p.stderr
    assert "symbolic link inside the workspace" in p.stderr and "readlink -f" in p.stderr, \
        p.stderr
    # The refused start left no hold on .git/config.lock: the host's own
    # `git config` works at once (it failed "File exists" before 9f358bd+).
    git(rig.lz, ws, "config", "alias.go", "!tools/real.sh")
    p = rig.run("bb", sh("touch RAN; " + put("real", "tools/real.sh", SCRIPT)), ws=ws)
    assert p.returncode == 0 and marker.exists(), p.stdout + p.stderr
    assert steps(p.stdout) == {"real": "FAIL"}, p.stdout


# ---- a28 F8: an include whose condition is false at the start ----------------------

# .git/config includes conf/release.gitconfig on release/* branches; that
# tracked file includes conf/team.gitconfig, which includes the missing
# conf/local.gitconfig on release/* branches too (each relative to the
# including file's directory, as Git resolves them) and names a project
# script (a clean filter; an alias would not do: Git looks aliases up before
# it knows the branch). At the start on main none of them is read. The
# sandbox writes the missing one and the script, and switches the shared
# HEAD to release/x; the host's next Git commands there read all three.
F8_FILES = {"README": "hi\n", "tools/rel.sh": "#!/bin/sh\ncat\n", "notes.txt": "n\n",
            ".gitattributes": "notes.txt filter=strip\n",
            "conf/release.gitconfig": "[include]\n\tpath = team.gitconfig\n",
            "conf/team.gitconfig": '[includeIf "onbranch:release/**"]\n\tpath = local.gitconfig\n'
                                   "[filter \"strip\"]\n\tclean = sh tools/rel.sh\n"}


def _f8_layout(lz, name):
    ws = new_repo(lz, name, files=F8_FILES)
    git(lz, ws, "config", "includeIf.onbranch:release/*.path", "../conf/release.gitconfig")
    return ws, {k: marker_for(lz, f"{name}-{k}") for k in ("local", "filter")}


def _f8_attack(markers) -> str:
    return (put("local", "conf/local.gitconfig",
                f"[core]\n\tfsmonitor = {planted(markers['local'])}\n") +
            put("filter", "tools/rel.sh", f"#!/bin/sh\ntouch {markers['filter']}\ncat\n") +
            "echo changed > notes.txt\n" +
            "git checkout -q -b release/x && echo OK:checkout || echo FAIL:checkout\n")


def _f8_host_ran(lz, ws, markers) -> dict:
    # The developer on release/x (whether or not the sandbox's checkout
    # got there): every file of the chain is read now.
    git(lz, ws, "checkout", "-q", "-B", "release/x")
    return {"local": _ran(lz, markers["local"], ws, "status", "--short"),
            "filter": _ran(lz, markers["filter"], ws, "add", "notes.txt")}


def test_includes_behind_a_false_condition_are_protected(rig):
    """a28 F8: every file an include names is protected whatever its
    condition, recursively through the files so named: the missing
    conf/local.gitconfig, named only inside an onbranch include not read on
    main, is created empty and read-only at the start, and the script such
    a file names is protected too. The sandbox can write neither, and the
    host's Git on release/x runs nothing."""
    ws, markers = _f8_layout(rig.lz, "f8inc")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_f8_attack(markers)), ws=ws)
    got = steps(p.stdout)
    assert got.get("local") == "FAIL" and got.get("filter") == "FAIL", p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert (ws / "conf" / "local.gitconfig").read_text() == ""
    assert _f8_host_ran(rig.lz, ws, markers) == {"local": False, "filter": False}


def test_control_includes_behind_a_false_condition_run(lz):
    ws, markers = _f8_layout(lz, "f8inc")
    p = lz.run_as_user(sh(_f8_attack(markers)), cwd=ws)
    assert steps(p.stdout) == {"local": "OK", "filter": "OK", "checkout": "OK"}, \
        p.stdout + p.stderr
    assert _f8_host_ran(lz, ws, markers) == {"local": True, "filter": True}


# ---- attack round a28b: a bare name is no path (D1), hard links planted early (H),
# init.templateDir (T), how values are cut into words (W)

def test_a_symlink_named_like_a_bare_command_does_not_refuse_the_start(rig):
    """`ln -s /bin/sh false` in the workspace: Lazaret's own
    `-c core.fsmonitor=false` (and any bare command name of a filter) is
    looked up in PATH, not in the workspace, so the next start goes ahead.
    Before the fix every later start was refused (a28b D1). The refusal
    that remains for a path-like symlink is tested above
    (test_a_program_that_is_a_symlink_in_the_workspace_refuses_the_start)."""
    ws = new_repo(rig.lz, "dosf", files={"README": "hi\n"})
    git(rig.lz, ws, "config", "filter.lfs.clean", "git-lfs clean -- %f")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(step("false", "ln -s /bin/sh false") + step("clean", "ln -s /bin/sh clean")),
                ws=ws)
    assert steps(p.stdout) == {"false": "OK", "clean": "OK"}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    p = rig.run("bb", sh("echo started"), ws=ws)
    assert p.returncode == 0 and "started" in p.stdout, p.stdout + p.stderr


def _linked_early(rig, name):
    """Session 1: tools/fmt.sh is named by nothing; the sandbox gives it a
    second name (a hard link). Then the developer names it in an alias."""
    ws = new_repo(rig.lz, name, files={"README": "hi\n", "tools/fmt.sh": SCRIPT})
    (ws / "tools" / "fmt.sh").chmod(0o755)
    rig.config({"bb": {}})
    p = rig.run("bb", sh(step("link", "ln tools/fmt.sh .fmt-cache")), ws=ws)
    assert steps(p.stdout) == {"link": "OK"}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert (ws / "tools" / "fmt.sh").stat().st_nlink == 2
    return ws


def test_a_hard_link_planted_before_protection_reaches_nothing(rig):
    """a28b H: once named, tools/fmt.sh gets an inode of its own before it is
    bound read-only: writing the sandbox's other name no longer changes
    the file the host's Git runs. Control:
    test_control_a_hard_link_planted_early_writes_the_file."""
    ws = _linked_early(rig, "hl")
    git(rig.lz, ws, "config", "alias.fmt", "!./tools/fmt.sh")
    marker = marker_for(rig.lz, "hl")
    p = rig.run("bb", sh(put("via-link", ".fmt-cache", hook(marker))), ws=ws)
    assert p.returncode == 0, p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert (ws / "tools" / "fmt.sh").read_text() == SCRIPT
    assert (ws / "tools" / "fmt.sh").stat().st_mode & 0o777 == 0o755
    rig.lz.run_as_user(["git", "-C", str(ws), "fmt"])
    assert not marker.exists()


def test_control_a_hard_link_planted_early_writes_the_file(rig):
    """Control: while tools/fmt.sh is named by nothing, a write through the
    sandbox's other name changes it on the host (one inode)."""
    ws = _linked_early(rig, "chl")
    marker = marker_for(rig.lz, "chl")
    p = rig.run("bb", sh(put("via-link", ".fmt-cache", hook(marker))), ws=ws)
    assert steps(p.stdout) == {"via-link": "OK"}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert str(marker) in (ws / "tools" / "fmt.sh").read_text()


def _templates(lz, name, exists):
    files = {"README": "hi\n"}
    if exists:
        files[".git-templates/hooks/post-checkout"] = SCRIPT
    ws = new_repo(lz, name, files=files)
    src = new_repo(lz, f"{name}-other", files={"x": "1\n"})
    git(lz, ws, "config", "--global", "init.templateDir", f"~/{name}/.git-templates")
    return ws, src, marker_for(lz, name)


def _templates_attack(marker):
    return (step("mk", "mkdir -p .git-templates/hooks") +
            put("hook", ".git-templates/hooks/post-checkout", hook(marker)) +
            step("x", "chmod +x .git-templates/hooks/post-checkout"))


@pytest.mark.parametrize("exists", [True, False], ids=["existing", "missing"])
def test_init_template_dir_in_the_workspace_is_protected(rig, exists):
    """a28b T: init.templateDir names a workspace directory, whose hooks/
    every `git clone` on the host copies and runs: made if missing and
    bound read-only. Control: test_control_init_template_dir_runs."""
    ws, src, marker = _templates(rig.lz, f"tpl{int(exists)}", exists)
    rig.config({"bb": {}})
    p = rig.run("bb", sh(_templates_attack(marker)), ws=ws)
    assert steps(p.stdout)["hook"] == "FAIL", p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    rig.lz.run_as_user(["git", "clone", "-q", str(src), str(rig.lz.home / f"clone{int(exists)}")])
    assert not marker.exists()


def test_control_init_template_dir_runs(lz):
    """Control: the same script on the host: `git clone` runs the hook."""
    ws, src, marker = _templates(lz, "ctpl", False)
    p = lz.run_as_user(sh(_templates_attack(marker)), cwd=ws)
    assert steps(p.stdout)["hook"] == "OK", p.stdout + p.stderr
    lz.run_as_user(["git", "clone", "-q", str(src), str(lz.home / "cclone")])
    assert marker.exists()


WORD_ALIASES = {  # name: (alias value, the file it runs)
    "top": ('!"$(git rev-parse --show-toplevel)/tools/top.sh"', "tools/top.sh"),
    "home": ("!$HOME/{ws}/tools/home.sh", "tools/home.sh"),
    "esc": ("!./tools/my\\ esc.sh", "tools/my esc.sh"),
    "glob": ("!./tools/gl?b.sh", "tools/glob.sh"),
    "inq": ('!./tools/in"q".sh', "tools/inq.sh"),
    "brace": ("!${{GIT_DIR:+}}./tools/brace.sh", "tools/brace.sh"),
    "ci": ("!git -c core.hooksPath=.githooks commit -q --allow-empty -m x",
           ".githooks/pre-commit"),
    # round a28c
    "hk1": ('!git -c core.hooksPath="$(git rev-parse --show-toplevel)/.hk1" commit -q '
            '--allow-empty -m x', ".hk1/pre-commit"),
    "hk2": ("!git -c core.hooksPath=$HOME/{ws}/.hk2 commit -q --allow-empty -m x",
            ".hk2/pre-commit"),
    "hk5": ("!git -c core.hooksPath=$PWD/.hk5 commit -q --allow-empty -m x", ".hk5/pre-commit"),
    "pathdir": ("!PATH=./tools/bin:$PATH mylint", "tools/bin/mylint"),
    "gdir": ('!"$(git rev-parse --git-dir)/../tools/gdir.sh"', "tools/gdir.sh"),
    "q3": ("!sh ${{HOME:?}}/{ws}/tools/q3.sh", "tools/q3.sh"),
    "spc": ('!"./tools/my spc.sh"', "tools/my spc.sh"),
}


def _words_repo(lz, name):
    files = {"README": "hi\n", **{f: SCRIPT for _, f in WORD_ALIASES.values()}}
    ws = new_repo(lz, name, files=files)
    for _, f in WORD_ALIASES.values():
        (ws / f).chmod(0o755)
    for k, (v, _) in WORD_ALIASES.items():
        git(lz, ws, "config", f"alias.{k}", v.format(ws=name))
    marker = marker_for(lz, name)
    script = "".join(put(k, f.replace(" ", "\\ "), hook(Path(f"{marker}-{k}")))
                     for k, (_, f) in WORD_ALIASES.items())
    return ws, marker, script


def _words_ran(lz, ws, marker) -> dict:
    for k in WORD_ALIASES:
        lz.run_as_user(["git", "-C", str(ws), k])
    return {k: Path(f"{marker}-{k}").exists() for k in WORD_ALIASES}


def test_value_words_cut_as_a_shell_would_are_protected(rig):
    """a28b W: alias forms whose script the word splitter missed. Control:
    test_control_value_words_run_without_lazaret."""
    ws, marker, script = _words_repo(rig.lz, "words")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(script), ws=ws)
    assert steps(p.stdout) == {k: "FAIL" for k in WORD_ALIASES}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert _words_ran(rig.lz, ws, marker) == {k: False for k in WORD_ALIASES}


def test_control_value_words_run_without_lazaret(lz):
    ws, marker, script = _words_repo(lz, "cwords")
    p = lz.run_as_user(sh(script), cwd=ws)
    assert steps(p.stdout) == {k: "OK" for k in WORD_ALIASES}, p.stdout + p.stderr
    assert _words_ran(lz, ws, marker) == {k: True for k in WORD_ALIASES}


def _env_include(lz, name):
    ws = new_repo(lz, name, files={"README": "hi\n"})
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "include.path",
           "GIT_CONFIG_VALUE_0": str(ws / ".local.cfg")}
    marker = marker_for(lz, name)
    return ws, env, marker, put("cfg", ".local.cfg", f"[core]\n\tfsmonitor = {planted(marker)}\n")


def test_an_include_given_in_the_environment_is_made_and_protected(rig):
    """a28c E: the developer's shell exports GIT_CONFIG_COUNT/KEY/VALUE with
    an include of a workspace file missing at start: made empty and bound
    read-only, so the sandbox cannot write the fsmonitor the host's
    `git status` would run. Control: test_control_an_include_given_in_the_environment_runs."""
    ws, env, marker, script = _env_include(rig.lz, "envinc")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(script), ws=ws, env=env)
    assert steps(p.stdout) == {"cfg": "FAIL"}, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    rig.lz.run_as_user(["git", "-C", str(ws), "status"], env=env)
    assert not marker.exists()


def test_control_an_include_given_in_the_environment_runs(lz):
    ws, env, marker, script = _env_include(lz, "cenvinc")
    p = lz.run_as_user(sh(script), cwd=ws)
    assert steps(p.stdout) == {"cfg": "OK"}, p.stdout + p.stderr
    lz.run_as_user(["git", "-C", str(ws), "status"], env=env)
    assert marker.exists()
