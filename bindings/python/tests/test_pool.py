"""Pool, Nodes and Existing: parsing from str and every bytes-like type, validation, handles."""

import glob
import json
import os
import unittest

import turnfleet
from turnfleet import core

import tfhelpers as h


class PoolTest(unittest.TestCase):
    def setUp(self):
        self.yaml = h.read(h.source("examples/pools/loopback.yaml"))

    def test_from_yaml_reads_the_pool_and_its_defaults(self):
        with turnfleet.Pool.from_yaml(self.yaml) as pool:
            self.assertEqual(pool.name, "demo")
            self.assertEqual(pool.namespace, "default")
            self.assertEqual(pool.replicas, 3)
            self.assertEqual(pool.mode, "HostNetwork")
            self.assertEqual(pool.family, "IPv4")
            self.assertEqual(pool.relay_port_range, (50000, 50099))
            self.assertEqual(pool.relays_per_node, 1)
            self.assertEqual(
                pool.listeners,
                [turnfleet.Listener("turn", "udp", 3478), turnfleet.Listener("turn-tcp", "tcp", 3478)],
            )
            self.assertEqual(pool.realm, "turnfleet.test")
            self.assertEqual(pool.coturn_version, "4.6.1")
            self.assertEqual(pool.drain_timeout, 30.0)
            self.assertEqual(pool.validate(), [])
            self.assertTrue(pool.valid)

    def test_every_input_type_gives_the_same_pool(self):
        want = turnfleet.Pool.from_yaml(self.yaml).to_json()
        raw = self.yaml.encode()
        for text in (raw, bytearray(raw), memoryview(raw), memoryview(bytearray(raw))):
            with self.subTest(type=type(text).__name__):
                self.assertEqual(turnfleet.Pool.from_yaml(text).to_json(), want)
                self.assertEqual(turnfleet.Pool.parse(text).to_json(), want)
        # a slice of a larger buffer: only the view's bytes are read
        padded = memoryview(b"xx" + raw + b"\n: : :")[2 : 2 + len(raw)]
        self.assertEqual(turnfleet.Pool.from_yaml(padded).to_json(), want)

    def test_from_json_and_round_trip(self):
        with turnfleet.Pool.from_yaml(self.yaml) as pool:
            text = pool.to_json()
        doc = json.loads(text)
        self.assertEqual(doc["kind"], "TURNPool")
        self.assertEqual(doc["spec"]["relayPortRange"], {"start": 50000, "end": 50099})
        with turnfleet.Pool.from_json(text) as again:
            self.assertEqual(again.to_json(), text)
        with turnfleet.Pool.from_json(h.read(h.source("examples/pools/external.json"))) as ext:
            self.assertEqual((ext.name, ext.namespace, ext.mode), ("floating", "turn", "ExternalIPPool"))

    def test_load_reads_a_file(self):
        with turnfleet.Pool.load(h.source("examples/pools/partitioned.yaml")) as pool:
            self.assertEqual(pool.mode, "PartitionedIP")
            self.assertGreater(pool.relays_per_node, 1)

    def test_malformed_text_is_a_protocol_error(self):
        with self.assertRaises(turnfleet.ProtocolError) as cm:
            turnfleet.Pool.from_yaml("spec: {replicas: 3\n")
        self.assertRegex(str(cm.exception), r"^line \d+, column \d+ \(byte \d+\): ")
        with self.assertRaises(turnfleet.ProtocolError):
            turnfleet.Pool.from_json(b"[1, 2]")

    def test_not_text_is_a_type_error(self):
        for bad in (None, 42, ["spec: {}"]):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                turnfleet.Pool.from_yaml(bad)

    def test_validate_lists_every_problem_with_its_path(self):
        with turnfleet.Pool.from_yaml(h.read(h.data("invalid/pool-61-many-mistakes.yaml"))) as pool:
            problems = pool.validate()
            self.assertFalse(pool.valid)
        want = h.read(h.data("invalid/pool-61-many-mistakes.expected")).splitlines()
        self.assertEqual([f"{p}: {m}" for p, m in problems], want)
        self.assertIn(("spec.replicas", "-2 is negative"), problems)

    def test_invalid_corpus(self):
        """tests/data/invalid/pool-*: a parse error (one line) or exactly the listed problems."""
        files = sorted(glob.glob(h.data("invalid", "pool-*")))
        cases = [f for f in files if not f.endswith(".expected")]
        self.assertGreaterEqual(len(cases), 60)
        for path in cases:
            with self.subTest(case=os.path.basename(path)):
                want = h.read(os.path.splitext(path)[0] + ".expected").splitlines()
                try:
                    pool = turnfleet.Pool.parse(h.read(path, "rb"))
                except turnfleet.ProtocolError as e:
                    self.assertEqual([str(e)], want)
                    continue
                with pool:
                    self.assertEqual([f"{p}: {m}" for p, m in pool.validate()], want)

    def test_a_bare_spec_needs_a_name(self):
        spec = "replicas: 1\nauth: {realm: r.test, secretRef: {name: s}}\n"
        with turnfleet.Pool.from_yaml(spec) as pool:
            self.assertEqual(pool.name, "")
            self.assertEqual([p for p, _ in pool.validate()], ["metadata.name"])
            pool.name = "bare"
            self.assertEqual(pool.name, "bare")
            self.assertEqual(pool.validate(), [])
            pool.set_name("Not A Name")
            self.assertEqual([p for p, _ in pool.validate()], ["metadata.name"])

    def test_close_and_with(self):
        pool = turnfleet.Pool.from_yaml(self.yaml)
        self.assertFalse(pool.closed)
        with pool as p:
            self.assertIs(p, pool)
            self.assertEqual(p.name, "demo")
        self.assertTrue(pool.closed)
        with self.assertRaisesRegex(ValueError, "closed Pool"):
            pool.name
        with self.assertRaises(ValueError):
            pool.validate()
        pool.close()  # twice is harmless
        with self.assertRaises(ValueError), pool:
            pass
        self.assertIn("closed", repr(pool))


