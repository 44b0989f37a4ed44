# SPDX-License-Identifier: Apache-2.0
"""Issue 9, items 4 and 7 (docs/limits.md): no setuid/setgid file reaches the
host from the sandbox, and a Domain's processes, memory and in-memory root
file system are bounded.

Setuid: every creation path (open/openat/creat/openat2 with a mode, mkdir,
mknod, chmod/fchmod/fchmodat/fchmodat2, chown then chmod, cp -p, install -m,
busybox and GNU tar, busybox cpio) runs inside the sandbox on the workspace,
a read-write volume and a persistent directory; the host then walks those
directories (and the Domain Root's overlay uppers) with os.lstat and finds
no S_ISUID/S_ISGID. The control runs the same helper and the same shell
commands on the host as the test user and sees the bits set.

Limits: a fork loop, an allocation loop and a root-file-system fill, each
with a ceiling above the bound (stopped by it) and one below (completes).
The memory bound is lowered for the test with `prlimit --fsize`, the
documented per-Domain knob (Lazaret takes the lower of its default and the
RLIMIT_FSIZE it was started with), so no test needs more than ~1.5 GiB.
"""

import os
import re
import shutil
import stat
import subprocess
import tarfile
import io

import pytest

from conftest import RUN_TIMEOUT, ok, sh

HERE = os.path.dirname(os.path.abspath(__file__))
BITS = stat.S_ISUID | stat.S_ISGID
NPROC = 512           # LZ_SPEC_NPROC (src/oci/spec.h)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """res_probe.c, static (runs in the busybox and the Debian image alike)."""
    out = tmp_path_factory.mktemp("res-probe") / "res_probe"
    subprocess.run(["gcc", "-static", "-O1", "-o", str(out), os.path.join(HERE, "res_probe.c")],
                   check=True, capture_output=True)
    out.chmod(0o755)
    out.parent.chmod(0o755)
    return out


def marked(root) -> list:
    """Every path under root (not following symlinks) with S_ISUID/S_ISGID."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            m = os.lstat(p).st_mode
            if m & BITS and not stat.S_ISLNK(m):
                found.append(f"{p} {stat.filemode(m)}")
    return found


def suid_tar(path, gnu=True):
    """A tar archive holding one setuid and one setgid regular file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT if gnu
                      else tarfile.USTAR_FORMAT) as t:
        for name, mode in (("tar-suid", 0o4755), ("tar-sgid", 0o2755)):
            data = b"#!/bin/sh\nid\n"
            info = tarfile.TarInfo(name)
            info.mode, info.size = mode, len(data)
            t.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())


# The shell part of the creation paths, for busybox and GNU tools alike. $1 is
# the target directory, $2 the directory holding the archives. Every step may
# fail inside the sandbox (the guard answers EPERM); the script goes on.
SHELL_PATHS = r"""
D=$1; A=$2
cd "$D" || exit 3
printf '#!/bin/sh\nid\n' > src; chmod 0755 src
cp src sh-chmod; chmod 4755 sh-chmod
cp src sh-chmod-gs; chmod g+s sh-chmod-gs
cp src sh-chown; chown "$(id -u):$(id -g)" sh-chown; chmod u+s sh-chown
if command -v install >/dev/null; then install -m 4755 src sh-install; fi
if [ -e /usr/bin/su ] && [ -n "$CP_SUID" ]; then cp -p /usr/bin/su sh-cp-p; fi
cp src sh-cp-src; chmod 4755 sh-cp-src 2>/dev/null; cp -p sh-cp-src sh-cp-p2
mkdir tar && (cd tar && tar -xpf "$A/suid.tar")
mkdir cpio && (cd cpio && ${CPIO:-cpio} -idm < "$A/suid.cpio")
echo SHELL-PATHS-DONE
"""


def make_archives(lz, probe_dir):
    """suid.tar and suid.cpio in a directory the sandbox sees read-only."""
    adir = lz.mkdir("archives")
    suid_tar(adir / "suid.tar")
    stage = lz.root / "cpio-stage"
    stage.mkdir()
    for name, mode in (("cpio-suid", 0o4755), ("cpio-sgid", 0o2755)):
        (stage / name).write_text("#!/bin/sh\nid\n")
        os.chmod(stage / name, mode)
    names = "cpio-suid\ncpio-sgid\n"
    with open(adir / "suid.cpio", "wb") as f:
        subprocess.run(["busybox", "cpio", "-o", "-H", "newc"], input=names.encode(), cwd=stage,
                       stdout=f, check=True, stderr=subprocess.DEVNULL)
    shutil.copy(probe_dir, adir / "res_probe")
    for p in adir.iterdir():
        os.chmod(p, 0o755 if p.name == "res_probe" else 0o644)
    os.chown(adir, lz.user.uid, lz.user.gid)
    return adir


