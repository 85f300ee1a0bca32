#!/usr/bin/env python3
"""The install path a newcomer takes, on the Kubernetes API stand-in, with kubectl alone:

    kubectl create namespace turnfleet-system
    kubectl -n turnfleet-system create secret tls turnfleet-webhook-tls --cert … --key …
    kubectl apply -k deploy/default               (the CRD, RBAC and the operator)
    kubectl apply -k deploy/with-webhook          (deploy/default plus the webhook)

The test stands in for cert-manager: it accepts the Issuer and Certificate kinds (minimal CRDs),
issues the webhook's certificate with openssl and injects its CA into both webhook
configurations, as cert-manager's CA injector would. Everything else runs as shipped: the
stand-in's Deployment controller makes the operator's and the webhook's pods from deploy/, its
kubelet runs them from the project's image (the root filesystem tools/dev/image-rootfs.sh built
from deploy/image: Debian 12's packages plus this build's install tree) on their ServiceAccounts'
tokens under the shipped RBAC, and the API server calls the webhook through its Service. Then the
operator's story: a pool is admitted (defaults patched in) or denied with its field path, its
relays (real coturn 4.6.1) are proven and published and allocate, the leader's pod is deleted and
the other replica takes over and acts, the pool is deleted and everything it owned goes.

    test_install.py BUILD_DIR

Addresses: the stand-in on 127.0.0.250:16700 with nodes 127.0.0.251-253 (tests/webhook/harness.py),
each node in its own network namespace (cluster.py --node-netns: a pod's 127.0.0.1 is its node's, as
on a cluster, so the operator's replicas and the relays never meet on one loopback);
the operator's metrics and the webhook on the pods' addresses (:8080, :8443); relays on the nodes'
addresses, UDP 3478, relay ports 60200-60219, agents on 9700; the pool inst/edge takes the
operator's CLI port slot 5 (127.0.0.1:15850-15859)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "webhook"))
import harness  # noqa: E402

SOURCE = harness.SOURCE
NS, POOL, SYS = "inst", "edge", "turnfleet-system"
SECRET = "install-path-secret-5f1c0d9e"

CERT_MANAGER_CRDS = [
    {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
     "metadata": {"name": "%ss.cert-manager.io" % kind.lower()},
     "spec": {"group": "cert-manager.io", "scope": "Namespaced",
              "names": {"plural": kind.lower() + "s", "singular": kind.lower(), "kind": kind},
              "versions": [{"name": "v1", "served": True, "storage": True,
                            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    for kind in ("Issuer", "Certificate")]


expect = harness.expect


def clients():
    p = subprocess.run([os.path.join(SOURCE, "tests", "kube", "clients.sh")], capture_output=True, text=True)
    found = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    if p.returncode != 0 or "kubectl-1.20" not in found or "kubectl-rootfs" not in found:
        raise AssertionError("tests/kube/clients.sh: %s" % p.stderr)
    return found


def kinds_of(text):
    """(kind, namespace, name) of every object in a multi-document YAML text (kubectl kustomize's output)."""
    import yaml
    return sorted((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
                  for d in yaml.safe_load_all(text) if d)


def main():
    build = os.path.abspath(sys.argv[1])
    image = os.path.join(build, "image-root")
    if not os.path.exists(os.path.join(image, "usr", "local", "bin", "turnfleet-operator")):
        raise AssertionError("no image root with turnfleet-operator at %s (ctest image_rootfs builds it)" % image)
    probe = os.path.join(build, "tools", "turnfleet-probe", "turnfleet-probe")
    kubectls = clients()
    tmp = harness.tmpdir("tf-install-")
    ok = False
    cluster = None
    try:
        # the overlays read the same with every kubectl, kubectl 1.20's kustomize included
        for overlay in ("default", "with-webhook"):
            seen = {}
            for name, k in sorted(kubectls.items()):
                p = subprocess.run([k, "kustomize", os.path.join(SOURCE, "deploy", overlay)], capture_output=True, text=True,
                                   env=dict(os.environ, HOME=tmp))
                expect(p.returncode == 0, "%s: kubectl kustomize deploy/%s" % (name, overlay), p.stderr)
                seen[name] = kinds_of(p.stdout)
            first = next(iter(seen.values()))
            expect(all(v == first for v in seen.values()), "deploy/%s: the same %d objects with every kubectl (%s)"
                   % (overlay, len(first), ", ".join(sorted(seen))), json.dumps(seen))
        kinds = [k for k, _, _ in first]
        for want in ("CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                     "RoleBinding", "Deployment", "Service", "ValidatingWebhookConfiguration",
                     "MutatingWebhookConfiguration", "Issuer", "Certificate"):
            expect(want in kinds, "deploy/with-webhook installs a %s" % want)

        ca = harness.make_ca(tmp)
        key, crt = harness.make_cert(tmp, ca, "svc", ["DNS:turnfleet-webhook.%s.svc" % SYS])
        cluster = harness.Cluster(tmp, build=build, images=["*turnfleet*=" + image], netns=True)
        for crd in CERT_MANAGER_CRDS:                    # in place of cert-manager
            cluster.apply(crd)
        cluster.kubectl("wait", "--for=condition=established", "--timeout=20s", "crd/certificates.cert-manager.io")
        cluster.kubectl("create", "namespace", SYS)
        cluster.kubectl("create", "secret", "tls", "turnfleet-webhook-tls", "--cert", crt, "--key", key, ns=SYS)
        # deploy/default first (the newest kubectl), then with-webhook over it (kubectl 1.20): what default made is kept
        p = cluster.kubectl("apply", "-k", os.path.join(SOURCE, "deploy", "default"), check=False)
        expect(p.returncode == 0 and "deployment.apps/turnfleet-operator created" in p.stdout,
               "kubectl apply -k deploy/default", p.stdout + p.stderr)
        old = [kubectls["kubectl-1.20"], "--kubeconfig", cluster.kubeconfig, "--cache-dir", os.path.join(tmp, "k120")]
        p = subprocess.run(old + ["apply", "-k", os.path.join(SOURCE, "deploy", "with-webhook")], capture_output=True,
                           text=True, env=dict(os.environ, HOME=tmp))
        expect(p.returncode == 0 and "deployment.apps/turnfleet-webhook created" in p.stdout and
               "deployment.apps/turnfleet-operator created" not in p.stdout,
               "kubectl 1.20 apply -k deploy/with-webhook (the operator's objects already there)", p.stdout + p.stderr)
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):   # cert-manager's CA injector
            cluster.kubectl("patch", kind, "turnfleet", "--type=json", "-p", json.dumps(
                [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": harness.b64file(ca[1])}]))
        for dep in ("turnfleet-operator", "turnfleet-webhook"):
            r = cluster.kubectl("rollout", "status", "deployment/" + dep, "--timeout=90s", ns=SYS, check=False)
            if r.returncode != 0:
                pods = cluster.kubectl("get", "pods", "-o", "wide", ns=SYS, check=False).stdout
                raise AssertionError("%s not rolled out: %s\n%s" % (dep, r.stderr, pods))
            expect(True, "deployment/%s rolled out: its pods run from the image on their ServiceAccount" % dep)

        def lease_holder():
            p = cluster.kubectl("get", "lease", "turnfleet-operator", "-o", "json", ns=SYS, check=False)
            return json.loads(p.stdout)["spec"].get("holderIdentity") if p.returncode == 0 else None
        harness.wait_for("a leader", lease_holder, 60, 0.5)

        # a pool: denied with its field path by the webhook, or admitted with its defaults
        cluster.kubectl("create", "namespace", NS)
        cluster.kubectl("create", "secret", "generic", POOL + "-secret", "--from-literal=secret=" + SECRET, ns=NS)
        bad = harness.pool("bad", 1, ns=NS, relayPortRange={"start": 3000, "end": 4000},
                           listeners=[{"name": "turn", "protocol": "udp", "port": 3478}])
        r = cluster.apply(bad, check=False)
        expect(r.returncode != 0 and 'admission webhook "validate.turnfleet.hzmi.dev" denied the request: '
               "spec.listeners[0].port" in r.stderr, "a bad pool is denied by the deployed webhook with its field path",
               r.stderr)
        good = harness.pool(POOL, 3, ns=NS, relayPortRange={"start": 60200, "end": 60219},
                            dataplane={"image": "coturn/coturn:4.6.1", "coturnVersion": "4.6.1"},
                            addressing={"mode": "HostNetwork"}, drainTimeout="10s")
        good["spec"]["auth"]["realm"] = "install.turnfleet.test"
        cluster.apply(good)
        spec = json.loads(cluster.kubectl("get", "turnpool", POOL, "-o", "json", ns=NS).stdout)["spec"]
        expect(spec.get("listeners") and spec.get("quota") is not None, "the deployed mutating webhook defaulted the pool",
               json.dumps(spec))

        def pool_ready(n):
            o = json.loads(cluster.kubectl("get", "turnpool", POOL, "-o", "json", ns=NS).stdout)
            conds = {c["type"]: c["status"] for c in (o.get("status") or {}).get("conditions") or []}
            cm = cluster.kubectl("get", "configmap", POOL + "-turn-uris", "-o", "json", ns=NS, check=False)
            uris = json.loads(cm.stdout).get("data", {}).get("uris", "").split() if cm.returncode == 0 else []
            return conds.get("Ready") == "True" and len([u for u in uris if "transport=udp" in u]) == n and uris
        uris = None
        try:
            harness.wait_for("the pool Ready with 3 relays published", lambda: pool_ready(3), 120, 1.0)
            uris = pool_ready(3)
        finally:
            if not uris:
                sys.stderr.write(cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout)
                for p in json.loads(cluster.kubectl("get", "pods", "-o", "json", ns=SYS).stdout)["items"]:
                    if "operator" in p["metadata"]["name"]:
                        sys.stderr.write(cluster.kubectl("logs", p["metadata"]["name"], ns=SYS, check=False).stdout[-3000:])
        secret_file = os.path.join(tmp, "secret")
        with open(secret_file, "w") as f:
            f.write(SECRET)
        os.chmod(secret_file, 0o600)
        for uri in (u for u in uris if "transport=udp" in u):
            r = subprocess.run([probe, "--uri", uri, "--secret-file", secret_file, "--timeout-ms", "3000"],
                               capture_output=True, text=True, timeout=30)
            expect(r.returncode == 0, "a client allocates on %s" % uri, r.stdout + r.stderr)
        pods = json.loads(cluster.kubectl("get", "pods", "-l", "turnfleet.hzmi.dev/pool=" + POOL, "-o", "json", ns=NS).stdout)["items"]
        expect(len(pods) == 3 and all(c["status"] == "True" for p in pods for c in p["status"]["conditions"]
                                      if c["type"] in ("Ready", "turnfleet.hzmi.dev/allocate-ready")),
               "kubectl get pods: the relays READY through their allocate-ready gate")

        # the leader's pod goes: the other replica takes the Lease and acts (a scale-down is carried out)
        leader = lease_holder()
        ops = json.loads(cluster.kubectl("get", "pods", "-l", "app.kubernetes.io/component=operator", "-o", "json",
                                         ns=SYS).stdout)["items"]
        names = [p["metadata"]["name"] for p in ops]
        expect(leader in names, "the Lease is held by an operator pod (%s)" % leader, " ".join(names))
        cluster.kubectl("delete", "pod", leader, "--wait=false", ns=SYS)
        harness.wait_for("another leader", lambda: lease_holder() not in (None, leader), 60, 0.5)
        cluster.kubectl("scale", "turnpool", POOL, "--replicas=2", ns=NS)
        harness.wait_for("the new leader's scale-down", lambda: pool_ready(2) and len(json.loads(cluster.kubectl(
            "get", "pods", "-l", "turnfleet.hzmi.dev/pool=" + POOL, "-o", "json", ns=NS).stdout)["items"]) == 2, 120, 1.0)
        expect(True, "failover: %s took the Lease and drained a relay" % lease_holder())
        harness.wait_for("the Deployment back at two operator pods", lambda: cluster.kubectl(
            "rollout", "status", "deployment/turnfleet-operator", "--timeout=1s", ns=SYS, check=False).returncode == 0, 60, 0.5)

        # no secret in what the install wrote or logged
        texts = [cluster.kubectl("get", "pods,configmaps,events,turnpools", "-A", "-o", "json").stdout]
        for p in json.loads(cluster.kubectl("get", "pods", "-o", "json", ns=SYS).stdout)["items"]:
            texts.append(cluster.kubectl("logs", p["metadata"]["name"], ns=SYS, check=False).stdout)
        expect(not any(SECRET in t for t in texts), "the shared secret is in no pod, ConfigMap, Event, status or log")

        # the pool goes, and everything it owned with it
        cluster.kubectl("delete", "turnpool", POOL, ns=NS)

        def gone():
            left = cluster.kubectl("get", "pods,secrets,configmaps", "-l", "turnfleet.hzmi.dev/pool=" + POOL, "-o", "name",
                                   ns=NS).stdout.split()
            return not left
        harness.wait_for("everything the pool owned gone", gone, 90, 1.0)
        expect(True, "deleting the pool removed its pods, Secret and ConfigMap")
        ok = True
    finally:
        harness.finish(tmp, ok, cluster)


if __name__ == "__main__":
    main()
