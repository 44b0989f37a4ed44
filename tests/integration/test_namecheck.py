# SPDX-License-Identifier: Apache-2.0
"""The name on the connection (issue 25, item 3; docs/network.md "The name
on the connection"; src/supervisor/namecheck.c): a connection to port 443 or
80 of an address learned for an allowed name reaches it only when its TLS
server_name or HTTP Host is allowed.

Every destination is on this machine (tests/integration/netlab.py): one test
address, netlab.HOST_A, carries a TLS server that presents a certificate for
two names (an SNI callback picks it) and a plain HTTP server; the Domain's
upstream resolver is the test nameserver (`[network] resolvers`), which
answers both names with HOST_A. allow_hosts lists one of them. One sandbox
session (the Debian image: python3) runs every probe and prints one JSON
line per probe; the servers log every connection they accept, so a refusal
is checked from both sides: the client was reset, and the server never saw
the connection. Every refusal has its control: the same client code, the
same address, with the allowed name.
"""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

import netlab as N
from conftest import profiles_toml, sh

ALLOWED = "allowed.test"
OTHER = "other.test"          # same address, not allowed
HELLO_BOUND_S = 10            # LZ_NAMECHECK_HELLO_MS

# In the test host's namespace: TLS on HOST_A:443 (certificate chosen by
# SNI among certs{name: (cert, key)}; no SNI gets the first), HTTP on
# HOST_A:80. Logs "accept PORT PEER", "sni NAME", "line NAME TEXT", "http
# HOST"; a TLS client's line is answered "lztls NAME TEXT".
SERVERS_PY = r'''
import hashlib, json, socket, ssl, sys, threading
cfg = json.loads(sys.argv[1])
logf = open(cfg["log"], "a", buffering=1)
lock = threading.Lock()
def log(*parts):
    with lock:
        logf.write(" ".join(str(p) for p in parts) + "\n")
ctxs = {}
for name, (cert, key) in cfg["certs"].items():
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(cert, key)
    # P-256 only (as FIPS-style servers are): a client whose first key
    # share is X25519 (Python's default) gets a HelloRetryRequest.
    c.set_ecdh_curve("prime256v1")
    ctxs[name] = c
first = ctxs[next(iter(cfg["certs"]))]
def on_sni(sock, name, ctx):
    log("sni", name)
    sock.lz_sni = name
    if name in ctxs:
        sock.context = ctxs[name]
first.sni_callback = on_sni
def tls_conn(c):
    try:
        c.settimeout(20)
        s = first.wrap_socket(c, server_side=True)
        name = getattr(s, "lz_sni", None) or "-"
        line = s.makefile("rb").readline().decode().strip()
        log("line", name, line)
        s.sendall(f"lztls {name} {line}\n".encode())
        s.close()
    except Exception as e:
        log("tlserror", type(e).__name__)
        c.close()
def http_conn(c):
    # Keep-alive and pipelining, as a real server: requests are read one
    # after the other on one connection (Content-Length bodies), each is
    # logged and answered, until the client ends.
    try:
        c.settimeout(20)
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = c.recv(65536)
                if not chunk:
                    c.close()
                    return
                data += chunk
            head, data = data.split(b"\r\n\r\n", 1)
            host, length = "-", 0
            for l in head.split(b"\r\n")[1:]:
                k, _, v = l.partition(b":")
                if k.strip().lower() == b"host":
                    host = v.strip().decode()
                elif k.strip().lower() == b"content-length":
                    length = int(v)
            while len(data) < length:
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
            body, data = data[:length], data[length:]
            log("http", host)
            if length:
                log("body", host, len(body), hashlib.sha256(body).hexdigest()[:16])
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nlzhttp!\n")
    except Exception as e:
        log("httperror", type(e).__name__)
def serve(port, handler):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((cfg["addr"], port))
    l.listen(64)
    def loop():
        while True:
            c, peer = l.accept()
            log("accept", port, peer[0])
            threading.Thread(target=handler, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
serve(443, tls_conn)
serve(80, http_conn)
# UDP 443 (QUIC's port): every datagram logged, "udp443 PEER".
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((cfg["addr"], 443))
def udp_loop():
    while True:
        _, peer = u.recvfrom(65536)
        log("udp443", peer[0])
threading.Thread(target=udp_loop, daemon=True).start()
print("READY", flush=True)
sys.stdin.read()
'''

