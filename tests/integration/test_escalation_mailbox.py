# SPDX-License-Identifier: Apache-2.0
"""The escalation mailbox under attack, end to end (issue 11, item 8;
docs/escalation.md): the real coordinator, the real `lazaret-escalate` in a
real sandbox, real host commands, as the unprivileged test user.

The sandbox's side of the mailbox is, on the host, the Domain's generation
directory: gen-N/mailbox/outbox and gen-N/credentials/client (the
sandbox's seed, the coordinator's public key and the generation nonce),
and the inbox: a bounded tmpfs the supervisor mounts on
gen-N/mailbox/spool in its own mount namespace (reached here through
/proc/<pid>/root of a process in that namespace; its inbox/ is what the
sandbox has at /run/lazaret/mailbox/inbox). The sandbox can write anything
into the inbox that these tests write there (Mailbox.put, with the test
user's file system ids): the coordinator reads the same bytes either way. So a record here is what a compromised agent
holding the sandbox's credentials could produce, and the tests assert on
what the coordinator does with it, from the host side only: whether a host
marker script ran (Host, from test_escalation.py), whether outbox/<id>/
appeared and what its signed result says, the Domain Store's escalation
rows, the refusal lines of logs/coordinator.log, and host processes in
/proc.

Every attack has its control: the same record correctly signed, with a
fresh id, the right session's capability, a regular file, ... runs the
host script, so each refusal is the defence's doing and not a broken
request.

Exit statuses of the client: 250 denied, 251 timed out, 252 cancelled,
253 failed, 254 not sent.
"""

import contextlib
import ctypes
import errno
import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conftest import RUN_TIMEOUT, TEARDOWN_TIMEOUT, generation_dirs, sh, wait_torn_down
from mailbox_records import (CANCEL, CANCELLED, COMPLETED, FAILED, MAX_RECORD, OUTCOMES, SIG_LEN,
                             control, decode, request, seed_of, sign, verify)
from test_escalation import Host, answer, coordinator_log, esc_profile, store_rows
from test_terminal import terms  # noqa: F401 (a fixture)

DENIED_RC, CANCELLED_RC, FAILED_RC = 250, 252, 253
SILENCE_S = 5.0  # LZ_MBX_SILENCE_MS
CAP_LINE = 'echo "CAP=$LAZARET_ESCALATE_CAPABILITY"'
# coordinator.log's refusal lines (src/coordinator/escalation.c)
BAD_SIGNATURE = "refused a record whose signature is not this generation's sandbox's"
REPLAY = "this request id was used before (a replay)"
NOT_A_FILE = f"refused an entry that is not a regular file of at most {MAX_RECORD + SIG_LEN} bytes"
MALFORMED = "a malformed request was refused"
OTHER_SESSION_CANCEL = "refused a cancellation from another session"


@pytest.fixture
def host(rig):
    return Host(rig.lz)


def new_id() -> str:
    return secrets.token_hex(16)


def capability(session) -> str:
    m = re.search(r"CAP=([0-9a-f]{32})\b", session.stdout)
    assert m, f"no capability printed: {session.stdout!r} {session.stderr!r}"
    return m.group(1)


