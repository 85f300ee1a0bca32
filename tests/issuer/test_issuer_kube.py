"""turnfleet-issuer's Kubernetes source on the API stand-in (tests/kube), driven with real kubectl: the
manifests of deploy/issuer and deploy/with-issuer read the same with every kubectl; the issuer runs on
its ServiceAccount's token with deploy/issuer's read-only RBAC (the stand-in enforces it: a write is
forbidden); the answers follow the TURNPool's status, the `<pool>-turn-uris` ConfigMap and the auth
Secret as they change (a draining relay leaves the answers after the watch event; a rotated secret mints
the next credential). No relays run here: the status and ConfigMap are written as the operator writes
them; real relays are the other issuer tests'.

Loopback 127.0.6.50 (stand-in API 26500, control 26501), 127.0.6.1 (issuer 26580). Needs root (the
stand-in's launcher) and the kubectl binaries tests/kube/clients.sh names.
"""
import base64
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import shutil

sys.path.insert(0, os.path.dirname(__file__))
from fleet import ISSUER, get, wait_for  # noqa: E402

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
API_ADDR, API_PORT = "127.0.6.50", 26500
ISSUER_ADDR = "127.0.6.1:26580"
NS, POOL = "media", "edge"
TOKEN = "kube-issuer-token-77a1"
S1, S2 = "kube-secret-one-4b0e", "kube-secret-two-c91f"
RELAYS = [("edge-relay-bbbbb", "198.51.100.1"), ("edge-relay-ccccc", "198.51.100.2"),
          ("edge-relay-ddddd", "198.51.100.3")]


def kubectls():
    p = subprocess.run([os.path.join(SOURCE, "tests", "kube", "clients.sh")], capture_output=True, text=True)
    found = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    if p.returncode != 0 or "kubectl-rootfs" not in found:
        raise AssertionError("no kubectl: tests/kube/clients.sh failed: %s" % p.stderr.strip())
    return found


def valid(secret, username, password):
    want = base64.b64encode(hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()).decode()
    return hmac.compare_digest(want, password) and int(username.split(":")[0]) >= int(time.time())


def ice_servers(published):
    return json.dumps([{"urls": ["turn:%s:3478?transport=udp" % a, "turn:%s:3478?transport=tcp" % a]}
                       for _, a in RELAYS if a in published])


def status(draining=()):
    return {"status": {"replicas": 3, "readyRelays": 3 - len(draining), "relays": [
        {"name": n, "relayAddress": a, "portRange": {"start": 49152, "end": 49251}, "ready": True,
         "draining": a in draining, "allocations": 5 * i, "portsInUse": 5 * i, "portsTotal": 100,
         "lastProbe": None, "state": "Draining" if a in draining else "Ready", "restarts": 0}
        for i, (n, a) in enumerate(RELAYS)]}}


