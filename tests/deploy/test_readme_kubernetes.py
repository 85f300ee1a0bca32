#!/usr/bin/env python3
"""The README's "On Kubernetes" block, run as a user would run it, on the Kubernetes API stand-in.

    test_readme_kubernetes.py BUILD_DIR [README]

The ```sh block under "## On Kubernetes" is read from README.md (or README) when the test runs,
never copied here, and each of its lines is run in turn by bash (-e -o pipefail; a line ending in a
backslash continues on the next), from the source directory, with the real kubectl of the other
deploy tests (Debian unstable's, tests/kube/clients.sh). Every line must exit 0. The block is run
as written, with no text replaced; what stands in for a user's machine and cluster instead:

- `kubectl` on PATH is that kubectl, KUBECONFIG the stand-in's, HOME a scratch directory (its
  discovery cache); the relative paths (`deploy/default`, `deploy/samples/…`) are the source
  directory's;
- the cluster is the stand-in (tests/kube/cluster.py) with three unlabelled nodes and no
  control-plane node, each in its own network namespace (--node-netns); its image map runs the
  operator's image (`turnfleet:*`) from the project's image root (BUILD_DIR/image-root, ctest
  image_rootfs) and the sample's `coturn/coturn:4.18.0` from the Debian unstable root (real
  coturn 4.18, the version the sample renders for).

Then the block must have ended where the README says it does: the sample's pool turn/edge Ready,
its 3 relay pods READY (allocate-ready gate) on 3 nodes, the turn-uris ConfigMap publishing a UDP
URI per relay, and a client (turnfleet-probe, with the Secret the block made) allocating on each.
Then the stand-in is stopped and nothing it ran is left: no process, no network namespace.

Addresses: the stand-in on 127.0.14.1:34443 (control 34444), nodes n1-n3 on 127.0.14.11-13. The
pods' ports (the operator's :8080, the relays' 3478 and 49152-65535, agents, coturn CLIs) are the
sample's and deploy/'s, bound inside the nodes' own network namespaces only."""
import base64
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "webhook"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kube"))
import harness  # noqa: E402
import proctree  # noqa: E402
from standin import netns  # noqa: E402

SOURCE = harness.SOURCE
API_ADDR, API_PORT = "127.0.14.1", 34443
NODES = [("n1", "127.0.14.11"), ("n2", "127.0.14.12"), ("n3", "127.0.14.13")]
NS, POOL, REPLICAS = "turn", "edge", 3   # deploy/samples/pool-hostnetwork.yaml
expect = harness.expect


def readme_block(path, heading="## On Kubernetes"):
    """The commands of the first ```sh block after @p heading, continuation lines joined."""
    lines = open(path).read().splitlines()
    if heading not in lines:
        raise AssertionError("%s: no %r section" % (path, heading))
    i = lines.index(heading) + 1
    while i < len(lines) and not lines[i].startswith("## ") and lines[i].strip() != "```sh":
        i += 1
    if i == len(lines) or lines[i].strip() != "```sh":
        raise AssertionError("%s: no ```sh block under %r" % (path, heading))
    cmds, cur = [], ""
    for line in lines[i + 1:]:
        if line.strip() == "```":
            break
        cur += line[:-1] + "\n" if line.endswith("\\") else line
        if not line.endswith("\\"):
            if cur.strip():
                cmds.append(cur)
            cur = ""
    else:
        raise AssertionError("%s: the ```sh block under %r is not closed" % (path, heading))
    return cmds


