# SPDX-License-Identifier: Apache-2.0
"""Terminal benchmark: an interactive `lazaret run` against a bare `runsc
exec` with a terminal, same rootfs, same run.

Started by bench/terminal/run.sh as root. What it measures (bench/README.md):

  throughput    `cat` of a 100 MiB file inside the sandbox to the terminal,
                typed at the shell prompt, from the Enter key until the end
                marker printed after it has been read (everything read and
                discarded)
  echo latency  one keystroke written to the pty master until its echo (the
                shell's line editor echoes it) is readable there; alternately
                a letter and DEL (which erases it), median over 200 keystrokes

Lazaret: `lazaret run bench` (the image's login shell) as the user, on a pty
this script allocates, with that pty as its controlling terminal: the CLI
relays to the coordinator's PTY, runsc, the guest launcher and its /dev/pts
terminal inside the sandbox.

Baseline: the same user in one `unshare --user --map-root-user --map-auto
--mount --pid --fork --mount-proc` namespace (bench/launch's), `runsc run
--detach` of `sleep` on the rootfs Lazaret unpacked, then `runsc exec
--process P.json` with `"terminal": true` and a pty slave this script
allocates as its stdio and controlling terminal, running `/bin/sh` (the same
busybox ash): runsc hands the host terminal to the guest directly.

Both shells run side by side; throughput samples alternate between them,
keystrokes too, so that load from elsewhere on the machine hits both alike.
The helpers (user, image, build, bundle, statistics) are bench/launch's.
"""

import argparse
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "launch"))
import launch as L  # noqa: E402  (bench/launch/launch.py: the shared helpers)

DOC = L.REPO / "docs" / "performance.md"
ROWS, COLS = 50, 200
TERM = "xterm-256color"
SIZE = 100 * 1024 * 1024
SEQ_TO = 13_000_000          # `seq 1 SEQ_TO` is more than SIZE bytes
SLEEPER = "bench-term"


def say(msg):
    L.say(msg)


def die(msg):
    L.die(msg)


# ---- baseline: runs inside the user namespace ---------------------------------

