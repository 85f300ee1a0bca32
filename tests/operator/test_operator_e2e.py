"""turnfleet-operator end to end on the Kubernetes stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_e2e.py BUILD_DIR COTURN_VERSION

One stand-in cluster (tests/kube/cluster.py) per run: API 127.0.0.240:16600,
control :16601, nodes n1-n3 on 127.0.0.241-243 (relay addresses), relays
3478 udp/tcp with ranges in 61000-61999, agents on :9700, coturn CLIs on
127.0.0.1 47800-47899, operator metrics 127.0.0.240:16610-16611. The CRD and
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
NS = "tfe2e"
POOL = "edge"
RIVAL = "rival"
SECRET1 = "e2e-first-secret-4c1d9a7f02b8"
SECRET2 = "e2e-second-secret-91ab3e6c55d0"
AGENT_IMAGE = "turnfleet/turnfleet:e2e"
METRICS = ["%s:%d" % (API_ADDR, 16610), "%s:%d" % (API_ADDR, 16611)]
DRAIN_S = 8
WRITES = ("POST", "PUT", "PATCH", "DELETE")

BUILD = VERSION = None
OPERATOR = PROBE = KUBECTL = None
TMP = CLUSTER = None
OPERATORS = {}   # name -> Popen


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
    log = open(os.path.join(TMP, "cluster.log"), "wb")
    CLUSTER = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    wait_for("the cluster", lambda: os.path.exists(os.path.join(d, "ready")) or CLUSTER.poll() is not None, 600)
    if CLUSTER.poll() is not None:
        raise AssertionError("cluster.py exited: %s" % open(os.path.join(TMP, "cluster.log")).read())
    kubectl("apply", "-f", os.path.join(SOURCE, "deploy", "crd"), "-f", os.path.join(SOURCE, "deploy", "rbac"))
    kubectl("create", "namespace", NS)
    token = kubectl("create", "token", "-n", "turnfleet-system", "turnfleet-operator", "--duration=2h").stdout.strip()
    kc = json.load(open(os.path.join(d, "kubeconfig")))
    kc["users"] = [{"name": "operator", "user": {"token": token}}]
    kc["contexts"][0]["context"]["user"] = "operator"
    with open(os.path.join(TMP, "operator.kubeconfig"), "w") as f:
        json.dump(kc, f)
    os.chmod(os.path.join(TMP, "operator.kubeconfig"), 0o600)


def tearDownModule():
    for p in OPERATORS.values():
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
            self.assertRegex(wide, r"%s\s+2/2\s+Running.*\s1/1\s*$" % p["metadata"]["name"] if False else
                             r"%s\s+2/2\s+Running" % p["metadata"]["name"])
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


def main():
    global BUILD, VERSION, OPERATOR, PROBE
    if len(sys.argv) < 3:
        sys.exit("usage: test_operator_e2e.py BUILD_DIR COTURN_VERSION")
    BUILD, VERSION = os.path.abspath(sys.argv[1]), sys.argv[2]
    OPERATOR = os.path.join(BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
    PROBE = os.path.join(BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    for f in (OPERATOR, PROBE):
        if not os.access(f, os.X_OK):
            sys.exit("missing %s" % f)
    suite = unittest.TestLoader().loadTestsFromTestCase(OperatorE2E)
    only = os.environ.get("TF_E2E_ONLY")
    if only:
        suite = unittest.TestSuite([t for t in suite if any(k in t.id() for k in only.split(","))])
    r = unittest.TextTestRunner(verbosity=2, failfast=True).run(suite)
    sys.exit(0 if r.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
