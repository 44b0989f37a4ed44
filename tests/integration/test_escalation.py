# SPDX-License-Identifier: Apache-2.0
"""Host escalation end to end (issue 11, item 8; docs/escalation.md):
`lazaret-escalate` inside a real sandbox, the real coordinator, real host
commands, as the unprivileged test user.

Host-side evidence throughout: the host commands are small scripts in the
test user's home that append their argv and working directory to a marker
file on the host (outside the workspace, so the sandbox cannot write it),
or /usr/bin binaries whose output comes back through the mailbox.

Exit statuses of the client (protocol/mailbox.h): the command's own, or
250 denied, 251 timed out, 252 cancelled, 253 failed, 254 not sent.
"""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RUN_TIMEOUT, ok, sh
from test_terminal import Term, terms  # noqa: F401 (terms: a fixture)

DENIED, TIMED_OUT, CANCELLED, FAILED, NOT_SENT = 250, 251, 252, 253, 254


class Host:
    """The host side of a test: marker scripts and what they recorded."""

    def __init__(self, lz):
        self.lz = lz
        self.dir = lz.mkdir("hostbin")
        self.marks = lz.mkdir("marks", 0o755)

    def script(self, name, body, mode=0o755) -> Path:
        """A host script owned by the test user (one link, no group/other
        write): it records its argv and cwd in marks/NAME, then runs body."""
        mark = self.marks / name
        text = ("#!/bin/sh\n"
                f"{{ printf '%s\\n' \"$PWD\"; for a in \"$@\"; do printf '[%s]' \"$a\"; done; "
                f"echo; }} >> {mark}\n" + body + "\n")
        return self.lz.write(self.dir / name, text, mode=mode).resolve()

    def ran(self, name) -> list:
        """The runs recorded by script NAME: [(cwd, argv-line), ...]."""
        p = self.marks / name
        if not p.exists():
            return []
        lines = p.read_text().splitlines()
        return [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 1, 2)]


@pytest.fixture
def host(rig):
    return Host(rig.lz)


def esc_profile(rules=(), enabled=True, **extra) -> dict:
    return {"escalation": {"enabled": enabled, "auto_approve": list(rules)}, **extra}


def coordinator_log(lz) -> str:
    return "\n".join(p.read_text(errors="replace")
                     for p in sorted(lz.root.rglob("logs/coordinator.log")))


def store_rows(lz) -> list:
    """Every escalation row of lz's Domain Stores (store.db, read-only).
    os.walk, not rglob: outbox directories come and go while it looks."""
    import sqlite3
    rows = []
    for d, _, files in os.walk(lz.root):
        if "store.db" not in files:
            continue
        con = sqlite3.connect(f"file:{d}/store.db?mode=ro", uri=True)
        try:
            con.row_factory = sqlite3.Row
            rows += [dict(r) for r in con.execute("SELECT * FROM escalation")]
        except sqlite3.OperationalError:
            pass
        finally:
            con.close()
    return rows


def change_executable(host, tool: Path, change):
    """Change the host executable tool the way `change` says (None: not at
    all). What each other file would record shows whether it ran."""
    if change == "replaced":
        os.rename(host.script("tool.new", "echo ran-new"), tool)
    elif change == "relinked":
        os.link(tool, host.dir / "tool.link")
    elif change == "group-writable":
        os.chmod(tool, 0o775)
    elif change == "symlink":
        other = host.script("other", "echo ran-other")
        os.unlink(tool)
        os.symlink(other, tool)
    elif change == "rewritten":  # same inode, new content, same mode
        with open(tool, "a") as f:
            f.write(f"echo appended > {host.marks}/appended\n")


# ---- auto-approval (SR-8) -----------------------------------------------------

