# SPDX-License-Identifier: Apache-2.0
"""lzref: an independent Python reference of `lazaret config check`.

Written only from the specification (docs/schema.md "Trusted host
configuration" and "Domain and configuration digests", specification 3.2),
never from the C sources, so that the integration tests compare two
implementations rather than one with itself. Standard library only.

    resolve(text, profile, workspace, home=..., xdg_runtime_dir=..., ...)
        -> dict shaped exactly like `lazaret config check --json`
           (plus nothing else); raises Refused(key, message) on an invalid
           configuration, naming the dotted key path ("profiles.p.volumes[1].kind")
           or None when the refusal is not about one key.

    domain_id(profile, workspace) -> 32 bytes
    fingerprint(record) -> 32 bytes, record = FingerprintRecord(...)

Framing (schema): bytes(x) = u32be(len(x)) || x; boolean = one byte 0/1;
list = u32be(count) || bytes(item_encoding) for every item, the item
encodings sorted by unsigned bytewise order (arguments inside a rule keep
their declared order).

One point of the text admits two readings; the default follows the letter:
  "A persistent-path item is `bytes(path)`, and an argument item is
   `bytes(arg)`" and "Each list is u32be(item_count) followed by
   bytes(item_encoding) for every item".
Read literally the item encoding of a path is already bytes(path), so the
list carries bytes(bytes(path)) ("literal"). The other reading takes the
sentence as describing what the list carries, i.e. the item encoding is the
raw path ("single"). FRAMING_VARIANTS lists every variant the tests try when
a digest disagrees, so a mismatch report can say which reading the other
side implemented.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import stat
import struct
import tomllib
from dataclasses import dataclass, field

SCHEMA_ID = "lazaret-trusted-host-config-v1"
MAX_CONFIG_BYTES = 1048576
DOMAIN_SEP = b"lazaret-domain-id-v1\x00"
FINGERPRINT_SEP = b"lazaret-configuration-fingerprint-v1\x00"
RFC1918 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
# The only destination the configuration semantics fix (spec 3.2); the
# production layout adds product-owned ones, which callers may pass in.
SPEC_PROTECTED = ("/workspace",)

PROFILE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z", re.ASCII)
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z", re.ASCII)
IPV4_RE = re.compile(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})"
                     r"\.(0|[1-9][0-9]{0,2})/(0|[1-9][0-9]?)\Z", re.ASCII)


class Refused(Exception):
    """The configuration (or its environment) is refused."""

    def __init__(self, key, message):
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


# ---------------------------------------------------------------- framing

def u32be(n: int) -> bytes:
    if not 0 <= n <= 0xFFFFFFFF:
        raise OverflowError("length or count does not fit u32")
    return struct.pack(">I", n)


def frame_bytes(x: bytes) -> bytes:
    return u32be(len(x)) + x


def frame_bool(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def frame_list(items, *, sort=True, sort_framed=False) -> bytes:
    items = list(items)
    if sort:
        items.sort(key=(frame_bytes if sort_framed else None))
    return u32be(len(items)) + b"".join(frame_bytes(i) for i in items)


def enc(s) -> bytes:
    return s if isinstance(s, bytes) else s.encode("utf-8")


def domain_id_preimage(profile, workspace) -> bytes:
    return DOMAIN_SEP + frame_bytes(enc(profile)) + frame_bytes(os.fsencode(workspace))


def domain_id(profile, workspace) -> bytes:
    return hashlib.sha256(domain_id_preimage(profile, workspace)).digest()


@dataclass
class FingerprintRecord:
    profile: str
    storage_root: str
    runtime_root: str
    image: str
    isolate_gitignored: bool = True
    persistent_dirs: list = field(default_factory=list)         # [str]
    env: list = field(default_factory=list)                     # [(sandbox, host)]
    volumes: list = field(default_factory=list)                 # [(src, dst, kind, access, create)]
    allow: list = field(default_factory=list)                   # [(4 bytes, len)]
    deny: list = field(default_factory=list)
    escalation_enabled: bool = False
    rules: list = field(default_factory=list)                   # [(exe, [args], extra)]


KIND_BYTE = {"file": b"\x00", "directory": b"\x01"}
ACCESS_BYTE = {"read-only": b"\x00", "read-write": b"\x01"}

# (name, path/arg item framing, sort on framed encodings?)
FRAMING_VARIANTS = (
    ("literal", False),   # the default: item = bytes(path); sort unframed items
    ("single", False),    # item = raw path
    ("literal", True),
    ("single", True),
)


def fingerprint_preimage(r: FingerprintRecord, framing="literal", sort_framed=False) -> bytes:
    def str_item(s):
        return frame_bytes(enc(s)) if framing == "literal" else enc(s)

    def lst(items, sort=True):
        return frame_list(items, sort=sort, sort_framed=sort_framed)

    out = bytearray(FINGERPRINT_SEP)
    out += frame_bytes(enc(r.profile))
    out += frame_bytes(os.fsencode(r.storage_root))
    out += frame_bytes(os.fsencode(r.runtime_root))
    out += frame_bytes(enc(r.image))
    out += frame_bool(r.isolate_gitignored)
    out += lst(str_item(p) for p in r.persistent_dirs)
    out += lst(frame_bytes(enc(s)) + frame_bytes(enc(h)) for s, h in r.env)
    out += lst(frame_bytes(os.fsencode(src)) + frame_bytes(enc(dst)) + KIND_BYTE[kind]
               + ACCESS_BYTE[access] + frame_bool(create)
               for src, dst, kind, access, create in r.volumes)
    out += lst(bytes(a) + bytes([n]) for a, n in r.allow)
    out += lst(bytes(a) + bytes([n]) for a, n in r.deny)
    out += frame_bool(r.escalation_enabled)
    out += lst(frame_bytes(os.fsencode(exe)) + lst((str_item(a) for a in args), sort=False)
               + frame_bool(extra) for exe, args, extra in r.rules)
    return bytes(out)


def fingerprint(r: FingerprintRecord, framing="literal", sort_framed=False) -> bytes:
    return hashlib.sha256(fingerprint_preimage(r, framing, sort_framed)).digest()


# ---------------------------------------------------------------- grammar

def _nul_free(key, s):
    if "\x00" in s:
        raise Refused(key, "contains a NUL character")
    return s


def _is_str(v):
    return isinstance(v, str)


def _is_bool(v):
    return isinstance(v, bool)


def _components_ok(rest):
    return rest != "" and all(c not in ("", ".", "..") for c in rest.split("/"))


def check_host_path(key, s, *, allow_profile_dir=False):
    """Returns (anchor, suffix): anchor in {"abs", "home", "profile_dir"}."""
    _nul_free(key, s)
    if s.startswith("~/"):
        anchor, rest = "home", s[2:]
    elif allow_profile_dir and s.startswith("{profile_dir}/"):
        anchor, rest = "profile_dir", s[len("{profile_dir}/"):]
    elif s.startswith("/"):
        anchor, rest = "abs", s[1:]
    else:
        raise Refused(key, "not an absolute host path or one beginning with ~/")
    if not _components_ok(rest):
        raise Refused(key, "empty, '.' or '..' component, or a repeated or trailing '/'")
    return anchor, rest


def check_sandbox_path(key, s):
    _nul_free(key, s)
    if not s.startswith("/") or not _components_ok(s[1:]):
        raise Refused(key, "not a normalized absolute sandbox path (and not /)")
    return s


def parse_ipv4_prefix(key, s):
    """-> (4 network-order bytes with host bits cleared, length)."""
    m = IPV4_RE.match(s) if _is_str(s) else None
    if not m:
        raise Refused(key, "not an IPv4 prefix a.b.c.d/n")
    octets = [int(g) for g in m.groups()[:4]]
    n = int(m.group(5))
    if any(o > 255 for o in octets) or n > 32:
        raise Refused(key, "IPv4 prefix out of range")
    net = ipaddress.IPv4Network((bytes(octets), n), strict=False)
    return (net.network_address.packed, n)


def format_prefix(p):
    return f"{ipaddress.IPv4Address(p[0])}/{p[1]}"


def _overlaps(a, b):
    """Component-wise: equal, or one an ancestor of the other."""
    if a == b:
        return True
    a2, b2 = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a2.startswith(b2) or b2.startswith(a2)


def _strict_descendant(child, parent):
    return child != parent and child.startswith(parent.rstrip("/") + "/")


# ---------------------------------------------------------- structural decode

def _table(key, v):
    if not isinstance(v, dict):
        raise Refused(key, "expected a table")
    return v


def _closed(key, table, allowed):
    for k in table:
        if k not in allowed:
            raise Refused(f"{key}.{k}" if key else k, "unknown field")


def _list(key, v):
    if not isinstance(v, list):
        raise Refused(key, "expected an array")
    return v


def _string(key, v):
    if not _is_str(v):
        raise Refused(key, "expected a string")
    return _nul_free(key, v)


def _boolean(key, v):
    if not _is_bool(v):
        raise Refused(key, "expected a Boolean")
    return v


# Ranges no sandbox ever reaches (docs/network.md, "Never reachable"): an
# allow inside one is refused; one that contains a range is fine.
NEVER_ROUTED = ("0.0.0.0/8", "127.0.0.0/8", "100.96.0.0/24", "169.254.0.0/16", "224.0.0.0/4",
                "240.0.0.0/4")


def _prefix_list(key, v, allow=False):
    out = []
    for i, s in enumerate(_list(key, v)):
        p = parse_ipv4_prefix(f"{key}[{i}]", _string(f"{key}[{i}]", s))
        net = ipaddress.IPv4Network((p[0], p[1]))
        for r in NEVER_ROUTED if allow else ():
            if net.subnet_of(ipaddress.IPv4Network(r)):
                raise Refused(f"{key}[{i}]", f"{format_prefix(p)} is inside {r}")
        out.append(p)
    return out


def decode(text):
    """Strict structural decode of the whole document (every profile)."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    if len(text) > MAX_CONFIG_BYTES:
        raise Refused(None, "configuration larger than 1048576 bytes")
    try:
        doc = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise Refused(None, f"TOML: {e}")
    _closed("", doc, ("schema", "storage", "network", "profiles"))
    if "schema" not in doc:
        raise Refused("schema", "missing")
    if _string("schema", doc["schema"]) != SCHEMA_ID:
        raise Refused("schema", "unknown schema identifier")
    storage = _table("storage", doc.get("storage", {}))
    _closed("storage", storage, ("data_root",))
    data_root = None
    if "data_root" in storage:
        data_root = _string("storage.data_root", storage["data_root"])
        check_host_path("storage.data_root", data_root)
    network = _table("network", doc.get("network", {}))
    _closed("network", network, ("default_allow", "default_deny"))
    default_allow = _prefix_list("network.default_allow", network.get("default_allow", []),
                                 allow=True)
    default_deny = _prefix_list("network.default_deny", network.get("default_deny", []))
    if "profiles" not in doc:
        raise Refused("profiles", "missing")
    profiles = _table("profiles", doc["profiles"])
    if not profiles:
        raise Refused("profiles", "no profile")
    decoded = {}
    for name, p in profiles.items():
        decoded[name] = _decode_profile(name, p)
    return {"data_root": data_root, "default_allow": default_allow,
            "default_deny": default_deny, "profiles": decoded}


