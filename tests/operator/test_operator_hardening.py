"""A relay pod that cannot be turned against its clients, end to end on the stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_hardening.py BUILD_DIR COTURN_VERSION

The helpers of test_operator_e2e.py and test_operator_lifecycle.py (imported as modules, their address
constants replaced): one stand-in cluster, API 127.0.10.240:30600, control :30601, nodes n1-n2 on
127.0.10.241-242, relays on udp 30478 with ranges in 30100-30199, agents on :30700, coturn CLIs on
127.0.0.1 30800-30899, operator metrics 127.0.10.240:30610-30611. One operator (operator-a).

- a liveness kill of the agent runs only the agent's preStop: the relay is not drained, keeps its
  allocations and serves new ones, and no marker is written;
- a stale marker, then a real `kubectl delete pod` with an allocation held: the relay drains, and the
  pod stays until the allocation is released (drainTimeout is far longer);
- the seed's pool form (`dataplane.image` with a version tag, no `coturnVersion`) renders for the
  coturn that runs: every relay counted exactly;
- a shared secret past the cap (1 MiB) is refused with the Secret, its key and the cap named, in the
  condition and an Event;
- nodes offering the cloud metadata address, the unspecified address, a multicast address, the API
  server's address with its port in the pool's range (the URL's, and another API server's from the
  `kubernetes` Endpoints), or a loopback address without the development label host no relay: the
  AddressConflict condition and a Warning Event name each node, its address and why;
- a relay whose coturn CLI port a process of the test holds before the relay starts (so its agent cannot
  count) is Uncounted: its state, the pool's Ready False with RelaysUncounted, a Warning Event, the
  operator's turnfleet_relay_uncounted gauge; freed, it is counted again. Its node n3 on 127.0.16.1 (no
  relay-node label: only that pool, by its own nodeSelector), relays on udp 36478, range 36100-36119;
- the agents' /metrics answers only the operator: 401 without the pool's token (from <pool>-relay-config),
  200 with it; the token is in no pod spec, Event, status or ConfigMap;
- 200 half-open connections to an agent's port from one address (127.0.10.9): the relay keeps serving,
  is not drained, its agent is not killed for liveness, and its counts keep arriving.

Tests run in order and share the cluster; every process is stopped by its PID."""
import base64
import os
import re
import signal
import socket
import sys
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_operator_e2e as e2e  # noqa: E402
import test_operator_lifecycle as life  # noqa: E402  (api, container_pid, restarts; its constants replaced below)

e2e.API_ADDR, e2e.API_PORT = "127.0.10.240", 30600
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = [("n1", "127.0.10.241"), ("n2", "127.0.10.242"), ("n3", "127.0.16.1")]
API_OTHER = "127.0.10.239"   # a second API server the `kubernetes` Endpoints list (nothing listens there)
e2e.CLUSTER_ARGS = ["--advertise-address", API_OTHER]
e2e.NS = "tfharden"
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 30610), "%s:%d" % (e2e.API_ADDR, 30611)]
e2e.DRAIN_S = 120   # far past every step here: a pod that goes early went for its marker, not its deadline
NS, POOL, SECRET = e2e.NS, e2e.POOL, e2e.SECRET1
EXTRA = ["--agent-port", "30700", "--cli-port", "30800"]
FLOODER = "127.0.10.9"   # the address a stranger floods the agent's port from


def pool_yaml(replicas, dataplane=None):
    dataplane = dataplane or '{image: "coturn/coturn:%s", coturnVersion: "%s"}' % (e2e.VERSION, e2e.VERSION)
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: %d\n  dataplane: %s\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n"
            "  relayPortRange: {start: 30100, end: 30119}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 30478}\n"
            "  auth:\n    realm: %s.turnfleet.test\n    secretRef: {name: %s-secret, key: secret}\n"
            "  drainTimeout: %ds\n" % (POOL, NS, replicas, dataplane, POOL, POOL, e2e.DRAIN_S))