def wait_for(what, pred, timeout=10.0, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s", pytrace=False)
        time.sleep(step)


def log_count(lz, needle) -> int:
    return coordinator_log(lz).count(needle)


def wait_log(lz, needle, count, timeout=10.0):
    wait_for(f"{count} x {needle!r} in coordinator.log",
             lambda: log_count(lz, needle) >= count, timeout)
    assert log_count(lz, needle) == count, coordinator_log(lz)[-3000:]


def alive(pid: int, token: str) -> bool:
    """pid is a live (not zombie) host process whose command line has token
    (so a reused pid is not mistaken for ours)."""
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return st.rsplit(")", 1)[1].split()[0] != "Z" and token.encode() in cmd


def kill_pid(pid: int):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def fs_ids(uid: int, gid: int):
    """This thread's file system uid and gid, for a while: the inbox's
    tmpfs belongs to the supervisor's user namespace, where root (uid 0 on
    the host) has no mapping, so files are created there as the user (as
    the sandbox's gofer does); root's other powers stay."""
    _libc.setfsgid(gid)
    _libc.setfsuid(uid)
    try:
        yield
    finally:
        _libc.setfsuid(0)
        _libc.setfsgid(0)


def spool_of(gen: Path, timeout=10.0) -> Path:
    """gen/mailbox/spool as the supervisor's mount namespace has it: the
    inbox's tmpfs (docs/escalation.md "The mailbox's bound"), through
    /proc/<pid>/root of a process whose mount table has it."""
    point = f"{gen}/mailbox/spool"

    def find():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                f = line.split()
                # mount point is field 5; the file system type follows " - "
                if f[4] == point and f[f.index("-") + 1] == "tmpfs":
                    return Path(f"/proc/{pid}/root{point}")
        return None
    return wait_for(f"the inbox's tmpfs on {point}", find, timeout, 0.1)


def statvfs_used(path) -> tuple:
    """(bytes, entries) in use on path's file system."""
    v = os.statvfs(path)
    return (v.f_blocks - v.f_bfree) * v.f_frsize, v.f_files - v.f_ffree


class Mailbox:
    """The host side of the one running generation's mailbox, as the
    sandbox sees it: its credentials, and records put into its inbox the
    way the client does (temporary name, then rename)."""

    def __init__(self, lz):
        gens = [g for g in generation_dirs(lz) if (g / "mailbox").is_dir()]
        assert len(gens) == 1, f"expected one running generation: {gens}"
        self.lz, self.gen = lz, gens[0]
        self.spool = spool_of(self.gen)
        self.inbox = self.spool / "inbox"
        self.outbox = self.gen / "mailbox" / "outbox"
        creds = self.gen / "credentials"
        blob = (creds / "client").read_bytes()  # seed || coordinator key || nonce
        self.seed, self.coord_pub, self.nonce = blob[:32], blob[32:64], blob[64:]
        assert len(self.seed) == 32 and len(self.coord_pub) == 32 and len(self.nonce) == 32

    def signed(self, payload, seed=None, nonce=None) -> bytes:
        return sign(seed or self.seed, nonce or self.nonce, payload)

    def put(self, name: str, data: bytes = None, make=None, wait_room=False):
        """Write inbox/.tmp (owned by the test user, as the sandbox's files
        are; O_NOFOLLOW through the inbox's descriptor: the directory is the
        user's) and rename it to name. make(dirfd, tmp) builds something
        other than a regular file instead. wait_room: a full inbox (ENOSPC)
        is waited out, as a flood that keeps trying would be."""
        while True:
            try:
                with fs_ids(self.lz.user.uid, self.lz.user.gid):
                    return self._put(name, data, make)
            except OSError as e:
                if not (wait_room and e.errno == errno.ENOSPC):
                    raise
                time.sleep(0.01)

    def _put(self, name, data, make):
        d = os.open(self.inbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            tmp = f".lzt-{secrets.token_hex(4)}"
            if make:
                make(d, tmp)
            else:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o644, dir_fd=d)
                try:
                    try:
                        os.write(fd, data)
                    except OSError:
                        os.unlink(tmp, dir_fd=d)
                        raise
                    os.fchmod(fd, 0o644)
                finally:
                    os.close(fd)
            os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
        finally:
            os.close(d)

    def put_request(self, cap, argv, rid=None, seed=None, nonce=None, wait_room=False) -> str:
        rid = rid or new_id()
        self.put(f"{rid}.request", self.signed(request(cap, rid, [str(a) for a in argv]),
                                               seed, nonce), wait_room=wait_room)
        return rid

    def consumed(self, name, timeout=10.0):
        """The coordinator took inbox/name (read it and removed it)."""
        wait_for(f"inbox/{name} taken", lambda: not os.path.lexists(self.inbox / name), timeout)

    def _read_result(self, rid):
        try:
            data = (self.outbox / rid / "result").read_bytes()
        except FileNotFoundError:  # not yet, or already dropped with its directory
            return None
        r = decode(verify(self.coord_pub, self.nonce, data))
        assert r["id"] == rid
        return r

    def result(self, rid, timeout=15.0) -> dict:
        """outbox/<rid>/result, its signature checked, decoded."""
        return self.results([rid], timeout)[rid]

    def results(self, rids, timeout=15.0) -> dict:
        """The results of all rids, watched together: a request nobody
        acknowledges keeps its outbox directory only a few seconds after
        its end (LZ_MBX_HEARTBEAT_MS * 3), so none may wait for another."""
        got, deadline = {}, time.monotonic() + timeout
        while len(got) < len(rids):
            for rid in rids:
                if rid not in got and (r := self._read_result(rid)):
                    got[rid] = r
            if time.monotonic() > deadline:
                pytest.fail(f"no result for {len(rids) - len(got)} of {len(rids)} requests "
                            f"within {timeout} s", pytrace=False)
            time.sleep(0.02)
        return got

    def outbox_ids(self) -> set:
        return {e.name for e in self.outbox.iterdir()} if self.outbox.is_dir() else set()


def hold(rig, profile="p"):
    h = rig.hold(profile, script=CAP_LINE)
    return h, capability(h), Mailbox(rig.lz)


# ---- 1. forged records ---------------------------------------------------------

def test_forged_request_is_refused(rig, host):
    """A request signed with any key but this generation's sandbox key, or
    whose signed bytes were changed, runs nothing and is not accepted (no
    outbox directory). Control: the very same request id and bytes,
    correctly signed, runs."""
    tool = host.script("tool", "exit 0")
    loot = host.script("loot", "exit 0")  # a name of the same length
    rig.config({"p": esc_profile([{"executable": str(tool)}, {"executable": str(loot)}])})
    holder, cap, mb = hold(rig)
    rid = new_id()
    payload = request(cap, rid, [str(tool)])
    genuine = mb.signed(payload)
    # The genuine signature of another request (for loot), its argv then
    # changed to tool's: only the signed bytes differ.
    for_loot = mb.signed(request(cap, rid, [str(loot)]))
    swapped = for_loot[:-SIG_LEN].replace(b"/loot", b"/tool") + for_loot[-SIG_LEN:]
    assert swapped[:-SIG_LEN] == payload
    forged = {
        "another key": sign(seed_of(Ed25519PrivateKey.generate()), mb.nonce, payload),
        "the coordinator's public key as a seed": sign(mb.coord_pub, mb.nonce, payload),
        "zero signature": payload + bytes(SIG_LEN),
        "another request's signature": swapped,
        "a byte changed after signing": genuine[:-SIG_LEN - 1] + b"X" + genuine[-SIG_LEN:],
        "no signature": payload,
    }
    for n, (what, data) in enumerate(forged.items(), 1):
        mb.put(f"{rid}.request", data)
        mb.consumed(f"{rid}.request")
        wait_log(rig.lz, BAD_SIGNATURE, n)
        assert rid not in mb.outbox_ids(), what
    time.sleep(0.3)
    assert host.ran("tool") == [] and host.ran("loot") == []
    assert store_rows(rig.lz) == []
    # The control: the same id and payload with the genuine signature.
    mb.put(f"{rid}.request", genuine)
    res = mb.result(rid)
    assert (res["outcome"], res["status"]) == (COMPLETED, 0), res
    assert len(host.ran("tool")) == 1 and host.ran("loot") == []
    rig.release(holder)


# ---- 2. replayed records -------------------------------------------------------

def test_replayed_request_runs_once(rig, host):
    """The exact bytes of a request that ran, renamed into the inbox again:
    while its outbox directory is still there, and after the coordinator
    has forgotten the request itself (outbox directory gone): it does not
    run again, and its result is not rewritten. Control: the same argv
    under a fresh id runs (re-asking is allowed; only the id is spent)."""
    tool = host.script("tool", "exit 0")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    holder, cap, mb = hold(rig)
    rid = new_id()
    data = mb.signed(request(cap, rid, [str(tool)]))
    mb.put(f"{rid}.request", data)
    assert mb.result(rid)["outcome"] == COMPLETED
    assert len(host.ran("tool")) == 1
    result_before = (mb.outbox / rid / "result").read_bytes()
    mb.put(f"{rid}.request", data)  # at once: the request is still known
    mb.consumed(f"{rid}.request")
    wait_log(rig.lz, f"escalation {rid}: refused: {REPLAY}", 1)
    after = mb._read_result(rid)  # None once the directory is gone
    assert after is None or after == decode(verify(mb.coord_pub, mb.nonce, result_before))
    # Nobody acknowledges the result: the coordinator drops the request
    # (and its outbox directory) after the client's silence.
    wait_for("the request forgotten", lambda: rid not in mb.outbox_ids(), SILENCE_S + 5)
    mb.put(f"{rid}.request", data)
    mb.consumed(f"{rid}.request")
    wait_log(rig.lz, f"escalation {rid}: refused: {REPLAY}", 2)
    time.sleep(0.3)
    assert len(host.ran("tool")) == 1
    assert rid not in mb.outbox_ids()
    rows = [r for r in store_rows(rig.lz) if r["request_id"] == rid]
    assert len(rows) == 1 and rows[0]["state"] == "Completed", rows
    # The control: a fresh id, same request otherwise.
    fresh = mb.put_request(cap, [tool])
    assert mb.result(fresh)["outcome"] == COMPLETED
    assert len(host.ran("tool")) == 2
    rig.release(holder)


# ---- 3. another generation's credentials ----------------------------------------

def test_previous_generation_records_are_refused(rig, host):
    """Keys and nonce of a generation that ended (kept from its mailbox)
    sign nothing the next generation accepts, whether the key, the nonce or
    both are the old ones; the old generation's capability names no session
    of the new one. Control: the new generation's key and nonce with its
    live capability run the same request."""
    tool = host.script("tool", "exit 0")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    holder, old_cap, old = hold(rig)
    rig.release(holder)
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, left
    holder, cap, mb = hold(rig)
    assert old.seed != mb.seed and old.nonce != mb.nonce and old.coord_pub != mb.coord_pub
    assert old_cap != cap
    for n, (seed, nonce) in enumerate([(old.seed, old.nonce), (old.seed, mb.nonce),
                                       (mb.seed, old.nonce)], 1):
        rid = mb.put_request(cap, [tool], seed=seed, nonce=nonce)
        mb.consumed(f"{rid}.request")
        wait_log(rig.lz, BAD_SIGNATURE, n)
        assert rid not in mb.outbox_ids()
    # This generation's signature, the old generation's capability.
    rid = mb.put_request(old_cap, [tool])
    res = mb.result(rid)
    assert res["outcome"] == FAILED and b"unknown capability" in res["message"], res
    time.sleep(0.3)
    assert host.ran("tool") == []
    # The control.
    rid = mb.put_request(cap, [tool])
    assert mb.result(rid)["outcome"] == COMPLETED
    assert len(host.ran("tool")) == 1
    rig.release(holder)


# ---- 4. another session's capability --------------------------------------------

def test_ended_sessions_capability_fails(rig, host):
    """A request made with the capability of a session that has ended (the
    Domain still up, held by another session): Failed, the client exits 253
    saying why, nothing runs. Control: the same client with its own
    session's capability runs the command."""
    tool = host.script("tool", "exit 0")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    holder, holder_cap, mb = hold(rig)
    gone = rig.run("p", sh(CAP_LINE))
    assert gone.returncode == 0, gone.stderr
    gone_cap = capability(gone)
    r = rig.run("p", sh(f"LAZARET_ESCALATE_CAPABILITY={gone_cap} lazaret-escalate -- {tool}; "
                        f"echo rc=$?; lazaret-escalate -- {tool}; echo rc=$?"))
    assert re.findall(r"rc=(\d+)", r.stdout) == [str(FAILED_RC), "0"], (r.stdout, r.stderr)
    assert "failed" in r.stderr and "unknown capability" in r.stderr, r.stderr
    assert len(host.ran("tool")) == 1
    states = sorted(row["state"] for row in store_rows(rig.lz))
    assert states == ["Completed", "Failed"], states
    rig.release(holder)


def test_cancel_with_another_sessions_capability_is_ignored(rig, host):
    """A CANCEL for a running request, signed correctly but carrying another
    live session's capability, does not cancel it: the command runs to its
    end and the client gets its status. Control: the same CANCEL with the
    asking session's own capability cancels it (252, the host command is
    gone, the Store says Cancelled)."""
    # (Not "$0.pid": the script runs from its descriptor, $0 is /dev/fd/N.)
    slow = host.script("slow", f'echo $$ > {host.marks}/pid.$1; echo STARTED; sleep 2; '
                               'echo done-$1')
    rig.config({"p": esc_profile([{"executable": str(slow), "args": [case]}
                                  for case in ("other-session", "own-session")])})
    holder, holder_cap, mb = hold(rig)
    outcomes = {}
    for case in ("other-session", "own-session"):
        before = mb.outbox_ids()
        s = rig.start("p", sh(f"{CAP_LINE}; lazaret-escalate -- {slow} {case}; echo rc=$?"))
        s.read_until("STARTED")
        own_cap = capability(s)
        (rid,) = mb.outbox_ids() - before
        cap = holder_cap if case == "other-session" else own_cap
        t0 = time.monotonic()
        mb.put(f"{rid}.cancel", mb.signed(control(CANCEL, cap, rid)))
        mb.consumed(f"{rid}.cancel")
        r = s.finish()
        outcomes[case] = (r, rid, time.monotonic() - t0)
    r, rid, _ = outcomes["other-session"]
    assert f"done-other-session\nrc=0" in r.stdout, (r.stdout, r.stderr)
    assert log_count(rig.lz, f"escalation {rid}: {OTHER_SESSION_CANCEL}") == 1
    r, rid, took = outcomes["own-session"]
    assert f"rc={CANCELLED_RC}" in r.stdout and "done-" not in r.stdout, (r.stdout, r.stderr)
    assert took < 1.5, took  # cancelled, not waited out
    pid = int((host.marks / "pid.own-session").read_text())
    assert not alive(pid, str(slow))
    rows = {row["request_id"]: row for row in store_rows(rig.lz)}
    assert rows[outcomes["other-session"][1]]["state"] == "Completed"
    assert rows[rid]["state"] == "Cancelled", rows[rid]
    rig.release(holder)


# ---- 5. entries that are not records ----------------------------------------------

def test_oversized_and_non_file_entries_are_refused(rig, host, lz):
    """Into the inbox under a request's name: a record of LZ_MBX_MAX_RECORD
    + 64 + 1 bytes, a symlink to a valid record, a FIFO, a directory holding
    a valid record. Each is refused and removed, nothing runs, and the
    coordinator keeps serving: a valid request right after each runs.
    Controls: the symlink's target itself, renamed in as a regular file,
    runs under the same id; a record of exactly the bound passes the size
    check (and reaches the decoder, which refuses its padding: no valid
    request is that long, so the bound is a guard in front of the decoder,
    and the log line shows which check refused)."""
    tool = host.script("tool", "exit 0")
    probe = host.script("probe", "exit 0")
    rig.config({"p": esc_profile([{"executable": str(tool)}, {"executable": str(probe)}])})
    holder, cap, mb = hold(rig)

    def padded(rid, total):
        """A correctly signed request for tool, padded to total bytes."""
        p = request(cap, rid, [str(tool)])
        p += b"\0" * (total - SIG_LEN - len(p))
        return mb.signed(p)

    outside = lz.mkdir("outside")
    served = 0

    def still_serving():
        nonlocal served
        rid = mb.put_request(cap, [probe])
        assert mb.result(rid)["outcome"] == COMPLETED
        served += 1
        assert len(host.ran("probe")) == served

    # Oversized by one byte.
    rid = new_id()
    big = padded(rid, MAX_RECORD + SIG_LEN + 1)
    assert len(big) == 65601
    mb.put(f"{rid}.request", big)
    mb.consumed(f"{rid}.request")
    wait_log(rig.lz, NOT_A_FILE, 1)
    still_serving()
    # At the bound: past the size check, refused by the decoder.
    rid = new_id()
    mb.put(f"{rid}.request", padded(rid, MAX_RECORD + SIG_LEN))
    mb.consumed(f"{rid}.request")
    wait_log(rig.lz, MALFORMED, 1)
    assert log_count(rig.lz, NOT_A_FILE) == 1
    still_serving()
    # A symlink to a valid record outside the inbox.
    rid = new_id()
    target = lz.write(outside / "record", mb.signed(request(cap, rid, [str(tool)])), 0o644)
    mb.put(f"{rid}.request", make=lambda d, tmp: os.symlink(target, tmp, dir_fd=d))
    mb.consumed(f"{rid}.request")
    wait_log(rig.lz, NOT_A_FILE, 2)
    assert target.exists(), "the symlink's target was removed"
    still_serving()
    # A FIFO (nobody writes it: the coordinator must not wait for one).
    fifo_id = new_id()
    mb.put(f"{fifo_id}.request", make=lambda d, tmp: os.mkfifo(tmp, 0o666, dir_fd=d))
    mb.consumed(f"{fifo_id}.request")
    wait_log(rig.lz, NOT_A_FILE, 3)
    still_serving()
    # A directory named like a record, a valid record inside it.
    dir_id = new_id()

    def make_dir(d, tmp):
        os.mkdir(tmp, 0o755, dir_fd=d)
        sub = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)
        try:
            fd = os.open("record", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=sub)
            os.write(fd, mb.signed(request(cap, dir_id, [str(tool)])))
            os.close(fd)
        finally:
            os.close(sub)
    mb.put(f"{dir_id}.request", make=make_dir)
    mb.consumed(f"{dir_id}.request")
    wait_log(rig.lz, NOT_A_FILE, 4)
    still_serving()
    time.sleep(0.3)
    assert host.ran("tool") == []
    assert [n for n in os.listdir(mb.inbox)] == []
    refused = {rid, fifo_id, dir_id}
    assert not refused & {row["request_id"] for row in store_rows(rig.lz)}
    # The control: the symlink's target, as a regular file, same id (its
    # bytes: the inbox is a file system of its own, nothing renames in).
    mb.put(f"{rid}.request", target.read_bytes())
    assert mb.result(rid)["outcome"] == COMPLETED
    assert len(host.ran("tool")) == 1
    rig.release(holder)


