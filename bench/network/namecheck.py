# SPDX-License-Identifier: Apache-2.0
"""Name-check benchmark (bench/README.md; docs/network.md "The name on the
connection"): HTTPS download throughput to an address learned for an
allowed name, whose TCP 443 goes through lz-namecheck, against an address
the prefix policy allows, which goes through slirp4netns — the same TLS
server, the same client, the same sandbox, the same run.

Started by bench/network/namecheck.sh as root. The server is a test host in
a network namespace of this machine (tests/integration/netlab.py): one
Python TLS server listening on two of its addresses, netlab.HOST_A (the
name `bench.test` resolves to it through the Domain's resolver, whose
upstream is the test nameserver) and netlab.HOST_B (in allow_egress); per
connection it completes the handshake and sends --mib MiB, then closes.
The client, inside a sandbox of the Debian test image joining a running
Domain, is a Python script (ssl, certificate checks off: the certificate
is the test's own): connect, handshake with server_name bench.test, read to
the end; MiB/s from connect to the last byte. Samples of the two paths
alternate. Writes the "Name check" section of docs/performance.md.
"""

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "launch"))
sys.path.insert(0, str(REPO / "bench" / "network"))
sys.path.insert(0, str(REPO / "tests" / "integration"))
import launch as L  # noqa: E402  (user, build, image and process helpers)
import netlab as N  # noqa: E402  (the test host)
import network as NB  # noqa: E402  (the Debian image)

NAME = "bench.test"
DEBIAN_REF = f"oci:{L.IMAGES}/debian:bookworm"
DOC = L.DOC

SERVER = r'''
import json, socket, ssl, sys, threading
cfg = json.loads(sys.argv[1])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cfg["cert"], cfg["key"])
chunk = b"x" * (1 << 20)
def conn(c):
    try:
        s = ctx.wrap_socket(c, server_side=True)
        for _ in range(cfg["mib"]):
            s.sendall(chunk)
        s.close()
    except Exception:
        c.close()
def serve(addr):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((addr, 443))
    l.listen(16)
    while True:
        c, _ = l.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()
for a in cfg["addrs"]:
    threading.Thread(target=serve, args=(a,), daemon=True).start()
print("READY", flush=True)
sys.stdin.read()
'''

CLIENT = r'''
import socket, ssl, sys, time
addr, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# The name is resolved first (outside the clock): the resolver learns it.
socket.getaddrinfo(name, 443, socket.AF_INET)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
buf = bytearray(1 << 20)
for _ in range(n):
    t0 = time.monotonic()
    with socket.create_connection((addr, 443), timeout=120) as raw:
        with ctx.wrap_socket(raw, server_hostname=name) as s:
            total = 0
            while True:
                k = s.recv_into(buf)
                if not k:
                    break
                total += k
    print(f"TPUT {total} {t0:.6f} {time.monotonic():.6f}", flush=True)
'''


def parse(out: str, what: str, size: int) -> list:
    rows = [line.split()[1:] for line in out.splitlines() if line.startswith("TPUT ")]
    if not rows:
        L.die(f"{what}: no samples in the output:\n{out[-2000:]}")
    res = []
    for b, t0, t1 in rows:
        if int(b) != size:
            L.die(f"{what}: downloaded {b} bytes, want {size}")
        res.append(int(b) / (float(t1) - float(t0)) / (1024 * 1024))
    return res


