"""turnfleet-operator's addressing x family x listener matrix, end to end on the stand-in with real coturn.

usage: /usr/bin/python3 tests/operator/test_operator_matrix.py BUILD_DIR COTURN_VERSION

Every cell of the four addressing modes (HostNetwork, ExternalIPPool, PodIP, PartitionedIP) x IPv4, IPv6
and DualStack x udp, tcp and tls listeners that the stand-in can host runs as a TURNPool: one pool per
mode and family, serving all three listener kinds, so the matrix is modes x families pools. The four
modes of one family run at once (their addresses, relay ranges, listener ports and CLI slots are
disjoint); each pool must be Ready with exactly the URIs its relays imply, every URI is proven by
turnfleet-probe in its own family (turns: with --insecure: the certificate is self-signed) with the
relayed address and the relay's port range checked; then the pools are deleted and the test waits
until the pool objects are gone (their drain finalizer lets them go once their relays drained)
before the next family. The cells the stand-in cannot host are listed in NOT_HOSTED, with the reason
(docs/operator.md, "Addressing x family x listener matrix", carries the same list); the first test
checks that every cell is either run or listed there, never skipped silently.

The helpers and the cluster set-up are test_operator_e2e.py's, on addresses of this suite's own:
API 127.0.8.240:28600, control :28601, operator metrics 127.0.8.240:28610, nodes n1-n3 on
127.0.8.241-243 and fd00:8::241-243; ExternalIPPool addresses 127.0.8.11-12 / fd00:8::11-12 (and
decoys outside the pool's prefixes), PodIP addresses 127.0.8.21-22 / fd00:8::21-22; the IPv6
addresses are added to lo for the run and removed after. Ports: listeners 28100-28136, relay ranges
28200-28299, agents 28090-28091, coturn CLIs on 127.0.0.1 28700-28779. Every process is stopped by
its PID."""
import concurrent.futures
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_operator_e2e as e2e  # noqa: E402

e2e.API_ADDR, e2e.API_PORT = "127.0.8.240", 28600
e2e.CONTROL = "http://%s:%d" % (e2e.API_ADDR, e2e.API_PORT + 1)
e2e.NODES = [("n1", "127.0.8.241,fd00:8::241"), ("n2", "127.0.8.242,fd00:8::242"), ("n3", "127.0.8.243,fd00:8::243")]
e2e.NS = "tfmatrix"
e2e.METRICS = ["%s:%d" % (e2e.API_ADDR, 28610), "%s:%d" % (e2e.API_ADDR, 28611)]
NS = e2e.NS
SECRET = e2e.SECRET1
AGENT_PORT = 28090
CLI_PORT, CLI_SLOTS, CLI_PER_POOL = 28700, 8, 10
OPERATOR_FLAGS = ("--cli-port", str(CLI_PORT), "--cli-port-slots", str(CLI_SLOTS), "--cli-ports-per-pool",
                  str(CLI_PER_POOL), "--agent-port", str(AGENT_PORT))
DRAIN_S = 5
REPLICAS = 2
ROLE = "matrix.turnfleet.test/role"

MODES = ("HostNetwork", "ExternalIPPool", "PodIP", "PartitionedIP")
FAMILIES = ("IPv4", "IPv6", "DualStack")
LISTENERS = ("udp", "tcp", "tls")

