"""End-to-end tests of `turnfleet up` with real coturn on loopback.

Addresses 127.0.0.81-83, listener port 3701, CLI ports from 3710, metrics on
3790, relay ranges 60000-60007. Every process is stopped by its PID.
usage: python3 test_up.py TURNFLEET TURNFLEET_PROBE   (unittest; steps run in order)
The coturn it runs: $TF_TEST_TURNSERVER (default `turnserver`, Debian 12's 4.6.1;
ctest also runs it with tools/dev/turnserver-rootfs, coturn 4.18) of version
$TF_TEST_COTURN_VERSION (default 4.6.1).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from uphelpers import alive, stop_all, wait_for, write_watched

TURNFLEET = TURNFLEET_PROBE = None
TURNSERVER = os.environ.get("TF_TEST_TURNSERVER") or "turnserver"
VERSION = os.environ.get("TF_TEST_COTURN_VERSION") or "4.6.1"
# coturn >= 4.6.3 drains itself (403 to new Allocates, exit at zero allocations);
# older ones refuse new Allocates through the CLI's total-quota -1 (486) and are stopped
DRAIN_MODE = tuple(int(x) for x in VERSION.split("-")[0].split(".")) >= (4, 6, 3)
INTERVAL = 0.5
SECRET = "e2e-secret-7f3a9c1d55"
POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: e2e}}
spec:
  replicas: {replicas}
  dataplane: {{coturnVersion: "{version}"}}
  relayPortRange: {{start: 60000, end: 60007}}
  listeners:
    - {{name: turn, protocol: udp, port: 3701}}
    - {{name: turn-tcp, protocol: tcp, port: 3701}}
  auth: {{realm: e2e.test, secretRef: {{name: s}}}}
  drainTimeout: {drain}
"""
METRICS = "http://127.0.0.1:3790"