# ---- 6. cancellation ------------------------------------------------------------

def long_script(host, name="long"):
    """A host command that runs until killed and starts a backgrounded
    grandchild (same process group: sh without job control), recording
    "its-pid grandchild-pid" in marks/pids.<case> before it says STARTED."""
    return host.script(name, f'sleep 300 & echo "$$ $!" > {host.marks}/pids.$2; echo STARTED; '
                             f'wait; echo finished >> {host.marks}/finished.$2')


def pids_of(host, case) -> list:
    p = host.marks / f"pids.{case}"
    text = wait_for(f"pids.{case}", lambda: p.exists() and p.read_text().strip(), 10)
    main, grandchild = map(int, text.split())
    return [(main, case), (grandchild, "sleep")]


def assert_gone(procs, within: float, what: str) -> float:
    """Every (pid, token) of procs ends within `within` seconds: the time."""
    t0 = time.monotonic()
    wait_for(f"{what}: host processes {procs} gone",
             lambda: not any(alive(p, tok) for p, tok in procs), within, 0.05)
    return time.monotonic() - t0


def row_of(lz, argv_part, timeout=10.0) -> dict:
    """The request's Store row once it has ended (Pending/Running are waited
    out for at most `timeout` s: the row is written when the keeper has
    reported the command's process group gone, a moment after its
    processes disappear from /proc)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = [r for r in store_rows(lz) if argv_part in r["argv"]]
        assert len(rows) == 1, rows
        if rows[0]["state"] not in ("Pending", "Running") or time.monotonic() > deadline:
            return rows[0]
        time.sleep(0.1)


def test_ctrl_c_cancels_and_leaves_no_host_process(terms, host):
    """SIGINT to the client inside the sandbox, both ways a developer sends
    it: Ctrl-C on the terminal while the client runs in the foreground, and
    `kill -INT` to the client run in the background of an interactive
    shell (job control on, so the background job does not ignore SIGINT;
    a non-interactive `sh -c '... &'` starts it with SIGINT ignored, POSIX
    2.11, and the signal then never reaches it). Either way: exit 252, the
    host command and its grandchild are gone at once, the Store says
    Cancelled, the command never finishes."""
    long = long_script(host)
    terms.config({"p": esc_profile([{"executable": str(long), "args": ["run"],
                                     "allow_extra_args": True}])})
    t = terms.shell("p")
    t.prompt(timeout=RUN_TIMEOUT)
    # Foreground, Ctrl-C from the terminal.
    t.line(f"lazaret-escalate -- {long} run fg-ctrl-c")
    t.expect("STARTED")
    procs = pids_of(host, "fg-ctrl-c")
    assert all(alive(p, tok) for p, tok in procs), procs  # the control: they do run
    t.type("\x03")
    t.prompt()
    assert "rc=252" in t.sh("echo rc=$?"), t.text[-2000:]
    assert_gone(procs, 2.0, "after Ctrl-C")
    # Background, kill -INT.
    t.line(f"lazaret-escalate -- {long} run bg-sigint > /tmp/o 2>&1 &")
    t.prompt()
    out = t.sh("while ! grep -q STARTED /tmp/o; do sleep 0.05; done; kill -INT $!; wait $!; "
               "echo rc=$?; cat /tmp/o")
    assert "rc=252" in out and "cancelled" in out, out
    assert_gone(pids_of(host, "bg-sigint"), 2.0, "after kill -INT")
    t.line("exit 0")
    assert t.wait_exit() == 0
    for case in ("fg-ctrl-c", "bg-sigint"):
        row = row_of(terms.lz, case)
        assert row["state"] == "Cancelled" and "by the client" in row["message"], row
    time.sleep(0.2)
    assert not list(host.marks.glob("finished.*"))


def test_sigkill_of_client_cancels_after_its_silence(rig, host):
    """SIGKILL of the client (no chance to send a CANCEL) while its session
    lives on: the coordinator cancels the request when the heartbeats stop,
    within LZ_MBX_SILENCE_MS plus a heartbeat and a check interval, and
    kills the command's whole process group."""
    long = long_script(host)
    rig.config({"p": esc_profile([{"executable": str(long), "args": ["run"],
                                   "allow_extra_args": True}])})
    s = rig.start("p", sh(f"lazaret-escalate -- {long} run sigkill > /tmp/o 2>&1 & p=$!; "
                          "while ! grep -q STARTED /tmp/o; do sleep 0.05; done; kill -9 $p; "
                          "echo KILLED; read x; echo bye"), stdin=True)
    s.read_until("KILLED")
    procs = pids_of(host, "sigkill")
    assert all(alive(p, tok) for p, tok in procs), procs  # alive right after the kill
    took = assert_gone(procs, SILENCE_S + 4, "after the client's SIGKILL")
    assert s.proc.poll() is None, "the session ended: not the silence's doing"
    row = row_of(rig.lz, "sigkill")
    assert row["state"] == "Cancelled" and "stopped answering" in row["message"], row
    r = s.finish()
    assert r.returncode == 0 and "bye" in r.stdout, (r.stdout, r.stderr)
    print(f"cancelled {took:.1f} s after the client's SIGKILL")
    assert not list(host.marks.glob("finished.*"))


