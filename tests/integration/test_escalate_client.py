# SPDX-License-Identifier: Apache-2.0
"""lazaret-escalate, the in-sandbox escalation client (docs/escalation.md
"The client"), run on the host directly.

Every run happens in a private mount namespace (unshare -m, as root) with a
tmpfs over /run and a host directory bound at /run/lazaret: the client finds
its mailbox and credentials where protocol/mailbox.h says, and this file
plays the coordinator on the host side of that directory (FakeCoordinator:
real Ed25519 keys, records encoded as src/protocol/mailbox.c does). So the
refusals are checked against a working mailbox (the control, a valid
request, does write a record into the same inbox), and the reply path
(chunks, result, outcomes, signatures, cancellation, heartbeats) is checked
against forged, misplaced and oversized replies. The coordinator's own side
is tested end to end elsewhere.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

# The record codecs and constants are shared with test_escalation_mailbox.py.
from mailbox_records import (ACK, CANCEL, CANCELLED, COMPLETED, CONTEXT, DENIED,  # noqa: F401
                             FAILED, MAX_RECORD, REQUEST, SIG_LEN, TIMED_OUT, _raw, chunk,
                             decode, result)

CAP = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def client_bin(lazaret_bin, skip_or_fail):
    path = Path(lazaret_bin).parent / "lazaret-escalate"
    if not os.access(path, os.X_OK):
        skip_or_fail(f"{path} is not built")
    return path


@pytest.fixture(autouse=True)
def _as_root(_root):
    """unshare -m and mount need root (the integration tests run as root)."""


class FakeCoordinator:
    """The host side of /run/lazaret: mailbox/inbox, mailbox/outbox,
    credentials, with fresh keys and nonce."""

    def __init__(self, root: Path):
        self.root = root / "lazaret"
        self.inbox = self.root / "mailbox" / "inbox"
        self.outbox = self.root / "mailbox" / "outbox"
        creds = self.root / "credentials"
        for d in (self.inbox, self.outbox, creds):
            d.mkdir(parents=True)
        self.sandbox_key = Ed25519PrivateKey.generate()
        self.coord_key = Ed25519PrivateKey.generate()
        self.nonce = os.urandom(16).hex().encode()
        seed = self.sandbox_key.private_bytes(serialization.Encoding.Raw,
                                              serialization.PrivateFormat.Raw,
                                              serialization.NoEncryption())
        # One file (protocol/mailbox.h): seed || coordinator's key || nonce.
        (creds / "client").write_bytes(seed + _raw(self.coord_key) + self.nonce)
        self.procs = []

    def run(self, client, args, capability=CAP, cwd="/", stdout=subprocess.PIPE, **kw):
        """Start the client in a mount namespace that sees self.root at
        /run/lazaret (a tmpfs over /run, so the host's /run is untouched)."""
        env = {"PATH": "/usr/bin:/bin"}
        if capability is not None:
            env["LAZARET_ESCALATE_CAPABILITY"] = capability
        script = ('mount -t tmpfs -o mode=0755 lzt /run && mkdir /run/lazaret && '
                  'mount --bind "$1" /run/lazaret && shift && exec "$@"')
        p = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh",
             str(self.root), str(client), *args],
            env=env, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        return p

    def kill_clients(self):
        """After a failed test: no client left waiting for a reply."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()

    def inbox_names(self):
        return sorted(os.listdir(self.inbox))

    def record(self, name):
        """A record of the inbox, signature checked, decoded."""
        data = (self.inbox / name).read_bytes()
        payload, sig = data[:-SIG_LEN], data[-SIG_LEN:]
        self.sandbox_key.public_key().verify(sig, CONTEXT + self.nonce + payload)
        return decode(payload)

    def wait_for(self, suffix, timeout=10.0, proc=None):
        """The first inbox entry ending in suffix (not a temporary one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in self.inbox_names():
                if n.endswith(suffix) and not n.startswith("."):
                    return n, self.record(n)
            if proc is not None and proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"client exited {proc.returncode} before {suffix}: {err}")
            time.sleep(0.002)
        raise AssertionError(f"no {suffix} in the inbox: {self.inbox_names()}")

    def sign(self, payload, key=None, nonce=None):
        key = key or self.coord_key
        return payload + key.sign(CONTEXT + (nonce or self.nonce) + payload)

    def put(self, rid, name, data):
        """Write outbox/<rid>/name atomically (as the coordinator does)."""
        d = self.outbox / rid
        d.mkdir(exist_ok=True)
        tmp = d / f".tmp-{name}"
        tmp.write_bytes(data)
        os.rename(tmp, d / name)

    def reply(self, rid, chunks, outcome, status=0, message=b""):
        for seq, (stream, data) in enumerate(chunks):
            self.put(rid, f"chunk-{seq}", self.sign(chunk(rid, seq, stream, data)))
        self.put(rid, "result", self.sign(result(rid, outcome, status, len(chunks), message)))


