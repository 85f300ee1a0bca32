#!/usr/bin/env python3
"""The TURNPool CRD in deploy/crd agrees with the library's pool parser, field
for field: every field `turnfleet validate` prints for any pool in the tree
(its normalised output names every field the parser knows, defaults
included) is in the CRD's schema, and every field of the schema is one the
parser takes (a pool with just that field set is never refused as an unknown
field). usage: test_crd_fields.py TURNFLEET SOURCE_DIR"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

TF, SRC = sys.argv[1], sys.argv[2]


def schema_paths(node, path, out):
    """Leaf paths of a structural schema: objects by property, maps as `path{}`, arrays as `path[]`."""
    t = node.get("type")
    if t == "object" and "properties" in node:
        for k, sub in node["properties"].items():
            schema_paths(sub, path + "." + k, out)
    elif t == "object" and "additionalProperties" in node:
        out[path + "{}"] = node["additionalProperties"]
    elif t == "array":
        schema_paths(node["items"], path + "[]", out)
    else:
        out[path] = node
    return out


def doc_paths(v, path, maps, out):
    if path + "{}" in maps:
        out.add(path + "{}")
    elif isinstance(v, dict):
        for k, sub in v.items():
            doc_paths(sub, path + "." + k, maps, out)
    elif isinstance(v, list):
        for sub in v:
            doc_paths(sub, path + "[]", maps, out)
        if not v:
            out.add(path + "[]")
    else:
        out.add(path)
    return out


def sample_value(node):
    if "enum" in node:
        return node["enum"][0]
    return {"string": "x", "integer": node.get("minimum", 1), "boolean": True, "number": 1}.get(node.get("type"), "x")


def set_path(doc, path, value):
    """Set a leaf path (`.spec.a[].b`) in doc, making objects and one-element lists on the way."""
    parts = path.strip(".").replace("[]", ".[]").replace("{}", ".{}").split(".")
    cur = doc
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        nxt = None if last else parts[i + 1]
        if p == "[]":
            if not cur:
                cur.append({} if nxt not in (None, "[]") else value)
            if last:
                cur[0] = value
                return
            cur = cur[0]
            continue
        if p == "{}":
            cur["k"] = value
            return
        if last:
            cur[p] = value
            return
        if nxt == "[]":
            cur[p] = cur.get(p) if isinstance(cur.get(p), list) else []
        else:
            cur[p] = cur.get(p) if isinstance(cur.get(p), dict) else {}
        cur = cur[p]


def validate(path):
    return subprocess.run([TF, "validate", "-f", path, "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def main():
    crd = yaml.safe_load(open(os.path.join(SRC, "deploy", "crd", "turnpools.yaml")))
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema = schema_paths(spec_schema, "spec", {})
    maps = {p for p in schema if p.endswith("{}")}
    failures = []

    pools = sorted(glob.glob(os.path.join(SRC, "examples", "pools", "*")) + glob.glob(os.path.join(SRC, "deploy", "samples", "pool-*.yaml"))
                   + glob.glob(os.path.join(SRC, "tests", "data", "pools", "*")))
    parser = set()
    for p in pools:
        r = validate(p)
        if r.returncode != 0:
            failures.append("%s: not a valid pool: %s" % (p, r.stderr.strip()))
            continue
        parser |= doc_paths(json.loads(r.stdout)["spec"], "spec", maps, set())
    for p in sorted(parser - set(schema)):
        failures.append("%s: the parser takes it, the CRD's schema has no such field" % p)

    base = yaml.safe_load(open(os.path.join(SRC, "examples", "pools", "loopback.yaml")))
    tried = 0
    with tempfile.TemporaryDirectory() as tmp:
        for p in sorted(set(schema) - parser):
            doc = json.loads(json.dumps(base))
            set_path(doc, p, sample_value(schema[p]))
            f = os.path.join(tmp, "pool.json")
            with open(f, "w") as fh:
                json.dump(doc, fh)
            r = validate(f)
            tried += 1
            if "unknown field" in r.stderr:
                failures.append("%s: in the CRD's schema, refused by the parser: %s" % (p, r.stderr.strip()))
    if failures:
        print("\n".join(failures))
        return 1
    print("crd fields: %d schema fields, %d printed by the parser for %d pools, %d more set one by one; they agree"
          % (len(schema), len(parser), len(pools), tried))
    return 0


sys.exit(main())
