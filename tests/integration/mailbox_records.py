# SPDX-License-Identifier: Apache-2.0
"""The Escalation Mailbox's records and signatures, written independently of
src/protocol/mailbox.c and src/trust/signature.c (so a test that uses them
checks the C codecs against a second reading of docs/escalation.md, not
against themselves).

    record    := u16 type || u32 "LZMB" || u32 version 1 || fields
    fields    := big-endian u32, and u32 length || bytes
    signed    := payload || Ed25519(CONTEXT || generation nonce || payload)

Used by test_escalate_client.py (a fake coordinator around the real
client) and test_escalation_mailbox.py (records written straight into a
real coordinator's inbox).
"""

import struct

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

MAGIC = 0x4C5A4D42
REQUEST, CANCEL, ACK, CHUNK, RESULT = 200, 201, 202, 210, 211
COMPLETED, DENIED, TIMED_OUT, CANCELLED, FAILED = 1, 2, 3, 4, 5
OUTCOMES = {COMPLETED: "Completed", DENIED: "Denied", TIMED_OUT: "TimedOut",
            CANCELLED: "Cancelled", FAILED: "Failed"}
CONTEXT = b"lazaret-mailbox-record-v1\0"  # sizeof(LZ_SIG_CONTEXT): the NUL included
SIG_LEN = 64
MAX_RECORD = 65536  # LZ_MBX_MAX_RECORD: payload bytes; a file may add SIG_LEN


def _hdr(t):
    return struct.pack(">HII", t, MAGIC, 1)


def _s(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">I", len(b)) + b


def _u32(v):
    return struct.pack(">I", v)


def request(capability, rid, argv, cwd="/workspace", why=""):
    """A REQUEST payload (sandbox -> host)."""
    return (_hdr(REQUEST) + _s(capability) + _s(rid) + _s(cwd) + _u32(len(argv))
            + b"".join(_s(a) for a in argv) + _s(why))


def control(kind, capability, rid, acked=0):
    """A CANCEL (acked 0) or ACK payload (sandbox -> host)."""
    return _hdr(kind) + _s(capability) + _s(rid) + _u32(0 if kind == CANCEL else acked)


def chunk(rid, seq, stream, data):
    return _hdr(CHUNK) + _s(rid) + _u32(seq) + _u32(stream) + _s(data)


def result(rid, outcome, status=0, n_chunks=0, message=b""):
    return _hdr(RESULT) + _s(rid) + _u32(outcome) + _u32(status) + _u32(n_chunks) + _s(message)


class _Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def u16(self):
        v, = struct.unpack_from(">H", self.d, self.p)
        self.p += 2
        return v

    def u32(self):
        v, = struct.unpack_from(">I", self.d, self.p)
        self.p += 4
        return v

    def s(self):
        n = self.u32()
        b = self.d[self.p:self.p + n]
        assert len(b) == n
        self.p += n
        return b


def decode(payload):
    """Any record payload -> dict (asserts it is well formed, nothing left)."""
    r = _Reader(payload)
    t = r.u16()
    assert (r.u32(), r.u32()) == (MAGIC, 1)
    if t == REQUEST:
        out = dict(type=t, capability=r.s().decode(), id=r.s().decode(), cwd=r.s())
        out["argv"] = [r.s() for _ in range(r.u32())]
        out["why"] = r.s()
    elif t in (CANCEL, ACK):
        out = dict(type=t, capability=r.s().decode(), id=r.s().decode(), acked=r.u32())
    elif t == CHUNK:
        out = dict(type=t, id=r.s().decode(), seq=r.u32(), stream=r.u32(), data=r.s())
    else:
        assert t == RESULT, t
        out = dict(type=t, id=r.s().decode(), outcome=r.u32(), status=r.u32(),
                   n_chunks=r.u32(), message=r.s())
    assert r.p == len(payload), "bytes left over"
    return out


def _raw(key):
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                          serialization.PublicFormat.Raw)


def seed_of(key) -> bytes:
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                             serialization.NoEncryption())


def sign(seed: bytes, nonce: bytes, payload: bytes) -> bytes:
    """payload || signature, as lz_sig_sign() writes a record file."""
    key = Ed25519PrivateKey.from_private_bytes(seed)
    return payload + key.sign(CONTEXT + nonce + payload)


def verify(pub: bytes, nonce: bytes, data: bytes) -> bytes:
    """The payload of a signed record file; raises InvalidSignature."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    payload, sig = data[:-SIG_LEN], data[-SIG_LEN:]
    Ed25519PublicKey.from_public_bytes(pub).verify(sig, CONTEXT + nonce + payload)
    return payload
