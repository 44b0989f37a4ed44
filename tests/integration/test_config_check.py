# SPDX-License-Identifier: Apache-2.0
"""`lazaret config check` against the independent Python reference (lzref).

a. Agreement: the binary's --json output (digests and every resolved field)
   equals lzref's for configurations that together exercise every
   fingerprinted field; environment values never appear in any output.
b. Invariance: what the schema excludes from the fingerprint does not change
   it; every fingerprinted field does.
c. Refusals: every schema and spec 3.2 rule, through the CLI: exit 1 and a
   diagnostic naming the dotted key path, the configuration file and (where
   there is one) the line. Usage errors exit 2.

Each refusal case is one small change of a base configuration that the
binary accepts (test_base_is_valid), so a refusal can only come from the rule
under test; test_lzref_selfcheck.py checks that the reference refuses every
pure-schema case for the same key.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest

import lzref

SCHEMA_ID = "lazaret-trusted-host-config-v1"
SECRET = "lzS3cr3t-VALUE-9d2f61c7-must-never-print"
SECRET2 = "lzS3cr3t-OTHER-0b7e4a55-must-never-print"
HEX64 = re.compile(r"[0-9a-f]{64}")
# SandboxLayoutV1's protected destinations (docs/configuration.md
# "Decisions", SandboxLayoutV1): /workspace, /proc, /sys, /dev and /run/lazaret, which
# holds what Lazaret puts into a sandbox.
PROTECTED = ("/dev", "/proc", "/run/lazaret", "/sys", "/workspace")
JSON_KEYS = {"profile", "workspace", "domain_id", "configuration_fingerprint", "storage_root",
             "runtime_root", "profile_dir", "config_file", "image", "isolate_gitignored",
             "persistent_dirs", "environment", "environment_values", "command", "volumes", "network", "escalation"}
# Keys the binary may add; when present they are checked too (spec 3.2: the
# Domain roots are <root>/domains/<lowercase hex Domain ID>).
OPTIONAL_KEYS = {"domain_root", "domain_runtime_dir"}


# ------------------------------------------------------------- TOML emitter

class Raw(str):
    """A TOML value written as is (for wrong-type cases)."""


def _key(k):
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def _val(v, multiline=False):
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        if multiline and v:
            return "[\n" + "".join(f"  {_val(x)},\n" for x in v) + "]"
        return "[" + ", ".join(_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_val(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def _is_aot(k, v):
    return k == "volumes" and isinstance(v, list) and v and all(
        isinstance(x, dict) and not isinstance(x, Raw) for x in v)


def _is_section(k, v):
    return isinstance(v, dict) and not isinstance(v, Raw) and k != "_inline"


def emit(doc, header=None, out=None):
    """A dict as TOML: one key per line; tables as [sections]; volumes as
    [[arrays of tables]]; auto_approve as a one-rule-per-line array."""
    top = out is None
    out = [] if top else out
    if header is not None:
        out.append(f"\n[{header}]")
    for k, v in doc.items():
        if not _is_section(k, v) and not _is_aot(k, v):
            out.append(f"{_key(k)} = {_val(v, multiline=(k == 'auto_approve'))}")
    for k, v in doc.items():
        path = _key(k) if header is None else f"{header}.{_key(k)}"
        if _is_section(k, v):
            emit(v, path, out)
        elif _is_aot(k, v):
            for item in v:
                out.append(f"\n[[{path}]]")
                for ik, iv in item.items():
                    out.append(f"{_key(ik)} = {_val(iv)}")
    return "\n".join(out) + "\n" if top else None


def line_of(text, needle):
    """The line of `needle`: a string found on exactly one line, or (string, n)
    for its n-th (0-based) line. A list of needles gives the set of their
    lines (any of which a diagnostic may name)."""
    if isinstance(needle, list):
        return frozenset(line_of(text, n) for n in needle)
    if isinstance(needle, tuple):
        needle, nth = needle
    else:
        nth = None
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    if nth is not None:
        return lines[nth]
    assert len(lines) == 1, f"needle {needle!r} found on lines {lines}"
    return lines[0]


def vol_needles(i, field):
    """A volume's field line, or its [[profiles.p.volumes]] header line."""
    return [f"{field} = ", ("[[profiles.p.volumes]]", i)] if field is None else \
        [(f"{field} = ", i), ("[[profiles.p.volumes]]", i)]


# ------------------------------------------------------------- the base

def base():
    """The valid base configuration every refusal case changes by one rule.
    Needs (prepare_base): ~/data (dir), ~/.gitconfig (file), HOSTVAR set."""
    return {
        "schema": SCHEMA_ID,
        "network": {"default_allow": ["192.0.2.53/32"], "default_deny": ["198.51.100.0/24"]},
        "profiles": {
            "p": {
                "image": "docker.io/library/debian:trixie",
                "isolate_gitignored": True,
                "persistent_dirs": ["/root", "/opt/agent"],
                "allow_egress": ["203.0.113.0/24"],
                "deny_egress": ["203.0.113.128/25"],
                "env": {"TOKEN": "env:HOSTVAR"},
                "volumes": [
                    {"host": "{profile_dir}/state", "container": "/root/.state",
                     "kind": "directory", "create": True},
                    {"host": "~/.gitconfig", "container": "/root/.gitconfig", "kind": "file",
                     "access": "read-only"},
                    {"host": "~/data", "container": "/opt/agent/data", "kind": "directory",
                     "access": "read-write"},
                ],
                "escalation": {"enabled": True, "auto_approve": [
                    {"executable": "/usr/bin/true", "args": ["x"], "allow_extra_args": True},
                ]},
            },
            "other": {"image": "example.org/other:1"},
        },
    }


def schema_base():
    return emit(base())


def P(d):
    return d["profiles"]["p"]


def V(d, i):
    return d["profiles"]["p"]["volumes"][i]


def R(d, i=0):
    return d["profiles"]["p"]["escalation"]["auto_approve"][i]


def _set(path, value):
    """A mutation setting doc[path...] = value (None deletes)."""
    def f(d):
        t = d
        for k in path[:-1]:
            t = t[k]
        if value is None:
            del t[path[-1]]
        else:
            t[path[-1]] = copy.deepcopy(value)
    return f


def _do(*fs):
    def f(d):
        for g in fs:
            g(d)
    return f


PP = ("profiles", "p")
VOL = lambda i: ("profiles", "p", "volumes", i)          # noqa: E731
RULE = lambda i=0: ("profiles", "p", "escalation", "auto_approve", i)  # noqa: E731
K = "profiles.p"


def _case(name, mutate, keys, needle=None):
    return (name, mutate, keys, needle)


