# SPDX-License-Identifier: Apache-2.0
"""Integration-test fixtures: the real lazaret binary, run as an unprivileged
user, in a fresh directory per test (docs/testing.md).

pytest runs as root (scripts/check.sh); lazaret refuses uid 0, so every run
switches to the test user. Fixtures:

    lazaret_bin    Path of the binary under test: env LAZARET_BIN, default
                   <repo>/build-asan/src/cli/lazaret (the ASan/UBSan build)
    user_factory   user_factory(name, subids=True) -> LzUser: create the user
                   if absent (useradd --create-home); subids=True guarantees a
                   range of >= 65536 ids in /etc/subuid and /etc/subgid,
                   subids=False guarantees none
    test_user      LzUser "lztest", with subordinate ids (session)
    tun_usable     /dev/net/tun opened up to 0666 for the session, restored after
    make_lz        make_lz(user=None) -> Lz: a fresh environment for user
                   (default test_user), removed after the test
    lz             make_lz() for test_user
    runsc          None (the system's runsc), or the newer runsc the tests of
                   RUNSC_BOTH run on a second time (env LAZARET_TEST_RUNSC_NEW,
                   default /opt/lazaret/runsc-20240729/runsc): every Lz of
                   such a test sets LAZARET_RUNSC to it (docs/testing.md
                   "Both runsc releases")
    test_images    TestImages: .busybox / .debian, oci: references of the
                   offline images tests/images/build.sh builds (once, as root,
                   cached in /var/cache/lazaret-test-images or env
                   LAZARET_TEST_IMAGES) (session)
    write_profiles write_profiles(lz, {"name": {fields}}, storage=None,
                   network=None, comment=None) -> Path: lz.config_path from
                   profiles_toml(); "image" defaults to the busybox image
    rig            Rig(lz) for tests that run lazaret: rig.config(profiles),
                   rig.run / rig.start / rig.hold + rig.release, rig.ws
                   (lz.home/ws); after the test it waits until every Domain
                   it used is torn down and fails the test otherwise (the
                   section "Domains" at the end; also sh(), ok(),
                   wait_torn_down(), domain_processes(), ...)

Lz (one per test):
    lz.user, lz.root           LzUser; the per-test directory /tmp/lzt-XXXX (0755, root)
    lz.home                    root/home, 0755, owned by the user: HOME and default cwd
    lz.runtime_dir             root/run, 0700, owned by the user: XDG_RUNTIME_DIR
    lz.config_path             home/.config/lazaret/config.toml
    lz.path(p)                 p relative to home (absolute p unchanged) -> Path
    lz.write(path, data, mode=0o600) -> Path
                               str or bytes; missing parents created owned by the
                               user, 0700 inside .config/lazaret, else 0755
    lz.mkdir(path, mode=0o755) -> Path (parents as in write)
    lz.env(env=None) -> dict   the clean environment, with overrides (None removes)
    lz.run(args, env=None, cwd=None, input=None, timeout=60, as_root=False)
                               -> CompletedProcess (stdout/stderr str) of
                               [lazaret_bin, *args] as the user (as root with
                               as_root=True); fails the test on any sanitizer report
    lz.run_as_user(argv, env=None, cwd=None, input=None, timeout=60)
                               -> CompletedProcess of any command as the user
"""

import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import machine  # noqa: E402  (machine-wide lock and /dev/net/tun, shared with bench/)

TEST_USER = "lztest"
SUBID_COUNT = 65536
SUBID_FIRST = 100000
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
STATE_DIR = machine.STATE_DIR


@dataclass(frozen=True)
class LzUser:
    name: str
    uid: int
    gid: int
    home: Path
    groups: tuple  # supplementary gids, as initgroups() would set them


# ---- machine-wide state (root) ---------------------------------------------

# The lock and the /dev/net/tun bookkeeping live in machine.py, shared with
# the benchmarks under bench/.
_state_dir = machine.state_dir
_machine_lock = machine.machine_lock


def _run_root(argv):
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")


def _subid_ranges(path, owners=None):
    """(owner, start, count) of every well-formed line of /etc/sub[ug]id,
    restricted to owners (names or decimal uids) when given."""
    out = []
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        if owners is None or parts[0] in owners:
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def _free_subid_start():
    """First start >= 100000 whose 65536 ids overlap no existing range."""
    ranges = _subid_ranges("/etc/subuid") + _subid_ranges("/etc/subgid")
    start, moved = SUBID_FIRST, True
    while moved:
        moved = False
        for _, s, c in ranges:
            if s < start + SUBID_COUNT and start < s + c:
                start, moved = s + c, True
    return start


