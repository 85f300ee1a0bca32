"""turnfleet-operator: one relay pod's event reconciles its own pool, not the others.

usage: /usr/bin/python3 tests/operator/test_operator_fanout.py BUILD_DIR COTURN_VERSION

The helpers of test_operator_e2e.py (imported as a module, its address constants replaced): one
stand-in cluster, API 127.0.18.1:38000, control :38001, operator metrics 127.0.18.1:38010. No
kubelet: two Node objects registered through the API (Ready, InternalIP 127.0.18.11-12, no process
behind them), so relay pods are stored and never run; relay ranges 38100-38399, listeners 38400-38499,
agents 38700, coturn CLIs 38800-38899 (nothing binds them). Pools:
- `p0`: one relay (its pod created by the operator on f1 or f2);
- `w1`, `w2`: refused (their Secret does not exist), so nothing but an event concerning them reconciles
  them (a refused pool is not queued again by its own reconcile).
The operator's turnfleet_operator_reconciles_total{namespace,pool} counts each pool's reconciles.
Barriers, not sleeps: the work queue is FIFO and one informer's events come in order, so once a later
event's pool has been reconciled, every pool an earlier event of the same informer queued has been too.
Every process is stopped by its PID."""
import json
import os
import re
import ssl
import sys
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_operator_e2e as e2e  # noqa: E402

e2e.API_ADDR, e2e.API_PORT = "127.0.18.1", 38000
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = []   # no kubelet: the nodes are registered below
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 38010), "%s:%d" % (e2e.API_ADDR, 38011)]
e2e.NS = NS = "fan"
NODES = [("f1", "127.0.18.11"), ("f2", "127.0.18.12")]
DEVELOPMENT = "node-restriction.kubernetes.io/turnfleet-development"   # loopback nodes may relay
EXTRA = ["--agent-port", "38700", "--cli-port", "38800"]
setUpModule, tearDownModule = e2e.setUpModule, e2e.tearDownModule


def admin(method, path, body):
    """The cluster admin's request (its CA and token), merge patch."""
    d = os.path.join(e2e.TMP, "cluster")
    server = json.load(open(os.path.join(d, "kubeconfig")))["clusters"][0]["cluster"]["server"]
    token = open(os.path.join(d, "token")).read().strip()
    req = urllib.request.Request(server + path, data=json.dumps(body).encode(), method=method,
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/merge-patch+json"})
    ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
    with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
        return json.loads(r.read())


def pool(name, i, secret):
    return {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "dataplane": {"image": "coturn/coturn:4.6.1", "coturnVersion": "4.6.1"},
                     "addressing": {"mode": "HostNetwork", "family": "IPv4"},
                     "relayPortRange": {"start": 38100 + 100 * i, "end": 38109 + 100 * i},
                     "listeners": [{"name": "turn", "protocol": "udp", "port": 38400 + i}],
                     "auth": {"realm": "fan.turnfleet.test", "secretRef": {"name": secret, "key": "secret"}},
                     "drainTimeout": "6s"}}


def reconciles():
    """Each pool's turnfleet_operator_reconciles_total, from the operator's /metrics."""
    code, text = e2e.operator_get(0, "/metrics")
    if code != 200:
        return {}
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r'^turnfleet_operator_reconciles_total\{namespace="%s",pool="([^"]+)"\} (\d+)$' % NS, text, re.M)}


def more_than(counts, name):
    """Wait until pool @p name has been reconciled more often than @p counts says; the new counts."""
    try:
        return e2e.wait_for("another reconcile of %s" % name, lambda: (lambda c: c if c.get(name, 0) > counts.get(name, 0)
                                                                       else None)(reconciles()), 60)
    except AssertionError as e:
        raise AssertionError("%s (before: %s; /metrics: %s)" % (e, counts, e2e.operator_get(0, "/metrics")[1][-3000:]))


def stray(name, owner):
    """A pod labelled with pool @p owner, no relay of it: its coming queues that pool alone (a barrier)."""
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": NS, "labels": {"turnfleet.hzmi.dev/pool": owner}},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


class Fanout(unittest.TestCase):
    def test_1_a_relay_pod_going_reconciles_its_pool_only(self):
        docs = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {
            "turnfleet.hzmi.dev/relay-node": "true", DEVELOPMENT: "true"}}} for n, _ in NODES]
        e2e.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        for n, addr in NODES:
            admin("PATCH", "/api/v1/nodes/%s/status" % n, {"status": {
                "addresses": [{"type": "InternalIP", "address": addr}, {"type": "Hostname", "address": n}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "registered by the test, no kubelet"}]}})
        e2e.kubectl("create", "secret", "generic", "-n", NS, "fan-secret", "--from-literal=secret=" + e2e.SECRET1)
        items = [pool("p0", 0, "fan-secret"), pool("w1", 1, "absent-secret"), pool("w2", 2, "absent-secret")]
        e2e.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        e2e.start_operator("a", *EXTRA)
        e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        relay = e2e.wait_for("p0's relay pod", lambda: e2e.live(e2e.relay_pods("p0")), 60)[0]["metadata"]["name"]
        for w in ("w1", "w2"):
            e2e.wait_for("%s refused" % w, lambda: e2e.cond(e2e.pool_obj(w), "Ready").get("reason") == "SecretMissing", 60)
        # w1 settled: its last write's event (its status) is behind it once w2, touched after, was reconciled
        settled = reconciles()
        e2e.kubectl("annotate", "-n", NS, "turnpool", "w2", "fan.test/barrier=1")
        before = more_than(settled, "w2")
        # p0's relay pod goes (force: no kubelet to wait for); then a stray pod of w2 comes after it, through the
        # same pod informer: once w2 was reconciled for it, whatever the delete queued was reconciled before
        e2e.kubectl("delete", "pod", "-n", NS, relay, "--grace-period=0", "--force")
        e2e.kubectl("create", "-f", "-", input=stray("fan-stray", "w2"))
        after = more_than(before, "w2")
        after = more_than(before, "p0") if after.get("p0", 0) <= before.get("p0", 0) else after
        self.assertEqual(after.get("w1"), before.get("w1"),
                         "a relay pod of p0 going reconciled w1 (%s -> %s)" % (before, after))
        # p0 makes its relay again: that pod coming concerns no other pool either
        e2e.wait_for("p0's new relay pod", lambda: [p for p in e2e.live(e2e.relay_pods("p0"))
                                                    if p["metadata"]["name"] == relay], 60)
        e2e.kubectl("delete", "pod", "-n", NS, "fan-stray", "--grace-period=0", "--force")
        later = more_than(after, "w2")
        self.assertEqual(later.get("w1"), before.get("w1"), "p0's relay pod coming back reconciled w1")


def main():
    e2e.run("test_operator_fanout.py", unittest.TestLoader().loadTestsFromTestCase(Fanout))


if __name__ == "__main__":
    main()
