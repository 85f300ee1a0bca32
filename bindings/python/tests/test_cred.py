"""TURN REST credentials: the reference vectors, expiry, separators, secret files."""

import os
import pathlib
import tempfile
import time
import unittest

import turnfleet

import tfhelpers as h


class CredTest(unittest.TestCase):
    def test_reference_vectors(self):
        vecs = h.vectors("turn_rest_credentials.jsonl")
        self.assertGreaterEqual(len(vecs), 6)
        for v in vecs:
            with self.subTest(id=v["id"]):
                # mint with now + ttl = the vector's expiry
                user, password = turnfleet.mint_credentials(v["secret"], v["user"], 600, now=v["expiry"] - 600,
                                                            separator=v["separator"])
                self.assertEqual((user, password), (v["username"], v["password"]))
                self.assertEqual(turnfleet.credential_password(v["secret"], v["username"]), v["password"])
                turnfleet.verify_credentials(v["secret"], v["username"], v["password"], now=v["expiry"] - 1,
                                             separator=v["separator"])
                key = turnfleet.stun.long_term_key(v["username"], v["realm"], v["password"])
                self.assertEqual(key.hex(), v["key_md5_hex"])

    def test_expired_and_wrong_credentials(self):
        user, password = turnfleet.mint_credentials("secret", "bob", 60, now=1_000_000)
        self.assertEqual(user, "1000060:bob")
        turnfleet.verify_credentials("secret", user, password, now=1_000_059)
        with self.assertRaisesRegex(turnfleet.AuthError, "expired"):
            turnfleet.verify_credentials("secret", user, password, now=1_000_061)
        with self.assertRaises(turnfleet.AuthError):
            turnfleet.verify_credentials("secret", user, password[:-2] + "xx", now=1_000_000)
        with self.assertRaises(turnfleet.InvalidArgument):
            turnfleet.verify_credentials("secret", "bob", password, now=1_000_000)

    def test_now_defaults_to_the_clock(self):
        user, password = turnfleet.mint_credentials("secret", "carol", 600)
        expiry = int(user.split(":")[0])
        self.assertLessEqual(abs(expiry - (time.time() + 600)), 5)
        turnfleet.verify_credentials("secret", user, password)

    def test_bad_arguments_never_echo_the_secret(self):
        with self.assertRaises(turnfleet.InvalidArgument) as cm:
            turnfleet.mint_credentials("", "u", 60, now=0)
        with self.assertRaises(turnfleet.InvalidArgument) as cm:
            turnfleet.mint_credentials("topsecret", "a:b", 60, now=0)
        self.assertNotIn("topsecret", str(cm.exception))
        with self.assertRaises(TypeError):
            turnfleet.mint_credentials(b"bytes", "u", 60, now=0)
        with self.assertRaises(ValueError):
            turnfleet.mint_credentials("s", "u", 60, now=0, separator="::")

    def test_read_secret(self):
        with tempfile.TemporaryDirectory() as d:
            path = h.private_file(d, "secret", "the-secret\r\n")
            self.assertEqual(turnfleet.read_secret(path), "the-secret")
            self.assertEqual(turnfleet.read_secret(pathlib.Path(path)), "the-secret")
            self.assertEqual(turnfleet.read_secret(os.fsencode(path)), "the-secret")
            two = h.private_file(d, "two", "a\nb\n")
            with self.assertRaises(turnfleet.InvalidArgument) as cm:
                turnfleet.read_secret(two)
            self.assertNotIn("a\nb", str(cm.exception))
            with self.assertRaises(turnfleet.InputOutputError):
                turnfleet.read_secret(os.path.join(d, "none"))


if __name__ == "__main__":
    unittest.main()
