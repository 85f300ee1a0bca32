"""Ownership: every handle is freed, buffers are released after each call, inputs keep their refcounts.

core.tf_py_live_handles() counts the owned C handles that exist: a handle a
lost reference keeps alive (which valgrind only sees as "still reachable")
shows up here. The valgrind test (valgrind_check.py) runs this module too.
"""

import gc
import sys
import unittest

import turnfleet
from turnfleet import core, stun

import tfhelpers as h

CYCLES = 300 if h.VALGRIND else 20000


def live():
    gc.collect()
    return core.tf_py_live_handles()


def exercise():
    """Every binding once, with its failure paths (no network)."""
    pool_text = h.read(h.source("examples/pools/loopback.yaml"))
    nodes_text = h.read(h.source("examples/nodes/loopback.json"), "rb")
    pool = turnfleet.Pool.from_yaml(pool_text)
    nodes = turnfleet.Nodes.from_json(bytearray(nodes_text))
    pool.validate()
    pool.to_json()
    _ = (pool.listeners, pool.relay_port_range, nodes.names, nodes.eligible(pool), nodes.host_address(0))
    bad = turnfleet.Pool.from_yaml(h.read(h.data("invalid/pool-61-many-mistakes.yaml")))
    bad.validate()
    for call in (lambda: turnfleet.plan(bad, nodes), lambda: turnfleet.Pool.from_json("{"),
                 lambda: turnfleet.Nodes.from_json("[]"), lambda: nodes.host_address(0, 6)):
        try:
            call()
        except turnfleet.Error:
            pass
    p = turnfleet.plan(pool, nodes)
    p2 = turnfleet.plan(pool, nodes, existing=p)
    p3 = turnfleet.plan(pool, nodes, existing=[{"pool": "x", "identity": "127.0.0.11/50000-50001"}])
    cap = turnfleet.capacity(pool, nodes, target_allocations=1000, session_kbps=100, node_mbps=100)
    cap.to_json()
    turnfleet.capacity(pool, p2).close()
    conf = turnfleet.render_coturn(pool, p, p.relays[0], ["s1", "s2"], state_dir="/s")
    turnfleet.config_hash(conf)
    try:
        turnfleet.render_coturn(pool, p, "nope", "s", state_dir="/s")
    except turnfleet.NotFound:
        pass
    for c in (p, p2, p3, cap, pool, bad, nodes):
        c.close()
    with turnfleet.Existing.from_json('[{"pool": "o", "identity": "10.0.0.1/1-2"}]') as f:
        f.add("10.0.0.2/1-2", pool="o", listener_ports=[1, 2])
    user, pw = turnfleet.mint_credentials("s", "u", 60, now=0)
    turnfleet.verify_credentials("s", user, pw, now=1)
    try:
        turnfleet.verify_credentials("s", user, "x", now=1)
    except turnfleet.AuthError:
        pass
    turnfleet.credential_password("s", user)
    turnfleet.parse_uri("turns:[::1]:5349")
    turnfleet.format_uri("::1", 1, "tcp")
    try:
        turnfleet.parse_uri("turn:[::1")
    except turnfleet.InvalidArgument:
        pass
    key = stun.long_term_key("u", "r", "p")
    raw = stun.encode("Allocate", "request", [(stun.USERNAME, b"u"), (stun.LIFETIME, 600),
                                              (stun.XOR_PEER_ADDRESS, ("127.0.0.1", 9))], key=key, fingerprint=True)
    m = stun.decode(memoryview(raw))
    stun.check_integrity(bytearray(raw), key)
    stun.frame_length(raw)
    stun.channel_data_decode(stun.channel_data_encode(0x4000, b"abc", pad=True))
    for v in h.vectors("stun_malformed.jsonl"):
        try:
            stun.validate_response(bytes.fromhex(v["hex"]), bytes.fromhex(v["ctx_tid"]), "Allocate",
                                   bytes.fromhex(v["ctx_key_hex"]) if v["ctx_authenticated"] else None)
        except turnfleet.ProtocolError:
            pass
    for bad_call in (lambda: stun.decode(b"\x00" * 19), lambda: stun.check_integrity(b"", key),
                     lambda: stun.encode("Binding", attributes=[(stun.DATA, bytes(5000))])):
        try:
            bad_call()
        except turnfleet.Error:
            pass
    turnfleet.canonical_address("::ffff:1.2.3.4")
    turnfleet.coturn_version("4.6.1")
    turnfleet.relay_name("p", "1.2.3.4/1-2")
    try:
        turnfleet.probe("stun:nope", "s")
    except turnfleet.InvalidArgument:
        pass
    return m


