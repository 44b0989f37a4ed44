# SPDX-License-Identifier: Apache-2.0
"""`lazaret export kubernetes` (issue 14, docs/kubernetes.md).

a. Golden YAML for representative profiles (tests/golden/kubernetes/;
   LAZARET_UPDATE_GOLDEN=1 rewrites them), the same bytes on every run.
b. Every object valid against the schemas of k8s_schema.py (core types
   from python3-kubernetes' models of the Kubernetes 1.22 API, agent-sandbox
   v1beta1), with controls: a misspelt field, a wrong type and a missing
   required field are refused.
c. The NetworkPolicy decides like Lazaret: for random policies, Lazaret's
   longest-prefix decision (an oracle written here from docs/network.md)
   equals the emitted ipBlocks' union on every prefix's first and last
   address, one either side, and random addresses. Control: the naive
   translation (each allow excepting only the denies inside it) and the
   emitted policy with one except removed both disagree.
d. Static invariants: the policy selects the pod's labels, every claim is
   mounted, no hostPath, hostNetwork/PID/IPC, privileged or token; env as
   secretKeyRefs and the value nowhere in the output.
e. The report (text and JSON) and --strict; a local image refused.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import json
import os
import random
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

import k8s_schema
from conftest import profiles_toml

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "kubernetes"
SECRET = "lzK8sS3cr3t-5a1e-must-never-appear"
PINNED = "registry.example/team/agent@sha256:" + "ab" * 32
NEVER_ROUTED = ("0.0.0.0/8", "127.0.0.0/8", "100.96.0.0/24", "169.254.0.0/16", "224.0.0.0/4",
                "240.0.0.0/4")


def export(lz, profile, *args, env=None, check=True):
    env = {"AGENT_TOKEN": SECRET, **(env or {})}
    proc = lz.run(["export", "kubernetes", profile, "--workspace", lz.mkdir("proj"), *args],
                  env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def documents(text: str) -> list:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def write_config(lz, profiles, network=None):
    lz.write(lz.config_path, profiles_toml(profiles, network=network))


PROFILES = {
    "minimal": {"image": PINNED},
    "full": {
        "image": "registry.example/team/agent:1.4",
        "persistent_dirs": ["/root/.cache", "/usr/local", "/opt/a \"quoted\" path/é"],
        "env": {"ANTHROPIC_API_KEY": "env:AGENT_TOKEN", "GH_TOKEN": "env:AGENT_TOKEN"},
        "allow_egress": ["0.0.0.0/0", "10.1.2.0/24"],
        "deny_egress": ["203.0.113.0/24", "10.1.2.128/25"],
        "escalation": {"enabled": True},
    },
}


def golden_text(lz, profile, args):
    proc = export(lz, profile, "--name", "lz-" + profile, *args)
    # The fingerprint covers canonical host paths (this test's temporary
    # directories); it is checked against `config check` instead.
    fp = json.loads(lz.run(["config", "check", profile, "--workspace", lz.mkdir("proj"),
                            "--json"], env={"AGENT_TOKEN": SECRET}).stdout)
    text = proc.stdout.replace(fp["configuration_fingerprint"], "<fingerprint>")
    assert "<fingerprint>" in text
    return text


@pytest.mark.parametrize("case", [
    ("minimal", ()),
    ("full", ("--image-digest", "sha256:" + "cd" * 32, "--namespace", "agents",
              "--storage-class", "fast-ssd")),
    ("full-template", ("--template", "--with-runtime-class", "--warm-pool", "3")),
], ids=lambda c: c[0])
def test_golden_yaml(lz, case):
    name, args = case
    profile = name.split("-")[0]
    write_config(lz, PROFILES)
    text = golden_text(lz, profile, args)
    assert golden_text(lz, profile, args) == text, "two exports differ"
    path = GOLDEN / f"{name}.yaml"
    if os.environ.get("LAZARET_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.read_text() == text, f"differs from {path} (LAZARET_UPDATE_GOLDEN=1 rewrites)"
    for doc in documents(text):
        assert k8s_schema.errors(doc) == [], (doc["kind"], k8s_schema.errors(doc))


def test_schema_refuses_what_kubernetes_refuses(lz):
    """Controls for (b): the validator is not vacuous."""
    write_config(lz, PROFILES)
    docs = documents(export(lz, "full", "--template").stdout)
    docs += documents(export(lz, "full").stdout)
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"NetworkPolicy", "SandboxTemplate", "SandboxWarmPool",
                            "SandboxClaim", "PersistentVolumeClaim", "Sandbox"}

    def broken(kind, mutate):
        d = json.loads(json.dumps(by_kind[kind]))
        mutate(d)
        return k8s_schema.errors(d)

    pod = lambda d: d["spec"]["podTemplate"]["spec"]  # noqa: E731
    assert broken("Sandbox", lambda d: pod(d)["containers"][0]["securityContext"]
                  .update(privilegd=True))
    assert broken("Sandbox", lambda d: d["spec"].update(shutdownPolicy="Keep"))
    assert broken("Sandbox", lambda d: d["spec"].update(podTemplates=d["spec"].pop("podTemplate")))
    assert broken("Sandbox", lambda d: pod(d)["containers"][0].pop("name"))
    assert broken("Sandbox", lambda d: d.update(apiVersion="agents.x-k8s.io/v1alpha2"))
    assert broken("NetworkPolicy", lambda d: d["spec"]["egress"][1]["to"][0]["ipBlock"]
                  .update(cidr=["0.0.0.0/0"]))
    assert broken("PersistentVolumeClaim", lambda d: d["spec"].update(size="10Gi"))
    assert broken("SandboxWarmPool", lambda d: d["spec"].pop("sandboxTemplateRef"))
    assert broken("SandboxClaim", lambda d: d["spec"].update(templateRef={"name": "x"}))
    assert broken("SandboxTemplate", lambda d: d["spec"].update(networkPolicyManagement="Off"))


# ---- (c) the NetworkPolicy against Lazaret's decision -------------------------------

def lazaret_allows(allow, deny, addr) -> bool:
    """docs/network.md: never-routed ranges first, then the longest prefix
    of allow and deny; deny when none holds addr."""
    a = ipaddress.IPv4Address(addr)
    if any(a in ipaddress.IPv4Network(r) for r in NEVER_ROUTED):
        return False
    best = None
    for verdict, nets in ((True, allow), (False, deny)):
        for n in nets:
            net = ipaddress.IPv4Network(n)
            if a in net and (best is None or net.prefixlen > best[0]):
                best = (net.prefixlen, verdict)
    return bool(best and best[1])


def policy_allows(policy: dict, addr) -> bool:
    """NetworkPolicy egress union semantics for an address outside the
    cluster: some ipBlock holds it and none of that block's excepts."""
    a = ipaddress.IPv4Address(addr)
    for rule in policy["spec"].get("egress", []):
        for peer in rule.get("to", []):
            blk = peer.get("ipBlock")
            if blk and a in ipaddress.IPv4Network(blk["cidr"]) and not any(
                    a in ipaddress.IPv4Network(e) for e in blk.get("except", [])):
                return True
    return False


