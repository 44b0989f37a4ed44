# SPDX-License-Identifier: Apache-2.0
"""Secrets never reach disk (issue 9, item 5; docs/runtime.md, "Secrets in
memory and core dumps").

A profile forwards a random token from the host environment (`env:`). Every
Lazaret process that holds it is non-dumpable with RLIMIT_CORE 1, and the
runsc processes it executes keep that limit:

- with `ulimit -c unlimited` in the process that starts lazaret, a
  kernel.core_pattern that writes absolute files into a test directory and
  fs.suid_dumpable=0, SIGSEGV to the CLI, the coordinator, the supervisor's
  outer process and a session's `runsc exec` leaves no core and no file
  anywhere (test dir, runtime dir, Domain Root, core dir) holding the token;
  the control, `sleep` with the same environment, limit and pattern, leaves a
  core that holds it;
- a piped core_pattern ignores RLIMIT_CORE 0 (control: `sleep` with limit 0
  is piped) but not Lazaret's processes;
- host-side evidence per process: /proc/PID files owned by root (the
  kernel's mark of a non-dumpable process), "Max core file size" 1 in
  /proc/PID/limits, and the token gone from the CLI's and the coordinator's
  environment and memory once the session runs;
- `lazaret status`, logs and runsc logs never contain the token; `lazaret
  doctor` reports the host's core-dump settings.

kernel.core_pattern and fs.suid_dumpable are machine-wide: they are changed
as root under a lock of this file's own (/run/lazaret-tests/core_pattern.lock),
the originals are saved in /run/lazaret-tests/core_pattern.saved first and
restored afterwards, and a run that finds a saved file (an earlier run was
killed) restores it before anything else.
"""

import fcntl
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import STATE_DIR, _read, domain_processes, files_containing, ok

CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
SUID_DUMPABLE = Path("/proc/sys/fs/suid_dumpable")
SAVED = STATE_DIR / "core_pattern.saved"
LOCK = STATE_DIR / "core_pattern.lock"

# The sanitizers must not stand in for the kernel: ASan's SIGSEGV handler
# would report and exit (no core whatever Lazaret does), and its
# disable_coredump lowers the soft limit at start-up.
ASAN_KERNEL_CORE = "disable_coredump=0:handle_segv=0:handle_abort=0"


def _restore_saved():
    if SAVED.exists():
        pattern, suid = SAVED.read_text().split("\n", 1)
        CORE_PATTERN.write_text(pattern + "\n")
        SUID_DUMPABLE.write_text(suid.strip() + "\n")
        SAVED.unlink()