# Per mode: the pool's name (its CLI slot FNV-1a("tfmatrix/NAME") mod 8 differs from the others': 1, 2, 6,
# 4), its listener ports (udp/tcp share one, tls another; PartitionedIP's second slice serves port + 1), its
# relay range, the nodes it selects, and where each of its relays must be: node -> (IPv4, IPv6) address,
# and how many relays share it.
POOLS = {
    "HostNetwork": {"name": "host", "port": 28100, "tls": 28105, "range": (28200, 28219), "role": "shared",
                    "where": {"n1": ("127.0.8.241", "fd00:8::241"), "n2": ("127.0.8.242", "fd00:8::242")}},
    "ExternalIPPool": {"name": "ext", "port": 28110, "tls": 28115, "range": (28220, 28239), "role": "shared",
                       "where": {"n1": ("127.0.8.11", "fd00:8::11"), "n2": ("127.0.8.12", "fd00:8::12")}},
    "PodIP": {"name": "pod", "port": 28120, "tls": 28125, "range": (28240, 28259), "role": "shared",
              "where": {"n1": ("127.0.8.21", "fd00:8::21"), "n2": ("127.0.8.22", "fd00:8::22")}},
    "PartitionedIP": {"name": "slices", "port": 28130, "tls": 28135, "range": (28260, 28299), "role": "partitioned",
                      "where": {"n3": ("127.0.8.243", "fd00:8::243")}, "per_node": 2},
}
# ExternalIPPool: the pool's prefixes (.8-.15, ::10-::1f) hold the first addresses of each node's annotation,
# not the decoys (.31/::31), which the planner must leave alone (in address order they would come second).
EXTERNAL_PREFIXES = {"IPv4": ["127.0.8.8/29"], "IPv6": ["fd00:8::10/124"], "DualStack": ["127.0.8.8/29", "fd00:8::10/124"]}
NODE_ROLES = {"n1": "shared", "n2": "shared", "n3": "partitioned"}
NODE_ANNOTATIONS = {
    "n1": {"turnfleet.hzmi.dev/external-addresses": "127.0.8.11,fd00:8::11,127.0.8.31,fd00:8::31",
           "turnfleet.hzmi.dev/relay-pod-addresses": "127.0.8.21,fd00:8::21"},
    "n2": {"turnfleet.hzmi.dev/external-addresses": "127.0.8.12,fd00:8::12,127.0.8.32,fd00:8::32",
           "turnfleet.hzmi.dev/relay-pod-addresses": "127.0.8.22,fd00:8::22"},
}
POD_NETWORK = NS + "/relay-net"
V6 = sorted({a for node, addrs in e2e.NODES for a in addrs.split(",")[1:]} |
            {w[1] for p in POOLS.values() for w in p["where"].values()})

# The cells the stand-in cannot host: (mode, family, listener) -> why. Each is checked in
# test_00 to be a real cell, and never run; docs/operator.md ("Addressing x family x listener matrix")
# lists the same cells with the same reasons. Today none: every pod shares the host's network on the
# stand-in, so a PodIP relay binds its Multus address on lo and an ExternalIPPool address is attached by the
# node annotation alone (what those cells prove is said in the docs).
NOT_HOSTED = {}
DOCS = os.path.join(e2e.SOURCE, "docs", "operator.md")

ADDED = []       # IPv6 addresses this run put on lo
SECRET_FILE = [None]   # written once: the probes run in parallel (e2e.write_secret_file rewrites its file)
RESULTS = {}     # (mode, family, listener) -> "ok (n URIs)" or the failure, printed at the end


def fnv_slot(name):
    h = 2166136261
    for ch in ("%s/%s" % (NS, name)).encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h % CLI_SLOTS


def setUpModule():
    try:
        ADDED.extend(e2e.add_lo_ipv6(V6))
        e2e.setUpModule()
        # the nodes' roles and addresses, as an administrator sets them (real kubectl)
        for node, role in NODE_ROLES.items():
            e2e.kubectl("label", "node", node, "%s=%s" % (ROLE, role))
        for node, ann in NODE_ANNOTATIONS.items():
            e2e.kubectl("annotate", "node", node, *["%s=%s" % kv for kv in sorted(ann.items())])
        crt, key = (os.path.join(e2e.TMP, "matrix.%s" % ext) for ext in ("crt", "key"))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-days", "2", "-subj", "/CN=turn.matrix.test", "-keyout", key, "-out", crt],
                       check=True, capture_output=True)
        e2e.kubectl("create", "secret", "tls", "-n", NS, "matrix-tls", "--cert", crt, "--key", key)
        e2e.kubectl("create", "secret", "generic", "-n", NS, "matrix-secret", "--from-literal=secret=" + SECRET)
        SECRET_FILE[0] = e2e.write_secret_file(SECRET)
        e2e.start_operator("a", *OPERATOR_FLAGS)
        e2e.wait_for("the operator's /readyz", lambda: e2e.operator_get(0, "/readyz")[0] == 200, 30)
    except BaseException:
        tearDownModule()
        raise


def tearDownModule():
    e2e.tearDownModule()
    e2e.del_lo_ipv6(ADDED)
    del ADDED[:]
    if RESULTS:
        print("\nmatrix (mode, family, listener):", file=sys.stderr)
        for cell in sorted(RESULTS, key=lambda c: (MODES.index(c[0]), FAMILIES.index(c[1]), LISTENERS.index(c[2]))):
            print("  %-14s %-9s %-3s  %s" % (cell + (RESULTS[cell],)), file=sys.stderr)
        for cell, why in sorted(NOT_HOSTED.items()):
            print("  %-14s %-9s %-3s  not hosted: %s" % (cell + (why,)), file=sys.stderr)


