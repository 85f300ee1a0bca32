#!/usr/bin/env python3
"""turnfleet-operator on the Kubernetes stand-in: five benchmarks, each beside a reference measured
in the same run, printed as ratios (a command, not a test: nothing here asserts a time).

usage: /usr/bin/python3 bench/operator_bench.py BUILD_DIR [SECONDS] [EVENTS] [FLEET_EVENTS] [FLEET_TIMEOUT]
       (root: the stand-in runs pods; `sh tests/netns-run.sh bench/operator build` gives it a loopback of its own)

One stand-in cluster with three loopback nodes (tests/kube, the e2e suite's addresses and ports).

1. No-op resync: the operator with --resync 1s, one pool of three coturn 4.6.1 relays; once it is
   Ready the request log is read over SECONDS (default 10): the operator's requests (Lease renewals
   counted apart) and writes per resync. Reference: the requests one `kubectl get` of the same
   objects makes. Goal: 0 writes.
Parts 2-4 run on a restarted operator with the default --resync (a 1 s resync queues every pool
every second, which is part 1's and part 5's subject).
2. Event-to-write latency: EVENTS (default 60) HPA-style merge patches of a pool's `/scale`
   (replicas 1 <-> 2, a pool whose nodeSelector matches no node, so no pod is involved); latency =
   the request log's time of the operator's `PATCH turnpools/NAME/status` (stamped by the stand-in
   when it answered) minus the time this client sent its `PATCH …/scale` (one host clock; the
   client's PATCH round trip is inside both figures). Reference, same run, interleaved: a minimal
   reactor in this process watching a ConfigMap and merge-patching another one on each event,
   timed the same way (client sends its PATCH -> the reactor's PATCH answered). It is the
   stand-in's floor for "watch event -> write" with a controller that does no work.
3. 1000 relay pods: ten Node objects registered through the API (Ready condition, no kubelet behind
   them: the pods bound to them are stored, never started, and the stand-in's node lifecycle
   controller ages only heartbeats a node posted) on 127.0.0.160-169; 100 HostNetwork pools (one UDP
   listener and a 300-port range each, disjoint, so no AddressConflict) of 10 relays, POSTed one after
   the other, once part 1's pool is gone (no relay runs: its probes and counts every second were most
   of the CPU over the creation). Time from the first pool POST to the stand-in's answer of the
   operator's 1000th pod create (request log), and the operator's utime+stime over it (/proc/PID/stat)
   per pod, also net of its CPU over the 10 s before the pools. Floor,
   same run, after it: the operator's 1000 pod bodies read back from the stand-in (renamed, the pool
   label's key changed so that the operator never sees them, server-set fields dropped) POSTed
   through the same API with the operator's token, one at a time on one keep-alive connection: the
   operator's concurrency (one reconcile worker whose writes are blocking requests on a reused
   libcurl connection; its per-pool write budget, 100/10s, does not bind at 10 pods a pool). Then
   VmRSS/VmHWM at 1000 pods beside the same process before the pools and the bytes of the JSON LIST
   answers of every collection the operator lists (what its informers cache, re-read with the
   admin token); and a 10 MB Secret in the namespace that no pool references: VmRSS before and after.
4. One event, one pool: FLEET_EVENTS (default 10) relay pods, each of another pool, deleted with
   grace 0 one at a time; per delete the pools whose `turnfleet_operator_reconciles_total` (the
   operator's /metrics) rose between the delete and the deleted pod's pool's reconcile, beside the
   background rate with no event (the engine's own wake-ups, over 10 s), counted among the 100 bench pools
   (nothing of theirs runs, so only events reconcile them) and among every pool; and delete -> the stand-in's
   answer of the operator's POST of the replacement pod, beside the reactor of part 2, interleaved.
5. No-op resync at 100 pools: the operator restarted with --resync 1s; once it made no write for 3 s,
   its requests and writes over SECONDS, and the reconciles the resyncs made."""
import base64
import http.client
import json
import os
import re
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
POOL_LABEL = "turnfleet.hzmi.dev/pool"
RECONCILES = "turnfleet_operator_reconciles_total"
BIG_SECRET = 10 << 20      # bytes of the unreferenced Secret's data
FLEET_TIMEOUT = 420        # seconds the 1000 pods may take before part 3 reports what exists (FLEET_TIMEOUT)


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


