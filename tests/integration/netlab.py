# SPDX-License-Identifier: Apache-2.0
"""Test hosts for the network tests (tests/integration/test_network.py) and
the network benchmark (bench/network/run.sh): every destination a test uses
lives on this machine.

    TestNet.create()  as root: one network namespace NS holding every test
                      host address on its end of a veth pair; the host end
                      has a link address and routes to the test prefixes
                      (nothing else is routed there, and the namespace has
                      no route but its link: it cannot send anywhere else)
    net.serve(...)    start SERVER_PY in NS (or in the host's namespace, for
                      host loopback, or under any prefix such as nsenter):
                      TCP echo, DNS (UDP), TCP source;
                      every connection and datagram is logged to a file
    net.close()       stop the servers, delete NS, the veth pair and routes

Inside one test process the TestNet is shared: a create() while one exists
returns it (counted), and only the last close() tears it down, so that
several test files of one pytest session can each ask for it (each stops
the servers it started: a shared TestNet keeps them until the last close).

Only one TestNet exists on the machine at a time: create() holds an
exclusive lock on /run/lazaret-tests/network.lock until close(), so that
concurrent test sessions (several developers on one machine) wait instead of
fighting over the namespace and its routes. A namespace left by a run that
died is ours by name and is replaced.
"""

import fcntl
import json
import os
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

NS = "lzt-net"
VETH_HOST = "lztnet-h"
VETH_NS = "lztnet-n"
LINK_HOST = "169.254.213.1"
LINK_NS = "169.254.213.2"
LINK6_HOST = "2001:db8:77::1"

# Test hosts (all on NS). Documentation, benchmarking and RFC 1918 space.
ALLOWED_PREFIX = "198.18.7.0/24"      # RFC 2544 benchmarking space
HOST_A = "198.18.7.7"
HOST_B = "198.18.7.8"                 # a second address of the same test host
NEITHER = "203.0.113.9"               # TEST-NET-3, in neither set by default
DNS_SERVER = "203.0.113.53"           # the test nameserver
UPSTREAM_DNS = "203.0.113.54"         # the fake upstream resolver (dnsx/dnsxt, test_dns.py)
PRIVATE_PREFIX = "10.200.0.0/24"      # inside the always-denied 10/8
PRIVATE = "10.200.0.1"
HOST6 = "2001:db8:77::7"              # the test host's IPv6 address
HOST_PREFIXES = ["198.18.7.0/24", "203.0.113.0/24", PRIVATE_PREFIX]
NS_ADDRS = [HOST_A, HOST_B, NEITHER, DNS_SERVER, PRIVATE]
# Addresses of names learned in test_learned.py (a test serves on them).
LEARN_ADDRS = ["198.18.7.21", "198.18.7.22", "198.18.7.23"]
# The fake model providers of the real coding agents (test_agents.py, port 80)
# and their resolver: addresses of their own, so that no other test's
# servers share a port with them.
AGENT_API = "198.18.7.40"
AGENT_DNS = "203.0.113.40"
EXTRA_ADDRS = [UPSTREAM_DNS] + LEARN_ADDRS + [AGENT_API, AGENT_DNS]  # on NS too, without
#                                                 the per-address servers

TCP_PORT = 7070
UDP_PORT = 7071
SOURCE_PORT = 7072
SINK_PORT = 7073
HTTP_PORT = 7074

STATE_DIR = Path("/run/lazaret-tests")

