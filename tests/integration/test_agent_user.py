# SPDX-License-Identifier: Apache-2.0
"""An agent user that is not root (issue 12, item 6; docs/runtime.md "The
agent's user"), with the real binaries as the unprivileged test user.

The test image "agent" (tests/images/build.sh) is busybox with User
"agent" (uid 1000, gid 1000, home /home/agent). Its commands must run as
that user, the developer's files must be that user's inside and what it
makes the developer's on the host (Podman's keep-id), the image's own
ownership must stay as the image says (root's files root's), persistent
directories must work, and a Domain whose files were made for another
sandbox user must be refused until `lazaret state reset`. The busybox
image (User unset: root) in the same workspace is the control: there the
developer's files are root's and commands run as uid 0.
"""

import json
import os
import subprocess

from conftest import TEARDOWN_TIMEOUT, ok, sh, wait_torn_down
from test_git import new_repo

PROBE = r"""
id -u; id -g; echo "$HOME"
stat -c '%u:%g' /workspace/mine /workspace/rootfile /bin/busybox /home/agent /usr/local \
    /home/agent/.cache
touch /workspace/made-inside && mkdir /workspace/dir-inside && echo x > /workspace/dir-inside/f
touch /usr/local/x 2>/dev/null && echo usr-local-writable || echo usr-local-denied
echo kept > /home/agent/.cache/note && echo cache-ok
mkdir -p build && echo out > build/out && stat -c '%u' build/out
"""


def _domain_root(lz, profile, ws):
    p = ok(lz.run(["state", "inspect", "--json", "--profile", profile, "--workspace", str(ws)]))
    return json.loads(p.stdout)


def test_commands_run_as_the_images_user_with_the_developers_files(rig, test_images):
    lz = rig.lz
    ws = new_repo(lz, "ws", {"README": "hello\n", ".gitignore": "build/\n"})
    lz.write(ws / "mine", "the developer's\n", mode=0o644)
    # A file of an id outside the map (host root): it must show as nobody,
    # not as the agent - the map is real, not "everything is 1000".
    (ws / "rootfile").write_text("root's\n")
    os.chown(ws / "rootfile", 0, 0)
    rig.config({"ag": {"image": test_images.agent,
                       "persistent_dirs": ["/home/agent/.cache", "/usr/local"]},
                "bb": {}})

    out = ok(rig.run("ag", sh(PROBE), ws=ws)).stdout.split()
    assert out[:3] == ["1000", "1000", "/home/agent"], out
    # mine, rootfile, /bin/busybox, /home/agent, /usr/local, ~/.cache
    assert out[3:9] == ["1000:1000", "65534:65534", "0:0", "1000:1000", "0:0", "1000:1000"], out
    assert out[9:] == ["usr-local-denied", "cache-ok", "1000"], out

    uid, gid = lz.user.uid, lz.user.gid
    for rel in ("made-inside", "dir-inside", "dir-inside/f"):
        st = (ws / rel).lstat()
        assert (st.st_uid, st.st_gid) == (uid, gid), (rel, st.st_uid, st.st_gid)
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left

    # The persistent directory kept the agent's file, still the agent's.
    out = ok(rig.run("ag", sh("cat /home/agent/.cache/note; stat -c '%u' "
                              "/home/agent/.cache/note"), ws=ws)).stdout.split()
    assert out == ["kept", "1000"], out
    v = lz.run(["state", "verify", "--profile", "ag", "--workspace", str(ws)])
    assert v.returncode == 0, v.stdout + v.stderr
    assert _domain_root(lz, "ag", ws)["sandbox_user"] == {"uid": 1000, "gid": 1000}

    # Control: the root image in the same workspace - uid 0, and the
    # developer's file is root's there.
    out = ok(rig.run("bb", sh("id -u; stat -c '%u:%g' /workspace/mine /workspace/made-inside"),
                     ws=ws)).stdout.split()
    assert out == ["0", "0:0", "0:0"], out


def test_a_domain_made_for_another_user_is_refused_until_reset(rig, test_images):
    lz = rig.lz
    ws = new_repo(lz, "ws2", {"README": "hello\n"})
    rig.config({"p": {"persistent_dirs": ["/opt/tool"]}})
    ok(rig.run("p", sh("id -u > /opt/tool/made-by; echo ok"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    # Control: the same profile and state start again.
    ok(rig.run("p", sh("cat /opt/tool/made-by"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left

    # The image now runs as uid 1000: the state (root's files) would be
    # the agent's. Refused, with the fix.
    rig.config({"p": {"image": test_images.agent, "persistent_dirs": ["/opt/tool"]}})
    r = rig.run("p", sh("echo SHOULD-NOT-RUN"), ws=ws)
    assert r.returncode != 0 and "SHOULD-NOT-RUN" not in r.stdout, r
    assert "uid 0" in r.stderr and "uid 1000" in r.stderr, r.stderr
    assert "lazaret state reset" in r.stderr, r.stderr

    ok(lz.run(["state", "reset", "--yes", "--profile", "p", "--workspace", str(ws)]))
    out = ok(rig.run("p", sh("id -u; ls /opt/tool | wc -l; stat -c '%u' /opt/tool; "
                             "touch /opt/tool/x 2>/dev/null && echo w || echo ro"),
                     ws=ws)).stdout.split()
    # /opt/tool is not in the image: made with its ancestor's owner (/opt:
    # root), so the agent may not write it.
    assert out == ["1000", "0", "0", "ro"], out
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left

    # The keep-id Domain's state holds files of subordinate ids (root's
    # overlay work directory, the root-owned upper): reset removes them
    # too, from inside a user namespace.
    d = _domain_root(lz, "p", ws)
    state = subprocess.run(["find", os.path.join(d["domain_root"], "state"), "-printf", "%U\n"],
                           capture_output=True, text=True).stdout.split()
    assert any(int(u) != lz.user.uid for u in state), state
    ok(lz.run(["state", "reset", "--yes", "--profile", "p", "--workspace", str(ws)]))
    assert not os.path.exists(os.path.join(d["domain_root"], "state"))
    assert not os.path.exists(os.path.join(d["domain_root"], "sandbox-user"))
