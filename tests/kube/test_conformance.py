"""Conformance of the Kubernetes API stand-in and the process kubelet, driven
only by real clients (every kubectl of tests/kube/clients.sh, and
python3-kubernetes) and by the documented control endpoint.

usage: /usr/bin/python3 tests/kube/test_conformance.py [TURNFLEET TURNFLEET_PROBE]

One cluster (tests/kube/cluster.py) serves the whole run: API 127.0.0.200:16443,
control :16444, nodes n1-n3 on 127.0.0.201-203, a pod on 127.0.0.204:16458,
webhooks on 127.0.0.205:16450-16457, the coturn 4.18 relay on 127.0.0.20x:62478
with relays 62100-62119; a second, SIGKILLed launcher on 127.0.0.206:16446-16447;
launchers with a network namespace per node on 127.0.17.200:37443-37444, nodes
127.0.17.1-2 and fd00:17::1-2, pods on 37100-37101.
Every process is stopped by its PID; the last test stops the cluster and checks
that it left no process behind. A client that is missing fails the run."""
import base64
import copy
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import proctree  # tests/kube/proctree.py, beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "testdata")
API_ADDR, API_PORT = "127.0.0.200", 16443
CONTROL = "http://%s:%d" % (API_ADDR, API_PORT + 1)
WEBHOOK_ADDR = "127.0.0.205"
NODES = [("n1", "127.0.0.201"), ("n2", "127.0.0.202"), ("n3", "127.0.0.203")]
TURNFLEET = TURNFLEET_PROBE = None
RELAY_LABEL = "turnfleet.hzmi.dev/relay-node"

CLUSTER = None   # the launcher's Popen
TMP = None
CLIENTS = {}     # name -> path


def wait_for(what, f, tries=200, delay=0.1):
    """Poll f until it returns something true; fail after `tries` polls."""
    for _ in range(tries):
        v = f()
        if v:
            return v
        time.sleep(delay)
    raise AssertionError("timed out waiting for %s" % what)


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


def start_cluster():
    global CLUSTER, TMP
    TMP = tempfile.mkdtemp(prefix="tf-kube-")
    os.chmod(TMP, 0o755)
    d = os.path.join(TMP, "cluster")
    cmd = [sys.executable, os.path.join(HERE, "cluster.py"), "--dir", d, "--address", API_ADDR, "--port", str(API_PORT),
           "--heartbeat", "1", "--node-grace", "3", "--restart-backoff", "1", "--shutdown-grace", "3",
           "--bookmark-interval", "1", "--history", "300"]
    for name, addr in NODES:
        cmd += ["--node", "%s=%s" % (name, addr), "--node-label", "%s:%s=true" % (name, RELAY_LABEL),
                "--node-annotation", "%s:turnfleet.hzmi.dev/relay-address=%s" % (name, addr)]
    if TURNFLEET:
        cmd += ["--build", os.path.dirname(os.path.dirname(os.path.dirname(TURNFLEET)))]
    cmd += ["--image", "registry.test/unstable:*=coturn-rootfs"]
    log = open(os.path.join(TMP, "cluster.log"), "wb")
    CLUSTER = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    try:
        wait_for("the cluster's ready marker", lambda: os.path.exists(os.path.join(d, "ready")) or CLUSTER.poll() is not None, 600)
    finally:
        if CLUSTER.poll() is not None:
            raise AssertionError("cluster.py exited: %s" % open(os.path.join(TMP, "cluster.log")).read())
    return d


def cluster_dir():
    return os.path.join(TMP, "cluster")


def kubeconfig():
    return os.path.join(cluster_dir(), "kubeconfig")


