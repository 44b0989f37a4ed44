# SPDX-License-Identifier: Apache-2.0
"""The Storage Catalog and the image tree against a hostile image source
(attack round i12f; docs/runtime.md "The agent's user" and "The Storage
Catalog"), with the real binaries as the unprivileged test user.

- E4: a source that answers `skopeo inspect --raw` and `skopeo copy`
  differently must never put one image's files under another image's key.
- E7: a keep-id catalog entry not made (and sealed) by Lazaret is made again.
- E11: bytes an image's author chose (a file name) never reach the terminal
  as control characters.
- E2: the shared image tree is never written: runsc's mount points land in
  the generation's overlay, and a second Domain of the image sees what the
  first saw.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from conftest import TEARDOWN_TIMEOUT, ok, sh, wait_torn_down
from test_git import new_repo


def _root(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def _catalog(lz) -> Path:
    return lz.home / ".local" / "share" / "lazaret" / "images" / "rootfs"


def _derive(src_layout: str, dest: Path, tag: str, change):
    """Copy the OCI layout src_layout to dest (if new) and add tag: the
    source's :latest with change(rootfs) applied (as root, umoci)."""
    if not dest.exists():
        shutil.copytree(src_layout, dest, symlinks=True)
    bundle = Path(tempfile.mkdtemp(prefix="lzimg-", dir="/tmp"))
    try:
        shutil.rmtree(bundle)
        _root(["umoci", "unpack", "--image", f"{dest}:latest", str(bundle)])
        change(bundle / "rootfs")
        _root(["umoci", "repack", "--image", f"{dest}:{tag}", str(bundle)])
    finally:
        shutil.rmtree(bundle, ignore_errors=True)
    _root(["chmod", "-R", "a+rX", str(dest)])


def _index_entry(layout: Path, tag: str) -> dict:
    idx = json.loads((layout / "index.json").read_text())
    for m in idx["manifests"]:
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return m
    raise KeyError(tag)


def test_a_source_that_changes_during_preparation_never_poisons_the_catalog(
        rig, test_images, tmp_path):
    """Two images A and B in one layout whose index.json a third party
    flips between them every few milliseconds while the developer
    prepares it. The catalog entry named by A's manifest digest must only
    ever hold A (and B's only B). The control: the flip really made the
    inspected manifest and the copy disagree (Lazaret's refusal "the image
    changed while it was copied" is seen) - exactly the case that, before
    the check, put B under A's key (round i12f, E4: 4-11 tries)."""
    lz = rig.lz
    src = str(test_images.agent).removeprefix("oci:").rsplit(":", 1)[0]
    layout = lz.root / "img-flip"  # readable by the test user (tmp_path is not)
    for tag, marker in (("a", "A-audited"), ("b", "B-EVIL")):
        _derive(src, layout, tag, lambda r, m=marker: (r / "marker").write_text(m + "\n"))
    entries = {t: _index_entry(layout, t) for t in "ab"}
    keys = {}
    for t, e in entries.items():
        blob = layout / "blobs" / "sha256" / e["digest"].removeprefix("sha256:")
        keys[t] = hashlib.sha256(blob.read_bytes()).hexdigest()
        as_latest = dict(e, annotations={"org.opencontainers.image.ref.name": "latest"})
        (layout / f"index-{t}.json").write_text(json.dumps(
            {"schemaVersion": 2, "manifests": [as_latest]}))
    shutil.copy(layout / "index-a.json", layout / "index.json")
    _root(["chmod", "-R", "a+rX", str(layout)])
    rig.config({"flip": {"image": f"oci:{layout}:latest"}})
    ws = new_repo(lz, "ws", {"README": "x\n"})
    texts = {t: (layout / f"index-{t}.json").read_text() for t in "ab"}

    def flipper(stop):
        i = 0
        while not stop.is_set():
            tmp = layout / ".index.tmp"
            tmp.write_text(texts["a" if i % 2 == 0 else "b"])
            os.chmod(tmp, 0o644)
            os.rename(tmp, layout / "index.json")
            i += 1
            time.sleep(0.003)

    refusals = tries = 0
    deadline = time.monotonic() + 150
    while tries < 60 and time.monotonic() < deadline and (refusals < 1 or tries < 8):
        tries += 1
        for e in _catalog(lz).glob("*") if _catalog(lz).exists() else []:
            subprocess.run(["rm", "-rf", "--one-file-system", str(e)], check=True)
        stop = threading.Event()
        t = threading.Thread(target=flipper, args=(stop,))
        t.start()
        try:
            r = rig.run("flip", ["cat", "/marker"], ws=ws)
        finally:
            stop.set()
            t.join()
        if "the image changed while it was copied" in r.stderr:
            refusals += 1
            assert r.returncode == 125, r
        # Whatever happened, every entry holds the image its key names.
        for e in _catalog(lz).glob("*"):
            for t_, want in (("a", "A-audited"), ("b", "B-EVIL")):
                if e.name.startswith(keys[t_]):
                    got = (e / "rootfs" / "marker").read_text().strip()
                    assert got == want, f"try {tries}: {e.name} holds {got}, not {want}"
        if r.returncode == 0:
            assert r.stdout.strip() in ("A-audited", "B-EVIL"), r
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, left
    assert refusals >= 1, f"the flip never made inspect and copy disagree in {tries} tries"


