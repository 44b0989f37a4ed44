# SPDX-License-Identifier: Apache-2.0
"""Machine-wide state shared by concurrent test sessions and benchmarks on
one machine (several developers' runs), all as root: a lock serialising
user creation and /dev/net/tun changes, and the /dev/net/tun bookkeeping.
Used by conftest.py and by bench/ (bench/launch/launch.py imports it), so
that a benchmark and a test session running together keep /dev/net/tun
open until both are done."""

import contextlib
import fcntl
import os
import stat
from pathlib import Path

TUN = "/dev/net/tun"
# Root-only; not /run/lock, which every user can write to.
STATE_DIR = Path("/run/lazaret-tests")


def state_dir() -> Path:
    STATE_DIR.mkdir(mode=0o700, exist_ok=True)
    st = STATE_DIR.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise RuntimeError(f"{STATE_DIR} must be a root-owned 0700 directory")
    return STATE_DIR


@contextlib.contextmanager
def machine_lock():
    """Serialise user creation and /dev/net/tun changes (useradd itself
    races on /etc/subuid)."""
    fd = os.open(state_dir() / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def tun_usable():
    """Typical desktops have /dev/net/tun 0666; these machines 0600. Open it
    up while the body runs and put the original mode back when the last
    concurrent user of it on this machine ends (pid files under STATE_DIR
    count them; the Network Sidecar's slirp4netns opens it as the user)."""
    users = state_dir() / "tun-users"
    saved = state_dir() / "tun-mode"

    def prune():
        for f in users.iterdir():
            try:
                os.kill(int(f.name), 0)
            except (ValueError, ProcessLookupError):
                f.unlink()

    with machine_lock():
        users.mkdir(mode=0o700, exist_ok=True)
        prune()
        if os.path.exists(TUN):
            mode = stat.S_IMODE(os.stat(TUN).st_mode)
            if mode & 0o666 != 0o666 and not saved.exists():
                saved.write_text(f"{mode:o}\n")
                os.chmod(TUN, mode | 0o666)
        (users / str(os.getpid())).touch()
    try:
        yield
    finally:
        with machine_lock():
            (users / str(os.getpid())).unlink(missing_ok=True)
            prune()
            if not any(users.iterdir()) and saved.exists():
                os.chmod(TUN, int(saved.read_text(), 8))
                saved.unlink()
