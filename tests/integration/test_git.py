# SPDX-License-Identifier: Apache-2.0
"""The Git Sentry and git-ignored isolation with the real runsc (issue 5,
item 4; docs/git.md, docs/platform.md "Git in a bind-mounted workspace").

Git works inside on the workspace repository and every change is visible on
the host at once; the sandbox can never change what the host's Git executes
or is configured by; git-ignored paths are the Domain's own.

Every attack is a shell script run in the workspace. Its planted command
touches a marker file at an absolute host path (under lz.home, which does not
exist inside the sandbox); after the attack the host's `git status` and
`git commit` run as the test user, with HOME = lz.home, and the marker must not
appear. test_attack_works_without_lazaret runs each script on the host
itself, in the same repository layout, and checks that the marker DOES appear
there: each attack test is shown to be able to fail.

Host Git never runs as root here: lz.run_as_user (the test user, HOME =
lz.home, where ~/.gitconfig gives an identity).
"""

import json
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from conftest import TEARDOWN_TIMEOUT, ok, sh, wait_torn_down

QUARANTINE = "lazaret-quarantine"
# Git inside the sandbox: an identity for commits, nothing else.
GIT_IN = "git -c user.name=Sandbox -c user.email=sb@lazaret.invalid"


# ---- host-side Git, as the test user ----------------------------------------------

