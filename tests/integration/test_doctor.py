# SPDX-License-Identifier: Apache-2.0
"""lazaret doctor: every prerequisite reported as ok/warn/FAIL with a fix for
each failure, the runsc capability decisions, and a safe PATH search."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import ok

NOSUB_USER = "lztest-nosub"
LINE = re.compile(r"^(ok|warn|FAIL)\s+(.{16}) (.*)$")


def parse(stdout):
    """{check name: {"status", "detail", "note", "fix"}} from doctor's output."""
    checks, last = {}, None
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            last = {"status": m.group(1), "detail": m.group(3), "note": None, "fix": None}
            checks[m.group(2).strip()] = last
        elif last is not None and line.startswith("      note: "):
            last["note"] = line[len("      note: "):]
        elif last is not None and line.startswith("      fix:  "):
            last["fix"] = line[len("      fix:  "):]
    return checks


def runsc_release(text):
    m = re.search(r"runsc version \S*?(\d{8})", text)
    return int(m.group(1)) if m else 0


def doctor(lz, **kw):
    p = lz.run(["doctor"], **kw)
    assert p.stderr == "", p.stderr
    return p, parse(p.stdout)


def fake_runsc(lz, body):
    """A runsc of the test's own, chosen with LAZARET_RUNSC; `runsc flags`
    answers as the system's does unless body handles it."""
    lz.write("bin/runsc", "#!/bin/sh\n" + body +
             '[ "$1" = flags ] && exec /usr/bin/runsc flags\n', mode=0o755)
    return {"LAZARET_RUNSC": f"{lz.home}/bin/runsc"}


@pytest.fixture(scope="session")
def nosub_user(user_factory):
    return user_factory(NOSUB_USER, subids=False)


def test_all_prerequisites_ok(lz):
    p, checks = doctor(lz)
    assert p.returncode == 0, p.stdout
    for name in ("runsc", "newuidmap", "newgidmap", "subuid range", "subgid range",
                 "user namespaces", "id mapping", "slirp4netns", "/dev/net/tun", "nft",
                 "skopeo", "umoci", "XDG_RUNTIME_DIR"):
        assert checks[name]["status"] == "ok", (name, p.stdout)
    assert not [n for n, c in checks.items() if c["status"] == "FAIL"]
    assert re.search(rf"\(\d+ ids\) for {lz.user.name}$", checks["subuid range"]["detail"])
    assert p.stdout.splitlines()[-1].startswith("All required checks passed")


@pytest.mark.runsc_both
def test_runsc_path_version_platform_and_what_was_learned(lz, runsc):
    path = str(runsc or "/usr/bin/runsc")
    real = subprocess.run([path, "--version"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}).stdout
    date = runsc_release(real)
    assert date, real
    flags = subprocess.run([path, "flags"], capture_output=True, text=True).stderr
    platform = re.search(r'-platform string\n.*\(default "(\w+)"\)', flags).group(1)
    _, checks = doctor(lz)
    iso = f"{date // 10000:04d}-{date // 100 % 100:02d}-{date % 100:02d}"
    origin = "set by LAZARET_RUNSC" if runsc else "from the system directories"
    assert checks["runsc"]["detail"].startswith(f"{path} ({origin}), version "), checks["runsc"]
    assert f"(release {iso})" in checks["runsc"]["detail"]
    assert checks["runsc flags"]["status"] == "ok", checks["runsc flags"]
    assert checks["platform"]["detail"].startswith(f"{platform} (runsc's default"), checks
    # Nothing learned yet: the decisions are left to the first start, never
    # to the date.
    net, statx = checks["network mode"], checks["statx"]
    assert net["status"] == "ok" and "(--network=sandbox)" in net["detail"]
    assert "learned by the first start" in net["detail"], net
    assert "learned by the first start" in statx["detail"], statx


def test_doctor_reports_what_the_first_start_learned(rig):
    rig.config({"bb": {}})
    ok(rig.run("bb", ["true"]))
    text = (rig.lz.home / ".local/share/lazaret/runsc-facts").read_text()
    cover = ",netcover=1," in text
    statx_ok = ",statx=1," in text
    _, checks = doctor(rig.lz)
    net, statx = checks["network mode"], checks["statx"]
    assert "learned at the first start" in net["detail"], net
    assert ("covers /proc/sys/net" in net["detail"]) == cover, (net, text)
    assert statx["status"] == ("ok" if statx_ok else "warn"), (statx, text)
    # Control: another runsc binary (a copy: another identity) has learned
    # nothing yet.
    own = rig.lz.home / "bin" / "runsc"
    rig.lz.mkdir("bin")
    shutil.copy("/usr/bin/runsc", own)
    os.chown(own, rig.lz.user.uid, rig.lz.user.gid)
    _, checks = doctor(rig.lz, env={"LAZARET_RUNSC": own})
    assert "learned by the first start" in checks["network mode"]["detail"], checks


