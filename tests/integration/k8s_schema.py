# SPDX-License-Identifier: Apache-2.0
"""JSON Schemas for what `lazaret export kubernetes` writes (issue 14).

Core types (PersistentVolumeClaim, NetworkPolicy, RuntimeClass, the PodSpec
inside a Sandbox): built at test time from the models of Debian's
python3-kubernetes 22.6.0 (the Kubernetes 1.22 API, generated upstream from
that release's OpenAPI document): every model's JSON field names and types
(`attribute_map`, `openapi_types`), its required fields (the generated
setters refuse None) and its enumerations (the setters' `allowed_values`).
Strict: a field the model does not have is refused, as `kubectl apply
--validate=strict` refuses it.

agent-sandbox (agents.x-k8s.io/v1beta1 Sandbox; extensions.agents.x-k8s.io/
v1beta1 SandboxTemplate, SandboxWarmPool, SandboxClaim): the fields of the
v0.5.6 release's CRDs (tag v0.5.6, commit 211b7579, k8s/crds/*.yaml and the
Go types api/v1beta1/sandbox_types.go, extensions/api/v1beta1/*_types.go),
written out here by hand because this project does not carry copies of
other repositories' files (docs/kubernetes.md "How the output is
checked"); their embedded PodSpec and PersistentVolumeClaimSpec are the
core models above, as the CRDs embed corev1's.

Validated with python3-jsonschema (Draft 7).
"""

from __future__ import annotations

import inspect
import re

import jsonschema
from kubernetes.client import models as k8s_models

K8S_MODELS_VERSION = "python3-kubernetes 22.6.0 (Kubernetes 1.22 API)"
AGENT_SANDBOX_RELEASE = "kubernetes-sigs/agent-sandbox v0.5.6 (211b7579)"

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")
_ALLOWED = re.compile(r"allowed_values = \[([^\]]*)\]")


class _Builder:
    def __init__(self):
        self.definitions = {}

    def type_schema(self, t: str) -> dict:
        m = _LIST.match(t)
        if m:
            return {"type": "array", "items": self.type_schema(m.group(1))}
        m = _DICT.match(t)
        if m:
            return {"type": "object", "additionalProperties": self.type_schema(m.group(1))}
        if t == "str":
            return {"type": "string"}
        if t == "int":
            return {"type": "integer"}
        if t == "float":
            return {"type": "number"}
        if t == "bool":
            return {"type": "boolean"}
        if t in ("datetime", "date"):
            return {"type": "string"}
        if t == "object":  # IntOrString, RawExtension: any JSON value
            return {}
        self.model(t)
        return {"$ref": f"#/definitions/{t}"}

    def model(self, name: str):
        if name in self.definitions:
            return
        cls = getattr(k8s_models, name)
        self.definitions[name] = {}  # recursion guard (JSONSchemaProps and the like)
        props, required = {}, []
        for attr, t in cls.openapi_types.items():
            key = cls.attribute_map[attr]
            s = self.type_schema(t)
            setter = getattr(cls, attr).fset
            src = inspect.getsource(setter) if setter else ""
            if "must not be `None`" in src:
                required.append(key)
            m = _ALLOWED.search(src)
            if m:
                s = dict(s, enum=[v.strip().strip('"') for v in m.group(1).split(",") if v.strip()])
            props[key] = s
        d = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            d["required"] = sorted(required)
        self.definitions[name] = d


def _object(props: dict, required=()) -> dict:
    d = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        d["required"] = list(required)
    return d


def _string_map() -> dict:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _kind(api_version: str, kind: str, spec: dict) -> dict:
    return _object({
        "apiVersion": {"const": api_version},
        "kind": {"const": kind},
        "metadata": {"$ref": "#/definitions/V1ObjectMeta"},
        "spec": spec,
    }, ("apiVersion", "kind", "metadata", "spec"))