PROFILE_FIELDS = ("image", "isolate_gitignored", "persistent_dirs", "allow_egress",
                  "deny_egress", "env", "volumes", "escalation")
VOLUME_FIELDS = ("host", "container", "kind", "access", "create")
RULE_FIELDS = ("executable", "args", "allow_extra_args")


def _decode_profile(name, p):
    key = f"profiles.{name}"
    if "\x00" in name or not PROFILE_NAME_RE.match(name) or name in (".", ".."):
        raise Refused(key, "invalid profile name")
    p = _table(key, p)
    _closed(key, p, PROFILE_FIELDS)
    if "image" not in p:
        raise Refused(f"{key}.image", "missing")
    image = _string(f"{key}.image", p["image"])
    if image == "":
        raise Refused(f"{key}.image", "empty")
    isolate = _boolean(f"{key}.isolate_gitignored", p.get("isolate_gitignored", True))
    persistent = [check_sandbox_path(f"{key}.persistent_dirs[{i}]",
                                     _string(f"{key}.persistent_dirs[{i}]", s))
                  for i, s in enumerate(_list(f"{key}.persistent_dirs",
                                              p.get("persistent_dirs", [])))]
    allow = _prefix_list(f"{key}.allow_egress", p.get("allow_egress", []), allow=True)
    deny = _prefix_list(f"{key}.deny_egress", p.get("deny_egress", []))
    env = []
    for k, v in _table(f"{key}.env", p.get("env", {})).items():
        ek = f"{key}.env.{k}"
        if "\x00" in k or not ENV_NAME_RE.match(k):
            raise Refused(ek, "invalid environment name")
        v = _string(ek, v)
        if not v.startswith("env:") or not ENV_NAME_RE.match(v[4:]):
            raise Refused(ek, "expected an env:NAME reference")
        env.append((k, v[4:]))
    volumes = []
    for i, v in enumerate(_list(f"{key}.volumes", p.get("volumes", []))):
        vk = f"{key}.volumes[{i}]"
        v = _table(vk, v)
        _closed(vk, v, VOLUME_FIELDS)
        for req in ("host", "container", "kind"):
            if req not in v:
                raise Refused(f"{vk}.{req}", "missing")
        host = _string(f"{vk}.host", v["host"])
        anchor, suffix = check_host_path(f"{vk}.host", host, allow_profile_dir=True)
        container = check_sandbox_path(f"{vk}.container", _string(f"{vk}.container", v["container"]))
        kind = _string(f"{vk}.kind", v["kind"])
        if kind not in KIND_BYTE:
            raise Refused(f"{vk}.kind", "expected file or directory")
        access = _string(f"{vk}.access", v.get("access", "read-write"))
        if access not in ACCESS_BYTE:
            raise Refused(f"{vk}.access", "expected read-only or read-write")
        create = _boolean(f"{vk}.create", v.get("create", False))
        if create and (kind != "directory" or anchor != "profile_dir"):
            raise Refused(f"{vk}.create", "create=true needs a directory under {profile_dir}/")
        volumes.append({"key": vk, "host": host, "anchor": anchor, "suffix": suffix,
                        "container": container, "kind": kind, "access": access,
                        "create": create})
    esc = _table(f"{key}.escalation", p.get("escalation", {}))
    _closed(f"{key}.escalation", esc, ("enabled", "auto_approve"))
    enabled = _boolean(f"{key}.escalation.enabled", esc.get("enabled", False))
    rules = []
    for i, r in enumerate(_list(f"{key}.escalation.auto_approve", esc.get("auto_approve", []))):
        rk = f"{key}.escalation.auto_approve[{i}]"
        r = _table(rk, r)
        _closed(rk, r, RULE_FIELDS)
        if "executable" not in r:
            raise Refused(f"{rk}.executable", "missing")
        exe = _string(f"{rk}.executable", r["executable"])
        check_host_path(f"{rk}.executable", exe)
        args = [_string(f"{rk}.args[{j}]", a)
                for j, a in enumerate(_list(f"{rk}.args", r.get("args", [])))]
        extra = _boolean(f"{rk}.allow_extra_args", r.get("allow_extra_args", False))
        if extra and not args:
            raise Refused(f"{rk}.allow_extra_args", "allow_extra_args needs at least one arg")
        if not enabled:
            raise Refused(rk, "auto_approve rule while escalation is disabled")
        rules.append({"key": rk, "executable": exe, "args": args, "extra": extra})
    return {"name": name, "image": image, "isolate": isolate, "persistent": persistent,
            "allow": allow, "deny": deny, "env": env, "volumes": volumes,
            "enabled": enabled, "rules": rules}


