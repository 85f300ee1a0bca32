#!/usr/bin/env python3
"""Start the Kubernetes API stand-in and one process kubelet per node.

  python3 tests/kube/cluster.py --dir DIR --node NAME=ADDR[,ADDR...] [--node ...]
      [--image PATTERN=ROOT ...] [--address 127.0.0.200] [--port 16443]

Writes DIR/ca.crt, DIR/kubeconfig (admin token), DIR/token, DIR/control (the
control endpoint's URL) and, last, DIR/ready; runs until SIGTERM/SIGINT, then
stops every pod gracefully, removes DIR/ready and exits, leaving no process
(and, with --node-netns, no namespace, link or route). See tests/kube/README.md."""
import argparse
import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "standin"))

import api  # noqa: E402
import kubelet  # noqa: E402
import netns  # noqa: E402
import server  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(HERE))
# the label that lets a node's loopback addresses host relays (TF_LABEL_DEVELOPMENT)
DEVELOPMENT = "node-restriction.kubernetes.io/turnfleet-development"


def make_certs(d, ips):
    """A CA and a server certificate for the API (IP SANs), with openssl."""
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, x) for x in ("apiserver.key", "apiserver.csr", "apiserver.crt"))
    ext = os.path.join(d, "apiserver.ext")

    def run(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", ca_key, "-out", ca_crt, "-days", "30", "-subj", "/CN=turnfleet-standin-ca",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=kube-apiserver")
    sans = ["IP:%s" % ip for ip in ips] + ["DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
                                           "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"]
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n" % ",".join(sans))
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "30", "-extfile", ext)
    return ca_crt, crt, key