@pytest.fixture
def coord(tmp_path):
    tmp_path.chmod(0o755)
    c = FakeCoordinator(tmp_path)
    yield c
    c.kill_clients()


def finish(p, timeout=30):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err.decode(errors="replace")


# ---- the binary ----------------------------------------------------------------

def test_static_binary(client_bin):
    """It runs in any image: no program interpreter (PT_INTERP), no
    dynamic libraries."""
    hdrs = subprocess.run(["readelf", "-lW", str(client_bin)], capture_output=True,
                          text=True, check=True).stdout
    assert "LOAD" in hdrs
    assert "INTERP" not in hdrs
    dyn = subprocess.run(["readelf", "-dW", str(client_bin)], capture_output=True,
                         text=True, check=True).stdout
    assert "NEEDED" not in dyn
    # The control: the host CLI is dynamic, and the check sees it.
    assert "INTERP" in subprocess.run(["readelf", "-lW", str(client_bin.parent / "lazaret")],
                                      capture_output=True, text=True, check=True).stdout


def test_help(client_bin):
    for flag in ("--help", "-h"):
        p = subprocess.run([str(client_bin), flag], capture_output=True, text=True, env={})
        assert p.returncode == 0, p.stderr
        assert p.stderr == ""
        t = p.stdout
        assert t.startswith("Usage: lazaret-escalate [--why TEXT] -- /ABSOLUTE/EXECUTABLE")
        for needle in ("no shell", "PATH lookup", "absolute path", "'$(...)'", "literal",
                       "auto_approve", "this session's terminal", "128+N", "SIGINT",
                       "SIGTERM", "SIGHUP", "cancel"):
            assert needle in t, needle
        for status, word in (("250", "denied"), ("251", "timed out"), ("252", "cancelled"),
                             ("253", "failed"), ("254", "not sent")):
            assert f"  {status}    {word}" in t, status


# ---- refusals: exit 254, nothing written --------------------------------------

REFUSALS = [
    (["--", "ls", "-l"], "CommandRequiresShell: 'ls' is not an absolute path; "
     "lazaret-escalate runs no shell and does no PATH lookup"),
    (["--", "./x"], "CommandRequiresShell: './x' is not an absolute path"),
    (["--", "make && rm -rf ~"], "CommandRequiresShell: 'make && rm -rf ~' is not an absolute"),
    (["--"], "no command after '--'"),
    ([], "missing '--' before the command"),
    (["/bin/true"], "'/bin/true' before '--'"),
    (["--why"], "--why needs a value"),
    (["--frob", "--", "/bin/true"], "unknown option '--frob'"),
    (["--", "/bin/echo", "x" * 4097], "an argument is longer than 4096 bytes"),
    (["--", "/bin/echo", *(["y"] * 256)], "more than 256 arguments"),
    (["--why", "w" * 1025, "--", "/bin/true"], "justification"),
    (["--", "/bin/echo", b"\xff".decode("latin-1")], "not valid UTF-8"),
]


