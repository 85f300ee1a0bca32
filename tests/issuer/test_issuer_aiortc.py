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


async def call(server, text):
    ice = [aiortc.RTCIceServer(urls=server["urls"], username=server["username"], credential=server["credential"])]
    a = aiortc.RTCPeerConnection(aiortc.RTCConfiguration(iceServers=ice))
    b = aiortc.RTCPeerConnection(aiortc.RTCConfiguration(iceServers=ice))
    got = asyncio.get_running_loop().create_future()

    @b.on("datachannel")
    def on_channel(ch):
        @ch.on("message")
        def on_message(m):
            if not got.done():
                got.set_result(m)

    dc = a.createDataChannel("turnfleet")

    @dc.on("open")
    def on_open():
        dc.send(text)

    try:
        await a.setLocalDescription(await a.createOffer())
        await b.setRemoteDescription(a.localDescription)
        await b.setLocalDescription(await b.createAnswer())
        await a.setRemoteDescription(b.localDescription)
        msg = await asyncio.wait_for(got, 45)
        local, remote = selected(a)
        return {"received": msg, "local": (local.type, local.host, local.port),
                "remote": (remote.type, remote.host, remote.port)}
    finally:
        await a.close()
        await b.close()


class TestAiortc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet("rtc", "127.0.6.31-32", 26301, 26340, 26379, "127.0.6.1:26390", 26320,
                          "127.0.6.1:26380", replicas=2, issuer_args=["--max-relays", "2", "--quiet"])
        try:
            cls.fleet.start()
        except BaseException:
            cls.fleet.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.fleet.stop()

    def test_data_channel_through_each_relay(self):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
