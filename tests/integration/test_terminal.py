# SPDX-License-Identifier: Apache-2.0
"""Interactive `lazaret run` on a real pseudo-terminal (issue 4, item 8).

Every test drives the CLI (or a wrapper shell around it) through pexpect: a
pty of its own, the same clean environment `lz.run` uses plus
TERM=xterm-256color, as the unprivileged test user (setpriv). Checks: the
shell prompt, a named /dev/pts terminal inside, the window size and its
changes, full-screen programs (busybox vi and top), Ctrl-C, Ctrl-\\ and
Ctrl-Z with job control, the exit status, TERM and LANG, two sessions of one
Domain side by side, the developer's terminal mode after every way a
session can end, a hung-up terminal (and a program that ignores the
hang-up), and a 10 MiB output burst.

Each test has its own Lz and workspace, so its Domain is its own; the
`terms` fixture ends every terminal it opened, then conftest's `rig` waits
until every Domain of the test is torn down (no process, gen-* directory,
socket or mount left) and fails the test otherwise.

The busybox image links only some applets; `busybox vi`, `busybox top` and
`busybox sha256sum` call the others by name.
"""

import hashlib
import io
import os
import re
import secrets
import select
import signal
import subprocess
import time

import pexpect
import pytest

from conftest import (COORDINATOR, RUN_TIMEOUT, SUPERVISOR, TEARDOWN_TIMEOUT,
                      domain_processes, ok, wait_torn_down)

ROWS, COLS = 30, 100
TERM = "xterm-256color"
PROMPT = "# "          # busybox ash's root prompt ("/workspace # ")
STEP_TIMEOUT = 20      # one command typed at the shell


def _tail(data: bytes, n: int = 3000) -> str:
    return data[-n:].decode("utf-8", "replace")


class Term:
    """One program on a pty of its own, as the Lz's user: `lazaret ARGS`
    itself, or (wrapper=SCRIPT) `sh -c SCRIPT` with $LZ naming the binary."""

    def __init__(self, lz, args=None, wrapper=None, rows=ROWS, cols=COLS, env=None):
        self.lz = lz
        e = lz.env({"TERM": TERM, "LZ": lz.bin, **(env or {})})
        u = lz.user
        prog = [str(lz.bin), *map(str, args)] if wrapper is None else ["/bin/sh", "-c", wrapper]
        argv = [f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups", "env", "-i",
                *(f"{k}={v}" for k, v in e.items()), *prog]
        self.what = " ".join(prog)
        self.log = io.BytesIO()  # everything read from the pty
        self.child = pexpect.spawn("setpriv", argv, cwd=str(lz.home), dimensions=(rows, cols),
                                   timeout=STEP_TIMEOUT, env={"PATH": os.environ["PATH"]})
        self.child.logfile_read = self.log
        self.n = secrets.randbelow(10**6) * 10

    # -- reading --
    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def text(self) -> str:
        return self.log.getvalue().decode("utf-8", "replace")

    def expect(self, pattern, timeout=STEP_TIMEOUT, what=""):
        """pattern: str (exact) or compiled bytes regex. Returns the match."""
        pat = re.compile(re.escape(pattern.encode())) if isinstance(pattern, str) else pattern
        try:
            self.child.expect([pat], timeout=timeout)
        except (pexpect.TIMEOUT, pexpect.EOF) as e:
            pytest.fail(f"{self.what}: {what or 'waiting'}: no {pat.pattern!r} within {timeout} s "
                        f"({type(e).__name__}); last output:\n{_tail(self.log.getvalue())}",
                        pytrace=False)
        return self.child.match

    def prompt(self, timeout=STEP_TIMEOUT):
        self.expect(PROMPT, timeout=timeout, what="the shell prompt")

    # -- typing --
    def type(self, data):
        self.child.send(data)

    def line(self, text):
        """Type a line and Enter (CR, as a terminal sends it)."""
        self.child.send(text + "\r")

    def marker(self, tag="M") -> tuple:
        """(what to type, what the shell prints): the printed form is not in
        the typed form, so seeing it means the command line ran."""
        self.n += 1
        return f"{tag}$(({self.n}+1)){tag}", f"{tag}{self.n + 1}{tag}"

    def sh(self, cmdline, timeout=STEP_TIMEOUT) -> str:
        """Run cmdline at the guest shell's prompt; its output (CRLF as the
        terminal delivers it, the echoed command line included) up to the
        marker printed after it. Waits for the next prompt too."""
        typed, printed = self.marker()
        self.line(f"{cmdline}; echo {typed}")
        self.expect(printed, timeout=timeout, what=f"output of {cmdline!r}")
        out = self.child.before.decode("utf-8", "replace")
        self.prompt()
        return out

    # -- ending --
    def wait_exit(self, timeout=RUN_TIMEOUT) -> int:
        """Read to EOF, reap; the exit status (128+N for signal N)."""
        self._eof(timeout)
        self.child.wait()
        st = self.child.exitstatus
        return st if st is not None else 128 + self.child.signalstatus

    def _eof(self, timeout):
        try:
            self.child.expect(pexpect.EOF, timeout=timeout)
        except pexpect.TIMEOUT:
            pytest.fail(f"{self.what} did not end within {timeout} s; last output:\n"
                        f"{_tail(self.log.getvalue())}", pytrace=False)

    def kill(self):
        if self.child.isalive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.child.close(force=True)
        except Exception:  # already closed or reaped
            pass


