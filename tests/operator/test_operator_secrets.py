"""turnfleet-operator caches only the Secrets it needs, on the Kubernetes stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_secrets.py BUILD_DIR COTURN_VERSION

The helpers of test_operator_e2e.py (imported as a module, its address constants
replaced): one stand-in cluster, API 127.0.19.240:39600, control :39601, nodes
n1-n3 on 127.0.19.241-243, relays on udp/tcp 39478 with ranges in 39100-39199,
agents on :39700, coturn CLIs on 127.0.0.1 39800-39899, operator metrics
127.0.19.240:39610.

- a 10 MB Secret in the pool's namespace that no pool references is never listed,
  watched or read by the operator, and no Secret list or watch of its goes without a
  selector (its own relay-config Secrets by label, a referenced one by name), read
  from the stand-in's request log;
- a pool made before its Secret is refused (SecretMissing) and becomes Ready once
  the Secret exists (its per-name watch brings it);
- a referenced Secret whose value is past the cap is refused (SecretInvalid) with
  the cap, the Secret and the key named.

Tests run in order and share the cluster; every process is stopped by its PID."""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_operator_e2e as e2e  # noqa: E402

e2e.API_ADDR, e2e.API_PORT = "127.0.19.240", 39600
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = [("n1", "127.0.19.241"), ("n2", "127.0.19.242"), ("n3", "127.0.19.243")]
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 39610), "%s:%d" % (e2e.API_ADDR, 39611)]

NS, POOL = e2e.NS, e2e.POOL
BULK = "bulk-unreferenced"
BULK_BYTES = 10 << 20
CAP = 512             # TF_POOL_SECRET_MAX
EXTRA = ["--agent-port", "39700", "--cli-port", "39800"]


def pool_yaml(name, secret, start, end):
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: 1\n  dataplane: {image: \"coturn/coturn:%s\", coturnVersion: \"%s\"}\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n"
            "  relayPortRange: {start: %d, end: %d}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 39478}\n"
            "  auth:\n    realm: %s.turnfleet.test\n    secretRef: {name: %s, key: secret}\n"
            "  drainTimeout: %ds\n" % (name, NS, e2e.VERSION, e2e.VERSION, start, end, name, secret, e2e.DRAIN_S))


def create_secret(name, value):
    path = os.path.join(e2e.TMP, name + ".json")
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
                   "stringData": {"secret": value}}, f)
    e2e.kubectl("create", "-f", path, timeout=120)
    os.unlink(path)


def setUpModule():
    try:
        e2e.set_up()
    except BaseException:
        e2e.tearDownModule()
        raise


def tearDownModule():
    e2e.tearDownModule()


def operator_log(seq=0):
    user = "system:serviceaccount:turnfleet-system:turnfleet-operator"
    return [r for r in e2e.requests_since(seq) if r["user"] == user]


class OperatorSecrets(unittest.TestCase):
    maxDiff = None
    converged = e2e.OperatorE2E.converged

    def test_1_a_pool_made_before_its_secret_is_ready_once_it_exists(self):
        create_secret(BULK, "x" * BULK_BYTES)
        e2e.start_operator("a", *EXTRA)
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(POOL, POOL + "-secret", 39100, 39119))
        e2e.wait_for("SecretMissing", lambda: e2e.cond(e2e.pool_obj(), "Ready").get("reason") == "SecretMissing", 60)
        self.assertIn("not found", e2e.cond(e2e.pool_obj(), "Ready")["message"])
        create_secret(POOL + "-secret", e2e.SECRET1)
        _, pods, uris = self.converged(1)
        self.assertEqual(e2e.probe(uris[0], e2e.SECRET1)[0], 0, "the relay takes the Secret made after the pool")

    def test_2_a_secret_past_the_cap_is_refused_naming_the_cap_secret_and_key(self):
        create_secret("huge-secret", "y" * (2 << 20))
        e2e.kubectl("apply", "-f", "-", input=pool_yaml("huge", "huge-secret", 39150, 39169))
        ready = e2e.wait_for("SecretInvalid", lambda: (lambda c: c if c.get("reason") == "SecretInvalid" else None)(
            e2e.cond(e2e.pool_obj("huge"), "Ready")), 60)
        self.assertIn("Secret %s/huge-secret, key secret" % NS, ready["message"])
        self.assertIn("more than the cap of %d bytes" % CAP, ready["message"])
        self.assertEqual(e2e.relay_pods("huge"), [])
        e2e.kubectl("delete", "-n", NS, "turnpool", "huge", "--wait=false")
        e2e.wait_for("huge gone", lambda: e2e.kubectl("get", "-n", NS, "turnpool", "huge", check=False).returncode != 0,
                     60)

    def test_3_no_unreferenced_secret_is_fetched_and_no_secret_list_is_unselected(self):
        # the operator stopped: its watches end, and the request log holds every one of them
        e2e.stop(e2e.OPERATORS.pop("a"))
        # a watch is logged when the stand-in sees its connection end, which under load is after the stop
        e2e.wait_for("the operator's Secret watches in the request log", lambda: any(
            r["method"] == "GET" and r["path"].endswith("/secrets") and "watch" in r["query"]
            for r in operator_log()), 30)
        log = [r for r in operator_log() if "/secrets" in r["path"]]
        self.assertTrue(log, "the operator read no Secret at all")
        self.assertEqual([r["path"] for r in log if BULK in r["path"] or BULK in r["query"]], [],
                         "the operator fetched the Secret no pool references")
        collections = [r for r in log if r["method"] == "GET" and r["path"].endswith("/secrets")]
        self.assertTrue(any("watch" in r["query"] for r in collections), "no Secret watch in the log")
        unselected = [r["path"] + "?" + r["query"] for r in collections
                      if "fieldSelector=metadata.name" not in r["query"] and "labelSelector=" not in r["query"]]
        self.assertEqual(unselected, [], "a Secret list or watch without a selector")
        by_name = {r["query"] for r in collections if "fieldSelector" in r["query"]}
        self.assertTrue(any(POOL + "-secret" in q for q in by_name), "no watch on the referenced Secret's name")


def main():
    e2e.run("test_operator_secrets.py", unittest.TestLoader().loadTestsFromModule(sys.modules[__name__]))


if __name__ == "__main__":
    main()