# ---- 7. a flood of requests -------------------------------------------------------

FLOOD = 100
MAX_PROMPTS = 8  # ESC_MAX_PROMPTS_PER_SESSION


def test_request_flood_gets_too_many_requests(terms, host):
    """One session with a terminal sends 100 requests that need the
    developer (no rule): 8 queue for the prompt, the 92 others end at once
    with "too many requests" (253, Failed, not a developer's denial); the
    developer then approves one queued prompt and denies the others, each
    ending normally; an auto-approved request afterwards still runs."""
    tool = host.script("tool", "exit 0")
    auto = host.script("auto", "exit 0")
    terms.config({"p": esc_profile([{"executable": str(auto)}])})
    script = (
        # The 8 that can queue, in the background (their output to files:
        # the terminal's output is held back while a prompt is up).
        f"i=0; while [ $i -lt {MAX_PROMPTS} ]; do lazaret-escalate -- {tool} q$i "
        "> /tmp/o.$i 2>&1 & echo $! > /tmp/pid.$i; i=$((i+1)); done; "
        # All accepted (their outbox directories exist) before the flood.
        f"while [ $(ls /run/lazaret/mailbox/outbox | wc -l) -lt {MAX_PROMPTS} ]; do "
        "sleep 0.05; done; "
        f"while [ $i -lt {FLOOD} ]; do lazaret-escalate -- {tool} f$i 2>>/tmp/flood.err; "
        "echo $? >> /tmp/flood.rc; i=$((i+1)); done; "
        f"i=0; while [ $i -lt {MAX_PROMPTS} ]; do wait $(cat /tmp/pid.$i); echo q$i=$?; "
        "i=$((i+1)); done; "
        "echo flood-rcs: $(sort /tmp/flood.rc | uniq -c); "
        "echo too-many: $(grep -c 'too many requests' /tmp/flood.err); "
        f"lazaret-escalate -- {auto}; echo after=$?")
    t = terms.shell("p", cmd=["sh", "-c", script])
    ask = re.compile(rb"argument 1: +'(q\d)'[^\n]*\r\n(?:.*\r\n)*?.*Approve\? \[y/N\] ")
    first = t.expect(ask, timeout=RUN_TIMEOUT, what="the first prompt").group(1).decode()
    # Answer nothing until every request has been sent and refused.
    wait_for(f"{FLOOD} requests recorded", lambda: len(store_rows(terms.lz)) >= FLOOD, 120, 0.2)
    answer(t, "y\r")
    answered = [(first, True)]
    for _ in range(MAX_PROMPTS - 1):
        q = t.expect(ask, what="the next prompt").group(1).decode()
        answer(t, "n\r")
        answered.append((q, False))
    t.expect(re.compile(rb"after=(\d+)"), timeout=60)
    assert t.wait_exit() == 0
    text = t.text
    approved = answered[0][0]
    assert sorted(q for q, _ in answered) == [f"q{i}" for i in range(MAX_PROMPTS)], answered
    for q, yes in answered:
        assert f"{q}={0 if yes else DENIED_RC}" in text, (q, text[-3000:])
    assert f"flood-rcs: {FLOOD - MAX_PROMPTS} {FAILED_RC}" in text, text[-3000:]
    assert f"too-many: {FLOOD - MAX_PROMPTS}" in text, text[-3000:]
    assert "after=0" in text
    assert host.ran("tool") == [(str(terms.ws.resolve()), f"[{approved}]")]
    assert len(host.ran("auto")) == 1
    rows = store_rows(terms.lz)
    by_state = {}
    for r in rows:
        by_state.setdefault(r["state"], []).append(r)
    assert sorted((k, len(v)) for k, v in by_state.items()) == sorted(
        [("Failed", FLOOD - MAX_PROMPTS), ("Denied", MAX_PROMPTS - 1), ("Completed", 2)]), rows
    assert all("too many requests" in r["message"] for r in by_state["Failed"])
    assert all("denied by the developer" in r["decision"] for r in by_state["Denied"])


