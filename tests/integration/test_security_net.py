# SPDX-License-Identifier: Apache-2.0
"""The host itself is never reachable from the sandbox (issue 9, item 6;
docs/network.md, "Never reachable").

slirp4netns makes the sandbox's connections from the network namespace it
runs in, where every local address (not only 127.0.0.1) reaches the host's
services. Here that namespace is a test namespace, HOSTNS, built like a
small host: loopback, a docker0-like bridge with an address (and its
broadcast address), an AnyIP local route, and a veth link to a second
namespace, REMOTE, that plays "the Internet". `lazaret` is started inside
HOSTNS (nsenter, then the test user), so the Domain's slirp4netns connects
from there; HOSTNS has no route but its links, so nothing can leave the
machine whatever the policy says.

Host-side evidence: one server in HOSTNS bound to 0.0.0.0 (TCP and UDP)
logs every connection or datagram to any address local to HOSTNS —
127.x, the bridge, the AnyIP range, the veth address. Nothing may ever
arrive there from a sandbox. Controls: the same server answers HOSTNS
itself, and a plain slirp4netns in HOSTNS without Lazaret's router (the
weakened layout) reaches it; REMOTE's server is reached from the sandbox
under the same policy, so the refusals are specific.
"""

import fcntl
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

import netlab as N
from conftest import LzUser, domain_processes, ok, sh
from test_network import (ROUTER, ROUTER_TAP, SLIRP_GW, check_reached, check_refused, in_netns,
                          router_netns, run_probes, slirps, tcp, udp)

HOSTNS = "lzt-nsec-h"            # slirp4netns's "host" namespace
REMOTE = "lzt-nsec-r"            # a host elsewhere, reached through HOSTNS
CLIENT = "lzt-nsec-c"            # the weakened layout's client (plain slirp4netns)
BRIDGE = "lzt-br0"
VETH_H, VETH_R = "lzt-nsec-vh", "lzt-nsec-vr"
# RFC 2544 benchmarking space only, in namespaces of this test.
BRIDGE_ADDR = "198.18.99.1"      # the host's "docker0" address
BRIDGE_BCAST = "198.18.99.255"
ANYIP_PREFIX = "198.18.100.0/24"  # `ip route add local ... dev lo`
ANYIP = "198.18.100.77"
VETH_H_ADDR = "198.18.101.1"     # the host's own end of its uplink
VETH_R_ADDR = "198.18.101.2"
REMOTE_ADDR = "198.18.102.7"     # not local to HOSTNS: the positive control
LATE_ADDR = "198.18.103.1"       # added to the host while a sandbox runs
LATE_ANYIP = "198.18.104.0/24"
LATE_ANYIP_ADDR = "198.18.104.9"
PORT = 7171
SLIRP_DNS = "100.96.0.3"
LOCK = N.STATE_DIR / "netsec.lock"
WINDOW_LIMIT_S = 2.0             # a host address added later is denied within this


def ip(*argv, ns=None, check=True):
    pre = ["ip", "-n", ns] if ns else ["ip"]
    return N.sh_run(pre + list(argv), check=check)