class Terms:
    """Per-test: conftest's Rig (configuration, holders, the final teardown
    check), its Lz, and every Term opened."""

    def __init__(self, rig, check_report):
        self.rig = rig
        self.lz = rig.lz
        self.ws = rig.ws
        self._check = check_report
        self.terms = []

    def config(self, profiles=None, **kw):
        return self.rig.config(profiles or {"bb": {}}, **kw)

    def shell(self, profile="bb", cmd=None, **kw) -> Term:
        """`lazaret run PROFILE --workspace WS [-- CMD]`, not waited for."""
        args = ["run", profile, "--workspace", self.ws] + (["--", *cmd] if cmd else [])
        t = Term(self.lz, args, **kw)
        self.terms.append(t)
        return t

    def shell_args(self, args, **kw) -> Term:
        """`lazaret ARGS` on a pty of its own, not waited for."""
        t = Term(self.lz, args, **kw)
        self.terms.append(t)
        return t

    def wrapped(self, script, **kw) -> Term:
        t = Term(self.lz, wrapper=script, **kw)
        self.terms.append(t)
        return t

    def check_report(self, t: Term, status: int):
        """No sanitizer report in what the terminal showed (stdout and
        stderr of the CLI share it)."""
        self._check(subprocess.CompletedProcess(t.what, status, "", t.text), t.what)

    def coordinator(self):
        c = domain_processes(self.lz.root, comm=COORDINATOR)
        assert len(c) == 1, f"expected one coordinator, found {c}"
        return c[0]

    def torn_down(self, timeout=TEARDOWN_TIMEOUT):
        left, waited = wait_torn_down(self.lz, timeout)
        assert not left, f"{waited:.1f} s after the session ended, left:\n" + "\n".join(left)

    def close_all(self):
        for t in self.terms:
            t.kill()


@pytest.fixture
def terms(rig, assert_no_sanitizer_report):
    """Ended before rig's own teardown check (it depends on rig)."""
    t = Terms(rig, assert_no_sanitizer_report)
    yield t
    t.close_all()


def started_shell(terms, **kw) -> Term:
    terms.config()
    t = terms.shell(**kw)
    t.prompt(timeout=RUN_TIMEOUT)
    return t


def exit_shell(terms, t: Term, code=0):
    t.line(f"exit {code}")
    st = t.wait_exit()
    terms.check_report(t, st)
    assert st == code, f"exit {code} in the shell: the CLI exited {st}\n{_tail(t.log.getvalue())}"


# ---- the shell, its terminal, its environment --------------------------------

