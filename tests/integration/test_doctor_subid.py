# SPDX-License-Identifier: Apache-2.0
"""`lazaret doctor` and `lazaret run` judge a user's subordinate ids with the
same function (ns/userns.h lz_subid_lookup, over shadow's libsubid):
for every /etc/subuid + /etc/subgid line below, doctor passes the range
exactly when run accepts it, and both read the files as newuidmap and
newgidmap do (docs/runtime.md "Subordinate ids").

Control: with the two hand-written parsers this replaced (doctor: the
largest range, any start and count; run: the first range with 0 < start and
count < 2^32, strtok fields, base-10 numbers), doctor passed "user:0:65536"
and "user:S:4294967296", which run refused; run took "user::S:65536", which
doctor and newuidmap refuse; both refused "user:0xS:0x10000", which
newuidmap accepts. This test fails against that binary (docs/runtime.md)."""

import os
import re
import tempfile
from pathlib import Path

import pytest

from conftest import _machine_lock, _free_subid_start

SUBID_USER = "lztest-subid"
FILES = ("/etc/subuid", "/etc/subgid")


def _write_atomic(path: str, text: str):
    st = os.stat(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".lztest-subid.")
    try:
        os.write(fd, text.encode())
        os.fchmod(fd, st.st_mode & 0o7777)
        os.fchown(fd, st.st_uid, st.st_gid)
    finally:
        os.close(fd)
    os.rename(tmp, path)


class SubidLines:
    """Give SUBID_USER exactly the given line in both files, under the
    machine lock (conftest serialises every change of these files with it),
    and restore the files on exit."""

    def __init__(self, line: str):
        self.line = line

    def __enter__(self):
        self._lock = _machine_lock()
        self._lock.__enter__()
        self.saved = {p: Path(p).read_text() for p in FILES}
        for p, text in self.saved.items():
            mine = [ln for ln in text.splitlines() if ln.split(":")[0] == SUBID_USER]
            assert not mine, f"{p} already has {mine}"
            _write_atomic(p, text + ("" if text.endswith("\n") or not text else "\n")
                          + self.line + "\n")
        return self

    def __exit__(self, *exc):
        try:
            for p, text in self.saved.items():
                _write_atomic(p, text)
        finally:
            self._lock.__exit__(*exc)


def doctor_checks(lz):
    p = lz.run(["doctor"])
    assert p.stderr == "", p.stderr
    checks = {}
    for ln in p.stdout.splitlines():
        m = re.match(r"^(ok|warn|FAIL)\s+(.{16}) (.*)$", ln)
        if m:
            checks[m.group(2).strip()] = (m.group(1), m.group(3))
    return checks, p.stdout


@pytest.fixture
def subid_lz(rig, make_lz, user_factory):
    lz = rig.add_env(make_lz(user=user_factory(SUBID_USER, subids=False)))
    rig.config({"bb": {}}, lz=lz)
    return lz


# (line template, accepted by both, why)
CASES = [
    # The cases that differed: doctor passed them, run refused them.
    ("{u}:0:65536", False, "starts at 0: would map the host's root"),
    ("{u}:{s}:4294967296", True, "more than 2^32-1 ids is usable: 65536 are mapped"),
    # Run took it (and newuidmap then refused it): an empty field.
    ("{u}::{s}:65536", False, "an empty field: no range for shadow"),
    # shadow's syntax: numbers in any C base, a fourth field ignored.
    ("{u}:{sx}:0x10000", True, "hexadecimal, as newuidmap reads it"),
    ("{u}:{s}:65536:extra", True, "a fourth field, ignored by shadow"),
    # The user's own id inside the range: the kernel refuses such a map.
    ("{u}:{own}:65536", False, "contains the user's own id"),
    ("{u}:{s}:65535", False, "too few ids"),
]


@pytest.mark.parametrize("template,accepted,why", CASES, ids=[c[0] for c in CASES])
def test_doctor_and_run_agree(rig, subid_lz, template, accepted, why):
    lz = subid_lz
    with _machine_lock():
        s = _free_subid_start()
    own = min(lz.user.uid, lz.user.gid) - 10
    line = template.format(u=SUBID_USER, s=s, sx=hex(s), own=own)
    with SubidLines(line):
        checks, out = doctor_checks(lz)
        p = rig.run("bb", ["true"], ws=lz.mkdir("ws"), lz=lz)
    uid_st, uid_detail = checks["subuid range"]
    gid_st, _ = checks["subgid range"]
    run_ok = p.returncode == 0
    refused_subid = p.returncode == 125 and "/etc/subuid" in p.stderr
    # The two commands agree, and they agree with what the line means.
    assert (uid_st == "ok") == accepted, (line, why, out)
    assert (gid_st == "ok") == accepted, (line, why, out)
    if accepted:
        assert run_ok, (line, why, p.stderr)
        # newuidmap/newgidmap accepted the very range run maps.
        assert checks["id mapping"][0] == "ok", (line, out)
        assert f"{s}-{s + 65535} (65536 ids) for {SUBID_USER}" in uid_detail, uid_detail
    else:
        assert refused_subid, (line, why, p.returncode, p.stderr)
        # run prints what doctor prints: the same message and fix.
        fix = re.search(r"^  fix: (.*)$", p.stderr, re.M)
        assert fix, p.stderr
        assert f"fix:  {fix.group(1)}" in out, (p.stderr, out)
        assert re.fullmatch(rf"sudo usermod --add-subuids \d+-\d+ {SUBID_USER}", fix.group(1))
