"""turn: URIs: the reference vectors and formatting."""

import unittest

import turnfleet

import tfhelpers as h


class UriTest(unittest.TestCase):
    def test_reference_vectors(self):
        vecs = h.vectors("turn_uris.jsonl")
        self.assertGreaterEqual(len(vecs), 30)
        for v in vecs:
            with self.subTest(uri=v["uri"]):
                if v["valid"]:
                    u = turnfleet.parse_uri(v["uri"])
                    self.assertIsInstance(u, turnfleet.TurnUri)
                    for field in ("scheme", "secure", "host", "host_type", "port", "port_explicit", "transport",
                                  "transport_explicit", "mode"):
                        self.assertEqual(getattr(u, field), v[field], field)
                else:
                    with self.assertRaises(turnfleet.InvalidArgument) as cm:
                        turnfleet.parse_uri(v["uri"])
                    self.assertIsInstance(cm.exception, ValueError)
                    if v.get("reason"):
                        self.assertEqual(cm.exception.reason_code, v["reason"], str(cm.exception))
                    self.assertIsNotNone(cm.exception.offset)

    def test_format(self):
        self.assertEqual(turnfleet.format_uri("203.0.113.7", 3478), "turn:203.0.113.7:3478?transport=udp")
        self.assertEqual(turnfleet.format_uri("2001:db8::7", 5349, "tcp", secure=True),
                         "turns:[2001:db8::7]:5349?transport=tcp")
        u = turnfleet.parse_uri(turnfleet.format_uri("2001:db8:0::7", 3479, "tcp"))
        self.assertEqual((u.host, u.port, u.transport), ("2001:db8::7", 3479, "tcp"))
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.format_uri("not-an-address", 3478)
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.format_uri("203.0.113.7", 3478, "sctp")
        with self.assertRaises(TypeError):
            turnfleet.parse_uri(b"turn:203.0.113.7")


if __name__ == "__main__":
    unittest.main()