def setUpModule():
    global CLIENTS
    p = subprocess.run([os.path.join(HERE, "clients.sh")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise AssertionError("tests/kube/clients.sh failed: %s" % p.stderr)
    for line in p.stdout.splitlines():
        name, path = line.split(" ", 1)
        CLIENTS[name] = path
    for need in ("kubectl-1.20", "kubectl-rootfs"):
        if need not in CLIENTS:
            raise AssertionError("client %s missing" % need)
    start_cluster()


def tearDownModule():
    if CLUSTER is not None and CLUSTER.poll() is None:
        CLUSTER.send_signal(signal.SIGTERM)
        try:
            CLUSTER.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(CLUSTER.pid, signal.SIGKILL)
            CLUSTER.wait()
    if TMP and os.environ.get("TF_KUBE_KEEP") != "1":
        shutil.rmtree(TMP, ignore_errors=True)


def holds(tc, have, want, where):
    """have carries every field of want (lists element by element); it may have more (defaults)."""
    if isinstance(want, dict):
        tc.assertIsInstance(have, dict, where)
        for k, v in want.items():
            holds(tc, have.get(k), v, where + "." + k)
    elif isinstance(want, list):
        tc.assertEqual(len(have or []), len(want), where)
        for i, (h, w) in enumerate(zip(have, want)):
            holds(tc, h, w, "%s[%d]" % (where, i))
    else:
        tc.assertEqual(have, want, where)


# ---- python3-kubernetes ----------------------------------------------------

def py_client(token=None):
    # python3-kubernetes (Debian): missing is an error of the run, never a skip
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig(), client_configuration=cfg)
    if token:
        cfg.api_key = {"authorization": "Bearer " + token}
    cfg.retries = False
    return client.ApiClient(cfg)


def py_set_status(ns, name, status):
    from kubernetes import client
    api = client.CustomObjectsApi(py_client())
    return api.patch_namespaced_custom_object_status("turnfleet.hzmi.dev", "v1alpha1", ns, "turnpools", name, {"status": status})


def py_pod_condition(ns, name, cond):
    from kubernetes import client
    v1 = client.CoreV1Api(py_client())
    pod = v1.read_namespaced_pod(name, ns)
    conds = [c.to_dict() for c in pod.status.conditions or []]
    conds = [c for c in conds if c["type"] != cond["type"]] + [cond]
    body = {"status": {"conditions": [{k: v for k, v in c.items() if v is not None and k in ("type", "status", "reason", "message", "last_transition_time")} for c in conds]}}
    for c in body["status"]["conditions"]:
        if "last_transition_time" in c:
            c["lastTransitionTime"] = c.pop("last_transition_time")
            if not isinstance(c["lastTransitionTime"], str):
                c["lastTransitionTime"] = c["lastTransitionTime"].strftime("%Y-%m-%dT%H:%M:%SZ")
    return v1.patch_namespaced_pod_status(name, ns, body)


def py_token(ns, sa):
    from kubernetes import client
    v1 = client.CoreV1Api(py_client())
    tr = v1.create_namespaced_service_account_token(sa, ns, {"spec": {"audiences": [], "expirationSeconds": 3600}})
    return tr.status.token


# ---- the webhook server the tests run --------------------------------------

def make_cert(d, ip):
    def run(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", d + "/wca.key", "-out", d + "/wca.crt", "-days", "2", "-subj", "/CN=webhook-ca",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", d + "/wh.key", "-out", d + "/wh.csr", "-subj", "/CN=webhook")
    with open(d + "/wh.ext", "w") as f:
        f.write("subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n" % ip)
    run("openssl", "x509", "-req", "-in", d + "/wh.csr", "-CA", d + "/wca.crt", "-CAkey", d + "/wca.key",
        "-CAcreateserial", "-out", d + "/wh.crt", "-days", "2", "-extfile", d + "/wh.ext")
    return d + "/wca.crt", d + "/wh.crt", d + "/wh.key"


class _WH(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        self.server.seen.append((self.path, req))
        obj = req.get("object") or {}
        labels = (obj.get("metadata") or {}).get("labels") or {}
        resp = {"uid": req["uid"], "allowed": True}
        if self.path.startswith("/slow"):
            time.sleep(2)
        if self.path.startswith("/validate"):
            resp["warnings"] = ["validated by the test webhook"]
            if labels.get("deny") == "yes":
                resp = {"uid": req["uid"], "allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "label deny=yes is not allowed"}}
        elif self.path.startswith("/mutate"):
            ops = [{"op": "add", "path": "/metadata/labels", "value": {}}] if not labels else []
            ops.append({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def start_webhook(port, d):
    ca, crt, key = make_cert(d, WEBHOOK_ADDR)
    srv = http.server.ThreadingHTTPServer((WEBHOOK_ADDR, port), _WH)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.seen = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, open(ca, "rb").read()


# ---- kubectl, every version ------------------------------------------------

class KubectlCase(unittest.TestCase):
    CLIENT = None   # key of CLIENTS
    SHORT = None
    WEBHOOK_PORT = None

    @classmethod
    def setUpClass(cls):
        if cls.CLIENT not in CLIENTS:
            raise AssertionError("client %s is missing (see tests/kube/clients.sh)" % cls.CLIENT)
        cls.kubectl = CLIENTS[cls.CLIENT]
        cls.home = tempfile.mkdtemp(prefix="kc-", dir=TMP)

    def k(self, *args, check=True, input=None, token=None, ns=None, timeout=60):
        cmd = [self.kubectl, "--kubeconfig", kubeconfig(), "--cache-dir", os.path.join(self.home, "cache")]
        if token:
            cmd += ["--token", token]
        if ns:
            cmd += ["-n", ns]
        cmd += list(args)
        env = dict(os.environ, HOME=self.home, KUBECONFIG=kubeconfig())
        p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=timeout)
        if check and p.returncode != 0:
            self.fail("%s failed (%d): %s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p

    def kpopen(self, *args, ns=None):
        cmd = [self.kubectl, "--kubeconfig", kubeconfig(), "--cache-dir", os.path.join(self.home, "cache")]
        if ns:
            cmd += ["-n", ns]
        cmd += list(args)
        env = dict(os.environ, HOME=self.home)
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)

    def ns(self, tag):
        name = "%s-%s" % (self.SHORT, tag)
        self.k("create", "namespace", name)
        return name

    def jp(self, ns, what, path):
        return self.k("get", what, "-o", "jsonpath=" + path, ns=ns).stdout

    def apply_crd(self):
        self.k("apply", "-f", os.path.join(DATA, "crd.yaml"))
        self.k("wait", "--for=condition=established", "--timeout=20s", "crd/turnpools.turnfleet.hzmi.dev")

    def pool(self, ns, name="demo", replicas=2, finalizers=None):
        obj = {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
               "metadata": {"name": name}, "spec": {"replicas": replicas, "minReplicas": 1}}
        if finalizers:
            obj["metadata"]["finalizers"] = finalizers
        return self.k("apply", "-f", "-", input=json.dumps(obj), ns=ns)

    # -- the tests
    EXPECT = {"kubectl-1.20": lambda m: m == 20, "kubectl-host": lambda m: m == 32, "kubectl-rootfs": lambda m: m > 32}

    def test_client_identity(self):
        """The client is the version it claims: its own version and what the server saw."""
        seq = last_seq()
        self.k("get", "namespace", "default")
        agents = {r["userAgent"] for r in requests_since(seq) if r["path"] == "/api/v1/namespaces/default"}
        self.assertEqual(len(agents), 1, agents)
        agent = agents.pop()
        self.assertRegex(agent, r"^kubectl/v1\.\d+\.\d+")
        minor = int(agent.split("/v1.")[1].split(".")[0])
        self.assertTrue(self.EXPECT[self.CLIENT](minor), agent)
        sys.stderr.write("[%s: %s] " % (self.CLIENT, agent.split()[0]))

    def test_crd_and_custom_resource(self):
        self.apply_crd()
        ns = self.ns("crd")
        out = self.pool(ns).stdout
        self.assertIn("turnpool.turnfleet.hzmi.dev/demo created", out)
        table = self.k("get", "turnpools", ns=ns).stdout.splitlines()
        self.assertEqual(table[0].split(), ["NAME", "DESIRED", "READY", "STATUS", "AGE"])
        self.assertEqual(table[1].split()[:2], ["demo", "2"])
        obj = json.loads(self.k("get", "tp", "demo", "-o", "json", ns=ns).stdout)
        self.assertEqual(obj["spec"]["realm"], "turn.test")          # schema default
        self.assertEqual(obj["metadata"]["generation"], 1)
        self.assertIn("mode: HostIP", self.k("get", "tp", "demo", "-o", "yaml", ns=ns).stdout)
        self.assertEqual(self.jp(ns, "tp/demo", "{.spec.mode}"), "HostIP")
        self.assertIn("unchanged", self.pool(ns).stdout)
        self.assertIn(ns, self.k("get", "tp", "-A").stdout)
        p = self.k("patch", "tp", "demo", "--type", "merge", "-p", '{"spec":{"replicas":99}}', ns=ns, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('The TURNPool "demo" is invalid: spec.replicas: Invalid value: 99: spec.replicas in body should be less than or equal to 16', p.stderr)
        p = self.k("patch", "tp", "demo", "--type", "merge", "-p", '{"spec":{"minReplicas":5}}', ns=ns, check=False)
        self.assertIn('spec: Invalid value: "object": spec.minReplicas must be <= spec.replicas', p.stderr)
        p = self.k("patch", "tp", "demo", "--type", "merge", "-p", '{"spec":{"realm":"other.test"}}', ns=ns, check=False)
        self.assertIn("realm is immutable", p.stderr)
        p = self.k("patch", "tp", "demo", "--type", "merge", "-p", '{"spec":{"bogus":1}}', ns=ns, check=False)
        self.assertIn('unknown field "spec.bogus"', p.stderr)
        self.assertNotIn("bogus", self.k("get", "tp", "demo", "-o", "json", ns=ns).stdout)   # pruned
        bogus = {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "metadata": {"name": "strict"}, "spec": {"replicas": 1, "bogus": 1}}
        p = self.k("apply", "-f", "-", input=json.dumps(bogus), ns=ns, check=False)
        if self.CLIENT == "kubectl-1.20":        # no fieldValidation: Warn, pruned
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn('Warning: unknown field "spec.bogus"', p.stderr)
            self.assertEqual(json.loads(self.jp(ns, "tp/strict", "{.spec}")).get("bogus"), None)
        else:                                    # fieldValidation=Strict
            self.assertNotEqual(p.returncode, 0)
            self.assertIn('TURNPool in version "v1alpha1" cannot be handled as a TURNPool: strict decoding error: unknown field "spec.bogus"', p.stderr)
        # server-side apply over the client-side applied object, same values: no conflict
        self.assertIn("turnpool.turnfleet.hzmi.dev/demo serverside-applied",
                      self.k("apply", "--server-side", "-f", os.path.join(DATA, "pool.yaml"), ns=ns).stdout)
        mf = json.loads(self.k("get", "tp", "demo", "-o", "json", "--show-managed-fields", ns=ns, check=False).stdout or
                        self.k("get", "tp", "demo", "-o", "json", ns=ns).stdout)["metadata"]["managedFields"]
        if self.CLIENT == "kubectl-1.20":
            self.assertEqual({(e["manager"], e["operation"]) for e in mf}, {("kubectl-client-side-apply", "Update"), ("kubectl", "Apply")})
        else:       # 1.26+ move the client-side apply's fields to their Apply managers (a JSON patch of managedFields)
            self.assertEqual({(e["manager"], e["operation"]) for e in mf}, {("kubectl-last-applied", "Apply"), ("kubectl", "Apply")})
        self.assertEqual(sorted([e for e in mf if e["operation"] == "Apply"][0]["fieldsV1"]["f:spec"]), ["f:minReplicas", "f:replicas"])
        p = self.k("patch", "tp", "demo", "-p", '{"spec":{"replicas":1}}', ns=ns, check=False)   # strategic
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the body of the request was in an unknown format - accepted media types include: "
                      "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml", p.stderr)

    def test_get_watch(self):
        ns = self.ns("watch")
        w = self.kpopen("get", "configmaps", "-w", ns=ns)
        lines = []
        t = threading.Thread(target=lambda: [lines.append(l) for l in w.stdout])
        t.start()
        try:
            wait_for("the initial list", lambda: any("kube-root-ca.crt" in l for l in lines))
            self.k("create", "configmap", "w1", "--from-literal=a=1", ns=ns)
            wait_for("ADDED w1", lambda: any(l.startswith("w1 ") for l in lines))
            self.k("patch", "configmap", "w1", "-p", '{"data":{"a":"2","b":"3"}}', ns=ns)
            wait_for("MODIFIED w1", lambda: [l.split()[1] for l in lines if l.startswith("w1 ")][-1:] == ["2"])
        finally:
            w.terminate()
            w.wait()
            t.join()
            w.stdout.close()
            w.stderr.close()
        rows = [l.split() for l in lines if l.startswith("w1 ")]
        self.assertEqual([r[1] for r in rows], ["1", "2"])

    def test_wait_for_condition_and_scale(self):
        self.apply_crd()
        ns = self.ns("wait")
        self.pool(ns)
        w = self.kpopen("wait", "--for=condition=Ready", "--timeout=30s", "tp/demo", ns=ns)
        try:
            time.sleep(0.3)
            py_set_status(ns, "demo", {"replicas": 2, "readyRelays": 2, "selector": "turnfleet.hzmi.dev/pool=demo",
                                       "conditions": [{"type": "Ready", "status": "True", "reason": "RelaysReady", "message": "2/2", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
            out, err = w.communicate(timeout=40)
        finally:
            if w.poll() is None:
                w.kill()
                w.communicate()
        self.assertEqual(w.returncode, 0, err)
        self.assertIn("condition met", out)
        self.assertEqual(self.jp(ns, "tp/demo", "{.metadata.generation}"), "1")   # /status never bumps it
        self.assertIn("scaled", self.k("scale", "tp/demo", "--replicas=3", ns=ns).stdout)
        self.assertEqual(self.jp(ns, "tp/demo", "{.spec.replicas} {.metadata.generation}"), "3 2")
        scale = json.loads(self.k("get", "--raw", "/apis/turnfleet.hzmi.dev/v1alpha1/namespaces/%s/turnpools/demo/scale" % ns).stdout)
        self.assertEqual((scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]), ("Scale", 3, "turnfleet.hzmi.dev/pool=demo"))
        self.assertEqual(self.k("get", "tp", "demo", ns=ns).stdout.splitlines()[1].split()[:4], ["demo", "3", "2", "True"])
        p = self.k("scale", "tp/demo", "--replicas=17", ns=ns, check=False)
        self.assertIn("should be less than or equal to 16", p.stderr)

    def test_patch_merge_and_json(self):
        self.apply_crd()
        ns = self.ns("patch")
        self.pool(ns)
        rv = self.jp(ns, "tp/demo", "{.metadata.resourceVersion}")
        self.assertIn("patched", self.k("patch", "tp", "demo", "--type", "merge", "-p", '{"spec":{"replicas":4}}', ns=ns).stdout)
        self.assertIn("(no change)", self.k("patch", "tp", "demo", "--type", "merge", "-p", '{"spec":{"replicas":4}}', ns=ns).stdout)
        rv2 = self.jp(ns, "tp/demo", "{.metadata.resourceVersion}")
        self.assertNotEqual(rv, rv2)
        self.k("patch", "tp", "demo", "--type", "json", "-p", '[{"op":"test","path":"/spec/replicas","value":4},{"op":"replace","path":"/spec/replicas","value":5}]', ns=ns)
        self.assertEqual(self.jp(ns, "tp/demo", "{.spec.replicas}"), "5")
        p = self.k("patch", "tp", "demo", "--type", "json", "-p", '[{"op":"test","path":"/spec/replicas","value":4}]', ns=ns, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("testing value /spec/replicas failed", p.stderr)
        self.k("create", "configmap", "c", "--from-literal=a=1", ns=ns)
        self.k("patch", "configmap", "c", "-p", '{"data":{"b":"2"}}', ns=ns)    # strategic merge on a built-in
        self.assertEqual(self.jp(ns, "cm/c", "{.data.a}{.data.b}"), "12")
        self.assertEqual(self.jp(ns, "tp/demo", "{.metadata.resourceVersion}") == rv2, False)

    def test_create_secret_generic_and_describe(self):
        self.apply_crd()
        ns = self.ns("secret")
        self.assertIn("secret/s created", self.k("create", "secret", "generic", "s", "--from-literal=user=alice", "--from-literal=pw=hunter2", ns=ns).stdout)
        self.assertEqual(base64.b64decode(self.jp(ns, "secret/s", "{.data.user}")).decode(), "alice")
        row = self.k("get", "secrets", ns=ns).stdout.splitlines()[1].split()
        self.assertEqual(row[:3], ["s", "Opaque", "2"])
        p = self.k("create", "secret", "generic", "s", "--from-literal=a=b", ns=ns, check=False)
        self.assertIn('secrets "s" already exists', p.stderr)
        self.pool(ns)
        uid = self.jp(ns, "tp/demo", "{.metadata.uid}")
        ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "demo.17c3a5b2f0e1d2c3"},
              "involvedObject": {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "name": "demo", "namespace": ns, "uid": uid},
              "reason": "RelayCreated", "message": "created pod demo-relay-x7k2q on node n1", "type": "Normal",
              "source": {"component": "turnfleet-operator"}, "count": 1,
              "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"}
        self.k("create", "-f", "-", input=json.dumps(ev), ns=ns)
        d = self.k("describe", "tp", "demo", ns=ns).stdout
        self.assertIn("RelayCreated", d)
        self.assertIn("created pod demo-relay-x7k2q on node n1", d)
        self.assertIn("Replicas:", d)
        ev_rows = self.k("get", "events", ns=ns).stdout
        self.assertIn("turnpool/demo", ev_rows)

    def test_delete_finalizers_and_gc(self):
        self.apply_crd()
        ns = self.ns("gc")
        self.pool(ns, "demo", finalizers=["test.turnfleet.hzmi.dev/hold"])
        uid = self.jp(ns, "tp/demo", "{.metadata.uid}")
        dep = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dep", "ownerReferences": [
            {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "name": "demo", "uid": uid, "controller": True}]}, "data": {"a": "1"}}
        self.k("apply", "-f", "-", input=json.dumps(dep), ns=ns)
        self.k("delete", "tp", "demo", "--wait=false", ns=ns)
        self.assertNotEqual(self.jp(ns, "tp/demo", "{.metadata.deletionTimestamp}"), "")
        self.assertEqual(self.jp(ns, "cm/dep", "{.metadata.name}"), "dep")
        p = self.k("patch", "tp", "demo", "--type", "json", "-p", '[{"op":"add","path":"/metadata/finalizers/-","value":"x.test/new"}]', ns=ns, check=False)
        self.assertIn("no new finalizers can be added if the object is being deleted", p.stderr)
        self.k("patch", "tp", "demo", "--type", "json", "-p", '[{"op":"remove","path":"/metadata/finalizers/0"}]', ns=ns)
        self.k("wait", "--for=delete", "--timeout=20s", "tp/demo", ns=ns, check=False)
        self.assertIn("NotFound", self.k("get", "tp", "demo", ns=ns, check=False).stderr)
        self.k("wait", "--for=delete", "--timeout=20s", "cm/dep", ns=ns, check=False)
        self.assertIn("NotFound", self.k("get", "cm", "dep", ns=ns, check=False).stderr)
        # foreground: the owner waits for its blocking dependent
        self.pool(ns, "fg")
        uid = self.jp(ns, "tp/fg", "{.metadata.uid}")
        dep["metadata"] = {"name": "dep2", "finalizers": ["test.turnfleet.hzmi.dev/hold"], "ownerReferences": [
            {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "name": "fg", "uid": uid, "blockOwnerDeletion": True}]}
        self.k("apply", "-f", "-", input=json.dumps(dep), ns=ns)
        self.k("delete", "tp", "fg", "--cascade=foreground", "--wait=false", ns=ns)
        self.assertIn("foregroundDeletion", self.jp(ns, "tp/fg", "{.metadata.finalizers}"))
        wait_for("the dependent marked for deletion", lambda: self.jp(ns, "cm/dep2", "{.metadata.deletionTimestamp}"))
        self.assertEqual(self.jp(ns, "tp/fg", "{.metadata.name}"), "fg")
        self.k("patch", "cm", "dep2", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}', ns=ns)
        self.k("wait", "--for=delete", "--timeout=20s", "tp/fg", ns=ns, check=False)
        self.assertIn("NotFound", self.k("get", "tp", "fg", ns=ns, check=False).stderr)

    def test_apply_kustomize(self):
        ns = self.ns("kust")
        d = tempfile.mkdtemp(dir=self.home)
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            f.write("namespace: %s\nresources:\n- cm.yaml\nconfigMapGenerator:\n- name: gen\n  literals:\n  - mode=test\n" % ns)
        with open(os.path.join(d, "cm.yaml"), "w") as f:
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n")
        out = self.k("apply", "-k", d).stdout
        self.assertIn("configmap/plain created", out)
        self.assertRegex(out, r"configmap/gen-[a-z0-9]+ created")
        names = self.k("get", "configmaps", "-o", "name", ns=ns).stdout.split()
        self.assertIn("configmap/plain", names)
        self.assertTrue(any(n.startswith("configmap/gen-") for n in names), names)
        self.assertIn("unchanged", self.k("apply", "-k", d).stdout)

    def test_deployments_jobs_and_cronjobs(self):
        ns = self.ns("work")
        tmpl = {"metadata": {"labels": {"app": "w"}},
                "spec": {"terminationGracePeriodSeconds": 1, "nodeSelector": {RELAY_LABEL: "true"},
                         "containers": [{"name": "c", "image": "debian:bookworm", "command": ["sleep", "600"],
                                         "env": [{"name": "V", "value": "1"}],
                                         "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}]}}
        dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": tmpl}}
        self.k("apply", "-f", "-", input=json.dumps(dep), ns=ns)
        self.k("rollout", "status", "deployment/w", "--timeout=40s", ns=ns)

        def pods():
            out = json.loads(self.k("get", "pods", "-l", "app=w", "-o", "json", ns=ns).stdout)["items"]
            return [p for p in out if not p["metadata"].get("deletionTimestamp")]
        first = pods()
        self.assertEqual(len(first), 2)
        self.assertEqual(len({p["spec"]["nodeName"] for p in first}), 2, "spread over two nodes")
        for p in first:
            self.assertEqual(p["metadata"]["ownerReferences"][0]["kind"], "Deployment")
            self.assertTrue(p["metadata"]["name"].startswith("w-" + p["metadata"]["labels"]["pod-template-hash"] + "-"))
        self.assertIn("2/2", self.k("get", "deployment", "w", ns=ns).stdout)
        # a deleted pod is replaced
        self.k("delete", "pod", first[0]["metadata"]["name"], "--wait=false", ns=ns)
        wait_for("a replacement pod", lambda: len([p for p in pods() if p["metadata"]["name"] != first[0]["metadata"]["name"]]) == 2, 300)
        # a template change replaces the pods (new pod-template-hash)
        tmpl["spec"]["containers"][0]["env"][0]["value"] = "2"
        self.k("apply", "-f", "-", input=json.dumps(dep), ns=ns)
        wait_for("the new template's pods", lambda: (ps := pods()) and len(ps) == 2 and all(
            p["metadata"]["labels"]["pod-template-hash"] != first[1]["metadata"]["labels"]["pod-template-hash"] for p in ps), 300)
        self.k("rollout", "status", "deployment/w", "--timeout=40s", ns=ns)
        # the garbage collector takes the pods with the deployment
        self.k("delete", "deployment", "w", ns=ns)
        wait_for("no pod left", lambda: not json.loads(self.k("get", "pods", "-o", "json", ns=ns).stdout)["items"], 300)

        # Jobs: to completion, or Failed past the backoff limit; a CronJob's Job started by hand
        def job(name, cmd, backoff=6):
            return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                    "spec": {"backoffLimit": backoff, "template": {"spec": {
                        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "c", "image": "debian:bookworm", "command": cmd}]}}}}
        self.k("apply", "-f", "-", input=json.dumps(job("ok", ["sh", "-c", "echo done"])), ns=ns)
        self.k("apply", "-f", "-", input=json.dumps(job("bad", ["false"], backoff=1)), ns=ns)
        self.k("wait", "--for=condition=complete", "--timeout=40s", "job/ok", ns=ns)
        self.k("wait", "--for=condition=failed", "--timeout=40s", "job/bad", ns=ns)
        self.assertEqual(self.jp(ns, "job/bad", "{.status.failed}"), "2")
        self.assertEqual(self.k("logs", "job/ok", ns=ns).stdout, "done\n")
        cj = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
              "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": job("x", ["true"])["spec"]}}}
        self.k("apply", "-f", "-", input=json.dumps(cj), ns=ns)
        if self.CLIENT == "kubectl-1.20":
            # kubectl 1.20 knows only batch/v1beta1 CronJobs: start the Job as `create job --from` does
            j = job("cj-manual", ["true"])
            j["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "cj",
                                                 "uid": self.jp(ns, "cronjob/cj", "{.metadata.uid}"), "controller": True}]
            self.k("create", "-f", "-", input=json.dumps(j), ns=ns)
        else:
            self.k("create", "job", "--from=cronjob/cj", "cj-manual", ns=ns)    # a protobuf body
            self.assertEqual(self.jp(ns, "job/cj-manual", "{.metadata.ownerReferences[0].kind}"), "CronJob")
        self.k("wait", "--for=condition=complete", "--timeout=40s", "job/cj-manual", ns=ns)
        self.assertIn("*/5 * * * *", self.k("get", "cronjobs", ns=ns).stdout)

    def test_typed_creates_protobuf_bodies(self):
        """Every typed `kubectl create` the stand-in serves: what the server stored (a server-side dry run,
        then the real create) holds every field of the client's own rendering of the object; 1.32+ send
        these bodies as protobuf, and the objects work (the RoleBinding grants, the Job runs)."""
        ns = self.ns("pb")
        cr = self.SHORT + "-pb"
        cmds = [["role", "r", "--verb=get,list", "--resource=pods,configmaps", "--resource-name=x"],
                ["clusterrole", cr, "--verb=get", "--resource=pods", "--non-resource-url=/healthz"],
                ["rolebinding", "rb", "--clusterrole=" + cr, "--user=bob", "--serviceaccount=%s:default" % ns, "--group=g"],
                ["clusterrolebinding", cr, "--clusterrole=" + cr, "--group=g"],
                ["deployment", "d", "--image=debian:bookworm", "--replicas=0", "--port=80", "--", "sleep", "1"],
                ["job", "j", "--image=debian:bookworm", "--", "true"],
                ["service", "nodeport", "s", "--tcp=80:8080,443:8443"],
                ["secret", "generic", "sec", "--from-literal=a=b", "--type=x/y"],
                ["configmap", "cm", "--from-literal=a=b"],
                ["serviceaccount", "sa"]]
        if self.CLIENT != "kubectl-1.20":          # 1.20 writes CronJobs as batch/v1beta1
            cmds += [["cronjob", "cj", "--image=debian:bookworm", "--schedule=*/5 * * * *", "--restart=Never", "--", "sh", "-c", "echo from-cron"]]

        def flags(c, f):
            i = c.index("--") if "--" in c else len(c)
            return ["create"] + c[:i] + f + c[i:]

        seq = last_seq()
        for c in cmds:
            want = json.loads(self.k(*flags(c, ["--dry-run=client", "-o", "json"]), ns=ns).stdout)
            want["metadata"].pop("creationTimestamp", None)
            want.pop("status", None)
            if self.CLIENT != "kubectl-1.20":      # 1.20 finds no dry-run support in the minimal OpenAPI v2
                holds(self, json.loads(self.k(*flags(c, ["--dry-run=server", "-o", "json"]), ns=ns).stdout), want, c[0] + " (dry run)")
            holds(self, json.loads(self.k(*flags(c, ["-o", "json"]), ns=ns).stdout), want, c[0])   # not stored by the dry run
        posts = [r for r in requests_since(seq) if r["method"] == "POST" and r["userAgent"].startswith("kubectl/")]
        self.assertEqual(len(posts), (1 if self.CLIENT == "kubectl-1.20" else 2) * len(cmds))
        self.assertTrue(all(r["code"] == 201 for r in posts), posts)
        pb = {r["contentType"] == "application/vnd.kubernetes.protobuf" for r in posts}
        self.assertEqual(pb, {self.CLIENT != "kubectl-1.20"})
        # strategic merge: a Service's ports merge by port
        self.k("patch", "service", "s", "-p", '{"spec":{"ports":[{"port":443,"targetPort":9443}]}}', ns=ns)
        self.assertEqual(self.jp(ns, "service/s", "{.spec.ports[*].name} {.spec.ports[*].targetPort}"), "80-8080 443-8443 8080 9443")
        tok = py_token(ns, "default")           # bound by the RoleBinding to the ClusterRole's `get pods`
        self.assertEqual(self.k("auth", "can-i", "get", "pods", token=tok, ns=ns, check=False).stdout.strip(), "yes")
        self.assertEqual(self.k("auth", "can-i", "list", "pods", token=tok, ns=ns, check=False).stdout.strip(), "no")
        if self.CLIENT != "kubectl-1.20":
            # the Job kubectl builds from the CronJob, as protobuf, runs to completion
            self.assertIn("job.batch/m created", self.k("create", "job", "--from=cronjob/cj", "m", ns=ns).stdout)
            self.assertEqual(json.loads(self.k("get", "job", "m", "-o", "json", ns=ns).stdout)["metadata"]["ownerReferences"][0]["kind"], "CronJob")
            self.k("wait", "--for=condition=complete", "--timeout=40s", "job/m", ns=ns)
            self.assertEqual(self.k("logs", "job/m", ns=ns).stdout, "from-cron\n")
        self.k("delete", "clusterrole,clusterrolebinding", cr)

    def test_explain_autoscale_and_hpa_sample(self):
        """`kubectl explain` from the CRD's OpenAPI v3 schema (kubectl 1.32+); `kubectl autoscale turnpool` and
        deploy/samples/hpa.yaml stored as autoscaling/v2, served as v1 too."""
        self.apply_crd()
        ns = self.ns("hpa")
        self.pool(ns, "edge")
        crd = json.loads(self.k("get", "crd", "turnpools.turnfleet.hzmi.dev", "-o", "json").stdout)
        spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        if self.CLIENT != "kubectl-1.20":          # 1.20 explains from OpenAPI v2, which has no schemas here
            out = self.k("explain", "turnpool.spec").stdout
            self.assertRegex(out, r"KIND:\s+TURNPool\n")
            self.assertRegex(out, r"FIELD: spec <Object>")
            fields = dict(re.findall(r"^  (\w+)\t<([^>]+)>", out, re.M))
            self.assertEqual(sorted(fields), sorted(spec_schema["properties"]))
            for n, t in fields.items():      # explain's names of the schema's types
                typ = spec_schema["properties"][n]["type"]
                self.assertTrue(t.startswith("[]") if typ == "array" else t == {"object": "Object"}.get(typ, typ), (n, t, typ))
            out = self.k("explain", "turnpool.spec.replicas").stdout
            self.assertRegex(out, r"FIELD: replicas <integer>")
        # kubectl autoscale: through the TURNPool's scale subresource in discovery
        self.assertIn("horizontalpodautoscaler.autoscaling/edge-cpu autoscaled",
                      self.k("autoscale", "turnpool", "edge", "--name=edge-cpu", "--min=1", "--max=4", "--cpu-percent=70", ns=ns).stdout)
        base = "/apis/autoscaling/%s/namespaces/" + ns + "/horizontalpodautoscalers/edge-cpu"
        v1 = json.loads(self.k("get", "--raw", base % "v1").stdout)
        v2 = json.loads(self.k("get", "--raw", base % "v2").stdout)
        self.assertEqual((v1["apiVersion"], v1["spec"]["targetCPUUtilizationPercentage"], v1["spec"]["maxReplicas"]), ("autoscaling/v1", 70, 4))
        self.assertEqual(v2["spec"]["metrics"], [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}])
        self.assertEqual(v2["spec"]["scaleTargetRef"], {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "name": "edge"})
        # the HPA sample as shipped (in this test's namespace)
        sample = open(os.path.join(SOURCE, "deploy", "samples", "hpa.yaml")).read()
        self.assertIn("\n  namespace: turn\n", sample)
        sample = sample.replace("\n  namespace: turn\n", "\n  namespace: %s\n" % ns)
        self.assertIn("horizontalpodautoscaler.autoscaling/edge created", self.k("apply", "-f", "-", input=sample).stdout)
        want = json.loads(self.k("create", "--dry-run=client", "-o", "json", "-f", "-", input=sample).stdout)
        got = json.loads(self.k("get", "--raw", "/apis/autoscaling/v2/namespaces/%s/horizontalpodautoscalers/edge" % ns).stdout)
        holds(self, got["spec"], want["spec"], "spec")
        self.assertIn("unchanged", self.k("apply", "-f", "-", input=sample).stdout)
        rows = {l.split()[0]: l.split()[1:6] for l in self.k("get", "hpa", ns=ns).stdout.splitlines()[1:]}
        self.assertEqual(rows, {"edge": ["TURNPool/edge", "<unknown>/11500", "2", "12", "0"],
                                "edge-cpu": ["TURNPool/edge", "cpu:", "<unknown>/70%", "1", "4"]})

    def test_rbac_forbidden(self):
        ns = self.ns("rbac")
        self.k("create", "serviceaccount", "reader", ns=ns)
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-reader"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}
        rb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reader"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
              "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]}
        self.k("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, rb]}), ns=ns)
        if self.CLIENT == "kubectl-1.20":      # no `kubectl create token` before 1.24
            tok = py_token(ns, "reader")
        else:
            tok = self.k("create", "token", "reader", "--duration=20m", ns=ns).stdout.strip()
        self.assertIn("kube-root-ca.crt", self.k("get", "configmaps", token=tok, ns=ns).stdout)
        self.assertEqual(self.k("auth", "can-i", "list", "configmaps", token=tok, ns=ns).stdout.strip(), "yes")
        p = self.k("auth", "can-i", "list", "secrets", token=tok, ns=ns, check=False)
        self.assertEqual((p.returncode, p.stdout.strip()), (1, "no"))
        p = self.k("get", "secrets", token=tok, ns=ns, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:%s:reader" cannot list resource "secrets" in API group "" in the namespace "%s"' % (ns, ns), p.stderr)
        p = self.k("delete", "configmap", "kube-root-ca.crt", token=tok, ns=ns, check=False)
        self.assertIn('configmaps "kube-root-ca.crt" is forbidden: User "system:serviceaccount:%s:reader" cannot delete resource "configmaps"' % ns, p.stderr)

    def test_webhooks(self):
        ns = self.ns("hook")
        srv, ca = start_webhook(self.WEBHOOK_PORT, tempfile.mkdtemp(dir=self.home))
        try:
            base = "https://%s:%d" % (WEBHOOK_ADDR, self.WEBHOOK_PORT)
            sel = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
            rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
            cab = base64.b64encode(ca).decode()
            cfgs = {"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": ns + "-m"},
                 "webhooks": [{"name": "mutate.turnfleet.test", "clientConfig": {"url": base + "/mutate", "caBundle": cab}, "rules": rules,
                               "namespaceSelector": sel, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5}]},
                {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": ns + "-v"},
                 "webhooks": [{"name": "deny.turnfleet.test", "clientConfig": {"url": base + "/validate", "caBundle": cab}, "rules": rules,
                               "namespaceSelector": sel, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5},
                              {"name": "down.turnfleet.test", "clientConfig": {"url": "https://%s:%d/x" % (WEBHOOK_ADDR, self.WEBHOOK_PORT + 5), "caBundle": cab},
                               "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}],
                               "namespaceSelector": sel, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 2,
                               "failurePolicy": "Fail"},
                              {"name": "down-ignored.turnfleet.test", "clientConfig": {"url": "https://%s:%d/x" % (WEBHOOK_ADDR, self.WEBHOOK_PORT + 5), "caBundle": cab},
                               "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["serviceaccounts"]}],
                               "namespaceSelector": sel, "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore"},
                              {"name": "slow.turnfleet.test", "clientConfig": {"url": base + "/slow", "caBundle": cab},
                               "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                               "namespaceSelector": sel, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 1}]}]}
            self.k("apply", "-f", "-", input=json.dumps(cfgs))
            p = self.k("create", "configmap", "ok", "--from-literal=a=1", ns=ns)
            self.assertIn("Warning: validated by the test webhook", p.stderr)
            self.assertEqual(self.jp(ns, "cm/ok", "{.metadata.labels.mutated}"), "yes")
            bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad", "labels": {"deny": "yes"}}}
            p = self.k("apply", "-f", "-", input=json.dumps(bad), ns=ns, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn('admission webhook "deny.turnfleet.test" denied the request: label deny=yes is not allowed', p.stderr)
            self.assertIn("NotFound", self.k("get", "cm", "bad", ns=ns, check=False).stderr)
            p = self.k("create", "secret", "generic", "s", "--from-literal=a=b", ns=ns, check=False)
            self.assertIn('failed calling webhook "down.turnfleet.test": failed to call webhook: Post "https://%s:%d/x?timeout=2s"' % (WEBHOOK_ADDR, self.WEBHOOK_PORT + 5), p.stderr)
            self.k("create", "serviceaccount", "passes", ns=ns)       # failurePolicy Ignore: the dead webhook is skipped
            p = self.k("delete", "configmap", "ok", ns=ns, check=False)
            self.assertIn('failed calling webhook "slow.turnfleet.test": failed to call webhook: Post "%s/slow?timeout=1s": context deadline exceeded' % base, p.stderr)
            self.assertEqual(self.jp(ns, "cm/ok", "{.metadata.name}"), "ok")
            self.assertEqual({r["operation"] for _p, r in srv.seen}, {"CREATE", "DELETE"})
            self.assertEqual([r["oldObject"]["metadata"]["name"] for p_, r in srv.seen if r["operation"] == "DELETE"], ["ok"])
            self.assertTrue(all(r["userInfo"]["username"] == "kubernetes-admin" for _p, r in srv.seen))
            # `kubectl apply` updates the configurations: strategic merge of `webhooks` by name
            m, v = cfgs["items"]
            m["webhooks"][0]["timeoutSeconds"] = 3
            v["webhooks"][0]["rules"] = [dict(rules[0], operations=["CREATE"])]
            del v["webhooks"][3]                                   # slow.turnfleet.test
            out = self.k("apply", "-f", "-", input=json.dumps(cfgs)).stdout
            self.assertIn("mutatingwebhookconfiguration.admissionregistration.k8s.io/%s-m configured" % ns, out)
            self.assertIn("validatingwebhookconfiguration.admissionregistration.k8s.io/%s-v configured" % ns, out)
            for want in (m, v):
                got = json.loads(self.k("get", want["kind"].lower(), want["metadata"]["name"], "-o", "json").stdout)
                holds(self, got["webhooks"], want["webhooks"], want["metadata"]["name"])   # + the defaults
                self.assertEqual(got["metadata"]["generation"], 2)
            p = self.k("create", "configmap", "after", "--from-literal=a=1", ns=ns)
            self.assertIn("Warning: validated by the test webhook", p.stderr)
            self.assertEqual(self.jp(ns, "cm/after", "{.metadata.labels.mutated}"), "yes")
            self.k("delete", "configmap", "after", ns=ns)          # no slow webhook any more
        finally:
            self.k("delete", "mutatingwebhookconfiguration", ns + "-m", check=False)
            self.k("delete", "validatingwebhookconfiguration", ns + "-v", check=False)
            srv.shutdown()
            srv.server_close()

    def test_pod_probe_logs_prestop(self):
        ns = self.ns("pod")
        shared = tempfile.mkdtemp(dir=self.home)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
               "spec": {"nodeName": "n2", "terminationGracePeriodSeconds": 10, "containers": [
                   {"name": "main", "image": "debian:bookworm", "workingDir": "/tmp", "command": ["/bin/sh", "-c"],
                    "args": ["trap 'echo \"SIGTERM after $(cat /shared/prestop 2>/dev/null || echo nothing)\" > /shared/term; exit 0' TERM\n"
                             "echo \"started as pid $$ in $(pwd) with MODE=$MODE POD=$POD\"\ncat /etc/cfg/greeting; echo\n"
                             "ls /var/run/secrets/kubernetes.io/serviceaccount\necho to-stderr >&2\n"
                             "touch /shared/up\nwhile true; do sleep 0.2; done"],
                    "env": [{"name": "MODE", "value": "demo"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "readinessProbe": {"exec": {"command": ["/bin/sh", "-c", "test -e /shared/up && test -e /scratch/from-side"]}, "periodSeconds": 1},
                    "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "echo prestop-ran > /shared/prestop; "
                                                                   "echo prestop-out > /proc/1/fd/1; echo prestop-err > /proc/1/fd/2"]}}},
                    "volumeMounts": [{"name": "shared", "mountPath": "/shared"}, {"name": "cfg", "mountPath": "/etc/cfg"},
                                     {"name": "scratch", "mountPath": "/scratch"}]},
                   {"name": "side", "image": "debian:bookworm", "command": ["/bin/sh", "-c",
                    "trap 'exit 0' TERM; stat -c %a /etc/cfg/greeting; touch /scratch/from-side; "
                    "while true; do if [ -e /shared/say ]; then rm /shared/say; echo said; fi; sleep 0.2; done"],
                    "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "scratch", "mountPath": "/scratch"},
                                     {"name": "shared", "mountPath": "/shared"}]}],
                   "volumes": [{"name": "shared", "hostPath": {"path": shared}}, {"name": "scratch", "emptyDir": {}},
                               {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 0o440}}]}}
        self.k("create", "configmap", "cfg", "--from-literal=greeting=hello", ns=ns)
        self.k("apply", "-f", "-", input=json.dumps(pod), ns=ns)
        self.k("wait", "--for=condition=Ready", "--timeout=30s", "pod/probe", ns=ns)
        row = self.k("get", "pod", "probe", ns=ns).stdout.splitlines()[1].split()
        self.assertEqual(row[:4], ["probe", "2/2", "Running", "0"])
        logs = self.k("logs", "probe", "-c", "main", ns=ns).stdout
        self.assertIn("started as pid 1 in /tmp with MODE=demo POD=probe", logs)   # PID 1 of its own namespace
        self.assertIn("hello", logs)
        self.assertIn("token", logs)
        self.assertEqual(self.k("logs", "probe", "-c", "side", ns=ns).stdout, "440\n")
        f = self.kpopen("logs", "-f", "probe", "-c", "side", ns=ns)
        try:
            self.assertEqual(f.stdout.readline(), "440\n")
            open(os.path.join(shared, "say"), "w").close()              # side answers it later
            self.assertEqual(f.stdout.readline(), "said\n")            # a follow stream, not a dump
        finally:
            f.terminate()
            f.communicate()
        self.assertEqual(self.jp(ns, "pod/probe", "{.status.podIP} {.status.hostIP}"), "127.0.0.202 127.0.0.202")
        d = self.k("describe", "pod", "probe", ns=ns).stdout
        self.assertRegex(d, r"Node:\s+n2/127.0.0.202")
        self.assertRegex(d, r"Normal\s+Started\s+\S+\s+kubelet\s+Started container main")
        if self.CLIENT != "kubectl-1.20":       # `kubectl events` came with 1.26
            self.assertRegex(self.k("events", ns=ns).stdout, r"Normal\s+Started\s+Pod/probe\s+Started container side")
        self.assertIn("to-stderr\n", logs)                               # stderr is in the log too
        # stdout and stderr are pipes: the preStop's writes to /proc/1/fd/1 and /2 append, a follow sees them
        f = self.kpopen("logs", "-f", "probe", "-c", "main", ns=ns)
        try:
            # the two streams' order is not kept: read on until stdout's first line came
            first = [f.stdout.readline() for _ in range(2)]
            self.assertTrue(any("started as pid 1" in line for line in first), first)
            self.k("delete", "pod", "probe", ns=ns, timeout=60)
            followed, _ = f.communicate(timeout=30)           # the stream ends with the container
        finally:
            if f.poll() is None:
                f.kill()
                f.communicate()
        # after everything before; stdout and stderr are two pipes, so (as with a container runtime)
        # the order between the two streams is not kept
        self.assertEqual(sorted(followed.splitlines()[-2:]), ["prestop-err", "prestop-out"], followed)
        self.assertEqual(f.returncode, 0)
        self.assertEqual(open(os.path.join(shared, "term")).read().strip(), "SIGTERM after prestop-ran")
        self.assertIn("NotFound", self.k("get", "pod", "probe", ns=ns, check=False).stderr)


