#!/usr/bin/env python3
"""Validates the custom resources of rendered manifests against vendored CRDs, offline.

    k8s-crd-check.py CRD_DIR RENDERED_YAML BUILTIN_OUT

Every object of RENDERED_YAML whose apiVersion and kind a CRD in CRD_DIR defines is
checked against that version's openAPIV3Schema, strictly: an object schema that lists its
properties takes no others (the API server prunes or, with strict field validation, refuses
them). Enums, patterns, bounds and required fields are checked by jsonschema; CEL rules
(x-kubernetes-validations) are not evaluated. The other objects, and the CRDs themselves,
are written to BUILTIN_OUT for kubernetes-validate. Runs in scripts/k8s-check.sh's venv,
where pyyaml and jsonschema come with kubernetes-validate.
"""
import glob
import os
import sys

import jsonschema
import yaml


def strict(schema):
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if ("properties" in out and "additionalProperties" not in out
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def main():
    crd_dir, rendered, builtin_out = sys.argv[1:4]
    schemas, crds = {}, []
    for path in sorted(glob.glob(os.path.join(crd_dir, "*.yaml"))):
        for crd in yaml.safe_load_all(open(path)):
            if not crd:
                continue
            crds.append(crd)
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for v in crd["spec"]["versions"]:
                if v.get("served"):
                    schema = strict(v["schema"]["openAPIV3Schema"])
                    # metadata is the API's own ObjectMeta, checked by the server.
                    schema["properties"]["metadata"] = {"type": "object"}
                    schemas[(f"{group}/{v['name']}", kind)] = schema
    failed, rest, custom = 0, [], 0
    for obj in yaml.safe_load_all(open(rendered)):
        if not obj:
            continue
        key = (obj.get("apiVersion"), obj.get("kind"))
        if key not in schemas:
            rest.append(obj)
            continue
        custom += 1
        name = f"{obj['kind']} {obj.get('metadata', {}).get('name')}"
        v = jsonschema.Draft202012Validator(schemas[key])
        errors = sorted(v.iter_errors(obj), key=lambda e: list(e.absolute_path))
        for e in errors:
            path = ".".join(str(p) for p in e.absolute_path) or "(root)"
            print(f"{name}: {path}: {e.message}", file=sys.stderr)
        failed += bool(errors)
    with open(builtin_out, "w") as f:
        yaml.safe_dump_all(rest + crds, f, sort_keys=False)
    print(f"k8s-crd-check: {custom} custom resources checked against {len(crds)} CRDs, "
          f"{failed} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
