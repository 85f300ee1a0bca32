"""`turnfleet up` probes on its own loop: while a probe round waits on a relay that never answers,
the loop goes on (a pool file change is loaded and reported between the probe's retransmissions)
and /healthz answers, all before the round ends. The relay is this test's own: a --turnserver wrapper that runs the real turnserver for
--version and -h and, for `-c CONF`, binds CONF's UDP listener and records every datagram it gets,
answering none. Loopback 127.0.20.10, TURN listener 3610, CLI port 40110, metrics on 40111, relay
range 40300-40307. Every process is stopped by its PID.
usage: python3 test_up_probe_loop.py TURNFLEET
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

from uphelpers import wait_for, write_watched

TURNFLEET = None
SECRET = "probe-loop-secret-7d20"
ADDR, TURN_PORT, CLI_PORT, METRICS_PORT = "127.0.20.10", 3610, 40110, 40111
POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: pl}}
spec:
  replicas: 1
  relayPortRange: {{start: 40300, end: 40307}}
  listeners:
    - {{name: turn, protocol: udp, port: %d}}
  auth: {{realm: pl.test, secretRef: {{name: s}}}}
  drainTimeout: {drain}
""" % TURN_PORT
# the silent relay: the real turnserver's --version and -h, then a UDP socket that answers nothing
WRAPPER = """#!%s
import os, socket, sys
if sys.argv[1:2] != ["-c"]:
    os.execv(%r, [%r] + sys.argv[1:])
conf = dict(l.strip().split("=", 1) for l in open(sys.argv[2]) if "=" in l and not l.startswith("#"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((conf["listening-ip"].strip(), int(conf["listening-port"])))
while True:
    s.recv(2048)
    with open(%r, "a") as f:
        f.write("datagram\\n")
"""


def healthz():
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % METRICS_PORT, timeout=3) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError:
        return None


class TestUpProbeLoop(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tf-up-pl-")
        self.state = os.path.join(self.dir, "state")
        self.pool = os.path.join(self.dir, "pool.yaml")
        self.secret = os.path.join(self.dir, "secret")
        self.dgrams = os.path.join(self.dir, "datagrams")
        self.out = os.path.join(self.dir, "out.log")
        self.err = os.path.join(self.dir, "err.log")
        with open(self.secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(self.secret, 0o600)
        self.wrapper = os.path.join(self.dir, "turnserver")
        real = shutil.which("turnserver")
        self.assertIsNotNone(real, "no turnserver on PATH")
        with open(self.wrapper, "w") as f:
            f.write(WRAPPER % (sys.executable, real, real, self.dgrams))
        os.chmod(self.wrapper, 0o755)
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()  # its children die with it (PR_SET_PDEATHSIG)
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def status(self):
        try:
            with open(os.path.join(self.state, "status.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def last_probe(self):
        st = self.status()
        relays = st["relays"] if st else []
        return relays and relays[0].get("lastProbe") and relays[0]["lastProbe"]["time"]

    def events(self, kind):
        with open(self.out) as f:
            return [e for e in (json.loads(line) for line in f if line.startswith("{")) if e["event"] == kind]

    def datagrams(self):
        try:
            with open(self.dgrams) as f:
                return len(f.readlines())
        except OSError:
            return 0

    def test_the_loop_and_healthz_go_on_while_a_probe_round_waits(self):
        write_watched(self.pool, POOL.format(drain="1s"))
        with open(self.out, "w") as out, open(self.err, "w") as err:
            # --probe-interval 4: each round waits the probe's whole timeout (4 s) on the silent relay
            self.proc = subprocess.Popen([TURNFLEET, "up", "-f", self.pool, "--secret-file", self.secret,
                                          "--addresses", ADDR, "--state-dir", self.state, "--turnserver", self.wrapper,
                                          "--metrics-addr", "127.0.0.1:%d" % METRICS_PORT, "--probe-interval", "4",
                                          "--cli-port", str(CLI_PORT), "--json"], stdout=out, stderr=err)
        try:
            first = wait_for("a first probe round's result", self.last_probe, 30)
        except AssertionError:
            with open(self.err) as f:
                raise AssertionError("no probe result: %s\n%s" % (json.dumps(self.status()), f.read()))
        # every datagram of that round came before its result: a new one is the next round's
        seen = self.datagrams()
        wait_for("the next probe round at the silent relay", lambda: self.datagrams() > seen, 20)
        self.assertEqual(self.last_probe(), first, "the round ended before it was seen")
        reloads = len(self.events("poolReloaded"))
        write_watched(self.pool, POOL.format(drain="7s"))
        answers = 0
        at_reload = None  # the round's datagrams when the reload was seen
        while self.last_probe() == first:  # the round is in progress until its result is in
            answers += healthz() is not None
            if at_reload is None and len(self.events("poolReloaded")) > reloads:
                at_reload = self.datagrams()
        # the probe retransmits at 0, 200, 600, 1400 and 3000 ms of its 4 s: a loop that waits for the
        # round sees the file only after its last datagram, one that goes on sees it between them
        total = self.datagrams()
        self.assertIsNotNone(at_reload, "the pool file change was not loaded before the probe round ended")
        self.assertGreater(total, at_reload, "the pool file change was loaded only after the round's last "
                           "retransmission (%d of its %d datagrams before it)" % (at_reload - seen, total - seen))
        self.assertGreater(answers, 0, "/healthz answered nothing during the probe round")
        ev = self.events("poolReloaded")[-1]
        self.assertEqual(ev["drainTimeoutMs"], 7000)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0)


if __name__ == "__main__":
    TURNFLEET = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
