# SPDX-License-Identifier: Apache-2.0
"""lazaret run with the real runsc, as the unprivileged test user (issue 3,
item 8): launch and exit statuses, streams, the workspace, sessions sharing
one sandbox and one coordinator, persistence, teardown, recovery after a
crash, isolation, volumes, environment references, configuration
fingerprints, actionable failures and a Debian 12 image.

Every test uses its own Lz (own XDG_RUNTIME_DIR and storage root), so its
Domains are its own. The `rig` fixture (conftest.py) waits after each test until every
Domain it used is torn down (no process, gen-* directory, coordinator socket
or mount of it left) and fails the test otherwise, after killing what is
left so that the next test starts clean.

Several runs in one Domain are cheap while a session holds the Domain
(`rig.hold`): later runs join the running sandbox (~50 ms) instead of waiting
for a teardown (~6 s) and starting a new generation.
"""

import json
import re
import os
import subprocess
import secrets
import signal
import time

import pytest

# The Domain helpers and the `rig` fixture live in conftest.py.
from conftest import (COORDINATOR, RUN_TIMEOUT, TEARDOWN_TIMEOUT, _read, by_role, domain_dirs,
                      domain_processes, files_containing, generation_dirs, ok, sh,
                      wait_torn_down)


# ---- launch, exit statuses, streams -------------------------------------------

def test_exit_statuses_and_streams(rig):
    rig.config({"bb": {}})
    holder = rig.hold("bb")
    cases = [
        (["true"], 0),
        (sh("exit 7"), 7),
        (["lz-no-such-command"], 127),
        (["/etc/passwd"], 126),                # exists, not executable
        (sh("kill -TERM $$"), 128 + signal.SIGTERM),
        (sh("kill -KILL $$"), 128 + signal.SIGKILL),
    ]
    wrong = []
    for cmd, want in cases:
        p = rig.run("bb", cmd)
        if p.returncode != want:
            wrong.append(f"{cmd}: exit {p.returncode}, want {want} (stderr: {p.stderr!r})")
    assert not wrong, "\n".join(wrong)

    p = rig.run("bb", ["lz-no-such-command"])
    assert "lz-no-such-command" in p.stderr and "not found" in p.stderr, p.stderr

    # stdin streams in (more than one pipe buffer), stdout comes back intact.
    data = "".join(f"line {i} {'x' * (i % 70)}\n" for i in range(20000))
    p = ok(rig.run("bb", ["cat"], input=data))
    assert p.stdout == data, f"cat returned {len(p.stdout)} of {len(data)} bytes"
    p = ok(rig.run("bb", sh("wc -l"), input="a\nb\nc\n"))
    assert p.stdout.strip() == "3"

    # stdout and stderr stay apart.
    p = ok(rig.run("bb", sh("echo to-out; echo to-err >&2; echo out-again")))
    assert p.stdout == "to-out\nout-again\n"
    assert p.stderr == "to-err\n"
    rig.release(holder)


def test_first_run_starts_and_exits_with_the_command_status(rig):
    """Without a holder: the run that starts the Domain passes its command's
    status and output through, and the Domain goes away afterwards."""
    rig.config({"bb": {}})
    p = rig.run("bb", sh("echo hi; exit 7"))
    assert (p.returncode, p.stdout) == (7, "hi\n"), p.stderr
    left, waited = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, f"{waited:.1f} s after the session ended:\n" + "\n".join(left)


# ---- the workspace --------------------------------------------------------------

def test_workspace_edits_both_ways(rig):
    rig.config({"bb": {}})
    rig.lz.write("ws/host.txt", "from the host\n", mode=0o644)
    p = ok(rig.run("bb", sh("cat /workspace/host.txt && echo from the sandbox > "
                            "/workspace/inside.txt && mkdir /workspace/dir-inside && "
                            "echo appended >> /workspace/host.txt")))
    assert p.stdout == "from the host\n"
    user = rig.lz.user
    for name in ("inside.txt", "dir-inside", "host.txt"):
        st = (rig.ws / name).stat()
        assert (st.st_uid, st.st_gid) == (user.uid, user.gid), \
            f"{name} is owned by {st.st_uid}:{st.st_gid} on the host, not the user"
    assert (rig.ws / "inside.txt").read_text() == "from the sandbox\n"
    assert (rig.ws / "host.txt").read_text() == "from the host\nappended\n"


def test_cwd_follows_the_workspace_subdirectory(rig):
    rig.config({"bb": {}})
    sub = rig.lz.mkdir("ws/sub/deeper")
    holder = rig.hold("bb")
    p = ok(rig.run("bb", ["pwd"], cwd=sub))
    assert p.stdout == "/workspace/sub/deeper\n"
    p = ok(rig.run("bb", ["pwd"], ws=None, cwd=rig.ws))  # workspace = the cwd
    assert p.stdout == "/workspace\n"
    p = ok(rig.run("bb", ["pwd"], cwd=rig.lz.home))      # outside the workspace
    assert p.stdout == "/workspace\n"
    assert len(rig.coordinators()) == 1, "the three runs were not one Domain"
    rig.release(holder)


