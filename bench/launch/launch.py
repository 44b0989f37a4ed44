# SPDX-License-Identifier: Apache-2.0
"""Launch benchmark: Lazaret against bare runsc, same rootfs, same run.

Started by bench/launch/run.sh as root. What it measures (bench/README.md):

  cold start  `lazaret run bench -- true` with no Domain running (CLI start to
              CLI exit)                     vs `runsc run` of /bin/true
  warm join   `lazaret run bench -- true` while a `sleep 600` session keeps
              the Domain alive              vs `runsc exec` of /bin/true into
                                               a running container
  teardown    CLI exit until no `lz-coordinator` process of the user remains
                                            vs `runsc kill KILL` + `runsc delete`
                                               of a running container

The baseline runs as the same user, in one `unshare --user --map-root-user
--map-auto --mount --pid --fork --mount-proc --propagation private` namespace
(this script again, with --inner), with `runsc --ignore-cgroups
--network=none --overlay2=root:memory --root=DIR`, on the rootfs Lazaret
itself unpacked. Lazaret and baseline samples are interleaved so that load
from other work on the machine hits both alike.
"""

import argparse
import datetime
import fcntl
import json
import os
import platform
import pwd
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
import machine as M  # noqa: E402  (the machine-wide /dev/net/tun bookkeeping the tests keep)
BENCH_USER = os.environ.get("LAZARET_BENCH_USER", "lzbench")
BUILD_DIR = os.environ.get("LAZARET_BENCH_BUILD", "build-bench")
IMAGES = Path(os.environ.get("LAZARET_TEST_IMAGES", "/var/cache/lazaret-test-images"))
IMAGE_REF = f"oci:{IMAGES}/busybox:latest"
DOC = REPO / "docs" / "performance.md"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SUBID_COUNT = 65536
SUBID_FIRST = 100000
RUNSC_FLAGS = ["--ignore-cgroups", "--network=none", "--overlay2=root:memory"]
# The runsc both sides use unless --runsc names another (docs/runtime.md
# "Which runsc": Lazaret is given the same one through LAZARET_RUNSC).
RUNSC_DEFAULT = "/usr/bin/runsc"
UNSHARE = ["unshare", "--user", "--map-root-user", "--map-auto", "--mount", "--pid", "--fork",
           "--mount-proc", "--propagation", "private"]
TEARDOWN_TIMEOUT = 60.0


def say(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def die(msg):
    print(f"bench: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def ms(ns):
    return ns / 1e6


# ---- baseline: runs inside the user namespace ---------------------------------

def inner_main(base: Path, runsc_path=RUNSC_DEFAULT, extra_flags=()):
    """Line protocol on stdin/stdout: 'cold ID', 'sleeper ID', 'exec ID',
    'burst ID', 'teardown ID', 'quit'. Answers 'ok NANOSECONDS' or 'err MESSAGE'.
    runsc_path: the runsc binary of the run (--runsc); extra_flags: more
    global runsc flags (bench/inside's --platform)."""
    # We are pid 1 of the namespace: sandbox processes reparent to us when
    # runsc exits, and runsc waits for them to be gone, so zombies would
    # stall it ("waiting sandbox stop: context deadline exceeded"). pid 1
    # reaps; a child does the work.
    worker = os.fork()
    if worker:
        code = 1
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                return code
            if pid == worker:
                return os.waitstatus_to_exitcode(status)
    flags = list(extra_flags)
    if "--network=sandbox" in flags:
        # bench/inside's netstack variant: RUNSC_FLAGS' --network=none gives
        # way, and runsc releases up to 2024-07-29 refuse netstack unless
        # /proc/sys/net/core/rmem_default is hidden in runsc's mount
        # namespace, which Lazaret's supervisor does the same way
        # (src/supervisor/lifecycle.c sup_cover_proc_sys_net). This namespace's
        # own /proc: nothing of the host changes.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "nosuid,nodev,noexec,size=4k,mode=0555",
                        "tmpfs", "/proc/sys/net"], check=True, stdin=subprocess.DEVNULL)
    base_flags = [f for f in RUNSC_FLAGS
                  if not (f.startswith("--network=") and "--network=sandbox" in flags)]
    runsc = [runsc_path, *base_flags, *flags, f"--root={base / 'runsc'}"]
    tmp = base / "tmp"

    def run(argv):
        return subprocess.run(runsc + argv, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True)

    def timed(*argvs):
        t0 = time.perf_counter_ns()
        for argv in argvs:
            p = run(argv)
            if p.returncode != 0:
                return f"err runsc {' '.join(argv)}: status {p.returncode}: " + \
                    (p.stderr.strip().replace("\n", " | ") or "(no message)")
        return f"ok {time.perf_counter_ns() - t0}"

    def detached(cid):
        # The sandbox keeps the stdio it is given: no pipes (nobody would
        # see EOF), and runsc fchowns it, so a fresh file rather than a log.
        err = tmp / f"{cid}.err"
        with open(err, "w+") as f:
            p = subprocess.run(runsc + ["run", "--detach", "--bundle", str(base / "sleep"), cid],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)
            f.seek(0)
            msg = f.read().strip().replace("\n", " | ")
        err.unlink()
        return "ok 0" if p.returncode == 0 else f"err runsc run --detach: status " \
            f"{p.returncode}: {msg or '(no message)'}"

    for line in sys.stdin:
        cmd, _, cid = line.strip().partition(" ")
        if cmd == "cold":
            reply = timed(["run", "--bundle", str(base / "true"), cid])
        elif cmd == "sleeper":
            reply = detached(cid)
        elif cmd == "exec":
            reply = timed(["exec", cid, "/bin/true"])
        elif cmd == "timedexec":
            # 'timedexec ID ARG...': `runsc exec ID ARG...` timed
            # (bench/breakdown: the launcher's part of a warm join).
            cid, *argv = cid.split()
            reply = timed(["exec", cid, *argv])
        elif cmd == "burst":
            # 16 `runsc exec` at once, until the last has ended.
            t0 = time.perf_counter_ns()
            procs = [subprocess.Popen(runsc + ["exec", cid, "/bin/true"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL) for _ in range(16)]
            bad = [p.wait() for p in procs if p.wait() != 0]
            reply = f"err runsc exec (16 at once): statuses {bad}" if bad else \
                f"ok {time.perf_counter_ns() - t0}"
        elif cmd == "teardown":
            reply = timed(["kill", cid, "KILL"], ["delete", cid])
        elif cmd in ("execout", "execoutp"):
            # 'execout ID ARG...': `runsc exec ID ARG...`, its stdout as the
            # answer (bench/inside: the timer's samples), lines joined by spaces.
            # 'execoutp ID PROCESS.JSON ARG...': the same with `runsc exec
            # --process` of that process, its args replaced (bench/inside's
            # "+spec": Lazaret's process settings).
            cid, *argv = cid.split()
            if cmd == "execoutp":
                proc_json, *argv = argv
                process = json.loads(Path(proc_json).read_text())
                process["args"] = argv
                one = tmp / "process.json"
                one.write_text(json.dumps(process))
                p = run(["exec", "--process", str(one), cid])
            else:
                p = run(["exec", cid, *argv])
            reply = "ok " + " ".join(p.stdout.split()) if p.returncode == 0 else \
                f"err runsc exec {' '.join(argv)}: status {p.returncode}: " + \
                ((p.stderr + p.stdout).strip().replace("\n", " | ") or "(no message)")
        elif cmd == "quit":
            break
        else:
            reply = f"err unknown command {cmd!r}"
        print(reply, flush=True)
    # Leftovers of a failed step; the pid namespace ends with us anyway.
    p = run(["list", "--quiet"])
    for cid in p.stdout.split():
        run(["delete", "--force", cid])
    return 0


class Baseline:
    def __init__(self, user, base: Path, log: Path, runsc=RUNSC_DEFAULT, flags=()):
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [*UNSHARE, "--kill-child", "/usr/bin/python3", str(Path(__file__).resolve()),
             "--inner", str(base), "--runsc", str(runsc),
             *(f"--inner-flag={f}" for f in flags)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=str(base), env=user.env(), **user.creds())

    def ask(self, cmd, raw=False):
        """The answer's number, or with raw its text after "ok "."""
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        if not reply:
            die(f"baseline helper died (see {self.log.name})")
        if not reply.startswith("ok "):
            die(f"baseline '{cmd}': {reply[4:]}")
        return reply[3:] if raw else int(reply[3:])

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


# ---- the user ------------------------------------------------------------------

def _subid_ranges(path, owners=None):
    out = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            if owners is None or parts[0] in owners:
                out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def _free_subid_start():
    ranges = _subid_ranges("/etc/subuid") + _subid_ranges("/etc/subgid")
    start, moved = SUBID_FIRST, True
    while moved:
        moved = False
        for _, s, c in ranges:
            if s < start + SUBID_COUNT and start < s + c:
                start, moved = s + c, True
    return start


class User:
    def __init__(self, name, home: Path, runtime: Path, runsc=None):
        pw = pwd.getpwnam(name)
        self.name, self.uid, self.gid = name, pw.pw_uid, pw.pw_gid
        self.groups = [g for g in os.getgrouplist(name, pw.pw_gid) if g != pw.pw_gid]
        self.home, self.runtime = home, runtime
        # The runsc Lazaret is to use (LAZARET_RUNSC), None for its own choice.
        self.runsc = runsc

    def creds(self):
        return {"user": self.uid, "group": self.gid, "extra_groups": self.groups}

    def env(self):
        env = {"HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime),
               "PATH": SAFE_PATH, "LANG": "C.UTF-8"}
        if self.runsc:
            env["LAZARET_RUNSC"] = str(self.runsc)
        return env


def ensure_user(name):
    """useradd --create-home fills /etc/subuid; make sure of >= 65536 ids."""
    with M.machine_lock():  # against concurrent test sessions' useradd/usermod
        try:
            pwd.getpwnam(name)
        except KeyError:
            say(f"creating user {name}")
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True)
        pw = pwd.getpwnam(name)
        owners = {name, str(pw.pw_uid)}
        for path, opt in (("/etc/subuid", "subuids"), ("/etc/subgid", "subgids")):
            if not any(c >= SUBID_COUNT for _, _, c in _subid_ranges(path, owners)):
                s = _free_subid_start()
                subprocess.run(["usermod", f"--add-{opt}", f"{s}-{s + SUBID_COUNT - 1}", name],
                               check=True)


