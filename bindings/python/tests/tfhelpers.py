"""Shared by the Python tests: where things are, vectors, and real turnserver processes.

The coturn relays are rendered through the bindings (render_coturn) and run on
loopback addresses 127.0.0.71-79, listener ports 3600-3699 and relay ranges in
59000-59999 (no other suite uses them). Each is stopped by its PID.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import turnfleet

SECRET = "python-suite-shared-secret"
REALM = "turnfleet.test"
# under valgrind everything is slower: longer probe deadlines, fewer repetitions
VALGRIND = os.environ.get("TF_PY_VALGRIND") == "1"
PROBE_TIMEOUT = 20.0 if VALGRIND else 5.0


def env_path(name):
    v = os.environ.get(name)
    if not v:
        raise unittest.SkipTest(f"{name} is not set (run through ctest)")
    return v


def data(*parts):
    """A file under tests/data (TF_TEST_DATA)."""
    return os.path.join(env_path("TF_TEST_DATA"), *parts)


def source(*parts):
    """A file of the source tree (TF_SOURCE_DIR)."""
    return os.path.join(env_path("TF_SOURCE_DIR"), *parts)


def tool(name):
    """A tool of the build tree (TF_BUILD_DIR): "turnfleet" or "turnfleet-probe"."""
    path = os.path.join(env_path("TF_BUILD_DIR"), "tools", name, name)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} is not built")
    return path


def vectors(name):
    """The records of tests/data/vectors/<name> (comments and blank lines skipped)."""
    out = []
    with open(data("vectors", name), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(json.loads(line))
    return out


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def run_cli(*args, check=True):
    """Run the turnfleet CLI; returns its stdout."""
    p = subprocess.run([tool("turnfleet"), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"turnfleet {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.stdout


def private_file(directory, name, text):
    """Write a 0600 file (secrets, configs) and return its path."""
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


# ---- coturn ----


# The coturn the tests run: $TF_TEST_TURNSERVER (ctest also registers the
# coturn suites with tools/dev/turnserver-rootfs, coturn 4.18), else Debian's.
TURNSERVER = os.environ.get("TF_TEST_TURNSERVER") or "turnserver"


def turnserver_version():
    """The coturn's version text ("4.6.1"); fails loudly without it or when it is not $TF_TEST_COTURN_VERSION."""
    if shutil.which(TURNSERVER) is None:
        raise AssertionError(f"{TURNSERVER} not found: install coturn (tools/dev/install-deps.sh)")
    out = subprocess.run([TURNSERVER, "--version"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        line = line.strip()
        try:
            turnfleet.coturn_version(line)
        except turnfleet.Error:
            continue
        want = os.environ.get("TF_TEST_COTURN_VERSION")
        if want and want.split(".")[:2] != line.split(".")[:2]:
            raise AssertionError(f"{TURNSERVER} is coturn {line}, not the {want} this suite is registered for")
        return line
    raise AssertionError(f"{TURNSERVER} --version printed no version: {out!r}")


def one_node(addr):
    """A NodeList of one eligible node at @p addr."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "metadata": {
                        "name": "py-node",
                        # a loopback address relays only on a development node
                        "labels": {
                            "turnfleet.hzmi.dev/relay-node": "true",
                            "node-restriction.kubernetes.io/turnfleet-development": "true",
                        },
                    },
                    "status": {
                        "addresses": [{"type": "InternalIP", "address": addr}],
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                }
            ],
        }
    )


def relay_pool(name, port, start, end):
    """A one-relay HostNetwork pool: udp and tcp on @p port, relay range start-end."""
    return f"""apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: {name}}}
spec:
  addressing: {{mode: HostNetwork, family: IPv4}}
  relayPortRange: {{start: {start}, end: {end}}}
  listeners:
    - {{name: turn, protocol: udp, port: {port}}}
    - {{name: turn-tcp, protocol: tcp, port: {port}}}
  auth: {{realm: {REALM}, secretRef: {{name: py-secret}}}}
"""


def _proc_net_has(addr, port, tcp):
    """Whether /proc/net/{udp,tcp} holds a socket bound to addr:port (TCP: listening)."""
    want = "%08X:%04X" % (int.from_bytes(socket.inet_aton(addr), sys.byteorder), port)
    with open("/proc/net/tcp" if tcp else "/proc/net/udp") as f:
        next(f)
        for line in f:
            cols = line.split()
            if cols[1] == want and (not tcp or cols[3] == "0A"):
                return True
    return False


class Relay:
    """A turnserver serving one relay, rendered through the bindings. Stop by PID with stop()."""

    def __init__(self, addr, port, start, end, name="py", allow_loopback_peers=True):
        self.addr, self.port, self.range = addr, port, (start, end)
        self.version = turnserver_version()
        self.dir = tempfile.mkdtemp(prefix="tf-py-coturn-")
        self.proc = None
        with turnfleet.Pool.from_yaml(relay_pool(name, port, start, end)) as pool, turnfleet.Nodes.from_json(
            one_node(addr)
        ) as nodes, turnfleet.plan(pool, nodes) as plan:
            relay = plan.relays[0]
            self.name = relay.name
            state = os.path.join(self.dir, "state")
            os.makedirs(os.path.join(state, relay.name), mode=0o700)
            self.log = os.path.join(self.dir, "turn.log")
            conf = turnfleet.render_coturn(
                pool,
                plan,
                relay.name,
                SECRET,
                coturn_version=self.version,
                state_dir=state,
                log_file=self.log,
                allow_loopback_peers=allow_loopback_peers,
            )
        self.conf = private_file(self.dir, "turnserver.conf", conf)
        self.out = os.path.join(self.dir, "stdout.log")
        with open(self.out, "wb") as out:
            # the secret is in the 0600 config, never in argv
            self.proc = subprocess.Popen(
                [TURNSERVER, "-c", self.conf], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 15
        while not (_proc_net_has(addr, port, False) and _proc_net_has(addr, port, True)):
            if self.proc.poll() is not None:
                text = read(self.out)
                self.stop()
                raise AssertionError(f"turnserver exited early ({self.proc.returncode}):\n{text}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"turnserver did not open {addr}:{port} within 15 s")
            time.sleep(0.02)

    def uri(self, transport="udp"):
        return f"turn:{self.addr}:{self.port}?transport={transport}"

    def stop(self):
        """SIGTERM by PID, then SIGKILL after 15 s; removes the working directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
