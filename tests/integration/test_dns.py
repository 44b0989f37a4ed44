# SPDX-License-Identifier: Apache-2.0
"""The sandbox's only resolver is the Network Sidecar's lz-dns (issue 25,
item 2; docs/network.md "DNS: the sidecar is the only resolver").

The upstream is a fake resolver on a test host (netlab's dnsx/dnsxt kinds on
UPSTREAM_DNS:53, UDP and TCP) that logs every question it receives, with
names under lzdns.test given TTLs, CNAME chains, TXT and AAAA records and a
truncated UDP answer. Every Domain here asks it: `[network] resolvers =
[UPSTREAM_DNS]`. Queries inside come from dns_probe.c (static, built by the
test): one query over UDP or TCP, or a flood.

Checks share one Domain per profile: `strict` (allow_hosts, so strict
mode), and the controls in `fwd` (the same host rules with dns =
"forward", and a prefix rule that opens the test resolvers' range).
"""

import os
import re
import secrets
import shutil
import time

import pytest

import netlab as N
from conftest import domain_processes, ok, profiles_toml, sh

ROUTER = "169.254.77.1"
QUICK_MS = 500
T_A, T_TXT, T_AAAA = 1, 16, 28

# The fake upstream's names.
TABLE = {
    "api.lzdns.test": {"a": [N.HOST_A], "ttl": 60, "txt": "secret", "aaaa": "2001:db8::7"},
    "free.lzdns.test": {"a": [N.HOST_B], "ttl": 60, "txt": "exfil-channel"},
    "cdn.lzdns.test": {"cname": "edge.tracker.lzdns.test", "ttl": 60},
    "edge.tracker.lzdns.test": {"a": [N.HOST_B], "ttl": 60},
    "tracker.lzdns.test": {"a": [N.HOST_B], "ttl": 60},
    "lo.priv.lzdns.test": {"a": ["127.0.0.1"], "ttl": 60},
    "ten.priv.lzdns.test": {"a": [N.PRIVATE], "ttl": 60},
    "link.priv.lzdns.test": {"a": ["169.254.77.2"], "ttl": 60},
    "slirp.priv.lzdns.test": {"a": ["100.96.0.3"], "ttl": 60},
    "pub.lzdns.test": {"a": [N.NEITHER], "ttl": 60},
    "big.lzdns.test": {"a": [N.HOST_A], "ttl": 60, "tc": True},
}
HOSTS = {
    "allow_hosts": ["api.lzdns.test", "cdn.lzdns.test", "*.priv.lzdns.test", "pub.lzdns.test",
                    "big.lzdns.test"],
    "deny_hosts": ["tracker.lzdns.test", "*.tracker.lzdns.test"],
}


@pytest.fixture(scope="module")
def upstream(_root):
    net = N.TestNet.create()
    try:
        srv = net.serve([("dnsx", N.UPSTREAM_DNS, 53, TABLE),
                         ("dnsxt", N.UPSTREAM_DNS, 53, TABLE)])
        # Positive control: it answers the host.
        assert N.dns_query(N.UPSTREAM_DNS, 53, "api.lzdns.test") == N.HOST_A
        yield srv
        srv.stop()
    finally:
        net.close()


def prepare(rig, test_images, dns_probe):
    dst = rig.ws / "dns_probe"
    shutil.copy(dns_probe, dst)
    os.chown(dst, rig.lz.user.uid, rig.lz.user.gid)
    os.chmod(dst, 0o755)
    profiles = {
        "strict": {"image": test_images.busybox, **HOSTS},
        "fwd": {"image": test_images.busybox, **HOSTS, "dns": "forward",
                "allow_egress": ["203.0.113.0/24"]},
    }
    text = profiles_toml(profiles, network={"resolvers": [N.UPSTREAM_DNS]})
    text = text.replace('"lazaret-trusted-host-config-v1"', '"lazaret-trusted-host-config-v2"')
    rig.lz.write(rig.lz.config_path, text)


def probes(rig, profile, queries) -> dict:
    """queries: {key: (server, name, type, tcp)}; one session runs them all.
    Returns {key: {"rcode": .., "addrs": [..], "ttl": .., "ms": .., "error": ..}}."""
    lines = []
    for key, (server, name, qtype, tcp) in queries.items():
        lines.append(f"echo \"{key} $(/workspace/dns_probe q {server} '{name}' {qtype}"
                     f"{' tcp' if tcp else ''})\"")
    r = ok(rig.run(profile, sh("\n".join(lines))))
    out = {}
    for line in r.stdout.splitlines():
        key, _, rest = line.partition(" ")
        if key not in queries:
            continue
        m = re.match(r"rcode=(\d+) an=(\d+) addrs=(\S*) ttl=(\d+) tc=(\d) ms=(\d+)", rest)
        if m:
            out[key] = {"rcode": int(m.group(1)), "an": int(m.group(2)),
                        "addrs": [a for a in m.group(3).split(",") if a],
                        "ttl": int(m.group(4)), "ms": int(m.group(6)), "error": None}
        else:
            e = re.match(r"error (.+?) ms=(\d+)", rest)
            out[key] = {"error": e.group(1) if e else rest, "ms": int(e.group(2)) if e else -1,
                        "rcode": None, "addrs": []}
    print("\n".join(f"{k}: {v}" for k, v in out.items()))
    assert set(out) == set(queries), f"missing results:\n{r.stdout}\n{r.stderr}"
    return out