# Inside the sandbox. Prints one JSON line per probe: {"probe", "ok", "got",
# "error", "s"}.
# A TLS 1.3 client (Python ssl, i.e. OpenSSL) that may change its
# server_name between its first ClientHello and its answer to a
# HelloRetryRequest (attack round a25b, finding F1): the name is set again
# on the live SSL object (SSL_ctrl SSL_CTRL_SET_TLSEXT_HOSTNAME) once the
# retry has arrived. Returns (retried, certificate names, answer line).
# Runs in the sandbox (the Debian image's python3 and libssl.so.3) and, as
# the control, on the test host.
HRR_PY = r'''
import ctypes, re, socket, ssl
HRR_RANDOM = bytes.fromhex("CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C")
def hrr_client(addr, first, second, line):
    libssl = ctypes.CDLL("libssl.so.3")
    libssl.SSL_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=first)
    # PySSLSocket: PyObject_HEAD (16 bytes), Socket, then the SSL *.
    ssl_ptr = ctypes.c_void_p.from_address(id(obj._sslobj) + 24).value
    with socket.create_connection((addr, 443), timeout=10) as s:
        retried, seen = False, b""
        for _ in range(50):
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            d = out.read()
            if d:
                s.sendall(d)
            d = s.recv(65536)
            if not d:
                raise EOFError("the server ended the connection")
            seen += d
            if not retried and HRR_RANDOM in seen:
                assert libssl.SSL_ctrl(ssl_ptr, 55, 0, ctypes.c_char_p(second.encode())) == 1
                retried = True
            inc.write(d)
        d = out.read()
        if d:
            s.sendall(d)
        cert = obj.getpeercert(binary_form=True) or b""
        names = sorted({n.decode() for n in re.findall(rb"[a-z0-9.]+[.]test", cert)})
        obj.write(line.encode() + b"\n")
        s.sendall(out.read())
        answer = b""
        while b"\n" not in answer:
            d = s.recv(65536)
            if not d:
                break
            inc.write(d)
            try:
                answer += obj.read(4096)
            except ssl.SSLWantReadError:
                pass
    return retried, names, answer.decode(errors="replace").strip()
'''