def test_prompt_tty_and_environment(terms):
    t = started_shell(terms)
    out = t.sh("tty; test -t 0 && echo STDIN-TTY; test -t 1 && echo STDOUT-TTY; "
               "echo \"term=$TERM lang=$LANG\"")
    assert re.search(r"^/dev/pts/\d+\r$", out, re.M), f"tty printed no /dev/pts/N:\n{out}"
    assert "STDIN-TTY" in out and "STDOUT-TTY" in out, out
    assert f"term={TERM} lang=C.UTF-8\r\n" in out, out
    exit_shell(terms, t)


def test_window_size_follows_resize(terms):
    t = started_shell(terms)
    assert re.search(rf"^{ROWS} {COLS}\r$", t.sh("stty size"), re.M), t.text
    t.child.setwinsize(41, 123)  # the CLI gets SIGWINCH
    want = re.compile(r"^41 123\r$", re.M)
    deadline = time.monotonic() + 5
    out = ""
    while not want.search(out) and time.monotonic() < deadline:
        time.sleep(0.1)  # SIGWINCH travels CLI -> coordinator -> guest
        out = t.sh("stty size")
    assert want.search(out), f"stty size after resizing to 41x123:\n{out}"
    exit_shell(terms, t)


def _inner_mode(out: str) -> str:
    m = re.search(r"^([0-9a-f]+(?::[0-9a-f]+){10,})\r$", out, re.M)
    assert m, f"no stty -g output in:\n{out}"
    return m.group(1)


def test_full_screen_programs(terms):
    t = started_shell(terms)
    before = _inner_mode(t.sh("stty -g"))
    # vi: the alternate screen, its status line on the last row of a
    # ROWS-line terminal, an edit, :wq, the normal screen again.
    t.line("busybox vi /tmp/note.txt")
    t.expect("\x1b[?1049h", what="vi to switch to the alternate screen")
    t.expect(f"\x1b[{ROWS};1H\x1b[K- /tmp/note.txt", what="vi's status line on the last row")
    t.type("ihello from vi\x1b")
    time.sleep(0.3)
    t.type(":wq\r")
    t.expect("'/tmp/note.txt' 1L, 14C", what="vi to write the file")
    t.expect("\x1b[?1049l", what="vi to leave the alternate screen")
    t.prompt()
    out = t.sh("cat /tmp/note.txt")
    assert "hello from vi\r\n" in out, f"vi did not write the file:\n{out}"
    # top: its header, cut to the terminal's width; q quits.
    t.line("busybox top")
    m = t.expect(re.compile(rb"Mem: [^\r\n]*\r\n"), what="top's memory header")
    assert len(m.group(0)) - 2 <= COLS, f"top ignores the width {COLS}: {m.group(0)!r}"
    t.expect(re.compile(rb"PID\s+PPID\s+USER"), what="top's column header")
    t.expect("busybox top", what="top listing itself")
    t.type("q")
    t.prompt()
    after = _inner_mode(t.sh("stty -g"))
    assert before == after, f"the inner terminal's mode changed across vi and top: " \
                            f"{before} -> {after}"
    assert t.sh("echo alive").count("alive") == 2, "the shell does not answer after top"
    exit_shell(terms, t)


# ---- keys that become signals, job control -----------------------------------

def test_ctrl_c_and_ctrl_backslash_signal_the_foreground_command(terms):
    t = started_shell(terms)
    for key, sig in (("c", signal.SIGINT), ("\\", signal.SIGQUIT)):
        typed, printed = t.marker()
        t.line(f"echo {typed}; sleep 100")
        t.expect(printed, what="sleep 100 to start")
        time.sleep(0.5)
        t0 = time.monotonic()
        t.child.sendcontrol(key)
        t.prompt(timeout=10)
        took = time.monotonic() - t0
        out = t.sh("echo status=$?")
        assert f"status={128 + sig}\r\n" in out, \
            f"Ctrl-{key} on sleep 100: want status {128 + sig}:\n{out}"
        assert took < 5, f"Ctrl-{key} took {took:.1f} s to interrupt sleep"
    exit_shell(terms, t)