def test_a_run_inside_a_git_working_tree_uses_its_top_level(rig):
    """Issue 12, item 1: without --workspace, a run from a subdirectory of a
    Git working tree gets the tree's top level as its workspace — the same
    Domain as from the top — and starts in the matching subdirectory.
    Control: outside a working tree the current directory is the workspace."""
    rig.config({"bb": {}})
    ok(rig.lz.run_as_user(["git", "init", "-q", str(rig.ws)]))
    sub = rig.lz.mkdir("ws/pkg/mod")
    holder = rig.hold("bb")  # --workspace ws: the Domain of the top level
    p = ok(rig.run("bb", sh("pwd; touch /workspace/from-sub"), ws=None, cwd=sub))
    assert p.stdout == "/workspace/pkg/mod\n", p.stdout
    assert (rig.ws / "from-sub").exists() and not (sub / "from-sub").exists()
    assert len(rig.coordinators()) == 1 and len(domain_dirs(rig.lz)) == 1, \
        "a run from the subdirectory made another Domain"
    rig.release(holder)
    # Control: a directory outside any working tree is its own workspace.
    other = rig.lz.mkdir("elsewhere/deep")
    p = ok(rig.run("bb", sh("pwd; touch /workspace/here"), ws=None, cwd=other))
    assert p.stdout == "/workspace\n" and (other / "here").exists(), p.stdout


def test_a_home_under_version_control_is_never_the_workspace(rig):
    """A dotfiles repository at $HOME: a run in a project below it that is
    not a working tree of its own keeps the project as its workspace, never
    the home directory."""
    rig.config({"bb": {}})
    ok(rig.lz.run_as_user(["git", "init", "-q", str(rig.lz.home)]))
    proj = rig.lz.home / "projects" / "plain"
    rig.lz.mkdir(proj)
    # Control: Git itself takes the home directory for this project's top.
    top = ok(rig.lz.run_as_user(["git", "-C", str(proj), "rev-parse", "--show-toplevel"]))
    assert top.stdout.strip() == str(rig.lz.home.resolve()), top.stdout
    try:
        p = ok(rig.run("bb", sh("touch /workspace/marker; ls /workspace"), ws=None, cwd=proj))
        assert (proj / "marker").exists(), p.stdout
        assert not (rig.lz.home / "marker").exists() and not \
            (rig.lz.home / "projects" / "marker").exists()
    finally:
        subprocess.run(["rm", "-rf", str(rig.lz.home / ".git")], check=True)


def test_busybox_image_git_works_inside(rig):
    # The repository is made on the host: one the sandbox makes is
    # quarantined (docs/git.md, "Not a repository").
    ok(rig.lz.run_as_user(["git", "init", "-q", str(rig.ws)]))
    rig.config({"bb": {}})
    p = ok(rig.run("bb", sh(
        "set -e; git --version; cd /workspace; echo hi > a.txt; git add a.txt; "
        "git status --short; git -c user.name=Sandbox -c user.email=sb@lazaret.invalid "
        "commit -q -m 'commit from busybox'; git log --format=%s")))
    assert p.stdout.startswith("git version "), p.stdout
    assert "A  a.txt" in p.stdout
    assert p.stdout.rstrip().endswith("commit from busybox")
    log = rig.lz.run_as_user(["git", "-C", rig.ws, "log", "--format=%s"])
    assert log.returncode == 0, log.stderr
    assert log.stdout == "commit from busybox\n"


# ---- sessions share one sandbox and one coordinator -------------------------------

def test_two_sessions_share_one_sandbox_and_coordinator(rig):
    rig.config({"bb": {}})
    a = rig.start("bb", sh("echo x > /tmp/shared; echo written; sleep 5"))
    a.read_until("written")
    b = rig.run("bb", ["cat", "/tmp/shared"])
    coords = rig.coordinators()
    sandboxes = by_role(rig.lz.root, "sandbox")
    ra = a.finish()
    assert (ra.returncode, ra.stdout) == (0, "written\n"), ra.stderr
    assert (b.returncode, b.stdout) == (0, "x\n"), \
        f"session B did not see session A's /tmp/shared: {b.returncode} {b.stderr}"
    assert len(coords) == 1, f"coordinators while both ran: {coords}"
    assert len(sandboxes) == 1, f"sandboxes while both ran: {sandboxes}"
    assert len(rig.generations_started()) == 1, rig.generations_started()