def git(lz, cwd, *args, check=True):
    """git -C cwd ARGS on the host as the test user (HOME = lz.home)."""
    p = lz.run_as_user(["git", "-C", str(cwd), *map(str, args)])
    if check:
        assert p.returncode == 0, (f"host: git -C {cwd} {' '.join(map(str, args))}: exit "
                                   f"{p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def out(lz, cwd, *args) -> str:
    return git(lz, cwd, *args).stdout


def host_identity(lz):
    lz.write(".gitconfig", "[user]\n\tname = Host\n\temail = host@lazaret.invalid\n"
             "[init]\n\tdefaultBranch = main\n", mode=0o644)


def new_repo(lz, rel, files=None, message="initial") -> Path:
    """A repository at lz.home/rel on branch main with one commit of files."""
    host_identity(lz)
    ws = lz.mkdir(rel)
    git(lz, ws, "init", "-q")
    for name, text in (files or {"README": "hello\n"}).items():
        lz.write(ws / name, text, mode=0o644)
    git(lz, ws, "add", "-A")
    git(lz, ws, "commit", "-q", "-m", message)
    return ws


def host_git_problem(lz, dirs, marker: Path, may_fail=False):
    """`git status` and `git commit` on the host in each dir: None when both
    work and neither runs the planted command, else what went wrong.
    may_fail: the attack damaged the repository itself (the workspace is the
    sandbox's to break): only the planted command counts."""
    log = []
    for d in dirs:
        for args in (["status"], ["commit", "-q", "--allow-empty", "-m", "host probe"]):
            p = git(lz, d, *args, check=False)
            log.append(f"  git -C {d} {' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
            if marker.exists():
                return ("the host's Git ran the command the sandbox planted (marker "
                        f"{marker.name} exists):\n" + "\n".join(log))
            if p.returncode != 0 and not may_fail:
                return "the host's Git failed after the attack:\n" + "\n".join(log)
    return None


# ---- shell snippets (POSIX sh: the host's dash and busybox ash) --------------------

def step(label: str, cmd: str) -> str:
    """Run cmd, print OK:label or FAIL:label."""
    return f"if {{ {cmd}\n}} 2>/dev/null; then echo OK:{label}; else echo FAIL:{label}; fi\n"


def put(label: str, path: str, text: str, append=False) -> str:
    return step(label, f"cat {'>>' if append else '>'} {path} <<'LZEOF'\n{text}LZEOF")


def planted(marker: Path) -> str:
    """A command for core.fsmonitor (Git appends arguments, hence sh -c)."""
    return f"sh -c 'touch {marker}' planted"


def fsmonitor_config(marker: Path, extra="") -> str:
    return f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {planted(marker)}\n{extra}"


def hook(marker: Path) -> str:
    return f"#!/bin/sh\ntouch {marker}\n"


def put_hook(label: str, path: str, marker: Path) -> str:
    return step(label, f"cat > {path} <<'LZEOF' && chmod +x {path}\n{hook(marker)}LZEOF")


def evil_gitdir(label: str, path: str, marker: Path, extra="") -> str:
    """A Git directory the sandbox controls, whose config runs the marker."""
    return (step(f"{label}-dirs", f"mkdir -p {path}/objects {path}/refs/heads && "
                                  f"echo 'ref: refs/heads/main' > {path}/HEAD") +
            put(label, f"{path}/config", fsmonitor_config(marker, extra)))


def steps(stdout: str) -> dict:
    """{label: "OK" or "FAIL"} from a script's output."""
    pairs = (line.split(":", 1) for line in stdout.splitlines()
             if line.startswith(("OK:", "FAIL:")))
    return {label: status for status, label in pairs}


# ---- attacks ---------------------------------------------------------------------

def _ws_only(lz, ws):
    return [ws]


@dataclass
class Attack:
    setup: Callable          # setup(lz) -> workspace Path (repositories under lz.home)
    script: Callable         # script(marker) -> shell script run with cwd = the workspace
    blocked: tuple = ()      # steps that must fail inside the sandbox
    quarantined: tuple = ()  # paths relative to the workspace's .git that must be moved aside
    host_dirs: Callable = _ws_only  # host_dirs(lz, ws) -> where the host's git runs
    host_git_may_fail: bool = False  # the attack breaks the repository itself


def _plain(lz):
    return new_repo(lz, "ws")


def _rename_git(marker):
    # docs/platform.md "Git in a bind-mounted workspace", attack 1: rename .git, recreate it with a pre-commit hook.
    return (step("rename", "mv .git .git-moved") +
            "[ -d .git/objects ] || { mkdir -p .git && cp -R .git-moved/. .git/; }\n" +
            put_hook("hook", ".git/hooks/pre-commit", marker))


def _commondir(marker):
    return (evil_gitdir("evil-config", "evil", marker) +
            step("commondir", "echo ../evil > .git/commondir") + "sleep 1\n")


def _worktree_config_existing(lz):
    ws = _plain(lz)
    git(lz, ws, "config", "extensions.worktreeConfig", "true")
    git(lz, ws, "config", "--worktree", "core.abbrev", "12")
    assert (ws / ".git" / "config.worktree").is_file()
    return ws


def _worktree_config_new(lz):
    ws = _plain(lz)
    git(lz, ws, "config", "extensions.worktreeConfig", "true")
    assert not (ws / ".git" / "config.worktree").exists()
    return ws


def _config_worktree(marker):
    return put("config.worktree", ".git/config.worktree",
               f"[core]\n\tfsmonitor = {planted(marker)}\n", append=True) + "sleep 1\n"


def _submodule(lz):
    host_identity(lz)
    src = new_repo(lz, "sub-src", {"lib.txt": "library\n"})
    bare = lz.home / "sub.git"
    git(lz, lz.home, "clone", "-q", "--bare", src, bare)
    ws = new_repo(lz, "ws")
    git(lz, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", bare, "sub")
    git(lz, ws, "commit", "-q", "-m", "add submodule")
    assert (ws / ".git" / "modules" / "sub" / "config").is_file()
    return ws


def _submodule_config_and_hooks(marker):
    return (put("sub-config", ".git/modules/sub/config",
                f"[core]\n\tfsmonitor = {planted(marker)}\n", append=True) +
            put_hook("sub-hook", ".git/modules/sub/hooks/pre-commit", marker) +
            # made whole beside it, then renamed in: one new entry, one audit
            evil_gitdir("staged-module", ".git/staged-module", marker) +
            step("new-module", "mv .git/staged-module .git/modules/other") + "sleep 1\n")


def _submodule_gitfile(marker):
    # The submodule checkout's .git file lies in the workspace: point it at
    # a Git directory the sandbox made. The host's `git status` recurses
    # into the submodule and reads that directory's configuration.
    return (evil_gitdir("evil-config", "evil-sub-gitdir", marker,
                        "\tworktree = ../sub\n") +
            step("gitfile", "echo 'gitdir: ../evil-sub-gitdir' > sub/.git") + "sleep 1\n")


def _submodule_gitdir_renamed(marker):
    # .git/modules/sub is no mount point (its config and hooks inside are):
    # rename it aside and put a copy with the sandbox's configuration back.
    return (step("rename", "mv .git/modules/sub .git/modules/sub-aside") +
            step("copy", "mkdir .git/modules/sub && cp -R .git/modules/sub-aside/. "
                         ".git/modules/sub/ || cp -R .git/lazaret-quarantine/*sub-aside/. "
                         ".git/modules/sub/") +
            put("sub-config", ".git/modules/sub/config",
                fsmonitor_config(marker, "\tworktree = ../../../sub\n")) + "sleep 1\n")


def _sub_dirs(lz, ws):
    return [ws, ws / "sub"]


def _worktrees(lz):
    ws = _plain(lz)
    git(lz, ws, "worktree", "add", "-q", "-b", "wt", "../wt")
    assert (ws / ".git" / "worktrees" / "wt" / "commondir").is_file()
    return ws


def _worktree_commondir(marker):
    return (evil_gitdir("evil-config", "evil", marker) +
            put("wt-commondir", ".git/worktrees/wt/commondir", "../../../evil\n") +
            step("wt-new-entry", "mkdir .git/worktrees/other") + "sleep 1\n")


def _wt_dirs(lz, ws):
    return [lz.home / "wt", ws]


def _hooks_path(lz):
    ws = new_repo(lz, "ws", {"README": "hello\n", ".githooks/README": "team hooks\n"})
    git(lz, ws, "config", "core.hooksPath", ".githooks")
    return ws


def _hooks_path_nested(lz):
    ws = new_repo(lz, "ws", {"README": "hello\n", "tools/githooks/README": "team hooks\n"})
    git(lz, ws, "config", "core.hooksPath", "tools/githooks")
    return ws


def _hooks_path_missing(lz):
    ws = _plain(lz)
    git(lz, ws, "config", "core.hooksPath", ".husky")
    assert not (ws / ".husky").exists()
    return ws


def _hooks_path_create(marker):
    return step("mkdir", "mkdir -p .husky") + put_hook("hook", ".husky/pre-commit", marker)


def _hooks_path_hook(marker):
    return put_hook("hook", ".githooks/pre-commit", marker)


def _hooks_path_nested_renamed(marker):
    # tools/githooks is a mount point, tools is not: gVisor renames a
    # directory with mount points inside, and the sandbox makes a new one.
    return (step("hook-in-place", f"cat > tools/githooks/pre-commit <<'LZEOF'\n{hook(marker)}"
                                  "LZEOF") +
            step("rename-parent", "mv tools tools-aside") +
            step("recreate", "mkdir -p tools/githooks") +
            put_hook("hook", "tools/githooks/pre-commit", marker))


def _include(lz):
    ws = new_repo(lz, "ws", {"README": "hello\n", "team.gitconfig": "[alias]\n\tst = status\n"})
    git(lz, ws, "config", "include.path", "../team.gitconfig")  # relative to .git/config
    return ws


def _include_missing(lz):
    # An include of a file inside the workspace that does not exist yet:
    # `git config --show-origin` does not list it, so it is not protected,
    # and the sandbox creates it.
    ws = _plain(lz)
    git(lz, ws, "config", "include.path", "../local.gitconfig")
    assert not (ws / "local.gitconfig").exists()
    return ws


def _include_write(marker):
    return put("include", "team.gitconfig", f"[core]\n\tfsmonitor = {planted(marker)}\n",
               append=True)


def _include_create(marker):
    return put("include", "local.gitconfig", f"[core]\n\tfsmonitor = {planted(marker)}\n")


def _gitfile(lz):
    main = new_repo(lz, "main")
    git(lz, main, "worktree", "add", "-q", "-b", "side", "../wsfile")
    ws = lz.home / "wsfile"
    assert (ws / ".git").is_file()
    return ws


def _gitfile_redirect(marker):
    return (evil_gitdir("evil-config", "evilgd", marker) +
            step("rename", "mv .git .git-aside") +
            step("remove", "rm -f .git") +
            step("rewrite", "echo 'gitdir: evilgd' > .git"))


def _embedded_repo(marker):
    # A nested repository the sandbox makes and records as a gitlink: the
    # host's `git status` checks the submodule-like entry by running Git in
    # it, with the nested repository's configuration.
    return (step("init", "git init -q vendor/x && "
                         f"{GIT_IN} -C vendor/x commit -q --allow-empty -m x") +
            put("nested-config", "vendor/x/.git/config",
                f"[core]\n\tfsmonitor = {planted(marker)}\n", append=True) +
            step("gitlink", "git add vendor/x"))


# The numbered attacks are issue 5 item 4's list. The others were found while
# writing these tests; they fail today (see each script's comment). Their
# `blocked` is empty or names only existing protections: the fix may block
# or quarantine, what counts is that the host's Git does not run the command.
ATTACKS = {
    # (1) PLATFORM attack 1
    "rename-dot-git": Attack(_plain, _rename_git, blocked=("rename", "hook")),
    # (2) PLATFORM attack 2
    "commondir": Attack(_plain, _commondir, quarantined=("commondir",)),
    # (3) config.worktree, with extensions.worktreeConfig = true on the host
    "config-worktree-existing": Attack(_worktree_config_existing, _config_worktree,
                                       blocked=("config.worktree",)),
    "config-worktree-new": Attack(_worktree_config_new, _config_worktree,
                                  quarantined=("config.worktree",)),
    # (4) submodules
    "submodule": Attack(_submodule, _submodule_config_and_hooks,
                        blocked=("sub-config", "sub-hook"), quarantined=("modules/other",),
                        host_dirs=_sub_dirs),
    "submodule-gitfile": Attack(_submodule, _submodule_gitfile, host_dirs=_sub_dirs),
    "submodule-gitdir-renamed": Attack(_submodule, _submodule_gitdir_renamed,
                                       host_dirs=_sub_dirs),
    "embedded-repository": Attack(_plain, _embedded_repo),
    # (5) a linked worktree of the workspace repository, outside it
    "worktrees": Attack(_worktrees, _worktree_commondir,
                        blocked=("wt-commondir", "wt-new-entry"), host_dirs=_wt_dirs),
    # (6) core.hooksPath inside the workspace
    "hooks-path": Attack(_hooks_path, _hooks_path_hook, blocked=("hook",)),
    "hooks-path-missing": Attack(_hooks_path_missing, _hooks_path_create, blocked=("hook",)),
    "hooks-path-parent-renamed": Attack(_hooks_path_nested, _hooks_path_nested_renamed,
                                        blocked=("hook-in-place",)),
    # (7) include.path of a file inside the workspace
    "include": Attack(_include, _include_write, blocked=("include",)),
    "include-missing": Attack(_include_missing, _include_create),
    # (8) the workspace is a linked worktree: .git is a file
    "gitfile-workspace": Attack(_gitfile, _gitfile_redirect,
                               blocked=("rename", "remove", "rewrite")),
}


# ---- issue 9: classes an outside attacker found, and their variations -------------

def worktree_config(marker, worktree=".", bare="false") -> str:
    """A Git directory's config that is its own work tree (core.worktree
    relative to the Git directory): the host's `git status` there works, and
    runs the fsmonitor."""
    return (f"[core]\n\trepositoryformatversion = 0\n\tbare = {bare}\n\tworktree = {worktree}\n"
            f"\tfsmonitor = {planted(marker)}\n")


def bare_here(label: str, path: str, marker: Path, worktree=".") -> str:
    """Turn directory `path` into a Git directory (HEAD, objects/, refs/,
    config) whose config runs the marker."""
    return (step(f"{label}-dirs", f"mkdir -p {path}/objects {path}/refs/heads && "
                                  f"echo 'ref: refs/heads/main' > {path}/HEAD") +
            put(label, f"{path}/config", worktree_config(marker, worktree)))


def _preempt_quarantine(marker):
    # Disable the quarantine with a plain file in its place, then commondir.
    return (step("preempt", "rm -rf .git/lazaret-quarantine && echo x > .git/lazaret-quarantine")
            + _commondir(marker))


def _broken_head_bare_root(marker):
    # Break .git (HEAD is writable: Git rewrites it on checkout): the host's
    # Git falls back to the workspace root as a bare repository whose config
    # the sandbox wrote.
    return (bare_here("root-bare", ".", marker) +
            step("break-head", "echo garbage > .git/HEAD") + "sleep 1\n")


def _broken_objects_bare_root(marker):
    # Same, breaking .git by taking its objects/ away instead of HEAD.
    return (bare_here("root-bare", ".", marker) +
            step("break-objects", "mv .git/objects .git/objects-aside") + "sleep 1\n")


def _nested_repo(marker):
    # An untracked repository in a subdirectory: the host's Git run there
    # uses it, with the sandbox's configuration.
    return (step("init", "mkdir -p sub && git init -q sub") +
            put("nested-config", "sub/.git/config", f"[core]\n\tfsmonitor = {planted(marker)}\n",
                append=True) + "sleep 1\n")


def _nested_repo_copied(marker):
    # Made whole outside the workspace (the sandbox's /tmp), then copied in.
    return ("tmp=$(mktemp -d)\n" + step("init", "git init -q $tmp/r") +
            put("nested-config", "$tmp/r/.git/config", f"[core]\n\tfsmonitor = {planted(marker)}\n",
                append=True) +
            step("copy", "mkdir -p sub && cp -a $tmp/r/.git sub/.git") + "sleep 1\n")


def _nested_repo_deep(marker):
    d = "a/b/c/d/e/f/g"
    return (step("init", f"mkdir -p {d} && git init -q {d}") +
            put("nested-config", f"{d}/.git/config", f"[core]\n\tfsmonitor = {planted(marker)}\n",
                append=True) + "sleep 1\n")


def _nested_repo_renamed_in(marker):
    # Made in a directory, then the directory renamed: one event for a
    # whole tree that already holds a repository.
    return (step("init", "mkdir -p stage/inner && git init -q stage/inner/r") +
            put("nested-config", "stage/inner/r/.git/config",
                f"[core]\n\tfsmonitor = {planted(marker)}\n", append=True) +
            step("rename", "mv stage moved") + "sleep 1\n")


def _ignored_repo_ws(lz):
    return new_repo(lz, "ws", {"README": "hello\n", ".gitignore": "build/\n"})


def _repo_from_ignored_dir(marker):
    # Built where the audit does not look (the Domain's own copy of an
    # ignored directory), then moved into the workspace.
    return (step("init", "mkdir -p build && git init -q build/r") +
            put("nested-config", "build/r/.git/config",
                f"[core]\n\tfsmonitor = {planted(marker)}\n", append=True) +
            step("move", "mv build/r sub") + "sleep 1\n")


def _bare_in_subdir(marker):
    return bare_here("sub-bare", "tools/x", marker) + "sleep 1\n"


def _gitfile_in_subdir(marker):
    # A .git *file* in a subdirectory pointing at a Git directory the
    # sandbox made.
    return (evil_gitdir("evil-config", "evilgd", marker, "\tworktree = ../sub\n") +
            step("gitfile", "mkdir -p sub && echo 'gitdir: ../evilgd' > sub/.git") + "sleep 1\n")


def _symlink_dot_git_in_subdir(marker):
    return (evil_gitdir("evil-config", "evilgd", marker, "\tworktree = ../sub\n") +
            step("symlink", "mkdir -p sub && ln -s ../evilgd sub/.git") + "sleep 1\n")


def _hidden_by_mode(marker):
    # Make the repository, then take the developer's permissions away from
    # its directory, and give them back later: no entry is created then.
    # (On the host, where the user cannot write into a 000 directory, the
    # control copies it in before hiding it.)
    return ("tmp=$(mktemp -d)\n" + step("init", "git init -q $tmp/r") +
            put("nested-config", "$tmp/r/.git/config", f"[core]\n\tfsmonitor = {planted(marker)}\n",
                append=True) +
            step("hide", "mkdir -p sub && chmod 000 sub") +
            step("copy", "cp -a $tmp/r sub/r 2>/dev/null || "
                         "{ chmod 755 sub && cp -a $tmp/r sub/r && chmod 000 sub; }") +
            "sleep 1\n" + step("reveal", "chmod 755 sub") + "sleep 1\n")


def _remotes_ws(lz):
    return _plain(lz)


def _nested_dirs(rel):
    return lambda lz, ws: [ws / rel]


ATTACKS.update({
    # quarantine pre-empted, then the commondir of PLATFORM attack 2
    "quarantine-preempted": Attack(_plain, _preempt_quarantine, blocked=("preempt",),
                                   quarantined=("commondir",)),
    # .git made invalid: the workspace root as a bare repository
    "broken-head-bare-root": Attack(_plain, _broken_head_bare_root, host_git_may_fail=True),
    "broken-objects-bare-root": Attack(_plain, _broken_objects_bare_root,
                                       host_git_may_fail=True),
    # untracked nested repositories anywhere in the tree
    "nested-repository": Attack(_plain, _nested_repo, host_dirs=_nested_dirs("sub")),
    "nested-repository-copied-in": Attack(_plain, _nested_repo_copied,
                                          host_dirs=_nested_dirs("sub")),
    "nested-repository-deep": Attack(_plain, _nested_repo_deep,
                                     host_dirs=_nested_dirs("a/b/c/d/e/f/g")),
    "nested-repository-renamed-in": Attack(_plain, _nested_repo_renamed_in,
                                           host_dirs=_nested_dirs("moved/inner/r")),
    "repository-from-ignored-dir": Attack(_ignored_repo_ws, _repo_from_ignored_dir,
                                          host_dirs=_nested_dirs("sub")),
    "repository-hidden-by-mode": Attack(_plain, _hidden_by_mode, host_dirs=_nested_dirs("sub/r")),
    # bare repositories and gitfiles below the top
    "bare-repository-in-subdir": Attack(_plain, _bare_in_subdir, host_dirs=_nested_dirs("tools/x")),
    "gitfile-in-subdir": Attack(_plain, _gitfile_in_subdir, host_dirs=_nested_dirs("sub")),
    "symlinked-dot-git-in-subdir": Attack(_plain, _symlink_dot_git_in_subdir,
                                          host_dirs=_nested_dirs("sub")),
})


def marker_for(lz, name) -> Path:
    return lz.home / f"PLANTED-{name}-{secrets.token_hex(4)}"


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_works_without_lazaret(lz, name):
    """Control: on the host, without a sandbox, the same script makes the
    host's Git run the planted command. (No Lazaret runs here.)"""
    a = ATTACKS[name]
    ws = a.setup(lz)
    marker = marker_for(lz, name)
    p = lz.run_as_user(sh(a.script(marker)), cwd=ws)
    failed = [k for k, v in steps(p.stdout).items() if v != "OK"]
    assert not failed, f"steps failed on the host: {failed}\n{p.stdout}{p.stderr}"
    log = []
    for d in a.host_dirs(lz, ws):
        for args in (["status"], ["commit", "-q", "--allow-empty", "-m", "probe"]):
            r = git(lz, d, *args, check=False)
            log.append(f"git -C {d} {' '.join(args)}: {r.returncode} {r.stdout}{r.stderr}")
    assert marker.exists(), ("the control attack did not run the planted command on the host "
                             "(the attack test would prove nothing):\n" + "\n".join(log))


def quarantined_as(rel: str) -> str:
    """The name the audit gives .git/REL in the quarantine, after its
    "<time>-" prefix: ".git-commondir", ".git_modules-other"."""
    parent, _, name = f".git/{rel}".rpartition("/")
    return f"{parent.replace('/', '_')}-{name}"


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_stopped(rig, name):
    """Inside the sandbox the attack's decisive steps fail or are
    quarantined; the host's git status and commit do not run the planted
    command."""
    a = ATTACKS[name]
    ws = a.setup(rig.lz)
    marker = marker_for(rig.lz, name)
    rig.config({"bb": {}})
    p = rig.run("bb", sh(a.script(marker)), ws=ws)
    problems = []
    if p.returncode != 0:
        problems.append(f"the attack script ended with {p.returncode}")
    got = steps(p.stdout)
    succeeded = [s for s in a.blocked if got.get(s) != "FAIL"]
    if succeeded:
        problems.append(f"steps that succeeded inside the sandbox: {succeeded}")
    gd = ws / ".git"
    moved = sorted(q.name for q in (gd / QUARANTINE).iterdir()) \
        if (gd / QUARANTINE).is_dir() else []
    for rel in a.quarantined:
        if (gd / rel).exists() or not any(m.endswith("-" + quarantined_as(rel)) for m in moved):
            problems.append(f".git/{rel} was not quarantined (quarantine: {moved})")
        elif not ("Git Sentry" in p.stderr and "quarantined" in p.stderr and
                  f".git/{rel}" in p.stderr):
            problems.append(f"the session was not told that .git/{rel} was quarantined")
    # At once (the Domain may still be tearing down: only the marker counts
    # here), and again once it is gone (the teardown audit has run; the
    # host's Git must work too).
    dirs = a.host_dirs(rig.lz, ws)
    host = host_git_problem(rig.lz, dirs, marker, a.host_git_may_fail)
    if host and marker.exists():
        problems.append("right after the session: " + host)
    else:
        left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
        if left:
            problems.append("the Domain did not end:\n" + "\n".join(left))
        host = host_git_problem(rig.lz, dirs, marker, a.host_git_may_fail)
        if host:
            problems.append("after the Domain ended: " + host)
    if problems:
        pytest.fail("\n".join(problems) + f"\n--- inside the sandbox:\n{p.stdout}{p.stderr}",
                    pytrace=False)


# ---- Git works inside, and the host sees it at once ------------------------------------

def test_git_operations_inside_are_visible_on_the_host(rig):
    lz = rig.lz
    ws = new_repo(lz, "ws", {"a.txt": "one\n"}, message="initial")
    rig.config({"bb": {}})
    holder = rig.hold("bb")

    def inside(script):
        return ok(rig.run("bb", sh(f"set -e\n{script}")), script).stdout

    # status
    lz.write(ws / "new.txt", "new\n", mode=0o644)
    assert inside("git status --porcelain") == "?? new.txt\n"
    assert out(lz, ws, "status", "--porcelain") == "?? new.txt\n"
    # add
    inside("git add new.txt")
    assert out(lz, ws, "diff", "--cached", "--name-only") == "new.txt\n"
    # commit
    inside(f"{GIT_IN} commit -q -m 'commit inside'")
    assert out(lz, ws, "log", "-1", "--format=%s %an") == "commit inside Sandbox\n"
    assert out(lz, ws, "status", "--porcelain") == ""
    # diff
    inside("echo two >> a.txt")
    d_in = inside("git diff")
    assert "+two" in d_in and d_in == out(lz, ws, "diff")
    # stash and stash pop
    inside(f"{GIT_IN} stash -q")
    assert out(lz, ws, "status", "--porcelain") == ""
    assert out(lz, ws, "stash", "list").count("\n") == 1
    inside("git stash pop -q")
    assert out(lz, ws, "status", "--porcelain") == " M a.txt\n"
    assert out(lz, ws, "stash", "list") == ""
    inside(f"{GIT_IN} commit -q -am 'main: two'")
    # branch, checkout, two commits on the branch
    inside("git branch feature HEAD~1")
    assert "feature" in out(lz, ws, "branch", "--format=%(refname:short)").split()
    inside("git checkout -q feature")
    assert out(lz, ws, "rev-parse", "--abbrev-ref", "HEAD") == "feature\n"
    inside(f"echo f1 > f1.txt && git add f1.txt && {GIT_IN} commit -q -m 'feature 1' && "
           f"echo f2 > f2.txt && git add f2.txt && {GIT_IN} commit -q -m 'feature 2'")
    assert out(lz, ws, "log", "--format=%s", "main..feature") == "feature 2\nfeature 1\n"
    # rebase the two-commit branch onto main
    inside(f"{GIT_IN} rebase -q main")
    main_sha = out(lz, ws, "rev-parse", "main").strip()
    assert out(lz, ws, "merge-base", "main", "feature").strip() == main_sha
    assert out(lz, ws, "log", "--format=%s", "main..feature") == "feature 2\nfeature 1\n"
    assert out(lz, ws, "rev-parse", "--abbrev-ref", "HEAD") == "feature\n"
    assert (ws / "a.txt").read_text() == "one\ntwo\n" and (ws / "f2.txt").is_file()
    # log: the same history on both sides
    assert inside("git log --format='%H %s'") == out(lz, ws, "log", "--format=%H %s")
    assert out(lz, ws, "status", "--porcelain") == ""
    git(lz, ws, "fsck", "--no-progress")
    rig.release(holder)


def test_git_config_hooks_and_dot_git_are_protected_inside(rig):
    ws = new_repo(rig.lz, "ws")
    config = (ws / ".git" / "config").read_bytes()
    rig.config({"bb": {}})
    p = ok(rig.run("bb", sh(
        step("config-append", "echo '[core] fsmonitor = x' >> .git/config") +
        step("config-git", "git config core.fsmonitor x") +
        step("config-replace", "cp .git/config /tmp/c && mv /tmp/c .git/config") +
        step("config-rm", "rm -f .git/config") +
        step("hooks-new", "echo x > .git/hooks/pre-commit") +
        step("hooks-rename", "mv .git/hooks .git/hooks-aside") +
        step("mv-dot-git", "mv /workspace/.git /workspace/.git-moved") +
        step("git-status", "git status --porcelain")), ws=ws))
    got = steps(p.stdout)
    assert got == {"config-append": "FAIL", "config-git": "FAIL", "config-replace": "FAIL",
                   "config-rm": "FAIL", "hooks-new": "FAIL", "hooks-rename": "FAIL",
                   "mv-dot-git": "FAIL", "git-status": "OK"}, p.stdout + p.stderr
    assert (ws / ".git" / "config").read_bytes() == config
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not (ws / ".git-moved").exists() and (ws / ".git" / "HEAD").is_file()


def test_git_config_global_is_the_way_inside(rig):
    """(issue 26) What a careful user needs when `git config user.name x`
    fails inside: the failure is git's own on the held .git/config.lock
    (the message docs/git.md "Configuring Git in the sandbox" quotes), while
    `git config --global` writes the sandbox home's ~/.gitconfig, which a
    persistent /root keeps for the next generation, where commits use it.
    The host's .git/config and the host user's own global configuration stay
    as they were."""
    lz = rig.lz
    ws = new_repo(lz, "ws")
    config = (ws / ".git" / "config").read_bytes()
    host_global = (lz.home / ".gitconfig").read_bytes() if (lz.home / ".gitconfig").exists() \
        else None
    rig.config({"bb": {"persistent_dirs": ["/root"]}})
    p = ok(rig.run("bb", sh(
        step("local", "git config user.name Local") +
        "git config user.name Local 2>&1 | head -n 1\n" +
        step("global", "git config --global user.name Sandbox && "
                       "git config --global user.email sb@lazaret.invalid")), ws=ws))
    got = steps(p.stdout)
    assert got == {"local": "FAIL", "global": "OK"}, p.stdout + p.stderr
    assert "could not lock config file .git/config: File exists" in p.stdout, p.stdout
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    p = ok(rig.run("bb", sh("git config --show-origin user.name; echo x > f; git add f; "
                            "git commit -q -m sb; git log -1 --format=%an"), ws=ws))
    assert p.stdout == "file:/root/.gitconfig\tSandbox\nSandbox\n", p.stdout + p.stderr
    assert (ws / ".git" / "config").read_bytes() == config
    assert ((lz.home / ".gitconfig").read_bytes() if (lz.home / ".gitconfig").exists()
            else None) == host_global


NONREPO_QUARANTINE = "." + QUARANTINE


@pytest.mark.parametrize("then", ["sleep 1", "exit 0"])
def test_new_repository_inside_a_non_repository_is_quarantined(rig, then):
    """(issue 9) A workspace that is not a repository: a .git the sandbox
    makes at its top would be obeyed by the host's Git run there. It is moved
    into .lazaret-quarantine/ at once (docs/git.md, "Not a repository"), and
    the session is told."""
    marker = marker_for(rig.lz, "non-repo")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(
        f"git init -q; git config core.fsmonitor \"{planted(marker)}\"\n{then}"))
    assert "Git Sentry" in p.stderr and ".git" in p.stderr, \
        f"no Git Sentry report on the session's stderr: {p.stderr!r}"
    assert not (rig.ws / ".git").exists(), "the sandbox's repository stayed in the workspace"
    q = rig.ws / NONREPO_QUARANTINE
    assert any(e.name.endswith("-top-.git") for e in q.iterdir()), sorted(q.iterdir())
    # The host's Git in the workspace finds no repository, and runs nothing.
    git(rig.lz, rig.ws, "status", check=False)
    assert not marker.exists()


def test_control_new_repository_in_a_non_repository_is_obeyed_on_the_host(lz):
    """Control for the test above: the same repository, made on the host,
    makes the host's `git status` run the command."""
    ws = lz.mkdir("ws")
    marker = marker_for(lz, "non-repo")
    ok(lz.run_as_user(sh(f"git init -q && git config core.fsmonitor \"{planted(marker)}\""),
                      cwd=ws))
    git(lz, ws, "status", check=False)
    assert marker.exists()


def _gitlink_ws(lz):
    """A repository with a gitlink at vendor/x that is not checked out (its
    directory is empty): like a submodule nobody initialised."""
    ws = _plain(lz)
    head = out(lz, ws, "rev-parse", "HEAD").strip()
    lz.mkdir(ws / "vendor" / "x")
    git(lz, ws, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/x")
    git(lz, ws, "commit", "-q", "-m", "gitlink")
    return ws


GITLINK_MID_SESSION = ("git init -q vendor/x && {git} -C vendor/x commit -q --allow-empty -m x; "
                       "git -C vendor/x config core.fsmonitor \"{cmd}\"; echo PLANTED; sleep 4")


def test_repository_made_in_a_gitlink_mid_session_is_neutralised_at_once(rig):
    """(issue 9) A .git made inside a gitlink path while the session goes on:
    the host's `git status`, run in that moment, recurses into the gitlink
    and would obey its config. It must be gone within a moment, not at the
    session's end."""
    ws = _gitlink_ws(rig.lz)
    marker = marker_for(rig.lz, "gitlink")
    rig.config({"bb": {}})
    s = rig.start("bb", sh(GITLINK_MID_SESSION.format(git=GIT_IN, cmd=planted(marker))), ws=ws)
    s.read_until("PLANTED")
    time.sleep(0.5)
    p = git(rig.lz, ws, "status", check=False)
    s.finish()
    assert not marker.exists(), f"the host's git status ran the planted command:\n{p.stdout}"
    assert not (ws / "vendor" / "x" / ".git").exists()


def test_control_repository_in_a_gitlink_is_obeyed_on_the_host(lz):
    ws = _gitlink_ws(lz)
    marker = marker_for(lz, "gitlink")
    lz.run_as_user(sh(GITLINK_MID_SESSION.format(git=GIT_IN, cmd=planted(marker))
                      .replace("sleep 4", "true")), cwd=ws)
    git(lz, ws, "status", check=False)
    assert marker.exists()


UNMOVABLE = ("tmp=$(mktemp -d); git init -q $tmp/r; git -C $tmp/r config core.fsmonitor "
             "\"{cmd}\"; mkdir -p sub/r; {chown}cp -a $tmp/r/.git sub/r/.git; echo PLANTED; "
             "sleep 3; touch AFTER")

def test_what_cannot_be_neutralised_stops_the_sandbox_and_the_next_start(rig):
    """(issue 9, fail closed) A repository inside a directory the sandbox gave
    to another uid, which only the audit's eye can move aside (docs/git.md
    "Directories closed to the developer") — and the eye cannot start: the
    developer's subordinate ranges were taken away while the Domain ran. (The
    sandbox itself cannot make what the eye cannot move: its gofer runs as
    root of a namespace with the same map and no more rights.) The sandbox
    is stopped at once, every session told why, and the next start is
    refused until the entry is gone."""
    ws = _plain(rig.lz)
    marker = marker_for(rig.lz, "unmovable")
    rig.config({"bb": {}})
    watcher = rig.start("bb", sh("echo WATCHING; sleep 20"), ws=ws)
    watcher.read_until("WATCHING")
    saved = {f: Path(f).read_text() for f in ("/etc/subuid", "/etc/subgid")}
    try:
        for f, text in saved.items():
            Path(f).write_text("".join(line + "\n" for line in text.splitlines()
                                       if not line.startswith(f"{rig.lz.user.name}:")))
        p = rig.run("bb", sh(UNMOVABLE.format(cmd=planted(marker),
                                               chown="chown 1000:1000 sub/r && ")), ws=ws)
    finally:
        for f, text in saved.items():
            Path(f).write_text(text)
    w = watcher.finish()
    assert p.returncode != 0, f"the session went on:\n{p.stdout}{p.stderr}"
    assert not (ws / "AFTER").exists(), "the sandbox was not stopped"
    for r in (p, w):
        assert "Git Sentry" in r.stderr and "sub/r/.git" in r.stderr, \
            f"a session was not told why the sandbox stopped: {r.stderr!r}"
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    again = rig.run("bb", sh("touch STARTED"), ws=ws)
    assert again.returncode == 125 and not (ws / "STARTED").exists(), \
        f"the next start was not refused: {again.returncode}\n{again.stderr}"
    assert "sub/r/.git" in again.stderr, again.stderr
    # Once the entry is gone, the Domain starts again.
    shutil.rmtree(ws / "sub")
    ok(rig.run("bb", sh("touch STARTED"), ws=ws))
    assert (ws / "STARTED").exists()
    assert not marker.exists()


@pytest.mark.parametrize("chown", ["", "chown 1000:1000 sub/r && "], ids=["own", "other-uid"])
def test_control_a_movable_repository_does_not_stop_the_sandbox(rig, chown):
    """Control: the same script in a directory of the sandbox's own ids —
    its root's, or another of its users' (attack round i23c: the eye moves
    what the developer cannot) — is neutralised (moved aside) and the
    session runs to its end: the stop above is the fail-closed path, not the
    attack as such."""
    ws = _plain(rig.lz)
    marker = marker_for(rig.lz, "movable")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(UNMOVABLE.format(cmd=planted(marker), chown=chown)), ws=ws)
    assert (ws / "AFTER").exists(), p.stderr
    assert "quarantined" in p.stderr and "sub/r/.git" in p.stderr, p.stderr
    assert not (ws / "sub" / "r" / ".git").exists()


def test_coordinator_killed_before_its_audit_is_caught_at_the_next_start(rig):
    """(issue 9) The coordinator dies (SIGKILL) after the sandbox made a
    repository but before the audit moved it (here: the coordinator is
    stopped first, so no audit runs). The next start audits the workspace
    against the dead generation's baseline and moves it aside, instead of
    taking it for the developer's own."""
    ws = _plain(rig.lz)
    marker = marker_for(rig.lz, "crash")
    rig.config({"bb": {}})
    s = rig.start("bb", sh("echo READY; while [ ! -e GO ]; do sleep 0.05; done; "
                           "mkdir -p sub && git init -q sub && "
                           f"git -C sub config core.fsmonitor \"{planted(marker)}\" && "
                           "echo PLANTED; sleep 30"), ws=ws)
    s.read_until("READY")
    coords = rig.coordinators()
    assert len(coords) == 1, coords
    os.kill(coords[0].pid, signal.SIGSTOP)
    try:
        rig.lz.write(ws / "GO", "", mode=0o644)
        s.read_until("PLANTED")
    finally:
        os.kill(coords[0].pid, signal.SIGKILL)
        os.kill(coords[0].pid, signal.SIGCONT)
    s.finish(timeout=30)
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert (ws / "sub" / ".git" / "config").exists(), "no audit was supposed to run"
    p = ok(rig.run("bb", sh("echo again"), ws=ws))
    assert not (ws / "sub" / ".git").exists(), f"not neutralised at the next start\n{p.stderr}"
    git(rig.lz, ws / "sub", "status")
    assert not marker.exists()


def test_control_a_crashed_generations_repository_is_obeyed(lz):
    """Control: the repository the crashed generation left, as it lies there,
    makes the host's git status run the command."""
    ws = _plain(lz)
    marker = marker_for(lz, "crash")
    lz.run_as_user(sh("mkdir -p sub && git init -q sub && "
                      f"git -C sub config core.fsmonitor \"{planted(marker)}\""), cwd=ws)
    git(lz, ws / "sub", "status")
    assert marker.exists()


def test_audit_never_follows_a_workspace_symlink_out(rig):
    """(issue 9 item 2) A workspace symlink to a host directory plus an index
    gitlink below it: the audit must not touch the host directory (the old
    audit moved <host dir>/x/.git into the workspace)."""
    lz = rig.lz
    hostdir = lz.mkdir("hostdir")
    git(lz, hostdir, "init", "-q", "x")
    ws = _plain(lz)
    head = out(lz, ws, "rev-parse", "HEAD").strip()
    rig.config({"bb": {}})
    p = rig.run("bb", sh(f"ln -s {hostdir} evil && "
                         f"git update-index --add --cacheinfo 160000,{head},evil/x; "
                         "sleep 1; echo done"), ws=ws)
    assert "done" in p.stdout, p.stderr
    wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert (hostdir / "x" / ".git" / "HEAD").is_file(), \
        f"the host directory's repository was moved: {list(hostdir.rglob('*'))[:10]}"
    # Control: the sandbox's link led to the host directory when followed
    # (it has been moved aside since: a link out of the workspace to the
    # developer's own directory is quarantined too).
    link = ws / "evil"
    if not os.path.lexists(link):
        moved = [e for e in (ws / ".git" / QUARANTINE).iterdir() if e.name.endswith("-top-evil")]
        assert moved, "the link is neither in place nor in the quarantine"
        link = moved[0]
    assert os.path.realpath(link / "x" / ".git") == str(hostdir / "x" / ".git")


def test_ignored_copy_symlink_is_never_bound(rig):
    """(issue 9 item 1) The sandbox plants a symlink to a host directory in
    its own copy of an ignored directory, then changes .gitignore so that a
    later generation isolates the symlink's path itself: that generation
    must refuse to start (never bind the host directory read-write)."""
    lz = rig.lz
    target = lz.mkdir("private")
    lz.write(target / "keep", "developer's\n", mode=0o644)
    ws = new_repo(lz, "ws", {"README": "hello\n", ".gitignore": "d/\n"})
    rig.config({"bb": {}})
    # gen 1: d/ is the Domain's copy; plant d/x -> the host directory there
    ok(rig.run("bb", sh(f"ln -s {target} d/x && printf 'd/x/\\n' > .gitignore"), ws=ws))
    wait_torn_down(lz, TEARDOWN_TIMEOUT)
    # d/ stays the Domain's copy (a path once isolated stays so, docs/git.md),
    # so the sandbox cannot make the host's d/x any more; the developer
    # does, and Git now lists d/x/ by the rule the sandbox wrote.
    ok(lz.run_as_user(["mkdir", "-p", str(ws / "d" / "x")]))
    droot = domain_root(rig, ws)
    copy = droot / "ignored" / "d" / "x"
    assert copy.is_symlink(), "the plant did not land in the Domain's copy"
    # Control: a bind of that copy by its path would be the host directory.
    assert os.path.realpath(copy) == str(target)
    # gen 2: the copy of d/x is the symlink: it is never bound by its path
    # (refused, or d/ stays one copy in which the link points nowhere).
    p = rig.run("bb", sh("echo pwned > d/x/PWNED; ls d/x"), ws=ws)
    if p.returncode == 125:
        assert "ignored" in p.stderr and "d/x" in p.stderr, p.stderr
    assert not (target / "PWNED").exists(), p.stdout + p.stderr
    assert sorted(e.name for e in target.iterdir()) == ["keep"]
def test_forbidden_entry_made_twice_in_one_second_is_quarantined(rig):
    """The quarantine name is "<time in seconds>-<where>-<name>": a second
    forbidden .git/worktrees within the same second must be moved aside too,
    not left in place until some later audit."""
    ws = _plain(rig.lz)
    rig.config({"bb": {}})
    s = rig.start("bb", sh(
        # staged inside .git: a rename, not a copy across the .git mount
        "mkdir -p .git/s1/a .git/s2/a && echo 1 > .git/s1/a/f && echo 2 > .git/s2/a/f\n"
        # start at the beginning of a second, so that both land in one
        "t=$(date +%s); while [ \"$(date +%s)\" = \"$t\" ]; do :; done\n"
        "mv .git/s1 .git/worktrees && sleep 0.2 && mv .git/s2 .git/worktrees && echo PLANTED\n"
        "sleep 4"), ws=ws)
    s.read_until("PLANTED")
    deadline = time.monotonic() + 2
    while (ws / ".git" / "worktrees").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    still = (ws / ".git" / "worktrees").exists()
    moved = sorted(q.name for q in (ws / ".git" / QUARANTINE).iterdir()) \
        if (ws / ".git" / QUARANTINE).is_dir() else []
    r = s.finish()
    if still:
        pytest.fail(f"2 s after the sandbox made .git/worktrees the second time it is still "
                    f"there (quarantine: {moved}); the coordinator's log says why\n{r.stderr}",
                    pytrace=False)


# ---- git-ignored paths ------------------------------------------------------------------

def domain_root(rig, ws) -> Path:
    """<data_root>/domains/<domain id>, as `lazaret config check --json` says."""
    p = ok(rig.lz.run(["config", "check", "bb", "--workspace", str(ws), "--json"]))
    c = json.loads(p.stdout)
    root = Path(c["domain_root"])
    assert root == Path(c["storage_root"]) / "domains" / c["domain_id"], c
    return root


def _ignored_repo(lz, secret):
    ws = new_repo(lz, "ws", {"README": "hello\n", ".gitignore": ".env\nnode_modules/\n"})
    lz.write(ws / ".env", f"SECRET={secret}\n", mode=0o644)
    assert not (ws / "node_modules").exists()
    return ws


def test_ignored_paths_are_the_domains_own(rig):
    """The sandbox's .env and node_modules/ are the Domain's copies, kept
    across generations. The empty placeholder Lazaret makes on the host for
    node_modules/ (so that it can be isolated) is gone once the Domain ends
    and made again at the next start (issue 26). Controls: the developer's
    own empty ignored directory (keep/, there before the run) stays, and so
    does a placeholder the developer put a file into meanwhile."""
    lz = rig.lz
    secret = "lzsecret-" + secrets.token_hex(8)
    ws = _ignored_repo(lz, secret)
    lz.write(ws / ".git" / "info" / "exclude", "keep/\n", mode=0o644)
    lz.mkdir(ws / "keep")
    rig.config({"bb": {}})
    p = ok(rig.run("bb", sh(
        "set -e\n"
        "echo \"env=[$(cat .env)]\"\n"
        "echo sandbox-env > .env\n"
        "mkdir -p node_modules/pkg && echo module > node_modules/pkg/index.js\n"
        "git status --porcelain\n"), ws=ws))
    assert p.stdout == "env=[]\n", f"inside: {p.stdout!r}"
    assert secret not in p.stdout
    assert (ws / ".env").read_text() == f"SECRET={secret}\n", "the sandbox changed the host .env"
    assert not (ws / "node_modules").exists() or list((ws / "node_modules").iterdir()) == [], \
        f"the sandbox's node_modules reached the host: {list((ws / 'node_modules').rglob('*'))}"
    assert out(lz, ws, "status", "--porcelain") == ""

    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "the first generation did not end:\n" + "\n".join(left)
    ignored = domain_root(rig, ws) / "ignored"
    assert (ignored / ".env").read_text() == "sandbox-env\n", sorted(ignored.rglob("*"))
    assert (ignored / "node_modules" / "pkg" / "index.js").read_text() == "module\n"
    assert not (ws / "node_modules").exists(), "the placeholder outlived the Domain"
    assert (ws / "keep").is_dir(), "the developer's own empty ignored directory was removed"

    # A new generation gets the same copies (the placeholder made again, or
    # node_modules/ would not be isolated); a file the developer puts into
    # the placeholder on the host keeps it.
    holder = rig.hold("bb", ws=ws, script="cat .env node_modules/pkg/index.js")
    assert len(rig.generations_started()) == 2, rig.generations_started()
    assert list((ws / "node_modules").iterdir()) == []
    lz.write(ws / "node_modules" / "mine.txt", "host\n")
    r = rig.release(holder)
    assert "sandbox-env\nmodule\n" in r.stdout, r.stdout
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    assert (ws / ".env").read_text() == f"SECRET={secret}\n"
    assert [x.name for x in (ws / "node_modules").iterdir()] == ["mine.txt"]
    assert (ws / "keep").is_dir()


def test_isolate_gitignored_false_shares_ignored_files(rig):
    secret = "lzsecret-" + secrets.token_hex(8)
    ws = _ignored_repo(rig.lz, secret)
    rig.config({"bb": {"isolate_gitignored": False}})
    p = ok(rig.run("bb", sh("cat .env; mkdir -p node_modules && echo m > node_modules/x"),
                   ws=ws))
    assert p.stdout == f"SECRET={secret}\n"
    assert (ws / "node_modules" / "x").read_text() == "m\n"


# ---- found by the outside attacker (issue 9, attack round 1) -----------------------------

def _two_commits(lz):
    ws = _plain(lz)
    lz.write(ws / "second", "2\n", mode=0o644)
    git(lz, ws, "add", "second")
    git(lz, ws, "commit", "-q", "-m", "second")
    return ws


def rebase_exec(marker, extra="") -> str:
    """Stop an interactive rebase at `break` with an `exec` still to do: the
    host's `git rebase --continue` runs it."""
    todo = f"break\\nexec touch {marker}\\n{extra}"
    return f"GIT_SEQUENCE_EDITOR=\"printf '{todo}' >\" {GIT_IN} rebase -q -i HEAD~1; echo STOPPED\n"


def test_rebase_exec_left_by_the_sandbox_is_never_run_by_the_host(rig):
    """G01: the sandbox's todo list with an `exec` line is moved aside at
    once; the host's `git rebase --continue` has nothing to continue."""
    ws = _two_commits(rig.lz)
    marker = marker_for(rig.lz, "rebase")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(rebase_exec(marker) + "sleep 1"), ws=ws)
    assert "STOPPED" in p.stdout, p.stderr
    assert "Git Sentry" in p.stderr and "rebase-merge" in p.stderr, p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not (ws / ".git" / "rebase-merge").exists()
    git(rig.lz, ws, "rebase", "--continue", check=False)
    assert not marker.exists(), "the host's git rebase --continue ran the sandbox's exec"


def test_control_rebase_exec_is_run_by_the_host(lz):
    ws = _two_commits(lz)
    marker = marker_for(lz, "rebase")
    lz.run_as_user(sh(rebase_exec(marker)), cwd=ws)
    assert (ws / ".git" / "rebase-merge").is_dir()
    git(lz, ws, "rebase", "--continue", check=False)
    assert marker.exists()


def test_rebase_the_sandbox_left_stopped_is_set_aside_at_teardown(rig):
    """A rebase the sandbox stopped (no exec in it) works inside while the
    Domain runs, but its plan is the sandbox's: it is moved aside when the
    Domain ends, so the host never carries it on."""
    ws = _two_commits(rig.lz)
    rig.config({"bb": {}})
    ok(rig.run("bb", sh(f"GIT_SEQUENCE_EDITOR=\"printf 'break\\\\n' >\" {GIT_IN} rebase -q -i "
                        "HEAD~1; test -d .git/rebase-merge && echo STOPPED"), ws=ws))
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    assert not (ws / ".git" / "rebase-merge").exists()
    assert any(q.name.endswith("-.git-rebase-merge")
               for q in (ws / ".git" / QUARANTINE).iterdir())


def test_symlink_into_a_read_write_volume_repository_is_quarantined(rig):
    """G03: a repository in a read-write volume (sandbox-written, outside the
    audited tree) and a workspace symlink to it: the host's git run "in the
    workspace" through the symlink would obey it. The symlink is moved
    aside."""
    lz = rig.lz
    lz.mkdir("vol")
    ws = _plain(lz)
    marker = marker_for(lz, "volume")
    rig.config({"bb": {"persistent_dirs": ["/root"], "volumes": [
        {"host": "~/vol", "container": "/root/vol", "kind": "directory",
         "access": "read-write"}]}})
    p = rig.run("bb", sh("git init -q /root/vol/r && "
                         f"git -C /root/vol/r config core.fsmonitor \"{planted(marker)}\" && "
                         "ln -s ../vol/r docs; sleep 1; echo done"), ws=ws)
    assert "done" in p.stdout, p.stderr
    wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not (ws / "docs").is_symlink(), "the symlink into the volume stayed"
    assert (lz.home / "vol" / "r" / ".git").is_dir(), "(the volume's content is the sandbox's)"
    # Control: through the symlink's path the volume's repository is obeyed.
    (ws / "docs").symlink_to("../vol/r")
    git(lz, ws / "docs", "status", check=False)
    assert marker.exists(), "control: the repository in the volume was not obeyed"


def test_names_in_notices_cannot_drive_another_sessions_terminal(rig):
    """T01: a quarantined name full of terminal controls (CR, ESC sequences,
    OSC 52) reaches the other sessions' stderr and the log escaped."""
    ws = _plain(rig.lz)
    rig.config({"bb": {}})
    watcher = rig.start("bb", sh("echo WATCHING; sleep 4"), ws=ws)
    watcher.read_until("WATCHING")
    name = "x\\r\\033[2K\\033]52;c;cHduZWQ=\\007\\033[8m\\342\\200\\256"  # ... U+202E
    rig.run("bb", sh(f"n=$(printf '{name}'); mkdir -p \"$n\" && git init -q \"$n\"; sleep 1"),
            ws=ws)
    w = watcher.finish()
    assert "Git Sentry" in w.stderr, w.stderr
    assert "\x1b" not in w.stderr and "\r" not in w.stderr.replace("\r\n", ""), repr(w.stderr)
    assert "\\x1b" in w.stderr and "\u202e" not in w.stderr, repr(w.stderr)
    log = next(rig.lz.root.rglob("logs/coordinator.log")).read_bytes()
    assert b"\x1b" not in log, "raw escape sequences in the coordinator's log"
    # Control: the name really holds the controls (on the host).
    assert any("\x1b" in e.name for e in (ws / ".git" / QUARANTINE).iterdir()) or \
        any("\x1b" in e.name for e in ws.iterdir())


# ---- found by the outside attacker (issue 9, attack round 2) -----------------------------

def _root_head_and_config(marker):
    # Half a Git directory at the top (HEAD and a config, no objects/), and
    # .gitignore patterns naming the other half, for later.
    return (step("head", "echo 'ref: refs/heads/main' > HEAD") +
            put("config", "config", worktree_config(marker)) +
            step("patterns", "printf 'objects/\\nrefs/\\n' >> .gitignore") + "sleep 1\n")


def test_half_a_git_directory_at_the_top_is_set_aside(rig):
    """A01: the sandbox leaves HEAD and a config at the top and .gitignore
    patterns objects/ and refs/ (which once made Lazaret itself create the
    rest as placeholders); a later session breaks .git/HEAD. The host's git
    status in the workspace must not obey the sandbox's config."""
    ws = _plain(rig.lz)
    marker = marker_for(rig.lz, "half")
    rig.config({"bb": {}})
    rig.run("bb", sh(_root_head_and_config(marker)), ws=ws)
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    rig.run("bb", sh("echo garbage > .git/HEAD; sleep 1"), ws=ws)
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws, "status", check=False)
    assert not marker.exists(), "the host's Git obeyed the config the sandbox left at the top"
    assert not (ws / "objects").exists() or not (ws / "HEAD").exists()


