# SPDX-License-Identifier: Apache-2.0
"""Attacks on the session channel's enrolment and TLS 1.3
(docs/session-channel.md, src/trust/channel.c, src/coordinator/session.c).

Each attack runs against a live Domain (a holder session keeps it up) on a
connection of the Domain's own user (test_protocol.connect_as_user), driven
by session_client.py, and has a control on a fresh connection that takes the
legitimate step instead and then runs a command that writes a marker file
into the workspace: the marker on the host proves the control's path works,
so its absence after the attack is the defence's doing. Evidence is what the
coordinator does: the REFUSED (in the clear before ENROLLED, sealed after
the handshake) or the bare EOF it sends, its logs/coordinator.log line, the
descriptors it holds (/proc/PID/fd, and the far end of a pipe whose only
other writer was the descriptor passed), and whether the command ran.

The last test turns the tables: a fake coordinator (a listening socket bound
at coordinator.sock by the Domain's user, served by this test) answers the
real `lazaret run` with an enrolment of its own CA, and the CLI must not say
HELLO to it unless the publication, the enrolment and the server certificate
all name one CA.
"""

import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import (Ed25519PrivateKey,
                                                               Ed25519PublicKey)

from conftest import domain_dirs, wait_torn_down
from session_client import (ENROLL, ENROLLED, EXIT, HELLO, OUTPUT, PROGRESS, PUBLICATION_FILE,
                            REFUSED, STARTED, STEP, Channel, ChannelError, FakeCA, Publication,
                            Reader, RecordForger, SessionClient, encode_publication,
                            enrolled_msg, parse_publication, read_publication, refused_msg,
                            tls_context)
from test_protocol import (Conn, Pipes, _context, connect_as_user, coordinator_log, hello,
                           log_since, run_msg, wait_log)

REFUSE_PROTOCOL = 1


# ---- helpers -------------------------------------------------------------------------

@pytest.fixture
def domain(rig):
    """A Domain kept up by a holder session: (rig, ctx, log)."""
    rig.config({"bb": {}})
    holder = rig.hold("bb")
    ctx = _context(rig.lz)
    yield rig, ctx, coordinator_log(rig.lz)
    rig.release(holder)


def marker_cmd(name: str) -> list:
    return ["sh", "-c", f"echo ran-$((6*7)) > /workspace/{name}"]


def raw_conn(rig, ctx, what: str) -> Conn:
    """Connected as the Domain's user, nothing sent yet."""
    return connect_as_user(rig.lz, ctx["dir"], what, secure=False)


def try_send(fn, *args):
    """A send to a coordinator that may have closed already."""
    try:
        fn(*args)
    except (BrokenPipeError, ConnectionResetError):
        pass


def run_to_marker(rig, ctx, conn: Conn, name: str, send_hello=True, send=None):
    """The legitimate rest: HELLO, RUN of the marker command with stdio
    pipes, STARTED, EXIT 0; and the marker on the host. send(msg, fds)
    replaces conn.send when given."""
    send = send or conn.send
    pipes = Pipes()
    try:
        if send_hello:
            send(hello(ctx), ())
        send(run_msg(marker_cmd(name)), pipes.theirs())
        pipes.sent()
        conn.expect_started()
        r = conn.next()
        while r is not None and r.type == OUTPUT:
            r = conn.next()
        assert r is not None and r.type == EXIT and (r.u32(), r.u32()) == (0, 0), \
            f"control {name}: no EXIT 0 (got {r and r.type})"
    finally:
        pipes.close()
    marker = rig.ws / name
    assert marker.exists() and marker.read_text() == "ran-42\n", \
        f"control {name}: the command did not run (no {marker})"