class HostLab:
    __test__ = False

    def __init__(self, net: N.TestNet):
        self.net = net          # only for its server helper and log directory
        self.local = None       # the server in HOSTNS, 0.0.0.0
        self.remote = None      # the server in REMOTE
        self.slirp = None       # the weakened layout's slirp4netns

    @staticmethod
    def teardown():
        for ns in (CLIENT, REMOTE, HOSTNS):
            if ns in N.sh_run(["ip", "netns", "list"]).stdout.split():
                for pid in N.sh_run(["ip", "netns", "pids", ns], check=False).stdout.split():
                    try:
                        os.kill(int(pid), 9)
                    except (ProcessLookupError, ValueError):
                        pass
                N.sh_run(["ip", "netns", "delete", ns], check=False)

    def setup(self):
        for ns in (HOSTNS, REMOTE):
            N.sh_run(["ip", "netns", "add", ns])
            ip("link", "set", "lo", "up", ns=ns)
        ip("link", "add", BRIDGE, "type", "bridge", ns=HOSTNS)
        ip("addr", "add", f"{BRIDGE_ADDR}/24", "broadcast", BRIDGE_BCAST, "dev", BRIDGE,
           ns=HOSTNS)
        ip("link", "set", BRIDGE, "up", ns=HOSTNS)
        ip("route", "add", "local", ANYIP_PREFIX, "dev", "lo", ns=HOSTNS)
        ip("link", "add", VETH_H, "netns", HOSTNS, "type", "veth", "peer", "name", VETH_R,
           "netns", REMOTE)
        ip("addr", "add", f"{VETH_H_ADDR}/30", "dev", VETH_H, ns=HOSTNS)
        ip("link", "set", VETH_H, "up", ns=HOSTNS)
        ip("addr", "add", f"{VETH_R_ADDR}/30", "dev", VETH_R, ns=REMOTE)
        ip("addr", "add", f"{REMOTE_ADDR}/32", "dev", VETH_R, ns=REMOTE)
        ip("link", "set", VETH_R, "up", ns=REMOTE)
        ip("route", "add", f"{REMOTE_ADDR}/32", "via", VETH_R_ADDR, ns=HOSTNS)
        ip("route", "add", "198.18.99.0/24", "via", VETH_H_ADDR, ns=REMOTE)
        self.local = self.net.serve([("tcp", "0.0.0.0", PORT, None),
                                     ("dns", "0.0.0.0", PORT, {"*": "192.0.2.1"})],
                                    prefix=["ip", "netns", "exec", HOSTNS], lifetime=900)
        self.remote = self.net.serve([("tcp", REMOTE_ADDR, PORT, None),
                                      ("dns", REMOTE_ADDR, PORT, {"*": REMOTE_ADDR})],
                                     prefix=["ip", "netns", "exec", REMOTE], lifetime=900)

    def close(self):
        if self.slirp and self.slirp.poll() is None:
            self.slirp.kill()
            self.slirp.wait()
        for s in self.net.servers:
            s.stop()
        self.net.servers = []
        self.teardown()


def client(ns, addr, port, token, udp_=False, timeout=2.0) -> str:
    """From namespace ns: one TCP echo exchange (or a DNS query), as the
    server answered it, or the error."""
    fn = "dns_query" if udp_ else "tcp_echo"
    args = f"{addr!r}, {port}, {token!r}" if not udp_ else f"{addr!r}, {port}, {token + '.lzt'!r}"
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import netlab\n"
            f"try:\n    print(netlab.{fn}({args}, timeout={timeout}))\n"
            f"except OSError as e:\n    print('error', type(e).__name__, e)\n")
    p = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", code],
                       capture_output=True, text=True, timeout=30,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    return (p.stdout + p.stderr).strip()


@pytest.fixture(scope="module")
def hostlab(_root):
    N.STATE_DIR.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + 600
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise RuntimeError(f"another test session holds {LOCK}")
            time.sleep(0.5)
    net = N.TestNet()  # no create(): only its server helper and a log directory
    net.dir = Path(__import__("tempfile").mkdtemp(prefix="lzt-nsec-"))
    lab = HostLab(net)
    try:
        HostLab.teardown()  # ours by name, left by a run that died (we hold the lock)
        lab.setup()
        yield lab
    finally:
        lab.close()
        for f in net.dir.iterdir():
            f.unlink()
        net.dir.rmdir()
        os.close(fd)


class _InHostNs:
    """Starts `lazaret` inside HOSTNS as lz's user (nsenter by root, then
    setpriv): the Domain's supervisor and slirp4netns live there. Quacks like
    Lz for Session."""

    def __init__(self, lz, wrapper: Path):
        self.bin = wrapper
        self.user = LzUser(name="root", uid=0, gid=0, home=Path("/root"), groups=())
        self.env = lz.env
        self.home = lz.home
        self.root = lz.root


def hold_in_hostns(rig, hostlab, profile):
    lz = rig.lz
    wrapper = hostlab.net.dir / f"lazaret-in-{HOSTNS}"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec nsenter --net=/run/netns/{HOSTNS} -- setpriv --reuid={lz.user.uid} "
        f"--regid={lz.user.gid} --init-groups -- {lz.bin} \"$@\"\n")
    wrapper.chmod(0o700)
    holder = rig.hold(profile, lz=_InHostNs(lz, wrapper))
    # The layout under test: this Domain's slirp4netns connects from HOSTNS.
    sl = slirps(rig)
    assert len(sl) == 1, f"expected one slirp4netns of this Domain: {sl}"
    want = os.stat(f"/run/netns/{HOSTNS}").st_ino
    got = os.stat(f"/proc/{sl[0].pid}/ns/net").st_ino
    assert got == want, "the Domain's slirp4netns is not in the test's host namespace"
    return holder