def test_control_half_a_git_directory_completed_is_obeyed(lz):
    ws = _plain(lz)
    marker = marker_for(lz, "half")
    lz.run_as_user(sh(_root_head_and_config(marker) + "mkdir -p objects refs/heads; "
                      "echo garbage > .git/HEAD"), cwd=ws)
    git(lz, ws, "status", check=False)
    assert marker.exists()


def _ignored_nested(lz):
    ws = _plain(lz)
    lz.mkdir(ws / "a" / "b")
    lz.write(ws / "a" / "b" / "keep", "", mode=0o644)
    lz.write(ws / ".gitignore", "/a/b/\n", mode=0o644)
    git(lz, ws, "add", ".gitignore")
    git(lz, ws, "commit", "-q", "-m", "ignore a/b")
    return ws


def ignored_parent_rename(marker):
    return (step("rename", "mv a a2") + step("mkdir", "mkdir -p a/b") +
            step("init", f"git init -q a/b && {GIT_IN} -C a/b commit -q --allow-empty -m x") +
            step("config", f"git -C a/b config core.fsmonitor \"{planted(marker)}\"") +
            step("gitlink", "git update-index --add --cacheinfo "
                            "160000,$(git -C a/b rev-parse HEAD),a/b") + "sleep 1\n")


def test_parent_of_an_ignored_path_cannot_be_renamed_away(rig):
    """C01: the parent of an ignored path (the Domain's copy is mounted
    there) renamed inside, a new directory under the old name, a repository
    in it registered as a gitlink: the audit skipped the path by its name.
    The parent is a bind point now, and the path is skipped only while it is
    the planned object."""
    ws = _ignored_nested(rig.lz)
    marker = marker_for(rig.lz, "ignored-parent")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(ignored_parent_rename(marker)), ws=ws)
    assert steps(p.stdout).get("rename") == "FAIL", p.stdout
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws, "status", check=False)
    assert not marker.exists()


