# SPDX-License-Identifier: Apache-2.0
"""What a cold start learns once and keeps, and what it writes before the
sandbox runs (issue 13, item 3; docs/runtime.md "How a cold start is
ordered" and "The sandbox"), with the real binaries as the unprivileged
test user.

Each cache is shown both ways: that its record really decides the start
when its key matches (a record pointed at another answer changes what the
sandbox sees), and that a changed source of the answer is asked again.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from conftest import ok, sh

RESOLVER = "nameserver 169.254.77.1"


def _storage(rig) -> Path:
    return rig.lz.home / ".local" / "share" / "lazaret"


def _chown_tree(path: Path, user):
    for p in [path, *path.rglob("*")]:
        shutil.chown(p, user.uid, user.gid) if not p.is_symlink() else \
            subprocess.run(["chown", "-h", f"{user.uid}:{user.gid}", str(p)], check=True)


def _own_layout(rig, test_images, name) -> Path:
    """A copy of the busybox test layout that the test user owns."""
    src = Path(test_images.busybox.removeprefix("oci:").rsplit(":", 1)[0])
    dst = rig.lz.root / name
    shutil.copytree(src, dst, symlinks=True)
    _chown_tree(dst, rig.lz.user)
    return dst


def _umoci(*args):
    p = subprocess.run(["umoci", *map(str, args)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=300)
    assert p.returncode == 0, f"umoci {' '.join(map(str, args))}: {p.stderr}"


def test_a_local_image_source_is_asked_again_when_it_changes(rig, test_images):
    layout = _own_layout(rig, test_images, "layout")
    rig.config({"mine": {"image": f"oci:{layout}:latest"}})
    mark = sh('echo "mark=${LZ_MARK:-none}"')
    assert "mark=none" in ok(rig.run("mine", mark)).stdout
    records = list((_storage(rig) / "images").glob("source-*"))
    assert len(records) == 1, records
    first = records[0].read_text()
    first_digest = first.rsplit(" ", 1)[1].strip()
    assert re.fullmatch(r"[0-9a-f]{64}", first_digest), first
    assert f"source=oci:{layout}:latest id=" in first, first

    # A new image under the same tag (umoci rewrites index.json): the
    # cached digest no longer matches the source's identity; asked again.
    _umoci("config", "--image", f"{layout}:latest", "--config.env", "LZ_MARK=two")
    _chown_tree(layout, rig.lz.user)
    assert "mark=two" in ok(rig.run("mine", mark)).stdout
    second = records[0].read_text()
    assert second != first and first_digest not in second, second

    # Control: the record really decides when its key matches. Pointed at
    # the first image's (prepared) entry under the current key, the next
    # start runs that image without asking skopeo.
    key = second.rsplit(" ", 1)[0]
    records[0].write_text(f"{key} {first_digest}\n")
    assert "mark=none" in ok(rig.run("mine", mark)).stdout
    # A damaged record is a miss, never an answer: asked again.
    records[0].write_text(f"{key} {first_digest}x\n")
    assert "mark=two" in ok(rig.run("mine", mark)).stdout


def test_a_manifest_blob_rewritten_in_place_is_asked_again(rig, test_images):
    """index.json untouched, the tag's manifest blob overwritten with
    another image's manifest: skopeo (which does not check a blob against
    its name) now answers the new image, so the cached digest must not
    stand (attack round i13b, 2-B)."""
    layout = _own_layout(rig, test_images, "layout")
    other = _own_layout(rig, test_images, "other")
    rig.config({"mine": {"image": f"oci:{layout}:latest"}})
    mark = sh('echo "mark=${LZ_MARK:-none}"')
    assert "mark=none" in ok(rig.run("mine", mark)).stdout
    record = next((_storage(rig) / "images").glob("source-*"))
    old = record.read_text().rsplit(" ", 1)[1].strip()
    _umoci("config", "--image", f"{other}:latest", "--config.env", "LZ_MARK=two")
    index = json.loads((other / "index.json").read_text())
    new = index["manifests"][0]["digest"].removeprefix("sha256:")
    assert new != old
    index_id = os.stat(layout / "index.json")
    for blob in (other / "blobs" / "sha256").iterdir():
        if not (layout / "blobs" / "sha256" / blob.name).exists():
            shutil.copy(blob, layout / "blobs" / "sha256" / blob.name)
            shutil.chown(layout / "blobs" / "sha256" / blob.name, rig.lz.user.uid,
                         rig.lz.user.gid)
    (layout / "blobs" / "sha256" / old).write_bytes(
        (other / "blobs" / "sha256" / new).read_bytes())
    # Control: the source now names the new image, with index.json's
    # identity (the cache key) unchanged.
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{layout}:latest"],
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=120, check=True)
    assert hashlib.sha256(raw.stdout).hexdigest() == new
    after = os.stat(layout / "index.json")
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == \
        (index_id.st_ino, index_id.st_mtime_ns, index_id.st_ctime_ns)
    assert "mark=two" in ok(rig.run("mine", mark)).stdout


def test_runsc_facts_are_kept_and_decide_the_statx_shim(rig):
    rig.config({"bb": {}})
    env = sh("tr '\\0' '\\n' </proc/self/environ | grep '^LD_PRELOAD=' || echo no-preload")
    first = ok(rig.run("bb", env)).stdout
    facts = _storage(rig) / "runsc-facts"
    text = facts.read_text()
    m = re.fullmatch(r"(lazaret-runsc-facts-v2 lazaret=\S+ runsc=\S+ kernel=\S+) "
                     r"date=(\d{8}),statx=([01]),(netcover=[01],directfs=[01])\n", text)
    assert m, text
    # Where the runsc lacks statx(AT_NO_AUTOMOUNT) (2022), the shim is
    # preloaded; where it has it (2024), not.
    preloaded = "lazaret-statx-fix.so" in first
    assert preloaded == (m.group(3) == "0"), (text, first)
    # Control: a record under the same key that says the opposite decides
    # the next start (no probe was run to contradict it).
    facts.write_text(f"{m.group(1)} date={m.group(2)},statx={1 - int(m.group(3))},"
                     f"{m.group(4)}\n")
    flipped = ok(rig.run("bb", env)).stdout
    assert ("lazaret-statx-fix.so" in flipped) != preloaded, flipped
    # A damaged record is probed again and rewritten with the true answer.
    facts.write_text("garbage\n")
    assert ("lazaret-statx-fix.so" in ok(rig.run("bb", env)).stdout) == preloaded
    assert facts.read_text() == text


def _shows_rmem_default_in_a_new_netns() -> bool:
    """Does a fresh network namespace show /proc/sys/net/core/rmem_default
    (Linux 6.5 on: the sysctl is per namespace)? Asked in one, as root."""
    p = subprocess.run(["unshare", "--net", "--mount", "sh", "-c",
                        "mount -t proc proc /proc && "
                        "test -e /proc/sys/net/core/rmem_default && echo shown || echo hidden"],
                       capture_output=True, text=True, timeout=30, check=True)
    return p.stdout.strip() == "shown"


def test_the_first_start_learns_whether_the_netstack_needs_the_cover(rig, runsc):
    """runsc releases up to 2024-07-29 take a network namespace that shows
    /proc/sys/net/core/rmem_default for the host's own and refuse
    --network=sandbox there (docs/platform.md "Netstack in a rootless
    namespace"). The first start with a runsc finds out, by a refused
    `runsc start` and a second one with /proc/sys/net covered, and keeps
    the answer; no release date decides."""
    binary = Path(runsc or "/usr/bin/runsc").read_bytes()
    # The oracle, independent of Lazaret: the binary's own check and what
    # this kernel shows in a new network namespace.
    refuses = b"/proc/sys/net/core/rmem_default" in binary and _shows_rmem_default_in_a_new_netns()
    rig.config({"bb": {}})
    first = ok(rig.run("bb", ["true"], env={"LAZARET_LOG": "debug"}))
    logs = "".join(f.read_text() for f in rig.lz.root.rglob("logs/coordinator.log"))
    learned = "runsc start refused without the /proc/sys/net cover" in logs
    assert learned == refuses, (refuses, logs[-3000:])
    assert "supervisor: runsc start (netstack learned)" in logs, logs[-3000:]
    facts = _storage(rig) / "runsc-facts"
    text = facts.read_text()
    m = re.fullmatch(r"(\S+ lazaret=\S+ runsc=\S+ kernel=\S+ date=\d{8},statx=[01]),"
                     r"netcover=([01])(,directfs=[01])\n", text)
    assert m and m.group(2) == ("1" if refuses else "0"), text
    # A start with the answer known asks nothing again.
    ok(rig.run("bb", ["true"], env={"LAZARET_LOG": "debug"}))
    logs2 = "".join(f.read_text() for f in rig.lz.root.rglob("logs/coordinator.log"))[len(logs):]
    assert "netstack learned" not in logs2 and "timing: supervisor: runsc" in logs2, logs2[-2000:]
    if refuses:
        # Control: the kept answer is what makes the start work. Said the
        # other way round, this runsc refuses the sandbox's network, with
        # runsc's own message and Lazaret's status 125.
        facts.write_text(f"{m.group(1)},netcover=0{m.group(3)}\n")
        bad = rig.run("bb", ["true"])
        assert bad.returncode == 125, bad
        assert "cannot run with network enabled in root network namespace" in bad.stderr, \
            bad.stderr
        # A damaged record is learned again, and the start works.
        facts.write_text("garbage\n")
        ok(rig.run("bb", ["true"]))
        assert facts.read_text() == text
    else:
        # Control: the cover changes nothing for this runsc, and a record
        # that asks for it still starts (the cover is harmless).
        facts.write_text(f"{m.group(1)},netcover=1{m.group(3)}\n")
        ok(rig.run("bb", ["true"]))


def test_resolv_conf_is_the_sidecars_resolver(rig, test_images):
    # A plain image: written into the root overlay before runsc runs.
    rig.config({"bb": {}, "etc": {"persistent_dirs": ["/etc"]}})
    out = ok(rig.run("bb", sh("cat /etc/resolv.conf; ls -l /etc/resolv.conf"))).stdout
    assert RESOLVER in out and out.splitlines()[-1].startswith("-rw-r--r--"), out
    # A persistent /etc covers it: written from inside the sandbox instead.
    assert RESOLVER in ok(rig.run("etc", ["cat", "/etc/resolv.conf"])).stdout


def test_an_image_resolv_conf_symlink_is_replaced_not_followed(rig, test_images):
    """The image's /etc/resolv.conf is a symlink to a host path: the
    supervisor writes the sandbox's file without following it, so nothing
    is written outside the generation's root overlay."""
    layout = _own_layout(rig, test_images, "symlinked")
    target = rig.lz.root / "host-target"
    bundle = rig.lz.root / "unpacked"
    _umoci("unpack", "--rootless", "--image", f"{layout}:latest", bundle)
    link = bundle / "rootfs" / "etc" / "resolv.conf"
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    # Control: followed on the host, this symlink writes the host's file.
    with open(link, "w") as f:
        f.write("followed\n")
    assert target.read_text() == "followed\n"
    target.unlink()
    _umoci("repack", "--image", f"{layout}:latest", bundle)
    _chown_tree(layout, rig.lz.user)
    rig.config({"sym": {"image": f"oci:{layout}:latest"}})
    out = ok(rig.run("sym", sh("cat /etc/resolv.conf; readlink /etc/resolv.conf || "
                               "echo not-a-link"))).stdout
    assert RESOLVER in out and "not-a-link" in out, out
    assert not target.exists(), "the host file the image's symlink names was written"


def test_debug_log_times_every_step_of_a_start(rig):
    rig.config({"bb": {}})
    p = ok(rig.run("bb", ["true"], env={"LAZARET_LOG": "debug"}))
    line = re.compile(r"timing: (cli|coordinator|supervisor): .+ at [0-9.]+ ms "
                      r"\(\+[0-9.]+ ms, clock [0-9.]+ ms\)$")
    cli = [x for x in p.stderr.splitlines() if x.startswith("lazaret: timing: ")]
    assert cli and all(line.search(x) for x in cli), p.stderr
    logs = "".join(f.read_text() for f in rig.lz.root.rglob("logs/coordinator.log"))
    for mark in ("coordinator: supervisor spawned", "supervisor: network sidecar ready",
                 "coordinator: sandbox running", "supervisor: runsc exec spawned"):
        assert f"timing: {mark} at " in logs, (mark, logs[-3000:])
    # Off by default: no timing line anywhere (the next run starts a new
    # generation: the first one tears down when its only session ends).
    before = len(logs)
    q = ok(rig.run("bb", ["true"]))
    assert "timing:" not in q.stderr, q.stderr
    logs = "".join(f.read_text() for f in rig.lz.root.rglob("logs/coordinator.log"))
    assert "timing:" not in logs[before:], logs[before:]