def read_to_end(conn: Conn, timeout=STEP) -> list:
    """Everything until EOF: ("msg", type, Reader) for each message, ("error",
    text) for a datagram that failed TLS (the peer's alert, say)."""
    got = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"{conn.what}: no EOF within {timeout} s (got {got})", pytrace=False)
        try:
            data = conn.ch.recv(left)
        except ChannelError as e:
            if "no datagram within" in str(e):
                pytest.fail(f"{conn.what}: no EOF within {timeout} s (got {got})",
                            pytrace=False)
            got.append(("error", str(e)))
            continue
        if not data:
            return got
        try:
            r = Reader(data)
            got.append(("msg", r.type, r))
        except ChannelError:
            got.append(("raw", data))


def refused_then_eof(conn: Conn) -> tuple:
    """REFUSED (code, message) and then EOF, PROGRESS lines aside."""
    got = [g for g in read_to_end(conn) if not (g[0] == "msg" and g[1] == PROGRESS)]
    assert got and got[0][0] == "msg" and got[0][1] == REFUSED and len(got) == 1, \
        f"{conn.what}: expected REFUSED then EOF, got {got}"
    r = got[0][2]
    return r.u32(), r.bytes().decode()


def no_command_ran(rig, log: Path, mark: int, name: str):
    time.sleep(1)  # what would have run, had it been started, had time to
    assert not (rig.ws / name).exists(), f"{name}: the command ran"
    text = log_since(log, mark)
    assert not re.search(r"session [0-9a-f]{32} \(#\d+\) started", text), \
        f"{name}: a session started:\n{text}"


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_fd_count(pid: int, want: int, timeout=10) -> int:
    deadline = time.monotonic() + timeout
    while True:
        n = fd_count(pid)
        if n == want or time.monotonic() > deadline:
            return n
        time.sleep(0.05)


def pipe_for_coordinator():
    """(read end, write end): the write end is to be passed and then closed
    here, so the read end reaches EOF only once the coordinator closed its
    copy."""
    return os.pipe2(os.O_CLOEXEC)