def _ensure_user(name: str, subids: bool) -> LzUser:
    with _machine_lock():
        try:
            pwd.getpwnam(name)
        except KeyError:
            _run_root(["useradd", "--create-home", "--shell", "/bin/bash", name])
        pw = pwd.getpwnam(name)
        owners = {name, str(pw.pw_uid)}
        for path, opt in (("/etc/subuid", "subuids"), ("/etc/subgid", "subgids")):
            mine = _subid_ranges(path, owners)
            if subids and not any(c >= SUBID_COUNT for _, _, c in mine):
                s = _free_subid_start()
                _run_root(["usermod", f"--add-{opt}", f"{s}-{s + SUBID_COUNT - 1}", name])
            if not subids:
                for _, s, c in mine:
                    _run_root(["usermod", f"--del-{opt}", f"{s}-{s + c - 1}", name])
            mine = _subid_ranges(path, owners)
            ok = any(c >= SUBID_COUNT for _, _, c in mine) if subids else not mine
            if not ok:
                raise RuntimeError(f"cannot set up {path} for {name}: {mine}")
    return LzUser(name=name, uid=pw.pw_uid, gid=pw.pw_gid, home=Path(pw.pw_dir),
                  groups=tuple(g for g in os.getgrouplist(name, pw.pw_gid) if g != pw.pw_gid))


# ---- fixtures ----------------------------------------------------------------

@pytest.fixture(scope="session")
def lazaret_bin(repo_root, skip_or_fail) -> Path:
    path = Path(os.environ.get("LAZARET_BIN", repo_root / "build-asan" / "src" / "cli" / "lazaret"))
    if not os.access(path, os.X_OK):
        skip_or_fail(f"{path} is not built: run scripts/build.sh asan build-asan "
                     "(or set LAZARET_BIN)")
    return path.resolve()


@pytest.fixture(scope="session")
def _root(skip_or_fail):
    if os.geteuid() != 0:
        skip_or_fail("integration tests run as root (they create the unprivileged test "
                     "user): use scripts/check.sh or sudo /usr/bin/python3 -m pytest")


@pytest.fixture(scope="session")
def user_factory(_root):
    return _ensure_user


@pytest.fixture(scope="session")
def test_user(user_factory) -> LzUser:
    return user_factory(TEST_USER, subids=True)


@pytest.fixture(scope="session")
def dns_probe(tmp_path_factory) -> Path:
    """dns_probe.c built static for inside a sandbox: one DNS query, a DNS
    flood, latencies, a flood of connects (test_dns.py, test_learned.py,
    test_log.py)."""
    out = tmp_path_factory.mktemp("dns-probe") / "dns_probe"
    subprocess.run(["gcc", "-static", "-O1", "-o", str(out),
                    str(Path(__file__).parent / "dns_probe.c")], check=True, capture_output=True)
    out.chmod(0o755)
    return out


@pytest.fixture(scope="session")
def tun_usable(_root):
    """/dev/net/tun usable by the test users for the session (machine.py)."""
    with machine.tun_usable():
        yield


# ---- runsc: the system's, and a second pass on the newer one ------------------

# The runsc Debian 13 and bookworm-backports ship (scripts/install-deps.sh
# installs it there, beside the system's).
NEW_RUNSC = Path(os.environ.get("LAZARET_TEST_RUNSC_NEW", "/opt/lazaret/runsc-20240729/runsc"))
NEW_RUNSC_ID = "runsc-20240729"