def test_control_ignored_parent_rename_is_obeyed(lz):
    ws = _ignored_nested(lz)
    marker = marker_for(lz, "ignored-parent")
    p = lz.run_as_user(sh(ignored_parent_rename(marker)), cwd=ws)
    assert all(v == "OK" for v in steps(p.stdout).values()), p.stdout
    git(lz, ws, "status", check=False)
    assert marker.exists()


def symlink_into_git_internals(marker):
    return (step("init", "git init -q .git/objects/zz/r") +
            step("config", f"git -C .git/objects/zz/r config core.fsmonitor \"{planted(marker)}\"")
            + step("link", "ln -s .git/objects/zz/r docs") + "sleep 1\n")


def test_symlink_into_git_internals_is_quarantined(rig):
    """B01: a repository built inside .git/objects (which the audit does not
    walk) and a workspace symlink to it."""
    ws = _plain(rig.lz)
    marker = marker_for(rig.lz, "internals")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(symlink_into_git_internals(marker)), ws=ws)
    assert "Git Sentry" in p.stderr and "docs" in p.stderr, p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not os.path.lexists(ws / "docs")


def test_control_symlink_into_git_internals_is_obeyed(lz):
    ws = _plain(lz)
    marker = marker_for(lz, "internals")
    lz.run_as_user(sh(symlink_into_git_internals(marker)), cwd=ws)
    git(lz, ws / "docs", "status", check=False)
    assert marker.exists()


