# SPDX-License-Identifier: Apache-2.0
"""The Git Sentry's worst window under deliberate load (docs/git.md "An audit
the sandbox cannot outpace"; issue 23).

The sandbox loads the audit as hard as it can while it keeps re-making
src/.git (HEAD, objects/, refs/, and a config) the moment the audit has moved
it away. A host observer busy-polls lstat(src/.git) and records every
interval during which it exists: what a host `git` started in that instant
could find. Reported per load: how often it appeared, the median, p99 and
longest interval, and the freezer's own counts from the coordinator's log.
A security measurement, not an overhead ratio (bench/README.md).

Loads (--load, default all):
  rename      3,000 directories under big/, big/ and big/d7 renamed back and
              forth by two loops
  deep        the same storm on a chain 250 directories deep (each rename
              moves the paths of 250 watches)
  wide        20,000 directories (near the 50,000-directory bound with the
              rest), big/ renamed back and forth
  limit       45,000 directories (the watch bound is 50,000), big/ renamed
              back and forth
  flood       four loops making and removing directory trees (mkdir -p
              a/b/c/d, rm -rf) as fast as they can
  repos       50 nested repositories of the developer's, plus the rename storm
  closed      20,000 directories in cl/, a directory of another sandbox user
              (uid 1000) closed to the developer (0700), opened and closed
              again (chmod 755 / 700) in a loop; the .git re-made is
              cl/src/.git, inside it (round i23c; what is measured is the
              audit's window, seen by root, open or closed)

    sudo bench/sentry/run.sh storm [--seconds S] [--load NAME ...]
"""

import argparse
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))
import launch  # noqa: E402  (the shared benchmark helpers)
import window  # noqa: E402  (bench_home)

REMAKE = ("while [ ! -e STOP ]; do\n"
          "  if [ ! -e {d}/.git ]; then\n"
          "    mkdir -p {d}/.git/objects {d}/.git/refs/heads\n"
          "    echo 'ref: refs/heads/main' > {d}/.git/HEAD\n"
          "    printf '[core]\\n\\tfsmonitor = true\\n' > {d}/.git/config\n"
          "  fi\n"
          "done 2>/dev/null\n")

RENAME = "( while [ ! -e STOP ]; do mv {a} {a}.r; mv {a}.r {a}; done ) 2>/dev/null &\n"
FLOOD = ("( i=0; while [ ! -e STOP ]; do mkdir -p fl{n}/$i/a/b/c/d; rm -rf fl{n}/$i; "
         "i=$((i+1)); done ) 2>/dev/null &\n")

LOADS = {
    "rename": RENAME.format(a="big") + RENAME.format(a="big/d7"),
    "deep": RENAME.format(a="deep"),
    "wide": RENAME.format(a="big"),
    "limit": RENAME.format(a="big"),
    "flood": "".join(FLOOD.format(n=n) for n in range(4)),
    "repos": RENAME.format(a="big") + RENAME.format(a="big/d7"),
    "closed": ("mkdir -p cl/src && chown 1000 cl && chmod 700 cl\n"
               "for i in $(seq 200); do mkdir -p cl/big/d$i && "
               "(cd cl/big/d$i && mkdir $(seq 100)); done\n"
               "( while [ ! -e STOP ]; do chmod 755 cl; chmod 700 cl; done ) 2>/dev/null &\n"),
}
# Where each load re-makes its .git (relative to the workspace).
REMADE = {"closed": "cl/src"}


def populate(load, ws: Path, run_user):
    dirs = []
    if load in ("rename", "repos"):
        dirs = [f"big/d{i}/e{j}" for i in range(60) for j in range(50)]
    elif load == "wide":
        dirs = [f"big/d{i}/e{j}" for i in range(200) for j in range(100)]
    elif load == "limit":
        dirs = [f"big/d{i}/e{j}" for i in range(900) for j in range(50)]
    elif load == "deep":
        dirs = ["deep/" + "/".join(["x"] * 249)]
    for k in range(0, len(dirs), 2000):
        run_user(["mkdir", "-p", *dirs[k:k + 2000]], ws)
    if load == "repos":
        for i in range(50):
            run_user(["git", "init", "-q", f"nested/r{i}"], ws)


