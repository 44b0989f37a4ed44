# SPDX-License-Identifier: Apache-2.0
"""Work inside a running Domain against the same work inside bare runsc of
the same release (issue 27, item 5; bench/README.md "inside/").

Started by bench/inside/run.sh as root. Image: the tests' Debian image
(bookworm minbase with git; its /bin/true is coreutils', dynamically
linked). Workspace: a Git repository of 2,500 packages (bench/launch's),
which also holds the timer (bench/escalation/timer.c, static, committed so
that `git status` is clean on both sides).

  fork+exec   `lzbench-timer N /bin/true`: N fork + execve + waitpid inside
              the sandbox, each timed there (CLOCK_MONOTONIC)
  git status  `lzbench-timer G git --no-optional-locks -C /workspace status
              --porcelain`: G runs, each timed there
  cold        `runsc run` of /bin/true, per bare variant (the platform and
              directfs comparison of item 4; Lazaret's own cold start is
              bench/launch's)

Lazaret: `lazaret run bench -- /workspace/lzbench-timer …` joining a Domain
kept alive by a `sleep 600` session. Baseline: bench/launch's `unshare`
namespace and runsc flags, a `runsc run --detach` container of the rootfs
Lazaret unpacked with the same workspace bind-mounted read-write at
/workspace, and `runsc exec` of the same timer. One baseline per
`--variant` (extra global runsc flags, e.g. `--platform=ptrace`); the sides
take turns round by round.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "launch"))
sys.path.insert(0, str(HERE.parent / "escalation"))
import launch as L  # noqa: E402  (bench/launch/launch.py: the shared helpers)
import escalation as E  # noqa: E402  (the timer's compilation)

DEFAULT_IMAGE = "debian:bookworm"
NODE = ["/usr/bin/node", "-e", "0"]
# The npm row: `npm --version` where the image has npm; agents-codex (Debian
# trixie's nodejs package) has no npm but corepack, the same kind of program
# (a `#!/usr/bin/env node` script loading its bundled JavaScript).
NPM_CANDIDATES = (["/usr/bin/npm", "--version"], ["/usr/bin/corepack", "--version"])
LAUNCHER = "lazaret-exec"
# Bare-side modifiers of a --variant (tokens starting with "+"), each adding
# one thing a Lazaret session has that the bare baseline does not:
MODIFIERS = {
    # the timer started by Lazaret's own launcher (committed into the
    # workspace): its setuid/setgid seccomp guard, RLIMIT_CORE 0, not dumpable
    "launcher": "the timer under Lazaret's launcher (`lazaret-exec --`)",
    # Lazaret's process settings and extra mounts (launch.py write_bundle)
    "spec": "Lazaret's process spec (caps, RLIMIT_NPROC, no no_new_privs, its env) and mounts",
    # runsc --log=FILE, as Lazaret passes it
    "log": "`--log=FILE`",
    # the launcher's seccomp guard alone (guard.c, compiled with
    # src/guest/mode-guard.c), and a filter that allows everything
    "guard": "the timer under the launcher's seccomp guard alone (`lzbench-guard --`)",
    "allowall": "the timer under a one-instruction allow-all seccomp filter",
    "short": "the timer under a four-instruction filter that reads the syscall number and "
             "allows all that exist (`lzbench-guard --short --`)",
}
GUARD = "lzbench-guard"
TIMER = "lzbench-timer"
TRUE = "/bin/true"
NOSHIM = "lazaret, LD_PRELOAD unset"
# Writes into the root filesystem's overlay (the overlay medium's row): 611
# files, 3.4 MiB of the image copied and removed again. A script in the
# workspace, because the baseline's line protocol splits on blanks.
WRITE_SCRIPT = "lzbench-write.sh"
WRITE_TEXT = ("#!/bin/sh\nset -e\n"
              "cp -r /usr/lib/x86_64-linux-gnu/perl-base /root/lzbench-w\n"
              "rm -rf /root/lzbench-w\n")
GIT = ["/usr/bin/git", "-c", "safe.directory=*", "--no-optional-locks", "-C", "/workspace",
       "status", "--porcelain"]


def say(msg):
    L.say(msg)


def die(msg):
    L.die(msg)


def parse_timer(text, n, what):
    """The timer's samples in ns from its output (numbers, then 'ok'; any
    other token is the timed program's own output, returned apart)."""
    tokens = text.split()
    if "ok" not in tokens:
        die(f"{what}: the timer did not finish: {text[-400:]!r}")
    body = tokens[:len(tokens) - 1 - tokens[::-1].index("ok")]
    samples = [int(t) for t in body if t.isdigit()]
    other = [t for t in body if not t.isdigit()]
    if len(samples) != n:
        die(f"{what}: {len(samples)} samples, not {n}: {text[-400:]!r}")
    return samples, other


