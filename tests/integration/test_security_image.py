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

import pytest

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


def _flip_layout(layout: Path, src: str, mode: str) -> dict:
    """An OCI layout whose index.json can name one of two manifests: a and
    b. "plain": A (the agent image plus /marker A-audited) and B (plus
    /marker B-EVIL). "casefold" (round i12g, E4f): a = the agent image T's
    exact manifest, b = T's bytes plus capitalised "Config"/"Layers" keys
    naming image E (T plus /marker B-EVIL): jansson reads T's blobs there,
    skopeo's and umoci's Go decoders E's. Returns tag -> (catalog key,
    marker the key's image holds or None, index.json text)."""
    if mode == "plain":
        for tag, marker in (("a", "A-audited"), ("b", "B-EVIL")):
            _derive(src, layout, tag, lambda r, m=marker: (r / "marker").write_text(m + "\n"))
        entries = {t: _index_entry(layout, t) for t in "ab"}
        raws = {t: (layout / "blobs" / "sha256" / e["digest"].removeprefix("sha256:")).read_bytes()
                for t, e in entries.items()}
        markers = {"a": "A-audited", "b": "B-EVIL"}
    else:
        _derive(src, layout, "e", lambda r: (r / "marker").write_text("B-EVIL\n"))
        t_raw = (layout / "blobs" / "sha256" /
                 _index_entry(layout, "latest")["digest"].removeprefix("sha256:")).read_bytes()
        e_man = json.loads((layout / "blobs" / "sha256" /
                            _index_entry(layout, "e")["digest"].removeprefix("sha256:")).read_bytes())
        body = t_raw.rstrip()
        assert body.endswith(b"}")
        b_raw = (body[:-1] + b',"Config":' + json.dumps(e_man["config"]).encode() +
                 b',"Layers":' + json.dumps(e_man["layers"]).encode() + b"}")
        (layout / "blobs" / "sha256" / hashlib.sha256(b_raw).hexdigest()).write_bytes(b_raw)
        raws = {"a": t_raw, "b": b_raw}
        markers = {"a": None, "b": "B-EVIL"}
    out = {}
    for t, raw in raws.items():
        key = hashlib.sha256(raw).hexdigest()
        text = json.dumps({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": f"sha256:{key}", "size": len(raw),
            "annotations": {"org.opencontainers.image.ref.name": "latest"}}]})
        out[t] = (key, markers[t], text)
    (layout / "index.json").write_text(out["a"][2])
    _root(["chmod", "-R", "a+rX", str(layout)])
    return out


@pytest.mark.parametrize("mode", ["plain", "casefold"])
def test_a_source_that_changes_during_preparation_never_poisons_the_catalog(
        rig, test_images, mode):
    """A layout whose index.json a third party flips between two manifests
    every few milliseconds while the developer prepares it. The catalog
    entry named by one manifest's digest must only ever hold that image.
    The control: the flip really made the inspected manifest and the copy
    disagree (Lazaret's refusal "the image changed while it was copied" is
    seen) - exactly the case that, before the check, put B under A's key
    (round i12f, E4: 4-11 tries; with the check disabled this test fails on
    its first try), and that a check comparing what the manifests say let
    through (round i12g, E4f: "casefold")."""
    lz = rig.lz
    src = str(test_images.agent).removeprefix("oci:").rsplit(":", 1)[0]
    layout = lz.root / f"img-{mode}"  # readable by the test user (tmp_path is not)
    images = _flip_layout(layout, src, mode)
    rig.config({"flip": {"image": f"oci:{layout}:latest"}})
    ws = new_repo(lz, "ws", {"README": "x\n"})

    def flipper(stop):
        i = 0
        while not stop.is_set():
            tmp = layout / ".index.tmp"
            tmp.write_text(images["a" if i % 2 == 0 else "b"][2])
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
            r = rig.run("flip", sh("cat /marker 2>/dev/null || echo no-marker"), ws=ws)
        finally:
            stop.set()
            t.join()
        if "the image changed while it was copied" in r.stderr:
            refusals += 1
            assert r.returncode == 125, r
        # Whatever happened, every entry holds the image its key names.
        for e in _catalog(lz).glob("*"):
            for key, want, _ in images.values():
                if e.name.startswith(key):
                    if ".keep-id-" not in e.name and not (e / "rootfs").exists():
                        continue  # config.json only: the image runs as its non-root user
                    f = e / "rootfs" / "marker"
                    got = f.read_text().strip() if f.exists() else None
                    assert got == want, f"try {tries}: {e.name} holds {got}, not {want}"
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
    # The developer-owned tree (the catalog keeps only its config.json now:
    # docs/runtime.md "Images"), unpacked as Lazaret unpacks it.
    assert not (base / "rootfs").exists()
    layout = lz.root / "agent-layout"
    shutil.copytree(str(test_images.agent).removeprefix("oci:").rsplit(":", 1)[0], layout)
    _root(["chown", "-R", f"{lz.user.uid}:{lz.user.gid}", str(layout)])
    ok(lz.run_as_user(["umoci", "unpack", "--rootless", "--image", f"{layout}:latest",
                       str(keep)]))
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
    # One tree: the developer-owned entry of a non-root image keeps only
    # its config.json (docs/runtime.md "Images").
    assert len(trees) == 1 and ".keep-id-" in str(trees[0]), trees
    for t in trees:
        for rel in ("workspace", "run/lazaret", "home/agent/.cache", "opt/tool"):
            assert not os.path.lexists(t / rel), f"{t}/{rel} was made in the shared tree"