def start_operator(*extra):
    """The bench's operator: the e2e suite's flags, with a Lease of Kubernetes' default timings (15s/10s/2s)
    instead of its 4s/3s/500ms, so a stand-in slowed by a thousand pods on a shared machine does not take
    the Lease from it mid-run; waits for it to lead."""
    e2e.start_operator("a", "--lease-duration", "15s", "--renew-deadline", "10s", "--retry-period", "2s", *extra)
    e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 60)
    e2e.wait_for("the operator leading", lambda: re.search(r"(?m)^turnfleet_operator_leader 1$",
                                                            e2e.operator_get(0, "/metrics")[1]), 60)


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
    q = urllib.parse.urlencode({"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1800",
                                "fieldSelector": "metadata.name=lat-ping"})
    with api.open("GET", base + "?" + q, timeout=1800) as w:
        ready.set()
        while not stop.is_set():
            line = w.readline()
            if not line:
                return
            ev = json.loads(line)
            if ev.get("type") == "MODIFIED":
                n = ev["object"].get("data", {}).get("n", "")
                api.call("PATCH", base + "/lat-echo", {"data": {"n": n}})


class Reference:
    """The watch-and-patch reactor of parts 2 and 3b, started once: ping(i) is one timed event."""

    def __init__(self, client):
        self.client, self.stop = client, threading.Event()
        for name in ("lat-ping", "lat-echo"):
            client.call("POST", "/api/v1/namespaces/%s/configmaps" % e2e.NS,
                        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "0"}},
                        "application/json")
        ready = threading.Event()
        threading.Thread(target=reactor, args=(Api("tf-bench-reactor"), ready, self.stop), daemon=True).start()
        ready.wait(10)
        self.n = 0

    def ping(self):
        """client PATCH lat-ping sent -> the reactor's PATCH lat-echo answered, in seconds."""
        self.n += 1
        ping = "/api/v1/namespaces/%s/configmaps/lat-ping" % e2e.NS
        echo = "/api/v1/namespaces/%s/configmaps/lat-echo" % e2e.NS
        seq = e2e.last_seq()
        t0 = time.time()
        self.client.call("PATCH", ping, {"data": {"n": str(self.n)}})
        w = wait_request(seq, lambda r: r["method"] == "PATCH" and r["path"] == echo)
        return w["time"] - t0


def latency(events, ref):
    client = ref.client
    ns = e2e.NS
    yaml = e2e.pool_yaml(LAT_POOL, 1, 62000, 62019).replace(
        "  drainTimeout:", "  nodeSelector: {turnfleet.hzmi.dev/bench-none: \"true\"}\n  drainTimeout:")
    e2e.kubectl("create", "secret", "generic", "-n", ns, LAT_POOL + "-secret", "--from-literal=secret=" + e2e.SECRET1)
    e2e.kubectl("apply", "-f", "-", input=yaml)
    e2e.wait_for("the lat pool's status", lambda: (lambda o: (o.get("status") or {}).get("observedGeneration") ==
                                                   o["metadata"]["generation"])(e2e.pool_obj(LAT_POOL)), 30)
    scale = GROUP + "/namespaces/%s/turnpools/%s/scale" % (ns, LAT_POOL)
    status = GROUP + "/namespaces/%s/turnpools/%s/status" % (ns, LAT_POOL)
    op, rf = [], []
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
        rf.append(ref.ping())
        time.sleep(0.2)
    print("== 2. event-to-write latency, 2 pools (%d events each) ==" % events)
    print("operator: PATCH turnpools/%s/scale -> its PATCH turnpools/%s/status: p50 %.1f ms, p99 %.1f ms" %
          (LAT_POOL, LAT_POOL, pct(op, 50) * 1e3, pct(op, 99) * 1e3))
    print("reference, same run: a watch-and-patch reactor, PATCH configmap lat-ping -> its PATCH lat-echo: "
          "p50 %.1f ms, p99 %.1f ms" % (pct(rf, 50) * 1e3, pct(rf, 99) * 1e3))
    print("ratio operator / reference: p50 %.2f, p99 %.2f (goal p99 <= 1.2)" %
          (pct(op, 50) / pct(rf, 50), pct(op, 99) / pct(rf, 99)))


def proc_status(pid):
    out = {"VmRSS": 0, "VmHWM": 0}     # zeros when the process is gone
    if not os.path.exists("/proc/%d/status" % pid):
        return out
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])
    return out


