# SPDX-License-Identifier: Apache-2.0
"""Where a warm join's and a keystroke echo's time goes (issue 27; bench/README.md
"breakdown/"). Started by bench/breakdown/run.sh as root.

Warm join: `lazaret run bench -- true` joining a Domain kept alive by another
session, with LAZARET_LOG=debug (the `timing:` marks of src/common/timing.h)
while `perf record -k CLOCK_MONOTONIC -a` records every process exec and exit
(sched:sched_process_exec/exit). The marks, the perf events and this
script's own clock (Python's perf_counter is CLOCK_MONOTONIC on Linux) are
one timeline: the CLI's exec, its marks, the coordinator's and supervisor's
marks, the `runsc exec` process the supervisor started (exec to last thread's
exit), the CLI's own exit and the moment its pidfd said so. Beside it, in
bench/launch's bare namespace: `runsc exec` of /bin/true, and of Lazaret's
launcher `lazaret-exec -- /bin/true` (bind-mounted at /lzbin), which is what
Lazaret's `runsc exec` runs; and `lazaret --version` as the user (the CLI's
start-up and exit alone).

Echo: an interactive `lazaret run bench` (busybox ash) and a bare `runsc exec`
shell on pseudo-terminals, as bench/terminal does, while perf records the
read/write-family system calls (raw_syscalls, filtered by number) of the whole
machine. For each keystroke the first read that returned data and the first
write after it, process by process along the path: the CLI (stdin in, TLS to
the socket), the coordinator (socket in, its PTY out), runsc's processes
(the host terminal in, the echo out), and back. The tracing itself adds a
few microseconds per traced call to both sides.
"""

import argparse
import fcntl
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "launch"))
sys.path.insert(0, str(HERE.parent / "terminal"))
import launch as L  # noqa: E402
import terminal as T  # noqa: E402

# read, write, pread64, pwrite64, readv, writev, sendto, recvfrom, sendmsg,
# recvmsg, preadv, pwritev, preadv2, pwritev2 (x86_64; gVisor reads host
# files with preadv2).
READS = {0, 17, 19, 45, 47, 295, 327}
WRITES = {1, 18, 20, 44, 46, 296, 328}
SYSCALLS = sorted(READS | WRITES)
EVENT = re.compile(r"^\s*(\S.*?)\s+(\d+)/(\d+)\s+(?:\[\d+\]\s+)?(\d+)\.(\d{9}):\s+(\S+):\s+(.*)$")


def say(msg):
    L.say(msg)


def perf_start(events, path: Path, filters=None):
    argv = ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-a", "-o", str(path)]
    for e in events:
        argv += ["-e", e]
        if filters and e in filters:
            argv += ["--filter", filters[e]]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # perf opens its events before the first sample is taken
    if p.poll() is not None:
        L.die(f"perf record failed: {p.stderr.read().strip()}")
    return p


