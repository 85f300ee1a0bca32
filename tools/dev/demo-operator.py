#!/usr/bin/env python3
"""make demo-operator: turnfleet-operator on the local Kubernetes stand-in.

usage: python3 tools/dev/demo-operator.py BUILD_DIR [COTURN_VERSION]

The cluster is tests/kube's stand-in (an API server and process kubelets on
loopback: 127.0.0.240-243), not a real cluster; the relays are real coturn
processes. It applies deploy/crd and deploy/rbac with kubectl, runs the
operator with its ServiceAccount's token, creates a pool of three relays,
shows them proven and published, allocates through each, holds an
allocation, scales to two (the relay with the fewest allocations drains:
its URI goes first, its pod stays while the allocation is held), releases
it, then a browser call: turnfleet-issuer reads the pool through its
informers and headless Chromium carries a relay-only data channel through
each remaining relay; deletes the pool, and stops everything it started.
Needs root (namespaces, mounts). Reuses the end-to-end suite's helpers.

The addresses and ports can be moved (to share a machine): TF_DEMO_API_ADDR
(127.0.0.240), TF_DEMO_API_PORT (16600; the operator's metrics take +10 and
+11), TF_DEMO_NODES (127.0.0.241,127.0.0.242,127.0.0.243), TF_DEMO_TURN_PORT
(3478), TF_DEMO_RELAY_START (61000), TF_DEMO_CLI_PORT (15800),
TF_DEMO_AGENT_PORT (9700), TF_DEMO_HTTP (127.0.0.1) and TF_DEMO_HTTP_PORT
(9660; the page takes +1) for the issuer and the browser's page."""
import json
import os
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "tests", "operator"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "dev"))
import test_operator_e2e as e2e  # noqa: E402
from browser_call import PageServer, check, page_url, run_chromium  # noqa: E402

ENV = os.environ.get
e2e.API_ADDR, e2e.API_PORT = ENV("TF_DEMO_API_ADDR", e2e.API_ADDR), int(ENV("TF_DEMO_API_PORT", e2e.API_PORT))
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 10), "%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 11)]
if ENV("TF_DEMO_NODES"):
    e2e.NODES = [("n%d" % (i + 1), a) for i, a in enumerate(ENV("TF_DEMO_NODES").split(","))]
TURN_PORT = int(ENV("TF_DEMO_TURN_PORT", "3478"))
RELAY_START = int(ENV("TF_DEMO_RELAY_START", "61000"))
CLI_PORT, AGENT_PORT = ENV("TF_DEMO_CLI_PORT", "15800"), ENV("TF_DEMO_AGENT_PORT", "9700")
HTTP, HTTP_PORT = ENV("TF_DEMO_HTTP", "127.0.0.1"), int(ENV("TF_DEMO_HTTP_PORT", "9660"))


def say(text):
    print("\n\033[1m== %s\033[0m" % text if sys.stdout.isatty() else "\n== %s" % text, flush=True)


def show(*args):
    print("$ kubectl " + " ".join(args), flush=True)
    print(e2e.kubectl(*args).stdout.rstrip(), flush=True)


