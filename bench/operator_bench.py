#!/usr/bin/env python3
"""turnfleet-operator on the Kubernetes stand-in: three benchmarks, each beside a reference measured
in the same run.

usage: /usr/bin/python3 bench/operator_bench.py BUILD_DIR [SECONDS] [EVENTS]   (root: the stand-in runs pods)

One stand-in cluster with three loopback nodes (tests/kube, the e2e suite's addresses and ports), one
operator (--resync 1s, --probe-interval 1s) for the whole run.

1. No-op resync: one pool of three coturn 4.6.1 relays; once it is Ready the request log is read
   over SECONDS (default 10): the operator's requests (Lease renewals counted apart) and writes per
   resync. Reference: the requests one `kubectl get` of the same objects makes. Goal: 0 writes.
2. Event-to-write latency: EVENTS (default 60) HPA-style merge patches of a pool's `/scale`
   (replicas 1 <-> 2, a pool whose nodeSelector matches no node, so no pod is involved); latency =
   the request log's time of the operator's `PATCH turnpools/NAME/status` (stamped by the stand-in
   when it answered) minus the time this client sent its `PATCH …/scale` (one host clock; the
   client's PATCH round trip is inside both figures). Reference, same run, interleaved: a minimal
   reactor in this process watching a ConfigMap and merge-patching another one on each event,
   timed the same way (client sends its PATCH -> the reactor's PATCH answered). It is the
   stand-in's floor for "watch event -> write" with a controller that does no work.
3. RSS with 100 pools x 10 relays: ten Node objects registered through the API (Ready condition,
   no kubelet behind them: the pods bound to them are stored, never started, and the stand-in's
   node lifecycle controller ages only heartbeats a node posted) on 127.0.0.160-169; 100 HostNetwork
   pools (one UDP listener and a 300-port range each, disjoint, so no AddressConflict) of 10 relays;
   once the operator has created the 1000 pods, VmRSS/VmHWM from /proc/PID/status. References, same
   run: the same operator's VmRSS before the 100 pools (informers synced, the pools of parts 1-2),
   and the bytes of the JSON LIST answers of every collection the operator lists (what its
   informers cache), re-read with the admin token."""
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "tests", "operator"))
import test_operator_e2e as e2e  # noqa: E402

WRITES = ("POST", "PUT", "PATCH", "DELETE")
GROUP = "/apis/turnfleet.hzmi.dev/v1alpha1"
LAT_POOL = "lat"
DEVELOPMENT = "node-restriction.kubernetes.io/turnfleet-development"  # loopback nodes may relay
BENCH_NODES = [("b%d" % i, "127.0.0.%d" % (160 + i)) for i in range(10)]
BENCH_LABEL = "turnfleet.hzmi.dev/bench-node"
POOLS, RELAYS = 100, 10


