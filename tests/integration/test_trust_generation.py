# SPDX-License-Identifier: Apache-2.0
"""The session channel's Trust Anchor across generations (issue 11, Deliver
2; docs/session-channel.md): every generation publishes a CA of its own,
withdraws it at teardown, and a CLI refuses a coordinator whose publication
is another generation's.

The attack: a CLI joins a running Domain while the Domain's publication
(`coordinator.trust`) is the previous generation's. The control: the same
join with the current publication succeeds. Evidence on the host: the CLI's
status and message, the coordinator log (no session started for the
refused join), the number of generations started.
"""

import re

from conftest import domain_dirs, sh, wait_torn_down, TEARDOWN_TIMEOUT

PUBLICATION = "coordinator.trust"


def _publication(lz) -> tuple:
    dirs = domain_dirs(lz)
    assert len(dirs) == 1, dirs
    p = dirs[0] / PUBLICATION
    assert p.is_file(), f"no {PUBLICATION} in {dirs[0]} while the Domain runs"
    st = p.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (lz.user.uid, 0o600), \
        f"{p}: owner {st.st_uid}, mode {oct(st.st_mode & 0o777)}"
    return p, p.read_bytes()


def _sessions_started(lz) -> int:
    n = 0
    for log in lz.root.rglob("logs/coordinator.log"):
        n += len(re.findall(r"\] session [0-9a-f]{32} \(#\d+\) started",
                            log.read_text(errors="replace")))
    return n


def test_a_publication_of_another_generation_is_refused(rig):
    rig.config({"bb": {}})
    # Generation 1: its publication, kept.
    h = rig.hold("bb")
    path, first = _publication(rig.lz)
    rig.release(h)
    left, _ = wait_torn_down(rig.lz, TEARDOWN_TIMEOUT)
    assert not left, f"after teardown: {left}"
    assert not path.exists(), "the publication was not withdrawn at teardown"

    # Generation 2: another CA (nothing reused).
    h = rig.hold("bb")
    path, second = _publication(rig.lz)
    assert second != first, "generation 2 published generation 1's Trust Anchor"
    assert len(rig.generations_started()) == 2

    # Attack: the CLI finds generation 1's publication beside generation 2's
    # socket. Written in place (owner and mode stay the user's).
    started = _sessions_started(rig.lz)
    with open(path, "r+b") as f:
        f.write(first)
        f.truncate()
    r = rig.run("bb", sh("echo joined"))
    assert r.returncode != 0 and "joined" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "client certificate is refused" in r.stderr and \
        "not signed by the generation's CA" in r.stderr, r.stderr
    assert _sessions_started(rig.lz) == started, "a session started on a refused channel"
    assert len(rig.generations_started()) == 2, "the refused CLI started another generation"

    # Control: the current publication, and the same join works.
    with open(path, "r+b") as f:
        f.write(second)
        f.truncate()
    r = rig.run("bb", sh("echo joined"))
    assert (r.returncode, r.stdout) == (0, "joined\n"), (r.returncode, r.stdout, r.stderr)
    assert _sessions_started(rig.lz) == started + 1
    rig.release(h)
    # The Trust Anchor's keys were made in OpenSSL's secure heap (coordinator.c).
    for log in rig.lz.root.rglob("logs/coordinator.log"):
        text = log.read_text(errors="replace")
        assert "no OpenSSL secure heap" not in text, text