class MemoryTest(unittest.TestCase):
    def test_every_binding_frees_its_handles(self):
        before = live()
        for _ in range(3):
            exercise()
        self.assertEqual(live(), before)

    def test_handles_are_counted(self):
        # the counter the other tests rely on does count
        before = live()
        pool = turnfleet.Pool.from_yaml(h.read(h.source("examples/pools/loopback.yaml")))
        self.assertEqual(live(), before + 1)
        pool.close()
        self.assertEqual(live(), before)
        with turnfleet.Nodes.load(h.source("examples/nodes/loopback.json")):
            self.assertEqual(live(), before + 1)
        self.assertEqual(live(), before)
        pool = turnfleet.Pool.from_yaml(h.read(h.source("examples/pools/loopback.yaml")))
        del pool  # no close: the object's end frees it
        self.assertEqual(live(), before)

    def test_create_and_close_cycles(self):
        text = h.read(h.source("examples/pools/loopback.yaml")).encode()
        nodes = turnfleet.Nodes.load(h.source("examples/nodes/loopback.json"))
        before = live()
        for _ in range(CYCLES):
            with turnfleet.Pool.from_yaml(text) as pool:
                turnfleet.plan(pool, nodes).close()
        self.assertEqual(live(), before)
        nodes.close()

    def test_buffers_are_released_after_each_call(self):
        raw = stun.encode("Binding", fingerprint=True)
        ba = bytearray(raw)
        stun.decode(ba)
        ba.append(0)  # resizing needs no exported buffer left
        with self.assertRaises(turnfleet.ProtocolError):
            stun.decode(ba)  # fails: one byte too many
        ba.pop()
        tid = bytearray(11)
        with self.assertRaises(ValueError):
            stun.validate_response(ba, tid, "Binding")
        tid.append(0)
        ba.extend(b"x")
        yaml = bytearray(h.read(h.source("examples/pools/loopback.yaml")).encode())
        turnfleet.Pool.from_yaml(yaml).close()
        with self.assertRaises(turnfleet.ProtocolError):
            turnfleet.Pool.from_json(yaml)
        yaml.extend(b"\n")

    def test_input_refcounts_are_unchanged(self):
        raw = stun.encode("Binding", fingerprint=True)
        text = h.read(h.source("examples/pools/loopback.yaml"))
        secret = "a-secret-" + str(id(self))  # its own object
        counts = (sys.getrefcount(raw), sys.getrefcount(text), sys.getrefcount(secret))
        for _ in range(200):
            stun.decode(raw)
            turnfleet.Pool.from_yaml(text).close()
            turnfleet.mint_credentials(secret, "u", 60, now=0)
            try:
                turnfleet.Pool.from_json(text)
            except turnfleet.ProtocolError:
                pass
        self.assertEqual((sys.getrefcount(raw), sys.getrefcount(text), sys.getrefcount(secret)), counts)

    def test_results_are_plain_python(self):
        m = exercise()
        self.assertIsInstance(m, stun.StunMessage)
        self.assertIsInstance(m.data, bytes)
        self.assertIsInstance(m.attributes[0].value, bytes)
        with turnfleet.Pool.load(h.source("examples/pools/loopback.yaml")) as pool, turnfleet.Nodes.load(
            h.source("examples/nodes/loopback.json")
        ) as nodes, turnfleet.plan(pool, nodes) as p:
            r = p.relays[0]
        self.assertEqual(type(r.addresses), list)
        self.assertEqual(type(r.port_range), tuple)
        self.assertEqual(type(r.name), str)


if __name__ == "__main__":
    unittest.main()