def observe(path: str, seconds: float) -> list:
    """Every interval (ms) during which path exists, for `seconds`."""
    windows = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.lexists(path):
            t0 = time.perf_counter_ns()
            while os.path.lexists(path) and time.monotonic() < deadline + 5:
                pass
            windows.append((time.perf_counter_ns() - t0) / 1e6)
    return windows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--load", nargs="*", default=list(LOADS))
    args = ap.parse_args()
    if os.geteuid() != 0:
        launch.die("run as root (it runs Lazaret as the unprivileged user lzbench)")
    binary = launch.ensure_binary()
    launch.ensure_image()
    launch.ensure_user(launch.BENCH_USER)
    pw = pwd.getpwnam(launch.BENCH_USER)
    ids = (pw.pw_uid, pw.pw_gid)
    print(f"Git Sentry windows under load (runsc "
          f"{launch.capture(['runsc', '--version']).splitlines()[0]}, kernel "
          f"{os.uname().release}, {os.cpu_count()} cores, {binary}); {args.seconds:.0f} s each")
    print("| load | appearances | median | p99 | longest | freezes (watchdog) | longest freeze "
          "| renames followed | whole-tree walks |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for load in args.load:
        root, user = window.bench_home(ids)
        try:
            ws = user.home / "ws"
            env = dict(user.env(), GIT_CONFIG_NOSYSTEM="1")

            def run_user(argv, cwd):
                subprocess.run(argv, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               **user.creds())

            run_user(["git", "init", "-q", str(ws)], ws)
            launch.mkdir_user(ws / "src", 0o755, ids)
            populate(load, ws, run_user)
            remade = REMADE.get(load, "src")
            script = LOADS[load] + "echo LOAD-UP\n" + REMAKE.format(d=remade) + "wait\n"
            lz = launch.Lazaret(binary, user, ws, user.home / "logs")
            p, f = lz.start("run", "bench", "--", "sh", "-c", script)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                f.seek(0)
                if "LOAD-UP" in f.read():
                    break
                if p.poll() is not None:
                    f.seek(0)
                    launch.die(f"{load}: lazaret ended early: {f.read()[-2000:]}")
                time.sleep(0.05)
            windows = observe(str(ws / remade / ".git"), args.seconds)
            (ws / "STOP").touch()
            p.wait(timeout=120)
            lz.wait_teardown(time.perf_counter_ns())
            log = "\n".join(x.read_text(errors="replace") for x in
                            user.home.glob(".local/share/lazaret/domains/*/logs/coordinator.log"))
            m = re.search(r"Git Sentry: (\d+) freezes \((\d+) by the watchdog\), longest (\d+) us"
                          r".*?; (\d+) renames followed, (\d+) whole-tree walks", log, re.S)
            fz = (f"{m.group(1)} ({m.group(2)}) | {int(m.group(3)) / 1000:.1f} ms | "
                  f"{m.group(4)} | {m.group(5)}") if m else "? | ? | ? | ?"
            if windows:
                windows.sort()
                p99 = windows[min(len(windows) - 1, int(len(windows) * 0.99))]
                print(f"| {load} | {len(windows)} | {statistics.median(windows):.2f} ms | "
                      f"{p99:.2f} ms | {windows[-1]:.2f} ms | {fz} |", flush=True)
            else:
                print(f"| {load} | 0 | - | - | - | {fz} |", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    # /dev/net/tun opened for the run with the tests' machine-wide
    # bookkeeping (tests/integration/machine.py), so a concurrent test run
    # keeps it open too.
    with launch.M.tun_usable():
        main()