def in_host_local(router, addr) -> bool:
    """Whether the router's host_local set holds addr (elements merge into
    ranges, so ask nftables, not the listing)."""
    return in_netns(router, ["nft", "get", "element", "ip", "lazaret", "host_local",
                             "{", addr, "}"], check=False).returncode == 0


def _host_probes():
    """Every way to the host itself: its interface addresses, broadcast,
    AnyIP, loopback aliases, 0.0.0.0, the slirp host aliases, the router."""
    return [
        tcp("bridge-tcp", BRIDGE_ADDR, PORT), udp("bridge-udp", BRIDGE_ADDR, PORT),
        udp("bcast-udp", BRIDGE_BCAST, PORT),
        tcp("anyip-tcp", ANYIP, PORT), udp("anyip-udp", ANYIP, PORT),
        tcp("veth-tcp", VETH_H_ADDR, PORT), udp("veth-udp", VETH_H_ADDR, PORT),
        tcp("lo-tcp", "127.0.0.1", PORT), udp("lo-udp", "127.0.0.1", PORT),
        tcp("lo2-tcp", "127.1.2.3", PORT),
        tcp("zero-tcp", "0.0.0.0", PORT),
        tcp("gw-tcp", SLIRP_GW, PORT), udp("gw-udp", SLIRP_GW, PORT),
        tcp("alias-tcp", "10.0.2.2", PORT),
        tcp("dns-alias-tcp", SLIRP_DNS, PORT),
        tcp("router-tcp", ROUTER, PORT), tcp("router-tap-tcp", ROUTER_TAP, PORT),
    ]


# ---- the weakened layout: slirp4netns without Lazaret's router -------------------

def test_control_plain_slirp_reaches_the_host(hostlab):
    """Without the defence: HOSTNS's server answers HOSTNS, and a client
    behind a plain slirp4netns (--disable-host-loopback, as Lazaret starts
    it) reaches every host-local address — only slirp's host alias is
    closed. This is the attack the router must stop."""
    loc = hostlab.local
    for a in (BRIDGE_ADDR, ANYIP, VETH_H_ADDR, "127.0.0.1"):
        t = "c" + secrets.token_hex(4)
        assert client(HOSTNS, a, PORT, t) == f"lzecho tcp 0.0.0.0:{PORT} {t}", a
    N.sh_run(["ip", "netns", "add", CLIENT])
    ip("link", "set", "lo", "up", ns=CLIENT)
    r, w = os.pipe()
    hostlab.slirp = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{HOSTNS}", "slirp4netns", "--configure", "--mtu=65520",
         "--disable-host-loopback", "--cidr=100.96.0.0/24", f"--ready-fd={w}",
         "--netns-type=path", f"/run/netns/{CLIENT}", "tap0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        pass_fds=(w,))
    os.close(w)
    try:
        assert os.read(r, 1) == b"1", "slirp4netns did not become ready"
    finally:
        os.close(r)
    try:
        reached, since = {}, len(loc.lines())
        for a in (BRIDGE_ADDR, ANYIP, VETH_H_ADDR):
            t = "w" + secrets.token_hex(4)
            reached[a] = (client(CLIENT, a, PORT, t), t)
        t_gw = "g" + secrets.token_hex(4)
        gw = client(CLIENT, SLIRP_GW, PORT, t_gw)
        log = loc.lines()[since:]
    finally:
        hostlab.slirp.kill()
        hostlab.slirp.wait()
        hostlab.slirp = None
        N.sh_run(["ip", "netns", "delete", CLIENT], check=False)
    for a, (got, t) in reached.items():
        assert got == f"lzecho tcp 0.0.0.0:{PORT} {t}", f"plain slirp did not reach {a}: {got}"
        assert any(t in line for line in log), f"the host's server did not log {a}: {log}"
    assert not gw.startswith("lzecho") and not any(t_gw in line for line in log), \
        f"slirp's host alias was reached: {gw}"


# ---- the sandbox -----------------------------------------------------------------