def test_open_request_limit_per_session(rig, host):
    """100 auto-approved requests of one session at once (written straight
    into the inbox, so no sandbox process is needed for each): 64 are open
    at a time (ESC_MAX_OPEN_PER_SESSION), the 36 others end at once Failed
    with "too many requests"; at most 32 run at a time (ESC_MAX_RUNNING); the
    64 complete; afterwards the session's requests run again."""
    work = host.script("work", f'echo "+ $$" >> {host.marks}/spans; sleep 1; '
                               f'echo "- $$" >> {host.marks}/spans')
    rig.config({"p": esc_profile([{"executable": str(work)}])})
    holder, cap, mb = hold(rig)
    ids = [new_id() for _ in range(FLOOD)]
    for rid in ids:
        mb.put(f"{rid}.request", mb.signed(request(cap, rid, [str(work)])))
    results = mb.results(ids, timeout=30)
    failed = [r for r in results.values() if r["outcome"] == FAILED]
    done = [r for r in results.values() if r["outcome"] == COMPLETED]
    assert (len(done), len(failed)) == (64, FLOOD - 64), \
        {OUTCOMES[r["outcome"]]: r["message"] for r in results.values()}
    assert all(b"too many requests" in r["message"] for r in failed)
    spans = (host.marks / "spans").read_text().split()
    level = peak = 0
    for sign_ in spans[::2]:
        level += 1 if sign_ == "+" else -1
        peak = max(peak, level)
    assert len(spans) == 2 * 2 * 64 and peak == 32, (peak, len(spans))
    rid = mb.put_request(cap, [work])
    assert mb.result(rid)["outcome"] == COMPLETED
    rig.release(holder)


# ---- 8. the coordinator dies mid-request --------------------------------------------

class Survivor(Exception):
    """A host process of an escalated command outlived what should have
    ended it."""


def procs_with(token) -> list:
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and alive(int(d), token)]


def grandchild_script(host, name, kind, tail):
    """A host command that starts a grandchild `sleep 300.<unique>` (found
    in /proc by that argument): in its own process group when kind is
    "same-group", in a new session (setsid) when "new-session"; writes its
    pid to marks/pid, says STARTED, then runs tail."""
    token = f"300.{os.getpid()}{secrets.randbelow(10**6)}"
    spawn = f"sleep {token} &" if kind == "same-group" else f"setsid sleep {token} &"
    return host.script(name, f"echo $$ > {host.marks}/pid; {spawn} echo STARTED; {tail}"), token


