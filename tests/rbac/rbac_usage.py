#!/usr/bin/env python3
"""The RBAC in deploy/ against what the code asks for.

The stand-in logs every authorization question about a user outside system:masters
(tests/kube/standin/server.py: user, verb, group, resource, subresource, namespace,
name, allowed, and what asked it: the request itself or an admission plugin).
tests/kube/cluster.py, run with TF_RBAC_USAGE=PREFIX, writes that log to
PREFIX.PORT.json (Writer below); the Kubernetes e2e suites run it with
PREFIX=build/rbac-usage/<ctest name>.

  rbac_usage.py compare --source DIR --usage DIR SUITE=PROFILE...
      every suite's questions by the ServiceAccounts the PROFILE's files bind, against
      the grants in those files: fails on a grant no suite of its profile used, on a
      use the files do not grant, and on a denied question not in EXPECTED_DENIALS.
  rbac_usage.py summary --usage DIR
      the questions per ServiceAccount (what the suites asked, allowed or not).
  rbac_usage.py self-test
      the comparison on synthetic input (rbac_check)."""
import argparse
import glob
import json
import os
import sys

# The deploy/ files whose RBAC a profile installs (the subjects are the ServiceAccounts they bind).
PROFILES = {
    "cluster": ["deploy/rbac/operator.yaml", "deploy/rbac/api-endpoints.yaml", "deploy/webhook/rbac.yaml", "deploy/issuer/rbac.yaml",
                "deploy/vantage/cronjob.yaml"],
    "namespaced": ["deploy/namespaced/rbac/operator.yaml"],
}

# Denials a suite provokes on purpose: each is a test of a forbidden path, not a missing grant.
EXPECTED_DENIALS = [
    {"suite": "issuer_kube", "user": "system:serviceaccount:turnfleet-system:turnfleet-issuer", "verb": "create",
     "group": "", "resource": "configmaps", "via": "request",
     "why": "test_issuer_kube: the issuer's token cannot write (read-only RBAC)"},
    {"suite": "issuer_kube", "user": "system:serviceaccount:turnfleet-system:turnfleet-issuer", "verb": "get",
     "group": "", "resource": "secrets", "via": "request",
     "why": "test_issuer_kube: the issuer's token lists and watches, it cannot get one Secret"},
    {"suite": "operator_namespaced", "user": "system:serviceaccount:turnfleet:turnfleet-operator", "verb": "list",
     "group": "", "resource": "pods", "namespace": "", "via": "request",
     "why": "test_operator_namespaced: the namespaced operator's token cannot list pods cluster-wide"},
    {"suite": "operator_namespaced", "user": "system:serviceaccount:turnfleet:turnfleet-operator", "verb": "update",
     "group": "apps", "resource": "deployments", "subresource": "finalizers", "via": "OwnerReferencesPermissionEnforcement",
     "why": "test_operator_namespaced: a ConfigMap that blocks a Deployment's deletion is refused (the plugin asks for "
            "update on deployments/finalizers)"},
]

FIELDS = ("user", "verb", "group", "resource", "subresource", "namespace", "name", "allowed", "via")


class Writer:
    """Writes the stand-in's authorization log to PREFIX.PORT.json when it changed (PREFIX None: nothing)."""

    def __init__(self, prefix, port):
        self.path = "%s.%d.json" % (prefix, port) if prefix else None
        self.last = None

    def write(self, entries):
        if not self.path or entries == self.last:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"questions": entries}, f, indent=1)
        os.rename(tmp, self.path)
        self.last = entries


# ---- grants ------------------------------------------------------------------------------------------------

def load_docs(source, files):
    import yaml     # python3-yaml
    docs = []
    for rel in files:
        with open(os.path.join(source, rel)) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def grants(docs):
    """Grant atoms: one per (ServiceAccount user, namespace or "*", group, resource, verb, resourceNames, where),
    from every binding in docs whose role is in docs too."""
    roles = {}
    for d in docs:
        if d.get("kind") in ("Role", "ClusterRole"):
            md = d["metadata"]
            roles[(d["kind"], md.get("namespace", "") if d["kind"] == "Role" else "", md["name"])] = d.get("rules") or []
    out = []
    for d in docs:
        if d.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        md = d["metadata"]
        bns = md.get("namespace", "") if d["kind"] == "RoleBinding" else ""
        ref = d["roleRef"]
        rules = roles.get((ref["kind"], bns if ref["kind"] == "Role" else "", ref["name"]))
        if rules is None:
            continue
        for s in d.get("subjects") or []:
            if s.get("kind") != "ServiceAccount":
                continue
            user = "system:serviceaccount:%s:%s" % (s.get("namespace") or bns, s["name"])
            for i, r in enumerate(rules):
                for g in r.get("apiGroups") or []:
                    for res in r.get("resources") or []:
                        for v in r.get("verbs") or []:
                            out.append({"user": user, "namespace": bns or "*", "group": g, "resource": res, "verb": v,
                                        "names": tuple(r.get("resourceNames") or ()),
                                        "where": "%s %s/%s rule %d (bound by %s %s)" % (ref["kind"], bns or "-", ref["name"], i + 1,
                                                                                       d["kind"], md["name"])})
    return out