def setuid_config(rig, adir, image):
    lz = rig.lz
    lz.mkdir("vol")
    rig.config({"p": {"image": image, "persistent_dirs": ["/root"], "volumes": [
        {"host": "~/vol", "container": "/root/vol", "kind": "directory",
         "access": "read-write"},
        {"host": str(adir), "container": "/root/archives", "kind": "directory",
         "access": "read-only"},
    ]}})


def host_dirs(lz, ws):
    data = lz.home / ".local" / "share" / "lazaret" / "domains"
    return [ws, lz.home / "vol", data]


SANDBOX_SCRIPT = r"""
for d in /workspace/t /root/vol/t /root/t; do
  mkdir -p $d/probe $d/shell
  /root/archives/res_probe modes $d/probe > $d/probe.out
  sh -c "$PATHS" paths $d/shell /root/archives > $d/shell.out 2>&1
done
/root/archives/res_probe ptrace
cat /workspace/t/probe.out
"""


def check_sandbox(rig, image, probe, cp_suid=""):
    lz = rig.lz
    adir = make_archives(lz, probe)
    setuid_config(rig, adir, image)
    p = rig.run("p", ["env", f"PATHS={SHELL_PATHS}", f"CP_SUID={cp_suid}", "sh", "-c",
                      SANDBOX_SCRIPT])
    ok(p, "the creation paths inside the sandbox")
    # Every probe call that sets a bit was refused with EPERM (openat2: ENOSYS).
    results = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    for name in ("open", "openat", "creat", "mknod", "mknodat", "chmod", "fchmod", "fchmodat",
                 "chown-chmod", "mkdir", "mkdirat"):
        assert results.get(name) == "ERR 1", f"{name}: {results.get(name)} ({p.stdout})"
    assert results.get("openat2") == "ERR 38", p.stdout
    assert results.get("SETREGS") == "ERR 1", p.stdout
    assert results.get("GETREGS") == "OK", p.stdout     # tracing still works
    shell = (rig.ws / "t" / "shell.out").read_text()
    assert "SHELL-PATHS-DONE" in shell, shell
    # Each refused step was reported, and the files whose creation did not
    # ask for the bits are there (without them).
    assert shell.count("Operation not permitted") >= 5, shell
    for f in ("sh-chmod", "sh-chmod-gs", "sh-chown", "sh-cp-src"):
        assert (rig.ws / "t" / "shell" / f).exists(), f"{f} missing: {shell}"
    found = []
    for d in host_dirs(lz, rig.ws):
        found += marked(d)
    assert not found, "setuid/setgid files on the host:\n" + "\n".join(found)
    # The persistent directory's upper really holds the files (the walk saw them).
    uppers = list((lz.home / ".local/share/lazaret/domains").rglob("upper/t/shell/sh-chmod"))
    assert uppers, "no persistent upper under the Domain Root"
    return shell


def test_setuid_creation_paths_busybox(rig, test_images, probe):
    check_sandbox(rig, test_images.busybox, probe)


def test_setuid_creation_paths_debian_gnu_tar(rig, test_images, probe):
    shell = check_sandbox(rig, test_images.debian, probe, cp_suid="1")
    assert "tar" in shell  # GNU tar reports the refused chmod


def test_setuid_control_on_the_host(lz, probe):
    """The same helper and shell commands, run by the test user on the host,
    do leave setuid/setgid files: what the sandbox is refused is possible."""
    adir = make_archives(lz, probe)
    t = lz.mkdir("host-t")
    (t / "probe").mkdir()
    (t / "shell").mkdir()
    os.chown(t / "probe", lz.user.uid, lz.user.gid)
    os.chown(t / "shell", lz.user.uid, lz.user.gid)
    p = lz.run_as_user([str(adir / "res_probe"), "modes", str(t / "probe")])
    assert p.returncode == 0, p.stderr
    # The host has busybox's cpio, not GNU cpio.
    cpio = {} if shutil.which("cpio") else {"CPIO": "busybox cpio"}
    p = lz.run_as_user(["sh", "-c", SHELL_PATHS, "paths", str(t / "shell"), str(adir)],
                       env=cpio)
    assert "SHELL-PATHS-DONE" in p.stdout, p.stdout + p.stderr
    found = {os.path.relpath(f.split(" ")[0], t) for f in marked(t)}
    for want in ("probe/open-suid", "probe/openat-sgid", "probe/creat-suid", "probe/mknod-suid",
                 "probe/chmod-target", "probe/fchmod-target", "probe/chown-chmod-target",
                 "shell/sh-chmod", "shell/sh-chmod-gs", "shell/sh-chown", "shell/sh-install",
                 "shell/sh-cp-p2", "shell/tar/tar-suid", "shell/tar/tar-sgid",
                 "shell/cpio/cpio-suid"):
        assert want in found, f"{want} not setuid/setgid on the host: {sorted(found)}"


