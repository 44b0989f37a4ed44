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