def perf_stop(p, path: Path):
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    out = subprocess.run(["perf", "script", "--ns", "-i", str(path), "-F",
                          "comm,pid,tid,time,event,trace"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True)
    if out.returncode != 0:
        L.die(f"perf script failed: {out.stderr.strip()}")
    events = []
    for line in out.stdout.splitlines():
        m = EVENT.match(line)
        if m:
            comm, pid, tid, sec, nsec, ev, rest = m.groups()
            events.append((int(sec) * 1_000_000_000 + int(nsec), ev.rstrip(":"), int(pid),
                           int(tid), comm, rest))
    events.sort()
    return events


def med(v):
    v = [x for x in v if x is not None]
    return round(statistics.median(v), 2) if v else None


# ---- warm join -------------------------------------------------------------------

def warm_join(args, lz, baseline):
    """Per join, the timeline in ms from spawning the CLI."""
    joins, marks_all = [], []
    pdata = Path(lz.user.home) / "sched.data"
    perf = perf_start(["sched:sched_process_exec", "sched:sched_process_exit"], pdata)
    windows = []
    bare = {"runsc exec /bin/true": [], "runsc exec lazaret-exec -- /bin/true": []}
    try:
        for i in range(args.joins + 2):
            before = lz.domain_logs()
            t0 = time.perf_counter_ns()
            p, f = lz.start("run", "bench", "--", "true", env={"LAZARET_LOG": "debug"})
            pidfd = os.pidfd_open(p.pid)
            select.select([pidfd], [], [], 120)
            t1 = time.perf_counter_ns()
            os.close(pidfd)
            if p.wait() != 0:
                f.seek(0)
                L.die(f"warm join exited {p.returncode}: {f.read()}")
            f.seek(0)
            text = f.read()
            f.close()
            for log, size in lz.domain_logs().items():
                with open(log, errors="replace") as g:
                    g.seek(before.get(log, 0))
                    text += "\n" + g.read()
            if i >= 2:
                windows.append((t0, t1, p.pid, text))
            for argv, key in ((["/bin/true"], "runsc exec /bin/true"),
                              (["/lzbin/lazaret-exec", "--", "/bin/true"],
                               "runsc exec lazaret-exec -- /bin/true")):
                t = baseline.ask("timedexec w " + " ".join(argv))
                if i >= 2:
                    bare[key].append(t)
    finally:
        events = perf_stop(perf, pdata)
    for t0, t1, cli_pid, text in windows:
        clock = {}
        for line in text.splitlines():
            m = L.TIMING.search(line)
            if m:
                clock[m.group(1)] = float(m.group(3)) * 1e6  # ns, CLOCK_MONOTONIC
        cli_exec = cli_exit = runsc_exec = runsc_exit = None
        runsc_pid = None
        spawned = clock.get("supervisor: runsc exec spawned")
        # The child may exec runsc before the supervisor's mark is written.
        sent = clock.get("coordinator: session's exec sent")
        for ts, ev, pid, tid, comm, rest in events:
            if not t0 <= ts <= t1 + 50_000_000:
                continue
            if ev.endswith("sched_process_exec") and pid == cli_pid and cli_exec is None:
                cli_exec = ts
            elif ev.endswith("sched_process_exec") and runsc_pid is None and sent \
                    and ts >= sent and re.search(r"filename=\S*runsc ", rest + " "):
                runsc_pid, runsc_exec = pid, ts
            elif ev.endswith("sched_process_exit") and "group_dead=1" in rest.replace(
                    "group_dead=true", "group_dead=1"):
                if pid == cli_pid:
                    cli_exit = ts
                elif pid == runsc_pid and runsc_exit is None:
                    runsc_exit = ts

        def at(ns):
            return None if ns is None else (ns - t0) / 1e6
        row = {
            "CLI exec'd": at(cli_exec),
            "cli: configuration loaded": at(clock.get("cli: configuration loaded")),
            "cli: connected": at(clock.get("cli: connected")),
            "cli: channel secured": at(clock.get("cli: channel secured")),
            "coordinator: session's RUN received":
                at(clock.get("coordinator: session's RUN received")),
            "coordinator: session's exec sent": at(clock.get("coordinator: session's exec sent")),
            "supervisor: runsc exec spawned": at(spawned),
            "runsc exec exec'd": at(runsc_exec),
            "runsc exec exited": at(runsc_exit),
            "cli: done": at(clock.get("cli: done")),
            "CLI exited": at(cli_exit),
            "pidfd woke (the sample)": at(t1),
        }
        joins.append(row)
        marks_all.append(sorted(clock))
    keys = list(joins[0]) if joins else []
    timeline = {k: med([j[k] for j in joins]) for k in keys}
    return {"timeline": timeline, "joins": joins,
            "bare": {k: L.summary(v) for k, v in bare.items()}}


def cli_version(lz, n):
    """`lazaret --version` as the user: the CLI's start-up and exit alone."""
    v = []
    for _ in range(n + 3):
        t0 = time.perf_counter_ns()
        subprocess.run([str(lz.bin), "--version"], env=lz.user.env(), stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, **lz.user.creds())
        v.append(time.perf_counter_ns() - t0)
    t = []
    for _ in range(n + 3):
        t0 = time.perf_counter_ns()
        subprocess.run(["/bin/true"], env=lz.user.env(), stdin=subprocess.DEVNULL,
                       **lz.user.creds())
        t.append(time.perf_counter_ns() - t0)
    return {"lazaret --version": L.summary(v[3:]), "/bin/true": L.summary(t[3:])}


# ---- echo --------------------------------------------------------------------------

LZ_STEPS = [("cli", "r", "CLI read the key"), ("cli", "w", "CLI wrote to its socket (TLS)"),
            ("coord", "r", "coordinator read its socket"),
            ("coord", "w", "coordinator wrote its PTY"),
            ("sandbox", "r", "runsc read the host terminal"),
            ("sandbox", "w", "runsc wrote the echo"),
            ("coord", "r", "coordinator read its PTY"),
            ("coord", "w", "coordinator wrote its socket (TLS)"),
            ("cli", "r", "CLI read its socket"), ("cli", "w", "CLI wrote the echo to its stdout")]
BARE_STEPS = [("sandbox", "r", "runsc read the host terminal"),
              ("sandbox", "w", "runsc wrote the echo")]


def sandbox_pids(root_pid, runsc):
    """The runsc processes below root_pid: the sandbox (`runsc … boot`, the
    sentry), its gofer and the session's `runsc exec`; which of them touches
    the host terminal is runsc's business."""
    want = os.path.realpath(runsc)
    out = set()
    for pid in L.descendants(root_pid):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if os.path.realpath(exe) == want:
            out.add(pid)
    return out


def chain(events, t0, t1, pids, steps):
    """Timestamps (ns) of steps in [t0, t1]: a read is its exit with data,
    a write its entry."""
    pending = {}   # tid -> (nr, enter ts)
    calls = []     # (ts, group, kind)
    group_of = {p: g for g, ps in pids.items() for p in ps}
    for ts, ev, pid, tid, comm, rest in events:
        if ts < t0 - 1_000_000 or ts > t1:
            continue
        g = group_of.get(pid)
        if g is None:
            continue
        m = re.match(r"NR (\d+)", rest)
        if not m:
            continue
        nr = int(m.group(1))
        if ev.endswith("sys_enter"):
            pending[tid] = (nr, ts)
            if nr in WRITES and ts >= t0:
                calls.append((ts, g, "w"))
        elif ev.endswith("sys_exit"):
            r = re.search(r"= (-?\d+)", rest)
            if nr in READS and r and int(r.group(1)) > 0 and ts >= t0:
                calls.append((ts, g, "r"))
            pending.pop(tid, None)
    calls.sort()
    out, at = [], t0
    for i, (g, kind, _) in enumerate(steps):
        hit = next((ts for ts, gg, k in calls if ts >= at and gg == g and k == kind), None)
        if hit is None:
            return i  # the step not found (a diagnosis)
        out.append(hit)
        at = hit
    return out


def echo(args, binary, user, root, ids, rootfs, runsc):
    base = user.home / "tbaseline"
    for d, mode in (("", 0o755), ("runsc", 0o700), ("tmp", 0o700)):
        L.mkdir_user(base / d, mode, ids)
    L.write_bundle(base / "sleep", rootfs, ["/bin/sleep", "100000"], *ids)
    T.write_shell_process(base / "shell.json", *ids)
    lm, ls_ = T.open_pty(*ids)
    bm, bs = T.open_pty(*ids)
    lzp = baseline = None
    try:
        lzp = subprocess.Popen(
            [str(binary), "run", "bench"], cwd=str(user.home / "ws"),
            env={**user.env(), "TERM": T.TERM}, stdin=ls_, stdout=ls_, stderr=ls_,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0), **user.creds())
        os.close(ls_)
        baseline = T.Baseline(user, base, root / "tbaseline.log", bs, runsc)
        os.close(bs)
        baseline.ask("sleeper")
        baseline.ask("shell")
        shells = {"lazaret": T.Shell("lazaret", lm), "runsc": T.Shell("runsc exec", bm)}
        for s in shells.values():
            s.read_until(b"# ", timeout=120)
            s.drain()
        coord = L.coordinators(user.uid)
        if len(coord) != 1:
            L.die(f"expected one coordinator, found {coord}")
        lz_sandbox = sandbox_pids(coord[0], runsc)
        bare_sandbox = sandbox_pids(baseline.proc.pid, runsc)
        # The coordinator and every process it forked (whatever their names),
        # not runsc's nor slirp4netns.
        coord_tree = set()
        for pid in L.descendants(coord[0]):
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if os.path.realpath(exe) == os.path.realpath(binary):
                coord_tree.add(pid)
        if not lz_sandbox or not bare_sandbox:
            L.die(f"sandbox processes not found (Lazaret {lz_sandbox}, bare {bare_sandbox})")
        pids = {"lazaret": {"cli": {lzp.pid}, "coord": coord_tree, "sandbox": lz_sandbox},
                "runsc": {"sandbox": bare_sandbox}}
        nrs = " || ".join(f"id == {n}" for n in SYSCALLS)
        pdata = user.home / "sys.data"
        for i in range(10):  # warm-up, untraced
            for s in shells.values():
                s.keystroke(b"a", b"a")
                s.keystroke(b"\x7f", b"")
                s.drain(0.005)
        perf = perf_start(["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"], pdata,
                          {"raw_syscalls:sys_enter": nrs, "raw_syscalls:sys_exit": nrs})
        strokes = []
        try:
            for i in range(args.keys):
                for key in (("lazaret", "runsc") if i % 2 == 0 else ("runsc", "lazaret")):
                    s = shells[key]
                    s.drain(0.005)
                    t0 = time.perf_counter_ns()
                    dt = s.keystroke(b"a", b"a")
                    strokes.append((key, t0, t0 + dt))
                    s.keystroke(b"\x7f", b"")
                    s.drain(0.01)
        finally:
            events = perf_stop(perf, pdata)
        for s in shells.values():
            os.write(s.fd, b"exit\r")
        lzp.wait(timeout=30)
    finally:
        L.stop_process(lzp)
        if baseline is not None:
            baseline.close()
        for m in (lm, bm):
            os.close(m)
    res = {}
    for key, steps in (("lazaret", LZ_STEPS), ("runsc", BARE_STEPS)):
        rows, total, missed = [], [], {}
        for side, t0, t1 in strokes:
            if side != key:
                continue
            c = chain(events, t0, t1, pids[key], steps)
            if isinstance(c, int):
                missed[steps[c][2]] = missed.get(steps[c][2], 0) + 1
                continue
            pts = [t0, *c, t1]
            rows.append([(b - a) / 1e6 for a, b in zip(pts, pts[1:])])
            total.append((t1 - t0) / 1e6)
        names = ["the benchmark's write to " + steps[0][2]] + \
            [f"{a[2]} to {b[2]}" for a, b in zip(steps, steps[1:])] + \
            [f"{steps[-1][2]} to the benchmark's read"]
        res[key] = {"n": len(rows), "of": sum(1 for s in strokes if s[0] == key),
                    "missed_at": missed, "pids": {g: sorted(v) for g, v in pids[key].items()},
                    "total_median": med(total),
                    "segments": [(n, med([r[i] for r in rows])) for i, n in enumerate(names)]}
    return res