def test_auto_approved_rule_runs_on_the_host(rig, host):
    tool = host.script("tool", "echo out-$1; echo err-$2 >&2; exit 7")
    rig.config({"p": esc_profile([{"executable": str(tool), "args": ["a", "b"]}])})
    rig.lz.mkdir(rig.ws / "sub")
    r = rig.run("p", sh(f"cd /workspace/sub && lazaret-escalate --why 'need it' -- {tool} a b; "
                        "echo status=$?"))
    assert r.returncode == 0, r.stderr
    assert "out-a\n" in r.stdout and "err-b" in r.stderr, (r.stdout, r.stderr)
    assert "status=7" in r.stdout, r.stdout
    runs = host.ran("tool")
    assert runs == [(str((rig.ws / "sub").resolve()), "[a][b]")], runs
    rows = store_rows(rig.lz)
    assert len(rows) == 1 and rows[0]["state"] == "Completed", rows
    assert rows[0]["exit_status"] == 7 and "rule 1" in rows[0]["decision"], rows


def test_not_auto_approved_without_exact_match(rig, host):
    """Extra arguments without allow_extra_args, a prefix that is not an
    argument boundary (status vs statusx), another spelling of the path:
    none is auto-approved; without a terminal they are denied and nothing
    runs. Control: the exact request runs."""
    tool = host.script("tool", "echo ran")
    pre = host.script("pre", "echo ran-pre")
    rig.config({"p": esc_profile([
        {"executable": str(tool), "args": ["status"]},
        {"executable": str(pre), "args": ["status"], "allow_extra_args": True},
    ])})
    cases = [f"{tool} status extra", f"{tool} statusx", f"{pre} statusx",
             f"{tool.parent}//tool status", f"{tool.parent}/./tool status"]
    script = "; ".join(f"lazaret-escalate -- {c}; echo rc=$?" for c in cases)
    r = rig.run("p", sh(script + f"; lazaret-escalate -- {pre} status more; echo rc=$?;"
                        f" lazaret-escalate -- {tool} status; echo rc=$?"))
    rcs = re.findall(r"rc=(\d+)", r.stdout)
    assert rcs[:len(cases)] == [str(DENIED)] * len(cases), (r.stdout, r.stderr)
    assert rcs[len(cases):] == ["0", "0"], (r.stdout, r.stderr)
    assert host.ran("tool") == [(str(rig.ws.resolve()), "[status]")]
    assert host.ran("pre") == [(str(rig.ws.resolve()), "[status][more]")]


def test_shell_metacharacters_reach_the_host_literally(rig, host):
    tool = host.script("tool", "exit 0")
    args = ["a;touch /tmp/lz-pwned", "b && id", "$(id)", "`id`", "c|d", "*"]
    rig.config({"p": esc_profile([{"executable": str(tool), "args": args}])})
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in args)
    r = rig.run("p", sh(f"lazaret-escalate -- {tool} {quoted}; echo rc=$?"))
    assert "rc=0" in r.stdout, (r.stdout, r.stderr)
    assert host.ran("tool") == [(str(rig.ws.resolve()), "".join(f"[{a}]" for a in args))]
    assert not Path("/tmp/lz-pwned").exists()


def test_relative_argv0_is_refused_before_sending(rig, host):
    rig.config({"p": esc_profile()})
    r = rig.run("p", sh("lazaret-escalate -- ls; echo rc=$?; lazaret-escalate -- ./x; "
                        "echo rc=$?; ls /run/lazaret/mailbox/inbox | wc -l"))
    assert re.findall(r"rc=(\d+)", r.stdout) == [str(NOT_SENT)] * 2, (r.stdout, r.stderr)
    assert "CommandRequiresShell" in r.stderr, r.stderr
    assert store_rows(rig.lz) == []


def test_disabled_profile_denies_at_once(rig, host):
    tool = host.script("tool", "echo ran")
    rig.config({"p": esc_profile(enabled=False)})
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert f"rc={DENIED}" in r.stdout, (r.stdout, r.stderr)
    assert "disabled" in r.stderr, r.stderr
    assert host.ran("tool") == []


# ---- the executable changes (spec 3.2) -----------------------------------------

