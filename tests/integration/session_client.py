# SPDX-License-Identifier: Apache-2.0
"""A test client of the session channel (docs/session-channel.md), and the
pieces of a fake coordinator, on Python's own ssl module.

The channel, as src/trust/channel.c and src/client/enrol.c lz_client_secure()
run it:
  1. in the clear: ENROLL (version, the client's raw Ed25519 public key),
     answered with ENROLLED (session id, client certificate DER) or REFUSED;
  2. a TLS 1.3 handshake inside the SOCK_SEQPACKET datagrams, one flight per
     datagram, the client trusting only the CA of the Domain's publication
     `coordinator.trust` and presenting the certificate of step 1;
  3. every protocol message sealed on its own: one message = one SSL write =
     one datagram, its descriptors (SCM_RIGHTS) on that datagram.

TLS runs through ssl.MemoryBIO + SSLContext.wrap_bio, so the socket stays
the test's: `raw_send`/`raw_recv` let a test put any datagram on it (a
message in the clear, a sealed one cut in two, a replay).

The key is made with the `cryptography` package (Debian python3-cryptography,
installed by scripts/install-deps.sh). Its PEM goes to a 0700 temporary
directory only for as long as SSLContext.load_cert_chain reads it (the ssl
module takes a key from a file only); it is a test key of one connection.
"""

import datetime
import os
import shutil
import socket
import ssl
import struct
import tempfile
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# protocol/messages.h
HELLO, RUN, ENROLL, ENROLLED = 1, 2, 3, 14
PROGRESS, REFUSED, STARTED, EXIT = 10, 11, 12, 13
INPUT, RESIZE, CLOSE, OUTPUT = 20, 21, 22, 23
PROTOCOL_VERSION = 3  # src/protocol/messages.h LZ_SESSION_PROTOCOL_VERSION
ENROLL_KEY_LEN = 32
# protocol/wire.h, trust/channel.h
WIRE_MAX = 65536
TLS_DATAGRAM_MAX = WIRE_MAX + 1024
# trust/publication.h
PUBLICATION_FILE = "coordinator.trust"
PUBLICATION_TYPE = 0x5450

STEP = 20  # seconds for one reply of the coordinator


class ChannelError(Exception):
    """The channel failed: the peer's TLS alert, a datagram that is not
    whole records, EOF in the handshake, an answer of the wrong kind."""


class Refused(ChannelError):
    def __init__(self, code: int, message: str, hint: str):
        super().__init__(f"REFUSED {code}: {message} ({hint})")
        self.code, self.message, self.hint = code, message, hint


# ---- wire encoding (protocol/wire.h): u16 type, u32 numbers, u32-length strings

def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def sbytes(b) -> bytes:
    if isinstance(b, str):
        b = b.encode()
    return u32(len(b)) + b


def message(mtype: int, *fields) -> bytes:
    out = struct.pack(">H", mtype)
    for f in fields:
        out += u32(f) if isinstance(f, int) else sbytes(f)
    return out


class Reader:
    """A bounded reader of one message."""

    def __init__(self, data: bytes, pos: int = 2):
        if len(data) < 2:
            raise ChannelError(f"a message of {len(data)} bytes has no type")
        self.d, self.p = data, pos
        self.type = struct.unpack(">H", data[:2])[0]

    def u32(self) -> int:
        if self.p + 4 > len(self.d):
            raise ChannelError("a message ends inside a number")
        v = struct.unpack(">I", self.d[self.p:self.p + 4])[0]
        self.p += 4
        return v

    def bytes(self) -> bytes:
        n = self.u32()
        if self.p + n > len(self.d):
            raise ChannelError(f"a field of {n} bytes runs past the message")
        v = self.d[self.p:self.p + n]
        self.p += n
        return v

    def done(self) -> bool:
        return self.p == len(self.d)


def enroll_msg(public_key: bytes, version: int = PROTOCOL_VERSION) -> bytes:
    assert len(public_key) == ENROLL_KEY_LEN
    return message(ENROLL, version, public_key)


def enrolled_msg(session_id: str, cert_der: bytes) -> bytes:
    return message(ENROLLED, session_id, cert_der)


def refused_msg(code: int, msg: str, hint: str = "") -> bytes:
    return message(REFUSED, code, msg, hint)