PROBES_PY = r'''
import hashlib, json, socket, ssl, struct, sys, threading, time
ADDR = sys.argv[1]
ALLOWED, OTHER, TOKEN = sys.argv[2], sys.argv[3], sys.argv[4]
out_lock = threading.Lock()
def report(probe, ok, got="", error="", s=0.0):
    with out_lock:
        print(json.dumps({"probe": probe, "ok": ok, "got": got, "error": error,
                          "s": round(s, 2)}), flush=True)
def tls(probe, sni, groups=None):
    t0 = time.monotonic()
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if groups:
            ctx.set_ecdh_curve(groups)
        with socket.create_connection((ADDR, 443), timeout=15) as raw:
            with ctx.wrap_socket(raw, server_hostname=sni) as s:
                s.sendall(f"{probe}-{TOKEN}\n".encode())
                got = s.makefile("rb").readline().decode().strip()
        report(probe, True, got, s=time.monotonic() - t0)
    except Exception as e:
        report(probe, False, error=type(e).__name__ + ": " + str(e), s=time.monotonic() - t0)
def raw(probe, port, pieces, pause=0.05):
    """Send pieces (each its own TCP segment), then read what comes back."""
    t0 = time.monotonic()
    try:
        with socket.create_connection((ADDR, port), timeout=15) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for p in pieces:
                s.sendall(p)
                time.sleep(pause)
            got = s.recv(65536)
        report(probe, bool(got), got[:24].hex(), s=time.monotonic() - t0)
    except Exception as e:
        report(probe, False, error=type(e).__name__ + ": " + str(e), s=time.monotonic() - t0)
def hello(sni, ech=False, pad=0):
    ext = b""
    if sni:
        n = sni.encode()
        ext += struct.pack("!HHHBH", 0, len(n) + 5, len(n) + 3, 0, len(n)) + n
    ext += struct.pack("!HHBH", 0x2b, 3, 2, 0x0304)
    ext += struct.pack("!HHH", 0x0a, 4, 2) + struct.pack("!H", 0x1d)
    ext += struct.pack("!HHH", 0x0d, 4, 2) + struct.pack("!H", 0x0804)
    share = bytes(range(32))
    ext += struct.pack("!HHHHH", 0x33, len(share) + 4 + 2, len(share) + 4, 0x1d, len(share))
    ext += share
    if ech:
        body = b"\0" + struct.pack("!HH", 1, 1) + b"\x42" + struct.pack("!H", 32) + \
            b"\x33" * 32 + struct.pack("!H", 16) + b"\x44" * 16
        ext += struct.pack("!HH", 0xfe0d, len(body)) + body
    if pad:
        ext += struct.pack("!HH", 0x15, pad) + b"\0" * pad
    body = b"\x03\x03" + b"\x5a" * 32 + b"\x20" + b"\x11" * 32 + \
        struct.pack("!H", 2) + b"\x13\x01" + b"\x01\x00" + struct.pack("!H", len(ext)) + ext
    return b"\x01" + len(body).to_bytes(3, "big") + body
def records(hs, size):
    return [b"\x16\x03\x01" + struct.pack("!H", len(hs[i:i + size])) + hs[i:i + size]
            for i in range(0, len(hs), size)]
def slow():
    t0 = time.monotonic()
    try:
        with socket.create_connection((ADDR, 443), timeout=30) as s:
            got = s.recv(1)
        report("slow", False, got.hex(), "ended" if not got else "", time.monotonic() - t0)
    except Exception as e:
        report("slow", False, error=type(e).__name__, s=time.monotonic() - t0)

# The name is resolved first: the sidecar's resolver learns its address.
addrs = sorted({a[4][0] for a in socket.getaddrinfo(ALLOWED, 443, socket.AF_INET)})
report("resolve", addrs == [ADDR], " ".join(addrs))
t = threading.Thread(target=slow)
t.start()
tls("tls-allowed", ALLOWED)
tls("tls-other", OTHER)
tls("tls-nosni", None)
tls("tls-allowed-again", ALLOWED)
# The same, with a first key share the server takes: no HelloRetryRequest.
tls("tls-no-retry", ALLOWED, groups="prime256v1")
# F1: the first ClientHello names the allowed server, the one after the
# HelloRetryRequest another (reset, never served); the control keeps the
# name (an honest client's retry is served).
def hrr(probe, second):
    t0 = time.monotonic()
    try:
        retried, names, answer = hrr_client(ADDR, ALLOWED, second, f"{probe}-{TOKEN}")
        report(probe, True, f"{'retried' if retried else 'no-retry'} {answer}",
               " ".join(names), s=time.monotonic() - t0)
    except Exception as e:
        report(probe, False, error=type(e).__name__ + ": " + str(e), s=time.monotonic() - t0)
hrr("hrr-same", ALLOWED)
hrr("hrr-switch", OTHER)
raw("ech", 443, [b"".join(records(hello(ALLOWED, ech=True), 16384))])
raw("ech-control", 443, [b"".join(records(hello(ALLOWED), 16384))])
# A hello of about 3 KiB over four records, sent in pieces that cut records.
blob = b"".join(records(hello(ALLOWED, pad=2600), 800))
raw("fragmented", 443, [blob[i:i + 500] for i in range(0, len(blob), 500)])
blob = b"".join(records(hello(OTHER, pad=2600), 800))
raw("fragmented-other", 443, [blob[i:i + 500] for i in range(0, len(blob), 500)])
for probe, host in (("http-allowed", ALLOWED), ("http-other", OTHER)):
    raw(probe, 80, [f"GET /{TOKEN} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()])
def get(host, path):
    return f"GET /{path}-{TOKEN} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
def response(f):
    # one answer of the test server: its head, then its 8 bytes of body
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = f.read(1)
        if not b:
            raise EOFError("the connection ended in a response")
        head += b
    return head + f.read(8)
def reuse(probe, second, pause):
    # S2: a first request with the allowed Host, then on the same connection
    # (after pause s, once the first answer is in: keep-alive; or in the same
    # segment: pipelined) a second one with another Host.
    t0 = time.monotonic()
    first = ""
    try:
        with socket.create_connection((ADDR, 80), timeout=15) as s:
            f = s.makefile("rb")
            if pause is None:
                s.sendall(get(ALLOWED, probe + "-1") + second)
            else:
                s.sendall(get(ALLOWED, probe + "-1"))
                first = response(f).decode(errors="replace")
                time.sleep(pause)
                s.sendall(second)
            got = f.read(1)
        report(probe, bool(got), first, "second answered: " + got[:40].hex(),
               s=time.monotonic() - t0)
    except Exception as e:
        report(probe, False, first, type(e).__name__ + ": " + str(e), s=time.monotonic() - t0)
reuse("http-keepalive", get(OTHER, "http-keepalive-2"), 0.5)
reuse("http-keepalive-same", get(ALLOWED, "http-keepalive-same-2"), 0.5)
reuse("http-pipelined", get(OTHER, "http-pipelined-2"), None)
# A body larger than what the name check reads first and than the relay's
# buffer: it reaches the server whole (the budget counts it).
body = bytes(i * 7 % 251 for i in range(200000))
t0 = time.monotonic()
try:
    with socket.create_connection((ADDR, 80), timeout=15) as s:
        s.sendall(f"POST /post-{TOKEN} HTTP/1.1\r\nHost: {ALLOWED}\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = response(s.makefile("rb"))
    report("http-post", True, got.decode(errors="replace"), s=time.monotonic() - t0)
except Exception as e:
    report("http-post", False, error=type(e).__name__ + ": " + str(e), s=time.monotonic() - t0)
raw("http-chunked", 80, [f"POST /chunked-{TOKEN} HTTP/1.1\r\nHost: {ALLOWED}\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                         .encode()])
t.join()
print(json.dumps({"probe": "post-sha", "ok": True,
                  "got": hashlib.sha256(body).hexdigest()[:16], "error": "", "s": 0}))
'''


