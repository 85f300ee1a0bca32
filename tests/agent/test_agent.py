"""End-to-end tests of `turnfleet agent` and `turnfleet agent prestop` against a real coturn.

One relay on 127.0.0.231 (listener 3901/udp, relays 63000-63199, CLI 15710), the agent on
127.0.0.231:3950. The config comes from `turnfleet render --cli-port --cli-password-file`, the
allocations from `turnfleet-probe --hold`. The
coturn container's preStop (which runs only for a pod being deleted) is played by writing its stop
request `stopping` in the relay's run directory; the agent's preStop drains only for such a request. Run once per coturn version (ctest registers the
host's 4.6.1 and 4.18 through tools/dev/turnserver-rootfs, one at a time). Every process is
stopped by its PID; nothing is left running.
usage: python3 test_agent.py TURNFLEET TURNFLEET_PROBE TURNSERVER COTURN_VERSION
"""
import json
import os
import re
import shutil
import signal
import socket
import threading
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "up"))
from uphelpers import wait_for  # noqa: E402  (bounded polling, never a timing assertion)

TURNFLEET = PROBE = TURNSERVER = VERSION = None
ADDR = "127.0.0.231"
LISTEN = ADDR + ":3950"
URI = "turn:%s:3901?transport=udp" % ADDR
SECRET = "agent-e2e-secret-3c9d71"
CLI_PASSWORD = "agent-e2e-clipw-88f0a2"
POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: agent, namespace: media}}
spec:
  dataplane: {{coturnVersion: "{version}"}}
  relayPortRange: {{start: 63000, end: 63199}}
  listeners:
    - {{name: turn, protocol: udp, port: 3901}}
  auth: {{realm: agent.test, secretRef: {{name: s}}}}