# ---- found by the outside attacker (issue 9, attack round 3) -----------------------------

def _repo_in_internals(marker):
    return (step("init", "git init -q .git/objects/zz/r") +
            put("config", ".git/objects/zz/r/.git/config",
                f"[core]\n\tfsmonitor = {planted(marker)}\n", append=True) + "sleep 1\n")


ATTACKS.update({
    # X07: a repository inside the Git directory's internals (reachable
    # through a link, or by git -C)
    "repository-in-git-internals": Attack(_plain, _repo_in_internals,
                                          host_dirs=_nested_dirs(".git/objects/zz/r")),
})


GIT_SYMLINKS = ("rm -f .git/COMMIT_EDITMSG && ln -s {v1} .git/COMMIT_EDITMSG && "
                "rm -f .git/logs/HEAD && ln -s {v2} .git/logs/HEAD && "
                "ln -s {v3} .git/FETCH_HEAD && ln -s {v4} .git/MERGE_MSG; echo PLANTED")


def _victims(lz):
    v = [lz.home / f"VICTIM{i}" for i in range(1, 5)]
    v[0].write_text("precious\n")
    v[2].write_text("precious\n")
    v[3].write_text("secret of the developer\n")
    return v


def _host_after_git_symlinks(lz, ws):
    lz.write(ws / "more", "1\n", mode=0o644)
    git(lz, ws, "add", "more")
    git(lz, ws, "commit", "-q", "-m", "developer commit", check=False)
    git(lz, ws, "checkout", "-q", "-b", "topic", check=False)
    git(lz, ws, "fetch", "-q", str(ws), check=False)