def test_ctrl_z_suspends_and_fg_resumes(terms):
    """busybox ash has job control on a real terminal: Ctrl-Z stops the
    foreground job, `jobs` lists it, `fg` brings it back (Ctrl-C ends it)."""
    t = started_shell(terms)
    typed, printed = t.marker()
    t.line(f"echo {typed}; sleep 100")
    t.expect(printed)
    time.sleep(0.5)
    t.child.sendcontrol("z")
    t.expect(re.compile(rb"Stopped\s+sleep 100"), timeout=10, what="Ctrl-Z to stop sleep")
    t.prompt()
    out = t.sh("jobs")
    assert re.search(r"\[1\]\+?\s+Stopped\s+sleep 100", out), f"jobs:\n{out}"
    ps = t.sh("ps -o pid,stat,args | grep '[s]leep 100'")
    assert re.search(r"\bT\b", ps), f"sleep is not stopped (state T):\n{ps}"
    t.line("fg")
    t.expect("sleep 100", what="fg to name the job")
    time.sleep(0.5)
    t.child.sendcontrol("c")
    t.prompt(timeout=10)
    out = t.sh("echo status=$?; jobs")
    assert "status=130\r\n" in out, f"fg + Ctrl-C:\n{out}"
    assert "Stopped" not in out.split("status=")[1], f"the job is still there:\n{out}"
    exit_shell(terms, t)


def test_exit_status_passes_through(terms):
    t = started_shell(terms)
    exit_shell(terms, t, 7)
    terms.torn_down()


def test_command_argument_runs_on_a_terminal(terms):
    """`lazaret run bb -- CMD` on a terminal: CMD gets the pty too."""
    terms.config()
    t = terms.shell(cmd=["sh", "-c", "tty; stty size; exit 5"])
    st = t.wait_exit()
    terms.check_report(t, st)
    assert st == 5, t.text
    assert re.search(rf"/dev/pts/\d+\r\n{ROWS} {COLS}\r\n", t.text), t.text


def test_a_starting_domain_names_its_workspace_on_the_terminal(terms):
    """Issue 12, item 1: a run from a subdirectory of a Git working tree
    says on the terminal which workspace it chose (the tree's top level).
    Control: a run with --workspace names it without the Git note."""
    terms.config()
    ok(terms.lz.run_as_user(["git", "init", "-q", str(terms.ws)]))
    sub = terms.lz.mkdir("ws/src/lib")
    t = terms.wrapped(f'cd {sub} && exec "$LZ" run bb -- pwd')
    st = t.wait_exit()
    terms.check_report(t, st)
    assert st == 0, t.text
    assert (f"lazaret: starting profile 'bb' for the workspace {terms.ws.resolve()} "
            "(the top of the Git working tree you are in)") in t.text, t.text
    assert "/workspace/src/lib\r\n" in t.text, t.text
    terms.torn_down()
    t = terms.shell(cmd=["true"])
    st = t.wait_exit()
    assert st == 0, t.text
    assert f"for the workspace {terms.ws.resolve()}\r\n" in t.text, t.text


# ---- two sessions of one Domain ------------------------------------------------