def naive_policy(allow, deny) -> dict:
    blocks = []
    for n in allow:
        net = ipaddress.IPv4Network(n)
        ex = [d for d in deny if ipaddress.IPv4Network(d).subnet_of(net)
              and ipaddress.IPv4Network(d) != net]
        blocks.append({"ipBlock": {"cidr": n, "except": ex}})
    return {"spec": {"egress": [{"to": blocks}]}}


def boundary_addresses(prefixes, rng, n_random=64):
    out = set()
    for p in list(prefixes) + list(NEVER_ROUTED):
        net = ipaddress.IPv4Network(p)
        first, last = int(net.network_address), int(net.broadcast_address)
        out.update(x for x in (first - 1, first, last, last + 1) if 0 <= x < 2**32)
    out.update(rng.randrange(2**32) for _ in range(n_random))
    return sorted(str(ipaddress.IPv4Address(x)) for x in out)


def random_policy(rng):
    """Nested prefixes around a few random anchors, each allow or deny;
    never an allow inside a never-routed range, never one prefix in both."""
    prefixes = {}
    for _ in range(rng.randint(1, 4)):
        anchor = rng.randrange(2**32)
        for length in sorted(rng.sample(range(0, 33), rng.randint(1, 4))):
            net = ipaddress.IPv4Network((anchor >> (32 - length) << (32 - length) if length else 0,
                                         length))
            prefixes[str(net)] = rng.random() < 0.5
    allow = [p for p, v in prefixes.items() if v and not any(
        ipaddress.IPv4Network(p).subnet_of(ipaddress.IPv4Network(r)) for r in NEVER_ROUTED)]
    deny = [p for p, v in prefixes.items() if not v]
    return allow, deny


