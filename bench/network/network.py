# SPDX-License-Identifier: Apache-2.0
"""Network benchmark: the Network Sidecar against the host's own network
stack, same client, same server, same run (bench/README.md).

Started by bench/network/run.sh as root. The server is a test host in a
network namespace of this machine (tests/integration/netlab.py: a veth pair
from the host, nothing else routed): a TCP source that sends --mib MiB and
closes, and a TCP echo server. The client is the same Perl script on both
sides (CLIENT below: sockets, select, sysread; Time::HiRes):

  throughput  connect, then read until the server closes: MiB/s
  connect     connect(2) of a blocking socket: ms
  round trip  connect + one line echoed back: ms

Sidecar: inside a sandbox of the Debian test image (it has perl) with
allow_egress = [the test prefix], the sessions joining a Domain kept alive
by another session (the join is outside the clock). Host: the same script
run by the same user on the host. Samples of the two alternate.
"""

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "launch"))
sys.path.insert(0, str(REPO / "tests" / "integration"))
import launch as L  # noqa: E402  (user, build, image and process helpers)
import netlab as N  # noqa: E402  (the test host)

DEBIAN_REF = f"oci:{L.IMAGES}/debian:bookworm"
DOC = L.DOC

# The client, identical on both sides. It waits for readability before
# every read, as it had to under runsc 2022's host networking (a blocking
# read(2) failed with EAGAIN there); kept so that figures stay comparable
# across revisions.
CLIENT = r'''
use strict;
use warnings;
use Socket;
use IO::Select;
use Time::HiRes qw(time);
my ($mode, $host, $port, $n) = @ARGV;
my $addr = pack_sockaddr_in($port, inet_aton($host));
sub readsome {
    my ($s, $len) = @_;
    while (1) {
        IO::Select->new($s)->can_read(60) or die "no data for 60 s\n";
        my $r = sysread($s, my $buf, $len);
        return $buf if defined $r;
        die "read: $!\n" unless $!{EAGAIN};
    }
}
for my $i (1 .. $n) {
    socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!\n";
    my $t0 = time;
    connect($s, $addr) or die "connect: $!\n";
    my $t1 = time;
    if ($mode eq "tput") {
        my $total = 0;
        while (length(my $buf = readsome($s, 1 << 20))) {
            $total += length($buf);
        }
        printf "TPUT %d %.6f %.6f\n", $total, $t0, time;
    } else {
        my $line = "x$i\n";
        syswrite($s, $line) == length($line) or die "write: $!\n";
        my $reply = "";
        while ($reply !~ /\n/) {
            my $buf = readsome($s, 4096);
            last unless length($buf);
            $reply .= $buf;
        }
        my $t2 = time;
        print $reply =~ /^lzecho/ ? sprintf("LAT %.6f %.6f %.6f\n", $t0, $t1, $t2)
                                  : "BAD $reply\n";
    }
    close($s);
}
'''