def test_two_sessions_side_by_side_keep_their_bytes(terms):
    terms.config()
    a = terms.shell()
    a.prompt(timeout=RUN_TIMEOUT)
    b = terms.shell()
    b.prompt(timeout=RUN_TIMEOUT)
    coord = terms.coordinator()  # one Domain, both sessions in it
    mark_a = "lzA" + secrets.token_hex(8)
    mark_b = "lzB" + secrets.token_hex(8)
    # Interleaved typing, then a burst in A while B types.
    a.line(f"echo {mark_a}-out")
    b.line(f"echo {mark_b}-out")
    a.expect(f"{mark_a}-out\r\n")
    b.expect(f"{mark_b}-out\r\n")
    a.prompt()
    b.prompt()
    burst = 20000
    typed, printed = a.marker()
    a.line(f"yes burstAAAA | head -n {burst}; echo {typed}")
    b.line(f"echo {mark_b}-during")
    b.expect(f"{mark_b}-during\r\n")
    a.expect(printed, timeout=60, what="the end of the burst")
    a.prompt()
    b.prompt()
    assert a.text.count("burstAAAA\r\n") == burst, \
        f"A received {a.text.count('burstAAAA')} of {burst} burst lines"
    for own, mine, theirs, name in ((a, mark_a, mark_b, "A"), (b, mark_b, mark_a, "B")):
        assert own.text.count(mine) >= 2, f"{name} does not see its own marker"
        assert theirs not in own.text, f"{name}'s terminal shows the other session's marker"
    assert "burst" not in b.text, "the burst of A appeared on B's terminal"
    assert terms.coordinator().pid == coord.pid
    exit_shell(terms, a)
    exit_shell(terms, b)


# ---- the developer's terminal mode on every exit path ---------------------------

# A wrapper shell on the pty: a distinctive mode first (so that a CLI which
# "restores" some default instead of what it found fails), the mode and the
# terminal's name, lazaret, then the mode again and the CLI's status.
WRAPPER = (
    'stty erase "^H" -ixon -echoctl\n'
    'echo "BEFORE<$(stty -g)> TTY<$(tty)>"\n'
    '"$LZ" run {profile} --workspace {ws}\n'
    'rc=$?\n'
    'echo "AFTER<$(stty -g)> RC<$rc>"\n'
)
MODE = re.compile(rb"BEFORE<([0-9a-f:]+)> TTY<(/dev/pts/\d+)>")
AFTER = re.compile(rb"AFTER<([0-9a-f:]+)> RC<(\d+)>")