def effective(lz, profile):
    net = json.loads(lz.run(["config", "check", profile, "--workspace", lz.mkdir("proj"),
                             "--json"]).stdout)["network"]
    return net["allow"], net["deny"]


def test_network_policy_decides_like_lazaret(lz):
    rng = random.Random(1414)
    n_policies, naive_wrong, mutant_wrong, checked = 60, 0, 0, 0
    for i in range(n_policies):
        allow, deny = random_policy(rng)
        write_config(lz, {"p": {"image": PINNED, "allow_egress": allow, "deny_egress": deny}},
                     network={"default_deny": []})
        eff_allow, eff_deny = effective(lz, "p")
        docs = documents(export(lz, "p").stdout)
        (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
        addrs = boundary_addresses(eff_allow + eff_deny, rng)
        for a in addrs:
            want = lazaret_allows(eff_allow, eff_deny, a)
            assert policy_allows(policy, a) == want, (i, eff_allow, eff_deny, a, want)
            checked += 1
        naive = naive_policy(eff_allow, eff_deny)
        naive_wrong += any(policy_allows(naive, a) != lazaret_allows(eff_allow, eff_deny, a)
                           for a in addrs)
        # The emitted policy with one except removed must be caught too.
        blocks = [p["ipBlock"] for r in policy["spec"]["egress"] for p in r["to"]
                  if "ipBlock" in p]
        with_except = [b for b in blocks if b.get("except")]
        if with_except:
            b = rng.choice(with_except)
            dropped = b["except"].pop(rng.randrange(len(b["except"])))
            mutant_wrong += any(policy_allows(policy, a) != lazaret_allows(eff_allow, eff_deny, a)
                                for a in addrs)
            b["except"].append(dropped)
    assert checked > n_policies * 20
    # Controls: both wrong translations are caught on this corpus.
    assert naive_wrong > 0, "the naive translation was never wrong: the corpus is too weak"
    assert mutant_wrong > 0, "no except removal was caught"


def test_rfc1918_and_metadata_stay_denied_with_allow_all(lz):
    write_config(lz, {"p": {"image": PINNED, "allow_egress": ["0.0.0.0/0"]}})
    (policy,) = [d for d in documents(export(lz, "p").stdout) if d["kind"] == "NetworkPolicy"]
    for a in ("10.0.0.1", "172.16.5.5", "192.168.1.1", "169.254.169.254", "127.0.0.1"):
        assert not policy_allows(policy, a), a
    assert policy_allows(policy, "203.0.113.7")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"]


# ---- (d) static invariants ----------------------------------------------------------------

def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield f"{path}/{k}", k, v
            yield from walk(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from walk(v, f"{path}/{i}")


@pytest.mark.parametrize("form", [(), ("--template",)], ids=["sandbox", "template"])
def test_static_invariants(lz, form):
    write_config(lz, PROFILES)
    proc = export(lz, "full", *form)
    assert SECRET not in proc.stdout and SECRET not in proc.stderr
    docs = documents(proc.stdout)
    for d in docs:
        for path, key, value in walk(d):
            assert key not in ("hostPath", "hostNetwork", "hostPID", "hostIPC"), path
            if key in ("privileged", "allowPrivilegeEscalation", "automountServiceAccountToken",
                       "enableServiceLinks"):
                assert value is False, path
            assert key != "value" or "valueFrom" in path, path  # no literal env values
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    owner = [d for d in docs if d["kind"] in ("Sandbox", "SandboxTemplate")]
    assert len(owner) == 1
    tmpl = owner[0]["spec"]["podTemplate"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    # All three labels: an instance name alone could be another
    # application's (attack round i14b, S1).
    assert selector == tmpl["metadata"]["labels"]
    assert selector["app.kubernetes.io/name"] == selector["app.kubernetes.io/managed-by"] == \
        "lazaret"
    assert selector["app.kubernetes.io/instance"] == owner[0]["metadata"]["labels"][
        "app.kubernetes.io/instance"]
    pod = tmpl["spec"]
    assert pod["runtimeClassName"] == "gvisor"
    (c,) = pod["containers"]
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert c["image"] == "registry.example/team/agent:1.4"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert "/workspace/.git" not in mounts
    assert c["resources"] == {"limits": {"memory": "4Gi", "ephemeral-storage": "10Gi"}}
    assert "runAsUser" not in c["securityContext"]
    for p in ["/workspace", *PROFILES["full"]["persistent_dirs"]]:
        assert p in mounts, p
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"]}
    assert set(env) == {"ANTHROPIC_API_KEY", "GH_TOKEN"}
    assert all(r["key"] == n and r["optional"] is False for n, r in env.items())
    if form:
        claims = {t["metadata"]["name"] for t in owner[0]["spec"]["volumeClaimTemplates"]}
        assert "volumes" not in pod
        assert {m["name"] for m in c["volumeMounts"]} == claims
        assert owner[0]["spec"]["networkPolicyManagement"] == "Unmanaged"
    else:
        pvcs = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
        vols = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        assert set(vols.values()) == pvcs, "every claim is used, and only those"
        assert {m["name"] for m in c["volumeMounts"]} == set(vols)
        assert owner[0]["spec"]["service"] is False
        assert "volumeClaimTemplates" not in owner[0]["spec"], "claims must outlive the Sandbox"


# ---- (e) report, --strict, images, output ------------------------------------------------

def test_report_names_every_field(lz):
    write_config(lz, PROFILES)
    proc = export(lz, "full", "--report", "json")
    r = json.loads(proc.stderr)
    fields = {f["field"]: f for f in r["fields"]}
    assert r["profile"] == "full" and r["objects"] == len(documents(proc.stdout))
    for p in PROFILES["full"]["persistent_dirs"]:
        assert fields[f"persistent_dirs[{p}]"]["status"] == "approximated"
    assert fields["escalation"]["status"] == "not-mappable"
    assert fields["git"]["status"] == "not-mappable" and fields["git"]["security_relevant"]
    assert fields["network"]["status"] == "approximated"  # the nodes' own addresses
    assert fields["env.GH_TOKEN"]["status"] == "mapped"
    assert fields["image"] == {"field": "image", "status": "approximated",
                               "security_relevant": True, "accepted": False,
                               "reason": fields["image"]["reason"]}
    weaker = sorted(f["field"] for f in r["fields"]
                    if f["security_relevant"] and f["status"] != "mapped")
    assert weaker == ["git", "image", "limits.processes", "network", "user"]
    assert r["strict_failures"] == 5
    assert SECRET not in r["secret_command"] and "$AGENT_TOKEN" in r["secret_command"]
    assert {"runtime", "limits.memory", "lifecycle", "workspace"} <= set(fields)
    text = export(lz, "full").stderr
    assert re.search(r"^  approximated image \[security\]: ", text, re.M), text
    assert re.search(r"^  not-mappable escalation: ", text, re.M), text


ACCEPT_ALL = ("--accept", "git", "--accept", "limits.processes", "--accept", "network")


def test_strict_refuses_and_writes_nothing(lz):
    write_config(lz, PROFILES)
    out = lz.path("out.yaml")
    proc = export(lz, "full", "--strict", "-o", out, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "--strict: nothing written: 5 security-relevant fields are" in proc.stderr
    assert proc.stdout == "" and not out.exists()
    # Each weakening is removed by its option or accepted by name; one left
    # is still refused.
    fixed = ("--image-digest", "sha256:" + "0f" * 32, "--run-as-user", "1000")
    proc = export(lz, "full", "--strict", *fixed, "--accept", "git", "--accept", "network",
                  "-o", out, check=False)
    assert proc.returncode == 1 and "1 security-relevant field is" in proc.stderr
    assert re.search(r"^  not-mappable git \[security, accepted\]: ", proc.stderr, re.M)
    assert re.search(r"^  approximated limits.processes \[security\]: ", proc.stderr, re.M)
    assert not out.exists()
    # A runtime class the export cannot vouch for is one more.
    proc = export(lz, "full", "--strict", *fixed, *ACCEPT_ALL, "--runtime-class", "fast",
                  check=False)
    assert proc.returncode == 1 and "1 security-relevant field is" in proc.stderr
    # Control: everything fixed or accepted passes --strict and writes the file.
    proc = export(lz, "full", "--strict", *fixed, *ACCEPT_ALL, "-o", out)
    c = documents(out.read_text())[-1]["spec"]["podTemplate"]["spec"]["containers"][0]
    assert c["image"] == "registry.example/team/agent@sha256:" + "0f" * 32
    assert proc.stdout == ""
    # A misspelt field is an error, not a silent pass.
    proc = export(lz, "full", "--strict", *fixed, *ACCEPT_ALL, "--accept", "limits.process",
                  check=False)
    assert proc.returncode == 1 and "--accept limits.process: the report has no such field" \
        in proc.stderr
    proc = export(lz, "full", "--accept", "git", check=False)
    assert proc.returncode == 2 and "only means something with --strict" in proc.stderr


def test_run_as_user_and_git_readonly(lz):
    write_config(lz, PROFILES)
    docs = documents(export(lz, "full", "--run-as-user", "1000:2000", "--git-readonly").stdout)
    pod = docs[-1]["spec"]["podTemplate"]["spec"]
    (c,) = pod["containers"]
    assert c["securityContext"]["runAsUser"] == 1000
    assert c["securityContext"]["runAsGroup"] == 2000
    assert c["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["fsGroup"] == 2000
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/workspace/.git"] == {"name": mounts["/workspace"]["name"],
                                         "mountPath": "/workspace/.git", "subPath": ".git",
                                         "readOnly": True}
    for d in docs:
        assert k8s_schema.errors(d) == []
    for bad in ("0", "0:0", "1000:0", "-1", "x", "1000:", "+5", "99999999999", "5:+6", "\t5",
                " 5", "5: 6"):
        proc = export(lz, "full", "--run-as-user", bad, check=False)
        assert proc.returncode == 2 and proc.stdout == "", (bad, proc.stderr)


def test_no_cluster_dns(lz):
    write_config(lz, PROFILES)
    (policy,) = [d for d in documents(export(lz, "full", "--no-cluster-dns").stdout)
                 if d["kind"] == "NetworkPolicy"]
    assert all("ipBlock" in p for r in policy["spec"]["egress"] for p in r["to"])
    assert k8s_schema.errors(policy) == []


def test_names_differ_between_developers(lz, make_lz, user_factory):
    """Two developers exporting one profile name for one workspace path
    into one namespace must not share objects (attack round i14, S3)."""
    shared = Path(tempfile.mkdtemp(prefix="lzt-shared-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)  # root's, readable by both
        other = make_lz(user_factory("lztest2", subids=True))
        names = []
        for env in (lz, other, lz):
            write_config(env, {"claude": {"image": PINNED}})
            proc = env.run(["export", "kubernetes", "claude", "--workspace", shared])
            assert proc.returncode == 0, proc.stderr
            names.append(documents(proc.stdout)[-1]["metadata"]["name"])
        assert names[0] == names[2], "the same developer gets the same name again"
        assert names[0] != names[1]
        assert all(re.fullmatch(r"lazaret-claude-[0-9a-f]{8}", n) for n in names), names
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_local_image_is_refused_with_what_to_do(lz):
    write_config(lz, {"p": {"image": "oci:/srv/images/agent:latest"}})
    proc = export(lz, "p", check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "is not an image a cluster can pull" in proc.stderr
    assert "skopeo copy oci:/srv/images/agent:latest docker://REGISTRY/NAME" in proc.stderr
    proc = export(lz, "p", "--image", PINNED)
    assert PINNED in proc.stdout


@pytest.mark.parametrize("args", [
    ("--name", "Bad_Name"), ("--namespace", "a.b"), ("--workspace-size", "ten"),
    ("--image-digest", "sha256:xyz"), ("--runtime-class", "-x"),
    ("--image", "registry.example/a b"), ("--image", "registry.example/Team/agent"),
    ("--image", "registry.example/a:"), ("--image", "registry.example/a@sha256:abc"),
    ("--image", "reg..example/a"), ("--image", "registry.example:99999/a"),
    ("--image", "a/b/-c"), ("--image", "a/b..c"), ("--storage-class", "Fast"),
    ("--namespace", "kube-system"), ("--memory", "lots"), ("--ephemeral-storage", "1 G"),
    ("--memory", "0"), ("--workspace-size", "0Gi"), ("--ephemeral-storage", "0.0Ki"),
    ("--persistent-size", "000"),
    ("--persistent-size", "5 Gi"),
])
def test_option_values_kubernetes_would_refuse(lz, args):
    write_config(lz, PROFILES)
    proc = export(lz, "minimal", *args, check=False)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert args[0] in proc.stderr, proc.stderr
    assert "  fix: " in proc.stderr and "lazaret doctor" not in proc.stderr, proc.stderr


def test_strings_round_trip(lz):
    """Quotes, non-ASCII and characters YAML would read as syntax survive."""
    odd = ["/opt/x: y", "/opt/#not a comment", "/opt/- item", "/opt/é/ü", "/opt/\U0001F600",
           "/opt/true", "/opt/'single'", "/opt/back\\slash"]
    write_config(lz, {"p": {"image": PINNED, "persistent_dirs": odd}})
    docs = documents(export(lz, "p").stdout)
    sandbox = docs[-1]
    paths = {m["mountPath"] for m in sandbox["spec"]["podTemplate"]["spec"]["containers"][0][
        "volumeMounts"]}
    assert set(odd) <= paths
    annotated = {d["metadata"]["annotations"]["lazaret.dev/sandbox-path"] for d in docs
                 if d["kind"] == "PersistentVolumeClaim"}
    assert set(odd) <= annotated


def test_output_never_follows_a_link_a_sandbox_could_plant(lz):
    """-o FILE may lie in the workspace, which a sandbox writes: a link in
    its directory path is refused, and a link at FILE itself is replaced,
    never written through."""
    write_config(lz, PROFILES)
    elsewhere = lz.mkdir("elsewhere")
    proj = lz.mkdir("proj")
    os.symlink(elsewhere, proj / "k8s")
    proc = export(lz, "minimal", "-o", proj / "k8s" / "agent.yaml", check=False)
    assert proc.returncode == 1, proc.stderr
    assert "symbolic link" in proc.stderr and "real path" in proc.stderr, proc.stderr
    assert list(elsewhere.iterdir()) == []
    # Control: through its real path the same directory is written.
    export(lz, "minimal", "-o", elsewhere / "agent.yaml")
    assert documents((elsewhere / "agent.yaml").read_text())[-1]["kind"] == "Sandbox"

    target = lz.write("target", "precious\n")
    link = proj / "agent.yaml"
    os.symlink(target, link)
    # Control: a plain open of FILE would write the link's target.
    with open(link) as f:
        assert f.read() == "precious\n"
    export(lz, "minimal", "-o", link)
    assert target.read_text() == "precious\n"
    assert not link.is_symlink() and documents(link.read_text())[-1]["kind"] == "Sandbox"
    # Relative paths with ".." are taken as written (no link on the way).
    export(lz, "minimal", "-o", "proj/../elsewhere/./second.yaml")
    assert (elsewhere / "second.yaml").is_file()
    assert sorted(p.name for p in proj.iterdir()) == ["agent.yaml", "k8s"], "no temporary left"


@pytest.mark.parametrize("ref", [
    "debian", "debian:bookworm", "library/debian", "docker.io/library/debian:12.5-slim",
    "localhost:5000/a/b:1.0", "Registry.Example:443/team/agent_x__y--z.w:v1",
    "registry.example/team/agent:1.4@sha256:" + "ef" * 32,
])
def test_registry_references_are_accepted(lz, ref):
    write_config(lz, PROFILES)
    docs = documents(export(lz, "minimal", "--image", ref).stdout)
    assert docs[-1]["spec"]["podTemplate"]["spec"]["containers"][0]["image"] == ref


def test_only_a_profile_without_allows_has_its_network_mapped(lz):
    write_config(lz, {"p": {"image": PINNED}}, network={"default_allow": []})
    r = json.loads(export(lz, "p", "--report", "json").stderr)
    (net,) = [f for f in r["fields"] if f["field"] == "network"]
    assert net["status"] == "mapped" and not net["security_relevant"]
    (policy,) = [d for d in documents(export(lz, "p").stdout) if d["kind"] == "NetworkPolicy"]
    assert not any("ipBlock" in p for rule in policy["spec"]["egress"] for p in rule["to"])


def test_colliding_claim_names_are_refused(lz):
    """Two persistent dirs whose claim tags (32 bits of SHA-256) are alike
    would give two claims one name (attack round i14b, S2)."""
    seen = {}
    for i in itertools.count():
        path = f"/opt/d{i}"
        tag = hashlib.sha256(path.encode()).hexdigest()[:8]
        if tag in seen:
            pair = [seen[tag], path]
            break
        seen[tag] = path
    write_config(lz, {"p": {"image": PINNED, "persistent_dirs": pair}})
    proc = export(lz, "p", check=False)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert "would share the claim name" in proc.stderr
    # Control: either path alone exports.
    write_config(lz, {"p": {"image": PINNED, "persistent_dirs": pair[:1]}})
    export(lz, "p")


def test_the_secret_command_carries_values_only_through_a_file(lz):
    """The report's command creates the Secret from the host variables with
    no value on any command line (other users can read argv)."""
    write_config(lz, PROFILES)
    r = json.loads(export(lz, "full", "--namespace", "agents", "--report", "json").stderr)
    cmd = r["secret_command"]
    assert " -n agents " in cmd and SECRET not in cmd
    fake = lz.mkdir("fakebin")
    lz.write(fake / "kubectl", "#!/bin/sh\n"
             "printf '%s\\n' \"$@\" > \"$HOME/argv\"\n"
             "for a; do case $a in --from-env-file=*) cat \"${a#--from-env-file=}\" "
             "> \"$HOME/envfile\";; esac; done\n", mode=0o755)
    proc = lz.run_as_user(["bash", "-c", cmd], env={"PATH": f"{fake}:/usr/bin:/bin",
                                                     "AGENT_TOKEN": SECRET})
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in lz.path("argv").read_text()
    assert lz.path("envfile").read_text() == \
        f"ANTHROPIC_API_KEY={SECRET}\nGH_TOKEN={SECRET}\n"


# ---- (f) host rules of configuration v2 (issue 25) ---------------------------------------

HOST_PROFILES = {
    "hosts": {"image": PINNED, "allow_hosts": ["api.anthropic.com", "registry.npmjs.org"],
              "deny_hosts": ["ads.anthropic.com"], "allow_egress": ["198.51.100.0/24"]},
    "deny-only": {"image": PINNED, "deny_hosts": ["*.telemetry.example.net"],
                  "allow_egress": ["198.51.100.0/24"]},
    "plain": {"image": PINNED, "allow_egress": ["198.51.100.0/24"]},
}


def write_v2_config(lz, profiles):
    text = profiles_toml(profiles)
    assert text.count('schema = "lazaret-trusted-host-config-v1"') == 1
    lz.write(lz.config_path, text.replace("config-v1", "config-v2", 1))


def policy_of(proc):
    (policy,) = [d for d in documents(proc.stdout) if d["kind"] == "NetworkPolicy"]
    spec = dict(policy["spec"])
    spec.pop("podSelector")  # the instance label differs between profiles
    return spec


def test_host_rules_are_reported_not_mappable(lz):
    """Host rules and strict DNS have no NetworkPolicy form: each is reported
    not mappable [security] (stderr), the policy is the prefix rules' alone,
    and --strict refuses until each is accepted by name."""
    write_v2_config(lz, HOST_PROFILES)
    proc = export(lz, "hosts", "--report", "json")
    fields = {f["field"]: f for f in json.loads(proc.stderr)["fields"]}
    for name in ("allow_hosts", "deny_hosts", "dns"):
        assert fields[name]["status"] == "not-mappable", fields[name]
        assert fields[name]["security_relevant"] is True, fields[name]
    assert "2 host patterns" in fields["allow_hosts"]["reason"]
    assert "allow_egress" in fields["allow_hosts"]["reason"]
    assert "strict" in fields["dns"]["reason"] and "leaves the cluster" in fields["dns"]["reason"]
    text = export(lz, "hosts").stderr
    for name in ("allow_hosts", "deny_hosts", "dns"):
        assert re.search(rf"^  not-mappable {name} \[security\]: ", text, re.M), text
    # No FQDN policy, nothing widened: the same policy as the profile with
    # the same prefixes and no host rules; no name appears in the objects.
    assert policy_of(export(lz, "hosts")) == policy_of(export(lz, "plain"))
    out = export(lz, "hosts").stdout
    assert "anthropic" not in out and "npmjs" not in out
    for d in documents(out):
        assert k8s_schema.errors(d) == []

    # A profile with deny_hosts only forwards DNS (as locally): no dns entry.
    fields = {f["field"]: f for f in
              json.loads(export(lz, "deny-only", "--report", "json").stderr)["fields"]}
    assert fields["deny_hosts"]["status"] == "not-mappable"
    assert "allow_hosts" not in fields and "dns" not in fields
    # Control: a profile without host rules has none of these fields.
    fields = {f["field"] for f in
              json.loads(export(lz, "plain", "--report", "json").stderr)["fields"]}
    assert not fields & {"allow_hosts", "deny_hosts", "dns"}
    # Without the cluster's DNS no name leaves: strict is approximated, and
    # not a weakening.
    fields = {f["field"]: f for f in json.loads(
        export(lz, "hosts", "--no-cluster-dns", "--report", "json").stderr)["fields"]}
    assert fields["dns"]["status"] == "approximated"
    assert fields["dns"]["security_relevant"] is False


def test_strict_refuses_host_rules_until_accepted(lz):
    write_v2_config(lz, HOST_PROFILES)
    out = lz.path("hosts.yaml")
    fixed = ("--run-as-user", "1000", "--accept", "git", "--accept", "limits.processes",
             "--accept", "network")
    # Control: the same options pass for the profile without host rules.
    export(lz, "plain", "--strict", *fixed, "-o", lz.path("plain.yaml"))
    proc = export(lz, "hosts", "--strict", *fixed, "-o", out, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "--strict: nothing written: 3 security-relevant fields are" in proc.stderr
    assert not out.exists()
    proc = export(lz, "hosts", "--strict", *fixed, "--accept", "allow_hosts", "--accept",
                  "deny_hosts", "-o", out, check=False)
    assert proc.returncode == 1 and "1 security-relevant field is" in proc.stderr
    assert re.search(r"^  not-mappable allow_hosts \[security, accepted\]: ", proc.stderr, re.M)
    assert not out.exists()
    export(lz, "hosts", "--strict", *fixed, "--accept", "allow_hosts", "--accept", "deny_hosts",
           "--accept", "dns", "-o", out)
    assert out.exists()