def covers(g, q):
    res = q["resource"] + ("/" + q["subresource"] if q.get("subresource") else "")
    return (g["user"] == q["user"] and (g["namespace"] == "*" or g["namespace"] == q.get("namespace"))
            and g["group"] in ("*", q["group"]) and g["verb"] in ("*", q["verb"]) and g["resource"] in ("*", res)
            and (not g["names"] or q.get("name") in g["names"]))


def expected_denial(suite, q):
    for e in EXPECTED_DENIALS:
        if e["suite"] == suite and all(q.get(k, "") == v for k, v in e.items() if k not in ("suite", "why")):
            return e
    return None


def text(q):
    res = q["resource"] + ("/" + q["subresource"] if q.get("subresource") else "")
    return "%s %s %s%s%s%s%s" % (q["user"].replace("system:serviceaccount:", "sa:"), q["verb"],
                                 ("%s." % q["group"]) if q["group"] else "", res,
                                 (" %s" % q["name"]) if q.get("name") else "",
                                 (" in %s" % q["namespace"]) if q.get("namespace") else " (cluster)",
                                 "" if q.get("via", "request") == "request" else " [%s]" % q["via"])


def gtext(g):
    return "%s %s %s%s%s%s: %s" % (g["user"].replace("system:serviceaccount:", "sa:"), g["verb"],
                                  ("%s." % g["group"]) if g["group"] else "", g["resource"],
                                  (" %s" % ",".join(g["names"])) if g["names"] else "",
                                  "" if g["namespace"] == "*" else " in %s" % g["namespace"], g["where"])


def compare(profiles, usage):
    """profiles: name -> grant atoms; usage: [(suite, profile, questions)]. Returns the problems (strings)."""
    problems = []
    used = {name: set() for name in profiles}
    for suite, profile, questions in usage:
        atoms = profiles[profile]
        subjects = {g["user"] for g in atoms}
        for q in questions:
            if q["user"] not in subjects or q.get("via") == "review":
                continue
            hit = [i for i, g in enumerate(atoms) if covers(g, q)]
            used[profile].update(hit)
            if not q["allowed"]:
                if not expected_denial(suite, q):
                    problems.append("%s: denied, not granted: %s" % (suite, text(q)))
            elif not hit:
                problems.append("%s: allowed when it ran (the test's own RBAC, or deploy/ since changed), not granted by "
                                "deploy/ (%s): %s" % (suite, profile, text(q)))
    for name, atoms in profiles.items():
        if not any(p == name for _s, p, _q in usage):
            continue
        for i, g in enumerate(atoms):
            if i not in used[name]:
                problems.append("%s: granted, never used: %s" % (name, gtext(g)))
    for e in EXPECTED_DENIALS:
        if any(s == e["suite"] for s, _p, _q in usage) and \
                not any(s == e["suite"] and not q["allowed"] and expected_denial(s, q) is e for s, _p, qs in usage for q in qs):
            problems.append("%s: the expected denial did not happen: %s" % (e["suite"], e["why"]))
    return sorted(set(problems))


def read_usage(usage_dir, suite):
    """The questions of every cluster a suite ran (its files PREFIX.PORT.json)."""
    files = sorted(glob.glob(os.path.join(usage_dir, glob.escape(suite) + ".*.json")))
    qs = []
    for f in files:
        with open(f) as fh:
            qs += json.load(fh)["questions"]
    return files, qs


# ---- the command line --------------------------------------------------------------------------------------

def cmd_compare(a):
    profiles = {name: grants(load_docs(a.source, files)) for name, files in PROFILES.items()}
    usage, problems = [], []
    for spec in a.suites:
        suite, _, profile = spec.partition("=")
        if profile not in PROFILES:
            return die("%s: unknown profile %r (one of %s)" % (spec, profile, ", ".join(PROFILES)))
        files, qs = read_usage(a.usage, suite)
        if not files:
            problems.append("%s: no usage file %s.*.json (did the suite run?)" % (suite, os.path.join(a.usage, suite)))
            continue
        usage.append((suite, profile, qs))
    problems += compare(profiles, usage)
    for p in problems:
        print(p)
    n = sum(len(q) for _s, _p, q in usage)
    print("rbac_usage: %d suites, %d distinct questions, %d grant atoms: %s" %
          (len(usage), n, sum(len(v) for v in profiles.values()), "%d problems" % len(problems) if problems else "exact"))
    return 1 if problems else 0


