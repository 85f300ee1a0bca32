"""render_coturn() gives the CLI's config; versions, features, config hash."""

import hashlib
import os
import tempfile
import unittest

import turnfleet

import tfhelpers as h


class RenderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.secret = h.private_file(self.tmp.name, "secret", "current-secret\n")
        self.previous = h.private_file(self.tmp.name, "previous", "old-secret\n")

    def test_render_equals_the_cli(self):
        cases = [
            ("examples/pools/loopback.yaml", "examples/nodes/loopback.json", None, {}),
            ("examples/pools/loopback.yaml", "examples/nodes/loopback.json", "4.18.0", {}),
            ("examples/pools/edge.yaml", "examples/nodes/cluster.json", None,
             {"cert_file": "/etc/turn/tls.crt", "key_file": "/etc/turn/tls.key"}),
            ("examples/pools/partitioned.yaml", "examples/nodes/cluster.json", "4.6.1", {}),
        ]
        count = 0
        for pool_rel, nodes_rel, version, tls in cases:
            pool_path, nodes_path = h.source(pool_rel), h.source(nodes_rel)
            with turnfleet.Pool.load(pool_path) as pool, turnfleet.Nodes.load(nodes_path) as nodes, \
                    turnfleet.plan(pool, nodes) as plan:
                for relay in plan.relays:
                    with self.subTest(pool=pool_rel, relay=relay.name, version=version):
                        flags = ["render", "-f", pool_path, "--nodes", nodes_path, "--relay", relay.name,
                                 "--secret-file", self.secret, "--previous-secret-file", self.previous,
                                 "--state-dir", "/var/lib/tf-test", "--log-file", "/var/log/tf-test.log"]
                        if version:
                            flags += ["--coturn-version", version]
                        if tls:
                            flags += ["--cert", tls["cert_file"], "--key", tls["key_file"]]
                        cli = h.run_cli(*flags)
                        got = turnfleet.render_coturn(
                            pool, plan, relay, "current-secret", version, previous_secret="old-secret",
                            state_dir="/var/lib/tf-test", log_file="/var/log/tf-test.log", **tls)
                        self.assertEqual(got, cli)
                        self.assertIn("static-auth-secret=\"current-secret\"\n", got)
                        self.assertIn("static-auth-secret=\"old-secret\"\n", got)
                        # a sequence of secrets is the same as secret + previous_secret
                        self.assertEqual(
                            turnfleet.render_coturn(pool, plan, relay.name, ["current-secret", "old-secret"], version,
                                                    state_dir="/var/lib/tf-test", log_file="/var/log/tf-test.log",
                                                    **tls), got)
                        count += 1
        self.assertGreater(count, 10)

    def test_version_drives_the_rendering(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes, turnfleet.plan(pool, nodes) as plan:
            r = plan.relays[0].name
            old = turnfleet.render_coturn(pool, plan, r, "s", state_dir="/s")  # the default, 4.6.1
            self.assertEqual(old, turnfleet.render_coturn(pool, plan, r, "s", "4.6.1", state_dir="/s"))
            new = turnfleet.render_coturn(pool, plan, r, "s", "4.18.0", state_dir="/s")
            self.assertNotIn("prometheus-address", old)
            self.assertNotIn("prometheus", new)  # Debian's builds have no exporter: only when asked
            self.assertNotIn("no-cli", new)  # >= 4.10 the CLI is off by default; no-cli logs an ERROR
            exported = turnfleet.render_coturn(pool, plan, r, "s", "4.18.0", state_dir="/s", prometheus=True)
            self.assertIn("prometheus-address=127.0.0.11", exported)
            with self.assertRaises(turnfleet.InvalidArgument):
                turnfleet.render_coturn(pool, plan, r, "s", "4.6.1", state_dir="/s", prometheus=True)
            with open(h.source("tests/data/coturn/help-4.18.0.txt")) as f:
                self.assertEqual(turnfleet.coturn_build_features(f.read()), 0)
            self.assertIn("allow-loopback-peers", turnfleet.render_coturn(
                pool, plan, r, "s", state_dir="/s", allow_loopback_peers=True))
            cli = turnfleet.render_coturn(pool, plan, r, "s", state_dir="/s", cli_port=5766, cli_password="pw")
            self.assertIn("cli-port=5766", cli)

    def test_bad_options_are_named(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes, turnfleet.plan(pool, nodes) as plan:
            r = plan.relays[0].name
            with self.assertRaisesRegex(turnfleet.InvalidArgument, "state_dir"):
                turnfleet.render_coturn(pool, plan, r, "s", state_dir="relative/dir")
            with self.assertRaises(turnfleet.InvalidArgument) as cm:
                turnfleet.render_coturn(pool, plan, r, "bad\nsecret", state_dir="/s")
            self.assertNotIn("bad", str(cm.exception))  # never the secret
            with self.assertRaises(turnfleet.InvalidArgument):
                turnfleet.render_coturn(pool, plan, r, [], state_dir="/s")
            with self.assertRaises(turnfleet.InvalidArgument):
                turnfleet.render_coturn(pool, plan, r, "s", "4.5.0", state_dir="/s")
            with self.assertRaises(turnfleet.NotFound):
                turnfleet.render_coturn(pool, plan, "demo-relay-zzzzz", "s", state_dir="/s")
            with self.assertRaises(TypeError):
                turnfleet.render_coturn(pool, plan, r, [b"bytes"], state_dir="/s")
            with self.assertRaises(ValueError):
                turnfleet.render_coturn(pool, plan, r, "nul\0inside", state_dir="/s")
            with self.assertRaises(turnfleet.InvalidArgument):
                turnfleet.render_coturn(pool, plan, r, "s", state_dir="/s", cli_port=70000, cli_password="x")

    def test_config_hash(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes, turnfleet.plan(pool, nodes) as plan:
            text = turnfleet.render_coturn(pool, plan, plan.relays[0], "s", state_dir="/s")
        self.assertEqual(turnfleet.config_hash(text), hashlib.sha256(text.encode()).hexdigest())
        self.assertEqual(turnfleet.config_hash(""), hashlib.sha256(b"").hexdigest())


class VersionTest(unittest.TestCase):
    def test_versions_and_features(self):
        self.assertEqual(turnfleet.coturn_version("4.6.1"), (4, 6, 1))
        self.assertEqual(turnfleet.coturn_version("4.18.0-r0"), (4, 18, 0))
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.coturn_version("four")
        from turnfleet import _coturn as c

        self.assertEqual(turnfleet.coturn_features("4.6.1"), 0)
        self.assertTrue(turnfleet.coturn_features("4.6.3") & c.DRAIN)
        self.assertTrue(turnfleet.coturn_features((4, 17, 0)) & c.DTLS_OPT_IN)
        self.assertFalse(turnfleet.coturn_features("4.6.2") & c.PROMETHEUS_ADDRESS)

    def test_library_version(self):
        self.assertEqual(turnfleet.__version__, turnfleet.BUILD_VERSION)
        self.assertEqual(".".join(map(str, turnfleet.version())), turnfleet.__version__)
        self.assertEqual(turnfleet.canonical_address("2001:db8:0:0::7"), "2001:db8::7")
        self.assertEqual(turnfleet.parse_port_range("49152-49200"), (49152, 49200))
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.parse_port_range("49200-49152")


if __name__ == "__main__":
    unittest.main()