def test_symlinks_in_the_git_directory_never_lead_host_git_out(rig):
    """X01, X01b, X02, X08: symlinks the sandbox puts in .git (COMMIT_EDITMSG,
    the reflog, FETCH_HEAD, MERGE_MSG) to host files: the host's git commit,
    checkout and fetch would write them (a reflog appended to ~/.bashrc runs
    code) or read them into a commit. They are moved aside at once."""
    ws = _plain(rig.lz)
    v = _victims(rig.lz)
    rig.config({"bb": {}})
    p = rig.run("bb", sh(GIT_SYMLINKS.format(v1=v[0], v2=v[1], v3=v[2], v4=v[3]) + "; sleep 1"),
                ws=ws)
    assert "PLANTED" in p.stdout, p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    for name in ("COMMIT_EDITMSG", "logs/HEAD", "FETCH_HEAD", "MERGE_MSG"):
        assert not (ws / ".git" / name).is_symlink(), f".git/{name} is still a symlink"
    _host_after_git_symlinks(rig.lz, ws)
    assert v[0].read_text() == "precious\n" and v[2].read_text() == "precious\n"
    assert not v[1].exists(), "the host's reflog went into a file outside the workspace"


def test_control_symlinks_in_the_git_directory_lead_host_git_out(lz):
    ws = _plain(lz)
    v = _victims(lz)
    lz.run_as_user(sh(GIT_SYMLINKS.format(v1=v[0], v2=v[1], v3=v[2], v4=v[3])), cwd=ws)
    _host_after_git_symlinks(lz, ws)
    assert v[0].read_text() != "precious\n" or v[1].exists() or v[2].read_text() != "precious\n"