def pool_yaml(mode, family):
    p = POOLS[mode]
    image = "coturn/coturn:%s" % e2e.VERSION
    section = {"ExternalIPPool": "    externalIPPool: {addresses: [%s]}\n" % ", ".join(
                   '"%s"' % x for x in EXTERNAL_PREFIXES[family]),
               "PodIP": "    podIP: {network: \"%s\"}\n" % POD_NETWORK,
               "PartitionedIP": "    partitionedIP: {relaysPerNode: %d}\n" % p.get("per_node", 1)}.get(mode, "")
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: %d\n  dataplane: {image: \"%s\", coturnVersion: \"%s\"}\n"
            "  addressing:\n    mode: %s\n    family: %s\n%s"
            "  nodeSelector: {%s: %s}\n"
            "  relayPortRange: {start: %d, end: %d}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: %d}\n  - {name: turn-tcp, protocol: tcp, port: %d}\n"
            "  - {name: turns, protocol: tls, port: %d, tlsSecretRef: {name: matrix-tls}}\n"
            "  auth:\n    realm: %s.matrix.turnfleet.test\n    secretRef: {name: matrix-secret, key: secret}\n"
            "  drainTimeout: %ds\n" % (p["name"], NS, REPLICAS, image, e2e.VERSION, mode, family, section,
                                      ROLE, p["role"], p["range"][0], p["range"][1], p["port"], p["port"], p["tls"],
                                      p["name"], DRAIN_S))


def family_index(family):
    return {"IPv4": [0], "IPv6": [1], "DualStack": [0, 1]}[family]


def expected_relays(mode, family):
    """What the mode promises: (node, addresses, port range, slice) for each relay of the pool."""
    p = POOLS[mode]
    lo, hi = p["range"]
    k = p.get("per_node", 1)
    size = hi - lo + 1
    out = []
    for node in sorted(p["where"]):
        addrs = tuple(p["where"][node][i] for i in family_index(family))
        start = lo
        for s in range(k):
            n = size // k + (1 if s < size % k else 0)
            out.append((node, addrs, (start, start + n - 1), s))
            start += n
    return out[:REPLICAS]


def uri_of(scheme, addr, port, transport):
    host = "[%s]" % addr if ":" in addr else addr
    return "%s:%s:%d?transport=%s" % (scheme, host, port, transport)


def expected_uris(mode, family):
    """URI -> (listener kind, address, relay range) for every URI the pool must publish."""
    p = POOLS[mode]
    out = {}
    for _, addrs, rng, s in expected_relays(mode, family):
        for a in addrs:
            out[uri_of("turn", a, p["port"] + s, "udp")] = ("udp", a, rng)
            out[uri_of("turn", a, p["port"] + s, "tcp")] = ("tcp", a, rng)
            out[uri_of("turns", a, p["tls"] + s, "tcp")] = ("tls", a, rng)
    return out


