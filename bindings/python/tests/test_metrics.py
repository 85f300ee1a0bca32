"""turnfleet.Metrics: the Prometheus text writer and parser through the bindings."""

import unittest

import turnfleet

import tfhelpers as h


class MetricsTest(unittest.TestCase):
    def test_write_then_parse_round_trip(self):
        m = turnfleet.Metrics()
        m.declare("turnfleet_relay_ports_in_use", "gauge", "ports in use")
        m.add("turnfleet_relay_ports_in_use", 3, {"namespace": "default", "pool": "p", "relay": "p-relay-bbbbb"})
        m.add("turnfleet_relay_ports_in_use", 4, {"namespace": "default", "pool": "p", "relay": "p-relay-ccccc"})
        text = m.to_text()
        self.assertIn("# TYPE turnfleet_relay_ports_in_use gauge", text)
        self.assertEqual(len(m), 2)
        self.assertEqual(m.samples[0].labels["relay"], "p-relay-bbbbb")
        back = turnfleet.parse_metrics(text, labels=("relay", "pool"))
        self.assertEqual(back.to_text(), text)
        self.assertEqual([s.value for s in back.samples], [3.0, 4.0])
        self.assertEqual(back.samples[1].labels, {"relay": "p-relay-ccccc", "pool": "p"})
        self.assertEqual(back.sum("turnfleet_relay_ports_in_use"), 7)
        self.assertEqual(back.type_of("turnfleet_relay_ports_in_use"), "gauge")
        self.assertEqual(back.label(0, "namespace"), "default")
        self.assertIsNone(back.label(0, "nope"))

    def test_a_coturn_scrape(self):
        with open(h.data("metrics", "coturn-4.17.1-example-a.prom"), "rb") as f:
            m = turnfleet.Metrics.parse(f.read())
        self.assertGreater(len(m), 0)

    def test_errors_are_turnfleet_errors(self):
        m = turnfleet.Metrics()
        with self.assertRaises(turnfleet.InvalidArgument):
            m.declare("x", "nope")
        with self.assertRaises(turnfleet.Error):
            m.add("undeclared-name!", 1)
        with self.assertRaises(turnfleet.NotFound):
            m.sum("absent")
        with self.assertRaises(turnfleet.ProtocolError):
            turnfleet.parse_metrics('a{b="unterminated} 1\n')
        m.close()
        with self.assertRaises(turnfleet.InvalidArgument):
            m.to_text()


if __name__ == "__main__":
    unittest.main()
