# SPDX-License-Identifier: Apache-2.0
"""Self-checks of the Python reference (lzref) that need no lazaret binary:
hand-assembled preimages, byte by byte, and the reference's own refusals of
the schema cases that test_config_check.py drives through the CLI."""

import hashlib
import os

import pytest

import lzref

H = bytes.fromhex


def test_domain_id_preimage_by_hand():
    pre = lzref.domain_id_preimage("p", "/w")
    sep = b"lazaret-domain-id-v1" + b"\x00"
    assert len(sep) == 21
    assert pre == sep + H("00000001") + b"p" + H("00000002") + b"/w"
    assert lzref.domain_id("p", "/w") == hashlib.sha256(pre).digest()
    # Framed, not concatenated: moving a byte between the fields changes it.
    assert lzref.domain_id("p/", "w") != lzref.domain_id("p", "/w")


TINY = lzref.FingerprintRecord(
    profile="a", storage_root="/s", runtime_root="/r", image="i",
    isolate_gitignored=False,
    persistent_dirs=["/b", "/a"],
    env=[("X", "Y")],
    volumes=[("/h", "/b/v", "directory", "read-only", True)],
    allow=[(H("0a010000"), 16)],
    deny=[(H("0a000000"), 8)],
    escalation_enabled=True,
    rules=[("/e", ["2", "1"], True)],
)

# Written out by hand from the schema text (literal reading: a persistent
# path item and an argument item are bytes(x), and the list frames each item
# encoding once more with bytes()).
TINY_PREIMAGE = b"".join([
    b"lazaret-configuration-fingerprint-v1\x00",
    H("00000001"), b"a",
    H("00000002"), b"/s",
    H("00000002"), b"/r",
    H("00000001"), b"i",
    H("00"),
    # persistent_dirs: 2 items, "/a" before "/b"
    H("00000002"),
    H("00000006"), H("00000002"), b"/a",
    H("00000006"), H("00000002"), b"/b",
    # environment references: 1 item of 10 bytes
    H("00000001"),
    H("0000000a"), H("00000001"), b"X", H("00000001"), b"Y",
    # volumes: 1 item of 17 bytes: source, container, directory, read-only, create
    H("00000001"),
    H("00000011"), H("00000002"), b"/h", H("00000004"), b"/b/v", H("01"), H("00"), H("01"),
    # allow 10.1.0.0/16, deny 10.0.0.0/8
    H("00000001"), H("00000005"), H("0a010000"), H("10"),
    H("00000001"), H("00000005"), H("0a000000"), H("08"),
    # escalation enabled
    H("01"),
    # rules: 1 item of 29 bytes: exe, args in declared order ("2" then "1"), extra
    H("00000001"),
    H("0000001d"), H("00000002"), b"/e",
    H("00000002"), H("00000005"), H("00000001"), b"2", H("00000005"), H("00000001"), b"1",
    H("01"),
])


def test_fingerprint_preimage_by_hand():
    assert lzref.fingerprint_preimage(TINY) == TINY_PREIMAGE
    assert lzref.fingerprint(TINY) == hashlib.sha256(TINY_PREIMAGE).digest()


def test_single_framing_variant_by_hand():
    pre = lzref.fingerprint_preimage(TINY, "single")
    # Only the persistent and argument items lose one level of framing.
    assert H("00000002") + H("00000002") + b"/a" + H("00000002") + b"/b" in pre
    assert (H("00000002") + b"/e" + H("00000002") + H("00000001") + b"2"
            + H("00000001") + b"1" + H("01")) in pre
    assert len(pre) == len(TINY_PREIMAGE) - 4 * 2 - 4 * 2


def test_sorting_is_on_complete_encodings_and_args_keep_order():
    r1 = lzref.FingerprintRecord(**{**TINY.__dict__, "persistent_dirs": ["/a", "/b"]})
    assert lzref.fingerprint(r1) == lzref.fingerprint(TINY)
    r2 = lzref.FingerprintRecord(**{**TINY.__dict__, "rules": [("/e", ["1", "2"], True)]})
    assert lzref.fingerprint(r2) != lzref.fingerprint(TINY)
    # Literal framing sorts "/zz" (shorter) before "/aaa": the length prefix
    # is part of the complete item encoding.
    pre = lzref.fingerprint_preimage(
        lzref.FingerprintRecord(**{**TINY.__dict__, "persistent_dirs": ["/aaa", "/zz"]}))
    assert pre.index(b"/zz") < pre.index(b"/aaa")
    pre = lzref.fingerprint_preimage(
        lzref.FingerprintRecord(**{**TINY.__dict__, "persistent_dirs": ["/aaa", "/zz"]}),
        "single")
    assert pre.index(b"/aaa") < pre.index(b"/zz")


