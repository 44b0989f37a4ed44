# SPDX-License-Identifier: Apache-2.0
"""lazaret state inspect | verify | reset, and Store pruning (issue 12, item 2
and part of item 4), with the real binaries as the unprivileged test user.

Each Domain start costs a second or two, so each test uses one or two and
checks several things on the state they leave: what inspect shows, how a
Domain is named (ID prefix, ambiguous, unknown), what verify reports for
each kind of damage (each against the same Domain healthy, as control), and
what reset removes and keeps, including a symlink the sandbox planted that
points at a host file.
"""

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from conftest import TEARDOWN_TIMEOUT, ok, sh, wait_torn_down
from test_git import new_repo


def _inspect(lz, *args):
    return json.loads(ok(lz.run(["state", "inspect", "--json", *args])).stdout)


def _verify(lz, *args):
    return lz.run(["state", "verify", *args])


def _problems(p):
    return [c for c in json.loads(p.stdout)["checks"] if not c["ok"]]


def test_inspect_selection_and_verify(rig):
    """inspect shows the persistent directory and the ignored copy with their
    sizes, and the generations; the Domain is chosen by workspace and
    profile, by an ID prefix, and an ambiguous or unknown prefix is refused
    with a fix. verify passes on the healthy Domain and reports, each with a
    fix line and exit 1, a symlink in place of the upper directory, a
    group-writable directory and a damaged store; after each repair it passes
    again (the control).

    The profile forwards a secret (env:) that only the run's shell exports:
    inspect, and every other command that starts no sandbox, works without
    it (issue 26); `run` without it refuses (the control: the variable is
    required where a sandbox starts)."""
    lz = rig.lz
    ws = new_repo(lz, "ws", {"README": "hello\n", ".gitignore": "build/\n"})
    rig.config({"bb": {"persistent_dirs": ["/opt"], "env": {"TOKEN": "env:LZ_STATE_TOKEN"}}})
    ok(rig.run("bb", sh("dd if=/dev/zero of=/opt/blob bs=1024 count=1024 2>/dev/null && "
                        "mkdir -p build && echo artefact > build/out"), ws=ws,
               env={"LZ_STATE_TOKEN": "lz-state-secret"}))
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left

    d = _inspect(lz, "--profile", "bb", "--workspace", ws)
    assert d["profile"] == "bb" and d["workspace"] == str(ws.resolve()) and not d["running"], d
    assert "volumes_error" not in d, d
    no_secret = [["state", "list"], ["state", "verify", "--workspace", ws],
                 ["config", "check", "bb", "--workspace", ws], ["status"],
                 ["log", "--profile", "bb", "--workspace", ws],
                 ["stop", "--profile", "bb", "--workspace", ws],
                 ["export", "kubernetes", "bb", "--workspace", ws, "-o", lz.home / "bb.yaml",
                  "--image", "registry.example/bb@sha256:" + "0" * 64]]
    for argv in no_secret:
        p = lz.run(argv)
        assert p.returncode == 0 and "error" not in p.stderr, \
            (argv, p.returncode, p.stderr)
    p = rig.run("bb", ["true"], ws=ws)
    assert p.returncode == 125 and "LZ_STATE_TOKEN is not set" in p.stderr, p.stderr
    [pers] = d["persistent"]
    assert pers["path"] == "/opt" and pers["bytes"] >= 1024 * 1024, pers
    assert d["ignored"]["count"] == 1 and d["ignored"]["names"] == ["build"], d["ignored"]
    assert d["ignored"]["bytes"] > 0, d["ignored"]
    assert d["volumes"] == [], d
    assert d["generations_kept"] >= 1
    g = d["generations"][0]
    assert g["state"] == "ended" and g["started"] and g["ended"], g
    assert len(g["fingerprint"]) == 64, g
    text = ok(lz.run(["state", "inspect"], cwd=ws)).stdout     # the workspace's, by default
    assert "/opt" in text and "MiB" in text and "build" in text and "ended" in text, text
    assert "running:     no" in text, text

    # By ID prefix; unknown and ambiguous prefixes are refused with a fix.
    did, droot = d["domain_id"], Path(d["domain_root"])
    assert _inspect(lz, did[:12])["domain_id"] == did
    other = ("0" if did[0] != "0" else "1") + did[1:12]
    p = lz.run(["state", "inspect", other])
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert f"no Domain has an ID starting with '{other}'" in p.stderr, p.stderr
    assert "fix:" in p.stderr and "lazaret state list" in p.stderr, p.stderr
    twin = droot.parent / (did[:10] + ("0" if did[10] != "0" else "1") + did[11:])
    shutil.copytree(droot, twin, symlinks=True)
    os.system(f"chown -R {lz.user.uid}:{lz.user.gid} '{twin}'")
    p = lz.run(["state", "inspect", did[:10]])
    assert p.returncode == 1 and "matches 2 Domains" in p.stderr, p.stderr
    assert did in p.stderr and twin.name in p.stderr and "fix:" in p.stderr, p.stderr
    p = lz.run(["state", "verify", "--workspace", ws])      # two Domains of that workspace
    assert p.returncode == 1 and "--profile" in p.stderr, p.stderr
    shutil.rmtree(twin)

    # verify: healthy, then each kind of damage, then healthy again.
    p = _verify(lz, "--json", did[:12])
    assert p.returncode == 0 and json.loads(p.stdout)["ok"], p.stdout
    assert "No problem found." in ok(_verify(lz, did[:12])).stdout

    upper = droot / "state" / "opt" / "upper"
    aside = upper.with_name("upper.aside")
    os.rename(upper, aside)
    os.symlink(lz.home, upper)
    p = _verify(lz, "--json", did[:12])
    probs = _problems(p)
    assert p.returncode == 1 and len(probs) == 1, p.stdout
    assert probs[0]["object"].endswith("state/opt/upper") and "symlink" in probs[0]["problem"]
    assert probs[0]["fix"], probs
    text = _verify(lz, did[:12]).stdout
    assert "PROBLEM" in text and "fix:" in text and "1 problem(s) found." in text, text
    os.unlink(upper)
    os.rename(aside, upper)
    ok(_verify(lz, did[:12]))

    os.chmod(droot / "state" / "opt", 0o770)
    p = _verify(lz, "--json", did[:12])
    probs = _problems(p)
    assert p.returncode == 1 and len(probs) == 1, p.stdout
    assert probs[0]["check"] == "modes" and "group or others" in probs[0]["problem"], probs
    assert probs[0]["fix"].startswith("chmod go-w"), probs
    os.chmod(droot / "state" / "opt", 0o700)
    ok(_verify(lz, did[:12]))

    store = droot / "store.db"
    saved = store.read_bytes()
    with open(store, "r+b") as f:
        f.write(b"this is no SQLite database header")
    p = _verify(lz, "--json", did[:12])
    probs = _problems(p)
    assert p.returncode == 1 and [c["check"] for c in probs] == ["store"], p.stdout
    assert "move" in probs[0]["fix"], probs
    store.write_bytes(saved)
    ok(_verify(lz, did[:12]))

    # A foreign mount inside an upper (root mounts one here; a sandbox cannot):
    # verify reports it, and reset never crosses it, so the host directory
    # mounted there keeps its file.
    hostdir = lz.mkdir("hostdir")
    lz.write(hostdir / "file", "host\n", mode=0o644)
    (upper / "m").mkdir()
    assert subprocess.run(["mount", "--bind", str(hostdir), str(upper / "m")]).returncode == 0
    try:
        p = _verify(lz, "--json", did[:12])
        probs = _problems(p)
        assert p.returncode == 1 and [c["check"] for c in probs] == ["mounts"], p.stdout
        assert probs[0]["object"].endswith("state/opt/upper/m"), probs
        p = lz.run(["state", "reset", "--yes", did[:12]])
        assert p.returncode == 1 and "mount point" in p.stderr, p.stderr
        assert (hostdir / "file").read_text() == "host\n"
    finally:
        subprocess.run(["umount", str(upper / "m")])
    assert (hostdir / "file").read_text() == "host\n"


