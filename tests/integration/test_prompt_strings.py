# SPDX-License-Identifier: Apache-2.0
"""The escalation prompt is seen whatever string the sandbox left open
(attack round a26, F1). The sandboxed program draws a fake prompt for a
harmless command, opens a DCS string ("ESC P tmux;" and others), then asks
for the real (harmful) host command: without the fix tmux 3.3 took every
byte of the prompt as the string's payload (until ESC \\ or its 5 s string
timeout), so the developer saw only the fake prompt and approved the hidden
request. The prompt now starts by ending any open string and sequence
(LZ_TERM_STRINGS_END, src/client/screen.h). The control (no opener): the
real prompt is on the screen; the fix is shown by the same wait succeeding
with each opener (it timed out on 90de7a8).
"""
import time

import pytest

from test_escalation import Host, esc_profile
from test_term_screen import Pane

FAKE = "lazaret: host escalation request #1: /usr/bin/git status   Approve? [y/N] "


@pytest.mark.parametrize("opener", ["", r"\033Ptmux;", r"\033Pq\033"])
def test_prompt_hidden_in_dcs(rig, opener):
    host = Host(rig.lz)
    tool = host.script("evil", "echo host-ran-$1")
    rig.config({"bb": esc_profile()})
    script = (
        "#!/bin/sh\n"
        f"printf '\\033[H\\033[2J{FAKE}'\n"
        f"printf '{opener}'\n"
        f"lazaret-escalate --why 'tidy up' -- {tool} PWNED\n"
        "echo $? > /workspace/esc-done\n"
        "printf '\\033\\\\'\n"
        "exec sleep 600\n")
    rig.lz.write(rig.ws / "attack.sh", script, mode=0o755)
    p = Pane(rig.lz, rig.ws, ["run", "bb", "--workspace", rig.ws, "--", "/bin/sh",
                              "/workspace/attack.sh"])
    try:
        p.wait(lambda: "Approve? [y/N]" in p.tmux("capture-pane", "-p"), "a prompt on screen")
        # The real request on the screen; without the fix it never came
        # (tmux's string timeout is 5 s: the wait is longer).
        try:
            p.wait(lambda: str(tool) in p.tmux("capture-pane", "-p"), "the real request",
                   timeout=7)
        except pytest.fail.Exception:
            pass
        screen = p.tmux("capture-pane", "-p")
        real_visible = str(tool) in screen
        print(f"\n[opener={opener!r}] screen while the prompt is up:\n{screen}")
        time.sleep(1.2)  # keys in the prompt's first second are ignored (by design)
        p.tmux("send-keys", "y", "Enter")  # the developer approves what it sees
        p.wait((rig.ws / "esc-done").exists, "end of the request", timeout=30)
        ran = host.ran("evil")
        verdict = "SUCCEEDED" if ran and not real_visible else "BLOCKED"
        print(f"[opener={opener!r}] real command visible: {real_visible}; host ran: {ran}; "
              f"esc rc {(rig.ws / 'esc-done').read_text().strip()} -> {verdict}")
        if opener == "":
            assert real_visible, "control: the real prompt should be on the screen"
        else:
            assert verdict == "BLOCKED", screen
    finally:
        p.close()


@pytest.mark.parametrize("opener", ["", r"\033Ptmux;"], ids=["control-none", "dcs"])
def test_git_sentry_notice_seen_after_an_open_string(rig, opener):
    """A Git Sentry notice (here: a nested repository set aside) is
    Lazaret's own line on the session's terminal: it must be seen whatever
    string the sandbox left open. Control: with no opener it is on screen;
    on 1d69018 (notices without LZ_TERM_STRINGS_END) the DCS took it as
    payload."""
    rig.config({"bb": {}})
    script = ("#!/bin/sh\n"
              f"printf 'before the notice\\r\\n{opener}'\n"
              "mkdir -p nested && git init -q nested\n"
              "exec sleep 600\n")
    rig.lz.write(rig.ws / "notice.sh", script, mode=0o755)
    p = Pane(rig.lz, rig.ws, ["run", "bb", "--workspace", rig.ws, "--", "/bin/sh",
                              "/workspace/notice.sh"])
    try:
        p.wait(lambda: "before the notice" in p.tmux("capture-pane", "-p"), "the program's line")
        p.wait(lambda: "Git Sentry" in p.tmux("capture-pane", "-p"), "the Git Sentry notice",
               timeout=4)  # tmux's own string timeout is 5 s
    finally:
        p.close()


# ---- the terminal after `lazaret stop` (round a26, F2 and F3) -------------------------------

CHECK = "after-reset-qrstuvwx"
FLAGS = "button=#{mouse_button_flag} insert=#{insert_flag} alt=#{alternate_on}"


class TailPane(Pane):
    """The CLI under a shell that prints a check line after it and stays."""

    def __init__(self, lz, argv):
        super().__init__(lz, None, argv, then=f"echo {CHECK}; ")


@pytest.mark.parametrize("variant", ["control-none", "charset", "dcs"])
def test_terminal_after_stop(rig, variant):
    """The program turns on button mouse reporting (which the reset always
    covered: the control), then selects the line-drawing set and insert mode
    (F2) or leaves a DCS string open (F3: tmux took the reset and the message
    as its payload); the developer runs `lazaret stop`. After the CLI ends,
    mouse reporting and insert mode are off and the shell's next line comes
    out in plain ASCII. Both failed on 90de7a8."""
    rig.config({"bb": {}})
    setup = {"control-none": "", "charset": r"\033)0\016\033[4h", "dcs": r"\033Pq"}[variant]
    script = ("#!/bin/sh\n"
              "printf '\\033[?1002h\\033[?1006h'\n"
              f"printf 'READY\\r\\n{setup}'\n"
              "touch /workspace/ready; exec sleep 600\n")
    rig.lz.write(rig.ws / "k.sh", script, mode=0o755)
    p = TailPane(rig.lz, ["run", "bb", "--workspace", rig.ws, "--", "/bin/sh", "/workspace/k.sh"])
    try:
        p.wait((rig.ws / "ready").exists, "the program's setup")
        p.wait(lambda: "READY" in p.tmux("capture-pane", "-p"), "the program's output")
        r = rig.lz.run(["stop", "--workspace", rig.ws])
        assert r.returncode == 0, r.stderr
        p.wait(lambda: p.tmux("display-message", "-p", "#{pane_current_command}").strip() ==
               "sleep", "the CLI's end")
        p.wait(lambda: CHECK in p.tmux("capture-pane", "-p"), "the shell's check line", 10)
        text = p.tmux("capture-pane", "-p", "-e")
        flags = p.tmux("display-message", "-p", FLAGS).strip()
        assert "button=0" in flags and "insert=0" in flags, (flags, text)
        assert "\x0e" not in text and "the Domain was stopped" in p.tmux("capture-pane", "-p"), \
            text
    finally:
        p.close()
