# SPDX-License-Identifier: Apache-2.0
"""The Git Sentry's audit window (docs/git.md, "Measured window").

How long does a forbidden entry the sandbox makes stay visible to the host
before the coordinator moves it into the quarantine? The sandbox makes
`.git` directories in N workspace directories that exist before the start
(so they are watched), one every --gap seconds. A host observer of its own,
an inotify instance watching the same directories, timestamps each
IN_CREATE of `.git` and the IN_MOVED_FROM that takes it away; the window is
the difference. This is what a host `git` started in that instant could
see. It is a security measurement, not an overhead ratio: there is no
baseline to divide by (bench/README.md).

    sudo bench/sentry/run.sh [--count N] [--gap S]

Runs as root and uses the launch benchmark's user, image and build helpers
(bench/launch/launch.py).
"""

import argparse
import ctypes
import ctypes.util
import os
import pwd
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))
import launch  # noqa: E402  (the shared benchmark helpers)

IN_CREATE, IN_MOVED_FROM, IN_ISDIR = 0x100, 0x40, 0x40000000
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class Inotify:
    def __init__(self):
        self.fd = _libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.names = {}

    def watch(self, path: Path):
        wd = _libc.inotify_add_watch(self.fd, str(path).encode(), IN_CREATE | IN_MOVED_FROM)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        self.names[wd] = path.name

    def events(self, timeout):
        """[(monotonic ns at read, dir name, mask, entry name)]"""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        now = time.monotonic_ns()
        data = os.read(self.fd, 65536)
        out, i = [], 0
        while i < len(data):
            wd, mask, _, length = struct.unpack_from("iIII", data, i)
            name = data[i + 16:i + 16 + length].rstrip(b"\0").decode()
            out.append((now, self.names.get(wd), mask, name))
            i += 16 + length
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--gap", type=float, default=0.15)
    args = ap.parse_args()
    if os.geteuid() != 0:
        launch.die("run as root (it runs Lazaret as the unprivileged user lzbench)")
    binary = launch.ensure_binary()
    launch.ensure_image()
    launch.ensure_user(launch.BENCH_USER)
    pw = pwd.getpwnam(launch.BENCH_USER)
    ids = (pw.pw_uid, pw.pw_gid)
    root = Path(tempfile.mkdtemp(prefix="lzbench-", dir="/tmp"))
    os.chmod(root, 0o755)
    user = launch.User(launch.BENCH_USER, root / "home", root / "run")
    try:
        launch.mkdir_user(user.home, 0o755, ids)
        launch.mkdir_user(user.runtime, 0o700, ids)
        for d, mode in ((".config", 0o755), (".config/lazaret", 0o700), ("ws", 0o755),
                        ("logs", 0o755)):
            launch.mkdir_user(user.home / d, mode, ids)
        cfg = user.home / ".config/lazaret/config.toml"
        cfg.write_text('schema = "lazaret-trusted-host-config-v1"\n[profiles.bench]\n'
                       f'image = "{launch.IMAGE_REF}"\n')
        os.chown(cfg, *ids)
        os.chmod(cfg, 0o600)
        ws = user.home / "ws"
        env = dict(user.env(), GIT_CONFIG_NOSYSTEM="1")
        subprocess.run(["git", "init", "-q", str(ws)], check=True, env=env, **user.creds())
        ino = Inotify()
        for i in range(args.count):
            launch.mkdir_user(ws / f"s{i}", 0o755, ids)
            ino.watch(ws / f"s{i}")
        script = (f"i=0; while [ $i -lt {args.count} ]; do mkdir s$i/.git; i=$((i+1)); "
                  f"sleep {args.gap}; done; sleep 1")
        lz = launch.Lazaret(binary, user, ws, user.home / "logs")
        p, f = lz.start("run", "bench", "--", "sh", "-c", script)
        created, moved = {}, {}
        deadline = time.monotonic() + 60 + args.count * (args.gap + 1)
        while p.poll() is None and time.monotonic() < deadline:
            for t, d, mask, name in ino.events(0.5):
                if name != ".git":
                    continue
                if mask & IN_CREATE:
                    created.setdefault(d, t)
                elif mask & IN_MOVED_FROM:
                    moved.setdefault(d, t)
        if p.poll() is None:
            p.kill()
        p.wait()
        windows = sorted((moved[d] - created[d]) / 1e6 for d in created if d in moved)
        missed = [d for d in created if d not in moved]
        lz.wait_teardown(time.perf_counter_ns())
        if not windows:
            launch.die(f"no window measured (created {len(created)}, moved {len(moved)})")
        q = statistics.quantiles(windows, n=20) if len(windows) >= 2 else windows * 19
        print(f"Git Sentry audit window over {len(windows)} entries "
              f"(runsc {launch.capture(['runsc', '--version']).splitlines()[0]}, "
              f"kernel {os.uname().release}):")
        print(f"  median {statistics.median(windows):.2f} ms, p95 {q[18]:.2f} ms, "
              f"max {windows[-1]:.2f} ms, min {windows[0]:.2f} ms; not moved: {len(missed)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
