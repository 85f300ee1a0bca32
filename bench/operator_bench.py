#!/usr/bin/env python3
"""API requests and writes of turnfleet-operator per no-op resync, counted by the stand-in.

usage: /usr/bin/python3 bench/operator_bench.py BUILD_DIR [SECONDS]   (root: the stand-in runs pods)

One stand-in cluster with three loopback nodes (tests/kube, the e2e suite's addresses), one pool of
three coturn 4.6.1 relays, the operator with --resync 1s. Once the pool is Ready, the request log
is read over SECONDS (default 10): every request the operator made (Lease renewals counted apart),
per resync. The reference, measured in the same run: the requests one `kubectl get` of the same
objects (the pool, its pods, its Secret and ConfigMap) makes. Goal: 0 writes."""
import os
import sys
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "tests", "operator"))
import test_operator_e2e as e2e  # noqa: E402

WRITES = ("POST", "PUT", "PATCH", "DELETE")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    e2e.BUILD = os.path.abspath(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    e2e.VERSION = "4.6.1"
    e2e.OPERATOR = os.path.join(e2e.BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
    e2e.PROBE = os.path.join(e2e.BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    e2e.setUpModule()
    try:
        e2e.start_operator("a", "--resync", "1s")
        e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        e2e.kubectl("create", "secret", "generic", "-n", e2e.NS, e2e.POOL + "-secret",
                    "--from-literal=secret=" + e2e.SECRET1)
        e2e.kubectl("apply", "-f", "-", input=e2e.pool_yaml(e2e.POOL, 3, 61000, 61019))
        e2e.OperatorE2E("test_01_pool_becomes_ready_and_every_relay_allocates").converged(3)
        time.sleep(3)
        seq = e2e.last_seq()
        time.sleep(seconds)
        log = [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r.get("userAgent", "")]
        resyncs = seconds / 1.0
        lease = [r for r in log if "/leases/" in r["path"]]
        other = [r for r in log if "/leases/" not in r["path"]]
        writes = [r for r in other if r["method"] in WRITES]
        seq = e2e.last_seq()
        e2e.kubectl("get", "-n", e2e.NS, "turnpools,pods,secrets,configmaps", "-l",
                    "app.kubernetes.io/managed-by!=nobody", "-o", "json")
        ref = [r for r in e2e.requests_since(seq) if "kubectl" in r.get("userAgent", "")]
        print("no-op resyncs: %d in %.0f s (--resync 1s, --probe-interval 1s, 3 relays)" % (resyncs, seconds))
        print("operator requests per resync: %.2f (GET %d, writes %d; Lease renewals apart: %.2f)" %
              (len(other) / resyncs, len([r for r in other if r["method"] == "GET"]), len(writes),
               len(lease) / resyncs))
        print("writes per no-op resync: %.2f (goal 0)" % (len(writes) / resyncs))
        print("reference, same run: one kubectl get of the same objects: %d requests" % len(ref))
        print("ratio: operator requests per resync / reference = %.2f" % ((len(other) / resyncs) / max(len(ref), 1)))
        for r in writes:
            print("  write: %s %s" % (r["method"], r["path"]))
    finally:
        e2e.tearDownModule()


if __name__ == "__main__":
    main()