def test_ipv4_normalization():
    p = lzref.parse_ipv4_prefix
    assert p("k", "10.1.2.3/8") == (H("0a000000"), 8)
    assert p("k", "0.0.0.0/0") == (H("00000000"), 0)
    assert p("k", "255.255.255.255/32") == (H("ffffffff"), 32)
    for bad in ("10.0.0.0", "10.0.0.0/33", "010.0.0.0/8", "10.0.0.0/08", "::1/128",
                "256.1.1.1/32", "1.2.3/24", " 1.2.3.4/32", "1.2.3.4/32 ", "1.2.3.4/-1", ""):
        with pytest.raises(lzref.Refused):
            p("k", bad)


def test_host_path_grammar():
    ok = lzref.check_host_path
    assert ok("k", "/a/b") == ("abs", "a/b")
    assert ok("k", "~/a") == ("home", "a")
    assert ok("k", "{profile_dir}/a/b", allow_profile_dir=True) == ("profile_dir", "a/b")
    for bad in ("a", "~//etc", "~", "~/", "/", "//a", "/a/", "/a//b", "/a/./b", "/a/../b",
                "~user/x", "$HOME/x", "{profile_dir}/x", ".", ".."):
        with pytest.raises(lzref.Refused):
            ok("k", bad)
    for bad in ("{profile_dir}//etc", "{profile_dir}", "{profile_dir}/", "{profile_dir}/a/"):
        with pytest.raises(lzref.Refused):
            ok("k", bad, allow_profile_dir=True)


def test_resolve_tiny_config(tmp_path):
    home = tmp_path / "home"
    (home / "ws").mkdir(parents=True)
    (home / "src").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    text = '''schema = "lazaret-trusted-host-config-v1"
[profiles.a]
image = "i"
isolate_gitignored = false
persistent_dirs = ["/b", "/a"]
env = { X = "env:Y" }
volumes = [{ host = "~/src", container = "/b/v", kind = "directory", access = "read-only" }]
allow_egress = ["10.1.2.3/16"]
[profiles.a.escalation]
enabled = true
auto_approve = [{ executable = "/usr/bin/true", args = ["2", "1"], allow_extra_args = true }]
'''
    out = lzref.resolve(text, "a", str(home / "ws"), home=str(home), xdg_runtime_dir=str(run),
                        environ={"Y": "secret"})
    real = os.path.realpath
    storage = real(home) + "/.local/share/lazaret"
    assert out["storage_root"] == storage
    assert out["runtime_root"] == real(run) + "/lazaret"
    assert out["profile_dir"] == storage + "/profiles/a"
    assert out["network"] == {"allow": ["10.1.0.0/16"],
                              "deny": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]}
    assert out["volumes"] == [{"source": real(home / "src"), "destination": "/b/v",
                               "kind": "directory", "access": "read-only", "create": False}]
    rec = out["_record"]
    assert rec.deny == [(H("0a000000"), 8), (H("ac100000"), 12), (H("c0a80000"), 16)]
    assert out["domain_id"] == lzref.domain_id("a", real(home / "ws")).hex()
    assert out["configuration_fingerprint"] == lzref.fingerprint(rec).hex()
    assert "secret" not in repr(out)
    # config check reads names only; run's load refuses the unset variable.
    lzref.resolve(text, "a", str(home / "ws"), home=str(home), xdg_runtime_dir=str(run))
    with pytest.raises(lzref.Refused) as e:
        lzref.resolve(text, "a", str(home / "ws"), home=str(home), xdg_runtime_dir=str(run),
                      env_values=True)
    assert e.value.key == "profiles.a.env.X"


def test_reference_refuses_every_schema_case():
    """Every pure-schema refusal case that the CLI tests use is refused by the
    reference too, for the same key: the case is invalid for the intended
    reason and not some other one."""
    import test_config_check as t
    for name, text, keys, _line in t.schema_cases():
        with pytest.raises(lzref.Refused) as e:
            lzref.resolve(text, "p", "/nonexistent-ws", home="/nonexistent-home",
                          xdg_runtime_dir="/nonexistent-run", check_fs=False,
                          environ={"HOSTVAR": "x"}, protected=t.PROTECTED)
        got = e.value.key
        assert keys is None or got in keys or any(got and got.startswith(k) for k in keys), \
            (name, got, keys)


def test_reference_accepts_the_valid_bases():
    import test_config_check as t
    for profile in ("p", "other"):
        lzref.resolve(t.schema_base(), profile, "/nonexistent-ws", home="/nonexistent-home",
                      xdg_runtime_dir="/nonexistent-run", check_fs=False,
                      environ={"HOSTVAR": "x"})
    full = t.FULL.replace("@ABS@", "/nonexistent-abs")
    for profile in ("claude", "codex.v2_beta-1", "minimal"):
        lzref.resolve(full, profile, "/nonexistent-ws", home="/nonexistent-home",
                      xdg_runtime_dir="/nonexistent-run", check_fs=False,
                      environ=dict(t.FULL_ENV))


def test_emitter_round_trips():
    import tomllib
    import test_config_check as t
    assert tomllib.loads(t.schema_base()) == t.base()