def build() -> dict:
    """kind -> a Draft 7 schema for a whole object of that kind."""
    b = _Builder()
    for name in ("V1PersistentVolumeClaim", "V1NetworkPolicy", "V1RuntimeClass", "V1ObjectMeta",
                 "V1PodSpec", "V1PersistentVolumeClaimSpec", "V1EnvVar",
                 "V1NetworkPolicyIngressRule", "V1NetworkPolicyEgressRule"):
        b.model(name)
    ref = lambda n: {"$ref": f"#/definitions/{n}"}  # noqa: E731
    pod_template = _object({
        "metadata": _object({"labels": _string_map(), "annotations": _string_map()}),
        "spec": ref("V1PodSpec"),
    }, ("spec",))
    claim_templates = {"type": "array", "items": _object({
        "metadata": _object({"name": {"type": "string"}, "labels": _string_map(),
                             "annotations": _string_map()}),
        "spec": ref("V1PersistentVolumeClaimSpec"),
    }, ("spec",))}
    name_ref = _object({"name": {"type": "string"}}, ("name",))
    lifecycle = {
        "shutdownTime": {"type": "string", "format": "date-time"},
        "shutdownPolicy": {"enum": ["Delete", "Retain"]},
    }
    kinds = {
        "PersistentVolumeClaim": dict(ref("V1PersistentVolumeClaim")),
        "NetworkPolicy": dict(ref("V1NetworkPolicy")),
        "RuntimeClass": dict(ref("V1RuntimeClass")),
        "Sandbox": _kind("agents.x-k8s.io/v1beta1", "Sandbox", _object({
            "podTemplate": pod_template,
            "volumeClaimTemplates": claim_templates,
            "service": {"type": "boolean"},
            "operatingMode": {"enum": ["Running", "Suspended"]},
            **lifecycle,
        }, ("podTemplate",))),
        "SandboxTemplate": _kind("extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate", _object({
            "podTemplate": pod_template,
            "volumeClaimTemplates": claim_templates,
            "service": {"type": "boolean"},
            "networkPolicy": _object({
                "ingress": {"type": "array", "items": ref("V1NetworkPolicyIngressRule")},
                "egress": {"type": "array", "items": ref("V1NetworkPolicyEgressRule")},
            }),
            "networkPolicyManagement": {"enum": ["Managed", "Unmanaged"]},
            "envVarsInjectionPolicy": {"enum": ["Allowed", "Overrides", "Disallowed"]},
            "volumeClaimTemplatesPolicy": {"enum": ["Disallowed", "Allowed", "Overrides"]},
        }, ("podTemplate",))),
        "SandboxWarmPool": _kind("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool", _object({
            "replicas": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
            "sandboxTemplateRef": name_ref,
            "updateStrategy": _object({"type": {"enum": ["Recreate", "OnReplenish"]}}),
        }, ("sandboxTemplateRef",))),
        "SandboxClaim": _kind("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", _object({
            "warmPoolRef": name_ref,
            "env": {"type": "array", "items": ref("V1EnvVar")},
            "lifecycle": _object({
                "shutdownTime": {"type": "string", "format": "date-time"},
                "shutdownPolicy": {"enum": ["Delete", "DeleteForeground", "Retain"]},
                "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
            }),
            "volumeClaimTemplates": claim_templates,
            "additionalPodMetadata": _object({"labels": _string_map(),
                                              "annotations": _string_map()}),
        }, ("warmPoolRef",))),
    }
    # Core kinds: apiVersion and kind fixed as well.
    for kind, api in (("PersistentVolumeClaim", "v1"), ("NetworkPolicy", "networking.k8s.io/v1"),
                      ("RuntimeClass", "node.k8s.io/v1")):
        kinds[kind] = {"allOf": [kinds[kind], {"properties": {"apiVersion": {"const": api},
                                                              "kind": {"const": kind}},
                                               "required": ["apiVersion", "kind"]}]}
    return {kind: dict(s, definitions=b.definitions) for kind, s in kinds.items()}


_SCHEMAS = None


def errors(doc: dict) -> list:
    """Every schema violation of doc (a whole object), as strings; an object
    of a kind with no schema is one error."""
    global _SCHEMAS
    if _SCHEMAS is None:
        _SCHEMAS = {k: jsonschema.Draft7Validator(s) for k, s in build().items()}
    v = _SCHEMAS.get(doc.get("kind"))
    if v is None:
        return [f"no schema for kind {doc.get('kind')!r}"]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