@pytest.mark.parametrize("args,message", REFUSALS, ids=[str(i) for i in range(len(REFUSALS))])
def test_refusal(client_bin, coord, args, message):
    args = [a.encode("latin-1") if "\xff" in a else a for a in args]
    rc, out, err = finish(coord.run(client_bin, args))
    assert rc == 254, err
    assert message in err, err
    assert out == b""
    assert coord.inbox_names() == []
    assert os.listdir(coord.outbox) == []


@pytest.mark.parametrize("capability,word", [(None, "not set"), ("", "malformed"),
                                             ("xyz", "malformed"), (CAP.upper(), "malformed"),
                                             (CAP + "0", "malformed")])
def test_not_a_session(client_bin, coord, capability, word):
    rc, out, err = finish(coord.run(client_bin, ["--", "/bin/true"], capability=capability))
    assert rc == 254, err
    assert "not started by a Lazaret session" in err and word in err, err
    assert coord.inbox_names() == []


def test_bad_credentials(client_bin, coord):
    """A credential of the wrong size is refused before anything is sent."""
    (coord.root / "credentials" / "client").write_bytes(b"k" * 95)
    rc, out, err = finish(coord.run(client_bin, ["--", "/bin/true"]))
    assert rc == 254
    assert "client has 95 bytes, not 96" in err, err
    assert coord.inbox_names() == []


def test_refusal_touches_nothing_on_the_host(client_bin):
    """Without a namespace: a refusal does not create /run/lazaret (or
    anything else there)."""
    assert not os.path.exists("/run/lazaret")
    for args in (["--", "ls"], ["--", "/bin/true"]):
        p = subprocess.run([str(client_bin), *args], capture_output=True, text=True,
                           env={"LAZARET_ESCALATE_CAPABILITY": CAP})
        assert p.returncode == 254, p.stderr
    assert not os.path.exists("/run/lazaret")


# ---- the round trip against the fake coordinator -------------------------------

def test_request_and_streamed_result(client_bin, coord, tmp_path):
    """The control for the refusals: a valid request is written, signed,
    with argv verbatim (shell metacharacters are bytes); chunks reach
    stdout and stderr in order; the status is the command's; an ACK follows
    every 16 chunks."""
    work = tmp_path / "w d"
    work.mkdir()
    argv = ["/usr/bin/printf", "a;b", "x && y", "$(id)", "`id`", "'q'", ""]
    p = coord.run(client_bin, ["--why", "need \x1b[2J it", "--", *argv], cwd=str(work))
    name, req = coord.wait_for(".request", proc=p)
    rid = req["id"]
    assert name == f"{rid}.request"
    assert len(rid) == 32 and all(ch in "0123456789abcdef" for ch in rid)
    assert req["capability"] == CAP
    assert req["cwd"] == str(work).encode()
    assert req["argv"] == [a.encode() for a in argv]
    assert req["why"] == b"need \x1b[2J it"
    chunks = [(1 + (i % 2), f"<{i}>".encode()) for i in range(40)]
    coord.reply(rid, chunks, COMPLETED, status=7)
    rc, out, err = finish(p)
    assert rc == 7, err
    assert out == b"".join(d for s, d in chunks if s == 1)
    assert err == "".join(d.decode() for s, d in chunks if s == 2)
    acks = [coord.record(n) for n in coord.inbox_names() if ".ack-" in n]
    assert {a["acked"] for a in acks} >= {16, 32}
    assert all(a["id"] == rid and a["capability"] == CAP for a in acks)
    assert not [n for n in coord.inbox_names() if n.startswith(".")]


def test_ids_are_fresh(client_bin, coord):
    ids = set()
    for _ in range(3):
        p = coord.run(client_bin, ["--", "/bin/true"])
        _, req = coord.wait_for(".request", proc=p)
        coord.reply(req["id"], [], COMPLETED, status=0)
        assert finish(p)[0] == 0
        ids.add(req["id"])
        for n in coord.inbox_names():
            os.unlink(coord.inbox / n)
    assert len(ids) == 3