@pytest.mark.parametrize("version", [
    "runsc version 0.0~20221219.0",
    "runsc version release-20230320.0",
    "runsc version release-20240101.0",
])
def test_runsc_version_parsing(lz, version):
    env = fake_runsc(lz, f"[ \"$1\" = --version ] && echo '{version}' && echo 'spec: 1.1.0' "
                         "&& exit 0\n")
    p, checks = doctor(lz, env=env)
    assert checks["runsc"]["status"] == "ok"
    assert checks["runsc"]["detail"].startswith(
        f"{lz.home}/bin/runsc (set by LAZARET_RUNSC), version ")
    assert checks["network mode"]["status"] == "ok"
    assert "runsc's own network stack (--network=sandbox)" in checks["network mode"]["detail"]
    # The date decides nothing: the first start learns.
    assert "learned by the first start" in checks["network mode"]["detail"]
    assert p.returncode == 0, p.stdout


def test_runsc_without_release_date_is_probed_not_guessed(lz):
    env = fake_runsc(lz, "[ \"$1\" = --version ] && printf 'runsc version custom-build"
                         "\\033[31m\\n' && exit 0\n")
    p, checks = doctor(lz, env=env)
    assert checks["runsc"]["status"] == "warn"
    assert "release date unknown" in checks["runsc"]["detail"]
    assert "\033" not in p.stdout  # program output is sanitised before printing
    assert "learned by the first start" in checks["network mode"]["detail"]


def test_a_runsc_without_a_needed_flag_fails_by_name(lz):
    env = fake_runsc(lz, "[ \"$1\" = --version ] && echo 'runsc version release-20990101.0' "
                         "&& exit 0\n"
                         "[ \"$1\" = flags ] && /usr/bin/runsc flags 2>&1 | "
                         "grep -v -e '^  -overlay2' >&2 && exit 0\n")
    p, checks = doctor(lz, env=env)
    assert p.returncode == 1
    assert checks["runsc flags"]["status"] == "FAIL"
    assert "does not accept --overlay2" in checks["runsc flags"]["detail"]
    # Control: the same runsc with every flag passes the check.
    env = fake_runsc(lz, "[ \"$1\" = --version ] && echo 'runsc version release-20990101.0' "
                         "&& exit 0\n")
    _, checks = doctor(lz, env=env)
    assert checks["runsc flags"]["status"] == "ok"


@pytest.mark.parametrize("setup,message", [
    ("relative", "is not an absolute path"),
    ("world-writable", "is owned by uid"),
    ("dir-writable", "lies in a directory"),
    ("not-executable", "is not a program you can run"),
])
def test_lazaret_runsc_is_validated(rig, setup, message):
    lz = rig.lz
    good = fake_runsc(lz, "[ \"$1\" = --version ] && echo 'runsc version release-20990101.0' "
                          "&& exit 0\n")
    own = lz.home / "bin" / "runsc"
    # Control: as installed, the test's own runsc is accepted.
    _, checks = doctor(lz, env=good)
    assert checks["runsc"]["status"] == "ok", checks["runsc"]
    env = dict(good)
    if setup == "relative":
        env["LAZARET_RUNSC"] = "bin/runsc"
    elif setup == "world-writable":
        os.chmod(own, 0o757)
    elif setup == "dir-writable":
        os.chmod(lz.home / "bin", 0o777)
    else:
        os.chmod(own, 0o644)
    p, checks = doctor(lz, env=env)
    assert p.returncode == 1
    assert checks["runsc"]["status"] == "FAIL" and message in checks["runsc"]["detail"], checks
    assert "network mode" not in checks
    # lazaret run refuses it the same way, before anything starts.
    rig.config({"bb": {}})
    r = rig.run("bb", ["true"], env=env)
    assert r.returncode == 125 and message in r.stderr, r.stderr


def test_broken_runsc_fails_with_reinstall_fix(lz):
    env = fake_runsc(lz, "exit 3\n")
    p, checks = doctor(lz, env=env)
    assert p.returncode == 1
    assert checks["runsc"]["status"] == "FAIL"
    assert "exited with status 3" in checks["runsc"]["detail"]
    assert checks["runsc"]["fix"] == "point LAZARET_RUNSC at a working runsc, or unset it"
    assert "network mode" not in checks


def test_hanging_runsc_is_killed(lz):
    env = fake_runsc(lz, "exec sleep 60\n")
    p, checks = doctor(lz, env=env, timeout=30)
    assert p.returncode == 1
    assert checks["runsc"]["status"] == "FAIL"
    assert "did not finish within 5000 ms" in checks["runsc"]["detail"]
    left = lz.run_as_user(["pgrep", "-u", str(lz.user.uid), "-f", f"{lz.home}/bin/runsc"])
    assert left.stdout == ""  # the killed child was reaped, nothing left behind


def test_relative_path_entries_are_never_searched(lz):
    marker = lz.home / "fake-runsc-ran"
    fake_runsc(lz, f"touch {marker}\necho 'runsc version release-20990101.0'\n")
    lz.write("runsc", f"#!/bin/sh\ntouch {marker}\n", mode=0o755)
    # ".", "" and "bin" would all resolve against the cwd (a workspace the
    # agent can write to): only absolute entries count.
    env = {"PATH": ".::bin:/usr/local/bin:/usr/bin:/bin"}
    p, checks = doctor(lz, env=env, cwd=lz.home)
    assert checks["runsc"]["status"] == "ok"
    assert checks["runsc"]["detail"].startswith("/usr/bin/runsc (from the system directories),")
    assert not marker.exists()