@pytest.mark.parametrize("kind", ["same-group", "new-session"])
def test_coordinator_killed_while_command_runs(rig, host, kind):
    """kill -9 of the coordinator while an approved host command runs: the
    command itself dies at once (PR_SET_PDEATHSIG), the client's CLI ends
    with an error, the next `lazaret run` works, and nothing of the old
    request runs afterwards (the command never reaches its end, never runs
    again). Then the grandchild: after the coordinator's death and the next
    run's recovery, it is gone: the command's keeper (a child subreaper with
    PR_SET_PDEATHSIG(SIGTERM)) killed its group and every descendant when
    the coordinator died. Control for the marker:
    without the kill the same command finishes (its end marker appears)."""
    long, token = grandchild_script(host, "long", kind,
                                    f"sleep 2; echo finished >> {host.marks}/finished")
    rig.config({"p": esc_profile([{"executable": str(long)}])})
    survivors = []
    try:
        # The control: the command's end marker appears when nothing kills it.
        r = rig.run("p", sh(f"lazaret-escalate -- {long}; echo rc=$?"))
        assert "rc=0" in r.stdout and (host.marks / "finished").exists(), (r.stdout, r.stderr)
        if kind == "same-group":  # killed with the group when the command ended
            wait_for("the control's grandchild gone", lambda: not procs_with(token), 2.0)
        survivors += procs_with(token)  # a new-session one outlives even a normal end
        (host.marks / "finished").unlink()
        s = rig.start("p", sh(f"lazaret-escalate -- {long}; echo rc=$?"))
        s.read_until("STARTED")
        main = int((host.marks / "pid").read_text())
        grandchild = wait_for("the grandchild", lambda: set(procs_with(token)) - set(survivors))
        assert alive(main, "/dev/fd/"), main
        survivors += grandchild
        (coord,) = rig.coordinators()
        os.kill(coord.pid, signal.SIGKILL)
        t0 = time.monotonic()
        assert_gone([(main, "/dev/fd/")], 2.0, "the command after the coordinator's SIGKILL")
        r = s.finish()
        assert r.returncode == 125 and "Session Coordinator ended the session" in r.stderr, \
            (r.returncode, r.stdout, r.stderr)
        again = rig.run("p", sh("echo again"))  # recovers the killed generation
        assert (again.returncode, again.stdout) == (0, "again\n"), again.stderr
        time.sleep(max(0.0, 3.0 - (time.monotonic() - t0)))  # past the command's own end
        assert not (host.marks / "finished").exists()
        assert len(host.ran("long")) == 2  # the control's run and the killed one
        left = [p for p in grandchild if alive(p, token)]
        if left:
            raise Survivor(f"{kind} grandchild {left} (sleep {token}) alive "
                           f"{time.monotonic() - t0:.1f} s after the coordinator's SIGKILL")
    finally:
        for p in survivors:
            kill_pid(p)


@pytest.mark.parametrize("kind", ["same-group", "new-session"])
def test_cancelled_command_grandchild(rig, host, kind):
    """A CANCEL of a running command that started a grandchild: in the
    command's process group it is killed with the group; in a new session
    (setsid) it escapes the group kill, is reparented to the coordinator (a
    child subreaper) when the command dies, and is killed there. (Before
    fc69dfb the setsid one survived: this test failed then.)"""
    long, token = grandchild_script(host, "long", kind, "sleep 300")
    rig.config({"p": esc_profile([{"executable": str(long)}])})
    holder, cap, mb = hold(rig)
    grandchild = []
    try:
        rid = mb.put_request(cap, [long])
        main = int(wait_for("the command's pid", lambda: (host.marks / "pid").exists()
                            and (host.marks / "pid").read_text().strip()))
        grandchild = wait_for("the grandchild", lambda: procs_with(token))
        mb.put(f"{rid}.cancel", mb.signed(control(CANCEL, cap, rid)))
        assert mb.result(rid)["outcome"] == CANCELLED
        assert_gone([(main, "/dev/fd/")], 2.0, "the cancelled command")
        time.sleep(0.5)
        left = [p for p in grandchild if alive(p, token)]
        if left:
            raise Survivor(f"{kind} grandchild {left} alive after the cancellation")
    finally:
        for p in grandchild:
            kill_pid(p)
        rig.release(holder)


def test_coordinator_killed_while_request_waits_for_the_prompt(terms, host):
    """kill -9 of the coordinator while a request's prompt is on the
    terminal: `y` typed afterwards approves nothing, the CLI ends with an
    error, and after the next `lazaret run` (which recovers the killed
    generation) the command has never run. Control: the same prompt
    answered `y` with the coordinator alive runs it."""
    tool = host.script("tool", "exit 0")
    terms.config({"p": esc_profile()})
    ask = "Approve? [y/N] "
    t = terms.shell("p", cmd=["lazaret-escalate", "--", str(tool), "control"])
    t.expect(ask, timeout=RUN_TIMEOUT)
    answer(t, "y\r")
    assert t.wait_exit() == 0, t.text[-2000:]
    assert host.ran("tool") == [(str(terms.ws.resolve()), "[control]")]
    t = terms.shell("p", cmd=["lazaret-escalate", "--", str(tool), "killed"])
    t.expect(ask, timeout=RUN_TIMEOUT)
    (coord,) = terms.rig.coordinators()
    os.kill(coord.pid, signal.SIGKILL)
    time.sleep(0.2)
    answer(t, "y\r")
    st = t.wait_exit()
    assert st == 125 and "Session Coordinator ended the session" in t.text, (st, t.text[-2000:])
    again = terms.lz.run(["run", "p", "--workspace", terms.ws, "--", "echo", "again"])
    assert (again.returncode, again.stdout) == (0, "again\n"), again.stderr
    time.sleep(1.0)
    assert host.ran("tool") == [(str(terms.ws.resolve()), "[control]")]
    assert not [r for r in store_rows(terms.lz) if "killed" in r["argv"]
                and r["state"] in ("Running", "Completed")]


# ---- attack round i11b ----------------------------------------------------------------

def test_flood_of_unbound_requests_stays_bounded(rig, host):
    """B4/B19: 1500 signed requests with an unknown capability, the
    largest argv allowed: the coordinator's descriptors stay few, its log
    gets a bounded number of refusal lines, at most 256 such requests are
    held at once, and a session's real request is served right after.
    Control: the same request with the session's capability runs."""
    tool = host.script("tool", "echo served")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    h, cap, mb = hold(rig)
    (coord,) = rig.coordinators()
    big = ["/usr/bin/true"] + ["\x01" * 4000] * 7
    peak_fds = 0
    for i in range(1500):
        # The inbox's bound throttles the flood: a full inbox is waited out.
        mb.put_request(new_id().replace("0", "1"), big, wait_room=True)
        if i % 100 == 0:
            peak_fds = max(peak_fds, len(os.listdir(f"/proc/{coord.pid}/fd")))
    wait_for("the inbox emptied", lambda: not [n for n in os.listdir(mb.inbox)
                                               if not n.startswith(".")], 120, 0.2)
    peak_fds = max(peak_fds, len(os.listdir(f"/proc/{coord.pid}/fd")))
    assert peak_fds < 200, peak_fds
    assert len(mb.outbox_ids()) <= 256 + 8
    rid = mb.put_request(cap, [str(tool)])
    assert mb.result(rid, timeout=30)["outcome"] == COMPLETED
    log = coordinator_log(rig.lz)
    refused = [ln for ln in log.splitlines() if "refused" in ln]
    assert len(refused) < 150, len(refused)
    assert len(log) < 2_000_000, len(log)
    rig.release(h)


