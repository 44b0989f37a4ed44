# SPDX-License-Identifier: Apache-2.0
"""DNS answer latency: the Network Sidecar's resolver (lz-dns) against a
direct query to the same upstream from the host, same client, same run
(bench/README.md; docs/network.md "DNS: the sidecar is the only resolver").

Started by bench/network/dns.sh as root. The upstream is the tests' fake
resolver (tests/integration/netlab.py dnsx on UPSTREAM_DNS:53, a test host
in a network namespace of this machine). The client is
tests/integration/dns_probe.c (static; `lat`: one UDP query after the
other, microseconds from send to answer):

  sidecar, allowed  inside a sandbox (profile with allow_hosts, strict):
                    lz-dns asks the upstream, the keeper puts the address
                    into the router's set, then the answer is released
  sidecar, refused  a name no rule allows: answered NXDOMAIN by lz-dns
  direct            the same client on the host, to the upstream itself

Samples of the sides alternate in batches. Rewrites the "DNS" section of
docs/performance.md.
"""

import argparse
import json
import os
import pwd
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "launch"))
sys.path.insert(0, str(REPO / "tests" / "integration"))
import launch as L  # noqa: E402
import netlab as N  # noqa: E402

NAME = "api.lzbench.test"
TABLE = {NAME: {"a": [N.HOST_A], "ttl": 300}}
ROUTER = "169.254.77.1"


def parse(out: str, what: str, want_rcode: int) -> list:
    rows = [line.split() for line in out.splitlines() if line.startswith("LAT ")]
    lost = sum(1 for line in out.splitlines() if line.startswith("LOST"))
    if not rows:
        L.die(f"{what}: no samples:\n{out[-2000:]}")
    bad = [r for r in rows if int(r[2]) != want_rcode]
    if bad:
        L.die(f"{what}: rcode {bad[0][2]} instead of {want_rcode}")
    if lost:
        L.say(f"{what}: {lost} queries lost")
    return [int(r[1]) / 1000.0 for r in rows]


def bench(args):
    binary = L.ensure_binary()
    L.ensure_image()
    L.ensure_user(L.BENCH_USER)
    pw = pwd.getpwnam(L.BENCH_USER)
    ids = (pw.pw_uid, pw.pw_gid)
    if L.user_procs(pw.pw_uid):
        L.die(f"{L.BENCH_USER} already runs processes {L.user_procs(pw.pw_uid)}")
    root = Path(tempfile.mkdtemp(prefix="lzbench-", dir="/tmp"))
    os.chmod(root, 0o755)
    user = L.User(L.BENCH_USER, root / "home", root / "run")
    net = sleeper = None
    with L.M.tun_usable():  # the tests' machine-wide bookkeeping
        try:
            net = N.TestNet.create()
            srv = net.serve([("dnsx", N.UPSTREAM_DNS, 53, TABLE)], lifetime=3600)
            for d, mode in ((user.home, 0o755), (user.runtime, 0o700)):
                L.mkdir_user(d, mode, ids)
            for d, mode in ((".config", 0o755), (".config/lazaret", 0o700), ("ws", 0o755),
                            ("logs", 0o755)):
                L.mkdir_user(user.home / d, mode, ids)
            probe = user.home / "ws" / "dns_probe"
            subprocess.run(["gcc", "-static", "-O2", "-o", str(probe),
                            str(REPO / "tests" / "integration" / "dns_probe.c")], check=True)
            os.chown(probe, *ids)
            os.chmod(probe, 0o755)
            cfg = user.home / ".config/lazaret/config.toml"
            cfg.write_text('schema = "lazaret-trusted-host-config-v2"\n'
                           "[network]\n"
                           f'resolvers = ["{N.UPSTREAM_DNS}"]\n'
                           "[profiles.benchdns]\n"
                           f'image = "{L.IMAGE_REF}"\n'
                           f'allow_hosts = ["{NAME}"]\n')
            os.chown(cfg, *ids)
            os.chmod(cfg, 0o600)
            lz = L.Lazaret(binary, user, user.home / "ws", user.home / "logs")
            sleeper, _ = lz.start("run", "benchdns", "--", "sleep", "3600")

            def inside(name, n):
                _, _, out, _ = lz.run("run", "benchdns", "--", "/workspace/dns_probe", "lat",
                                      ROUTER, name, str(n), timeout=600)
                return out

            def host(name, n):
                p = subprocess.run([str(probe), "lat", N.UPSTREAM_DNS, name, str(n)],
                                   env=user.env(), stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=600, **user.creds())
                if p.returncode != 0:
                    L.die(f"host client exited {p.returncode}: {p.stderr}")
                return p.stdout

            L.say("warm-up")
            parse(inside(NAME, 3), "warm-up", 0)
            res = {"allowed": [], "refused": [], "direct": []}
            left = args.queries
            while left > 0:
                k = min(50, left)
                left -= k
                res["allowed"] += parse(inside(NAME, k), "sidecar, allowed", 0)
                res["refused"] += parse(inside("made-up.lzbench.test", k), "sidecar, refused", 3)
                res["direct"] += parse(host(NAME, k), "direct", 0)
            if sleeper.poll() is not None:
                L.die("the Domain did not stay up through the samples\n" + lz.diagnose())
            asked = [line for line in srv.lines() if "made-up" in line]
            if asked:
                L.die(f"the upstream was asked for the refused name: {asked[:3]}")
            return res, binary
        finally:
            L.end_bench(sleeper, user.uid, root, False, net)


