# SPDX-License-Identifier: Apache-2.0
"""`lazaret run P --publish [ADDR:]HOSTPORT:PORT` (issue 12, item 7;
docs/network.md "Publishing a port"): a server in the sandbox answers
connections made on the host to 127.0.0.1:HOSTPORT, while the session that
asked runs; a host port in use refuses the session; nothing listens on the
host's other addresses.

Traffic stays on this machine: the host's loopback, and the host's own
non-loopback addresses (only to show nothing answers there). The server in
the sandbox is pub_probe.c (static, poll-driven: runsc 2022's host
networking fails blocking reads that must wait, docs/network.md).
"""

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import RUN_TIMEOUT, Session, domain_processes, ok

HERE = os.path.dirname(os.path.abspath(__file__))
FORWARDER = "lz-publish"


@pytest.fixture(scope="module")
def pub_probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("pub-probe") / "pub_probe"
    subprocess.run(["gcc", "-static", "-O1", "-o", str(out), os.path.join(HERE, "pub_probe.c")],
                   check=True, capture_output=True)
    out.chmod(0o755)
    return out


def free_port(addr="127.0.0.1") -> int:
    s = socket.socket()
    s.bind((addr, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def install_probe(rig, pub_probe):
    dst = rig.ws / "pub_probe"
    shutil.copy(pub_probe, dst)
    os.chown(dst, rig.lz.user.uid, rig.lz.user.gid)
    os.chmod(dst, 0o755)


def start(rig, publish: list, script: str, profile="bb") -> Session:
    """A background session with --publish for every spec in publish."""
    args = ["run", profile, "--workspace", str(rig.ws)]
    for spec in publish:
        args += ["--publish", spec]
    args += ["--", "sh", "-c", script]
    s = Session(rig.lz, args, check_report=rig._check)
    rig.sessions.append(s)
    return s


def request(port: int, line: str, addr="127.0.0.1", timeout=10.0) -> str:
    """Connect, send one line, read to the end of stream. Returns the text."""
    with socket.create_connection((addr, port), timeout=timeout) as c:
        c.sendall(line.encode() + b"\n")
        got = b""
        while True:
            b = c.recv(4096)
            if not b:
                return got.decode(errors="replace")
            got += b


def request_retry(port: int, line: str, deadline_s: float = 20.0) -> str:
    """request() until the server in the sandbox answers (it may still be
    starting: the forwarder then resets the connection)."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            got = request(port, line)
            if got:
                return got
        except OSError as e:
            last = e
        time.sleep(0.2)
    pytest.fail(f"127.0.0.1:{port} never answered: {last}", pytrace=False)


def host_addresses() -> list:
    """Every IPv4 address of this machine outside 127.0.0.0/8."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [a for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out) if not a.startswith("127.")]


def forwarders(rig) -> list:
    return domain_processes(rig.lz.root, comm=FORWARDER)


def stop(s: Session):
    """End a session whose command serves forever: SIGTERM to the CLI is
    forwarded to the command (docs/runtime.md "Signals")."""
    s.kill(signal.SIGTERM)
    return s.finish()


def port_is_free(port: int, addr="127.0.0.1") -> bool:
    """Nothing listens there (SO_REUSEADDR, as the coordinator binds: the
    connections that ended may linger in TIME_WAIT)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((addr, port))
        s.listen(1)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_for(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {timeout} s", pytrace=False)
        time.sleep(0.1)


# ---- the feature ---------------------------------------------------------------------

def test_published_port_answers_on_loopback_only(rig, pub_probe):
    """A server on sandbox port 8000 answers 127.0.0.1:HOSTPORT (and a
    second --publish on another loopback address); the answer's half-close
    reaches the host; the host's other addresses have nothing on HOSTPORT
    (control: a listener on 0.0.0.0 there is reached); the ports close with
    the session."""
    rig.config({"bb": {}})
    install_probe(rig, pub_probe)
    hp, hp2 = free_port(), free_port("127.0.0.2")
    mark = "M" + secrets.token_hex(4)
    s = start(rig, [f"{hp}:8000", f"127.0.0.2:{hp2}:8000"],
              f"exec /workspace/pub_probe serve 8000 {mark}")
    s.read_until("LISTENING 8000")
    token = "t" + secrets.token_hex(6)
    assert request_retry(hp, token) == f"{mark} {token}\n"
    token2 = "u" + secrets.token_hex(6)
    assert request(hp2, token2, addr="127.0.0.2") == f"{mark} {token2}\n"
    # Half-close: the server's end of stream arrived while the host could
    # still send (the connection is not cut).
    with socket.create_connection(("127.0.0.1", hp), timeout=10) as c:
        c.sendall(b"half\n")
        got = b""
        while not got.endswith(b"\n") or b"half" not in got:
            b = c.recv(100)
            assert b, f"closed before the answer: {got!r}"
            got += b
        assert c.recv(100) == b"", "no end of stream after the answer"
        c.sendall(b"still open\n")  # the host's direction still works
    s.read_until(f"GOT {token2}")
    assert f"GOT {token}" in s.stdout
    assert len(forwarders(rig)) == 2, forwarders(rig)
    # The host's other addresses: refused there, although a listener on
    # 0.0.0.0 would be reached (control).
    addrs = host_addresses()
    assert addrs, "no non-loopback IPv4 address to check"
    control = socket.socket()
    control.bind(("0.0.0.0", 0))
    control.listen(8)
    cport = control.getsockname()[1]
    try:
        for a in addrs:
            with socket.create_connection((a, cport), timeout=5):
                pass
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((a, hp), timeout=5).close()
    finally:
        control.close()
    r = stop(s)
    assert r.returncode in (143, 0), r.stderr
    # Lifetime: with the session, the forwarders and the port are gone.
    wait_for(lambda: not forwarders(rig), 15, "the forwarders ending with the session")
    wait_for(lambda: port_is_free(hp), 15, f"127.0.0.1:{hp} being free again")


def test_host_port_in_use_is_refused(rig, pub_probe):
    """A host port something listens on refuses the session with the port,
    the reason and a fix (exit 125), before its command runs; so does one a
    running session of the same Domain publishes, which keeps working.
    Control: the same run with a free port succeeds."""
    rig.config({"bb": {}})
    install_probe(rig, pub_probe)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    tport = taken.getsockname()[1]
    marker = rig.ws / "ran"
    try:
        r = rig.lz.run(["run", "bb", "--workspace", str(rig.ws), "--publish", f"{tport}:80",
                        "--", "sh", "-c", "touch /workspace/ran"])
    finally:
        taken.close()
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert f"127.0.0.1:{tport}" in r.stderr and "in use" in r.stderr, r.stderr
    assert "fix:" in r.stderr, r.stderr
    assert not marker.exists(), "the command ran although its port was refused"
    # Control: a free port.
    ok(rig.lz.run(["run", "bb", "--workspace", str(rig.ws), "--publish", f"{free_port()}:80",
                   "--", "sh", "-c", "touch /workspace/ran"]))
    assert marker.exists()
    # Two sessions, one host port: the second is refused, the first goes on.
    hp = free_port()
    mark = "M" + secrets.token_hex(4)
    s = start(rig, [f"{hp}:8000"], f"exec /workspace/pub_probe serve 8000 {mark}")
    s.read_until("LISTENING 8000")
    assert request_retry(hp, "one").startswith(mark)
    r2 = rig.lz.run(["run", "bb", "--workspace", str(rig.ws), "--publish", f"{hp}:8001", "--",
                     "true"])
    assert r2.returncode == 125 and f"127.0.0.1:{hp}" in r2.stderr, r2.stderr
    assert request(hp, "two") == f"{mark} two\n"
    stop(s)


@pytest.mark.parametrize("spec,why", [
    ("8080", "not HOSTPORT:PORT"),
    ("0:80", "host port '0'"),
    ("8080:65536", "sandbox port '65536'"),
    ("08080:80", "host port '08080'"),
    ("192.168.1.2:8080:80", "not a loopback address"),
    ("0.0.0.0:8080:80", "not a loopback address"),
    ("127.0.0.300:8080:80", "not an IPv4 address"),
    ("a:b:8080:80", "not an IPv4 address"),
])
def test_publish_spec_is_checked(lz, spec, why):
    r = lz.run(["run", "bb", "--publish", spec, "--", "true"])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--publish" in r.stderr and why in r.stderr, r.stderr


def test_publish_twice_and_too_many(lz):
    r = lz.run(["run", "bb", "--publish", "8080:80", "--publish=8080:81", "--", "true"])
    assert r.returncode == 2 and "given twice" in r.stderr, r.stderr
    args = ["run", "bb"]
    for i in range(9):
        args += ["--publish", f"{20000 + i}:80"]
    r = lz.run(args + ["--", "true"])
    assert r.returncode == 2 and "at most 8" in r.stderr, r.stderr