# The servers. argv[1]: JSON {"listen": [[kind, addr, port, extra], ...],
# "log": path, "lifetime": seconds}. Kinds: tcp (reads one line, answers
# "lzecho tcp ADDR:PORT LINE", closes), dns (UDP: A queries answered from
# extra {name: addr}, "*" for any other name, other types get an empty
# answer), dnsx and dnsxt (a fake upstream resolver over UDP and over TCP:
# extra {name: {"a": [addrs], "cname": name, "ttl": s, "txt": text,
# "aaaa": addr, "tc": true}}, "*" for any other name, an unknown name
# NXDOMAIN; a CNAME is followed through the table; "tc" answers UDP with TC
# set and nothing else; every query logged "dns ADDR:PORT PEER NAME TYPE"
# or "dnstcp ..."), source (TCP: sends extra bytes, then closes), sink (TCP: reads
# to the end, answers "lzsink BYTES"), http (TCP: reads a request's headers,
# answers HTTP/1.0 200 with extra bytes of body after a second's delay). Logs "KIND
# ADDR:PORT PEER [DETAIL]" per connection or query; prints "READY [[kind,
# addr, port], ...]" once everything is bound (port 0 is resolved). Ends
# after lifetime seconds or when its stdin closes.
SERVER_PY = r'''
import json, os, selectors, socket, struct, sys, threading, time
cfg = json.loads(sys.argv[1])
logf = open(cfg["log"], "a", buffering=1)
lock = threading.Lock()
STREAM_KINDS = ("tcp", "source", "sink", "http", "dnsxt")
def log(*parts):
    with lock:
        logf.write(" ".join(str(p) for p in parts) + "\n")
sel = selectors.DefaultSelector()
bound = []
for kind, addr, port, extra in cfg["listen"]:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    typ = socket.SOCK_STREAM if kind in STREAM_KINDS else socket.SOCK_DGRAM
    s = socket.socket(fam, typ)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    if typ == socket.SOCK_STREAM:
        s.listen(64)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, (kind, addr, s.getsockname()[1], extra))
    bound.append([kind, addr, s.getsockname()[1]])
sel.register(sys.stdin, selectors.EVENT_READ, None)
print("READY " + json.dumps(bound), flush=True)

def read_until(c, marker, limit):
    data = b""
    while marker not in data and len(data) < limit:
        chunk = c.recv(4096)
        if not chunk:
            break
        data += chunk
    return data

def tcp_echo(c, where, peer):
    c.settimeout(3)
    try:
        data = read_until(c, b"\n", 4096)
        line = data.decode("utf-8", "replace").strip()
        c.sendall(("lzecho tcp %s %s\n" % (where, line)).encode())
        log("tcp", where, peer, line)
    except OSError as e:
        log("tcp", where, peer, "error", e)
    finally:
        c.close()

def sink(c, where, peer):
    n = 0
    try:
        while True:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            n += len(chunk)
        c.sendall(("lzsink %d\n" % n).encode())
    except OSError:
        pass
    log("sink", where, peer, n)
    c.close()

def source(c, where, peer, n):
    log("source", where, peer, n)
    buf = b"\0" * 65536
    try:
        while n > 0:
            n -= c.send(buf[:min(n, len(buf))])
    except OSError:
        pass
    c.close()

def http(c, where, peer, n):
    c.settimeout(5)
    try:
        read_until(c, b"\r\n\r\n", 65536)
        time.sleep(1)  # the client's blocking read must wait
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
        buf = b"\0" * 65536
        left = n
        while left > 0:
            left -= c.send(buf[:min(left, len(buf))])
        log("http", where, peer, n)
    except OSError as e:
        log("http", where, peer, "error", e)
    c.close()

def dns_answer(q, names):
    if len(q) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    qname = ".".join(labels).lower()
    qtype, qclass = struct.unpack("!HH", q[i + 1:i + 5])
    question = q[12:i + 5]
    ans = names.get(qname, names.get("*"))
    rcode = 0 if ans else 3
    answers = b""
    if ans and qtype == 1:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(ans)
    an = 1 if answers else 0
    hdr = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100) | rcode, 1, an, 0, 0)
    return hdr + question + answers, qname, qtype

def wire_name(name):
    out = b""
    for label in name.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"

def dnsx_answer(q, table, over_tcp):
    if len(q) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    qname = ".".join(labels).lower()
    qtype, qclass = struct.unpack("!HH", q[i + 1:i + 5])
    question = q[12:i + 5]
    entry = table.get(qname, table.get("*"))
    rcode, records, tc = (0 if entry else 3), [], False
    owner, name, seen = b"\xc0\x0c", qname, 0
    while entry and seen < 16:
        seen += 1
        ttl = entry.get("ttl", 5)
        if entry.get("tc") and not over_tcp:
            tc, records = True, []
            break
        if entry.get("cname") and qtype in (1, 5, 16, 28):
            target = wire_name(entry["cname"])
            records.append(owner + struct.pack("!HHIH", 5, 1, ttl, len(target)) + target)
            owner, name = target, entry["cname"]
            entry = table.get(name)
            if not entry:
                break
            continue
        if qtype == 1:
            for a in entry.get("a", []):
                records.append(owner + struct.pack("!HHIH", 1, 1, ttl, 4) + socket.inet_aton(a))
        elif qtype == 16 and "txt" in entry:
            t = entry["txt"].encode()[:255]
            records.append(owner + struct.pack("!HHIH", 16, 1, ttl, len(t) + 1) +
                           bytes([len(t)]) + t)
        elif qtype == 28 and "aaaa" in entry:
            records.append(owner + struct.pack("!HHIH", 28, 1, ttl, 16) +
                           socket.inet_pton(socket.AF_INET6, entry["aaaa"]))
        break
    hdr = struct.pack("!HHHHHH", qid, 0x8180 | (0x0200 if tc else 0) | (flags & 0x0100) | rcode,
                      1, len(records), 0, 0)
    return hdr + question + b"".join(records), qname, qtype

def dnsx_tcp(c, where, peer, table):
    c.settimeout(5)
    try:
        while True:
            head = read_exact(c, 2)
            if not head:
                break
            msg = read_exact(c, struct.unpack("!H", head)[0])
            if msg is None:
                break
            r = dnsx_answer(msg, table, True)
            if not r:
                break
            log("dnstcp", where, peer, r[1], r[2])
            c.sendall(struct.pack("!H", len(r[0])) + r[0])
    except OSError:
        pass
    c.close()

def read_exact(c, n):
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data

deadline = time.monotonic() + cfg["lifetime"]
while time.monotonic() < deadline:
    for key, _ in sel.select(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
        if key.data is None:
            if not sys.stdin.buffer.read1(4096):
                sys.exit(0)
            continue
        kind, addr, port, extra = key.data
        s = key.fileobj
        where = "%s:%d" % (addr, port)
        if kind in STREAM_KINDS:
            try:
                c, peer = s.accept()
            except OSError:
                continue
            c.setblocking(True)
            peer = "%s:%d" % peer[:2]
            if kind == "tcp":
                threading.Thread(target=tcp_echo, args=(c, where, peer), daemon=True).start()
            elif kind == "sink":
                threading.Thread(target=sink, args=(c, where, peer), daemon=True).start()
            elif kind == "http":
                threading.Thread(target=http, args=(c, where, peer, extra), daemon=True).start()
            elif kind == "dnsxt":
                threading.Thread(target=dnsx_tcp, args=(c, where, peer, extra), daemon=True).start()
            else:
                threading.Thread(target=source, args=(c, where, peer, extra), daemon=True).start()
            continue
        try:
            data, peer = s.recvfrom(65536)
        except OSError:
            continue
        speer = "%s:%d" % peer[:2]
        r = dnsx_answer(data, extra, False) if kind == "dnsx" else dns_answer(data, extra)
        if r:
            log("dns", where, speer, r[1], r[2])
            s.sendto(r[0], peer)
'''