# ---------------------------------------------------------------- resolution

def _host_inputs(home, xdg_runtime_dir, xdg_data_home):
    if not home or "\x00" in home or not home.startswith("/"):
        raise Refused(None, "HOME must be present and absolute")
    if not xdg_runtime_dir or "\x00" in xdg_runtime_dir or not xdg_runtime_dir.startswith("/"):
        raise Refused(None, "XDG_RUNTIME_DIR must be present and absolute")
    if xdg_data_home and not xdg_data_home.startswith("/"):
        xdg_data_home = None       # unset, empty or relative: home fallback
    return home, xdg_runtime_dir, xdg_data_home


def expand_host(anchor, suffix, home, profile_dir=None):
    base = {"abs": "/", "home": home, "profile_dir": profile_dir}[anchor]
    return os.path.join(base, suffix)


def storage_root_of(data_root, home, xdg_data_home):
    if data_root is not None:
        anchor, suffix = check_host_path("storage.data_root", data_root)
        return expand_host(anchor, suffix, home)
    if xdg_data_home:
        return os.path.join(xdg_data_home, "lazaret")
    return os.path.join(home, ".local", "share", "lazaret")


def default_config_path(home, xdg_config_home=None):
    if xdg_config_home and xdg_config_home.startswith("/"):
        return os.path.join(xdg_config_home, "lazaret", "config.toml")
    return os.path.join(home, ".config", "lazaret", "config.toml")


