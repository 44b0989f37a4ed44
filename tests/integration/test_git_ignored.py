# SPDX-License-Identifier: Apache-2.0
"""Git-ignored isolation at scale, and the session-start line (issue 12,
item 3; docs/git.md "Git-ignored files").

A workspace with 5,000 ignored directories (`__pycache__/` and
`node_modules/` in each of 2,500 packages) starts, and the sandbox never
writes through to the host's copy of any of them: not by writing there, not
by renaming a package directory away and making a new one under the old name,
not by removing an ignored directory and making it again. The control runs
the same script with isolate_gitignored = false (the layout without the
defence): the same writes land in the host's directories, so the assertions
can fail. A path that is not ignored is written through in both runs.

The start line ("N git-ignored paths are the sandbox's own copies (...)")
appears on a terminal and not when stderr is a pipe.
"""

import re

from conftest import RUN_TIMEOUT, TEARDOWN_TIMEOUT, ok, sh, wait_torn_down
from test_git import domain_root, git, new_repo
from test_terminal import terms  # noqa: F401 (the fixture)

PACKAGES = 2500                      # x 2 ignored directories = 5,000
IGNORED_NAMES = ("__pycache__", "node_modules")
SAMPLE = range(0, PACKAGES, 50)      # packages whose ignored dirs hold host files
RENAMED, REMOVED, PLAIN = 7, 9, 11   # packages the attack script works on


def _big_ws(lz):
    """2,500 packages p<i>/ with a tracked file f and two ignored
    directories; the sampled ones hold a host file host.txt in each."""
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": "__pycache__/\nnode_modules/\n"})
    sample = " ".join(str(i) for i in SAMPLE)
    ok(lz.run_as_user(sh(
        f"set -e\ncd {ws}\ni=0\n"
        f"while [ $i -lt {PACKAGES} ]; do mkdir p$i p$i/__pycache__ p$i/node_modules; "
        "echo host > p$i/f; i=$((i+1)); done\n"
        f"for i in {sample}; do for d in {' '.join(IGNORED_NAMES)}; do "
        "echo host-$i > p$i/$d/host.txt; done; done\n"), timeout=600))
    git(lz, ws, "add", "-A")
    git(lz, ws, "commit", "-q", "-m", "packages")
    # What the Git Sentry asks the host's Git (empty directories included).
    listed = git(lz, ws, "ls-files", "-z", "--others", "--ignored", "--exclude-standard",
                 "--directory").stdout.split("\0")
    assert len([e for e in listed if e]) == 2 * PACKAGES, listed[:10]
    return ws


ATTACK = (
    # every ignored directory: a new file, and the sampled host file overwritten
    "n=0; for d in p*/__pycache__ p*/node_modules; do "
    "echo sandbox > $d/sb && echo sandbox > $d/host.txt || n=$((n+1)); done; echo WRITEFAIL=$n\n"
    # a package renamed away, a new one under its name: its ignored dirs are then new
    f"if mv p{RENAMED} p{RENAMED}-moved 2>/dev/null; then echo RENAMED; "
    "else echo RENAME-REFUSED; fi\n"
    f"mkdir -p p{RENAMED}/node_modules && echo sandbox > p{RENAMED}/node_modules/through\n"
    # an ignored directory removed and made again
    f"rm -rf p{REMOVED}/__pycache__ 2>/dev/null; mkdir -p p{REMOVED}/__pycache__; "
    f"echo sandbox > p{REMOVED}/__pycache__/through\n"
    # not ignored: the host's file, written through
    f"echo sandbox > p{PLAIN}/f\n"
    "echo DONE\n")


def _host_ignored_problems(ws) -> list:
    """What the sandbox left in the host's ignored directories."""
    bad = []
    for i in range(PACKAGES):
        for d in IGNORED_NAMES:
            p = ws / f"p{i}" / d
            want = {"host.txt": f"host-{i}\n"} if i in SAMPLE else {}
            have = {e.name: e.read_text() for e in p.iterdir()} if p.is_dir() else None
            if have != want:
                bad.append(f"{p}: {have} (want {want})")
    return bad


