# SPDX-License-Identifier: Apache-2.0
"""Addresses learned for allowed names (issue 25, items 2 and 4; docs/network.md
"Addresses learned for allowed names").

A profile with `allow_hosts` and no prefix rule of its own: lz-dns asks the
fake upstream (netlab's dnsx on UPSTREAM_DNS, `[network] resolvers`), the
keeper puts the answer's admitted addresses into the router's `learned` set
with a timeout, and only then may the sandbox reach them. TCP probes go to
ports of their own (not 80/443: the name check is test_namecheck.py's).

One Domain, held for the whole test, runs three sessions:
  1. before any query: the answer's address and an address outside every
     rule are rejected at once; then the queries; then the learned
     addresses are reached, the denied and private ones are not admitted
     (an allowed prefix's is: control);
  2. ~10 s later: one name asked again (renewal);
  3. SC_LEARN_TTL_MIN + 1 s after session 1: the element of the name asked
     once has expired (rejected, while it worked in session 1), the renewed
     one still works, and a connection opened before the expiry goes on.
Then the denial log holds each rejected connection, with the name when the
keeper knew it, and the refused query.
"""

import json
import os
import re
import shutil
import time

import pytest

import netlab as N
from conftest import ok, profiles_toml, sh

ROUTER = "169.254.77.1"
TTL_MIN = 30  # SC_LEARN_TTL_MIN (src/supervisor/sidecar_internal.h)
QUICK_MS = 1000

RENEW, GONE, DENIED_ADDR = N.LEARN_ADDRS
TCP_ADDRS = [N.HOST_A, N.HOST_B, N.NEITHER, N.PRIVATE] + N.LEARN_ADDRS
TABLE = {
    "api.example.test": {"a": [N.HOST_A], "ttl": 300},
    "renew.example.test": {"a": [RENEW], "ttl": 1},  # bounded up to TTL_MIN
    "gone.example.test": {"a": [GONE], "ttl": 1},
    "ten.example.test": {"a": [N.PRIVATE], "ttl": 300},
    "denied.example.test": {"a": [DENIED_ADDR], "ttl": 300},
    "open.example.test": {"a": [N.HOST_B], "ttl": 300},
}
PROFILE = {
    "allow_hosts": ["api.example.test", "renew.example.test", "gone.example.test",
                    "ten.example.test", "denied.example.test", "open.example.test"],
    "deny_egress": [f"{DENIED_ADDR}/32"],
    "allow_egress": [f"{N.HOST_B}/32"],  # the control: an allowed prefix's address
}

PROBE_LIB = r'''
ms() { awk '{printf "%d", $1*1000}' /proc/uptime; }
tcp() {
    t0=$(ms); o=$(echo "$1" | busybox nc -w 3 "$2" "$3" 2>&1); rc=$?
    echo "T $1 rc=$rc ms=$(( $(ms) - t0 )) $(echo $o)"
}
udp() {
    t0=$(ms); o=$(busybox nslookup -type=a -timeout=1 -retry=1 "$1.lzt" "$2" 2>&1)
    echo "U $1 ms=$(( $(ms) - t0 )) $(echo $o)"
}
q() { echo "Q $1 $(/workspace/dns_probe q ''' + ROUTER + r''' "$2" 1)"; }
'''


@pytest.fixture(scope="module")
def lab(_root):
    net = N.TestNet.create()
    try:
        srv = net.serve([("dnsx", N.UPSTREAM_DNS, 53, TABLE)] +
                        # Ports of their own: test_network.py's session-wide
                        # servers hold TCP_PORT on the shared addresses.
                        [("tcp", a, 0, None) for a in TCP_ADDRS] +
                        [("sink", GONE, N.SINK_PORT, None),
                         ("dns", RENEW, 443, {"*": RENEW}),
                         ("dns", RENEW, N.UDP_PORT, {"*": RENEW}),
                         ("dns", RENEW, 53, {"*": RENEW})])
        # Controls: the test hosts answer from the host's namespace.
        assert N.dns_query(N.UPSTREAM_DNS, 53, "gone.example.test") == GONE
        for a in [N.HOST_A, GONE, RENEW]:
            p = srv.port("tcp", a)
            assert N.tcp_echo(a, p, "control") == f"lzecho tcp {a}:{p} control\n", a
        yield srv
        srv.stop()
    finally:
        net.close()


