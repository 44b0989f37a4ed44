# SPDX-License-Identifier: Apache-2.0
"""Attacks on `lazaret run --publish` (docs/network.md "Publishing a port"):
a published port must open no path from the sandbox to the host, and a
hostile server in the sandbox must not be able to grow the forwarder.

Every attack is paired with a control that shows the same attempt succeeds
against a deliberately opened path (an nftables rule the test adds in the
router, a listener the test opens), and is judged on host-side evidence:
what the host's and the router's listeners logged, and what the server in
the sandbox printed to the session's stdout on the host.
"""

import os
import re
import secrets
import socket
import subprocess
import threading
import time

import pytest

from conftest import by_role
from test_network import in_netns, router_netns
from test_publish import (forwarders, free_port, host_addresses, install_probe,  # noqa: F401
                          pub_probe, request_retry, start, stop, wait_for)  # pub_probe: fixture

ROUTER = "169.254.77.1"
SANDBOX = "169.254.77.2"
SLIRP_GW = "100.96.0.2"


class Listener:
    """A TCP listener on the host that logs every connection and its first
    line; answers "HOST <line>"."""

    def __init__(self, addr="127.0.0.1"):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.log = []
        self._stop = False
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                c, peer = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            c.settimeout(2)
            try:
                line = c.recv(200).decode(errors="replace").strip()
                c.sendall(f"HOST {line}\n".encode())
            except OSError:
                line = ""
            self.log.append(f"{peer[0]}:{peer[1]} {line}")
            c.close()

    def close(self):
        self._stop = True
        self._t.join(2)
        self.sock.close()


ROUTER_SERVER = r'''
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16)
print("READY", flush=True)
while True:
    c, peer = s.accept(); c.settimeout(2)
    try:
        line = c.recv(200).decode(errors="replace").strip(); c.sendall(b"ROUTER " + line.encode() + b"\n")
    except OSError:
        line = ""
    print("CONN %s:%d %s" % (peer[0], peer[1], line), flush=True); c.close()
'''


def probes_in_sandbox(rig, targets: list) -> dict:
    """Run pub_probe connect for every (addr, port) in one session of the
    running Domain; {(addr, port): (token, line)}."""
    want = {(a, p): "a" + secrets.token_hex(5) for a, p in targets}
    script = "\n".join(f"/workspace/pub_probe connect {a} {p} {t}" for (a, p), t in want.items())
    r = rig.run("bb", ["sh", "-c", script])
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    got = {}
    for (a, p), t in want.items():
        m = re.search(rf"^CONNECT {re.escape(a)}:{p} (.*)$", r.stdout, re.M)
        assert m, f"no result for {a}:{p}:\n{r.stdout}"
        got[(a, p)] = (t, m.group(1))
    print("\n".join(f"{a}:{p} -> {line}" for (a, p), (_, line) in got.items()))
    return got


def forwarder_local_ports(router: str) -> list:
    """The router-side ports of the forwarder's connections to the sandbox."""
    out = in_netns(router, ["ss", "-Htn", "state", "established"]).stdout
    return [int(m) for m in re.findall(rf"{re.escape(ROUTER)}:(\d+)\s+{re.escape(SANDBOX)}:8000",
                                       out)]