def test_host_git_never_uses_a_repository_the_sandbox_made(rig, host):
    """B2: an auto-approved host `git status` from inside .git/objects (a
    bare repository built there) fails without running; from a directory
    holding a repository whose config runs a program (core.worktree,
    core.fsmonitor), host git does not use that repository. Control: host
    git run directly in the same kind of repository (built on the host:
    the Sentry neutralises the sandbox's copy) runs the program."""
    mark = host.marks / "fsm-ran"
    hook = host.script("fsm", f"touch {mark}; exit 1")
    ws = rig.ws
    u = rig.lz.user
    subprocess.run(["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups", "git",
                    "init", "-q", str(ws)], check=True, timeout=30,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(rig.lz.home)})
    rig.config({"p": esc_profile([{"executable": "/usr/bin/git", "args": ["status"]}])})
    build = (f"d=$1; mkdir -p $d/objects $d/refs/heads && echo 'ref: refs/heads/main' > $d/HEAD "
             f"&& printf '[core]\\n\\tbare = false\\n\\tworktree = {ws.resolve()}\\n"
             f"\\tfsmonitor = {hook}\\n' > $d/config")
    r = rig.run("p", ["sh", "-c", build + "; cd $d && lazaret-escalate -- /usr/bin/git status; "
                      "echo rc=$?", "sh", "/workspace/.git/objects/zz/g"])
    assert "rc=253" in r.stdout and "inside a Git directory" in r.stderr, (r.stdout,
                                                                                 r.stderr)
    # A nested repository (what host git would discover from a directory
    # below it): its config runs the program.
    nested = (f"mkdir -p $1/.git/objects $1/.git/refs/heads && echo 'ref: refs/heads/main' > "
              f"$1/.git/HEAD && printf '[core]\\n\\tfsmonitor = {hook}\\n' > $1/.git/config")
    r = rig.run("p", ["sh", "-c", nested + "; cd $1 && lazaret-escalate -- /usr/bin/git status; "
                      "echo rc=$?", "sh", "/workspace/plain"])
    assert "rc=" in r.stdout, (r.stdout, r.stderr)
    time.sleep(0.5)
    assert not mark.exists(), (r.stdout, r.stderr)
    # Control: the directory the sandbox built, used by host git directly.
    # (The Sentry has neutralised the sandbox's copy meanwhile: the same
    # repository is built again on the host, outside the workspace.)
    ctl = rig.lz.mkdir("ctl")
    subprocess.run(["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups", "sh",
                    "-c", nested + "; cd $1 && git status >/dev/null 2>&1; true", "sh",
                    f"{ctl}/plain"],
                   check=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(rig.lz.home)})
    assert mark.exists(), "control: host git should run the fsmonitor of that repository"


# ---- the mailbox's bound (docs/escalation.md "The mailbox's bound") ---------------

INBOX_MAX_BYTES = 8 << 20   # LZ_MBX_INBOX_MAX_BYTES
INBOX_MAX_ENTRIES = 2048    # LZ_MBX_INBOX_MAX_ENTRIES
INBOX_FULL = "escalation mailbox: the inbox is full"
CLIENT_FULL = "the mailbox is full"
FLOOD_MB = 32               # 4 x the bound
FLOOD_FILES = 3000          # 1.5 x the bound


def flood_script(d: str) -> str:
    """From inside the sandbox, into directory d: one big file of FLOOD_MB
    MiB, then (the big one removed) FLOOD_FILES small files; prints how much
    of each got in. Temporary-style names ('.'): the coordinator leaves
    those for STALE_TEMP_S, so what is counted is what the kernel let in."""
    return (f"cd {d} && dd if=/dev/zero of=.big bs=1048576 count={FLOOD_MB} 2>/dev/null; "
            "echo big-rc=$? big-bytes=$(wc -c < .big)")


def small_flood_script(d: str) -> str:
    return (f"cd {d} && rm -f .big && i=0; while [ $i -lt {FLOOD_FILES} ]; do "
            "echo x > .s$i 2>/dev/null || break; i=$((i+1)); done; echo small-files=$i")


def number(out: str, key: str) -> int:
    m = re.search(rf"\b{key}=(\d+)", out)
    assert m, (key, out)
    return int(m.group(1))


def test_inbox_flood_is_bounded_and_refused_with_enospc(rig, host, lz):
    """From inside the sandbox: a 32 MiB file and then 3000 small files
    into /run/lazaret/mailbox/inbox. The kernel stops each near the bound
    (8 MiB, 2048 entries) — the writes fail (dd's status, the shell's
    redirection) — and the inbox's file system, as the coordinator sees it,
    never holds more than the bound. The coordinator logs "the inbox is
    full" once per filling (not per file). While it is full,
    lazaret-escalate reports "the mailbox is full" and exits 254 (not
    sent); once the flood is removed, the same request runs.
    Control: the very same flood into a plain directory of XDG_RUNTIME_DIR
    bound read-write into the same sandbox (a volume, the kind of directory
    and bind the inbox was before) gets all of it in."""
    tool = host.script("tool", "exit 0")
    ctl = lz.mkdir(lz.runtime_dir / "plain-inbox", 0o777)
    rig.config({"p": esc_profile([{"executable": str(tool)}], persistent_dirs=["/root"],
                                 volumes=[{"host": str(ctl), "container": "/root/ctl",
                                           "kind": "directory"}])})
    holder, cap, mb = hold(rig)
    inbox = "/run/lazaret/mailbox/inbox"
    used0 = statvfs_used(mb.spool)

    # One big file.
    r = rig.run("p", sh(flood_script(inbox)), timeout=120)
    big = number(r.stdout, "big-bytes")
    assert number(r.stdout, "big-rc") != 0, r.stdout  # dd saw the refusal
    assert INBOX_MAX_BYTES - (1 << 20) <= big <= INBOX_MAX_BYTES, big
    used_b, used_f = statvfs_used(mb.spool)
    assert used_b <= INBOX_MAX_BYTES, used_b
    v = os.statvfs(mb.spool)
    assert v.f_blocks * v.f_frsize == INBOX_MAX_BYTES and v.f_files == INBOX_MAX_ENTRIES
    wait_log(rig.lz, INBOX_FULL, 1)
    # Full: the real client says so, sends nothing, and exits 254.
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert "rc=254" in r.stdout, (r.stdout, r.stderr)
    assert CLIENT_FULL in r.stderr and "not sent" in r.stderr, r.stderr
    assert host.ran("tool") == []

    # Many small files (the big one removed first).
    r = rig.run("p", sh(small_flood_script(inbox)), timeout=300)
    small = number(r.stdout, "small-files")
    assert INBOX_MAX_ENTRIES - 64 <= small < INBOX_MAX_ENTRIES, small
    used_b, used_f = statvfs_used(mb.spool)
    assert used_f <= INBOX_MAX_ENTRIES and used_b <= INBOX_MAX_BYTES, (used_b, used_f)
    # A second filling, a second line: once per filling, not per file.
    wait_log(rig.lz, INBOX_FULL, 2)
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert "rc=254" in r.stdout and CLIENT_FULL in r.stderr, (r.stdout, r.stderr)
    assert host.ran("tool") == []

    # The flood removed: the same request runs, and the space is back.
    r = rig.run("p", sh(f"rm -f {inbox}/.s*; lazaret-escalate -- {tool}; echo rc=$?"))
    assert "rc=0" in r.stdout, (r.stdout, r.stderr)
    assert len(host.ran("tool")) == 1
    assert statvfs_used(mb.spool)[0] <= used0[0] + 64 * 1024
    assert log_count(rig.lz, INBOX_FULL) == 2

    # Control: the same floods into a plain directory get all of it in.
    r = rig.run("p", sh(flood_script("/root/ctl")), timeout=120)
    assert number(r.stdout, "big-rc") == 0, r.stdout
    assert number(r.stdout, "big-bytes") == FLOOD_MB << 20, r.stdout
    assert (ctl / ".big").stat().st_size == FLOOD_MB << 20
    r = rig.run("p", sh(small_flood_script("/root/ctl")), timeout=300)
    assert number(r.stdout, "small-files") == FLOOD_FILES, r.stdout
    assert len(list(ctl.iterdir())) == FLOOD_FILES
    rig.release(holder)