class TestIssuerKube(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kubectls = kubectls()
        cls.kubectl_path = cls.kubectls["kubectl-rootfs"]
        cls.tmp = tempfile.mkdtemp(prefix="tf-issuer-kube-")
        cls.cluster = cls.issuer = None
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls):
        d = os.path.join(cls.tmp, "cluster")
        cls.cluster_log = open(os.path.join(cls.tmp, "cluster.log"), "w+")
        cls.cluster = subprocess.Popen(
            [sys.executable, os.path.join(SOURCE, "tests", "kube", "cluster.py"), "--dir", d, "--address", API_ADDR,
             "--port", str(API_PORT), "--bookmark-interval", "1", "--shutdown-grace", "3"],
            stdout=cls.cluster_log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for("the stand-in", lambda: os.path.exists(os.path.join(d, "ready")) or cls.cluster.poll() is not None, 120)
        if cls.cluster.poll() is not None:
            raise AssertionError("cluster.py exited %s" % cls.cluster.returncode)
        cls.admin = os.path.join(d, "kubeconfig")
        cls.kubectl("apply", "-f", os.path.join(SOURCE, "deploy", "crd", "turnpools.yaml"))
        cls.kubectl("wait", "--for", "condition=established", "--timeout=30s", "crd/turnpools.turnfleet.hzmi.dev")
        for f in ("deploy/rbac/namespace.yaml", "deploy/issuer/serviceaccount.yaml", "deploy/issuer/rbac.yaml"):
            cls.kubectl("apply", "-f", os.path.join(SOURCE, f))
        cls.kubectl("create", "namespace", NS)
        cls.kubectl("create", "secret", "generic", "turn-shared-secret", "--from-literal=secret=" + S1, ns=NS)
        pool = {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
                "metadata": {"name": POOL, "namespace": NS},
                "spec": {"replicas": 3, "dataplane": {"image": "coturn/coturn:4.18.0", "coturnVersion": "4.18.0"},
                         "addressing": {"mode": "HostNetwork", "family": "IPv4"},
                         "relayPortRange": {"start": 49152, "end": 49251},
                         "listeners": [{"name": "turn", "protocol": "udp", "port": 3478},
                                       {"name": "turn-tcp", "protocol": "tcp", "port": 3478}],
                         "auth": {"realm": "turn.example.com",
                                  "secretRef": {"name": "turn-shared-secret", "key": "secret"}}}}
        cls.kubectl("apply", "-f", "-", input=json.dumps(pool))
        cls.write_configmap([a for _, a in RELAYS])
        cls.write_status(())
        # the issuer on its ServiceAccount's token: what deploy/issuer/rbac.yaml grants, nothing more
        token = cls.kubectl("create", "token", "-n", "turnfleet-system", "turnfleet-issuer", "--duration=1h").stdout.strip()
        with open(cls.admin) as f:
            kc = json.load(f)
        kc["users"] = [{"name": "issuer", "user": {"token": token}}]
        kc["contexts"][0]["context"]["user"] = "issuer"
        cls.issuer_kc = os.path.join(cls.tmp, "issuer.kubeconfig")
        with open(cls.issuer_kc, "w") as f:
            json.dump(kc, f)
        os.chmod(cls.issuer_kc, 0o600)
        cls.tokens = os.path.join(cls.tmp, "tokens")
        with open(cls.tokens, "w") as f:
            f.write(TOKEN + "\n")
        cls.issuer_log = open(os.path.join(cls.tmp, "issuer.log"), "w+")
        cls.issuer = subprocess.Popen([ISSUER, "--listen", ISSUER_ADDR, "--kubeconfig", cls.issuer_kc, "--tokens-file",
                                       cls.tokens, "--max-relays", "3", "--rate", "1000", "--burst", "1000"], stdout=cls.issuer_log, stderr=subprocess.STDOUT)

        def ready():
            if cls.issuer.poll() is not None:
                cls.issuer_log.seek(0)
                raise AssertionError("the issuer exited %s: %s" % (cls.issuer.returncode, cls.issuer_log.read()))
            try:
                return get("http://%s/readyz" % ISSUER_ADDR)[0] == 200
            except OSError:
                return False
        wait_for("the issuer's caches", ready, 30)

    @classmethod
    def kubectl(cls, *args, ns=None, input=None, kubeconfig=None, check=True, path=None):
        cmd = [path or cls.kubectl_path, "--kubeconfig", kubeconfig or cls.admin, "--cache-dir",
               os.path.join(cls.tmp, "kcache")]
        if ns:
            cmd += ["-n", ns]
        p = subprocess.run(cmd + list(args), input=input, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=cls.tmp))
        if check and p.returncode != 0:
            raise AssertionError("kubectl %s: %s" % (" ".join(args), p.stderr))
        return p

    @classmethod
    def write_configmap(cls, published):
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": POOL + "-turn-uris", "namespace": NS,
                           "labels": {"turnfleet.hzmi.dev/pool": POOL, "app.kubernetes.io/managed-by": "turnfleet-operator"}},
              "data": {"uris": "".join("turn:%s:3478?transport=udp\n" % a for _, a in RELAYS if a in published),
                       "iceServers.json": ice_servers(published)}}
        cls.kubectl("apply", "-f", "-", input=json.dumps(cm))

    @classmethod
    def write_status(cls, draining):
        cls.kubectl("patch", "turnpool", POOL, "--subresource=status", "--type=merge", "-p", json.dumps(status(draining)),
                    ns=NS)

    @classmethod
    def tearDownClass(cls):
        for p in (cls.issuer, cls.cluster):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for f in ("cluster_log", "issuer_log"):
            if hasattr(cls, f):
                getattr(cls, f).close()
        if os.environ.get("TF_KEEP_TMP"):
            print("kept", cls.tmp, file=sys.stderr)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def ice(self, user, pool=NS + "/" + POOL):
        return get("http://%s/ice?pool=%s&user=%s" % (ISSUER_ADDR, pool, user), {"Authorization": "Bearer " + TOKEN})

    def addresses(self, body):
        return sorted(s["urls"][0].split(":")[1] for s in json.loads(body)["iceServers"])

    def test_1_manifests_read_the_same_with_every_kubectl(self):
        for overlay in ("issuer", "with-issuer"):
            seen = {}
            for name, k in sorted(self.kubectls.items()):
                p = subprocess.run([k, "kustomize", os.path.join(SOURCE, "deploy", overlay)], capture_output=True,
                                   text=True, env=dict(os.environ, HOME=self.tmp))
                self.assertEqual(p.returncode, 0, (name, overlay, p.stderr))
                import yaml
                seen[name] = sorted((d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(p.stdout) if d)
            first = next(iter(seen.values()))
            self.assertTrue(all(v == first for v in seen.values()), seen)
            for want in (("ClusterRole", "turnfleet-issuer"), ("Deployment", "turnfleet-issuer"),
                         ("Service", "turnfleet-issuer"), ("ServiceAccount", "turnfleet-issuer")):
                self.assertIn(want, first, overlay)
        self.assertIn(("Certificate", "turnfleet-issuer"), first)
        self.assertIn(("Deployment", "turnfleet-operator"), first)  # with-issuer is deploy/default plus the issuer

    def test_2_answers_from_the_pool_status_and_turn_uris(self):
        code, _, body = self.ice("alice")
        self.assertEqual(code, 200, body)
        self.assertEqual(self.addresses(body), [a for _, a in RELAYS])
        ans = json.loads(body)
        # least loaded first: the status gives relay 0 the most free ports
        self.assertEqual(ans["iceServers"][0]["urls"][0], "turn:198.51.100.1:3478?transport=udp")
        for s in ans["iceServers"]:
            self.assertTrue(valid(S1, s["username"], s["credential"]), s)
        code, _, body = self.ice("alice", pool=NS + "/nope")
        self.assertEqual(code, 404)
        self.assertIn("pool: no TURNPool media/nope", body)
        code, _, body = self.ice("alice", pool=POOL)  # no namespace: the kubeconfig's, "default"
        self.assertEqual(code, 404)
        self.assertIn("default/edge", body)

    def test_3_the_issuer_cannot_write_and_reads_only_as_its_informers_do(self):
        p = self.kubectl("create", "configmap", "x", ns=NS, kubeconfig=self.issuer_kc, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("forbidden", p.stderr.lower())
        # list (and watch), the verbs its informers send; no `get` of one object (deploy/issuer grants none)
        p = self.kubectl("get", "secrets", ns=NS, kubeconfig=self.issuer_kc, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("turn-shared-secret", p.stdout)
        p = self.kubectl("get", "secret", "turn-shared-secret", ns=NS, kubeconfig=self.issuer_kc, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("forbidden", p.stderr.lower())

    def test_4_a_draining_relay_leaves_the_next_answers(self):
        gone = RELAYS[1][1]
        # as the operator does it: out of the turn-uris first, then the status says draining
        self.write_configmap([a for _, a in RELAYS if a != gone])
        self.write_status((gone,))
        wait_for("an answer without the draining relay", lambda: gone not in self.addresses(self.ice("bob")[2]), 20)
        for i in range(20):
            code, _, body = self.ice("user%d" % i)
            self.assertEqual(code, 200, body)
            self.assertNotIn(gone, self.addresses(body))
        # ready again and published again: back in the answers after both watch events
        self.write_configmap([a for _, a in RELAYS])
        self.write_status(())
        wait_for("the relay back once ready again", lambda: gone in self.addresses(self.ice("bob")[2]), 20)

    def test_5_a_rotated_secret_mints_the_next_credential(self):
        self.kubectl("patch", "secret", "turn-shared-secret", "--type=merge", "-p",
                     json.dumps({"stringData": {"secret": S2, "previous": S1}}), ns=NS)

        def rotated():
            s = json.loads(self.ice("carol")[2])["iceServers"][0]
            return valid(S2, s["username"], s["credential"])
        wait_for("credentials from the new secret", rotated, 20)
        s = json.loads(self.ice("carol")[2])["iceServers"][0]
        self.assertFalse(valid(S1, s["username"], s["credential"]))

    def test_6_metrics_per_pool(self):
        self.ice("dave")
        code, _, m = get("http://%s/metrics" % ISSUER_ADDR)
        self.assertEqual(code, 200)
        self.assertIn('turnfleet_issuer_answers_total{namespace="media",pool="edge",form="ice"}', m)
        self.assertIn('turnfleet_issuer_relays_handed_out_total{namespace="media",pool="edge",relay="edge-relay-bbbbb"}', m)
        self.assertIn('turnfleet_issuer_denials_total{reason="not_found"}', m)


if __name__ == "__main__":
    unittest.main(verbosity=2)
