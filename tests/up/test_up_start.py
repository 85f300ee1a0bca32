"""`turnfleet up` as a new user meets it: every addressing mode and family it can serve from
`--addresses`, and what it must refuse at start (exit 2 with the reason) instead of running an
empty or broken fleet. Real coturn on 127.0.0.84-87 and ::1, listener port 3721, CLI ports from
3730, metrics on 3791, relay ranges 60100-60107. Every process is stopped by its PID.
usage: python3 test_up_start.py TURNFLEET
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from uphelpers import wait_for

TURNFLEET = None
SECRET = "start-secret-19c2e7"
POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: start}}
spec:
  replicas: {replicas}
  addressing: {addressing}
  relayPortRange: {{start: 60100, end: 60107}}
  listeners:
    - {{name: turn, protocol: udp, port: 3721}}
  auth: {{realm: start.test, secretRef: {{name: s}}}}
  drainTimeout: 2s
"""


def sockets_of(pid):
    """The sockets process @pid holds open (accepted connections among them; not the kernel's backlog)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


class TestUpStart(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tf-up-start-")
        self.state = os.path.join(self.dir, "state")
        self.secret = os.path.join(self.dir, "secret")
        self.write(self.secret, SECRET + "\n")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()  # its turnserver children die with it (PR_SET_PDEATHSIG)
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, path, text):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)

    def up(self, replicas, addressing, addresses, *extra):
        return self.up_with(POOL, replicas, addressing, addresses, *extra)

    def up_with(self, template, replicas, addressing, addresses, *extra):
        pool = os.path.join(self.dir, "pool.yaml")
        self.write(pool, template.format(replicas=replicas, addressing=addressing))
        self.err = os.path.join(self.dir, "err.log")
        return [TURNFLEET, "up", "-f", pool, "--secret-file", self.secret, "--addresses", addresses,
                "--state-dir", self.state, "--metrics-addr", "127.0.0.1:3791", "--probe-interval", "0.5",
                "--cli-port", "3730", "--json", *extra]

    def refused(self, argv, needle):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn(needle, out.stderr)
        return out.stderr

    def err_text(self):
        with open(self.err) as f:
            return f.read()

    def status(self):
        try:
            with open(os.path.join(self.state, "status.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def run_until_ready(self, argv, ready):
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        try:
            st = wait_for("%d ready relays" % ready, lambda: (s := self.status()) and s["readyRelays"] == ready and s, 30)
        except AssertionError:
            with open(self.err) as f:
                raise AssertionError("not ready: %s\n%s" % (json.dumps(self.status()), f.read()))
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0)
        ready_cond = {c["type"]: c for c in self.status()["conditions"]}["Ready"]
        self.assertEqual(ready_cond["status"], "False")  # after the stop, not Ready
        return st

    def test_external_ip_pool_takes_the_addresses_in_its_cidr(self):
        st = self.run_until_ready(self.up(3, "{mode: ExternalIPPool, externalIPPool: {addresses: [127.0.0.84/30]}}",
                                          "127.0.0.84-86,127.0.0.90"), 3)
        self.assertEqual(sorted(r["relayAddress"] for r in st["relays"]), ["127.0.0.84", "127.0.0.85", "127.0.0.86"])

    def test_addresses_accept_a_cidr(self):
        st = self.run_until_ready(self.up(2, "{mode: HostNetwork}", "127.0.0.86/31"), 2)
        self.assertEqual(sorted(r["relayAddress"] for r in st["relays"]), ["127.0.0.86", "127.0.0.87"])

    def test_an_ipv6_pool_becomes_ready_on_the_ipv6_loopback(self):
        st = self.run_until_ready(self.up(1, "{mode: HostNetwork, family: IPv6}", "::1"), 1)
        self.assertEqual(st["relays"][0]["relayAddress"], "::1")

    def test_what_cannot_be_placed_is_refused(self):
        self.refused(self.up(3, "{mode: HostNetwork}", "127.0.0.84"), "1 of 3 replicas can be placed")
        # none of the addresses is in the pool's CIDR: never a silent empty fleet
        self.refused(self.up(1, "{mode: ExternalIPPool, externalIPPool: {addresses: [203.0.113.0/29]}}",
                             "127.0.0.84-86"), "0 of 1 replicas can be placed")
        self.refused(self.up(1, "{mode: HostNetwork}", "127.0.0.300"), "--addresses")

    def test_a_missing_turnserver_is_refused(self):
        self.refused(self.up(1, "{mode: HostNetwork}", "127.0.0.84", "--turnserver", "/nonexistent/turnserver"),
                     "--turnserver")

    def test_a_secret_coturn_cannot_take_is_refused(self):
        self.write(self.secret, 'has"quote\n')
        err = self.refused(self.up(1, "{mode: HostNetwork}", "127.0.0.84"), "secret")
        self.assertNotIn('has"quote', err)

    def test_a_local_fleet_passes_the_peer_check_only_with_loopback_peers_allowed(self):
        addressing = "{mode: HostNetwork}\n  peerPolicy: {denyPrivate: false}"
        self.run_until_ready(self.up(1, addressing, "127.0.0.85", "--peer-check", "--allow-loopback-peers"), 1)
        shutil.rmtree(self.state)
        # off by default: coturn refuses the loopback peer, so the relay is never Ready
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(self.up(1, addressing, "127.0.0.85", "--peer-check"),
                                         stdout=subprocess.DEVNULL, stderr=err)

        def probed_and_failed():
            s = self.status()
            r = s and s["relays"] and s["relays"][0]
            return r and r["lastProbe"] and not r["lastProbe"]["ok"] and r
        r = wait_for("a failed peer check", probed_and_failed, 20)
        self.assertEqual(r["state"], "Failing")
        self.assertEqual(self.status()["readyRelays"], 0)

    def test_a_listener_address_another_process_holds_is_refused(self):
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.84", 3721))
        try:
            self.refused(self.up(1, "{mode: HostNetwork}", "127.0.0.84"), "127.0.0.84 port 3721 (udp): Address already in use")
        finally:
            s.close()

    def test_a_rotated_secret_rolls_the_relays_one_at_a_time(self):
        out_path = os.path.join(self.dir, "out.log")
        argv = self.up(2, "{mode: HostNetwork}", "127.0.0.84-85")
        with open(self.err, "w") as err, open(out_path, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err)

        def events():
            with open(out_path) as f:
                return [json.loads(line) for line in f if line.startswith('{"event":"reconcile"')]

        first = wait_for("2 ready relays", lambda: (e := events()) and e[-1]["readyRelays"] == 2 and e[-1], 30)
        pids = {r["name"]: r["pid"] for r in first["relays"]}
        seen = len(events())
        self.write(self.secret, "rotated-secret-77a1\n")

        def rolled():
            e = events()[-1]
            return e["readyRelays"] == 2 and all(r["pid"] != pids[r["name"]] for r in e["relays"]) and e
        wait_for("both relays restarted with the new secret and ready", rolled, 40)
        for e in events()[seen:]:
            self.assertLessEqual(sum(r["state"] != "Ready" for r in e["relays"]), 1, e)  # one at a time
        with open(os.path.join(self.state, [n for n in pids][0], "turnserver.conf")) as f:
            conf = f.read()
        self.assertIn('static-auth-secret="rotated-secret-77a1"', conf)
        self.assertIn('static-auth-secret="%s"' % SECRET, conf)  # the previous one still taken
        # an empty secret file is reported; the running fleet keeps its secret
        now = {r["name"]: r["pid"] for r in events()[-1]["relays"]}
        self.write(self.secret, "")
        wait_for("the empty secret reported", lambda: "--secret-file" in self.err_text(), 10)
        try:
            urllib.request.urlopen("http://127.0.0.1:3791/healthz", timeout=5)
            self.fail("/healthz should fail while the secret file is unusable")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 503)
        time.sleep(1.5)  # three probe intervals: nothing restarts
        self.assertEqual({r["name"]: r["pid"] for r in events()[-1]["relays"]}, now)
        self.assertEqual(events()[-1]["readyRelays"], 2)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0)

    def test_600_idle_http_clients_do_not_starve_the_fleet(self):
        import socket
        argv = self.up(1, "{mode: HostNetwork}", "127.0.0.84")
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        wait_for("a ready relay", lambda: (s := self.status()) and s["readyRelays"] == 1, 30)
        idle = []
        before = sockets_of(self.proc.pid)  # listeners, coturn's CLI, a probe's sockets
        try:
            for _ in range(600):
                c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                c.setblocking(False)
                c.connect_ex(("127.0.0.1", 3791))  # and never send a byte
                idle.append(c)
            # the server holds at most 8 connections of one client address (the tools' per-client cap;
            # 256 in all without it): the rest are closed as they come, so one address cannot take
            # the fleet's fds (a probe's own sockets come and go beside them: the margin)
            held = []
            def sample():
                held.append(sockets_of(self.proc.pid) - before)
                return True
            sample()
            probe_time = self.status()["relays"][0]["lastProbe"]["time"]
            # the runtime goes on: new probes pass while the clients sit there
            st = wait_for("a newer passed probe", lambda: sample() and (s := self.status()) and
                          s["relays"][0]["lastProbe"]["time"] != probe_time and s, 20)
            self.assertEqual(st["readyRelays"], 1)
            self.assertTrue(st["relays"][0]["lastProbe"]["ok"])

            self.assertLess(max(held), 8 + 16, "the server held %d more sockets under one address's flood" % max(held))
            # and closes the ones it holds once idle (a per-connection timeout): every one ends
            def closed(c):
                try:
                    return c.recv(1) == b""
                except ConnectionResetError:
                    return True
                except OSError:  # BlockingIOError: open and idle; not connected yet: in the backlog
                    return False
            wait_for("every idle connection closed by the server", lambda: all(map(closed, idle)), 30)
        finally:
            for c in idle:
                c.close()
        # and /healthz answers again once they are gone (idle connections are closed after 5 s)
        def healthy():
            try:
                with urllib.request.urlopen("http://127.0.0.1:3791/healthz", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for("/healthz to answer", healthy, 20)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0)

    def test_tls_listeners_need_cert_and_key_and_are_probed_over_turns(self):
        tls = "{mode: HostNetwork}\n  listeners:\n    - {name: turn, protocol: udp, port: 3721}\n" \
              "    - {name: turns, protocol: tls, port: 3722, tlsSecretRef: {name: certs}}"
        pool = POOL.replace("  listeners:\n    - {{name: turn, protocol: udp, port: 3721}}\n", "")
        self.refused(self.up_with(pool, 1, tls, "127.0.0.86"), "--cert/--key")
        cert, key = os.path.join(self.dir, "tls.crt"), os.path.join(self.dir, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-subj", "/CN=relay-test", "-addext", "subjectAltName=IP:127.0.0.86", "-days", "2",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        st = self.run_until_ready(self.up_with(pool, 1, tls, "127.0.0.86", "--cert", cert, "--key", key,
                                               "--ca-file", cert), 1)
        self.assertTrue(st["relays"][0]["lastProbe"]["ok"])
        with open(self.err) as f:
            self.assertNotIn("FAIL", f.read())

    def test_an_existing_state_dir_keeps_its_mode(self):
        os.mkdir(self.state, 0o750)
        os.chmod(self.state, 0o750)
        self.run_until_ready(self.up(1, "{mode: HostNetwork}", "127.0.0.84"), 1)
        self.assertEqual(stat.S_IMODE(os.stat(self.state).st_mode), 0o750)


if __name__ == "__main__":
    TURNFLEET = sys.argv[1]
    unittest.main(argv=sys.argv[:1], verbosity=2)
