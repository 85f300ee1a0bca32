"""What the turnfleet-issuer tests share: a `turnfleet up` fleet of real coturn relays on loopback and
a turnfleet-issuer on its state directory, each started here and stopped by its PID.

Each test module passes its own addresses (127.0.6.x) and ports (26000-26999), so they run side by side.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BUILD = os.environ.get("TF_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
TURNFLEET = os.path.join(BUILD, "tools", "turnfleet", "turnfleet")
ISSUER = os.path.join(BUILD, "tools", "turnfleet-issuer", "turnfleet-issuer")
TURNSERVER = os.environ.get("TF_TEST_TURNSERVER") or "turnserver"
VERSION = os.environ.get("TF_TEST_COTURN_VERSION") or "4.6.1"
SECRET = "issuer-e2e-secret-51c2"
TOKEN = "issuer-e2e-token-9d0b"

POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  dataplane: {{coturnVersion: "{version}"}}
  relayPortRange: {{start: {start}, end: {end}}}
  listeners:
    - {{name: turn, protocol: udp, port: {port}}}
    - {{name: turn-tcp, protocol: tcp, port: {port}}}
  auth: {{realm: issuer.test, secretRef: {{name: s}}}}
  drainTimeout: {drain}
"""


def wait_for(what, cond, timeout):
    """Poll @p cond until it returns something true; fail naming @p what at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def get(url, headers=None, method="GET"):
    """(status, headers, body) of one request; HTTP errors are answers too."""
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


class Fleet:
    def __init__(self, name, addresses, port, relay_start, relay_end, metrics, cli_port, issuer_listen,
                 replicas=2, issuer_args=(), drain="10s"):
        self.name, self.addresses, self.port = name, addresses, port
        self.relay_range = (relay_start, relay_end)
        self.replicas, self.drain = replicas, drain
        self.metrics, self.cli_port = metrics, cli_port
        self.issuer_listen = issuer_listen
        self.issuer_url = "http://" + issuer_listen
        self.issuer_args = list(issuer_args)
        self.dir = tempfile.mkdtemp(prefix="tf-issuer-")
        self.state = os.path.join(self.dir, "state")
        self.pool = os.path.join(self.dir, "pool.yaml")
        self.secret = os.path.join(self.dir, "secret")
        self.tokens = os.path.join(self.dir, "tokens")
        self.up = self.issuer = None
        self.up_log = open(os.path.join(self.dir, "up.log"), "w+")
        self.issuer_log = open(os.path.join(self.dir, "issuer.log"), "w+")
        self.relay_pids = set()

    def write_pool(self, replicas):
        text = POOL.format(name=self.name, replicas=replicas, version=VERSION, start=self.relay_range[0],
                           end=self.relay_range[1], port=self.port, drain=self.drain)
        with open(self.pool + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.pool + ".tmp", self.pool)
        st = os.stat(self.pool)
        os.utime(self.pool, ns=(st.st_atime_ns, st.st_mtime_ns + 1000000))

    def write_tokens(self, *tokens):
        with open(self.tokens + ".tmp", "w") as f:
            f.write("# issuer test tokens\n" + "".join(t + "\n" for t in tokens))
        os.chmod(self.tokens + ".tmp", 0o600)
        os.replace(self.tokens + ".tmp", self.tokens)

    def start(self):
        for p in (TURNFLEET, ISSUER):
            if not os.access(p, os.X_OK):
                raise AssertionError("not built: " + p)
        with open(self.secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(self.secret, 0o600)
        self.write_tokens(TOKEN)
        self.write_pool(self.replicas)
        # coturn refuses loopback peers unless told: these fleets relay between two peers on loopback
        self.up = subprocess.Popen(
            [TURNFLEET, "up", "-f", self.pool, "--secret-file", self.secret, "--addresses", self.addresses,
             "--state-dir", self.state, "--metrics-addr", self.metrics, "--probe-interval", "0.5",
             "--cli-port", str(self.cli_port), "--turnserver", TURNSERVER, "--allow-loopback-peers", "--json"],
            stdout=self.up_log, stderr=subprocess.STDOUT)
        self.issuer = subprocess.Popen(
            [ISSUER, "--listen", self.issuer_listen, "--state-dir", self.state, "--secret-file", self.secret,
             "--pool", self.name, "--tokens-file", self.tokens] + self.issuer_args,
            stdout=self.issuer_log, stderr=subprocess.STDOUT)
        wait_for("%d ready relays" % self.replicas, lambda: self.ready_relays() == self.replicas, 60)
        wait_for("the issuer to be ready", lambda: self.alive() and get(self.issuer_url + "/readyz")[0] == 200, 20)

    def alive(self):
        for p, what in ((self.up, "turnfleet up"), (self.issuer, "turnfleet-issuer")):
            if p.poll() is not None:
                raise AssertionError("%s exited with %s:\n%s" % (what, p.returncode, self.logs()))
        return True

    def status(self):
        try:
            with open(os.path.join(self.state, "status.json")) as f:
                st = json.load(f)
        except (OSError, ValueError):
            return None
        return st

    def ready_relays(self):
        self.alive()
        st = self.status()
        if not st:
            return 0
        for r in st.get("relays", []):
            if r.get("pid"):
                self.relay_pids.add(r["pid"])
        return sum(1 for r in st["relays"] if r["ready"] and not r["draining"])

    def relays(self):
        """name -> relayAddress of the relays in the status."""
        return {r["name"]: r["relayAddress"] for r in (self.status() or {}).get("relays", [])}

    def ice(self, user, token=TOKEN, extra=""):
        return get("%s/ice?pool=%s&user=%s%s" % (self.issuer_url, self.name, user, extra),
                   {"Authorization": "Bearer " + token} if token else {})

    def logs(self):
        out = []
        for f in (self.up_log, self.issuer_log):
            f.flush()
            with open(f.name) as g:
                out.append(g.read()[-4000:])
        return "\n---\n".join(out)

    def stop(self):
        for p in (self.issuer, self.up):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (self.issuer, self.up):
            if p:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()  # up's relays die with it (PR_SET_PDEATHSIG)
                    p.wait()
        for pid in self.relay_pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            os.kill(pid, signal.SIGKILL)
        self.up_log.close()
        self.issuer_log.close()
        if os.environ.get("TF_KEEP_TMP"):
            print("kept", self.dir, file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
