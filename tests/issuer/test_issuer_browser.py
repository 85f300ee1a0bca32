"""Headless Chromium against turnfleet-issuer: the page asks the issuer for an RTCConfiguration (a CORS
request with a bearer token), then two RTCPeerConnections with iceTransportPolicy "relay", configured only
from that answer, exchange a data-channel message through each relay of a `turnfleet up` fleet of real
coturn relays on loopback. The relayed candidates' addresses prove which relay carried it. A page from an
origin the issuer does not list gets no CORS grant: the browser itself refuses it the answer.

Loopback 127.0.6.1 (page server, issuer), relays 127.0.6.11-12; ports 26001 (TURN), 26020+ (coturn CLI, on 127.0.0.1 as up renders it),
26081-26082 (pages), 26080 (issuer), 26090 (up's metrics), relays 26100-26139.
"""
import json
import os
import shutil
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "dev"))
from browser_call import PageServer, run_chromium  # noqa: E402
from fleet import TOKEN, Fleet  # noqa: E402

LISTED, UNLISTED = "127.0.6.1:26081", "127.0.6.1:26082"


class TestBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet("call", "127.0.6.11-12", 26001, 26100, 26139, "127.0.6.1:26090", 26020,
                          "127.0.6.1:26080", replicas=2, issuer_args=["--cors-origin", "http://" + LISTED,
                                                                       "--max-relays", "2", "--quiet"])
        cls.pages = []
        cls.tmp = tempfile.mkdtemp(prefix="tf-issuer-chromium-")
        try:
            cls.fleet.start()
            cls.pages = [PageServer(LISTED), PageServer(UNLISTED)]
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in cls.pages:
            p.stop()
        cls.fleet.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def page_url(self, origin, user):
        q = urllib.parse.urlencode({"issuer": self.fleet.issuer_url, "pool": "call", "user": user, "token": TOKEN})
        return "http://%s/call.html?%s" % (origin, q)

    def test_data_channel_through_each_relay(self):
        page = self.pages[0]
        profile = os.path.join(self.tmp, "listed")
        os.makedirs(profile, exist_ok=True)
        result = run_chromium(self.page_url(LISTED, "browser-user"), profile, lambda: page.results, 120)[0]
        if os.environ.get("TF_TEST_VERBOSE"):
            print(json.dumps(result, indent=1), file=sys.stderr)
        self.assertTrue(result.get("ok"), result)
        relays = self.fleet.relays()
        addresses = sorted(relays.values())
        self.assertEqual(len(result["calls"]), 2, result)
        seen = []
        for call in result["calls"]:
            self.assertEqual(call["received"], call["sent"], call)
            local, remote = call["local"], call["remote"]
            self.assertIsNotNone(local, call)
            # both ends relayed, both on the one relay this call was configured with
            self.assertEqual(local["type"], "relay", call)
            self.assertEqual(remote["type"], "relay", call)
            host = urllib.parse.urlsplit(call["urls"][0].replace("turn:", "turn://", 1)).hostname
            self.assertEqual(local["address"], host, call)
            self.assertEqual(remote["address"], host, call)
            for c in (local, remote):
                self.assertTrue(26100 <= c["port"] <= 26139, call)
            seen.append(host)
        self.assertEqual(sorted(seen), addresses, "one call through each relay")

    def test_unlisted_origin_gets_no_cors_grant(self):
        page = self.pages[1]
        profile = os.path.join(self.tmp, "unlisted")
        os.makedirs(profile, exist_ok=True)
        result = run_chromium(self.page_url(UNLISTED, "foreign-user"), profile, lambda: page.results, 60)[0]
        # the browser refuses the page the answer: fetch() rejects (a network error), no status to read
        self.assertFalse(result.get("ok"), result)
        self.assertEqual(result.get("stage"), "exception", result)
        self.assertIn("Failed to fetch", result.get("error", ""), result)


if __name__ == "__main__":
    unittest.main(verbosity=2)
