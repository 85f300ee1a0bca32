"""probe(), probe_many() and allocate() against a real turnserver on loopback.

The relay is planned and rendered through the bindings (tfhelpers.Relay):
127.0.0.71, udp and tcp on 3601, relay ports 59000-59099. Other sockets the
tests need are bound on 127.0.0.73 to ephemeral ports.
"""

import dataclasses
import json
import logging
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import turnfleet
from turnfleet import core, stun

import tfhelpers as h

ADDR, PORT, RANGE = "127.0.0.71", 3601, (59000, 59099)
T = h.PROBE_TIMEOUT


class ProbeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.relay = h.Relay(ADDR, PORT, *RANGE, name="pyprobe")
        cls.addClassCleanup(cls.relay.stop)

    def assert_allocated(self, r, transport="udp"):
        self.assertIsInstance(r, turnfleet.ProbeResult)
        self.assertTrue(r.ok, f"{r.stage}: {r.message} (code {r.error_code})")
        self.assertEqual((r.stage, r.status, r.exit_code, r.error_code), ("done", 0, 0, 0))
        self.assertEqual(r.relayed_address, ADDR)
        self.assertTrue(RANGE[0] <= r.relayed_port <= RANGE[1])
        self.assertEqual(r.mapped_address, "127.0.0.1")
        self.assertGreater(r.lifetime, 0)
        self.assertFalse(r.draining)
        self.assertEqual(r.message, "")
        self.assertTrue(set(r.rtt_ms) <= set(turnfleet.STAGES))
        self.assertIn("allocate", r.rtt_ms)
        self.assertIs(r.raise_for_status(), r)
        self.assertIsNone(r.error())

    def test_udp_and_tcp(self):
        for transport in ("udp", "tcp"):
            with self.subTest(transport=transport):
                r = turnfleet.probe(self.relay.uri(transport), h.SECRET, expect_address=ADDR,
                                    expect_port_range=RANGE, timeout=T)
                self.assert_allocated(r, transport)
                self.assertEqual(r.uri, self.relay.uri(transport))
        # the range as text, the family asked for
        r = turnfleet.probe(self.relay.uri(), h.SECRET, expect_address=ADDR, expect_port_range="59000-59099",
                            family="ipv4", timeout=T)
        self.assert_allocated(r)

    def test_peer_check_sends_data_through_the_relay(self):
        r = turnfleet.probe(self.relay.uri(), h.SECRET, peer_check=True, timeout=T)
        self.assert_allocated(r)
        self.assertIn("data", r.rtt_ms)

    def test_a_failed_check_is_a_generic_error(self):
        r = turnfleet.probe(self.relay.uri(), h.SECRET, expect_address="127.0.0.72", timeout=T)
        self.assertFalse(r.ok)
        self.assertEqual((r.stage, r.status, r.exit_code), ("verify", core.TF_ERROR, 1))
        self.assertIn("127.0.0.72", r.message)
        with self.assertRaises(turnfleet.GenericError) as cm:
            r.raise_for_status()
        self.assertIs(cm.exception.result, r)
        r = turnfleet.probe(self.relay.uri(), h.SECRET, expect_port_range=(1024, 2048), timeout=T)
        self.assertEqual((r.ok, r.stage), (False, "verify"))

    def test_a_wrong_secret_is_an_auth_error(self):
        r = turnfleet.probe(self.relay.uri(), "not the secret", timeout=T)
        self.assertEqual((r.ok, r.stage, r.error_code, r.status), (False, "allocate", 401, core.TF_EAUTH))
        self.assertEqual(r.status_name, "TF_EAUTH")
        with self.assertRaises(turnfleet.AuthError):
            r.raise_for_status()

    def test_fields_are_the_cli_json(self):
        with tempfile.TemporaryDirectory() as d:
            secret = h.private_file(d, "secret", h.SECRET + "\n")
            for extra, kw in (([], {}), (["--expect-address", "127.0.0.72"], {"expect_address": "127.0.0.72"})):
                with self.subTest(extra=extra):
                    p = subprocess.run(
                        [h.tool("turnfleet-probe"), "--uri", self.relay.uri(), "--secret-file", secret, "--json",
                         "--timeout-ms", str(int(T * 1000)), *extra],
                        capture_output=True, text=True)
                    cli = json.loads(p.stdout.splitlines()[0])
                    r = turnfleet.probe(self.relay.uri(), h.SECRET, timeout=T, **kw)
                    self.assertEqual(p.returncode, r.exit_code)
                    mine = r.to_dict()
                    self.assertEqual(list(mine), list(cli))  # same fields, same order
                    # the dataclass has them all, in snake_case
                    snake = {f.name for f in dataclasses.fields(r)}
                    for key in cli:
                        self.assertIn("".join("_" + c.lower() if c.isupper() else c for c in key), snake)
                    for key in ("uri", "ok", "stage", "errorCode", "errorReason", "relayedAddress",
                                "mappedAddress", "draining", "message"):
                        self.assertEqual(mine[key], cli[key], key)
                    self.assertEqual(set(mine["rttMs"]), set(cli["rttMs"]))

    def test_probe_many_runs_one_set(self):
        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.73", 0))
        lines = []
        targets = [
            self.relay.uri("udp"),
            {"uri": self.relay.uri("tcp"), "expect_address": ADDR},
            {"uri": self.relay.uri(), "expect_address": "127.0.0.72"},
            {"uri": f"turn:127.0.0.73:{silent.getsockname()[1]}", "timeout": 0.5, "rto": 0.1},
            {"uri": self.relay.uri(), "secret": "wrong"},
        ] + [self.relay.uri()] * 6
        results = turnfleet.probe_many(targets, h.SECRET, concurrency=4, timeout=T, expect_port_range=RANGE,
                                       log=lambda level, msg: lines.append((level, msg)))
        self.assertEqual(len(results), len(targets))
        self.assert_allocated(results[0])
        self.assert_allocated(results[1], "tcp")
        self.assertEqual((results[2].ok, results[2].stage), (False, "verify"))
        self.assertEqual((results[3].ok, results[3].status), (False, core.TF_ETIMEOUT))
        self.assertEqual((results[4].ok, results[4].error_code), (False, 401))
        for r in results[5:]:
            self.assert_allocated(r)
        self.assertEqual([r.uri for r in results],
                         [t if isinstance(t, str) else t["uri"] for t in targets])
        self.assertTrue(lines, "the log callback was not called")
        self.assertFalse(any(h.SECRET in m for _, m in lines))
        self.assertEqual(turnfleet.probe_many([], h.SECRET), [])

    def test_four_threads_probe_at_once(self):
        barrier = threading.Barrier(4)
        results, errors = {}, []

        def worker(n):
            try:
                barrier.wait(timeout=30)
                out = []
                for i in range(3):
                    transport = "tcp" if (n + i) % 2 else "udp"
                    out.append((transport, turnfleet.probe(self.relay.uri(transport), h.SECRET, expect_address=ADDR,
                                                           expect_port_range=RANGE, timeout=T)))
                results[n] = out
            except BaseException as e:  # noqa: B902 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(results), [0, 1, 2, 3])
        for n, out in results.items():
            for transport, r in out:
                with self.subTest(thread=n, transport=transport):
                    self.assert_allocated(r, transport)

    def test_the_probe_releases_the_gil(self):
        """While a probe waits in C, this thread runs Python: it answers the probe's
        Allocate (400) from Python code. Had the probe kept the GIL, no answer
        could come before its deadline and it would time out instead."""
        server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(server.close)
        server.bind(("127.0.0.73", 0))
        server.settimeout(T * 2)
        uri = f"turn:127.0.0.73:{server.getsockname()[1]}"
        out = {}
        worker = threading.Thread(target=lambda: out.setdefault("r", turnfleet.probe(uri, "s", timeout=T)))
        worker.start()
        try:
            data, peer = server.recvfrom(2048)
            request = stun.decode(data)  # Python, while the worker is in tf_probe_run
            self.assertEqual((request.method, request.cls), (stun.ALLOCATE, stun.REQUEST))
            self.assertTrue(worker.is_alive())
            server.sendto(stun.encode(stun.ALLOCATE, stun.ERROR, [(stun.ERROR_CODE, b"\0\0\x04\x00Bad Request")],
                                      transaction_id=request.transaction_id), peer)
        finally:
            worker.join(T * 4)
        r = out["r"]
        self.assertEqual((r.ok, r.stage, r.error_code), (False, "allocate", 400), r.message)
        self.assertEqual(r.status, core.TF_ERROR)

    def test_log_to_a_logger(self):
        logger = logging.getLogger("turnfleet.test")
        with self.assertLogs(logger, logging.DEBUG) as cm:
            r = turnfleet.probe(self.relay.uri(), h.SECRET, timeout=T, log=logger, log_level=logging.DEBUG)
        self.assert_allocated(r)
        self.assertTrue(any(ADDR in line for line in cm.output), cm.output)
        self.assertFalse(any(h.SECRET in line for line in cm.output))

    def test_a_raising_log_callback_does_not_stop_the_probe(self):
        def bad(level, message):
            raise RuntimeError("callback failed")

        seen = []
        old = sys.unraisablehook
        sys.unraisablehook = lambda u: seen.append(u.exc_value)
        try:
            r = turnfleet.probe(self.relay.uri(), h.SECRET, timeout=T, log=bad, log_level=logging.DEBUG)
        finally:
            sys.unraisablehook = old
        self.assert_allocated(r)
        self.assertTrue(seen and all(isinstance(e, RuntimeError) for e in seen))

    def test_allocate_holds_an_allocation(self):
        with turnfleet.allocate(self.relay.uri(), h.SECRET, expect_address=ADDR, expect_port_range=RANGE,
                                timeout=T) as a:
            self.assertIsInstance(a, turnfleet.Allocation)
            address, port = a.relayed
            self.assertEqual(address, ADDR)
            self.assertTrue(RANGE[0] <= port <= RANGE[1])
            self.assertEqual((a.result.relayed_address, a.result.relayed_port), (address, port))
            self.assertGreater(a.lifetime, 0)
            a.refresh()
            a.release()
        self.assertTrue(a.closed)
        with self.assertRaises(ValueError):
            a.refresh()
        with self.assertRaises(turnfleet.AuthError) as cm:
            turnfleet.allocate(self.relay.uri(), "wrong secret", timeout=T)
        self.assertEqual(cm.exception.result.error_code, 401)

    def test_an_allocation_dropped_unclosed_is_released_with_a_resource_warning(self):
        import gc
        import warnings

        a = turnfleet.allocate(self.relay.uri(), h.SECRET, timeout=T)
        address, port = a.relayed
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            del a
            gc.collect()
        self.assertEqual([w.category for w in seen], [ResourceWarning], [str(w.message) for w in seen])
        self.assertIn("unclosed <turnfleet.Allocation %s:%d" % (address, port), str(seen[0].message))
        # closed ones and with-blocks warn nothing
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with turnfleet.allocate(self.relay.uri(), h.SECRET, timeout=T):
                pass
            b = turnfleet.allocate(self.relay.uri(), h.SECRET, timeout=T)
            b.close()
            del b
            gc.collect()
        self.assertEqual(seen, [])

    def test_the_example_plans_and_probes(self):
        with tempfile.TemporaryDirectory() as d:
            secret = h.private_file(d, "secret", h.SECRET + "\n")
            p = subprocess.run(
                [sys.executable, h.source("examples/python/plan_and_probe.py"), "--probe-uri", self.relay.uri(),
                 "--probe-uri", self.relay.uri("tcp"), "--secret-file", secret, "--timeout", str(T)],
                capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"demo-relay-\w+ +relay-a +127\.0\.0\.11 +50000-50099")
        self.assertIn(f"ok {self.relay.uri()} stage=done code=0 relayed={ADDR}:", p.stdout)
        self.assertIn(f"ok {self.relay.uri('tcp')} stage=done", p.stdout)
        self.assertNotIn(h.SECRET, p.stdout + p.stderr)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "^uri: BAD_SCHEME at byte 0: ") as cm:
            turnfleet.probe("stun:127.0.0.71", h.SECRET)
        self.assertEqual((cm.exception.reason_code, cm.exception.offset), ("BAD_SCHEME", 0))
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "expect_address"):
            turnfleet.probe(self.relay.uri(), h.SECRET, expect_address="127.0.0.300")
        with self.assertRaises(turnfleet.InvalidArgument) as cm:
            turnfleet.probe(self.relay.uri(), "", timeout=T)
        with self.assertRaises(ValueError):
            turnfleet.probe(self.relay.uri(), h.SECRET, family="ipv5")
        with self.assertRaises(TypeError):
            turnfleet.probe(self.relay.uri(), None)
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.probe(self.relay.uri(), h.SECRET, expect_port_range="9-1")
        with self.assertRaisesRegex(turnfleet.InvalidArgument, "timeout"):
            turnfleet.probe(self.relay.uri(), h.SECRET, timeout=0)
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.probe_many([self.relay.uri()], h.SECRET, concurrency=0)


if __name__ == "__main__":
    unittest.main()