# The tests that run twice, on the system's runsc and on NEW_RUNSC
# (docs/testing.md "Both runsc releases" says why each is here): every
# start path, network and publish, the terminal, escalation, the Git
# Sentry's layout, keep-id and recovery. "file.py::name" (every
# parametrization of the test) or "file.py::name[id]" (on the newer runsc
# only the parametrization id; the system's runsc runs them all).
RUNSC_BOTH = frozenset({
    # start paths: cold start; joining sessions; stop and start again; the
    # runsc facts (statx shim, netstack cover) learned and kept
    "test_run.py::test_first_run_starts_and_exits_with_the_command_status",
    "test_run.py::test_two_sessions_share_one_sandbox_and_coordinator",
    "test_run.py::test_stop_ends_the_running_domain_and_tells_its_sessions",
    "test_launch.py::test_runsc_facts_are_kept_and_decide_the_statx_shim",
    "test_launch.py::test_the_first_start_learns_whether_the_netstack_needs_the_cover",
    # network and publish
    "test_network.py::test_allowed_prefixes_are_reachable",
    "test_network.py::test_denied_destinations_are_refused_quickly",
    "test_network.py::test_dns_through_the_provided_resolver",
    "test_network.py::test_raw_and_packet_sockets_are_refused_inside",
    "test_publish.py::test_published_port_answers_on_loopback_only",
    # the terminal
    "test_terminal.py::test_prompt_tty_and_environment",
    "test_terminal.py::test_window_size_follows_resize",
    "test_terminal.py::test_ctrl_c_and_ctrl_backslash_signal_the_foreground_command",
    # escalation
    "test_escalation.py::test_auto_approved_rule_runs_on_the_host",
    "test_escalation.py::test_prompt_approve_and_deny",
    # the Git Sentry's layout
    "test_git.py::test_attack_is_stopped[rename-dot-git]",
    "test_git.py::test_attack_is_stopped[hooks-path-parent-renamed]",
    "test_git.py::test_git_config_hooks_and_dot_git_are_protected_inside",
    "test_git.py::test_ignored_paths_are_the_domains_own",
    "test_git_config_rename.py::test_host_git_config_is_held_off_while_the_domain_runs",
    "test_git_config_rename.py::"
    "test_host_rename_over_protected_config_stops_the_sandbox_and_leaves_nothing",
    # keep-id (the image's user with the developer's files) and recovery
    "test_agent_user.py::test_commands_run_as_the_images_user_with_the_developers_files",
    "test_run.py::test_coordinator_killed_during_a_session",
    "test_run.py::test_supervisor_killed_during_a_session",
    "test_lifecycle.py::test_rerun_after_interrupting_a_cold_start_always_works",
})


def pytest_configure(config):
    config.addinivalue_line("markers", "runsc_both: runs on the system's runsc and on "
                            "LAZARET_TEST_RUNSC_NEW (conftest.RUNSC_BOTH)")


_RUNSC_BOTH_FUNCS = {n.split("[")[0] for n in RUNSC_BOTH}


def _in_runsc_both(metafunc) -> bool:
    name = f"{Path(metafunc.definition.fspath).name}::{metafunc.definition.originalname}"
    return (name in _RUNSC_BOTH_FUNCS or
            metafunc.definition.get_closest_marker("runsc_both") is not None)


def pytest_collection_modifyitems(config, items):
    """On the newer runsc, only the parametrizations RUNSC_BOTH names by id
    (for a test named with one)."""
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is None or spec.params.get("runsc") != NEW_RUNSC_ID:
            keep.append(item)
            continue
        func = f"{Path(item.fspath).name}::{item.originalname}"
        rest = spec.id.replace(f"{NEW_RUNSC_ID}-", "", 1).replace(f"-{NEW_RUNSC_ID}", "", 1)
        named = {n[len(func) + 1:-1] for n in RUNSC_BOTH if n.startswith(func + "[")}
        if not named or rest in named:
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_generate_tests(metafunc):
    if "runsc" in metafunc.fixturenames and _in_runsc_both(metafunc):
        metafunc.parametrize("runsc", ["system", NEW_RUNSC_ID], indirect=True)


@pytest.fixture
def runsc(request, skip_or_fail):
    """None: the system's runsc; else the newer runsc's path (LAZARET_RUNSC)."""
    if getattr(request, "param", "system") == "system":
        return None
    if not os.access(NEW_RUNSC, os.X_OK):
        skip_or_fail(f"{NEW_RUNSC} is missing: scripts/install-deps.sh installs it "
                     "(or set LAZARET_TEST_RUNSC_NEW)")
    return NEW_RUNSC