def asked(upstream, name: str, since: int = 0) -> list:
    """The upstream's log lines about name (case-insensitive)."""
    return [line for line in upstream.lines()[since:]
            if len(line.split()) >= 4 and line.split()[3].lower() == name.lower()]


def test_strict_mode(rig, upstream, test_images, dns_probe):
    prepare(rig, test_images, dns_probe)
    made_up = f"m{secrets.token_hex(6)}.nowhere.test"
    direct = f"d{secrets.token_hex(6)}.lzdns.test"
    holder = rig.hold("strict")
    since = len(upstream.lines())
    r = probes(rig, "strict", {
        "allowed": (ROUTER, "api.lzdns.test", T_A, False),
        "canon": (ROUTER, "API.LzDns.TEST.", T_A, False),
        "made_up": (ROUTER, made_up, T_A, False),
        "denied": (ROUTER, "tracker.lzdns.test", T_A, False),
        "aaaa": (ROUTER, "api.lzdns.test", T_AAAA, False),
        "txt": (ROUTER, "api.lzdns.test", T_TXT, False),
        "cname_denied": (ROUTER, "cdn.lzdns.test", T_A, False),
        "lo": (ROUTER, "lo.priv.lzdns.test", T_A, False),
        "ten": (ROUTER, "ten.priv.lzdns.test", T_A, False),
        "link": (ROUTER, "link.priv.lzdns.test", T_A, False),
        "slirp": (ROUTER, "slirp.priv.lzdns.test", T_A, False),
        "pub": (ROUTER, "pub.lzdns.test", T_A, False),
        "big": (ROUTER, "big.lzdns.test", T_A, False),
        "tcp": (ROUTER, "api.lzdns.test", T_A, True),
        "tcp_made_up": (ROUTER, made_up, T_A, True),
        "direct": (N.UPSTREAM_DNS, direct, T_A, False),
    })
    NOERROR, NXDOMAIN = 0, 3
    # An allowed name resolves; its case and a trailing dot do not matter.
    assert r["allowed"]["rcode"] == NOERROR and r["allowed"]["addrs"] == [N.HOST_A], r["allowed"]
    assert r["canon"]["rcode"] == NOERROR and r["canon"]["addrs"] == [N.HOST_A], r["canon"]
    assert r["allowed"]["ttl"] <= 60
    # A made-up name: NXDOMAIN at once, and the upstream never hears of it.
    assert r["made_up"]["rcode"] == NXDOMAIN and r["made_up"]["ms"] < QUICK_MS, r["made_up"]
    assert r["tcp_made_up"]["rcode"] == NXDOMAIN, r["tcp_made_up"]
    assert not asked(upstream, made_up, since), asked(upstream, made_up, since)
    assert r["denied"]["rcode"] == NXDOMAIN and not asked(upstream, "tracker.lzdns.test", since)
    # AAAA and TXT of an allowed name: empty, and not asked upstream.
    for k in ("aaaa", "txt"):
        assert r[k]["rcode"] == NOERROR and r[k]["an"] == 0, (k, r[k])
    assert not [x for x in asked(upstream, "api.lzdns.test", since)
                if x.split()[4] in (str(T_TXT), str(T_AAAA))]
    # A chain through a denied name is refused.
    assert r["cname_denied"]["rcode"] == NXDOMAIN and not r["cname_denied"]["addrs"]
    # Private, loopback and Lazaret's own addresses are never told; the
    # same kind of answer with a public test address is (control).
    for k in ("lo", "ten", "link", "slirp"):
        assert r[k]["rcode"] == NOERROR and r[k]["addrs"] == [], (k, r[k])
    assert r["pub"]["addrs"] == [N.NEITHER], r["pub"]
    # A truncated upstream answer is asked again over TCP.
    assert r["big"]["addrs"] == [N.HOST_A], r["big"]
    assert [x for x in asked(upstream, "big.lzdns.test", since) if x.startswith("dnstcp ")]
    # Queries over TCP work.
    assert r["tcp"]["rcode"] == NOERROR and r["tcp"]["addrs"] == [N.HOST_A], r["tcp"]
    # The resolver itself, asked directly: refused (no prefix allows it).
    assert r["direct"]["rcode"] is None, r["direct"]
    assert not asked(upstream, direct), "the sandbox reached the upstream resolver directly"

    # A flood from inside: every query answered, the Domain responsive for
    # another session meanwhile, the upstream sees only allowed names.
    since = len(upstream.lines())
    prefix = f"f{secrets.token_hex(4)}.flood.test"
    flood = rig.start("strict", sh(f"/workspace/dns_probe flood {ROUTER} 3000 {prefix}"))
    time.sleep(0.5)  # the flood under way (it lasts longer than this)
    t0 = time.monotonic()
    ok(rig.run("strict", ["true"]))
    other = time.monotonic() - t0
    fr = flood.finish()
    assert fr.returncode == 0, fr.stderr
    m = re.search(r"sent (\d+) answered (\d+) nxdomain (\d+) servfail (\d+) ms=(\d+)", fr.stdout)
    assert m, fr.stdout
    sent, answered, nxdomain = int(m.group(1)), int(m.group(2)), int(m.group(3))
    # UDP: a few datagrams of a burst may be lost on the way (gVisor's
    # netstack); every answer that came is the refusal, none a SERVFAIL.
    assert sent == 3000 and answered >= 0.95 * sent and nxdomain == answered, fr.stdout
    assert other < 10, f"another session took {other:.1f} s during the flood"
    assert not [x for x in upstream.lines()[since:] if "flood.test" in x]
    print(f"flood: {fr.stdout.strip()}; another session meanwhile: {other:.2f} s")
    rig.release(holder)