def main():
    ap = argparse.ArgumentParser(description="Warm join and echo breakdown (bench/README.md)")
    ap.add_argument("--runsc", metavar="PATH", default=L.RUNSC_DEFAULT)
    ap.add_argument("--joins", type=int, default=15, help="traced warm joins (15)")
    ap.add_argument("--keys", type=int, default=40, help="traced keystrokes per side (40)")
    ap.add_argument("--json", metavar="FILE", help="write the results to FILE")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        L.die("run as root (sudo bench/breakdown/run.sh)")
    for tool in ("perf", "unshare", "newuidmap", "umoci"):
        if not shutil.which(tool):
            L.die(f"{tool} is missing")
    args.runsc = L.check_runsc(args.runsc)
    binary = L.ensure_binary()
    L.ensure_image()
    res = {"runsc": L.runsc_version(args.runsc)}
    with L.M.tun_usable():
        user, root, ids = L.fresh_user("lzbench-bd", args.runsc)
        sleeper = baseline = None
        try:
            L.user_home(user, f'[profiles.bench]\nimage = "{L.IMAGE_REF}"\n', L.BASELINE_DIRS)
            lz = L.Lazaret(binary, user, user.home / "ws", user.home / "logs")
            _, rootfs = L.prepared_rootfs(lz, user)
            lzbin = user.home / "lzbin"
            L.mkdir_user(lzbin, 0o755, ids)
            shutil.copy(binary.parent / "lazaret-exec", lzbin / "lazaret-exec")
            base = user.home / "baseline"
            L.write_bundle(base / "sleep", rootfs, ["/bin/sleep", "600"], *ids,
                           binds=[(lzbin, "/lzbin")])
            baseline = L.Baseline(user, base, root / "baseline.log", args.runsc)
            lz.ignore_tree = baseline.proc.pid
            baseline.ask("sleeper w")
            # A Domain started with LAZARET_LOG=debug: its coordinator and
            # supervisor write their timing marks.
            sleeper, sleeper_log = lz.start("run", "bench", "--", "sleep", "600",
                                            env={"LAZARET_LOG": "debug"})
            L.wait_running(lz, sleeper, sleeper_log)
            L.check_domain_runsc(user.uid, args.runsc)
            say(f"warm join: {args.joins} traced joins")
            res["warm"] = warm_join(args, lz, baseline)
            res["cli"] = cli_version(lz, 30)
            baseline.ask("teardown w")
            baseline.close()
            baseline = None
            L.stop_process(sleeper)
            sleeper = None
            left = L.coordinators(user.uid)
            if left:
                L.wait_pids_gone(left, L.TEARDOWN_TIMEOUT)
            say(f"echo: {args.keys} traced keystrokes per side")
            res["echo"] = echo(args, binary, user, root, ids, rootfs, args.runsc)
        finally:
            if baseline is not None:
                baseline.close()
            L.end_bench(sleeper, user.uid, root, args.keep)
    print(json.dumps(res, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