def test_sandbox_cannot_reach_the_host_through_a_published_port(rig, pub_probe):
    """From inside: the host port on the sandbox's own loopback, the router's
    address (published port, sandbox port, the forwarder's own connection
    port, a router listener), slirp's host alias, the host's loopback
    listener and the host's other addresses — every connect fails, and no
    listener on the host or in the router, nor the published server, saw
    an attack token. Controls: the probe reaches the sandbox's own server;
    the host reaches the published port; with an nftables rule the test
    adds, the same probe reaches the router's listener."""
    rig.config({"bb": {}})
    install_probe(rig, pub_probe)
    hp = free_port()
    mark = "M" + secrets.token_hex(4)
    s = start(rig, [f"{hp}:8000"], f"exec /workspace/pub_probe serve 8000 {mark}")
    s.read_until("LISTENING 8000")
    assert request_retry(hp, "control") == f"{mark} control\n"   # control: host → sandbox
    host = Listener()
    router = router_netns(rig)
    rport = free_port()
    rsrv = subprocess.Popen(["nsenter", f"--net={router}", "/usr/bin/python3", "-c",
                             ROUTER_SERVER, str(rport)], stdout=subprocess.PIPE, text=True)
    held = None
    try:
        assert rsrv.stdout.readline().strip() == "READY"
        # A host connection held open through the forwarder: its
        # router-side port is an address of the forwarder.
        held = socket.create_connection(("127.0.0.1", hp), timeout=5)
        wait_for(lambda: forwarder_local_ports(router), 10, "the forwarder's connection")
        eph = forwarder_local_ports(router)[0]
        targets = [("127.0.0.1", hp), (ROUTER, hp), (ROUTER, 8000), (ROUTER, eph),
                   (ROUTER, rport), (SLIRP_GW, hp), (SLIRP_GW, host.port), ("10.0.2.2", hp),
                   ("127.0.0.1", host.port)]
        targets += [(a, p) for a in host_addresses() for p in (hp, host.port)]
        targets.append((SANDBOX, 8000))  # control: the probe works
        got = probes_in_sandbox(rig, targets)
        t_ctl, line_ctl = got.pop((SANDBOX, 8000))
        assert line_ctl == f"OK {mark} {t_ctl} ", line_ctl
        problems = [f"{a}:{p}: {line}" for (a, p), (_, line) in got.items()
                    if not line.startswith("ERR")]
        # Control: the opened path. The same probe reaches the router's
        # listener once the router's input chain accepts its port.
        in_netns(router, ["nft", "insert", "rule", "ip", "lazaret", "input", "iifname", "lzr0",
                          "tcp", "dport", str(rport), "accept"])
        opened = probes_in_sandbox(rig, [(ROUTER, rport)])
        t_open, line_open = opened[(ROUTER, rport)]
        assert line_open.startswith(f"OK ROUTER {t_open}"), line_open
    finally:
        if held:
            held.close()
        rsrv.kill()
        router_log = rsrv.communicate(timeout=10)[0]
        host.close()
    tokens = {t for t, _ in got.values()}
    seen_router = [line for line in router_log.splitlines() if any(t in line for t in tokens)]
    seen_host = [line for line in host.log if any(t in line for t in tokens)]
    stop(s)
    seen_server = [t for t in tokens if f"GOT {t}" in s.stdout]
    assert t_open in router_log, f"control: the router's listener did not log {t_open}"
    assert not problems, "reached from the sandbox:\n" + "\n".join(problems)
    assert not seen_router and not seen_host and not seen_server, (seen_router, seen_host,
                                                                   seen_server)


def test_router_itself_sends_only_to_the_sandbox(rig, pub_probe):
    """A subverted forwarder runs in the router's namespace, where the forward
    chain's host_local rule does not apply: the router's output chain lets
    it send only to the sandbox's address. From the router (entered by the
    test), a connect to a host address the profile allows fails and the
    host's listener sees nothing; control: with an accept rule appended to
    the output chain, the same connect reaches the host's listener through
    slirp4netns."""
    addrs = host_addresses()
    assert addrs
    a = addrs[0]
    rig.config({"bb": {"allow_egress": [f"{a}/32"]}})
    install_probe(rig, pub_probe)
    host = Listener("0.0.0.0")
    holder = rig.hold("bb")
    router = router_netns(rig)
    connect = ("import socket, sys\n"
               "try:\n"
               "    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), 3)\n"
               "    c.sendall(sys.argv[3].encode() + b'\\n'); print('OK', c.recv(100))\n"
               "except OSError as e:\n"
               "    print('ERR', e)\n")
    try:
        t1 = "r" + secrets.token_hex(5)
        blocked = in_netns(router, ["/usr/bin/python3", "-c", connect, a, str(host.port), t1])
        in_netns(router, ["nft", "add", "rule", "ip", "lazaret", "output", "accept"])
        t2 = "r" + secrets.token_hex(5)
        opened = in_netns(router, ["/usr/bin/python3", "-c", connect, a, str(host.port), t2])
    finally:
        time.sleep(0.5)
        host.close()
    rig.release(holder)
    assert opened.stdout.startswith("OK"), f"control failed: {opened.stdout} {opened.stderr}"
    assert any(t2 in line for line in host.log), f"control: the host did not log it: {host.log}"
    assert blocked.stdout.startswith("ERR"), blocked.stdout
    assert not any(t1 in line for line in host.log), host.log