def session(rig, script) -> dict:
    """Run script (PROBE_LIB's tcp and q) in one session: {key: {rc, ms, out}} for
    connections, {"q:" + key: {rcode, ttl, addrs}} for queries."""
    r = ok(rig.run("learned", sh(PROBE_LIB + script)))
    got = {}
    for line in r.stdout.splitlines():
        m = re.match(r"T (\S+) rc=(\d+) ms=(\d+) ?(.*)", line)
        if m:
            got[m.group(1)] = {"rc": int(m.group(2)), "ms": int(m.group(3)), "out": m.group(4)}
            continue
        m = re.match(r"Q (\S+) rcode=(\d+) an=\d+ addrs=(\S*) ttl=(\d+)", line)
        if m:
            got["q:" + m.group(1)] = {"rcode": int(m.group(2)), "ttl": int(m.group(4)),
                               "addrs": [a for a in m.group(3).split(",") if a]}
    print(r.stdout)
    return got


def reached(got, key, addr) -> bool:
    return got[key]["rc"] == 0 and \
        re.search(rf"lzecho tcp {re.escape(addr)}:\d+ {key}\b", got[key]["out"]) is not None


def refused_at_once(got, key) -> bool:
    return got[key]["rc"] != 0 and "lzecho" not in got[key]["out"] and got[key]["ms"] < QUICK_MS