def test_eight_sessions_started_at_once(rig):
    """Eight CLIs racing to bootstrap one Domain end up in one coordinator and
    one sandbox: every session sees the others' markers in the shared /tmp."""
    rig.config({"bb": {}})
    script = 'touch /tmp/s-$$; sleep 3; ls /tmp | grep -c "^s-"'
    sessions = [rig.start("bb", sh(script)) for _ in range(8)]
    coords, sandboxes = set(), set()
    # Together they take one start, 3 s and one teardown; one after another
    # (a generation each) about a minute.
    deadline = time.monotonic() + 30
    while any(s.proc.poll() is None for s in sessions) and time.monotonic() < deadline:
        procs = domain_processes(rig.lz.root)
        coords |= {p.pid for p in procs if p.role == "coordinator"}
        sandboxes |= {p.pid for p in procs if p.role == "sandbox"}
        for s in sessions:
            s.pump(0)
        time.sleep(0.1)
    unfinished = sum(s.proc.poll() is None for s in sessions)
    for s in sessions:
        s.kill()
    results = [s.finish() for s in sessions]
    counts = [r.stdout.strip() for r in results]
    generations = rig.generations_started()
    summary = (f"{unfinished} of 8 sessions still unfinished after 30 s; coordinators seen: "
               f"{len(coords)}, sandbox processes seen: {len(sandboxes)}, generations started: "
               f"{len(generations)}; markers each session saw: {counts}")
    assert unfinished == 0 and len(generations) == 1, summary
    assert len(coords) == 1 and len(sandboxes) == 1, summary
    bad = [f"exit {r.returncode}: {r.stderr}" for r in results if r.returncode != 0]
    assert not bad, "\n".join(bad)
    assert max(int(c) for c in counts) == 8, summary


# ---- persistence ---------------------------------------------------------------------

def test_persistent_dirs_survive_teardown_and_the_rest_does_not(rig):
    rig.config({"bb": {"persistent_dirs": ["/usr"]}})
    ok(rig.run("bb", sh("cp /usr/bin/git /usr/local/bin/mytool && echo gone > /opt/x && "
                        "echo gone > /tmp/x")))
    left, waited = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, "the first generation did not end:\n" + "\n".join(left)
    p = ok(rig.run("bb", sh("mytool --version; for f in /opt/x /tmp/x; do "
                            "[ -e $f ] && echo LEFT $f; done; true")))
    assert p.stdout.startswith("git version "), "the tool copied into /usr/local/bin is gone"
    assert "LEFT" not in p.stdout, f"non-persistent files survived: {p.stdout}"


# ---- teardown ----------------------------------------------------------------------

def test_teardown_removes_processes_files_and_mounts(rig):
    rig.config({"bb": {"persistent_dirs": ["/usr"]}})
    holder = rig.hold("bb")
    # While it runs, every thing the teardown must remove is there (so that
    # the checks below look at the right places).
    roles = {p.role for p in domain_processes(rig.lz.root)}
    assert {"coordinator", "supervisor", "sandbox"} <= roles, roles
    assert generation_dirs(rig.lz), "no gen-* directory while running"
    assert any((d / "coordinator.sock").exists() for d in domain_dirs(rig.lz))
    sup = by_role(rig.lz.root, "supervisor")[0]
    overlays = [line for line in _read(f"/proc/{sup.pid}/mountinfo").decode().splitlines()
                if " overlay " in line and str(rig.lz.root) in line]
    assert overlays, "no persistent-dir overlay in the supervisor's mount namespace"

    rig.release(holder)
    left, waited = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, f"{waited:.1f} s after the last session ended:\n" + "\n".join(left)


# ---- recovery ------------------------------------------------------------------------

def _kill(procs, what):
    assert len(procs) == 1, f"expected one {what}, found: {procs}"
    os.kill(procs[0].pid, signal.SIGKILL)


def _next_run_works(rig):
    p = rig.run("bb", sh("echo again"))
    assert (p.returncode, p.stdout) == (0, "again\n"), \
        f"the run after the crash failed: {p.returncode}\n{p.stderr}"


def test_coordinator_killed_during_a_session(rig):
    rig.config({"bb": {}})
    s = rig.start("bb", sh("echo started; exec sleep 30"))
    s.read_until("started")
    _kill(rig.coordinators(), "coordinator")
    r = s.finish(timeout=30)
    assert r.returncode == 125, f"exit {r.returncode}, want 125 (Lazaret failed)\n{r.stderr}"
    assert "lazaret: error:" in r.stderr, f"no error message: {r.stderr!r}"
    _next_run_works(rig)


def test_supervisor_killed_during_a_session(rig):
    rig.config({"bb": {}})
    s = rig.start("bb", sh("echo started; exec sleep 30"))
    s.read_until("started")
    _kill(by_role(rig.lz.root, "supervisor"), "supervisor")
    r = s.finish(timeout=30)
    assert r.returncode == 125, f"exit {r.returncode}, want 125 (Lazaret failed)\n{r.stderr}"
    assert "lazaret: error:" in r.stderr, \
        f"the session ended with {r.returncode} but no message says why: {r.stderr!r}"
    _next_run_works(rig)


def test_cli_killed_during_a_session_still_tears_down(rig):
    rig.config({"bb": {}})
    s = rig.start("bb", sh("echo started; exec sleep 30"))
    s.read_until("started")
    s.kill()
    s.proc.wait()
    left, waited = wait_torn_down(rig.lz, 20)
    # Whatever happened, the next run must work (it may join a sandbox that
    # is still running the orphaned command).
    _next_run_works(rig)
    assert not left, (
        f"{waited:.0f} s after the CLI of the only session was killed, the Domain is still up "
        f"(the session's command keeps running without its client):\n" + "\n".join(left))