@contextmanager
def core_settings(pattern: str, suid_dumpable: int = 0):
    STATE_DIR.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _restore_saved()
        old_pattern = CORE_PATTERN.read_text().rstrip("\n")
        old_suid = SUID_DUMPABLE.read_text().strip()
        SAVED.write_text(f"{old_pattern}\n{old_suid}\n")
        old_limit = resource.getrlimit(resource.RLIMIT_CORE)
        try:
            CORE_PATTERN.write_text(pattern + "\n")
            SUID_DUMPABLE.write_text(f"{suid_dumpable}\n")
            # `ulimit -c unlimited` in the process that starts lazaret: ours,
            # inherited by every child we start.
            resource.setrlimit(resource.RLIMIT_CORE,
                               (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_CORE, old_limit)
            _restore_saved()
    finally:
        os.close(fd)


@pytest.fixture
def core_dir(lz):
    d = Path(tempfile.mkdtemp(prefix="lzt-core-", dir="/tmp"))
    # Sticky and world-writable: a dump of a process running as a subordinate
    # uid (the sandbox) would be written too, not silently refused.
    d.chmod(0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def asan_env(lz, extra: dict) -> dict:
    asan = lz.env().get("ASAN_OPTIONS", "")
    return {**extra, "ASAN_OPTIONS": f"{asan}:{ASAN_KERNEL_CORE}" if asan else ASAN_KERNEL_CORE}


def start_plain(lz, argv, env, core_limit=None):
    """A plain program as the test user with the same environment (the control)."""
    def pre():
        if core_limit is not None:
            resource.setrlimit(resource.RLIMIT_CORE, (core_limit, core_limit))
    return subprocess.Popen(argv, env=lz.env(env), cwd="/tmp", stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            user=lz.user.uid, group=lz.user.gid,
                            extra_groups=list(lz.user.groups), preexec_fn=pre)


def gone(pid: int, timeout: float = 20.0) -> bool:
    """Wait until pid has exited (zombie or reaped): its dump, if any, is then
    written (the kernel dumps before the process exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = _read(f"/proc/{pid}/stat").decode("utf-8", "replace")
        if not stat or stat[stat.rfind(")") + 2:].startswith(("Z", "X")):
            return True
        time.sleep(0.05)
    return False


def core_limit_of(pid: int) -> str:
    for line in _read(f"/proc/{pid}/limits").decode().splitlines():
        if line.startswith("Max core file size"):
            return " ".join(line.split()[4:6])
    return "?"


def proc_owner(pid: int) -> int:
    """Owner of /proc/PID/environ: root for a non-dumpable process
    (task_dump_owner), the process's user otherwise."""
    try:
        return os.stat(f"/proc/{pid}/environ").st_uid
    except OSError:
        return -1


def memory_holds(pid: int, needle: bytes, sanitizer_copy: bytes = None) -> list:
    """Mappings of pid's address space (read as root through /proc/PID/mem)
    that contain needle. sanitizer_copy: the process's initial environment
    block, which the sanitizer runtime of an ASan build caches privately (it
    reads /proc/self/environ before main; a release build has no such copy):
    a needle inside an exact copy of it is not counted."""
    hits = []
    maps = _read(f"/proc/{pid}/maps").decode("utf-8", "replace").splitlines()
    try:
        mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ["cannot open /proc/PID/mem"]
    try:
        for line in maps:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if "r" not in f[1] or (len(f) > 5 and f[5] in ("[vvar]", "[vsyscall]")):
                continue
            if hi - lo > (1 << 31):  # ASan's high shadow: reserved, never written
                continue
            chunk, off = 1 << 24, lo
            while off < hi:
                try:
                    data = os.pread(mem, min(chunk + len(needle), hi - off), off)
                except OSError:
                    break
                n = data.count(needle)
                if sanitizer_copy:
                    n -= data.count(sanitizer_copy)
                if n > 0:
                    hits.append(line)
                    break
                off += chunk
    finally:
        os.close(mem)
    return hits


def roles(root: Path) -> dict:
    out = {}
    for p in domain_processes(root):
        out.setdefault(p.role, []).append(p)
    return out


def runsc_exec_of(root: Path) -> list:
    return [p for p in domain_processes(root) if p.role == "runsc" and " exec " in p.cmdline
            and "--process" in p.cmdline]


def test_lazaret_processes_leave_no_core_and_no_secret(rig, lz, core_dir):
    token = "lzsecret-" + secrets.token_hex(16)
    needle = token.encode()
    env = asan_env(lz, {"LZ_SECRET_TOKEN": token})
    rig.config({"bb": {"env": {"TOKEN": "env:LZ_SECRET_TOKEN"}}})
    problems = []
    with core_settings(f"{core_dir}/core.%P.%e", 0):
        # Control: the same environment, limit and pattern dump a plain program,
        # and the dump holds the token.
        ctl = start_plain(lz, ["sleep", "300"], env)
        time.sleep(0.3)
        assert proc_owner(ctl.pid) == lz.user.uid, "control: a plain process is dumpable"
        ctl.send_signal(signal.SIGSEGV)
        ctl.wait(timeout=20)
        control = [p for p in core_dir.iterdir() if p.name.startswith(f"core.{ctl.pid}.")]
        assert control, f"control: no core of sleep in {core_dir}: {list(core_dir.iterdir())}"
        assert needle in control[0].read_bytes(), "control: the core lacks the token"
        for p in control:
            p.unlink()

        killed = {}

        # 1. The evidence while a session runs, then SIGSEGV to a runsc exec.
        holder = rig.hold("bb", script='echo "token=$TOKEN"', env=env)
        assert f"token={token}\n" in holder.stdout, holder.stdout
        r = roles(lz.root)
        for role in ("cli", "coordinator", "supervisor-ns", "supervisor"):
            for p in r.get(role, []):
                if proc_owner(p.pid) != 0:
                    problems.append(f"{p}: dumpable (/proc/{p.pid} not root-owned)")
                if core_limit_of(p.pid) not in ("1 1", "0 0"):
                    problems.append(f"{p}: core limit {core_limit_of(p.pid)}")
            if not r.get(role):
                problems.append(f"no {role} process found: {r}")
        for p in r.get("runsc", []) + r.get("sandbox", []):
            if core_limit_of(p.pid) not in ("1 1", "0 0"):
                problems.append(f"{p}: core limit {core_limit_of(p.pid)}")
        # Wiped: the token is in neither the environment nor the memory of the
        # CLI and the coordinator once the session runs (the supervisor keeps
        # it for later sessions; docs/runtime.md).
        asan = b"__asan_init" in lz.bin.read_bytes()
        initial_env = "\0".join(f"{k}={v}" for k, v in lz.env(env).items()).encode()
        # The sandbox's output reaches the test before the CLI has read the
        # coordinator's STARTED (when it wipes): allow it a moment.
        for role in ("cli", "coordinator"):
            for p in r.get(role, []):
                deadline = time.monotonic() + 5
                while True:
                    in_env = needle in _read(f"/proc/{p.pid}/environ")
                    hits = memory_holds(p.pid, needle, initial_env if asan else None)
                    if not (in_env or hits) or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                if in_env:
                    problems.append(f"{p}: the token is in its environment")
                if hits:
                    problems.append(f"{p}: the token is in its memory: {hits}")
        status = ok(lz.run(["status"]))
        if needle in (status.stdout + status.stderr).encode():
            problems.append("lazaret status shows the token")
        running = files_containing(lz.root, needle)
        if running:
            problems.append(f"files hold the token while the session runs: {running}")

        execs = runsc_exec_of(lz.root)
        assert execs, f"no runsc exec process: {domain_processes(lz.root)}"
        for p in execs:
            killed[p.pid] = p
            os.kill(p.pid, signal.SIGSEGV)
            assert gone(p.pid), f"{p} survived SIGSEGV"
        holder.finish()

        # 2. The supervisor's pid-namespace init ignores SIGSEGV from outside
        # (the kernel drops default-action signals to a namespace init), so
        # it stays; its outer process does not.
        holder = rig.hold("bb", env=env)
        r = roles(lz.root)
        init = r["supervisor"][0]
        os.kill(init.pid, signal.SIGSEGV)
        time.sleep(0.5)
        assert not gone(init.pid, 0.1), f"{init}: died of a SIGSEGV sent from outside"
        outer = r["supervisor-ns"][0]
        killed[outer.pid] = outer
        os.kill(outer.pid, signal.SIGSEGV)
        assert gone(outer.pid), f"{outer} survived SIGSEGV"
        killed[init.pid] = init  # dies with its parent (PR_SET_PDEATHSIG)
        holder.finish()

        # 3. The coordinator.
        holder = rig.hold("bb", env=env)
        coord = roles(lz.root)["coordinator"][0]
        killed[coord.pid] = coord
        os.kill(coord.pid, signal.SIGSEGV)
        assert gone(coord.pid), f"{coord} survived SIGSEGV"
        holder.finish()

        # 4. The CLI: our child, so its wait status shows how it ended.
        holder = rig.hold("bb", env=env)
        killed[holder.proc.pid] = "cli"
        holder.proc.send_signal(signal.SIGSEGV)
        _, wstatus = os.waitpid(holder.proc.pid, 0)
        holder.proc.returncode = -signal.SIGSEGV
        assert os.WIFSIGNALED(wstatus) and os.WTERMSIG(wstatus) == signal.SIGSEGV, \
            f"the CLI did not die of SIGSEGV (wait status {wstatus:#x}): a handler caught it"
        if os.WCOREDUMP(wstatus):
            problems.append("the kernel reports that the CLI dumped core")
        for f in (holder.proc.stdout, holder.proc.stderr):
            f.close()
        rig.sessions.remove(holder)

        # A run after the kills recovers what the dead coordinator left.
        ok(rig.run("bb", ["true"], env=env))

    cores = [p for p in core_dir.iterdir()
             if (m := re.match(r"core\.(\d+)\.", p.name)) and int(m.group(1)) in killed]
    if cores:
        problems.append(f"core files of Lazaret processes: {cores}")
    for where in (lz.root, core_dir):
        hits = files_containing(where, needle)
        if hits:
            problems.append(f"files hold the token: {hits}")
    logs = list(lz.root.rglob("logs/*.log"))
    if not logs:
        problems.append("no Lazaret log under the Domain Root (nothing was searched)")
    assert not problems, "\n".join(problems)


def test_piped_core_pattern_ignores_limit_zero_but_not_lazaret(rig, lz, core_dir):
    """A piped core_pattern ignores RLIMIT_CORE 0 (control) but refuses
    Lazaret's processes: they are non-dumpable, and runsc's limit is 1."""
    token = "lzsecret-" + secrets.token_hex(16)
    needle = token.encode()
    env = asan_env(lz, {"LZ_SECRET_TOKEN": token})
    rig.config({"bb": {"env": {"TOKEN": "env:LZ_SECRET_TOKEN"}}})
    # The handler runs as root in the initial namespaces; tee writes the dump.
    with core_settings(f"|/usr/bin/tee {core_dir}/pipe.%P", 0):
        ctl = start_plain(lz, ["sleep", "300"], env, core_limit=0)
        time.sleep(0.3)
        ctl.send_signal(signal.SIGSEGV)
        ctl.wait(timeout=20)
        deadline = time.monotonic() + 10
        piped = core_dir / f"pipe.{ctl.pid}"
        while time.monotonic() < deadline and not (piped.exists() and needle in piped.read_bytes()):
            time.sleep(0.1)
        assert piped.exists() and needle in piped.read_bytes(), \
            f"control: RLIMIT_CORE 0 did not stop a piped dump was expected: {list(core_dir.iterdir())}"
        piped.unlink()

        holder = rig.hold("bb", env=env)
        r = roles(lz.root)
        # Back to back: each gets its SIGSEGV before the other's death could
        # end it another way.
        targets = r["supervisor-ns"] + r["coordinator"]
        for p in targets:
            os.kill(p.pid, signal.SIGSEGV)
        for p in targets:
            assert gone(p.pid), f"{p} survived SIGSEGV"
        holder.finish()
        ok(rig.run("bb", ["true"], env=env))
        time.sleep(1)  # a pipe handler would still be writing
    pids = {p.pid for p in targets}
    dumps = [p for p in core_dir.iterdir() if p.name.startswith("pipe.")
             and int(p.name.split(".")[1]) in pids]
    assert not dumps, f"piped dumps of Lazaret processes: {dumps}"
    assert not files_containing(core_dir, needle) and not files_containing(lz.root, needle)


def test_doctor_reports_core_dump_settings(lz):
    p = lz.run(["doctor"])
    line = [x for x in p.stdout.splitlines() if re.match(r"^(ok|warn|FAIL)\s+core dumps ", x)]
    assert line, p.stdout
    pattern = CORE_PATTERN.read_text().strip()
    if pattern.startswith("@"):
        assert line[0].startswith("warn"), line
    else:
        assert line[0].startswith("ok") and "RLIMIT_CORE 1" in line[0], line