def refused_of(r: Reader) -> Refused:
    return Refused(r.u32(), r.bytes().decode("utf-8", "replace"),
                   r.bytes().decode("utf-8", "replace"))


# ---- the publication (trust/publication.h) --------------------------------------

@dataclass
class Publication:
    protocol_version: int
    agent_profile: str
    domain_id: str
    generation_id: str
    ca_der: bytes


def parse_publication(data: bytes) -> Publication:
    """Strict, as lz_trust_publication_decode: the encoder's output only."""
    r = Reader(data)
    if r.type != PUBLICATION_TYPE:
        raise ChannelError(f"not a publication: type 0x{r.type:04x}")
    p = Publication(r.u32(), r.bytes().decode(), r.bytes().decode(), r.bytes().decode(),
                    r.bytes())
    if not r.done():
        raise ChannelError("bytes left over after the publication")
    return p


def encode_publication(p: Publication) -> bytes:
    return (struct.pack(">H", PUBLICATION_TYPE) + u32(p.protocol_version)
            + sbytes(p.agent_profile) + sbytes(p.domain_id) + sbytes(p.generation_id)
            + sbytes(p.ca_der))


def read_publication(domain_dir) -> Publication:
    with open(os.path.join(domain_dir, PUBLICATION_FILE), "rb") as f:
        return parse_publication(f.read())


# ---- Ed25519 keys and certificates -------------------------------------------------

def raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw)


def cert_subject_cn(der: bytes) -> str:
    c = x509.load_der_x509_certificate(der)
    return c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


def _name(ou: str, cn: str, nonce: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Lazaret"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.DN_QUALIFIER, nonce)])


class FakeCA:
    """A CA shaped like the Trust Anchor's (src/trust/anchor.c): the same
    subjects, extensions and Ed25519 signatures, but a key of the test's
    making. What a coordinator of another generation, or a forger, has."""

    def __init__(self, generation: str = "1"):
        self.key = Ed25519PrivateKey.generate()
        self.nonce = os.urandom(16).hex()
        now = datetime.datetime.now(datetime.timezone.utc)
        self.name = _name("TrustAnchor", f"Lazaret generation {generation}", self.nonce)
        pub = self.key.public_key()
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(pub).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(seconds=60))
                     .not_valid_after(now + datetime.timedelta(days=7))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True,
                                                  False, False, False), True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(pub), False)
                     .sign(self.key, None))
        self.der = self.cert.public_bytes(serialization.Encoding.DER)

    def issue(self, role: str, subject_id: str, public_key) -> bytes:
        """The DER of a certificate of role "SessionCoordinator" (serverAuth)
        or "ClientCLI" (clientAuth) for public_key."""
        now = datetime.datetime.now(datetime.timezone.utc)
        eku = (ExtendedKeyUsageOID.SERVER_AUTH if role == "SessionCoordinator"
               else ExtendedKeyUsageOID.CLIENT_AUTH)
        c = (x509.CertificateBuilder().subject_name(_name(role, subject_id, self.nonce))
             .issuer_name(self.name).public_key(public_key)
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(seconds=60))
             .not_valid_after(now + datetime.timedelta(days=7))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
             .add_extension(x509.KeyUsage(True, False, False, False, False, False, False,
                                          False, False), True)
             .add_extension(x509.ExtendedKeyUsage([eku]), False)
             .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                 self.key.public_key()), False)
             .sign(self.key, None))
        return c.public_bytes(serialization.Encoding.DER)