def browser_call(issuer_bin):
    """turnfleet-issuer on its ServiceAccount (deploy/issuer's read-only RBAC) and its informers; headless
    Chromium asks it and calls through each relay. (issuer, page server) for the caller to stop."""
    say("a browser call: turnfleet-issuer (informers, read-only RBAC) answers, headless Chromium calls through each relay")
    for f in ("deploy/issuer/serviceaccount.yaml", "deploy/issuer/rbac.yaml"):
        e2e.kubectl("apply", "-f", os.path.join(SOURCE, f))
    token = e2e.kubectl("create", "token", "-n", "turnfleet-system", "turnfleet-issuer", "--duration=1h").stdout.strip()
    with open(os.path.join(e2e.TMP, "cluster", "kubeconfig")) as f:
        kc = json.load(f)
    kc["users"] = [{"name": "issuer", "user": {"token": token}}]
    kc["contexts"][0]["context"]["user"] = "issuer"
    kcp, tokens = os.path.join(e2e.TMP, "issuer.kubeconfig"), os.path.join(e2e.TMP, "issuer-tokens")
    with open(kcp, "w") as f:
        json.dump(kc, f)
    bearer = os.urandom(18).hex()
    with open(tokens, "w") as f:
        f.write(bearer + "\n")
    for p in (kcp, tokens):
        os.chmod(p, 0o600)
    listen, origin = "%s:%d" % (HTTP, HTTP_PORT), "%s:%d" % (HTTP, HTTP_PORT + 1)
    log = open(os.path.join(e2e.TMP, "issuer.log"), "wb")
    issuer = subprocess.Popen([issuer_bin, "--listen", listen, "--kubeconfig", kcp, "--namespace", e2e.NS,
                               "--tokens-file", tokens, "--cors-origin", "http://" + origin, "--max-relays", "2"],
                              stdout=log, stderr=subprocess.STDOUT)
    log.close()
    e2e.wait_for("the issuer", lambda: issuer.poll() is not None or subprocess.run(
        ["curl", "-sf", "http://%s/readyz" % listen], stdout=subprocess.DEVNULL).returncode == 0, 30)
    out = subprocess.run(["curl", "-s", "-H", "Authorization: Bearer " + bearer,
                          "http://%s/ice?pool=%s&user=demo-browser" % (listen, e2e.POOL)], capture_output=True, text=True)
    answer = json.loads(out.stdout)
    for s in answer["iceServers"]:
        s["credential"] = s["credential"][:6] + "..."
    print("GET /ice?pool=%s&user=demo-browser (the credential shortened):\n%s" % (e2e.POOL, json.dumps(answer, indent=1)),
          flush=True)
    page = PageServer(origin)
    profile = tempfile.mkdtemp(prefix="demo-chromium-", dir=e2e.TMP)
    result = run_chromium(page_url(origin, "http://" + listen, e2e.POOL, "demo-browser", bearer), profile,
                          lambda: page.results, 120)[0]
    for c in result.get("calls", []):
        print("  %s: %r arrived; relayed candidates %s:%s <-> %s:%s" % (
            c["urls"][0], c["received"], c["local"]["address"], c["local"]["port"], c["remote"]["address"],
            c["remote"]["port"]), flush=True)
    problems = check(result, 2)
    if problems:
        raise SystemExit("demo-operator: the browser call failed: %s" % "; ".join(problems))
    print("  relay-only: every message crossed its relay", flush=True)
    return issuer, page


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    e2e.BUILD = os.path.abspath(sys.argv[1])
    e2e.VERSION = sys.argv[2] if len(sys.argv) > 2 else "4.6.1"
    e2e.OPERATOR = os.path.join(e2e.BUILD, "tools", "turnfleet-operator", "turnfleet-operator")
    e2e.PROBE = os.path.join(e2e.BUILD, "tools", "turnfleet-probe", "turnfleet-probe")
    for f in (e2e.OPERATOR, e2e.PROBE):
        if not os.access(f, os.X_OK):
            sys.exit("demo-operator: missing %s (build first)" % f)
    issuer_bin = os.path.join(e2e.BUILD, "tools", "turnfleet-issuer", "turnfleet-issuer")
    if not os.access(issuer_bin, os.X_OK):
        sys.exit("demo-operator: missing %s (build first)" % issuer_bin)
    say("a local Kubernetes stand-in: API server on %s:%d, nodes %s" % (
        e2e.API_ADDR, e2e.API_PORT, ", ".join("%s on %s" % n for n in e2e.NODES)))
    e2e.setUpModule()
    holder = issuer = page = None
    try:
        say("deploy/crd and deploy/rbac applied with kubectl; the operator runs on its ServiceAccount's token")
        # allow-loopback-peers: the browser's two peers, on this host, relay to each other's loopback addresses
        e2e.start_operator("a", "--cli-port", CLI_PORT, "--agent-port", AGENT_PORT, "--allow-loopback-peers")
        e2e.wait_for("the operator", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
        say("a TURNPool of three relays (coturn %s) and its shared secret" % e2e.VERSION)
        e2e.kubectl("create", "secret", "generic", "-n", e2e.NS, e2e.POOL + "-secret",
                    "--from-literal=secret=" + e2e.SECRET1)
        pool = e2e.pool_yaml(e2e.POOL, 3, RELAY_START, RELAY_START + 19).replace("port: 3478}", "port: %d}" % TURN_PORT)
        print(pool)
        e2e.kubectl("apply", "-f", "-", input=pool)
        _, pods, uris = e2e.OperatorE2E("test_01_pool_becomes_ready_and_every_relay_allocates").converged(3)
        say("every relay proven by the operator's own TURN Allocate: READY, and published")
        show("get", "-n", e2e.NS, "turnpools")
        show("get", "-n", e2e.NS, "pods", "-o", "wide")
        show("get", "-n", e2e.NS, "configmap", e2e.POOL + "-turn-uris", "-o", "jsonpath={.data.uris}")
        say("a client allocates through each URI (turnfleet-probe, credentials minted from the secret)")
        for uri in uris:
            code, res = e2e.probe(uri, e2e.SECRET1)
            print("%-40s %s relayed %s:%s" % (uri, "ok" if code == 0 else "FAILED", res.get("relayedAddress"),
                                            res.get("relayedPort")), flush=True)
        pods.sort(key=lambda p: p["metadata"]["name"])
        victim = pods[0]
        name = victim["metadata"]["name"]
        addr = victim["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
        say("hold one allocation on %s (%s); the others hold three each" % (name, addr))
        others = [e2e.hold("turn:%s:%d?transport=udp" % (p["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"],
                                                         TURN_PORT), e2e.SECRET1, 3) for p in pods[1:]]
        holder = e2e.hold("turn:%s:%d?transport=udp" % (addr, TURN_PORT), e2e.SECRET1, 1)
        t = e2e.OperatorE2E("test_02_scale_down_drains_the_relay_with_the_fewest_allocations")
        t.wait_counted({name: 1, pods[1]["metadata"]["name"]: 3, pods[2]["metadata"]["name"]: 3})
        say("kubectl scale turnpool %s --replicas=2: the relay with the fewest allocations drains" % e2e.POOL)
        e2e.kubectl("scale", "-n", e2e.NS, "turnpool", e2e.POOL, "--replicas=2")
        e2e.wait_for("its URI to leave", lambda: not any(addr in u for u in e2e.uris() or []), 30, 0.1)
        print("%s left %s-turn-uris first" % (addr, e2e.POOL), flush=True)
        e2e.wait_for("its pod to be deleted", lambda: all(p["metadata"].get("deletionTimestamp")
                                                          for p in e2e.relay_pods() if p["metadata"]["name"] == name), 30)
        time.sleep(2)
        show("get", "-n", e2e.NS, "pods")
        print("(%s is terminating: its agent's preStop waits for the held allocation)" % name, flush=True)
        say("the client releases its allocation: the pod goes")
        e2e.stop(holder)
        holder = None
        e2e.wait_for("the pod to go", lambda: name not in [p["metadata"]["name"] for p in e2e.relay_pods()], 60)
        for h in others:
            e2e.stop(h)
        show("get", "-n", e2e.NS, "turnpools")
        issuer, page = browser_call(issuer_bin)
        say("kubectl delete turnpool %s: its relays drain first (its finalizer keeps it until they did), then everything it owned goes with it" % e2e.POOL)
        e2e.kubectl("delete", "-n", e2e.NS, "turnpool", e2e.POOL)
        e2e.wait_for("its pods", lambda: not e2e.relay_pods(), 90)
        show("get", "-n", e2e.NS, "pods,configmaps,secrets")
    finally:
        e2e.stop(holder)
        e2e.stop(issuer)
        if page:
            page.stop()
        say("stopping the operator and the stand-in")
        e2e.tearDownModule()
    print("done: nothing left running", flush=True)


if __name__ == "__main__":
    main()
