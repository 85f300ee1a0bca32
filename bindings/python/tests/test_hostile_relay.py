"""A relay that answers with bytes no JSON can carry: the probe's results are
still turnfleet objects (never a JSONDecodeError), and probe_many() returns
every result. The "relay" is a UDP socket on 127.0.0.73 (ephemeral port) that
answers every request with 486 and a 763-byte reason phrase of 0xFF bytes."""

import os
import socket
import struct
import threading
import unittest

import turnfleet

import tfhelpers as h

COOKIE = 0x2112A442


def error_response(request, code=486, reason=b"\xff" * 763):
    tid = request[8:20]
    value = struct.pack("!HBB", 0, code // 100, code % 100) + reason
    pad = (-len(value)) % 4
    attr = struct.pack("!HH", 0x0009, len(value)) + value + b"\0" * pad
    method = struct.unpack("!H", request[:2])[0] & 0x3EEF
    return struct.pack("!HHI", method | 0x0110, len(attr), COOKIE) + tid + attr


class HostileRelay:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.73", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                data, peer = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            if len(data) >= 20:
                self.sock.sendto(error_response(data), peer)

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()

    @property
    def uri(self):
        return f"turn:127.0.0.73:{self.port}?transport=udp"


class HostileRelayTest(unittest.TestCase):
    def setUp(self):
        self.relay = HostileRelay()
        self.addCleanup(self.relay.close)
        if h.VALGRIND:
            # valgrind (3.19) keeps its one lock while a thread waits in io_uring_enter(), so this
            # relay, a thread of the same process, would not run while a set waits for its answer:
            # here sets wait in epoll_wait(), which valgrind lets go of (test_probe's sets, against
            # a turnserver process, still run on io_uring under valgrind)
            os.environ["TURNFLEET_PROBE_IO"] = "epoll"
            self.addCleanup(os.environ.pop, "TURNFLEET_PROBE_IO", None)

    def test_probe_reports_the_code_and_an_escaped_reason(self):
        r = turnfleet.probe(self.relay.uri, h.SECRET, timeout=h.PROBE_TIMEOUT)
        self.assertIsInstance(r, turnfleet.ProbeResult)
        self.assertFalse(r.ok)
        self.assertEqual((r.stage, r.error_code, r.exit_code), ("allocate", 486, 1))
        self.assertIsInstance(r.error_reason, str)
        self.assertIsInstance(r.error(), turnfleet.Error)
        try:
            r.to_dict()
        except turnfleet.Error:
            pass  # the library's JSON may not carry the bytes: then it says so as a turnfleet.Error

    def test_probe_many_returns_every_result(self):
        rs = turnfleet.probe_many([self.relay.uri, self.relay.uri, self.relay.uri], h.SECRET,
                                  timeout=h.PROBE_TIMEOUT, concurrency=2)
        self.assertEqual(len(rs), 3)
        for r in rs:
            self.assertEqual((r.uri, r.error_code, r.ok), (self.relay.uri, 486, False))


if __name__ == "__main__":
    unittest.main()