def test_5000_ignored_dirs_start_and_the_host_copies_stay_the_hosts(rig):
    lz = rig.lz
    ws = _big_ws(lz)
    rig.config({"bb": {}})
    p = ok(rig.run("bb", sh(ATTACK), ws=ws, timeout=RUN_TIMEOUT * 4))
    assert "WRITEFAIL=0\n" in p.stdout and "DONE\n" in p.stdout, p.stdout + p.stderr
    # A package directory holds bind points: the kernel refuses the rename.
    assert "RENAME-REFUSED\n" in p.stdout, p.stdout
    assert (ws / f"p{RENAMED}").is_dir() and not (ws / f"p{RENAMED}-moved").exists()
    # Control inside the same run: a path that is not ignored is written through.
    assert (ws / f"p{PLAIN}" / "f").read_text() == "sandbox\n"
    # The host's ignored directories: exactly what the host put there.
    bad = _host_ignored_problems(ws)
    assert not bad, f"{len(bad)} host copies changed, e.g.:\n" + "\n".join(bad[:10])
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    # The writes went to the Domain's copies (the sandbox's own).
    ign = domain_root(rig, ws) / "ignored"
    # (p<REMOVED>/__pycache__: its copy was emptied by the rm -rf)
    missing = [f"p{i}/{d}" for i in range(PACKAGES) for d in IGNORED_NAMES
               if (i, d) != (REMOVED, "__pycache__") and
               not (ign / f"p{i}" / d / "sb").is_file()]
    assert not missing, f"{len(missing)} copies without the sandbox's file: {missing[:10]}"
    assert (ign / f"p{RENAMED}" / "node_modules" / "through").read_text() == "sandbox\n"
    assert (ign / f"p{REMOVED}" / "__pycache__" / "through").read_text() == "sandbox\n"
    # The host's Git sees only the write-through control.
    st = git(lz, ws, "status", "--porcelain").stdout
    assert st == f" M p{PLAIN}/f\n", st


def test_control_without_isolation_the_same_script_writes_the_hosts_copies(rig):
    """The weakened layout (isolate_gitignored = false): the same attack
    lands in the host's ignored directories, so the test above can fail."""
    lz = rig.lz
    ws = _big_ws(lz)
    rig.config({"bb": {"isolate_gitignored": False}})
    p = ok(rig.run("bb", sh(ATTACK), ws=ws, timeout=RUN_TIMEOUT * 4))
    assert "WRITEFAIL=0\n" in p.stdout and "DONE\n" in p.stdout, p.stdout + p.stderr
    assert "RENAMED\n" in p.stdout, p.stdout
    bad = _host_ignored_problems(ws)
    # p<RENAMED>'s two directories moved away with it; every other one was written.
    assert len(bad) == 2 * PACKAGES, f"{len(bad)} of {2 * PACKAGES} host copies written"
    assert (ws / "p0" / "__pycache__" / "host.txt").read_text() == "sandbox\n"
    assert (ws / f"p{RENAMED}" / "node_modules" / "through").read_text() == "sandbox\n"
    assert (ws / f"p{REMOVED}" / "__pycache__" / "through").read_text() == "sandbox\n"
    assert (ws / f"p{PLAIN}" / "f").read_text() == "sandbox\n"


# ---- the session-start line -----------------------------------------------------------

NOTICE = re.compile(r"lazaret: (\d+) git-ignored paths? (?:is|are) the sandbox's own "
                    r"cop(?:y|ies) \(([^)]*)\); see docs/git.md \"Git-ignored files\"")


def _small_ws(lz):
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": ".env\ndist/\nnode_modules/\n"})
    lz.write(ws / ".env", "SECRET=host\n", mode=0o644)
    lz.mkdir(ws / "dist")
    return ws


def test_start_line_names_the_ignored_paths_on_a_terminal(terms):  # noqa: F811
    _small_ws(terms.lz)
    terms.config()
    t = terms.shell(cmd=["true"])
    st = t.wait_exit()
    terms.check_report(t, st)
    assert st == 0, t.text
    m = NOTICE.search(t.text)
    assert m, f"no start line on the terminal:\n{t.text}"
    # .env, dist/ and the placeholder Lazaret made for node_modules/
    assert m.group(1) == "3" and m.group(2) == ".env, dist/, node_modules/", m.group(0)
    assert t.text.count("git-ignored path") == 1, t.text
    # Why `git config` fails inside and what works (issue 26), once.
    assert t.text.count(".git/config is read-only in the sandbox") == 1, t.text
    assert "git config --global" in t.text and "Configuring Git in the sandbox" in t.text


def test_start_line_is_not_printed_without_a_terminal(rig):
    """Control for the test above: the same run with stderr a pipe."""
    ws = _small_ws(rig.lz)
    rig.config({"bb": {}})
    p = ok(rig.run("bb", sh("cat .env; echo END"), ws=ws))
    assert p.stdout == "END\n", p.stdout       # the isolation itself is on
    assert "git-ignored" not in p.stderr, p.stderr
    assert "read-only in the sandbox" not in p.stderr, p.stderr