class NodesTest(unittest.TestCase):
    def test_from_json_names_and_eligibility(self):
        text = h.read(h.source("examples/nodes/cluster.json"))
        with turnfleet.Nodes.from_json(text) as nodes, turnfleet.Pool.load(h.source("examples/pools/edge.yaml")) as pool:
            names = nodes.names
            self.assertEqual(names, sorted(names))
            self.assertEqual(len(nodes), len(json.loads(text)["items"]))
            eligible = nodes.eligible(pool)
            self.assertTrue(set(eligible) < set(names), "the example cluster has ineligible nodes")

    def test_every_input_type(self):
        raw = h.read(h.source("examples/nodes/loopback.json"), "rb")
        for text in (raw, bytearray(raw), memoryview(raw), raw.decode()):
            with self.subTest(type=type(text).__name__), turnfleet.Nodes.from_json(text) as nodes:
                self.assertEqual(nodes.names, ["relay-a", "relay-b", "relay-c"])

    def test_host_address(self):
        with turnfleet.Nodes.load(h.source("examples/nodes/loopback.json")) as nodes:
            self.assertEqual(nodes.host_address("relay-b"), "127.0.0.12")
            self.assertEqual(nodes.host_address(0, family="ipv4"), "127.0.0.11")
            with self.assertRaises(turnfleet.NotFound):
                nodes.host_address("relay-a", family=6)  # no IPv6 address
            with self.assertRaises(turnfleet.NotFound):
                nodes.host_address("no-such-node")
            with self.assertRaises(IndexError):
                nodes.host_address(7)

    def test_invalid_inventories_name_the_field(self):
        for path in sorted(glob.glob(h.data("invalid", "nodes-*.json"))):
            with self.subTest(case=os.path.basename(path)):
                want = h.read(path[: -len(".json")] + ".expected").splitlines()[0]
                with self.assertRaises((turnfleet.ProtocolError, turnfleet.InvalidArgument)) as cm:
                    turnfleet.Nodes.from_json(h.read(path, "rb"))
                self.assertEqual(str(cm.exception), want)
                self.assertEqual(
                    cm.exception.code, core.TF_EPROTO if want.startswith("line ") else core.TF_EINVALID
                )


class FleetTest(unittest.TestCase):
    def test_records_and_json(self):
        with turnfleet.Existing() as fleet:
            self.assertEqual(len(fleet), 0)
            fleet.add("203.0.113.7/49152-49200", name="edge-relay-mb7l6")
            fleet.add("203.0.113.8/49152-49200", pool="other", allocations=3, listener_ports=[3478, 5349])
            self.assertEqual(len(fleet), 2)
            with self.assertRaises(turnfleet.InvalidArgument):
                fleet.add("not an identity", name="x")
            with self.assertRaises(ValueError):
                fleet.add("203.0.113.9/1-2", pool="other", listener_ports=[70000])
        records = [{"pool": "other", "identity": "203.0.113.9/49152-49200", "listenerPorts": [3478]}]
        with turnfleet.Existing.from_records(records) as f1, turnfleet.Existing.from_json(json.dumps(records)) as f2:
            self.assertEqual(len(f1), len(f2))
        with self.assertRaises(turnfleet.ProtocolError):
            turnfleet.Existing.from_json("[")


if __name__ == "__main__":
    unittest.main()
