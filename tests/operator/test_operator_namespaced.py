"""turnfleet-operator on deploy/namespaced's RBAC alone, on the Kubernetes stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_namespaced.py BUILD_DIR COTURN_VERSION

The helpers of test_operator_e2e.py (imported as a module, its address constants
replaced): one stand-in cluster, API 127.0.13.240:33600, control :33601, nodes
n1-n2 on 127.0.13.241-242, relays on udp 33478 with ranges in 33100-33199,
agents on :33700, coturn CLIs on 127.0.0.1 33800-33899, operator metrics
127.0.13.240:33610. The CRD and deploy/namespaced/rbac through real kubectl (the
overlay's Deployment aside: the test runs the operator as a host process with
--namespace turnfleet --lease-namespace turnfleet, as that Deployment does, on
its ServiceAccount's token). The stand-in enforces RBAC and
OwnerReferencesPermissionEnforcement, so every request the operator makes is
answered by that Role and the one ClusterRole for Nodes.

- the overlay reads the same with every kubectl, kubectl 1.20's included;
- a pool in the namespace becomes Ready and every relay allocates;
- a pool in another namespace is never touched, no request of the operator is
  refused, and its token cannot list pods cluster-wide;
- a Secret of a pool's relay-config name that is not the pool's is not taken
  over: a NotOwned Warning names it, no relay starts; once it is deleted the
  pool's own is made and the pool becomes Ready;
- a 409 on each kind of write: one read, then the write again;
- the owner-references plugin: a ConfigMap blocking a Deployment's deletion is
  refused (no deployments/finalizers), one blocking the pool's is not.

Tests run in order and share the cluster; every process is stopped by its PID."""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_operator_e2e as e2e  # noqa: E402

e2e.API_ADDR, e2e.API_PORT = "127.0.13.240", 33600
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = [("n1", "127.0.13.241"), ("n2", "127.0.13.242")]
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 33610), "%s:%d" % (e2e.API_ADDR, 33611)]
e2e.NS = NS = "turnfleet"
POOL = e2e.POOL
ELSEWHERE = "elsewhere"
OPERATOR_USER = "system:serviceaccount:%s:turnfleet-operator" % NS
OVERLAY = os.path.join(e2e.SOURCE, "deploy", "namespaced")
# as deploy/namespaced runs it (--no-api-endpoints: no Role in default)
EXTRA = ["--namespace", NS, "--lease-namespace", NS, "--no-api-endpoints", "--agent-port", "33700",
         "--cli-port", "33800"]


def pool_yaml(name, replicas, ns=NS, start=33100, end=33119, port=33478):
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: %d\n  dataplane: {image: \"coturn/coturn:%s\", coturnVersion: \"%s\"}\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n"
            "  relayPortRange: {start: %d, end: %d}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: %d}\n"
            "  auth:\n    realm: %s.turnfleet.test\n    secretRef: {name: %s-secret, key: secret}\n"
            "  drainTimeout: %ds\n" % (name, ns, replicas, e2e.VERSION, e2e.VERSION, start, end, port, name, name,
                                       e2e.DRAIN_S))


def as_operator(*args, check=True):
    return e2e.kubectl(*args, kubeconfig=os.path.join(e2e.TMP, "operator.kubeconfig"), check=check)


def clients():
    out = subprocess.run([os.path.join(e2e.KUBE, "clients.sh")], capture_output=True, text=True)
    return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)


def set_up():
    """e2e.set_up's cluster, with deploy/namespaced's RBAC in place of deploy/rbac's."""
    saved = e2e.kubectl
    applied = []

    def kubectl(*args, **kw):     # set_up's `apply -k deploy/rbac` and `create namespace tfe2e`: the overlay's instead
        if args[:2] == ("apply", "-k") and args[2].endswith(os.path.join("deploy", "rbac")):
            applied.append(args[2])
            return saved("apply", "-k", os.path.join(OVERLAY, "rbac"), **kw)
        if args[:2] == ("create", "namespace"):
            return saved("get", "namespace", NS, **kw)
        if args[:2] == ("create", "token"):
            return saved("create", "token", "-n", NS, "turnfleet-operator", "--duration=2h", **kw)
        return saved(*args, **kw)
    e2e.kubectl = kubectl
    try:
        e2e.set_up()
    finally:
        e2e.kubectl = saved
    if not applied:
        raise AssertionError("e2e.set_up no longer applies deploy/rbac: this suite's set_up needs updating")