def sh_run(argv, check=True, **kw):
    p = subprocess.run([str(a) for a in argv], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: exit {p.returncode}: "
                           f"{p.stderr.strip()}")
    return p


class Server:
    def __init__(self, proc, log: Path, bound):
        self.proc = proc
        self.log = log
        self.bound = bound  # [[kind, addr, port], ...]

    def port(self, kind, addr) -> int:
        return next(p for k, a, p in self.bound if k == kind and a == addr)

    def lines(self) -> list:
        try:
            return self.log.read_text().splitlines()
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class TestNet:
    __test__ = False
    _active = None  # this process's TestNet while it exists

    def __init__(self):
        self._refs = 1
        self._lock_fd = None
        self.servers = []
        self.dir = None
        self._routes = []

    # -- lifecycle --
    @classmethod
    def create(cls, lock_timeout=600):
        if cls._active is not None:
            cls._active._refs += 1
            return cls._active
        net = cls()
        try:
            net._lock(lock_timeout)
            net.dir = Path(tempfile.mkdtemp(prefix="lzt-net-"))
            net._teardown_stale()
            net._check_free()
            net._setup()
        except BaseException:
            net.close()
            raise
        cls._active = net
        return net

    def _lock(self, timeout):
        STATE_DIR.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(STATE_DIR / "network.lock",
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise RuntimeError(f"another test session holds {STATE_DIR}/network.lock "
                                       f"for more than {timeout} s")
                time.sleep(0.5)
        self._lock_fd = fd

    def _teardown_stale(self):
        # Ours by name: a run that died left it (we hold the lock).
        if NS in sh_run(["ip", "netns", "list"]).stdout.split():
            for pid in sh_run(["ip", "netns", "pids", NS], check=False).stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            sh_run(["ip", "netns", "delete", NS], check=False)
        sh_run(["ip", "link", "delete", VETH_HOST], check=False)

    def _check_free(self):
        """Refuse to shadow anything of the machine's: no existing route may
        overlap a test prefix (the host's default route aside)."""
        clash = []
        for prefix in HOST_PREFIXES:
            for sel in ("root", "match"):  # routes inside it, routes containing it
                out = sh_run(["ip", "-4", "route", "show", sel, prefix]).stdout
                clash += [f"{prefix}: {line}" for line in out.splitlines()
                          if line.strip() and not line.startswith("default")]
        if clash:
            raise RuntimeError("the test prefixes are already routed on this machine (another "
                               "test network or a real network?):\n  " + "\n  ".join(clash))

    def _setup(self):
        ip = ["ip"]
        sh_run(ip + ["netns", "add", NS])
        nsip = ["ip", "netns", "exec", NS, "ip"]
        sh_run(ip + ["link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS,
                     "netns", NS])
        sh_run(ip + ["addr", "add", f"{LINK_HOST}/30", "dev", VETH_HOST])
        sh_run(ip + ["-6", "addr", "add", f"{LINK6_HOST}/64", "dev", VETH_HOST, "nodad"])
        sh_run(ip + ["link", "set", VETH_HOST, "up"])
        sh_run(nsip + ["link", "set", "lo", "up"])
        sh_run(nsip + ["addr", "add", f"{LINK_NS}/30", "dev", VETH_NS])
        for a in NS_ADDRS + EXTRA_ADDRS:
            sh_run(nsip + ["addr", "add", f"{a}/32", "dev", VETH_NS])
        sh_run(nsip + ["-6", "addr", "add", f"{HOST6}/64", "dev", VETH_NS, "nodad"])
        sh_run(nsip + ["link", "set", VETH_NS, "up"])
        for prefix in HOST_PREFIXES:
            sh_run(ip + ["route", "add", prefix, "via", LINK_NS, "dev", VETH_HOST])

    def close(self):
        if self._refs > 1:
            self._refs -= 1
            return
        if TestNet._active is self:
            TestNet._active = None
        for s in self.servers:
            s.stop()
        self.servers = []
        if self._lock_fd is not None:
            for prefix in HOST_PREFIXES:
                sh_run(["ip", "route", "delete", prefix, "dev", VETH_HOST], check=False)
            self._teardown_stale()
            os.close(self._lock_fd)
            self._lock_fd = None
        if self.dir:
            for f in self.dir.iterdir():
                f.unlink()
            self.dir.rmdir()
            self.dir = None

    # -- servers --
    def serve(self, listen, in_ns=True, lifetime=900, prefix=None) -> Server:
        """listen: [(kind, addr, port, extra)]; port 0 picks a free one."""
        log = self.dir / f"server-{len(self.servers)}.log"
        log.touch()
        cfg = json.dumps({"listen": [list(x) for x in listen], "log": str(log),
                          "lifetime": lifetime})
        argv = (prefix or (["ip", "netns", "exec", NS] if in_ns else [])) + \
            ["/usr/bin/python3", "-c", SERVER_PY, cfg]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            proc.kill()
            err = proc.stderr.read()
            raise RuntimeError(f"test server did not start: {line!r} {err}")
        srv = Server(proc, log, json.loads(line[6:]))
        self.servers.append(srv)
        return srv


# ---- clients from the host (positive controls) ------------------------------------

def tcp_echo(addr, port, token, timeout=2.0) -> str:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect((addr, port))
        s.sendall(token.encode() + b"\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.decode()


def dns_query(addr, port, name, timeout=2.0) -> str:
    """The A record the server at addr:port gives for name (or '')."""
    q = struct.pack("!HHHHHH", 0x4c5a, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.connect((addr, port))
        s.send(q)
        r = s.recv(512)
    an = struct.unpack("!H", r[6:8])[0]
    return socket.inet_ntoa(r[-4:]) if an else ""