def _cert(dirpath: Path, name: str):
    cert, key = dirpath / f"{name}.pem", dirpath / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                    "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


@pytest.fixture(scope="module")
def lab(_root):
    net = N.TestNet.create()
    try:
        certs = {n: _cert(net.dir, n) for n in (ALLOWED, OTHER)}
        dns = net.serve([("dns", N.DNS_SERVER, 53, {ALLOWED: N.HOST_A, OTHER: N.HOST_A})])
        log = net.dir / "tls-http.log"
        log.touch()
        proc = subprocess.Popen(
            ["ip", "netns", "exec", N.NS, "/usr/bin/python3", "-c", SERVERS_PY,
             json.dumps({"addr": N.HOST_A, "certs": certs, "log": str(log)})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        assert line.startswith("READY"), f"TLS/HTTP server: {line!r} {proc.stderr.read()}"
        net.servers.append(N.Server(proc, log, []))
        # Controls from the host: both names are served at the one address,
        # the nameserver answers both.
        assert N.dns_query(N.DNS_SERVER, 53, ALLOWED) == N.HOST_A
        assert N.dns_query(N.DNS_SERVER, 53, OTHER) == N.HOST_A
        yield net, dns, net.servers[-1]
    finally:
        net.close()


def _config_v2(rig, test_images) -> None:
    text = profiles_toml({"deb": {"image": test_images.debian, "allow_hosts": [ALLOWED]}},
                         network={"resolvers": [N.DNS_SERVER]})
    text = text.replace('"lazaret-trusted-host-config-v1"', '"lazaret-trusted-host-config-v2"')
    rig.lz.write(rig.lz.config_path, text)


def test_the_name_on_the_connection(rig, lab, test_images):
    """One session: the allowed name passes end to end; another name, no
    name and an ECH-marked hello to the same address are reset and never
    reach the server; a fragmented hello passes; HTTP Host likewise; a second
    HTTP request on one connection (keep-alive, pipelined) is checked too
    (S2); a client that sends nothing is cut after the bound; a ClientHello
    after a HelloRetryRequest that names another server is reset, an
    honest retry served (F1)."""
    net, dns, servers = lab
    _config_v2(rig, test_images)
    token = f"t{int(time.time() * 1000) % 10**9}"
    since = len(servers.lines())
    rig.lz.write(rig.ws / "probes.py", HRR_PY + PROBES_PY, mode=0o644)  # too long for an argument
    r = rig.run("deb", ["python3", "/workspace/probes.py", N.HOST_A, ALLOWED, OTHER, token])
    assert r.returncode == 0, f"probes: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    got = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            p = json.loads(line)
            got[p["probe"]] = p
    print(json.dumps(got, indent=1))
    seen = servers.lines()[since:]
    print("\n".join(seen))
    lines = [line.split() for line in seen]

    assert got["resolve"]["ok"], got["resolve"]
    # Controls: the same client, the same address, the allowed name.
    for probe in ("tls-allowed", "tls-allowed-again"):
        assert got[probe]["ok"] and got[probe]["got"] == f"lztls {ALLOWED} {probe}-{token}", \
            got[probe]
        assert ["line", ALLOWED, f"{probe}-{token}"] in lines
    # Refused: reset at once, nothing reached the server.
    for probe in ("tls-other", "tls-nosni"):
        assert not got[probe]["ok"] and "ConnectionResetError" in got[probe]["error"], got[probe]
        assert got[probe]["s"] < 2, got[probe]
    assert ["sni", OTHER] not in lines, "the server saw the refused name"
    assert not any(line[0] == "line" and line[1] in (OTHER, "-") for line in lines)
    # ECH: reset; control: the same hello without the extension reaches the
    # server (which answers the crafted hello with a TLS alert or handshake).
    assert not got["ech"]["ok"] and "ConnectionResetError" in got["ech"]["error"], got["ech"]
    assert got["ech-control"]["ok"] and got["ech-control"]["got"][:2] in ("15", "16"), \
        got["ech-control"]
    assert got["fragmented"]["ok"] and got["fragmented"]["got"][:2] in ("15", "16"), \
        got["fragmented"]
    assert not got["fragmented-other"]["ok"], got["fragmented-other"]
    # HTTP: the allowed Host is answered, the other reset, never served.
    assert got["http-allowed"]["ok"] and bytes.fromhex(got["http-allowed"]["got"]).startswith(
        b"HTTP/1.0 200"), got["http-allowed"]
    assert not got["http-other"]["ok"] and "ConnectionResetError" in got["http-other"]["error"]
    assert ["http", ALLOWED] in lines and ["http", OTHER] not in lines
    # Accepted connections: the two TLS controls, ech-control, fragmented,
    # http-allowed; none of the refused ones, nor the slow client.
    accepts = [line for line in lines if line[0] == "accept"]
    assert len([a for a in accepts if a[1] == "443"]) == 7, accepts  # + tls-no-retry, hrr-*
    # Port 80: http-allowed, the two keep-alive probes, the pipelined one
    # (its first request passes), http-post.
    assert len([a for a in accepts if a[1] == "80"]) == 5, accepts
    _check_request_by_request(got, lines, servers)
    # F1 (attack round a25b): the server is P-256 only, so every TLS probe
    # but tls-no-retry went through a HelloRetryRequest. Changing the name
    # in the ClientHello after it: reset at once, the server never saw the
    # second name (no "sni other.test" above) nor the client's line; the
    # control keeps the name through the same retry and is served.
    assert got["tls-no-retry"]["ok"], got["tls-no-retry"]
    assert got["tls-no-retry"]["got"] == f"lztls {ALLOWED} tls-no-retry-{token}"
    assert got["hrr-same"]["ok"], got["hrr-same"]
    assert got["hrr-same"]["got"] == f"retried lztls {ALLOWED} hrr-same-{token}", got["hrr-same"]
    assert got["hrr-same"]["error"] == ALLOWED  # the certificate chosen
    switch = got["hrr-switch"]
    assert not switch["ok"] and "ConnectionResetError" in switch["error"], switch
    assert switch["s"] < 2, switch
    assert not any("hrr-switch" in " ".join(line) for line in lines)
    # The slow client: reset after the bound, not before.
    slow = got["slow"]
    assert slow["error"] == "ConnectionResetError", slow
    assert HELLO_BOUND_S - 0.5 <= slow["s"] < HELLO_BOUND_S + 3, slow
    # Every refusal is in the Domain's denial log (written by the keeper from
    # lz-namecheck's SC_NAME_DENIED), with the line that would allow a name.
    records = []
    # os.walk, not rglob: the run directory's mailboxes come and go while it
    # looks (a vanished directory made rglob fail).
    for d, _, files in os.walk(rig.lz.root):
        for f in sorted(x for x in files if x.startswith("denials") and x.endswith(".jsonl")):
            text = (Path(d) / f).read_text()
            records += [json.loads(line) for line in text.splitlines() if line.strip()]
    names = [r for r in records if r["kind"] == "name"]
    print("\n".join(json.dumps(r) for r in names))
    assert all(r["addr"] == N.HOST_A for r in names), names

    def has(port, name, rule_part, allow=None):
        return any(r["port"] == port and r["name"] == name and rule_part in (r["rule"] or "")
                   and r["allow"] == allow for r in names)
    allow_other = f'allow_hosts = ["{OTHER}"]'
    assert has(443, OTHER, "not in allow_hosts", allow_other), names
    assert has(80, OTHER, "not in allow_hosts", allow_other), names
    assert has(443, None, "no SNI"), names
    assert has(443, None, "encrypted"), names
    assert has(443, None, "too slow"), names
    # The allowed name is in the log only for the chunked request (refused
    # whole), never with a line that allows it.
    assert all(r["allow"] is None for r in names if r["name"] == ALLOWED), names
    assert has(80, ALLOWED, "not TLS / HTTP"), names  # the chunked request
    assert has(443, OTHER, "the name changed after a HelloRetryRequest"), names
    # The control without the name check: the same client, from the test
    # host straight to the server, switches the name and is served for it.
    retried, certs, answer = _hrr_from_host(OTHER, f"hrr-control-{token}")
    assert retried and certs == [OTHER], (retried, certs, answer)
    assert answer == f"lztls {OTHER} hrr-control-{token}", answer
    assert ["sni", OTHER] in [line.split() for line in servers.lines()[since:]]


def _hrr_from_host(second: str, line: str):
    """The F1 client from the test host, no name check on the way."""
    scope: dict = {}
    exec(HRR_PY, scope)  # noqa: S102 - the test's own client code
    return scope["hrr_client"](N.HOST_A, ALLOWED, second, line)


def _reuse_from_host(pipelined: bool) -> bytes:
    """The S2 client, from the test host straight to the server (no name
    check on the way): what comes back on one connection carrying two
    requests, the second for OTHER."""
    with socket.create_connection((N.HOST_A, 80), timeout=10) as s:
        one = f"GET /c1 HTTP/1.1\r\nHost: {ALLOWED}\r\n\r\n".encode()
        two = f"GET /c2 HTTP/1.1\r\nHost: {OTHER}\r\n\r\n".encode()
        answer = b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nlzhttp!\n"
        got = b""
        if pipelined:
            s.sendall(one + two)
        else:
            s.sendall(one)
            while len(got) < len(answer):
                got += s.recv(4096)
            s.sendall(two)
        while len(got) < 2 * len(answer):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        return got


def _check_request_by_request(got, lines, servers):
    """S2 and a25b F2: each request on a port-80 connection is checked
    before a byte of it is relayed: a kept-alive second request for the
    allowed name is served, one for another name resets the connection
    after the first answer and never reaches the server; of a pipelined
    pair, the second is refused on its own."""
    answer = "HTTP/1.0 200 OK"
    ka = got["http-keepalive"]
    assert ka["got"].startswith(answer) and ka["got"].endswith("lzhttp!\n"), ka
    assert not ka["ok"] and "ConnectionResetError" in ka["error"], ka
    same = got["http-keepalive-same"]
    assert same["got"].startswith(answer) and same["ok"], same
    assert not got["http-pipelined"]["ok"], got["http-pipelined"]
    assert "ConnectionResetError" in got["http-pipelined"]["error"], got["http-pipelined"]
    served = [line for line in lines if line[0] == "http"]
    # OTHER never; ALLOWED for http-allowed, the two keep-alive probes' first
    # requests and the same-name second one, http-post; and the pipelined
    # probe's first request if it left before the refusal reset both sides.
    assert ["http", OTHER] not in lines, served
    assert len([line for line in served if line[1] == ALLOWED]) in (5, 6), served
    # Control: a POST whose body is larger than the first read and than the
    # relay's buffer is served whole; a chunked one is refused.
    assert got["http-post"]["ok"] and got["http-post"]["got"].startswith(answer), got["http-post"]
    assert ["body", ALLOWED, "200000", got["post-sha"]["got"]] in lines, lines
    assert not got["http-chunked"]["ok"], got["http-chunked"]
    assert "ConnectionResetError" in got["http-chunked"]["error"], got["http-chunked"]
    # Control: without the name check on the way, the same server answers
    # both requests of a reused connection, the second for OTHER.
    since = len(servers.lines())
    for pipelined in (False, True):
        assert _reuse_from_host(pipelined).count(b"HTTP/1.0 200 OK") == 2
    control = [line.split() for line in servers.lines()[since:]]
    assert control.count(["http", OTHER]) == 2, control


# deny_hosts and an allow prefix (attack finding S1): the probes of
# PROBES_PY's functions, to HOST_A inside the allowed prefix, no resolution;
# and a connection to an address the prefix policy denies (10/8).
_REUSE_PY = PROBES_PY[PROBES_PY.index("def get(host, path):"):
                      PROBES_PY.index('reuse("http-keepalive"')]
PFX_PROBES_PY = HRR_PY + PROBES_PY.split("# The name is resolved first")[0] + _REUSE_PY + r'''
MODE, DENIED_ADDR = sys.argv[5], sys.argv[6]
def connect_denied(probe):
    t0 = time.monotonic()
    try:
        socket.create_connection((DENIED_ADDR, 443), timeout=15).close()
        report(probe, True, s=time.monotonic() - t0)
    except Exception as e:
        report(probe, False, error=type(e).__name__, s=time.monotonic() - t0)
for name in (OTHER, ALLOWED):
    tls(f"{MODE}-tls-{name}", name)
    raw(f"{MODE}-http-{name}", 80, [f"GET /{TOKEN} HTTP/1.1\r\nHost: {name}\r\n\r\n".encode()])
# A request line a lenient server takes (a vertical tab after the method):
# held to HTTP's grammar, not relayed as "some other protocol" (a25c, F1).
raw(f"{MODE}-http-vt-{OTHER}", 80,
    [f"GET\x0b/{TOKEN} HTTP/1.1\r\nHost: {OTHER}\r\n\r\n".encode()])
reuse(f"{MODE}-keepalive-other", get(OTHER, f"{MODE}-keepalive-other-2"), 0.5)
reuse(f"{MODE}-keepalive-same", get(ALLOWED, f"{MODE}-keepalive-same-2"), 0.5)
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"quic?", (ADDR, 443))
if MODE == "pfx":
    tls("pfx-tls-nosni", None)
    connect_denied("pfx-denied-addr")
# F1 on a prefix-allowed address: the allowed name, then after the
# HelloRetryRequest the denied one.
t0 = time.monotonic()
try:
    retried, names, answer = hrr_client(ADDR, ALLOWED, OTHER, f"{MODE}-hrr-{TOKEN}")
    report(f"{MODE}-hrr", True, answer, " ".join(names), s=time.monotonic() - t0)
except Exception as e:
    report(f"{MODE}-hrr", False, error=type(e).__name__ + ": " + str(e), s=time.monotonic() - t0)
'''


def test_deny_hosts_inside_an_allowed_prefix(rig, lab, test_images):
    """deny_hosts holds on the connection to an address an allow prefix
    opens: SNI and Host other.test to HOST_A are reset and never reach the
    server; the allowed name and no SNI pass there (the prefix allows the
    address); an address the prefix policy denies is still refused at once.
    Control: the same probes under a profile without deny_hosts are not
    redirected, and the server sees other.test."""
    net, dns, servers = lab
    common = {"image": test_images.debian, "allow_egress": [N.ALLOWED_PREFIX],
              "allow_hosts": [ALLOWED]}
    text = profiles_toml({"pfx": {**common, "deny_hosts": [OTHER]}, "pfxctl": common},
                         network={"resolvers": [N.DNS_SERVER]})
    text = text.replace('"lazaret-trusted-host-config-v1"', '"lazaret-trusted-host-config-v2"')
    rig.lz.write(rig.lz.config_path, text)
    rig.lz.write(rig.ws / "probes.py", PFX_PROBES_PY, mode=0o644)
    token = f"p{int(time.time() * 1000) % 10**9}"
    got, seen = {}, {}
    for profile in ("pfx", "pfxctl"):
        since = len(servers.lines())
        r = rig.run(profile, ["python3", "/workspace/probes.py", N.HOST_A, ALLOWED, OTHER, token,
                              profile, N.PRIVATE])
        assert r.returncode == 0, f"{profile}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                p = json.loads(line)
                got[p["probe"]] = p
        seen[profile] = [line.split() for line in servers.lines()[since:]]
    print(json.dumps(got, indent=1))
    print(json.dumps(seen))

    # The denied name, TLS, HTTP (also in a lenient request form) and after a
    # HelloRetryRequest (F1): reset at once, the server saw nothing of it.
    for probe in (f"pfx-tls-{OTHER}", f"pfx-http-{OTHER}", f"pfx-http-vt-{OTHER}", "pfx-hrr"):
        assert not got[probe]["ok"] and "ConnectionResetError" in got[probe]["error"], got[probe]
        assert got[probe]["s"] < 2, got[probe]
    assert ["sni", OTHER] not in seen["pfx"] and ["http", OTHER] not in seen["pfx"], seen["pfx"]
    # Controls in the same session: the allowed name and no SNI pass.
    for probe, name in ((f"pfx-tls-{ALLOWED}", ALLOWED), ("pfx-tls-nosni", "-")):
        assert got[probe]["ok"] and got[probe]["got"] == f"lztls {name} {probe}-{token}", \
            got[probe]
    assert got[f"pfx-http-{ALLOWED}"]["ok"], got[f"pfx-http-{ALLOWED}"]
    assert ["http", ALLOWED] in seen["pfx"], seen["pfx"]
    # A denied address never reaches the name check: refused at once.
    denied = got["pfx-denied-addr"]
    assert not denied["ok"] and denied["error"] == "ConnectionRefusedError", denied
    assert denied["s"] < 2, denied
    # Request by request (attack round a25b, F2): a kept-alive connection's
    # second request for the denied name is reset after the first answer;
    # one for another name is served on the same connection.
    ka = got["pfx-keepalive-other"]
    assert ka["got"].startswith("HTTP/1.0 200 OK") and not ka["ok"], ka
    assert "ConnectionResetError" in ka["error"], ka
    assert got["pfx-keepalive-same"]["ok"], got["pfx-keepalive-same"]
    # QUIC (UDP 443) to the prefix-allowed address is rejected with
    # deny_hosts (its SNI is not read: a25b, F3).
    assert not [x for x in seen["pfx"] if x[0] == "udp443"], seen["pfx"]
    # Control: without deny_hosts nothing is redirected, other.test is served
    # (also as a kept-alive second request), the datagram arrives.
    for probe in (f"pfxctl-tls-{OTHER}", f"pfxctl-http-{OTHER}", "pfxctl-keepalive-other"):
        assert got[probe]["ok"], got[probe]
    assert got["pfxctl-hrr"]["got"] == f"lztls {OTHER} pfxctl-hrr-{token}", got["pfxctl-hrr"]
    assert ["sni", OTHER] in seen["pfxctl"] and ["http", OTHER] in seen["pfxctl"], seen["pfxctl"]
    assert [x for x in seen["pfxctl"] if x[0] == "udp443"], seen["pfxctl"]
    # The denial log names the rule that refused it.
    records = []
    for f in Path(rig.lz.root).rglob("denials*.jsonl"):
        records += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    names = [r for r in records if r["kind"] == "name" and r["name"] == OTHER]
    print("\n".join(json.dumps(r) for r in names))
    for port in (443, 80):
        assert any(r["port"] == port and r["addr"] == N.HOST_A and f'deny_hosts "{OTHER}"'
                   in (r["rule"] or "") and r["allow"] is None for r in names), names
    assert any(r["kind"] == "udp" and r["port"] == 443 and r["addr"] == N.HOST_A and
               "QUIC" in (r["rule"] or "") for r in records), records