@pytest.mark.parametrize("point", ["coordinator", "supervisor", "sandbox"])
def test_coordinator_killed_at_startup(rig, point):
    """Kill the coordinator as soon as the process named by `point` exists:
    the CLI ends (with a message when it fails), the next run works, and
    nothing leaks (the rig's final check)."""
    rig.config({"bb": {}})
    s = rig.start("bb", ["true"])
    deadline = time.monotonic() + RUN_TIMEOUT
    victim = None
    while victim is None and time.monotonic() < deadline and s.proc.poll() is None:
        if point == "coordinator":
            procs = domain_processes(rig.lz.root, comm=COORDINATOR)
        else:
            procs = domain_processes(rig.lz.root)
            if not any(p.role == point for p in procs):
                procs = []
        victim = next((p for p in procs if p.role == "coordinator"), None)
    if victim is None:
        r = s.finish()
        pytest.fail(f"never saw the {point} start (run ended {r.returncode}: {r.stderr})")
    os.kill(victim.pid, signal.SIGKILL)
    r = s.finish(timeout=RUN_TIMEOUT)
    if r.returncode != 0:
        assert r.returncode == 125, f"exit {r.returncode}: {r.stderr}"
        assert "lazaret: error:" in r.stderr, f"no error message: {r.stderr!r}"
    _next_run_works(rig)


def _socket_inodes(pid: int) -> set:
    found = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target)
    return found


def test_no_other_process_holds_the_coordinators_sockets(rig):
    """The supervisor is a fork of the coordinator that runs on without exec:
    unless it drops them, it holds the coordinator's listening socket and
    session sockets. Then a CLI connecting in the moment after a coordinator
    crash is queued on a socket nobody accepts, and reset (it used to make
    test_coordinator_killed_at_startup fail now and then). Control: the
    coordinator's own sockets are found, so an empty intersection means
    something."""
    rig.config({"bb": {}})
    s = rig.start("bb", sh("echo started; exec sleep 30"))
    s.read_until("started")
    coordinator = rig.coordinators()
    assert len(coordinator) == 1, coordinator
    mine = _socket_inodes(coordinator[0].pid)
    assert len(mine) >= 3, f"the coordinator holds too few sockets to test: {mine}"
    others = [p for p in domain_processes(rig.lz.root)
              if p.role not in ("coordinator", "cli") and p.pid != coordinator[0].pid]
    assert any(p.role == "supervisor" for p in others), others
    shared = {f"{p.role} {p.pid}": sorted(mine & _socket_inodes(p.pid)) for p in others}
    shared = {k: v for k, v in shared.items() if v}
    assert not shared, f"processes other than the coordinator hold its sockets: {shared}"
    s.proc.kill()
    s.finish(timeout=30)


def test_the_domain_keeps_no_descriptor_its_first_cli_inherited(rig):
    """A descriptor the developer's shell or build tool left open without
    close-on-exec reaches `lazaret run`; the coordinator that CLI forks must
    not keep it for the Domain's lifetime (found by an outside attack: a
    pipe's reader waited for the whole Domain instead of the CLI).
    Control: while the CLI runs, the pipe is held (no EOF), so the
    descriptor did reach Lazaret's processes."""
    import select as _select
    rig.config({"bb": {}})
    r, w = os.pipe()  # not O_CLOEXEC: passed on like an inherited descriptor
    try:
        first = subprocess.Popen(
            [str(rig.lz.bin), *[str(a) for a in rig.args("bb", sh("echo first; sleep 3"), rig.ws)]],
            env=rig.lz.env(None), cwd=str(rig.lz.home), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,),
            user=rig.lz.user.uid, group=rig.lz.user.gid, extra_groups=list(rig.lz.user.groups))
        os.close(w)
        w = -1
        assert b"first" in first.stdout.readline(), "the first session did not start"
        keeper = rig.start("bb", sh("echo keeper; sleep 25"))
        keeper.read_until("keeper")
        ready, _, _ = _select.select([r], [], [], 0.5)
        assert not ready, "control failed: the inherited pipe was not held while the CLI ran"
        first.communicate(timeout=RUN_TIMEOUT)
        # The CLI is gone, the Domain lives on (keeper): nothing may hold it now.
        ready, _, _ = _select.select([r], [], [], 10)
        assert ready and os.read(r, 1) == b"", \
            "a Domain process still holds the pipe the first CLI inherited"
        assert rig.coordinators(), "the Domain ended with its first CLI"
        keeper.proc.kill()
        keeper.finish(timeout=30)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


# ---- isolation ---------------------------------------------------------------------------

def test_sandbox_cannot_see_host_files_or_the_configuration(rig):
    secret = "lzsecret-" + secrets.token_hex(8)
    marker = "lzcfgmark-" + secrets.token_hex(8)
    secret_path = rig.lz.write("private/secret.txt", secret + "\n", mode=0o644)
    rig.config({"bb": {}}, comment=f"distinctive: {marker}")
    # The marker is split so that it appears in no argument.
    half = len(marker) // 2
    p = rig.run("bb", sh(
        f"if cat {secret_path} 2>/dev/null; then echo READ-SECRET; fi\n"
        f"if [ -e {rig.lz.config_path} ]; then echo CONFIG-VISIBLE; fi\n"
        f"if [ -e {rig.lz.home} ]; then echo HOME-VISIBLE; fi\n"
        f"a={marker[:half]}; b={marker[half:]}\n"
        'grep -rlF "$a$b" /etc /root /run /tmp /usr /var /opt /home /workspace 2>/dev/null\n'
        "echo END"))
    assert p.returncode == 0, p.stderr
    assert secret not in p.stdout, "the sandbox read a host file outside its workspace"
    assert p.stdout == "END\n", f"visible inside: {p.stdout}"