def tls_context(server: bool, ca_der: bytes, cert_der: bytes = None,
                key: Ed25519PrivateKey = None, keylog: str = None) -> ssl.SSLContext:
    """TLS 1.3 only, the peer verified against ca_der alone (no system
    store), no hostname (the coordinator's certificate names a role, not a
    host), and our certificate when one is given. keylog: a file for the
    traffic secrets (RecordForger)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    if server:
        ctx.num_tickets = 0  # as the coordinator: no resumption
    else:
        ctx.check_hostname = False
    if keylog:
        ctx.keylog_filename = keylog
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=ca_der)
    if cert_der is not None:
        tmp = tempfile.mkdtemp(prefix="lz-tls-")  # 0700
        try:
            certfile, keyfile = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            with open(certfile, "w") as f:
                f.write(ssl.DER_cert_to_PEM_cert(cert_der))
            fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
            ctx.load_cert_chain(certfile, keyfile)
        finally:
            shutil.rmtree(tmp)
    return ctx


# ---- the datagram channel ----------------------------------------------------------

class Channel:
    """One SOCK_SEQPACKET socket, TLS inside its datagrams once started.
    Used by the client (SessionClient) and by a fake coordinator."""

    def __init__(self, sock: socket.socket, what: str = "session"):
        self.sock = sock
        self.what = what
        self.tls = None
        self.incoming = self.outgoing = None
        self.sent = []  # every datagram this end sent, for replays

    # raw access: what a test that breaks the channel on purpose sends
    def raw_send(self, data: bytes, fds=()):
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.send(data)
        self.sent.append(data)

    def raw_recv(self, timeout=STEP) -> bytes:
        """One datagram, b"" at EOF; ChannelError after timeout or when it
        was cut (bigger than the largest datagram)."""
        self.sock.settimeout(timeout)
        for reset in (False, True):
            try:
                data, _, flags, _ = self.sock.recvmsg(TLS_DATAGRAM_MAX + 1)
                break
            except socket.timeout:
                raise ChannelError(f"{self.what}: no datagram within {timeout} s") from None
            except ConnectionResetError:
                # The peer closed with datagrams of ours unread: Linux
                # reports that once, before the datagrams it had sent us
                # (its REFUSED), which the next read returns, then EOF.
                if reset:
                    return b""
        if flags & socket.MSG_TRUNC or len(data) > TLS_DATAGRAM_MAX:
            raise ChannelError(f"{self.what}: a datagram of more than {TLS_DATAGRAM_MAX} bytes")
        return data

    # TLS
    def start_tls(self, ctx: ssl.SSLContext, server: bool):
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=server)

    def _flush(self, fds=()):
        out = self.outgoing.read()
        if out:
            self.raw_send(out, fds)
        return out

    def handshake(self, timeout=STEP, first: bytes = None):
        """Drive the handshake to its end on our side, one flight per
        datagram; `first` is a datagram already received (a server's
        ClientHello). ChannelError on the peer's alert, our verification
        failure or EOF (the alert we owe is sent first)."""
        data = first
        while True:
            if data:
                self.incoming.write(data)
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as e:
                self._flush()  # the alert that tells the peer why
                raise ChannelError(f"{self.what}: TLS handshake failed: {e}") from e
            else:
                self._flush()
                return
            self._flush()
            data = self.raw_recv(timeout)
            if not data:
                raise ChannelError(f"{self.what}: EOF during the TLS handshake")

    def seal(self, msg: bytes) -> bytes:
        """One message, one SSL write: the datagram of its records."""
        assert self.tls is not None and not self.outgoing.pending
        self.tls.write(msg)
        return self.outgoing.read()

    def send(self, msg: bytes, fds=()):
        """Seal msg and send it, with its descriptors, as one datagram."""
        self.raw_send(self.seal(msg), fds)

    def open(self, datagram: bytes) -> bytes:
        """Decrypt one datagram (whole records) into its plaintext."""
        self.incoming.write(datagram)
        out = bytearray()
        while True:
            try:
                chunk = self.tls.read(TLS_DATAGRAM_MAX)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLError as e:
                raise ChannelError(f"{self.what}: a datagram failed TLS: {e}") from e
            if not chunk:
                raise ChannelError(f"{self.what}: the peer closed TLS (close_notify)")
            out += chunk
        if self.incoming.pending:
            raise ChannelError(f"{self.what}: a datagram ends inside a TLS record")
        return bytes(out)

    def recv(self, timeout=STEP) -> bytes:
        """One message: in the clear before TLS, decrypted after; b"" at
        EOF. A datagram without application data (KeyUpdate) is skipped."""
        while True:
            data = self.raw_recv(timeout)
            if not data or self.tls is None:
                return data
            msg = self.open(data)
            if msg:
                return msg

    def close(self):
        self.sock.close()


class SessionClient(Channel):
    """The CLI's side: enrol, handshake, then sealed messages."""

    def __init__(self, sock: socket.socket, what: str = "session",
                 key: Ed25519PrivateKey = None):
        super().__init__(sock, what)
        self.key = key or Ed25519PrivateKey.generate()
        self.session_id = None
        self.cert_der = None

    def enroll(self, timeout=STEP) -> tuple:
        """ENROLL in the clear: (session id, client certificate DER);
        Refused when the coordinator refused in the clear."""
        self.raw_send(enroll_msg(raw_public(self.key)))
        data = self.raw_recv(timeout)
        if not data:
            raise ChannelError(f"{self.what}: EOF instead of ENROLLED")
        r = Reader(data)
        if r.type == REFUSED:
            raise refused_of(r)
        if r.type != ENROLLED:
            raise ChannelError(f"{self.what}: type {r.type} instead of ENROLLED")
        sid, der = r.bytes().decode(), r.bytes()
        if not r.done() or len(sid) != 32:
            raise ChannelError(f"{self.what}: a malformed ENROLLED")
        self.session_id, self.cert_der = sid, der
        return sid, der

    def start(self, ca_der: bytes, cert_der=..., key=..., timeout=STEP, keylog=None):
        """The TLS handshake as the CLI: trusting ca_der only, presenting
        cert_der with key (by default this connection's enrolment; None:
        no client certificate at all)."""
        if cert_der is ...:
            cert_der = self.cert_der
        if key is ...:
            key = self.key
        self.start_tls(tls_context(False, ca_der, cert_der, key, keylog), server=False)
        self.handshake(timeout)

    def secure(self, domain_dir, timeout=STEP) -> str:
        """ENROLL and TLS with the Domain's own publication: the session
        id. After it, send()/recv() carry protocol messages."""
        pub = read_publication(domain_dir)
        sid, _ = self.enroll(timeout)
        self.start(pub.ca_der, timeout=timeout)
        return sid


