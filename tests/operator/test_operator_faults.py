"""turnfleet-operator's writes under faults, on the Kubernetes stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_faults.py BUILD_DIR COTURN_VERSION

The helpers of test_operator_e2e.py (imported as a module, its address constants
replaced): one stand-in cluster, API 127.0.7.240:27600, control :27601, nodes
n1-n3 on 127.0.7.241-243, relays on udp 27478 with ranges in 27100-27199,
agents on :27700, coturn CLIs on 127.0.0.1 27800-27899, operator metrics
127.0.7.240:27610-27611. Two operator replicas with the identities operator-a
and operator-b (the request log tells them apart by userAgent). Bookmarks every
BOOKMARK_S seconds (the stand-in's --bookmark-interval and the operator's).

- a leader paused (SIGSTOP) past its renew deadline writes nothing once the new
  leader wrote, and exits when it wakes;
- a TURNPool watch that stays silent (fault `stall` on every watch) is dropped
  after two bookmark intervals and relisted: a `kubectl scale` is acted on
  within two bookmark intervals plus one probe interval; writes stay within the
  per-pool budget;
- 429 + Retry-After on the operator's writes and Events: no write before the
  wait has passed, the Events delivered;
- every watch of the objects it writes silent (stale caches for up to two
  bookmark intervals): a scale-down writes each object once or twice, the
  status no more often than it changes, and nothing from a stale view (no 409),
  counted from the stand-in's request log;
- a 409 on each kind of write (a pod, the turn-uris ConfigMap, the relay-config
  Secret, the drain finalizer's PUT of a pool): one read of the object, then
  the write again (these reads are what the RBAC's `get` verbs are for).

Tests run in order and share the cluster; every process is stopped by its PID."""
import json
import os
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_operator_e2e as e2e  # noqa: E402

e2e.API_ADDR, e2e.API_PORT = "127.0.7.240", 27600
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = [("n1", "127.0.7.241"), ("n2", "127.0.7.242"), ("n3", "127.0.7.243")]
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 27610), "%s:%d" % (e2e.API_ADDR, 27611)]

NS, POOL, WRITES = e2e.NS, e2e.POOL, e2e.WRITES
BOOKMARK_S = 2        # set_up() starts the stand-in with --bookmark-interval 2
PROBE_S = 1           # start_operator() passes --probe-interval 1s
STALE_S = 5           # test_4's --bookmark-interval: its caches go stale for up to twice this
STATUS_CHANGES = 8    # the most status changes of one scale-down (replicas, the relay draining, leaving, its count
                      # and state, readyRelays, the URIs, conditions): test_4 saw 6
SLACK_S = 5           # scheduling on a loaded 2-core machine: a bound for the wait, never an asserted time
BUDGET = (100, 10.0)  # the operator's default --write-budget 100/10s
RETRY_AFTER = 2
OPERATOR_USER = "system:serviceaccount:turnfleet-system:turnfleet-operator"
EXTRA = ["--agent-port", "27700", "--cli-port", "27800", "--bookmark-interval", "%ds" % BOOKMARK_S]


def pool_yaml(replicas):
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: %d\n  dataplane: {image: \"coturn/coturn:%s\", coturnVersion: \"%s\"}\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n"
            "  relayPortRange: {start: 27100, end: 27119}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 27478}\n"
            "  auth:\n    realm: %s.turnfleet.test\n    secretRef: {name: %s-secret, key: secret}\n"
            "  drainTimeout: %ds\n" % (POOL, NS, replicas, e2e.VERSION, e2e.VERSION, POOL, POOL, e2e.DRAIN_S))


def by(name, log):
    """The requests of operator-<name>, in the log's order."""
    return [r for r in log if "(operator-%s)" % name in r.get("userAgent", "")]


def writes(log, leases=True):
    return [r for r in log if r["method"] in WRITES and (leases or "/leases/" not in r["path"])]


def fault(rule):
    return e2e.control("POST", "/faults", rule)["id"]


def fault_hits(fid):
    return next((r.get("hits", 0) for r in e2e.control("GET", "/faults")["rules"] if r.get("id") == fid), 0)


def most_in_window(reqs, span):
    """The most requests whose log times fall in any window of span seconds."""
    t = sorted(r["time"] for r in reqs)
    most, j = 0, 0
    for i in range(len(t)):
        while t[i] - t[j] > span:
            j += 1
        most = max(most, i - j + 1)
    return most


def setUpModule():
    try:
        e2e.set_up()
    except BaseException:
        e2e.tearDownModule()
        raise


def tearDownModule():
    for p in e2e.OPERATORS.values():   # a paused one cannot act on SIGTERM
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)
            except OSError:
                pass
    e2e.tearDownModule()


