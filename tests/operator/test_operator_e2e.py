"""turnfleet-operator end to end on the Kubernetes stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_e2e.py BUILD_DIR COTURN_VERSION

One stand-in cluster (tests/kube/cluster.py) per run: API 127.0.0.240:16600,
control :16601, nodes n1-n3 on 127.0.0.241-243 (relay addresses), relays
3478 udp/tcp with ranges in 61000-61999, agents on :9700, coturn CLIs on
127.0.0.1 15800-15899, operator metrics 127.0.0.240:16610-16611. The CRD and
RBAC come from deploy/ through real kubectl; the operator runs as a host
process with a kubeconfig that holds its ServiceAccount's token (RBAC is the
stand-in's, for real). The relay image is coturn COTURN_VERSION (4.6.1: the
host's turnserver; 4.18.0: the Debian unstable root). Tests run in order and
share the cluster; every process is stopped by its PID."""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
KUBE = os.path.join(SOURCE, "tests", "kube")
API_ADDR, API_PORT = "127.0.0.240", 16600
CONTROL = "http://%s:%d" % (API_ADDR, API_PORT + 1)
NODES = [("n1", "127.0.0.241"), ("n2", "127.0.0.242"), ("n3", "127.0.0.243")]
CLUSTER_ARGS = []   # more cluster.py arguments (a suite importing this module sets them)
NS = "tfe2e"
POOL = "edge"
RIVAL = "rival"
SECRET1 = "e2e-first-secret-4c1d9a7f02b8"
SECRET2 = "e2e-second-secret-91ab3e6c55d0"
AGENT_IMAGE = "turnfleet/turnfleet:e2e"
METRICS = ["%s:%d" % (API_ADDR, 16610), "%s:%d" % (API_ADDR, 16611)]
DRAIN_S = 6
WRITES = ("POST", "PUT", "PATCH", "DELETE")

BUILD = VERSION = None
OPERATOR = PROBE = KUBECTL = None
TMP = CLUSTER = None
OPERATORS = {}   # name -> Popen
HOLDERS = []     # every turnfleet-probe --hold started, stopped at the end whatever happened