def test_symlink_through_proc_is_quarantined(rig):
    """X05: a link through /proc/self/cwd means what the developer's shell
    makes of it, not the coordinator."""
    ws = _plain(rig.lz)
    rig.config({"bb": {}})
    rig.run("bb", sh("mkdir -p sub && ln -s /proc/self/cwd/../.git/objects/zz/r sub/docs; "
                     "sleep 1"), ws=ws)
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not os.path.lexists(ws / "sub" / "docs")


def _stopped_rebase(lz):
    """The developer's own rebase, stopped at a `break` before the start."""
    ws = _two_commits(lz)
    p = lz.run_as_user(sh(f"GIT_SEQUENCE_EDITOR=\"printf 'break\\\\n' >\" {GIT_IN} "
                          "rebase -q -i HEAD~1"), cwd=ws)
    assert (ws / ".git" / "rebase-merge").is_dir(), p.stderr
    return ws


def padded_exec(marker) -> str:
    # (made inside: a command line that long would not fit a RUN message)
    return (f"pad=$(printf '%4093s' ''); printf '%sexec touch {marker}\\n' \"$pad\" "
            ">> .git/rebase-merge/git-rebase-todo; echo PLANTED\n")


def test_padded_exec_in_the_developers_own_rebase_is_caught(rig):
    """X04: an exec line padded so that a fixed-size line read splits the
    word, added to the developer's own stopped rebase."""
    ws = _stopped_rebase(rig.lz)
    marker = marker_for(rig.lz, "padded")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(padded_exec(marker) + "sleep 1"), ws=ws)
    assert "PLANTED" in p.stdout, p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws, "rebase", "--continue", check=False)
    assert not marker.exists()


def test_control_padded_exec_is_run_by_the_host(lz):
    ws = _stopped_rebase(lz)
    marker = marker_for(lz, "padded")
    lz.run_as_user(sh(padded_exec(marker)), cwd=ws)
    git(lz, ws, "rebase", "--continue", check=False)
    assert marker.exists()


def _nested_with_hooks_path(lz):
    ws = _plain(lz)
    sub = new_repo(lz, "ws/sub", {"s": "s\n", ".githooks/README": "hooks\n"})
    git(lz, sub, "config", "core.hooksPath", ".githooks")
    git(lz, sub, "config", "include.path", "../shared.gitconfig")
    lz.write(sub / "shared.gitconfig", "", mode=0o644)
    return ws


def nested_hooks(marker) -> str:
    return (put_hook("hook", "sub/.githooks/post-checkout", marker) +
            put("include", "sub/shared.gitconfig", f"[core]\n\tfsmonitor = {planted(marker)}\n"))


def test_nested_repositorys_hooks_path_and_include_are_protected(rig):
    """X10: the developer's nested repository names a hooks directory and an
    include inside the workspace: both read-only, like the top's."""
    ws = _nested_with_hooks_path(rig.lz)
    marker = marker_for(rig.lz, "nested-hooks")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(nested_hooks(marker)), ws=ws)
    got = steps(p.stdout)
    assert got.get("hook") == "FAIL" and got.get("include") == "FAIL", p.stdout
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws / "sub", "status", check=False)
    git(rig.lz, ws / "sub", "checkout", "-q", "-b", "t", check=False)
    assert not marker.exists()


def test_control_nested_repositorys_hooks_path_and_include_are_obeyed(lz):
    ws = _nested_with_hooks_path(lz)
    marker = marker_for(lz, "nested-hooks")
    lz.run_as_user(sh(nested_hooks(marker)), cwd=ws)
    git(lz, ws / "sub", "status", check=False)
    git(lz, ws / "sub", "checkout", "-q", "-b", "t", check=False)
    assert marker.exists()