def test_forward_mode_controls(rig, upstream, test_images, dns_probe):
    """The same queries under dns = "forward" do leave: the refusals above
    are the strict mode's, not an upstream that ignores them."""
    prepare(rig, test_images, dns_probe)
    made_up = f"m{secrets.token_hex(6)}.nowhere.test"
    direct = f"d{secrets.token_hex(6)}.lzdns.test"
    holder = rig.hold("fwd")
    since = len(upstream.lines())
    r = probes(rig, "fwd", {
        "made_up": (ROUTER, made_up, T_A, False),
        "txt": (ROUTER, "free.lzdns.test", T_TXT, False),
        "free": (ROUTER, "free.lzdns.test", T_A, False),
        "denied": (ROUTER, "tracker.lzdns.test", T_A, False),
        "allowed": (ROUTER, "api.lzdns.test", T_A, False),
        "direct": (N.UPSTREAM_DNS, direct, T_A, False),
    })
    assert r["made_up"]["rcode"] == 3 and asked(upstream, made_up, since), r["made_up"]
    assert r["txt"]["rcode"] == 0 and r["txt"]["an"] == 1, r["txt"]
    assert [x for x in asked(upstream, "free.lzdns.test", since) if x.split()[4] == str(T_TXT)]
    assert r["free"]["addrs"] == [N.HOST_B], r["free"]
    # deny_hosts holds in forward mode too; allowed names as in strict.
    assert r["denied"]["rcode"] == 3 and not asked(upstream, "tracker.lzdns.test", since)
    assert r["allowed"]["addrs"] == [N.HOST_A], r["allowed"]
    # A prefix rule that covers the resolver lets the sandbox ask it directly.
    assert r["direct"]["rcode"] == 3, r["direct"]  # the upstream's own NXDOMAIN
    assert asked(upstream, direct, since)

    # lz-dns killed: the sandbox has no DNS (refused at once, nothing else
    # answers there), the supervisor says so, the Domain goes on.
    dns = domain_processes(rig.lz.root, comm="lz-dns")
    assert len(dns) == 1, dns
    os.kill(dns[0].pid, 9)
    deadline = time.monotonic() + 10
    while domain_processes(rig.lz.root, comm="lz-dns") and time.monotonic() < deadline:
        time.sleep(0.05)
    since = len(upstream.lines())
    r = probes(rig, "fwd", {"udp": (ROUTER, "free.lzdns.test", T_A, False),
                            "tcp": (ROUTER, "free.lzdns.test", T_A, True)})
    for k in ("udp", "tcp"):
        assert r[k]["rcode"] is None and 0 <= r[k]["ms"] < QUICK_MS, (k, r[k])
    assert not asked(upstream, "free.lzdns.test", since)
    logs = "".join(p.read_text(errors="replace")
                   for p in rig.lz.root.rglob("logs/*.log"))
    assert "lz-dns ended" in logs, "the supervisor did not report lz-dns's end"
    rig.release(holder)