def cpu_seconds(pid):
    """utime + stime of the process so far (/proc/PID/stat fields 14 and 15, after the comm)."""
    try:
        fields = open("/proc/%d/stat" % pid).read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def reconciles():
    """turnfleet_operator_reconciles_total per pool of the bench's namespace, from the operator's /metrics."""
    code, text = e2e.operator_get(0, "/metrics")
    out = {}
    for m in re.finditer(r'(?m)^%s\{([^}]*)\} ([0-9.e+]+)$' % RECONCILES, text if code == 200 else ""):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("namespace") == e2e.NS:
            out[labels.get("pool")] = float(m.group(2))
    return out


def is_bench(pool):
    return re.fullmatch(r"p[0-9]{3}", pool or "") is not None


def rose(before, after):
    return sorted(p for p, v in after.items() if v > before.get(p, 0))


def bench_pool(i):
    return {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
            "metadata": {"name": "p%03d" % i, "namespace": e2e.NS},
            "spec": {"replicas": RELAYS,
                     "dataplane": {"image": "coturn/coturn:4.6.1", "coturnVersion": "4.6.1"},
                     "addressing": {"mode": "HostNetwork", "family": "IPv4"},
                     "nodeSelector": {BENCH_LABEL: "true"},
                     "relayPortRange": {"start": 30000 + 300 * i, "end": 30299 + 300 * i},
                     "listeners": [{"name": "turn", "protocol": "udp", "port": 20000 + i}],
                     "auth": {"realm": "bench.turnfleet.test",
                              "secretRef": {"name": "bench-secret", "key": "secret"}},
                     "drainTimeout": "6s"}}


def bench_nodes(api):
    """Ten Ready nodes with no kubelet behind them: pods bound to them are stored, never started."""
    for name, addr in BENCH_NODES:
        api.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {BENCH_LABEL: "true", DEVELOPMENT: "true"}}}, "application/json")
        body = {"status": {"addresses": [{"type": "InternalIP", "address": addr}, {"type": "Hostname", "address": name}],
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "registered by bench/operator, no kubelet"}]}}
        api.call("PATCH", "/api/v1/nodes/%s/status" % name, body)


def operator_creates(seq):
    """The operator's answered pod creates in the bench namespace after seq."""
    path = "/api/v1/namespaces/%s/pods" % e2e.NS
    return [r for r in e2e.requests_since(seq) if r["method"] == "POST" and r["path"] == path and
            "turnfleet-operator" in r["userAgent"]]


class Floor:
    """The reference client: one keep-alive HTTPS connection with the operator's own token, one request
    at a time (the operator's concurrency: one reconcile worker, each write a blocking request on a
    reused connection)."""

    def __init__(self):
        kc = json.load(open(os.path.join(e2e.TMP, "operator.kubeconfig")))
        u = urllib.parse.urlsplit(kc["clusters"][0]["cluster"]["server"])
        self.host, self.port = u.hostname, u.port
        self.token = kc["users"][0]["user"]["token"]
        self.ctx = ssl.create_default_context(cafile=os.path.join(e2e.TMP, "cluster", "ca.crt"))
        self.conn, self.reconnects = None, 0

    def post(self, path, raw):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            try:
                self.conn.request("POST", path, raw, {"Authorization": "Bearer " + self.token,
                                                      "User-Agent": "tf-bench-floor", "Accept": "application/json",
                                                      "Content-Type": "application/json"})
                r = self.conn.getresponse()
                r.read()
                return r.status
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                self.reconnects += 1
                if attempt:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()


