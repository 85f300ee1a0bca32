"""turnfleet-operator's failover and lifecycle facts, end to end on the stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_lifecycle.py BUILD_DIR COTURN_VERSION

Each case is a fault or a state that a restarted or new leader must read from the API objects alone:
a leader killed mid-scale-down (one drain, nothing re-created, held allocations kept until
drainTimeout), a takeover (no readiness gate changed before the new leader's own probe), a full
relay (Full and healthy, out of turn-uris), a NotReady node (its relay drains), DualStack and IPv6
pools (each half probed in its own family), a deleted pool kept by its finalizer with its status until
its relays drained (then made again under its name), a TLS pool (its Secret checked, turns: proven, a
new certificate rolling every relay). A monitor reads turn-uris and the pods every 150 ms
throughout and fails the run if turn-uris ever lists a relay whose pod is not Ready.

The helpers and the cluster set-up are test_operator_e2e.py's, on addresses of this suite's own:
API 127.0.5.240:25600, control :25601, nodes n1-n3 on 127.0.5.241-243 and fd00:5::241-243 (added to
lo for the run, removed after), relay ranges in 25000-25099, coturn CLIs on 127.0.0.1 25800-25899,
operator metrics 127.0.5.240:25610-25611. Every process is stopped by its PID."""
import calendar
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_operator_e2e as e2e  # noqa: E402

e2e.API_ADDR, e2e.API_PORT = "127.0.5.240", 25600
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
V6 = {"n1": "fd00:5::241", "n2": "fd00:5::242", "n3": "fd00:5::243"}
e2e.NODES = [("n1", "127.0.5.241,fd00:5::241"), ("n2", "127.0.5.242,fd00:5::242"), ("n3", "127.0.5.243,fd00:5::243")]
e2e.NS = "tflife"
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 25610), "%s:%d" % (e2e.API_ADDR, 25611)]
NS, POOL, SECRET = e2e.NS, e2e.POOL, e2e.SECRET1
CLI = ("--cli-port", "25800")
PROBE_S = 1
ADDED = []       # IPv6 addresses this run put on lo
MONITOR = None
WRITES = e2e.WRITES


def setUpModule():
    ADDED.extend(e2e.add_lo_ipv6(V6.values()))
    e2e.setUpModule()
    global MONITOR
    MONITOR = Monitor()
    MONITOR.start()


def tearDownModule():
    if MONITOR:
        MONITOR.stop()
    e2e.tearDownModule()
    e2e.del_lo_ipv6(ADDED)