def _status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def _rss_kib(pid: int) -> int:
    return int(_status(pid)["VmRSS"].split()[0])


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_forwarder_is_confined_and_bounded(rig, pub_probe):
    """The forwarder has no capability, no new privileges and a seccomp
    filter (control: its parent, the supervisor, has capabilities). Against
    a server that accepts and never answers: of 80 host connections at most
    64 reach the sandbox (control: 64 do), its descriptors stay bounded, and
    once the host clients leave their slots free up (a new connection
    reaches the sandbox). Against a server that writes without end to a
    host client that does not read: the forwarder's memory does not grow
    with it (control: the host then reads 32 MiB from it)."""
    rig.config({"bb": {}})
    install_probe(rig, pub_probe)
    hp, fp = free_port(), free_port()
    s = start(rig, [f"{hp}:8000", f"{fp}:8001"],
              "/workspace/pub_probe flood 8001 & exec /workspace/pub_probe hold 8000")
    s.read_until("LISTENING 8000")
    fws = forwarders(rig)
    assert len(fws) == 2, fws
    sup = by_role(rig.lz.root, "supervisor")[0]
    assert int(_status(sup.pid)["CapEff"], 16) != 0, "control: the supervisor has capabilities"
    for f in fws:
        st = _status(f.pid)
        assert (st["CapEff"], st["CapPrm"], st["CapBnd"], st["CapInh"], st["CapAmb"]) == \
            ("0" * 16,) * 5, st
        assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    # Many connections against a server that holds them.
    conns = []
    try:
        for _ in range(80):
            conns.append(socket.create_connection(("127.0.0.1", hp), timeout=5))
        try:
            wait_for(lambda: (s.pump(0.1), "HELD 64" in s.stdout)[1], 20,
                     "64 connections reaching the sandbox")
        except BaseException:
            print("stdout:", s.stdout[-2000:], "stderr:", s.stderr[-2000:])
            print(in_netns(router_netns(rig), ["ss", "-tan"]).stdout[-3000:])
            raise
        time.sleep(2)
        held = [int(n) for n in re.findall(r"HELD (\d+)", s.stdout)]
        assert max(held) == 64, f"{max(held)} connections reached the sandbox"
        fd_counts = [_fds(f.pid) for f in fws]
        assert max(fd_counts) <= 2 * 64 + 16, fd_counts
    finally:
        for c in conns:
            c.close()
    # The host clients left: within the linger time (15 s) the slots free,
    # and a waiting or new connection reaches the sandbox.
    late = socket.create_connection(("127.0.0.1", hp), timeout=5)
    try:
        wait_for(lambda: (s.pump(0.1), "HELD 65" in s.stdout)[1], 40,
                 "a slot freed after the host clients left")
    finally:
        late.close()
    # A flood to host clients that do not read.
    before = {f.pid: _rss_kib(f.pid) for f in fws}
    flooded = [socket.create_connection(("127.0.0.1", fp), timeout=5) for _ in range(8)]
    try:
        time.sleep(5)
        after = {f.pid: _rss_kib(f.pid) for f in fws}
        grown = {pid: after[pid] - before[pid] for pid in before}
        # Control: the flood is real.
        c = flooded[0]
        c.settimeout(10)
        total, end = 0, time.monotonic() + 20
        while total < 32 << 20 and time.monotonic() < end:
            b = c.recv(1 << 20)
            if not b:
                break
            total += len(b)
    finally:
        for c in flooded:
            c.close()
    assert total >= 32 << 20, f"control: only {total} bytes of the flood arrived"
    assert max(grown.values()) < 8 * 1024, f"the forwarder's RSS grew by {grown} KiB"
    stop(s)