class OperatorFaults(unittest.TestCase):
    maxDiff = None
    converged = e2e.OperatorE2E.converged

    def test_1_a_paused_leader_writes_nothing_after_the_new_leader(self):
        e2e.start_operator("a", *EXTRA)
        e2e.wait_for("operator-a's /readyz", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        e2e.kubectl("create", "secret", "generic", "-n", NS, POOL + "-secret", "--from-literal=secret=" + e2e.SECRET1)
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(2))
        self.converged(2)
        e2e.wait_for("operator-a leads", lambda: e2e.lease_holder() == "operator-a", 30)
        e2e.start_operator("b", *EXTRA)
        e2e.wait_for("operator-b's /readyz", lambda: e2e.operator_get(1, "/readyz")[0] == 200, 30)
        seq = e2e.last_seq()
        a = e2e.OPERATORS["a"]
        os.kill(a.pid, signal.SIGSTOP)
        try:
            # a change while the leader sleeps: its watches hold it, so it wants to write when it wakes
            e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
            first_b = e2e.wait_for("operator-b's first write", lambda: (writes(by("b", e2e.requests_since(seq))) or
                                                                       [None])[0], 30)
            self.assertIn("/leases/", first_b["path"], "the standby wrote before it held the Lease")
            e2e.wait_for("operator-b writing the pool", lambda: writes(by("b", e2e.requests_since(seq)), False), 30)
        finally:
            os.kill(a.pid, signal.SIGCONT)
        e2e.wait_for("operator-a gone once awake", lambda: a.poll() is not None, 30)
        self.assertEqual(a.returncode, 1, "the deposed leader should exit 1 (lost the lease)")
        late = [(r["method"], r["path"], r["code"]) for r in writes(by("a", e2e.requests_since(first_b["seq"])))]
        self.assertEqual(late, [], "the deposed leader wrote after the new leader's first write")
        self.converged(3)
        log = open(os.path.join(e2e.TMP, "operator-a.log"), errors="replace").read()
        self.assertIn("lost the lease", log)

    def test_2_a_silent_watch_is_relisted_and_a_scale_acted_on(self):
        self.converged(3)
        self.assertEqual(e2e.lease_holder(), "operator-b")
        # every TURNPool watch from now on: headers, then silence; the new leader's first one too
        fid = fault({"method": "GET", "path": "/apis/turnfleet.hzmi.dev/v1alpha1/turnpools$", "query": "watch",
                     "stall": True, "stallSeconds": 300})
        try:
            self.assertEqual(e2e.stop(e2e.OPERATORS["b"]), 0)   # releases the Lease
            e2e.start_operator("a", *EXTRA)
            e2e.wait_for("operator-a leads", lambda: e2e.lease_holder() == "operator-a", 30)
            # a second silent watch: the first was dropped (two bookmark intervals) and the cache relisted
            e2e.wait_for("a silent watch dropped", lambda: fault_hits(fid) >= 2, 4 * BOOKMARK_S + SLACK_S)
            self.converged(3)
            seq = e2e.last_seq()
            e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")

            def acted():   # a drain begins: the relay leaves the turn URIs (or its pod goes)
                return [r for r in writes(by("a", e2e.requests_since(seq)), False)
                        if "-turn-uris" in r["path"] or "/pods/" in r["path"]]
            e2e.wait_for("the scale acted on within two bookmark intervals and a probe interval", acted,
                         2 * BOOKMARK_S + PROBE_S + SLACK_S, 0.1)
            self.converged(2)
            log = by("a", e2e.requests_since(seq))
            relists = [r for r in log if r["method"] == "GET" and r["path"].endswith("/turnpools")
                       and "watch" not in r["query"]]
            self.assertTrue(relists, "no relist of the TURNPools")
            pool_writes = [r for r in writes(log, False) if "/namespaces/%s/" % NS in r["path"]]
            self.assertLessEqual(most_in_window(pool_writes, BUDGET[1]), BUDGET[0],
                                 "more writes in %gs than the budget" % BUDGET[1])
        finally:
            e2e.control("DELETE", "/faults")

    def test_3_retry_after_on_writes_and_events(self):
        self.converged(2)
        # by Event name: a restarted operator's recorder has no dedupe memory and makes a new Event
        before = {ev["metadata"]["name"]: ev.get("count", 1)
                  for ev in e2e.kget("-n", NS, "events")["items"] if ev.get("reason") == "RelayCreated"}
        seq = e2e.last_seq()
        f_obj = fault({"method": "POST|PUT|PATCH|DELETE", "path": "^/api/v1/namespaces/%s/(pods|configmaps|secrets)" % NS,
                       "user": OPERATOR_USER, "status": 429, "retryAfter": RETRY_AFTER, "count": 3})
        f_ev = fault({"method": "POST|PATCH", "path": "^/api/v1/namespaces/%s/events" % NS, "user": OPERATOR_USER,
                      "status": 429, "retryAfter": RETRY_AFTER, "count": 3})
        try:
            e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
            self.converged(3)

            def delivered():
                for ev in e2e.kget("-n", NS, "events")["items"]:
                    if ev.get("reason") == "RelayCreated" and ev.get("count", 1) > before.get(ev["metadata"]["name"], 0):
                        return ev
            try:
                e2e.wait_for("the RelayCreated Event delivered", delivered, 30)
            except AssertionError as e:
                raise AssertionError("%s; the operator's /metrics: %s" % (e, [
                    line for line in e2e.operator_get(0, "/metrics")[1].splitlines() if "turnfleet_operator_" in line]))
            self.assertEqual(fault_hits(f_obj), 3)
            self.assertEqual(fault_hits(f_ev), 3)
        finally:
            e2e.control("DELETE", "/faults")
        ours = [r for r in by("a", e2e.requests_since(seq)) if "/leases/" not in r["path"]]
        refused = [r for r in ours if r["code"] == 429]
        self.assertEqual(len(refused), 6, [(r["method"], r["path"]) for r in refused])
        early = []
        for r in refused:
            for w in writes(ours):
                if w["seq"] > r["seq"] and w["time"] - r["time"] < RETRY_AFTER - 0.05:
                    early.append("%s %s %.2fs after a 429 (%s %s) asking for %ds" % (
                        w["method"], w["path"], w["time"] - r["time"], r["method"], r["path"], RETRY_AFTER))
        self.assertEqual(early, [], "writes before the Retry-After wait passed")
        status, text = e2e.operator_get(0, "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("turnfleet_operator_events_dropped_total 0", text)

    def test_4_stale_caches_drive_no_write_loop(self):
        self.converged(3)
        # every watch of the objects the operator reads and writes stalls from now on: a restarted leader lists
        # them once, then its caches are stale until it relists (two bookmark intervals of silence)
        fid = fault({"method": "GET", "path": "^/(api/v1|apis/turnfleet.hzmi.dev/v1alpha1)/(pods|configmaps|secrets|"
                     "turnpools)$", "query": "watch", "user": OPERATOR_USER, "stall": True, "stallSeconds": 300})
        try:
            self.assertEqual(e2e.stop(e2e.OPERATORS["a"]), 0)
            e2e.start_operator("a", *(EXTRA[:-1] + ["%ds" % STALE_S]))
            e2e.wait_for("operator-a leads", lambda: e2e.lease_holder() == "operator-a", 30)
            e2e.wait_for("operator-a's /readyz", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
            seq = e2e.last_seq()
            e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")
            self.converged(2)
            e2e.wait_for("a second stalled watch of each", lambda: fault_hits(fid) >= 8, 4 * STALE_S + SLACK_S)
            log = writes(by("a", e2e.requests_since(seq)), False)
        finally:
            e2e.control("DELETE", "/faults")
        # counted from the request log: no write from a stale view (a 409), each owned object written once or
        # twice, and the pool's status only as often as a scale-down changes it (before: 51 status PATCHes, 11
        # turn-uris PUTs answered 409 and 5 gate PATCHes for this scale-down)
        counts = {}
        for r in log:
            k = (r["method"], r["path"])
            counts[k] = counts.get(k, 0) + 1
        said = json.dumps(sorted(((n,) + k for k, n in counts.items()), reverse=True))
        self.assertEqual([(r["method"], r["path"]) for r in log if r["code"] == 409], [], said)
        status = "/apis/turnfleet.hzmi.dev/v1alpha1/namespaces/%s/turnpools/%s/status" % (NS, POOL)
        self.assertLessEqual(counts.get(("PATCH", status), 0), STATUS_CHANGES, said)
        self.assertEqual([k for k, n in counts.items() if n > 2 and k[1] != status and "/events" not in k[1]], [], said)
        self.converged(2)


    def test_5_a_409_on_each_write_is_read_once_and_written_again(self):
        # test_4 left the pool at 2 replicas: scaled to 1 and back
        e2e.each_write_meets_a_409(self, OPERATOR_USER, pool_yaml(0).replace("name: %s," % POOL, "name: extra,")
                                   .replace("27100, end: 27119", "27150, end: 27169").replace("port: 27478", "port: 27479"),
                                   high=2)


def main():
    e2e.run("test_operator_faults.py", unittest.TestLoader().loadTestsFromModule(sys.modules[__name__]))


if __name__ == "__main__":
    main()