@pytest.mark.parametrize("policy", ["everything", "exact"])
def test_host_local_addresses_are_refused(rig, hostlab, policy):
    """Under allow 0.0.0.0/0, and under allows of exactly the host's
    addresses: every host-local destination is refused at once and HOSTNS's
    server receives nothing; REMOTE, outside the host, is reached."""
    if policy == "everything":
        allow = ["0.0.0.0/0"]
    else:
        allow = [f"{BRIDGE_ADDR}/32", f"{BRIDGE_BCAST}/32", f"{ANYIP}/32", ANYIP_PREFIX,
                 f"{VETH_H_ADDR}/32", f"{REMOTE_ADDR}/32"]
    rig.config({"bb": {"allow_egress": allow}})
    holder = hold_in_hostns(rig, hostlab, "bb")
    loc = hostlab.local
    since = len(loc.lines())
    probes = _host_probes() + [tcp("remote-tcp", REMOTE_ADDR, PORT),
                               udp("remote-udp", REMOTE_ADDR, PORT)]
    got = run_probes(rig, "bb", probes)
    rig.release(holder)
    problems = []
    for name in ("remote-tcp", "remote-udp"):
        problems += check_reached(got[name], hostlab.remote)
    for p in probes:
        if not p.name.startswith("remote-"):
            problems += check_refused(p, loc, since, exclusive=True)
    assert not problems, "\n".join(problems)


def test_addresses_added_later_are_refused(rig, hostlab):
    """A host address and an AnyIP route added while the sandbox runs are
    denied within WINDOW_LIMIT_S (the watcher's window, measured from the
    change to the element in the router's set), then refused like the
    others; REMOTE stays reachable."""
    rig.config({"bb": {"allow_egress": ["0.0.0.0/0"]}})
    holder = hold_in_hostns(rig, hostlab, "bb")
    router = router_netns(rig)
    for a in (BRIDGE_ADDR, BRIDGE_BCAST, ANYIP, VETH_H_ADDR, "127.1.2.3"):
        assert in_host_local(router, a), f"{a} is not in the router's host_local set"
    for a in (LATE_ADDR, LATE_ANYIP_ADDR, REMOTE_ADDR):
        assert not in_host_local(router, a), f"{a} is in host_local before it is local"
    windows = {}
    try:
        for what, change, want in (
                ("address", ["addr", "add", f"{LATE_ADDR}/32", "dev", BRIDGE], LATE_ADDR),
                ("local route", ["route", "add", "local", LATE_ANYIP, "dev", "lo"],
                 LATE_ANYIP_ADDR)):
            t0 = time.monotonic()
            ip(*change, ns=HOSTNS)
            while not in_host_local(router, want):
                assert time.monotonic() - t0 < 10, f"{want} never joined host_local"
                time.sleep(0.005)
            windows[what] = time.monotonic() - t0
        print(f"window (change → denied, upper bound incl. polling): "
              + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in windows.items()))
        for a in (LATE_ADDR, LATE_ANYIP_ADDR):
            t = "l" + secrets.token_hex(4)
            assert client(HOSTNS, a, PORT, t) == f"lzecho tcp 0.0.0.0:{PORT} {t}", a
        loc = hostlab.local
        since = len(loc.lines())
        probes = [tcp("late-tcp", LATE_ADDR, PORT), udp("late-udp", LATE_ADDR, PORT),
                  tcp("late-anyip-tcp", LATE_ANYIP_ADDR, PORT),
                  tcp("remote-tcp", REMOTE_ADDR, PORT)]
        got = run_probes(rig, "bb", probes)
    finally:
        ip("addr", "del", f"{LATE_ADDR}/32", "dev", BRIDGE, ns=HOSTNS, check=False)
        ip("route", "del", "local", LATE_ANYIP, "dev", "lo", ns=HOSTNS, check=False)
    rig.release(holder)
    problems = check_reached(got["remote-tcp"], hostlab.remote)
    for name in ("late-tcp", "late-udp", "late-anyip-tcp"):
        problems += check_refused(got[name], loc, since, exclusive=True)
    slow = {k: v for k, v in windows.items() if v >= WINDOW_LIMIT_S}
    assert not slow, f"denied only after {slow} s (limit {WINDOW_LIMIT_S} s)"
    assert not problems, "\n".join(problems)


