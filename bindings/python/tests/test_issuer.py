"""turnfleet.IssuerPool: the issuer module through the bindings (synthetic pool, synthetic clock)."""
import json
import unittest

import tfhelpers  # noqa: F401  (puts the built package first on sys.path)

import turnfleet

NOW = 1767225600
ICE = json.dumps([{"urls": ["turn:198.51.100.1:3478?transport=udp", "turn:198.51.100.1:3478?transport=tcp"]},
                  {"urls": ["turn:198.51.100.2:3478?transport=udp"]},
                  {"urls": ["turn:198.51.100.3:3478?transport=udp"]}])


def status(draining=()):
    return json.dumps({"relays": [
        {"name": "p-relay-%d" % i, "relayAddress": "198.51.100.%d" % i, "ready": True, "draining": i in draining,
         "portsInUse": 10 * i, "portsTotal": 100} for i in (1, 2, 3)]})


class TestIssuer(unittest.TestCase):
    def test_answer_is_an_rtcconfiguration_with_coturn_credentials(self):
        with turnfleet.IssuerPool(ICE, status()) as pool:
            self.assertEqual(pool.eligible, 3)
            a = pool.answer("s3cret", "alice", max_relays=3, now=NOW)
            self.assertEqual(a.relays, ("p-relay-1", "p-relay-2", "p-relay-3"))  # least loaded first
            self.assertEqual(a.ttl, 3600)
            doc = a.document
            self.assertEqual(len(doc["iceServers"]), 3)
            s = doc["iceServers"][0]
            self.assertEqual(s["username"], "%d:alice" % (NOW + 3600))
            turnfleet.verify_credentials("s3cret", s["username"], s["credential"], now=NOW)
            rest = pool.answer("s3cret", "alice", max_relays=1, form="rest", ttl=600, transport="tcp", now=NOW).document
            self.assertEqual(rest["uris"], ["turn:198.51.100.1:3478?transport=tcp"])
            self.assertEqual(rest["ttl"], 600)

    def test_draining_relay_never_and_same_user_same_relays(self):
        pool = turnfleet.IssuerPool(ICE.encode(), status())
        first = set(pool.answer("k", "bob", now=NOW).relays)
        self.assertEqual(first, set(pool.answer("k", "bob", now=NOW + 5).relays))
        gone = sorted(first)[0]
        drained = turnfleet.IssuerPool(ICE, status(draining=(int(gone[-1]),)))
        for i in range(30):
            self.assertNotIn(gone, drained.answer("k", "user%d" % i, now=NOW).relays)
        kept = set(drained.answer("k", "bob", now=NOW).relays)
        self.assertTrue(first - {gone} <= kept, (first, kept))

    def test_errors_name_the_field(self):
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "relays\\[0\\].ready"):
            turnfleet.IssuerPool("[]", '{"relays":[{"name":"a","relayAddress":"198.51.100.1","ready":1,"portsTotal":1}]}')
        pool = turnfleet.IssuerPool(ICE, status())
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "ttl: 5 is outside"):
            pool.answer("k", "u", ttl=5, now=NOW)
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "user: byte 1"):
            pool.answer("k", "a:b", now=NOW)
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "transport"):
            pool.answer("k", "u", transport="sctp", now=NOW)
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "family"):
            pool.answer("k", "u", family="ipv5", now=NOW)
        with self.assertRaises(turnfleet.NotFound):
            pool.answer("k", "u", family="ipv6", now=NOW)
        with self.assertRaises(turnfleet.InvalidArgument):
            pool.answer("k", "u", form="xml", now=NOW)
        pool.close()
        with self.assertRaises(turnfleet.InvalidArgument):
            pool.answer("k", "u", now=NOW)


if __name__ == "__main__":
    unittest.main()
