"""turnfleet.stun: RFC 5769 and coturn vectors, the malformed-response corpus, every bytes-like type."""

import array
import unittest

import turnfleet
from turnfleet import stun

import tfhelpers as h


def buffers(raw):
    """The same bytes as bytes, bytearray, memoryview, a memoryview slice, an array."""
    out = [raw, bytearray(raw), memoryview(raw), memoryview(b"\xff" + raw + b"\xff")[1:-1]]
    if len(raw) % 4 == 0 and raw:
        out.append(array.array("I", raw))  # a non-byte format: read as its bytes
    return out


def msg_type(m):
    """The wire message type of a decoded message (method bits around the class bits C0, C1)."""
    t = (m.method & 0x000F) | ((m.method & 0x0070) << 1) | ((m.method & 0x0F80) << 2)
    return f"0x{t | ((m.cls & 1) << 4) | ((m.cls & 2) << 7):04x}"


class DecodeTest(unittest.TestCase):
    def test_rfc5769(self):
        for v in h.vectors("rfc5769.jsonl"):
            raw = bytes.fromhex(v["hex"])
            for data in buffers(raw):
                with self.subTest(id=v["id"], type=type(data).__name__):
                    m = stun.decode(data)
                    self.assertIsInstance(m, stun.StunMessage)
                    self.assertEqual(m.method_name, v["method"])
                    self.assertEqual(m.class_name, v["cls"])
                    self.assertEqual(m.transaction_id.hex(), v["tid"])
                    self.assertEqual(",".join(f"0x{a.type:04x}" for a in m.attributes), v["attr_types"])
                    self.assertEqual(m.data, raw)
                    self.assertEqual(m.get(stun.MESSAGE_INTEGRITY).hex(), v["mi_hex"])
                    if "xor_mapped_ip" in v:
                        self.assertEqual(m.address(stun.XOR_MAPPED_ADDRESS), (v["xor_mapped_ip"], v["xor_mapped_port"]))
                    if "software" in v:
                        self.assertEqual(m.text(stun.SOFTWARE), v["software"])
                    if v["credential"] == "long-term":
                        key = bytes.fromhex(v["key_hex"])
                        self.assertEqual(m.text(stun.REALM), v["realm"])
                    else:
                        key = v["password"].encode()
                    self.assertIsNone(stun.check_integrity(data, key))
                    with self.assertRaises(turnfleet.AuthError):
                        stun.check_integrity(data, b"wrong key")

    def test_coturn_exchanges(self):
        count = 0
        for v in h.vectors("coturn_4.6.1_exchanges.jsonl"):
            for side in ("request", "response"):
                if v.get(f"{side}_kind") != "stun":
                    continue
                raw = bytes.fromhex(v[f"{side}_hex"])
                with self.subTest(id=v["id"], side=side):
                    m = stun.decode(raw)
                    self.assertEqual(msg_type(m), v[f"{side}.msg_type"])
                    self.assertEqual(",".join(f"0x{a.type:04x}" for a in m.attributes), v[f"{side}.attr_types"])
                    count += 1
                    if side == "response" and m.cls == stun.ERROR:
                        self.assertIsInstance(m.error[0], int)
                        self.assertGreaterEqual(m.error[0], 300)
        self.assertGreater(count, 100)

    def test_malformed_vectors(self):
        """Every case of stun_malformed.jsonl: the message, or ProtocolError naming the defect."""
        vecs = h.vectors("stun_malformed.jsonl")
        accepted = rejected = 0
        for v in vecs:
            raw = bytes.fromhex(v["hex"])
            tid = bytes.fromhex(v["ctx_tid"])
            key = bytes.fromhex(v["ctx_key_hex"]) if v["ctx_authenticated"] else None
            for data in (raw, bytearray(raw), memoryview(raw)):
                with self.subTest(id=v["id"], type=type(data).__name__):
                    if v["verdict"] == "accept":
                        m = stun.validate_response(data, bytearray(tid), v["ctx_method"], key)
                        self.assertEqual(m.transaction_id, tid)
                        self.assertEqual(m.method, stun.ALLOCATE)
                    else:
                        with self.assertRaises(turnfleet.ProtocolError) as cm:
                            stun.validate_response(data, memoryview(tid), v["ctx_method"], key)
                        e = cm.exception
                        self.assertEqual(e.reason_code, v["reason_code"], str(e))
                        self.assertIsNotNone(e.offset)
                        self.assertLessEqual(e.offset, len(raw))
                        auth = v["reason_code"] in ("INTEGRITY_MISMATCH", "MISSING_MESSAGE_INTEGRITY")
                        self.assertIs(type(e), turnfleet.IntegrityError if auth else turnfleet.ProtocolError)
                        self.assertEqual(isinstance(e, turnfleet.AuthError), auth)
            if v["verdict"] == "accept":
                accepted += 1
            else:
                rejected += 1
        self.assertEqual((accepted, rejected), (4, 24))

    def test_decode_rejects_with_reason_and_offset(self):
        with self.assertRaises(turnfleet.ProtocolError) as cm:
            stun.decode(b"")
        self.assertEqual(cm.exception.reason_code, "TRUNCATED_HEADER")
        self.assertEqual(cm.exception.offset, 0)

    def test_validate_response_checks_the_context(self):
        v = next(x for x in h.vectors("stun_malformed.jsonl") if x["verdict"] == "accept")
        raw, tid = bytes.fromhex(v["hex"]), bytes.fromhex(v["ctx_tid"])
        with self.assertRaises(turnfleet.ProtocolError):
            stun.validate_response(raw, bytes(12), "Allocate")  # another transaction
        with self.assertRaises(turnfleet.ProtocolError):
            stun.validate_response(raw, tid, stun.REFRESH)  # another method
        with self.assertRaises(ValueError):
            stun.validate_response(raw, tid[:11], "Allocate")  # not 12 bytes
        with self.assertRaises(ValueError):
            stun.validate_response(raw, tid, "Bogus")

    def test_not_a_buffer_is_a_type_error(self):
        for bad in ("0001", 5, None, [1, 2]):
            with self.subTest(bad=bad), self.assertRaises(TypeError):
                stun.decode(bad)
        with self.assertRaises(TypeError):
            stun.check_integrity(b"\x00" * 20, "key as str")