def test_start_line_counts_5000_and_names_a_few(terms):  # noqa: F811
    """Bounded whatever the count: the number and the distinct names."""
    ws = _big_ws(terms.lz)
    terms.config()
    t = terms.shell(cmd=["true"])
    st = t.wait_exit(timeout=RUN_TIMEOUT * 4)
    assert st == 0, t.text
    m = NOTICE.search(t.text)
    assert m, t.text
    # + the placeholders Lazaret makes at the top for the two directory patterns
    assert m.group(1) == str(2 * PACKAGES + 2) and \
        m.group(2) == "__pycache__/, node_modules/", \
        m.group(0)
    assert len(m.group(0)) < 200
    assert ws.is_dir()


# ---- attack round i12a -------------------------------------------------------------

def test_an_ignored_directory_holding_the_hooks_path_stays_audited(rig):
    """T1 (attack round i12a): the developer's core.hooksPath is tools/hooks;
    the sandbox makes tools/ ignored, then, in the next generation, plants a
    repository tools/x/.git whose fsmonitor is its command. The plan already
    protects tools/hooks (tools/ is its bind point), so tools/ cannot also be
    the Domain's copy: it must stay audited, and the planted repository is
    set aside before the host's Git can run it. Control: the same repository
    planted on the host without Lazaret makes the host's git status run it."""
    from test_git import evil_gitdir, host_git_problem
    rig.config({"bb": {}})
    lz = rig.lz
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": "node_modules/\n"})
    git(lz, ws, "config", "core.hooksPath", "tools/hooks")
    ok(rig.run("bb", sh("echo tools/ >> /workspace/.gitignore"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    marker = lz.home / "t1-planted-ran"
    # Whether the planting itself succeeds depends on how fast the Git
    # Sentry sets a new .git aside (it watches audited directories); what
    # counts is that the host's Git never runs it.
    ok(rig.run("bb", sh("cd /workspace && mkdir -p tools/x && " +
                        evil_gitdir("plant", "tools/x/.git", marker)), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    problem = host_git_problem(lz, [ws / "tools" / "x", ws], marker, may_fail=True)
    assert problem is None, problem
    assert not (ws / "tools" / "x" / ".git").exists(), \
        "the repository planted in the ignored directory holding the hooks path was not set aside"
    # The coordinator's log says why tools/ is not the sandbox's copy.
    logs = "".join(p.read_text(errors="replace") for p in lz.root.rglob("logs/coordinator.log"))
    assert "ignored paths stay the host's" in logs, logs[-2000:]
    # Control: the payload is real on the host.
    ctl = new_repo(lz, "ctl", {"README": "x\n"})
    ok(lz.run_as_user(sh(f"cd {ctl} && mkdir -p tools/x && " +
                         evil_gitdir("plant", "tools/x/.git", marker))))
    git(lz, ctl / "tools" / "x", "status", check=False)
    assert marker.exists(), "control: the planted fsmonitor did not run on the host"


def test_gitignore_lines_make_few_host_directories(rig):
    """P1 (attack round i12a): every literal `name/` line of the top-level
    .gitignore gets a placeholder directory on the host so that it can be
    isolated; the sandbox writes .gitignore, so the number is bounded
    (MAX_PLACEHOLDERS, 64 per start). Control: below the bound each line
    does get its directory."""
    rig.config({"bb": {}})
    lz = rig.lz
    ws = new_repo(lz, "ws", {"README": "x\n"})
    ok(rig.run("bb", sh("cd /workspace && i=0; while [ $i -lt 5000 ]; do "
                        "echo d$i/; i=$((i+1)); done >> .gitignore"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    for start in range(3):  # the bound holds over the Domain's life (round i12c, P3)
        holder = rig.hold("bb", ws=ws)
        made = [p for p in ws.iterdir() if re.fullmatch(r"d\d+", p.name)]
        rig.release(holder)
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)
        assert len(made) == 64, f"start {start}: {len(made)} placeholder directories on the host"
        # Removed when the Domain ends (issue 26), made again at the next start.
        assert not [p for p in ws.iterdir() if re.fullmatch(r"d\d+", p.name)]
    # Control: a small .gitignore gets all of its placeholders.
    small = new_repo(lz, "small", {"README": "x\n", ".gitignore": "a1/\na2/\na3/\n"})
    holder = rig.hold("bb", ws=small)
    assert all((small / n).is_dir() for n in ("a1", "a2", "a3"))
    rig.release(holder)


def test_a_domain_first_started_from_a_subdirectory_isolates_the_ignored_paths(rig):
    """F3 (attack round i12b): `lazaret run` from src/ of a repository joins
    (or starts) the top's Domain. Started first from there, the ignored
    `.env` at the top must still be the sandbox's own empty copy: the host's
    Git that lists the ignored paths runs in the work tree, not in the
    developer's current directory. Control: without isolation the same run
    reads the host's `.env`, so the check can fail."""
    lz = rig.lz
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": ".env\nbuild/\n"})
    lz.write(ws / ".env", "SECRET=host-only\n", mode=0o600)
    lz.mkdir(ws / "src")
    lz.mkdir(ws / "build")
    lz.write(ws / "build" / "host.txt", "host build\n", mode=0o644)
    for isolate, want in ((True, ""), (False, "SECRET=host-only\n")):
        rig.config({"bb": {"isolate_gitignored": isolate}})
        p = ok(rig.run("bb", sh("pwd; cat /workspace/.env; ls /workspace/build"), ws=None,
                       cwd=ws / "src"))
        lines = p.stdout.split("\n", 1)
        assert lines[0] == "/workspace/src", p.stdout
        assert lines[1].startswith(want) and ("host.txt" in lines[1]) == (not isolate), \
            f"isolate_gitignored={isolate}: {p.stdout!r}"
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)


# ---- attack round i12c -------------------------------------------------------------

def test_a_path_once_isolated_stays_isolated(rig):
    """U1 (round i12c): the sandbox drops `.env` from `.gitignore`; at the
    next start the host's `.env` must still be hidden (the Domain records
    what it isolated; `lazaret state reset` forgets it). Control: another
    Domain of the same workspace that never isolated `.env` does see it, so
    the ignore rules alone would have handed it over."""
    lz = rig.lz
    rig.config({"bb": {}, "other": {}})
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": ".env\n"})
    lz.write(ws / ".env", "SECRET=host-only\n", mode=0o600)
    p = ok(rig.run("bb", sh("cat /workspace/.env; sed -i '/^.env$/d' /workspace/.gitignore"),
                   ws=ws))
    assert "host-only" not in p.stdout, p.stdout
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    assert ".env" not in (ws / ".gitignore").read_text()
    p = ok(rig.run("bb", sh("cat /workspace/.env; echo sandbox > /workspace/.env"), ws=ws))
    assert "host-only" not in p.stdout, f"the un-ignored .env was the host's: {p.stdout!r}"
    assert (ws / ".env").read_text() == "SECRET=host-only\n"
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    p = ok(rig.run("other", sh("cat /workspace/.env"), ws=ws))
    assert "host-only" in p.stdout, f"control: {p.stdout!r}"


def test_ignored_files_of_nested_repositories_and_submodules_are_isolated(rig):
    """N1 (round i12c): the ignored files of a nested repository and of a
    submodule checkout are the sandbox's copies too. Control: a nested
    repository's tracked file is shared (written through)."""
    lz = rig.lz
    rig.config({"bb": {}})
    sub = new_repo(lz, "subsrc", {"README": "s\n", ".gitignore": ".env\n"})
    ws = new_repo(lz, "ws", {"README": "x\n"})
    git(lz, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "lib")
    git(lz, ws, "commit", "-q", "-m", "submodule")
    lz.write(ws / "lib" / ".env", "SUBMODULE-SECRET\n", mode=0o600)
    nested = lz.mkdir(ws / "nested")
    git(lz, nested, "init", "-q")
    lz.write(nested / ".gitignore", ".env\nnode_modules/\n", mode=0o644)
    lz.write(nested / "tracked", "shared\n", mode=0o644)
    git(lz, nested, "add", "-A")
    git(lz, nested, "commit", "-q", "-m", "nested")
    lz.write(nested / ".env", "NESTED-SECRET\n", mode=0o600)
    lz.mkdir(nested / "node_modules")
    lz.write(nested / "node_modules" / "tool", "host tool\n", mode=0o644)
    p = ok(rig.run("bb", sh("cat /workspace/lib/.env /workspace/nested/.env "
                            "/workspace/nested/node_modules/tool 2>&1; "
                            "echo sandbox > /workspace/nested/node_modules/tool; "
                            "echo sandbox > /workspace/lib/.env; "
                            "echo sandbox > /workspace/nested/tracked"), ws=ws))
    assert "SECRET" not in p.stdout and "host tool" not in p.stdout, p.stdout
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    assert (nested / "node_modules" / "tool").read_text() == "host tool\n"
    assert (ws / "lib" / ".env").read_text() == "SUBMODULE-SECRET\n"
    assert (nested / "tracked").read_text() == "sandbox\n", "control: a tracked file is shared"


def test_a_nested_hooks_path_inside_an_ignored_directory_does_not_stop_the_domain(rig):
    """O1 (round i12c): a nested repository's core.hooksPath lies in tools/,
    which the sandbox makes ignored: the Domain still starts (the host's
    hooks are outside the sandbox's reach, which sees its own copy), and the
    host's hook is unchanged."""
    lz = rig.lz
    rig.config({"bb": {}})
    ws = new_repo(lz, "ws", {"README": "x\n"})
    nested = lz.mkdir(ws / "nested")
    git(lz, nested, "init", "-q")
    lz.write(nested / "f", "x\n", mode=0o644)
    git(lz, nested, "add", "-A")
    git(lz, nested, "commit", "-q", "-m", "n")
    git(lz, nested, "config", "core.hooksPath", "../tools/hooks")
    lz.mkdir(ws / "tools")
    lz.mkdir(ws / "tools" / "hooks")
    lz.write(ws / "tools" / "hooks" / "pre-commit", "#!/bin/sh\nexit 0\n", mode=0o755)
    ok(rig.run("bb", sh("echo tools/ >> /workspace/.gitignore"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    for _ in range(2):
        p = rig.run("bb", sh("echo pwned > /workspace/tools/hooks/pre-commit 2>&1; echo ran"),
                    ws=ws)
        assert p.returncode == 0 and "ran" in p.stdout, (p.returncode, p.stdout, p.stderr)
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)
    assert (ws / "tools" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


def test_a_cut_ignored_list_refuses_the_start(rig):
    """T2 (round i12c): more than 4 MiB of ignored paths (long names sorting
    before `.env`) must not leave the paths after the cut shared: the start
    is refused with what to do. Control: the same layout with few files
    starts and isolates `.env`."""
    lz = rig.lz
    rig.config({"bb": {}})
    for name, count, starts in (("big", 1300, False), ("small", 50, True)):
        ws = new_repo(lz, name, {"README": "x\n", ".gitignore": ".env\n*.pad\n"})
        lz.write(ws / ".env", "SECRET=host-only\n", mode=0o600)
        deep = "/".join(["-" + "p" * 239] * 14)
        ok(lz.run_as_user(sh(f"set -e; cd {ws}; mkdir -p -- '{deep}'; touch -- '{deep}/keep'; "
                             f"cd -- '{deep}'; i=0; while [ $i -lt {count} ]; do "
                             f"touch -- ${{i}}{'f' * 180}.pad; i=$((i+1)); done")))
        listed = git(lz, ws, "ls-files", "-z", "--others", "--ignored", "--exclude-standard",
                     "--directory").stdout
        assert (len(listed) > 4 << 20) == (not starts), len(listed)  # the layout is as meant
        p = rig.run("bb", sh("cat /workspace/.env; echo ran"), ws=ws)
        if starts:
            assert p.returncode == 0 and "host-only" not in p.stdout, (p.stdout, p.stderr)
        else:
            assert p.returncode == 125 and "ran" not in p.stdout, (p.returncode, p.stdout)
            assert "more than 4 MiB" in p.stderr and "fix:" in p.stderr, p.stderr
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)



# ---- attack round i12d -------------------------------------------------------------

def test_narrowing_an_isolated_directory_keeps_it_isolated(rig):
    """D1 (round i12d): `secrets/` is isolated; the sandbox narrows the
    rule to `secrets/[a-m]*`. The next generation still sees only its copy
    of the whole directory. Control: another Domain that never isolated it
    sees the host's file under the narrowed rule."""
    lz = rig.lz
    rig.config({"bb": {}, "other": {}})
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": "secrets/\n"})
    lz.mkdir(ws / "secrets")
    lz.write(ws / "secrets" / "pg.pass", "PGPASS-HOST\n", mode=0o600)
    lz.write(ws / "secrets" / "aws_key", "AWS-HOST\n", mode=0o600)
    ok(rig.run("bb", sh("printf 'secrets/[a-m]*\\n' > /workspace/.gitignore"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    p = ok(rig.run("bb", sh("cat /workspace/secrets/pg.pass 2>&1; "
                            "echo sandbox > /workspace/secrets/pg.pass"), ws=ws))
    assert "PGPASS-HOST" not in p.stdout, p.stdout
    assert (ws / "secrets" / "pg.pass").read_text() == "PGPASS-HOST\n"
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    p = ok(rig.run("other", sh("cat /workspace/secrets/pg.pass"), ws=ws))
    assert "PGPASS-HOST" in p.stdout, f"control: {p.stdout!r}"


def test_a_damaged_isolation_record_refuses_the_start(rig):
    """R1 (round i12d): the record of what a Domain keeps hidden fails
    closed: cut short, it refuses the start with the fix (lazaret state
    reset), never forgets entries. Control: the record Lazaret wrote starts."""
    lz = rig.lz
    rig.config({"bb": {}})
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": ".env\n"})
    lz.write(ws / ".env", "SECRET=host-only\n", mode=0o600)
    ok(rig.run("bb", ["true"], ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    record = domain_root(rig, ws) / "ignored.list"
    good = record.read_bytes()
    assert good == b".env\0", good
    ok(rig.run("bb", ["true"], ws=ws))  # control
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    for damaged in (good[:-1], good + b"../x\0", good + b"a" * (8 << 20)):
        lz.write(record, damaged.decode(), mode=0o600)
        p = rig.run("bb", sh("cat /workspace/.env; echo ran"), ws=ws)
        assert p.returncode == 125 and "ran" not in p.stdout, (p.returncode, p.stdout)
        assert "ignored.list is damaged" in p.stderr and "lazaret state reset" in p.stderr, \
            p.stderr
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)


def test_ignored_files_of_a_linked_worktree_are_isolated(rig):
    """G1 (round i12d): a linked worktree inside the workspace (its `.git`
    is a file) has ignored files of its own; they are the sandbox's copies.
    Control: with isolate_gitignored = false the same file is the host's."""
    lz = rig.lz
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": ".env\n.worktrees/\n"})
    git(lz, ws, "worktree", "add", "-q", ".worktrees/feat")
    lz.write(ws / ".worktrees" / "feat" / ".env", "WORKTREE-SECRET\n", mode=0o600)
    for isolate in (True, False):
        rig.config({"bb": {"isolate_gitignored": isolate}})
        p = ok(rig.run("bb", sh("cat /workspace/.worktrees/feat/.env 2>&1; true"), ws=ws))
        assert ("WORKTREE-SECRET" in p.stdout) == (not isolate), (isolate, p.stdout)
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)


# ---- attack round i12e -------------------------------------------------------------

def test_a_workspace_that_is_a_linked_worktree_isolates_its_ignored_files(rig):
    """W1 (round i12e): the workspace itself is a linked worktree (its
    `.git` is a file): its ignored `.env` is the sandbox's copy. Control:
    with isolate_gitignored = false the host's file is seen."""
    lz = rig.lz
    main = new_repo(lz, "main", {"README": "x\n", ".gitignore": ".env\n"})
    git(lz, main, "worktree", "add", "-q", str(lz.home / "feat"))
    feat = lz.home / "feat"
    lz.write(feat / ".env", "WT-SECRET\n", mode=0o600)
    for isolate in (True, False):
        rig.config({"bb": {"isolate_gitignored": isolate}})
        p = ok(rig.run("bb", sh("cat /workspace/.env 2>&1; true"), ws=feat))
        assert ("WT-SECRET" in p.stdout) == (not isolate), (isolate, p.stdout)
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, "\n".join(left)


def test_a_stale_nested_git_file_does_not_stop_the_domain(rig):
    """H2 (round i12e): a fixture's `.git` file whose Git directory is gone
    (a stale worktree) cannot be listed; the Domain still starts and the
    top's ignored files are still isolated."""
    lz = rig.lz
    rig.config({"bb": {}})
    ws = new_repo(lz, "ws", {"README": "x\n", ".gitignore": ".env\n"})
    lz.write(ws / ".env", "SECRET=host-only\n", mode=0o600)
    lz.mkdir(ws / "fixture")
    lz.write(ws / "fixture" / ".git", "gitdir: /nonexistent/worktrees/old\n", mode=0o644)
    p = rig.run("bb", sh("cat /workspace/.env; echo ran"), ws=ws)
    assert p.returncode == 0 and p.stdout == "ran\n", (p.returncode, p.stdout, p.stderr)
