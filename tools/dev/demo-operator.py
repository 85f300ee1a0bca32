#!/usr/bin/env python3
"""make demo-operator: turnfleet-operator on the local Kubernetes stand-in.

usage: python3 tools/dev/demo-operator.py BUILD_DIR [COTURN_VERSION]

The cluster is tests/kube's stand-in (an API server and process kubelets on
loopback: 127.0.0.240-243), not a real cluster; the relays are real coturn
processes. It applies deploy/crd and deploy/rbac with kubectl, runs the
operator with its ServiceAccount's token, creates a pool of three relays,
shows them proven and published, allocates through each, holds an
allocation, scales to two (the relay with the fewest allocations drains:
its URI goes first, its pod stays while the allocation is held), releases
it, deletes the pool, and stops everything it started. Needs root
(namespaces, mounts). Reuses the end-to-end suite's helpers."""
import os
import sys
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "tests", "operator"))
import test_operator_e2e as e2e  # noqa: E402


def say(text):
    print("\n\033[1m== %s\033[0m" % text if sys.stdout.isatty() else "\n== %s" % text, flush=True)


def show(*args):
    print("$ kubectl " + " ".join(args), flush=True)
    print(e2e.kubectl(*args).stdout.rstrip(), flush=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    e2e.BUILD = os.path.abspath(sys.argv[1])
    e2e.VERSION = sys.argv[2] if len(sys.argv) > 2 else "4.6.1"
    e2e.OPERATOR = os.path.join(e2e.BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
    e2e.PROBE = os.path.join(e2e.BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    for f in (e2e.OPERATOR, e2e.PROBE):
        if not os.access(f, os.X_OK):
            sys.exit("demo-operator: missing %s (build first)" % f)
    say("a local Kubernetes stand-in: API server on 127.0.0.240:16600, nodes n1-n3 on 127.0.0.241-243")
    e2e.setUpModule()
    holder = None
    try:
        say("deploy/crd and deploy/rbac applied with kubectl; the operator runs on its ServiceAccount's token")
        e2e.start_operator("a")
        e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        say("a TURNPool of three relays (coturn %s) and its shared secret" % e2e.VERSION)
        e2e.kubectl("create", "secret", "generic", "-n", e2e.NS, e2e.POOL + "-secret",
                    "--from-literal=secret=" + e2e.SECRET1)
        print(e2e.pool_yaml(e2e.POOL, 3, 61000, 61019))
        e2e.kubectl("apply", "-f", "-", input=e2e.pool_yaml(e2e.POOL, 3, 61000, 61019))
        _, pods, uris = e2e.OperatorE2E("test_01_pool_becomes_ready_and_every_relay_allocates").converged(3)
        say("every relay proven by the operator's own TURN Allocate: READY, and published")
        show("get", "-n", e2e.NS, "turnpools")
        show("get", "-n", e2e.NS, "pods", "-o", "wide")
        show("get", "-n", e2e.NS, "configmap", e2e.POOL + "-turn-uris", "-o", "jsonpath={.data.uris}")
        say("a client allocates through each URI (turnfleet-probe, credentials minted from the secret)")
        for uri in uris:
            code, res = e2e.probe(uri, e2e.SECRET1)
            print("%-40s %s relayed %s:%s" % (uri, "ok" if code == 0 else "FAILED", res.get("relayedAddress"),
                                            res.get("relayedPort")), flush=True)
        pods.sort(key=lambda p: p["metadata"]["name"])
        victim = pods[0]
        name = victim["metadata"]["name"]
        addr = victim["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        say("hold one allocation on %s (%s); the others hold three each" % (name, addr))
        others = [e2e.hold("turn:%s:3478?transport=udp" % p["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"],
                           e2e.SECRET1, 3) for p in pods[1:]]
        holder = e2e.hold("turn:%s:3478?transport=udp" % addr, e2e.SECRET1, 1)
        t = e2e.OperatorE2E("test_02_scale_down_drains_the_relay_with_the_fewest_allocations")
        t.wait_counted({name: 1, pods[1]["metadata"]["name"]: 3, pods[2]["metadata"]["name"]: 3})
        say("kubectl scale turnpool %s --replicas=2: the relay with the fewest allocations drains" % e2e.POOL)
        e2e.kubectl("scale", "-n", e2e.NS, "turnpool", e2e.POOL, "--replicas=2")
        e2e.wait_for("its URI to leave", lambda: not any(addr in u for u in e2e.uris() or []), 30, 0.1)
        print("%s left %s-turn-uris first" % (addr, e2e.POOL), flush=True)
        e2e.wait_for("its pod to be deleted", lambda: all(p["metadata"].get("deletionTimestamp")
                                                          for p in e2e.relay_pods() if p["metadata"]["name"] == name), 30)
        time.sleep(2)
        show("get", "-n", e2e.NS, "pods")
        print("(%s is terminating: its agent's preStop waits for the held allocation)" % name, flush=True)
        say("the client releases its allocation: the pod goes")
        e2e.stop(holder)
        holder = None
        e2e.wait_for("the pod to go", lambda: name not in [p["metadata"]["name"] for p in e2e.relay_pods()], 60)
        for h in others:
            e2e.stop(h)
        show("get", "-n", e2e.NS, "turnpools")
        say("kubectl delete turnpool %s: everything it owned goes with it" % e2e.POOL)
        e2e.kubectl("delete", "-n", e2e.NS, "turnpool", e2e.POOL)
        e2e.wait_for("its pods", lambda: not e2e.relay_pods(), 90)
        show("get", "-n", e2e.NS, "pods,configmaps,secrets")
    finally:
        e2e.stop(holder)
        say("stopping the operator and the stand-in")
        e2e.tearDownModule()
    print("done: nothing left running", flush=True)


if __name__ == "__main__":
    main()
