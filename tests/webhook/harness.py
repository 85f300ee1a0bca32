"""Shared by the webhook and vantage tests: the Kubernetes API stand-in on
127.0.0.250:16700 (control 16701) with nodes n1-n3 (127.0.0.251-253), test
certificates made with openssl, kubectl with a private cache, processes
stopped by PID. Python standard library only."""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
API_ADDR, API_PORT = "127.0.0.250", 16700
NODES = [("n1", "127.0.0.251"), ("n2", "127.0.0.252"), ("n3", "127.0.0.253")]
RELAY_LABEL = "turnfleet.hzmi.dev/relay-node"


def _kubectl():
    """TF_TEST_KUBECTL, else the newest kubectl the test setup provides (Debian unstable's, from the root
    filesystem tests/kube/clients.sh names): a fresh machine need not have one of its own."""
    if os.environ.get("TF_TEST_KUBECTL"):
        return os.environ["TF_TEST_KUBECTL"]
    p = subprocess.run([os.path.join(SOURCE, "tests", "kube", "clients.sh")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    found = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    if p.returncode != 0 or "kubectl-rootfs" not in found:
        raise AssertionError("no kubectl: tests/kube/clients.sh failed: %s" % p.stderr.strip())
    return found["kubectl-rootfs"]


KUBECTL = _kubectl()


def wait_for(what, cond, timeout=30.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(step)
    raise AssertionError("timed out waiting for %s" % what)


def openssl(*args):
    subprocess.run(("openssl",) + args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(d, name="turnfleet-test-ca"):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=" + name,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def make_cert(d, ca, name, sans, cn="turnfleet-webhook"):
    """A server certificate for @p sans (e.g. ["IP:127.0.0.250"]), signed by @p ca; (key, cert) paths."""
    key, csr, crt, ext = (os.path.join(d, name + x) for x in (".key", ".csr", ".crt", ".ext"))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n" % ",".join(sans))
    openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
            "-out", crt, "-days", "2", "-extfile", ext)
    return key, crt


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


class Cluster:
    """The stand-in with three nodes (@p nodes), labelled relay nodes unless @p relay_label is false;
    stop() ends it by PID."""

    def __init__(self, tmp, build=None, images=(), port=API_PORT, netns=False, address=API_ADDR, nodes=NODES,
                 relay_label=True):
        self.dir = os.path.join(tmp, "cluster")
        self.home = os.path.join(tmp, "kubectl-home")
        os.makedirs(self.home, exist_ok=True)
        cmd = [sys.executable, os.path.join(SOURCE, "tests", "kube", "cluster.py"), "--dir", self.dir,
               "--address", address, "--port", str(port), "--heartbeat", "2", "--shutdown-grace", "3"]
        for name, addr in nodes:
            cmd += ["--node", "%s=%s" % (name, addr)]
            if relay_label:
                cmd += ["--node-label", "%s:%s=true" % (name, RELAY_LABEL)]
        if build:
            cmd += ["--build", build]
        if netns:
            cmd += ["--node-netns"]   # each node its own network namespace (tests/kube/README.md)
        for im in images:
            cmd += ["--image", im]
        self.log_path = os.path.join(tmp, "cluster.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for("the stand-in's ready marker",
                     lambda: os.path.exists(os.path.join(self.dir, "ready")) or self.proc.poll() is not None, 300)
        except AssertionError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise AssertionError("cluster.py exited: %s" % open(self.log_path).read()[-3000:])
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")

    def kubectl(self, *args, check=True, input=None, ns=None, timeout=60):
        cmd = [KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", os.path.join(self.home, "cache")]
        if ns:
            cmd += ["-n", ns]
        env = dict(os.environ, HOME=self.home)
        p = subprocess.run(cmd + list(args), input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError("kubectl %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def apply(self, obj, check=True, ns=None):
        return self.kubectl("apply", "-f", "-", input=json.dumps(obj) if not isinstance(obj, str) else obj,
                            check=check, ns=ns)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def stop_process(p, grace=10):
    """SIGTERM, then SIGKILL after @p grace seconds; returns the exit status."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def pool(name, replicas=2, ns="default", **spec):
    """A TURNPool object: HostNetwork on the relay nodes unless @p spec says otherwise."""
    s = {"replicas": replicas,
         "relayPortRange": {"start": 50000, "end": 50099},
         "auth": {"realm": "webhook.turnfleet.test", "secretRef": {"name": name + "-secret"}}}
    s.update(spec)
    return {"apiVersion": "turnfleet.hzmi.dev/v1alpha1", "kind": "TURNPool",
            "metadata": {"name": name, "namespace": ns}, "spec": s}


def expect(cond, what, detail=""):
    """A check of the run: fail naming @p what (and @p detail), or print "ok - what"."""
    if not cond:
        raise AssertionError("%s%s" % (what, (": " + detail) if detail else ""))
    print("ok -", what)


def finish(tmp, ok, cluster=None):
    """The end of a run: the stand-in stopped by PID; the scratch directory removed, or kept after a failure."""
    if cluster:
        cluster.stop()
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        sys.stderr.write("kept %s\n" % tmp)


def tmpdir(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    return d