def _three_commits(lz):
    ws = _two_commits(lz)
    lz.write(ws / "third", "3\n", mode=0o644)
    git(lz, ws, "add", "third")
    git(lz, ws, "commit", "-q", "-m", "third")
    return ws


def strategy_script(marker) -> str:
    """A rebase stopped at an `edit`, amended (so the next pick is a real
    merge), whose strategy is "a/x": Git runs `git merge-a/x`, which is the
    path of a file of the sandbox's."""
    return (f"GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' {GIT_IN} rebase -q -i HEAD~2 "
            f">/dev/null 2>&1; {GIT_IN} commit -q --amend -m amended; "
            f"mkdir -p git-merge-a && printf '#!/bin/sh\\ntouch {marker}\\nexit 1\\n' > "
            "git-merge-a/x && chmod +x git-merge-a/x && echo a/x > .git/rebase-merge/strategy "
            "&& echo PLANTED\n")


def test_rebase_with_a_strategy_of_the_sandboxs_is_set_aside(rig):
    """X03: no exec line, but a merge strategy naming a file the sandbox
    wrote: set aside at once."""
    ws = _three_commits(rig.lz)
    marker = marker_for(rig.lz, "strategy")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(strategy_script(marker) + "sleep 1; test -d .git/rebase-merge || "
                                                    "echo SET-ASIDE"), ws=ws)
    assert "PLANTED" in p.stdout and "SET-ASIDE" in p.stdout, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws, "rebase", "--continue", check=False)
    assert not marker.exists()


def test_control_rebase_strategy_runs_a_workspace_file(lz):
    ws = _three_commits(lz)
    marker = marker_for(lz, "strategy")
    p = lz.run_as_user(sh(strategy_script(marker)), cwd=ws)
    assert "PLANTED" in p.stdout, p.stdout + p.stderr
    git(lz, ws, "rebase", "--continue", check=False)
    assert marker.exists()


# ---- found by the outside attacker (issue 9, attack round 4) -----------------------------

def spaced_strategy(marker) -> str:
    """A strategy whose first word is Git's own: Git runs `git merge-ort a/x
    <base> -- ...`, here /bin/sh on a script named after the base commit."""
    return (f"GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' {GIT_IN} rebase -q -i HEAD~2 "
            f">/dev/null 2>&1; {GIT_IN} commit -q --amend -m amended; "
            "n=$(awk '/^pick/{print $2; exit}' .git/rebase-merge/git-rebase-todo); "
            "b=$(git rev-parse $n^); mkdir -p 'git-merge-ort a' && "
            "ln -sf /bin/sh 'git-merge-ort a/x' && "
            f"printf 'touch {marker}\\nexit 1\\n' > $b && "
            "echo 'ort a/x' > .git/rebase-merge/strategy && echo PLANTED\n")


def test_strategy_with_a_space_is_set_aside(rig):
    """Y01: "ort a/x" — the first word is Git's, the whole line is a path."""
    ws = _three_commits(rig.lz)
    marker = marker_for(rig.lz, "spaced")
    rig.config({"bb": {}})
    p = rig.run("bb", sh(spaced_strategy(marker) + "sleep 1"), ws=ws)
    assert "PLANTED" in p.stdout, p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws, "rebase", "--continue", check=False)
    assert not marker.exists()


def test_control_strategy_with_a_space_runs_a_workspace_file(lz):
    ws = _three_commits(lz)
    marker = marker_for(lz, "spaced")
    p = lz.run_as_user(sh(spaced_strategy(marker)), cwd=ws)
    assert "PLANTED" in p.stdout, p.stdout + p.stderr
    git(lz, ws, "rebase", "--continue", check=False)
    assert marker.exists()


def config_target_attack_is_blocked(rig, setup, script, name):
    """The developer's configuration names a hooks directory and an include
    inside the workspace (setup); the sandbox writes a hook and the include
    (script, steps "hook" and "include"): both must fail inside, and the
    host's git status and checkout run nothing."""
    ws = setup(rig.lz)
    marker = marker_for(rig.lz, name)
    rig.config({"bb": {}})
    p = rig.run("bb", sh(script(marker)), ws=ws)
    got = steps(p.stdout)
    assert got.get("hook") == "FAIL" and got.get("include") == "FAIL", p.stdout + p.stderr
    wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    git(rig.lz, ws, "status", check=False)
    git(rig.lz, ws, "checkout", "-q", "-b", "t", check=False)
    assert not marker.exists()


def config_target_attack_works_on_the_host(lz, setup, script, name):
    """Control of config_target_attack_is_blocked: on the host, the same
    script makes git status or checkout run the planted command."""
    ws = setup(lz)
    marker = marker_for(lz, name)
    lz.run_as_user(sh(script(marker)), cwd=ws)
    git(lz, ws, "status", check=False)
    git(lz, ws, "checkout", "-q", "-b", "t", check=False)
    assert marker.exists()


def _deep_missing_config_targets(lz):
    ws = _plain(lz)
    git(lz, ws, "config", "core.hooksPath", ".github/hooks")
    git(lz, ws, "config", "include.path", "../conf/git/extra")
    assert not (ws / ".github").exists() and not (ws / "conf").exists()
    return ws


def deep_missing(marker) -> str:
    return (step("hook", "mkdir -p .github/hooks && cat > .github/hooks/post-checkout <<'LZEOF' "
                         f"&& chmod +x .github/hooks/post-checkout\n{hook(marker)}LZEOF") +
            step("include", "mkdir -p conf/git && cat > conf/git/extra <<'LZEOF'\n"
                            f"[core]\n\tfsmonitor = {planted(marker)}\nLZEOF"))


def test_hooks_path_and_include_below_missing_directories_are_protected(rig):
    """Y04, Y06: a hooks directory or an include several missing levels
    deep: every level is made (and protected) before the start."""
    config_target_attack_is_blocked(rig, _deep_missing_config_targets, deep_missing, "deep-missing")


def test_control_hooks_path_and_include_below_missing_directories_are_obeyed(lz):
    config_target_attack_works_on_the_host(lz, _deep_missing_config_targets, deep_missing, "deep-missing")


def test_symlink_to_another_profiles_volume_is_quarantined(rig):
    """Y03: profile vol writes a repository into its read-write volume; a
    session of another profile, in another workspace, links to it."""
    lz = rig.lz
    lz.mkdir("cachevol")
    marker = marker_for(lz, "other-volume")
    ws_a = _plain(lz)
    ws_b = new_repo(lz, "wsb")
    rig.config({"vol": {"persistent_dirs": ["/root"], "volumes": [
        {"host": "~/cachevol", "container": "/root/vol", "kind": "directory",
         "access": "read-write"}]}, "bb": {}})
    ok(rig.run("vol", sh("git init -q /root/vol/r && "
                         f"git -C /root/vol/r config core.fsmonitor \"{planted(marker)}\""),
               ws=ws_a))
    rig.run("bb", sh(f"ln -s {lz.home / 'cachevol' / 'r'} docs; sleep 1"), ws=ws_b)
    wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not (ws_b / "docs").is_symlink(), "the link to the other profile's volume stayed"
    # Control: through such a link the volume's repository is obeyed.
    (ws_b / "docs2").symlink_to(lz.home / "cachevol" / "r")
    git(lz, ws_b / "docs2", "status", check=False)
    assert marker.exists()


# ---- attack round 5 (short), and what its fixes must not break ---------------------------

def test_the_developers_own_links_out_of_the_workspace_stay(rig):
    """A link the developer made (there before the start) to a directory of
    theirs outside the workspace is theirs: it stays. One the sandbox makes
    the same way is moved aside."""
    lz = rig.lz
    shared = lz.mkdir("shared-docs")
    ws = _plain(lz)
    (ws / "docs").symlink_to("../shared-docs")
    rig.config({"bb": {}})
    ok(rig.run("bb", sh("ln -s ../shared-docs docs2; sleep 1"), ws=ws))
    wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert (ws / "docs").is_symlink() and os.path.realpath(ws / "docs") == str(shared)
    assert not os.path.lexists(ws / "docs2")


def _tilde_config_targets(lz):
    ws = _plain(lz)
    git(lz, ws, "config", "core.hooksPath", "~/ws/.hooks2")
    lz.write(".gitconfig", "[user]\n\tname = Host\n\temail = host@lazaret.invalid\n"
             "[init]\n\tdefaultBranch = main\n"
             f"[includeIf \"gitdir:{ws}/\"]\n\tpath = ~/ws/local.gitconfig\n", mode=0o644)
    assert not (ws / ".hooks2").exists() and not (ws / "local.gitconfig").exists()
    return ws


def tilde_targets(marker) -> str:
    return (step("hook", "mkdir -p .hooks2 && cat > .hooks2/post-checkout <<'LZEOF' "
                         f"&& chmod +x .hooks2/post-checkout\n{hook(marker)}LZEOF") +
            put("include", "local.gitconfig", f"[core]\n\tfsmonitor = {planted(marker)}\n"))


def test_hooks_path_and_global_include_given_with_a_tilde_are_protected(rig):
    """Z02, Z03, Z04: core.hooksPath as ~/…, and an include of the developer's
    global configuration naming a missing file inside the workspace."""
    config_target_attack_is_blocked(rig, _tilde_config_targets, tilde_targets, "tilde")


def test_control_hooks_path_and_global_include_given_with_a_tilde_are_obeyed(lz):
    config_target_attack_works_on_the_host(lz, _tilde_config_targets, tilde_targets, "tilde")
