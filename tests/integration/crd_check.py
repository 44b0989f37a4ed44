#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check `lazaret export kubernetes` output against agent-sandbox's own CRDs.

Not part of `make check`: this project carries no copy of agent-sandbox's
files (docs/kubernetes.md "How the output is checked"). Given a directory
holding a release's k8s/crds/*.yaml, it validates every agent-sandbox object
of the YAML files against the v1beta1 openAPIV3Schema of its CRD, with
unknown fields refused as the API server's strict field validation
(kubectl's default) refuses them.

    tests/integration/crd_check.py CRD_DIR FILE.yaml...
"""

import sys
from pathlib import Path

import jsonschema
import yaml


def strict(schema):
    """The CRD schema with unknown fields refused (structural schemas
    prune rather than refuse; strict field validation refuses)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        if out.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def load_crds(crd_dir):
    validators = {}
    for f in sorted(Path(crd_dir).glob("*.yaml")):
        crd = yaml.safe_load(f.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            s = strict(v["schema"]["openAPIV3Schema"])
            s.setdefault("required", [])
            validators[(f"{group}/{v['name']}", kind)] = jsonschema.Draft7Validator(s)
    return validators


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    validators = load_crds(argv[1])
    checked = failed = 0
    for f in argv[2:]:
        for doc in yaml.safe_load_all(Path(f).read_text()):
            key = (doc.get("apiVersion"), doc.get("kind"))
            if not key[0].startswith(("agents.x-k8s.io/", "extensions.agents.x-k8s.io/")):
                continue
            checked += 1
            v = validators.get(key)
            errs = [f"no CRD for {key}"] if v is None else [
                f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
            for e in errs:
                print(f"{f}: {key[1]} {doc['metadata']['name']}: {e}")
            failed += bool(errs)
    print(f"{checked} agent-sandbox objects checked, {failed} invalid")
    return 1 if failed or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