def host_mode(tty: str) -> str:
    """stty -g of the pty the CLI runs on, read from the host side."""
    p = subprocess.run(["stty", "-g", "-F", tty], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.mark.parametrize("how", ["exit", "coordinator-killed", "supervisor-killed",
                                 "command-killed", "bad-image"])
def test_terminal_mode_restored(terms, how):
    if how == "bad-image":
        terms.config({"bb": {"image": "oci:/nonexistent:latest"}})
    else:
        terms.config()
    t = terms.wrapped(WRAPPER.format(profile="bb", ws=terms.ws))
    m = t.expect(MODE, what="the wrapper's first line")
    before, tty = m.group(1).decode(), m.group(2).decode()
    if how != "bad-image":
        t.prompt(timeout=RUN_TIMEOUT)
        during = host_mode(tty)
        assert during != before, "the CLI did not put its terminal in raw mode"
        if how == "exit":
            t.line("exit 0")
        elif how == "command-killed":
            t.line("kill -9 $$")
        else:
            role = COORDINATOR if how == "coordinator-killed" else SUPERVISOR
            victims = domain_processes(terms.lz.root, comm=role)
            assert len(victims) == 1, f"expected one {role}, found {victims}"
            os.kill(victims[0].pid, signal.SIGKILL)
    m = t.expect(AFTER, timeout=RUN_TIMEOUT, what="the CLI to end")
    after, rc = m.group(1).decode(), int(m.group(2))
    t.wait_exit()
    terms.check_report(t, rc)
    session = t.log.getvalue()[t.log.getvalue().find(b"TTY<"):]
    want = {"exit": 0, "command-killed": 128 + signal.SIGKILL}.get(how, 125)
    assert rc == want, f"{how}: the CLI exited {rc}, want {want}:\n{_tail(session)}"
    if want == 125:
        assert b"lazaret: error:" in session, f"{how}: no error message:\n{_tail(session)}"
    if how == "bad-image":
        assert b"oci:/nonexistent:latest" in session, _tail(session)
    assert after == before, f"{how}: terminal mode {before} before, {after} after"
    if how == "coordinator-killed":
        # A killed coordinator cannot clean up: the next CLI recovers its
        # generation (docs/runtime.md, Recovery) before the final check.
        p = terms.lz.run(["run", "bb", "--workspace", terms.ws, "--", "echo", "again"])
        assert (p.returncode, p.stdout) == (0, "again\n"), p.stderr


# ---- the terminal goes away ------------------------------------------------------

@pytest.mark.parametrize("last", [True, False], ids=["last-session", "other-session-left"])
@pytest.mark.parametrize("how", ["sighup", "master-closed"])
def test_hangup_ends_the_session_and_the_domain(terms, how, last):
    """SIGHUP to the CLI, or the terminal emulator closing the pty master
    (the kernel hangs up the CLI, as closing a terminal window does): the
    CLI ends at once and the Domain tears down. With another session
    keeping the Domain up, the foreground program of the hung-up session
    is seen to get SIGHUP (its trap writes a file: an editor would save its
    buffer there); as the last session, the teardown may cut it short."""
    t = started_shell(terms)
    holder = None if last else terms.rig.hold("bb", ws=terms.ws)
    typed, printed = t.marker()
    # A non-interactive sh runs its trap as soon as its foreground sleep
    # dies of the same SIGHUP (an interactive ash would wait for input).
    t.line("sh -c 'trap \"echo HUP > /workspace/hup; exit 1\" HUP; "
           f"echo {typed}; while :; do sleep 1; done'")
    t.expect(printed, what="the trapping loop to start")
    cli = t.pid
    pidfd = os.pidfd_open(cli)
    if how == "sighup":
        os.kill(cli, signal.SIGHUP)
    else:
        t.child.ptyproc.fileobj.close()  # the terminal window closed
    ready, _, _ = select.select([pidfd], [], [], 10)
    os.close(pidfd)
    assert ready, f"the CLI still runs 10 s after {how}"
    if how == "sighup":
        terms.check_report(t, t.wait_exit(timeout=10))
    if holder is not None:
        hup = terms.ws / "hup"
        deadline = time.monotonic() + 10
        while not (hup.exists() and hup.read_text() == "HUP\n") and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert hup.exists() and hup.read_text() == "HUP\n", \
            f"{how}: the program in the hung-up session did not get SIGHUP (its trap did " \
            "not run within 10 s)"
        terms.rig.release(holder)
    terms.torn_down()


def test_hangup_reaches_a_cli_that_is_not_the_session_leader(terms):
    """The CLI runs in a session of its own (setsid): the pty is not its
    controlling terminal, so closing the terminal sends it no SIGHUP. It
    must notice the hung-up terminal itself (a read of 0 or EIO in raw
    mode) and end its session; the Domain tears down. The control: the
    session leader of the pty (setsid -w, the wrapper) does get the hang-up
    and dies, so the CLI really was left to notice it alone."""
    terms.config()
    t = terms.wrapped(f'exec setsid -w "$LZ" run bb --workspace {terms.ws}')
    t.prompt(timeout=RUN_TIMEOUT)
    typed, printed = t.marker()
    t.line(f"echo {typed}")
    t.expect(printed, what="the shell in the sandbox")
    leader = t.pid
    clis = [p.pid for p in domain_processes(terms.lz.root, comm="lazaret")]
    assert len(clis) == 1 and clis[0] != leader, (clis, leader)
    with open(f"/proc/{clis[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    sid, tty_nr = int(fields[3]), int(fields[4])
    assert sid == clis[0] and tty_nr == 0, \
        f"the CLI should lead a session of its own without a controlling tty: {fields[:5]}"
    pidfd = os.pidfd_open(clis[0])
    t.child.ptyproc.fileobj.close()  # the terminal window closed
    ready, _, _ = select.select([pidfd], [], [], 10)
    os.close(pidfd)
    assert ready, "the CLI still runs 10 s after its terminal was closed"
    assert not os.path.exists(f"/proc/{leader}") or \
        open(f"/proc/{leader}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X"), \
        "control: the session leader of the pty did not get the hang-up"
    terms.torn_down()


def test_hung_up_program_that_ignores_sighup_is_killed_alone(terms):
    """A program that ignores SIGHUP outlives the hang-up; after the grace
    period (docs/runtime.md: 3 s) it is SIGKILLed. That must kill only it:
    the Domain and its other sessions stay up. The escalation is timing-
    sensitive (it races with the reaping of the killed `runsc exec`), so each
    of three rounds hangs up five such sessions at once: the interactive one
    and four plain ones."""
    terms.config()
    holder = None
    for rnd in range(3):
        t = terms.shell()
        t.prompt(timeout=RUN_TIMEOUT)
        if holder is None:
            holder = terms.rig.hold("bb", ws=terms.ws)
            coord = terms.coordinator()
        typed, printed = t.marker()
        t.line(f"trap '' HUP; echo {typed}; sleep 1000")
        t.expect(printed, what="the HUP-ignoring sleep to start")
        plain = [terms.rig.start("bb", ["sh", "-c", "trap '' HUP; echo ignoring; exec sleep 1000"],
                                 ws=terms.ws) for _ in range(4)]
        for p in plain:
            p.read_until("ignoring")
        os.kill(t.pid, signal.SIGHUP)
        for p in plain:
            p.kill(signal.SIGHUP)
        terms.check_report(t, t.wait_exit(timeout=10))
        time.sleep(5)  # past the grace period and the SIGKILL
        alive = holder.proc.poll() is None
        coords = domain_processes(terms.lz.root, comm=COORDINATOR)
        if alive and [c.pid for c in coords] == [coord.pid]:
            continue
        r = holder.finish(timeout=20)
        if not coords:
            # The coordinator died without its teardown: the next CLI recovers
            # the generation (docs/runtime.md) so that the final check is clean.
            terms.lz.run(["run", "bb", "--workspace", terms.ws, "--", "true"])
        pytest.fail(f"round {rnd + 1}: killing the hung-up commands took the Domain down: "
                    f"coordinator {coord.pid} -> {[c.pid for c in coords]}; the other session "
                    f"ended {r.returncode}: {r.stderr}", pytrace=False)
    r = holder.finish(timeout=20)
    assert r.returncode == 0, f"the other session ended {r.returncode}: {r.stderr}"
    terms.torn_down()


# ---- throughput -----------------------------------------------------------------------

def test_ten_mib_of_output_arrive_complete(terms):
    size = 10 * 1024 * 1024
    t = started_shell(terms)
    # seq's text, cut at 10 MiB: known content, no two lines alike.
    expected = "".join(f"{i}\n" for i in range(1, 1_500_001)).encode()[:size]
    # `busybox head`, not `head`: ash runs a linked applet in its own forked
    # child, where stdout stays line-buffered as it was for the terminal, so
    # `head` would make one write(2) per line (~10 s per MiB in gVisor).
    out = t.sh(f"busybox seq 1 1500000 > /tmp/s; busybox head -c {size} /tmp/s > /tmp/big; "
               "busybox sha256sum /tmp/big", timeout=60)
    assert hashlib.sha256(expected).hexdigest() in out, f"the file inside differs:\n{out}"
    b_typed, b_mark = t.marker("B")
    e_typed, e_mark = t.marker("E")
    t.line(f"echo {b_typed}; cat /tmp/big; echo {e_typed}")
    # Read the pty directly: pexpect's searching would be slow over 10 MiB.
    fd = t.child.child_fd
    buf = bytearray(t.child.buffer)  # what pexpect read past the last prompt
    t.child.buffer = b""
    e_mark = e_mark.encode()
    t0 = time.monotonic()
    while e_mark not in buf[-4096:]:
        assert time.monotonic() - t0 < 120, \
            f"{len(buf)} bytes after 120 s, no end marker; last:\n{_tail(bytes(buf))}"
        try:
            chunk = os.read(fd, 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            pytest.fail(f"the terminal closed after {len(buf)} bytes:\n{_tail(bytes(buf))}",
                        pytrace=False)
        buf += chunk
    took = time.monotonic() - t0
    data = bytes(buf)
    t.log.write(data[-4096:])
    b_mark = b_mark.encode() + b"\r\n"
    i = data.find(b_mark)
    j = data.find(e_mark, i)
    assert i >= 0 and j > i, f"markers not found; last:\n{_tail(data)}"
    got = data[i + len(b_mark):j].replace(b"\r\n", b"\n")
    assert len(got) == len(expected), \
        f"received {len(got)} of {len(expected)} bytes in {took:.1f} s"
    assert got == expected, "the bytes differ (lost, reordered or corrupted in the relay)"
    t.child.buffer = data[j + len(e_mark):]
    t.prompt()
    exit_shell(terms, t)


@pytest.mark.parametrize("answer", ["n", "y"])
def test_state_reset_asks_on_a_terminal(terms, answer):
    """`lazaret state reset` on a terminal shows what it removes and asks
    [y/N]: anything but y keeps everything (the control), y removes the
    Domain's persistent directories."""
    terms.config({"bb": {"persistent_dirs": ["/opt"]}})
    ok(terms.lz.run(["run", "bb", "--workspace", terms.ws, "--",
                     "sh", "-c", "echo kept > /opt/marker"]))
    terms.torn_down()
    uppers = list(terms.lz.root.rglob("state/*/upper/marker"))
    assert len(uppers) == 1, uppers
    t = terms.shell_args(["state", "reset", "--workspace", terms.ws])
    t.expect("the persistent directories", what="what reset removes")
    t.expect("[y/N] ", what="the question")
    t.line(answer)
    st = t.wait_exit()
    terms.check_report(t, st)
    if answer == "y":
        assert st == 0, t.text
        assert not uppers[0].exists(), "reset answered y left the persistent file"
    else:
        assert st != 0 and "Nothing was removed." in t.text, t.text
        assert uppers[0].read_text() == "kept\n", "a reset answered n removed state"


# ---- output that is costly to emulate ------------------------------------------

def test_costly_output_leaves_signals_and_keys_served(terms):
    """Attack round a26 F4: the CLI keeps a copy of the session's screen
    (client/screen.h), and DECALN (ESC # 8) fills every cell of it in 3
    bytes. A sandbox printing nothing else on a 200x500 terminal once held
    the CLI for seconds per message, reading no keys and no signals. The
    emulator now works in slices of a few milliseconds. While such a flood
    runs: a window resize reaches the program, and SIGTERM ends the CLI
    within a second or two. The control (the same output emulated at once
    takes many slices' time) is test_screen.c
    test_costly_output_is_emulated_in_slices."""
    terms.config()
    terms.lz.write(terms.ws / "decaln", b"\x1b#8" * 300000, mode=0o644)
    t = terms.shell(rows=200, cols=500)
    t.prompt(timeout=RUN_TIMEOUT)
    # one foreground job: its shell gets the SIGWINCH
    t.line("sh -c 'trap \"stty size > size-after-winch\" WINCH; while :; do cat decaln; done'")
    flood = re.compile(re.escape(b"\x1b#8" * 2000))
    t.expect(flood, what="the DECALN flood")
    t.expect(flood, what="more of the DECALN flood")
    t.child.setwinsize(199, 499)  # SIGWINCH to the CLI, which tells the sandbox
    size_file = terms.ws / "size-after-winch"
    deadline = time.monotonic() + 10
    while not (size_file.exists() and size_file.read_text().endswith("\n")) \
            and time.monotonic() < deadline:
        t.expect(flood, what="the flood while the resize travels")
    assert size_file.exists(), "the resize did not reach the program during the flood"
    assert size_file.read_text() == "199 499\n", size_file.read_text()
    t0 = time.monotonic()
    os.kill(t.pid, signal.SIGTERM)
    st = t.wait_exit()
    took = time.monotonic() - t0
    terms.check_report(t, st)
    assert st == 128 + signal.SIGTERM, f"the CLI exited {st}"
    assert took < 2.0, f"SIGTERM during the flood ended the CLI only after {took:.1f} s"