@pytest.mark.parametrize("outcome,status,word", [(DENIED, 250, "denied"),
                                                 (TIMED_OUT, 251, "timed out"),
                                                 (CANCELLED, 252, "cancelled"),
                                                 (FAILED, 253, "failed")])
def test_outcomes(client_bin, coord, outcome, status, word):
    p = coord.run(client_bin, ["--", "/bin/true"])
    _, req = coord.wait_for(".request", proc=p)
    coord.reply(req["id"], [], outcome, message="no \x1b]0;pwn\x07 \x7f \u202e way".encode())
    rc, out, err = finish(p)
    assert rc == status, err
    assert err == f"lazaret-escalate: {word}: no \\x1b]0;pwn\\x07 \\x7f \\xe2\\x80\\xae way\n"


def test_signal_exit_status_passes_through(client_bin, coord):
    p = coord.run(client_bin, ["--", "/bin/sleep", "100"])
    _, req = coord.wait_for(".request", proc=p)
    coord.reply(req["id"], [], COMPLETED, status=128 + 9)
    assert finish(p)[0] == 137


# ---- replies the client must not trust -----------------------------------------

def _forged(coord, rid):
    other = Ed25519PrivateKey.generate()
    good = chunk(rid, 0, 1, b"LEAK")
    return {
        "wrong key": ("chunk-0", coord.sign(good, key=other), "not signed"),
        "wrong generation": ("chunk-0", coord.sign(good, nonce=b"f" * 32), "not signed"),
        "zero signature": ("chunk-0", good + bytes(SIG_LEN), "not signed"),
        "no signature": ("chunk-0", good, "impossible size"),
        "other request": ("chunk-0", coord.sign(chunk("a" * 32, 0, 1, b"LEAK")), "another"),
        "wrong seq": ("chunk-0", coord.sign(chunk(rid, 1, 1, b"LEAK")), "another"),
        "bad stream": ("chunk-0", coord.sign(chunk(rid, 0, 3, b"LEAK")), "not a valid chunk"),
        "oversized": ("chunk-0", coord.sign(chunk(rid, 0, 1, b"LEAK" * 16384)), "size"),
        "trailing byte": ("chunk-0", coord.sign(good + b"\0"), "not a valid chunk"),
        "result of other": ("result", coord.sign(result("b" * 32, COMPLETED)), "another"),
    }


FORGED = ["wrong key", "wrong generation", "zero signature", "no signature", "other request", "wrong seq",
          "bad stream", "oversized", "trailing byte", "result of other"]


@pytest.mark.parametrize("case", FORGED)
def test_untrusted_reply_refused(client_bin, coord, case):
    p = coord.run(client_bin, ["--", "/bin/true"])
    _, req = coord.wait_for(".request", proc=p)
    rid = req["id"]
    name, data, word = _forged(coord, rid)[case]
    coord.put(rid, name, data)
    if name == "chunk-0":
        coord.put(rid, "result", coord.sign(result(rid, COMPLETED, 0, 1)))
    rc, out, err = finish(p)
    assert rc == 253, err
    assert word in err, err
    assert b"LEAK" not in out