"""
# a development node: its address is a loopback one, which only such a node may relay on
NODES = ('{"kind":"List","items":[{"metadata":{"name":"n1","labels":{"turnfleet.hzmi.dev/relay-node":"true",'
         '"node-restriction.kubernetes.io/turnfleet-development":"true"}},'
         '"status":{"addresses":[{"type":"ExternalIP","address":"%s"}]}}]}' % ADDR)


def get(path, headers=None):
    try:
        req = urllib.request.Request("http://" + LISTEN + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


class TestAgent(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tf-agent-")
        cls.procs = []
        # the turnserver is the version this run is registered for (MAJOR.MINOR)
        ver = subprocess.run([TURNSERVER, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
        assert ver.split(".")[:2] == VERSION.split(".")[:2], "%s is coturn %r, not %s" % (TURNSERVER, ver, VERSION)
        p = lambda name: os.path.join(cls.dir, name)
        cls.secret, cls.cli_pw, cls.conf = p("secret"), p("cli-password"), p("turnserver.conf")
        for path, text in ((cls.secret, SECRET), (cls.cli_pw, CLI_PASSWORD)):
            with open(path, "w") as f:
                f.write(text + "\n")
            os.chmod(path, 0o600)
        with open(p("pool.yaml"), "w") as f:
            f.write(POOL.format(version=VERSION))
        with open(p("nodes.json"), "w") as f:
            f.write(NODES)
        plan = json.loads(subprocess.run([TURNFLEET, "plan", "-f", p("pool.yaml"), "--nodes", p("nodes.json"), "-o", "json"],
                                         check=True, capture_output=True, text=True).stdout)
        cls.relay = plan["relays"][0]["name"]
        state = p("state")
        # the pod's run directory: coturn's pidfile, the stop request and the marker
        cls.rundir = os.path.join(state, cls.relay)
        cls.marker, cls.request = os.path.join(cls.rundir, "drained"), os.path.join(cls.rundir, "stopping")
        os.makedirs(cls.rundir)
        subprocess.run([TURNFLEET, "render", "-f", p("pool.yaml"), "--nodes", p("nodes.json"), "--relay", cls.relay,
                        "--secret-file", cls.secret, "--state-dir", state, "--log-file", p("turnserver.log"),
                        "--cli-port", "15710", "--cli-password-file", cls.cli_pw, "--out", cls.conf], check=True)

    @classmethod
    def tearDownClass(cls):
        for proc in cls.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def spawn(self, argv, **kw):
        proc = subprocess.Popen(argv, **kw)
        self.procs.append(proc)
        self.addCleanup(self.stop, proc, signal.SIGKILL)  # whatever a failed step left running
        return proc

    def stop(self, proc, sig=signal.SIGTERM, timeout=15):
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def start_turnserver(self):
        log = open(os.path.join(self.dir, "turnserver.out"), "a")
        ts = self.spawn([TURNSERVER, "-c", self.conf], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return ts

    def agent(self, *extra):
        return [TURNFLEET, "agent", "--config", self.conf, "--coturn-version", VERSION, *extra]

    def start_agent(self, version=None, *extra):
        err = open(os.path.join(self.dir, "agent.err"), "a")
        a = self.spawn([TURNFLEET, "agent", "--config", self.conf, "--coturn-version", version or VERSION, "--listen",
                        LISTEN, "--namespace", "media", "--pool", "agent", "--relay", self.relay, "--interval", "0.2",
                        *extra], stdout=subprocess.DEVNULL, stderr=err)
        err.close()
        return a

    def in_use(self):
        code, text = get("/metrics")
        m = re.search(r'^turnfleet_agent_ports_in_use\{namespace="media",pool="agent",relay="%s"\} (\d+)$' % self.relay,
                      text, re.M)
        return int(m.group(1)) if code == 200 and m else None

    def hold(self, n):
        """Hold n allocations; retry on 508 (a released allocation keeps its port a moment)."""
        for _ in range(5):
            p = self.spawn([PROBE, "--uri", URI, "--secret-file", self.secret, "--hold", str(n), "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            results = [json.loads(p.stdout.readline() or "{}") for _ in range(n)]
            if all(r.get("ok") for r in results):
                return p
            self.stop(p)
            p.stdout.close()
            time.sleep(0.3)
        self.fail("could not hold %d allocations" % n)

    def refused_code(self):
        """The error code a new Allocate gets now (0 when it succeeds)."""
        r = subprocess.run([PROBE, "--uri", URI, "--secret-file", self.secret, "--json", "--timeout-ms", "2000"],
                           capture_output=True, text=True, timeout=30)
        line = (r.stdout.strip().splitlines() or ["{}"])[0]
        return 0 if r.returncode == 0 else json.loads(line).get("errorCode")

    def ask_drain(self, rid):
        """What the coturn container's preStop does first: the stop request with its id."""
        with open(self.request + ".new", "w") as f:
            f.write(rid + "\n")
        os.rename(self.request + ".new", self.request)
        self.addCleanup(lambda: os.path.exists(self.request) and os.unlink(self.request))
        self.addCleanup(lambda: os.path.exists(self.marker) and os.unlink(self.marker))

    def marker_text(self):
        with open(self.marker) as f:
            return f.read()

    def cli(self, *commands):
        """coturn's CLI by hand (as an older agent or an operator would), the answers joined."""
        s = socket.create_connection(("127.0.0.1", 15710), timeout=5)
        out = b""

        def until(*ends):
            nonlocal out
            buf = b""
            while not any(buf.endswith(e) for e in ends):
                d = s.recv(65536)
                if not d:
                    break
                buf += d
            out += buf
        try:
            until(b"password: \r\n", b"password: ")
            s.sendall(CLI_PASSWORD.encode() + b"\r\n")
            until(b"> ")
            for c in commands:
                s.sendall(c.encode() + b"\r\n")
                until(b"> ")
        finally:
            s.close()
        return out.decode(errors="replace")

    def gauge(self, name):
        code, text = get("/metrics")
        m = re.search(r'(?m)^turnfleet_agent_%s\{namespace="media",pool="agent",relay="%s"\} (\d+)$'
                      % (name, self.relay), text)
        return int(m.group(1)) if code == 200 and m else None

    def undone(self):
        return self.gauge("drains_undone_total")

    def prestop(self, conf, deadline):
        """`agent prestop` to the end (bounded by the test's timeout, not asserted on time)."""
        return subprocess.run([TURNFLEET, "agent", "prestop", "--config", conf, "--coturn-version", VERSION,
                               "--marker", self.marker, "--deadline", deadline], capture_output=True, text=True,
                              timeout=120)

    def assert_no_secret_in(self, proc):
        for part in ("cmdline", "environ"):
            with open("/proc/%d/%s" % (proc.pid, part), "rb") as f:
                data = f.read()
            self.assertNotIn(CLI_PASSWORD.encode(), data, part)
            self.assertNotIn(SECRET.encode(), data, part)

    def test_1_bad_input_exits_2_naming_the_field(self):
        cases = [
            (self.agent("--listen", "127.0.0.232:3950", "--namespace", "media", "--pool", "agent", "--relay", "r"),
             "--listen"),
            (self.agent("--listen", LISTEN, "--namespace", "media", "--pool", "agent"), "--relay"),
            ([TURNFLEET, "agent", "--config", self.conf, "--coturn-version", "4.x", "--listen", LISTEN, "--namespace",
              "m", "--pool", "p", "--relay", "r"], "--coturn-version"),
            ([TURNFLEET, "agent", "--config", self.secret, "--coturn-version", VERSION, "--listen", LISTEN,
              "--namespace", "m", "--pool", "p", "--relay", "r"], "cli-port: missing"),
            ([TURNFLEET, "agent", "prestop", "--config", self.conf, "--coturn-version", VERSION, "--marker",
              self.marker], "--deadline"),
            ([TURNFLEET, "agent", "prestop", "--config", self.conf, "--coturn-version", VERSION, "--marker",
              self.marker, "--deadline", "soon"], "--deadline"),
        ]
        render = [TURNFLEET, "render", "-f", os.path.join(self.dir, "pool.yaml"), "--nodes",
                  os.path.join(self.dir, "nodes.json"), "--relay", self.relay, "--secret-file", self.secret]
        empty = os.path.join(self.dir, "empty-token")
        open(empty, "w").close()
        serve = self.agent("--listen", LISTEN, "--namespace", "media", "--pool", "agent", "--relay", self.relay)
        cases += [(serve + ["--metrics-token-file", empty], "--metrics-token-file"),
                  (serve + ["--metrics-token-file", os.path.join(self.dir, "no-such-token")], "--metrics-token-file"),
                  ([TURNFLEET, "agent", "healthz", "--config", self.conf, "--metrics-token-file", empty],
                   "healthz takes")]
        cases += [(render + ["--cli-port", "15710"], "--cli-port and --cli-password-file go together"),
                  (render + ["--cli-port", "0", "--cli-password-file", self.cli_pw], "--cli-port")]
        for argv, field in cases:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, (argv, r.stderr))
            self.assertIn(field, r.stderr)
            self.assertNotIn(CLI_PASSWORD, r.stderr + r.stdout)
        self.assertFalse(os.path.exists(self.marker))

    def test_2_counts_drains_waits_and_marks(self):
        ts = self.start_turnserver()
        agent = self.start_agent()
        wait_for("/healthz 200", lambda: get("/healthz")[0] == 200, 30)
        self.assert_no_secret_in(agent)
        code, text = get("/metrics")
        self.assertIn('turnfleet_agent_ports_total{namespace="media",pool="agent",relay="%s"} 200' % self.relay, text)
        # the agent's own names: the operator exports turnfleet_relay_* for the same relay
        self.assertNotIn("turnfleet_relay_", text)
        self.assertRegex(text, r'(?m)^turnfleet_agent_count_failures_total\{namespace="media",pool="agent",relay="%s"\} \d+$'
                         % self.relay)
        self.assertEqual(self.in_use(), 0)
        self.assertEqual(self.gauge("coturn_version_mismatch"), 0)
        holder = self.hold(2)
        wait_for("2 allocations counted", lambda: self.in_use() == 2, 30)

        self.ask_drain("2e1d")
        out = open(os.path.join(self.dir, "prestop.out"), "w+")
        prestop = self.spawn([TURNFLEET, "agent", "prestop", "--config", self.conf, "--coturn-version", VERSION,
                              "--marker", self.marker, "--deadline", "120"], stdout=out, stderr=subprocess.STDOUT)
        self.assert_no_secret_in(prestop)
        # new Allocates are refused the way this version drains (4.6.1's quota takes up to 5 s)
        want = 486 if VERSION.startswith("4.6.") else 403
        got = wait_for("a refused Allocate", lambda: (c := self.refused_code()) != 0 and c or time.sleep(0.5), 30)
        self.assertEqual(got, want)
        # the held allocations keep the relay (and the hook) waiting
        # (the probes that got in before the refusal released theirs: back to the two held)
        wait_for("the 2 held allocations counted", lambda: self.in_use() == 2, 30)
        self.assertIsNone(prestop.poll())
        self.assertFalse(os.path.exists(self.marker))

        self.stop(holder)  # releases both allocations
        self.assertEqual(prestop.wait(timeout=60), 0)
        # the marker answers this request: the agent never undid the drain it asked for
        self.assertEqual(self.marker_text(), "request=2e1d\ndrained allocations=0\n")
        self.assertEqual(self.undone(), 0)
        out.seek(0)
        said = out.read()
        out.close()
        self.assertNotIn(CLI_PASSWORD, said)
        # the drain was taken by coturn (4.18 answers `drain` without a new prompt)
        self.assertIn("sent `%s`" % ("drain" if want == 403 else "cc total-quota -1"), said)
        self.assertNotIn("drain: the relay's CLI", said)
        if want == 403:
            # coturn >= 4.6.3 exits by itself at zero; the agent then reports it unhealthy
            self.assertEqual(ts.wait(timeout=30), 0)
            wait_for("/healthz 503", lambda: get("/healthz")[0] == 503, 30)
        else:
            self.assertIsNone(ts.poll())  # 4.6.1 stays up: the kubelet stops it after the marker
            self.stop(ts)
        self.assertEqual(self.stop(agent), 0)

    def test_3_the_deadline_ends_the_wait(self):
        ts = self.start_turnserver()
        agent = self.start_agent()
        wait_for("/healthz 200", lambda: get("/healthz")[0] == 200, 30)
        holder = self.hold(1)
        wait_for("1 allocation counted", lambda: self.in_use() == 1, 30)
        self.ask_drain("3")
        r = self.prestop(self.conf, "1.5")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the deadline (1.5 s) passed first", r.stderr)
        self.assertEqual(self.marker_text(), "request=3\ndeadline allocations=1\n")
        self.assertIsNone(ts.poll())  # still serving its allocation
        self.stop(holder)
        self.stop(ts)
        self.assertEqual(self.stop(agent), 0)

    def test_4_prestop_without_coturn_marks_at_once(self):
        self.ask_drain("4")
        r = self.prestop(self.conf, "60")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("nothing to drain", r.stdout)
        self.assertEqual(self.marker_text(), "request=4\ndrained allocations=0\n")

    def test_5_the_password_goes_only_to_coturns_own_listener(self):
        # a decoy on a CLI port, and a config whose pidfile names a process that does not own it
        decoy = socket.socket()
        decoy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        decoy.bind(("127.0.0.1", 15711))
        decoy.listen(8)
        decoy.settimeout(0.2)
        got, done = [], threading.Event()

        def serve():
            while not done.is_set():
                try:
                    conn, _ = decoy.accept()
                except OSError:
                    continue
                got.append(b"connect")
                conn.sendall(b"Enter password: ")
                conn.settimeout(1)
                try:
                    got.append(conn.recv(256))
                except OSError:
                    pass
                conn.close()

        t = threading.Thread(target=serve)
        t.start()
        try:
            other = self.spawn(["sleep", "60"])
            pidfile = os.path.join(self.rundir, "other.pid")  # the stop request stays beside it
            with open(pidfile, "w") as f:
                f.write("%d\n" % other.pid)
            with open(self.conf) as f:
                text = f.read()
            text = re.sub(r"^cli-port=.*$", "cli-port=15711", text, flags=re.M)
            text = re.sub(r"^pidfile=.*$", 'pidfile="%s"' % pidfile, text, flags=re.M)
            conf = os.path.join(self.dir, "decoy.conf")
            fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            err = open(os.path.join(self.dir, "decoy-agent.err"), "w+")
            agent = self.spawn([TURNFLEET, "agent", "--config", conf, "--coturn-version", VERSION, "--listen", LISTEN,
                                "--namespace", "media", "--pool", "agent", "--relay", self.relay, "--interval", "0.2"],
                               stdout=subprocess.DEVNULL, stderr=err)
            # "no count yet" alone until the first count was tried (later under load), then why it failed
            code, body = wait_for("/healthz after a count was tried",
                                  lambda: (r := get("/healthz"))[0] and r[1] != "no count yet\n" and r, 30)
            self.assertEqual(code, 503)
            self.assertIn("is not process %d's: the password is not sent" % other.pid, body)
            # every refused count is counted, and no count is shown
            code, text = get("/metrics")
            self.assertEqual(code, 200)
            m = re.search(r'(?m)^turnfleet_agent_count_failures_total\{namespace="media",pool="agent",relay="%s"\} (\d+)$'
                          % self.relay, text)
            self.assertTrue(m and int(m.group(1)) >= 1, text)
            self.assertNotIn("turnfleet_agent_ports_in_use{", text)
            self.ask_drain("5")
            r = self.prestop(conf, "1")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(self.marker_text(), "request=5\ndeadline allocations=unknown\n")
            self.assertEqual(self.stop(agent), 0)
            err.close()
        finally:
            done.set()
            t.join()
            decoy.close()
        self.assertEqual(got, [], "the decoy listener was contacted")

    def test_6_a_prestop_without_a_stop_request_drains_nothing(self):
        """A liveness kill runs only the agent's preStop: the relay keeps serving and is not marked."""
        ts = self.start_turnserver()
        agent = self.start_agent()
        wait_for("/healthz 200", lambda: get("/healthz")[0] == 200, 30)
        holder = self.hold(1)
        wait_for("1 allocation counted", lambda: self.in_use() == 1, 30)
        with open(self.marker, "w") as f:  # a stale marker of an earlier drain answers no new request
            f.write("request=0ld\ndrained allocations=0\n")
        self.addCleanup(lambda: os.path.exists(self.marker) and os.unlink(self.marker))
        r = self.prestop(self.conf, "60")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the pod is not being deleted", r.stdout)
        self.assertIn("nothing drained", r.stdout)
        self.assertEqual(self.marker_text(), "request=0ld\ndrained allocations=0\n")
        self.assertEqual(self.refused_code(), 0)  # new Allocates are served
        self.assertIsNone(ts.poll())
        self.stop(holder)
        wait_for("the allocation's release counted", lambda: self.in_use() == 0, 30)
        self.stop(ts)
        self.assertEqual(self.stop(agent), 0)

    def test_7_a_refusal_found_while_not_being_deleted_is_undone(self):
        ts = self.start_turnserver()
        agent = self.start_agent()
        wait_for("/healthz 200", lambda: get("/healthz")[0] == 200, 30)
        self.assertEqual(self.undone(), 0)
        # what an older agent's preStop left after a liveness kill
        self.assertIn("total-quota", self.cli("cc total-quota -1"))
        wait_for("the refusal undone", lambda: self.undone() == 1, 30)
        self.assertRegex(self.cli("pc"), r"Default total-quota: 0\b")
        with open(os.path.join(self.dir, "agent.err")) as f:
            self.assertIn("while its pod is not being deleted: undone", f.read())
        self.assertEqual(self.refused_code(), 0)
        # with the stop request there, a refusal is the drain it asked for: kept
        self.ask_drain("7")
        self.cli("cc total-quota -1")
        wait_for("the refusal in force", lambda: (c := self.refused_code()) != 0 and c or time.sleep(0.5), 30)
        self.assertRegex(self.cli("pc"), r"Default total-quota: 18446744073709551615|Default total-quota: -1")
        self.assertEqual(self.undone(), 1)
        self.stop(ts)
        self.assertEqual(self.stop(agent), 0)

    def test_8_a_running_version_other_than_the_rendered_one_is_reported(self):
        ts = self.start_turnserver()
        other = "4.6.1" if not VERSION.startswith("4.6.") else "4.18.0"
        agent = self.start_agent(other)
        wait_for("the mismatch reported", lambda: self.gauge("coturn_version_mismatch") == 1, 30)
        with open(os.path.join(self.dir, "agent.err")) as f:
            said = f.read()
        self.assertIn("coturn %s runs (PID %d), but its config was rendered for %s" % (VERSION, ts.pid, other), said)
        self.assertNotIn(CLI_PASSWORD, said)
        self.stop(ts)
        self.assertEqual(self.stop(agent), 0)

    def healthz(self):
        return subprocess.run([TURNFLEET, "agent", "healthz", "--config", self.conf], capture_output=True, text=True,
                              timeout=30)

    def test_9_a_flood_of_half_open_connections_fails_neither_liveness_nor_counts(self):
        health = os.path.join(self.rundir, "health")
        if os.path.exists(health):  # an earlier case's agent left its heartbeat
            os.unlink(health)
        r = self.healthz()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no heartbeat", r.stdout)
        r = subprocess.run([TURNFLEET, "agent", "healthz", "--config", self.conf, "--listen", LISTEN], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("healthz takes --config only", r.stderr)
        ts = self.start_turnserver()
        agent = self.start_agent()
        wait_for("the heartbeat ok", lambda: self.healthz().returncode == 0, 30)
        self.assertEqual(self.healthz().stdout, "ok: 0 allocations\n")
        # 200 connections that never send a request, from one address (this suite's own 127.0.10.5)
        flood = []
        try:
            for _ in range(200):
                s = socket.socket()
                s.bind(("127.0.10.5", 0))
                s.settimeout(5)
                s.connect((ADDR, 3950))
                flood.append(s)
            # the liveness probe needs no connection; the agent's port still serves every other client
            self.assertEqual(self.healthz().returncode, 0)
            self.assertEqual(get("/healthz")[0], 200)
            holder = self.hold(1)
            wait_for("the allocation counted during the flood", lambda: self.in_use() == 1, 30)
            self.stop(holder)
            wait_for("its release counted during the flood", lambda: self.in_use() == 0, 30)
            self.assertEqual(self.healthz().returncode, 0)
            self.assertIsNone(agent.poll())
        finally:
            for s in flood:
                s.close()
        # a stopped agent's heartbeat goes stale: the probe fails
        self.assertEqual(self.stop(agent), 0)
        r = wait_for("the stale heartbeat", lambda: (r := self.healthz()).returncode == 1 and r, 30)
        self.assertIn("no count for", r.stdout)
        self.stop(ts)

    def test_10_metrics_only_with_the_pools_token(self):
        token = "5f0c" * 16
        path = os.path.join(self.dir, "metrics-token")
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chmod(path, 0o400)
        ts = self.start_turnserver()
        agent = self.start_agent(None, "--metrics-token-file", path)
        wait_for("the agent serving", lambda: get("/healthz")[0] == 200, 30)  # /healthz needs no token
        code, text = get("/metrics")
        self.assertEqual(code, 401)
        self.assertNotIn("turnfleet_agent", text)
        for wrong in ("Bearer " + token[:-1] + "0", "Bearer " + token[:-1], "Bearer " + token + "0", token,
                      "Basic " + token, "Bearer"):
            self.assertEqual(get("/metrics", {"Authorization": wrong})[0], 401, wrong)
        right = {"Authorization": "Bearer " + token}
        code, text = get("/metrics", right)
        self.assertEqual(code, 200)
        self.assertRegex(text, r'(?m)^turnfleet_agent_ports_in_use\{namespace="media",pool="agent",relay="%s"\} 0$'
                         % self.relay)
        # the token is in no argv, no environment and no log line
        with open("/proc/%d/cmdline" % agent.pid, "rb") as f:
            self.assertNotIn(token.encode(), f.read())
        with open("/proc/%d/environ" % agent.pid, "rb") as f:
            self.assertNotIn(token.encode(), f.read())
        self.assertEqual(self.stop(agent), 0)
        with open(os.path.join(self.dir, "agent.err")) as f:
            self.assertNotIn(token, f.read())
        self.stop(ts)

    def test_11_a_count_older_than_two_intervals_is_no_sample(self):
        ts = self.start_turnserver()
        agent = self.start_agent()
        wait_for("counting", lambda: self.in_use() == 0, 30)
        # coturn stopped: its CLI answers nothing, the counts fail, the last one ages past two intervals
        ts.send_signal(signal.SIGSTOP)
        try:
            wait_for("the sample gone", lambda: get("/metrics")[0] == 200 and self.in_use() is None, 30)
            wait_for("a count failed", lambda: self.gauge("count_failures_total") > 0, 30)
            self.assertIsNone(self.in_use())
        finally:
            ts.send_signal(signal.SIGCONT)
        wait_for("counting again", lambda: self.in_use() == 0, 30)
        self.assertEqual(self.stop(agent), 0)
        self.stop(ts)


if __name__ == "__main__":
    TURNFLEET, PROBE, TURNSERVER, VERSION = sys.argv[1:5]
    del sys.argv[1:5]
    unittest.main(verbosity=2)
