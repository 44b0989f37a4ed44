import os, subprocess, time
from pathlib import Path
from conftest import sh, generation_dirs
from test_escalation import Host, esc_profile, coordinator_log

def test_probe(rig):
    rig.config({"p": esc_profile()})
    h = rig.hold("p", script='echo "CAP=$LAZARET_ESCALATE_CAPABILITY"')
    print(h.stdout)
    for g in generation_dirs(rig.lz):
        print(g)
        print(subprocess.run(["ls", "-laR", str(g / "mailbox"), str(g / "credentials")], capture_output=True, text=True).stdout)
    r = rig.run("p", sh("sleep 100 & p=$!; kill -INT $p; sleep 0.2; kill -0 $p && echo ALIVE-bg; kill $p; "
                        "set -m; sleep 100 & p=$!; kill -INT $p; wait $p; echo rc-m=$?; "
                        "grep SigIgn /proc/self/status; (grep SigIgn /proc/self/status) & wait"))
    print(r.stdout, r.stderr)
    rig.release(h)