def floor_bodies(api):
    """The operator's 1000 pod bodies as the stand-in holds them, renamed (floor-NAME) and relabelled
    (the pool label's key changed, so the operator's informer, which selects on it, never sees them);
    the server's own fields (uid, resourceVersion, managedFields, status, ...) dropped."""
    q = urllib.parse.urlencode({"labelSelector": POOL_LABEL})
    items = json.loads(api.call("GET", "/api/v1/namespaces/%s/pods?%s" % (e2e.NS, q)))["items"]
    bodies = []
    for p in items:
        if not p["metadata"]["name"].startswith("p") or not (p["spec"].get("nodeName") or "").startswith("b"):
            continue
        md = p["metadata"]
        labels = dict(md.get("labels") or {})
        labels["bench." + POOL_LABEL] = labels.pop(POOL_LABEL)
        keep = {k: md[k] for k in ("annotations", "ownerReferences", "finalizers") if k in md}
        keep.update({"name": "floor-" + md["name"], "namespace": e2e.NS, "labels": labels})
        bodies.append(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": keep, "spec": p["spec"]}).encode())
    return bodies


def fleet(timeout):
    """Part 3: 1000 relay pods beside the floor; RSS and cache; the unreferenced 10 MB Secret."""
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
    bench_nodes(api)
    # part 1's pool goes (its relays' probes and counts, every second, would be most of the CPU measured)
    api.call("DELETE", GROUP + "/namespaces/%s/turnpools/%s" % (e2e.NS, e2e.POOL))
    e2e.wait_for("pool %s and its relay pods gone" % e2e.POOL, lambda: not json.loads(api.call(
        "GET", "/api/v1/namespaces/%s/pods?%s" % (e2e.NS, urllib.parse.urlencode(
            {"labelSelector": POOL_LABEL + "=" + e2e.POOL}))))["items"] and e2e.POOL not in [
        t["metadata"]["name"] for t in json.loads(api.call("GET", GROUP + "/namespaces/%s/turnpools" % e2e.NS))["items"]],
        120, 0.2)
    time.sleep(1)
    # the operator's CPU before the bench pools, with no relay running: its own background
    b0, bt = cpu_seconds(pid), time.monotonic()
    time.sleep(10)
    base_rate = (cpu_seconds(pid) - b0) / (time.monotonic() - bt)
    seq0 = e2e.last_seq()
    cpu0 = cpu_seconds(pid)
    rec0 = reconciles()
    t0 = time.time()
    for i in range(POOLS):
        api.call("POST", GROUP + "/namespaces/%s/turnpools" % e2e.NS, bench_pool(i), "application/json")
    pools_s = time.time() - t0
    made, seq, cpu1, deadline = [], seq0, cpu0, time.monotonic() + timeout
    while len(made) < POOLS * RELAYS and time.monotonic() < deadline and e2e.OPERATORS["a"].poll() is None:
        time.sleep(0.5)
        new = operator_creates(seq)
        if new:
            seq = new[-1]["seq"]
            made += [r for r in new if r["code"] == 201]
        cpu1 = cpu_seconds(pid)   # sampled at most 0.5 s after the last create: a little after it, never before
    rec1 = reconciles()
    n = len(made)
    last = made[POOLS * RELAYS - 1]["time"] if n >= POOLS * RELAYS else time.time()
    op_s = last - t0
    phase = [r for r in e2e.requests_since(seq0) if "turnfleet-operator" in r["userAgent"] and r["time"] <= last]
    op_writes = [r for r in phase if r["method"] in WRITES]
    items = json.loads(api.call("GET", "/api/v1/namespaces/%s/pods?%s" % (
        e2e.NS, urllib.parse.urlencode({"labelSelector": POOL_LABEL}))))["items"]
    exist = len([p for p in items if p["metadata"]["name"].startswith("p") and
                 (p["spec"].get("nodeName") or "").startswith("b")])
    print("== 3. %d pools x %d relays: %d relay pods (stored, never started) ==" % (POOLS, RELAYS, POOLS * RELAYS))
    print("operator: %d pool POSTs (%.1f s), then its %d-th pod create answered %.1f s after the first pool POST; "
          "%d relay pods exist" % (POOLS, pools_s, min(n, POOLS * RELAYS), op_s, exist))
    if n < POOLS * RELAYS:
        print("NOT ALL PODS CREATED within %.0f s: %d (operator alive: %s); figures below are at that point" %
              (timeout, n, e2e.OPERATORS["a"].poll() is None))
    marks = [made[k - 1]["time"] - t0 for k in range(100, n + 1, 100)]
    print("  cumulative: " + ", ".join("%d in %.1f s" % (100 * (k + 1), m) for k, m in enumerate(marks)))
    print("  the operator's writes in that time: %d (%s)" % (len(op_writes), ", ".join(
        "%s %d" % (k, v) for k, v in sorted(count_by(op_writes).items()))))
    op_body = sum(r.get("bodySize", 0) for r in made) / max(n, 1)
    # the floor: the same bodies, the same API, the same token, one request at a time
    bodies = floor_bodies(api)
    fl = Floor()
    path = "/api/v1/namespaces/%s/pods" % e2e.NS
    codes, fmarks = {}, []
    f0 = time.monotonic()
    for k, b in enumerate(bodies, 1):
        c = fl.post(path, b)
        codes[c] = codes.get(c, 0) + 1
        if k % 100 == 0:
            fmarks.append(time.monotonic() - f0)
    floor_s = time.monotonic() - f0
    fl.close()
    print("floor, same run: %d pod creates of the operator's bodies (renamed; mean body %d B, the operator's %d B) "
          "on one keep-alive connection with its token: %.1f s (answers: %s; reconnects %d)" %
          (len(bodies), sum(len(b) for b in bodies) / max(len(bodies), 1), op_body, floor_s,
           ", ".join("%s %d" % kv for kv in sorted(codes.items())), fl.reconnects))
    print("  cumulative: " + ", ".join("%d in %.1f s" % (100 * (k + 1), m) for k, m in enumerate(fmarks)))
    print("ratio: operator / floor = %.2f (goal <= 1.5)" % (op_s / max(floor_s, 1e-9)))
    print("operator CPU (utime+stime) from the first pool POST to its %d-th pod: %.2f s = %.3f ms per pod (goal <= 0.5)"
          % (POOLS * RELAYS, cpu1 - cpu0, (cpu1 - cpu0) * 1e3 / max(n, 1)))
    net = (cpu1 - cpu0) - base_rate * op_s
    print("  of it its background (%.1f ms/s over the 10 s before the pools, no relay running, times %.1f s): "
          "%.2f s; the rest, the bench pools': %.2f s = %.3f ms per pod" % (base_rate * 1e3, op_s, base_rate * op_s, net,
                                                          net * 1e3 / max(n, 1)))
    recs = sum(v - rec0.get(p, 0) for p, v in rec1.items() if is_bench(p))
    print("  its reconciles of the bench pools then: %d, %.1f per pool, %.2f ms of CPU each (all its CPU over them)" %
          (recs, recs / POOLS, (cpu1 - cpu0) * 1e3 / max(recs, 1)))

    time.sleep(10)     # the operator's steady state with 1000 unstarted relays (probes failing)
    seq, c0 = e2e.last_seq(), cpu_seconds(pid)
    time.sleep(10)
    idle_cpu = (cpu_seconds(pid) - c0) / 10.0
    rate = [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r["userAgent"]]
    after = proc_status(pid)
    bytes_after = cached_bytes()
    print("operator requests over 10 s afterwards: %d (writes %d, Lease %d); its CPU then: %.0f ms/s with no pod to "
          "create (against %.0f ms/s over the creation)" %
          (len(rate), len([r for r in rate if r["method"] in WRITES]), len([r for r in rate if "/leases/" in r["path"]]),
           idle_cpu * 1e3, (cpu1 - cpu0) * 1e3 / max(op_s, 1e-9)))
    print("RSS at %d pods: VmRSS %d KiB, VmHWM %d KiB (goal VmRSS <= 20480 KiB)" %
          (exist, after["VmRSS"], after["VmHWM"]))
    print("reference 1, same run: the same operator before the pools (2 pools, 3 relays, informers synced): "
          "VmRSS %d KiB, VmHWM %d KiB -> ratio %.2f" % (before["VmRSS"], before["VmHWM"], after["VmRSS"] / max(before["VmRSS"], 1)))
    print("reference 2, same run: JSON LIST bytes of what it caches (%d collections): %d KiB before, %d KiB after"
          % (len(lists), bytes_before // 1024, bytes_after // 1024))
    print("ratio: RSS growth / cached JSON growth = %.2f (goal <= 2); RSS / cached JSON = %.2f" %
          ((after["VmRSS"] - before["VmRSS"]) * 1024.0 / max(bytes_after - bytes_before, 1),
           after["VmRSS"] * 1024.0 / max(bytes_after, 1)))
    for path, query in lists:
        print("  cached: %s%s" % (path, ("?" + query) if query else ""))

    # a 10 MB Secret no pool references, in the pools' namespace
    big = base64.b64encode(os.urandom(BIG_SECRET * 3 // 4)).decode()
    seq = e2e.last_seq()
    s0 = proc_status(pid)
    api.call("POST", "/api/v1/namespaces/%s/secrets" % e2e.NS, {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "bench-big"}, "data": {"blob": big}}, "application/json")
    time.sleep(5)
    s1 = proc_status(pid)
    named = [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r["userAgent"] and "bench-big" in r["path"]]
    print("a %d MB Secret no pool references (bench-big): VmRSS %d KiB before, %d KiB 5 s after (%+d KiB; goal 0); "
          "operator requests naming it: %d" % (BIG_SECRET >> 20, s0["VmRSS"], s1["VmRSS"], s1["VmRSS"] - s0["VmRSS"], len(named)))
    return s0


def count_by(reqs):
    out = {}
    for r in reqs:
        k = "%s %s" % (r["method"], re.sub(r"^/api/v1/namespaces/[^/]+/|^/apis/[^/]+/[^/]+/namespaces/[^/]+/", "",
                                           r["path"]).split("/")[0])
        out[k] = out.get(k, 0) + 1
    return out


def one_pool(events, ref, big_before):
    """Part 4: relay pods deleted (grace 0) one at a time: the pools reconciled between the delete and the
    deleted pod's pool reconciled, and delete -> the operator's recreate, beside the reactor."""
    api = Api("tf-bench-client")
    pid = e2e.OPERATORS["a"].pid
    q = urllib.parse.urlencode({"labelSelector": POOL_LABEL})
    pods, where = {}, {}
    for p in json.loads(api.call("GET", "/api/v1/namespaces/%s/pods?%s" % (e2e.NS, q)))["items"]:
        pods.setdefault(p["metadata"]["labels"][POOL_LABEL], []).append(p["metadata"]["name"])
        # (node, CLI port): two host-network relays there collide, so one's going concerns the other's pool
        where[p["metadata"]["name"]] = (p["spec"].get("nodeName"),
                                        p["metadata"].get("annotations", {}).get("turnfleet.hzmi.dev/cli-port"))
    sharing = lambda victim: sorted({pl for pl, names in pods.items() for n in names
                                     if n != victim and where.get(n) == where.get(victim)})
    # the background: pools reconciled with no event (the engine's own wake-ups), over 10 s
    b0, tb, seq, c0 = reconciles(), time.monotonic(), e2e.last_seq(), cpu_seconds(pid)
    time.sleep(10)
    b1, tb, c1 = reconciles(), time.monotonic() - tb, cpu_seconds(pid)
    background = sum(b1.get(p, 0) - b0.get(p, 0) for p in b1) / tb
    bench_background = sum(b1.get(p, 0) - b0.get(p, 0) for p in b1 if is_bench(p)) / tb
    live = sorted(p for p in b1 if not is_bench(p))
    quiet = [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r["userAgent"] and r["method"] in WRITES
             and "/leases/" not in r["path"]]
    op, rf, windows, counts, bench_counts, only, extra = [], [], [], [], [], 0, []
    for k in range(events):
        pool = "p%03d" % (k * 7 % POOLS)
        victim = sorted(pods[pool])[k % RELAYS]
        m0 = reconciles()
        seq = e2e.last_seq()
        t0 = time.time()
        api.call("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (e2e.NS, victim))
        w = e2e.wait_for("the operator's recreate", lambda: operator_creates(seq), 120, 0.01)[0]
        op.append(w["time"] - t0)
        m1 = e2e.wait_for("%s reconciled" % pool, lambda: (lambda m: m if m.get(pool, 0) > m0.get(pool, 0) else None)(
            reconciles()), 30, 0.05)
        windows.append(time.time() - t0)
        r = rose(m0, m1)
        counts.append(len(r))
        bench_rose = [p for p in r if is_bench(p)]  # the bench pools: nothing of theirs runs, only events reconcile them
        bench_counts.append(len(bench_rose))
        only += bench_rose == [pool]
        extra += [(p, p in sharing(victim)) for p in bench_rose if p != pool]
        rf.append(ref.ping())
        time.sleep(0.2)
    print("== 4. one relay-pod event at %d pools (%d deletes, grace 0, each pod of another pool) ==" % (POOLS, events))
    print("of the %d bench pools (relays never started: only events reconcile them), those whose reconciles_total "
          "rose between the delete and its pool's reconcile: median %d, max %d; exactly the deleted pod's pool in %d "
          "of %d" % (POOLS, pct(bench_counts, 50), max(bench_counts), only, events))
    print("  the other bench pools reconciled: %d, of them %d with a relay on the deleted pod's node and CLI port (the "
          "pools' concurrent creation gave both the same one: its going ends their collision)" %
          (len(extra), len([1 for _, shared in extra if shared])))
    print("of every pool (also %s, whose running relays' probes and counts reconcile them every probe interval): "
          "median %d, max %d" % (", ".join(live) or "none", pct(counts, 50), max(counts)))
    print("background, same run, no event: %.1f pool reconciles/s (the engine's own wake-ups; %.1f/s of the bench "
          "pools) -> %.2f expected in the mean window of %.0f ms; its writes then: %d (%s); its CPU then: %.0f ms/s" %
          (background, bench_background, background * sum(windows) / len(windows), sum(windows) / len(windows) * 1e3,
           len(quiet),
           ", ".join("%s %d" % kv for kv in sorted(count_by(quiet).items())), (c1 - c0) * 1e3 / tb))
    print("event -> write: DELETE pod -> the operator's POST of its replacement: p50 %.1f ms, p99 %.1f ms" %
          (pct(op, 50) * 1e3, pct(op, 99) * 1e3))
    print("reference, same run, interleaved: the reactor: p50 %.1f ms, p99 %.1f ms; ratio p50 %.2f, p99 %.2f "
          "(goal p99 <= 1.2)" % (pct(rf, 50) * 1e3, pct(rf, 99) * 1e3, pct(op, 50) / pct(rf, 50), pct(op, 99) / pct(rf, 99)))
    s2 = proc_status(pid)
    print("the 10 MB Secret, again after these events: VmRSS %d KiB (%+d KiB since before it)" %
          (s2["VmRSS"], s2["VmRSS"] - big_before["VmRSS"]))


def noop_fleet(seconds):
    """Part 5: the operator restarted with --resync 1s over the 100 pools; writes over SECONDS of resyncs."""
    e2e.stop(e2e.OPERATORS["a"])
    start_operator("--resync", "1s")
    pid = e2e.OPERATORS["a"].pid

    def quiet():
        seq = e2e.last_seq()
        time.sleep(3)
        return not [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r["userAgent"] and
                    r["method"] in WRITES and "/leases/" not in r["path"]]
    try:
        e2e.wait_for("3 s without a write from the restarted operator", quiet, 120, 0)
    except AssertionError as e:
        print("(%s)" % e)
    m0 = reconciles()
    seq = e2e.last_seq()
    time.sleep(seconds)
    m1 = reconciles()
    log = [r for r in e2e.requests_since(seq) if "turnfleet-operator" in r.get("userAgent", "")]
    lease = [r for r in log if "/leases/" in r["path"]]
    other = [r for r in log if "/leases/" not in r["path"]]
    writes = [r for r in other if r["method"] in WRITES]
    passes = sum(m1.get(p, 0) - m0.get(p, 0) for p in m1 if p.startswith("p")) / float(POOLS)
    st = proc_status(pid)
    print("== 5. no-op resync at %d pools (the operator restarted with --resync 1s) ==" % POOLS)
    print("over %.0f s: reconciles per bench pool %.1f; operator requests %d (writes %d; Lease %d)" %
          (seconds, passes, len(other), len(writes), len(lease)))
    print("writes per no-op resync: %.2f (goal 0)" % (len(writes) / seconds))
    for k, v in sorted(count_by(writes).items()):
        print("  write: %s x%d" % (k, v))
    print("the restarted operator at 1000 pods (relisted, resyncing every second): VmRSS %d KiB, VmHWM %d KiB" %
          (st["VmRSS"], st["VmHWM"]))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    e2e.BUILD = os.path.abspath(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    events = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    fleet_events = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    fleet_timeout = float(sys.argv[5]) if len(sys.argv) > 5 else FLEET_TIMEOUT
    e2e.VERSION = "4.6.1"
    e2e.OPERATOR = os.environ.get("TF_E2E_OPERATOR") or os.path.join(e2e.BUILD, "tools", "turnfleet-operator",
                                                                  "turnfleet-operator")
    e2e.PROBE = os.path.join(e2e.BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    e2e.setUpModule()
    try:
        start_operator("--resync", "1s")
        noop_resync(seconds)
        # parts 2-4 on the operator's default --resync (10m): a 1 s resync queues every pool every
        # second, which is part 1's and part 5's subject, not theirs
        e2e.stop(e2e.OPERATORS["a"])
        start_operator()
        ref = Reference(Api("tf-bench-client"))
        latency(events, ref)
        big_before = fleet(fleet_timeout)
        one_pool(fleet_events, ref, big_before)
        noop_fleet(seconds)
        ref.stop.set()
    finally:
        e2e.tearDownModule()


if __name__ == "__main__":
    main()