def test_watcher_gone_means_no_egress(rig, hostlab):
    """Fail closed: if the address watcher ends, the sandbox loses its
    egress (slirp4netns is ended), so a host address added afterwards
    cannot be reached. Control: REMOTE is reached before."""
    rig.config({"bb": {"allow_egress": ["0.0.0.0/0"]}})
    holder = hold_in_hostns(rig, hostlab, "bb")
    got = run_probes(rig, "bb", [tcp("before", REMOTE_ADDR, PORT)])
    problems = check_reached(got["before"], hostlab.remote)
    watchers = domain_processes(rig.lz.root, comm="lz-netwatch")
    assert len(watchers) == 1, f"expected one address watcher: {watchers}"
    os.kill(watchers[0].pid, 9)
    deadline = time.monotonic() + 10
    while slirps(rig) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not slirps(rig), "slirp4netns still runs after the watcher ended"
    since = len(hostlab.remote.lines())
    r = rig.run("bb", sh(f"echo x | busybox nc -w 2 {REMOTE_ADDR} {PORT}; echo rc=$?"))
    rig.release(holder)
    assert "lzecho" not in r.stdout, f"egress after the watcher ended: {r.stdout}"
    assert len(hostlab.remote.lines()) == since, hostlab.remote.lines()[since:]
    assert not problems, "\n".join(problems)


# ---- configuration ---------------------------------------------------------------

REFUSED = [
    ("127.0.0.0/8", "127.0.0.0/8"), ("127.1.2.3/32", "127.0.0.0/8"),
    ("0.0.0.0/8", "0.0.0.0/8"), ("0.0.0.0/32", "0.0.0.0/8"),
    ("169.254.77.0/30", "169.254.0.0/16"), ("169.254.77.1/32", "169.254.0.0/16"),
    ("169.254.0.0/16", "169.254.0.0/16"),
    ("100.96.0.0/24", "100.96.0.0/24"), ("100.96.0.2/32", "100.96.0.0/24"),
    ("224.0.0.0/4", "224.0.0.0/4"), ("240.0.0.0/4", "240.0.0.0/4"),
    ("255.255.255.255/32", "240.0.0.0/4"),
]


def _line_col(path: Path, needle: str):
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if f'"{needle}"' in line:
            return i, line.index(f'"{needle}"') + 1
    raise AssertionError(f"{needle} not in {path}")


@pytest.mark.parametrize("where", ["profile", "default_allow"])
@pytest.mark.parametrize("prefix,range_", REFUSED, ids=[p for p, _ in REFUSED])
def test_never_reachable_allow_is_refused(rig, prefix, range_, where):
    """`config check` exits 1 and `run` 125, both naming the file, line and
    column, the key path, the range and what to do; no Domain starts."""
    if where == "profile":
        path = rig.config({"bb": {"allow_egress": ["203.0.113.0/24", prefix]}})
        key = "profiles.bb.allow_egress[1]"
    else:
        path = rig.config({"bb": {}}, network={"default_allow": [prefix]})
        key = "network.default_allow[0]"
    line, col = _line_col(path, prefix)
    c = rig.lz.run(["config", "check", "bb", "--workspace", rig.ws])
    r = rig.run("bb", ["true"])
    assert c.returncode == 1, f"config check: exit {c.returncode}\n{c.stdout}\n{c.stderr}"
    assert r.returncode == 125, f"run: exit {r.returncode}\n{r.stderr}"
    for what, text in (("config check", c.stdout + c.stderr), ("run", r.stderr)):
        want = f"{path}:{line}:{col}: {key}: "
        assert want in text, f"{what}: no {want!r} in: {text}"
        assert f"inside {range_}" in text and "no sandbox can reach it" in text, text
        assert "remove it from the list" in text, f"{what}: no advice: {text}"
    assert not domain_processes(rig.lz.root), "a Domain started for a refused configuration"


def test_prefixes_containing_never_reachable_ranges_are_accepted(rig):
    rig.config({"bb": {"allow_egress": ["0.0.0.0/0", "100.0.0.0/8", "169.0.0.0/8"],
                       "deny_egress": ["127.0.0.0/8", "169.254.77.0/30", "100.96.0.0/24"]}})
    c = ok(rig.lz.run(["config", "check", "bb", "--workspace", rig.ws]))
    for p in ("0.0.0.0/0", "100.0.0.0/8", "169.0.0.0/8"):
        assert p in c.stdout, c.stdout
    # A Domain starts with them (denies inside Lazaret's own links do not
    # replace the router's link routes).
    r = ok(rig.run("bb", sh("busybox ip route; echo started")))
    assert "started" in r.stdout, r.stdout
