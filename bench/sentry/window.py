# SPDX-License-Identifier: Apache-2.0
"""The Git Sentry's audit window (docs/git.md, "Measured window").

How long does a forbidden entry the sandbox makes stay visible to the host
before the coordinator moves it into the quarantine? The sandbox makes a
`.git` directory in N workspace directories that exist before the start (so
they are watched), one every --gap seconds. A host observer busy-polls
lstat() of the next expected path and records when it first sees the entry
and when it is gone; the difference is what a host `git` started in that
instant could see (less one poll, about a microsecond or two). It is a
security measurement, not an overhead ratio: there is no baseline to divide
by (bench/README.md).

    sudo bench/sentry/run.sh [--count N] [--gap S]

Runs as root and uses the launch benchmark's user, image and build helpers
(bench/launch/launch.py).
"""

import argparse
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))
import launch  # noqa: E402  (the shared benchmark helpers)

def bench_home(ids):
    """A fresh home for the benchmark user under /tmp: HOME, XDG_RUNTIME_DIR,
    a workspace ws/, logs/, and a configuration with one profile `bench` on
    the busybox test image. Returns (root to remove, launch.User)."""
    root = Path(tempfile.mkdtemp(prefix="lzbench-", dir="/tmp"))
    os.chmod(root, 0o755)
    user = launch.User(launch.BENCH_USER, root / "home", root / "run")
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
    return root, user


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
    root, user = bench_home(ids)
    try:
        ws = user.home / "ws"
        env = dict(user.env(), GIT_CONFIG_NOSYSTEM="1")
        subprocess.run(["git", "init", "-q", str(ws)], check=True, env=env, **user.creds())
        for i in range(args.count):
            launch.mkdir_user(ws / f"s{i}", 0o755, ids)
        script = (f"i=0; while [ $i -lt {args.count} ]; do mkdir s$i/.git; i=$((i+1)); "
                  f"sleep {args.gap}; done; sleep 1")
        lz = launch.Lazaret(binary, user, ws, user.home / "logs")
        p, f = lz.start("run", "bench", "--", "sh", "-c", script)
        windows, missed = [], []
        for i in range(args.count):
            path = str(ws / f"s{i}" / ".git")
            deadline = time.monotonic() + 60
            while not os.path.lexists(path) and time.monotonic() < deadline:
                pass
            t0 = time.perf_counter_ns()
            while os.path.lexists(path) and time.monotonic() < deadline:
                pass
            t1 = time.perf_counter_ns()
            if time.monotonic() >= deadline:
                missed.append(i)
            else:
                windows.append((t1 - t0) / 1e6)
        p.wait(timeout=60)
        windows.sort()
        lz.wait_teardown(time.perf_counter_ns())
        if not windows:
            launch.die(f"no window measured ({len(missed)} entries not seen or not moved)")
        q = statistics.quantiles(windows, n=20) if len(windows) >= 2 else windows * 19
        print(f"Git Sentry audit window over {len(windows)} entries "
              f"(runsc {launch.capture(['runsc', '--version']).splitlines()[0]}, "
              f"kernel {os.uname().release}):")
        print(f"  median {statistics.median(windows):.2f} ms, p95 {q[18]:.2f} ms, "
              f"max {windows[-1]:.2f} ms, min {windows[0]:.2f} ms; not seen or not moved within 60 s: {len(missed)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    with launch.M.tun_usable():  # the tests' machine-wide bookkeeping
        main()
