"""`turnfleet up` while it runs, against real coturn 4.6.1: rollouts and scale-down one relay
at a time with the fewest allocations first, a full state directory, a stalled loop, the
terminal's event log, the --nodes file watched, a listener port taken by another process.
Loopback 127.0.0.90-98, listener ports 62600-62605, CLI ports 62610-62669, metrics on
62690-62695, relay ranges 62500-62577. Every process is stopped by its PID.
usage: python3 test_up_runtime.py TURNFLEET TURNFLEET_PROBE
"""
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from uphelpers import stop_all, wait_for, write_watched

TURNFLEET = TURNFLEET_PROBE = None
SECRET = "runtime-secret-4b81d0"
POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: rt}}
spec:
  replicas: {replicas}
  relayPortRange: {{start: {start}, end: {end}}}
  listeners:
    - {{name: turn, protocol: udp, port: {port}}}
  auth: {{realm: rt.test, secretRef: {{name: s}}}}
  drainTimeout: 1s
"""
F_SETPIPE_SZ = 1031


def healthz(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except urllib.error.URLError:
        return None  # not serving (yet)


class TestUpRuntime(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tf-up-rt-")
        self.state = os.path.join(self.dir, "state")
        self.secret = os.path.join(self.dir, "secret")
        self.pool = os.path.join(self.dir, "pool.yaml")
        self.out = os.path.join(self.dir, "out.log")
        self.err = os.path.join(self.dir, "err.log")
        with open(self.secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(self.secret, 0o600)
        self.proc = None
        self.holds = []

    def tearDown(self):
        self.release()
        if self.proc and self.proc.poll() is None:
            self.proc.kill()  # its turnserver children die with it (PR_SET_PDEATHSIG)
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_pool(self, replicas, start, port):
        write_watched(self.pool, POOL.format(replicas=replicas, start=start, end=start + 7, port=port))

    def argv(self, inputs, cli, metrics, *extra):
        return [TURNFLEET, "up", "-f", self.pool, "--secret-file", self.secret, *inputs, "--state-dir", self.state,
                "--metrics-addr", "127.0.0.1:%d" % metrics, "--probe-interval", "0.5", "--cli-port", str(cli), *extra]

    def start(self, argv, stdout=None, root=""):
        with open(self.err, "w") as err:
            if stdout is None:
                with open(self.out, "w") as out:
                    self.proc = subprocess.Popen(argv, stdout=out, stderr=err)
            else:
                self.proc = subprocess.Popen(argv, stdout=stdout, stderr=err)
        self.root = root

    def status(self):
        try:
            with open(os.path.join(self.root, self.state.lstrip("/") if self.root else self.state,
                                   "status.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def events(self, kind=None):
        with open(self.out) as f:
            evs = [json.loads(line) for line in f if line.startswith("{")]
        return [e for e in evs if kind is None or e["event"] == kind]

    def ready(self, n, timeout=30):
        try:
            return wait_for("%d ready relays" % n, lambda: (s := self.status()) and s["readyRelays"] == n and s, timeout)
        except AssertionError:
            with open(self.err) as f:
                raise AssertionError("not ready: %s\n%s" % (json.dumps(self.status()), f.read()))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=30), 0)

    def hold(self, addr, port, n):
        """Hold n allocations on addr (retried on 508: a probe's released allocation keeps its port a moment)."""
        for _ in range(5):
            p = subprocess.Popen([TURNFLEET_PROBE, "--uri", "turn:%s:%d?transport=udp" % (addr, port), "--secret-file",
                                  self.secret, "--hold", str(n), "--json"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
            self.holds.append(p)
            if all(json.loads(p.stdout.readline() or "{}").get("ok") for _ in range(n)):
                return p
            p.kill()
            p.wait()
            time.sleep(0.3)
        self.fail("could not hold %d allocations on %s" % (n, addr))

    def release(self):
        stop_all(self.holds)
        self.holds = []

    def drain_order(self, since, names):
        """Relay addresses in the order their drains were carried out, and the most Draining at once."""
        order, most = [], 0
        for e in self.events("reconcile")[since:]:
            most = max(most, sum(r["state"] == "Draining" for r in e["relays"]))
            for a in e["actions"]:
                if a.startswith("drain ") and names.get(a.split()[1]) not in order:
                    order.append(names.get(a.split()[1]))
        return order, most

    def counted(self, want):
        """status.json once every relay's count orders as @p want (address -> a rank)."""
        def ok():
            s = self.status()
            n = {r["relayAddress"]: r["allocations"] for r in s["relays"]} if s else {}
            if len(n) != len(want) or any(v is None for v in n.values()):
                return None
            ranked = sorted(n, key=lambda a: n[a])
            return ranked == sorted(want, key=lambda a: want[a]) and len(set(n.values())) == len(n) and s
        try:
            return wait_for("the held allocations counted", ok, 15)
        except AssertionError:
            raise AssertionError("counts: %s" % json.dumps(self.status()["relays"]))

    def test_rollout_and_scale_down_drain_the_fewest_allocations_first_one_at_a_time(self):
        addrs = ["127.0.0.90", "127.0.0.91", "127.0.0.92"]
        self.write_pool(3, 62500, 62600)
        self.start(self.argv(["--addresses", "127.0.0.90-92", "--json"], 62610, 62690))
        st = self.ready(3)
        names = {r["name"]: r["relayAddress"] for r in st["relays"]}
        # .92 holds none, .91 two, .90 four: the rollout goes .92, .91, .90
        self.hold(addrs[0], 62600, 4)
        self.hold(addrs[1], 62600, 2)
        self.counted({addrs[0]: 2, addrs[1]: 1, addrs[2]: 0})
        since = len(self.events("reconcile"))
        self.write_pool(3, 62520, 62600)  # a new relay port range: every relay is replaced in place
        st = wait_for("the rollout done", lambda: (s := self.status()) and s["readyRelays"] == 3 and all(
            r["portRange"]["start"] == 62520 for r in s["relays"]) and len(s["relays"]) == 3 and s, 40)
        order, most = self.drain_order(since, names)
        self.assertEqual(order, [addrs[2], addrs[1], addrs[0]])
        self.assertEqual(most, 1)  # one at a time
        # scale-down 3 -> 1: .90 stays (the most allocations), .92 goes first, then .91; each
        # ahead by two, so a probe's passing session (counted for a moment) cannot make a tie
        self.release()
        names = {r["name"]: r["relayAddress"] for r in st["relays"]}
        self.hold(addrs[0], 62600, 4)
        self.hold(addrs[1], 62600, 2)
        self.counted({addrs[0]: 2, addrs[1]: 1, addrs[2]: 0})
        since = len(self.events("reconcile"))
        self.write_pool(1, 62520, 62600)
        st = wait_for("one relay left", lambda: (s := self.status()) and len(s["relays"]) == 1 and s, 30)
        self.assertEqual(st["relays"][0]["relayAddress"], addrs[0])
        order, most = self.drain_order(since, names)
        self.assertEqual(order, [addrs[2], addrs[1]])
        self.assertEqual(most, 1)
        self.release()
        self.stop()

    def test_a_full_state_dir_is_reported_retried_and_leaves_nothing_stale(self):
        # the state directory on a 2 MiB tmpfs of a private mount namespace; seen through /proc/PID/root
        os.mkdir(self.state, 0o700)
        self.write_pool(1, 62530, 62601)
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -t tmpfs -o size=2m,mode=0700 tf-up-full "$0" && exec "$@"', self.state] + \
            self.argv(["--addresses", "127.0.0.93", "--json"], 62620, 62691)
        self.start(argv)
        wait_for("the tmpfs mounted", lambda: self.proc.poll() is None and os.path.exists(
            "/proc/%d/root%s/logs" % (self.proc.pid, self.state)), 10)
        self.root = "/proc/%d/root" % self.proc.pid
        inside = self.root + self.state
        self.ready(1)
        self.assertEqual(healthz(62691), (200, "ok\n"))
        filler = os.path.join(inside, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for chunk in (65536, 4096):  # tmpfs pages: full to the last one
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError:
                pass  # ENOSPC
        # and kept full: the failed write removes the published files, and the pages they free
        # would otherwise let a later step's write succeed (reported again when it fails after)
        full = threading.Event()

        def keep_full():
            while not full.is_set():
                try:
                    os.write(fd, b"\0" * 4096)
                except OSError:
                    time.sleep(0.002)

        hungry = threading.Thread(target=keep_full)
        hungry.start()
        self.addCleanup(hungry.join)
        self.addCleanup(full.set)
        ev = wait_for("the full disk reported", lambda: self.events("stateDirUnwritable"), 15)
        self.assertIn("No space left on device", ev[0]["message"])
        code, body = wait_for("/healthz failing", lambda: (h := healthz(62691)) and h[0] == 503 and h, 10)
        self.assertIn("state directory", body)
        # nothing stale claims readiness: the published files are gone while they cannot be written
        for name in ("status.json", "turn-uris", "iceServers.json"):
            self.assertFalse(os.path.exists(os.path.join(inside, name)), name)
        self.assertEqual(len(self.events("stateDirUnwritable")), 1)  # reported once, retried every step
        full.set()
        hungry.join()
        os.close(fd)
        os.unlink(filler)
        wait_for("written again", lambda: self.events("stateDirWritable"), 15)
        st = self.ready(1)
        self.assertTrue(st["relays"][0]["ready"])
        wait_for("/healthz ok", lambda: healthz(62691) == (200, "ok\n"), 10)
        self.stop()

    def test_healthz_fails_while_the_loop_is_stalled(self):
        # stdout is a one-page pipe nobody reads: the loop blocks writing its events
        r, w = os.pipe()
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        self.write_pool(1, 62540, 62602)
        self.start(self.argv(["--addresses", "127.0.0.94", "--json"], 62630, 62692), stdout=w)
        os.close(w)
        try:
            wait_for("serving", lambda: self.proc.poll() is not None or healthz(62692), 10)
            if self.proc.poll() is not None:
                with open(self.err) as f:
                    self.fail("turnfleet up exited: " + f.read())
            code, body = wait_for("/healthz saying stalled", lambda: (h := healthz(62692)) and h[0] == 503 and h, 40)
            self.assertEqual(body, "the runtime loop is stalled\n")
            def drain():
                while os.read(r, 65536):
                    pass
            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
            wait_for("/healthz ok once the loop runs again", lambda: healthz(62692) == (200, "ok\n"), 20)
            self.stop()
            reader.join(10)
        finally:
            os.close(r)

    def test_the_terminal_keeps_its_event_log_across_redraws(self):
        self.write_pool(1, 62550, 62603)
        master, slave = pty.openpty()
        self.start(self.argv(["--addresses", "127.0.0.95"], 62640, 62693), stdout=slave)
        os.close(slave)
        text = b""
        clear = b"\033[H\033[J"

        def screens():
            nonlocal text
            while select.select([master], [], [], 0.1)[0]:
                try:
                    text += os.read(master, 65536)
                except OSError:
                    break
            # complete screens only; the terminal turns "\n" into "\r\n"
            return text.decode(errors="replace").replace("\r\n", "\n").split(clear.decode())[1:-1]

        def started_and_redrawn():
            s = screens()
            first = next((i for i, x in enumerate(s) if "(ScaleUp)" in x.split("events:")[-1]), None)
            return first is not None and len(s) - first >= 4 and s[first:]

        try:
            kept = wait_for("the start logged and four redraws", started_and_redrawn, 30)
            for screen in kept:
                log = screen.split("\nevents:\n")[1]
                self.assertRegex(log, r"\d\d:\d\d:\d\d start \S+ \(ScaleUp\)")
            self.assertIn(" Ready ", kept[-1])
            self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            while self.proc.poll() is None and time.monotonic() < deadline:
                screens()
            self.assertEqual(self.proc.wait(timeout=1), 0)
        finally:
            os.close(master)

    def test_the_nodes_file_is_watched_like_the_pool_file(self):
        nodes = os.path.join(self.dir, "nodes.json")

        def node_list(addr):
            return json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": [{
                "metadata": {"name": "n1", "labels": {"turnfleet.hzmi.dev/relay-node": "true",  # loopback: a development node
                                                      "node-restriction.kubernetes.io/turnfleet-development": "true"}},
                "status": {
                    "addresses": [{"type": "InternalIP", "address": addr}],
                    "conditions": [{"type": "Ready", "status": "True"}]}}]})
        write_watched(nodes, node_list("127.0.0.96"))
        self.write_pool(1, 62560, 62604)
        self.start(self.argv(["--nodes", nodes, "--json"], 62650, 62694))
        self.assertEqual(self.ready(1)["relays"][0]["relayAddress"], "127.0.0.96")
        write_watched(nodes, "{not json")
        ev = wait_for("the bad nodes file reported", lambda: self.events("nodesInvalid"), 10)
        self.assertIn(nodes, ev[0]["file"])
        self.assertEqual(healthz(62694), (503, "the last nodes edit was invalid\n"))
        self.assertEqual(self.status()["readyRelays"], 1)
        write_watched(nodes, node_list("127.0.0.97"))  # the node's address changed: the relay follows it
        wait_for("the nodes reloaded", lambda: self.events("nodesReloaded"), 10)
        st = wait_for("the relay on the new address", lambda: (s := self.status()) and len(s["relays"]) == 1 and
                      s["relays"][0]["relayAddress"] == "127.0.0.97" and s["readyRelays"] == 1 and s, 20)
        self.assertEqual(healthz(62694), (200, "ok\n"))
        self.stop()

    def test_a_listener_port_taken_while_running_is_diagnosed_with_the_bind_error(self):
        self.write_pool(1, 62570, 62605)
        self.start(self.argv(["--addresses", "127.0.0.98", "--json"], 62660, 62695))
        self.ready(1)
        pid = [r for r in self.events("reconcile")[-1]["relays"]][0]["pid"]
        os.kill(pid, signal.SIGKILL)
        taker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(50):  # the port is free once the kernel closed the dead coturn's sockets
            try:
                taker.bind(("127.0.0.98", 62605))
                break
            except OSError:
                time.sleep(0.02)
        try:
            ev = wait_for("the failed start reported", lambda: self.events("relayStartFailed"), 15)
            self.assertIn("cannot listen on 127.0.0.98 port 62605 (udp): Address already in use", ev[0]["message"])
            with open(self.err) as f:
                self.assertIn("Address already in use", f.read())
        finally:
            taker.close()
        self.ready(1, 20)  # started again after its backoff once the port is free
        self.stop()


if __name__ == "__main__":
    TURNFLEET, TURNFLEET_PROBE = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