def cmd_summary(a):
    per = {}
    for f in sorted(glob.glob(os.path.join(a.usage, "*.json"))):
        with open(f) as fh:
            for q in json.load(fh)["questions"]:
                per.setdefault(q["user"], set()).add((text(q), q["allowed"]))
    for user in sorted(per):
        print(user)
        for t, ok in sorted(per[user]):
            print("  %s %s" % ("allowed" if ok else "DENIED ", t))
    return 0


def die(msg):
    print("rbac_usage: " + msg, file=sys.stderr)
    return 2


def self_test():
    """rbac_check: the comparison on synthetic input."""
    sa = "system:serviceaccount:ns:op"
    docs = [{"kind": "ClusterRole", "metadata": {"name": "op"},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                       {"apiGroups": ["x.io"], "resources": ["things/finalizers"], "verbs": ["update"]}]},
            {"kind": "ClusterRoleBinding", "metadata": {"name": "op"},
             "roleRef": {"kind": "ClusterRole", "name": "op"}, "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]},
            {"kind": "Role", "metadata": {"name": "cm", "namespace": "ns"},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["get"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "cm", "namespace": "ns"},
             "roleRef": {"kind": "Role", "name": "cm"}, "subjects": [{"kind": "ServiceAccount", "name": "op"}]}]

    def q(verb, resource, ns="", name="", allowed=True, sub="", group="", via="request", user=sa):
        return dict(zip(FIELDS, (user, verb, group, resource, sub, ns, name, allowed, via)), count=1)
    exact = [q("list", "pods"), q("watch", "pods", "a"), q("update", "things", "a", "t1", sub="finalizers", group="x.io",
                                                          via="OwnerReferencesPermissionEnforcement"),
             q("get", "configmaps", "ns", "mine"), q("get", "pods", allowed=True, user="system:serviceaccount:ns:other"),
             q("create", "selfsubjectaccessreviews", group="authorization.k8s.io", via="review", allowed=False)]
    profiles = {"p": grants(docs)}
    cases = [
        ("exact", exact, []),
        ("an extra grant (watch unused)", [x for x in exact if x["verb"] != "watch"], ["granted, never used: sa:ns:op watch pods"]),
        ("an extra grant (the finalizers rule unused)", [x for x in exact if x["resource"] != "things"],
         ["granted, never used: sa:ns:op update x.io.things/finalizers"]),
        ("a missing grant (delete denied)", exact + [q("delete", "pods", "a", "p1", allowed=False)],
         ["denied, not granted: sa:ns:op delete pods p1 in a"]),
        ("a missing grant (allowed by the test's RBAC only)", exact + [q("patch", "pods", "a", "p1")],
         ["not granted by deploy/ (p): sa:ns:op patch pods p1 in a"]),
        ("a grant in another namespace", exact + [q("get", "configmaps", "other", "mine", allowed=False)],
         ["denied, not granted: sa:ns:op get configmaps mine in other"]),
        ("a resourceName not granted", exact + [q("get", "configmaps", "ns", "theirs")],
         ["not granted by deploy/ (p): sa:ns:op get configmaps theirs in ns"]),
    ]
    failed = 0
    for what, qs, want in cases:
        got = compare(profiles, [("s", "p", qs)])
        ok = len(got) == len(want) and all(any(w in g for g in got) for w in want)
        print("%s: %s%s" % ("ok" if ok else "FAIL", what, "" if ok else " -> %s (wanted %s)" % (got, want)))
        failed += not ok
    # an expected denial passes only for its suite, and one that did not happen is a problem
    global EXPECTED_DENIALS
    saved = EXPECTED_DENIALS
    EXPECTED_DENIALS = [{"suite": "s", "user": sa, "verb": "delete", "group": "", "resource": "pods", "via": "request", "why": "w"}]
    try:
        for what, suite, qs, want in [
                ("an expected denial", "s", exact + [q("delete", "pods", "a", "p1", allowed=False)], []),
                ("an expected denial in another suite", "t", exact + [q("delete", "pods", "a", "p1", allowed=False)],
                 ["denied, not granted"]),
                ("an expected denial that did not happen", "s", exact, ["the expected denial did not happen"])]:
            got = compare(profiles, [(suite, "p", qs)])
            ok = len(got) == len(want) and all(any(w in g for g in got) for w in want)
            print("%s: %s%s" % ("ok" if ok else "FAIL", what, "" if ok else " -> %s (wanted %s)" % (got, want)))
            failed += not ok
    finally:
        EXPECTED_DENIALS = saved
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--source", required=True)
    c.add_argument("--usage", required=True)
    c.add_argument("suites", nargs="+", metavar="SUITE=PROFILE")
    s = sub.add_parser("summary")
    s.add_argument("--usage", required=True)
    sub.add_parser("self-test")
    a = ap.parse_args()
    if a.cmd == "compare":
        return cmd_compare(a)
    if a.cmd == "summary":
        return cmd_summary(a)
    return self_test()


if __name__ == "__main__":
    sys.exit(main())