def bench(args):
    binary = L.ensure_binary()
    NB.ensure_debian_image()
    L.ensure_user(L.BENCH_USER)
    pw = pwd.getpwnam(L.BENCH_USER)
    ids = (pw.pw_uid, pw.pw_gid)
    if L.user_procs(pw.pw_uid):
        L.die(f"{L.BENCH_USER} already runs processes {L.user_procs(pw.pw_uid)}: is another "
              "benchmark running? (this one needs the user to itself)")
    size = args.mib * 1024 * 1024
    root = Path(tempfile.mkdtemp(prefix="lzbench-", dir="/tmp"))
    os.chmod(root, 0o755)
    L.say(f"working in {root}")
    user = L.User(L.BENCH_USER, root / "home", root / "run")
    net = sleeper = None
    with L.M.tun_usable():  # the tests' machine-wide bookkeeping
        try:
            L.say("creating the test host (waits while a test session holds it)")
            net = N.TestNet.create()
            cert, key = root / "bench.pem", root / "bench.key"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
                            f"/CN={NAME}", "-addext", f"subjectAltName=DNS:{NAME}", "-keyout",
                            str(key), "-out", str(cert)], check=True, capture_output=True)
            net.serve([("dns", N.DNS_SERVER, 53, {NAME: N.HOST_A})], lifetime=3600)
            proc = subprocess.Popen(
                ["ip", "netns", "exec", N.NS, "/usr/bin/python3", "-c", SERVER,
                 json.dumps({"addrs": [N.HOST_A, N.HOST_B], "cert": str(cert),
                             "key": str(key), "mib": args.mib})],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            if not proc.stdout.readline().startswith("READY"):
                L.die(f"the TLS server did not start: {proc.stderr.read()}")
            net.servers.append(N.Server(proc, root / "none.log", []))
            for d, mode in ((user.home, 0o755), (user.runtime, 0o700)):
                L.mkdir_user(d, mode, ids)
            for d, mode in ((".config", 0o755), (".config/lazaret", 0o700), ("ws", 0o755),
                            ("logs", 0o755)):
                L.mkdir_user(user.home / d, mode, ids)
            cfg = user.home / ".config/lazaret/config.toml"
            cfg.write_text('schema = "lazaret-trusted-host-config-v2"\n'
                           "[network]\n"
                           f'resolvers = ["{N.DNS_SERVER}"]\n'
                           "[profiles.benchnc]\n"
                           f'image = "{DEBIAN_REF}"\n'
                           f'allow_hosts = ["{NAME}"]\n'
                           f'allow_egress = ["{N.HOST_B}/32"]\n')
            os.chown(cfg, *ids)
            os.chmod(cfg, 0o600)
            ws = user.home / "ws" / "client.py"
            ws.write_text(CLIENT)
            os.chown(ws, *ids)
            lz = L.Lazaret(binary, user, user.home / "ws", user.home / "logs")
            sleeper, _ = lz.start("run", "benchnc", "--", "sleep", "3600")

            def inside(addr, n):
                _, _, out, _ = lz.run("run", "benchnc", "--", "python3", "/workspace/client.py",
                                      addr, NAME, str(n), timeout=900)
                return out

            L.say("warm-up")
            sides = (("namecheck", N.HOST_A), ("slirp", N.HOST_B))
            for side, addr in sides:
                parse(inside(addr, 1), f"warm-up {side}", size)
            coord = L.coordinators(user.uid)
            res = {side: [] for side, _ in sides}
            L.say(f"{args.downloads} downloads of {args.mib} MiB each way")
            for _ in range(args.downloads):
                for side, addr in sides:
                    res[side] += parse(inside(addr, 1), side, size)
            if sleeper.poll() is not None or L.coordinators(user.uid) != coord:
                L.die("the Domain did not stay up through the samples\n" + lz.diagnose())
            return res, binary
        finally:
            L.end_bench(sleeper, user.uid, root, args.keep, net)


stats = L.stats


def section(res, meta, args):
    nc, sl = res["namecheck"], res["slirp"]
    ratio = nc["median"] / sl["median"]
    return "\n".join([
        "## Name check",
        "",
        f"Measured {meta['date']} on {meta['nproc']} CPUs ({meta['cpu']}), kernel "
        f"{meta['kernel']}, `{meta['runsc']}`, lazaret {meta['version']} (release build, "
        f"revision {meta['revision']}). Re-run: `sudo bench/network/namecheck.sh` "
        f"({nc['n']} HTTPS downloads of {args.mib} MiB each way, interleaved).",
        "",
        "One TLS server (Python `ssl`) in a test host's network namespace "
        "(`tests/integration/netlab.py`) on two addresses; one sandbox of the Debian 12 test "
        f"image with `allow_hosts = [\"{NAME}\"]` (the name resolves to the first address "
        "through the Domain's resolver, upstream the test nameserver) and "
        "`allow_egress = [the second address /32]`. Client: Python `ssl` in the sandbox, "
        f"server_name `{NAME}`, from connect to the last byte. Learned: TCP 443 redirected "
        "by the router to lz-namecheck, which checks the ClientHello's name and relays "
        "from the host's namespace. Prefix-allowed: forwarded by the router to "
        "slirp4netns.",
        "",
        "| path | unit | median | mean | min | max |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        f"| learned address (lz-namecheck) | MiB/s | {nc['median']:.1f} | {nc['mean']:.1f} | "
        f"{nc['min']:.1f} | {nc['max']:.1f} |",
        f"| prefix-allowed address (slirp4netns) | MiB/s | {sl['median']:.1f} | "
        f"{sl['mean']:.1f} | {sl['min']:.1f} | {sl['max']:.1f} |",
        "",
        f"Ratio learned / prefix-allowed (medians): **{ratio:.2f}x** (goal: at least 0.8x).",
        "",
        "Reading the numbers: both paths cross gVisor's netstack and the router; after it "
        "the learned path has one user-space relay in the host's namespace (lz-namecheck: "
        "recv/send through 64 KiB buffers, the name checked once per connection), the "
        "prefix-allowed path slirp4netns, which terminates the sandbox's TCP in user space. "
        "The name check costs one ClientHello parse and one route lookup per connection, "
        "nothing per byte. At these rates the client (Python `ssl` inside gVisor) is the "
        "bottleneck on this 2-CPU machine, hence the spread between samples.",
        "",
    ])


def main():
    ap = argparse.ArgumentParser(description="Lazaret name-check benchmark (bench/README.md)")
    ap.add_argument("--mib", type=int, default=100, help="MiB per download (100)")
    ap.add_argument("--downloads", type=int, default=5, help="downloads each way (5)")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    ap.add_argument("--keep", action="store_true", help="keep the /tmp/lzbench-* directory")
    ap.add_argument("--json", metavar="FILE", help="also write every sample to FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        L.die("run as root (sudo bench/network/namecheck.sh): it creates the unprivileged "
              f"user {L.BENCH_USER} and the test host's network namespace")
    if args.mib < 1 or args.downloads < 1:
        L.die("--mib and --downloads need at least 1")
    for tool in ("runsc", "slirp4netns", "nft", "ip", "openssl"):
        if not shutil.which(tool):
            L.die(f"{tool} is missing: scripts/install-deps.sh")
    raw, binary = bench(args)
    res = {side: stats(v) for side, v in raw.items()}
    for side, s in res.items():
        print(f"{side:10} median {s['median']:8.1f} MiB/s  mean {s['mean']:8.1f}")
    print(f"ratio {res['namecheck']['median'] / res['slirp']['median']:.2f}x")
    meta = L.run_meta(binary)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": res, "raw": raw},
                                              indent=2) + "\n")
    if not args.no_write:
        L.write_section("Name check", section(res, meta, args))
        L.say(f"wrote the Name check section of {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