def test_an_unsealed_keep_id_entry_is_made_again(rig, test_images):
    """A keep-id entry Lazaret did not make - here the developer-owned tree
    copied into its place, where every file is the developer's and so the
    agent's inside - is not used: made again, root's files root's (E7).
    Control: the fake entry is all the developer's on the host, so used
    as it is /etc/passwd would show as the agent's (1000)."""
    lz = rig.lz
    rig.config({"ag": {"image": test_images.agent}})
    ws = new_repo(lz, "ws", {"README": "x\n"})
    ok(rig.run("ag", sh("stat -c %u /etc/passwd"), ws=ws))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    cat = _catalog(lz)
    [keep] = [e for e in cat.iterdir() if ".keep-id-" in e.name]
    base = cat / keep.name.split(".keep-id-")[0]
    subprocess.run(["rm", "-rf", "--one-file-system", str(keep)], check=True)
    ok(lz.run_as_user(["cp", "-a", str(base), str(keep)]))
    owners = {os.lstat(os.path.join(d, f)).st_uid
              for d, _, fs in os.walk(keep / "rootfs") for f in fs}
    assert owners == {lz.user.uid}, owners  # the control's premise
    out = ok(rig.run("ag", sh("stat -c %u /etc/passwd; id -u"), ws=ws)).stdout.split()
    assert out == ["0", "1000"], out
    assert (keep / "lazaret-keep-id").read_text() == "keep-id 1 uid 1000 gid 1000\n"


def test_control_bytes_of_an_image_never_reach_the_terminal(rig, test_images, tmp_path):
    """A file of uid 70000 (outside the map) named with an escape sequence:
    its keep-id unpack fails and the error names the file. The name must
    arrive escaped (E11). Control: the name reaches the message (its
    visible part is there), so unescaped it would act on the terminal."""
    lz = rig.lz
    src = str(test_images.agent).removeprefix("oci:").rsplit(":", 1)[0]
    layout = lz.root / "img-esc"
    name = "evil\x1b[8mHIDDEN"

    def plant(r):
        f = r / "home" / name
        f.write_text("x\n")
        os.chown(f, 70000, 70000)
    _derive(src, layout, "latest", plant)
    _root(["chmod", "-R", "a+rX", str(layout)])
    rig.config({"esc": {"image": f"oci:{layout}:latest"}})
    ws = new_repo(lz, "ws", {"README": "x\n"})
    r = rig.run("esc", ["true"], ws=ws)
    assert r.returncode == 125, r
    assert "HIDDEN" in r.stderr, r.stderr       # the name reached the message
    assert "\x1b" not in r.stderr, repr(r.stderr)
    assert "\\x1b" in r.stderr, r.stderr


def test_the_shared_image_tree_is_never_written(rig, test_images):
    """runsc's gofer makes the mount points it lacks in the root it gets;
    they must land in the generation's overlay, not in the image tree that
    every Domain of the image shares (E2). Evidence on the host: neither
    tree of the image gains /workspace, /run/lazaret or a persistent
    directory's mount point, while inside they exist (the control: the
    gofer did make them). And a second Domain of the image in another
    workspace gets a persistent ~/.cache of its own that is the agent's,
    as the first did."""
    lz = rig.lz
    rig.config({"ag": {"image": test_images.agent,
                       "persistent_dirs": ["/home/agent/.cache", "/opt/tool"]}})
    probe = sh("stat -c '%u' /home/agent/.cache /opt/tool; test -d /workspace && "
               "test -d /run/lazaret && echo mounts-exist")
    ws1 = new_repo(lz, "ws1", {"README": "x\n"})
    ws2 = new_repo(lz, "ws2", {"README": "y\n"})
    for ws in (ws1, ws2):
        out = ok(rig.run("ag", probe, ws=ws)).stdout.split()
        assert out == ["1000", "0", "mounts-exist"], (ws, out)
        left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
        assert not left, left
    trees = list(_catalog(lz).glob("*/rootfs"))
    assert len(trees) == 2, trees
    for t in trees:
        for rel in ("workspace", "run/lazaret", "home/agent/.cache", "opt/tool"):
            assert not os.path.lexists(t / rel), f"{t}/{rel} was made in the shared tree"