def inner_main(base: Path, tty_fd: int, runsc_path=L.RUNSC_DEFAULT):
    """Line protocol on stdin/stdout: 'sleeper', 'shell', 'pipecat', 'quit'.
    Answers 'ok [VALUES]' or 'err MESSAGE'. tty_fd: the pty slave the shell
    gets."""
    worker = os.fork()
    if worker:  # pid 1 of the namespace: reap everything (see bench/launch)
        code = 1
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                return code
            if pid == worker:
                code = os.waitstatus_to_exitcode(status)
    runsc = [runsc_path, *L.RUNSC_FLAGS, f"--root={base / 'runsc'}"]
    shell = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "sleeper":
            err = base / "tmp" / "sleeper.err"
            with open(err, "w+") as f:
                p = subprocess.run(runsc + ["run", "--detach", "--bundle", str(base / "sleep"),
                                            SLEEPER], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=f)
                f.seek(0)
                msg = f.read().strip().replace("\n", " | ")
            reply = "ok" if p.returncode == 0 else f"err runsc run --detach: {msg}"
        elif cmd == "shell":
            shell = os.fork()
            if shell == 0:
                os.setsid()
                for i in range(3):
                    os.dup2(tty_fd, i)
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                os.execv(runsc_path, runsc + ["exec", "--process", str(base / "shell.json"),
                                            SLEEPER])
            reply = "ok"
        elif cmd == "pipecat":
            # The same file to a pipe, no terminal: the part of the bulk
            # path that is not the terminal's.
            t0 = time.perf_counter_ns()
            p = subprocess.run(runsc + ["exec", SLEEPER, "/bin/busybox", "cat", "/tmp/big"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
            t = time.perf_counter_ns() - t0
            reply = f"ok {t} {len(p.stdout)}" if p.returncode == 0 else \
                f"err runsc exec cat: status {p.returncode}"
        elif cmd == "quit":
            break
        else:
            reply = f"err unknown command {cmd!r}"
        print(reply, flush=True)
    if shell:
        try:
            os.kill(shell, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(runsc + ["delete", "--force", SLEEPER], stdin=subprocess.DEVNULL,
                   capture_output=True)
    return 0


class Baseline:
    def __init__(self, user, base: Path, log: Path, slave: int, runsc=L.RUNSC_DEFAULT):
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [*L.UNSHARE, "--kill-child", "/usr/bin/python3", str(Path(__file__).resolve()),
             "--inner", str(base), "--tty-fd", str(slave), "--runsc", str(runsc)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=str(base), env=user.env(), pass_fds=[slave], **user.creds())

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        if not reply:
            die(f"baseline helper died (see {self.log.name})")
        if reply != "ok" and not reply.startswith("ok "):
            die(f"baseline '{cmd}': {reply[4:]}")
        return reply[3:].split()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def write_shell_process(path: Path, uid, gid):
    """runsc exec's process: /bin/sh on the caller's terminal."""
    proc = {
        "terminal": True, "user": {"uid": 0, "gid": 0}, "args": ["/bin/sh"],
        "env": [f"PATH={L.IMAGE_PATH}", f"TERM={TERM}", "HOME=/root", "LANG=C.UTF-8"],
        "cwd": "/", "capabilities": {"bounding": [], "effective": [], "permitted": []},
        "noNewPrivileges": True,
    }
    path.write_text(json.dumps(proc, indent=2) + "\n")
    os.chown(path, uid, gid)


# ---- a shell on a pty --------------------------------------------------------------

def open_pty(uid, gid):
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    os.fchown(slave, uid, gid)  # the user's terminal, as a login would make it
    os.set_blocking(master, False)
    return master, slave


class Shell:
    """The master side of one interactive shell: a marker counter, reading
    until a marker, keystroke timing."""

    def __init__(self, name, master):
        self.name, self.fd, self.n = name, master, 0
        self.pending = b""   # read after the last match, not yet searched past
        self.seen = b""      # up to 4 KiB before the last match, the match included

    def read_until(self, token: bytes, timeout=120.0) -> int:
        """Read until token appears (in what is pending first); returns the
        bytes consumed up to the end of the match. Keeps only a tail."""
        deadline = time.monotonic() + timeout
        buf, total = self.pending, 0
        while True:
            i = buf.find(token)
            if i >= 0:
                end = i + len(token)
                total += end
                self.seen, self.pending = buf[max(0, end - 4096):end], buf[end:]
                return total
            # Keep what a match across reads needs, and context for errors.
            keep = max(len(token) - 1, 4096)
            if len(buf) > keep:
                total += len(buf) - keep
                buf = buf[-keep:]
            left = deadline - time.monotonic()
            if left <= 0:
                die(f"{self.name}: no {token!r} within {timeout:.0f} s; last output: "
                    f"{buf[-400:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                continue
            try:
                data = os.read(self.fd, 1 << 20)
            except OSError as e:
                die(f"{self.name}: the terminal closed ({e}); last output: {buf[-400:]!r}")
            buf += data

    def drain(self, quiet=0.2):
        self.pending = b""
        while select.select([self.fd], [], [], quiet)[0]:
            try:
                if not os.read(self.fd, 1 << 20):
                    return
            except OSError:
                return

    def run(self, cmdline, timeout=300.0) -> tuple:
        """Type cmdline + a marker echo; wait for the marker and the next
        prompt. Returns (bytes read up to the marker, the last 4 KiB of
        them). The marker's printed form is not in the typed form."""
        self.n += 1
        typed, printed = f"E$(({self.n}+1))E", f"E{self.n + 1}E".encode()
        os.write(self.fd, f"{cmdline}; echo {typed}\r".encode())
        total = self.read_until(printed, timeout=timeout)
        tail = self.seen
        self.read_until(b"# ", timeout=30)
        return total, tail

    def keystroke(self, key: bytes, expect: bytes, timeout=10.0) -> int:
        """Nanoseconds from writing key to reading expect (any response
        when expect is empty)."""
        t0 = time.perf_counter_ns()
        os.write(self.fd, key)
        got = b""
        while True:
            r, _, _ = select.select([self.fd], [], [], timeout)
            if not r:
                die(f"{self.name}: no echo of {key!r} within {timeout} s")
            got += os.read(self.fd, 65536)
            if not expect or expect in got:
                return time.perf_counter_ns() - t0


# ---- the benchmark -------------------------------------------------------------------

def summary_ns(samples):
    return L.summary(samples)


def percentile(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def bench(args):
    binary = L.ensure_binary()
    L.ensure_image()
    user, root, ids = L.fresh_user("lzbench-term", args.runsc)
    lzp = baseline = None
    masters = []
    try:
        L.user_home(user, f'[profiles.bench]\nimage = "{L.IMAGE_REF}"\n', L.BASELINE_DIRS)
        lz = L.Lazaret(binary, user, user.home / "ws", user.home / "logs")

        _, rootfs = L.prepared_rootfs(lz, user)
        base = user.home / "baseline"
        L.write_bundle(base / "sleep", rootfs, ["/bin/sleep", "100000"], *ids)
        write_shell_process(base / "shell.json", *ids)

        # The two shells.
        lm, ls_ = open_pty(*ids)
        bm, bs = open_pty(*ids)
        masters += [lm, bm]
        say("starting the Lazaret session and the baseline shell")
        lzp = subprocess.Popen(
            [str(binary), "run", "bench"], cwd=str(user.home / "ws"),
            env={**user.env(), "TERM": TERM}, stdin=ls_, stdout=ls_, stderr=ls_,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
            **user.creds())
        os.close(ls_)
        baseline = Baseline(user, base, root / "baseline.log", bs, args.runsc)
        os.close(bs)
        baseline.ask("sleeper")
        baseline.ask("shell")
        shells = {"lazaret": Shell("lazaret", lm), "runsc": Shell("runsc exec", bm)}
        for s in shells.values():
            s.read_until(b"# ", timeout=120)
            s.drain()
        L.check_domain_runsc(user.uid, args.runsc)

        say(f"creating the {SIZE >> 20} MiB file in both sandboxes")
        for s in shells.values():
            # `busybox head`, not `head`: ash runs linked applets in a forked
            # child whose stdout stays line-buffered (one write per line).
            _, out = s.run(f"busybox seq 1 {SEQ_TO} > /tmp/s; busybox head -c {SIZE} /tmp/s "
                           "> /tmp/big; busybox rm /tmp/s; busybox wc -c < /tmp/big")
            if f"\r\n{SIZE}\r\n".encode() not in out:
                die(f"{s.name}: could not create the file: {out[-300:]!r}")

        say(f"throughput: 1 warm-up + {args.cat} samples of `cat` each")
        cat = {"lazaret": [], "runsc": []}
        nbytes = {}
        for i in range(args.cat + 1):
            order = ("lazaret", "runsc") if i % 2 == 0 else ("runsc", "lazaret")
            for key in order:
                s = shells[key]
                t0 = time.perf_counter_ns()
                n, _ = s.run("cat /tmp/big")
                t = time.perf_counter_ns() - t0
                if n < SIZE:
                    die(f"{s.name}: read {n} bytes, less than the file's {SIZE}")
                nbytes[key] = n
                if i > 0:
                    cat[key].append(t)

        say(f"the same without a terminal: {args.cat} samples of `cat` to a pipe each")
        pipe = {"lazaret": [], "runsc": []}
        for i in range(args.cat + 1):
            t0 = time.perf_counter_ns()
            p = subprocess.run([str(binary), "run", "bench", "--", "busybox", "cat", "/tmp/big"],
                               cwd=str(user.home / "ws"), env=user.env(),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, **user.creds())
            t = time.perf_counter_ns() - t0
            if p.returncode != 0 or len(p.stdout) != SIZE:
                die(f"lazaret run ... cat /tmp/big: exit {p.returncode}, {len(p.stdout)} bytes")
            rt, rn = baseline.ask("pipecat")
            if int(rn) != SIZE:
                die(f"runsc exec cat /tmp/big: {rn} bytes")
            if i > 0:
                pipe["lazaret"].append(t)
                pipe["runsc"].append(int(rt))

        say(f"echo latency: 20 warm-up + {args.keys} keystrokes each")
        keys = {"lazaret": [], "runsc": []}
        for i in range(args.keys // 2 + 10):
            order = ("lazaret", "runsc") if i % 2 == 0 else ("runsc", "lazaret")
            for key in order:
                s = shells[key]
                a = s.keystroke(b"a", b"a")
                d = s.keystroke(b"\x7f", b"")  # the line editor erases the a
                s.drain(0.005)
                if i >= 10:
                    keys[key] += [a, d]

        for s in shells.values():
            os.write(s.fd, b"exit\r")
        lzp.wait(timeout=30)

        res = {"cat": {}, "pipe": {}, "keys": {}, "bytes": nbytes}
        for key in ("lazaret", "runsc"):
            c = summary_ns(cat[key])
            c["mib_s"] = SIZE / 2**20 / (c["median"] / 1000)
            res["cat"][key] = c
            c = summary_ns(pipe[key])
            c["mib_s"] = SIZE / 2**20 / (c["median"] / 1000)
            res["pipe"][key] = c
            k = summary_ns(keys[key])
            k["p90"] = L.ms(percentile(keys[key], 90))
            res["keys"][key] = k
        res["raw_ms"] = {"cat": {k: [round(L.ms(x), 1) for x in v] for k, v in cat.items()},
                         "pipe": {k: [round(L.ms(x), 1) for x in v] for k, v in pipe.items()},
                         "keys": {k: [round(L.ms(x), 3) for x in v] for k, v in keys.items()}}
        return res, binary
    finally:
        L.stop_process(lzp)
        if baseline is not None:
            baseline.close()
        for m in masters:
            os.close(m)
        left = L.coordinators(user.uid)
        if left and L.wait_pids_gone(left, L.TEARDOWN_TIMEOUT) is None:
            say(f"warning: lz-coordinator {left} still running")
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def print_table(res):
    c, k = res["cat"], res["keys"]
    print(f"{'':24} {'Lazaret':>22} {'runsc exec -t':>22} {'ratio':>8}")
    print(f"{'cat 100 MiB, median':24} {c['lazaret']['median']:13.0f} ms "
          f"({c['lazaret']['mib_s']:4.1f} MiB/s) {c['runsc']['median']:9.0f} ms "
          f"({c['runsc']['mib_s']:4.1f} MiB/s) "
          f"{c['lazaret']['median'] / c['runsc']['median']:7.2f}x")
    pi = res["pipe"]
    print(f"{'cat to a pipe, median':24} {pi['lazaret']['median']:13.0f} ms "
          f"({pi['lazaret']['mib_s']:4.1f} MiB/s) {pi['runsc']['median']:9.0f} ms "
          f"({pi['runsc']['mib_s']:4.1f} MiB/s) "
          f"{pi['lazaret']['median'] / pi['runsc']['median']:7.2f}x")
    print(f"{'echo latency, median':24} {k['lazaret']['median']:19.3f} ms "
          f"{k['runsc']['median']:19.3f} ms {k['lazaret']['median'] / k['runsc']['median']:7.2f}x")
    print(f"{'echo latency, p90':24} {k['lazaret']['p90']:19.3f} ms "
          f"{k['runsc']['p90']:19.3f} ms {k['lazaret']['p90'] / k['runsc']['p90']:7.2f}x")


def section(res, meta):
    c, k, pi = res["cat"], res["keys"], res["pipe"]
    rc = c["lazaret"]["median"] / c["runsc"]["median"]
    rk = k["lazaret"]["median"] / k["runsc"]["median"]
    lines = [
        f"## {title(meta)}",
        "",
        f"Measured {meta['date']} on {meta['nproc']} CPUs ({meta['cpu']}), kernel "
        f"{meta['kernel']}, `{meta['runsc']}`, lazaret {meta['version']} "
        f"(release build, revision {meta['revision']}). Both sides ran `{meta['runsc_path']}` "
        "(Lazaret through `LAZARET_RUNSC`). "
        f"Re-run: `sudo bench/terminal/run.sh --runsc {meta['runsc_path']}` "
        f"({c['lazaret']['n']} `cat` samples and {k['lazaret']['n']} keystrokes per side, "
        "Lazaret and baseline alternating).",
        "",
        "Lazaret: `lazaret run bench` (busybox ash, the image's login shell) on a pty the "
        "benchmark allocates. Baseline: `runsc exec` with `\"terminal\": true` and a pty "
        "slave as its stdio and controlling terminal, running busybox `sh` in a `runsc run "
        "--detach` container of the rootfs Lazaret unpacked, in bench/launch's `unshare` "
        f"namespace. Both terminals {ROWS}x{COLS}, `TERM={TERM}`; ratio = Lazaret / baseline.",
        "",
        "| measurement | Lazaret | bare `runsc exec` | ratio |",
        "| --- | ---: | ---: | ---: |",
        f"| `cat` of a 100 MiB file (seq output) at the prompt, Enter to end marker, median "
        f"| {c['lazaret']['median']:.0f} ms ({c['lazaret']['mib_s']:.1f} MiB/s) "
        f"| {c['runsc']['median']:.0f} ms ({c['runsc']['mib_s']:.1f} MiB/s) | {rc:.2f}x |",
        f"| same, mean | {c['lazaret']['mean']:.0f} ms | {c['runsc']['mean']:.0f} ms "
        f"| {c['lazaret']['mean'] / c['runsc']['mean']:.2f}x |",
        f"| the same file to a pipe, no terminal (`lazaret run bench -- busybox cat` joining "
        f"the Domain; `runsc exec … cat`), median | {pi['lazaret']['median']:.0f} ms "
        f"({pi['lazaret']['mib_s']:.1f} MiB/s) | {pi['runsc']['median']:.0f} ms "
        f"({pi['runsc']['mib_s']:.1f} MiB/s) "
        f"| {pi['lazaret']['median'] / pi['runsc']['median']:.2f}x |",
        f"| keystroke echo at the prompt (a letter, then DEL), median "
        f"| {k['lazaret']['median']:.2f} ms | {k['runsc']['median']:.2f} ms | {rk:.2f}x |",
        f"| same, 90th percentile | {k['lazaret']['p90']:.2f} ms | {k['runsc']['p90']:.2f} ms "
        f"| {k['lazaret']['p90'] / k['runsc']['p90']:.2f}x |",
        "",
        "Reading the numbers:",
        "",
        "- Lazaret's bytes cross more hops: the guest launcher's pseudo-terminal inside the "
        "sandbox (which gives the shell `/dev/pts`, job control and signal keys) and its "
        "relay, runsc's host terminal, the coordinator's host PTY, the coordinator's socket to "
        "the CLI, and the CLI's write to the developer's terminal. The baseline's shell writes "
        "to the developer's terminal directly (runsc passes it in as a host file), with no "
        "job control and no `tty` name inside.",
        "- The pipe row takes the terminal out: the command's stdout is the CLI's own pipe "
        "(passed to runsc exec through the coordinator and supervisor), which the CLI copies "
        "to its stdout; what the terminal rows add beyond it is the terminal's hops.",
        f"- Bytes read per `cat` (the file with CR-LF line ends, the echoed command line, the "
        f"marker): Lazaret {res['bytes']['lazaret']}, baseline {res['bytes']['runsc']}"
        + (" — the same, nothing lost." if res['bytes']['lazaret'] == res['bytes']['runsc']
           else " — they differ: check the relay!"),
        "- The machine is small and shared with test runs: compare ratios rather than "
        "milliseconds, and re-run when mean and median disagree a lot.",
        "",
    ]
    return "\n".join(lines)


def title(meta):
    """One section per runsc release: a run on one leaves the other's alone."""
    return f"Terminal, runsc {meta['runsc'].rsplit(' ', 1)[-1]}"


def write_doc(text_section, meta):
    L.write_section(title(meta), text_section)


def main():
    ap = argparse.ArgumentParser(description="Lazaret terminal benchmark (bench/README.md)")
    ap.add_argument("--cat", type=int, default=3, help="100 MiB cat samples per side (3)")
    ap.add_argument("--keys", type=int, default=200, help="keystrokes per side (200)")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    ap.add_argument("--keep", action="store_true", help="keep the /tmp/lzbench-term-* directory")
    ap.add_argument("--json", metavar="FILE", help="also write every sample to FILE")
    ap.add_argument("--inner", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--tty-fd", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--runsc", metavar="PATH", default=L.RUNSC_DEFAULT,
                    help="the runsc of both sides: the baseline's, and Lazaret's through "
                    f"LAZARET_RUNSC ({L.RUNSC_DEFAULT}); each release writes its own section")
    args = ap.parse_args()
    if args.inner:
        return inner_main(Path(args.inner), args.tty_fd, args.runsc)
    if os.geteuid() != 0:
        die("run as root (sudo bench/terminal/run.sh): it creates the unprivileged user "
            f"{L.BENCH_USER} that Lazaret runs as")
    if args.cat < 1 or args.keys < 20:
        die("--cat needs at least 1 sample, --keys at least 20")
    for tool in ("unshare", "newuidmap", "umoci"):
        if not shutil.which(tool):
            die(f"{tool} is missing: scripts/install-deps.sh")
    args.runsc = L.check_runsc(args.runsc)
    say(f"runsc of both sides: {args.runsc} ({L.runsc_version(args.runsc)})")

    with L.M.tun_usable():  # the Domain's Network Sidecar opens /dev/net/tun
        res, binary = bench(args)
    meta = L.run_meta(binary, args.runsc)
    print(f"{meta['runsc']} ({args.runsc})")
    print_table(res)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, **res}, indent=2) + "\n")
    if not args.no_write:
        write_doc(section(res, meta), meta)
        say(f"wrote the \"{title(meta)}\" section of {DOC.relative_to(L.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