def denials(rig) -> list:
    out = []
    for f in rig.lz.root.rglob("logs/denials*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def test_learned_addresses(rig, lab, test_images, dns_probe):
    dst = rig.ws / "dns_probe"
    shutil.copy(dns_probe, dst)
    os.chown(dst, rig.lz.user.uid, rig.lz.user.gid)
    text = profiles_toml({"learned": {"image": test_images.busybox, **PROFILE}},
                         network={"resolvers": [N.UPSTREAM_DNS]})
    text = text.replace('"lazaret-trusted-host-config-v1"', '"lazaret-trusted-host-config-v2"')
    rig.lz.write(rig.lz.config_path, text)
    holder = rig.hold("learned")
    port = {a: lab.port("tcp", a) for a in TCP_ADDRS}

    s1 = session(rig, f'''
tcp early {N.HOST_A} {port[N.HOST_A]}
tcp outside {N.NEITHER} {port[N.NEITHER]}
q api api.example.test
q renew renew.example.test
q gone gone.example.test
q ten ten.example.test
q denied denied.example.test
q open open.example.test
q nope nope.example.test
tcp api {N.HOST_A} {port[N.HOST_A]}
tcp renew {RENEW} {port[RENEW]}
tcp gone {GONE} {port[GONE]}
tcp ten {N.PRIVATE} {port[N.PRIVATE]}
tcp denied {DENIED_ADDR} {port[DENIED_ADDR]}
tcp open {N.HOST_B} {port[N.HOST_B]}
udp quic {RENEW}:443
udp udp {RENEW}:{N.UDP_PORT}
udp dns53 {RENEW}:53
''')
    t1 = time.monotonic()
    # A connection opened while the element lives, written to again after it
    # expired: it outlives the element (the sink answers with the byte count
    # after the client's end of stream; a rejected second write resets it).
    long = rig.start("learned", sh(f"{{ echo first; sleep {TTL_MIN + 6}; echo second; }} | "
                                   f"busybox nc -w {TTL_MIN + 20} {GONE} {N.SINK_PORT}"))
    # Before its name was asked, the address is rejected at once; after, it is
    # reached (the control of the same address).
    assert refused_at_once(s1, "early"), s1["early"]
    assert s1["q:api"]["addrs"] == [N.HOST_A], s1["q:api"]
    assert reached(s1, "api", N.HOST_A), s1["api"]
    # An address outside every rule, never learned: rejected at once.
    assert refused_at_once(s1, "outside"), s1["outside"]
    # The TTL told is the bounded one: never longer than the element lives.
    assert 0 < s1["q:renew"]["ttl"] <= 1 and s1["q:renew"]["addrs"] == [RENEW], s1["q:renew"]
    assert reached(s1, "renew", RENEW) and reached(s1, "gone", GONE), (s1["renew"], s1["gone"])
    # Addresses inside a deny prefix or a private range are not admitted for an
    # allowed name (nor reachable); an allowed prefix's address is (control).
    assert s1["q:ten"]["addrs"] == [] and s1["q:denied"]["addrs"] == [], (s1["q:ten"], s1["q:denied"])
    assert refused_at_once(s1, "ten") and refused_at_once(s1, "denied")
    assert s1["q:open"]["addrs"] == [N.HOST_B] and reached(s1, "open", N.HOST_B), (s1["q:open"], s1["open"])
    # QUIC (UDP 443) to a learned address is rejected; UDP to another port of
    # it passes (control).
    heard = [line for line in lab.lines() if line.startswith(f"dns {RENEW}:")]
    assert not [x for x in heard if x.startswith(f"dns {RENEW}:443 ")], heard
    assert [x for x in heard if x.startswith(f"dns {RENEW}:{N.UDP_PORT} ")], heard
    # DNS to a learned address (an allowed host that also answers DNS) is
    # rejected too: names leave only through lz-dns (attack round a25, S3);
    # the control is the other UDP port just above.
    assert not [x for x in heard if x.startswith(f"dns {RENEW}:53 ")], heard
    # A name no rule allows: NXDOMAIN (strict mode).
    assert s1["q:nope"]["rcode"] == 3, s1["q:nope"]

    # Renewal, about a third of the way to the first timeout.
    time.sleep(max(0.0, t1 + 10 - time.monotonic()))
    s2 = session(rig, f"q renew renew.example.test\ntcp renew {RENEW} {port[RENEW]}\n")
    assert s2["q:renew"]["addrs"] == [RENEW] and reached(s2, "renew", RENEW), s2

    # Past the first timeout of both: the one asked once is gone, the renewed
    # one still works.
    time.sleep(max(0.0, t1 + TTL_MIN + 1 - time.monotonic()))
    s3 = session(rig, f"tcp gone {GONE} {port[GONE]}\ntcp renew {RENEW} {port[RENEW]}\n")
    assert refused_at_once(s3, "gone"), s3["gone"]
    assert reached(s3, "renew", RENEW), s3["renew"]
    lr = long.finish()
    assert "lzsink 13" in lr.stdout, f"the connection did not outlive its element: {lr}"
    rig.release(holder)

    # The denial log: each rejected connection, with the name when known.
    log = denials(rig)
    print("\n".join(json.dumps(d) for d in log))

    def find(addr, name=None):
        return [d for d in log if d.get("addr") == addr and d.get("port") == port[addr] and
                (name is None or d.get("name") == name)]

    # Before the query the keeper did not know the address's name.
    assert [d for d in find(N.HOST_A) if d["name"] is None], "the connection before the query"
    assert find(N.NEITHER), "the connection outside every rule is not in the denial log"
    assert find(GONE, "gone.example.test"), "the expired address is not logged with its name"
    assert find(N.PRIVATE, "ten.example.test") and find(DENIED_ADDR, "denied.example.test")
    assert [d for d in log if "nope.example.test" in json.dumps(d)], "the refused query"
    assert [d for d in log if d.get("addr") == RENEW and d.get("port") == 443 and
            "QUIC" in (d.get("rule") or "")], "the QUIC datagram"
    assert [d for d in log if d.get("addr") == RENEW and d.get("port") == 53 and
            "DNS to a learned address" in (d.get("rule") or "")], "the DNS datagram"