def test_domains_share_nothing(rig):
    ws2 = rig.lz.mkdir("ws2")
    rig.config({"bb": {}, "bb2": {}})
    domains = [("bb", rig.ws, "one"), ("bb", ws2, "two"), ("bb2", rig.ws, "three")]
    holders = [rig.hold(prof, ws=ws, script=f"echo {name} > /tmp/owner")
               for prof, ws, name in domains]
    seen = [rig.run(prof, ["cat", "/tmp/owner"], ws=ws) for prof, ws, _ in domains]
    coords = rig.coordinators()
    sandboxes = by_role(rig.lz.root, "sandbox")
    for h in holders:
        rig.release(h)
    for (prof, ws, name), p in zip(domains, seen):
        assert (p.returncode, p.stdout) == (0, f"{name}\n"), \
            f"{prof} on {ws} sees another Domain's /tmp: {p.stdout!r} {p.stderr}"
    assert len(coords) == 3, f"coordinators: {coords}"
    assert len(sandboxes) == 3, f"sandboxes: {sandboxes}"
    assert len(domain_dirs(rig.lz)) == 3


# ---- volumes ------------------------------------------------------------------------------

def test_volumes_read_only_and_read_write(rig):
    lz = rig.lz
    lz.write("vol-ro/in.txt", "read me\n", mode=0o644)
    lz.mkdir("vol-rw")
    lz.write("file-ro.txt", "fixed\n", mode=0o644)
    rig.config({"bb": {"persistent_dirs": ["/root"], "volumes": [
        {"host": "~/vol-ro", "container": "/root/ro", "kind": "directory",
         "access": "read-only"},
        {"host": "~/vol-rw", "container": "/root/rw", "kind": "directory",
         "access": "read-write"},
        {"host": "~/file-ro.txt", "container": "/root/file-ro.txt", "kind": "file",
         "access": "read-only"},
    ]}})
    p = ok(rig.run("bb", sh(
        "cat /root/ro/in.txt /root/file-ro.txt\n"
        "touch /root/ro/new 2>/dev/null && echo RO-DIR-WRITABLE\n"
        "(echo changed > /root/file-ro.txt) 2>/dev/null && echo RO-FILE-WRITABLE\n"
        "echo from inside > /root/rw/out.txt && echo RW-OK\n"
        "true")))
    assert p.stdout == "read me\nfixed\nRW-OK\n", p.stdout
    out = lz.home / "vol-rw" / "out.txt"
    assert out.read_text() == "from inside\n"
    assert out.stat().st_uid == lz.user.uid
    assert not (lz.home / "vol-ro" / "new").exists()
    assert (lz.home / "file-ro.txt").read_text() == "fixed\n"


# ---- environment references -------------------------------------------------------------------

def test_env_reference_reaches_the_sandbox_and_no_file(rig):
    token = "lztoken-" + secrets.token_hex(12)
    rig.config({"bb": {"env": {"TOKEN": "env:LZ_TEST_TOKEN"}}})
    holder = rig.hold("bb", script='echo "token=$TOKEN"', env={"LZ_TEST_TOKEN": token})
    assert f"token={token}\n" in holder.stdout
    running = files_containing(rig.lz.root, token.encode())
    rig.release(holder)
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    logs = list(rig.lz.root.rglob("logs/*.log"))
    assert logs, "no Lazaret log file under the storage root"
    after = files_containing(rig.lz.root, token.encode())
    assert not running, f"the value is in files while the session runs: {running}"
    assert not after, f"the value is in files after the Domain ended: {after}"


