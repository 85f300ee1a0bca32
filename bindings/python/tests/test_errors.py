"""Every exception class: its code, its built-in base, and a real call that raises it."""

import pickle
import socket
import tempfile
import unittest

import turnfleet
from turnfleet import core

import tfhelpers as h

EXPECTED = [
    # class, code, built-in base (None: Exception only)
    (turnfleet.GenericError, core.TF_ERROR, None),
    (turnfleet.InvalidArgument, core.TF_EINVALID, ValueError),
    (turnfleet.NotFound, core.TF_ENOTFOUND, LookupError),
    (turnfleet.Timeout, core.TF_ETIMEOUT, TimeoutError),
    (turnfleet.AuthError, core.TF_EAUTH, None),
    (turnfleet.ProtocolError, core.TF_EPROTO, ValueError),
    (turnfleet.BufferTooSmall, core.TF_EBUFS, BufferError),
    (turnfleet.OutOfMemory, core.TF_ENOMEM, MemoryError),
    (turnfleet.NetworkError, core.TF_ENET, ConnectionError),
    (turnfleet.CallbackError, core.TF_EUSER, RuntimeError),
    (turnfleet.InputOutputError, core.TF_EIO, OSError),
    (turnfleet.ResourceExhausted, core.TF_ERESOURCE, OSError),
    (turnfleet.ConflictError, core.TF_ECONFLICT, None),
    (turnfleet.ExpiredError, core.TF_EEXPIRED, None),
    (turnfleet.UnavailableError, core.TF_EUNAVAILABLE, ConnectionError),
    (turnfleet.RefusedError, core.TF_EREFUSED, None),
]


class ErrorClassesTest(unittest.TestCase):
    def test_one_class_per_code_with_its_builtin(self):
        codes = set()
        for cls, code, base in EXPECTED:
            with self.subTest(cls=cls.__name__):
                self.assertTrue(issubclass(cls, turnfleet.Error))
                self.assertIs(turnfleet.error_class(code), cls)
                if base is not None:
                    self.assertTrue(issubclass(cls, base), f"{cls.__name__} is not a {base.__name__}")
                e = turnfleet._errors._make(code, "x.y: why")
                self.assertIsInstance(e, cls)
                self.assertEqual(e.code, code)
                self.assertEqual(e.name, core.tf_error_name(code))
                self.assertEqual(str(e), "x.y: why")
                codes.add(code)
        # every negative code of the library's table has its class
        table = {getattr(core, n) for n in dir(core) if n.startswith("TF_E") and isinstance(getattr(core, n), int)}
        table.add(core.TF_ERROR)
        self.assertEqual(codes, {c for c in table if c < 0})

    def test_an_unknown_code_is_the_base_class(self):
        e = turnfleet._errors._make(-99, "from the future")
        self.assertIs(type(e), turnfleet.Error)
        self.assertEqual(e.code, -99)

    def test_integrity_error_is_both_protocol_and_auth(self):
        self.assertTrue(issubclass(turnfleet.IntegrityError, turnfleet.ProtocolError))
        self.assertTrue(issubclass(turnfleet.IntegrityError, turnfleet.AuthError))
        self.assertEqual(turnfleet.IntegrityError.code, core.TF_EAUTH)

    def test_os_error_subclasses_keep_the_message(self):
        # OSError(a, b) would read (errno, strerror): the message must stay whole
        e = turnfleet.InputOutputError("secret.txt: cannot open", core.TF_EIO)
        self.assertEqual(str(e), "secret.txt: cannot open")
        self.assertEqual(e.code, core.TF_EIO)

    def test_reason_code_and_offset_are_parsed(self):
        with self.assertRaises(turnfleet.InvalidArgument) as cm:
            turnfleet.parse_uri("turn:127.0.0.1:99999")
        self.assertEqual(cm.exception.reason_code, "PORT_OUT_OF_RANGE")
        self.assertIsInstance(cm.exception.offset, int)
        e = turnfleet.InvalidArgument("spec.replicas: -1 is negative", core.TF_EINVALID)
        self.assertIsNone(e.reason_code)
        self.assertIsNone(e.offset)

    def test_pickles(self):
        e = turnfleet.ProtocolError("TRUNCATED_HEADER at byte 0: short", core.TF_EPROTO)
        f = pickle.loads(pickle.dumps(e))
        self.assertIs(type(f), turnfleet.ProtocolError)
        self.assertEqual((f.code, f.message, f.reason_code), (e.code, e.message, "TRUNCATED_HEADER"))

    def test_strerror_and_names(self):
        self.assertEqual(turnfleet.error_name(core.TF_EINVALID), "TF_EINVALID")
        self.assertEqual(turnfleet.strerror(core.TF_EINVALID), "invalid argument or input")