def _schema_case_table():
    """(name, mutation of base(), acceptable key paths, line needle or None).
    Every case needs neither the filesystem nor the environment to be refused."""
    c = []
    # Unknown fields, at every level; aliases are unknown fields too.
    c += [
        _case("unknown-root", _set(("bogus",), 1), ["bogus"], "bogus = 1"),
        _case("unknown-storage", _set(("storage",), {"data_root": "~/lzd", "bogus": 1}),
              ["storage.bogus"], "bogus = 1"),
        _case("unknown-network", _set(("network", "bogus"), 1), ["network.bogus"], "bogus = 1"),
        _case("unknown-profile", _set(PP + ("bogus",), 1), [f"{K}.bogus"], "bogus = 1"),
        _case("unknown-volume", _set(VOL(1) + ("bogus",), 1), [f"{K}.volumes[1].bogus"],
              "bogus = 1"),
        _case("unknown-escalation", _set(PP + ("escalation", "bogus"), 1),
              [f"{K}.escalation.bogus"], "bogus = 1"),
        _case("unknown-rule", _set(RULE() + ("bogus",), 1),
              [f"{K}.escalation.auto_approve[0].bogus"], "bogus = 1"),
        _case("alias-allow-egress", _set(PP + ("allow-egress",), ["1.2.3.4/32"]),
              [f"{K}.allow-egress"], "allow-egress = "),
        _case("alias-dataRoot", _set(("storage",), {"dataRoot": "~/lzd"}),
              ["storage.dataRoot"], "dataRoot = "),
        _case("unknown-in-nonselected-profile",
              _set(("profiles", "other", "bogus"), 1), ["profiles.other.bogus"], "bogus = 1"),
    ]
    # Wrong types.
    c += [
        _case("type-schema", _set(("schema",), 1), ["schema"], "schema = 1"),
        _case("type-storage", _set(("storage",), Raw('"x"')), ["storage"], 'storage = "x"'),
        _case("type-network", _set(("network",), Raw("1")), ["network"], "network = 1"),
        _case("type-data_root", _set(("storage",), {"data_root": 1}), ["storage.data_root"],
              "data_root = 1"),
        _case("type-default_allow", _set(("network", "default_allow"), "192.0.2.53/32"),
              ["network.default_allow"], 'default_allow = "'),
        _case("type-default_deny-item", _set(("network", "default_deny"), [1]),
              ["network.default_deny[0]", "network.default_deny"], "default_deny = [1]"),
        _case("type-profile", _set(("profiles", "other"), Raw('"x"')), ["profiles.other"],
              'other = "x"'),
        _case("type-image", _set(PP + ("image",), 1), [f"{K}.image"], "image = 1"),
        _case("type-isolate", _set(PP + ("isolate_gitignored",), "true"),
              [f"{K}.isolate_gitignored"], "isolate_gitignored = "),
        _case("type-persistent", _set(PP + ("persistent_dirs",), "/root"),
              [f"{K}.persistent_dirs"], 'persistent_dirs = "/root"'),
        _case("type-persistent-item", _set(PP + ("persistent_dirs",), ["/root", 1]),
              [f"{K}.persistent_dirs[1]", f"{K}.persistent_dirs"], "persistent_dirs = "),
        _case("type-allow", _set(PP + ("allow_egress",), "203.0.113.0/24"),
              [f"{K}.allow_egress"], "allow_egress = "),
        _case("type-deny-item", _set(PP + ("deny_egress",), [True]),
              [f"{K}.deny_egress[0]", f"{K}.deny_egress"], "deny_egress = "),
        _case("type-env", _set(PP + ("env",), ["HOSTVAR"]), [f"{K}.env"], "env = "),
        _case("type-env-value", _set(PP + ("env", "TOKEN"), 1), [f"{K}.env.TOKEN"],
              "TOKEN = 1"),
        _case("type-volumes", _set(PP + ("volumes",), Raw("{}")), [f"{K}.volumes"],
              "volumes = {}"),
        _case("type-volume-item", _set(PP + ("volumes",), Raw('["/x"]')),
              [f"{K}.volumes[0]", f"{K}.volumes"], "volumes = "),
        _case("type-volume-create", _set(VOL(0) + ("create",), "yes"),
              [f"{K}.volumes[0].create"], 'create = "yes"'),
        _case("type-volume-access", _set(VOL(1) + ("access",), True),
              [f"{K}.volumes[1].access"], "access = true"),
        _case("type-volume-host", _set(VOL(2) + ("host",), ["~/data"]),
              [f"{K}.volumes[2].host"], 'host = ["~/data"]'),
        _case("type-escalation", _set(PP + ("escalation",), Raw("true")),
              [f"{K}.escalation"], "escalation = true"),
        _case("type-enabled", _set(PP + ("escalation", "enabled"), 1),
              [f"{K}.escalation.enabled"], "enabled = 1"),
        _case("type-auto_approve", _set(PP + ("escalation", "auto_approve"), "/usr/bin/true"),
              [f"{K}.escalation.auto_approve"], "auto_approve = "),
        _case("type-args", _set(RULE() + ("args",), "x"),
              [f"{K}.escalation.auto_approve[0].args"], 'args = "x"'),
        _case("type-args-item", _set(RULE() + ("args",), [1]),
              [f"{K}.escalation.auto_approve[0].args[0]",
               f"{K}.escalation.auto_approve[0].args"], "args = [1]"),
        _case("type-allow_extra_args", _set(RULE() + ("allow_extra_args",), "true"),
              [f"{K}.escalation.auto_approve[0].allow_extra_args"], "allow_extra_args = "),
        _case("type-executable", _set(RULE() + ("executable",), 1),
              [f"{K}.escalation.auto_approve[0].executable"], "executable = 1"),
    ]
    # Presence: schema, profiles, required fields.
    c += [
        _case("schema-missing", _set(("schema",), None), ["schema"]),
        _case("schema-wrong-id", _set(("schema",), "lazaret-trusted-host-config-v3"),
              ["schema"], "schema = "),
        _case("schema-id-case", _set(("schema",), SCHEMA_ID.upper()), ["schema"], "schema = "),
        _case("profiles-missing", _set(("profiles",), None), ["profiles"]),
        _case("profiles-empty", _set(("profiles",), {}), ["profiles"]),
        _case("profiles-array", _set(("profiles",), Raw("[]")), ["profiles"], "profiles = []"),
        _case("image-missing", _set(PP + ("image",), None), [f"{K}.image"]),
        _case("image-empty", _set(PP + ("image",), ""), [f"{K}.image"], 'image = ""'),
        # (a TOML-level refusal of the NUL escape is fine: it names the line)
        _case("image-nul", _set(PP + ("image",), "debian\x00:trixie"), [f"{K}.image", "NUL"],
              'image = "debian'),
        _case("volume-host-missing", _set(VOL(2) + ("host",), None), [f"{K}.volumes[2].host",
                                                                        f"{K}.volumes[2]"]),
        _case("volume-container-missing", _set(VOL(2) + ("container",), None),
              [f"{K}.volumes[2].container", f"{K}.volumes[2]"]),
        _case("volume-kind-missing", _set(VOL(2) + ("kind",), None),
              [f"{K}.volumes[2].kind", f"{K}.volumes[2]"]),
        _case("rule-executable-missing", _set(RULE() + ("executable",), None),
              [f"{K}.escalation.auto_approve[0].executable",
               f"{K}.escalation.auto_approve[0]"], "allow_extra_args = true"),
        _case("args-nul", _set(RULE() + ("args",), ["a\x00b"]),
              [f"{K}.escalation.auto_approve[0].args[0]",
               f"{K}.escalation.auto_approve[0].args", "NUL"], "args = "),
    ]
    # Profile names (the profile is not the selected one: every profile is
    # structurally decoded).
    for bad in (".", "..", "a" * 65, "-lead", "_x", "cl\u00e9", "a b", "a/b", ""):
        c.append(_case(f"profile-name-{bad[:8]!r}",
                       _set(("profiles", bad), {"image": "example.org/x:1"}),
                       [f"profiles.{bad}", f'profiles."{bad}"']
                       + (["profiles"] if not bad.isascii() else [])))
    # Environment names and references.
    for bad in ("hunter2", "env:", "env:1A", "file:/etc/passwd", "ENV:HOSTVAR", "env:HOST-VAR",
                "env:HOSTVAR ", " env:HOSTVAR", "env:$HOSTVAR", "${HOSTVAR}"):
        c.append(_case(f"env-ref-{bad!r}", _set(PP + ("env", "TOKEN"), bad),
                       [f"{K}.env.TOKEN"], "TOKEN = "))
    for bad in ("1BAD", "BAD-NAME", "A.B"):
        c.append(_case(f"env-name-{bad}", _set(PP + ("env", bad), "env:HOSTVAR"),
                       [f"{K}.env.{bad}", f'{K}.env."{bad}"', f"{K}.env"]))
    # Host path grammar.
    for bad in ("relative/x", "~//etc", "~", "~/", "/", "//lzd", "/srv/./lzd", "/srv/../lzd",
                "/srv/lzd/", "/srv//lzd", "~user/x", "$HOME/x", "{profile_dir}/x", ".", "..",
                "~/a/../b", "${HOME}/x"):
        c.append(_case(f"data_root-{bad!r}", _set(("storage",), {"data_root": bad}),
                       ["storage.data_root"], "data_root = "))
    for bad in ("{profile_dir}//etc", "~//etc", "relative", ".", "..", "/tmp/", "~user/x",
                "$HOME/x", "{profile_dir}", "{profile_dir}/", "{profile_dir}/a/", "~/data/",
                "~/./data", "{profile_dir}/../x", "{PROFILE_DIR}/x", "/{profile_dir}/x/../y"):
        c.append(_case(f"volume-host-{bad!r}", _set(VOL(2) + ("host",), bad),
                       [f"{K}.volumes[2].host"], "host = " + json.dumps(bad)))
    for bad in ("{profile_dir}/tool", "usr/bin/true", "/usr/bin/../bin/true", "/usr/bin/true/",
                "~//bin/true", "true"):
        c.append(_case(f"executable-{bad!r}", _set(RULE() + ("executable",), bad),
                       [f"{K}.escalation.auto_approve[0].executable"], "executable = "))
    # Sandbox path grammar.
    for bad in ("/", "srv", "/srv/", "/srv/../etc", "//srv", "/srv//x", "/./srv", "",
                "/root/.", "/srv/x/.."):
        c.append(_case(f"persistent-{bad!r}",
                       _set(PP + ("persistent_dirs",), ["/root", "/opt/agent", bad]),
                       [f"{K}.persistent_dirs[2]"], "persistent_dirs = "))
    for bad in ("/opt/agent/data/", "opt/agent/data", "/opt/agent//data", "/opt/agent/../data",
                "/opt/agent/./data"):
        c.append(_case(f"container-{bad!r}", _set(VOL(2) + ("container",), bad),
                       [f"{K}.volumes[2].container"], "container = " + json.dumps(bad)))
    # Persistent and volume destination relations.
    pd = [f"{K}.persistent_dirs[0]", f"{K}.persistent_dirs[1]", f"{K}.persistent_dirs[2]"]
    c += [
        _case("persistent-equal", _set(PP + ("persistent_dirs",), ["/root", "/opt/agent", "/root"]),
              pd, "persistent_dirs = "),
        _case("persistent-ancestor", _set(PP + ("persistent_dirs",),
                                          ["/root", "/opt/agent", "/root/.cache"]),
              pd, "persistent_dirs = "),
        _case("persistent-descendant", _set(PP + ("persistent_dirs",),
                                            ["/root/.cache", "/opt/agent", "/root"]),
              pd, "persistent_dirs = "),
        _case("persistent-workspace", _set(PP + ("persistent_dirs",),
                                           ["/root", "/opt/agent", "/workspace"]),
              [f"{K}.persistent_dirs[2]"], "persistent_dirs = "),
        _case("persistent-under-workspace", _set(PP + ("persistent_dirs",),
                                                 ["/root", "/opt/agent", "/workspace/.cache"]),
              [f"{K}.persistent_dirs[2]"], "persistent_dirs = "),
        _case("persistent-run", _set(PP + ("persistent_dirs",), ["/root", "/opt/agent", "/run"]),
              [f"{K}.persistent_dirs[2]"], "persistent_dirs = "),
        _case("persistent-proc", _set(PP + ("persistent_dirs",),
                                      ["/root", "/opt/agent", "/proc/self"]),
              [f"{K}.persistent_dirs[2]"], "persistent_dirs = "),
        _case("persistent-dev", _set(PP + ("persistent_dirs",), ["/root", "/opt/agent", "/dev"]),
              [f"{K}.persistent_dirs[2]"], "persistent_dirs = "),
        _case("persistent-run-lazaret-child",
              _set(PP + ("persistent_dirs",), ["/root", "/opt/agent", "/run/lazaret/x"]),
              [f"{K}.persistent_dirs[2]"], "persistent_dirs = "),
        _case("container-workspace",
              _do(_set(PP + ("persistent_dirs",), ["/root", "/opt/agent", "/workspace"]),
                  _set(VOL(2) + ("container",), "/workspace/data")),
              [f"{K}.persistent_dirs[2]", f"{K}.volumes[2].container"]),
        _case("container-not-under-persistent", _set(VOL(2) + ("container",), "/srv/data"),
              [f"{K}.volumes[2].container"], vol_needles(2, "container")),
        _case("container-sibling-name", _set(VOL(2) + ("container",), "/opt/agentx/data"),
              [f"{K}.volumes[2].container"], vol_needles(2, "container")),
        _case("container-equals-persistent", _set(VOL(2) + ("container",), "/opt/agent"),
              [f"{K}.volumes[2].container"], vol_needles(2, "container")),
        _case("container-equal", _set(VOL(2) + ("container",), "/root/.state"),
              [f"{K}.volumes[2].container", f"{K}.volumes[0].container"]),
        _case("container-ancestor", _set(VOL(2) + ("container",), "/root/.state/sub"),
              [f"{K}.volumes[2].container", f"{K}.volumes[0].container"],
              vol_needles(2, "container")),
        _case("container-descendant", _set(VOL(0) + ("container",), "/opt/agent/data/state"),
              [f"{K}.volumes[2].container", f"{K}.volumes[0].container"]),
    ]
    # Enumerations and create.
    for bad in ("dir", "File", "regular", "symlink", ""):
        c.append(_case(f"kind-{bad!r}", _set(VOL(1) + ("kind",), bad),
                       [f"{K}.volumes[1].kind"], "kind = " + json.dumps(bad)))
    for bad in ("ro", "rw", "readonly", "Read-Only", "read_only", "write-only", ""):
        c.append(_case(f"access-{bad!r}", _set(VOL(1) + ("access",), bad),
                       [f"{K}.volumes[1].access"], "access = " + json.dumps(bad)))
    c += [
        _case("create-file", _do(_set(VOL(1) + ("host",), "{profile_dir}/f"),
                                 _set(VOL(1) + ("create",), True)),
              [f"{K}.volumes[1].create", f"{K}.volumes[1].kind", f"{K}.volumes[1]"]),
        _case("create-outside-profile-dir", _set(VOL(2) + ("create",), True),
              [f"{K}.volumes[2].create", f"{K}.volumes[2].host", f"{K}.volumes[2]"]),
        _case("create-absolute", _do(_set(VOL(2) + ("host",), "/srv/lz-create"),
                                     _set(VOL(2) + ("create",), True)),
              [f"{K}.volumes[2].create", f"{K}.volumes[2].host", f"{K}.volumes[2]"]),
    ]
    # IPv4.
    for bad in ("192.0.2.53", "10.0.0.0/33", "010.0.0.0/8", "::1/128", "2001:db8::/32",
                "256.1.1.1/32", "1.2.3/24", "1.2.3.4/", "1.2.3.4/-1", "1.2.3.4 /32",
                "0x7f.0.0.1/32", "", "1.2.3.4/32/32"):
        c.append(_case(f"ipv4-allow-{bad!r}", _set(PP + ("allow_egress",), ["203.0.113.0/24", bad]),
                       [f"{K}.allow_egress[1]", f"{K}.allow_egress"], "allow_egress = "))
    c += [
        _case("ipv4-default_allow", _set(("network", "default_allow"), ["192.0.2.53"]),
              ["network.default_allow[0]", "network.default_allow"], "default_allow = "),
        _case("ipv4-default_deny", _set(("network", "default_deny"), ["300.0.0.0/8"]),
              ["network.default_deny[0]", "network.default_deny"], "default_deny = "),
        _case("ipv4-deny", _set(PP + ("deny_egress",), ["10.0.0.0/33"]),
              [f"{K}.deny_egress[0]", f"{K}.deny_egress"], "deny_egress = "),
    ]
    # Exact allow/deny conflicts (after host bits are cleared).
    c += [
        _case("conflict-rfc1918", _set(PP + ("allow_egress",), ["203.0.113.0/24", "10.0.0.0/8"]),
              [f"{K}.allow_egress[1]", f"{K}.allow_egress"], "allow_egress = "),
        _case("conflict-rfc1918-host-bits",
              _set(PP + ("allow_egress",), ["203.0.113.0/24", "172.20.1.1/12"]),
              [f"{K}.allow_egress[1]", f"{K}.allow_egress"], "allow_egress = "),
        _case("conflict-rfc1918-global", _set(("network", "default_allow"),
                                              ["192.0.2.53/32", "192.168.7.7/16"]),
              ["network.default_allow[1]", "network.default_allow"], "default_allow = "),
        _case("conflict-profile-allow-global-deny",
              _set(PP + ("allow_egress",), ["203.0.113.0/24", "198.51.100.99/24"]),
              [f"{K}.allow_egress[1]", "network.default_deny[0]", f"{K}.allow_egress",
               "network.default_deny"]),
        _case("conflict-global-allow-profile-deny",
              _set(PP + ("deny_egress",), ["203.0.113.128/25", "192.0.2.53/32"]),
              [f"{K}.deny_egress[1]", "network.default_allow[0]", f"{K}.deny_egress",
               "network.default_allow"]),
        _case("conflict-within-profile",
              _set(PP + ("deny_egress",), ["203.0.113.128/25", "203.0.113.7/24"]),
              [f"{K}.deny_egress[1]", f"{K}.allow_egress[0]", f"{K}.deny_egress",
               f"{K}.allow_egress"]),
    ]
    # Escalation.
    c += [
        _case("auto_approve-while-disabled", _set(PP + ("escalation", "enabled"), False),
              [f"{K}.escalation"], None),
        _case("auto_approve-enabled-default",
              _set(PP + ("escalation",), {"auto_approve": [{"executable": "/usr/bin/true"}]}),
              [f"{K}.escalation"], None),
        _case("extra-args-without-args", _set(RULE() + ("args",), []),
              [f"{K}.escalation.auto_approve[0].allow_extra_args",
               f"{K}.escalation.auto_approve[0].args", f"{K}.escalation.auto_approve[0]"],
              "allow_extra_args = true"),
        _case("extra-args-args-omitted", _set(RULE() + ("args",), None),
              [f"{K}.escalation.auto_approve[0].allow_extra_args",
               f"{K}.escalation.auto_approve[0].args", f"{K}.escalation.auto_approve[0]"],
              "allow_extra_args = true"),
        _case("duplicate-rule",
              _set(PP + ("escalation", "auto_approve"), [
                  {"executable": "/usr/bin/true", "args": ["x"], "allow_extra_args": True},
                  {"executable": "/usr/bin/env", "args": ["x"]},
                  {"executable": "/usr/bin/true", "args": ["x"], "allow_extra_args": True}]),
              [f"{K}.escalation.auto_approve[2]", f"{K}.escalation.auto_approve[0]"]),
        _case("duplicate-rule-explicit-default",
              _set(PP + ("escalation", "auto_approve"), [
                  {"executable": "/usr/bin/env", "args": ["a", "b"]},
                  {"executable": "/usr/bin/env", "args": ["a", "b"], "allow_extra_args": False}]),
              [f"{K}.escalation.auto_approve[1]", f"{K}.escalation.auto_approve[0]"]),
    ]
    return c