def wait_for(what, f, timeout=60.0, delay=0.2):
    """Poll f until it returns something true; fail after timeout seconds (a bound, never asserted)."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = f()
        except AssertionError as e:
            v, last = None, e
        if v:
            return v
        time.sleep(delay)
    raise AssertionError("timed out waiting for %s%s" % (what, (": %s" % last) if last else ""))


def control(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(CONTROL + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def requests_since(seq):
    return control("GET", "/requests?since=%d" % seq)["requests"]


def last_seq():
    r = control("GET", "/requests")["requests"]
    return r[-1]["seq"] if r else 0


def add_lo_ipv6(addrs):
    """Put each IPv6 address on lo for the run; the ones this call added (an address already
    there, from a run killed before its teardown, stays the host's: iproute2 answers "File exists"
    or, newer, "address already assigned")."""
    added = []
    for addr in addrs:
        r = subprocess.run(["ip", "-6", "addr", "add", addr + "/128", "dev", "lo"], capture_output=True, text=True)
        if r.returncode == 0:
            added.append(addr)
        elif "exists" not in r.stderr and "already assigned" not in r.stderr:
            raise AssertionError("ip -6 addr add %s: %s" % (addr, r.stderr))
    return added


def del_lo_ipv6(addrs):
    for addr in addrs:
        subprocess.run(["ip", "-6", "addr", "del", addr + "/128", "dev", "lo"], capture_output=True, text=True)


def kubectl(*args, input=None, check=True, kubeconfig=None, timeout=60):
    cmd = [KUBECTL, "--kubeconfig", kubeconfig or os.path.join(TMP, "cluster", "kubeconfig"),
           "--cache-dir", os.path.join(TMP, "kcache")] + list(args)
    p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=dict(os.environ, HOME=TMP))
    if check and p.returncode != 0:
        raise AssertionError("kubectl %s failed (%d): %s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def kget(*args):
    return json.loads(kubectl("get", "-o", "json", *args).stdout)


def pool_obj(name=POOL):
    return kget("-n", NS, "turnpool", name)


def cond(obj, t):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == t:
            return c
    return {}


def relay_pods(pool=POOL):
    return kget("-n", NS, "pods", "-l", "turnfleet.hzmi.dev/pool=" + pool)["items"]


def live(pods):
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def pod_ready(p):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])


def uris(pool=POOL):
    p = kubectl("get", "-n", NS, "configmap", pool + "-turn-uris", "-o", "json", check=False)
    if p.returncode != 0:
        return None
    return [u for u in json.loads(p.stdout)["data"]["uris"].splitlines() if u]


def write_secret_file(value):
    path = os.path.join(TMP, "secret-%d" % abs(hash(value)))
    with open(path, "w") as f:
        f.write(value + "\n")
    os.chmod(path, 0o600)
    return path


def probe(uri, secret, timeout_ms=3000):
    r = subprocess.run([PROBE, "--uri", uri, "--secret-file", write_secret_file(secret), "--json",
                        "--timeout-ms", str(timeout_ms)], capture_output=True, text=True, timeout=30)
    line = (r.stdout.strip().splitlines() or ["{}"])[0]
    return r.returncode, json.loads(line)


def hold(uri, secret, n=1):
    """Hold n allocations on uri until the returned process gets SIGTERM."""
    for _ in range(10):
        p = subprocess.Popen([PROBE, "--uri", uri, "--secret-file", write_secret_file(secret), "--hold", str(n),
                              "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        HOLDERS.append(p)
        results = [json.loads(p.stdout.readline() or "{}") for _ in range(n)]
        if all(r.get("ok") for r in results):
            return p
        stop(p)
        time.sleep(0.5)
    raise AssertionError("could not hold %d allocations on %s" % (n, uri))


def stop(p, sig=signal.SIGTERM, timeout=20):
    if p is None:
        return None
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def start_operator(name, *extra):
    log = open(os.path.join(TMP, "operator-%s.log" % name), "ab")
    idx = 0 if name == "a" else 1
    cmd = [OPERATOR, "--kubeconfig", os.path.join(TMP, "operator.kubeconfig"), "--agent-image", AGENT_IMAGE,
           "--probe-interval", "1s", "--publish-delay", "1s", "--metrics-addr", METRICS[idx],
           "--leader-elect", "--lease-namespace", "turnfleet-system", "--lease-duration", "4s",
           "--renew-deadline", "3s", "--retry-period", "500ms", "--identity", "operator-" + name,
           "--resync", "0"] + list(extra)
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    OPERATORS[name] = p
    return p


def operator_get(idx, path):
    try:
        with urllib.request.urlopen("http://%s%s" % (METRICS[idx], path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, 


def lease_holder():
    p = kubectl("get", "-n", "turnfleet-system", "lease", "turnfleet-operator", "-o", "json", check=False)
    return json.loads(p.stdout)["spec"].get("holderIdentity") if p.returncode == 0 else None


def pool_yaml(name, replicas, start, end, extra=""):
    image = "coturn/coturn:%s" % VERSION
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: %d\n  dataplane: {image: \"%s\", coturnVersion: \"%s\"}\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n"
            "  relayPortRange: {start: %d, end: %d}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 3478}\n  - {name: turn-tcp, protocol: tcp, port: 3478}\n"
            "  auth:\n    realm: %s.turnfleet.test\n    secretRef: {name: %s-secret, key: secret}\n%s"
            "  drainTimeout: %ds\n" % (name, NS, replicas, image, VERSION, start, end, name, name, extra, DRAIN_S))


def setUpModule():
    try:
        set_up()
    except BaseException:
        tearDownModule()    # nothing left running when the setup fails half way
        raise


def set_up():
    global TMP, CLUSTER, KUBECTL
    out = subprocess.run([os.path.join(KUBE, "clients.sh")], capture_output=True, text=True)
    clients = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    KUBECTL = clients.get("kubectl-host") or clients.get("kubectl-rootfs")
    if not KUBECTL:
        raise AssertionError("no kubectl (tests/kube/clients.sh): %s" % out.stderr)
    TMP = tempfile.mkdtemp(prefix="tf-operator-e2e-")
    os.chmod(TMP, 0o755)
    d = os.path.join(TMP, "cluster")
    cmd = [sys.executable, os.path.join(KUBE, "cluster.py"), "--dir", d, "--address", API_ADDR, "--port", str(API_PORT),
           "--heartbeat", "1", "--node-grace", "4", "--restart-backoff", "1", "--shutdown-grace", "3",
           "--bookmark-interval", "2", "--build", BUILD]
    for name, addr in NODES:
        cmd += ["--node", "%s=%s" % (name, addr), "--node-label", "%s:turnfleet.hzmi.dev/relay-node=true" % name]
    cmd += CLUSTER_ARGS
    log = open(os.path.join(TMP, "cluster.log"), "wb")
    CLUSTER = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    wait_for("the cluster", lambda: os.path.exists(os.path.join(d, "ready")) or CLUSTER.poll() is not None, 600)
    if CLUSTER.poll() is not None:
        raise AssertionError("cluster.py exited: %s" % open(os.path.join(TMP, "cluster.log")).read())
    for part in ("crd", "rbac"):   # as deploy/default holds them (its operator Deployment aside: the test runs it)
        kubectl("apply", "-k", os.path.join(SOURCE, "deploy", part))
    kubectl("create", "namespace", NS)
    token = kubectl("create", "token", "-n", "turnfleet-system", "turnfleet-operator", "--duration=2h").stdout.strip()
    kc = json.load(open(os.path.join(d, "kubeconfig")))
    kc["users"] = [{"name": "operator", "user": {"token": token}}]
    kc["contexts"][0]["context"]["user"] = "operator"
    with open(os.path.join(TMP, "operator.kubeconfig"), "w") as f:
        json.dump(kc, f)
    os.chmod(os.path.join(TMP, "operator.kubeconfig"), 0o600)


def tearDownModule():
    for p in HOLDERS + list(OPERATORS.values()):
        stop(p)
    if CLUSTER is not None and CLUSTER.poll() is None:
        CLUSTER.send_signal(signal.SIGTERM)
        try:
            CLUSTER.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(CLUSTER.pid, signal.SIGKILL)
            CLUSTER.wait()
    if TMP and os.environ.get("TF_E2E_KEEP") != "1":
        shutil.rmtree(TMP, ignore_errors=True)
    elif TMP:
        print("kept", TMP, file=sys.stderr)


class OperatorE2E(unittest.TestCase):
    maxDiff = None

    def converged(self, replicas, pool=POOL):
        """replicas live, ready relay pods on distinct nodes, each URI published, status Ready True."""
        def ok():
            obj = pool_obj(pool)
            pods = relay_pods(pool)
            lv = live(pods)
            if len(pods) != replicas or len(lv) != replicas or not all(pod_ready(p) for p in lv):
                return None
            if cond(obj, "Ready").get("status") != "True":
                return None
            if (obj["status"].get("observedGeneration") != obj["metadata"]["generation"]):
                return None
            u = uris(pool) or []
            addrs = {p["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"] for p in lv}
            if len(addrs) != replicas or {re.sub(r"^turn:([0-9.]+):.*$", r"\1", x) for x in u} != addrs:
                return None
            return obj, lv, u
        return wait_for("%d ready relays of %s" % (replicas, pool), ok, 90)

    def test_01_pool_becomes_ready_and_every_relay_allocates(self):
        start_operator("a")
        wait_for("the operator's /readyz", lambda: operator_get(0, "/readyz")[0] == 200, 30)
        kubectl("create", "secret", "generic", "-n", NS, POOL + "-secret", "--from-literal=secret=" + SECRET1)
        kubectl("apply", "-f", "-", input=pool_yaml(POOL, 3, 61000, 61019))
        obj, pods, u = self.converged(3)
        self.assertEqual(len(u), 6, u)   # udp and tcp on each of the three addresses
        self.assertEqual({p["spec"]["nodeName"] for p in pods}, {"n1", "n2", "n3"})
        table = kubectl("get", "-n", NS, "turnpools").stdout
        self.assertRegex(table, r"edge\s+HostNetwork\s+3\s+3\s+True")
        wide = kubectl("get", "-n", NS, "pods", "-o", "wide").stdout
        for p in pods:
            # READY 2/2 and READINESS GATES 1/1: the operator's Allocate passed
            self.assertRegex(wide, r"(?m)^%s\s+2/2\s+Running\s.*\s1/1\s*$" % p["metadata"]["name"])
        for uri in u:
            code, res = probe(uri, SECRET1)
            self.assertEqual(code, 0, res)
            port = res["relayedPort"]
            self.assertTrue(61000 <= port <= 61019, res)
        status, text = operator_get(0, "/metrics")
        self.assertEqual(status, 200)
        for p in pods:
            self.assertIn('turnfleet_probe_success{namespace="%s",pool="%s",relay="%s"} 1' %
                          (NS, POOL, p["metadata"]["name"]), text)

    def status_relays(self, pool=POOL):
        return {r["name"]: r for r in (pool_obj(pool).get("status") or {}).get("relays") or []}

    def wait_counted(self, want):
        """The pool status counts at least want[relay] allocations on each relay (the agents' counts,
        scraped; a client of an earlier step whose release got lost may still hold one), and the one
        with the fewest wanted has fewer than every other."""
        seen = {}
        low = min(want, key=want.get)

        def counted():
            seen.clear()
            seen.update({n: r.get("allocations") for n, r in self.status_relays().items()})
            if any(seen.get(n) is None or seen[n] < v for n, v in want.items()):
                return False
            return all(seen[low] < seen[n] for n in want if n != low)
        try:
            wait_for("allocations counted", counted, 60)
        except AssertionError:
            raise AssertionError("allocations counted: want %s, the status says %s" % (want, seen))

    def uri_of(self, pod, transport="udp"):
        return "turn:%s:3478?transport=%s" % (pod["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"],
                                              transport)

    def test_02_scale_down_drains_the_relay_with_the_fewest_allocations(self):
        _, pods, _ = self.converged(3)
        pods.sort(key=lambda p: p["metadata"]["name"])
        victim = pods[2]
        holders = [hold(self.uri_of(pods[0]), SECRET1, 3), hold(self.uri_of(pods[1]), SECRET1, 3),
                   hold(self.uri_of(victim), SECRET1, 1)]
        self.__class__.holders = holders[:2]
        name = victim["metadata"]["name"]
        self.wait_counted({pods[0]["metadata"]["name"]: 3, pods[1]["metadata"]["name"]: 3, name: 1})
        seq = last_seq()
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")
        addr = victim["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        wait_for("%s out of the turn URIs" % name, lambda: not any(addr in x for x in uris() or []), 30, 0.05)
        wait_for("%s deleted" % name,
                 lambda: all(p["metadata"].get("deletionTimestamp") for p in relay_pods() if p["metadata"]["name"] == name), 30)
        # the order, from the API server's request log: turn-uris rewritten, then the pod deleted
        log = requests_since(seq)
        deleted = [r["seq"] for r in log if r["method"] == "DELETE" and r["path"].endswith("/pods/" + name)]
        rewritten = [r["seq"] for r in log if r["method"] in ("PUT", "PATCH") and
                     r["path"].endswith("/configmaps/%s-turn-uris" % POOL) and r["code"] == 200]
        self.assertTrue(deleted and rewritten and rewritten[0] < deleted[0],
                        "the pod was deleted before its URI left the ConfigMap (%s, %s)" % (rewritten, deleted))
        time.sleep(2)
        self.assertIn(name, [p["metadata"]["name"] for p in relay_pods()], "the draining pod went while an allocation was held")
        # coturn refuses new Allocates once drained (4.6.1's quota takes effect within 5 s)
        res = wait_for("the draining relay refusing new allocations",
                       lambda: (lambda r: r[1] if r[0] != 0 else None)(probe(self.uri_of(victim), SECRET1)), 20, 0.5)
        self.assertIn(res.get("errorCode"), (403, 486), res)
        self.assertIn(name, [p["metadata"]["name"] for p in relay_pods()], "the draining pod went while an allocation was held")
        stop(holders[2])                                   # the last allocation goes: so does the pod
        wait_for("%s gone" % name, lambda: name not in [p["metadata"]["name"] for p in relay_pods()], 60)
        self.converged(2)

    def test_03_a_held_allocation_keeps_a_draining_pod_until_drain_timeout(self):
        _, pods, _ = self.converged(2)
        for h in self.holders:
            stop(h)
        pods.sort(key=lambda p: p["metadata"]["name"])
        keep, victim = pods
        self.holders = self.__class__.holders = [hold(self.uri_of(keep), SECRET1, 3)]
        held = hold(self.uri_of(victim), SECRET1, 1)
        self.wait_counted({keep["metadata"]["name"]: 3, victim["metadata"]["name"]: 1})
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=1")
        name = victim["metadata"]["name"]
        wait_for("%s deleted" % name,
                 lambda: all(p["metadata"].get("deletionTimestamp") for p in relay_pods() if p["metadata"]["name"] == name), 30)
        wait_for("%s gone at drainTimeout" % name, lambda: name not in [p["metadata"]["name"] for p in relay_pods()],
                 DRAIN_S + 40)
        self.assertIsNone(held.poll(), "the holder ended: the pod did not go by its deadline")
        stop(held)
        self.converged(1)

    def test_04_scale_up(self):
        for h in self.holders:
            stop(h)
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
        _, pods, u = self.converged(3)
        for uri in u[:3]:
            self.assertEqual(probe(uri, SECRET1)[0], 0, uri)

    def test_04b_vantage_results_flip_reachable_from_vantage(self):
        def reach():
            return cond(pool_obj(), "ReachableFromVantage")
        wait_for("ReachableFromVantage Unknown without results", lambda: reach().get("reason") == "NoVantageResults", 30)

        def runner(secret):
            r = subprocess.run([PROBE, "--vantage", POOL, "--namespace", NS, "--kubeconfig",
                                os.path.join(TMP, "cluster", "kubeconfig"), "--runner", "e2e-vantage",
                                "--secret-file", write_secret_file(secret), "--timeout-ms", "2000"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)   # 0 once the results are written
        runner(SECRET1)
        c = wait_for("ReachableFromVantage True", lambda: (c := reach()).get("status") == "True" and c, 30)
        self.assertEqual(c["reason"], "AllReachable")
        self.assertIn("e2e-vantage", c["message"])
        self.wait_vantage_metric("True")
        runner("a-secret-the-relays-do-not-take")
        c = wait_for("ReachableFromVantage False", lambda: (c := reach()).get("status") == "False" and c, 30)
        self.assertEqual(c["reason"], "Unreachable")
        self.assertIn("turn:", c["message"])                       # the failing URIs are named
        self.wait_vantage_metric("False")
        # results older than the staleness bound (15 minutes) say nothing any more
        old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
        kubectl("patch", "-n", NS, "configmap", POOL + "-vantage", "--type=merge", "-p", json.dumps({"data": {"time": old}}))
        c = wait_for("ReachableFromVantage Unknown when stale", lambda: (c := reach()).get("reason") == "StaleVantageResults" and c, 30)
        self.assertEqual(c["status"], "Unknown")
        runner(SECRET1)
        wait_for("ReachableFromVantage True again", lambda: reach().get("status") == "True", 30)
        kubectl("delete", "-n", NS, "configmap", POOL + "-vantage")

    def wait_vantage_metric(self, status):
        """The leader's /metrics says the condition: 1 for @p status, 0 for the other two."""
        def said():
            text = operator_get(0, "/metrics")[1] or ""
            return all(('turnfleet_pool_condition{namespace="%s",pool="%s",type="ReachableFromVantage",status="%s"} %d\n'
                        % (NS, POOL, s, s == status)) in text for s in ("True", "False", "Unknown"))
        wait_for("turnfleet_pool_condition ReachableFromVantage %s in /metrics" % status, said, 30)

    def watch_roll(self, done, what):
        """Poll until done(pods); the most pods being replaced at once, seen along the way."""
        most = [0]

        def step():
            pods = relay_pods()
            most[0] = max(most[0], len([p for p in pods if p["metadata"].get("deletionTimestamp")]))
            return done(pods)
        wait_for(what, step, 120, 0.1)
        return most[0]

    def test_05_a_port_range_change_rolls_one_relay_at_a_time(self):
        self.converged(3)
        kubectl("patch", "-n", NS, "turnpool", POOL, "--type=merge", "-p",
                json.dumps({"spec": {"relayPortRange": {"start": 61100, "end": 61119}}}))
        most = self.watch_roll(lambda pods: len(pods) == 3 and all(
            p["metadata"]["annotations"]["turnfleet.hzmi.dev/port-range"] == "61100-61119" and pod_ready(p)
            and not p["metadata"].get("deletionTimestamp") for p in pods), "every relay on 61100-61119")
        self.assertEqual(most, 1, "more than one relay was replaced at a time")
        _, pods, u = self.converged(3)
        code, res = probe(u[0], SECRET1)
        self.assertEqual(code, 0, res)
        self.assertTrue(61100 <= res["relayedPort"] <= 61119, res)

    def test_06_a_secret_rotation_keeps_every_relay_that_takes_a_valid_secret_published(self):
        _, before, _ = self.converged(3)
        hashes = {p["metadata"]["annotations"]["turnfleet.hzmi.dev/config-hash"] for p in before}
        # the old secret stays valid through previousSecretRef, then the new one takes over
        kubectl("patch", "-n", NS, "secret", POOL + "-secret", "--type=merge", "-p",
                json.dumps({"stringData": {"previous": SECRET1}}))
        kubectl("patch", "-n", NS, "turnpool", POOL, "--type=merge", "-p",
                json.dumps({"spec": {"auth": {"previousSecretRef": {"name": POOL + "-secret", "key": "previous"}}}}))
        time.sleep(2)
        self.assertEqual({p["metadata"]["annotations"]["turnfleet.hzmi.dev/config-hash"] for p in relay_pods()}, hashes,
                         "previous == current must not roll anything")
        kubectl("patch", "-n", NS, "secret", POOL + "-secret", "--type=merge", "-p",
                json.dumps({"stringData": {"secret": SECRET2}}))
        # through the roll: never fewer URIs than the relays not being replaced (a relay that takes the
        # previous secret is still a valid one), and each listed relay takes a credential of the previous secret
        refused, probes, most, fewest = [], [0], [0], [99]

        def rolled():
            pods = relay_pods()
            most[0] = max(most[0], len([p for p in pods if p["metadata"].get("deletionTimestamp")]))
            listed = [x for x in (uris() or []) if "udp" in x]
            fewest[0] = min(fewest[0], len(listed))
            for uri in listed:
                code, res = probe(uri, SECRET1, 2000)
                probes[0] += 1
                if code != 0:
                    refused.append((uri, res))
            return len(pods) == 3 and all(
                p["metadata"]["annotations"]["turnfleet.hzmi.dev/config-hash"] not in hashes and pod_ready(p)
                and not p["metadata"].get("deletionTimestamp") for p in pods)
        wait_for("every relay on the new secret", rolled, 120, 0.05)
        self.assertEqual(refused, [], "a listed relay refused a credential of the previous secret during the roll")
        self.assertGreater(probes[0], 3)
        self.assertEqual(most[0], 1, "more than one relay was replaced at a time")
        self.assertGreaterEqual(fewest[0], 2, "turn-uris dropped relays that still take a valid secret")
        _, pods, u = self.converged(3)
        for uri in u:
            self.assertEqual(probe(uri, SECRET2)[0], 0, "the new secret after the roll: %s" % uri)
            self.assertEqual(probe(uri, SECRET1)[0], 0, "the previous secret is still valid: %s" % uri)

    def test_07_two_pools_claiming_one_address_raise_address_conflict(self):
        self.converged(3)
        kubectl("create", "secret", "generic", "-n", NS, RIVAL + "-secret", "--from-literal=secret=" + SECRET2)
        kubectl("apply", "-f", "-", input=pool_yaml(RIVAL, 1, 61500, 61509))
        obj = wait_for("rival's AddressConflict", lambda: (lambda o: o if cond(o, "AddressConflict").get("status") == "True"
                                                           else None)(pool_obj(RIVAL)), 30)
        self.assertEqual(cond(obj, "Ready").get("status"), "False", obj["status"])
        time.sleep(1)
        self.assertEqual(relay_pods(RIVAL), [], "a conflicting pool got a relay pod")
        self.converged(3)
        kubectl("delete", "-n", NS, "turnpool", RIVAL)

    def test_08_a_cordoned_node_loses_its_relay(self):
        _, pods, _ = self.converged(3)
        kubectl("cordon", "n3")
        try:
            wait_for("no relay on n3", lambda: all(p["spec"]["nodeName"] != "n3" for p in relay_pods()), 60)
            obj = pool_obj()
            self.assertEqual(cond(obj, "Ready").get("status"), "False")
            self.assertEqual(cond(obj, "Ready").get("reason"), "InsufficientAddresses", obj["status"])
            self.assertEqual(len(uris()), 4)
        finally:
            kubectl("uncordon", "n3")
        self.converged(3)

    def test_09_an_operator_killed_mid_reconcile_leaves_no_duplicate_or_orphan(self):
        self.converged(3)
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")
        time.sleep(0.3)
        stop(OPERATORS["a"], signal.SIGKILL)
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
        start_operator("a")
        _, pods, _ = self.converged(3)
        everything = kget("-n", NS, "pods")["items"]
        self.assertEqual(len(everything), 3, [p["metadata"]["name"] for p in everything])
        self.assertEqual(len({p["spec"]["nodeName"] for p in pods}), 3)

    def test_10_two_operators_one_leader_and_failover_within_the_lease(self):
        self.converged(3)
        wait_for("operator-a leads", lambda: lease_holder() == "operator-a", 30)
        start_operator("b")
        wait_for("operator-b's /readyz", lambda: operator_get(1, "/readyz")[0] == 200, 30)
        # every replica says whether it leads; the standby has no pool series
        self.assertIn("\nturnfleet_operator_leader 1\n", operator_get(0, "/metrics")[1])
        standby = operator_get(1, "/metrics")[1]
        self.assertIn("\nturnfleet_operator_leader 0\n", standby)
        self.assertNotIn("turnfleet_relay_ports_total{", standby)
        seq = last_seq()
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")
        self.converged(2)
        log = requests_since(seq)
        self.assertEqual([r for r in log if "operator-b" in r.get("userAgent", "") and r["method"] in WRITES], [],
                         "the standby wrote")
        self.assertTrue([r for r in log if "operator-a" in r.get("userAgent", "") and r["method"] in WRITES])
        stop(OPERATORS["a"], signal.SIGKILL)
        wait_for("operator-b takes the lease", lambda: lease_holder() == "operator-b", 3 * 4 + 5)
        wait_for("operator-b says it leads", lambda: "\nturnfleet_operator_leader 1\n" in operator_get(1, "/metrics")[1], 10)
        kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
        self.converged(3)
        start_operator("a")   # back as the standby

    def test_11_faults_of_the_api_server_converge(self):
        self.converged(3)
        control("POST", "/faults", {"method": "POST", "path": "/api/v1/namespaces/%s/pods$" % NS, "count": 2,
                                    "status": 503})
        control("POST", "/faults", {"method": "GET", "path": "/api/v1/pods$", "query": "watch", "count": 1,
                                    "resetMidStream": True, "afterEvents": 1})
        control("POST", "/faults", {"method": "GET", "path": "/apis/turnfleet.hzmi.dev/v1alpha1/turnpools$",
                                    "query": "watch", "count": 1, "expireMidStream": True, "afterEvents": 0})
        control("POST", "/faults", {"method": "PATCH", "path": "/status$", "count": 2, "status": 500})
        try:
            kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=2")
            self.converged(2)
            kubectl("scale", "-n", NS, "turnpool", POOL, "--replicas=3")
            self.converged(3)
        finally:
            control("DELETE", "/faults")

    def test_12_a_steady_state_writes_nothing(self):
        self.converged(3)
        # a relay restarted by the tests before is Ready on its first probe, and counted half a probe
        # interval later (later still under load): its count going from unknown to 0 is a change
        wait_for("every relay counted", lambda: all(r.get("allocations") is not None
                                                    for r in (pool_obj().get("status") or {}).get("relays") or []), 30)
        time.sleep(2)
        seq = last_seq()
        before = pool_obj().get("status")
        time.sleep(4)      # four probe intervals: probes, scrapes, no change
        log = [r for r in requests_since(seq) if "turnfleet-operator" in r.get("userAgent", "")]
        # the leader renews its Lease (leader election's own write); nothing else is written
        writes = [(r["method"], r["path"]) for r in log if r["method"] in WRITES and "/leases/" not in r["path"]]
        if writes:  # what changed, for the failure's message (the request log keeps no bodies)
            after = pool_obj().get("status")
            writes.append(("status before", json.dumps(before, sort_keys=True)))
            writes.append(("status after", json.dumps(after, sort_keys=True)))
        self.assertEqual(writes, [], "a steady state wrote")
        self.assertTrue([r for r in log if "/leases/" in r["path"]], "no Lease renewal seen: is the operator alive?")
        # quiet, not stuck: a ConfigMap it owns deleted behind its back comes back
        kubectl("delete", "-n", NS, "configmap", POOL + "-turn-uris")
        wait_for("the turn-uris ConfigMap made again", lambda: len(uris() or []) == 6, 30)

    def test_13_an_invalid_pool_is_refused_with_its_field_path(self):
        kubectl("create", "secret", "generic", "-n", NS, "broken-secret", "--from-literal=secret=" + SECRET2)
        kubectl("apply", "-f", "-", input=("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\n"
                                          "metadata: {name: broken, namespace: %s}\nspec:\n  replicas: 1\n"
                                          "  addressing: {mode: ExternalIPPool}\n  relayPortRange: {start: 61600, end: 61609}\n"
                                          "  auth: {realm: b.turnfleet.test, secretRef: {name: broken-secret}}\n" % NS))
        obj = wait_for("broken refused", lambda: (lambda o: o if cond(o, "Ready").get("reason") == "InvalidSpec"
                                                  else None)(pool_obj("broken")), 30)
        self.assertEqual(cond(obj, "Ready")["status"], "False")
        self.assertIn("spec.addressing.externalIPPool", cond(obj, "Ready")["message"])
        self.assertEqual(relay_pods("broken"), [])
        ev = kubectl("get", "-n", NS, "events", "-o", "json").stdout
        self.assertIn("InvalidSpec", ev)
        kubectl("delete", "-n", NS, "turnpool", "broken")

    def test_14_no_secret_in_pods_configmaps_status_events_or_logs(self):
        self.converged(3)
        texts = {"pods": kubectl("get", "-n", NS, "pods", "-o", "json").stdout,
                 "configmaps": kubectl("get", "-n", NS, "configmaps", "-o", "json").stdout,
                 "turnpools": kubectl("get", "-n", NS, "turnpools", "-o", "json").stdout,
                 "events": kubectl("get", "-A", "events", "-o", "json").stdout}
        for p in relay_pods():
            for c in ("coturn", "agent"):
                texts["log %s/%s" % (p["metadata"]["name"], c)] = kubectl("logs", "-n", NS, p["metadata"]["name"],
                                                                          "-c", c, check=False).stdout
        for name in os.listdir(TMP):
            if name.startswith("operator-") and name.endswith(".log"):
                texts[name] = open(os.path.join(TMP, name), errors="replace").read()
        cfg = kget("-n", NS, "secret", POOL + "-relay-config")
        cli = set()
        for v in cfg["data"].values():
            m = re.search(r"^cli-password=(\S+)$", base64.b64decode(v).decode(), re.M)
            if m:
                cli.add(m.group(1))
        self.assertTrue(cli)
        for what, text in texts.items():
            for s in [SECRET1, SECRET2] + sorted(cli):
                self.assertNotIn(s, text, "a secret in %s" % what)
                self.assertNotIn(base64.b64encode(s.encode()).decode(), text, "a secret (base64) in %s" % what)
        for p in OPERATORS.values():
            if p.poll() is None:
                for part in ("cmdline", "environ"):
                    data = open("/proc/%d/%s" % (p.pid, part), "rb").read().decode(errors="replace")
                    self.assertNotIn(SECRET1, data)
                    self.assertNotIn(SECRET2, data)

    def test_15_deleting_the_pool_removes_everything_it_owned(self):
        self.converged(3)
        kubectl("delete", "-n", NS, "turnpool", POOL)
        wait_for("the pool's pods, Secret and ConfigMap gone", lambda: not relay_pods() and
                 kubectl("get", "-n", NS, "secret", POOL + "-relay-config", check=False).returncode != 0 and
                 kubectl("get", "-n", NS, "configmap", POOL + "-turn-uris", check=False).returncode != 0, 90)
        for name in ("a", "b"):
            p = OPERATORS.get(name)
            if p and p.poll() is None:
                self.assertEqual(stop(p), 0, "operator-%s did not stop cleanly on SIGTERM" % name)
        self.assertIsNone(lease_holder() or None, "the lease was not released")


