"""aiortc (Debian's python3-aiortc, an ICE/TURN/DTLS/SCTP stack of its own) against turnfleet-issuer: the
answer of GET /ice configures two RTCPeerConnections that exchange a data-channel message through each relay
of a `turnfleet up` fleet of real coturn relays on loopback, relay-only.

aiortc 1.4 has no iceTransportPolicy; its ICE library aioice has the same policy (TransportPolicy.RELAY:
gather and pair relayed candidates only), which is turned on for every connection aiortc makes here.

Loopback 127.0.6.31-32 (relays), 127.0.6.1 (issuer 26380, up's metrics 26390); ports 26301 (TURN),
26320+ (coturn CLI, on 127.0.0.1 as up renders it), relays 26340-26379. Run with /usr/bin/python3 (Debian's aiortc).
"""
import asyncio
import functools
import json
import os
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from fleet import Fleet  # noqa: E402

try:
    import aioice
    import aiortc
    import aiortc.rtcicetransport
except ImportError as e:  # fail loudly: the dependency script installs python3-aiortc
    raise SystemExit("python3-aiortc is not installed (tools/dev/install-deps.sh installs it): %s" % e)

aiortc.rtcicetransport.Connection = functools.partial(aioice.Connection,
                                                      transport_policy=aioice.TransportPolicy.RELAY)


def selected(pc):
    """(local, remote) candidates of the nominated pair of @p pc's data transport."""
    conn = pc.sctp.transport.transport._connection
    pair = conn._nominated.get(1)
    return pair.local_candidate, pair.remote_candidate


class Call:
    """Two peer connections through one relay (the one iceServers entry), a data channel open between them."""

    async def open(self, server):
        ice = [aiortc.RTCIceServer(urls=server["urls"], username=server["username"], credential=server["credential"])]
        self.a = aiortc.RTCPeerConnection(aiortc.RTCConfiguration(iceServers=ice))
        self.b = aiortc.RTCPeerConnection(aiortc.RTCConfiguration(iceServers=ice))
        self.inbox = asyncio.Queue()
        opened = asyncio.get_running_loop().create_future()

        @self.b.on("datachannel")
        def on_channel(ch):
            @ch.on("message")
            def on_message(m):
                self.inbox.put_nowait(m)

        self.dc = self.a.createDataChannel("turnfleet")

        @self.dc.on("open")
        def on_open():
            opened.set_result(True)

        await self.a.setLocalDescription(await self.a.createOffer())
        await self.b.setRemoteDescription(self.a.localDescription)
        await self.b.setLocalDescription(await self.b.createAnswer())
        await self.a.setRemoteDescription(self.b.localDescription)
        await asyncio.wait_for(opened, 45)
        return self

    async def roundtrip(self, text):
        self.dc.send(text)
        return await asyncio.wait_for(self.inbox.get(), 20)

    def path(self):
        local, remote = selected(self.a)
        return (local.type, local.host, local.port), (remote.type, remote.host, remote.port)

    async def close(self):
        await self.a.close()
        await self.b.close()


async def call(server, text):
    c = await Call().open(server)
    try:
        msg = await c.roundtrip(text)
        local, remote = c.path()
        return {"received": msg, "local": local, "remote": remote}
    finally:
        await c.close()


class TestAiortc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet("rtc", "127.0.6.31-32", 26301, 26340, 26379, "127.0.6.1:26390", 26320,
                          "127.0.6.1:26380", replicas=2, drain="90s", issuer_args=["--max-relays", "2", "--quiet"])
        try:
            cls.fleet.start()
        except BaseException:
            cls.fleet.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.fleet.stop()

    def test_1_data_channel_through_each_relay(self):
        code, _, body = self.fleet.ice("aiortc-user", extra="&transport=udp")
        self.assertEqual(code, 200, body)
        answer = json.loads(body)
        self.assertEqual(len(answer["iceServers"]), 2, answer)
        seen = []
        for i, server in enumerate(answer["iceServers"]):
            host = urllib.parse.urlsplit(server["urls"][0].replace("turn:", "turn://", 1)).hostname
            text = "hello through relay %d" % i
            r = asyncio.run(call(server, text))
            if os.environ.get("TF_TEST_VERBOSE"):
                print(r, file=sys.stderr)
            self.assertEqual(r["received"], text, r)
            for kind, addr, port in (r["local"], r["remote"]):
                self.assertEqual(kind, "relay", r)
                self.assertEqual(addr, host, r)
                self.assertTrue(26340 <= port <= 26379, r)
            seen.append(host)
        self.assertEqual(sorted(seen), sorted(self.fleet.relays().values()), "one call through each relay")

    def test_2_scale_down_during_a_call(self):
        """A call through each relay; scale to 1: the next answer lacks the draining relay, the call through it
        keeps flowing while it drains, and once that call is released the relay leaves."""
        answer = json.loads(self.fleet.ice("scale-user", extra="&transport=udp")[2])
        self.assertEqual(len(answer["iceServers"]), 2, answer)

        def host_of(server):
            return urllib.parse.urlsplit(server["urls"][0].replace("turn:", "turn://", 1)).hostname

        async def scenario():
            calls = {}
            for server in answer["iceServers"]:
                calls[host_of(server)] = await Call().open(server)
            try:
                for host, c in calls.items():
                    self.assertEqual(await c.roundtrip("before " + host), "before " + host)
                self.fleet.write_pool(1)
                deadline = time.monotonic() + 60
                gone = None
                while gone is None and time.monotonic() < deadline:
                    st = self.fleet.status() or {"relays": []}
                    d = [r["relayAddress"] for r in st["relays"] if r["draining"]]
                    gone = d[0] if d else None
                    await asyncio.sleep(0.1)
                self.assertIsNotNone(gone, "no relay drained:\n" + self.fleet.logs())
                code, _, body = self.fleet.ice("scale-user", extra="&transport=udp")
                self.assertEqual(code, 200, body)
                self.assertNotIn(gone, [host_of(s) for s in json.loads(body)["iceServers"]])
                # the call through the draining relay keeps flowing, relayed by it
                c = calls[gone]
                for i in range(5):
                    self.assertEqual(await c.roundtrip("draining %d" % i), "draining %d" % i)
                local, remote = c.path()
                self.assertEqual((local[0], local[1], remote[1]), ("relay", gone, gone))
                still = [r for r in (self.fleet.status() or {"relays": []})["relays"] if r["relayAddress"] == gone]
                self.assertTrue(still and still[0]["draining"], "the relay left before its call was released")
                await c.close()
                del calls[gone]
                deadline = time.monotonic() + 80
                while time.monotonic() < deadline:
                    if gone not in self.fleet.relays().values():
                        break
                    await asyncio.sleep(0.2)
                self.assertNotIn(gone, self.fleet.relays().values(), "the drained relay did not leave")
                for host, c in calls.items():
                    self.assertEqual(await c.roundtrip("after " + host), "after " + host)
            finally:
                for c in calls.values():
                    await c.close()
        asyncio.run(scenario())


if __name__ == "__main__":
    unittest.main(verbosity=2)
