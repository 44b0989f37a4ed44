# SPDX-License-Identifier: Apache-2.0
"""The developer's terminal around an escalation prompt and at a session's
abnormal end (issue 26, item 2), driven through a real terminal: tmux 3.3.

`lazaret run bb -- /workspace/term_probe MODE CMD...` runs in a detached tmux
pane of a fixed size. term_probe (term_probe.c) hides the cursor, turns on
bracketed paste, button mouse with SGR encoding, focus reporting and
application cursor keys, draws a known screen (on the alternate screen, or
inline on the normal one with the cursor mid-line, as Ink does), runs
`lazaret-escalate` and afterwards never draws again. So whatever the pane
shows after the decision is Lazaret's repaint. The control is the screen the
prompt leaves before the decision: it shares no line with the probe's screen,
so without the repaint the probe's screen would stay lost (as it did before).

Assertions use `tmux capture-pane -p -e` (text and attributes) and tmux's
format variables; tmux 3.3 has none for bracketed paste, so a bracketed
`paste-buffer -p` is checked at the probe's end instead (it records what it
reads).
"""

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RUN_TIMEOUT
from test_escalation import DENIED, Host, esc_profile

ROWS, COLS = 30, 100
MODES = ("#{alternate_on} cursor=#{cursor_flag} any=#{mouse_any_flag} "
         "button=#{mouse_button_flag} sgr=#{mouse_sgr_flag} kcursor=#{keypad_cursor_flag} "
         "wrap=#{wrap_flag} region=#{scroll_region_upper},#{scroll_region_lower} "
         "at=#{cursor_x},#{cursor_y}")
EXITED = "CLI-EXITED-"  # the wrapper's line after the CLI ends
PROMPT_GRACE = 1.0  # keys this soon after the prompt answer nothing (src/client/prompt.c)


SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def cells(capture: str) -> list:
    """capture-pane -p -e as rows of (character, attributes): tmux writes
    only the changes of attributes, wherever a line ends, so two captures
    of one screen can differ in where a reset falls."""
    attrs = {}
    rows = []
    for line in capture.split("\n"):
        row, at = [], 0
        for m in SGR.finditer(line):
            row += [(ch, tuple(sorted(attrs.items()))) for ch in line[at:m.start()]]
            at = m.end()
            ps = [int(x) if x else 0 for x in re.split("[;:]", m.group(1))] or [0]
            i = 0
            while i < len(ps):
                p = ps[i]
                if p == 0:
                    attrs = {}
                elif p in (38, 48):
                    n = 3 if i + 1 < len(ps) and ps[i + 1] == 5 else 5
                    attrs["fg" if p == 38 else "bg"] = tuple(ps[i:i + n])
                    i += n - 1
                elif 30 <= p <= 37 or 90 <= p <= 97:
                    attrs["fg"] = p
                elif 40 <= p <= 47 or 100 <= p <= 107:
                    attrs["bg"] = p
                elif p == 39:
                    attrs.pop("fg", None)
                elif p == 49:
                    attrs.pop("bg", None)
                elif 21 <= p <= 29:
                    attrs.pop(p - 20, None)
                    if p == 22:
                        attrs.pop(2, None)
                else:
                    attrs[p] = True
                i += 1
        row += [(ch, tuple(sorted(attrs.items()))) for ch in line[at:]]
        rows.append(row)
    return rows


class Pane:
    """One tmux server (a socket of the test's own) with one pane."""

    def __init__(self, lz, ws, argv, then=""):
        """then: shell commands the pane runs after the exit marker."""
        self.sock = str(lz.path("tmux.sock"))
        e = lz.env({"TERM": "xterm-256color"})
        u = lz.user
        # The CLI under a shell that outlives it: tmux resets a dead pane's
        # modes (hides its cursor, writes "Pane is dead"), so the pane must
        # live on to show what the CLI left. The marker is printed where the
        # CLI left the cursor.
        script = shlex.join([str(lz.bin), *map(str, argv)]) + \
            f'; echo "{EXITED}$?"; {then}exec sleep 600'
        cmd = ["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups", "env", "-i",
               *(f"{k}={v}" for k, v in e.items()), "/bin/sh", "-c", script]
        # The pane stays after its command ends (remain-on-exit, set before
        # the command starts): what the CLI left on it is what is checked.
        conf = lz.write("tmux.conf", "set -g remain-on-exit on\n", mode=0o644)
        self.tmux("-f", str(conf), "new-session", "-d", "-x", str(COLS), "-y", str(ROWS),
                  "-c", str(lz.home), subprocess.list2cmdline(cmd))

    def tmux(self, *args) -> str:
        p = subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True,
                           timeout=10)
        assert p.returncode == 0, f"tmux {args}: {p.stderr}"
        return p.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-e")

    def modes(self) -> str:
        return self.tmux("display-message", "-p", MODES).strip()

    def cli_ended(self) -> bool:
        return EXITED in self.tmux("capture-pane", "-p")

    def wait(self, cond, what, timeout=RUN_TIMEOUT, now=None):
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout} s; the pane:\n"
                            f"{now() if now else self.screen()}", pytrace=False)
            time.sleep(0.05)  # tmux has no event to wait on; capture is cheap

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def pane_rig(rig):
    made = []

    def start(mode, cmd):
        probe = Path(rig.lz.bin).parents[2] / "tests" / "integration" / "term_probe"
        assert probe.exists(), f"{probe} is not built"
        rig.lz.write(rig.ws / "term_probe", probe.read_bytes(), mode=0o755)
        p = Pane(rig.lz, rig.ws, ["run", "bb", "--workspace", rig.ws, "--",
                                  "/workspace/term_probe", mode, *cmd])
        made.append(p)
        p.wait(lambda: (rig.ws / "term-probe-ready").exists() and "PROBE READY" in p.screen(),
               "probe screen")
        return p

    yield start
    for p in made:
        p.close()