def test_non_executable_candidate_is_skipped(lz):
    lz.write("bin/runsc", "#!/bin/sh\necho 'runsc version release-20990101.0'\n", mode=0o644)
    _, checks = doctor(lz, env={"PATH": f"{lz.home}/bin:/usr/bin:/bin"})
    assert checks["runsc"]["detail"].startswith("/usr/bin/runsc (from the system directories),")


def test_tools_outside_user_path_are_found(lz):
    # nft lives in /usr/sbin, which ordinary users' PATH lacks.
    _, checks = doctor(lz, env={"PATH": "/usr/bin:/bin"})
    assert checks["nft"]["status"] == "ok"
    assert checks["nft"]["detail"].endswith("/nft")


def test_missing_subordinate_ids(make_lz, nosub_user):
    lz = make_lz(nosub_user)
    p, checks = doctor(lz)
    assert p.returncode == 1
    taken = []
    for path in ("/etc/subuid", "/etc/subgid"):
        for line in open(path).read().splitlines():
            parts = line.split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                taken.append((int(parts[1]), int(parts[2])))
    for check, opt in (("subuid range", "--add-subuids"), ("subgid range", "--add-subgids")):
        c = checks[check]
        assert c["status"] == "FAIL", p.stdout
        assert f"no range for {NOSUB_USER} (uid {nosub_user.uid})" in c["detail"]
        m = re.fullmatch(rf"sudo usermod {opt} (\d+)-(\d+) {re.escape(NOSUB_USER)}", c["fix"])
        assert m, c["fix"]
        first, last = int(m.group(1)), int(m.group(2))
        assert last - first + 1 == 65536 and first >= 100000
        # The suggested range collides with nobody's.
        assert all(last < s or first >= s + n for s, n in taken)
    assert checks["id mapping"]["status"] == "warn"
    assert {n for n, c in checks.items() if c["status"] == "FAIL"} == {"subuid range",
                                                                       "subgid range"}
    assert p.stdout.splitlines()[-1].startswith("2 checks failed: run the fix lines above")


def test_runtime_dir_unset(lz):
    p, checks = doctor(lz, env={"XDG_RUNTIME_DIR": None})
    assert p.returncode == 1
    c = checks["XDG_RUNTIME_DIR"]
    assert c["status"] == "FAIL" and c["detail"] == "is not set"
    assert c["fix"].endswith("export XDG_RUNTIME_DIR=/run/user/$(id -u)")
    std = f"/run/user/{lz.user.uid}"
    if not os.path.isdir(std):
        assert c["fix"].startswith(
            f"sudo install -d -m 0700 -o {lz.user.uid} -g {lz.user.gid} {std} && ")


def test_runtime_dir_relative(lz):
    p, checks = doctor(lz, env={"XDG_RUNTIME_DIR": "run"})
    assert p.returncode == 1
    assert checks["XDG_RUNTIME_DIR"]["detail"] == "is not an absolute path"


def test_runtime_dir_too_open(lz):
    os.chmod(lz.runtime_dir, 0o755)
    p, checks = doctor(lz)
    assert p.returncode == 1
    c = checks["XDG_RUNTIME_DIR"]
    assert c["status"] == "FAIL" and "mode 0755, not 0700" in c["detail"]
    assert c["fix"] == 'chmod 0700 "$XDG_RUNTIME_DIR"'


def test_runtime_dir_of_another_owner(lz):
    other = lz.root / "rootdir"
    other.mkdir(mode=0o700)
    p, checks = doctor(lz, env={"XDG_RUNTIME_DIR": other})
    assert p.returncode == 1
    c = checks["XDG_RUNTIME_DIR"]
    assert f"owned by uid 0, not {lz.user.uid}" in c["detail"]
    assert "export XDG_RUNTIME_DIR=" in c["fix"]


def test_runtime_dir_symlink_is_refused(lz):
    link = lz.root / "runlink"
    link.symlink_to(lz.runtime_dir)
    p, checks = doctor(lz, env={"XDG_RUNTIME_DIR": link})
    assert p.returncode == 1
    assert "symbolic link" in checks["XDG_RUNTIME_DIR"]["detail"]


def test_environment_values_are_not_printed(lz):
    secret = "/tmp/no-such-dir-7f3a9c"
    p, checks = doctor(lz, env={"XDG_RUNTIME_DIR": secret, "PATH": "/opt/secret-path-41b7:/usr/bin"})
    assert checks["XDG_RUNTIME_DIR"]["status"] == "FAIL"
    assert secret not in p.stdout and "secret-path" not in p.stdout


def test_unexpected_argument(lz):
    p = lz.run(["doctor", "extra"])
    assert p.returncode == 2
    assert "unexpected argument 'extra'" in p.stderr