def run_dir(pod):
    """The pod's `run` emptyDir as the stand-in kubelet keeps it on the host."""
    return os.path.join(e2e.TMP, "cluster", "kubelet", pod["spec"]["nodeName"], "pods", pod["metadata"]["uid"],
                        "volumes", "run")


def uri_of(pod):
    return "turn:%s:30478?transport=udp" % pod["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]


def refused(uri):
    """The error code a new Allocate gets on uri now (0: served)."""
    code, res = e2e.probe(uri, SECRET)
    return 0 if code == 0 else res.get("errorCode")


def events(reason, name):
    return [ev for ev in e2e.kget("-n", NS, "events")["items"]
            if ev.get("reason") == reason and ev["involvedObject"].get("name") == name]


def setUpModule():
    e2e.setUpModule()
    # n3 is the uncounted case's alone: out of the relay-node pools, in its own
    e2e.kubectl("label", "node", "n3", "turnfleet.hzmi.dev/relay-node-", "uncounted=true")


tearDownModule = e2e.tearDownModule


def cli_port_of(ns, name, base=30800, slots=10, stride=10):
    """The first CLI port of a pool: the operator's slot, FNV-1a of NS/NAME (docs/operator.md)."""
    h = 2166136261
    for ch in ("%s/%s" % (ns, name)).encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return base + stride * (h % slots)


def agent_metrics(pod, token=None):
    """GET the relay's agent /metrics (its address, the operator's --agent-port 30700): (code, text)."""
    addr = pod["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
    req = urllib.request.Request("http://%s:30700/metrics" % addr,
                                 headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


class Hardening(e2e.OperatorE2E):
    def converged(self, replicas, pool=POOL):
        """replicas ready relay pods, each listed in turn-uris (the e2e helper expects its own listeners)."""
        def ok():
            pods = e2e.live(e2e.relay_pods(pool))
            listed = {life.uri_host(u) for u in e2e.uris(pool) or []}
            if len(pods) != replicas or not all(map(e2e.pod_ready, pods)):
                return None
            addrs = {p["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"] for p in pods}
            return pods if addrs <= listed else None
        return e2e.wait_for("%d relays ready and listed" % replicas, ok, 180)

    def test_01_a_liveness_kill_of_the_agent_drains_nothing(self):
        e2e.start_operator("a", *EXTRA)
        e2e.kubectl("create", "secret", "generic", "-n", NS, POOL + "-secret", "--from-literal=secret=" + SECRET)
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(2))
        pods = self.converged(2)
        Hardening.first_token = e2e.kget("-n", NS, "secret", POOL + "-relay-config")["data"].get("metrics-token")
        victim = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
        name, uri = victim["metadata"]["name"], uri_of(victim)
        path = "/api/v1/namespaces/%s/pods/%s" % (NS, name)
        holder = e2e.hold(uri, SECRET, 1)
        e2e.wait_for("the hold counted", lambda: (self.status_relays().get(name) or {}).get("allocations") == 1, 60)
        before = life.restarts(life.api(path), "agent")
        # a stopped agent answers no /healthz: three failed probes and the kubelet kills it, preStop first
        pid = life.container_pid(life.api(path), "agent")
        os.kill(pid, signal.SIGSTOP)
        try:
            e2e.wait_for("the liveness kill", lambda: events("Killing", name) and
                         any("agent failed liveness probe" in ev["message"] for ev in events("Killing", name)), 120)
        finally:
            os.kill(pid, signal.SIGCONT)  # its SIGTERM, sent after the hook, is delivered now
        e2e.wait_for("the agent restarted", lambda: life.restarts(life.api(path), "agent") > before, 120)
        pod = life.api(path)
        self.assertEqual(pod["metadata"]["uid"], victim["metadata"]["uid"])
        self.assertIsNone(pod["metadata"].get("deletionTimestamp"))
        # not drained: no marker, the allocation kept, new Allocates served, the relay counted again
        self.assertFalse(os.path.exists(os.path.join(run_dir(pod), "drained")))
        self.assertFalse(os.path.exists(os.path.join(run_dir(pod), "stopping")))
        self.assertIsNone(holder.poll(), "the held allocation was cut")
        self.assertEqual(refused(uri), 0)
        e2e.wait_for("counted again", lambda: e2e.pod_ready(life.api(path)) and
                     (self.status_relays().get(name) or {}).get("allocations") == 1, 90)
        e2e.stop(holder)

    def test_02_a_stale_marker_does_not_shorten_a_real_deletion(self):
        pods = self.converged(2)
        victim = sorted(pods, key=lambda p: p["metadata"]["name"])[1]
        name, uri = victim["metadata"]["name"], uri_of(victim)
        path = "/api/v1/namespaces/%s/pods/%s" % (NS, name)
        holder = e2e.hold(uri, SECRET, 1)
        e2e.wait_for("the hold counted", lambda: (self.status_relays().get(name) or {}).get("allocations") == 1, 60)
        # a marker left by an earlier drain, in the old form and in the new one
        marker = os.path.join(run_dir(victim), "drained")
        for text in ("drained allocations=0\n", "request=0ld\ndrained allocations=0\n"):
            with open(marker, "w") as f:
                f.write(text)
        e2e.kubectl("delete", "-n", NS, "pod", name, "--wait=false")
        # the coturn container's preStop asked, the agent drained: new Allocates are refused
        e2e.wait_for("the stop request", lambda: os.path.exists(os.path.join(run_dir(victim), "stopping")), 60)
        want = 486 if e2e.VERSION.startswith("4.6.") else 403
        e2e.wait_for("new Allocates refused", lambda: refused(uri) == want, 60)
        # the held allocation keeps the pod: still there, the allocation alive (drainTimeout is 120 s)
        pod = life.api(path)
        self.assertEqual(pod["metadata"]["uid"], victim["metadata"]["uid"])
        self.assertIsNotNone(pod["metadata"].get("deletionTimestamp"))
        self.assertIsNone(holder.poll(), "the held allocation was cut before its release")
        with open(marker) as f:
            self.assertEqual(f.read(), "request=0ld\ndrained allocations=0\n")
        e2e.stop(holder)  # its release ends the drain: the pod goes, the operator makes it again

        def gone():
            try:
                return life.api(path)["metadata"]["uid"] != victim["metadata"]["uid"]
            except Exception as e:  # 404 until it is made again
                return "404" in str(e)
        e2e.wait_for("the pod gone after the release", gone, 90)
        self.converged(2)

    def test_03_the_seeds_pool_form_is_counted_exactly(self):
        # the stand-in maps *coturn*:4.6.1 to the host's 4.6.1 and any other 4.x tag to 4.18
        image = "coturn/coturn:4.6.1" if e2e.VERSION.startswith("4.6.") else "coturn/coturn:%s-r0" % e2e.VERSION
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(2, '{image: "%s"}' % image))

        def rolled():
            pods = self.converged(2)
            return pods if all(p["spec"]["containers"][0]["image"] == image for p in pods) else None
        pods = e2e.wait_for("every relay on %s" % image, rolled, 240)
        for p in pods:
            self.assertIn("--coturn-version", p["spec"]["containers"][1]["command"])
            cmd = p["spec"]["containers"][1]["command"]
            self.assertEqual(cmd[cmd.index("--coturn-version") + 1], e2e.VERSION)
        name = pods[0]["metadata"]["name"]
        holder = e2e.hold(uri_of(pods[0]), SECRET, 2)
        e2e.wait_for("2 allocations counted", lambda: (self.status_relays().get(name) or {}).get("allocations") == 2, 60)
        # the other relay (perhaps just rolled to the image) is counted too: never Ready with nulls for long
        e2e.wait_for("every relay counted", lambda: all(r.get("portsInUse") is not None
                                                        for r in self.status_relays().values()), 60)
        e2e.stop(holder)

    def test_04_a_secret_past_the_cap_is_refused_naming_the_secret_and_key(self):
        path = os.path.join(e2e.TMP, "big-secret")
        with open(path, "w") as f:
            f.write("b" * (1 << 20))
        e2e.kubectl("create", "secret", "generic", "-n", NS, "big-secret", "--from-file=token=" + path)
        text = pool_yaml(1).replace("name: %s, namespace" % POOL, "name: big, namespace").replace(
            "secretRef: {name: %s-secret, key: secret}" % POOL, "secretRef: {name: big-secret, key: token}")
        e2e.kubectl("apply", "-f", "-", input=text)
        want = "spec.auth.secretRef: Secret %s/big-secret, key token: 1048576 bytes, more than the cap of 512 bytes" % NS
        e2e.wait_for("SecretInvalid", lambda: e2e.cond(e2e.pool_obj("big"), "Ready").get("reason") == "SecretInvalid", 60)
        self.assertEqual(e2e.cond(e2e.pool_obj("big"), "Ready")["message"], want)
        e2e.wait_for("the Event", lambda: [ev for ev in e2e.kget("-n", NS, "events")["items"]
                                           if ev.get("reason") == "SecretInvalid" and ev["message"] == want], 60)
        self.assertEqual(e2e.relay_pods("big"), [])
        e2e.kubectl("delete", "-n", NS, "turnpool", "big")

    def test_05_dangerous_node_addresses_are_refused_naming_the_node(self):
        # nodes an adversary (or a mistake) gave the cloud metadata address, the unspecified, a multicast
        # address, and the API server's own address with its port inside the pool's relay range
        # and a loopback address on a node not labelled a development one (the cluster's own nodes are)
        # and the address of another API server, known only from the `kubernetes` Endpoints
        bad = {"n-meta": "169.254.169.254", "n-any": "0.0.0.0", "n-mcast": "224.0.0.1", "n-api": e2e.API_ADDR,
               "n-api2": API_OTHER, "n-loop": "127.0.10.250"}
        for node, addr in sorted(bad.items()):
            # n-api and n-api2 development nodes, as the cluster's own: their refusal is the API server's port
            dev = ", node-restriction.kubernetes.io/turnfleet-development: \"true\"" if node.startswith("n-api") else ""
            e2e.kubectl("apply", "-f", "-", input=(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {guard: \"true\"%s}\n"
                "  annotations: {turnfleet.hzmi.dev/relay-address: \"%s\"}\n" % (node, dev, addr)))
        text = pool_yaml(6).replace("name: %s, namespace" % POOL, "name: guard, namespace").replace(
            "relayPortRange: {start: 30100, end: 30119}",
            "relayPortRange: {start: %d, end: %d}\n  nodeSelector: {guard: \"true\"}" % (e2e.API_PORT - 5,
                                                                                       e2e.API_PORT + 5))
        e2e.kubectl("apply", "-f", "-", input=text)
        want = ["node n-any: 0.0.0.0 is refused: unspecified",
                "node n-api: %s is refused: the Kubernetes API server listens on port %d there" % (e2e.API_ADDR,
                                                                                                e2e.API_PORT),
                "node n-api2: %s is refused: the Kubernetes API server listens on port %d there" % (API_OTHER,
                                                                                                 e2e.API_PORT),
                "node n-loop: 127.0.10.250 is refused: loopback (127.0.0.0/8), which hosts relays only on a node "
                "labelled node-restriction.kubernetes.io/turnfleet-development=true",
                "node n-mcast: 224.0.0.1 is refused: multicast",
                "node n-meta: 169.254.169.254 is refused: link-local"]

        def refused():
            c = e2e.cond(e2e.pool_obj("guard"), "AddressConflict")
            return c.get("status") == "True" and c.get("reason") == "UnusableAddress" and \
                all(w in c.get("message", "") for w in want) and c
        e2e.wait_for("AddressConflict naming each node", refused, 60)
        ev = e2e.wait_for("the Warning Event", lambda: [e for e in events("UnusableAddress", "guard")
                                                       if e.get("type") == "Warning"], 60)
        self.assertTrue(all(w in ev[0]["message"] for w in want), ev[0]["message"])
        self.assertEqual(e2e.cond(e2e.pool_obj("guard"), "Ready").get("reason"), "InsufficientAddresses")
        self.assertEqual(e2e.relay_pods("guard"), [])
        # none ready: 0, not a blank, in the status and in kubectl's READY column
        st = e2e.pool_obj("guard")["status"]
        self.assertEqual((st.get("readyRelays"), st.get("turnURIs")), (0, []), st)
        row = e2e.kubectl("get", "-n", NS, "turnpool", "guard", "--no-headers").stdout.split()
        self.assertEqual(row[3], "0", row)  # NAME MODE DESIRED READY STATUS AGE
        # the running pool's status lists what its turn-uris ConfigMap publishes, and counts it
        e2e.wait_for("status.turnURIs as turn-uris", lambda: (p := e2e.pool_obj()["status"]) and sorted(
            p.get("turnURIs") or []) == sorted(e2e.uris(POOL) or []) and p.get("turnURIs") and
            p.get("readyRelays") == len([x for x in e2e.live(e2e.relay_pods()) if e2e.pod_ready(x)]), 60)
        e2e.kubectl("delete", "-n", NS, "turnpool", "guard")
        e2e.kubectl("delete", "node", *sorted(bad))

    def test_06_a_relay_that_cannot_be_counted_shows_it(self):
        name = "uncounted"
        self.assertNotEqual(cli_port_of(NS, name), cli_port_of(NS, POOL))  # not the running pool's CLI ports
        port = cli_port_of(NS, name)
        # the relay's CLI port, taken before the relay starts: its coturn cannot listen there, and its agent
        # does not give the password to a listener that is not coturn's
        squatter = socket.socket()
        squatter.bind(("127.0.0.1", port))
        squatter.listen(1)
        try:
            text = pool_yaml(1).replace("name: %s, namespace" % POOL, "name: %s, namespace" % name).replace(
                "relayPortRange: {start: 30100, end: 30119}",
                "relayPortRange: {start: 36100, end: 36119}\n  nodeSelector: {uncounted: \"true\"}").replace(
                "port: 30478", "port: 36478")
            e2e.kubectl("apply", "-f", "-", input=text)
            pod = e2e.wait_for("the relay pod", lambda: (p := e2e.live(e2e.relay_pods(name))) and p[0], 120)
            relay = pod["metadata"]["name"]
            self.assertEqual(pod["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"], "127.0.16.1")
            self.assertEqual(pod["metadata"]["annotations"].get("turnfleet.hzmi.dev/cli-port"), str(port))

            def uncounted():
                c = e2e.cond(e2e.pool_obj(name), "Ready")
                r = self.status_relays(name).get(relay) or {}
                return c.get("reason") == "RelaysUncounted" and r.get("state") == "Uncounted" and (c, r)
            c, r = e2e.wait_for("the relay Uncounted, Ready False RelaysUncounted", uncounted, 120)
            self.assertEqual(c["status"], "False")
            self.assertIn(relay, c["message"])
            self.assertIsNone(r.get("portsInUse"))
            self.assertTrue(r.get("ready"), r)  # it serves: probed, still listed
            self.assertEqual(refused("turn:127.0.16.1:36478?transport=udp"), 0)
            ev = e2e.wait_for("the Warning Event", lambda: [e for e in events("RelaysUncounted", name)
                                                           if e.get("type") == "Warning"], 60)
            self.assertIn(relay, ev[0]["message"])
            series = re.compile(r'(?m)^turnfleet_relay_uncounted\{namespace="%s",pool="%s",relay="%s"\} (\S+)$'
                                % (NS, name, relay))
            e2e.wait_for("the gauge at 1", lambda: (m := series.search(e2e.operator_get(0, "/metrics")[1] or ""))
                         and m.group(1) == "1", 60)
        finally:
            squatter.close()
        # the port freed: coturn's CLI binds at its next start (the relay restarted for it); counted again
        e2e.kubectl("delete", "-n", NS, "pod", relay, "--wait=false")
        e2e.wait_for("counted again", lambda: (r := [x for x in self.status_relays(name).values()
                                                     if x.get("portsInUse") is not None and x.get("state") == "Ready"])
                     and e2e.cond(e2e.pool_obj(name), "Ready").get("status") == "True", 240)
        e2e.kubectl("delete", "-n", NS, "turnpool", name)

    def test_07_agent_metrics_only_with_the_pools_token(self):
        pods = self.converged(2)
        secret = e2e.kget("-n", NS, "secret", POOL + "-relay-config")
        token = base64.b64decode(secret["data"]["metrics-token"]).decode()
        self.assertRegex(token, r"^[0-9a-f]{64}$")
        for pod in pods:
            self.assertEqual(agent_metrics(pod)[0], 401)
            self.assertEqual(agent_metrics(pod, "0" * 64)[0], 401)
            code, text = agent_metrics(pod, token)
            self.assertEqual(code, 200)
            self.assertIn("turnfleet_agent_ports_in_use{", text)
            # mounted for the agent alone (the stand-in kubelet keeps the volume on the host)
            vol = os.path.join(os.path.dirname(run_dir(pod)), "metrics-token", "metrics-token")
            with open(vol) as f:
                self.assertEqual(f.read(), token)
        # the operator's scrapes carry it: the relays are counted
        e2e.wait_for("every relay counted", lambda: all(r.get("portsInUse") is not None
                                                        for r in self.status_relays().values()), 60)
        # made once: the one of the pool's first relays, through the restarts, deletions and the rollout since
        self.assertEqual(base64.b64decode(getattr(Hardening, "first_token", None) or "").decode(), token)
        # nowhere else: no pod spec (env, args), no Event, no status, no ConfigMap
        for what in (["pods"], ["events"], ["turnpools"], ["configmaps"]):
            text = e2e.kubectl("get", "-n", NS, "-o", "json", *what).stdout
            self.assertNotIn(token, text, what)
            self.assertNotIn(base64.b64encode(token.encode()).decode(), text, what)

    def test_08_a_flood_of_half_open_connections_fails_neither_liveness_nor_counts(self):
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(2))
        pods = self.converged(2)
        victim = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
        name, uri = victim["metadata"]["name"], uri_of(victim)
        addr = victim["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        path = "/api/v1/namespaces/%s/pods/%s" % (NS, name)
        before = life.restarts(life.api(path), "agent")

        def liveness_kills():  # test_01 killed this very agent once: what counts is none more
            return sum(ev.get("count", 1) for ev in events("Killing", name) if "liveness" in ev.get("message", ""))
        kills = liveness_kills()
        # 200 connections to the agent's port on the relay's public address that never send a whole request,
        # from one stranger's address (this suite's 127.0.10.9)
        flood = []
        try:
            for _ in range(200):
                s = socket.socket()
                s.bind((FLOODER, 0))
                s.settimeout(5)
                s.connect((addr, 30700))
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                flood.append(s)
            # the relay keeps serving, and its counts keep arriving: a hold made now is counted, and its release
            holder = e2e.hold(uri, SECRET, 1)
            e2e.wait_for("the hold counted during the flood",
                         lambda: (self.status_relays().get(name) or {}).get("allocations") == 1, 60)
            e2e.stop(holder)
            e2e.wait_for("its release counted during the flood",
                         lambda: (self.status_relays().get(name) or {}).get("allocations") == 0, 60)
            self.assertEqual(refused(uri), 0)
            # two count rounds later: never killed for liveness, never drained, still Ready and listed
            pod = life.api(path)
            self.assertEqual(pod["metadata"]["uid"], victim["metadata"]["uid"])
            self.assertIsNone(pod["metadata"].get("deletionTimestamp"))
            self.assertEqual(life.restarts(pod, "agent"), before)
            self.assertEqual(liveness_kills(), kills)
            self.assertFalse(os.path.exists(os.path.join(run_dir(pod), "drained")))
            self.assertTrue(e2e.pod_ready(pod))
            self.assertIn(uri, e2e.uris(POOL) or [])
        finally:
            for s in flood:
                s.close()


def main():
    # this suite's own cases, not the ones it inherits with the helpers
    tests = unittest.TestLoader().loadTestsFromTestCase(Hardening)
    e2e.run("test_operator_hardening.py", unittest.TestSuite(t for t in tests if t._testMethodName in Hardening.__dict__))


if __name__ == "__main__":
    main()