def test_environment_values_run_e_and_the_default_command(rig, test_images):
    """Issue 26: plain `environment` values, `run -e NAME=VALUE` / `-e NAME`
    (winning over the profile's), the profile's default `command` (a run
    without `-- COMMAND`), `--` alone for the login shell, and
    lazaret-escalate found by a login shell (Codex runs `bash -lc`), in a
    file the sandbox cannot replace. The control: the login shell's PATH
    has lost /run/lazaret/bin, so only the bind on /usr/local/bin finds it."""
    token = "lztoken-" + secrets.token_hex(8)
    rig.lz.write(rig.lz.config_path, f'''schema = "lazaret-trusted-host-config-v2"

[profiles.deb]
image = "{test_images.debian}"
environment = {{ GREETING = "hello world", SHARED = "from-profile" }}
env = {{ TOKEN = "env:LZ_TEST_TOKEN" }}
command = ["bash", "-lc", "echo \\"default:$GREETING:$SHARED:$TOKEN:$EXTRA\\"; echo \\"path:$PATH\\"; command -v lazaret-escalate"]
''')
    env = {"LZ_TEST_TOKEN": token, "EXTRA": "x y"}
    ws = ["--workspace", str(rig.ws)]
    p = rig.lz.run(["run", "deb", *ws, "-e", "SHARED=from-run", "-e", "EXTRA"], env=env,
                   timeout=RUN_TIMEOUT)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"default:hello world:from-run:{token}:x y", p.stdout
    assert "/run/lazaret/bin" not in lines[1], f"control: the login shell kept the PATH: {lines[1]}"
    assert lines[2] == "/usr/local/bin/lazaret-escalate", p.stdout
    # An explicit command replaces the default; the profile's value stands
    # without -e; -e NAME of an unset variable is a usage error.
    p = ok(rig.lz.run(["run", "deb", *ws, "--", "sh", "-c", "echo $SHARED"], env=env))
    assert p.stdout == "from-profile\n"
    p = rig.lz.run(["run", "deb", *ws, "-e", "LZ_NOT_SET_ANYWHERE", "--", "true"], env=env)
    assert p.returncode == 2 and "LZ_NOT_SET_ANYWHERE is not set" in p.stderr, p.stderr
    p = rig.lz.run(["run", "deb", *ws, "-e", "LAZARET_ESCALATE_CAPABILITY=x", "--", "true"],
                   env=env)
    assert p.returncode == 2 and "LAZARET_" in p.stderr, p.stderr
    # `--` alone: the login shell, reading its commands from stdin.
    p = ok(rig.lz.run(["run", "deb", *ws, "--"], env=env, input=b"echo login-shell:$GREETING\n"))
    assert "login-shell:hello world" in p.stdout, p.stdout
    # The bound client cannot be replaced or removed, even by root inside.
    p = rig.lz.run(["run", "deb", *ws, "--", "sh", "-c",
                    "cp /bin/true /usr/local/bin/lazaret-escalate; echo cp=$?; "
                    "rm -f /usr/local/bin/lazaret-escalate; echo rm=$?; "
                    "cmp -s /usr/local/bin/lazaret-escalate /run/lazaret/bin/lazaret-escalate; "
                    "echo same=$?"], env=env)
    assert "cp=0" not in p.stdout and "rm=0" not in p.stdout and "same=0" in p.stdout, \
        (p.stdout, p.stderr)


# ---- configuration fingerprint -----------------------------------------------------------------

def test_changed_configuration_is_refused_while_running(rig, test_images):
    rig.config({"bb": {}})
    holder = rig.hold("bb")
    coord = rig.coordinators()[0]
    changes = {
        "image": {"bb": {"image": test_images.debian}},
        "allow_egress": {"bb": {"allow_egress": ["203.0.113.10/32"]}},
    }
    wrong = []
    for what, profiles in changes.items():
        rig.config(profiles)
        for attempt in range(3):  # the refusal must arrive every time
            p = rig.run("bb", ["true"])
            err = p.stderr
            if p.returncode != 125:
                wrong.append(f"{what} #{attempt}: exit {p.returncode}, want 125: {err}")
            elif not ("Domain" in err and "'bb'" in err and str(rig.ws) in err
                      and "fix:" in err and ("kill" in err or "stop" in err)):
                wrong.append(f"{what} #{attempt}: the message does not name the running Domain "
                             f"(profile, workspace) and how to stop it: {err}")
    rig.config({"bb": {}})
    p = rig.run("bb", ["true"])
    coords = rig.coordinators()
    rig.release(holder)
    assert not wrong, "\n".join(wrong)
    assert p.returncode == 0, f"the original configuration no longer joins: {p.stderr}"
    assert [c.pid for c in coords] == [coord.pid]


# ---- actionable failures ------------------------------------------------------------------------

def test_bad_image_reference(rig):
    rig.config({"bb": {"image": "oci:/nonexistent:latest"}})
    p = rig.run("bb", ["true"])
    assert p.returncode == 125, p.stderr
    assert "oci:/nonexistent:latest" in p.stderr
    assert "fix:" in p.stderr


def test_missing_subordinate_ids(rig, make_lz, user_factory):
    lz = rig.add_env(make_lz(user=user_factory("lztest-nosub", subids=False)))
    rig.config({"bb": {}}, lz=lz)
    ws = lz.mkdir("ws")
    p = rig.run("bb", ["true"], ws=ws, lz=lz)
    assert p.returncode == 125, p.stderr
    assert "subuid" in p.stderr, p.stderr
    assert "usermod" in p.stderr, p.stderr


# runsc missing: not tested here. Lazaret searches the system directories
# whatever PATH says, so hiding runsc needs a mount namespace (see the report).


# ---- Debian 12 ------------------------------------------------------------------------------------

def _readme_persistent_dirs(repo_root):
    """persistent_dirs of the README's example configuration."""
    text = (repo_root / "README.md").read_text()
    m = re.search(r'^persistent_dirs = (\[[^\]]*\])', text, re.M)
    assert m, "the README's example has no persistent_dirs line"
    return json.loads(m.group(1))


DPKG_INSTALL = (
    "set -e; d=/tmp/lzpkg; mkdir -p $d/DEBIAN $d/usr/bin $d/etc; "
    "printf 'Package: lzhello\\nVersion: 1.0\\nArchitecture: all\\n"
    "Maintainer: t <t@t.invalid>\\nDescription: t\\n' > $d/DEBIAN/control; "
    "printf '#!/bin/sh\\necho hello-from-lzhello\\n' > $d/usr/bin/lzhello; "
    "chmod 755 $d/usr/bin/lzhello; echo conf > $d/etc/lzhello.conf; "
    "dpkg-deb --build $d /tmp/lzhello.deb >/dev/null; dpkg -i /tmp/lzhello.deb >/dev/null; "
    "dpkg-query -W -f='${Status}\\n' lzhello")