def schema_cases():
    """[(name, toml text, acceptable keys, line or None)] (also used by the
    reference self-check)."""
    out = []
    for name, mutate, keys, needle in _schema_case_table():
        d = base()
        mutate(d)
        text = emit(d)
        out.append((name, text, keys, line_of(text, needle) if needle else None))
    return out


# ------------------------------------------------------------- helpers

class Ctx:
    """A prepared test home: workspace, volume sources, helpers."""

    def __init__(self, lz, user):
        self.lz = lz
        self.user = user
        self.home = Path(lz.home)
        self.config = Path(lz.config_path)
        self.ws = self.home / "ws"
        lz.mkdir(self.ws)
        lz.mkdir(self.home / "data")
        self.write(self.home / ".gitconfig", "[user]\n\tname = t\n", mode=0o644)
        self.env = {"HOSTVAR": SECRET}

    # -- files
    def write(self, path, data, mode=0o600):
        path = Path(path)
        self.lz.write(path, data, mode=mode)
        os.chmod(path, mode)
        return path

    def mkdir(self, path, mode=0o755):
        path = Path(path)
        self.lz.mkdir(path, mode=mode)
        os.chmod(path, mode)
        return path

    def chown(self, path):
        os.lchown(path, self.user.uid, self.user.gid)

    def symlink(self, target, path):
        os.symlink(target, path)
        self.chown(path)
        return Path(path)

    def copy_exe(self, path, mode=0o755, src="/usr/bin/true"):
        with open(src, "rb") as f:
            return self.write(path, f.read(), mode=mode)

    def config_text(self, text, path=None, mode=0o600):
        return self.write(path or self.config, text, mode=mode)

    # -- runs
    def host_env(self, env=None):
        e = {"HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.lz.runtime_dir)}
        e.update(self.env)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def run_env(self, env=None):
        e = dict(self.env)
        e.update(env or {})
        return e

    def check(self, profile="p", ws=None, *, config=None, json_out=True, env=None, args=None,
              timeout=60):
        argv = [] if config is None else ["--config", str(config)]
        argv += ["config", "check", profile, "--workspace", str(ws or self.ws)]
        if json_out:
            argv.append("--json")
        if args is not None:
            argv = args
        res = self.lz.run(argv, env=self.run_env(env), timeout=timeout)
        for secret in (SECRET, SECRET2):
            assert secret not in res.stdout and secret not in res.stderr, \
                f"an environment value was printed:\n{res.stdout}\n{res.stderr}"
        return res

    def reference(self, text, profile="p", ws=None, *, config=None, env=None):
        e = self.host_env(env)
        return lzref.resolve(text, profile, str(ws or self.ws), home=e.get("HOME"),
                             xdg_runtime_dir=e.get("XDG_RUNTIME_DIR"),
                             xdg_data_home=e.get("XDG_DATA_HOME"), environ=e,
                             config_file=str(config or self.config), uid=self.user.uid,
                             gids=(self.user.gid, *getattr(self.user, "groups", ())),
                             protected=PROTECTED)

    def agree(self, text, profile="p", ws=None, *, config=None, write=True, env=None):
        """Write `text` (unless write=False), run the check, compare with lzref.
        Returns the binary's JSON."""
        if write:
            self.config_text(text, config)
        res = self.check(profile, ws, config=config, env=env)
        assert res.returncode == 0, \
            f"exit {res.returncode}\n--- stderr\n{res.stderr}\n--- stdout\n{res.stdout}\n" \
            f"--- config\n{text}"
        got = json.loads(res.stdout)
        # Advice (test_usr_without_the_package_database_warns), not part of
        # the resolved configuration the reference computes.
        assert isinstance(got.pop("warnings", None), list), "no warnings array"
        ref = self.reference(text, profile, ws, config=config, env=env)
        rec = ref.pop("_record")
        problems = []
        ref["domain_root"] = f"{ref['storage_root']}/domains/{ref['domain_id']}"
        ref["domain_runtime_dir"] = f"{ref['runtime_root']}/domains/{ref['domain_id']}"
        if not JSON_KEYS <= set(got) <= JSON_KEYS | OPTIONAL_KEYS:
            problems.append(f"JSON keys: missing {sorted(JSON_KEYS - set(got))}, "
                            f"extra {sorted(set(got) - JSON_KEYS - OPTIONAL_KEYS)}")
        for k in sorted(JSON_KEYS | OPTIONAL_KEYS):
            if k in got and got[k] != ref[k]:
                problems.append(f"{k}:\n   binary    {got[k]!r}\n   reference {ref[k]!r}")
        fp = got.get("configuration_fingerprint")
        if fp != ref["configuration_fingerprint"]:
            readings = [v for v, h in lzref.fingerprint_variants(rec).items() if h == fp]
            problems.append("fingerprint framing readings the binary matches: "
                            f"{readings or 'none'} (lzref default: ('literal', False))\n"
                            f"   record {rec!r}")
        assert not problems, "binary and reference disagree:\n" + "\n".join(problems) + \
            f"\n--- config\n{text}"
        assert HEX64.fullmatch(got["domain_id"]) and HEX64.fullmatch(fp)
        return got

    def refused(self, res, keys, *, config=None, line=None, exit_code=1):
        """Assert a refusal naming one of `keys`, the config file and `line`."""
        err = res.stderr
        assert res.returncode == exit_code, \
            f"expected exit {exit_code}, got {res.returncode}\n--- stderr\n{err}\n" \
            f"--- stdout\n{res.stdout}"
        if keys:
            assert any(k in err for k in keys), f"stderr names none of {keys}:\n{err}"
        cfg = config if config is not None else self.config
        if cfg:
            names = {str(cfg), os.path.realpath(cfg)}
            assert any(n in err for n in names), f"stderr does not name {cfg}:\n{err}"
            if line is not None:
                want = line if isinstance(line, frozenset) else frozenset([line])
                lines = {int(m.group(1)) for n in names
                         for m in re.finditer(re.escape(n) + r":(\d+)", err)}
                assert want & lines, \
                    f"stderr does not give line {sorted(want)} as '{cfg}:LINE' " \
                    f"(found {lines}):\n{err}"
        return err


@pytest.fixture
def ctx(lz, test_user):
    return Ctx(lz, test_user)


def _owned_0700(ctx, path):
    st = os.lstat(path)
    assert stat.S_ISDIR(st.st_mode), path
    assert stat.S_IMODE(st.st_mode) == 0o700, f"{path}: mode {oct(stat.S_IMODE(st.st_mode))}"
    assert st.st_uid == ctx.user.uid, f"{path}: owner {st.st_uid}"


# ============================================================ a. agreement

def test_base_is_valid(ctx):
    local = ctx.home / ".local"
    assert not local.exists()
    got = ctx.agree(schema_base())
    assert got["profile"] == "p"
    # The selected profile's Lazaret-owned roots and the created volume are
    # directories of the invoking user with mode exactly 0700 (spec 3.2).
    for path in (got["storage_root"], got["profile_dir"], got["runtime_root"],
                 os.path.join(got["profile_dir"], "state")):
        _owned_0700(ctx, path)
    # Components created beneath the closest existing ambient ancestor (the
    # home) are Lazaret-owned too: ~/.local and ~/.local/share.
    _owned_0700(ctx, local)
    _owned_0700(ctx, local / "share")


@pytest.mark.parametrize("dirs,warns", [
    (["/usr", "/root"], True),                        # the README's example before issue 12
    (["/usr/lib", "/root"], True),
    (["/usr/local", "/root"], False),                 # dpkg does not install there
    (["/usr", "/etc", "/var/lib/dpkg", "/root"], False),  # the README's example now
    (["/usr", "/var"], False),
    (["/root", "/opt/agent"], False),                 # /usr not kept: nothing to say
])
def test_usr_without_the_package_database_warns(ctx, dirs, warns):
    """config check advises (exit 0) when /usr persists without dpkg's
    database: the files of an installed package would survive a restart,
    the record of it would not (docs/configuration.md)."""
    d = base()
    d["profiles"]["p"]["persistent_dirs"] = dirs
    d["profiles"]["p"]["volumes"] = []
    ctx.config_text(emit(d))
    res = ctx.check("p", json_out=False)
    assert res.returncode == 0, res.stderr
    said = "lazaret: warning: profiles.p.persistent_dirs keeps /usr but not /var/lib/dpkg" \
        in res.stderr
    assert said == warns, res.stderr
    res = ctx.check("p")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["warnings"]) == (1 if warns else 0), res.stdout