def wait_pipe_eof(rfd: int, timeout=10) -> bool:
    os.set_blocking(rfd, False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.read(rfd, 4096) == b"":
                return True
        except BlockingIOError:
            time.sleep(0.05)
    return False


# ---- 1. messages in the clear --------------------------------------------------------

def test_messages_in_the_clear_are_refused(domain):
    rig, ctx, log = domain

    # HELLO instead of ENROLL: REFUSED in the clear, then EOF.
    mark = log.stat().st_size
    conn = raw_conn(rig, ctx, "HELLO in the clear")
    try:
        conn.send_raw(hello(ctx))
        code, msg = refused_then_eof(conn)
        assert code == REFUSE_PROTOCOL and "HELLO is not allowed in state ENROLL" in msg, msg
    finally:
        conn.close()
    wait_log(log, mark, r"session #\d+: protocol violation: .*HELLO is not allowed in state "
                        r"ENROLL")

    # RUN (with its stdio) instead of ENROLL: refused, nothing runs.
    mark = log.stat().st_size
    conn = raw_conn(rig, ctx, "RUN in the clear")
    pipes = Pipes()
    try:
        conn.send_raw(run_msg(marker_cmd("clear-run")), pipes.theirs())
        pipes.sent()
        code, msg = refused_then_eof(conn)
        assert code == REFUSE_PROTOCOL and "RUN is not allowed in state ENROLL" in msg, msg
    finally:
        conn.close()
        pipes.close()
    no_command_ran(rig, log, mark, "clear-run")

    # ENROLLED, then HELLO and RUN in the clear, skipping TLS: the
    # coordinator takes the HELLO for a ClientHello, fails the handshake and
    # ends the connection; it refuses nothing in the clear after ENROLLED.
    mark = log.stat().st_size
    conn = raw_conn(rig, ctx, "HELLO in the clear after ENROLLED")
    pipes = Pipes()
    try:
        conn.ch.enroll()
        conn.send_raw(hello(ctx))
        try_send(conn.send_raw, run_msg(marker_cmd("clear-after-enrolled")), pipes.theirs())
        pipes.sent()
        got = read_to_end(conn)
        assert not [g for g in got if g[0] == "msg" and g[1] in (REFUSED, STARTED)], got
    finally:
        conn.close()
        pipes.close()
    # (Refused as a handshake datagram that is not whole TLS records, or,
    # by OpenSSL, as no ClientHello.)
    wait_log(log, mark, r"session #\d+: (a TLS datagram ends inside a record|the TLS handshake "
                        r"of the session channel failed.*); ending its connection")
    no_command_ran(rig, log, mark, "clear-after-enrolled")

    # Control: the same HELLO and RUN, sealed after ENROLL and the handshake.
    conn = connect_as_user(rig.lz, ctx["dir"], "control: sealed")
    try:
        run_to_marker(rig, ctx, conn, "clear-control")
    finally:
        conn.close()


# ---- 2. the client certificate -------------------------------------------------------

def test_tls_client_without_certificate_is_refused(domain):
    rig, ctx, log = domain
    pub = read_publication(ctx["dir"])
    mark = log.stat().st_size
    conn = raw_conn(rig, ctx, "no client certificate")
    pipes = Pipes()
    try:
        conn.ch.enroll()
        # Our side of a TLS 1.3 handshake ends with our Finished, before the
        # coordinator has judged our (empty) Certificate: it answers the
        # messages that follow with its alert and EOF.
        try:
            conn.ch.start(pub.ca_der, cert_der=None, key=None)
            try_send(conn.send, hello(ctx))
            try_send(conn.send, run_msg(marker_cmd("no-cert")), pipes.theirs())
        except ChannelError:
            pass  # the alert came in the handshake already
        pipes.sent()
        got = read_to_end(conn)
        assert not [g for g in got if g[0] == "msg"], got
    finally:
        conn.close()
        pipes.close()
    wait_log(log, mark, r"session #\d+: the TLS handshake of the session channel failed.*"
                        r"certificate.*; ending its connection")
    no_command_ran(rig, log, mark, "no-cert")

    # Control: the same steps with this connection's certificate.
    conn = raw_conn(rig, ctx, "control: with its certificate")
    try:
        conn.ch.enroll()
        conn.ch.start(pub.ca_der)
        run_to_marker(rig, ctx, conn, "no-cert-control")
    finally:
        conn.close()


def test_client_certificate_of_another_connection_is_refused(domain):
    """A and B enrol (keys kA, kB); B then presents A's certificate with A's
    key — a certificate the CA issued, for a key the presenter holds, but not
    the one enrolled on B. B is closed without a session; A's certificate
    still opens A, and a B with its own certificate works."""
    rig, ctx, log = domain
    pub = read_publication(ctx["dir"])
    a = raw_conn(rig, ctx, "A")
    b = raw_conn(rig, ctx, "B presenting A's certificate")
    pipes = Pipes()
    try:
        a_id, a_der = a.ch.enroll()
        b_id, b_der = b.ch.enroll()
        assert a_id != b_id
        mark = log.stat().st_size
        try:
            b.ch.start(pub.ca_der, cert_der=a_der, key=a.ch.key)
            try_send(b.send, hello(ctx))
            try_send(b.send, run_msg(marker_cmd("other-cert")), pipes.theirs())
        except ChannelError:
            pass
        pipes.sent()
        got = read_to_end(b)
        assert not [g for g in got if g[0] == "msg"], got
        wait_log(log, mark, r"session #\d+: its TLS client certificate is not the one enrolled "
                            r"on this connection; ending its connection")
        no_command_ran(rig, log, mark, "other-cert")

        # Control: A with its own certificate (the one B presented) works.
        a.ch.start(pub.ca_der)
        run_to_marker(rig, ctx, a, "other-cert-control-a")
    finally:
        a.close()
        b.close()
        pipes.close()
    # Control: a B with its own certificate works.
    b2 = raw_conn(rig, ctx, "B with its own certificate")
    try:
        b2.ch.enroll()
        b2.ch.start(pub.ca_der)
        run_to_marker(rig, ctx, b2, "other-cert-control-b")
    finally:
        b2.close()


# ---- 3. descriptors outside a message ------------------------------------------------

def test_descriptors_on_a_handshake_datagram_are_not_kept(domain):
    rig, ctx, log = domain
    pid = ctx["pid"]
    pub = read_publication(ctx["dir"])
    base = fd_count(pid)
    mark = log.stat().st_size
    conn = raw_conn(rig, ctx, "descriptor on the ClientHello")
    rfd, wfd = pipe_for_coordinator()
    try:
        conn.ch.enroll()
        conn.ch.start_tls(tls_context(False, pub.ca_der, conn.ch.cert_der, conn.ch.key),
                          server=False)
        try:
            conn.ch.tls.do_handshake()
        except ssl.SSLWantReadError:  # the ClientHello is written
            pass
        client_hello = conn.ch.outgoing.read()
        conn.send_raw(client_hello, [wfd])
        os.close(wfd)
        wfd = -1
        got = read_to_end(conn)
        assert got == [], f"the coordinator answered: {got}"
        wait_log(log, mark, r"session #\d+: descriptors during the TLS handshake; ending its "
                            r"connection")
        assert wait_pipe_eof(rfd), "the coordinator kept the descriptor"
    finally:
        conn.close()
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)
    n = wait_fd_count(pid, base)
    assert n == base, f"the coordinator holds {n} descriptors, {base} before"

    # Control: the same ClientHello without the descriptor completes the
    # handshake, and the session runs.
    conn = raw_conn(rig, ctx, "control: the ClientHello alone")
    try:
        conn.ch.enroll()
        conn.ch.start_tls(tls_context(False, pub.ca_der, conn.ch.cert_der, conn.ch.key),
                          server=False)
        conn.ch.handshake()
        run_to_marker(rig, ctx, conn, "hs-fd-control")
    finally:
        conn.close()
    assert wait_fd_count(pid, base) == base


