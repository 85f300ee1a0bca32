"""plan() and capacity() give what the turnfleet CLI prints for the same files."""

import glob
import json
import os
import tempfile
import unittest

import turnfleet

import tfhelpers as h


def inputs():
    pools = sorted(glob.glob(h.source("examples/pools/*"))) + sorted(glob.glob(h.data("pools/*.yaml")))
    nodes = sorted(glob.glob(h.source("examples/nodes/*.json"))) + sorted(glob.glob(h.data("nodes/*.json")))
    return [(p, n) for p in pools for n in nodes]


class PlanTest(unittest.TestCase):
    def test_plan_equals_the_cli_for_every_example(self):
        cases = inputs()
        self.assertGreaterEqual(len(cases), 30)
        placed = 0
        for pool_path, nodes_path in cases:
            with self.subTest(pool=os.path.basename(pool_path), nodes=os.path.basename(nodes_path)):
                cli = json.loads(h.run_cli("plan", "-f", pool_path, "--nodes", nodes_path, "-o", "json"))
                with turnfleet.Pool.load(pool_path) as pool, turnfleet.Nodes.load(nodes_path) as nodes:
                    p = turnfleet.plan(pool, nodes)
                with p:
                    self.assertEqual(json.loads(p.to_json()), cli)
                self.assert_objects_match(p, cli)
                placed += len(p.relays)
        self.assertGreater(placed, 50)

    def assert_objects_match(self, p, cli):
        """The Relay and Condition objects say what the JSON says."""
        self.assertEqual(p.pool_name, cli["pool"])
        self.assertEqual(p.placeable, cli["placeable"])
        self.assertEqual(len(p), len(cli["relays"]))
        for r, j in zip(p.relays, cli["relays"]):
            self.assertIsInstance(r, turnfleet.Relay)
            self.assertEqual(r.name, j["name"])
            self.assertEqual(r.identity, j["identity"])
            self.assertEqual(r.node, j["node"])
            self.assertEqual(r.addresses, j["addresses"])
            self.assertIsInstance(r.addresses, list)
            self.assertEqual(r.port_range, (j["portRange"]["start"], j["portRange"]["end"]))
            self.assertIsInstance(r.port_range, tuple)
            self.assertEqual(r.ports_total, j["portsTotal"])
            self.assertEqual([(l.name, l.protocol, l.port) for l in r.listeners],
                             [(l["name"], l["protocol"], l["port"]) for l in j["listeners"]])
            self.assertIs(p.find(r.name), r)
        self.assertEqual([(c.type, c.status, c.reason, c.message) for c in p.conditions],
                         [(c["type"], c["status"], c["reason"], c["message"]) for c in cli["conditions"]])

    def test_plan_is_readable_after_close(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes:
            with turnfleet.plan(pool, nodes) as p:
                names = [r.name for r in p]
            self.assertTrue(p.closed)
            self.assertEqual([r.name for r in p.relays], names)
            self.assertEqual(p.condition("Placed").reason, "AllPlaced")
            self.assertIsNone(p.find("demo-relay-zzzzz"))
            with self.assertRaises(ValueError):
                p.to_json()

    def test_existing_relays_keep_their_names_as_the_cli_does(self):
        pool_path = h.source("examples/pools/loopback.yaml")
        nodes_path = h.source("examples/nodes/loopback.json")
        small = h.read(pool_path).replace("replicas: 3", "replicas: 2")
        with tempfile.TemporaryDirectory() as d:
            with turnfleet.Pool.load(pool_path) as pool, turnfleet.Nodes.load(nodes_path) as nodes:
                first = turnfleet.plan(pool, nodes)
                existing = os.path.join(d, "existing.json")
                with open(existing, "w") as f:
                    f.write(first.to_json())
                # allocations decide who goes on scale-down
                records = [{"name": r.name, "identity": r.identity, "allocations": 10 * i}
                           for i, r in enumerate(first.relays)]
                records_path = os.path.join(d, "records.json")
                with open(records_path, "w") as f:
                    json.dump(records, f)
                small_path = os.path.join(d, "small.yaml")
                with open(small_path, "w") as f:
                    f.write(small)
                with turnfleet.Pool.from_yaml(small) as smaller:
                    for existing_arg, cli_file in (
                        (first, existing),
                        (first.to_json(), existing),
                        (first.to_json().encode(), existing),
                        (json.loads(first.to_json()), existing),
                        (records, records_path),
                        (turnfleet.Existing.from_records(records), records_path),
                    ):
                        with self.subTest(existing=type(existing_arg).__name__):
                            cli = json.loads(h.run_cli("plan", "-f", small_path, "--nodes", nodes_path,
                                                       "--existing", cli_file, "-o", "json"))
                            got = turnfleet.plan(smaller, nodes, existing=existing_arg)
                            self.assertEqual(json.loads(got.to_json()), cli)
                            self.assertEqual(len(got.relays), 2)
                            self.assertTrue({r.name for r in got.relays} <= {r.name for r in first.relays})
                    # the relay with the fewest allocations went
                    kept = turnfleet.plan(smaller, nodes, existing=records)
                    self.assertNotIn(first.relays[0].name, [r.name for r in kept.relays])

    def test_another_pools_claim_is_an_address_conflict(self):
        claim = [{"pool": "other", "identity": "127.0.0.12/50050-50060", "listenerPorts": [3478]}]
        with tempfile.TemporaryDirectory() as d:
            claims = os.path.join(d, "claims.json")
            with open(claims, "w") as f:
                json.dump(claim, f)
            pool_path = h.source("examples/pools/loopback.yaml")
            nodes_path = h.source("examples/nodes/loopback.json")
            cli = json.loads(h.run_cli("plan", "-f", pool_path, "--nodes", nodes_path, "--existing", claims,
                                       "-o", "json"))
            with turnfleet.Pool.load(pool_path) as pool, turnfleet.Nodes.load(nodes_path) as nodes:
                p = turnfleet.plan(pool, nodes, existing=claim)
        self.assertEqual(json.loads(p.to_json()), cli)
        self.assertEqual(p.condition("AddressConflict").status, "True")
        self.assertNotIn("127.0.0.12", [a for r in p.relays for a in r.addresses])

    def test_an_invalid_pool_cannot_be_planned(self):
        with turnfleet.Pool.from_yaml(h.read(h.data("invalid/pool-12-range-end-below-start.yaml"))) as pool, \
                turnfleet.Nodes.load(h.source("examples/nodes/loopback.json")) as nodes:
            with self.assertRaises(turnfleet.InvalidArgument) as cm:
                turnfleet.plan(pool, nodes)
            self.assertIn("spec.relayPortRange.end", str(cm.exception))

    def test_wrong_argument_types(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool:
            with self.assertRaisesRegex(TypeError, "nodes must be a turnfleet.Nodes"):
                turnfleet.plan(pool, "nodes.json")
            with self.assertRaises(TypeError):
                turnfleet.plan(None, pool)
            with self.assertRaises(TypeError):
                turnfleet.capacity(pool, "nodes.json")

    def test_relay_name(self):
        # the naming examples of docs/cli.md
        self.assertEqual(turnfleet.relay_name("edge", "203.0.113.7/49152-49200"), "edge-relay-mb7l6")
        self.assertEqual(turnfleet.relay_name("edge", "198.51.100.10/49152-49175"), "edge-relay-kf77m")
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.relay_name("x" * 60, "203.0.113.7/49152-49200")


class CapacityTest(unittest.TestCase):
    def test_capacity_equals_the_cli_for_every_example(self):
        variants = [
            ({}, []),
            ({"target_allocations": 5000}, ["--target-allocations", "5000"]),
            ({"target_allocations": 12345, "headroom": 0.35}, ["--target-allocations", "12345", "--headroom", "0.35"]),
            ({"target_allocations": 100000, "session_kbps": 500, "node_mbps": 1000},
             ["--target-allocations", "100000", "--session-kbps", "500", "--node-mbps", "1000"]),
        ]
        for pool_path, nodes_path in inputs():
            for kwargs, flags in variants:
                with self.subTest(pool=os.path.basename(pool_path), nodes=os.path.basename(nodes_path), **kwargs):
                    cli = json.loads(h.run_cli("capacity", "-f", pool_path, "--nodes", nodes_path, *flags,
                                               "-o", "json"))
                    with turnfleet.Pool.load(pool_path) as pool, turnfleet.Nodes.load(nodes_path) as nodes:
                        cap = turnfleet.capacity(pool, nodes, **kwargs)
                        # a plan made first gives the same report
                        with turnfleet.plan(pool, nodes) as p, turnfleet.capacity(pool, p, **kwargs) as again:
                            self.assertEqual(again.to_json(), cap.to_json())
                    with cap:
                        self.assertEqual(json.loads(cap.to_json()), cli)
                    self.assertEqual(cap.allocations, cli["allocations"])
                    self.assertEqual(cap.full_scale_allocations, cli["fullScaleAllocations"])
                    self.assertEqual(cap.addresses_needed, cli.get("sizing", {}).get("addressesNeeded", 0))
                    self.assertEqual(cap.nodes_for_bandwidth, cli.get("sizing", {}).get("nodesForBandwidth", 0))

    def test_bad_options_name_the_field(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes:
            with self.assertRaisesRegex(turnfleet.InvalidArgument, "headroom"):
                turnfleet.capacity(pool, nodes, target_allocations=10, headroom=1.0)
            with self.assertRaisesRegex(turnfleet.InvalidArgument, "target"):
                turnfleet.capacity(pool, nodes, target_allocations=-1)
            with turnfleet.plan(pool, nodes) as p, self.assertRaises(TypeError):
                turnfleet.capacity(pool, p, existing=[])


if __name__ == "__main__":
    unittest.main()