def test_base_other_profile(ctx):
    ctx.agree(schema_base(), "other")


FULL = '''# Lazaret test configuration: every fingerprinted field.
schema = "lazaret-trusted-host-config-v1"

[network]
# host bits set, and a duplicate after normalization
default_allow = ["192.0.2.53/32", "198.51.100.7/24", "198.51.100.0/24", "0.0.0.0/0"]
default_deny = ["203.0.113.9/24", "100.64.0.0/10", "100.64.1.1/10", "192.168.0.0/16"]

[profiles.claude]
image = "docker.io/library/debian:trixie"
isolate_gitignored = false
persistent_dirs = ["/root", "/opt/agent", "/var/lib/agent", "/workspaces"]
# longer allows inside RFC 1918 and inside a global deny; a duplicate of a global allow
allow_egress = ["10.20.0.0/16", "172.16.5.5/24", "192.0.2.53/32", "100.64.0.0/16", "192.168.1.0/24"]
# a longer deny inside an allow; a duplicate of an RFC 1918 prefix
deny_egress = ["10.20.30.0/24", "192.168.0.0/16", "8.8.8.8/32", "0.0.0.0/1"]
env = { API_TOKEN = "env:LZ_TEST_SECRET", EDITOR = "env:LZ_EDITOR", a_lower = "env:LZ_TEST_SECRET" }

[[profiles.claude.volumes]]
host = "{profile_dir}/agent-state"
container = "/root/.local/state/agent"
kind = "directory"
create = true

[[profiles.claude.volumes]]
host = "{profile_dir}/deep/er/cache"
container = "/var/lib/agent/cache"
kind = "directory"
access = "read-only"
create = true

[[profiles.claude.volumes]]
host = "~/.gitconfig"
container = "/root/.gitconfig"
kind = "file"
access = "read-only"

[[profiles.claude.volumes]]
host = "@ABS@"
container = "/opt/agent/data"
kind = "directory"
access = "read-only"

[[profiles.claude.volumes]]
host = "~/cache"
container = "/workspaces/cache"
kind = "directory"
access = "read-write"

[[profiles.claude.volumes]]
host = "~/notes.txt"
container = "/opt/agent/notes.txt"
kind = "file"

[profiles.claude.escalation]
enabled = true
auto_approve = [
  { executable = "/usr/bin/true" },
  { executable = "/usr/bin/env", args = ["git", "status"], allow_extra_args = true },
  { executable = "/bin/true", args = ["--version"] },
  { executable = "~/bin/mytool", args = ["b", "a"] },
  { executable = "/usr/bin/env", args = ["git", "status"] },
]

[profiles."codex.v2_beta-1"]
image = "ghcr.io/example/codex@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
persistent_dirs = ["/home/agent"]
allow_egress = ["198.51.100.0/25"]

[profiles.minimal]
image = "x"
'''


def prepare_full(ctx):
    ctx.mkdir(ctx.home / "abs-data")
    ctx.mkdir(ctx.home / "cache")
    ctx.write(ctx.home / "notes.txt", "notes\n", mode=0o644)
    ctx.mkdir(ctx.home / "bin")
    ctx.copy_exe(ctx.home / "bin" / "mytool")
    return FULL.replace("@ABS@", str(ctx.home / "abs-data"))


FULL_ENV = {"LZ_TEST_SECRET": SECRET, "LZ_EDITOR": SECRET2}


def test_full_configuration_agrees(ctx):
    text = prepare_full(ctx)
    got = ctx.agree(text, "claude", env=FULL_ENV)
    # Independent spot checks of the normalization the reference implements.
    assert got["network"]["allow"] == [
        "0.0.0.0/0", "10.20.0.0/16", "100.64.0.0/16", "172.16.5.0/24", "192.0.2.53/32",
        "192.168.1.0/24", "198.51.100.0/24"]
    assert got["network"]["deny"] == [
        "0.0.0.0/1", "8.8.8.8/32", "10.0.0.0/8", "10.20.30.0/24", "100.64.0.0/10",
        "172.16.0.0/12", "192.168.0.0/16", "203.0.113.0/24"]
    assert got["environment"] == [{"name": "API_TOKEN", "from": "LZ_TEST_SECRET"},
                                  {"name": "EDITOR", "from": "LZ_EDITOR"},
                                  {"name": "a_lower", "from": "LZ_TEST_SECRET"}]
    assert [r["executable"] for r in got["escalation"]["auto_approve"]] == [
        "/usr/bin/true", "/usr/bin/env", "/usr/bin/true",
        os.path.realpath(ctx.home / "bin" / "mytool"), "/usr/bin/env"]
    assert got["escalation"]["auto_approve"][3]["args"] == ["b", "a"]
    assert got["isolate_gitignored"] is False
    for sub in ("agent-state", "deep", "deep/er", "deep/er/cache"):
        _owned_0700(ctx, os.path.join(got["profile_dir"], sub))


def test_full_other_profiles_agree(ctx):
    text = prepare_full(ctx)
    ctx.config_text(text)
    # Nonselected profile "claude" references unset variables: not resolved.
    got = ctx.agree(text, "codex.v2_beta-1", write=False)
    assert got["profile_dir"].endswith("/profiles/codex.v2_beta-1")
    assert got["isolate_gitignored"] is True and got["escalation"] == {
        "enabled": False, "auto_approve": []}
    ctx.agree(text, "minimal", write=False)


def test_human_output(ctx):
    text = prepare_full(ctx)
    got = ctx.agree(text, "claude", env=FULL_ENV)
    res = ctx.check("claude", json_out=False, env=FULL_ENV)
    assert res.returncode == 0, res.stderr
    assert got["domain_id"] in res.stdout
    assert got["configuration_fingerprint"] in res.stdout
    assert "claude" in res.stdout


def test_secret_never_printed_on_failure(ctx):
    text = prepare_full(ctx).replace('host = "~/cache"', 'host = "~/no-such-cache"')
    ctx.config_text(text)
    for json_out in (True, False):
        res = ctx.check("claude", json_out=json_out, env=FULL_ENV)   # asserts no secret
        ctx.refused(res, ["profiles.claude.volumes[4].host"])


@pytest.mark.parametrize("where", ["data_root-home", "data_root-abs", "xdg-abs", "xdg-empty",
                                   "xdg-relative", "xdg-unset"])
def test_storage_root_selection(ctx, where):
    d = base()
    env = {}
    xdg = ctx.home / "xdgdata"
    ctx.mkdir(xdg)
    if where == "data_root-home":
        d["storage"] = {"data_root": "~/lzdata/root"}
        env["XDG_DATA_HOME"] = str(xdg)         # ignored: data_root wins
    elif where == "data_root-abs":
        d["storage"] = {"data_root": str(ctx.home / "abs" / "lz")}
    elif where == "xdg-abs":
        env["XDG_DATA_HOME"] = str(xdg)
    elif where == "xdg-empty":
        env["XDG_DATA_HOME"] = ""
    elif where == "xdg-relative":
        env["XDG_DATA_HOME"] = "xdgdata"
    got = ctx.agree(emit(d), env=env)
    expect = {
        "data_root-home": ctx.home / "lzdata" / "root",
        "data_root-abs": ctx.home / "abs" / "lz",
        "xdg-abs": xdg / "lazaret",
    }.get(where, ctx.home / ".local" / "share" / "lazaret")
    assert got["storage_root"] == os.path.realpath(expect)
    assert got["profile_dir"] == os.path.realpath(expect) + "/profiles/p"
    _owned_0700(ctx, got["storage_root"])


def test_runtime_root(ctx, lz):
    other = ctx.mkdir(ctx.home / "run2", mode=0o700)
    got = ctx.agree(schema_base(), env={"XDG_RUNTIME_DIR": str(other)})
    assert got["runtime_root"] == os.path.realpath(other) + "/lazaret"
    _owned_0700(ctx, got["runtime_root"])