def setUpModule():
    try:
        set_up()
    except BaseException:
        e2e.tearDownModule()
        raise


def tearDownModule():
    e2e.tearDownModule()


class OperatorNamespaced(unittest.TestCase):
    maxDiff = None
    converged = e2e.OperatorE2E.converged

    def test_1_the_overlay_reads_the_same_with_every_kubectl(self):
        import yaml     # python3-yaml
        seen, docs = {}, None
        for name, k in sorted(clients().items()):
            p = subprocess.run([k, "kustomize", OVERLAY], capture_output=True, text=True, env=dict(os.environ, HOME=e2e.TMP))
            self.assertEqual(p.returncode, 0, "%s kustomize deploy/namespaced: %s" % (name, p.stderr))
            docs = [d for d in yaml.safe_load_all(p.stdout) if d]
            seen[name] = sorted((d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", "")) for d in docs)
        self.assertIn("kubectl-1.20", seen)
        first = next(iter(seen.values()))
        for name, objs in seen.items():
            self.assertEqual(objs, first, name)
        # cluster-wide: the CRD, the namespace, and Nodes' ClusterRole with its binding; nothing else
        self.assertEqual([o for o in first if not o[2] and o[0] not in ("CustomResourceDefinition", "Namespace")],
                         [("ClusterRole", "turnfleet-namespaced-operator-nodes", ""),
                          ("ClusterRoleBinding", "turnfleet-namespaced-operator-nodes", "")])
        self.assertEqual({o[2] for o in first if o[2]}, {NS})
        dep = [d for d in docs if d["kind"] == "Deployment"][0]
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--namespace=$(POD_NAMESPACE)", args)
        self.assertIn("--lease-namespace=$(POD_NAMESPACE)", args)
        self.assertIn("--no-api-endpoints", args)   # a Role in default is not this namespace's to grant

    def test_2_a_pool_in_its_namespace_becomes_ready_and_every_relay_allocates(self):
        e2e.start_operator("a", *EXTRA)
        e2e.wait_for("the operator's /readyz", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        e2e.kubectl("create", "secret", "generic", "-n", NS, POOL + "-secret", "--from-literal=secret=" + e2e.SECRET1)
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(POOL, 2))
        _obj, _pods, u = self.converged(2)
        self.assertEqual(len(u), 2, u)
        for uri in u:
            code, res = e2e.probe(uri, e2e.SECRET1)
            self.assertEqual(code, 0, res)
        lease = json.loads(e2e.kubectl("get", "-n", NS, "lease", "turnfleet-operator", "-o", "json").stdout)
        self.assertEqual(lease["spec"].get("holderIdentity"), "operator-a")

    def test_3_a_pool_elsewhere_is_never_touched_and_the_token_reaches_no_further(self):
        seq = e2e.last_seq()
        e2e.kubectl("create", "namespace", ELSEWHERE)
        e2e.kubectl("create", "secret", "generic", "-n", ELSEWHERE, "other-secret", "--from-literal=secret=" + e2e.SECRET1)
        e2e.kubectl("apply", "-f", "-", input=pool_yaml("other", 1, ELSEWHERE, 33150, 33169, 33479))
        # a change in its own namespace after the other pool's: acted on, so the other one was seen (or not) first
        e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=1")
        self.converged(1)
        other = e2e.kget("-n", ELSEWHERE, "turnpool", "other")
        self.assertNotIn("status", other)
        self.assertFalse(other["metadata"].get("finalizers"), other["metadata"])
        self.assertEqual(e2e.kget("-n", ELSEWHERE, "pods")["items"], [])
        mine = [r for r in e2e.requests_since(seq) if r["user"] == OPERATOR_USER]
        self.assertTrue(mine)
        self.assertEqual([r["path"] for r in mine if "/namespaces/%s/" % ELSEWHERE in r["path"]], [])
        self.assertEqual([(r["method"], r["path"]) for r in mine if r["code"] == 403], [])
        p = as_operator("get", "pods", "--all-namespaces", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("forbidden", p.stderr.lower())
        e2e.kubectl("delete", "namespace", ELSEWHERE, "--wait=false")

    def test_4_a_secret_of_the_config_name_that_is_not_the_pools_is_not_taken_over(self):
        foreign = "third-relay-config"
        e2e.kubectl("create", "secret", "generic", "-n", NS, foreign, "--from-literal=mine=not-the-operators")
        e2e.kubectl("create", "secret", "generic", "-n", NS, "third-secret", "--from-literal=secret=" + e2e.SECRET2)
        e2e.kubectl("apply", "-f", "-", input=pool_yaml("third", 1, NS, 33150, 33169, 33479))

        def warned():
            for ev in e2e.kget("-n", NS, "events")["items"]:
                if ev.get("reason") == "NotOwned" and (ev.get("involvedObject") or {}).get("name") == "third":
                    return ev
        ev = e2e.wait_for("the NotOwned Warning", warned, 30)
        self.assertEqual(ev["type"], "Warning")
        self.assertIn("Secret %s/%s exists and is not this pool's" % (NS, foreign), ev["message"])
        kept = e2e.kget("-n", NS, "secret", foreign)
        self.assertEqual(set(kept["data"]), {"mine"})
        self.assertFalse(kept["metadata"].get("ownerReferences"))
        self.assertEqual(e2e.relay_pods("third"), [])
        e2e.kubectl("delete", "-n", NS, "secret", foreign)
        self.converged(1, "third")
        made = e2e.kget("-n", NS, "secret", foreign)
        self.assertEqual([r["kind"] for r in made["metadata"]["ownerReferences"]], ["TURNPool"])
        e2e.kubectl("delete", "-n", NS, "turnpool", "third")
        e2e.wait_for("third's pods gone", lambda: not e2e.relay_pods("third"), 60)

    def test_5_a_409_on_each_write_is_read_once_and_written_again(self):
        e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")
        self.converged(2)
        e2e.each_write_meets_a_409(self, OPERATOR_USER, pool_yaml("extra", 0, NS, 33150, 33169, 33479), high=2)

    def test_6_the_owner_references_plugin_asks_for_the_owners_finalizers(self):
        pool = e2e.pool_obj()
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blocking", "namespace": NS, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "someone", "uid": "00000000-0000-0000-0000-000000000001",
             "blockOwnerDeletion": True}]}}
        p = subprocess.run([e2e.KUBECTL, "--kubeconfig", os.path.join(e2e.TMP, "operator.kubeconfig"), "create", "-f", "-"],
                           input=json.dumps(body), capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot set blockOwnerDeletion", p.stderr)
        body["metadata"]["ownerReferences"] = [{"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "name": POOL,
                                                "uid": pool["metadata"]["uid"], "blockOwnerDeletion": True}]
        p = subprocess.run([e2e.KUBECTL, "--kubeconfig", os.path.join(e2e.TMP, "operator.kubeconfig"), "create", "-f", "-"],
                           input=json.dumps(body), capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        e2e.kubectl("delete", "-n", NS, "configmap", "blocking")

    def test_7_deleting_the_pool_removes_everything_it_owned(self):
        e2e.kubectl("delete", "-n", NS, "turnpool", POOL)
        e2e.wait_for("the pool's pods, Secret and ConfigMap gone", lambda: not e2e.relay_pods() and
                     e2e.kubectl("get", "-n", NS, "secret", POOL + "-relay-config", check=False).returncode != 0 and
                     e2e.kubectl("get", "-n", NS, "configmap", POOL + "-turn-uris", check=False).returncode != 0, 90)
        self.assertEqual(e2e.stop(e2e.OPERATORS["a"]), 0, "the operator did not stop cleanly on SIGTERM")


def main():
    e2e.run("test_operator_namespaced.py", unittest.TestLoader().loadTestsFromModule(sys.modules[__name__]))


if __name__ == "__main__":
    main()