@pytest.mark.parametrize("change", ["replaced", "relinked", "group-writable", "symlink", None])
def test_rule_executable_changed_after_load_fails(rig, host, change):
    tool = host.script("tool", "echo ran")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    # The asking session starts (the configuration is loaded, the rule's
    # executable pinned), then waits for the change before it asks.
    asker = rig.start("p", sh("echo READY; while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                              f"lazaret-escalate -- {tool}; echo rc=$?"))
    asker.read_until("READY")
    change_executable(host, tool, change)
    rig.lz.write(rig.ws / "go", "")
    r = asker.finish()
    if change is None:  # the control: unchanged, it runs
        assert "rc=0" in r.stdout and "ran" in r.stdout, (r.stdout, r.stderr)
        assert len(host.ran("tool")) == 1
        return
    assert f"rc={FAILED}" in r.stdout, (r.stdout, r.stderr)
    assert host.ran("tool") == [] and host.ran("tool.new") == [] and host.ran("other") == []


# ---- requests the coordinator refuses ------------------------------------------

REQUESTS_PER_SESSION = 12  # 50, then 25, until make check neared its 30 minutes: the concurrency is the 16


def test_many_sessions_many_concurrent_requests(rig, host):
    """16 sessions x 12 auto-approved requests, all sessions at once (each
    asks one after the other): every request ends Completed with its own
    output and status. Not 800 clients at once: with runsc 2022's ptrace
    platform every guest process has a host stub with one thread per sentry
    thread that ran it, and 32 busy clients already took this Domain past
    its bound on host tasks (docs/limits.md, 4096 here: the sentry cannot
    create a stub, "error initializing first thread: resource temporarily
    unavailable", and the sandbox ends). 16 in flight peaked at about 3100
    host tasks (docs/escalation.md "Limits")."""
    rig.config({"p": esc_profile([{"executable": "/usr/bin/printf", "args": ["%s\\n"],
                                   "allow_extra_args": True}])})
    holder = rig.hold("p")
    n = REQUESTS_PER_SESSION
    script = (f"i=0; while [ $i -lt {n} ]; do pids=; for j in 0; do "
              "lazaret-escalate -- /usr/bin/printf '%s\\n' \"$S-$i\" > /tmp/o.$S.$i & "
              "pids=\"$pids $!:$i\"; i=$((i+1)); done; "
              "for p in $pids; do wait ${p%:*}; echo $? > /tmp/rc.$S.${p#*:}; done; done; "
              f"i=0; while [ $i -lt {n} ]; do printf '%s:%s:%s\\n' $i \"$(cat /tmp/rc.$S.$i)\" "
              "\"$(cat /tmp/o.$S.$i)\"; i=$((i+1)); done")
    sessions = [rig.start("p", ["env", f"S=s{k}", "sh", "-c", script]) for k in range(16)]
    for k, s in enumerate(sessions):
        r = s.finish(timeout=300)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines == [f"{i}:0:s{k}-{i}" for i in range(n)], (k, r.stdout[-2000:], r.stderr)
    rig.release(holder)
    rows = store_rows(rig.lz)
    assert len(rows) == n * len(sessions) and all(r["state"] == "Completed" for r in rows)


# ---- the prompt (FR-5, DX-4), in a real terminal --------------------------------

QUESTION = "Approve? [y/N] "
HEADER = "Host escalation request"
PROMPT_GRACE = 1.0  # keys this soon after the prompt answer nothing (src/client/prompt.c)


def answer(t, keys):
    """The developer's answer, typed once the prompt has been up long
    enough to be read (keys typed sooner are ignored)."""
    time.sleep(PROMPT_GRACE + 0.2)
    t.type(keys)


def prompt_shell(terms, host, env=None):
    """A Domain whose profile allows escalation without rules, an
    interactive shell in it, and a host marker script."""
    tool = host.script("tool", "echo host-ran-$1")
    terms.config({"bb": esc_profile()})
    t = terms.shell(env=env)
    t.prompt(timeout=RUN_TIMEOUT)
    return t, tool


def ask(t, tool, arg="x", why="to test", pre=""):
    """Start a request at the shell prompt; returns the marker printed
    after it with its status."""
    typed, printed = t.marker("R")
    t.line(f"{pre}lazaret-escalate --why '{why}' -- {tool} {arg}; echo {typed}:$?")
    return printed


def test_prompt_approve_and_deny(terms, host):
    t, tool = prompt_shell(terms, host)
    done = ask(t, tool, "first")
    t.expect(QUESTION, what="the prompt")
    shown = t.text[t.text.rindex(HEADER):]
    for item in ("profile:", "'bb'", "session:", "working directory:", "'/workspace'",
                 f"'{tool}'", "argument 1:", "'first'", "the agent says:", "'to test'"):
        assert item in shown, (item, shown)
    time.sleep(0.5)
    assert host.ran("tool") == []  # nothing runs before the answer
    st = terms.lz.run(["status"])  # the pending request, escaped, in lazaret status
    assert st.returncode == 0 and "escalations: 1 pending" in st.stdout, st.stdout
    assert f"'{tool}' 'first'" in st.stdout and "prompting" in st.stdout, st.stdout
    answer(t, "y\r")
    t.expect(f"{done}:0", what="the approved request's status")
    assert "host-ran-first" in t.text
    assert host.ran("tool") == [(str(terms.ws.resolve()), "[first]")]
    t.prompt()
    done = ask(t, tool, "second")
    t.expect(QUESTION, what="the second prompt")
    answer(t, "n\r")
    t.expect(f"{done}:{DENIED}", what="the denied request's status")
    assert len(host.ran("tool")) == 1
    t.prompt()
    done = ask(t, tool, "third")  # anything but y: denied; so is Enter alone
    t.expect(QUESTION)
    answer(t, "yy\r")
    t.expect(f"{done}:{DENIED}")
    done = ask(t, tool, "fourth")
    t.expect(QUESTION)
    answer(t, "\r")
    t.expect(f"{done}:{DENIED}")
    assert len(host.ran("tool")) == 1
    t.line("exit")
    assert t.wait_exit() == 0


def test_pretyped_y_does_not_approve(terms, host):
    """y and Enter typed while the request is on its way (before the prompt
    is on the screen), and right as it appears, are not an answer. Control:
    the approve test, where y and Enter typed once it could be read
    approve."""
    t, tool = prompt_shell(terms, host)
    done = ask(t, tool, "x", pre="sleep 1; ")
    t.type("y\r")
    t.type("y\r")
    t.expect(QUESTION, what="the prompt")
    # y and Enter the moment the prompt appears (i11b, B7: keys meant for
    # the agent's own question, the prompt swapped in under them): ignored.
    t.type("y\r")  # at once: well inside the 1 s the CLI ignores keys for
    t.expect("were ignored", what="the notice that early keys were ignored")
    time.sleep(1.5)
    assert host.ran("tool") == [], t.text
    answer(t, "n\r")
    t.expect(f"{done}:{DENIED}")
    assert host.ran("tool") == []
    t.line("exit")
    t.wait_exit()


def test_justification_and_arguments_are_shown_escaped(terms, host):
    t, tool = prompt_shell(terms, host)
    why = "\x1b[2J\x1b]0;pwned\x07 RTL\u202eevil ZW\u200bX"
    # printf inside the sandbox makes the bytes; the shell passes them on.
    typed, printed = t.marker("R")
    t.line("lazaret-escalate --why \"$(printf '\\033[2J\\033]0;pwned\\007 RTL\\342\\200\\256evil "
           f"ZW\\342\\200\\213X')\" -- {tool} \"$(printf 'a\\033[31mb')\"; echo {typed}:$?")
    t.expect(QUESTION, what="the prompt")
    raw = t.log.getvalue()
    shown = raw[raw.rindex(HEADER.encode()):]
    for bad in (b"\x1b[2J", b"\x1b]0;", b"\x07", "\u202e".encode(), "\u200b".encode(),
                b"\x1b[31m"):
        assert bad not in shown, (bad, shown)
    for escaped in (b"\\x1b[2J", b"\\x1b]0;pwned\\x07", b"\\xe2\\x80\\xae", b"\\xe2\\x80\\x8b",
                    b"'a\\x1b[31mb'"):
        assert escaped in shown, (escaped, shown)
    answer(t, "n\r")
    t.expect(f"{printed}:{DENIED}")
    assert why  # the control text above is what the sandbox printed
    t.line("exit")
    t.wait_exit()


def test_output_is_held_while_the_prompt_is_up(terms, host):
    t, tool = prompt_shell(terms, host)
    t.line("(while :; do echo TICK; sleep 0.2; done) & TICKER=$!")
    t.expect("TICK", what="the ticker")
    done = ask(t, tool)
    t.expect(QUESTION, what="the prompt")
    at = len(t.log.getvalue())
    time.sleep(2)
    try:
        t.child.expect("TICK", timeout=0.5)
        seen = True
    except Exception:
        seen = False
    during = t.log.getvalue()[at:]
    assert not seen and b"TICK" not in during, during
    answer(t, "n\r")
    t.expect(f"{done}:{DENIED}")
    t.expect("TICK", what="the ticker's output after the decision")
    t.line("kill $TICKER")
    t.prompt()
    t.line("exit")
    t.wait_exit()


def test_prompt_only_in_the_asking_terminal(terms, host):
    t_a, tool = prompt_shell(terms, host)
    t_b = terms.shell()
    t_b.prompt(timeout=RUN_TIMEOUT)
    done = ask(t_b, tool, "from-b")
    t_b.expect(QUESTION, what="B's prompt")
    before = t_a.log.getvalue()
    out = t_a.sh("echo A-STILL-WORKS")  # A keeps working meanwhile
    assert "A-STILL-WORKS" in out
    assert HEADER.encode() not in t_a.log.getvalue(), t_a.text
    answer(t_b, "y\r")
    t_b.expect(f"{done}:0")
    time.sleep(0.5)
    assert HEADER.encode() not in t_a.log.getvalue()[len(before):]
    assert host.ran("tool") == [(str(terms.ws.resolve()), "[from-b]")]
    for t in (t_a, t_b):
        t.line("exit")
        t.wait_exit()


def test_prompt_times_out(terms, host):
    t, tool = prompt_shell(terms, host, env={"LAZARET_ESCALATION_TIMEOUT": "2"})
    done = ask(t, tool)
    t.expect(QUESTION, what="the prompt")
    t.expect("withdrawn", timeout=10, what="the timeout")
    t.expect(f"{done}:{TIMED_OUT}")
    answer(t, "y\r")  # too late: answers nothing
    time.sleep(0.5)
    assert host.ran("tool") == []
    t.line("exit")
    t.wait_exit()


def test_session_without_terminal_is_denied(rig, host):
    tool = host.script("tool", "echo ran")
    rig.config({"p": esc_profile()})
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert f"rc={DENIED}" in r.stdout, (r.stdout, r.stderr)
    assert "no terminal" in r.stderr, r.stderr
    assert host.ran("tool") == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_nothing_of_an_approved_command_survives_it(rig, host):
    """A host command that leaves a background grandchild in its process
    group and one in a new session (setsid): when the command ends, both
    are gone. Control: the same script run directly on the host leaves both
    running (the attack is real)."""
    body = (f"sleep 300 & echo $! > {host.marks}/bg.pid; "
            f"setsid sh -c 'echo $$ > {host.marks}/escaped.pid; exec sleep 300' & "
            "sleep 0.5; echo started")
    tool = host.script("tool", body)
    # Control, without Lazaret: as the test user, straight on the host.
    u = rig.lz.user
    subprocess.run(["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups",
                    str(tool)], check=True, timeout=10, stdout=subprocess.DEVNULL)
    pids = [int((host.marks / n).read_text()) for n in ("bg.pid", "escaped.pid")]
    try:
        assert all(_alive(p) for p in pids), "control: the grandchildren should survive"
    finally:
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert "started" in r.stdout and "rc=0" in r.stdout, (r.stdout, r.stderr)
    pids = [int((host.marks / n).read_text()) for n in ("bg.pid", "escaped.pid")]
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"left running after the command ended: {left}"


# ---- attack round i11 (an outside attacker's findings, each with a control) -----

def test_workspace_program_is_never_run(rig, host):
    """A5: a program in the workspace (the sandbox can rewrite it after any
    check) is refused even though the developer would be asked. Control:
    the same script outside the sandbox's reach runs (a rule for it)."""
    ws_tool = rig.lz.write(rig.ws / "tool.sh", f"#!/bin/sh\necho ran > {host.marks}/ws-ran\n",
                           mode=0o755)
    outside = host.script("tool", "echo ran-outside")
    rig.config({"p": esc_profile([{"executable": str(outside)}])})
    r = rig.run("p", sh(f"lazaret-escalate -- {ws_tool.resolve()}; echo rc=$?; "
                        f"lazaret-escalate -- {outside}; echo rc=$?"))
    assert re.findall(r"rc=(\d+)", r.stdout) == [str(FAILED), "0"], (r.stdout, r.stderr)
    assert "the sandbox can change" in r.stderr, r.stderr
    assert not (host.marks / "ws-ran").exists()
    assert len(host.ran("tool")) == 1


def test_deep_trees_in_the_inbox_do_not_outlive_the_domain(rig, host):
    """A2: a 400-deep directory tree under a temporary name and another
    under a record-like name in the inbox: the Domain still ends without
    leftovers (rig's final check: no gen-* directory) and starts again.
    Control: the trees were really made (the sandbox sees them)."""
    tool = host.script("tool", "echo ok")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    # Both built under temporary names, then one renamed to a plain name:
    # the coordinator takes a non-record entry out as soon as it is created
    # (IN_CREATE), so a tree cannot be built in place under such a name.
    mk = ("cd /run/lazaret/mailbox/inbox && for top in .deep .deep2; do (mkdir $top && cd $top "
          "&& i=0 && while [ $i -lt 400 ]; do mkdir d && cd d && i=$((i+1)); done && "
          "echo leaf > f && echo made-$top); done && mv .deep2 deep && echo made-deep")
    r = rig.run("p", sh(mk))
    assert "made-.deep" in r.stdout and "made-deep" in r.stdout, (r.stdout, r.stderr)
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert "rc=0" in r.stdout, (r.stdout, r.stderr)


def test_prompt_is_drawn_on_a_reset_screen(terms, host):
    """A6: output before the prompt sets a scroll region, the DEC graphics
    character set and the alternate screen, and draws a fake prompt. The
    real prompt comes after a full reset and a cleared screen, and the
    fake one was the sandbox's bytes before it (the control: they are in
    the stream, so the reset is what separates them)."""
    t, tool = prompt_shell(terms, host)
    typed, printed = t.marker("R")
    t.line("printf 'FAKE executable: /usr/bin/make\\n\\033[8;9r\\033(0\\033[?1049h\\033[9;1H'; "
           f"lazaret-escalate -- {tool} x; echo {typed}:$?")
    t.expect(QUESTION, what="the prompt")
    raw = t.log.getvalue()
    fake = raw.rindex(b"FAKE executable")
    header = raw.rindex(HEADER.encode())
    between = raw[fake:header]
    for seq in (b"\x1b[?1049l", b"\x1b[r", b"\x1b(B", b"\x1b[0m", b"\x1b[2J"):
        assert seq in between, (seq, between)
    assert fake < header
    answer(t, "n\r")
    t.expect(f"{printed}:{DENIED}")
    t.line("printf '\\033[r\\033(B\\033[?1049l'; exit")
    t.wait_exit()


def test_no_notice_is_written_during_the_prompt(terms, host):
    """A8: Git Sentry notices the sandbox provokes (names of its choosing)
    while a prompt is up are shown only after the decision. Control: the
    notice does appear (after the answer)."""
    t, tool = prompt_shell(terms, host)
    done = ask(t, tool, pre="(sleep 1; mkdir -p /workspace/APPROVE-IT/.git; "
                            "echo '[core]' > /workspace/APPROVE-IT/.git/config) & ")
    t.expect(QUESTION, what="the prompt")
    at = len(t.log.getvalue())
    time.sleep(4)  # the nested repository is made and audited meanwhile
    during = t.log.getvalue()[at:]
    assert b"APPROVE-IT" not in during and b"Git Sentry" not in during, during
    answer(t, "n\r")
    t.expect(f"{done}:{DENIED}")
    after = t.log.getvalue()
    denied = after.rindex(b"lazaret: denied")
    assert b"Git Sentry" in after[denied:], after[at:]  # the held notice, after the answer
    t.line("exit")
    t.wait_exit()


def test_escalated_git_never_reads_a_config_made_just_before(rig, host):
    """A1: the sandbox makes a nested repository whose config runs a
    program (core.fsmonitor) and at once asks for an auto-approved host
    `git status` in it: the Sentry's audit runs before the command, so the
    program never runs on the host. Control: the same repository, made on
    the host and used by host git directly, does run it."""
    mark = host.marks / "fsmonitor-ran"
    hook = host.script("fsm", f"touch {mark}; exit 1")
    # Control, without Lazaret.
    u = rig.lz.user
    ctl = rig.lz.mkdir("ctl")
    subprocess.run(["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups", "sh",
                    "-c", f"cd {ctl} && git init -q . && git config core.fsmonitor {hook} && "
                          "git status >/dev/null 2>&1; true"],
                   check=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(rig.lz.home)})
    assert mark.exists(), "control: host git should run core.fsmonitor"
    mark.unlink()
    rig.config({"p": esc_profile([{"executable": "/usr/bin/git", "args": ["status"]}])})
    r = rig.run("p", sh("mkdir -p /workspace/n/.git/objects /workspace/n/.git/refs && "
                        "echo 'ref: refs/heads/main' > /workspace/n/.git/HEAD && "
                        f"printf '[core]\\n\\tfsmonitor = {hook}\\n' > /workspace/n/.git/config && "
                        "cd /workspace/n && lazaret-escalate -- /usr/bin/git status; echo rc=$?"))
    assert "rc=" in r.stdout, (r.stdout, r.stderr)
    time.sleep(0.5)
    assert not mark.exists(), (r.stdout, r.stderr)


@pytest.mark.parametrize("change", ["replaced", "relinked", "group-writable", "symlink",
                                    "rewritten", None])
def test_executable_changed_between_prompt_and_run_fails(terms, host, change):
    """The developer approves a file; it changes before it runs: the
    request ends Failed and nothing runs (the decision is bound to the
    object: device, inode, size, change time). Control (None): unchanged,
    it runs."""
    t, tool = prompt_shell(terms, host)
    done = ask(t, tool, "go")
    t.expect(QUESTION, what="the prompt")
    change_executable(host, tool, change)
    answer(t, "y\r")
    if change is None:
        t.expect(f"{done}:0")
        assert host.ran("tool") == [(str(terms.ws.resolve()), "[go]")]
    else:
        t.expect(f"{done}:{FAILED}")
        assert host.ran("tool") == [] and host.ran("tool.new") == [] and host.ran("other") == []
        assert not (host.marks / "appended").exists()
    t.line("exit")
    t.wait_exit()


def test_prompt_too_tall_for_the_terminal_is_denied(terms, host):
    """C1 (round 3): a request whose prompt would not fit the terminal
    (long arguments scroll the real executable off the top, leaving a
    fake drawn at the end of an argument) is denied without being shown.
    Control: the same request with short arguments is shown and asked."""
    t, tool = prompt_shell(terms, host)
    typed, printed = t.marker("R")
    t.line(f"lazaret-escalate -- {tool} \"$(head -c 3000 /dev/zero | tr '\\0' a)\" "
           f"\"$(head -c 3000 /dev/zero | tr '\\0' b)\"; echo {typed}:$?")
    t.expect("Press any key to go back to the session.", what="the too-tall request denied")
    assert "needs" in t.text and "Make the window larger" in t.text
    assert QUESTION not in t.text
    # The denial stays on a cleared screen until a key (not the program's):
    # the session's screen then comes back with what it printed meanwhile.
    shown = t.text[t.text.rindex("\x1b[2J"):]
    assert "Make the window larger" in shown and printed not in shown, shown
    answer(t, "q")
    t.expect(f"{printed}:{DENIED}", what="the session's screen back after a key")
    done = ask(t, tool, "short")  # the control
    t.expect(QUESTION, what="the short request's prompt")
    assert "=> runs '" + str(tool) + "' with 1 argument" in t.text
    answer(t, "n\r")
    t.expect(f"{done}:{DENIED}")
    assert host.ran("tool") == []
    t.line("exit")
    t.wait_exit()


def test_a_withdrawn_prompt_is_not_silently_replaced(terms, host):
    """C2 (round 3): the sandbox withdraws a request (its client
    cancelled) and asks another at once: the new prompt says that it is a
    different request, and carries its own number. Control: the first
    prompt had no such line."""
    tool = host.script("tool", "echo ran-$1")
    terms.config({"bb": esc_profile()})
    script = (f"lazaret-escalate -- {tool} first & P=$!; sleep 3; kill -TERM $P; wait $P; "
              f"lazaret-escalate -- {tool} second; echo rc=$?")
    t = terms.shell(cmd=["sh", "-c", script])
    t.expect(QUESTION, timeout=RUN_TIMEOUT, what="the first prompt")
    first = t.text
    assert "DIFFERENT REQUEST" not in first
    m = re.search(r"Host escalation request #(\d+)", first)
    assert m, first
    t.expect("withdrawn", timeout=15)
    t.expect(QUESTION, what="the second prompt")
    second = t.text[len(first):]
    assert f"request #{m.group(1)} was withdrawn before you answered. THIS IS A DIFFERENT " \
           f"REQUEST (#{int(m.group(1)) + 1})" in second, second
    answer(t, "n\r")
    t.expect(f"rc={DENIED}")
    assert host.ran("tool") == []
    t.wait_exit()


def test_working_directory_swapped_after_the_decision_fails(terms, host):
    """D1 (round 4): a request from /workspace/scratch; while its prompt
    is up the sandbox replaces scratch by a symlink to the workspace root
    (whose host side holds the host's git-ignored files). Approved, it
    fails and runs nowhere. Control: without the swap it runs in scratch,
    and the prompt says where on this machine."""
    tool = host.script("tool", "echo ran")
    terms.config({"bb": esc_profile()})
    terms.rig.lz.mkdir(terms.ws / "scratch")
    script = (f"cd /workspace/scratch && lazaret-escalate -- {tool} control; echo rc=$?; "
              f"lazaret-escalate -- {tool} swapped & P=$!; sleep 2; cd /workspace; "
              f"mv scratch scratch.old && ln -s . scratch; wait $P; echo rc=$?")
    t = terms.shell(cmd=["sh", "-c", script])
    t.expect(QUESTION, timeout=RUN_TIMEOUT, what="the control's prompt")
    assert f"runs on this machine in: '{terms.ws}/scratch'" in t.text, t.text[-3000:]
    answer(t, "y\r")
    t.expect("rc=0")
    t.expect(QUESTION, what="the second prompt")
    time.sleep(2)  # the swap happens meanwhile
    answer(t, "y\r")
    t.expect(f"rc={FAILED}", timeout=20)
    assert "another directory than" in t.text or "not a plain directory" in t.text, t.text[-2000:]
    assert host.ran("tool") == [(f"{terms.ws.resolve()}/scratch", "[control]")]
    t.wait_exit()


def test_prompt_is_on_the_terminal_even_with_stderr_redirected(terms, host):
    """D6 (round 4): `lazaret run … 2>file` on a terminal: the prompt is
    drawn on the terminal (stdout), not into the file. Control: the file
    gets none of it."""
    tool = host.script("tool", "echo ran")
    terms.config({"bb": esc_profile()})
    err = terms.rig.lz.home / "stderr.txt"
    t = terms.wrapped(f'exec "$LZ" run bb --workspace {terms.ws} -- '
                      f'sh -c "lazaret-escalate -- {tool}; echo rc=\\$?" 2>{err}')
    t.expect(QUESTION, timeout=RUN_TIMEOUT, what="the prompt on the terminal")
    answer(t, "n\r")
    t.expect(f"rc={DENIED}")
    t.wait_exit()
    assert HEADER not in err.read_text(errors="replace")


def test_prompt_on_a_narrow_terminal_is_denied(terms, host):
    """D4 (round 4): below 40 columns no prompt is shown: denied. Control:
    the approve test at 100 columns."""
    tool = host.script("tool", "echo ran")
    terms.config({"bb": esc_profile()})
    t = terms.shell(cmd=["sh", "-c", f"lazaret-escalate -- {tool} x; echo rc=$?"], cols=30)
    t.expect(f"rc={DENIED}", timeout=RUN_TIMEOUT)
    assert "at least 40 columns" in t.text.replace("\r\n", "") or "columns" in t.text, t.text
    assert QUESTION not in t.text
    assert host.ran("tool") == []
    t.wait_exit()
    # the program ended with the denial up: said again below its screen
    assert "was denied without being shown" in t.text[t.text.rindex(f"rc={DENIED}"):], t.text