def _exec_ok(st, uid, gids):
    if uid == 0:
        return bool(st.st_mode & 0o111)
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def resolve(text, profile, workspace, *, home, xdg_runtime_dir, xdg_data_home=None,
            environ=None, config_file=None, check_fs=True, uid=None, gids=(),
            protected=SPEC_PROTECTED):
    """Resolve `profile` as `lazaret config check PROFILE --workspace W --json`
    would print it. With check_fs=False no filesystem object is inspected
    (paths are still canonicalized with realpath)."""
    environ = {} if environ is None else environ
    uid = os.getuid() if uid is None else uid
    doc = decode(text)
    if profile not in doc["profiles"]:
        raise Refused(None, "no profile %r; available: %s"
                      % (profile, ", ".join(sorted(doc["profiles"]))))
    p = doc["profiles"][profile]
    pk = f"profiles.{profile}"
    home, runtime_dir, xdg_data_home = _host_inputs(home, xdg_runtime_dir, xdg_data_home)

    workspace = os.path.realpath(workspace)
    storage = os.path.realpath(storage_root_of(doc["data_root"], home, xdg_data_home))
    runtime = os.path.realpath(os.path.join(runtime_dir, "lazaret"))
    profile_dir = os.path.realpath(os.path.join(storage, "profiles", profile))
    cfg = os.path.realpath(config_file) if config_file else None

    # Sandbox-side relations.
    pers = p["persistent"]
    for i, a in enumerate(pers):
        for j in range(i):
            if _overlaps(a, pers[j]):
                raise Refused(f"{pk}.persistent_dirs[{i}]", "overlaps persistent_dirs[%d]" % j)
        for d in protected:
            if _overlaps(a, d):
                raise Refused(f"{pk}.persistent_dirs[{i}]", f"intersects protected {d}")
    vols = p["volumes"]
    for i, v in enumerate(vols):
        c = v["container"]
        for d in protected:
            if _overlaps(c, d):
                raise Refused(f"{v['key']}.container", f"intersects protected {d}")
        for j in range(i):
            if _overlaps(c, vols[j]["container"]):
                raise Refused(f"{v['key']}.container", "overlaps volumes[%d]" % j)
        if sum(1 for d in pers if _strict_descendant(c, d)) != 1:
            raise Refused(f"{v['key']}.container", "not strictly beneath one persistent dir")

    # Network.
    allow = sorted(set(doc["default_allow"]) | set(p["allow"]), key=lambda x: x[0] + bytes([x[1]]))
    rfc = [parse_ipv4_prefix("rfc1918", s) for s in RFC1918]
    deny = sorted(set(doc["default_deny"]) | set(p["deny"]) | set(rfc),
                  key=lambda x: x[0] + bytes([x[1]]))
    both = set(allow) & set(deny)
    if both:
        bad = min(both)
        keys = [f"{pk}.allow_egress[{i}]" for i, x in enumerate(p["allow"]) if x == bad] + \
               [f"network.default_allow[{i}]" for i, x in enumerate(doc["default_allow"]) if x == bad]
        raise Refused(keys[0] if keys else None, f"{format_prefix(bad)} both allowed and denied")

    # Host paths.
    resolved_vols = []
    for v in vols:
        src = os.path.realpath(expand_host(v["anchor"], v["suffix"], home, profile_dir))
        raw = expand_host(v["anchor"], v["suffix"], home, profile_dir)
        hk = f"{v['key']}.host"
        if check_fs:
            try:
                st = os.lstat(raw)
            except FileNotFoundError:
                st = None
            if st is None and not v["create"]:
                raise Refused(hk, "source does not exist")
            if st is not None:
                if stat.S_ISLNK(st.st_mode):
                    raise Refused(hk, "source is a symlink")
                want = stat.S_ISREG if v["kind"] == "file" else stat.S_ISDIR
                if not want(st.st_mode):
                    raise Refused(hk, "source is not a %s" % v["kind"])
        for other in (cfg, workspace, runtime):
            if other and _overlaps(src, other):
                raise Refused(hk, f"overlaps {other}")
        if not _strict_descendant(src, profile_dir) and _overlaps(src, storage):
            raise Refused(hk, f"overlaps the Storage Root {storage}")
        for w in resolved_vols:
            if _overlaps(src, w["source"]):
                raise Refused(hk, "overlaps another volume source")
        resolved_vols.append({"source": src, "destination": v["container"], "kind": v["kind"],
                              "access": v["access"], "create": v["create"]})
    for a, b in ((cfg, workspace), (cfg, storage), (cfg, runtime), (workspace, storage),
                 (workspace, runtime), (storage, runtime)):
        if a and _overlaps(a, b):
            raise Refused(None, f"{a} overlaps {b}")

    rules = []
    seen = set()
    for r in p["rules"]:
        ek = f"{r['key']}.executable"
        anchor, suffix = check_host_path(ek, r["executable"])
        exe = os.path.realpath(expand_host(anchor, suffix, home))
        if check_fs:
            try:
                st = os.stat(exe)
            except FileNotFoundError:
                raise Refused(ek, "executable not found")
            if not stat.S_ISREG(st.st_mode):
                raise Refused(ek, "not a regular file")
            if st.st_nlink != 1:
                raise Refused(ek, "more than one hard link")
            if st.st_uid not in (0, uid):
                raise Refused(ek, "owned by another user")
            if st.st_mode & 0o022:
                raise Refused(ek, "group or other writable")
            if not _exec_ok(st, uid, gids):
                raise Refused(ek, "not executable")
        for t in [workspace, profile_dir, storage, runtime] + [v["source"] for v in resolved_vols]:
            if _overlaps(exe, t):
                raise Refused(ek, f"inside {t}")
        norm = (exe, tuple(r["args"]), r["extra"])
        if norm in seen:
            raise Refused(r["key"], "duplicate rule")
        seen.add(norm)
        rules.append({"executable": exe, "args": list(r["args"]), "allow_extra_args": r["extra"]})

    # Environment, last.
    for sname, hname in p["env"]:
        if hname not in environ:
            raise Refused(f"{pk}.env.{sname}", f"host variable {hname} is not set")
        val = environ[hname]
        try:
            (val.encode("utf-8") if isinstance(val, str) else val.decode("utf-8"))
        except (UnicodeError, UnicodeDecodeError):
            raise Refused(f"{pk}.env.{sname}", f"host variable {hname} is not UTF-8")
        if ("\x00" if isinstance(val, str) else b"\x00") in val:
            raise Refused(f"{pk}.env.{sname}", f"host variable {hname} contains NUL")

    rec = FingerprintRecord(
        profile=profile, storage_root=storage, runtime_root=runtime, image=p["image"],
        isolate_gitignored=p["isolate"], persistent_dirs=list(pers), env=list(p["env"]),
        volumes=[(v["source"], v["destination"], v["kind"], v["access"], v["create"])
                 for v in resolved_vols],
        allow=allow, deny=deny, escalation_enabled=p["enabled"],
        rules=[(r["executable"], r["args"], r["allow_extra_args"]) for r in rules])
    out = {
        "profile": profile,
        "workspace": workspace,
        "domain_id": domain_id(profile, workspace).hex(),
        "configuration_fingerprint": fingerprint(rec).hex(),
        "storage_root": storage,
        "runtime_root": runtime,
        "profile_dir": profile_dir,
        "image": p["image"],
        "isolate_gitignored": p["isolate"],
        "persistent_dirs": sorted(pers),
        "environment": [{"name": s, "from": h} for s, h in sorted(p["env"])],
        # Issue 26's plain values and default command: this model reads
        # neither key (the C unit tests cover them): none and null.
        "environment_values": [],
        "command": None,
        "volumes": sorted(resolved_vols, key=lambda v: v["destination"].encode()),
        "network": {"allow": [format_prefix(x) for x in allow],
                    "deny": [format_prefix(x) for x in deny]},
        "escalation": {"enabled": p["enabled"], "auto_approve": rules},
    }
    if cfg:
        out["config_file"] = cfg
    out["_record"] = rec          # for diagnostics; not part of the CLI's JSON
    return out


def fingerprint_variants(rec: FingerprintRecord):
    """{(framing, sort_framed): hex} for every FRAMING_VARIANTS reading."""
    return {v: fingerprint(rec, *v).hex() for v in FRAMING_VARIANTS}