# ---- resource limits --------------------------------------------------------------------------

def run_probe(rig, probe, args, fsize=None, timeout=RUN_TIMEOUT):
    """res_probe ARGS in the busybox sandbox; with fsize, Lazaret is started
    under `prlimit --fsize` (the Domain memory bound)."""
    lz = rig.lz
    shutil.copy(probe, rig.ws / "res_probe")
    os.chown(rig.ws / "res_probe", lz.user.uid, lz.user.gid)
    cmd = rig.args("bb", ["/workspace/res_probe", *args], rig.ws)
    argv = [lz.bin, *cmd]
    if fsize is not None:
        argv = ["prlimit", f"--fsize={fsize}", *argv]
    return lz.run_as_user(argv, timeout=timeout)


def test_fork_bomb_stops_at_nproc(rig, probe):
    rig.config({"bb": {}})
    p = run_probe(rig, probe, ["fork", str(NPROC + 1000)])
    m = re.search(r"FORKED (\d+) ERR (\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    n, e = int(m.group(1)), int(m.group(2))
    assert e == 11 and NPROC - 50 <= n < NPROC, f"forked {n}, errno {e}"
    # Control: a ceiling below the bound completes.
    p = run_probe(rig, probe, ["fork", str(NPROC // 2)])
    assert f"FORKED {NPROC // 2} ERR 0" in p.stdout, p.stdout + p.stderr


MIB = 1 << 20


def test_memory_hog_stops_at_the_domain_bound(rig, probe):
    rig.config({"bb": {}})
    bound = 1024 * MIB
    p = run_probe(rig, probe, ["alloc", "3072"], fsize=bound)
    reached = [int(x) for x in re.findall(r"ALLOC (\d+)", p.stdout)]
    top = max(reached, default=0)
    assert "ALLOC-DONE" not in p.stdout, p.stdout[-300:]
    assert 128 <= top <= 1024, f"reached {top} MiB under a 1024 MiB bound; {p.stderr[-500:]}"
    # Control: the same loop below the bound completes under the same bound...
    p = run_probe(rig, probe, ["alloc", "512"], fsize=bound)
    assert "ALLOC-DONE 512" in p.stdout, p.stdout[-300:] + p.stderr[-500:]
    # ...and above it without the lowered bound (default: half the RAM).
    p = run_probe(rig, probe, ["alloc", "1536"])
    assert "ALLOC-DONE 1536" in p.stdout, p.stdout[-300:] + p.stderr[-500:]


def test_root_filesystem_fill_stops_at_the_domain_bound(rig, probe):
    """Several files, each smaller than the bound, into the in-memory root
    (--overlay2=root:memory): their total hits the Domain bound."""
    rig.config({"bb": {}})
    bound = 1024 * MIB
    fill = ("i=0; while [ $i -lt $N ]; do "
            "dd if=/dev/zero of=/tmp/fill$i bs=1M count=200 2>/dev/null || break; "
            "i=$((i+1)); echo FILLED $i; done; echo END $i")
    lz = rig.lz

    def run(n, fsize):
        argv = [lz.bin, *rig.args("bb", ["env", f"N={n}", "sh", "-c", fill], rig.ws)]
        if fsize:
            argv = ["prlimit", f"--fsize={fsize}", *argv]
        return lz.run_as_user(argv, timeout=RUN_TIMEOUT)

    p = run(8, bound)                     # 1600 MiB wanted
    m = re.search(r"END (\d+)", p.stdout)
    assert m and int(m.group(1)) <= 5, p.stdout + p.stderr[-500:]
    p = run(2, bound)                     # control: 400 MiB fits
    assert "END 2" in p.stdout, p.stdout + p.stderr[-500:]