class Api:
    """The admin's HTTPS client for the stand-in (the cluster's CA and bearer token)."""

    def __init__(self, agent):
        d = os.path.join(e2e.TMP, "cluster")
        kc = json.load(open(os.path.join(d, "kubeconfig")))
        self.base = kc["clusters"][0]["cluster"]["server"]
        self.token = open(os.path.join(d, "token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        self.agent = agent

    def open(self, method, path, body=None, ctype="application/merge-patch+json", timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self.token, "User-Agent": self.agent, "Content-Type": ctype,
            "Accept": "application/json"})
        return urllib.request.urlopen(req, context=self.ctx, timeout=timeout)

    def call(self, method, path, body=None, ctype="application/merge-patch+json"):
        with self.open(method, path, body, ctype) as r:
            return r.read()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def wait_request(since, match, timeout=30):
    """The first request in the log after seq since for which match(r) holds."""
    def find():
        for r in e2e.requests_since(since):
            if match(r):
                return r
        return None
    return e2e.wait_for("a logged request", find, timeout, 0.02)


def noop_resync(seconds):
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
    print("== 1. no-op resync ==")
    print("no-op resyncs: %d in %.0f s (--resync 1s, --probe-interval 1s, 3 relays)" % (resyncs, seconds))
    print("operator requests per resync: %.2f (GET %d, writes %d; Lease renewals apart: %.2f)" %
          (len(other) / resyncs, len([r for r in other if r["method"] == "GET"]), len(writes),
           len(lease) / resyncs))
    print("writes per no-op resync: %.2f (goal 0)" % (len(writes) / resyncs))
    print("reference, same run: one kubectl get of the same objects: %d requests" % len(ref))
    print("ratio: operator requests per resync / reference = %.2f" % ((len(other) / resyncs) / max(len(ref), 1)))
    for r in writes:
        print("  write: %s %s" % (r["method"], r["path"]))


def reactor(api, ready, stop):
    """The reference controller: every MODIFIED event of ConfigMap lat-ping -> one merge patch of lat-echo."""
    base = "/api/v1/namespaces/%s/configmaps" % e2e.NS
    rv = json.loads(api.call("GET", base + "/lat-ping"))["metadata"]["resourceVersion"]
    q = urllib.parse.urlencode({"watch": "1", "resourceVersion": rv, "timeoutSeconds": "600",
                                "fieldSelector": "metadata.name=lat-ping"})
    with api.open("GET", base + "?" + q, timeout=600) as w:
        ready.set()
        while not stop.is_set():
            line = w.readline()
            if not line:
                return
            ev = json.loads(line)
            if ev.get("type") == "MODIFIED":
                n = ev["object"].get("data", {}).get("n", "")
                api.call("PATCH", base + "/lat-echo", {"data": {"n": n}})


def latency(events):
    client, react = Api("tf-bench-client"), Api("tf-bench-reactor")
    ns = e2e.NS
    yaml = e2e.pool_yaml(LAT_POOL, 1, 62000, 62019).replace(
        "  drainTimeout:", "  nodeSelector: {turnfleet.hzmi.dev/bench-none: \"true\"}\n  drainTimeout:")
    e2e.kubectl("create", "secret", "generic", "-n", ns, LAT_POOL + "-secret", "--from-literal=secret=" + e2e.SECRET1)
    e2e.kubectl("apply", "-f", "-", input=yaml)
    e2e.wait_for("the lat pool's status", lambda: (lambda o: (o.get("status") or {}).get("observedGeneration") ==
                                                   o["metadata"]["generation"])(e2e.pool_obj(LAT_POOL)), 30)
    for name in ("lat-ping", "lat-echo"):
        client.call("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "0"}},
                    "application/json")
    ready, stop = threading.Event(), threading.Event()
    t = threading.Thread(target=reactor, args=(react, ready, stop), daemon=True)
    t.start()
    ready.wait(10)
    scale = GROUP + "/namespaces/%s/turnpools/%s/scale" % (ns, LAT_POOL)
    status = GROUP + "/namespaces/%s/turnpools/%s/status" % (ns, LAT_POOL)
    ping = "/api/v1/namespaces/%s/configmaps/lat-ping" % ns
    echo = "/api/v1/namespaces/%s/configmaps/lat-echo" % ns
    op, ref = [], []
    time.sleep(1)
    for i in range(1, events + 1):
        # the event's time is taken here, before the PATCH is sent: the stand-in logs a request when
        # it has answered it, and a watcher's write may be answered (and logged) before the PATCH is
        seq = e2e.last_seq()
        t0 = time.time()
        client.call("PATCH", scale, {"spec": {"replicas": 1 + i % 2}})
        w = wait_request(seq, lambda r: r["method"] == "PATCH" and r["path"] == status and
                         "turnfleet-operator" in r["userAgent"])
        op.append(w["time"] - t0)
        seq = e2e.last_seq()
        t0 = time.time()
        client.call("PATCH", ping, {"data": {"n": str(i)}})
        w = wait_request(seq, lambda r: r["method"] == "PATCH" and r["path"] == echo)
        ref.append(w["time"] - t0)
        time.sleep(0.2)
    stop.set()
    print("== 2. event-to-write latency (%d events each) ==" % events)
    print("operator: PATCH turnpools/%s/scale -> its PATCH turnpools/%s/status: p50 %.1f ms, p99 %.1f ms" %
          (LAT_POOL, LAT_POOL, pct(op, 50) * 1e3, pct(op, 99) * 1e3))
    print("reference, same run: a watch-and-patch reactor, PATCH configmap lat-ping -> its PATCH lat-echo: "
          "p50 %.1f ms, p99 %.1f ms" % (pct(ref, 50) * 1e3, pct(ref, 99) * 1e3))
    print("ratio operator / reference: p50 %.2f, p99 %.2f" % (pct(op, 50) / pct(ref, 50), pct(op, 99) / pct(ref, 99)))


def proc_status(pid):
    out = {"VmRSS": 0, "VmHWM": 0}     # zeros when the process is gone
    if not os.path.exists("/proc/%d/status" % pid):
        return out
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])
    return out


def bench_yaml():
    docs = []
    for name, addr in BENCH_NODES:
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {BENCH_LABEL: "true", DEVELOPMENT: "true"}}})
    for i in range(POOLS):
        docs.append({"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
                     "metadata": {"name": "p%03d" % i, "namespace": e2e.NS},
                     "spec": {"replicas": RELAYS,
                              "dataplane": {"image": "coturn/coturn:4.6.1", "coturnVersion": "4.6.1"},
                              "addressing": {"mode": "HostNetwork", "family": "IPv4"},
                              "nodeSelector": {BENCH_LABEL: "true"},
                              "relayPortRange": {"start": 30000 + 300 * i, "end": 30299 + 300 * i},
                              "listeners": [{"name": "turn", "protocol": "udp", "port": 20000 + i}],
                              "auth": {"realm": "bench.turnfleet.test",
                                       "secretRef": {"name": "bench-secret", "key": "secret"}},
                              "drainTimeout": "6s"}})
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})