# ---- records of our own making -----------------------------------------------------

def _expand_label(hash_alg, secret: bytes, label: str, length: int) -> bytes:
    """HKDF-Expand-Label of RFC 8446 section 7.1 (empty context)."""
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
    full = b"tls13 " + label.encode()
    info = struct.pack(">HB", length, len(full)) + full + b"\0"
    return HKDFExpand(hash_alg, length, info).derive(secret)


class RecordForger:
    """TLS 1.3 records of the client's application traffic key, sealed by the
    test itself (RFC 8446 section 5.2), for what the ssl module cannot write:
    an application-data record with no data (a datagram that holds no
    message, like a KeyUpdate). The secret comes from the client's keylog
    file. Python's own SSLObject does not know of these records, so once one
    is sent every later client record must be forged too (seal())."""

    def __init__(self, client: Channel, keylog: str):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        suite = client.tls.cipher()[0]
        secret = None
        with open(keylog) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "CLIENT_TRAFFIC_SECRET_0":
                    secret = bytes.fromhex(parts[2])  # the last connection's
        if secret is None:
            raise ChannelError("no CLIENT_TRAFFIC_SECRET_0 in the keylog")
        if suite == "TLS_AES_256_GCM_SHA384":
            h, klen, aead = hashes.SHA384(), 32, AESGCM
        elif suite == "TLS_AES_128_GCM_SHA256":
            h, klen, aead = hashes.SHA256(), 16, AESGCM
        elif suite == "TLS_CHACHA20_POLY1305_SHA256":
            h, klen, aead = hashes.SHA256(), 32, ChaCha20Poly1305
        else:
            raise ChannelError(f"no forger for {suite}")
        self.aead = aead(_expand_label(h, secret, "key", klen))
        self.iv = _expand_label(h, secret, "iv", 12)
        self.seq = 0  # records sent under this key (Python sent none yet)

    def record(self, content: bytes, content_type: int = 23) -> bytes:
        """One record: content || content type, encrypted, under the next
        sequence number."""
        inner = content + bytes([content_type])
        header = struct.pack(">BHH", 23, 0x0303, len(inner) + 16)
        nonce = bytes(a ^ b for a, b in zip(self.iv, self.seq.to_bytes(12, "big")))
        self.seq += 1
        return header + self.aead.encrypt(nonce, inner, header)

    def seal(self, msg: bytes) -> bytes:
        """A message's datagram, as SSLObject.write would make it."""
        return b"".join(self.record(msg[i:i + 16384]) for i in range(0, len(msg), 16384))
