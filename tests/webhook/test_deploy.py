#!/usr/bin/env python3
"""deploy/webhook on the Kubernetes API stand-in: the manifests applied with
kubectl, the webhook run from the Deployment by the stand-in's Deployment
controller and process kubelet, with its ServiceAccount token, the ClusterRole
it is granted (read-only TURNPools and Nodes: the stand-in enforces RBAC) and a
certificate for turnfleet-webhook.turnfleet-system.svc; the API server calls it
through the Service as the webhook configurations say.

    test_deploy.py BUILD_DIR

Addresses: the stand-in on 127.0.0.250:16700; the two webhook pods listen on their
pod IPs (the nodes' addresses 127.0.0.251-253) at 8443, where the stand-in routes
the Service as kube-proxy would (a Ready pod's podIP and targetPort)."""
import copy
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

DEPLOY = os.path.join(harness.SOURCE, "deploy", "webhook")
NS = "turnfleet-system"




expect = harness.expect


def main():
    build = os.path.abspath(sys.argv[1])
    tmp = harness.tmpdir("tf-deploy-")
    ca = harness.make_ca(tmp)
    key, crt = harness.make_cert(tmp, ca, "svc", ["DNS:turnfleet-webhook.%s.svc" % NS])
    cluster = harness.Cluster(tmp, build=build)
    ok = False
    try:
        cluster.apply(open(os.path.join(harness.SOURCE, "deploy", "crd", "turnpools.yaml")).read())
        cluster.kubectl("create", "namespace", NS)
        cluster.kubectl("create", "secret", "tls", "turnfleet-webhook-tls", "--cert", crt, "--key", key, ns=NS)
        # every manifest as kubectl reads it: deploy/webhook through its kustomization
        built = cluster.kubectl("kustomize", DEPLOY).stdout
        out = cluster.kubectl("create", "--dry-run=client", "-o", "json", "-f", "-", input=built).stdout
        objs, dec, i = [], json.JSONDecoder(), 0
        while out[i:].strip():  # one JSON object per document
            o, n = dec.raw_decode(out[i:].lstrip())
            i = len(out) - len(out[i:].lstrip()) + n
            objs += o["items"] if o.get("kind") == "List" else [o]
        kinds = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        for k in (("ServiceAccount", "turnfleet-webhook"), ("ClusterRole", "turnfleet-webhook"),
                  ("ClusterRoleBinding", "turnfleet-webhook"), ("Deployment", "turnfleet-webhook"),
                  ("Service", "turnfleet-webhook"), ("ValidatingWebhookConfiguration", "turnfleet"),
                  ("MutatingWebhookConfiguration", "turnfleet"), ("Role", "turnfleet-webhook-api-endpoints"),
                  ("RoleBinding", "turnfleet-webhook-api-endpoints")):
            expect(k in kinds, "deploy/webhook has the %s %s" % k)
        # as shipped: ServiceAccount, RBAC, Service, Deployment (two replicas, each on its pod's address:8443)
        for k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service", "Deployment"):
            cluster.apply(kinds[(k, "turnfleet-webhook")])
            if k == "ClusterRoleBinding":   # and the Role in default for the API servers' Endpoints
                for r in ("Role", "RoleBinding"):
                    cluster.apply(kinds[(r, "turnfleet-webhook-api-endpoints")])
        dep = kinds[("Deployment", "turnfleet-webhook")]
        sel = ",".join("%s=%s" % kv for kv in dep["spec"]["selector"]["matchLabels"].items())

        def pods():
            return json.loads(cluster.kubectl("get", "pods", "-l", sel, "-o", "json", ns=NS).stdout)["items"]

        def pod():
            items = pods()
            return items[0] if items else None

        def ready():
            return cluster.kubectl("rollout", "status", "deployment/turnfleet-webhook", "--timeout=1s", ns=NS,
                                   check=False).returncode == 0
        try:
            harness.wait_for("the Deployment's two pods Ready (their /readyz: caches synced through RBAC)", ready, 90, 0.5)
        finally:
            name = (pod() or {}).get("metadata", {}).get("name")
            logs = cluster.kubectl("logs", name, ns=NS, check=False).stdout if name else ""
        ps = pods()
        expect(len(ps) == 2 and all(p["status"].get("phase") == "Running" and p["metadata"]["ownerReferences"][0]["kind"]
                                    == "Deployment" for p in ps) and len({p["spec"]["nodeName"] for p in ps}) == 2,
               "the webhook runs from the Deployment: two pods on two nodes", logs)
        expect("forbidden" not in logs.lower(), "the ClusterRole grants what the informers need", logs)
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            cfg = copy.deepcopy(kinds[(kind, "turnfleet")])
            for wh in cfg["webhooks"]:
                wh["clientConfig"]["caBundle"] = harness.b64file(ca[1])  # what cert-manager's CA injector does
            cluster.apply(cfg)
        bad = harness.pool("bad", relayPortRange={"start": 3000, "end": 4000},
                           listeners=[{"name": "turn", "protocol": "udp", "port": 3478}])
        r = cluster.apply(bad, check=False)
        expect(r.returncode != 0 and 'admission webhook "validate.turnfleet.hzmi.dev" denied the request: '
               "spec.listeners[0].port" in r.stderr,
               "the API server reaches it through the Service with the shipped configurations", r.stderr)
        cluster.apply(harness.pool("demo"))
        spec = json.loads(cluster.kubectl("get", "tp", "demo", "-o", "json").stdout)["spec"]
        expect("dataplane" in spec and "listeners" in spec, "the shipped mutating configuration defaults a pool",
               json.dumps(spec))
        ok = True
    finally:
        harness.finish(tmp, ok, cluster)


if __name__ == "__main__":
    main()