def test_config_file_selection(ctx):
    text = schema_base()
    # --config at another place
    alt = ctx.home / "elsewhere" / "lz.toml"
    got = ctx.agree(text, config=alt)
    assert got["config_file"] == os.path.realpath(alt)
    # XDG_CONFIG_HOME (absolute) wins over ~/.config; the default file is absent
    xdg = ctx.home / "xdgconf"
    xcfg = xdg / "lazaret" / "config.toml"
    ctx.config_text(text, xcfg)
    res = ctx.check(env={"XDG_CONFIG_HOME": str(xdg)})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["config_file"] == os.path.realpath(xcfg)
    # relative or empty XDG_CONFIG_HOME: treated as unset, ~/.config is used
    ctx.config_text(text.replace("example.org/other:1", "example.org/other:2"))
    for value in ("xdgconf", ""):
        res = ctx.check(env={"XDG_CONFIG_HOME": value})
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["config_file"] == os.path.realpath(ctx.config)


def test_config_symlink_resolved_once(ctx):
    real = ctx.home / "real" / "config.toml"
    ctx.config_text(schema_base(), real)
    link = ctx.symlink(str(real), ctx.home / "link.toml")
    got = ctx.agree(schema_base(), config=link, write=False)
    assert got["config_file"] == os.path.realpath(real)


def test_workspace_symlink_is_canonical(ctx):
    link = ctx.symlink(str(ctx.ws), ctx.home / "wslink")
    got = ctx.agree(schema_base(), ws=link)
    assert got["workspace"] == os.path.realpath(ctx.ws)
    assert got["domain_id"] == lzref.domain_id("p", os.path.realpath(ctx.ws)).hex()


def test_executable_owned_by_root_or_user(ctx):
    d = base()
    ctx.mkdir(ctx.home / "bin")
    ctx.copy_exe(ctx.home / "bin" / "mine")
    R(d)["executable"] = "~/bin/mine"
    d["profiles"]["p"]["escalation"]["auto_approve"].append({"executable": "/usr/bin/env"})
    ctx.agree(emit(d))


def test_config_owned_by_root_accepted(ctx):
    ctx.config_text(schema_base(), mode=0o644)
    os.chown(ctx.config, 0, 0)
    ctx.agree(schema_base(), write=False)


