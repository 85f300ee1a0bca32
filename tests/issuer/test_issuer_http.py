"""turnfleet-issuer over HTTP against a `turnfleet up` fleet of real coturn relays: who may ask (bearer
tokens re-read on change, CORS allow-list, per-client rate limit with Retry-After), bad requests named
by field, answers that verify as coturn's credentials, and a scale-down: once the status shows a relay
draining, no later answer names it. Bad flags exit 2.

Loopback 127.0.6.21-23 (relays), 127.0.6.1 (issuer 26280, a rate-limited second issuer 26281, up's
metrics 26290), clients 127.0.6.41-44; ports 26201 (TURN), 26220+ (coturn CLI, on 127.0.0.1 as up
renders it), relays 26240-26279.
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from fleet import ISSUER, SECRET, TOKEN, Fleet, wait_for  # noqa: E402

ORIGIN = "https://app.example.test"


def ask(port, path, source, headers=None, method="GET"):
    """(status, headers dict with lower-case names, body) of one request from the client address @p source."""
    c = http.client.HTTPConnection("127.0.6.1", port, timeout=10, source_address=(source, 0))
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


def bearer(token=TOKEN):
    return {"Authorization": "Bearer " + token}


def coturn_accepts(username, password, now):
    """coturn's use-auth-secret check: the expiry is not past and the password is HMAC-SHA1(secret, username)."""
    want = base64.b64encode(hmac.new(SECRET.encode(), username.encode(), hashlib.sha1).digest()).decode()
    return int(username.split(":")[0]) >= now and hmac.compare_digest(want, password)