def stats(v):
    v = sorted(v)
    return {"n": len(v), "median": statistics.median(v), "mean": statistics.mean(v),
            "p90": v[int(0.9 * (len(v) - 1))], "min": v[0], "max": v[-1]}


def section(res, meta, args):
    d = res["direct"]["median"]
    lines = [
        "## DNS",
        "",
        f"Measured {meta['date']} on {meta['nproc']} CPUs ({meta['cpu']}), kernel "
        f"{meta['kernel']}, `{meta['runsc']}`, lazaret {meta['version']} (release build, "
        f"revision {meta['revision']}). Re-run: `sudo bench/network/dns.sh` "
        f"({args.queries} queries per side, in alternating batches of 50).",
        "",
        "Upstream: the tests' fake resolver (`tests/integration/netlab.py` dnsx, Python) on a "
        "test host in a network namespace of this machine. Client: "
        "`tests/integration/dns_probe.c lat` (one UDP query after the other, time from send "
        "to answer). Sidecar: inside a sandbox of the busybox test image, profile "
        f"`allow_hosts = [\"{NAME}\"]` (strict), `[network] resolvers` = the fake upstream; "
        "each allowed query is asked upstream (lz-dns keeps no cache) and its address put "
        "into the router's `learned` set by the keeper before the answer is released. "
        "Direct: the same client on the host, to the upstream itself. Times in ms; ratio = "
        "sidecar / direct (medians).",
        "",
        "| query | median | mean | p90 | ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    what = {"allowed": "through the sidecar, allowed name (upstream + learned)",
            "refused": "through the sidecar, unlisted name (NXDOMAIN, never forwarded)",
            "direct": "direct from the host to the upstream"}
    for k in ("allowed", "refused", "direct"):
        s = res[k]
        lines.append(f"| {what[k]} | {s['median']:.2f} | {s['mean']:.2f} | {s['p90']:.2f} | "
                     f"{s['median'] / d:.2f}x |")
    a, f = res["allowed"]["median"], res["refused"]["median"]
    lines += [
        "",
        f"The unlisted name is the floor of any answer from inside ({f:.2f} ms: gVisor's "
        "netstack, the veth, lz-dns's decode and encode); an allowed name adds "
        f"{a - f:.2f} ms to it (the upstream round trip and the keeper's), "
        f"{a - d:.2f} ms over the direct query in all.",
        "",
        "An allowed answer costs, beyond the direct query: gVisor's netstack and the veth "
        "to the router, lz-dns's decoding and encoding, a fresh upstream socket from the "
        "host's namespace, and the keeper's round trip (an nftables element added over "
        "netlink) before the answer leaves. A refused name never leaves the machine.",
        "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="Lazaret DNS latency benchmark (bench/README.md)")
    ap.add_argument("--queries", type=int, default=500, help="queries per side (500)")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    ap.add_argument("--json", metavar="FILE", help="also write every sample to FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        L.die("run as root (sudo bench/network/dns.sh)")
    if args.queries < 2:
        L.die("--queries needs at least 2")
    raw, binary = bench(args)
    res = {k: stats(v) for k, v in raw.items()}
    for k, s in res.items():
        print(f"{k:8} median {s['median']:7.3f} ms  mean {s['mean']:7.3f} ms  "
              f"p90 {s['p90']:7.3f} ms  ratio {s['median'] / res['direct']['median']:.2f}x")
    meta = L.run_meta(binary)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": res, "raw": raw},
                                              indent=2) + "\n")
    if not args.no_write:
        L.write_section("DNS", section(res, meta, args))
        L.say(f"wrote the DNS section of {L.DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