def variant_name(flags):
    return " ".join(flags) if flags else "runsc's defaults"


def split_variant(tokens):
    """(runsc flags, {modifier}) of a --variant's tokens."""
    flags = [t for t in tokens if not t.startswith("+")]
    mods = {t[1:] for t in tokens if t.startswith("+")}
    unknown = mods - MODIFIERS.keys()
    if unknown:
        die(f"unknown variant modifier(s) {sorted(unknown)}: known are "
            + ", ".join(f"+{m}" for m in MODIFIERS))
    return flags, mods


def compile_guard(dest: Path, ids):
    """guard.c with Lazaret's src/guest/mode-guard.c, static."""
    p = subprocess.run(["gcc", "-std=c17", "-D_GNU_SOURCE", "-O2", "-static", "-Wall", "-Werror",
                        "-I", str(L.REPO / "src"), "-o", str(dest), str(HERE / "guard.c"),
                        str(L.REPO / "src/guest/mode-guard.c")],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        die(f"cannot compile {HERE / 'guard.c'}:\n{p.stderr.strip()}")
    os.chown(dest, *ids)
    os.chmod(dest, 0o755)


def wait_running(lz, proc, log):
    """Until the keep-alive `sleep 600` is seen in the sandbox (the Debian
    minbase image has no ps: read /proc)."""
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            log.seek(0)
            die(f"the keep-alive session exited {proc.returncode}: {log.read()}\n{lz.diagnose()}")
        _, _, out, _ = lz.run("run", "bench", "--", "/bin/sh", "-c",
                              "cat /proc/[0-9]*/cmdline | tr '\\0' ' '", check=False)
        if "sleep 600" in out:
            return
        if time.monotonic() > deadline:
            die(f"the keep-alive session never appeared in the sandbox: {out}\n{lz.diagnose()}")
        time.sleep(0.2)


def bench(args):
    binary = L.ensure_binary()
    L.ensure_image()
    if subprocess.run(["umoci", "stat", "--image", f"{L.IMAGES}/{args.image}"],
                      stdin=subprocess.DEVNULL, capture_output=True).returncode != 0:
        die(f"{L.IMAGES}/{args.image} is missing: sudo sh tests/images/build.sh {L.IMAGES}")
    user, root, ids = L.fresh_user("lzbench-inside", args.runsc)
    lz = sleeper = None
    baselines = []
    try:
        # No ws: git_workspace makes it.
        L.user_home(user, f'[profiles.bench]\nimage = "oci:{L.IMAGES}/{args.image}"\n',
                    ("logs",))
        ws = user.home / "ws"
        say(f"making the workspace: a Git repository of {L.IGNORED_PACKAGES} packages")
        L.git_workspace(user, ws, False)
        E.compile_timer(ws / TIMER, ids)
        (ws / WRITE_SCRIPT).write_text(WRITE_TEXT)
        os.chown(ws / WRITE_SCRIPT, *ids)
        # Lazaret's launcher (static) for the "+launcher" variants, the
        # guard alone for "+guard" and "+allowall".
        shutil.copy(binary.parent / LAUNCHER, ws / LAUNCHER)
        os.chown(ws / LAUNCHER, *ids)
        compile_guard(ws / GUARD, ids)
        ident = ["-c", "user.name=Bench", "-c", "user.email=bench@lazaret.invalid"]
        for argv in (["add", TIMER, WRITE_SCRIPT, LAUNCHER, GUARD],
                     [*ident, "commit", "-q", "-m", "timer"]):
            subprocess.run(["git", "-C", str(ws), *argv], check=True, env=user.env(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **user.creds())
        lz = L.Lazaret(binary, user, ws, user.home / "logs")

        first, rootfs = L.prepared_rootfs(lz, user, timeout=600)
        # The ELF interpreter's name in the program headers: dynamically linked.
        with open(rootfs / "usr/bin/true", "rb") as f:
            if b"/ld-linux" not in f.read(4096):
                die(f"{rootfs}/usr/bin/true is not dynamically linked")

        # An image with Node.js (tests/images' agents-*) adds the node row,
        # and the npm row if it has npm or corepack.
        has_node = (rootfs / NODE[0][1:]).exists()
        npm = next((c for c in NPM_CANDIDATES if has_node and (rootfs / c[0][1:]).exists()),
                   None)
        # The environment of a Lazaret session ("+spec" gives it to the bare
        # process too).
        _, _, env_out, end = lz.run("run", "bench", "--", "/usr/bin/env")
        lz.wait_teardown(end)
        lazaret_env = [line for line in env_out.splitlines() if "=" in line]
        for i, tokens in enumerate(args.variants):
            flags, mods = split_variant(tokens)
            base = user.home / f"baseline{i}"
            for d, mode in (("", 0o755), ("runsc", 0o700), ("tmp", 0o700)):
                L.mkdir_user(base / d, mode, ids)
            if "log" in mods:
                flags = [*flags, f"--log={base / 'runsc.log'}"]
            L.write_bundle(base / "true", rootfs, [TRUE], *ids)
            L.write_bundle(base / "sleep", rootfs, ["/bin/sleep", "600"], *ids,
                           binds=[(ws, "/workspace")],
                           lazaret_env=lazaret_env if "spec" in mods else None)
            b = L.Baseline(user, base, root / f"baseline{i}.log", args.runsc, flags)
            b.mods = mods
            # Container ids differ between the baselines: runsc 2022-12-19
            # names its control socket after the id in the abstract
            # namespace, which the baselines' namespaces share.
            b.cid = f"w{i}"
            b.process = base / "sleep" / "process.json"
            baselines.append(b)
        lz.ignore_tree = None

        def others():
            procs = L.user_procs(user.uid)
            for b in baselines:
                for pid in L.descendants(b.proc.pid):
                    procs.pop(pid, None)
            return procs
        lz.others = others

        # Cold `runsc run` per variant (item 4: platform, directfs).
        names = [variant_name(f) for f in args.variants]
        cold = {n: [] for n in names}
        say(f"cold runsc run: 1 warm-up + {args.cold} per variant")
        for r in range(args.cold + 1):
            for n, b in zip(names, baselines):
                t = b.ask(f"cold c{r}")
                if r:
                    cold[n].append(t)

        say("keep-alive session and containers")
        sleeper, sleeper_log = lz.start("run", "bench", "--", "sleep", "600")
        wait_running(lz, sleeper, sleeper_log)
        L.check_domain_runsc(user.uid, args.runsc)
        for b in baselines:
            b.ask(f"sleeper {b.cid}")

        sides = ["lazaret", NOSHIM, *names]
        fork = {s: [] for s in sides}
        fork_total = {s: [] for s in sides}
        git = {s: [] for s in sides if s != NOSHIM}
        write = {s: [] for s in sides if s != NOSHIM}
        node = {s: [] for s in sides if s != NOSHIM}
        npm_t = {s: [] for s in sides if s != NOSHIM}
        git_out = {}
        timer = f"/workspace/{TIMER}"
        say(f"fork+exec ({args.execs} per round) and git status ({args.git} per round): "
            f"1 warm-up + {args.rounds} rounds")
        for r in range(args.rounds + 1):
            order = sides if r % 2 == 0 else sides[::-1]
            for s in order:
                for kind, n, prog in (("fork", args.execs, [TRUE]), ("git", args.git, GIT),
                                      ("write", args.writes,
                                       ["/bin/sh", f"/workspace/{WRITE_SCRIPT}"]),
                                      ("node", args.nodes, NODE), ("npm", args.nodes, npm)):
                    if (s == NOSHIM and kind != "fork") or (kind == "node" and not has_node) \
                            or (kind == "npm" and not npm):
                        continue
                    argv = [timer, str(n), *prog]
                    if s == "lazaret":
                        _, _, out, _ = lz.run("run", "bench", "--", *argv)
                    elif s == NOSHIM:
                        # The breakdown: the same without the statx shim that
                        # Lazaret preloads on runsc releases that need it
                        # (docs/runtime.md; LD_PRELOAD, inherited by every exec).
                        _, _, out, _ = lz.run("run", "bench", "--", "/usr/bin/env",
                                              "-u", "LD_PRELOAD", *argv)
                    else:
                        b = baselines[names.index(s)]
                        if "launcher" in b.mods:
                            argv = [f"/workspace/{LAUNCHER}", "--", *argv]
                        elif "guard" in b.mods:
                            argv = [f"/workspace/{GUARD}", "--", *argv]
                        elif "allowall" in b.mods:
                            argv = [f"/workspace/{GUARD}", "--allow-all", "--", *argv]
                        elif "short" in b.mods:
                            argv = [f"/workspace/{GUARD}", "--short", "--", *argv]
                        cmd = f"execoutp {b.cid} {b.process} " if "spec" in b.mods \
                            else f"execout {b.cid} "
                        out = b.ask(cmd + " ".join(argv), raw=True)
                    samples, other = parse_timer(out, n, f"{s} {kind}")
                    if not r:
                        continue
                    if kind == "fork":
                        fork[s] += samples
                        fork_total[s].append(sum(samples))
                    elif kind == "git":
                        git[s] += samples
                        git_out[s] = " ".join(other)
                    elif kind == "write":
                        write[s] += samples
                    elif kind == "node":
                        node[s] += samples
                    else:
                        npm_t[s] += samples
        if sleeper.poll() is not None or len(L.coordinators(user.uid)) != 1:
            die(f"the Domain did not stay up: the samples are not joins\n{lz.diagnose()}")
        res = {
            "variants": names, "execs": args.execs, "rounds": args.rounds, "git_n": args.git,
            "cold": {n: L.summary(v) for n, v in cold.items()},
            "fork": {s: L.summary(v) for s, v in fork.items()},
            "fork_total": {s: L.summary(v) for s, v in fork_total.items()},
            "git": {s: L.summary(v) for s, v in git.items()},
            "write": {s: L.summary(v) for s, v in write.items()}, "writes_n": args.writes,
            "nodes_n": args.nodes,
            "image": args.image,
            "git_output": git_out,
            "first_run_ms": L.ms(first),
        }
        res["lazaret_env"] = lazaret_env
        if has_node:
            res["node"] = {s: L.summary(v) for s, v in node.items()}
        if npm:
            res["npm"] = {s: L.summary(v) for s, v in npm_t.items()}
            res["npm_cmd"] = " ".join(npm)
        return res, binary
    finally:
        for b in baselines:
            try:
                b.ask(f"teardown {b.cid}")
            except SystemExit:
                pass
            b.close()
        L.end_bench(sleeper, user.uid, root, args.keep)


def rows(res):
    """[(title, key, unit scale)] of the rows the run has."""
    out = [
        ("fork+exec of /bin/true, one", "fork", 1),
        (f"{res['execs']} fork+exec of /bin/true (a round's total)", "fork_total", 1),
        ("`git status` of 2,500 packages in /workspace", "git", 1),
        ("copy /usr/lib/x86_64-linux-gnu/perl-base (611 files, 3.4 MiB in bookworm) into "
         "/root and remove it (the root overlay)", "write", 1),
    ]
    if "node" in res:
        out.append(("`node -e 0` (Node.js start)", "node", 1))
    if "npm" in res:
        what = ("npm" if "npm " in res["npm_cmd"] else
                "the image has no npm: corepack, the same kind of `#!/usr/bin/env node` CLI")
        out.append((f"`{res['npm_cmd'].rsplit('/', 1)[-1]}` ({what})", "npm", 1))
    return out


def print_table(res, meta):
    sides = ["lazaret", *res["variants"]]
    print(f"{meta['runsc']}: medians in ms (ratio Lazaret / that side)")
    for title, key, _ in rows(res):
        lz = res[key]["lazaret"]["median"]
        cells = [f"{title}:", f"Lazaret {lz:.3f}"]
        if NOSHIM in res[key]:
            cells.append(f"[{NOSHIM}] {res[key][NOSHIM]['median']:.3f}")
        for s in sides[1:]:
            m = res[key][s]["median"]
            cells.append(f"[{s}] {m:.3f} ({lz / m:.2f}x)")
        print("  ".join(cells))
    print("cold runsc run of /bin/true: " + "  ".join(
        f"[{n}] {res['cold'][n]['median']:.1f}" for n in res["variants"]))
    print(f"git status output: {res['git_output']}")


def title(meta, res):
    image = "" if res["image"] == DEFAULT_IMAGE else f" ({res['image']})"
    return f"Inside a Domain{image}, runsc {meta['runsc'].rsplit(' ', 1)[-1]}"


def section(res, meta):
    names = res["variants"]
    lines = [
        f"## {title(meta, res)}",
        "",
        f"Measured {meta['date']} on {meta['nproc']} CPUs ({meta['cpu']}), kernel "
        f"{meta['kernel']}, `{meta['runsc']}` (`{meta['runsc_path']}`, both sides; Lazaret "
        f"through `LAZARET_RUNSC`), lazaret {meta['version']} (release build, revision "
        f"{meta['revision']}). Re-run: `sudo bench/inside/run.sh --runsc {meta['runsc_path']}"
        + "".join(f" --variant='{' '.join(v)}'" for v in res["variant_flags"])
        + ("" if res["image"] == DEFAULT_IMAGE else f" --image {res['image']}")
        + f" --execs {res['execs']} --git {res['git_n']} --writes {res['writes_n']}"
        + (f" --nodes {res['nodes_n']}" if "node" in res else "")
        + f" --rounds {res['rounds']}` (1 warm-up round + {res['rounds']} rounds of "
        f"{res['execs']} fork+exec, {res['git_n']} `git status` and {res['writes_n']} "
        "copy+remove per side; the sides take "
        "turns round by round).",
        "",
        ("Image: the tests' Debian bookworm (minbase + git; `/bin/true` is coreutils', "
         "dynamically linked). " if res["image"] == DEFAULT_IMAGE else
         f"Image: the tests' `{res['image']}` (Debian trixie minbase with Node.js, git; "
         "`/bin/true` is coreutils', dynamically linked). ")
        + "Workspace: a Git repository of 2,500 packages holding the "
        "timer (bench/escalation/timer.c, static), which times each run inside the sandbox. "
        "Lazaret: `lazaret run bench -- /workspace/lzbench-timer …` joining a Domain kept "
        "alive by another session. Bare: bench/launch's namespace and flags "
        "(`--ignore-cgroups --network=none --overlay2=root:memory`) plus the variant's flags, "
        "a `runsc run --detach` container of the rootfs Lazaret unpacked with the workspace "
        "bind-mounted at `/workspace`, `runsc exec` of the same timer. Medians in ms; ratio "
        "= Lazaret / that bare variant.",
        "",
    ]
    mods = sorted({m for v in res["variant_flags"] for m in split_variant(v)[1]})
    if mods or any("--network=sandbox" in v for v in res["variant_flags"]):
        lines += [
            "Variants that each add one thing a Lazaret session has (bench/README.md "
            "\"inside/\"): " + "; ".join(f"`+{m}`: {MODIFIERS[m]}" for m in mods)
            + ("; `--network=sandbox`: netstack with only loopback (runsc's "
               "`/proc/sys/net` check covered as Lazaret's supervisor does)"
               if any("--network=sandbox" in v for v in res["variant_flags"]) else "")
            + ". A Lazaret session's environment: "
            + ", ".join(f"`{e.split('=', 1)[0]}`" for e in res["lazaret_env"]) + ".",
            "",
        ]
    lines += [
        "| work | Lazaret | " + " | ".join(f"bare, {n} | ratio" for n in names) + " |",
        "| --- | ---: | " + " | ".join("---: | ---:" for _ in names) + " |",
    ]
    for title_, key, _ in rows(res):
        lz = res[key]["lazaret"]["median"]
        lines.append(f"| {title_} | {lz:.2f} | " + " | ".join(
            f"{res[key][n]['median']:.2f} | {lz / res[key][n]['median']:.2f}x" for n in names)
            + " |")
    lines.append("| cold `runsc run` of /bin/true (Lazaret: see Launch) | | " + " | ".join(
        f"{res['cold'][n]['median']:.1f} | " for n in names) + " |")
    for title_, key, _ in rows(res)[:2]:
        x = res[key][NOSHIM]["median"]
        lines.append(f"| {title_}: Lazaret with `LD_PRELOAD` unset (`env -u LD_PRELOAD` "
                     f"before the timer: no statx shim) | {x:.2f} | " + " | ".join(
                         f"{res[key][n]['median']:.2f} | {x / res[key][n]['median']:.2f}x"
                         for n in names) + " |")
    lines += [
        "",
        "`git status --porcelain` printed: " + "; ".join(
            f"{s}: {o or '(nothing: clean)'}" for s, o in res["git_output"].items()) + ".",
        "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="Work inside a Domain (bench/README.md)")
    ap.add_argument("--runsc", metavar="PATH", default=L.RUNSC_DEFAULT,
                    help=f"the runsc of both sides ({L.RUNSC_DEFAULT})")
    ap.add_argument("--variant", action="append", metavar="FLAGS",
                    help="extra global runsc flags of one bare baseline, space-separated "
                    "(repeatable; default: one baseline with runsc's defaults)")
    ap.add_argument("--execs", type=int, default=200, help="fork+exec per round (200)")
    ap.add_argument("--git", type=int, default=5, help="git status per round (5)")
    ap.add_argument("--writes", type=int, default=3, help="copy+remove runs per round (3)")
    ap.add_argument("--nodes", type=int, default=5,
                    help="`node -e 0` per round, if the image has /usr/bin/node (5)")
    ap.add_argument("--image", default=DEFAULT_IMAGE, metavar="NAME:TAG",
                    help=f"an image of tests/images' cache ({DEFAULT_IMAGE}; agents-codex:latest "
                    "adds the node row); another image writes its own section")
    ap.add_argument("--rounds", type=int, default=5, help="rounds after the warm-up (5)")
    ap.add_argument("--cold", type=int, default=5, help="cold runsc run per variant (5)")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    ap.add_argument("--keep", action="store_true", help="keep the /tmp/lzbench-inside-* directory")
    ap.add_argument("--json", metavar="FILE", help="also write the results to FILE")
    args = ap.parse_args()
    if os.geteuid() != 0:
        die("run as root (sudo bench/inside/run.sh): it creates the unprivileged user "
            f"{L.BENCH_USER} that Lazaret runs as")
    if min(args.rounds, args.execs, args.git, args.cold, args.writes, args.nodes) < 1:
        die("--rounds, --execs, --git and --cold need at least 1")
    for tool in ("unshare", "newuidmap", "umoci"):
        if not shutil.which(tool):
            die(f"{tool} is missing: scripts/install-deps.sh")
    args.runsc = L.check_runsc(args.runsc)
    args.variants = [v.split() for v in (args.variant or [""])]
    say(f"runsc of both sides: {args.runsc} ({L.runsc_version(args.runsc)}); bare variants: "
        + "; ".join(variant_name(v) for v in args.variants))

    with L.M.tun_usable():  # the Domain's Network Sidecar opens /dev/net/tun
        res, binary = bench(args)
    res["variant_flags"] = args.variants
    meta = L.run_meta(binary, args.runsc)
    print_table(res, meta)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, **res}, indent=2) + "\n")
    if not args.no_write:
        L.write_section(title(meta, res), section(res, meta))
        say(f"wrote the \"{title(meta, res)}\" section of {L.DOC.relative_to(L.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
