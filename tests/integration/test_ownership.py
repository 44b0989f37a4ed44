# SPDX-License-Identifier: Apache-2.0
"""Ownership give-back (docs/runtime.md "Ownership give-back"; SR-7/SR-3):
nothing a sandbox leaves in the workspace or a read-write volume may belong
to one of the developer's subordinate ids once its Domain has ended, so that
the developer's plain `rm -rf` removes it.

Each attack test has its control inside: while the Domain still runs, the
host shows the subordinate owner and the test user's `rm -rf` fails (the
attack works; the give-back happens at teardown). The repair of what an
older version left (`lazaret state fix-ownership`) is tested on ownership
made on the host by root, whose control is the same failing `rm -rf`.
"""

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import TEARDOWN_TIMEOUT, ok, sh, wait_torn_down

SUBID_COUNT = 65536


def subordinate_start(user, path) -> int:
    """The first range of the user in /etc/sub[ug]id a Domain uses
    (docs/runtime.md "Subordinate ids": at least 65536 ids, not at 0)."""
    for line in Path(path).read_text().splitlines():
        parts = line.split(":")
        if len(parts) == 3 and parts[0] in (user.name, str(user.uid)) and \
                int(parts[1]) > 0 and int(parts[2]) >= SUBID_COUNT:
            return int(parts[1])
    pytest.fail(f"{user.name} has no subordinate range in {path}")


def sub_ids(lz):
    return subordinate_start(lz.user, "/etc/subuid"), subordinate_start(lz.user, "/etc/subgid")


def owner(p: Path):
    st = os.lstat(p)
    return st.st_uid, st.st_gid


def rm_rf_as_user(lz, p: Path):
    return lz.run_as_user(["rm", "-rf", str(p)])


def coordinator_log(lz) -> str:
    return "".join(log.read_text(errors="replace")
                   for log in lz.root.rglob("logs/coordinator.log"))


def volume_config(lz, image=None):
    """A read-write volume ~/vol at /root/vol; image None: the busybox
    image (write_profiles' default)."""
    lz.mkdir("vol")
    p = {"persistent_dirs": ["/root"], "volumes": [
        {"host": "~/vol", "container": "/root/vol", "kind": "directory",
         "access": "read-write"}]}
    return p if image is None else {"image": image, **p}


ROOT_ATTACK = """
for top in /workspace /root/vol; do
  mkdir $top/d && touch $top/d/f && mkdir $top/d/sub && touch $top/d/sub/g &&
  chown -R 1000:1000 $top/d && chmod 700 $top/d $top/d/sub || exit 9
done
"""


@pytest.mark.parametrize("image_name", ["busybox", "debian"])
def test_a_tree_a_root_sandbox_gave_away_is_given_back(rig, test_images, image_name):
    lz = rig.lz
    ws = rig.ws
    su, sg = sub_ids(lz)
    rig.config({"p": volume_config(lz, getattr(test_images, image_name))})
    holder = rig.hold("p", script=ROOT_ATTACK)
    trees = [ws / "d", lz.home / "vol" / "d"]
    # Control: while the Domain runs, the chown reached the host (sandbox
    # uid 1000 is the subordinate id S+999) and the developer cannot
    # remove the tree.
    for d in trees:
        assert owner(d) == (su + 999, sg + 999), (d, owner(d))
        r = rm_rf_as_user(lz, d)
        assert r.returncode != 0 and (d / "f").exists(), \
            f"the developer removed {d} while the sandbox owned it: {r}"
    rig.release(holder)
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    for d in trees:
        for p in (d, d / "f", d / "sub", d / "sub" / "g"):
            assert owner(p) == (lz.user.uid, lz.user.gid), (p, owner(p))
        # chmod 700 stays: the owner can change it (the give-back changes owners only).
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700
        ok(rm_rf_as_user(lz, d))
        assert not d.exists()
    log = coordinator_log(lz)
    assert "ownership give-back" in log and "4 of" in log, log[-2000:]


def test_the_agent_user_cannot_give_the_tree_away(rig, test_images):
    """keep-id: the same script as the agent (uid 1000, the developer on the
    host). Its chown to itself is the developer's own ownership; a chown to
    another uid or a chgrp to another group (crew: supplementary groups are
    not given, docs/runtime.md "The agent's user") is refused, so nothing
    of a subordinate id reaches the workspace, and the developer removes the
    tree while the Domain still runs and after it ended."""
    lz = rig.lz
    ws = rig.ws
    rig.config({"ag": {"image": test_images.agent}})
    holder = rig.hold("ag", script=(
        "cd /workspace && for t in d e; do mkdir $t && touch $t/f && "
        "chown -R 1000:1000 $t && chmod 700 $t || exit 9; done; "
        "chown 0 d/f 2>/dev/null || echo CHOWN-REFUSED; "
        "chgrp crew d/f 2>/dev/null || echo CHGRP-REFUSED"))
    assert "CHOWN-REFUSED" in holder.stdout and "CHGRP-REFUSED" in holder.stdout, \
        holder.stdout + holder.stderr
    for p in (ws / "d", ws / "d" / "f"):
        assert owner(p) == (lz.user.uid, lz.user.gid), (p, owner(p))
    ok(rm_rf_as_user(lz, ws / "e"))
    rig.release(holder)
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    ok(rm_rf_as_user(lz, ws / "d"))
    assert not (ws / "d").exists() and not (ws / "e").exists()
    assert "ownership give-back" in coordinator_log(lz)


