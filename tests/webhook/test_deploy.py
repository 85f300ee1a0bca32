#!/usr/bin/env python3
"""deploy/webhook on the Kubernetes API stand-in: the manifests applied with
kubectl, the webhook run from the Deployment by the stand-in's Deployment
controller and process kubelet, with its ServiceAccount token, the ClusterRole
it is granted (read-only TURNPools and Nodes: the stand-in enforces RBAC) and a
certificate for turnfleet-webhook.turnfleet-system.svc; the API server calls it
through the Service as the webhook configurations say.

    test_deploy.py BUILD_DIR

Addresses: the stand-in on 127.0.0.250:16700; the pod listens on 127.0.0.250:16711
(host network, as the stand-in runs every pod: one replica, on the test's address
and port instead of 0.0.0.0:8443), which the test gives the Service as its
clusterIP and port (the stand-in dials the Service's clusterIP)."""
import copy
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

DEPLOY = os.path.join(harness.SOURCE, "deploy", "webhook")
NS, ADDR, PORT = "turnfleet-system", harness.API_ADDR, 16711




def expect(cond, what, detail=""):
    if not cond:
        raise AssertionError("%s%s" % (what, (": " + detail) if detail else ""))
    print("ok -", what)


def main():
    build = os.path.abspath(sys.argv[1])
    tmp = harness.tmpdir("tf-deploy-")
    ca = harness.make_ca(tmp)
    key, crt = harness.make_cert(tmp, ca, "svc", ["DNS:turnfleet-webhook.%s.svc" % NS])
    cluster = harness.Cluster(tmp, build=build)
    ok = False
    try:
        cluster.apply(open(os.path.join(HERE, "testdata", "crd.yaml")).read())
        cluster.kubectl("create", "namespace", NS)
        cluster.kubectl("create", "secret", "tls", "turnfleet-webhook-tls", "--cert", crt, "--key", key, ns=NS)
        # every manifest as kubectl reads it
        objs = []
        for name in sorted(os.listdir(DEPLOY)):
            out = cluster.kubectl("create", "--dry-run=client", "-o", "json", "-f", os.path.join(DEPLOY, name)).stdout
            dec, i = json.JSONDecoder(), 0
            while out[i:].strip():  # one JSON object per document of the file
                o, n = dec.raw_decode(out[i:].lstrip())
                i = len(out) - len(out[i:].lstrip()) + n
                objs += o["items"] if o.get("kind") == "List" else [o]
        kinds = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        for k in (("ServiceAccount", "turnfleet-webhook"), ("ClusterRole", "turnfleet-webhook"),
                  ("ClusterRoleBinding", "turnfleet-webhook"), ("Deployment", "turnfleet-webhook"),
                  ("Service", "turnfleet-webhook"), ("ValidatingWebhookConfiguration", "turnfleet"),
                  ("MutatingWebhookConfiguration", "turnfleet")):
            expect(k in kinds, "deploy/webhook has the %s %s" % k)
        # as shipped: ServiceAccount, RBAC
        for k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            cluster.apply(kinds[(k, "turnfleet-webhook")])
        # the Service and the pod on this test's address and port, the rest as shipped
        svc = copy.deepcopy(kinds[("Service", "turnfleet-webhook")])
        svc["spec"]["clusterIP"] = ADDR
        svc["spec"]["ports"][0]["port"] = PORT
        cluster.apply(svc)
        # the Deployment on this test's address and port, one replica (every stand-in pod shares the host network)
        dep = copy.deepcopy(kinds[("Deployment", "turnfleet-webhook")])
        dep["spec"]["replicas"] = 1
        c = dep["spec"]["template"]["spec"]["containers"][0]
        args = c["args"]
        args[args.index("--listen") + 1] = "%s:%d" % (ADDR, PORT)
        for probe in ("readinessProbe", "livenessProbe"):
            c[probe]["httpGet"]["port"] = PORT
            c[probe]["httpGet"]["host"] = ADDR
        cluster.apply(dep)
        sel = ",".join("%s=%s" % kv for kv in dep["spec"]["selector"]["matchLabels"].items())

        def pod():
            items = json.loads(cluster.kubectl("get", "pods", "-l", sel, "-o", "json", ns=NS).stdout)["items"]
            return items[0] if len(items) == 1 else None

        def ready():
            p = pod()
            conds = {x["type"]: x["status"] for x in (p or {}).get("status", {}).get("conditions", [])}
            return p and (conds.get("Ready") == "True" or p.get("status", {}).get("phase") in ("Failed", "Succeeded"))
        name = None
        try:
            harness.wait_for("the Deployment's pod Ready (its /readyz: caches synced through RBAC)", ready, 60, 0.3)
        finally:
            name = (pod() or {}).get("metadata", {}).get("name")
            logs = cluster.kubectl("logs", name, ns=NS, check=False).stdout if name else ""
        p = pod()
        expect(p["status"].get("phase") == "Running" and p["metadata"]["ownerReferences"][0]["kind"] == "Deployment",
               "the webhook runs from the Deployment", logs)
        expect(cluster.kubectl("rollout", "status", "deployment/turnfleet-webhook", "--timeout=30s", ns=NS,
                               check=False).returncode == 0, "the Deployment is rolled out")
        expect("forbidden" not in logs.lower(), "the ClusterRole grants what the informers need", logs)
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            cfg = copy.deepcopy(kinds[(kind, "turnfleet")])
            for wh in cfg["webhooks"]:
                wh["clientConfig"]["caBundle"] = harness.b64file(ca[1])
                wh["clientConfig"]["service"]["port"] = PORT
            cluster.apply(cfg)
        bad = harness.pool("bad", relayPortRange={"start": 50100, "end": 50000})
        r = cluster.apply(bad, check=False)
        expect(r.returncode != 0 and 'admission webhook "validate.turnfleet.hzmi.dev" denied the request: '
               "spec.relayPortRange.end" in r.stderr,
               "the API server reaches it through the Service with the shipped configurations", r.stderr)
        cluster.apply(harness.pool("demo"))
        spec = json.loads(cluster.kubectl("get", "tp", "demo", "-o", "json").stdout)["spec"]
        expect("dataplane" in spec and "listeners" in spec, "the shipped mutating configuration defaults a pool",
               json.dumps(spec))
        ok = True
    finally:
        cluster.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            sys.stderr.write("kept %s\n" % tmp)


if __name__ == "__main__":
    main()
