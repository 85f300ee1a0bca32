"""A pool run by turnfleet-operator on the API stand-in, its relay pods real coturn processes run by the
stand-in's kubelets; turnfleet-issuer reads it through its informers (on the ServiceAccount token and RBAC
of deploy/issuer) and headless Chromium, configured only from the issuer's answer, carries a relay-only
data channel through each relay, and so does aiortc; then a scale-down: the next answer lacks the draining
relay.

Reuses the operator end-to-end suite's helpers (tests/operator/test_operator_e2e.py) on this test's own
addresses: stand-in API 127.0.6.40:26520 (control 26521), nodes n1-n2 on 127.0.6.41-42 (relay addresses,
TURN 26401, relays 26410-26449, agents 26950), operator metrics 127.0.6.40:26530, coturn CLIs on 127.0.0.1
26900-26999, issuer 127.0.6.1:26582, page 127.0.6.1:26583. The operator renders allow-loopback-peers (the
browser's two peers relay to each other's loopback addresses). Needs root.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "operator"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "dev"))
import test_operator_e2e as e2e  # noqa: E402
from browser_call import PageServer, check, page_url, run_chromium  # noqa: E402
from fleet import ISSUER, get, wait_for  # noqa: E402
import test_issuer_aiortc as rtc  # noqa: E402  (aiortc, relay-only; its TestCase is not collected here)

e2e.API_ADDR, e2e.API_PORT = "127.0.6.40", 26520
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = [("n1", "127.0.6.41"), ("n2", "127.0.6.42")]
e2e.METRICS = ["%s:26530" % e2e.API_ADDR, "%s:26531" % e2e.API_ADDR]
e2e.NS = "tfissuer"
POOL = "call"
ISSUER_ADDR, PAGE = "127.0.6.1:26582", "127.0.6.1:26583"
TOKEN = "operator-issuer-token-3e8d"


def pool_yaml(replicas):
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: %d\n  dataplane: {image: \"coturn/coturn:%s\", coturnVersion: \"%s\"}\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n  relayPortRange: {start: 26410, end: 26449}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 26401}\n  - {name: turn-tcp, protocol: tcp, port: 26401}\n"
            "  auth:\n    realm: call.turnfleet.test\n    secretRef: {name: %s-secret, key: secret}\n"
            "  drainTimeout: 30s\n" % (POOL, e2e.NS, replicas, e2e.VERSION, e2e.VERSION, POOL))


class TestIssuerOperator(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        build = os.environ.get("TF_BUILD_DIR") or os.path.join(SOURCE, "build")
        e2e.BUILD = os.path.abspath(build)
        e2e.VERSION = os.environ.get("TF_TEST_COTURN_VERSION") or "4.6.1"
        e2e.OPERATOR = os.path.join(e2e.BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
        e2e.PROBE = os.path.join(e2e.BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
        cls.issuer = cls.page = None
        cls.tmp = tempfile.mkdtemp(prefix="tf-issuer-operator-")
        e2e.setUpModule()
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls):
        e2e.start_operator("a", "--cli-port", "26900", "--agent-port", "26950", "--allow-loopback-peers")
        wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        e2e.kubectl("create", "secret", "generic", "-n", e2e.NS, POOL + "-secret", "--from-literal=secret=s3cr3t-call-91")
        e2e.kubectl("apply", "-f", "-", input=pool_yaml(2))
        e2e.OperatorE2E("test_01_pool_becomes_ready_and_every_relay_allocates").converged(2, pool=POOL)
        for f in ("deploy/issuer/serviceaccount.yaml", "deploy/issuer/rbac.yaml"):
            e2e.kubectl("apply", "-f", os.path.join(SOURCE, f))
        token = e2e.kubectl("create", "token", "-n", "turnfleet-system", "turnfleet-issuer",
                            "--duration=1h").stdout.strip()
        with open(os.path.join(e2e.TMP, "cluster", "kubeconfig")) as f:
            kc = json.load(f)
        kc["users"] = [{"name": "issuer", "user": {"token": token}}]
        kc["contexts"][0]["context"]["user"] = "issuer"
        kcp = os.path.join(cls.tmp, "issuer.kubeconfig")
        with open(kcp, "w") as f:
            json.dump(kc, f)
        os.chmod(kcp, 0o600)
        cls.tokens = os.path.join(cls.tmp, "tokens")
        with open(cls.tokens, "w") as f:
            f.write(TOKEN + "\n")
        cls.log = open(os.path.join(cls.tmp, "issuer.log"), "w+")
        cls.issuer = subprocess.Popen([ISSUER, "--listen", ISSUER_ADDR, "--kubeconfig", kcp, "--namespace", e2e.NS,
                                       "--tokens-file", cls.tokens, "--cors-origin", "http://" + PAGE,
                                       "--max-relays", "2", "--rate", "1000", "--burst", "1000"], stdout=cls.log, stderr=subprocess.STDOUT)

        def ready():
            if cls.issuer.poll() is not None:
                raise AssertionError("the issuer exited %s" % cls.issuer.returncode)
            try:
                return get("http://%s/readyz" % ISSUER_ADDR)[0] == 200
            except OSError:
                return False
        wait_for("the issuer", ready, 30)
        cls.page = PageServer(PAGE)

    @classmethod
    def tearDownClass(cls):
        if cls.page:
            cls.page.stop()
        if cls.issuer and cls.issuer.poll() is None:
            e2e.stop(cls.issuer)
        if getattr(cls, "log", None):
            cls.log.close()
        e2e.tearDownModule()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def addresses(self):
        return sorted(p["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
                      for p in e2e.live(e2e.relay_pods(POOL)))

    def ice_hosts(self, user):
        code, _, body = get("http://%s/ice?pool=%s&user=%s" % (ISSUER_ADDR, POOL, user),
                            {"Authorization": "Bearer " + TOKEN})
        self.assertEqual(code, 200, body)
        return sorted(urllib.parse.urlsplit(s["urls"][0].replace("turn:", "turn://", 1)).hostname
                      for s in json.loads(body)["iceServers"])

    def test_1_browser_call_through_each_operator_relay(self):
        self.assertEqual(self.ice_hosts("browser"), self.addresses())
        profile = os.path.join(self.tmp, "chromium")
        os.makedirs(profile, exist_ok=True)
        result = run_chromium(page_url(PAGE, "http://" + ISSUER_ADDR, POOL, "browser", TOKEN), profile,
                              lambda: self.page.results, 120)[0]
        if os.environ.get("TF_TEST_VERBOSE"):
            print(json.dumps(result, indent=1), file=sys.stderr)
        self.assertEqual(check(result, 2), [], result)
        hosts = sorted(urllib.parse.urlsplit(c["urls"][0].replace("turn:", "turn://", 1)).hostname
                       for c in result["calls"])
        self.assertEqual(hosts, self.addresses())
        for c in result["calls"]:
            for side in ("local", "remote"):
                self.assertTrue(26410 <= c[side]["port"] <= 26449, c)

    def test_2_aiortc_call_through_each_operator_relay(self):
        code, _, body = get("http://%s/ice?pool=%s&user=aiortc&transport=udp" % (ISSUER_ADDR, POOL),
                            {"Authorization": "Bearer " + TOKEN})
        self.assertEqual(code, 200, body)
        seen = []
        for i, server in enumerate(json.loads(body)["iceServers"]):
            host = urllib.parse.urlsplit(server["urls"][0].replace("turn:", "turn://", 1)).hostname
            r = rtc.asyncio.run(rtc.call(server, "hello %d" % i))
            self.assertEqual(r["received"], "hello %d" % i, r)
            for kind, addr, port in (r["local"], r["remote"]):
                self.assertEqual((kind, addr), ("relay", host), r)
                self.assertTrue(26410 <= port <= 26449, r)
            seen.append(host)
        self.assertEqual(sorted(seen), self.addresses())

    def test_3_scale_down_leaves_the_next_answers(self):
        before = self.addresses()
        self.assertEqual(len(before), 2)
        e2e.kubectl("scale", "-n", e2e.NS, "turnpool", POOL, "--replicas=1")
        # the operator takes the leaving relay out of <pool>-turn-uris first; once it is out, no answer names it
        wait_for("a relay out of the turn-uris", lambda: len(e2e.uris(POOL) or []) == 2, 60)
        published = {u.split(":")[1] for u in e2e.uris(POOL)}
        gone = set(before) - published
        self.assertEqual(len(gone), 1, (before, published))
        wait_for("answers without the leaving relay", lambda: not (set(self.ice_hosts("browser")) & gone), 20)
        for i in range(20):
            self.assertFalse(set(self.ice_hosts("user%d" % i)) & gone)


if __name__ == "__main__":
    unittest.main(verbosity=2)