def debian_usable():
    return subprocess.run(["umoci", "stat", "--image", f"{L.IMAGES}/debian:bookworm"],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def ensure_debian_image():
    if debian_usable():
        return
    script = REPO / "tests" / "images" / "build.sh"
    L.say(f"building the test images with {script.relative_to(REPO)} (Debian needs the mirror)")
    subprocess.run(["sh", str(script), str(L.IMAGES)], check=True, stdin=subprocess.DEVNULL)
    if not debian_usable():
        L.die(f"{L.IMAGES}/debian:bookworm is not a usable OCI layout")


def parse(out: str, what: str) -> list:
    bad = [line for line in out.splitlines() if line.startswith("BAD")]
    if bad:
        L.die(f"{what}: the echo server answered something else: {bad[:3]}")
    rows = [line.split()[1:] for line in out.splitlines()
            if line.startswith(("TPUT ", "LAT "))]
    if not rows:
        L.die(f"{what}: no samples in the output:\n{out[-2000:]}")
    return [[Decimal(x) for x in r] for r in rows]


def bench(args):
    binary = L.ensure_binary()
    L.ensure_image()
    ensure_debian_image()
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
    user = L.User(L.BENCH_USER, root / "home", root / "run", runsc=args.runsc)
    net = sleeper = None
    with L.M.tun_usable():  # the tests' machine-wide bookkeeping
        try:
            L.say("creating the test host (waits while a test session holds it)")
            net = N.TestNet.create()
            srv = net.serve([("source", N.HOST_A, N.SOURCE_PORT, size),
                             ("tcp", N.HOST_A, N.TCP_PORT, None)], lifetime=3600)
            for d, mode in ((user.home, 0o755), (user.runtime, 0o700)):
                L.mkdir_user(d, mode, ids)
            for d, mode in ((".config", 0o755), (".config/lazaret", 0o700), ("ws", 0o755),
                            ("logs", 0o755)):
                L.mkdir_user(user.home / d, mode, ids)
            client = user.home / "client.pl"
            client.write_text(CLIENT)
            os.chmod(client, 0o644)
            cfg = user.home / ".config/lazaret/config.toml"
            cfg.write_text('schema = "lazaret-trusted-host-config-v1"\n'
                           "[profiles.benchnet]\n"
                           f'image = "{DEBIAN_REF}"\n'
                           f'allow_egress = ["{N.ALLOWED_PREFIX}"]\n')
            os.chown(cfg, *ids)
            os.chmod(cfg, 0o600)
            lz = L.Lazaret(binary, user, user.home / "ws", user.home / "logs")
            # The client script reaches the sandbox through the workspace.
            shutil.copy(client, user.home / "ws" / "client.pl")
            os.chown(user.home / "ws" / "client.pl", *ids)

            sleeper, sleeper_log = lz.start("run", "benchnet", "--", "sleep", "3600")

            def inside(*a):
                _, _, out, _ = lz.run("run", "benchnet", "--", "perl", "/workspace/client.pl",
                                      *map(str, a), timeout=600)
                return out

            def host(*a):
                p = subprocess.run(["perl", str(client), *map(str, a)], cwd=str(user.home),
                                   env=user.env(), stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=600, **user.creds())
                if p.returncode != 0:
                    L.die(f"host client exited {p.returncode}: {p.stderr}")
                return p.stdout

            L.say("warm-up")
            parse(inside("lat", N.HOST_A, N.TCP_PORT, 3), "warm-up")
            coord = L.coordinators(user.uid)
            L.check_domain_runsc(user.uid, args.runsc)
            # The parts: the same client in the router's namespace (where
            # slirp4netns runs), so its traffic takes slirp4netns and the
            # host's stack but neither gVisor nor the veth link and the
            # router's forwarding. Entered by root with nsenter: only the
            # network namespace is the sandbox's.
            procs = L.user_procs(user.uid)
            slirps = [pid for pid in L.descendants(coord[0]) if procs.get(pid) == "slirp4netns"]
            if len(slirps) != 1:
                L.die(f"expected one slirp4netns of the Domain, found {slirps}")

            def router(*a):
                p = subprocess.run(["nsenter", f"--net=/proc/{slirps[0]}/ns/net", "perl",
                                    str(client), *map(str, a)], cwd="/",
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=600)
                if p.returncode != 0:
                    L.die(f"router-namespace client exited {p.returncode}: {p.stderr}")
                return p.stdout

            sides = (("sidecar", inside), ("slirp", router), ("host", host))
            res = {k: {side: [] for side, _ in sides} for k in ("tput", "connect", "rtt")}
            L.say(f"throughput: {args.downloads} downloads of {args.mib} MiB each way")
            for _ in range(args.downloads):
                for side, fn in sides:
                    for b, t0, t1 in parse(fn("tput", N.HOST_A, N.SOURCE_PORT, 1), side):
                        if int(b) != size:
                            L.die(f"{side}: downloaded {b} bytes, want {size}")
                        res["tput"][side].append(float(b / (t1 - t0)) / (1024 * 1024))
            L.say(f"latency: {args.connects} connections each way, in batches of 20")
            left = args.connects
            while left > 0:
                k = min(20, left)
                left -= k
                for side, fn in sides:
                    for t0, t1, t2 in parse(fn("lat", N.HOST_A, N.TCP_PORT, k), side):
                        res["connect"][side].append(float(t1 - t0) * 1000)
                        res["rtt"][side].append(float(t2 - t0) * 1000)
            if sleeper.poll() is not None or L.coordinators(user.uid) != coord:
                L.die("the Domain did not stay up through the samples\n" + lz.diagnose())
            arrivals = len(srv.lines())
            res["server_connections"] = arrivals
            return res, binary
        finally:
            L.end_bench(sleeper, user.uid, root, args.keep, net)


stats = L.stats


ROWS = [
    # key, title, unit, ratio label: sidecar/host for times, host/sidecar for rates
    ("tput", "TCP download", "MiB/s", "slowdown"),
    ("connect", "Connect", "ms", "slowdown"),
    ("rtt", "Connect + one echoed line", "ms", "slowdown"),
]


def slowdown(key, sc, ho):
    return ho / sc if key == "tput" else sc / ho


def print_table(res, args):
    print(f"{'':28} {'sidecar median':>15} {'slirp only':>12} {'host median':>12} "
          f"{'slowdown':>9} {'slirp only':>10}")
    for key, title, unit, _ in ROWS:
        sc, sl, ho = (res[key][s]["median"] for s in ("sidecar", "slirp", "host"))
        print(f"{title:28} {sc:9.2f} {unit:5} {sl:6.2f} {unit:5} {ho:6.2f} {unit:5} "
              f"{slowdown(key, sc, ho):8.2f}x {slowdown(key, sl, ho):9.2f}x")


def network_section(res, meta, args):
    t = res["tput"]
    lines = [
        f"## {title(meta)}",
        "",
        f"Measured {meta['date']} on {meta['nproc']} CPUs ({meta['cpu']}), kernel "
        f"{meta['kernel']}, `{meta['runsc']}`, `{meta['slirp']}`, lazaret {meta['version']} "
        f"(release build, revision {meta['revision']}). Lazaret ran `{meta['runsc_path']}` "
        "(`LAZARET_RUNSC`). "
        f"Re-run: `sudo bench/network/run.sh --runsc {meta['runsc_path']}` "
        f"({t['sidecar']['n']} downloads of {args.mib} MiB and {res['connect']['sidecar']['n']} "
        "connections each way; sidecar and host samples interleaved).",
        "",
        "Server: a test host in a network namespace of this machine (a veth pair from the "
        "host; `tests/integration/netlab.py`), a TCP source and a TCP echo server in Python. "
        "Client: the same Perl script on both sides (`bench/network/network.py`: blocking "
        "`connect`, `select` before every `sysread`, `Time::HiRes`). Sidecar: a sandbox of "
        "the Debian 12 test image with "
        f"`allow_egress = [\"{N.ALLOWED_PREFIX}\"]`, joining a running Domain (the join is "
        "outside the clock): gVisor's own network stack (`--network=sandbox`) on the "
        "sandbox namespace's veth → router namespace (routes, nftables) → slirp4netns → the "
        "host's stack, MTU 65520 throughout. Host: the "
        "same script, same user, on the host. Slowdown = how many times worse the sidecar "
        "is (host/sidecar for throughput, sidecar/host for times).",
        "",
        "Slirp only: the same client run in the router's namespace (`nsenter --net` into "
        "the Domain's slirp4netns), so its traffic takes slirp4netns and the host's stack "
        "but not gVisor, the veth link or the router's forwarding: the difference between "
        "the two columns is what gVisor's netstack and the veth hop cost.",
        "",
        "| measure | unit | sidecar median | sidecar mean | slirp only median | host median "
        "| host mean | slowdown (median) | slirp only slowdown |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    what = {"tput": f"TCP download of {args.mib} MiB",
            "connect": "connection set-up (`connect`)",
            "rtt": "connection set-up + one line echoed back"}
    for key, _, unit, _ in ROWS:
        sc, sl, ho = res[key]["sidecar"], res[key]["slirp"], res[key]["host"]
        lines.append(f"| {what[key]} | {unit} | {sc['median']:.2f} | {sc['mean']:.2f} | "
                     f"{sl['median']:.2f} | {ho['median']:.2f} | {ho['mean']:.2f} | "
                     f"{slowdown(key, sc['median'], ho['median']):.2f}x | "
                     f"{slowdown(key, sl['median'], ho['median']):.2f}x |")
    lines += [
        "",
        "Reading the numbers:",
        "",
        "- Every byte through the sidecar crosses gVisor's netstack and its AF_PACKET "
        "endpoint on the veth, the router's forwarding and NAT, and slirp4netns, which "
        "terminates the "
        "sandbox's TCP connection in user space and carries the data over a second "
        "connection from the host. The policy itself is a routing lookup and a few "
        "nftables rules per packet. The slirp-only column separates slirp4netns and the "
        "host's stack from the rest.",
        "- A connection through the sidecar is two connections (sandbox to slirp4netns, "
        "slirp4netns to the server), and the sandbox's connect returns only after "
        "slirp4netns has answered its SYN.",
        "- The client waits with `select` before every read, as it had to under runsc "
        "2022's host networking (blocking reads failed with EAGAIN there); under "
        "netstack blocking reads work (docs/network.md \"runsc's network stack\").",
        "- Under host networking (revision fca114b, 2026-11-30, MTU 65520) the same "
        "benchmark gave 1/7.59 of the host's download speed and connects 7.81x slower; "
        "netstack with a 1500-byte veth downloaded 100 MiB in 22 s (see "
        "src/supervisor/sidecar.c LINK_MTU).",
        "- The machine is small and shared with test runs: compare ratios rather than "
        "absolute numbers, and re-run when mean and median disagree a lot.",
        "",
    ]
    return "\n".join(lines)


def title(meta):
    """One section per runsc release: a run on one leaves the other's alone."""
    return f"Network, runsc {meta['runsc'].rsplit(' ', 1)[-1]}"


def write_doc(section, meta):
    text = L.replace_section(DOC.read_text() if DOC.exists() else L.INTRO, title(meta), section)
    if "sudo bench/network/run.sh\n" not in text:
        text = text.replace("sudo bench/launch/run.sh\n```",
                            "sudo bench/launch/run.sh\nsudo bench/network/run.sh\n```", 1)
    DOC.write_text(text.rstrip("\n") + "\n")


def main():
    ap = argparse.ArgumentParser(description="Lazaret network benchmark (bench/README.md)")
    ap.add_argument("--mib", type=int, default=200, help="MiB per download (200)")
    ap.add_argument("--downloads", type=int, default=5, help="downloads each way (5)")
    ap.add_argument("--connects", type=int, default=100, help="connections each way (100)")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    ap.add_argument("--keep", action="store_true", help="keep the /tmp/lzbench-* directory")
    ap.add_argument("--json", metavar="FILE", help="also write every sample to FILE")
    ap.add_argument("--runsc", metavar="PATH", default=L.RUNSC_DEFAULT,
                    help=f"the runsc Lazaret uses, through LAZARET_RUNSC ({L.RUNSC_DEFAULT}); "
                    "each release writes its own section")
    args = ap.parse_args()
    if os.geteuid() != 0:
        L.die("run as root (sudo bench/network/run.sh): it creates the unprivileged user "
              f"{L.BENCH_USER} and the test host's network namespace")
    if args.mib < 1 or args.downloads < 1 or args.connects < 2:
        L.die("--mib and --downloads need at least 1, --connects at least 2")
    for tool in ("slirp4netns", "nft", "ip", "nsenter", "perl"):
        if not shutil.which(tool):
            L.die(f"{tool} is missing: scripts/install-deps.sh")
    args.runsc = L.check_runsc(args.runsc)
    L.say(f"Lazaret's runsc: {args.runsc} ({L.runsc_version(args.runsc)})")

    raw, binary = bench(args)
    res = {k: {side: stats(v) for side, v in raw[k].items()} for k, *_ in ROWS}
    print_table(res, args)
    meta = L.run_meta(binary, args.runsc)
    meta["slirp"] = L.capture(["slirp4netns", "--version"]).splitlines()[0]
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": res, "raw": raw},
                                              indent=2) + "\n")
    if not args.no_write:
        write_doc(network_section(res, meta, args), meta)
        L.say(f"wrote the \"{title(meta)}\" section of {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