def main():
    build = os.path.abspath(sys.argv[1])
    readme = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(SOURCE, "README.md")
    image = os.path.join(build, "image-root")
    if not os.path.exists(os.path.join(image, "usr", "local", "bin", "turnfleet-operator")):
        raise AssertionError("no image root with turnfleet-operator at %s (ctest image_rootfs builds it)" % image)
    probe = os.path.join(build, "tools", "turnfleet-probe", "turnfleet-probe")
    block = readme_block(readme)
    expect(any(c.startswith("kubectl ") for c in block), "%s: the Kubernetes block has %d commands" % (readme, len(block)),
           "\n".join(block))

    tmp = harness.tmpdir("tf-readme-k8s-")
    ok, cluster, kids = False, None, {}
    try:
        cluster = harness.Cluster(tmp, build=build, images=["*turnfleet*=" + image], netns=True, address=API_ADDR,
                                  port=API_PORT, nodes=NODES, relay_label=False)
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        os.symlink(harness.KUBECTL, os.path.join(bindir, "kubectl"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
                   KUBECONFIG=cluster.kubeconfig, HOME=cluster.home)
        try:
            for cmd in block:
                p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=SOURCE, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=600)
                sys.stdout.write(p.stdout)
                expect(p.returncode == 0, "$ %s" % cmd.strip(), "exit %d" % p.returncode)

            pool = json.loads(cluster.kubectl("get", "turnpool", POOL, "-o", "json", ns=NS).stdout)
            conds = {c["type"]: c for c in (pool.get("status") or {}).get("conditions") or []}
            expect(conds.get("Ready", {}).get("status") == "True", "the pool %s/%s is Ready" % (NS, POOL),
                   json.dumps(pool.get("status")))
            pods = json.loads(cluster.kubectl("get", "pods", "-l", "turnfleet.hzmi.dev/pool=" + POOL, "-o", "json",
                                              ns=NS).stdout)["items"]
            gates = ("Ready", "turnfleet.hzmi.dev/allocate-ready")
            ready = [p for p in pods if all({c["type"]: c["status"] for c in p["status"].get("conditions", [])}.get(g) == "True"
                                            for g in gates)]
            expect(len(pods) == REPLICAS and len(ready) == REPLICAS and
                   len({p["spec"].get("nodeName") for p in pods}) == REPLICAS,
                   "%d relay pods READY through their allocate-ready gate, one per node" % REPLICAS,
                   " ".join("%s@%s" % (p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods))
            cm = json.loads(cluster.kubectl("get", "configmap", POOL + "-turn-uris", "-o", "json", ns=NS).stdout)
            udp = [u for u in cm.get("data", {}).get("uris", "").split() if "transport=udp" in u]
            addrs = {a for _, a in NODES}
            expect(len(udp) == REPLICAS and {u.split(":")[1] for u in udp} == addrs,
                   "turn-uris publishes a UDP URI on each node's address", " ".join(udp))
            secret = json.loads(cluster.kubectl("get", "secret", "turn-shared-secret", "-o", "json", ns=NS).stdout)
            secret_file = os.path.join(tmp, "secret")
            with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(base64.b64decode(secret["data"]["secret"]))
            for uri in udp:
                r = subprocess.run([probe, "--uri", uri, "--secret-file", secret_file, "--timeout-ms", "3000"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
                expect(r.returncode == 0, "a client allocates on %s" % uri, r.stdout)
            ok = True
        finally:
            if not ok:
                for args in (("get", "turnpools,pods", "-A", "-o", "wide"), ("get", "turnpools", "-A", "-o", "yaml"),
                             ("get", "events", "-A")):
                    sys.stderr.write(cluster.kubectl(*args, check=False).stdout[-6000:])
                for p in json.loads(cluster.kubectl("get", "pods", "-o", "json", ns="turnfleet-system",
                                                    check=False).stdout or '{"items": []}')["items"]:
                    sys.stderr.write(cluster.kubectl("logs", p["metadata"]["name"], ns="turnfleet-system",
                                                     check=False).stdout[-3000:])
        ok = False
        kids = proctree.descendants(cluster.proc.pid)
        cluster.stop()
        expect(cluster.proc.returncode == 0, "the stand-in stopped (exit 0)", open(cluster.log_path).read()[-3000:])
        left = ["%d %s" % (pid, cmd) for pid, state, cmd in proctree.running(kids) if state != "Z"]
        expect(not left, "the stand-in's %d processes (operator, relays, kubelets) all gone" % len(kids), "\n".join(left))
        prefix = netns.prefix_for(API_ADDR, API_PORT)
        spaces = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True, check=True).stdout
        links = subprocess.run(["ip", "-o", "link"], stdout=subprocess.PIPE, text=True, check=True).stdout
        expect(prefix not in spaces and prefix not in links, "no network namespace or link %s* left" % prefix,
               spaces + links)
        ok = True
    finally:
        harness.finish(tmp, ok, cluster)


if __name__ == "__main__":
    main()