def _client_class(name, short, port):
    return type("Kubectl_%s" % short.replace("-", "_"), (KubectlCase,), {"CLIENT": name, "SHORT": short, "WEBHOOK_PORT": port})


Kubectl120 = _client_class("kubectl-1.20", "k120", 16450)
KubectlRootfs = _client_class("kubectl-rootfs", "kroot", 16451)
KubectlHost = _client_class("kubectl-host", "khost", 16452)


# ---- python3-kubernetes, the control endpoint, the kubelet ----------------

class PythonClient(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.c = client
        self.api = py_client()
        self.v1 = client.CoreV1Api(self.api)

    def ns(self, tag):
        name = "py-" + tag
        self.v1.create_namespace({"metadata": {"name": name}})
        wait_for("the default service account", lambda: self._sa(name))
        return name

    def _sa(self, ns):
        try:
            return self.v1.read_namespaced_service_account("default", ns)
        except self.c.ApiException:
            return None

    def test_optimistic_concurrency_and_noop(self):
        ns = self.ns("occ")
        cm = self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
        rv = cm.metadata.resource_version
        same = self.v1.replace_namespaced_config_map("c", ns, cm)
        self.assertEqual(same.metadata.resource_version, rv)      # a no-op write is not stored
        cm.data["a"] = "2"
        new = self.v1.replace_namespaced_config_map("c", ns, cm)
        self.assertNotEqual(new.metadata.resource_version, rv)
        dry = self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
        self.assertEqual(dry.metadata.name, "dry")
        self.assertEqual([c.metadata.name for c in self.v1.list_namespaced_config_map(ns).items if c.metadata.name == "dry"], [])
        cm.data["a"] = "3"
        with self.assertRaises(self.c.ApiException) as e:
            self.v1.replace_namespaced_config_map("c", ns, cm)        # stale RV
        self.assertEqual(e.exception.status, 409)
        st = json.loads(e.exception.body)
        self.assertEqual(st["reason"], "Conflict")
        self.assertEqual(st["message"], 'Operation cannot be fulfilled on configmaps "c": the object has been modified; please apply your changes to the latest version and try again')
        with self.assertRaises(self.c.ApiException) as e:
            self.v1.read_namespaced_config_map("nope", ns)
        self.assertEqual(json.loads(e.exception.body)["details"], {"name": "nope", "group": "", "kind": "configmaps"})
        co = self.c.CoordinationV1Api(self.api)
        lease = co.create_namespaced_lease(ns, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 3,
                                                                                      "renewTime": "2026-01-01T00:00:00.123456Z"}})
        self.assertEqual(lease.spec.holder_identity, "a")
        with self.assertRaises(self.c.ApiException) as e:
            co.replace_namespaced_lease("l", ns, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
        self.assertEqual(e.exception.status, 422)
        self.assertIn("metadata.resourceVersion: Invalid value: 0x0: must be specified for an update", json.loads(e.exception.body)["message"])

    def test_custom_objects_generation_and_status(self):
        co = self.c.CustomObjectsApi(self.api)
        ext = self.c.ApiextensionsV1Api(self.api)
        import yaml
        crd = yaml.safe_load(open(os.path.join(DATA, "crd.yaml")))
        try:
            ext.create_custom_resource_definition(crd)
        except self.c.ApiException as e:
            self.assertEqual(e.status, 409)
        ns = self.ns("cr")
        args = ("turnfleet.hzmi.dev", "v1alpha1", ns, "turnpools")
        wait_for("the CRD served", lambda: self._served(co, ns))
        o = co.create_namespaced_custom_object(*args, {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
                                                      "metadata": {"name": "p"}, "spec": {"replicas": 1}, "status": {"replicas": 9}})
        self.assertEqual(o["metadata"]["generation"], 1)
        self.assertNotIn("status", o)                     # status subresource: dropped on create
        o = co.patch_namespaced_custom_object(*args, "p", {"metadata": {"labels": {"x": "y"}}})
        self.assertEqual(o["metadata"]["generation"], 1)   # metadata never bumps it
        o = co.patch_namespaced_custom_object(*args, "p", {"spec": {"replicas": 2}, "status": {"replicas": 5}})
        self.assertEqual((o["metadata"]["generation"], o.get("status")), (2, None))
        o = co.patch_namespaced_custom_object_status(*args, "p", {"spec": {"replicas": 7}, "status": {"replicas": 5}})
        self.assertEqual((o["metadata"]["generation"], o["spec"]["replicas"], o["status"]["replicas"]), (2, 2, 5))
        with self.assertRaises(self.c.ApiException) as e:
            co.create_namespaced_custom_object(*args, {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
                                                       "metadata": {"name": "q"}, "spec": {"replicas": "two", "mode": "Bogus"}})
        st = json.loads(e.exception.body)
        self.assertEqual(e.exception.status, 422)
        self.assertEqual({c["field"] for c in st["details"]["causes"]}, {"spec.replicas", "spec.mode"})
        self.assertIn('spec.mode: Unsupported value: "Bogus": supported values: "HostIP", "PodIP", "PartitionedIP"', st["message"])
        self.assertIn('spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"', st["message"])
        with self.assertRaises(self.c.ApiException) as e:       # the root-level rule on metadata.name
            co.create_namespaced_custom_object(*args, {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
                                                       "metadata": {"name": "p" * 52}, "spec": {"replicas": 1}})
        self.assertIn('<nil>: Invalid value: "object": metadata.name must be at most 51 characters', json.loads(e.exception.body)["message"])
        # a rule outside the CEL subset fails the CRD, never passes silently
        bad = json.loads(json.dumps(crd))
        bad["metadata"]["name"] = "others.turnfleet.hzmi.dev"
        bad["spec"]["names"] = {"plural": "others", "kind": "Other"}
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [{"rule": "self.metadata.name.format('x') == 'y'"}]
        with self.assertRaises(self.c.ApiException) as e:
            ext.create_custom_resource_definition(bad)
        self.assertEqual(e.exception.status, 422)
        self.assertIn("compilation failed", json.loads(e.exception.body)["message"])
        with self.assertRaises(self.c.ApiException) as e:
            self.api.call_api("/apis/turnfleet.hzmi.dev/v1alpha1/namespaces/%s/turnpools/p" % ns, "PATCH",
                              header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
                              body=json.dumps({"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool", "metadata": {"name": "p"}}),
                              query_params=[], auth_settings=["BearerToken"], response_type="object")
        self.assertEqual(e.exception.status, 422)       # server-side apply needs a field manager
        self.assertIn('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                      json.loads(e.exception.body)["message"])

    def test_cel_subset_and_list_types(self):
        ext = self.c.ApiextensionsV1Api(self.api)
        co = self.c.CustomObjectsApi(self.api)
        rules = [
            {"rule": "self.items.all(i, i.size() <= 3)", "message": "every item has at most 3 characters"},
            {"rule": "self.items.exists(i, i.startsWith('a')) || size(self.items) == 0", "message": "an item starts with a"},
            {"rule": "!has(self.mode) || self.mode in ['x', 'y']", "message": "mode is x or y"},
            {"rule": "self.name.matches('^[a-z]+$') && !self.name.endsWith('z') && self.name.lowerAscii() == self.name", "message": "bad name"},
            {"rule": "(self.low < self.high ? self.high - self.low : 0) <= 10", "messageExpression": "'spread ' + string(self.high - self.low) + ' is over 10'"},
            {"rule": "self.items.filter(i, i.contains('b')).size() <= 1", "fieldPath": ".items", "reason": "FieldValueForbidden", "message": "at most one item with b"},
            {"rule": "self.items.map(i, size(i)).exists_one(n, n == 2) || self.items.size() != 2", "message": "one two-letter item"}]
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "cels.test.turnfleet.hzmi.dev"},
               "spec": {"group": "test.turnfleet.hzmi.dev", "scope": "Namespaced", "names": {"plural": "cels", "kind": "Cel"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                            "spec": {"type": "object", "x-kubernetes-validations": rules, "properties": {
                                "items": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                                "mode": {"type": "string"}, "name": {"type": "string"},
                                "low": {"type": "integer"}, "high": {"type": "integer"},
                                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                                          "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}}}]}}
        ext.create_custom_resource_definition(crd)
        ns = self.ns("cel")
        args = ("test.turnfleet.hzmi.dev", "v1", ns, "cels")
        wait_for("cels served", lambda: self._served_gv(co, args))

        def make(name, spec):
            try:
                co.create_namespaced_custom_object(*args, {"apiVersion": "test.turnfleet.hzmi.dev/v1", "kind": "Cel", "metadata": {"name": name}, "spec": spec})
                return None
            except self.c.ApiException as e:
                return json.loads(e.body)["message"]
        good = {"items": ["ab", "c"], "mode": "x", "name": "abc", "low": 1, "high": 5, "ports": [{"name": "a"}, {"name": "b"}]}
        self.assertIsNone(make("good", good))
        cases = [({"items": ["abcd"]}, 'spec: Invalid value: "object": every item has at most 3 characters'),
                 ({"items": ["c"]}, "an item starts with a"),
                 ({"mode": "q"}, "mode is x or y"),
                 ({"name": "abz"}, "bad name"),
                 ({"low": 1, "high": 20}, "spread 19 is over 10"),
                 ({"items": ["ab", "b"]}, "spec.items: Forbidden: at most one item with b"),
                 ({"items": ["ab", "cd"]}, "one two-letter item"),
                 ({"items": ["ab", "ab"]}, 'spec.items[1]: Duplicate value: "ab"'),
                 ({"ports": [{"name": "a"}, {"name": "a", "port": 1}]}, 'spec.ports[1]: Duplicate value: {"name":"a"}')]
        for i, (change, msg) in enumerate(cases):
            got = make("bad-%d" % i, dict(good, **change))
            self.assertIsNotNone(got, change)
            self.assertIn(msg, got)
        ext.delete_custom_resource_definition("cels.test.turnfleet.hzmi.dev")

    def _served_gv(self, co, args):
        try:
            co.list_namespaced_custom_object(*args)
            return True
        except self.c.ApiException:
            return False

    def test_crd_deletion_removes_objects_and_serving(self):
        ext = self.c.ApiextensionsV1Api(self.api)
        co = self.c.CustomObjectsApi(self.api)
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.test.turnfleet.hzmi.dev"},
               "spec": {"group": "test.turnfleet.hzmi.dev", "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        ext.create_custom_resource_definition(crd)
        args = ("test.turnfleet.hzmi.dev", "v1", "widgets")
        co.create_cluster_custom_object(*args, {"apiVersion": "test.turnfleet.hzmi.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "x": {"y": 1}})
        self.assertEqual(co.get_cluster_custom_object(*args, "w")["x"], {"y": 1})    # preserved unknown fields
        est = ext.read_custom_resource_definition("widgets.test.turnfleet.hzmi.dev").status
        self.assertEqual({c.type: c.status for c in est.conditions}, {"NamesAccepted": "True", "Established": "True"})
        self.assertEqual(est.stored_versions, ["v1"])
        ext.delete_custom_resource_definition("widgets.test.turnfleet.hzmi.dev")

        def gone():
            try:
                co.list_cluster_custom_object(*args)
                return False
            except self.c.ApiException as e:
                return e.status == 404
        wait_for("the resource no longer served", gone)
        with self.assertRaises(self.c.ApiException) as e:
            ext.read_custom_resource_definition("widgets.test.turnfleet.hzmi.dev")
        self.assertEqual(e.exception.status, 404)

    def _served(self, co, ns):
        try:
            co.list_namespaced_custom_object("turnfleet.hzmi.dev", "v1alpha1", ns, "turnpools")
            return True
        except self.c.ApiException:
            return False

    def test_watch_selectors_bookmarks_and_410_relist(self):
        from kubernetes import watch
        ns = self.ns("watch")
        lst = self.v1.list_namespaced_config_map(ns)
        rv0 = lst.metadata.resource_version
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "a", "labels": {"app": "x"}}})
        self.v1.patch_namespaced_config_map("a", ns, {"metadata": {"labels": {"app": "y"}}})    # leaves the selector
        w = watch.Watch()
        seen = []
        for ev in w.stream(self.v1.list_namespaced_config_map, ns, label_selector="app=x", resource_version=rv0, timeout_seconds=2):
            seen.append((ev["type"], ev["object"].metadata.name))
        self.assertEqual(seen, [("ADDED", "a"), ("DELETED", "a")])
        # bookmarks (the cluster sends one a second)
        raw = self.v1.list_namespaced_config_map(ns, watch=True, allow_watch_bookmarks=True, resource_version=rv0,
                                                 timeout_seconds=3, _preload_content=False)
        lines = [json.loads(l) for l in raw.read().decode().splitlines() if l.strip()]
        raw.release_conn()
        self.assertIn("BOOKMARK", [l["type"] for l in lines])
        bm = [l for l in lines if l["type"] == "BOOKMARK"][0]["object"]
        self.assertEqual(set(bm["metadata"]), {"resourceVersion"})
        # history compacted: python's watch gets 410 Expired, relists, watches again
        control("POST", "/compact")
        with self.assertRaises(self.c.ApiException) as e:
            for _ev in watch.Watch().stream(self.v1.list_namespaced_config_map, ns, resource_version=rv0, timeout_seconds=2):
                pass
        self.assertEqual(e.exception.status, 410)
        lst = self.v1.list_namespaced_config_map(ns)
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
        seen = []
        for ev in watch.Watch().stream(self.v1.list_namespaced_config_map, ns, resource_version=lst.metadata.resource_version, timeout_seconds=2):
            seen.append((ev["type"], ev["object"].metadata.name))
        self.assertEqual(seen, [("ADDED", "b")])
        # restart losing history: a watch from before it is expired too
        rv1 = self.v1.list_namespaced_config_map(ns).metadata.resource_version
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
        control("POST", "/restart")
        raw = self.v1.list_namespaced_config_map(ns, watch=True, resource_version=rv1, timeout_seconds=2, _preload_content=False)
        lines = [json.loads(l) for l in raw.read().decode().splitlines() if l.strip()]
        raw.release_conn()
        self.assertEqual([(l["type"], l["object"]["code"], l["object"]["reason"]) for l in lines], [("ERROR", 410, "Expired")])

    def test_faults_and_request_log(self):
        ns = self.ns("faults")
        seq = last_seq()
        control("POST", "/faults", {"method": "GET", "path": "/api/v1/namespaces/%s/configmaps$" % ns, "count": 1, "status": 429, "retryAfter": 2})
        with self.assertRaises(self.c.ApiException) as e:
            self.v1.list_namespaced_config_map(ns)
        self.assertEqual((e.exception.status, e.exception.headers.get("Retry-After")), (429, "2"))
        self.assertEqual(json.loads(e.exception.body)["details"]["retryAfterSeconds"], 2)
        self.v1.list_namespaced_config_map(ns)      # count 1: the next one passes
        for code in (500, 503, 504, 409):
            control("POST", "/faults", {"method": "POST", "path": "/namespaces/%s/configmaps" % ns, "count": 1, "status": code})
            with self.assertRaises(self.c.ApiException) as e:
                self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "f"}})
            self.assertEqual(e.exception.status, code)
            self.assertEqual(json.loads(e.exception.body)["kind"], "Status")
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "f"}})
        # transport faults
        import urllib3
        for rule in ({"reset": True}, {"truncate": True}):
            control("POST", "/faults", dict(rule, method="GET", path="/namespaces/%s/configmaps/f$" % ns))
            with self.assertRaises((urllib3.exceptions.HTTPError, OSError, ValueError)):
                self.v1.read_namespaced_config_map("f", ns)
            control("DELETE", "/faults")
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps$" % ns, "query": "watch", "stall": True, "stallSeconds": 5})
        got = []
        with self.assertRaises((urllib3.exceptions.HTTPError, OSError)):
            from kubernetes import watch
            for ev in watch.Watch().stream(self.v1.list_namespaced_config_map, ns, _request_timeout=1):
                got.append(ev)
        self.assertEqual(got, [])     # headers, then silence (not even the initial ADDED of "f")
        control("DELETE", "/faults")
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps/f$" % ns, "slowHeaders": 3, "count": 1})
        with self.assertRaises((urllib3.exceptions.HTTPError, OSError)):
            self.v1.read_namespaced_config_map("f", ns, _request_timeout=1)
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps$" % ns, "query": "watch", "status": 410, "count": 1})
        with self.assertRaises(self.c.ApiException) as e:
            self.v1.list_namespaced_config_map(ns, watch=True, timeout_seconds=2, _preload_content=False)
        self.assertEqual((e.exception.status, json.loads(e.exception.body)["reason"]), (410, "Expired"))
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps$" % ns, "query": "watch", "truncate": True, "count": 1})
        raw = self.v1.list_namespaced_config_map(ns, watch=True, timeout_seconds=5, _preload_content=False)
        data, cut = b"", False
        try:
            for chunk in raw.read_chunked():
                data += chunk
        except urllib3.exceptions.HTTPError:
            cut = True      # the stream ended inside the chunked body
        raw.release_conn()
        self.assertTrue(cut)
        self.assertTrue(data and b"\n" not in data, data)   # half of the first event line
        with self.assertRaises(ValueError):
            json.loads(data)
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps/f$" % ns, "slowBody": 3, "count": 1})
        with self.assertRaises((urllib3.exceptions.HTTPError, OSError)):
            self.v1.read_namespaced_config_map("f", ns, _request_timeout=(5, 0.2))
        rid = control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps/f$" % ns, "probability": 1.0, "status": 500})["id"]
        for _ in range(3):
            with self.assertRaises(self.c.ApiException):
                self.v1.read_namespaced_config_map("f", ns)
        self.assertEqual([r["hits"] for r in control("GET", "/faults")["rules"] if r["id"] == rid], [3])
        control("DELETE", "/faults")
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps$" % ns, "query": "watch", "expireMidStream": True, "afterEvents": 1})
        raw = self.v1.list_namespaced_config_map(ns, watch=True, timeout_seconds=5, _preload_content=False)
        lines = [json.loads(l) for l in raw.read().decode().splitlines() if l.strip()]
        raw.release_conn()
        control("DELETE", "/faults")
        self.assertEqual(lines[0]["type"], "ADDED")
        self.assertEqual((lines[-1]["type"], lines[-1]["object"]["code"]), ("ERROR", 410))
        log = requests_since(seq)
        writes = [r for r in log if r["method"] == "POST" and r["path"] == "/api/v1/namespaces/%s/configmaps" % ns]
        self.assertEqual([r["code"] for r in writes], [500, 503, 504, 409, 201])
        self.assertTrue(all(r["user"] == "kubernetes-admin" and r["contentType"] == "application/json" and r["bodySize"] > 0 for r in writes))
        # token rotation and revocation
        tok = control("POST", "/tokens", {"user": "rotated", "groups": ["system:masters"]})["token"]
        c2 = self.c.CoreV1Api(py_client(tok))
        c2.list_namespaced_config_map(ns)
        watch_stream = c2.list_namespaced_config_map(ns, watch=True, timeout_seconds=2, resource_version=c2.list_namespaced_config_map(ns).metadata.resource_version,
                                                     _preload_content=False)
        control("POST", "/tokens/revoke", {"token": tok})
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "after-revoke"}})
        lines = [json.loads(l) for l in watch_stream.read().decode().splitlines() if l.strip()]
        watch_stream.release_conn()
        # authentication happens at the start of a request: the open watch streams on
        self.assertEqual([(l["type"], l["object"]["metadata"]["name"]) for l in lines], [("ADDED", "after-revoke")])
        with self.assertRaises(self.c.ApiException) as e:
            c2.list_namespaced_config_map(ns)
        self.assertEqual((e.exception.status, json.loads(e.exception.body)["reason"]), (401, "Unauthorized"))

    def test_restart_ends_stalled_handlers(self):
        """A restart of the control endpoint ends every request a fault holds (a stalled watch, slow
        headers): their connections die with the old server, as a real apiserver's restart cuts them."""
        import urllib3
        ns = "restart-stall"
        self.v1.create_namespace({"metadata": {"name": ns}})
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps$" % ns, "query": "watch", "stall": True, "stallSeconds": 600})
        control("POST", "/faults", {"method": "GET", "path": "/namespaces/%s/configmaps/x$" % ns, "slowHeaders": 600})
        seq = last_seq()
        ended = {}

        def watch():
            try:
                raw = self.v1.list_namespaced_config_map(ns, watch=True, _preload_content=False)
                ended["watch"] = b"".join(raw.read_chunked())
            except (urllib3.exceptions.HTTPError, OSError) as e:
                ended["watch"] = e

        def get():
            try:
                self.v1.read_namespaced_config_map("x", ns)
            except (self.c.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
                ended["get"] = e
        ts = [threading.Thread(target=watch), threading.Thread(target=get)]
        for t in ts:
            t.start()
        try:
            wait_for("both requests held", lambda: len([r for r in requests_since(seq) if r["path"].startswith("/api/v1/namespaces/%s/" % ns)]) == 0
                     and len(control("GET", "/faults")["rules"]) == 2 and all(r["hits"] == 1 for r in control("GET", "/faults")["rules"]))
            self.assertEqual(ended, {})                   # held, not answered
            control("POST", "/restart")
            for t in ts:
                t.join(30)
            self.assertFalse(any(t.is_alive() for t in ts), "a held request outlived the restart")
        finally:
            control("DELETE", "/faults")
        self.assertIsInstance(ended["watch"], (urllib3.exceptions.HTTPError, OSError))   # cut, not a clean end
        self.assertIsInstance(ended["get"], (urllib3.exceptions.HTTPError, OSError))
        self.v1.list_namespaced_config_map(ns)            # the restarted server answers

    def test_events_k8s_io_and_core_agree(self):
        ns = self.ns("events")
        ev = self.c.EventsV1Api(self.api)
        ev.create_namespaced_event(ns, {"metadata": {"name": "x.1"}, "eventTime": "2026-01-01T00:00:00.000001Z",
                                        "reportingController": "turnfleet.hzmi.dev/operator", "reportingInstance": "op-1",
                                        "action": "Create", "reason": "RelayCreated", "type": "Normal", "note": "hello",
                                        "regarding": {"kind": "TURNPool", "name": "p", "namespace": ns}})
        core = self.v1.list_namespaced_event(ns, field_selector="involvedObject.name=p,reason=RelayCreated")
        self.assertEqual([(e.message, e.reporting_component) for e in core.items], [("hello", "turnfleet.hzmi.dev/operator")])
        with self.assertRaises(self.c.ApiException) as e:
            ev.create_namespaced_event(ns, {"metadata": {"name": "x.2"}, "eventTime": "2026-01-01T00:00:00.000001Z", "type": "Normal",
                                            "regarding": {"kind": "TURNPool", "name": "p", "namespace": ns}})
        self.assertEqual(e.exception.status, 422)
        with self.assertRaises(self.c.ApiException) as e:
            self.v1.list_namespaced_event(ns, field_selector="spec.bogus=1")
        self.assertEqual(json.loads(e.exception.body)["message"], "field label not supported: spec.bogus")

    def test_node_heartbeat_and_notready(self):
        nodes = {n.metadata.name: n for n in self.v1.list_node().items}
        self.assertEqual(sorted(nodes), ["n1", "n2", "n3"])
        n1 = nodes["n1"]
        self.assertEqual([(a.type, a.address) for a in n1.status.addresses][:1], [("InternalIP", "127.0.0.201")])
        self.assertEqual(n1.metadata.labels[RELAY_LABEL], "true")
        self.assertEqual(n1.metadata.annotations["turnfleet.hzmi.dev/relay-address"], "127.0.0.201")
        leases = {l.metadata.name for l in self.c.CoordinationV1Api(self.api).list_namespaced_lease("kube-node-lease").items}
        self.assertEqual(leases, {"n1", "n2", "n3"})
        ready = lambda name: [c.status for c in self.v1.read_node(name).status.conditions if c.type == "Ready"][0]
        self.assertEqual(ready("n3"), "True")
        ns = self.ns("node")
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"nodeName": "n3", "containers": [
            {"name": "c", "image": "debian:bookworm", "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]}]}})
        pod_ready = lambda: [c.status for c in self.v1.read_namespaced_pod("p", ns).status.conditions or [] if c.type == "Ready"]
        wait_for("the pod Ready", lambda: pod_ready() == ["True"])
        control("POST", "/kubelets/n3/stop")
        try:
            wait_for("n3 NotReady", lambda: ready("n3") == "Unknown", 100, 0.2)
            wait_for("its pod not Ready", lambda: pod_ready() == ["False"])
            msg = [c.message for c in self.v1.read_node("n3").status.conditions if c.type == "Ready"][0]
            self.assertEqual(msg, "Kubelet stopped posting node status.")
        finally:
            control("POST", "/kubelets/n3/start")
        wait_for("n3 Ready again", lambda: ready("n3") == "True", 100, 0.2)
        wait_for("the pod Ready again", lambda: pod_ready() == ["True"])
        self.v1.delete_namespaced_pod("p", ns)

    def test_pod_restarts_readiness_gate_and_token(self):
        ns = self.ns("pods")
        crash = {"metadata": {"name": "crash"}, "spec": {"nodeName": "n1", "containers": [
            {"name": "c", "image": "debian:bookworm", "command": ["/bin/sh", "-c", "echo run; exit 3"]}]}}
        self.v1.create_namespaced_pod(ns, crash)
        st = wait_for("two restarts", lambda: (p := self.v1.read_namespaced_pod("crash", ns)) and p.status.container_statuses and
                      p.status.container_statuses[0].restart_count >= 2 and p.status.container_statuses[0], 200, 0.1)
        self.assertEqual(st.last_state.terminated.exit_code, 3)
        once = {"metadata": {"name": "once"}, "spec": {"nodeName": "n1", "restartPolicy": "Never", "containers": [
            {"name": "c", "image": "debian:bookworm", "command": ["/bin/sh", "-c",
                                                                   "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; "
                                                                   "test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-ok"]}]}}
        self.v1.create_namespaced_pod(ns, once)
        wait_for("Succeeded", lambda: self.v1.read_namespaced_pod("once", ns).status.phase == "Succeeded")
        self.assertEqual(self.v1.read_namespaced_pod_log("once", ns), "%s\ntoken-ok\n" % ns)
        gated = {"metadata": {"name": "gated"}, "spec": {"nodeName": "n3", "hostNetwork": True,
                                                         "readinessGates": [{"conditionType": "turnfleet.hzmi.dev/allocate-ready"}],
                                                         "containers": [{"name": "c", "image": "debian:bookworm",
                                                                         "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]}]}}
        self.v1.create_namespaced_pod(ns, gated)
        cond = lambda t: ([c.status for c in self.v1.read_namespaced_pod("gated", ns).status.conditions or [] if c.type == t] or [None])[0]
        wait_for("ContainersReady", lambda: cond("ContainersReady") == "True")
        self.assertEqual(cond("Ready"), "False")      # the gate's condition is not there yet
        py_pod_condition(ns, "gated", {"type": "turnfleet.hzmi.dev/allocate-ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        wait_for("Ready through the gate", lambda: cond("Ready") == "True")
        py_pod_condition(ns, "gated", {"type": "turnfleet.hzmi.dev/allocate-ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        wait_for("not Ready again", lambda: cond("Ready") == "False")
        for n in ("crash", "gated"):
            self.v1.delete_namespaced_pod(n, ns)
        wait_for("pods gone", lambda: not [p for p in self.v1.list_namespaced_pod(ns).items if p.metadata.name != "once"], 300)


    def test_image_map(self):
        if not TURNFLEET:
            self.fail("TURNFLEET is required (the build's turnfleet)")
        ns = self.ns("images")
        rootfs = os.path.dirname(os.path.dirname(os.path.dirname(CLIENTS["kubectl-rootfs"])))
        want = {"coturn-418": ("registry.test/coturn/coturn:4.18", ["turnserver", "--version"], "4.18.0\n"),
                "coturn-461": ("coturn/coturn:4.6.1", ["turnserver", "--version"], "4.6.1\n"),
                "own": ("registry.test/turnfleet:dev", ["/bin/sh", "-c", "for b in turnfleet turnfleet-probe; do command -v $b; done"],
                        "/usr/local/bin/turnfleet\n/usr/local/bin/turnfleet-probe\n"),
                "flag": ("registry.test/unstable:sid", ["cat", "/etc/debian_version"], open(rootfs + "/etc/debian_version").read())}
        for name, (image, cmd, _out) in want.items():
            self.v1.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {"nodeName": "n3", "restartPolicy": "Never",
                                                                                     "containers": [{"name": "c", "image": image, "command": cmd}]}})
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "unmapped"}, "spec": {"nodeName": "n3", "containers": [
            {"name": "c", "image": "registry.test/nobody/nothing:1", "command": ["true"]}]}})
        for name, (_image, _cmd, out) in want.items():
            wait_for(name + " Succeeded", lambda: self.v1.read_namespaced_pod(name, ns).status.phase == "Succeeded")
            self.assertEqual(self.v1.read_namespaced_pod_log(name, ns), out, name)
        st = wait_for("ErrImagePull", lambda: (s := self.v1.read_namespaced_pod("unmapped", ns).status.container_statuses) and s[0].state.waiting and s[0])
        self.assertEqual(st.state.waiting.reason, "ErrImagePull")
        self.assertIn("not in the stand-in's image map", st.state.waiting.message)

    def test_init_containers_startup_probe_post_start(self):
        ns = self.ns("init")
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "initContainers": [
            {"name": "first", "image": "debian:bookworm", "command": ["/bin/sh", "-c", "echo one > /work/order; echo init-ran"],
             "volumeMounts": [{"name": "w", "mountPath": "/work"}]},
            {"name": "second", "image": "debian:bookworm", "command": ["/bin/sh", "-c", "echo two >> /work/order"],
             "volumeMounts": [{"name": "w", "mountPath": "/work"}]}],
            "containers": [{"name": "main", "image": "debian:bookworm",
                            "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; cat /work/order; sleep 1; touch /tmp/started; while true; do sleep 0.2; done"],
                            "lifecycle": {"postStart": {"exec": {"command": ["/bin/sh", "-c", "echo hook > /work/poststart"]}}},
                            "startupProbe": {"exec": {"command": ["test", "-e", "/tmp/started"]}, "periodSeconds": 1, "failureThreshold": 30},
                            "readinessProbe": {"exec": {"command": ["test", "-e", "/work/poststart"]}, "periodSeconds": 1},
                            "volumeMounts": [{"name": "w", "mountPath": "/work"}]}],
            "volumes": [{"name": "w", "emptyDir": {}}]}})
        pod = lambda: self.v1.read_namespaced_pod("p", ns)
        wait_for("Ready after init and startup", lambda: [c.status for c in pod().status.conditions or [] if c.type == "Ready"] == ["True"], 300)
        st = pod().status
        self.assertEqual([(c.name, c.state.terminated.exit_code) for c in st.init_container_statuses], [("first", 0), ("second", 0)])
        self.assertTrue(st.container_statuses[0].started)
        self.assertEqual(self.v1.read_namespaced_pod_log("p", ns, container="first"), "init-ran\n")
        self.assertEqual(self.v1.read_namespaced_pod_log("p", ns, container="main"), "one\ntwo\n")
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "bad"}, "spec": {"nodeName": "n1", "restartPolicy": "Never",
                                                                                 "initContainers": [{"name": "i", "image": "debian:bookworm", "command": ["false"]}],
                                                                                 "containers": [{"name": "c", "image": "debian:bookworm", "command": ["true"]}]}})
        wait_for("Failed by its init container", lambda: self.v1.read_namespaced_pod("bad", ns).status.phase == "Failed")
        bad = self.v1.read_namespaced_pod("bad", ns).status
        self.assertEqual(bad.init_container_statuses[0].state.terminated.exit_code, 1)
        self.assertIsNone(bad.container_statuses[0].state.running)
        self.v1.delete_namespaced_pod("p", ns)

    def test_security_context(self):
        ns = self.ns("secctx")
        self.v1.create_namespaced_secret(ns, {"metadata": {"name": "s"}, "stringData": {"key": "sesame"}})
        script = "id -u; id -g; id -G; stat -c '%a %g' /etc/s/key; cat /etc/s/key; echo; touch /x 2>/dev/null && echo rw || echo ro; touch /scratch/ok && echo scratch"
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "nonroot"}, "spec": {
            "nodeName": "n2", "restartPolicy": "Never",
            "securityContext": {"runAsUser": 65534, "runAsGroup": 65534, "fsGroup": 2000, "runAsNonRoot": True},
            "containers": [{"name": "c", "image": "debian:bookworm", "command": ["/bin/sh", "-c", script],
                            "securityContext": {"readOnlyRootFilesystem": True},
                            "volumeMounts": [{"name": "s", "mountPath": "/etc/s", "readOnly": True}, {"name": "scratch", "mountPath": "/scratch"}]}],
            "volumes": [{"name": "s", "secret": {"secretName": "s", "defaultMode": 0o400}}, {"name": "scratch", "emptyDir": {}}]}})
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "root"}, "spec": {"nodeName": "n2", "securityContext": {"runAsNonRoot": True},
                                                                                  "containers": [{"name": "c", "image": "debian:bookworm", "command": ["true"]}]}})
        wait_for("nonroot done", lambda: self.v1.read_namespaced_pod("nonroot", ns).status.phase in ("Succeeded", "Failed"))
        self.assertEqual(self.v1.read_namespaced_pod_log("nonroot", ns), "65534\n65534\n65534 2000\n440 2000\nsesame\nro\nscratch\n")
        st = wait_for("the refusal", lambda: (c := self.v1.read_namespaced_pod("root", ns).status.container_statuses) and c[0].state.waiting and c[0])
        self.assertEqual(st.state.waiting.reason, "CreateContainerConfigError")
        self.assertIn("container has runAsNonRoot and image will run as root", st.state.waiting.message)
        self.v1.delete_namespaced_pod("root", ns)

    def test_in_cluster_client_in_a_pod(self):
        """A pod's projected token, CA and KUBERNETES_SERVICE_* reach the API, under RBAC."""
        ns = self.ns("incluster")
        rbac = self.c.RbacAuthorizationV1Api(self.api)
        rbac.create_namespaced_role(ns, {"metadata": {"name": "cm"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
        rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "cm"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
                                                 "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]})
        script = ("from kubernetes import client, config\n"
                  "config.load_incluster_config()\n"
                  "v1 = client.CoreV1Api()\n"
                  "print([c.metadata.name for c in v1.list_namespaced_config_map('%s').items])\n"
                  "try:\n    v1.list_namespaced_secret('%s')\nexcept client.ApiException as e:\n    print(e.status, e.reason)\n") % (ns, ns)
        self.v1.create_namespaced_pod(ns, {"metadata": {"name": "in"}, "spec": {"nodeName": "n1", "restartPolicy": "Never", "containers": [
            {"name": "c", "image": "debian:bookworm", "command": ["/usr/bin/python3", "-c", script]}]}})
        wait_for("the pod done", lambda: self.v1.read_namespaced_pod("in", ns).status.phase in ("Succeeded", "Failed"), 300)
        log = self.v1.read_namespaced_pod_log("in", ns)
        self.assertEqual(log, "['kube-root-ca.crt']\n403 Forbidden\n", log)

    def test_namespaces_orphans_services_probes_podip(self):
        ns = self.ns("life")
        # orphan propagation: the dependent stays, without its owner reference
        owner = self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "dep", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}})
        self.v1.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
        wait_for("the owner gone", lambda: "owner" not in [c.metadata.name for c in self.v1.list_namespaced_config_map(ns).items])
        self.assertIsNone(self.v1.read_namespaced_config_map("dep", ns).metadata.owner_references)
        svc = self.v1.create_namespaced_service(ns, {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
        self.assertTrue(svc.spec.cluster_ip.startswith("10.96."))
        self.assertEqual((svc.spec.ports[0].protocol, svc.spec.ports[0].target_port), ("TCP", 80))
        # liveness restarts, httpGet readiness, the Multus address
        live = {"metadata": {"name": "live", "annotations": {"k8s.v1.cni.cncf.io/networks": json.dumps([{"name": "relay", "ips": ["127.0.0.204/32"]}])}},
                "spec": {"nodeName": "n2", "containers": [
                    {"name": "web", "image": "debian:bookworm", "command": ["python3", "-m", "http.server", "16458", "--bind", "127.0.0.204"],
                     "readinessProbe": {"httpGet": {"path": "/", "port": 16458}, "periodSeconds": 1}},
                    {"name": "flaky", "image": "debian:bookworm", "command": ["/bin/sh", "-c",
                     "trap 'exit 0' TERM; touch /tmp/alive; sleep 1; rm /tmp/alive; while true; do sleep 0.2; done"],
                     "livenessProbe": {"exec": {"command": ["test", "-e", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 1}}]}}
        self.v1.create_namespaced_pod(ns, live)
        pod = lambda: self.v1.read_namespaced_pod("live", ns)
        wait_for("a liveness restart", lambda: any(c.name == "flaky" and c.restart_count >= 1 for c in pod().status.container_statuses or []), 300)
        wait_for("web ready through httpGet", lambda: any(c.name == "web" and c.ready for c in pod().status.container_statuses or []), 300)
        self.assertEqual(pod().status.pod_ip, "127.0.0.204")
        self.v1.delete_namespaced_pod("live", ns, grace_period_seconds=2)
        # namespace termination: contents go first; a finalizer keeps it Terminating
        self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "held", "finalizers": ["test.turnfleet.hzmi.dev/hold"]}})
        self.v1.delete_namespace(ns)
        wait_for("Terminating", lambda: self.v1.read_namespace(ns).status.phase == "Terminating")
        with self.assertRaises(self.c.ApiException) as e:
            self.v1.create_namespaced_config_map(ns, {"metadata": {"name": "late"}})
        self.assertEqual(e.exception.status, 403)
        self.assertEqual(json.loads(e.exception.body)["message"], "unable to create new content in namespace %s because it is being terminated" % ns)
        wait_for("only the held object left", lambda: [c.metadata.name for c in self.v1.list_namespaced_config_map(ns).items] == ["held"], 300)
        self.v1.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": None}})

        def gone():
            try:
                self.v1.read_namespace(ns)
                return False
            except self.c.ApiException as e:
                return e.status == 404
        wait_for("the namespace gone", gone, 300)


# ---- server-side apply of deploy/ and the samples, as a GitOps tool does ------

class ServerSideApply(unittest.TestCase):
    """`kubectl apply --server-side` (kubectl 1.36: deploy/default; 1.32: the sample pools): created with
    managedFields owned by the Apply manager, a re-apply changes nothing, a field another manager
    changed is a conflict in kube-apiserver's words until forced, a field no longer applied goes.
    The kubelets are stopped meanwhile: the operator's pods are made but never bound, never run."""

    def k(self, client, *args, check=True, input=None):
        client = client if client in CLIENTS else "kubectl-rootfs"     # the machine's kubectl, when it has one
        p = subprocess.run([CLIENTS[client], "--kubeconfig", kubeconfig(), "--cache-dir", os.path.join(self.home, client)] + list(args),
                           input=input, capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            self.fail("%s %s failed: %s%s" % (client, " ".join(args), p.stdout, p.stderr))
        return p

    def objects(self, client, target):
        out = json.loads(self.k(client, "get", "--show-managed-fields", "-o", "json", "-f", "-",
                                input=self.k(client, "kustomize", target).stdout).stdout)
        return out.get("items", [out])

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="ssa-", dir=TMP)
        for name, _addr in NODES:
            control("POST", "/kubelets/%s/stop" % name)
        k = ["get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}"]
        wait_for("every node NotReady", lambda: self.k("kubectl-rootfs", *k).stdout.split() == ["Unknown"] * 3, 100, 0.2)
        # the suite's own CRD came by client-side apply: this test starts from deploy's
        self.k("kubectl-rootfs", "delete", "crd", "turnpools.turnfleet.hzmi.dev", "--ignore-not-found", "--timeout=60s")

    def tearDown(self):
        for name, _addr in NODES:
            control("POST", "/kubelets/%s/start" % name)
        k = ["get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}"]
        wait_for("every node Ready", lambda: self.k("kubectl-rootfs", *k).stdout.split() == ["True"] * 3, 100, 0.2)

    def test_deploy_and_samples_server_side(self):
        default = os.path.join(SOURCE, "deploy", "default")
        out = self.k("kubectl-rootfs", "apply", "--server-side", "-k", default).stdout
        objs = self.objects("kubectl-rootfs", default)
        self.assertEqual(out.count("serverside-applied"), len(objs), out)
        for o in objs:
            mf = [e for e in o["metadata"]["managedFields"] if e["operation"] == "Apply"]
            self.assertEqual([(e["manager"], e["apiVersion"], e["fieldsType"]) for e in mf], [("kubectl", o["apiVersion"], "FieldsV1")],
                             o["metadata"]["name"])
        rvs = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in objs}
        self.k("kubectl-rootfs", "apply", "--server-side", "-k", default)          # as a GitOps loop does, again and again
        self.assertEqual({(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in self.objects("kubectl-rootfs", default)}, rvs)
        dep = [o for o in objs if o["kind"] == "Deployment"][0]
        pods = json.loads(self.k("kubectl-rootfs", "get", "pods", "-n", dep["metadata"]["namespace"], "-o", "json").stdout)["items"]
        self.assertTrue(pods and all(not p["spec"].get("nodeName") for p in pods), pods)   # no Ready node: never bound
        # the samples, with kubectl 1.32
        self.k("kubectl-host", "apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "turn"}}))
        samples = sorted(f for f in os.listdir(os.path.join(SOURCE, "deploy", "samples")) if f.startswith("pool-"))
        self.assertGreaterEqual(len(samples), 5)
        for f in samples:
            path = os.path.join(SOURCE, "deploy", "samples", f)
            self.assertIn("serverside-applied", self.k("kubectl-host", "apply", "--server-side", "-f", path).stdout)
            want = json.loads(self.k("kubectl-host", "create", "--dry-run=client", "-o", "json", "-f", path).stdout)
            got = json.loads(self.k("kubectl-host", "get", "--show-managed-fields", "-o", "json", "-f", path).stdout)
            holds(self, got["spec"], want["spec"], f)
            self.assertEqual([(e["manager"], e["operation"]) for e in got["metadata"]["managedFields"]], [("kubectl", "Apply")], f)
            owned = got["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
            self.assertEqual(sorted(owned), sorted("f:" + k for k in want["spec"]), f)     # what was applied, not the defaults
        # another manager's change: a conflict, in kube-apiserver's words, until forced
        f = os.path.join(SOURCE, "deploy", "samples", samples[0])
        name = json.loads(self.k("kubectl-host", "get", "-o", "json", "-f", f).stdout)["metadata"]["name"]
        applied = json.loads(self.k("kubectl-host", "create", "--dry-run=client", "-o", "json", "-f", f).stdout)
        self.k("kubectl-host", "scale", "-n", "turn", "tp", name, "--replicas=%d" % (applied["spec"]["replicas"] + 1))
        self.k("kubectl-host", "label", "-n", "turn", "tp", name, "team=edge")
        p = self.k("kubectl-host", "apply", "--server-side", "-f", f, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertRegex(p.stderr, r'error: Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" '
                                   r'using turnfleet\.hzmi\.dev/v1alpha1 at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: \.spec\.replicas\n')
        self.assertIn("--force-conflicts", p.stderr)
        self.assertIn("serverside-applied", self.k("kubectl-host", "apply", "--server-side", "--force-conflicts", "-f", f).stdout)
        got = json.loads(self.k("kubectl-host", "get", "--show-managed-fields", "-o", "json", "-f", f).stdout)
        self.assertEqual(got["spec"]["replicas"], applied["spec"]["replicas"])
        self.assertEqual(sorted((e["manager"], e["operation"], e.get("subresource", "")) for e in got["metadata"]["managedFields"]),
                         [("kubectl", "Apply", ""), ("kubectl-label", "Update", "")])    # the scale entry owned nothing more
        # a field the manager no longer applies goes; one another manager owns stays
        cfg = copy.deepcopy(applied)
        cfg["metadata"].setdefault("labels", {})["gitops"] = "yes"
        self.k("kubectl-host", "apply", "--server-side", "-f", "-", input=json.dumps(cfg))
        self.assertEqual(json.loads(self.k("kubectl-host", "get", "-o", "json", "-f", f).stdout)["metadata"]["labels"],
                         dict(applied["metadata"].get("labels") or {}, gitops="yes", team="edge"))
        self.k("kubectl-host", "apply", "--server-side", "-f", f)
        self.assertEqual(json.loads(self.k("kubectl-host", "get", "-o", "json", "-f", f).stdout)["metadata"]["labels"],
                         dict(applied["metadata"].get("labels") or {}, team="edge"))
        # everything goes (pods never bound finish at once)
        for f in samples:
            self.k("kubectl-host", "delete", "--wait", "-f", os.path.join(SOURCE, "deploy", "samples", f))
        self.k("kubectl-rootfs", "delete", "--wait", "--timeout=60s", "--ignore-not-found", "-k", default)   # the namespace takes its contents


# ---- the acceptance story: coturn 4.18 from a Secret ------------------------

class CoturnAcceptance(unittest.TestCase):
    PORT = 62478

    def test_coturn_418_pod_allocates_and_prestop_runs(self):
        if not TURNFLEET or not TURNFLEET_PROBE:
            self.fail("TURNFLEET and TURNFLEET_PROBE are required (the build's turnfleet and turnfleet-probe)")
        k = CLIENTS["kubectl-rootfs"]
        home = tempfile.mkdtemp(prefix="acc-", dir=TMP)

        def kc(*a, input=None):
            p = subprocess.run([k, "--kubeconfig", kubeconfig(), "--cache-dir", home + "/cache", "-n", "acc"] + list(a),
                               input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, HOME=home), timeout=60)
            self.assertEqual(p.returncode, 0, "%s: %s" % (a, p.stderr))
            return p.stdout
        kc("create", "namespace", "acc")
        nodes = os.path.join(home, "nodes.json")
        with open(nodes, "w") as f:
            f.write(kc("get", "nodes", "-o", "json"))
        pool = os.path.join(home, "pool.yaml")
        with open(pool, "w") as f:
            f.write("metadata: {name: acc}\nspec:\n  replicas: 1\n  addressing: {mode: HostNetwork, family: IPv4}\n"
                    "  relayPortRange: {start: 62100, end: 62119}\n"
                    "  listeners:\n  - {name: turn, protocol: udp, port: %d}\n  - {name: turn-tcp, protocol: tcp, port: %d}\n"
                    "  auth: {realm: acc.turnfleet.test, secretRef: {name: acc-secret}}\n" % (self.PORT, self.PORT))
        secret = os.path.join(home, "secret")
        with open(secret, "w") as f:
            f.write("acc-secret-5b1f0e9a77c2\n")
        os.chmod(secret, 0o600)
        plan = json.loads(subprocess.run([TURNFLEET, "plan", "-f", pool, "--nodes", nodes, "-o", "json"], check=True,
                                         stdout=subprocess.PIPE, text=True).stdout)
        relays = plan.get("relays") or plan.get("desired") or []
        self.assertEqual(len(relays), 1, plan)
        relay = relays[0]
        name, node = relay["name"], relay.get("node") or relay.get("nodeName")
        addr = relay.get("address") or relay.get("relayAddress") or (relay.get("addresses") or [None])[0]
        conf = os.path.join(home, "turnserver.conf")
        subprocess.run([TURNFLEET, "render", "-f", pool, "--nodes", nodes, "--relay", name, "--secret-file", secret,
                        "--coturn-version", "4.18.0", "--state-dir", "/var/lib/turnfleet", "--out", conf], check=True)
        kc("create", "secret", "generic", name + "-config", "--from-file=turnserver.conf=" + conf)
        marker = tempfile.mkdtemp(dir=home)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"turnfleet.hzmi.dev/pool": "acc"}},
               "spec": {"nodeName": node, "hostNetwork": True, "terminationGracePeriodSeconds": 10, "containers": [
                   {"name": "coturn", "image": "registry.test/coturn/coturn:4.18",
                    "command": ["/bin/sh", "-c", "mkdir -p /var/lib/turnfleet/%s && exec turnserver -c /etc/turnfleet/turnserver.conf" % name],
                    "readinessProbe": {"tcpSocket": {"port": self.PORT}, "periodSeconds": 1},
                    "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "turnserver --version > /marker/prestop"]}}},
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/turnfleet", "readOnly": True},
                                     {"name": "state", "mountPath": "/var/lib/turnfleet"},
                                     {"name": "marker", "mountPath": "/marker"}]}],
                   "volumes": [{"name": "config", "secret": {"secretName": name + "-config", "defaultMode": 0o400}},
                               {"name": "state", "emptyDir": {}},
                               {"name": "marker", "hostPath": {"path": marker}}]}}
        kc("apply", "-f", "-", input=json.dumps(pod))
        kc("wait", "--for=condition=Ready", "--timeout=60s", "pod/" + name)
        uri = "turn:%s:%d?transport=udp" % (addr, self.PORT)
        p = subprocess.run([TURNFLEET_PROBE, "--uri", uri, "--secret-file", secret, "--expect-address", addr, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(json.loads(p.stdout.splitlines()[0])["ok"], p.stdout)
        kc("delete", "pod", name)
        self.assertEqual(open(os.path.join(marker, "prestop")).read().strip(), "4.18.0")    # the hook ran in the 4.18 root
        p = subprocess.run([TURNFLEET_PROBE, "--uri", uri, "--secret-file", secret, "--timeout-ms", "1000"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        self.assertEqual(p.returncode, 3)       # the relay is gone with its pod


# ---- each node its own network namespace (cluster.py --node-netns) ---------

NETNS_API = ("127.0.17.200", 37443)        # control 37444; pods listen on 37100 (127.0.0.1) and 37101 (any)
NETNS_NODES = [("m1", "127.0.17.1", "fd00:17::1"), ("m2", "127.0.17.2", "fd00:17::2")]

# a host-network pod: listens on its own 127.0.0.1:37100 and on every address at 37101 (answering its node's
# name), prints its addresses, which of the others' addresses it can bind, the API server's version (asked
# with its service-account token), and what the other node answers on 37101
NETNS_POD = r"""
import errno, json, os, signal, socket, ssl, sys, threading, urllib.request
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
node = os.environ["NODE"].encode()
def serve(s):
    while True:
        c, _ = s.accept(); c.sendall(node); c.close()
lo = socket.socket(); lo.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); lo.bind(("127.0.0.1", 37100)); lo.listen()
anyaddr = socket.socket(socket.AF_INET6); anyaddr.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
anyaddr.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); anyaddr.bind(("::", 37101)); anyaddr.listen()
for s in (lo, anyaddr):
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print("listening", flush=True)
print("addrs", " ".join(sorted(l.split()[3].split("/")[0] for l in os.popen("ip -o addr").read().splitlines()
                                if " scope link" not in l)), flush=True)
for other in os.environ["OTHERS"].split(","):
    t = socket.socket(socket.AF_INET6 if ":" in other else socket.AF_INET)
    try:
        t.bind((other, 0)); print("bind", other, "ok", flush=True)
    except OSError as e:
        print("bind", other, errno.errorcode.get(e.errno, e.errno), flush=True)
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
r = urllib.request.Request("https://%s:%s/version" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]),
                           headers={"Authorization": "Bearer " + open(sa + "token").read()})
try:
    v = json.load(urllib.request.urlopen(r, context=ssl.create_default_context(cafile=sa + "ca.crt"), timeout=10))
    print("api", v["major"] + "." + v["minor"], flush=True)
except Exception as e:
    print("api", e, flush=True)
for peer in os.environ["PEERS"].split(","):
    for _ in range(100):
        try:
            print("peer", peer, socket.create_connection((peer, 37101), 2).recv(64).decode(), flush=True)
            break
        except OSError:
            threading.Event().wait(0.1)     # the peer's pod may not listen yet
    else:
        print("peer", peer, "unreachable", flush=True)
threading.Event().wait()
"""


def _host_net():
    """The stand-in's names (prefix tfk) among the host's namespaces and links."""
    ns = {l.split()[0] for l in subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout.splitlines() if l.startswith("tfk")}
    links = {l.split(":")[1].strip().split("@")[0] for l in subprocess.run(["ip", "-o", "link"], stdout=subprocess.PIPE, text=True).stdout.splitlines()}
    return ns | {l for l in links if l.startswith("tfk")}


class NodeNetworks(unittest.TestCase):
    """cluster.py --node-netns, on its own launcher (127.0.17.200:37443, nodes 127.0.17.1-2, fd00:17::1-2)."""

    def launch(self, d, nodes):
        cmd = [sys.executable, os.path.join(HERE, "cluster.py"), "--dir", d, "--address", NETNS_API[0], "--port", str(NETNS_API[1]),
               "--node-netns", "--heartbeat", "1", "--shutdown-grace", "3"]
        for n in nodes:
            cmd += ["--node", n]
        log = open(d + ".log", "wb")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        def stop():           # a failed test still stops it in order (its namespaces removed)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.addCleanup(stop)
        wait_for("the netns cluster", lambda: os.path.exists(d + "/ready") or p.poll() is not None, 600)
        self.assertIsNone(p.poll(), open(d + ".log").read())
        return p

    def k(self, d, *args, input=None):
        p = subprocess.run([CLIENTS["kubectl-rootfs"], "--kubeconfig", d + "/kubeconfig", "--cache-dir", d + ".cache"] + list(args),
                           input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, "kubectl %s: %s%s" % (" ".join(args), p.stdout, p.stderr))
        return p.stdout

    def test_nodes_have_their_own_network(self):
        base = _host_net()
        top = tempfile.mkdtemp(prefix="netns-", dir=TMP)
        # a launcher killed outright leaves its namespaces behind ...
        dead = self.launch(top + "/dead", ["gone=127.0.17.1"])
        self.k(top + "/dead", "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "idle"},
               "spec": {"nodeName": "gone", "containers": [{"name": "c", "image": "debian:bookworm", "command": ["/bin/sleep", "1000"]}]}}))
        self.k(top + "/dead", "wait", "--for=condition=Ready", "--timeout=30s", "pod/idle")
        dead.kill()
        dead.wait()
        left = _host_net() - base
        self.assertTrue(any(n.endswith("-gone") for n in left), left)
        # ... which the next launcher on that address and port removes before it makes its own
        d = top + "/c"
        p = self.launch(d, ["%s=%s,%s" % n for n in NETNS_NODES])
        self.assertFalse([n for n in _host_net() if n.endswith("-gone")])
        pods = []
        for name, v4, v6 in NETNS_NODES:
            others = [a for n in NETNS_NODES if n[0] != name for a in n[1:]]
            env = {"NODE": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-" + name}, "spec": {
                "nodeName": name, "hostNetwork": True, "terminationGracePeriodSeconds": 5, "containers": [{
                    "name": "c", "image": "debian:bookworm", "command": ["/usr/bin/python3", "-c", NETNS_POD],
                    "env": [{"name": k, "valueFrom": v} for k, v in env.items()] +
                           [{"name": "OTHERS", "value": ",".join(others)}, {"name": "PEERS", "value": ",".join(others)}],
                    # an exec probe runs in the pod's network: its 127.0.0.1:37100 answers with its own node's name
                    "readinessProbe": {"periodSeconds": 1, "exec": {"command": ["/usr/bin/python3", "-c",
                        "import os, socket, sys; sys.exit(socket.create_connection(('127.0.0.1', 37100), 2).recv(64).decode() != os.environ['NODE'])"]}}}]}})
        self.k(d, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
        self.k(d, "wait", "--for=condition=Ready", "--timeout=60s", "pod/on-m1", "pod/on-m2")
        for name, v4, v6 in NETNS_NODES:
            others = [a for n in NETNS_NODES if n[0] != name for a in n[1:]]
            want = ["listening", "addrs " + " ".join(sorted(["127.0.0.1", v4, "::1", v6]))] + \
                   ["bind %s EADDRNOTAVAIL" % a for a in others] + ["api 1.32"] + \
                   ["peer %s %s" % (a, n[0]) for n in NETNS_NODES if n[0] != name for a in n[1:]]
            log = wait_for("on-%s's checks" % name, lambda: (l := self.k(d, "logs", "on-" + name)).count("\n") >= len(want) and l)
            self.assertEqual(log.splitlines(), want)
            # the host (here the test) reaches each node's addresses
            for a in (v4, v6):
                self.assertEqual(socket.create_connection((a, 37101), 5).recv(64).decode(), name)
            self.assertEqual(self.k(d, "get", "pod", "on-" + name, "-o", "jsonpath={.status.podIP}"), v4)
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        self.assertEqual(p.returncode, 0, open(d + ".log").read())
        self.assertEqual(_host_net() - base, set())
        route = subprocess.run(["ip", "route", "get", NETNS_NODES[0][1]], stdout=subprocess.PIPE, text=True).stdout
        self.assertIn("dev lo", route)


# ---- the launcher stops everything -----------------------------------------

def _describe(pid):
    try:
        state = [l for l in open("/proc/%d/status" % pid) if l.startswith(("State", "PPid"))]
        return "%d %s %s" % (pid, open("/proc/%d/cmdline" % pid).read().replace("\0", " "), " ".join(x.strip() for x in state))
    except OSError:
        return "%d gone" % pid


class ZLauncherLeavesNothing(unittest.TestCase):
    def test_sigkill_of_the_launcher_takes_its_containers(self):
        """Even a launcher killed outright leaves no container running."""
        d = tempfile.mkdtemp(prefix="killed-", dir=TMP)
        log = open(os.path.join(d, "log"), "wb")
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "cluster.py"), "--dir", d + "/c", "--address", "127.0.0.206",
                              "--port", "16446", "--node", "k1=127.0.0.206", "--heartbeat", "1"],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        kids = {}
        try:
            wait_for("the second cluster", lambda: os.path.exists(d + "/c/ready") or p.poll() is not None, 600)
            self.assertIsNone(p.poll(), open(d + "/log").read())
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan"}, "spec": {"nodeName": "k1", "containers": [
                {"name": "c", "image": "debian:bookworm", "command": ["/bin/sh", "-c", "sleep 1000 & sleep 1000"]}]}}
            k = [CLIENTS["kubectl-rootfs"], "--kubeconfig", d + "/c/kubeconfig", "--cache-dir", d + "/cache"]
            subprocess.run(k + ["apply", "-f", "-"], input=json.dumps(pod), text=True, check=True, stdout=subprocess.DEVNULL)
            subprocess.run(k + ["wait", "--for=condition=Ready", "--timeout=30s", "pod/orphan"], check=True, stdout=subprocess.DEVNULL)
            kids = proctree.descendants(p.pid)
            self.assertGreaterEqual(len(kids), 4, kids)
        finally:
            p.kill()
            p.wait()
        # the kernel kills them (PR_SET_PDEATHSIG); what is left may be a zombie for init to reap
        wait_for("the containers dead", lambda: not [x for x in proctree.running(kids) if x[1] != "Z"], 100)

    def test_sigterm_stops_every_pod_and_process(self):
        k = CLIENTS["kubectl-rootfs"]
        home = tempfile.mkdtemp(prefix="end-", dir=TMP)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stubborn"},
               "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 60, "containers": [
                   {"name": "c", "image": "debian:bookworm", "command": ["/bin/sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000"]}]}}
        subprocess.run([k, "--kubeconfig", kubeconfig(), "--cache-dir", home, "apply", "-f", "-"], input=json.dumps(pod),
                       check=True, text=True, stdout=subprocess.DEVNULL)
        subprocess.run([k, "--kubeconfig", kubeconfig(), "--cache-dir", home, "wait", "--for=condition=Ready", "--timeout=30s", "pod/stubborn"],
                       check=True, stdout=subprocess.DEVNULL)
        kids = proctree.descendants(CLUSTER.pid)
        self.assertGreaterEqual(len(kids), 4, kids)   # the pod's helper, its shell and two sleeps at least
        CLUSTER.send_signal(signal.SIGTERM)
        CLUSTER.wait(60)
        self.assertEqual(CLUSTER.returncode, 0)
        after = proctree.proc_table()
        left = [pid for pid, start in kids.items() if pid in after and after[pid][1] == start]
        self.assertEqual(left, [], [_describe(p) for p in left])
        self.assertFalse(os.path.exists(os.path.join(cluster_dir(), "ready")))


def main():
    global TURNFLEET, TURNFLEET_PROBE
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if len(args) >= 2:
        TURNFLEET, TURNFLEET_PROBE = os.path.abspath(args[0]), os.path.abspath(args[1])
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for cls in (PythonClient, Kubectl120, KubectlRootfs, KubectlHost, ServerSideApply, CoturnAcceptance, NodeNetworks,
                ZLauncherLeavesNothing):
        if cls is KubectlHost and not os.path.exists("/usr/bin/kubectl"):
            continue      # "the machine's own kubectl when present"
        suite.addTests(loader.loadTestsFromTestCase(cls))
    only = os.environ.get("TF_KUBE_ONLY")
    if only:
        keys = only.split(",")
        suite = unittest.TestSuite([t for t in _flatten(suite) if any(k in t.id() for k in keys) or "ZLauncher" in t.id()])
    r = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if r.wasSuccessful() else 1)


def _flatten(s):
    for t in s:
        if isinstance(t, unittest.TestSuite):
            yield from _flatten(t)
        else:
            yield t


if __name__ == "__main__":
    main()