class EncodeTest(unittest.TestCase):
    def test_round_trip(self):
        key = stun.long_term_key("user", "realm.test", "pw")
        tid = bytes(range(12))
        raw = stun.encode(
            "Allocate",
            "request",
            [
                (stun.REQUESTED_TRANSPORT, 17 << 24),
                (stun.USERNAME, b"user"),
                (stun.REALM, bytearray(b"realm.test")),
                (stun.XOR_PEER_ADDRESS, ("2001:db8::7", 4242)),
            ],
            transaction_id=tid,
            key=key,
            fingerprint=True,
        )
        self.assertIsInstance(raw, bytes)
        m = stun.decode(memoryview(raw))
        self.assertEqual((m.method, m.cls, m.transaction_id), (stun.ALLOCATE, stun.REQUEST, tid))
        self.assertEqual(m.u32(stun.REQUESTED_TRANSPORT), 17 << 24)
        self.assertEqual(m.text(stun.USERNAME), "user")
        self.assertEqual(m.address(stun.XOR_PEER_ADDRESS), ("2001:db8::7", 4242))
        self.assertEqual([a.name for a in m.attributes][-2:], ["MESSAGE-INTEGRITY", "FINGERPRINT"])
        self.assertIsNone(stun.check_integrity(raw, key))
        self.assertIsNone(m.error)
        self.assertIsNone(m.find(stun.LIFETIME))
        # a fresh transaction id each time
        self.assertNotEqual(stun.decode(stun.encode("Binding")).transaction_id,
                            stun.decode(stun.encode("Binding")).transaction_id)
        with self.assertRaises(turnfleet.NotFound):
            stun.check_integrity(stun.encode("Binding"), key)

    def test_error_response(self):
        raw = stun.encode(stun.ALLOCATE, stun.ERROR, [(stun.ERROR_CODE, b"\x00\x00\x04\x01Unauthorized")])
        m = stun.decode(raw)
        self.assertEqual(m.error, (401, "Unauthorized"))
        self.assertEqual(m.class_name, "error")

    def test_limits(self):
        with self.assertRaises(turnfleet.BufferTooSmall):
            stun.encode("Binding", attributes=[(stun.DATA, bytes(stun.MAX_MESSAGE))])
        self.assertEqual(stun.MAX_MESSAGE, 4096)

    def test_framing_and_channel_data(self):
        raw = stun.encode("Binding", fingerprint=True)
        self.assertEqual(stun.frame_length(bytearray(raw + b"extra")), len(raw))
        frame = stun.channel_data_encode(0x4000, b"hello", pad=True)
        self.assertEqual(len(frame), 4 + 8)
        self.assertEqual(stun.frame_length(frame), 12)
        self.assertEqual(stun.channel_data_decode(memoryview(frame)), (0x4000, b"hello"))
        self.assertEqual(len(stun.channel_data_encode(0x4001, b"hello")), 9)
        with self.assertRaises(turnfleet.InvalidArgument):
            stun.channel_data_encode(0x3FFF, b"x")
        with self.assertRaises(turnfleet.ProtocolError):
            stun.frame_length(b"\xc0\x00\x00\x00")


if __name__ == "__main__":
    unittest.main()