class Lz:
    def __init__(self, lazaret_bin: Path, user: LzUser, sanitizer_env: dict, check_report,
                 runsc: Path = None):
        self.bin = lazaret_bin
        self.user = user
        self.runsc = runsc
        self._sanitizer_env = sanitizer_env
        self._check_report = check_report
        self.root = Path(tempfile.mkdtemp(prefix="lzt-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        self.home = self.root / "home"
        self.runtime_dir = self.root / "run"
        self._make_dir(self.home, 0o755)
        self._make_dir(self.runtime_dir, 0o700)
        self.config_path = self.home / ".config" / "lazaret" / "config.toml"

    # -- files --
    def _make_dir(self, path: Path, mode: int):
        os.mkdir(path, mode)
        os.chown(path, self.user.uid, self.user.gid)
        os.chmod(path, mode)  # mkdir's mode is filtered by the umask

    def path(self, p) -> Path:
        p = Path(p)
        return p if p.is_absolute() else self.home / p

    def _parent_mode(self, d: Path) -> int:
        private = self.home / ".config" / "lazaret"
        return 0o700 if d == private or private in d.parents else 0o755

    def _make_parents(self, path: Path):
        missing = []
        d = path.parent
        while not d.exists():
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            self._make_dir(d, self._parent_mode(d))

    def write(self, path, data, mode=0o600) -> Path:
        p = self.path(path)
        self._make_parents(p)
        if isinstance(data, str):
            data = data.encode()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        try:
            os.write(fd, data)
            os.fchown(fd, self.user.uid, self.user.gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        return p

    def mkdir(self, path, mode=0o755) -> Path:
        p = self.path(path)
        self._make_parents(p)
        if not p.is_dir():
            self._make_dir(p, mode)
        else:
            os.chmod(p, mode)
        return p

    # -- processes --
    def env(self, env=None) -> dict:
        e = {
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "PATH": SAFE_PATH,
            "LANG": "C.UTF-8",
            **self._sanitizer_env,
        }
        if self.runsc:
            e["LAZARET_RUNSC"] = str(self.runsc)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = str(v)
        return e

    def _run(self, argv, env, cwd, input, timeout, as_root):
        creds = {} if as_root else {
            "user": self.user.uid, "group": self.user.gid, "extra_groups": list(self.user.groups),
        }
        if isinstance(input, str):
            input = input.encode()
        proc = subprocess.run(
            [str(a) for a in argv], env=self.env(env), cwd=str(cwd or self.home),
            input=input, stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True, timeout=timeout, **creds)
        return subprocess.CompletedProcess(
            proc.args, proc.returncode,
            proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))

    def run(self, args, env=None, cwd=None, input=None, timeout=60, as_root=False):
        proc = self._run([self.bin, *args], env, cwd, input, timeout, as_root)
        self._check_report(proc, "lazaret " + " ".join(map(str, args)))
        return proc

    def run_as_user(self, argv, env=None, cwd=None, input=None, timeout=60):
        return self._run(argv, env, cwd, input, timeout, False)

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def make_lz(lazaret_bin, test_user, tun_usable, sanitizer_env, assert_no_sanitizer_report, runsc):
    made = []

    def make(user: LzUser = None) -> Lz:
        env = Lz(lazaret_bin, user or test_user, sanitizer_env, assert_no_sanitizer_report,
                 runsc)
        made.append(env)
        return env

    yield make
    if os.environ.get("LAZARET_KEEP_TEST_DIRS") != "1":
        for env in made:
            env.cleanup()


@pytest.fixture
def lz(make_lz) -> Lz:
    return make_lz()


# ---- test images and profile configurations ----------------------------------

TEST_IMAGE_CACHE = Path("/var/cache/lazaret-test-images")


@dataclass(frozen=True)
class TestImages:
    """oci: references of the offline images tests/images/build.sh makes."""
    __test__ = False  # not a test class, whatever pytest thinks of the name

    cache: Path
    busybox: str  # busybox-static + git and its libraries, tiny
    agent: str    # busybox with the non-root User "agent" (1000:1000)
    debian: str   # Debian 12 minbase + git, ca-certificates


@pytest.fixture(scope="session")
def test_images(_root, repo_root) -> TestImages:
    """Build (or find cached) the test images once per session, as root:
    tests/images/build.sh CACHE. The cache (env LAZARET_TEST_IMAGES, default
    /var/cache/lazaret-test-images) is world-readable so that the test users
    can read the layouts. The first build needs the Debian mirror (~1 min)."""
    cache = Path(os.environ.get("LAZARET_TEST_IMAGES", TEST_IMAGE_CACHE))
    script = repo_root / "tests" / "images" / "build.sh"
    proc = subprocess.run(["/bin/sh", str(script), str(cache)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        pytest.fail(f"{script} {cache} failed ({proc.returncode}):\n{proc.stderr}",
                    pytrace=False)
    return TestImages(cache=cache, busybox=f"oci:{cache}/busybox:latest",
                      agent=f"oci:{cache}/agent:latest",
                      debian=f"oci:{cache}/debian:bookworm")


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (str, Path)):
        s = str(v)
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {v!r}")


def profiles_toml(profiles: dict, storage: dict = None, network: dict = None,
                  comment: str = None) -> str:
    """A v1 configuration: profiles maps a name to its fields (str, bool,
    lists, dicts as inline tables; a dict value under "escalation" becomes
    its own table)."""
    lines = []
    if comment:
        lines += [f"# {line}" for line in comment.splitlines()]
    lines.append('schema = "lazaret-trusted-host-config-v1"')
    for name, table in (("storage", storage), ("network", network)):
        if table:
            lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    for name, fields in profiles.items():
        lines += ["", f"[profiles.{name}]"]
        sub = {}
        for k, v in fields.items():
            if k == "escalation" and isinstance(v, dict):
                sub[k] = v
            else:
                lines.append(f"{k} = {_toml_value(v)}")
        for k, v in sub.items():
            lines += ["", f"[profiles.{name}.{k}]"] + [f"{kk} = {_toml_value(vv)}"
                                                       for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def write_profiles(test_images):
    """write_profiles(lz, profiles, storage=None, network=None, comment=None)
    -> Path: write lz.config_path (0600) from profiles_toml(); a profile
    without "image" gets the busybox test image."""
    def write(lz, profiles: dict, storage: dict = None, network: dict = None,
              comment: str = None) -> Path:
        full = {name: {"image": test_images.busybox, **fields}
                for name, fields in profiles.items()}
        return lz.write(lz.config_path, profiles_toml(full, storage, network, comment))
    return write


# ---- Domains: runs, sessions and the teardown check (from test_run.py) ------------

RUN_TIMEOUT = 60        # one lazaret run, start of a Domain included
TEARDOWN_TIMEOUT = 15   # from the end of the last session to nothing left
SETTLE_TIMEOUT = 60     # the fixture's final wait, whatever the test did
COORDINATOR = "lz-coordinator"
SUPERVISOR = "lz-supervisor"
HOLDER_READY = "lz-holder-ready"

_DEFAULT = object()


def sh(script: str) -> list:
    return ["sh", "-c", script]


# ---- the Domain's host processes, files and mounts ---------------------------

@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    uid: int
    argv0: str
    cmdline: str
    parent_comm: str

    @property
    def role(self) -> str:
        if self.comm == COORDINATOR:
            # A child the coordinator just forked (the supervisor-to-be)
            # carries its name until it renames itself.
            return "coordinator-child" if self.parent_comm == COORDINATOR else "coordinator"
        if self.comm == SUPERVISOR:
            return "supervisor"
        if self.comm.startswith("lz-supervisor"):
            return "supervisor-ns"  # comm is cut at 15 bytes: lz-supervisor-n
        if self.argv0 == "runsc-sandbox":
            return "sandbox"
        if "runsc" in self.argv0:
            return "runsc"
        if self.comm == "lazaret":
            return "cli"
        return "other"

    def __str__(self):
        return f"{self.role} pid {self.pid} uid {self.uid} ({self.comm}: {self.cmdline[:160]})"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def domain_processes(root: Path, comm=None) -> list:
    """Host processes of one Lz: those whose command line or environment names
    a path under its directory (the CLI and the coordinator and supervisor it
    forks carry its XDG_RUNTIME_DIR; every runsc process, the sandbox
    included, has --root under the runtime dir).
    comm: only processes with that name (cheap pre-filter for tight loops)."""
    key = (str(root) + "/").encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        c = _read(f"/proc/{name}/comm").decode("utf-8", "replace").strip()
        if comm is not None and c != comm:
            continue
        cmd = _read(f"/proc/{name}/cmdline")
        if key not in cmd and key not in _read(f"/proc/{name}/environ"):
            continue
        uid, ppid = -1, 0
        for line in _read(f"/proc/{name}/status").decode("utf-8", "replace").splitlines():
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
            elif line.startswith("PPid:"):
                ppid = int(line.split()[1])
        parent = _read(f"/proc/{ppid}/comm").decode("utf-8", "replace").strip() if ppid else ""
        argv = cmd.split(b"\0")
        found.append(Proc(int(name), c, uid, argv[0].decode("utf-8", "replace"),
                          cmd.replace(b"\0", b" ").decode("utf-8", "replace").strip(), parent))
    return found


def by_role(root: Path, role: str) -> list:
    return [p for p in domain_processes(root) if p.role == role]


def domain_dirs(lz) -> list:
    d = lz.runtime_dir / "lazaret" / "domains"
    return sorted(d.iterdir()) if d.is_dir() else []


def generation_dirs(lz) -> list:
    return [e for d in domain_dirs(lz) for e in d.iterdir() if e.name.startswith("gen-")]


def host_mounts(root: Path) -> list:
    """Mounts under root in the host's mount table, as /proc/self/mountinfo
    and findmnt show them."""
    key = str(root) + "/"
    found = [f"mountinfo: {line}" for line in _read("/proc/self/mountinfo").decode(
        "utf-8", "replace").splitlines() if key in line or f"{root} " in line]
    p = subprocess.run(["findmnt", "-rn", "-o", "TARGET,SOURCE,FSTYPE"], capture_output=True,
                       text=True)
    found += [f"findmnt: {line}" for line in p.stdout.splitlines() if key in line]
    return found


def leftovers(lz) -> list:
    """Everything of lz's Domains that must not outlive them: processes,
    generation directories, coordinator sockets, host mounts."""
    out = [str(p) for p in domain_processes(lz.root)]
    for d in domain_dirs(lz):
        out += [f"runtime file {e}" for e in d.iterdir()
                if e.name.startswith("gen-") or e.name in ("coordinator.sock",
                                                           "coordinator.trust")]
    out += host_mounts(lz.root)
    return out


def wait_torn_down(lz, timeout: float) -> tuple:
    """Poll until nothing of lz's Domains is left. Returns (what is left,
    seconds waited): an empty list when the Domains are gone in time."""
    t0 = time.monotonic()
    while True:
        left = leftovers(lz)
        if not left or time.monotonic() - t0 > timeout:
            return left, time.monotonic() - t0
        time.sleep(0.1)


def files_containing(root: Path, needle: bytes) -> list:
    hits = []
    for dirpath, dirnames, filenames in os.walk(root):
        for f in filenames:
            p = Path(dirpath) / f
            if not p.is_symlink() and p.is_file() and needle in _read(str(p)):
                hits.append(p)
    return hits


# ---- sessions ---------------------------------------------------------------

class Session:
    """A `lazaret run` in the background (Popen) as the Lz's user."""

    def __init__(self, lz, args, env=None, cwd=None, stdin=False, check_report=None):
        self.lz = lz
        self.args = [str(a) for a in args]
        self._check = check_report
        self.proc = subprocess.Popen(
            [str(lz.bin), *self.args], env=lz.env(env), cwd=str(cwd or lz.home),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            user=lz.user.uid, group=lz.user.gid, extra_groups=list(lz.user.groups))
        self.out = bytearray()
        self.err = bytearray()
        self._open = {self.proc.stdout.fileno(): self.out, self.proc.stderr.fileno(): self.err}

    @property
    def stdout(self) -> str:
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.err.decode("utf-8", "replace")

    def pump(self, timeout: float):
        if not self._open:
            time.sleep(min(timeout, 0.05))
            return
        ready, _, _ = select.select(list(self._open), [], [], max(timeout, 0))
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                self._open[fd].extend(data)
            else:
                del self._open[fd]

    def read_until(self, text: str, timeout: float = RUN_TIMEOUT):
        """Wait until stdout contains text; fail with what was seen."""
        deadline = time.monotonic() + timeout
        while text not in self.stdout:
            if time.monotonic() > deadline or (not self._open and self.proc.poll() is not None):
                pytest.fail(f"lazaret {' '.join(self.args)}: no {text!r} on stdout after "
                            f"{timeout} s (exit {self.proc.poll()})\nstdout: {self.stdout}\n"
                            f"stderr: {self.stderr}", pytrace=False)
            self.pump(deadline - time.monotonic())

    def finish(self, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
        """Close stdin, collect the output, wait for the exit."""
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        deadline = time.monotonic() + timeout
        while self._open or self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"lazaret {' '.join(self.args)} did not end within {timeout} s\n"
                            f"stdout: {self.stdout}\nstderr: {self.stderr}", pytrace=False)
            self.pump(min(0.2, deadline - time.monotonic()))
        self.proc.stdout.close()
        self.proc.stderr.close()
        done = subprocess.CompletedProcess([str(self.lz.bin), *self.args], self.proc.returncode,
                                           self.stdout, self.stderr)
        if self._check and self.proc.returncode != -signal.SIGKILL:
            self._check(done, "lazaret " + " ".join(self.args))
        return done

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)


class Rig:
    """Per-test helper around lz: configuration, runs, background sessions,
    and the final check that every Domain it used is gone."""

    def __init__(self, lz, write_profiles, check_report):
        self.lz = lz
        self._write_profiles = write_profiles
        self._check = check_report
        self.envs = [lz]
        self.sessions = []
        self.ws = lz.mkdir("ws")

    def add_env(self, lz):
        self.envs.append(lz)
        return lz

    def config(self, profiles: dict, lz=None, **kw) -> Path:
        return self._write_profiles(lz or self.lz, profiles, **kw)

    def args(self, profile, cmd, ws) -> list:
        a = ["run", profile]
        if ws is not None:
            a += ["--workspace", str(ws)]
        if cmd is not None:
            a += ["--", *cmd]
        return a

    def run(self, profile, cmd, ws=_DEFAULT, cwd=None, input=None, env=None,
            timeout=RUN_TIMEOUT, lz=None) -> subprocess.CompletedProcess:
        lz = lz or self.lz
        ws = self.ws if ws is _DEFAULT else ws
        return lz.run(self.args(profile, cmd, ws), env=env, cwd=cwd, input=input,
                      timeout=timeout)

    def start(self, profile, cmd, ws=_DEFAULT, cwd=None, env=None, stdin=False,
              lz=None) -> Session:
        lz = lz or self.lz
        ws = self.ws if ws is _DEFAULT else ws
        s = Session(lz, self.args(profile, cmd, ws), env=env, cwd=cwd, stdin=stdin,
                    check_report=self._check)
        self.sessions.append(s)
        return s

    def hold(self, profile, ws=_DEFAULT, script="", env=None, lz=None) -> Session:
        """A session that runs script, then keeps the Domain up until
        release(): it waits for its stdin to end."""
        s = self.start(profile, sh(f"{script}\necho {HOLDER_READY}\nread x\nexit 0"), ws=ws,
                       env=env, stdin=True, lz=lz)
        s.read_until(HOLDER_READY)
        return s

    def release(self, s: Session):
        r = s.finish()
        assert r.returncode == 0, f"holder ended with {r.returncode}: {r.stderr}"
        return r

    def coordinators(self, lz=None) -> list:
        return [p for p in domain_processes((lz or self.lz).root, comm=COORDINATOR)
                if p.role == "coordinator"]

    def generations_started(self, lz=None) -> list:
        """The "generation N ... starting" lines of every coordinator.log."""
        lines = []
        for log in sorted((lz or self.lz).root.rglob("logs/coordinator.log")):
            lines += [line for line in log.read_text(errors="replace").splitlines()
                      if re.search(r"\] generation \d+ of Domain .* starting$", line)]
        return lines

    def finish(self) -> list:
        problems = []
        for s in self.sessions:
            if s.proc.poll() is None:
                try:
                    s.finish(timeout=10)
                except BaseException:  # pytest.fail is an exception too
                    s.kill()
                    s.proc.wait()
        for lz in self.envs:
            left, waited = wait_torn_down(lz, SETTLE_TIMEOUT)
            if left:
                problems.append(f"{lz.root}: {SETTLE_TIMEOUT} s after the test, its Domains "
                                f"left:\n  " + "\n  ".join(left))
                for p in domain_processes(lz.root):
                    try:
                        os.kill(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        return problems


@pytest.fixture
def rig(lz, write_profiles, assert_no_sanitizer_report):
    r = Rig(lz, write_profiles, assert_no_sanitizer_report)
    yield r
    problems = r.finish()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def ok(p: subprocess.CompletedProcess, what: str = "") -> subprocess.CompletedProcess:
    assert p.returncode == 0, (f"{what or ' '.join(map(str, p.args))}: exit {p.returncode}\n"
                               f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p