def test_config_exactly_max_size_accepted(ctx):
    text = schema_base()
    pad = lzref.MAX_CONFIG_BYTES - len(text.encode())
    body = ("#" * 999 + "\n") * ((pad - 1) // 1000)
    body += "#" * (pad - len(body) - 1) + "\n"
    text += body
    assert len(text.encode()) == lzref.MAX_CONFIG_BYTES
    ctx.agree(text)
    ctx.config_text(text + "\n")
    ctx.refused(ctx.check(), None)


def test_nonselected_profile_not_resolved(ctx):
    d = base()
    d["profiles"]["other"] = {
        "image": "x", "persistent_dirs": ["/root"], "env": {"A": "env:LZ_UNSET_VARIABLE_X"},
        "volumes": [{"host": "~/does-not-exist", "container": "/root/x", "kind": "directory"}],
        "escalation": {"enabled": True, "auto_approve": [{"executable": "/usr/bin/nonexistent"}]},
    }
    ctx.agree(emit(d))


def test_dns_prefix_and_longest_prefix_overlaps_valid(ctx):
    d = base()
    P(d)["allow_egress"] = ["10.1.0.0/16", "172.16.0.0/13", "192.168.0.0/17", "203.0.113.0/24"]
    P(d)["deny_egress"] = ["10.1.2.0/24", "203.0.113.0/25"]
    got = ctx.agree(emit(d))
    assert "172.16.0.0/13" in got["network"]["allow"]


def test_workspace_like_destination_valid(ctx):
    d = base()
    P(d)["persistent_dirs"] = ["/root", "/opt/agent", "/workspaces", "/work", "/runner",
                               "/run/lazaret2", "/devices", "/system"]
    V(d, 2)["container"] = "/workspaces/data"
    ctx.agree(emit(d))


# ============================================================ b. invariance

def _fp(ctx, text, profile="p", env=None, **kw):
    got = ctx.agree(text, profile, env=env, **kw)
    return got["configuration_fingerprint"], got["domain_id"]


def test_invariance(ctx):
    d0 = base()
    fp0, id0 = _fp(ctx, emit(d0))

    same = []
    # comments and blank lines
    same.append(("comments", "# leading comment\n\n" + emit(d0).replace(
        "\n[profiles.p]\n", "\n[profiles.p] # trailing comment\n# a comment line\n\n")))
    # declaration order: keys, tables, profiles, list items
    d = base()
    p = P(d)
    d["profiles"] = {"other": d["profiles"]["other"], "p": {k: p[k] for k in reversed(list(p))}}
    P(d)["persistent_dirs"].reverse()
    P(d)["volumes"] = [dict(reversed(list(v.items()))) for v in reversed(P(d)["volumes"])]
    d["network"] = dict(reversed(list(d["network"].items())))
    same.append(("order", emit(d)))
    # inline tables instead of sections and arrays of tables
    d = base()
    esc, vols = P(d).pop("escalation"), P(d).pop("volumes")
    text = emit(d).replace("\n[profiles.p]\n", "\n[profiles.p]\nescalation = " + _val(esc)
                           + "\nvolumes = " + _val(vols) + "\n")
    same.append(("inline-tables", text))
    # dotted keys
    d = base()
    P(d).pop("env")
    same.append(("dotted-keys", emit(d).replace(
        "\n[profiles.p]\n", '\n[profiles.p]\nenv.TOKEN = "env:HOSTVAR"\n')))
    # literal strings instead of basic strings
    same.append(("literal-strings", emit(d0).replace('"docker.io/library/debian:trixie"',
                                                     "'docker.io/library/debian:trixie'")))
    # explicit defaults equal to the implicit ones
    d = base()
    V(d, 2)["access"] = "read-write"
    V(d, 1)["create"] = False
    V(d, 2)["create"] = False
    d["storage"] = {}
    P(d)["isolate_gitignored"] = True
    same.append(("explicit-defaults", emit(d)))
    d = base()
    del V(d, 2)["access"]
    del P(d)["isolate_gitignored"]
    same.append(("implicit-defaults", emit(d)))
    # host bits, duplicates, union members present twice, explicit RFC 1918
    d = base()
    P(d)["allow_egress"] = ["203.0.113.77/24", "203.0.113.0/24", "192.0.2.53/32"]
    P(d)["deny_egress"] = ["203.0.113.200/25", "10.0.0.0/8", "172.31.0.0/12"]
    d["network"]["default_deny"] = ["198.51.100.1/24", "198.51.100.0/24", "192.168.0.0/16"]
    same.append(("network-normalization", emit(d)))
    # the canonical executable, not the declared spelling
    d = base()
    R(d)["executable"] = "/bin/true"
    same.append(("executable-spelling", emit(d)))
    # a nonselected profile's changes
    d = base()
    d["profiles"]["other"] = {"image": "different", "persistent_dirs": ["/root"],
                              "isolate_gitignored": False, "allow_egress": ["1.2.3.0/24"]}
    d["profiles"]["third"] = {"image": "third"}
    same.append(("nonselected", emit(d)))
    d = base()
    del d["profiles"]["other"]
    same.append(("nonselected-removed", emit(d)))

    for name, text in same:
        assert _fp(ctx, text) == (fp0, id0), f"{name} changed the digests"

    # rules are an order-independent collection
    d = base()
    d["profiles"]["p"]["escalation"]["auto_approve"] = [
        {"executable": "/usr/bin/env", "args": ["a"]},
        {"executable": "/usr/bin/true", "args": ["x"], "allow_extra_args": True}]
    fp_a, _ = _fp(ctx, emit(d))
    d["profiles"]["p"]["escalation"]["auto_approve"].reverse()
    assert _fp(ctx, emit(d))[0] == fp_a, "rule order changed the fingerprint"
    # host environment values
    assert _fp(ctx, emit(d0), env={"HOSTVAR": SECRET2}) == (fp0, id0)
    # the configuration source pathname
    alt = ctx.home / "alt" / "config.toml"
    assert _fp(ctx, emit(d0), config=alt) == (fp0, id0)
    # the workspace: domain id only
    ws2 = ctx.mkdir(ctx.home / "ws2")
    fp, did = _fp(ctx, emit(d0), ws=ws2)
    assert fp == fp0 and did != id0
    # data_root spelled ~/ or absolute, equal to the default
    d = base()
    d["storage"] = {"data_root": "~/.local/share/lazaret"}
    assert _fp(ctx, emit(d)) == (fp0, id0)
    d["storage"] = {"data_root": str(ctx.home / ".local" / "share" / "lazaret")}
    assert _fp(ctx, emit(d)) == (fp0, id0)
    # XDG_DATA_HOME naming the default place
    assert _fp(ctx, emit(d0), env={"XDG_DATA_HOME": str(ctx.home / ".local" / "share")}) == \
        (fp0, id0)


def test_invariance_all_defaults_explicit(ctx):
    implicit = {"schema": SCHEMA_ID, "profiles": {"p": {"image": "i"}}}
    explicit = {"schema": SCHEMA_ID, "storage": {},
                "network": {"default_allow": [], "default_deny": []},
                "profiles": {"p": {"image": "i", "isolate_gitignored": True,
                                   "persistent_dirs": [], "allow_egress": [], "deny_egress": [],
                                   "env": {}, "volumes": Raw("[]"),
                                   "escalation": {"enabled": False, "auto_approve": []}}}}
    a = _fp(ctx, emit(implicit))
    assert _fp(ctx, emit(explicit)) == a
    explicit["profiles"]["p"]["escalation"] = {}
    assert _fp(ctx, emit(explicit)) == a
    # and not equal to a profile whose escalation is enabled
    explicit["profiles"]["p"]["escalation"] = {"enabled": True}
    assert _fp(ctx, emit(explicit)) != a


def _mutations(ctx):
    """(name, mutate(doc), env or None): each changes one fingerprinted field."""
    ctx.mkdir(ctx.home / "data2")
    ctx.write(ctx.home / ".gitconfig2", "x\n", mode=0o644)
    ctx.mkdir(ctx.home / "bin")
    ctx.copy_exe(ctx.home / "bin" / "tool")
    run2 = ctx.mkdir(ctx.home / "run2", mode=0o700)
    m = [
        ("storage-root", _set(("storage",), {"data_root": "~/lzdata"}), None),
        ("runtime-root", lambda d: None, {"XDG_RUNTIME_DIR": str(run2)}),
        ("image", _set(PP + ("image",), "docker.io/library/debian:bookworm"), None),
        ("isolate", _set(PP + ("isolate_gitignored",), False), None),
        ("persistent-add", _set(PP + ("persistent_dirs",), ["/root", "/opt/agent", "/srv"]), None),
        ("persistent-widen", _set(PP + ("persistent_dirs",), ["/root", "/opt"]), None),
        ("env-sandbox-name", _set(PP + ("env",), {"TOKEN2": "env:HOSTVAR"}), None),
        ("env-host-name", _set(PP + ("env",), {"TOKEN": "env:HOSTVAR2"}), {"HOSTVAR2": SECRET}),
        ("env-add", _set(PP + ("env",), {"TOKEN": "env:HOSTVAR", "B": "env:HOSTVAR"}), None),
        ("env-remove", _set(PP + ("env",), {}), None),
        ("volume-source", _set(VOL(2) + ("host",), "~/data2"), None),
        ("volume-container", _set(VOL(2) + ("container",), "/opt/agent/data2"), None),
        ("volume-access", _set(VOL(2) + ("access",), "read-only"), None),
        ("volume-access-file", _set(VOL(1) + ("access",), "read-write"), None),
        ("volume-create", _set(VOL(0) + ("create",), False), None),   # after base created it
        ("volume-kind", _do(_set(VOL(2) + ("host",), "~/.gitconfig2"),
                            _set(VOL(2) + ("kind",), "file")), None),
        ("volume-remove", lambda d: P(d)["volumes"].pop(2), None),
        ("allow-add", _set(PP + ("allow_egress",), ["203.0.113.0/24", "1.1.1.1/32"]), None),
        ("allow-length", _set(PP + ("allow_egress",), ["203.0.113.0/23"]), None),
        ("global-allow", _set(("network", "default_allow"), []), None),
        ("deny-add", _set(PP + ("deny_egress",), ["203.0.113.128/25", "9.9.9.9/32"]), None),
        ("global-deny", _set(("network", "default_deny"), []), None),
        ("escalation-disabled", _set(PP + ("escalation",), {"enabled": False}), None),
        ("escalation-enabled-no-rules", _set(PP + ("escalation",), {"enabled": True}), None),
        ("rule-executable", _set(RULE() + ("executable",), "~/bin/tool"), None),
        ("rule-executable-env", _set(RULE() + ("executable",), "/usr/bin/env"), None),
        ("rule-args", _set(RULE() + ("args",), ["y"]), None),
        ("rule-args-more", _set(RULE() + ("args",), ["x", "y"]), None),
        ("rule-extra", _set(RULE() + ("allow_extra_args",), False), None),
        ("rule-add", lambda d: P(d)["escalation"]["auto_approve"].append(
            {"executable": "/usr/bin/env"}), None),
    ]
    return m


def test_every_fingerprinted_field_matters(ctx):
    fp0, id0 = _fp(ctx, schema_base())
    seen = {fp0: "base"}
    for name, mutate, env in _mutations(ctx):
        d = base()
        mutate(d)
        fp, did = _fp(ctx, emit(d), env=env)
        assert fp not in seen, f"{name}: fingerprint equals that of {seen.get(fp)}"
        seen[fp] = name
        assert did == id0, f"{name} changed the domain id"
    # args order is significant
    d = base()
    R(d)["args"] = ["1", "2"]
    a, _ = _fp(ctx, emit(d))
    R(d)["args"] = ["2", "1"]
    b, _ = _fp(ctx, emit(d))
    assert a != b
    # the profile name alone: same content (no {profile_dir} volume) under two names
    d = base()
    P(d)["volumes"].pop(0)
    d["profiles"]["q"] = copy.deepcopy(P(d))
    fp_p, _ = _fp(ctx, emit(d), "p")
    fp_q, id_q = _fp(ctx, emit(d), "q")
    assert fp_p != fp_q and id_q != id0


# ============================================================ c. refusals

@pytest.mark.parametrize("case", _schema_case_table(), ids=lambda c: c[0])
def test_schema_refusal(ctx, case):
    name, mutate, keys, needle = case
    d = base()
    mutate(d)
    text = emit(d)
    ctx.config_text(text)
    res = ctx.check()
    ctx.refused(res, keys, line=line_of(text, needle) if needle else None)


def test_toml_level_errors(ctx):
    text = schema_base()
    # duplicate key
    dup = text.replace('image = "docker.io/library/debian:trixie"',
                       'image = "docker.io/library/debian:trixie"\nimage = "x"')
    ctx.config_text(dup)
    ctx.refused(ctx.check(), None, line=line_of(dup, 'image = "x"'))
    # duplicate table
    dup = text + '\n[profiles.other]\nimage = "y"\n'
    ctx.config_text(dup)
    ctx.refused(ctx.check(), None, line=len(dup.splitlines()) - 1)
    # not UTF-8
    bad = text.encode().replace(b"example.org/other:1", b"example.org/other:\xff")
    ctx.config_text(bad)
    ctx.refused(ctx.check(), None)
    # not TOML
    ctx.config_text(text + "this is = = not toml\n")
    ctx.refused(ctx.check(), None, line=len(text.splitlines()) + 1)
    # empty file
    ctx.config_text("")
    ctx.refused(ctx.check(), ["schema", "profiles"])


def _fs_case(ctx, name):
    """Prepare the filesystem for a case; returns (doc, keys, env or None)."""
    h = ctx.home
    d = base()
    env = None
    k2 = f"{K}.volumes[2].host"
    ex = f"{K}.escalation.auto_approve[0].executable"
    if name == "source-missing":
        V(d, 2)["host"] = "~/nope"
        return d, [k2], env
    if name == "source-missing-deep":
        V(d, 2)["host"] = "~/nope/deeper"
        return d, [k2], env
    if name == "source-file-declared-directory":
        V(d, 2)["host"] = "~/.gitconfig"
        return d, [k2, f"{K}.volumes[2]"], env
    if name == "source-directory-declared-file":
        V(d, 1)["host"] = "~/data"
        V(d, 2)["host"] = "~/data2"
        ctx.mkdir(h / "data2")
        return d, [f"{K}.volumes[1].host", f"{K}.volumes[1]"], env
    if name == "source-symlink":
        ctx.symlink(str(h / "data"), h / "datalink")
        V(d, 2)["host"] = "~/datalink"
        return d, [k2], env
    if name == "source-symlink-file":
        ctx.symlink(str(h / ".gitconfig"), h / "gclink")
        V(d, 1)["host"] = "~/gclink"
        return d, [f"{K}.volumes[1].host"], env
    if name == "source-fifo":
        os.mkfifo(h / "fifo")
        ctx.chown(h / "fifo")
        V(d, 1)["host"] = "~/fifo"
        return d, [f"{K}.volumes[1].host"], env
    if name == "source-device":
        V(d, 1)["host"] = "/dev/null"
        return d, [f"{K}.volumes[1].host"], env
    if name == "create-over-existing-file":
        # create=true declared directory whose source is an existing file
        pdir = h / ".local" / "share" / "lazaret" / "profiles" / "p"
        for q in (h / ".local", h / ".local" / "share"):
            if not q.exists():
                ctx.mkdir(q)
        ctx.mkdir(pdir.parent.parent, 0o700)
        ctx.mkdir(pdir.parent, 0o700)
        ctx.mkdir(pdir, 0o700)
        ctx.write(pdir / "state", "not a directory\n")
        return d, [f"{K}.volumes[0].host", f"{K}.volumes[0]"], env
    if name == "sources-equal":
        P(d)["volumes"].append({"host": "~/.gitconfig", "container": "/opt/agent/gitconfig",
                                "kind": "file", "access": "read-only"})
        return d, [f"{K}.volumes[3].host", f"{K}.volumes[1].host"], env
    if name == "sources-file-in-directory":
        ctx.write(h / "data" / "f", "x\n")
        V(d, 1)["host"] = "~/data/f"
        return d, [f"{K}.volumes[1].host", k2], env
    if name == "sources-nested":
        ctx.mkdir(h / "data" / "sub")
        P(d)["volumes"].append({"host": "~/data/sub", "container": "/root/sub",
                                "kind": "directory"})
        return d, [f"{K}.volumes[3].host", k2], env
    if name == "sources-nested-reverse":
        ctx.mkdir(h / "data" / "sub")
        V(d, 2)["host"] = "~/data/sub"
        P(d)["volumes"].append({"host": "~/data", "container": "/root/sub",
                                "kind": "directory"})
        return d, [f"{K}.volumes[3].host", k2], env
    if name == "source-in-workspace":
        ctx.mkdir(ctx.ws / "sub")
        V(d, 2)["host"] = "~/ws/sub"
        return d, [k2], env
    if name == "source-is-workspace":
        V(d, 2)["host"] = "~/ws"
        return d, [k2], env
    if name == "source-is-config":
        V(d, 1)["host"] = "~/.config/lazaret/config.toml"
        return d, [f"{K}.volumes[1].host"], env
    if name == "source-contains-config":
        V(d, 2)["host"] = "~/.config"
        return d, [k2], env
    if name == "source-contains-storage":
        ctx.mkdir(h / ".local") if not (h / ".local").exists() else None
        V(d, 2)["host"] = "~/.local"
        return d, [k2], env
    if name == "source-in-storage-not-profile":
        root = h / "lzd"
        ctx.mkdir(root, 0o700)
        ctx.mkdir(root / "other", 0o700)
        d["storage"] = {"data_root": "~/lzd"}
        V(d, 2)["host"] = "~/lzd/other"
        return d, [k2], env
    if name == "source-contains-runtime":
        V(d, 2)["host"] = str(ctx.lz.runtime_dir)
        return d, [k2], env
    if name == "source-in-runtime":
        rt = Path(ctx.lz.runtime_dir) / "lazaret"
        ctx.mkdir(rt, 0o700)
        ctx.mkdir(rt / "x", 0o700)
        V(d, 2)["host"] = str(rt / "x")
        return d, [k2], env
    # executables
    if name == "exe-not-found":
        R(d)["executable"] = "/usr/bin/lazaret-no-such-tool"
        return d, [ex], env
    if name == "exe-directory":
        R(d)["executable"] = "/usr/bin"
        return d, [ex], env
    if name == "exe-device":
        R(d)["executable"] = "/dev/null"
        return d, [ex], env
    if name in ("exe-group-writable", "exe-other-writable", "exe-not-executable",
                "exe-hardlinked", "exe-foreign-owner", "exe-in-workspace", "exe-in-volume",
                "exe-in-profile-dir", "exe-in-storage", "exe-in-runtime"):
        mode = {"exe-group-writable": 0o775, "exe-other-writable": 0o757,
                "exe-not-executable": 0o644}.get(name, 0o755)
        where = {"exe-in-workspace": ctx.ws / "tool", "exe-in-volume": h / "data" / "tool",
                 "exe-in-storage": h / "lzd" / "tool",
                 "exe-in-profile-dir": h / "lzd" / "profiles" / "p" / "tool",
                 "exe-in-runtime": Path(ctx.lz.runtime_dir) / "lazaret" / "tool",
                 }.get(name, h / "bin" / "tool")
        if name in ("exe-in-storage", "exe-in-profile-dir"):
            d["storage"] = {"data_root": "~/lzd"}
            for q in (h / "lzd", h / "lzd" / "profiles", h / "lzd" / "profiles" / "p"):
                ctx.mkdir(q, 0o700)
        if name == "exe-in-runtime":
            ctx.mkdir(where.parent, 0o700)
        ctx.mkdir(where.parent) if not where.parent.exists() else None
        ctx.copy_exe(where, mode=mode)
        if name == "exe-hardlinked":
            os.link(where, h / "bin" / "tool-link")
        if name == "exe-foreign-owner":
            os.chown(where, 65534, 65534)
        R(d)["executable"] = str(where)
        return d, [ex], env
    if name == "exe-symlink-to-bad":
        ctx.mkdir(h / "bin")
        ctx.copy_exe(h / "bin" / "gw", mode=0o775)
        ctx.symlink(str(h / "bin" / "gw"), h / "bin" / "tool")
        R(d)["executable"] = "~/bin/tool"
        return d, [ex], env
    if name == "duplicate-after-canonicalization":
        P(d)["escalation"]["auto_approve"].append(
            {"executable": "/bin/true", "args": ["x"], "allow_extra_args": True})
        return d, [f"{K}.escalation.auto_approve[1]", f"{K}.escalation.auto_approve[0]"], env
    # environment
    if name == "env-missing":
        return d, [f"{K}.env.TOKEN"], {"HOSTVAR": None}
    if name == "env-not-utf8":
        return d, [f"{K}.env.TOKEN"], {"HOSTVAR": "lzS3cr3t\udcff"}
    raise AssertionError(name)


FS_CASES = [
    "source-missing", "source-missing-deep",
    "source-file-declared-directory", "source-directory-declared-file", "source-symlink",
    "source-symlink-file", "source-fifo", "source-device", "create-over-existing-file",
    "sources-equal", "sources-file-in-directory", "sources-nested", "sources-nested-reverse", "source-in-workspace",
    "source-is-workspace", "source-is-config", "source-contains-config",
    "source-contains-storage", "source-in-storage-not-profile", "source-contains-runtime",
    "source-in-runtime",
    "exe-not-found", "exe-directory", "exe-device", "exe-group-writable", "exe-other-writable",
    "exe-not-executable", "exe-hardlinked", "exe-foreign-owner", "exe-in-workspace",
    "exe-in-volume", "exe-in-profile-dir", "exe-in-storage", "exe-in-runtime",
    "exe-symlink-to-bad", "duplicate-after-canonicalization",
    "env-missing", "env-not-utf8",
]


@pytest.mark.parametrize("name", FS_CASES)
def test_resolution_refusal(ctx, name):
    d, keys, env = _fs_case(ctx, name)
    text = emit(d)
    ctx.config_text(text)
    res = ctx.check(env=env)
    err = ctx.refused(res, keys)
    assert "lzS3cr3t" not in res.stdout + err
    # The reference refuses it too, naming one of the same keys.
    with pytest.raises(lzref.Refused) as e:
        ctx.reference(text, env=env)
    assert e.value.key in keys or any(e.value.key and e.value.key.startswith(k) for k in keys), \
        (e.value.key, keys)


# -- the configuration source

def test_config_group_writable(ctx):
    ctx.config_text(schema_base(), mode=0o620)
    ctx.refused(ctx.check(), None)


def test_config_other_writable(ctx):
    ctx.config_text(schema_base(), mode=0o602)
    ctx.refused(ctx.check(), None)


def test_config_hard_links(ctx):
    ctx.config_text(schema_base())
    os.link(ctx.config, ctx.home / "config-link.toml")
    ctx.refused(ctx.check(), None)


def test_config_foreign_owner(ctx):
    ctx.config_text(schema_base(), mode=0o644)
    os.chown(ctx.config, 65534, 65534)
    ctx.refused(ctx.check(), None)


def test_config_too_large(ctx):
    text = schema_base()
    text += "#" * (lzref.MAX_CONFIG_BYTES + 1 - len(text.encode()) - 1) + "\n"
    assert len(text.encode()) == lzref.MAX_CONFIG_BYTES + 1
    ctx.config_text(text)
    ctx.refused(ctx.check(), None)


def test_config_directory(ctx):
    p = ctx.mkdir(ctx.home / "confdir")
    ctx.refused(ctx.check(config=p), None, config=p)


def test_config_missing(ctx):
    p = ctx.home / "missing.toml"
    ctx.refused(ctx.check(config=p), None, config=p)
    # the default location, absent
    ctx.refused(ctx.check(), None)


def test_config_fifo_does_not_block(ctx):
    p = ctx.home / "config.fifo"
    os.mkfifo(p, 0o600)
    ctx.chown(p)
    ctx.refused(ctx.check(config=p, timeout=20), None, config=p)


def test_config_device(ctx):
    ctx.refused(ctx.check(config="/dev/null"), None, config="/dev/null")


def test_config_symlink_into_workspace(ctx):
    inner = ctx.ws / "cfg" / "config.toml"
    ctx.config_text(schema_base(), inner)
    link = ctx.symlink(str(inner), ctx.home / "link.toml")
    res = ctx.check(config=link)
    ctx.refused(res, None, config=False)
    assert str(inner) in res.stderr or str(link) in res.stderr


def test_config_inside_workspace(ctx):
    inner = ctx.ws / "config.toml"
    ctx.config_text(schema_base(), inner)
    ctx.refused(ctx.check(config=inner), None, config=inner)


def test_config_path_grammar(ctx):
    """spec 3.2: "The explicit configuration path follows the schema's strict
    host-path grammar." (cwd is the home, where each spelling would find the file)"""
    ctx.config_text(schema_base())
    for bad in (".config/lazaret/config.toml", "./.config/lazaret/config.toml",
                str(ctx.home) + "//.config/lazaret/config.toml",
                str(ctx.home) + "/./.config/lazaret/config.toml",
                str(ctx.home) + "/ws/../.config/lazaret/config.toml",
                "~//.config/lazaret/config.toml"):
        res = ctx.check(config=bad)
        assert res.returncode in (1, 2), (bad, res.returncode, res.stdout, res.stderr)


def test_config_path_tilde(ctx):
    """A declared "~/" host path is expanded by Lazaret (host-path grammar)."""
    ctx.config_text(schema_base())
    res = ctx.check(config="~/.config/lazaret/config.toml")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["config_file"] == os.path.realpath(ctx.config)


# -- host inputs and roots

@pytest.mark.parametrize("value", [None, "", "run/user", "relative"])
def test_runtime_dir_invalid(ctx, value):
    ctx.config_text(schema_base())
    res = ctx.check(env={"XDG_RUNTIME_DIR": value})
    assert res.returncode == 1, res.stderr
    assert "XDG_RUNTIME_DIR" in res.stderr


@pytest.mark.parametrize("value", [None, "", "home/x"])
def test_home_invalid(ctx, value):
    ctx.config_text(schema_base())
    d = base()
    d["storage"] = {"data_root": str(ctx.home / "lzd")}
    ctx.config_text(emit(d))
    res = ctx.check(config=ctx.config, env={"HOME": value})
    assert res.returncode == 1, res.stderr
    assert "HOME" in res.stderr


@pytest.mark.parametrize("which", ["storage", "profile"])
def test_preexisting_root_mode_0755(ctx, which):
    root = ctx.home / ".local" / "share" / "lazaret"
    for q in (ctx.home / ".local", ctx.home / ".local" / "share"):
        if not q.exists():
            ctx.mkdir(q)
    if which == "storage":
        ctx.mkdir(root, 0o755)
        bad = root
    else:
        ctx.mkdir(root, 0o700)
        ctx.mkdir(root / "profiles", 0o700)
        bad = ctx.mkdir(root / "profiles" / "p", 0o755)
    ctx.config_text(schema_base())
    res = ctx.check()
    assert res.returncode == 1, res.stderr
    assert str(bad) in res.stderr or os.path.realpath(bad) in res.stderr, res.stderr
    if which == "storage":
        assert "chmod" in res.stderr, res.stderr


def test_preexisting_storage_root_0700_accepted(ctx):
    for q in (ctx.home / ".local", ctx.home / ".local" / "share"):
        if not q.exists():
            ctx.mkdir(q)
    ctx.mkdir(ctx.home / ".local" / "share" / "lazaret", 0o700)
    ctx.agree(schema_base())


def test_storage_root_foreign_owner(ctx):
    root = ctx.home / "lzd"
    ctx.mkdir(root, 0o700)
    os.chown(root, 0, 0)
    d = base()
    d["storage"] = {"data_root": "~/lzd"}
    ctx.config_text(emit(d))
    res = ctx.check()
    assert res.returncode == 1, res.stderr
    assert str(root) in res.stderr or os.path.realpath(root) in res.stderr, res.stderr


def test_storage_root_symlink_component_refused(ctx):
    ctx.mkdir(ctx.home / "real")
    ctx.symlink(str(ctx.home / "real"), ctx.home / "ln")
    d = base()
    d["storage"] = {"data_root": "~/ln/lz"}
    ctx.config_text(emit(d))
    res = ctx.check()
    # Resolved once to a canonical target, or refused: never created through
    # the link under a name that is not canonical.
    if res.returncode == 0:
        assert json.loads(res.stdout)["storage_root"] == os.path.realpath(ctx.home / "real/lz")
    else:
        assert res.returncode == 1


# -- the workspace

def test_workspace_contains_config(ctx):
    ctx.config_text(schema_base())
    ctx.refused(ctx.check(ws=ctx.home), None)


def test_workspace_contains_storage(ctx):
    d = base()
    d["storage"] = {"data_root": "~/ws/.lazaret"}
    ctx.config_text(emit(d))
    res = ctx.check()
    assert res.returncode == 1, res.stderr


def test_storage_contains_workspace(ctx):
    d = base()
    d["storage"] = {"data_root": "~/lzd"}
    ctx.mkdir(ctx.home / "lzd", 0o700)
    ws = ctx.mkdir(ctx.home / "lzd" / "ws", 0o700)
    ctx.config_text(emit(d))
    res = ctx.check(ws=ws)
    assert res.returncode == 1, res.stderr


def test_workspace_contains_runtime_root(ctx):
    ctx.config_text(schema_base())
    res = ctx.check(ws=ctx.lz.runtime_dir)
    assert res.returncode == 1, res.stderr


def test_workspace_is_storage_root(ctx):
    d = base()
    d["storage"] = {"data_root": "~/ws"}
    ctx.config_text(emit(d))
    res = ctx.check()
    assert res.returncode == 1, res.stderr


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_workspace_invalid(ctx, kind):
    ws = ctx.home / "not-a-ws"
    if kind == "file":
        ctx.write(ws, "x")
    ctx.config_text(schema_base())
    res = ctx.check(ws=ws)
    assert res.returncode == 1, res.stderr
    assert str(ws) in res.stderr


# -- the command line

def test_usage_errors(ctx):
    ctx.config_text(schema_base())
    for argv in (["config", "check"], ["config", "check", "p", "--bogus"],
                 ["config", "check", "--bogus", "p"], ["config", "check", "p", "--workspace"],
                 ["config", "check", "p", "q"], ["--config"]):
        res = ctx.check(args=argv)
        assert res.returncode == 2, (argv, res.returncode, res.stderr)
        assert res.stderr.strip(), argv


def test_unknown_profile(ctx):
    ctx.config_text(schema_base())
    for name in ("nope", "P", "othe", "p.", "pp"):
        res = ctx.check(name)
        assert res.returncode == 1, (name, res.stderr)
        assert "other" in res.stderr and re.search(r"\bp\b", res.stderr), res.stderr
    # a name the grammar refuses is refused as such (never matched loosely)
    for name in ("p ", "..", "-p", "p/x", "a" * 65):
        res = ctx.check(name)
        assert res.returncode in (1, 2), (name, res.returncode, res.stderr)


def test_default_workspace_is_cwd(ctx):
    text = schema_base()
    ctx.config_text(text)
    res = ctx.lz.run(["config", "check", "p", "--json"], env=ctx.run_env(), cwd=ctx.ws)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    ref = ctx.reference(text)
    assert got["workspace"] == ref["workspace"]
    assert got["domain_id"] == ref["domain_id"]
    assert got["configuration_fingerprint"] == ref["configuration_fingerprint"]


# ============================================ d. configuration v2 (issue 25)

SCHEMA_V2 = "lazaret-trusted-host-config-v2"
README = Path(__file__).resolve().parent.parent.parent / "README.md"

V2_TEXT = f'''schema = "{SCHEMA_V2}"

[network]
default_deny_hosts = ["*.telemetry.example.net"]
resolvers = ["203.0.113.53", "127.0.0.53"]

[profiles.p]
image = "docker.io/library/debian:trixie"
allow_hosts = ["registry.npmjs.org", "api.anthropic.com", "*.example.com"]
deny_hosts = ["ads.example.com"]

[profiles.fwd]
image = "docker.io/library/debian:trixie"
allow_hosts = ["api.anthropic.com"]
dns = "forward"

[profiles.none]
image = "docker.io/library/debian:trixie"
'''

STRICT_LINE = ("dns:                       strict: names no allow_hosts pattern covers are "
               "answered NXDOMAIN here and never leave this machine")
FORWARD_LINE = ("dns:                       forward: names not denied are asked upstream (a "
                "made-up name leaves this machine); add allow_hosts or dns = \"strict\" to keep "
                "them here")


def test_v2_shows_host_rules_mode_and_resolvers(ctx):
    ctx.config_text(V2_TEXT)
    res = ctx.check("p", json_out=False)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # The effective rules: the profile's and [network]'s, allow then deny.
    block = re.search(r"^host rules \(.*\):\n((?:  .*\n)+)", out, re.M)
    assert block, out
    assert block.group(1).splitlines() == [
        "  allow api.anthropic.com", "  allow *.example.com", "  allow registry.npmjs.org",
        "  deny  ads.example.com", "  deny  *.telemetry.example.net"], out
    assert STRICT_LINE + "\n" in out, out
    assert "resolvers:                 203.0.113.53 127.0.0.53\n" in out, out
    got = json.loads(ctx.check("p").stdout)
    assert got["hosts"] == {"allow": ["api.anthropic.com", "*.example.com", "registry.npmjs.org"],
                            "deny": ["ads.example.com", "*.telemetry.example.net"]}
    assert got["dns"] == {"mode": "strict", "explicit": False,
                          "resolvers": ["203.0.113.53", "127.0.0.53"]}

    # An explicit forward, and a profile without host rules (forward by
    # default); the resolvers apply to every profile.
    res = ctx.check("fwd", json_out=False)
    assert res.returncode == 0 and FORWARD_LINE + "\n" in res.stdout, res.stdout
    got = json.loads(ctx.check("fwd").stdout)
    assert got["dns"]["mode"] == "forward" and got["dns"]["explicit"] is True
    res = ctx.check("none", json_out=False)
    assert FORWARD_LINE + "\n" in res.stdout, res.stdout
    assert re.search(r"^  deny  \*\.telemetry\.example\.net$", res.stdout, re.M), res.stdout

    # Without [network] resolvers: the host's own.
    ctx.config_text(V2_TEXT.replace('resolvers = ["203.0.113.53", "127.0.0.53"]\n', ""))
    res = ctx.check("p", json_out=False)
    assert "resolvers:                 the host's resolv.conf nameservers\n" in res.stdout, \
        res.stdout


def test_v1_output_gains_only_the_dns_line(ctx):
    ctx.config_text(schema_base())
    res = ctx.check("p", json_out=False)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    dns = [ln for ln in lines if ln.startswith("dns:")]
    assert dns == [FORWARD_LINE.replace('dns = "strict" to keep them here',
                                        f'dns = "strict" (schema "{SCHEMA_V2}") to keep them '
                                        'here')], res.stdout
    # Nothing else of v2 in a v1 file's output, text or JSON.
    assert not any(ln.startswith(("host rules", "resolvers:")) for ln in lines), res.stdout
    got = json.loads(ctx.check("p").stdout)
    assert "hosts" not in got and "dns" not in got


def test_v2_contradiction_refused_with_position(ctx):
    text = V2_TEXT.replace('default_deny_hosts = ["*.telemetry.example.net"]',
                           'default_deny_hosts = ["*.telemetry.example.net", "registry.npmjs.org"]')
    ctx.config_text(text)
    res = ctx.check("p", json_out=False)
    err = ctx.refused(res, ["profiles.p.allow_hosts[0]"], line=9)
    # FILE:LINE:COL of the allowed pattern, where it is denied, and a fix.
    assert f"{os.path.realpath(ctx.config)}:9:16: profiles.p.allow_hosts[0]: " \
        "'registry.npmjs.org' is both allowed and denied for profile 'p' (denied by " \
        "network.default_deny_hosts[1] at line 4, column 50)" in err, err
    assert "fix: remove it from one of the two lists" in err, err
    # Control: the same file without the contradiction is valid.
    ctx.config_text(V2_TEXT)
    assert ctx.check("p", json_out=False).returncode == 0


@pytest.mark.parametrize("value,needle,fix", [
    ('"Api.Anthropic.com"', "uppercase", 'write "api.anthropic.com"'),
    ('"api.anthropic.com."', "trailing dot", 'write "api.anthropic.com" (no trailing dot)'),
    ('"bücher.example"', "non-ASCII", "xn--"),
    ('"203.0.113.7"', "IPv4 address", 'allow_egress = ["203.0.113.7/32"]'),
    ('"localhost"', "single label", "at least two labels"),
    ('"a.*.example.com"', "whole first label", '"*.example.com"'),
])
def test_v2_bad_pattern_refused_with_position(ctx, value, needle, fix):
    text = V2_TEXT.replace('"registry.npmjs.org", ', f"{value}, ", 1)
    ctx.config_text(text)
    err = ctx.refused(ctx.check("p", json_out=False), ["profiles.p.allow_hosts[0]"], line=9)
    assert f"{os.path.realpath(ctx.config)}:9:16: profiles.p.allow_hosts[0]: " in err, err
    assert needle in err and fix in err, err


def test_v1_refuses_the_v2_keys(ctx):
    d = base()
    P(d)["allow_hosts"] = ["api.anthropic.com"]
    ctx.config_text(emit(d))
    err = ctx.refused(ctx.check("p", json_out=False), ["profiles.p.allow_hosts"])
    assert "unknown field 'allow_hosts'" in err and SCHEMA_V2 in err, err


def readme_toml_example() -> str:
    """The README's configuration example: the ```toml block that has the
    schema line (there must be exactly one)."""
    blocks = re.findall(r"^```toml\n(.*?)^```$", README.read_text(), re.M | re.S)
    examples = [b for b in blocks if re.search(r"^schema = ", b, re.M)]
    assert len(examples) == 1, f"{len(examples)} README toml blocks with a schema line"
    return examples[0]


def test_readme_example_parses(ctx):
    """The README's own example is a valid configuration, loaded exactly as
    `lazaret run` loads it (a user once found it did not parse)."""
    text = readme_toml_example()
    assert SCHEMA_V2 in text and "allow_hosts" in text
    ctx.config_text(text)
    headers = re.findall(r"^\[profiles\.([A-Za-z0-9._-]+)\]$", text, re.M)
    # [profiles.NAME.escalation] and the like are tables of a profile.
    profiles = [h for h in headers if not any(h.startswith(o + ".") for o in headers)]
    assert profiles, text
    for name in profiles:
        res = ctx.check(name, json_out=False, env={"ANTHROPIC_API_KEY": "not-a-real-key"})
        assert res.returncode == 0, f"README profile {name}:\n{res.stderr}"
        assert "host rules" in res.stdout and STRICT_LINE in res.stdout, res.stdout
    # Control: the check would catch a broken example.
    ctx.config_text(text.replace("allow_hosts = [", "allow_hosts = [\"Bad..name\", ", 1))
    res = ctx.check(profiles[0], json_out=False, env={"ANTHROPIC_API_KEY": "not-a-real-key"})
    assert res.returncode == 1, res.stdout


def test_v2_fingerprint_agrees_with_an_independent_framing(ctx):
    """ConfigurationFingerprintV2 as docs/configuration.md frames it, computed
    here from lzref's v1 record of the same file without its v2 keys; the
    Domain ID is the v1 one."""
    ctx.config_text(V2_TEXT)
    got = json.loads(ctx.check("p").stdout)
    v2_keys = ("allow_hosts", "deny_hosts", "dns", "default_allow_hosts", "default_deny_hosts",
               "default_dns", "resolvers")
    v1_text = "\n".join(ln for ln in V2_TEXT.replace(SCHEMA_V2, SCHEMA_ID).splitlines()
                        if not ln.startswith(v2_keys)) + "\n"
    v1_text = v1_text.replace("[network]\n", "")
    ctx.config_text(v1_text)
    ref = ctx.reference(v1_text)
    body = lzref.fingerprint_preimage(ref["_record"])[len(lzref.FINGERPRINT_SEP):]

    def hosts(patterns):
        return lzref.frame_list(lzref.frame_bytes(p.encode()) for p in patterns)

    pre = (b"lazaret-configuration-fingerprint-v2\x00" + body
           + hosts(["registry.npmjs.org", "api.anthropic.com", "*.example.com"])
           + hosts(["ads.example.com", "*.telemetry.example.net"])
           + lzref.frame_bytes(b"strict")
           + lzref.frame_list([lzref.frame_bytes(bytes([203, 0, 113, 53])),
                               lzref.frame_bytes(bytes([127, 0, 0, 53]))], sort=False))
    assert got["configuration_fingerprint"] == hashlib.sha256(pre).hexdigest()
    assert got["domain_id"] == ref["domain_id"]
    # Control: the v1 file's own fingerprint is V1's, and differs.
    assert ref["configuration_fingerprint"] != got["configuration_fingerprint"]
    v1 = json.loads(ctx.check("p").stdout)
    assert v1["configuration_fingerprint"] == ref["configuration_fingerprint"]