class TestIssuerHttp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet("edge", "127.0.6.21-23", 26201, 26240, 26279, "127.0.6.1:26290", 26220,
                          "127.0.6.1:26280", replicas=3, drain="30s",
                          issuer_args=["--cors-origin", ORIGIN, "--max-relays", "3", "--rate", "1000",
                                       "--burst", "1000"])
        try:
            cls.fleet.start()
        except BaseException:
            cls.fleet.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.fleet.stop()

    def get(self, path, source="127.0.6.42", headers=None, method="GET"):
        return ask(26280, path, source, headers, method)

    def test_1_answers_verify_as_coturn_credentials(self):
        code, h, body = self.get("/ice?pool=edge&user=alice", headers=bearer())
        self.assertEqual(code, 200, body)
        self.assertEqual(h["content-type"], "application/json")
        self.assertEqual(h["cache-control"], "no-store")
        self.assertNotEqual(h.get("connection", "").lower(), "close", "no keep-alive")
        ans = json.loads(body)
        self.assertEqual(ans["ttl"], 3600)
        self.assertEqual(len(ans["iceServers"]), 3)
        for s in ans["iceServers"]:
            self.assertTrue(s["username"].endswith(":alice"))
            self.assertTrue(coturn_accepts(s["username"], s["credential"], int(time.time())), s)
        # the draft's REST form, the token as its `key`, a namespace, a shorter ttl, a transport filter
        code, _, body = self.get("/?service=turn&username=bob&pool=default/edge&ttl=600&transport=tcp&key=" + TOKEN)
        self.assertEqual(code, 200, body)
        rest = json.loads(body)
        self.assertEqual(sorted(rest), ["password", "ttl", "uris", "username"])
        self.assertEqual(rest["ttl"], 600)
        self.assertTrue(rest["uris"] and all(u.endswith("?transport=tcp") for u in rest["uris"]), rest)
        self.assertTrue(coturn_accepts(rest["username"], rest["password"], int(time.time())))
        # the same user keeps the same relays (in whatever load order)
        again = json.loads(self.get("/ice?pool=edge&user=alice", headers=bearer())[2])
        self.assertEqual(sorted(s["urls"][0] for s in again["iceServers"]),
                         sorted(s["urls"][0] for s in ans["iceServers"]))

    def test_2_no_or_wrong_token_is_401_and_the_file_is_re_read(self):
        code, h, _ = self.get("/ice?pool=edge&user=alice")
        self.assertEqual(code, 401)
        self.assertEqual(h.get("www-authenticate"), "Bearer")
        self.assertEqual(self.get("/ice?pool=edge&user=alice", headers=bearer("nope"))[0], 401)
        self.assertEqual(self.get("/?service=turn&username=a&pool=edge&key=nope")[0], 401)
        try:
            self.fleet.write_tokens("rotated-token-1")
            wait_for("the new token to be accepted",
                     lambda: self.get("/ice?pool=edge&user=alice", headers=bearer("rotated-token-1"))[0] == 200, 10)
            self.assertEqual(self.get("/ice?pool=edge&user=alice", headers=bearer())[0], 401)
        finally:
            self.fleet.write_tokens(TOKEN)
            wait_for("the test token again", lambda: self.get("/ice?pool=edge&user=a", headers=bearer())[0] == 200, 10)

    def test_3_cors_only_for_listed_origins(self):
        pre = {"Origin": ORIGIN, "Access-Control-Request-Method": "GET",
               "Access-Control-Request-Headers": "authorization"}
        code, h, _ = self.get("/ice?pool=edge&user=alice", headers=pre, method="OPTIONS")
        self.assertEqual(code, 204)
        self.assertEqual(h.get("access-control-allow-origin"), ORIGIN)
        self.assertIn("Authorization", h.get("access-control-allow-headers", ""))
        code, h, _ = self.get("/ice?pool=edge&user=alice", headers=dict(bearer(), Origin=ORIGIN))
        self.assertEqual(code, 200)
        self.assertEqual(h.get("access-control-allow-origin"), ORIGIN)
        for other in ("https://evil.example.test", ORIGIN + ":8443", "null"):
            code, h, _ = self.get("/ice?pool=edge&user=alice", headers=dict(bearer(), Origin=other))
            self.assertEqual(code, 403, other)
            self.assertNotIn("access-control-allow-origin", h)
            code, h, _ = self.get("/ice?pool=edge&user=alice", headers=dict(pre, Origin=other), method="OPTIONS")
            self.assertEqual(code, 403, other)
            self.assertNotIn("access-control-allow-origin", h)

    def test_4_bad_requests_name_the_field(self):
        cases = [("/ice?pool=other&user=alice", 404, "pool: no pool default/other here"),
                 ("/ice?pool=kube-system/edge&user=alice", 404, "pool: no pool kube-system/edge"),
                 ("/ice?user=alice", 400, "pool: is required"),
                 ("/ice?pool=edge", 400, "user: is required"),
                 ("/ice?pool=edge&user=a:b", 400, "user: byte 1"),
                 ("/ice?pool=edge&user=alice&ttl=5", 400, "ttl: 5 is outside 60-86400"),
                 ("/ice?pool=edge&user=alice&ttl=abc", 400, "ttl: must be a whole number"),
                 ("/ice?pool=edge&user=alice&transport=sctp", 400, "transport:"),
                 ("/ice?pool=a/b/c&user=alice", 400, "pool: must be [NAMESPACE/]NAME"),
                 ("/ice?pool=edge&user=alice&family=ipv6", 503, "no ready relay has a URI for the transports and family"),
                 ("/?service=stun&username=a&pool=edge", 400, "service: must be turn"),
                 ("/?service=turn&pool=edge", 400, "username: is required")]
        for path, want, text in cases:
            code, _, body = self.get(path, headers=bearer())
            self.assertEqual(code, want, (path, body))
            self.assertIn(text, body, path)
        self.assertEqual(self.get("/nope", headers=bearer())[0], 404)
        self.assertEqual(self.get("/ice?pool=edge&user=a", headers=bearer(), method="POST")[0], 405)

    def test_5_flood_is_429_with_retry_after_per_client(self):
        limited = subprocess.Popen(
            [ISSUER, "--listen", "127.0.6.1:26281", "--state-dir", self.fleet.state, "--secret-file",
             self.fleet.secret, "--pool", "edge", "--tokens-file", self.fleet.tokens, "--rate", "1", "--burst", "3",
             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def up():
                if limited.poll() is not None:
                    raise AssertionError("the second issuer exited: %s" % limited.stderr.read().decode())
                try:
                    return ask(26281, "/healthz", "127.0.6.43")[0] == 200
                except OSError:
                    return False
            wait_for("the rate-limited issuer", up, 10)
            codes, retry = [], None
            for _ in range(10):
                code, h, _ = ask(26281, "/ice?pool=edge&user=flood", "127.0.6.41", bearer())
                codes.append(code)
                if code == 429:
                    retry = h.get("retry-after")
            self.assertEqual(codes[:3], [200, 200, 200], codes)
            self.assertIn(429, codes)
            self.assertIsNotNone(retry)
            self.assertGreaterEqual(int(retry), 1)
            # without a token a flood is limited too (the limit comes before the token check)
            self.assertEqual(ask(26281, "/ice?pool=edge&user=flood", "127.0.6.41")[0], 429)
            # another client is not held back by the flood
            self.assertEqual(ask(26281, "/ice?pool=edge&user=calm", "127.0.6.44", bearer())[0], 200)
            # after Retry-After the flooding client is answered again
            wait_for("a token for the flooding client",
                     lambda: ask(26281, "/ice?pool=edge&user=flood", "127.0.6.41", bearer())[0] == 200, int(retry) + 5)
            code, _, m = ask(26281, "/metrics", "127.0.6.43")
            self.assertIn('turnfleet_issuer_denials_total{reason="rate_limited"}', m)
            n = [line for line in m.splitlines() if line.startswith('turnfleet_issuer_denials_total{reason="rate_limited"}')]
            self.assertGreaterEqual(float(n[0].split()[-1]), 1)
        finally:
            limited.terminate()
            limited.wait(timeout=10)
            limited.stderr.close()

    def test_6_metrics_and_health(self):
        self.get("/ice?pool=edge&user=metrics-user", headers=bearer())
        code, _, m = self.get("/metrics")
        self.assertEqual(code, 200)
        lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in m.splitlines()
                 if line and not line.startswith("#")}
        self.assertGreaterEqual(lines['turnfleet_issuer_answers_total{namespace="default",pool="edge",form="ice"}'], 1)
        handed = {k: v for k, v in lines.items() if k.startswith("turnfleet_issuer_relays_handed_out_total")}
        self.assertEqual(len(handed), 3, handed)
        for name in self.fleet.relays():
            self.assertIn('relay="%s"' % name, " ".join(handed))
        self.assertEqual(self.get("/healthz")[0], 200)
        self.assertEqual(self.get("/readyz")[0], 200)

    def test_7_scale_down_never_hands_out_the_draining_relay(self):
        before = self.fleet.relays()
        self.assertEqual(len(before), 3)
        addr_of = dict(before)
        users = ["u%d" % i for i in range(12)]
        seen = set()
        for u in users:
            for s in json.loads(self.get("/ice?pool=edge&user=" + u, headers=bearer())[2])["iceServers"]:
                seen.add(s["urls"][0].split(":")[1])
        self.assertEqual(seen, set(addr_of.values()), "all three relays are handed out before the scale")
        self.fleet.write_pool(2)
        gone = None
        deadline = time.monotonic() + 60
        answers_after = 0
        # every answer is checked against the status read before it was asked: once that status shows a relay
        # draining (or gone), the answer must not name it
        while time.monotonic() < deadline and answers_after < 40:
            st = self.fleet.status() or {"relays": []}
            live = {r["relayAddress"] for r in st["relays"] if r["ready"] and not r["draining"]}
            out = set(addr_of.values()) - live
            if out and gone is None:
                gone = out
            for u in users[:4]:
                code, _, body = self.get("/ice?pool=edge&user=" + u, headers=bearer())
                self.assertEqual(code, 200, body)
                got = {s["urls"][0].split(":")[1] for s in json.loads(body)["iceServers"]}
                self.assertFalse(got & out, "answer %s names a relay the status showed leaving: %s" % (got, out))
                if gone:
                    answers_after += 1
            time.sleep(0.05)
        self.assertIsNotNone(gone, "no relay drained after the scale to 2:\n" + self.fleet.logs())
        self.assertEqual(len(gone), 1, gone)
        self.assertGreaterEqual(answers_after, 40)

    def test_8_no_secret_or_token_in_the_log(self):
        code, _, body = self.get("/ice?pool=edge&user=log-user", headers=bearer())
        self.assertEqual(code, 200)
        cred = json.loads(body)["iceServers"][0]["credential"]
        self.fleet.issuer_log.flush()
        with open(self.fleet.issuer_log.name) as f:
            log = f.read()
        self.assertIn("answered ice", log)
        for s in (SECRET, TOKEN, cred, "log-user"):
            self.assertNotIn(s, log)

    def test_9_bad_flags_exit_2(self):
        base = ["--state-dir", self.fleet.state, "--secret-file", self.fleet.secret, "--pool", "edge"]
        cases = [(["--listen", "127.0.6.1:26282"] + base, "--tokens-file: required"),
                 (["--listen", "192.0.2.1:26282", "--tokens-file", self.fleet.tokens] + base,
                  "plain HTTP is served on a loopback address only"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--ttl", "2x"] + base, "--ttl:"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--ttl", "2h", "--ttl-max", "1h"] + base,
                  "--ttl: longer than --ttl-max"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--cors-origin", "app.example.test"] + base,
                  "--cors-origin:"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--max-relays", "0"] + base, "--max-relays:"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--cert", "c.pem"] + base, "go together"),
                 (["--listen", "127.0.6.1:26282", "--tokens-file", "/nonexistent/tokens"] + base, "--tokens-file:"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--state-dir", self.fleet.state, "--secret-file",
                   "/nonexistent/secret", "--pool", "edge"], "--secret-file:"),
                 (["--no-auth"] + base, "--listen is required"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--pool", "edge"], "--pool: only with --state-dir"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--kubeconfig", "k"] + base,
                  "--kubeconfig: not with --state-dir"),
                 (["--listen", "127.0.6.1:26282", "--no-auth", "--kubeconfig", "/nonexistent/kubeconfig"],
                  "/nonexistent/kubeconfig: "),
                 (["--bogus"], "unknown option")]
        for args, text in cases:
            r = subprocess.run([ISSUER] + args, capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("turnfleet-issuer: ", r.stderr)
            self.assertIn(text, r.stderr, args)
            self.assertNotIn(SECRET, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