def _forging_conn(rig, ctx, what, pub):
    conn = raw_conn(rig, ctx, what)
    conn.ch.enroll()
    tmp = tempfile.mkdtemp(prefix="lz-keylog-")
    keylog = os.path.join(tmp, "keylog")
    conn.ch.start(pub.ca_der, keylog=keylog)
    forger = RecordForger(conn.ch, keylog)
    os.unlink(keylog)
    os.rmdir(tmp)
    return conn, forger


def test_descriptors_on_a_datagram_without_a_message_are_not_kept(domain):
    """After the handshake: a datagram of one application-data record with
    no data (no message, as a KeyUpdate) carrying a descriptor is a
    violation; an empty datagram with a descriptor ends the connection.
    Neither descriptor is kept. Control: the same empty record without a
    descriptor is passed over, and the session goes on to run."""
    rig, ctx, log = domain
    pid = ctx["pid"]
    pub = read_publication(ctx["dir"])
    base = fd_count(pid)

    mark = log.stat().st_size
    conn, forger = _forging_conn(rig, ctx, "descriptor on an empty record", pub)
    rfd, wfd = pipe_for_coordinator()
    try:
        conn.send_raw(forger.record(b""), [wfd])
        os.close(wfd)
        wfd = -1
        code, msg = refused_then_eof(conn)  # sealed: the coordinator's stream is sound
        assert code == REFUSE_PROTOCOL and "descriptors on a datagram without a message" in msg, \
            msg
        wait_log(log, mark, r"session #\d+: protocol violation: descriptors on a datagram "
                            r"without a message")
        assert wait_pipe_eof(rfd), "the coordinator kept the descriptor"
    finally:
        conn.close()
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)
    n = wait_fd_count(pid, base)
    assert n == base, f"the coordinator holds {n} descriptors, {base} before"

    mark = log.stat().st_size
    conn = connect_as_user(rig.lz, ctx["dir"], "descriptor on an empty datagram")
    rfd, wfd = pipe_for_coordinator()
    try:
        conn.send_raw(b"", [wfd])
        os.close(wfd)
        wfd = -1
        got = read_to_end(conn)
        assert not [g for g in got if g[0] == "msg" and g[1] == STARTED], got
        wait_log(log, mark, r"session #\d+: client disconnected")
        assert wait_pipe_eof(rfd), "the coordinator kept the descriptor"
    finally:
        conn.close()
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)
    n = wait_fd_count(pid, base)
    assert n == base, f"the coordinator holds {n} descriptors, {base} before"

    # Control: the empty record alone, then HELLO and RUN (forged too: the
    # sequence numbers are the forger's now).
    conn, forger = _forging_conn(rig, ctx, "control: an empty record alone", pub)
    try:
        conn.send_raw(forger.record(b""))
        run_to_marker(rig, ctx, conn, "empty-record-control",
                      send=lambda m, fds: conn.send_raw(forger.seal(m), fds))
    finally:
        conn.close()
    assert wait_fd_count(pid, base) == base