DPKG_CHECK = ("lzhello; dpkg-query -W -f='${Status}\\n' lzhello 2>&1 || true; "
              "cat /etc/lzhello.conf 2>&1 || true")


@pytest.mark.parametrize("which", ["readme", "usr-only"])
def test_dpkg_package_survives_a_restart_with_the_readmes_persistent_dirs(
        rig, test_images, repo_root, which):
    """A package installed with dpkg -i is still installed after the Domain
    restarts, with the README's example persistent_dirs (issue 12, item 8).
    The control, /usr alone (the README's example before): the program
    survives but dpkg has forgotten it — what config check warns about."""
    dirs = _readme_persistent_dirs(repo_root) if which == "readme" else ["/usr", "/root"]
    assert "/usr" in dirs
    rig.config({"deb": {"image": test_images.debian, "persistent_dirs": dirs}})
    p = ok(rig.run("deb", sh(DPKG_INSTALL)))
    assert p.stdout.strip().endswith("install ok installed"), p.stdout
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, "\n".join(left)
    p = rig.run("deb", sh(DPKG_CHECK))
    assert "hello-from-lzhello" in p.stdout, (p.stdout, p.stderr)  # /usr persisted either way
    if which == "readme":
        assert "install ok installed" in p.stdout and "conf" in p.stdout.splitlines()[-1], \
            p.stdout
    else:
        assert "install ok installed" not in p.stdout, \
            f"control: dpkg remembered the package without its database persisting: {p.stdout}"


def test_debian_image_ls_stat_and_git(rig, test_images):
    ok(rig.lz.run_as_user(["git", "init", "-q", str(rig.ws)]))  # made on the host (docs/git.md)
    rig.config({"deb": {"image": test_images.debian}})
    p = rig.run("deb", sh(
        "set -e\n"
        "ls -la / >/dev/null && echo LS-OK\n"
        "stat / >/dev/null && echo STAT-OK\n"
        "cd /workspace\n"
        "echo hello > hello.txt\n"
        "git add hello.txt\n"
        "git -c user.name=Sandbox -c user.email=sb@lazaret.invalid commit -q "
        "-m 'commit from debian'\n"
        "echo GIT-OK"), timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    assert p.stdout == "LS-OK\nSTAT-OK\nGIT-OK\n", p.stdout
    log = rig.lz.run_as_user(["git", "-C", rig.ws, "log", "--format=%s"])
    assert log.returncode == 0, log.stderr
    assert log.stdout == "commit from debian\n"


def test_missing_runsc_is_an_actionable_failure(rig, lazaret_bin):
    """runsc hidden in a private mount namespace (bind /dev/null over it),
    then Lazaret run as the test user: exit 125, a message naming runsc and
    the fix, and no Domain left behind."""
    import shutil
    runsc = shutil.which("runsc", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    assert runsc, "runsc must be installed for this test"
    others = [p for p in ("/usr/local/sbin/runsc", "/usr/local/bin/runsc", "/usr/sbin/runsc",
                          "/usr/bin/runsc", "/sbin/runsc", "/bin/runsc")
              if os.path.exists(p) and os.path.realpath(p) != os.path.realpath(runsc)]
    assert not others, f"more than one runsc: {others}"
    rig.config({"bb": {}})
    lz = rig.lz
    env = lz.env()
    user = lz.user
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount --bind /dev/null "{os.path.realpath(runsc)}" && exec setpriv '
            f'--reuid={user.uid} --regid={user.gid} --init-groups env -i '
            + " ".join(f'"{k}={v}"' for k, v in env.items())
            + " \"$@\"", "sh"] + [str(lazaret_bin)] + rig.args("bb", ["true"], rig.ws)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=str(lz.home))
    assert p.returncode == 125, (p.returncode, p.stderr)
    assert "runsc" in p.stderr and "fix:" in p.stderr, p.stderr
    assert "apt-get install runsc" in p.stderr, p.stderr


def test_overlong_arguments_are_refused_by_name(rig):
    """An argument over the session protocol's 4096-byte bound is refused
    before anything is sent, naming the argument and the bound (it used to
    be the coordinator's "protocol error: malformed RUN"). Control: 4096
    bytes pass through intact."""
    rig.config({"bb": {}})
    ok_arg = "a" * 4096
    r = rig.run("bb", ["sh", "-c", 'printf %s "$1" | wc -c', "sh", ok_arg])
    assert r.returncode == 0 and r.stdout.strip() == "4096", (r.stdout, r.stderr)
    r = rig.run("bb", ["echo", "x", "b" * 4097])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "argument 3 of the command is 4097 bytes long" in r.stderr, r.stderr
    assert "malformed" not in r.stderr


# ---- issue 12, item 5: a non-interactive run behaves like `docker run` ----------