class TestUp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tf-up-")
        cls.state = os.path.join(cls.dir, "state")
        cls.pool = os.path.join(cls.dir, "pool.yaml")
        cls.secret = os.path.join(cls.dir, "secret")
        with open(cls.secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(cls.secret, 0o600)
        cls.write_pool(3)
        cls.out = open(os.path.join(cls.dir, "out.log"), "w+")
        cls.err = open(os.path.join(cls.dir, "err.log"), "w+")
        cls.holds = []
        cls.held = {}  # relay address -> its hold processes
        cls.pids_seen = set()
        cls.proc = subprocess.Popen(
            [TURNFLEET, "up", "-f", cls.pool, "--secret-file", cls.secret, "--addresses", "127.0.0.81-83",
             "--state-dir", cls.state, "--metrics-addr", "127.0.0.1:3790", "--probe-interval", str(INTERVAL),
             "--cli-port", "3710", "--turnserver", TURNSERVER, "--json"],
            stdout=cls.out, stderr=cls.err)

    @classmethod
    def tearDownClass(cls):
        stop_all(cls.holds)
        if cls.proc.poll() is None:
            cls.proc.kill()  # its children die with it (PR_SET_PDEATHSIG)
            cls.proc.wait()
        for pid in cls.pids_seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        cls.out.close()
        cls.err.close()
        if os.environ.get("TF_KEEP_TMP"):
            print("kept", cls.dir, file=sys.stderr)
        else:
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def write_pool(cls, replicas, drain="5s", text=None):
        write_watched(cls.pool, text if text is not None else POOL.format(replicas=replicas, drain=drain, version=VERSION))

    def status(self):
        try:
            with open(os.path.join(self.state, "status.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def uris(self):
        with open(os.path.join(self.state, "turn-uris")) as f:
            return [line for line in f.read().splitlines() if line]

    def lines(self):
        with open(self.out.name) as f:
            out = [json.loads(line) for line in f if line.startswith("{")]
        for ev in out:
            for r in ev.get("relays", []):
                if r["pid"]:
                    self.pids_seen.add(r["pid"])
        return out

    def lines_since(self, k):
        return [e for e in self.lines() if e["event"] == "reconcile"][k:]

    def last(self):
        evs = [e for e in self.lines() if e["event"] == "reconcile"]
        return evs[-1] if evs else None

    def metrics(self):
        with urllib.request.urlopen(METRICS + "/metrics", timeout=5) as r:
            return r.read().decode()

    def hold(self, uri, n, tries=1):
        """Hold n allocations; retry on 508 (a probe's released allocation keeps its port a moment)."""
        for attempt in range(tries):
            p = subprocess.Popen([TURNFLEET_PROBE, "--uri", uri, "--secret-file", self.secret, "--hold", str(n),
                                  "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.holds.append(p)
            results = [json.loads(p.stdout.readline() or "{}") for _ in range(n)]
            if all(r.get("ok") for r in results):
                self.held.setdefault(uri.split(":")[1], []).append(p)
                return p
            p.wait(timeout=10)
            p.stdout.close()
            self.assertEqual([r.get("errorCode") for r in results if not r.get("ok")][0], 508, results)
            time.sleep(0.3)
        self.fail("could not hold %d allocations on %s" % (n, uri))

    def test_0_a_pool_for_another_coturn_is_refused(self):
        other = "4.18.0" if VERSION.startswith("4.6.") else "4.6.1"
        pool = os.path.join(self.dir, "other.yaml")
        with open(pool, "w") as f:
            f.write(POOL.format(replicas=1, drain="5s", version=other))
        out = subprocess.run([TURNFLEET, "up", "-f", pool, "--secret-file", self.secret, "--addresses", "127.0.0.81",
                              "--state-dir", os.path.join(self.dir, "other"), "--turnserver", TURNSERVER],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn('spec.dataplane.coturnVersion: "%s" contradicts the turnserver this runs' % other, out.stderr)
        self.assertIn("is coturn %s" % VERSION.split("-")[0], out.stderr)
        out = subprocess.run([TURNFLEET, "up", "-f", self.pool, "--secret-file", self.secret, "--addresses",
                              "127.0.0.81", "--state-dir", os.path.join(self.dir, "other"), "--turnserver",
                              os.path.join(self.dir, "no-such-turnserver")], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("--turnserver: cannot run", out.stderr)

    def test_1_ready_after_allocate_and_outputs_agree(self):
        st = wait_for("3 ready relays", lambda: (s := self.status()) and s["readyRelays"] == 3 and s, 30)
        self.assertEqual(len(st["relays"]), 3)
        addrs = sorted(r["relayAddress"] for r in st["relays"])
        self.assertEqual(addrs, ["127.0.0.81", "127.0.0.82", "127.0.0.83"])
        for r in st["relays"]:
            # ready only with a passed probe (a real Allocate) made after the process started
            self.assertTrue(r["ready"])
            self.assertTrue(r["lastProbe"]["ok"], r)
            self.assertEqual(r["portsTotal"], 8)
        # before any probe passed, no relay was ready: each one Starting, in the events and status.json
        first = self.lines()[0]
        self.assertEqual(first["readyRelays"], 0)
        self.assertEqual({r["state"] for r in first["relays"]}, {"Starting"})
        self.assertEqual({r["state"] for r in st["relays"]}, {"Ready"})
        uris = self.uris()
        want = sorted("turn:%s:3701?transport=%s" % (a, t) for a in addrs for t in ("udp", "tcp"))
        self.assertEqual(sorted(uris), want)
        self.assertEqual(sorted(st["turnURIs"]), want)  # status.json lists what turn-uris publishes, as the operator's status does
        with open(os.path.join(self.state, "iceServers.json")) as f:
            ice = json.load(f)
        self.assertEqual(sorted(u for s in ice for u in s["urls"]), want)
        # counted too (a count waits half a probe interval after a probe)
        text = wait_for("counts in /metrics", lambda: (t := self.metrics()).count("turnfleet_relay_ports_in_use{") == 3 and t, 10)
        for r in st["relays"]:
            labels = '{namespace="default",pool="e2e",relay="%s"}' % r["name"]
            self.assertIn("turnfleet_relay_ports_total%s 8\n" % labels, text)
            self.assertIn("turnfleet_probe_success%s 1\n" % labels, text)
            self.assertRegex(text, re.escape("turnfleet_relay_ports_in_use" + labels) + r" \d+\n")
        self.assertIn("# TYPE turnfleet_allocation_failures_total counter", text)
        with urllib.request.urlopen(METRICS + "/healthz", timeout=5) as r:
            self.assertEqual((r.status, r.read()), (200, b"ok\n"))

    def test_2_invalid_pool_edit_changes_nothing(self):
        before = self.last()
        uris = self.uris()
        with open(self.pool) as f:
            self.write_pool(3, text=f.read().replace("replicas: 3", "replicas: -1"))
        wait_for("the invalid pool reported", lambda: any(e["event"] == "poolInvalid" for e in self.lines()), 10)
        time.sleep(3 * INTERVAL)
        after = self.last()
        self.assertEqual(self.uris(), uris)
        self.assertEqual([r["pid"] for r in after["relays"]], [r["pid"] for r in before["relays"]])
        self.assertEqual(after["readyRelays"], 3)
        self.assertEqual(after["actions"], [])
        with open(self.err.name) as f:
            self.assertIn("spec.replicas", f.read())
        # valid, but it cannot be rendered (a TLS listener without --cert/--key): refused as a whole,
        # the running pool still managed, the refusal in status.json, the events and /healthz
        tls = POOL.format(replicas=3, drain="5s", version=VERSION).replace(
            "- {name: turn-tcp, protocol: tcp, port: 3701}",
            "- {name: turn-tls, protocol: tls, port: 3702, tlsSecretRef: {name: certs}}")
        self.write_pool(3, text=tls)
        ev = wait_for("the refusal reported", lambda: [e for e in self.lines() if e["event"] == "poolRefused"], 10)
        self.assertIn("cert", ev[-1]["message"])
        st = wait_for("the refusal in status.json", lambda: (s := self.status()) and s.get("refusedChange") and s, 10)
        self.assertEqual(st["readyRelays"], 3)
        self.assertEqual(sorted(self.uris()), sorted(uris))
        try:
            urllib.request.urlopen(METRICS + "/healthz", timeout=5)
            self.fail("/healthz should fail after a refused pool edit")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 503)
            self.assertIn(b"refused", e.read())
        self.write_pool(3)  # valid again, unchanged fleet
        wait_for("the refusal cleared", lambda: (s := self.status()) and s.get("refusedChange") is None, 10)
        # valid, but 5 replicas cannot be placed on 3 addresses: refused whole, the 3 relays kept
        refusals = len([e for e in self.lines() if e["event"] == "poolRefused"])
        self.write_pool(5)
        ev = wait_for("the unplaceable pool refused", lambda: [
            e for e in self.lines() if e["event"] == "poolRefused"][refusals:], 10)
        self.assertIn("3 of 5 replicas can be placed", ev[-1]["message"])
        st = wait_for("the refusal in status.json", lambda: (s := self.status()) and s.get("refusedChange") and s, 10)
        self.assertIn("3 of 5 replicas", st["refusedChange"])
        self.assertEqual((st["desiredReplicas"], st["readyRelays"]), (3, 3))
        try:
            urllib.request.urlopen(METRICS + "/healthz", timeout=5)
            self.fail("/healthz should fail after a refused pool edit")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 503)
        wait_for("an event saying why unhealthy",
                 lambda: (e := self.last()) and e["unhealthy"] == "the last pool edit was refused", 10)
        self.write_pool(3)
        wait_for("the refusal cleared", lambda: (s := self.status()) and s.get("refusedChange") is None, 10)
        # every event says desired vs placed replicas and every condition with reason and message
        last = self.last()
        self.assertEqual((last["desiredReplicas"], last["placedReplicas"]), (3, 3))
        conds = {c["type"]: c for c in last["conditions"]}
        self.assertEqual(sorted(conds), sorted(["Ready", "ProbeSucceeded", "CapacityPressure", "AddressConflict",
                                                "ReachableFromVantage"]))
        self.assertTrue(all(c["reason"] and c["message"] for c in conds.values()))

    def test_3_killed_relay_restarted(self):
        ev = wait_for("a ready fleet", lambda: (e := self.last()) and e["readyRelays"] == 3 and e, 10)
        victim = ev["relays"][0]
        os.kill(victim["pid"], signal.SIGKILL)

        def restarted():
            e = self.last()
            r = [r for r in e["relays"] if r["name"] == victim["name"]]
            return r and r[0]["pid"] not in (0, victim["pid"]) and r[0]["state"] == "Ready" and r[0]

        r = wait_for("the relay restarted and ready", restarted, 20)
        self.assertEqual(r["restarts"], 1)
        self.assertFalse(alive(victim["pid"]))  # reaped: no zombie
        states = [x["state"] for e in self.lines() if e["event"] == "reconcile" for x in e["relays"]
                  if x["name"] == victim["name"] and x["pid"] in (0, victim["pid"])]
        self.assertIn("Failing", states)  # its process gone: Failing until it runs again
        # one reaper: no child of `up` (relays, the turnserver --version/-h runs) is left a zombie
        zombies = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == self.proc.pid:
                zombies.append(pid)
        self.assertEqual(zombies, [])

    def test_4_held_allocations_counted(self):
        wait_for("3 ready relays", lambda: (s := self.status()) and s["readyRelays"] == 3 and s, 20)
        # the probe's own released allocations linger in coturn's count a moment (a steady 0-2 here):
        # held, they are counted on top of the least the relay was counted at before the holds
        before = self.lines_since(0)[-4:]
        base = {r["name"]: min([x["allocations"] for e in before for x in e["relays"]
                                if x["name"] == r["name"] and x["allocations"] is not None] or [0])
                for r in self.last()["relays"]}
        for a in ("127.0.0.81", "127.0.0.82", "127.0.0.83"):
            self.hold("turn:%s:3701?transport=udp" % a, 2, tries=5)
        held_at = len(self.lines_since(0))

        def counted(e, name):
            return any(r["name"] == name and (r.get("allocations") or 0) >= base[name] + 2 for r in e["relays"])

        def rounds(name):  # the events after the holds that report a probe round of the relay
            return [i for i, e in enumerate(self.lines_since(held_at)) if name in e["probed"]]

        names = [r["name"] for r in self.last()["relays"] if r["state"] != "Draining"]
        wait_for("held allocations counted", lambda: all(counted(self.last(), n) for n in names), 10)
        s = wait_for("held allocations in status.json", lambda: (s := self.status()) and all(
            (r["allocations"] or 0) >= 2 for r in s["relays"]) and s, 10)
        # within two probe intervals: counted by each relay's second probe round after the holds
        # (counted in its rounds, not seconds, so a loaded machine cannot make it flaky; relays
        # restarted by test 3 are probed out of phase with the others, so events are not rounds)
        wait_for("two probe rounds of every relay", lambda: all(len(rounds(n)) >= 2 for n in names), 10)
        evs = self.lines_since(held_at)
        for n in names:
            first, second = next(i for i, e in enumerate(evs) if counted(e, n)), rounds(n)[1]
            seen = [(e["timeMs"], e["probed"], [(r["name"], r.get("allocations")) for r in e["relays"]])
                    for e in evs[:first + 1]]
            self.assertLessEqual(first, second, "%s (counted at least %d before) counted in event %d after the holds, "
                                 "its second probe round was event %d: %r" % (n, base[n], first, second, seen))
        for r in s["relays"]:
            self.assertEqual(r["portsInUse"], r["allocations"])
        text = self.metrics()
        for r in s["relays"]:
            m = re.search(r'turnfleet_relay_ports_in_use\{namespace="default",pool="e2e",relay="%s"\} (\d+)' % r["name"],
                          text)
            self.assertTrue(m and int(m.group(1)) >= 2, r["name"])

    def test_4b_full_range_raises_capacity_pressure(self):
        # 127.0.0.81 owns 8 ports and holds 2 (test 4). Fill the rest: keep adding one held
        # allocation at a time until coturn answers 508 (the probe's own released allocations
        # keep their ports about 1 s, so how many fit varies), topping up as ports free again.
        uri = "turn:127.0.0.81:3701?transport=udp"
        fillers = []

        def top_up_and_check():
            p = subprocess.Popen([TURNFLEET_PROBE, "--uri", uri, "--secret-file", self.secret, "--hold", "1",
                                  "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.holds.append(p)
            result = json.loads(p.stdout.readline() or "{}")
            if result.get("ok"):
                fillers.append(p)
            else:
                self.assertEqual(result.get("errorCode"), 508, result)  # full, as intended
                p.wait(timeout=10)
            s = self.status()
            c = {c["type"]: c for c in s["conditions"]}["CapacityPressure"]
            return c["status"] == "True" and (s, c)

        try:
            s, c = wait_for("CapacityPressure", top_up_and_check, 25)
        except AssertionError:
            raise AssertionError("no CapacityPressure with %d fillers held: %s" % (len(fillers), json.dumps(self.status())))
        self.assertIn(c["reason"], ("PortsNearlyExhausted", "InsufficientCapacity"))
        r = [r for r in s["relays"] if r["relayAddress"] == "127.0.0.81"][0]
        self.assertEqual(r["portsTotal"], 8)
        self.assertGreaterEqual(len(fillers), 1)

        # every port held: the probe gets 508, the relay is Full (it answers: healthy, not Failing)
        def full():
            top_up_and_check()
            r = [r for r in self.status()["relays"] if r["relayAddress"] == "127.0.0.81"][0]
            return r["state"] == "Full" and r

        r = wait_for("the full relay shown Full", full, 20)
        self.assertEqual(r["lastProbe"]["errorCode"], 508, r)
        self.assertIn("Full", [x["state"] for e in self.lines() if e["event"] == "reconcile" for x in e["relays"]])
        # released: the pressure clears and every relay is ready again
        for p in fillers:
            p.send_signal(signal.SIGTERM)
        for p in fillers:
            p.wait(timeout=10)

        def relieved():
            s = self.status()
            conds = {c["type"]: c["status"] for c in s["conditions"]}
            return s["readyRelays"] == 3 and conds["CapacityPressure"] == "False" and s

        # coturn 4.6.1's `pc` counter keeps every refused (508) Allocate: the runtime counts
        # with `pu` (Total sessions), so the count falls back once the holds are released
        try:
            wait_for("the pressure to clear", relieved, 15)
        except AssertionError:
            raise AssertionError("pressure did not clear: %s" % json.dumps(self.status()))

    def test_5_scale_down_drains_the_emptiest_uri_first(self):
        # 127.0.0.83 holds the fewest allocations (2 against 4): the scale-down drains it
        for a in ("127.0.0.81", "127.0.0.82"):
            self.hold("turn:%s:3701?transport=udp" % a, 2, tries=5)

        def counted():
            s = self.status()
            n = {r["relayAddress"]: r["allocations"] or 0 for r in s["relays"]}
            # `pu` counts sessions: a probe's passing session may add one for a moment, so the
            # others lead the emptiest by two, and a probe on it at the scale-down cannot make a tie
            low = n["127.0.0.83"]
            # and all three published: the URIs before the scale-down are the whole pool's
            published = all([u for u in self.uris() if "turn:%s:" % a in u] for a in n)
            return low >= 2 and n["127.0.0.81"] >= low + 2 and n["127.0.0.82"] >= low + 2 and published and s

        try:
            wait_for("127.0.0.83 counted with the fewest allocations", counted, 15)
        except AssertionError:
            raise AssertionError("127.0.0.83 not the emptiest, or not all three published: %s %s" % (
                self.uris(), json.dumps(self.status()["relays"])))
        before = self.last()
        pids = {r["name"]: r["pid"] for r in before["relays"]}
        uris_before = set(self.uris())
        # coturn 4.18 drains itself: a long deadline, so its exit cannot be the deadline's doing
        self.write_pool(2, drain="120s" if DRAIN_MODE else "8s")
        ev = wait_for("a draining relay", lambda: [r for r in self.last()["relays"] if r["state"] == "Draining"], 10)
        gone = ev[0]["name"]
        t_drain = time.monotonic()
        # status.json is written after the event line: read once it has the drain
        st = wait_for("status.json with %s draining" % gone, lambda: (s := self.status()) and [
            r for r in s["relays"] if r["name"] == gone and r["draining"]] and s, 5)
        r = [r for r in st["relays"] if r["name"] == gone][0]
        addr = r["relayAddress"]
        self.assertEqual(addr, "127.0.0.83")
        # URI first: out of turn-uris while its process still runs with the held allocations
        self.assertFalse([u for u in self.uris() if ":%s:" % addr in u or "turn:%s:" % addr in u])
        self.assertTrue(uris_before > set(self.uris()), "turn-uris %s after %s: %s" % (
            self.uris(), sorted(uris_before), json.dumps(st["relays"])))
        self.assertTrue(alive(pids[gone]))
        self.assertGreaterEqual(r["allocations"] or 0, 2)

        # then new allocations are refused while the held ones stay: coturn >= 4.6.3 answers
        # 403 (draining); 4.6.1 gets the CLI's total-quota -1, so 486, within 5 s
        want = 403 if DRAIN_MODE else 486

        def refused():
            out = subprocess.run([TURNFLEET_PROBE, "--uri", "turn:%s:3701?transport=udp" % addr, "--secret-file",
                                  self.secret, "--json"], capture_output=True, text=True, timeout=10)
            res = json.loads(out.stdout or "{}")
            return res.get("errorCode") == want and res

        res = wait_for("new Allocates refused on the draining relay", refused, 7)
        self.assertFalse(res["ok"])
        self.assertEqual(res["draining"], DRAIN_MODE)
        self.assertTrue(alive(pids[gone]))
        if DRAIN_MODE:
            # the held allocations are still there; released, coturn exits by itself
            time.sleep(2 * INTERVAL)
            self.assertTrue(alive(pids[gone]))
            for p in self.held.pop(addr):
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(timeout=10), 0)  # every refresh and the release succeeded
            wait_for("the drained coturn to exit by itself", lambda: not alive(pids[gone]), 60)
            self.assertLess(time.monotonic() - t_drain, 100)  # not the 120 s deadline
            # the shutdown in test 7 need not wait two minutes
            reloads = len([e for e in self.lines() if e["event"] == "poolReloaded"])
            self.write_pool(2, drain="5s")
            wait_for("the 5 s drainTimeout loaded", lambda: [
                e for e in self.lines() if e["event"] == "poolReloaded"][reloads:] and [
                e for e in self.lines() if e["event"] == "poolReloaded"][-1]["drainTimeoutMs"] == 5000, 10)
        else:
            # never cut before drainTimeout (8 s), gone soon after it
            wait_for("the drain deadline", lambda: not alive(pids[gone]), 15)
            self.assertGreaterEqual(time.monotonic() - t_drain, 7.0)
        st = wait_for("2 relays", lambda: (s := self.status()) and len(s["relays"]) == 2 and s, 10)
        self.assertNotIn(gone, [r["name"] for r in st["relays"]])
        for name, pid in pids.items():
            if name != gone:
                self.assertTrue(alive(pid), name)
        # the drained relay left no restart behind: the events after its stop start nothing
        wait_for("an event after the stop", lambda: self.last()["actions"] == [], 10)
        evs = [e for e in self.lines() if e["event"] == "reconcile"]
        stop = max(i for i, e in enumerate(evs) if any(a.startswith("stop %s" % gone) for a in e["actions"]))
        self.assertEqual([a for e in evs[stop + 1:] for a in e["actions"]], [], "the drained relay left no restart behind")

    def test_5b_a_relay_that_does_not_answer_stalls_no_other(self):
        # 127.0.0.82's turnserver stopped: its CLI and TURN ports take connections and answer
        # nothing. The loop goes on: 127.0.0.81 keeps being probed and counted.
        ev = wait_for("2 ready relays", lambda: (e := self.last()) and e["readyRelays"] == 2 and e, 10)
        names = {r["name"]: r["pid"] for r in ev["relays"]}
        st = self.status()
        addr_of = {r["name"]: r["relayAddress"] for r in st["relays"]}
        stopped = [n for n in names if addr_of[n] == "127.0.0.82"][0]
        other = [n for n in names if n != stopped][0]
        os.kill(names[stopped], signal.SIGSTOP)
        try:
            wait_for("the stopped relay Failing", lambda: [r for r in self.last()["relays"] if r["name"] == stopped
                                                          and r["state"] == "Failing"], 15)
            before = [r for r in self.status()["relays"] if r["name"] == other][0]
            self.hold("turn:%s:3701?transport=udp" % addr_of[other], 1, tries=5)

            def counted():
                r = [r for r in self.status()["relays"] if r["name"] == other][0]
                return (r["allocations"] or 0) > (before["allocations"] or 0) and \
                    r["lastProbe"]["time"] != before["lastProbe"]["time"] and r["state"] == "Ready" and r
            wait_for("the other relay probed and counted while one does not answer", counted, 10)
        finally:
            os.kill(names[stopped], signal.SIGCONT)
        wait_for("both ready again", lambda: (e := self.last()) and e["readyRelays"] == 2, 15)

    def test_6_no_secret_in_argv_output_or_files(self):
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        self.assertNotIn(SECRET.encode(), f.read(), pid)
                except OSError:
                    pass
        confs = 0
        for root, _, files in os.walk(self.state):
            for name in files:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    data = f.read()
                if name == "turnserver.conf":
                    confs += 1
                    self.assertIn(SECRET.encode(), data)
                    self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
                else:
                    self.assertNotIn(SECRET.encode(), data, path)
                    self.assertNotIn(b"cli-password", data, path)
        self.assertEqual(confs, 2)
        for f in (self.out.name, self.err.name):
            with open(f, "rb") as fh:
                self.assertNotIn(SECRET.encode(), fh.read())

    def test_7_sigterm_drains_and_leaves_no_turnserver(self):
        pids = [r["pid"] for r in self.last()["relays"] if r["pid"]]
        self.assertEqual(len(pids), 2)
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        wait_for("URIs emptied", lambda: self.uris() == [], 5)
        self.assertTrue(all(alive(p) for p in pids))  # emptied before the relays stop
        rc = self.proc.wait(timeout=30)
        self.assertEqual(rc, 0)
        self.assertGreaterEqual(time.monotonic() - t0, 3.0)  # held allocations: waited for drainTimeout
        self.lines()
        for pid in self.pids_seen:
            self.assertFalse(alive(pid), pid)
        out = subprocess.run(["pgrep", "-f", self.state], capture_output=True, text=True).stdout
        self.assertEqual(out.strip(), "")
        st = self.status()
        self.assertEqual((st["readyRelays"], st["relays"]), (0, []))
        ready = {c["type"]: c for c in st["conditions"]}["Ready"]
        self.assertEqual((ready["status"], ready["reason"]), ("False", "Stopped"))  # a stopped fleet is not Ready

    def test_8_no_coturn_complained_about_its_config(self):
        logs = os.path.join(self.state, "logs")
        names = os.listdir(logs)
        self.assertTrue(names)
        for name in names:
            with open(os.path.join(logs, name), errors="replace") as f:
                for line in f:
                    for bad in ("Bad configuration format", "ERROR", "unrecognized option"):
                        self.assertNotIn(bad, line, "%s: %s" % (name, line))


if __name__ == "__main__":
    TURNFLEET, TURNFLEET_PROBE = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