def test_inbox_bound_holds_for_links_directories_and_open_files(rig, host):
    """The other ways to take room: hard links (each counts as an entry on
    tmpfs; links and symlinks count a little more than one, so they stop
    earlier), directories, symlinks and FIFOs (gVisor keeps a FIFO in the
    sandbox: none reaches the host), a sparse file far larger than the
    bound (only written pages count; writing into it stops at the bound),
    and a file unlinked while still open and written (its pages stay until
    it is closed, still within the bound). None gets the inbox's file
    system past the bound; directories the coordinator takes out go to
    junk/, which it empties, and a request runs afterwards."""
    tool = host.script("tool", "exit 0")
    rig.config({"p": esc_profile([{"executable": str(tool)}])})
    holder, cap, mb = hold(rig)
    inbox = "/run/lazaret/mailbox/inbox"
    script = (
        f"cd {inbox} && echo x > .f && i=0; while [ $i -lt 3000 ]; do "
        "ln .f .l$i 2>/dev/null || break; i=$((i+1)); done; echo links=$i; rm -f .f .l*; "
        # One process each (the coordinator removes a '.'-named entry
        # older than 10 s: a fork per entry could outlast that).
        "set --; i=0; while [ $i -lt 3000 ]; do set -- \"$@\" .d$i; i=$((i+1)); done; "
        "mkdir \"$@\" 2>/dev/null; echo dirs=$(ls -d .d* | wc -l); rmdir .d*; "
        "set --; i=0; while [ $i -lt 3000 ]; do set -- \"$@\" /x/.y$i; i=$((i+1)); done; "
        "ln -s \"$@\" . 2>/dev/null; echo symlinks=$(ls -d .y* | wc -l); rm -f .y*; "
        "truncate -s 1G .sparse && echo sparse-made; "
        "dd if=/dev/zero of=.sparse bs=1048576 count=16 conv=notrunc 2>/dev/null; "
        "echo sparse-rc=$?; rm -f .sparse; "
        # open, unlink, keep writing: the pages stay while it is open
        "(exec 3>.open; rm .open; dd if=/dev/zero bs=1048576 count=16 >&3 2>/dev/null; "
        "echo open-rc=$?; sleep 3); echo done")
    r = rig.run("p", sh(script), timeout=300)
    n = number(r.stdout, "dirs")
    assert INBOX_MAX_ENTRIES - 64 <= n < INBOX_MAX_ENTRIES, (n, r.stdout)
    # Hard links take a process each: on a loaded machine the loop can
    # outlast the coordinator's 10 s for '.'-named leftovers, which then
    # frees room as it goes. What must hold is that the file system never
    # holds more than the bound (checked below, and by the directories and
    # small files, made fast enough to reach it).
    assert number(r.stdout, "links") > 0, r.stdout
    # Symlinks are no records: the coordinator takes them out as they come,
    # so how many are left varies; never more than the bound at once.
    assert number(r.stdout, "symlinks") < INBOX_MAX_ENTRIES, r.stdout
    assert "sparse-made" in r.stdout and number(r.stdout, "sparse-rc") != 0, r.stdout
    assert number(r.stdout, "open-rc") != 0, r.stdout
    assert "done" in r.stdout, r.stdout
    r = rig.run("p", sh(f"cd {inbox} && i=0; while [ $i -lt 2000 ]; do "
                        "mkfifo .p$i 2>/dev/null || break; i=$((i+1)); done; echo fifos=$i"))
    number(r.stdout, "fifos")
    used_b, used_f = statvfs_used(mb.spool)
    assert used_f <= INBOX_MAX_ENTRIES and used_b <= INBOX_MAX_BYTES, (used_b, used_f)
    rig.run("p", sh(f"rm -f {inbox}/.p*"))
    # Directories named like records: the coordinator takes them out (to
    # junk/, on the same bounded file system) and gives the room back.
    r = rig.run("p", sh(f"cd {inbox} && i=0; while [ $i -lt 300 ]; do "
                        f"mkdir {'a' * 32}.d$i/ 2>/dev/null && mkdir {'a' * 32}.d$i/x; "
                        "i=$((i+1)); done; echo made"))
    assert "made" in r.stdout, r.stdout
    wait_for("junk/ emptied", lambda: not os.listdir(mb.spool / "junk"), 20, 0.1)
    # What the coordinator removed while the sandbox still has it looked up
    # (the gofer keeps a host descriptor per cached dentry) keeps its room
    # until the sandbox lets go of it: counted, never beyond the bound.
    assert os.listdir(mb.inbox) == []
    used_b, used_f = statvfs_used(mb.spool)
    assert used_f <= INBOX_MAX_ENTRIES and used_b <= INBOX_MAX_BYTES, (used_b, used_f)
    r = rig.run("p", sh(f"lazaret-escalate -- {tool}; echo rc=$?"))
    assert "rc=0" in r.stdout, (r.stdout, r.stderr)
    rig.release(holder)