_TRAP = ("trap 'echo got {name}; exit 42' {name}; echo ready; "
         "while :; do sleep 0.1; done")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT],
                         ids=lambda s: s.name)
def test_signals_to_the_cli_reach_a_non_interactive_command(rig, sig):
    """The command's handler runs and the CLI exits with the command's status.
    Control (SIGINT): a command without a handler dies of the signal, 130."""
    rig.config({"bb": {}})
    name = sig.name[3:]
    s = rig.start("bb", sh(_TRAP.format(name=name)))
    s.read_until("ready")
    s.proc.send_signal(sig)
    r = s.finish()
    assert (r.returncode, r.stdout) == (42, f"ready\ngot {name}\n"), (r.returncode, r.stdout,
                                                                      r.stderr)
    if sig == signal.SIGINT:
        s = rig.start("bb", sh("echo ready; while :; do sleep 0.1; done"))
        s.read_until("ready")
        s.proc.send_signal(sig)
        r = s.finish()
        assert r.returncode == 130, (r.returncode, r.stdout, r.stderr)


def test_a_second_sigint_kills_a_command_that_ignores_the_first(rig):
    rig.config({"bb": {}})
    s = rig.start("bb", sh("trap 'echo ignored' INT; echo ready; while :; do sleep 0.1; done"))
    s.read_until("ready")
    s.proc.send_signal(signal.SIGINT)
    s.read_until("ignored")
    assert s.proc.poll() is None, "the first SIGINT ended the CLI"
    s.proc.send_signal(signal.SIGINT)
    r = s.finish()
    assert r.returncode == 137, (r.returncode, r.stdout, r.stderr)


def test_locale_and_colorterm_reach_a_non_interactive_command(rig):
    rig.config({"bb": {}})
    r = ok(rig.run("bb", sh('echo "$LANG|$LC_ALL|$COLORTERM"'),
                   env={"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "COLORTERM": "truecolor"}))
    assert r.stdout == "C.UTF-8|C.UTF-8|truecolor\n", r.stdout


# ---- issue 12, item 2 (part): lazaret stop --------------------------------------

def test_stop_ends_the_running_domain_and_tells_its_sessions(rig):
    """`lazaret stop` in the workspace: the running session is told why and
    ends with 125, the Domain is torn down, the command says what it
    stopped. Control: with nothing running it says so and succeeds; another
    profile's Domain is left alone by `--profile`."""
    rig.config({"bb": {}, "other": {}})
    p = ok(rig.lz.run(["stop", "--workspace", str(rig.ws)]))
    assert "no Domain is running for the workspace" in p.stdout, p.stdout
    s = rig.start("bb", sh("echo ready; sleep 600"))
    s.read_until("ready")
    keep = rig.hold("other")
    p = ok(rig.lz.run(["stop", "--profile", "bb"], cwd=rig.ws))
    assert p.stdout == f"stopped profile 'bb' for the workspace {rig.ws.resolve()}\n", p.stdout
    r = s.finish()
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert "the Domain was stopped with 'lazaret stop'" in r.stderr, r.stderr
    assert len(rig.coordinators()) == 1, "--profile bb stopped the other profile's Domain too"
    # Without --profile: every Domain of the workspace (here: "other").
    p = ok(rig.lz.run(["stop", "--workspace", str(rig.ws)]))
    assert "stopped profile 'other'" in p.stdout, p.stdout
    r = keep.finish()
    assert r.returncode == 125 and "stopped with 'lazaret stop'" in r.stderr, r.stderr
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left


# ---- issue 12, item 2 (part): lazaret state list ---------------------------------

def test_state_list_shows_every_domain_running_or_not(rig):
    """Every Domain with state on disk: profile, workspace, last use, the
    size of its persistent directories, and whether it runs. Control: before
    any run, nothing is listed."""
    rig.config({"bb": {"persistent_dirs": ["/opt"]}, "other": {}})
    p = ok(rig.lz.run(["state", "list", "--json"]))
    assert json.loads(p.stdout) == [], p.stdout
    ok(rig.run("bb", sh("dd if=/dev/zero of=/opt/blob bs=1024 count=2048 2>/dev/null")))
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    h = rig.hold("other")
    doms = json.loads(ok(rig.lz.run(["state", "list", "--json"])).stdout)
    by_profile = {d["profile"]: d for d in doms}
    assert set(by_profile) == {"bb", "other"}, doms
    bb, other = by_profile["bb"], by_profile["other"]
    assert bb["workspace"] == str(rig.ws.resolve()) == other["workspace"]
    assert bb["running"] is False and other["running"] is True, doms
    assert other["generation"] >= 1 and other["sessions"] == 1, other
    assert bb["state_bytes"] >= 2048 * 1024, bb
    # overlayfs's own work/work (mode 0) is not what the sandbox wrote: not
    # counted, and no reason to call the size a lower bound.
    assert bb["sizes_partial"] is False, bb
    assert bb["last_used"] and bb["last_used"].endswith("Z"), bb
    text = ok(rig.lz.run(["state", "list"])).stdout
    assert "profile 'bb'  not running" in text and "profile 'other'  running" in text, text
    assert "MiB persistent" in text, text
    rig.release(h)