def api(path):
    """GET an API path as the admin, straight over HTTPS (fast enough to poll every 150 ms)."""
    d = os.path.join(e2e.TMP, "cluster")
    ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
    token = open(os.path.join(d, "token")).read().strip()
    req = urllib.request.Request("https://%s:%d%s" % (e2e.API_ADDR, e2e.API_PORT, path),
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.loads(r.read())


def start(name):
    return e2e.start_operator(name, *CLI)


def leader():
    return e2e.lease_holder()


def uri_host(uri):
    host = uri.split(":", 1)[1].rsplit(":", 1)[0]
    return host.strip("[]")


def hold_every_port(uri, ports):
    """One allocation a process on uri until the relay has no port left: two attempts in a row answered 508
    (the operator's probe may hold a port for a moment; a released allocation of an earlier case may still
    hold one, so the count is not assumed)."""
    holders, full = [], 0
    while len(holders) <= ports and full < 2:
        p = subprocess.Popen([e2e.PROBE, "--uri", uri, "--secret-file", e2e.write_secret_file(SECRET), "--hold", "1",
                              "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        e2e.HOLDERS.append(p)
        res = json.loads(p.stdout.readline() or "{}")
        if res.get("ok"):
            holders.append(p)
            full = 0
            continue
        e2e.stop(p)
        if res.get("errorCode") != 508:
            raise AssertionError("holding on %s: %s" % (uri, res))
        full += 1
        time.sleep(0.3)
    if full < 2:
        raise AssertionError("%s took more than its %d ports" % (uri, ports))
    return holders


class Monitor(threading.Thread):
    """Every 150 ms: each address in <pool>-turn-uris belongs to a relay pod that is Ready."""

    def __init__(self):
        super().__init__(daemon=True)
        self.halt = threading.Event()
        self.violations, self.rounds = [], 0

    def stop(self):
        self.halt.set()
        self.join(10)

    @staticmethod
    def ready_addresses(pods):
        ready = {}
        for p in pods:
            for a in (p["metadata"].get("annotations") or {}).get("turnfleet.hzmi.dev/relay-address", "").split(","):
                if e2e.pod_ready(p):
                    ready[a] = p["metadata"]["name"]
        return ready

    def run(self):
        # pods, turn-uris, pods again: a listed address is a violation only when its pod was not Ready in
        # both reads around the ConfigMap's (the right order, gate True before the URIs list it and the URIs
        # dropped before the gate goes False, changes in between without being one)
        while not self.halt.wait(0.15):
            try:
                before = self.ready_addresses(api("/api/v1/namespaces/%s/pods" % NS)["items"])
                cms = api("/api/v1/namespaces/%s/configmaps" % NS)["items"]
                pods = api("/api/v1/namespaces/%s/pods" % NS)["items"]
            except OSError:
                continue
            after = self.ready_addresses(pods)
            for cm in cms:
                if not cm["metadata"]["name"].endswith("-turn-uris"):
                    continue
                for u in (cm.get("data") or {}).get("uris", "").splitlines():
                    host = uri_host(u) if u else None
                    if host and host not in before and host not in after:
                        seen = [(p["metadata"]["name"], p["metadata"].get("deletionTimestamp"),
                                 [(c["type"], c["status"]) for c in (p.get("status") or {}).get("conditions") or []])
                                for p in pods if host in (p["metadata"].get("annotations") or {})
                                .get("turnfleet.hzmi.dev/relay-address", "").split(",")]
                        self.violations.append((time.strftime("%H:%M:%S"), cm["metadata"]["name"], u, seen))
            self.rounds += 1


class Lifecycle(e2e.OperatorE2E):
    def assert_monitor_clean(self):
        self.assertEqual(MONITOR.violations, [], "turn-uris listed a relay whose pod was not Ready")

    def test_01_a_takeover_changes_no_gate_before_its_own_probe(self):
        start("a")
        e2e.wait_for("operator-a's /readyz", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        e2e.kubectl("create", "secret", "generic", "-n", NS, POOL + "-secret", "--from-literal=secret=" + SECRET)
        e2e.kubectl("apply", "-f", "-", input=e2e.pool_yaml(POOL, 3, 25000, 25019))
        self.converged(3)
        e2e.wait_for("operator-a leads", lambda: leader() == "operator-a", 30)
        start("b")
        e2e.wait_for("operator-b's /readyz", lambda: e2e.operator_get(1, "/readyz")[0] == 200, 30)
        seq = e2e.last_seq()
        e2e.stop(e2e.OPERATORS["a"], signal.SIGKILL)
        e2e.wait_for("operator-b takes the lease", lambda: leader() == "operator-b", 3 * 4 + 5)

        # the new leader's first reconciles and probes come within its first renewals of the lease (probes
        # every second, the first half a second after it found the pods): eight renewals, counted in the log
        def renewals():
            return [r for r in e2e.requests_since(seq) if r["method"] == "PUT" and "/leases/" in r["path"]
                    and "operator-b" in r.get("userAgent", "")]
        e2e.wait_for("operator-b's eighth renewal", lambda: len(renewals()) >= 8, 30)
        gates = [r for r in e2e.requests_since(seq) if r["method"] == "PATCH" and r["path"].endswith("/status")
                 and "/pods/" in r["path"]]
        self.assertEqual(gates, [], "a readiness gate changed on a takeover of a healthy pool")
        self.converged(3)
        start("a")   # back as the standby
        self.assert_monitor_clean()

    def test_02_a_leader_killed_mid_scale_down_drains_one_relay_and_recreates_none(self):
        _, pods, _ = self.converged(3)
        holders = {p["metadata"]["name"]: e2e.hold(self.uri_of(p), SECRET, 1) for p in pods}
        e2e.wait_for("every hold counted", lambda: all((r.get("allocations") or 0) >= 1
                                                       for r in self.status_relays().values()), 30)
        seq = e2e.last_seq()
        first = leader()
        e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")

        def deleting():
            return [p for p in api("/api/v1/namespaces/%s/pods" % NS)["items"] if p["metadata"].get("deletionTimestamp")]
        vp = e2e.wait_for("a relay pod being deleted", deleting, 30)[0]
        victim = vp["metadata"]["name"]
        asked = calendar.timegm(time.strptime(vp["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - \
            int(vp["metadata"].get("deletionGracePeriodSeconds") or 0)
        e2e.stop(e2e.OPERATORS["a" if first == "operator-a" else "b"], signal.SIGKILL)
        e2e.wait_for("the other operator leads", lambda: leader() not in (None, first), 3 * 4 + 5)
        ever = {victim}

        def drained():
            items = api("/api/v1/namespaces/%s/pods" % NS)["items"]
            ever.update(p["metadata"]["name"] for p in items if p["metadata"].get("deletionTimestamp"))
            return victim not in {p["metadata"]["name"] for p in items}
        e2e.wait_for("the draining pod gone", drained, e2e.DRAIN_S + 60, 0.1)
        held_for = time.time() - asked
        self.assertEqual(ever, {victim}, "a second relay was drained")
        # its held allocation kept the pod until drainTimeout from the deletion (the API's times are whole seconds)
        self.assertGreaterEqual(held_for + 1.0, e2e.DRAIN_S, "the draining pod went before drainTimeout")
        self.converged(2)
        for name, h in holders.items():
            if name != victim:
                self.assertIsNone(h.poll(), "the allocation held on %s was cut" % name)
        counts = {n: r.get("allocations") for n, r in self.status_relays().items()}
        self.assertEqual(sorted(counts), sorted(n for n in holders if n != victim), counts)
        self.assertTrue(all((v or 0) >= 1 for v in counts.values()), counts)
        created = [r for r in e2e.requests_since(seq) if r["method"] == "POST" and r["path"].endswith("/pods")]
        self.assertEqual(created, [], "a relay was re-created")
        for h in holders.values():
            e2e.stop(h)
        start("a" if first == "operator-a" else "b")
        e2e.kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
        self.converged(3)
        self.assert_monitor_clean()

    def test_03_a_full_relay_is_full_and_healthy(self):
        _, pods, _ = self.converged(3)
        pods.sort(key=lambda p: p["metadata"]["name"])
        full = pods[0]
        name, addr = full["metadata"]["name"], full["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        holders = hold_every_port(self.uri_of(full), 20)
        try:
            def is_full():
                r = self.status_relays().get(name) or {}
                if r.get("state") == "Full" and addr not in {uri_host(u) for u in e2e.uris() or []}:
                    return True
                # a port a transient allocation held when the holders saw 508 (the operator's own probe, an
                # earlier case's released one) may come free: it is taken too, so that the relay stays full
                holders.extend(hold_every_port(self.uri_of(full), 3))
                return False
            e2e.wait_for("%s Full and out of turn-uris" % name, is_full, 30)

            # Full is healthy: Ready True, CapacityPressure True, its pod Ready with its gate True/RelayFull, all
            # seen at once while it is Full. Its fullness never lowers Ready (Ready never names it); another
            # relay's count lagging under load may, for a moment (RelaysUncounted, naming that relay).
            def full_and_healthy():
                if not is_full():
                    raise AssertionError("%s not Full" % name)
                obj = e2e.pool_obj()
                ready = e2e.cond(obj, "Ready")
                self.assertNotIn(name, ready.get("message") or "", obj["status"])
                self.assertEqual(ready.get("status"), "True", obj["status"])
                self.assertEqual(e2e.cond(obj, "CapacityPressure").get("status"), "True", obj["status"])
                pod = api("/api/v1/namespaces/%s/pods/%s" % (NS, name))
                self.assertTrue(e2e.pod_ready(pod), "a full relay's pod is not Ready")
                gate = [c for c in pod["status"]["conditions"] if c["type"] == "turnfleet.hzmi.dev/allocate-ready"][0]
                self.assertEqual((gate["status"], gate["reason"]), ("True", "RelayFull"), gate)
                return True
            e2e.wait_for("%s Full and healthy" % name, full_and_healthy, 30)
        finally:
            for h in holders:
                e2e.stop(h)
        e2e.wait_for("%s back in turn-uris" % name,
                     lambda: (self.status_relays().get(name) or {}).get("state") == "Ready" and
                     addr in {uri_host(u) for u in e2e.uris() or []}, 30)
        self.converged(3)
        self.assert_monitor_clean()

    def test_04_a_notready_node_loses_its_relay(self):
        _, pods, _ = self.converged(3)
        on_n3 = [p for p in pods if p["spec"]["nodeName"] == "n3"][0]
        addr = on_n3["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        # a node gone NotReady takes its pods' Ready away before any operator can know (as kube's node
        # lifecycle controller does): n3's relay listed in that moment is not the operator's ordering
        seen_before = len(MONITOR.violations)
        e2e.control("POST", "/kubelets/n3/stop")
        try:
            def node_unknown():
                n = api("/api/v1/nodes/n3")
                return any(c["type"] == "Ready" and c["status"] == "Unknown" for c in n["status"]["conditions"])
            e2e.wait_for("n3 NotReady", node_unknown, 30)
            e2e.wait_for("n3's relay out of turn-uris and its pod being deleted",
                         lambda: addr not in {uri_host(u) for u in e2e.uris() or []} and
                         api("/api/v1/namespaces/%s/pods/%s" % (NS, on_n3["metadata"]["name"]))["metadata"]
                         .get("deletionTimestamp"), 30)
        finally:
            e2e.control("POST", "/kubelets/n3/start")
        kept = [v for v in MONITOR.violations[seen_before:] if uri_host(v[2]) != addr]
        del MONITOR.violations[seen_before:]
        MONITOR.violations.extend(kept)
        self.converged(3)
        self.assert_monitor_clean()

    def family_pool(self, family):
        pool_gone()
        text = e2e.pool_yaml(POOL, 3, 25000, 25019).replace("family: IPv4", "family: " + family)
        e2e.kubectl("apply", "-f", "-", input=text)

        want = {"DualStack": 12, "IPv6": 6}[family]
        last = {}

        # Ready, every pod Ready, and every relay listed (a relay whose pod just went Ready is listed by the
        # operator's next pass: the pool counts it ready a moment before turn-uris lists it)
        def ready():
            obj = e2e.pool_obj()
            pods = e2e.live(e2e.relay_pods())
            u = e2e.uris() or []
            last.update(ready=e2e.cond(obj, "Ready"), pods=len(pods), uris=u)
            if e2e.cond(obj, "Ready").get("status") != "True" or len(pods) != 3 or \
                    not all(map(e2e.pod_ready, pods)) or len(u) != want:
                return None
            return obj, pods, u
        try:
            obj, pods, u = e2e.wait_for("a %s pool Ready" % family, ready, 90)
        except AssertionError as err:
            raise AssertionError("%s; last seen %s" % (err, last))
        for uri in u:   # each half in its own family, as the operator probes them
            v6 = "[" in uri
            r = subprocess.run([e2e.PROBE, "--uri", uri, "--secret-file", e2e.write_secret_file(SECRET), "--json",
                                "--family", "ipv6" if v6 else "ipv4", "--expect-address", uri_host(uri)],
                               capture_output=True, text=True, timeout=30)
            res = json.loads((r.stdout.strip().splitlines() or ["{}"])[0])
            self.assertEqual(r.returncode, 0, (uri, res))
            self.assertEqual(":" in res["relayedAddress"], v6, (uri, res))
        return obj

    def test_05_a_dualstack_pool_is_ready_with_both_halves_probed_and_published(self):
        self.family_pool("DualStack")
        self.assert_monitor_clean()

    def test_06_an_ipv6_pool_is_ready(self):
        self.family_pool("IPv6")
        self.assert_monitor_clean()
        self.assertGreater(MONITOR.rounds, 50, "the monitor hardly ran")

    def test_07_a_deleted_pool_stays_with_its_status_until_its_relays_drained(self):
        pool_gone()
        e2e.kubectl("apply", "-f", "-", input=e2e.pool_yaml(POOL, 3, 25000, 25019))
        obj, pods, _ = self.converged(3)
        self.assertIn("turnfleet.hzmi.dev/drain", obj["metadata"].get("finalizers") or [], obj["metadata"])
        holders = [e2e.hold(self.uri_of(p), SECRET, 1) for p in pods]
        e2e.wait_for("every hold counted", lambda: all((r.get("allocations") or 0) >= 1
                                                       for r in self.status_relays().values()), 30)
        e2e.kubectl("delete", "-n", NS, "turnpool", POOL, "--wait=false")
        asked = time.time()

        # kept, turn-uris emptied first, the status saying what is left and until when
        def draining():
            o = e2e.pool_obj()
            sd = (o.get("status") or {}).get("shutdown") or {}
            ready = e2e.cond(o, "Ready")
            if not o["metadata"].get("deletionTimestamp") or sd.get("relays") != 3 or ready.get("reason") != "Stopping":
                return None
            return o
        o = e2e.wait_for("the deleted pool draining in its status", draining, 30)
        self.assertEqual(e2e.uris(), [], "turn-uris not emptied while the relays drain")
        self.assertGreaterEqual(o["status"]["shutdown"]["allocations"] or 0, 3, o["status"])
        self.assertIn("3 relays draining", e2e.cond(o, "Ready")["message"])
        self.assertTrue(o["status"]["shutdown"].get("deadline"), o["status"])
        events = e2e.kget("-n", NS, "events")["items"]
        self.assertTrue([ev for ev in events if ev.get("reason") == "Deleting" and
                         ev["involvedObject"].get("uid") == o["metadata"]["uid"]], "no Deleting event")
        # a pool of that name cannot be made while this one drains (the API says so), and its holds stay
        made = e2e.kubectl("create", "-f", "-", input=e2e.pool_yaml(POOL, 3, 25000, 25019), check=False)
        self.assertNotEqual(made.returncode, 0, "a second pool of one name")
        self.assertTrue(all(h.poll() is None for h in holders), "an allocation was cut before drainTimeout")
        e2e.wait_for("the pool gone", lambda: e2e.kubectl("get", "-n", NS, "turnpool", POOL, check=False).returncode != 0,
                     e2e.DRAIN_S + 60, 0.1)
        self.assertGreaterEqual(time.time() - asked + 1.0, e2e.DRAIN_S, "the pool went before drainTimeout")
        self.assertEqual(e2e.relay_pods(), [], "a relay pod outlived its pool")
        drained = [ev for ev in e2e.kget("-n", NS, "events")["items"]
                   if ev["involvedObject"].get("uid") == o["metadata"]["uid"] and ev.get("reason") == "Drained"]
        self.assertEqual(sum(ev.get("count") or 1 for ev in drained), 1, drained)
        for h in holders:
            e2e.stop(h)
        # made again under the same name: it works, and each RelayCreated Event is a pod that was made
        seq = e2e.last_seq()
        e2e.kubectl("apply", "-f", "-", input=e2e.pool_yaml(POOL, 3, 25000, 25019))
        obj, _, _ = self.converged(3)
        made = [r for r in e2e.requests_since(seq) if r["method"] == "POST" and r["path"].endswith("/pods")
                and r["code"] == 201]
        events = [ev for ev in e2e.kget("-n", NS, "events")["items"]
                  if ev["involvedObject"].get("uid") == obj["metadata"]["uid"]]
        created = sum(ev.get("count") or 1 for ev in events if ev.get("reason") == "RelayCreated")
        self.assertEqual(created, len(made), (events, made))
        self.assertEqual([ev for ev in events if ev.get("reason") == "PodExists"], [])
        self.assert_monitor_clean()


    def test_09_a_container_restart_neither_drains_nor_replaces_its_relay(self):
        _, pods, _ = self.converged(3)
        holders = {p["metadata"]["name"]: e2e.hold(self.uri_of(p), SECRET, 1) for p in pods}
        e2e.wait_for("every hold counted", lambda: all((r.get("allocations") or 0) >= 1
                                                       for r in self.status_relays().values()), 30)
        seq = e2e.last_seq()
        victim = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
        name, addr = victim["metadata"]["name"], victim["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        path = "/api/v1/namespaces/%s/pods/%s" % (NS, name)
        seen_before = len(MONITOR.violations)
        for container in ("agent", "coturn"):
            before = restarts(api(path), container)
            os.kill(container_pid(api(path), container), signal.SIGKILL)

            def back():
                pod = api(path)
                return (pod["metadata"]["uid"] == victim["metadata"]["uid"] and restarts(pod, container) > before and
                        e2e.pod_ready(pod) and addr in {uri_host(u) for u in e2e.uris() or []})
            e2e.wait_for("%s's %s restarted, its relay Ready and listed again" % (name, container), back, 90)
            self.assertIsNone(api(path)["metadata"].get("deletionTimestamp"), "a restarted container's pod is deleted")
        # the relay was neither drained nor replaced, and the other relays' allocations were never cut
        gone = [r for r in e2e.requests_since(seq) if r["method"] in ("DELETE", "POST") and "/pods" in r["path"]
                and not r["path"].endswith("/eviction")]
        self.assertEqual(gone, [], "a pod was deleted or made for a container restart")
        for n, h in holders.items():
            if n != name:
                self.assertIsNone(h.poll(), "the allocation held on %s was cut" % n)
        e2e.wait_for("%s counted again" % name, lambda: (self.status_relays().get(name) or {}).get("allocations")
                     is not None, 30)
        for h in holders.values():
            e2e.stop(h)
        # the kubelet takes the pod's Ready away when a container dies, before any operator can know: the
        # relay stays listed until the operator's next pass drops it (the monitor sees that moment). The
        # operator's own order (gate, then the list) is what the monitor holds it to: other relays, other times.
        kept = [v for v in MONITOR.violations[seen_before:] if uri_host(v[2]) != addr]
        del MONITOR.violations[seen_before:]
        MONITOR.violations.extend(kept)
        self.assert_monitor_clean()

def container_pid(pod, container):
    """The host PID of @p container's current process in @p pod (the stand-in kubelet's pidfile)."""
    d = os.path.join(e2e.TMP, "cluster", "kubelet", pod["spec"]["nodeName"], "pods", pod["metadata"]["uid"], "c")
    runs = sorted((int(n.rsplit("-", 1)[1]), n) for n in os.listdir(d) if n.startswith(container + "-"))
    with open(os.path.join(d, runs[-1][1], "pid")) as f:
        return int(f.read().split()[0])


def restarts(pod, container):
    for st in (pod.get("status") or {}).get("containerStatuses") or []:
        if st["name"] == container:
            return st.get("restartCount", 0)
    return 0


def pool_gone():
    """The pool deleted and gone (its finalizer lets it go once its relays drained)."""
    e2e.kubectl("delete", "-n", NS, "turnpool", POOL, "--wait=false", "--ignore-not-found")
    e2e.wait_for("the pool gone", lambda: e2e.kubectl("get", "-n", NS, "turnpool", POOL, check=False).returncode != 0
                 and not e2e.relay_pods(), 90)


def make_cert(tag):
    """A self-signed certificate and key (files in the run's directory)."""
    crt, key = (os.path.join(e2e.TMP, "%s.%s" % (tag, ext)) for ext in ("crt", "key"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "2", "-subj", "/CN=turn.%s.test" % tag, "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    return crt, key


class LifecycleTLS(Lifecycle):
    def test_08_a_tls_pool_mounts_its_certificate_and_proves_turns(self):
        pool_gone()
        text = e2e.pool_yaml(POOL, 3, 25000, 25019).replace(
            "  - {name: turn-tcp, protocol: tcp, port: 3478}\n",
            "  - {name: turns, protocol: tls, port: 5349, tlsSecretRef: {name: edge-tls}}\n")
        e2e.kubectl("apply", "-f", "-", input=text)
        # no Secret yet: the condition and an Event name the Secret
        e2e.wait_for("TLSSecretInvalid", lambda: e2e.cond(e2e.pool_obj(), "Ready").get("reason") == "TLSSecretInvalid", 30)
        self.assertIn("Secret %s/edge-tls: not found" % NS, e2e.cond(e2e.pool_obj(), "Ready")["message"])
        events = e2e.kget("-n", NS, "events")["items"]
        self.assertTrue([ev for ev in events if ev.get("reason") == "TLSSecretInvalid" and "edge-tls" in ev["message"]])
        # a Secret whose key is not the certificate's: named too
        crt, key = make_cert("one")
        _, other = make_cert("other")
        # (kubectl's `create secret tls` refuses a mismatched pair itself: the Secret is made as a generic one)
        e2e.kubectl("create", "secret", "generic", "-n", NS, "edge-tls", "--type", "kubernetes.io/tls",
                    "--from-file", "tls.crt=" + crt, "--from-file", "tls.key=" + other)
        e2e.wait_for("tls.key named", lambda: "tls.key: not the key of tls.crt" in
                     e2e.cond(e2e.pool_obj(), "Ready").get("message", ""), 30)
        e2e.wait_for("an Event naming the Secret and its key", lambda: [
            ev for ev in e2e.kget("-n", NS, "events")["items"] if ev.get("reason") == "TLSSecretInvalid" and
            "Secret %s/edge-tls: tls.key:" % NS in ev["message"]], 30)
        e2e.kubectl("delete", "secret", "-n", NS, "edge-tls")
        e2e.kubectl("create", "secret", "tls", "-n", NS, "edge-tls", "--cert", crt, "--key", key)

        last = {}

        def ready():
            obj = e2e.pool_obj()
            pods = e2e.live(e2e.relay_pods())
            u = e2e.uris() or []
            last.update(ready=e2e.cond(obj, "Ready"), pods=len(pods), uris=u)
            if e2e.cond(obj, "Ready").get("status") != "True" or len(pods) != 3 or len(u) != 6:
                return None
            return pods, u
        try:
            pods, u = e2e.wait_for("a TLS pool Ready", ready, 90)
        except AssertionError as err:
            probes = {n: r.get("lastProbe") for n, r in self.status_relays().items()}
            logs = [e2e.kubectl("logs", "-n", NS, p["metadata"]["name"], "-c", "coturn", "--tail", "400",
                                check=False).stdout for p in e2e.live(e2e.relay_pods())[:1]]
            logs = ["\n".join(l for l in t.splitlines() if "CLI authentication" not in l)[:3000] for t in logs]
            raise AssertionError("%s; last seen %s; probes %s; coturn said %s" % (err, last, probes, logs))
        tls = [x for x in u if x.startswith("turns:")]
        self.assertEqual(len(tls), 3, u)
        for uri in tls:
            r = subprocess.run([e2e.PROBE, "--uri", uri, "--secret-file", e2e.write_secret_file(SECRET), "--json",
                                "--insecure"], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, (uri, r.stdout, r.stderr))
        mount = [m for m in pods[0]["spec"]["containers"][0]["volumeMounts"] if m["name"] == "tls"]
        self.assertEqual(mount and mount[0]["readOnly"], True, pods[0]["spec"]["containers"][0])
        # a new certificate rolls every relay (a new config hash), one at a time, the fewest allocations first
        # (none, two, four held), turns: still proven
        pods.sort(key=lambda p: p["metadata"]["name"])
        want = {p["metadata"]["name"]: n for p, n in zip(pods, (4, 2, 0))}
        holders = [e2e.hold(self.uri_of(p), SECRET, n) for p, n in zip(pods, (4, 2, 0)) if n]
        self.wait_counted(want)
        hashes = {p["metadata"]["name"]: p["metadata"]["annotations"]["turnfleet.hzmi.dev/config-hash"] for p in pods}
        seq = e2e.last_seq()
        crt2, key2 = make_cert("two")
        secret = e2e.kget("-n", NS, "secret", "edge-tls")
        import base64
        secret["data"] = {"tls.crt": base64.b64encode(open(crt2, "rb").read()).decode(),
                          "tls.key": base64.b64encode(open(key2, "rb").read()).decode()}
        e2e.kubectl("replace", "-f", "-", input=json.dumps(secret))

        def rolled():
            got = e2e.live(e2e.relay_pods())
            if len(got) != 3 or not all(map(e2e.pod_ready, got)):
                return None
            return all(p["metadata"]["annotations"]["turnfleet.hzmi.dev/config-hash"] != hashes.get(p["metadata"]["name"])
                       for p in got)
        e2e.wait_for("every relay rolled to the new certificate", rolled, 180)
        for h in holders:
            e2e.stop(h)
        # from the API server's request log: each pod deleted, then its replacement made, before the next goes
        steps = [("DELETE", r["path"].rsplit("/", 1)[1]) if r["method"] == "DELETE" else ("POST", None)
                 for r in e2e.requests_since(seq) if "/namespaces/%s/pods" % NS in r["path"] and
                 "(operator-" in r.get("userAgent", "") and
                 ((r["method"] == "DELETE" and r["code"] in (200, 202)) or
                  (r["method"] == "POST" and r["path"].endswith("/pods") and r["code"] == 201))]
        self.assertEqual([m for m, _ in steps], ["DELETE", "POST"] * 3, steps)
        self.assertEqual([n for m, n in steps if m == "DELETE"], sorted(want, key=want.get),
                         "the roll did not replace the relay with the fewest allocations first")
        u = e2e.wait_for("a TLS pool Ready again", ready, 60)[1]
        for uri in [x for x in u if x.startswith("turns:")]:
            r = subprocess.run([e2e.PROBE, "--uri", uri, "--secret-file", e2e.write_secret_file(SECRET), "--json",
                                "--insecure"], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, (uri, r.stdout, r.stderr))
        self.assert_monitor_clean()


def main():
    # this suite's own cases, not the ones it inherits with the helpers
    suite = unittest.TestSuite()
    for case in (Lifecycle, LifecycleTLS):
        suite.addTests(t for t in unittest.TestLoader().loadTestsFromTestCase(case) if t._testMethodName in case.__dict__)
    e2e.run("test_operator_lifecycle.py", suite)


if __name__ == "__main__":
    main()
