"""turnfleet.reconcile(): the pure controller core through the bindings."""

import json
import unittest

import turnfleet

import tfhelpers as h

POOL = """metadata: {name: rec}
spec:
  replicas: 2
  relayPortRange: {start: 50000, end: 50009}
  listeners: [{name: turn, protocol: udp, port: 3478}]
  auth: {realm: r.test, secretRef: {name: s}}
"""
NODES = json.dumps({"items": [
    {"metadata": {"name": f"n{i}", "labels": {"turnfleet.hzmi.dev/relay-node": "true"}},
     "status": {"addresses": [{"type": "InternalIP", "address": f"192.0.2.{i}"}],
                "conditions": [{"type": "Ready", "status": "True"}]}}
    for i in (1, 2)]})
NOW = 1_700_000_000_000


class ReconcileTest(unittest.TestCase):
    def setUp(self):
        self.pool = turnfleet.Pool.from_yaml(POOL)
        self.nodes = turnfleet.Nodes.from_json(NODES)
        self.addCleanup(self.pool.close)
        self.addCleanup(self.nodes.close)

    def test_an_empty_fleet_starts_every_relay(self):
        with turnfleet.reconcile(self.pool, self.nodes, None, NOW, "s3cret", state_dir="/state") as rec:
            self.assertEqual([a.action for a in rec.actions], ["start", "start"])
            self.assertEqual(sorted(a.relay for a in rec.actions), sorted(r.name for r in rec.relays))
            for r in rec.relays:
                self.assertTrue(r.planned and not r.ready and not r.published)
                self.assertIn('static-auth-secret="s3cret"', r.config)
                self.assertEqual(len(r.config_hash), 64)
            self.assertEqual(rec.uris, [])  # nothing is ready yet
            status = json.loads(rec.status_json())
            self.assertIn("conditions", status)
            self.assertNotIn("s3cret", rec.to_json())
            self.assertEqual(json.loads(rec.ice_servers_json()), [])
            metrics = rec.metrics()
            self.assertIn("turnfleet_relay_ports_total", metrics.to_text())
            self.assertEqual(metrics.sum("turnfleet_relay_ports_total"), 20)

    def test_ready_relays_are_published_and_the_status_reads_back(self):
        with turnfleet.reconcile(self.pool, self.nodes, None, NOW, "s3cret", state_dir="/state") as first:
            obs = turnfleet.Observed()
            for r in first.relays:
                ident = next(p.identity for p in turnfleet.plan(self.pool, self.nodes).relays if p.name == r.name)
                obs.add_relay(r.name, ident, config_hash=r.config_hash, running=True, started_ms=NOW,
                              allocations=3, probe_ms=NOW + 10, probe_ok=True, failures={486: 2}, uris=r.uris)
            obs.set_status(first.status_json())
        with turnfleet.reconcile(self.pool, self.nodes, obs, NOW + 1000, "s3cret", state_dir="/state") as rec:
            self.assertEqual(rec.actions, [])
            self.assertTrue(all(r.ready and r.published for r in rec.relays))
            self.assertEqual(len(rec.uris), 2)
            ice = json.loads(rec.ice_servers_json())
            self.assertEqual(sorted(u for s in ice for u in s["urls"]), sorted(rec.uris))
            ready = next(c for c in rec.conditions if c.type == "Ready")
            self.assertEqual(ready.status, "True")
            m = rec.metrics()
            self.assertEqual(m.sum("turnfleet_relay_ports_in_use"), 6)

    def test_bad_input_is_a_turnfleet_error(self):
        obs = turnfleet.Observed()
        with self.assertRaises(turnfleet.InvalidArgument) as cm:
            obs.add_relay("rec-relay-bbbbb", "not an identity")
        self.assertIn("relays[0].identity", str(cm.exception))
        with self.assertRaises(turnfleet.ProtocolError):
            obs.set_status('{"conditions": [], "conditions": []}')
        with self.assertRaises(turnfleet.InvalidArgument):
            obs.add_relay("x", "192.0.2.1/50000-50009", failures={-1: 1})
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.reconcile(self.pool, self.nodes, obs, -1, "s")
        with self.assertRaises(TypeError):
            turnfleet.reconcile(self.pool, self.nodes, obs, NOW, None)
        obs.close()
        with self.assertRaises(turnfleet.InvalidArgument):
            obs.add_claim("other", "192.0.2.9/50000-50009")

    def test_another_pools_claim_is_a_conflict(self):
        obs = turnfleet.Observed()
        obs.add_claim("other", "192.0.2.1/50000-50009", [3478])
        with turnfleet.reconcile(self.pool, self.nodes, obs, NOW, ["s3cret", "old"]) as rec:
            conflict = next(c for c in rec.conditions if c.type == "AddressConflict")
            self.assertEqual(conflict.status, "True")
            self.assertEqual(len(rec.relays), 1)
            self.assertIn('static-auth-secret="old"', rec.relays[0].config)


if __name__ == "__main__":
    unittest.main()
