# SPDX-License-Identifier: Apache-2.0
"""Prepared images (issue 26, item 4; docs/runtime.md "Images"): prepared
once per digest, listed and pruned by `lazaret image`, and started offline
from what is prepared when the registry cannot be reached. Real skopeo,
umoci, runsc; the registry is Debian's docker-registry (distribution 2.8)
on 127.0.0.1, started and stopped by the test.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import TEARDOWN_TIMEOUT, ok, sh, wait_torn_down

REGISTRY = "/usr/bin/docker-registry"


def _torn_down(lz):
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left


def _catalog(lz) -> Path:
    return lz.home / ".local/share/lazaret/images/rootfs"


def _list(lz) -> dict:
    return {r["digest"]: r for r in json.loads(ok(lz.run(["image", "list", "--json"])).stdout)}


def _manifest_digest(layout: Path, tag: str) -> str:
    index = json.loads((layout / "index.json").read_text())
    for m in index["manifests"]:
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return m["digest"].split(":", 1)[1]
    raise AssertionError(f"no tag {tag} in {layout}")


class Registry:
    """docker-registry serving 127.0.0.1:PORT only, as the test user,
    its storage in the test's directory."""

    def __init__(self, lz):
        self.lz = lz
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.host = f"127.0.0.1:{self.port}"
        # Outside lz.root: the teardown checks count every process that
        # names it as one of the Domains'.
        self.dir = Path(tempfile.mkdtemp(prefix="lzreg-"))
        os.chown(self.dir, lz.user.uid, lz.user.gid)
        self.config = self.dir / "registry.yml"
        self.config.write_text(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {self.dir}/data\nhttp:\n  addr: {self.host}\n")
        self.proc = None

    def start(self):
        u = self.lz.user
        self.proc = subprocess.Popen([REGISTRY, "serve", str(self.config)], user=u.uid,
                                     group=u.gid, extra_groups=[], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            assert self.proc.poll() is None, "docker-registry exited"
            assert time.monotonic() < deadline, "docker-registry did not answer in 10 s"
            time.sleep(0.05)

    def push(self, layout_ref: str, name: str):
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", layout_ref,
                        f"docker://{self.host}/{name}"], check=True, capture_output=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def registry(lz):
    if not os.access(REGISTRY, os.X_OK):
        pytest.fail(f"{REGISTRY} is missing: apt-get install docker-registry "
                    "(scripts/install-deps.sh)", pytrace=False)
    r = Registry(lz)
    # The test user's skopeo talks plain HTTP to it (registries.conf).
    lz.write(".config/containers/registries.conf",
             f'[[registry]]\nlocation = "{r.host}"\ninsecure = true\n', mode=0o644)
    r.start()
    yield r
    r.stop()
    shutil.rmtree(r.dir, ignore_errors=True)


def test_offline_start_uses_the_image_prepared_for_that_reference(rig, registry, test_images):
    lz = rig.lz
    registry.push(test_images.busybox, "lz/busybox:v1")
    registry.push(test_images.busybox, "lz/busybox:v2")
    digest = _manifest_digest(test_images.cache / "busybox", "latest")
    rig.config({"reg": {"image": f"{registry.host}/lz/busybox:v1"},
                "never": {"image": f"{registry.host}/lz/busybox:v2"}})
    ws2 = lz.mkdir("ws2")

    # Online: the registry is asked; the Domain's record says so.
    r = ok(rig.run("reg", sh("echo online")))
    assert r.stdout.strip() == "online"
    droot = Path(json.loads(ok(lz.run(["state", "inspect", "--json", "--profile", "reg",
                                       "--workspace", str(rig.ws)])).stdout)["domain_root"])
    assert f"digest {digest}\n" in (droot / "image").read_text()
    assert "offline 0\n" in (droot / "image").read_text()
    _torn_down(lz)

    registry.stop()
    # Offline, the same reference: started with the prepared digest, and
    # the notice says which, since when, and that a changed tag is not seen.
    r = ok(rig.run("reg", sh("echo offline")))
    assert r.stdout.strip() == "offline", r
    assert "not reachable" in r.stderr and f"sha256:{digest}" in r.stderr, r.stderr
    assert "changed upstream" in r.stderr, r.stderr
    record = (droot / "image").read_text()
    assert f"digest {digest}\n" in record and "offline 1\n" in record, record
    log = (droot / "logs" / "coordinator.log").read_text()
    assert f"runs image sha256:{digest} (offline" in log, log
    _torn_down(lz)

    # Control: a reference never prepared (the same registry, down) cannot
    # start, and the error says why and what to do.
    r = rig.run("never", sh("echo SHOULD-NOT-RUN"), ws=ws2)
    assert r.returncode == 125 and "SHOULD-NOT-RUN" not in r.stdout, r
    assert "the registry cannot be reached (dial tcp" in r.stderr, r.stderr
    assert "no image was prepared for this reference" in r.stderr, r.stderr
    assert "fix: connect to the network" in r.stderr, r.stderr


def _variant(lz, test_images, name: str) -> str:
    """The agent image with one more label: another digest, the same user."""
    layout = lz.root / name
    shutil.copytree(test_images.cache / "agent", layout)
    subprocess.run(["umoci", "config", "--image", f"{layout}:latest",
                    "--config.label", f"org.lazaret.test-variant={name}"], check=True,
                   capture_output=True)
    subprocess.run(["chmod", "-R", "go+rX", str(layout)], check=True)
    return f"oci:{layout}:latest"


def test_list_and_prune_keep_what_a_domain_uses(rig, test_images):
    lz = rig.lz
    agent2 = _variant(lz, test_images, "agent2")
    used_digest = _manifest_digest(test_images.cache / "agent", "latest")
    unused_digest = _manifest_digest(lz.root / "agent2", "latest")
    rig.config({"p": {"image": test_images.agent}, "q": {"image": agent2}})
    w1, w2 = lz.mkdir("w1"), lz.mkdir("w2")
    ok(rig.run("p", sh("id -u"), ws=w1))
    ok(rig.run("q", sh("id -u"), ws=w2))
    _torn_down(lz)
    cat = _catalog(lz)
    # Once per digest: a non-root image keeps one tree (its keep-id copy);
    # the developer-owned entry is its config.json only.
    for d in (used_digest, unused_digest):
        assert (cat / f"{d}.keep-id-1000-1000" / "rootfs" / "bin").is_dir()
        assert not (cat / d / "rootfs").exists() and (cat / d / "config.json").is_file()

    # q now runs another image: agent2 is used by no Domain.
    rig.config({"p": {"image": test_images.agent}, "q": {}})
    ok(rig.run("q", sh("true"), ws=w2))
    _torn_down(lz)
    # What an interrupted preparation leaves (the CLI killed mid-unpack).
    abandoned = cat / ".tmp-424242"
    lz.mkdir(abandoned / "layout")
    rows = _list(lz)
    assert len(rows) == 3, rows
    assert [d["profile"] for d in rows[used_digest]["domains"]] == ["p"]
    assert rows[unused_digest]["domains"] == []
    assert rows[unused_digest]["references"] == [agent2]
    assert rows[unused_digest]["bytes"] > 1 << 20  # the keep-id tree counts

    keep_id = cat / f"{unused_digest}.keep-id-1000-1000"
    # Control: the developer's own rm cannot remove a keep-id tree.
    r = lz.run_as_user(["rm", "-rf", str(keep_id)])
    assert r.returncode != 0 and keep_id.is_dir(), r

    # No terminal and no --yes: refused; --dry-run: said, not done.
    r = lz.run(["image", "prune"])
    assert r.returncode == 1 and "--yes" in r.stderr and keep_id.is_dir(), r
    r = ok(lz.run(["image", "prune", "--dry-run"]))
    assert unused_digest in r.stdout and used_digest not in r.stdout, r.stdout
    assert keep_id.is_dir() and abandoned.is_dir()

    r = ok(lz.run(["image", "prune", "--yes"]))
    assert unused_digest in r.stdout, r.stdout
    assert not keep_id.exists() and not (cat / unused_digest).exists()
    assert not abandoned.exists()
    assert (cat / f"{used_digest}.keep-id-1000-1000" / "rootfs" / "bin").is_dir()
    assert sorted(_list(lz)) == sorted(d for d in rows if d != unused_digest)

    # The kept image starts without being prepared again.
    r = ok(rig.run("p", sh("id -u"), ws=w1))
    assert r.stdout.split() == ["1000"] and "preparing image" not in r.stderr, r