def test_symlink_and_directory_replies_refused(client_bin, coord, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(coord.sign(result("c" * 32, COMPLETED)))
    for kind in ("symlink", "directory"):
        p = coord.run(client_bin, ["--", "/bin/true"])
        _, req = coord.wait_for(".request", proc=p)
        d = coord.outbox / req["id"]
        d.mkdir()
        if kind == "symlink":
            (d / "result").symlink_to(secret)
        else:
            (d / "result").mkdir()
        rc, out, err = finish(p)
        assert rc == 253, err
        assert "result" in err and ("Too many levels" in err or "not a regular file" in err), err
        for n in coord.inbox_names():
            os.unlink(coord.inbox / n)


def test_missing_chunk_refused(client_bin, coord):
    """A result that counts a chunk that is not there."""
    p = coord.run(client_bin, ["--", "/bin/true"])
    _, req = coord.wait_for(".request", proc=p)
    coord.put(req["id"], "result", coord.sign(result(req["id"], COMPLETED, 0, 2)))
    rc, out, err = finish(p)
    assert rc == 253
    assert "chunk-0 is missing" in err, err


# ---- waiting, heartbeats, cancellation ----------------------------------------

def test_heartbeat_while_waiting(client_bin, coord):
    """While the request waits (a prompt is up), an ACK at least every
    second keeps it alive."""
    p = coord.run(client_bin, ["--", "/bin/true"])
    _, req = coord.wait_for(".request", proc=p)
    (coord.outbox / req["id"]).mkdir()
    time.sleep(3.5)
    acks = [coord.record(n) for n in coord.inbox_names() if ".ack-" in n]
    assert len(acks) >= 3, coord.inbox_names()
    assert all(a["acked"] == 0 for a in acks)
    coord.reply(req["id"], [], COMPLETED, status=0)
    assert finish(p)[0] == 0


def test_no_answer(client_bin, coord):
    p = coord.run(client_bin, ["--", "/bin/true"])
    coord.wait_for(".request", proc=p)
    start = time.monotonic()
    rc, out, err = finish(p)
    assert rc == 253
    assert "no answer from the Lazaret coordinator" in err, err
    assert 8 < time.monotonic() - start < 15


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_cancels(client_bin, coord, sig):
    p = coord.run(client_bin, ["--", "/bin/sleep", "100"])
    _, req = coord.wait_for(".request", proc=p)
    rid = req["id"]
    (coord.outbox / rid).mkdir()
    p.send_signal(sig)
    name, cancel = coord.wait_for(".cancel", proc=p)
    assert name == f"{rid}.cancel"
    assert cancel == dict(type=CANCEL, capability=CAP, id=rid, acked=0)
    time.sleep(0.3)
    assert p.poll() is None, "the client waits for the coordinator's confirmation"
    coord.reply(rid, [(1, b"last words\n")], CANCELLED, message=b"cancelled by the client")
    rc, out, err = finish(p)
    assert rc == 252, err
    assert out == b"last words\n"
    assert "lazaret-escalate: cancelled: cancelled by the client" in err
    assert len([n for n in coord.inbox_names() if n.endswith(".cancel")]) == 1


def test_cancel_unconfirmed_and_second_signal(client_bin, coord):
    # Unconfirmed: 252 after about 5 s.
    p = coord.run(client_bin, ["--", "/bin/sleep", "100"])
    coord.wait_for(".request", proc=p)
    p.send_signal(signal.SIGINT)
    coord.wait_for(".cancel", proc=p)
    start = time.monotonic()
    rc, out, err = finish(p)
    assert rc == 252 and "did not confirm" in err, err
    assert 4 < time.monotonic() - start < 8
    for n in coord.inbox_names():
        os.unlink(coord.inbox / n)
    # A second signal: at once.
    p = coord.run(client_bin, ["--", "/bin/sleep", "100"])
    coord.wait_for(".request", proc=p)
    p.send_signal(signal.SIGINT)
    coord.wait_for(".cancel", proc=p)
    start = time.monotonic()
    p.send_signal(signal.SIGINT)
    rc, out, err = finish(p)
    assert rc == 252 and "again" in err, err
    assert time.monotonic() - start < 1


def test_closed_stdout_cancels(client_bin, coord):
    """Output that cannot be delivered (the reader of the pipe is gone)
    cancels the request instead of killing the client by SIGPIPE."""
    r, w = os.pipe()
    p = coord.run(client_bin, ["--", "/usr/bin/yes"], stdout=w)
    os.close(w)
    os.close(r)
    _, req = coord.wait_for(".request", proc=p)
    coord.put(req["id"], "chunk-0", coord.sign(chunk(req["id"], 0, 1, b"y\n")))
    coord.wait_for(".cancel", proc=p)
    coord.put(req["id"], "result", coord.sign(result(req["id"], CANCELLED, 0, 1)))
    rc, _, err = finish(p)
    assert rc == 252, err
    assert "standard output cannot be written" in err, err