def test_a_symlink_the_sandbox_planted_leads_the_give_back_nowhere(rig):
    """Links out of the tree, given to a subordinate id, in a read-write
    volume (in the workspace the Git Sentry quarantines a link out at once,
    so there root plants them on the host and the repair walks them: the
    same walk)."""
    lz = rig.lz
    ws = rig.ws
    su, sg = sub_ids(lz)
    # Host objects outside the workspace and the volume, owned by a
    # subordinate id: what a give-back that followed a link would hand to
    # the developer.
    outside = lz.mkdir("outside", 0o755)
    secret = lz.write("outside/secret", "host\n", mode=0o600)
    os.chown(secret, su + 4, sg + 4)
    os.chown(outside, su + 4, sg + 4)
    rig.config({"p": volume_config(lz)})
    vol = lz.home / "vol"
    holder = rig.hold("p", script=(
        f"cd /root/vol && ln -s {secret} link && chown -h 1000:1000 link && "
        f"ln -s {outside} dlink && chown -h 1000:1000 dlink && "
        "mkdir d && ln -s ../.. d/up && chown -hR 1000:1000 d"))
    # Control: the links reached the host as the sandbox made them, and on
    # the host they resolve to the objects outside.
    assert (vol / "d" / "up").is_symlink(), holder.stdout + holder.stderr
    assert owner(vol / "link") == (su + 999, sg + 999)
    assert os.path.realpath(vol / "link") == str(secret)
    assert os.path.realpath(vol / "dlink") == str(outside)
    assert os.path.realpath(vol / "d" / "up") == str(lz.home)
    rig.release(holder)
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    for p in ("link", "dlink", "d", "d/up"):
        assert owner(vol / p) == (lz.user.uid, lz.user.gid), (p, owner(vol / p))
        assert p == "d" or os.path.islink(vol / p)
    # Nothing the links name was touched.
    assert owner(secret) == (su + 4, sg + 4)
    assert owner(outside) == (su + 4, sg + 4)

    # The same links in the workspace, planted on the host; the repair.
    for name, target in (("link", secret), ("dlink", outside), ("up", "..")):
        os.symlink(target, ws / name)
        os.lchown(ws / name, su + 999, sg + 999)
    assert os.path.realpath(ws / "link") == str(secret)
    r = ok(lz.run(["state", "fix-ownership", "--profile", "p", "--workspace", str(ws)]))
    assert "3 of" in r.stdout, r.stdout
    for name in ("link", "dlink", "up"):
        assert owner(ws / name) == (lz.user.uid, lz.user.gid), (name, owner(ws / name))
    assert owner(secret) == (su + 4, sg + 4)
    assert owner(outside) == (su + 4, sg + 4)


def test_fix_ownership_repairs_what_an_older_version_left(rig):
    lz = rig.lz
    ws = rig.ws
    su, sg = sub_ids(lz)
    rig.config({"bb": {}})
    ok(rig.run("bb", sh("true")))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    # What a sandbox of an older version could leave, made here by root.
    d = ws / "d"
    (d / "sub").mkdir(parents=True)
    (d / "f").write_text("x\n")
    (ws / "tool").write_text("#!/bin/sh\n")
    os.chmod(ws / "tool", 0o6755)
    for p in (d / "sub", d / "f", d, ws / "tool"):
        os.lchown(p, su + 999, sg + 999)
    os.chmod(d, 0o700)
    os.chmod(ws / "tool", 0o6755)  # chown dropped the bits: set them again
    # Owners outside the subordinate range are not the sandbox's doing.
    (ws / "rootfile").write_text("root's\n")
    os.chown(ws / "rootfile", 0, 0)
    # Another mount in the workspace is never entered.
    mnt = ws / "mnt"
    mnt.mkdir()
    os.chown(mnt, lz.user.uid, lz.user.gid)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "lzt-giveback", str(mnt)],
                   check=True)
    try:
        (mnt / "inside").write_text("x\n")
        os.chown(mnt / "inside", su + 7, sg + 7)
        # Control: the developer cannot remove the tree.
        r = rm_rf_as_user(lz, d)
        assert r.returncode != 0 and d.exists(), r
        assert stat.S_IMODE(os.lstat(ws / "tool").st_mode) == 0o6755

        r = ok(lz.run(["state", "fix-ownership", "--profile", "bb", "--workspace", str(ws)]))
        assert "given back" in r.stdout and "setuid/setgid cleared on 1" in r.stdout, r.stdout
        assert "1 mount points not entered" in r.stdout, r.stdout
        for p in (d, d / "f", d / "sub", ws / "tool"):
            assert owner(p) == (lz.user.uid, lz.user.gid), (p, owner(p))
        assert stat.S_IMODE(os.lstat(ws / "tool").st_mode) == 0o755
        assert owner(ws / "rootfile") == (0, 0)
        assert owner(mnt / "inside") == (su + 7, sg + 7)
        ok(rm_rf_as_user(lz, d))
        assert not d.exists()
        # Nothing left: a second run has nothing to give back.
        j = json.loads(ok(lz.run(["state", "fix-ownership", "--json", "--profile", "bb",
                                  "--workspace", str(ws)])).stdout)
        assert j["complete"] is True and "0 of" in j["report"], j
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_fix_ownership_is_refused_while_the_domain_runs(rig):
    lz = rig.lz
    rig.config({"bb": {}})
    holder = rig.hold("bb")
    r = lz.run(["state", "fix-ownership", "--profile", "bb", "--workspace", str(rig.ws)])
    assert r.returncode == 1 and "is running" in r.stderr and "--stop" in r.stderr, r
    r = ok(lz.run(["state", "fix-ownership", "--stop", "--profile", "bb",
                   "--workspace", str(rig.ws)]))
    holder.finish()
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