# ---- 4. datagrams that are not one sealed message ------------------------------------

def test_a_sealed_datagram_cut_in_two_is_a_violation(domain):
    """The sealed HELLO's datagram sent as two datagrams: the first ends
    inside its record, a violation, and the connection ends with a sealed
    REFUSED (the coordinator's own stream is sound). The RUN sent after the
    second half would run had the two halves been joined into HELLO."""
    rig, ctx, log = domain
    mark = log.stat().st_size
    conn = connect_as_user(rig.lz, ctx["dir"], "HELLO cut in two")
    pipes = Pipes()
    try:
        d = conn.ch.seal(hello(ctx))
        conn.send_raw(d[:len(d) // 2])
        try_send(conn.send_raw, d[len(d) // 2:])
        try_send(conn.send, run_msg(marker_cmd("cut")), pipes.theirs())
        pipes.sent()
        got = read_to_end(conn)
        no_command_ran(rig, log, mark, "cut")
        text = log_since(log, mark)
        assert len(got) == 1 and got[0][:2] == ("msg", REFUSED), \
            f"expected REFUSED then EOF, got {got}; log:\n{text}"
        r = got[0][2]
        code, msg = r.u32(), r.bytes().decode()
        assert code == REFUSE_PROTOCOL and "a TLS datagram ends inside a record" in msg, msg
    finally:
        conn.close()
        pipes.close()
    wait_log(log, mark, r"session #\d+: protocol violation: a TLS datagram ends inside a record")

    # Control: the same sealed HELLO, whole.
    conn = connect_as_user(rig.lz, ctx["dir"], "control: HELLO whole")
    try:
        conn.send_raw(conn.ch.seal(hello(ctx)))
        run_to_marker(rig, ctx, conn, "cut-control", send_hello=False)
    finally:
        conn.close()


def test_a_replayed_datagram_is_a_violation(domain):
    rig, ctx, log = domain
    mark = log.stat().st_size
    conn = connect_as_user(rig.lz, ctx["dir"], "HELLO replayed")
    pipes = Pipes()
    try:
        d = conn.ch.seal(hello(ctx))
        conn.send_raw(d)
        conn.send_raw(d)
        # Had the replay been taken, this RUN would be the next message.
        try_send(conn.send, run_msg(marker_cmd("replay")), pipes.theirs())
        pipes.sent()
        # A record that fails authentication is fatal to the coordinator's
        # SSL object (OpenSSL), which then seals nothing: the connection
        # just ends, without a REFUSED.
        got = read_to_end(conn)
        assert got == [], f"expected EOF alone, got {got}"
    finally:
        conn.close()
        pipes.close()
    wait_log(log, mark, r"session #\d+: protocol violation: a session message failed TLS")
    no_command_ran(rig, log, mark, "replay")

    # The same datagram on another connection: its keys are not that one's.
    mark = log.stat().st_size
    other = connect_as_user(rig.lz, ctx["dir"], "HELLO of another connection")
    pipes = Pipes()
    try:
        other.send_raw(d)
        try_send(other.send, run_msg(marker_cmd("replay-other")), pipes.theirs())
        pipes.sent()
        got = read_to_end(other)
        assert got == [], f"expected EOF alone, got {got}"
    finally:
        other.close()
        pipes.close()
    wait_log(log, mark, r"session #\d+: protocol violation: a session message failed TLS")
    no_command_ran(rig, log, mark, "replay-other")

    # Control: the sealed HELLO once, then RUN.
    conn = connect_as_user(rig.lz, ctx["dir"], "control: HELLO once")
    try:
        conn.send_raw(conn.ch.seal(hello(ctx)))
        run_to_marker(rig, ctx, conn, "replay-control", send_hello=False)
    finally:
        conn.close()


# ---- 5. the CLI against a coordinator it must not trust ------------------------------

# Runs as the Domain's user: bind and listen at coordinator.sock (relative:
# the absolute path exceeds sun_path) and hand the listening socket to the
# test. The CLI checks the peer uid its connect() sees: the listener's.
_LISTEN = r"""
import os, socket, sys
os.chdir(sys.argv[1])
back = socket.socket(fileno=int(sys.argv[2]))
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind("coordinator.sock")
s.listen(8)
socket.send_fds(back, [b"s"], [s.fileno()])
"""


def listen_as_user(lz, domain_dir: Path) -> socket.socket:
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        p = subprocess.run([sys.executable, "-I", "-c", _LISTEN, str(domain_dir),
                            str(there.fileno())], pass_fds=(there.fileno(),),
                           user=lz.user.uid, group=lz.user.gid, extra_groups=[],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"listening as {lz.user.name} failed: {p.stderr}"
        _, fds, _, _ = socket.recv_fds(here, 16, 1)
    finally:
        here.close()
        there.close()
    assert len(fds) == 1
    return socket.socket(fileno=fds[0])


class FakeCoordinator:
    """Serves every connection on `listener` in a thread: ENROLLED with a
    client certificate of enrol_ca, then a TLS server with a certificate of
    server_ca; what each connection showed is in `seen`."""

    def __init__(self, listener, enrol_ca: FakeCA, server_ca: FakeCA):
        self.listener = listener
        self.enrol_ca, self.server_ca = enrol_ca, server_ca
        self.skey = Ed25519PrivateKey.generate()
        self.sder = server_ca.issue("SessionCoordinator", "SessionCoordinator",
                                    self.skey.public_key())
        self.seen = []
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.listener.settimeout(0.2)
        deadline = time.monotonic() + 120  # bounded whatever the CLI does
        while not self.stop and time.monotonic() < deadline:
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            try:
                self.seen.append(self._one(Channel(sock, "fake coordinator")))
            except Exception as e:  # recorded, the test asserts on it
                self.seen.append({"error": repr(e)})
            finally:
                sock.close()

    def _one(self, ch: Channel) -> dict:
        got = {}
        r = Reader(ch.recv())
        got["first"] = r.type
        if r.type != ENROLL:
            return got
        r.u32()
        key = Ed25519PublicKey.from_public_bytes(r.bytes())
        sid = os.urandom(16).hex()
        ch.raw_send(enrolled_msg(sid, self.enrol_ca.issue("ClientCLI", sid, key)))
        first = ch.raw_recv()
        if not first:
            got["after_enrolled"] = "eof"
            return got
        got["after_enrolled"] = "tls"
        ch.start_tls(tls_context(True, self.enrol_ca.der, self.sder, self.skey), server=True)
        try:
            ch.handshake(first=first)
        except ChannelError as e:
            got["handshake"] = str(e)
            return got
        got["handshake"] = "ok"
        try:
            msg = ch.recv()
        except ChannelError as e:
            got["message"] = str(e)
            return got
        m = Reader(msg)
        got["message"] = m.type
        if m.type == HELLO:
            got["hello"] = (m.u32(), m.bytes().decode(), m.bytes().decode())
        ch.send(refused_msg(REFUSE_PROTOCOL, "the fake coordinator ends here", ""))
        return got

    def close(self):
        self.stop = True
        self.thread.join(timeout=10)
        self.listener.close()


def _publish(domain_dir: Path, pub: Publication, uid: int, gid: int):
    """A publication as the coordinator writes it: 0600, the user's own,
    renamed in."""
    tmp = domain_dir / (PUBLICATION_FILE + ".test-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(encode_publication(pub))
    os.chown(tmp, uid, gid)
    os.rename(tmp, domain_dir / PUBLICATION_FILE)


def test_cli_refuses_a_coordinator_of_another_ca(rig):
    """The real `lazaret run` against a fake coordinator. (a) The Domain's
    publication is the one a previous generation left (kept from its run,
    real format and CA), the enrolment comes from another CA: the CLI
    refuses the client certificate and sends nothing more, no TLS at all.
    (b) Publication and enrolment agree, the TLS server certificate is of
    another CA: the handshake fails and no HELLO comes. Control: all three
    name one CA and the fake coordinator gets the CLI's HELLO (for this
    Domain), which proves it could see one."""
    lz = rig.lz
    rig.config({"bb": {}})
    holder = rig.hold("bb")
    ctx = _context(lz)
    ddir = ctx["dir"]
    old = read_publication(ddir)
    rig.release(holder)
    left, _ = wait_torn_down(lz, 60)
    assert not left, left
    assert domain_dirs(lz) == [ddir] and not (ddir / PUBLICATION_FILE).exists()
    uid, gid = lz.user.uid, lz.user.gid
    marker = rig.ws / "fake-marker"

    def attempt(publication: Publication, enrol_ca, server_ca):
        listener = listen_as_user(lz, ddir)
        fake = FakeCoordinator(listener, enrol_ca, server_ca)
        try:
            _publish(ddir, publication, uid, gid)
            p = rig.run("bb", ["sh", "-c", "echo ran > /workspace/fake-marker"], timeout=90)
        finally:
            fake.close()
            for name in ("coordinator.sock", PUBLICATION_FILE):
                try:
                    os.unlink(ddir / name)
                except FileNotFoundError:
                    pass
        assert fake.seen, f"the CLI never connected to the fake coordinator: {p.stderr}"
        return p, fake.seen

    # (a) the previous generation's publication, another CA's enrolment.
    ca1 = FakeCA(old.generation_id)
    p, seen = attempt(old, ca1, ca1)
    assert p.returncode != 0, p
    assert "client certificate is refused: it is not signed by the generation's CA" in \
        p.stderr, p.stderr
    assert all(s.get("first") == ENROLL and s.get("after_enrolled") == "eof" for s in seen), seen

    # (b) publication and enrolment of ca1, the server's certificate of ca2.
    ca2 = FakeCA(old.generation_id)
    forged = Publication(old.protocol_version, old.agent_profile, old.domain_id,
                         str(int(old.generation_id) + 1), ca1.der)
    p, seen = attempt(forged, ca1, ca2)
    assert p.returncode != 0, p
    assert "TLS handshake of the session channel failed" in p.stderr, p.stderr
    assert "certificate" in p.stderr, p.stderr
    assert seen and all("message" not in s for s in seen), seen
    assert all(s.get("after_enrolled") == "tls" and s.get("handshake") != "ok" for s in seen), \
        seen

    # Control: one CA everywhere: the CLI says HELLO for this Domain.
    p, seen = attempt(forged, ca1, ca1)
    assert p.returncode != 0 and "the fake coordinator ends here" in p.stderr, p.stderr
    hellos = [s["hello"] for s in seen if s.get("message") == HELLO]
    assert hellos and hellos[0][1] == ctx["domain_id"], seen
    assert not marker.exists()  # nothing runs: there is no sandbox behind the fake