def rss():
    pid = e2e.OPERATORS["a"].pid
    api = Api("tf-bench-lister")
    # what the operator lists (each informer's LIST), from the log: re-read with the admin token
    lists = sorted({(r["path"], r["query"]) for r in e2e.requests_since(0)
                    if "turnfleet-operator" in r["userAgent"] and r["method"] == "GET" and
                    "watch=" not in r["query"] and "/leases/" not in r["path"] and r["code"] == 200 and
                    not r["path"].endswith(("/scale", "/status"))})

    def cached_bytes():
        total = 0
        for path, query in lists:
            try:
                b = api.call("GET", path + ("?" + query if query else ""))
            except urllib.error.HTTPError:
                continue
            if json.loads(b).get("kind", "").endswith("List"):
                total += len(b)
        return total
    time.sleep(2)
    before = proc_status(pid)
    bytes_before = cached_bytes()
    e2e.kubectl("create", "secret", "generic", "-n", e2e.NS, "bench-secret", "--from-literal=secret=" + e2e.SECRET2)
    e2e.kubectl("apply", "-f", "-", input=bench_yaml(), timeout=300)
    for name, addr in BENCH_NODES:
        body = {"status": {"addresses": [{"type": "InternalIP", "address": addr}, {"type": "Hostname", "address": name}],
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "registered by bench/operator, no kubelet"}]}}
        api.call("PATCH", "/api/v1/nodes/%s/status" % name, body)
    t0 = time.monotonic()

    marks = []    # (pods, seconds) each time another 100 pods exist

    def pods_made():
        items = json.loads(api.call("GET", "/api/v1/namespaces/%s/pods" % e2e.NS))["items"]
        n = len([p for p in items if p["metadata"]["name"].startswith("p") and
                 (p["spec"].get("nodeName") or "").startswith("b")])
        while len(marks) < n // 100:
            marks.append((100 * (len(marks) + 1), time.monotonic() - t0))
        if e2e.OPERATORS["a"].poll() is not None:
            return n    # the operator died: report it
        return n if n >= POOLS * RELAYS else None
    try:
        n = e2e.wait_for("%d relay pods" % (POOLS * RELAYS), pods_made, 1200, 1)
    except AssertionError:
        n = None
    made = time.monotonic() - t0
    print("== 3. operator RSS with %d pools x %d relays (pods stored, not run) ==" % (POOLS, RELAYS))
    print("relay pods created, cumulative: " + ", ".join("%d in %.0f s" % m for m in marks))
    if n is None or n < POOLS * RELAYS:
        print("NOT ALL PODS CREATED within %.0f s (figures below are at that point)" % made)
    time.sleep(10)     # the operator's steady state with 1000 unstarted relays (probes failing)
    seq = e2e.last_seq()
    time.sleep(10)
    rate = [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r["userAgent"]]
    after = proc_status(pid)
    bytes_after = cached_bytes()
    alive = e2e.OPERATORS["a"].poll() is None
    print("relay pods created: %s in %.1f s; operator alive: %s" % (n, made, alive))
    print("operator requests over 10 s afterwards: %d (writes %d, Lease %d)" %
          (len(rate), len([r for r in rate if r["method"] in WRITES]), len([r for r in rate if "/leases/" in r["path"]])))
    print("operator VmRSS %d KiB, VmHWM %d KiB" % (after["VmRSS"], after["VmHWM"]))
    print("reference 1, same run: the same operator before the pools (2 pools, 3 relays, informers synced): "
          "VmRSS %d KiB, VmHWM %d KiB -> ratio %.2f" % (before["VmRSS"], before["VmHWM"], after["VmRSS"] / max(before["VmRSS"], 1)))
    print("reference 2, same run: JSON LIST bytes of what it caches (%d collections): %d KiB before, %d KiB after"
          % (len(lists), bytes_before // 1024, bytes_after // 1024))
    print("ratio: RSS growth / cached JSON growth = %.2f; RSS / cached JSON = %.2f" %
          ((after["VmRSS"] - before["VmRSS"]) * 1024.0 / max(bytes_after - bytes_before, 1),
           after["VmRSS"] * 1024.0 / max(bytes_after, 1)))
    for path, query in lists:
        print("  cached: %s%s" % (path, ("?" + query) if query else ""))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    e2e.BUILD = os.path.abspath(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    events = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    e2e.VERSION = "4.6.1"
    e2e.OPERATOR = os.path.join(e2e.BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
    e2e.PROBE = os.path.join(e2e.BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    e2e.setUpModule()
    try:
        e2e.start_operator("a", "--resync", "1s")
        e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        noop_resync(seconds)
        # parts 2 and 3 on the operator's default --resync (10m): a 1 s resync queues every pool every
        # second, which is part 1's subject, not theirs
        e2e.stop(e2e.OPERATORS["a"])
        e2e.start_operator("a")
        e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        time.sleep(6)   # past --lease-duration 4s: the new process leads, whoever held the Lease
        latency(events)
        rss()
    finally:
        e2e.tearDownModule()


if __name__ == "__main__":
    main()