def probe(uri, addr, rng, tls):
    cmd = [e2e.PROBE, "--uri", uri, "--secret-file", SECRET_FILE[0], "--json", "--timeout-ms", "3000",
           "--family", "ipv6" if ":" in addr else "ipv4", "--expect-address", addr,
           "--expect-port-range", "%d-%d" % rng] + (["--insecure"] if tls else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    try:
        res = json.loads((r.stdout.strip().splitlines() or ["{}"])[0])
    except ValueError:
        res = {"stdout": r.stdout}
    problems = []
    if r.returncode != 0 or not res.get("ok"):
        problems.append("exit %d: %s %s" % (r.returncode, json.dumps(res, sort_keys=True), r.stderr.strip()))
    elif res.get("relayedAddress") != addr or not rng[0] <= (res.get("relayedPort") or 0) <= rng[1]:
        problems.append("relayed %s:%s, not %s in %d-%d" % (res.get("relayedAddress"), res.get("relayedPort"), addr,
                                                              rng[0], rng[1]))
    return problems


class Matrix(unittest.TestCase):
    maxDiff = None

    def test_00_every_cell_is_run_or_listed_as_not_hosted(self):
        cells = {(m, f, l) for m in MODES for f in FAMILIES for l in LISTENERS}
        self.assertEqual(set(NOT_HOSTED) - cells, set(), "NOT_HOSTED names a cell that is not in the matrix")
        for cell, why in NOT_HOSTED.items():
            self.assertTrue(why.strip(), "no reason given for %s" % (cell,))
        # the docs list the same cells
        text = open(DOCS).read()
        head = "#### Addressing × family × listener matrix"
        self.assertIn(head, text)
        section = text.split(head, 1)[1].split("\n#", 1)[0]
        section = " ".join(section.split())
        if not NOT_HOSTED:
            self.assertIn("Cells the stand-in cannot host: none.", section)
        for (m, f, l), why in NOT_HOSTED.items():
            self.assertIn("%s × %s × %s" % (m, f, l), section, "docs/operator.md does not list a cell not hosted")
            self.assertIn(" ".join(why.split()), section, "docs/operator.md gives another reason")
        # the four pools of one family run at once: nothing of one may meet another's
        slots = {POOLS[m]["name"]: fnv_slot(POOLS[m]["name"]) for m in MODES}
        self.assertEqual(len(set(slots.values())), len(MODES), "two pools share a CLI port slot: %s" % slots)
        ports = []
        for m in MODES:
            p = POOLS[m]
            k = p.get("per_node", 1)
            ports += [range(p["port"], p["port"] + k), range(p["tls"], p["tls"] + k),
                      range(p["range"][0], p["range"][1] + 1), ]
        ports += [range(AGENT_PORT, AGENT_PORT + 2), range(CLI_PORT, CLI_PORT + CLI_SLOTS * CLI_PER_POOL)]
        flat = [x for r in ports for x in r]
        self.assertEqual(len(flat), len(set(flat)), "two port ranges of the matrix overlap")
        self.assertTrue(all(28000 <= x <= 28999 for x in flat))

    def run_family(self, family):
        modes = [m for m in MODES if any((m, family, l) not in NOT_HOSTED for l in LISTENERS)]
        for m in modes:   # a pool serves all three listener kinds: a cell of one listener alone is not hostable
            self.assertFalse([l for l in LISTENERS if (m, family, l) in NOT_HOSTED],
                             "a pool of %s %s would run a listener listed as not hosted" % (m, family))
        docs = "---\n".join(pool_yaml(m, family) for m in modes)
        failures = {}
        try:
            e2e.kubectl("apply", "-f", "-", input=docs)
            pending = {m: "not looked at yet" for m in modes}

            def converged():
                for m in list(pending):
                    why = self.pool_ready(m, family)
                    if why:
                        pending[m] = why
                    else:
                        del pending[m]
                return not pending
            try:
                e2e.wait_for("the %s pools Ready" % family, converged, 120, 0.5)
            except AssertionError:
                for m, why in pending.items():
                    failures[m] = ["not Ready with its URIs: %s" % why]
            jobs = {}
            with concurrent.futures.ThreadPoolExecutor(8) as ex:
                for m in modes:
                    if m in failures:
                        continue
                    for uri, (kind, addr, rng) in expected_uris(m, family).items():
                        jobs[(m, kind, uri)] = ex.submit(probe, uri, addr, rng, kind == "tls")
            per_cell = {}
            for (m, kind, uri), fut in jobs.items():
                problems = fut.result()
                per_cell.setdefault((m, kind), []).extend("%s: %s" % (uri, x) for x in problems)
                if problems:
                    failures.setdefault(m, []).extend("%s: %s" % (uri, x) for x in problems)
            for m in modes:
                for kind in LISTENERS:
                    n = len([u for u, v in expected_uris(m, family).items() if v[0] == kind])
                    if m in failures and (m, kind) not in per_cell:
                        RESULTS[(m, family, kind)] = "FAILED: " + "; ".join(failures[m])
                    elif per_cell.get((m, kind)):
                        RESULTS[(m, family, kind)] = "FAILED: " + "; ".join(per_cell[(m, kind)])
                    else:
                        RESULTS[(m, family, kind)] = "ok (%d URIs proven)" % n
        finally:
            gone = self.delete_pools(modes)
        self.assertEqual(failures, {}, "cells of %s failed" % family)
        self.assertTrue(gone, "a deleted %s pool or its relay pods did not go" % family)

    def pool_ready(self, mode, family):
        """None once the pool is Ready with exactly its relays and URIs; else what is missing."""
        name = POOLS[mode]["name"]
        p = e2e.kubectl("get", "-n", NS, "turnpool", name, "-o", "json", check=False)
        if p.returncode != 0:
            return "no pool object"
        obj = json.loads(p.stdout)
        ready = e2e.cond(obj, "Ready")
        if ready.get("status") != "True":
            probes = sorted({"%s: %s" % (r.get("name"), (r.get("lastProbe") or {}).get("message"))
                             for r in (obj.get("status") or {}).get("relays") or [] if not r.get("ready")})
            return "Ready=%s %s: %s%s" % (ready.get("status"), ready.get("reason"), ready.get("message"),
                                          (" [last probes: %s]" % "; ".join(probes)) if probes else "")
        if (obj.get("status") or {}).get("observedGeneration") != obj["metadata"]["generation"]:
            return "status of an older generation"
        pods = e2e.relay_pods(name)
        lv = e2e.live(pods)
        if len(pods) != REPLICAS or len(lv) != REPLICAS or not all(map(e2e.pod_ready, lv)):
            return "pods: %s" % [(x["metadata"]["name"], e2e.pod_ready(x)) for x in pods]
        # each relay where the mode puts it, as the pod says
        want = sorted((n, ",".join(a), "%d-%d" % r) for n, a, r, _ in expected_relays(mode, family))
        got = sorted((x["spec"]["nodeName"], x["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"],
                      x["metadata"]["annotations"]["turnfleet.hzmi.dev/port-range"]) for x in lv)
        if got != want:
            return "relays (node, addresses, range) %s, not where the mode puts them: %s" % (got, want)
        for x in lv:
            ann = x["metadata"]["annotations"]
            if mode != "PodIP":
                if not x["spec"].get("hostNetwork"):
                    return "%s without hostNetwork" % x["metadata"]["name"]
                continue
            addrs = ann["turnfleet.hzmi.dev/relay-address"].split(",")
            want_net = [{"name": POD_NETWORK.split("/")[1], "namespace": NS,
                         "ips": ["%s/%d" % (a, 128 if ":" in a else 32) for a in addrs]}]
            if x["spec"].get("hostNetwork") or json.loads(ann.get("k8s.v1.cni.cncf.io/networks") or "null") != want_net:
                return "%s: hostNetwork %s, networks %s, want no hostNetwork and %s" % (
                    x["metadata"]["name"], x["spec"].get("hostNetwork"), ann.get("k8s.v1.cni.cncf.io/networks"),
                    json.dumps(want_net))
            if (x.get("status") or {}).get("podIP") != addrs[0]:
                return "%s: podIP %s, not the Multus address %s" % (x["metadata"]["name"], x["status"].get("podIP"),
                                                                    addrs[0])
        u = e2e.uris(name)
        want_uris = expected_uris(mode, family)
        if len(want_uris) != REPLICAS * len(family_index(family)) * len(LISTENERS):
            return "the test expects %d URIs" % len(want_uris)
        if sorted(u or []) != sorted(want_uris):
            return "turn-uris %s, want %s" % (u, sorted(want_uris))
        return None

    def delete_pools(self, modes):
        names = [POOLS[m]["name"] for m in modes]
        e2e.kubectl("delete", "-n", NS, "turnpool", *names, "--wait=false", "--ignore-not-found")

        def gone():
            left = json.loads(e2e.kubectl("get", "-n", NS, "turnpools", "-o", "json").stdout)["items"]
            pods = e2e.kget("-n", NS, "pods")["items"]
            return not [x for x in left if x["metadata"]["name"] in names] and not pods
        try:
            e2e.wait_for("the deleted pools and their relay pods gone", gone, 90, 0.3)
            return True
        except AssertionError:
            return False

    def test_01_ipv4(self):
        self.run_family("IPv4")

    def test_02_ipv6(self):
        self.run_family("IPv6")

    def test_03_dualstack(self):
        self.run_family("DualStack")


def main():
    started = time.monotonic()
    try:
        e2e.run("test_operator_matrix.py", unittest.TestLoader().loadTestsFromTestCase(Matrix), failfast=False)
    finally:
        print("matrix: %.0f s" % (time.monotonic() - started), file=sys.stderr)


if __name__ == "__main__":
    main()