def test_reset_stop_confirmation_symlink_and_pruning(rig):
    """reset is refused while the Domain runs (without --stop) and without a
    terminal or --yes; `--stop --yes` stops it and removes the persistent
    directory and the ignored copy, also files of a subordinate uid, keeps
    the store and the workspace, and removes a planted symlink to a host
    file without touching the host file (control: the link did resolve to
    it, so a removal that follows links would have reached it). The next
    run finds the persistent file gone. That run also prunes a store filled
    with old generations down to the documented bound."""
    lz = rig.lz
    target = lz.write("private/precious", "the developer's\n", mode=0o644)
    ws = new_repo(lz, "ws", {"README": "hello\n", ".gitignore": "build/\n"})
    rig.config({"bb": {"persistent_dirs": ["/opt"]}})
    holder = rig.hold("bb", ws=ws, script=(
        "echo kept > /opt/keep && mkdir /opt/nob && echo x > /opt/nob/f && "
        "chown -R 65534:65534 /opt/nob && chmod 755 /opt/nob && "
        f"ln -s {target} /opt/link && mkdir -p build && echo artefact > build/out"))
    d = _inspect(lz, "--profile", "bb", "--workspace", ws)
    assert d["running"], d
    droot = Path(d["domain_root"])
    upper = droot / "state" / "opt" / "upper"
    link = upper / "link"
    assert link.is_symlink() and os.path.realpath(link) == str(target), "the plant did not land"
    assert (upper / "nob").stat().st_uid != lz.user.uid, "not a subordinate uid's directory"

    p = lz.run(["state", "reset", "--yes", "--profile", "bb", "--workspace", ws])
    assert p.returncode == 1 and "is running" in p.stderr and "--stop" in p.stderr, p.stderr
    p = lz.run(["state", "reset", "--stop", "--profile", "bb", "--workspace", ws])  # stdin: /dev/null
    assert p.returncode == 1 and "not a terminal" in p.stderr and "--yes" in p.stderr, p.stderr
    assert (upper / "keep").exists(), "a refused reset removed something"
    assert len(json.loads(ok(lz.run(["status", "--json"])).stdout)) == 1, "the Domain stopped"

    p = ok(lz.run(["state", "reset", "--stop", "--yes", "--profile", "bb", "--workspace", ws]))
    assert "stopped profile 'bb'" in p.stdout and "removed state/" in p.stdout, p.stdout
    r = holder.finish()
    assert r.returncode == 125 and "stopped" in r.stderr, (r.returncode, r.stderr)
    assert not (droot / "state").exists() and not (droot / "ignored").exists()
    assert (droot / "store.db").exists() and (droot / "logs").is_dir()
    assert target.read_text() == "the developer's\n", "the host file behind the link was touched"
    assert (ws / "README").read_text() == "hello\n"
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left

    # Fill the store with old, finished generations (as years of use would).
    db = sqlite3.connect(droot / "store.db")
    with db:
        (domain_id,) = db.execute("SELECT domain_id FROM domain").fetchone()
        for i in range(150):
            gid = db.execute("INSERT INTO generation (domain_id, configuration_fingerprint, "
                             "state, started_at, ended_at) VALUES (?, 'f', 'ended', 1, 2)",
                             (domain_id,)).lastrowid
            db.execute("INSERT INTO session VALUES (?, 's', 1, 0, 'ended', 1, 2, 'exited', 0)",
                       (gid,))
    db.close()
    os.system(f"chown -R {lz.user.uid}:{lz.user.gid} '{droot}'")

    p = ok(rig.run("bb", sh("test -e /opt/keep && echo present || echo absent; "
                            "test -e build/out && echo present || echo absent"), ws=ws))
    assert p.stdout == "absent\nabsent\n", p.stdout
    left, _ = wait_torn_down(lz, TEARDOWN_TIMEOUT)
    assert not left, left
    d = _inspect(lz, "--profile", "bb", "--workspace", ws)
    assert d["generations_kept"] == 101, d["generations_kept"]   # LZ_STORE_KEEP_GENERATIONS + 1
    db = sqlite3.connect(f"file:{droot / 'store.db'}?mode=ro", uri=True)
    assert db.execute("SELECT count(*) FROM session").fetchone()[0] <= 101
    db.close()