class RaisedByTheLibraryTest(unittest.TestCase):
    """Each class from a real failing call (OutOfMemory and CallbackError cannot be provoked here)."""

    def test_invalid_argument(self):
        with self.assertRaises(turnfleet.InvalidArgument) as cm:
            turnfleet.parse_uri("stun:127.0.0.1")
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(cm.exception.code, core.TF_EINVALID)

    def test_not_found(self):
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes, turnfleet.plan(pool, nodes) as plan:
            with self.assertRaises(turnfleet.NotFound) as cm:
                turnfleet.render_coturn(pool, plan, "demo-relay-zzzzz", "s", state_dir="/tmp/x")
            self.assertIsInstance(cm.exception, LookupError)
            self.assertIn("demo-relay-zzzzz", str(cm.exception))

    def test_auth_error(self):
        user, password = turnfleet.mint_credentials("secret", "alice", 600, now=1000)
        with self.assertRaises(turnfleet.AuthError) as cm:
            turnfleet.verify_credentials("other secret", user, password, now=1000)
        self.assertEqual(cm.exception.code, core.TF_EAUTH)

    def test_protocol_error(self):
        with self.assertRaises(turnfleet.ProtocolError) as cm:
            turnfleet.Pool.from_json("{")
        self.assertIsInstance(cm.exception, ValueError)
        self.assertRegex(str(cm.exception), r"^line 1, column \d+ \(byte \d+\): ")

    def test_buffer_too_small(self):
        with self.assertRaises(turnfleet.BufferTooSmall) as cm:
            turnfleet.stun.frame_length(b"\x00\x01")
        self.assertIsInstance(cm.exception, BufferError)

    def test_input_output_error(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(turnfleet.InputOutputError) as cm:
                turnfleet.read_secret(f"{d}/missing")
            self.assertIsInstance(cm.exception, OSError)
            self.assertIn("missing", str(cm.exception))

    def test_timeout_and_network_errors_from_probe_results(self):
        # (GenericError from a probe: test_probe, a relayed address other than expected)
        # a UDP socket that never answers: Timeout
        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.76", 0))
        port = silent.getsockname()[1]
        r = turnfleet.probe(f"turn:127.0.0.76:{port}", "s", timeout=0.3, rto=0.1)
        self.assertFalse(r.ok)
        self.assertEqual(r.status, core.TF_ETIMEOUT)
        with self.assertRaises(turnfleet.Timeout) as cm:
            r.raise_for_status()
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertIs(cm.exception.result, r)
        # a TCP port bound but not listening: refused, NetworkError
        closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(closed.close)
        closed.bind(("127.0.0.76", 0))
        port = closed.getsockname()[1]
        r = turnfleet.probe(f"turn:127.0.0.76:{port}?transport=tcp", "s", timeout=2.0)
        self.assertEqual(r.status, core.TF_ENET, r.message)
        with self.assertRaises(turnfleet.NetworkError) as cm:
            r.raise_for_status()
        self.assertIsInstance(cm.exception, ConnectionError)
        self.assertEqual(r.exit_code, 3)


if __name__ == "__main__":
    unittest.main()