def tests_of(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from tests_of(t)
        else:
            yield t


def run(script, suite, failfast=True):
    """The main() of this suite and of the suites that reuse its helpers: BUILD_DIR COTURN_VERSION from
    argv, TF_E2E_ONLY=id1,id2 for the tests whose ids contain one of them, exit 0 only when all passed."""
    global BUILD, VERSION, OPERATOR, PROBE
    if len(sys.argv) < 3:
        sys.exit("usage: %s BUILD_DIR COTURN_VERSION" % script)
    BUILD, VERSION = os.path.abspath(sys.argv[1]), sys.argv[2]
    # TF_E2E_OPERATOR: the operator of another build (a sanitizer build's, say) against this build's relays
    OPERATOR = os.environ.get("TF_E2E_OPERATOR") or os.path.join(BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
    PROBE = os.path.join(BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    for f in (OPERATOR, PROBE):
        if not os.access(f, os.X_OK):
            sys.exit("missing %s" % f)
    only = os.environ.get("TF_E2E_ONLY")
    if only:
        suite = unittest.TestSuite([t for t in tests_of(suite) if any(k in t.id() for k in only.split(","))])
    r = unittest.TextTestRunner(verbosity=2, failfast=failfast).run(suite)
    sys.exit(0 if r.wasSuccessful() else 1)


def main():
    run("test_operator_e2e.py", unittest.TestLoader().loadTestsFromTestCase(OperatorE2E))


if __name__ == "__main__":
    main()