def _answer(p, keys):
    time.sleep(PROMPT_GRACE + 0.2)  # keys typed sooner are ignored, by design
    p.tmux("send-keys", *keys)


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("mode", ["alt", "inline"])
def test_screen_and_modes_come_back_after_a_prompt(rig, pane_rig, mode, decision):
    host = Host(rig.lz)
    tool = host.script("tool", "echo host-ran-$1")
    rig.config({"bb": esc_profile()})
    p = pane_rig(mode, ["lazaret-escalate", "--why", "term test", "--", tool, "x"])
    before, modes_before = p.screen(), p.modes()
    before_text = p.tmux("capture-pane", "-p").splitlines()
    assert modes_before.startswith("1 " if mode == "alt" else "0 "), modes_before
    assert "cursor=0 any=1 button=1 sgr=1 kcursor=1" in modes_before, modes_before
    p.tmux("send-keys", "g")  # the probe asks now
    p.wait(lambda: "Approve? [y/N]" in p.screen(), "prompt")
    prompt_screen = p.screen()
    # The control: the prompt's screen has nothing of the probe's (it
    # cleared and left the alternate screen; its modes are off), and the
    # probe never draws again: only a repaint can bring its screen back.
    assert not set(before.splitlines()) & set(prompt_screen.splitlines()) - {""}, prompt_screen
    assert p.modes().startswith("0 cursor=1 any=0 button=0 sgr=0 kcursor=0"), p.modes()
    assert "host-ran" not in prompt_screen
    _answer(p, ["y", "Enter"] if decision == "approve" else ["n", "Enter"])
    done = rig.ws / "term-probe-done"
    p.wait(done.exists, "end of the request")
    assert done.read_text() == ("0\n" if decision == "approve" else f"{DENIED}\n")
    # What the session drew: everything for a full-screen program; for an
    # inline one, from the row it started on (above it are the shell's and
    # Lazaret's lines from before the session, which the CLI never saw:
    # they come back blank).
    first = 0 if mode == "alt" else before_text.index("inline one")
    assert mode == "alt" or first > 0, before

    def session_rows(screen):
        return cells(screen)[first:]

    p.wait(lambda: session_rows(p.screen()) == session_rows(before) and
           p.modes() == modes_before,
           f"repainted screen (before, modes {modes_before}:\n{before!r})", timeout=5,
           now=lambda: f"modes {p.modes()}:\n{p.screen()!r}")
    # Bracketed paste is on again: the probe reads the paste bracketed.
    p.tmux("set-buffer", "pasted")
    p.tmux("paste-buffer", "-p")
    p.tmux("send-keys", "q")
    got = rig.ws / "term-probe-input"
    p.wait(lambda: got.exists() and b"q" in got.read_bytes(), "the probe's input")
    assert b"\x1b[200~pasted\x1b[201~" in got.read_bytes(), got.read_bytes()
    p.wait(p.cli_ended, "the CLI's end")


@pytest.mark.parametrize("mode", ["alt", "inline"])
def test_terminal_is_reset_when_the_domain_is_stopped(rig, pane_rig, mode):
    rig.config({"bb": {}})
    p = pane_rig(mode, ["-"])
    m = p.modes()
    # The control: the program's modes are on before the stop.
    assert m.startswith("1 " if mode == "alt" else "0 ") and "cursor=0" in m and "button=1" in m, m
    r = rig.lz.run(["stop", "--workspace", rig.ws])
    assert r.returncode == 0, r.stderr
    p.wait(p.cli_ended, "the CLI's end")
    m = p.modes()
    assert m.startswith("0 cursor=1 any=0 button=0 sgr=0 kcursor=0 wrap=1"), m
    lines = p.tmux("capture-pane", "-p").splitlines()
    # The message: at column 0 of the line after the last one drawn on the
    # normal screen (Lazaret's start-up lines; inline, the probe's line,
    # where it left its cursor mid-line), not where the program's cursor was.
    last = max(i for i, ln in enumerate(lines)
               if ln.startswith("lazaret: image ready" if mode == "alt" else "inline three"))
    assert lines[last + 1].startswith("lazaret: error: "), "\n".join(lines)
    ended = [i for i, ln in enumerate(lines) if ln.startswith(EXITED)]
    assert ended and ended[0] > last + 1, "\n".join(lines)  # the line after it, at column 0