# ---- image and build -------------------------------------------------------------

def layout_usable(layout: Path):
    return (layout / "index.json").is_file() and subprocess.run(
        ["umoci", "stat", "--image", f"{layout}:latest"], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def build_busybox_layout(cache: Path):
    """tests/images/build.sh's busybox image, reduced to what this benchmark
    runs; only used when that script is absent."""
    bb = shutil.which("busybox") or die("busybox is missing: apt-get install busybox-static")
    if subprocess.run(["ldd", bb], capture_output=True).returncode == 0:
        die(f"{bb} is dynamically linked: apt-get install busybox-static")
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if layout_usable(cache / "busybox"):
            return
        work = Path(tempfile.mkdtemp(prefix=".build-busybox.", dir=cache))
        try:
            r = work / "rootfs"
            for d in ("bin", "etc", "root", "tmp", "proc", "sys", "dev", "usr/bin"):
                (r / d).mkdir(parents=True, exist_ok=True)
            shutil.copy(bb, r / "bin/busybox")
            os.chmod(r / "bin/busybox", 0o755)
            for a in ("sh", "true", "sleep", "ps", "cat", "ls"):
                os.symlink("busybox", r / "bin" / a)
            (r / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
            (r / "etc/group").write_text("root:x:0:\n")
            os.chmod(r / "tmp", 0o1777)
            layer, layout = work / "layer.tar", work / "layout"
            steps = [
                ["tar", "--numeric-owner", "--sort=name", "-C", str(r), "-cf", str(layer), "."],
                ["umoci", "init", "--layout", str(layout)],
                ["umoci", "new", "--image", f"{layout}:latest"],
                ["umoci", "raw", "add-layer", "--image", f"{layout}:latest", str(layer)],
                ["umoci", "config", "--image", f"{layout}:latest", "--config.env",
                 f"PATH={IMAGE_PATH}", "--config.cmd", "/bin/sh", "--config.workingdir", "/"],
                ["umoci", "gc", "--layout", str(layout)],
                ["chmod", "-R", "u+rwX,go+rX,go-w", str(layout)],
            ]
            for argv in steps:
                subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
            (layout / ".complete").touch(mode=0o644)
            shutil.rmtree(cache / "busybox", ignore_errors=True)
            os.rename(layout, cache / "busybox")
        finally:
            shutil.rmtree(work, ignore_errors=True)


def ensure_image():
    if layout_usable(IMAGES / "busybox"):
        return
    script = REPO / "tests" / "images" / "build.sh"
    if script.is_file():
        say(f"building the test images with {script.relative_to(REPO)}")
        subprocess.run(["sh", str(script), str(IMAGES)], check=True, stdin=subprocess.DEVNULL)
    else:
        say(f"building {IMAGES}/busybox (tests/images/build.sh is absent)")
        build_busybox_layout(IMAGES)
    if not layout_usable(IMAGES / "busybox"):
        die(f"{IMAGES}/busybox:latest is still not a usable OCI layout")


# What lazaret needs beside it (src/cli/meson.build): the in-sandbox exec
# helper, the escalation client, the statx fix.
GUEST_HELPERS = ("lazaret-exec", "lazaret-escalate", "lazaret-statx-fix.so")


def ensure_binary():
    env_bin = os.environ.get("LAZARET_BIN")
    if env_bin:
        path = Path(env_bin).resolve()
    else:
        # scripts/build.sh configures the release flavour (once) and builds
        # everything; the benchmark needs only the CLI and its guest helpers,
        # so a broken test target elsewhere does not stop it.
        if not (REPO / BUILD_DIR / "build.ninja").is_file():
            say(f"configuring {BUILD_DIR} (scripts/build.sh release {BUILD_DIR})")
            subprocess.run(["scripts/build.sh", "release", BUILD_DIR], cwd=REPO,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if not (REPO / BUILD_DIR / "build.ninja").is_file():
            die(f"cannot configure {BUILD_DIR}: run scripts/build.sh release {BUILD_DIR}")
        targets = [f"src/cli/{h}" for h in ("lazaret", *GUEST_HELPERS)]
        say(f"building {', '.join(targets)} in {BUILD_DIR}")
        p = subprocess.run(["ninja", "-C", BUILD_DIR, *targets], cwd=REPO,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if p.returncode != 0:
            die(f"the release build failed:\n{p.stdout[-4000:]}{p.stderr[-2000:]}")
        path = REPO / BUILD_DIR / "src" / "cli" / "lazaret"
    for f in (path, *(path.parent / h for h in GUEST_HELPERS)):
        if not f.is_file():
            die(f"{f} is missing (lazaret's guest helpers must sit beside it)")
    # The user must reach the binary and its helpers.
    for d in [path.parent, *path.parent.parents]:
        if not os.stat(d).st_mode & 0o001:
            die(f"{d} is not searchable by other users: {BENCH_USER} cannot run {path}")
    return path


# ---- processes of the user ---------------------------------------------------------

def user_procs(uid):
    """{pid: comm} of every live process whose real uid is uid. Zombies do
    not count: they have exited, and some init processes (this machine's
    included) reap orphans only every second or so."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                status = f.read()
        except OSError:
            continue
        m = re.search(r"^Uid:\s+(\d+)", status, re.M)
        n = re.search(r"^Name:\s+(.*)$", status, re.M)
        state = re.search(r"^State:\s+(\S)", status, re.M)
        if m and int(m.group(1)) == uid and not (state and state.group(1) in "ZX"):
            out[int(entry.name)] = n.group(1) if n else "?"
    return out


def descendants(root_pid):
    """root_pid and every process below it."""
    children = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


def coordinators(uid):
    return [pid for pid, name in user_procs(uid).items() if name == "lz-coordinator"]


def check_domain_runsc(uid, runsc):
    """Dies unless every runsc process below the user's coordinators runs
    the runsc binary given (/proc/PID/exe: runsc re-executes itself as
    sandbox and gofer), so that a Lazaret side measured on the wrong
    release cannot pass for the other (LAZARET_RUNSC ignored or refused)."""
    want = os.path.realpath(runsc)
    with open(want, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"#!"):
        # A wrapper script that adds runsc flags for an experiment
        # (docs/performance.md "Issue 27"): its `exec /PATH …` line names
        # the binary that runs.
        m = re.search(rb"^exec (/\S+)", head, re.M)
        if not m:
            die(f"{runsc} is a script without an `exec /PATH` line")
        want = os.path.realpath(m.group(1).decode())
    seen = set()
    for coordinator in coordinators(uid):
        for pid in descendants(coordinator):
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if os.path.basename(exe).startswith("runsc"):
                seen.add(exe)
    if seen != {want}:
        die(f"the Domain's runsc processes run {sorted(seen) or 'nothing'}, not {want}")


def wait_pids_gone(pids, timeout):
    """Block until every pid has exited (pidfd, no polling interval);
    returns perf_counter_ns of the moment, or None on timeout."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            pass
    try:
        deadline = time.monotonic() + timeout
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        left = len(fds)
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            for fd, _ in poller.poll(remaining * 1000):
                poller.unregister(fd)
                left -= 1
        return time.perf_counter_ns()
    finally:
        for fd in fds:
            os.close(fd)


# Lazaret's own processes of a running Domain (their names as /proc shows them,
# cut to 15 bytes: lz-supervisor-ns is "lz-supervisor-n"; and
# slirp4netns, which the Network Sidecar runs); runsc's processes (runsc,
# runsc-gofer, runsc-sandbox) are the baseline's too and are not counted.
LAZARET_PROCS = ("lz-coordinator", "lz-supervisor", "lz-supervisor-n", "lz-netwatch",
                 "lz-stderr-relay", "slirp4netns")


def memory_kib(pids):
    """(sum of VmRSS, sum of Pss) in KiB of pids that still exist. Pss
    (smaps_rollup) shares each shared page among its users, so a library
    mapped by every process is counted once in all."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                m = re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)
            with open(f"/proc/{pid}/smaps_rollup") as f:
                n = re.search(r"^Pss:\s+(\d+) kB", f.read(), re.M)
        except OSError:
            continue
        rss += int(m.group(1)) if m else 0
        pss += int(n.group(1)) if n else 0
    return rss, pss


TIMING = re.compile(r"timing: (.+?) at ([0-9.]+) ms \(\+[0-9.]+ ms, clock ([0-9.]+) ms\)$")


def timing_marks(text):
    """{phase: ms since this run's CLI began} of the `timing:` lines Lazaret
    writes with LAZARET_LOG=debug (src/common/timing.h): the CLI's on its
    stderr, the coordinator's and supervisor's in the Domain's log. Placed
    by their clock readings, so a joining CLI's timeline also holds the
    marks of a coordinator another CLI started."""
    marks, origin = {}, None
    for line in text.splitlines():
        m = TIMING.search(line)
        if m:
            marks[m.group(1)] = float(m.group(3))
            if m.group(1).startswith("cli: "):
                origin = float(m.group(3)) - float(m.group(2))
    if origin is None:
        return {}
    return {phase: clock - origin for phase, clock in marks.items()}


# ---- Lazaret ---------------------------------------------------------------------

class Lazaret:
    def __init__(self, binary: Path, user: User, workspace: Path, logdir: Path):
        self.bin, self.user, self.ws, self.logdir = binary, user, workspace, logdir
        self.n = 0
        self.ignore_tree = None  # the baseline's namespace runs as the same user

    def others(self):
        procs = user_procs(self.user.uid)
        if self.ignore_tree is not None:
            for pid in descendants(self.ignore_tree):
                procs.pop(pid, None)
        return procs

    def start(self, *argv, env=None):
        self.n += 1
        log = self.logdir / f"lazaret-{self.n:03d}.log"
        f = open(log, "w+")
        # A file, not a pipe: the coordinator may outlive the CLI.
        p = subprocess.Popen([str(self.bin), *argv], cwd=str(self.ws),
                             env={**self.user.env(), **(env or {})},
                             stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                             **self.user.creds())
        return p, f

    def domain_logs(self):
        return {log: log.stat().st_size for log in
                self.user.home.glob(".local/share/lazaret/domains/*/logs/coordinator.log")}

    def profile(self, *argv):
        """One run with LAZARET_LOG=debug: the timing marks of the CLI and of
        the Domain's log lines it added."""
        before = self.domain_logs()
        _, t, out, end = self.run(*argv, env={"LAZARET_LOG": "debug"})
        text = out
        for log, size in self.domain_logs().items():
            with open(log, errors="replace") as f:
                f.seek(before.get(log, 0))
                text += "\n" + f.read()
        return timing_marks(text), t, end

    def diagnose(self):
        """Processes of the user and the tail of every coordinator log."""
        out = [f"processes of {self.user.name}: {self.others()}"]
        for log in sorted(self.user.home.glob(".local/share/lazaret/domains/*/logs/*.log")):
            out.append(f"--- {log} (tail)")
            out += log.read_text(errors="replace").splitlines()[-15:]
        return "\n".join(out)

    def run(self, *argv, check=True, timeout=120, env=None):
        """(status, nanoseconds from spawn to exit, output, end time)."""
        t0 = time.perf_counter_ns()
        p, f = self.start(*argv, env=env)
        # Woken by the exit itself (a pidfd): Popen.wait(timeout=) polls
        # with sleeps of up to 50 ms and would add them to the sample.
        pidfd = os.pidfd_open(p.pid)
        try:
            exited = select.select([pidfd], [], [], timeout)[0]
        finally:
            os.close(pidfd)
        t1 = time.perf_counter_ns()
        if not exited:
            p.kill()
            p.wait()
            f.seek(0)
            die(f"lazaret {' '.join(argv)} still running after {timeout} s (killed); "
                f"output: {f.read().strip()}\n{self.diagnose()}")
        status = p.wait()
        f.seek(0)
        out = f.read()
        f.close()
        if check and status != 0:
            die(f"lazaret {' '.join(argv)} exited {status}:\n{out.rstrip()}")
        return status, t1 - t0, out, t1

    def wait_teardown(self, since_ns):
        """(ns from since_ns until no lz-coordinator of the user remains,
        ns until no process of the user remains at all). The second wait
        also makes sure that the next cold start is really cold."""
        end = wait_pids_gone(coordinators(self.user.uid), TEARDOWN_TIMEOUT)
        if end is None:
            die(f"lz-coordinator still running {TEARDOWN_TIMEOUT:.0f} s after the last "
                f"session\n{self.diagnose()}")
        deadline = time.monotonic() + TEARDOWN_TIMEOUT
        left = self.others()
        while left and time.monotonic() < deadline:
            wait_pids_gone(list(left), 1.0)
            left = self.others()
        if left:
            die(f"processes of {self.user.name} left after teardown\n{self.diagnose()}")
        return end - since_ns, max(end, time.perf_counter_ns()) - since_ns


# ---- statistics and output -------------------------------------------------------

def summary(samples_ns):
    v = [ms(s) for s in samples_ns]
    return {"n": len(v), "mean": statistics.mean(v), "median": statistics.median(v),
            "min": min(v), "max": max(v),
            "stdev": statistics.stdev(v) if len(v) > 1 else 0.0}


def capture(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL).stdout.strip()
    except OSError:
        return ""


ROWS = [
    ("cold", "Cold start", "`lazaret run bench -- true`, no Domain running", "`runsc run` (/bin/true)"),
    ("cold_git0", "Cold start, Git, 0 ignored",
     "the same in a Git repository of 2,500 packages, no git-ignored path",
     "`runsc run` (/bin/true), same samples"),
    ("cold_ignored", "Cold start, Git, 5,000 ignored",
     "the same repository with `__pycache__/` and `node_modules/` in every package "
     "(5,000 ignored directories, the Domain's own copies)",
     "`runsc run` (/bin/true), same samples"),
    ("warm", "Warm join", "`lazaret run bench -- true`, Domain kept alive by another session",
     "`runsc exec` (/bin/true) into a running container"),
    ("teardown", "Teardown", "CLI exit until no `lz-coordinator` remains",
     "`runsc kill KILL` + `runsc delete` of a running container"),
]


def scale_lines(res):
    """The scale figures (issue 13 item 5), as lines of text."""
    one_warm, one_cold = res["warm"]["lazaret"]["median"], res["cold"]["lazaret"]["median"]
    b, c3, w3 = res["burst16"]["median"], res["three_cold"]["median"], res["three_warm"]["median"]
    br, rw = res["burst16_runsc"]["median"], res["warm"]["runsc"]["median"]
    m1 = res["memory_one"]
    lines = [
        f"16 sessions joining one Domain at once, until all 16 ran `true`: {b:.1f} ms median "
        f"= {b / one_warm:.2f}x one warm join ({one_warm:.1f} ms; target <= 2x); bare runsc, "
        f"16 `runsc exec` at once: {br:.1f} ms = {br / rw:.2f}x one `runsc exec` "
        f"({rw:.1f} ms); Lazaret / bare: {b / br:.2f}x",
        f"three Domains started at once, until all three ran `true`: {c3:.1f} ms median = "
        f"{c3 / one_cold:.2f}x one cold start ({one_cold:.1f} ms)",
        f"warm join while three Domains run: {w3:.1f} ms median = {w3 / one_warm:.2f}x the "
        "warm join with one",
        f"Lazaret's own processes of one running Domain ({', '.join(m1['procs'])}): RSS "
        f"{m1['rss_kib'] / 1024:.1f} MiB, PSS {m1['pss_kib'] / 1024:.1f} MiB (target <= 15 MB)",
        "the same, each of three Domains running side by side: " + "; ".join(
            f"RSS {m['rss_kib'] / 1024:.1f} MiB, PSS {m['pss_kib'] / 1024:.1f} MiB"
            for m in res["memory_three"]),
    ]
    return lines


def profile_rows(res):
    """[(phase, plain ms, git ms, warm join ms)] in the order of the Git
    start's timeline, which has every mark of a cold start but one (a mark
    it lacks goes by its time in the next column that has it)."""
    pr = res["profile"]
    cols = ("plain", "git0", "warm")
    order = ("git0", "plain", "warm")
    phases = sorted(set().union(*(pr[c] for c in cols)),
                    key=lambda ph: (next(pr[c][ph] for c in order if ph in pr[c]), ph))
    return [(ph, *(pr[c].get(ph) for c in cols)) for ph in phases]


def print_table(res):
    head = f"{'':30} {'lazaret mean':>13} {'median':>8} {'runsc mean':>11} {'median':>8} " \
           f"{'ratio(median)':>14} {'ratio(mean)':>12}"
    print(head)
    for key, title, _, _ in ROWS:
        lz, rs = res[key]["lazaret"], res[key]["runsc"]
        print(f"{title:30} {lz['mean']:10.1f} ms {lz['median']:5.1f} ms "
              f"{rs['mean']:8.1f} ms {rs['median']:5.1f} ms "
              f"{lz['median'] / rs['median']:13.2f}x {lz['mean'] / rs['mean']:11.2f}x")
    print(f"(5,000 ignored vs 0 ignored, same Git repository: "
          f"{res['cold_ignored']['lazaret']['median'] / res['cold_git0']['lazaret']['median']:.2f}x "
          "median)")
    print(f"(first run, image unpack included: {res['first_run_ms']:.0f} ms; until no "
          f"process of the user remains: median {res['teardown_all']['median']:.1f} ms; "
          f"namespace setup `unshare ... true`: median {res['unshare']['median']:.1f} ms)")
    for line in scale_lines(res):
        print(f"scale: {line}")
    print("profile (LAZARET_LOG=debug; median ms since the CLI began: cold plain | cold "
          "Git, 2,500 packages | warm join):")
    for ph, *cols in profile_rows(res):
        print(f"  {ph:55} " + " ".join(f"{x:8.1f}" if x is not None else "       -"
                                       for x in cols))


INTRO = """# Performance

Benchmarks of Lazaret's own overhead. Each result is a ratio against bare
`runsc` doing the equivalent work on the same machine, with the same rootfs,
in the same run, so the numbers say what Lazaret adds rather than how fast
the machine is. Each section records the machine, date and revision it was
measured on; `bench/README.md` describes every benchmark.

Re-run all of them (as root; they create the unprivileged user `lzbench`):

```
sudo bench/launch/run.sh
```
"""


def launch_title(meta):
    return f"Launch, runsc {meta['runsc'].rsplit(' ', 1)[-1]}"


def launch_section(res, meta):
    lines = [
        f"## {launch_title(meta)}",
        "",
        f"Measured {meta['date']} on {meta['nproc']} CPUs ({meta['cpu']}), kernel "
        f"{meta['kernel']}, `{meta['runsc']}`, lazaret {meta['version']} "
        f"(release build, revision {meta['revision']}). Both sides ran `{meta['runsc_path']}` "
        "(Lazaret through `LAZARET_RUNSC`). "
        f"Re-run: `sudo bench/launch/run.sh --runsc {meta['runsc_path']}` "
        f"({res['cold']['lazaret']['n']} cold starts and teardowns, "
        f"{res['warm']['lazaret']['n']} warm joins; Lazaret and baseline samples "
        "interleaved).",
        "",
        "Image: `busybox:latest` from `tests/images/build.sh`; profile `bench` with "
        "`persistent_dirs = [\"/usr\"]`. Baseline: the same user in one `unshare --user "
        "--map-root-user --map-auto --mount --pid --fork --mount-proc` namespace, "
        "`runsc --ignore-cgroups --network=none --overlay2=root:memory --root=DIR`, on the "
        "rootfs Lazaret unpacked. Times in ms; ratio = Lazaret / baseline.",
        "",
        "| step | Lazaret | mean | median | bare runsc | mean | median | ratio (median) "
        "| ratio (mean) |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for key, title, lzwhat, rswhat in ROWS:
        lz, rs = res[key]["lazaret"], res[key]["runsc"]
        lines.append(
            f"| {title} | {lzwhat} | {lz['mean']:.1f} | {lz['median']:.1f} | {rswhat} | "
            f"{rs['mean']:.1f} | {rs['median']:.1f} | {lz['median'] / rs['median']:.2f}x | "
            f"{lz['mean'] / rs['mean']:.2f}x |")
    lines += [
        "",
        "Context, same run: the very first `lazaret run` of a fresh home, which also "
        f"unpacks the image, took {res['first_run_ms']:.0f} ms. Until no process of the "
        "user remains at all, teardown "
        f"takes {res['teardown_all']['median']:.1f} ms (median). Creating the baseline's "
        "namespace (`unshare --user --map-root-user --map-auto … true`, which the baseline "
        "rows exclude and Lazaret pays on a cold start) takes "
        f"{res['unshare']['median']:.1f} ms (median). 5,000 git-ignored directories "
        "against none, same Git repository: "
        f"{res['cold_ignored']['lazaret']['median'] / res['cold_git0']['lazaret']['median']:.2f}x "
        "(median).",
        "",
        "### Scale",
        "",
    ] + [f"- {line}." for line in scale_lines(res)] + [
        "",
        "### Where a cold start goes",
        "",
        f"Median of {res['profile_n']} cold starts with `LAZARET_LOG=debug`, in ms since "
        "the CLI began (the `timing:` marks of src/common/timing.h: the CLI's on its "
        "stderr, the coordinator's and supervisor's in the Domain's log; one clock for "
        "all). Plain: a cold start in the `ws` workspace (no Git); Git: a cold start in the "
        "repository of 2,500 packages, nothing ignored; warm join: a session joining the "
        "running Domain of `ws` (the coordinator's and supervisor's marks placed on the "
        "joining CLI's timeline by their clock readings).",
        "",
        "| mark | cold, plain | cold, Git | warm join |",
        "| --- | ---: | ---: | ---: |",
    ] + ["| " + " | ".join([ph] + ["" if x is None else f"{x:.1f}" for x in cols]) + " |"
         for ph, *cols in profile_rows(res)] + [
        "",
        "Reading the numbers:",
        "",
        "- The Git rows are the same cold start with `--workspace` naming a Git repository "
        "of 2,500 packages (one tracked file each), without and with an empty `__pycache__/` "
        "and `node_modules/` in every package; the baseline is the same `runsc run` samples. "
        "Their difference is the git-ignored isolation at that scale: the host's `git "
        "ls-files`, one Domain copy checked per path, and 7,500 kernel mounts (5,000 copies, "
        "2,500 package directories as bind points) composed into the one `/workspace` bind "
        "(docs/git.md \"How the copies are mounted\").",
        "- Cold start includes, for Lazaret, configuration loading, the Domain lock, the "
        "coordinator's double fork, the user namespace (newuidmap), the supervisor's "
        "mount and pid namespaces, the overlay for `/usr`, the runtime spec, `runsc "
        "create`/`start`, and the session's `lazaret-exec` round trip. `runsc run` "
        "includes its own cleanup of the exited container; Lazaret's cold time does not "
        "(the sandbox is torn down after the CLI exits: that is the teardown row).",
        "- Warm join is the per-terminal cost once a Domain runs: a socket round trip to "
        "the coordinator plus one `runsc exec`.",
        "- Teardown is what a user waits for before the next cold start of the same "
        "Domain can begin; it runs in the background and the terminal is free at once. "
        "It starts when the last session ends, in parallel with the CLI's own exit, so "
        "the clock (started at the CLI's exit) misses its first moments: a ratio below 1 "
        "does not mean Lazaret's `runsc kill` + `runsc delete --force` is cheaper than the "
        "baseline's.",
        "- The machine is small and shared with test runs: compare ratios rather than "
        "milliseconds, and re-run when mean and median disagree a lot.",
        "",
    ]
    return "\n".join(lines)


def replace_section(text: str, title: str, section: str) -> str:
    """text with its "## title" section (up to the next "## ") replaced by
    section, or section appended when there is none (every benchmark under
    bench/ rewrites its own section of docs/performance.md this way)."""
    m = re.search(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", text, re.S | re.M)
    if m:
        return text[:m.start()] + section + ("\n" if m.end() < len(text) else "") + \
            text[m.end():]
    # A release's first section of a benchmark goes after the other
    # releases' sections of the same benchmark ("## Launch, runsc …").
    prefix, sep, _ = title.partition(", runsc ")
    others = list(re.finditer(rf"^## {re.escape(prefix + sep)}.*?\n.*?(?=^## |\Z)", text,
                              re.S | re.M)) if sep else []
    if others:
        end = others[-1].end()
        if end < len(text):
            return text[:end] + section + "\n" + text[end:]
    return text.rstrip("\n") + "\n\n" + section


def write_section(title: str, section: str):
    """Rewrite the "## title" section of docs/performance.md."""
    text = DOC.read_text() if DOC.exists() else INTRO
    DOC.write_text(replace_section(text, title, section).rstrip("\n") + "\n")


def write_doc(section, title):
    write_section(title, section)


# ---- the benchmark ---------------------------------------------------------------

# What Lazaret's runtime spec gives a sandbox process (src/oci/spec.c
# lz_spec_process, lz_spec_container), for bench/inside's "+spec" variant:
# root's capabilities, no no_new_privs, RLIMIT_NPROC, and its extra mounts.
LAZARET_CAPS = ["CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
                "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP",
                "CAP_SETUID", "CAP_SYS_CHROOT"]
LAZARET_NPROC = 512  # src/oci/spec.h LZ_SPEC_NPROC
LAZARET_MOUNTS = [
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
     "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
    {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
     "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/run/lazaret", "type": "tmpfs", "source": "tmpfs",
     "options": ["nosuid", "nodev", "mode=755"]},
]
LAZARET_MASKED = ["/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
                  "/proc/sched_debug", "/sys/firmware"]


def write_bundle(d: Path, rootfs: Path, args, uid, gid, binds=(), lazaret_env=None):
    """A bundle of rootfs running args; binds: (host dir, guest dir) pairs
    mounted read-write (bench/inside's workspace). With lazaret_env (the
    environment a Lazaret session sees), the spec takes Lazaret's process
    settings and extra mounts (LAZARET_*), and d/process.json is the process
    of a Lazaret session for `runsc exec --process` (its args filled in per
    exec): bench/inside's "+spec" variant."""
    d.mkdir()
    process = {
        "terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
        "env": [f"PATH={IMAGE_PATH}"], "cwd": "/",
        "capabilities": {"bounding": [], "effective": [], "permitted": []},
        "noNewPrivileges": True,
    }
    if lazaret_env is not None:
        process.update({
            "env": list(lazaret_env),
            "capabilities": {"bounding": LAZARET_CAPS, "effective": LAZARET_CAPS,
                             "permitted": LAZARET_CAPS, "inheritable": [], "ambient": []},
            "noNewPrivileges": False,
            "rlimits": [{"type": "RLIMIT_NPROC", "soft": LAZARET_NPROC, "hard": LAZARET_NPROC}],
        })
    spec = {
        "ociVersion": "1.0.2",
        "process": process,
        "root": {"path": str(rootfs), "readonly": False},
        "hostname": "bench",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
        ] + (LAZARET_MOUNTS if lazaret_env is not None else [])
        + [{"destination": guest, "type": "bind", "source": str(host),
            "options": ["rbind", "rw"]} for host, guest in binds],
        "linux": {"namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network")]},
    }
    if lazaret_env is not None:
        spec["linux"]["maskedPaths"] = LAZARET_MASKED
    files = [d / "config.json"]
    (d / "config.json").write_text(json.dumps(spec, indent=2) + "\n")
    if lazaret_env is not None:
        # Lazaret's sessions start in /workspace (src/oci/spec.c).
        (d / "process.json").write_text(json.dumps({**process, "cwd": "/workspace"}) + "\n")
        files.append(d / "process.json")
    for p in (d, *files):
        os.chown(p, uid, gid)


def mkdir_user(path: Path, mode, user_ids):
    path.mkdir(mode=mode)
    os.chown(path, *user_ids)
    os.chmod(path, mode)


def fresh_user(prefix, runsc=None):
    """The prologue every benchmark shares: the user BENCH_USER (created
    with a subordinate id range if missing), which must not run any process
    yet (a benchmark needs it to itself), and a fresh /tmp/PREFIX-XXXX
    directory for its HOME and XDG_RUNTIME_DIR. Returns (user, root, ids);
    the caller removes root (end_bench) and fills it with user_home."""
    ensure_user(BENCH_USER)
    pw = pwd.getpwnam(BENCH_USER)
    if user_procs(pw.pw_uid):
        die(f"{BENCH_USER} already runs processes {user_procs(pw.pw_uid)}: is another "
            "benchmark running? (this one needs the user to itself)")
    root = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir="/tmp"))
    os.chmod(root, 0o755)
    say(f"working in {root}")
    return User(BENCH_USER, root / "home", root / "run", runsc=runsc), root, \
        (pw.pw_uid, pw.pw_gid)


def prepared_rootfs(lz, user, **run_kw):
    """The profile `bench`'s first run, which prepares (unpacks) its image:
    not a sample. Returns the run's duration and the one prepared rootfs,
    which the bare baselines then use."""
    say("first run (image preparation)")
    _, first, _, end = lz.run("run", "bench", "--", "true", **run_kw)
    lz.wait_teardown(end)
    rootfs = sorted((user.home / ".local/share/lazaret/images/rootfs").glob("*/rootfs"))
    if len(rootfs) != 1:
        die(f"expected one prepared rootfs, found {rootfs}")
    return first, rootfs[0]


def user_home(user, profiles, dirs=("ws", "logs")):
    """HOME (0755) and XDG_RUNTIME_DIR (0700) of a fresh_user, its
    ~/.config/lazaret/config.toml (0600) holding the trusted host
    configuration's schema line and then `profiles` (TOML text), and the
    directories `dirs` below HOME: names (0755) or (name, mode) pairs."""
    ids = (user.uid, user.gid)
    mkdir_user(user.home, 0o755, ids)
    mkdir_user(user.runtime, 0o700, ids)
    for d in (".config", (".config/lazaret", 0o700), *dirs):
        name, mode = (d, 0o755) if isinstance(d, str) else d
        mkdir_user(user.home / name, mode, ids)
    cfg = user.home / ".config/lazaret/config.toml"
    cfg.write_text('schema = "lazaret-trusted-host-config-v1"\n' + profiles)
    os.chown(cfg, *ids)
    os.chmod(cfg, 0o600)


# HOME's directories of a benchmark with bench/launch's baseline (runsc's
# state and scratch beside its bundles).
BASELINE_DIRS = ("ws", "logs", "baseline", ("baseline/runsc", 0o700), ("baseline/tmp", 0o700))


IGNORED_PACKAGES = 2500  # x (__pycache__/ + node_modules/) = 5,000 ignored directories


def git_workspace(user, ws: Path, ignored: bool):
    """A Git repository of IGNORED_PACKAGES packages p<i>/ with a tracked
    file each and, when ignored, an empty __pycache__/ and node_modules/ in
    each (git-ignored: the Domain's own copies, docs/git.md "Git-ignored
    files"). Made as the user, without a shell."""
    mkdir_user(ws, 0o755, (user.uid, user.gid))
    for i in range(IGNORED_PACKAGES):
        p = ws / f"p{i}"
        mkdir_user(p, 0o755, (user.uid, user.gid))
        f = p / "f"
        f.write_text(f"{i}\n")
        os.chown(f, user.uid, user.gid)
        if ignored:
            for d in ("__pycache__", "node_modules"):
                mkdir_user(p / d, 0o755, (user.uid, user.gid))
    gi = ws / ".gitignore"
    gi.write_text("__pycache__/\nnode_modules/\n")
    os.chown(gi, user.uid, user.gid)
    ident = ["-c", "user.name=Bench", "-c", "user.email=bench@lazaret.invalid"]
    for argv in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-q", "-m", "packages"]):
        subprocess.run(["git", "-C", str(ws), *argv], check=True, env=user.env(),
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **user.creds())
    if ignored:
        listed = subprocess.run(["git", "-C", str(ws), "ls-files", "-z", "--others", "--ignored",
                                 "--exclude-standard", "--directory"], check=True,
                                capture_output=True, env=user.env(), **user.creds()).stdout
        n = len([e for e in listed.split(b"\0") if e])
        if n != 2 * IGNORED_PACKAGES:
            die(f"{ws}: git lists {n} ignored paths, not {2 * IGNORED_PACKAGES}")


def wait_running(lz, proc, log, workspace=None):
    """Until the long session proc (`sleep 600`) is seen inside its sandbox."""
    extra = ("--workspace", str(workspace)) if workspace else ()
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            log.seek(0)
            die(f"the keep-alive session exited {proc.returncode}: {log.read()}"
                f"\n{lz.diagnose()}")
        _, _, out, _ = lz.run("run", "bench", *extra, "--", "ps", check=False)
        if "sleep 600" in out:
            return
        if time.monotonic() > deadline:
            log.seek(0)
            die(f"the keep-alive session never appeared in the sandbox: {out}\n"
                f"its output: {log.read()}\n{lz.diagnose()}")
        time.sleep(0.2)


def together(lz, argvs, what):
    """Nanoseconds from starting one `lazaret` per argv at once until the
    last has exited (each must exit 0)."""
    t0 = time.perf_counter_ns()
    started = [lz.start(*argv) for argv in argvs]
    end = wait_pids_gone([proc.pid for proc, _ in started], 120)
    for proc, f in started:
        if end is None or proc.wait() != 0:
            f.seek(0)
            die(f"{what} exited {proc.returncode}: {f.read()}\n{lz.diagnose()}")
        f.close()
    return end - t0


def domain_memory(uid, coordinator):
    """{rss_kib, pss_kib, procs} of Lazaret's own processes of the Domain
    whose coordinator is that pid (it and every process below it whose name
    is in LAZARET_PROCS)."""
    procs = user_procs(uid)
    mine = [pid for pid in descendants(coordinator) if procs.get(pid) in LAZARET_PROCS]
    rss, pss = memory_kib(mine)
    return {"rss_kib": rss, "pss_kib": pss,
            "procs": sorted(procs[pid] for pid in mine if pid in procs)}


def bench(args):
    binary = ensure_binary()
    ensure_image()
    user, root, ids = fresh_user("lzbench", args.runsc)
    lz = sleeper = baseline = None
    try:
        user_home(user, "[profiles.bench]\n"
                  f'image = "{IMAGE_REF}"\n'
                  'persistent_dirs = ["/usr"]\n', BASELINE_DIRS)
        lz = Lazaret(binary, user, user.home / "ws", user.home / "logs")
        res = {}
        ws_git0, ws_ign = user.home / "ws-git0", user.home / "ws-ignored"
        say(f"making two Git workspaces of {IGNORED_PACKAGES} packages (0 and "
            f"{2 * IGNORED_PACKAGES} ignored directories)")
        git_workspace(user, ws_git0, False)
        git_workspace(user, ws_ign, True)

        # 1. First run: prepares (unpacks) the image. Not a cold start sample.
        first, rootfs = prepared_rootfs(lz, user)
        res["first_run_ms"] = ms(first)
        base = user.home / "baseline"
        write_bundle(base / "true", rootfs, ["/bin/true"], *ids)
        write_bundle(base / "sleep", rootfs, ["/bin/sleep", "600"], *ids)
        baseline = Baseline(user, base, root / "baseline.log", args.runsc)
        lz.ignore_tree = baseline.proc.pid

        # 2. Cold start and teardown, interleaved with runsc run / kill+delete.
        say(f"cold start and teardown: 1 warm-up + {args.cold} samples each")
        cold = {"lazaret": [], "runsc": []}
        down = {"lazaret": [], "runsc": []}
        down_all = []
        cold_git = {"git0": [], "ignored": []}
        for i in range(args.cold + 1):
            _, t, _, end = lz.run("run", "bench", "--", "true")
            td, td_all = lz.wait_teardown(end)
            # The same cold start in the two Git workspaces (first use of
            # each is the warm-up: it also makes the Domain's copies).
            tg = {}
            for key, ws in (("git0", ws_git0), ("ignored", ws_ign)):
                _, tg[key], _, end_g = lz.run("run", "bench", "--workspace", str(ws), "--",
                                              "true", timeout=600)
                lz.wait_teardown(end_g)
            rc = baseline.ask(f"cold c{i}")
            baseline.ask(f"sleeper t{i}")
            rd = baseline.ask(f"teardown t{i}")
            if i == 0:
                continue  # warm-up
            cold["lazaret"].append(t)
            for key in cold_git:
                cold_git[key].append(tg[key])
            down["lazaret"].append(td)
            cold["runsc"].append(rc)
            down["runsc"].append(rd)
            down_all.append(td_all)

        # 2b. Where a cold start goes: the timing marks of LAZARET_LOG=debug
        # (not samples: debug output is written).
        say(f"profile: {args.profile} cold starts with LAZARET_LOG=debug, plain and Git")
        profile = {"plain": [], "git0": []}
        for _ in range(args.profile):
            for key, extra in (("plain", ()), ("git0", ("--workspace", str(ws_git0)))):
                marks, t, end = lz.profile("run", "bench", *extra, "--", "true")
                marks["total (CLI start to exit)"] = ms(t)
                profile[key].append(marks)
                lz.wait_teardown(end)
        res["profile_n"] = args.profile
        res["profile"] = {key: {phase: statistics.median(m[phase] for m in runs if phase in m)
                                for phase in {p for m in runs for p in m}}
                          for key, runs in profile.items()}

        # 3. Warm join: a long session keeps the Domain alive.
        say(f"warm join: 2 warm-ups + {args.warm} samples each")
        # The Domain is started with LAZARET_LOG=debug: its coordinator and
        # supervisor then mark every session too (two log lines each), for
        # the warm join profile below.
        sleeper, sleeper_log = lz.start("run", "bench", "--", "sleep", "600",
                                        env={"LAZARET_LOG": "debug"})
        wait_running(lz, sleeper, sleeper_log)
        check_domain_runsc(user.uid, args.runsc)
        coord = coordinators(user.uid)
        baseline.ask("sleeper w")
        warm = {"lazaret": [], "runsc": []}
        for i in range(args.warm + 2):
            _, t, _, _ = lz.run("run", "bench", "--", "true")
            rw = baseline.ask("exec w")
            if i >= 2:
                warm["lazaret"].append(t)
                warm["runsc"].append(rw)
        warm_profile = []
        for _ in range(args.profile):
            marks, t, _ = lz.profile("run", "bench", "--", "true")
            marks["total (CLI start to exit)"] = ms(t)
            warm_profile.append(marks)
        res["profile"]["warm"] = {
            phase: statistics.median(m[phase] for m in warm_profile if phase in m)
            for phase in {p for m in warm_profile for p in m}}

        # 3b. Scale, one Domain: 16 sessions joining at once, and the memory
        # of Lazaret's own processes while sessions run.
        say(f"scale: 16 sessions joining at once, {args.cold} times")
        burst, burst_runsc = [], []
        for _ in range(args.cold):
            burst_runsc.append(baseline.ask("burst w"))
            burst.append(together(lz, [("run", "bench", "--", "true")] * 16, "a joining session"))
        res["burst16"] = summary(burst)
        res["burst16_runsc"] = summary(burst_runsc)
        res["memory_one"] = domain_memory(user.uid, coord[0])
        if sleeper.poll() is not None or coordinators(user.uid) != coord or len(coord) != 1:
            die("the Domain did not stay up through the warm joins: the samples are not joins"
                f"\n{lz.diagnose()}")
        baseline.ask("teardown w")
        sleeper.send_signal(signal.SIGTERM)
        sleeper.wait(timeout=30)
        sleeper_log.close()
        lz.wait_teardown(time.perf_counter_ns())
        sleeper = None

        # 3c. Three Domains side by side: started at once (time until all
        # three ran `true`), then kept up together for a warm join in each
        # and the memory of each.
        say(f"scale: three Domains side by side, {args.cold} times")
        spaces = [user.home / "ws"] + [user.home / f"ws-side{i}" for i in (2, 3)]
        for ws in spaces[1:]:
            if not ws.exists():
                mkdir_user(ws, 0o755, ids)
        three = []
        for _ in range(args.cold):
            three.append(together(lz, [("run", "bench", "--workspace", str(ws), "--", "true")
                                       for ws in spaces], "a cold start of three"))
            lz.wait_teardown(time.perf_counter_ns())
        res["three_cold"] = summary(three)
        sleepers = []
        for ws in spaces:
            sl = lz.start("run", "bench", "--workspace", str(ws), "--", "sleep", "600")
            sleepers.append(sl)
            wait_running(lz, *sl, workspace=ws)
        coords = coordinators(user.uid)
        if len(coords) != 3:
            die(f"three Domains should run, found coordinators {coords}\n{lz.diagnose()}")
        warm3 = []
        for _ in range(max(2, args.warm // 3)):
            for ws in spaces:
                _, t, _, _ = lz.run("run", "bench", "--workspace", str(ws), "--", "true")
                warm3.append(t)
        res["three_warm"] = summary(warm3)
        res["memory_three"] = [domain_memory(user.uid, c) for c in coords]
        for proc, f in sleepers:
            proc.send_signal(signal.SIGTERM)
        for proc, f in sleepers:
            proc.wait(timeout=30)
            f.close()
        lz.wait_teardown(time.perf_counter_ns())

        # 4. Context: the cost of the namespace the baseline runs in.
        ns = []
        for _ in range(args.cold):
            t0 = time.perf_counter_ns()
            subprocess.run([*UNSHARE, "true"], check=True, env=user.env(), cwd=str(user.home),
                           stdin=subprocess.DEVNULL, **user.creds())
            ns.append(time.perf_counter_ns() - t0)

        res["cold"] = {k: summary(v) for k, v in cold.items()}
        for key in cold_git:
            res[f"cold_{key}"] = {"lazaret": summary(cold_git[key]), "runsc": res["cold"]["runsc"]}
        res["warm"] = {k: summary(v) for k, v in warm.items()}
        res["teardown"] = {k: summary(v) for k, v in down.items()}
        res["unshare"] = summary(ns)
        res["teardown_all"] = summary(down_all)
        res["raw_ms"] = {name: {k: [round(ms(x), 2) for x in v] for k, v in d.items()}
                         for name, d in (("cold", cold), ("warm", warm), ("teardown", down))}
        res["raw_ms"]["cold_git"] = {k: [round(ms(x), 2) for x in v] for k, v in cold_git.items()}
        res["raw_ms"]["teardown_all"] = [round(ms(x), 2) for x in down_all]
        return res, binary
    finally:
        if baseline is not None:
            baseline.close()
        end_bench(sleeper, user.uid, root, args.keep)


def check_runsc(path):
    """The absolute path of a runsc the benchmark user can run (Lazaret
    checks LAZARET_RUNSC itself too, docs/runtime.md)."""
    p = Path(path)
    if not p.is_absolute():
        die(f"--runsc {path}: give an absolute path")
    if not (p.is_file() and os.access(p, os.X_OK)):
        die(f"--runsc {path}: not an executable file (scripts/install-deps.sh installs "
            "the newer release at /opt/lazaret/runsc-20240729/runsc)")
    if not runsc_version(p).startswith("runsc version"):
        die(f"--runsc {path}: `{path} --version` does not name a runsc release")
    return str(p)


def stop_process(p):
    """End a session the benchmark started (SIGTERM, SIGKILL after 30 s)."""
    if p is not None and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def end_bench(sleeper, uid, root, keep, net=None):
    """The end of a benchmark run, also after a failure: the session that
    held the Domain ended (SIGTERM, SIGKILL after 30 s), the Domain's
    teardown waited for, the test host closed, the working tree removed
    unless kept."""
    stop_process(sleeper)
    left = coordinators(uid)
    if left and wait_pids_gone(left, TEARDOWN_TIMEOUT) is None:
        say(f"warning: lz-coordinator {left} still running")
    if net is not None:
        net.close()
    if keep:
        say(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


def stats(v):
    return {"n": len(v), "median": statistics.median(v), "mean": statistics.mean(v),
            "min": min(v), "max": max(v)}


def runsc_version(runsc=RUNSC_DEFAULT) -> str:
    """The first line of `runsc --version`, e.g. "runsc version 0.0~20240729.0"."""
    out = capture([str(runsc), "--version"])
    return out.splitlines()[0] if out else f"{runsc}: no version"


def runsc_release(runsc=RUNSC_DEFAULT) -> str:
    """The release alone ("0.0~20240729.0"), for section titles."""
    return runsc_version(runsc).rsplit(" ", 1)[-1]


def run_meta(binary, runsc="runsc") -> dict:
    """Where and on what a benchmark ran: date, CPUs, kernel, runsc, the
    Lazaret binary's version and the revision of src (shared by every
    benchmark under bench/)."""
    rev = capture(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]) or "unknown"
    if capture(["git", "-C", str(REPO), "status", "--porcelain", "--", "src", "meson.build",
                "meson_options.txt"]):
        rev += " + local changes to src"
    cpu = "unknown CPU"
    try:
        m = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(), "cpu": re.sub(r"\s+", " ", cpu), "kernel": platform.release(),
        "runsc": runsc_version(runsc),
        "runsc_path": str(runsc),
        "version": capture([str(binary), "--version"]).replace("lazaret ", "") or "?",
        "revision": rev,
    }


def main():
    ap = argparse.ArgumentParser(description="Lazaret launch benchmark (bench/README.md)")
    ap.add_argument("--cold", type=int, default=10, help="cold start/teardown samples (10)")
    ap.add_argument("--warm", type=int, default=30, help="warm join samples (30)")
    ap.add_argument("--profile", type=int, default=5,
                    help="cold starts profiled with LAZARET_LOG=debug, per workspace (5)")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    ap.add_argument("--keep", action="store_true", help="keep the /tmp/lzbench-* directory")
    ap.add_argument("--json", metavar="FILE", help="also write every sample to FILE")
    ap.add_argument("--runsc", metavar="PATH", default=RUNSC_DEFAULT,
                    help="the runsc of both sides: the baseline's, and Lazaret's through "
                    f"LAZARET_RUNSC ({RUNSC_DEFAULT}); each release writes its own section")
    ap.add_argument("--inner", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--inner-flag", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        return inner_main(Path(args.inner), args.runsc, args.inner_flag)
    if os.geteuid() != 0:
        die("run as root (sudo bench/launch/run.sh): it creates the unprivileged user "
            f"{BENCH_USER} that Lazaret runs as")
    if args.cold < 2 or args.warm < 2:
        die("--cold and --warm need at least 2 samples")
    for tool in ("unshare", "newuidmap", "umoci"):
        if not shutil.which(tool):
            die(f"{tool} is missing: scripts/install-deps.sh")
    args.runsc = check_runsc(args.runsc)
    say(f"runsc of both sides: {args.runsc} ({runsc_version(args.runsc)})")

    with M.tun_usable():
        res, binary = bench(args)
    meta = run_meta(binary, args.runsc)
    print(f"{meta['runsc']} ({args.runsc})")
    print_table(res)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, **res}, indent=2) + "\n")
    if not args.no_write:
        write_doc(launch_section(res, meta), launch_title(meta))
        say(f"wrote the \"{launch_title(meta)}\" section of {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