def default_images(build):
    """The documented image map after the --image entries."""
    rootfs = None
    try:
        p = subprocess.run([os.path.join(SOURCE, "tools", "dev", "coturn-rootfs.sh"), "--check"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if p.returncode == 0:
            rootfs = p.stdout.strip()
    except OSError:
        pass
    # the build directory itself at its own path, read-only: the binaries' build-tree RUNPATH names it,
    # and a container's fresh /tmp would hide a build that lives under /tmp
    binds = [(os.path.abspath(build), os.path.abspath(build))] if build and os.path.isdir(build) else []
    for rel in ("tools/turnfleet/turnfleet", "tools/turnfleet-probe/turnfleet-probe",
                "tools/turnfleet-probe/turnfleet-probe-vantage", "tools/turnfleet-webhook/turnfleet-webhook",
                "tools/turnfleet-operator/turnfleet-operator"):
        src = os.path.join(build, rel)
        if os.path.exists(src):
            binds.append((src, "/usr/local/bin/" + os.path.basename(rel)))
    out = [("*coturn*:4.6.1", "/", [])]
    if rootfs:
        out += [("*coturn*:4.*", rootfs, []), ("*coturn*", rootfs, [])]
    out += [("*turnfleet*", "/", binds), ("debian*", "/", []), ("*/debian*", "/", []),
            ("busybox*", "/", []), ("*/busybox*", "/", [])]
    return out


def parse_root(v, build):
    if v == "host":
        return "/", []
    if v == "coturn-rootfs":
        p = subprocess.run([os.path.join(SOURCE, "tools", "dev", "coturn-rootfs.sh")], stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit("cluster: no coturn root filesystem")
        return p.stdout.strip(), []
    if v == "host+build":
        return "/", [(s, d) for (_p, r, b) in default_images(build) if _p == "*turnfleet*" for (s, d) in b]
    if not os.path.isdir(v):
        sys.exit("cluster: image root %s is not a directory" % v)
    return os.path.abspath(v), []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--node", action="append", default=[], help="NAME=ADDR[,ADDR...] (first InternalIP, rest ExternalIP)")
    ap.add_argument("--node-label", action="append", default=[], help="NAME:KEY=VALUE")
    ap.add_argument("--node-annotation", action="append", default=[], help="NAME:KEY=VALUE")
    ap.add_argument("--image", action="append", default=[], help="PATTERN=ROOT (host, host+build, coturn-rootfs or a directory)")
    ap.add_argument("--address", default="127.0.0.200")
    ap.add_argument("--port", type=int, default=16443)
    ap.add_argument("--control-port", type=int, default=0, help="default: --port + 1")
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--history", type=int, default=1000, help="watch history length (events)")
    ap.add_argument("--heartbeat", type=float, default=10.0, help="node status interval (s)")
    ap.add_argument("--node-grace", type=float, default=40.0, help="NotReady after this long without a heartbeat (s)")
    ap.add_argument("--restart-backoff", type=float, default=10.0, help="first crash-loop back-off (s), doubling to 300")
    ap.add_argument("--shutdown-grace", type=float, default=30.0, help="cap on a pod's grace period when the cluster stops (s)")
    ap.add_argument("--bookmark-interval", type=float, default=60.0)
    ap.add_argument("--advertise-address", action="append", default=[], metavar="ADDR",
                    help="another API server address the `kubernetes` Endpoints list (as an HA control plane's)")
    ap.add_argument("--node-netns", action="store_true",
                    help="each node its own network namespace holding its addresses (root; see tests/kube/README.md)")
    a = ap.parse_args()

    d = os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    for f in ("ready",):
        try:
            os.unlink(os.path.join(d, f))
        except FileNotFoundError:
            pass
    nodes = []
    for spec in a.node:
        name, _, addrs = spec.partition("=")
        if not name or not addrs:
            sys.exit("cluster: --node wants NAME=ADDR[,ADDR...], got %r" % spec)
        nodes.append((name, addrs.split(",")))
    nets = None
    if a.node_netns:
        try:
            nets = netns.NodeNetworks(a.address, a.port, nodes)
        except netns.NetnsError as e:
            sys.exit("cluster: %s" % e)

    def kv(items):
        out = {}
        for it in items:
            n, _, rest = it.partition(":")
            k, _, v = rest.partition("=")
            out.setdefault(n, {})[k] = v
        return out
    labels, annotations = kv(a.node_label), kv(a.node_annotation)

    images = []
    for it in a.image:
        pat, _, root = it.partition("=")
        r, binds = parse_root(root, a.build)
        images.append((pat, r, binds))
    images += default_images(a.build)

    # from here on a signal asks for the orderly stop (the namespaces removed)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ca, crt, key = make_certs(d, sorted({a.address, "127.0.0.1"}))
    ca_pem = open(ca).read()
    si = server.StandIn(a.address, a.port, crt, key, ca_pem, a.control_port or a.port + 1, a.history)
    si.advertise = a.advertise_address
    si.bookmark_interval = a.bookmark_interval
    si.controllers.node_grace = a.node_grace
    token = secrets.token_urlsafe(32)
    si.auth.add(token, "kubernetes-admin", ["system:masters", "system:authenticated"])
    si.start()
    # the API server holds its address and port now: a namespace of their prefix is a dead run's
    netns.remove(netns.prefix_for(a.address, a.port))
    if nets:
        try:
            nets.start()
        except netns.NetnsError as e:
            si.stop()
            sys.exit("cluster: %s" % e)
    try:
        return run(a, d, si, nodes, images, labels, annotations, ca_pem, token, nets, stop)
    finally:
        if nets:
            nets.remove()


def run(a, d, si, nodes, images, labels, annotations, ca_pem, token, nets, stop):
    kubelets = {}
    imap = kubelet.ImageMap(images)
    for name, addrs in nodes:
        k = kubelet.Kubelet(si, name, addrs, d, imap, labels.get(name), annotations.get(name),
                            heartbeat=a.heartbeat, backoff_base=a.restart_backoff, netns=nets and nets.path(name))
        k.shutdown_grace = a.shutdown_grace
        kubelets[name] = k
        k.start()

    def log_provider(pod, container, q):
        k = kubelets.get(pod["spec"].get("nodeName"))
        return k.log_for(pod, container, q) if k else None
    si.log_provider = log_provider

    def kubelet_control(node, action):
        k = kubelets.get(node)
        if k is None:
            return False
        if action == "stop":
            k.paused.set()
        elif action == "start":
            k.paused.clear()
        else:
            return False
        return True
    si.kubelet_control = kubelet_control

    kc = {"apiVersion": "v1", "kind": "Config", "current-context": "standin",
          "clusters": [{"name": "standin", "cluster": {"server": si.url, "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode()}}],
          "users": [{"name": "admin", "user": {"token": token}}],
          "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "admin", "namespace": "default"}}]}
    with open(os.path.join(d, "kubeconfig"), "w") as f:
        json.dump(kc, f, indent=1)
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token)
    with open(os.path.join(d, "control"), "w") as f:
        f.write("http://%s:%d\n" % (a.address, a.control_port or a.port + 1))

    # the nodes are registered before the cluster says it is ready
    for k in kubelets.values():
        while not stop.is_set() and si.store.get(("", "nodes"), "", k.name) is None:
            stop.wait(0.05)
    # then, as the cluster's administrator, marked as development nodes: every address here is a
    # loopback one, which the planner takes only on such a node (a kubelet cannot set a
    # node-restriction.kubernetes.io/ label on its own Node)
    node_type = si.store.type_for("", "v1", "nodes")
    for k in kubelets.values():
        if stop.is_set():
            break
        si.registry.update(node_type, "", k.name, None, api.Context(), patcher=lambda cur: dict(
            cur, metadata=dict(cur["metadata"], labels=dict(cur["metadata"].get("labels") or {}, **{DEVELOPMENT: "true"}))))
    with open(os.path.join(d, "ready.tmp"), "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(os.path.join(d, "ready.tmp"), os.path.join(d, "ready"))
    while not stop.wait(1.0):
        pass
    ths = [threading.Thread(target=k.stop) for k in kubelets.values()]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    si.stop()
    try:
        os.unlink(os.path.join(d, "ready"))
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
