"""ctest monitoring_prometheus: a real Prometheus (Debian's 2.42) scrapes a fleet through the
shipped deploy/monitoring/prometheus.yml and evaluates the shipped rules.

What runs, on loopback 127.0.3.0/24 and ports 23000-23999 only:
- `turnfleet up`: pool `monup` (default), one relay on 127.0.3.11, listeners udp/tcp 23478,
  range 23100-23107 (8 ports), CLI 23610, /metrics on 127.0.3.10:23650;
- the Kubernetes stand-in (tests/kube/cluster.py): API 127.0.3.40:23600 (control :23601), nodes
  n1 and n2 on 127.0.3.41-42, the CRD and RBAC of deploy/ through real kubectl; turnfleet-operator
  as a host process on its ServiceAccount's token, /metrics on 127.0.3.40:23611, agents on :23700,
  coturn CLIs from 23800; pool `mon` (namespace tfmon) with two relays, udp/tcp 23479, range
  23200-23209, real coturn 4.6.1 and real agents in the relay pods;
- Prometheus on 127.0.3.1:23090, scrape and evaluation every second, the shipped rules with
  every `for:` set to 5 s.

Debian's Prometheus is built without Kubernetes discovery, so the shipped kubernetes_sd jobs run
as file_sd jobs whose files hold what `role: pod` discovery would give (tests/monitoring/
monitoring.py: pod_targets): the stand-in's relay pods as they are, and for the operator (a host
process here) a pod made from the shipped operator Deployment's template. The shipped relabelling
then picks the targets and their addresses (the agents': the relay address annotation).

Checked, each by polling Prometheus's HTTP API up to a deadline (never a fixed sleep):
every job's targets are up; each relay's ports in use come from one job only (no double count);
the HPA sample's Pods metric gives one correct value per relay pod and the KEDA sample's query the
pool's total, with allocations held; filling the `up` relay (holds until 508) makes
TurnfleetCapacityPressure pending then firing for that relay, every dashboard panel's query returns
series, releasing resolves the alert; the operator alerts stay quiet. Every process is stopped by
its PID.
usage: /usr/bin/python3 test_prometheus.py BUILD_DIR"""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitoring as m  # noqa: E402

KUBE = os.path.join(m.SOURCE, "tests", "kube")
PROM = "127.0.3.1:23090"
UP_ADDR, UP_METRICS = "127.0.3.11", "127.0.3.10:23650"
API_ADDR, API_PORT = "127.0.3.40", 23600
NODES = [("n1", "127.0.3.41"), ("n2", "127.0.3.42")]
OP_METRICS = "%s:23611" % API_ADDR
NS, POOL, UP_POOL = "tfmon", "mon", "monup"
SECRET = "monitoring-e2e-secret-5b2f9e1c"
AGENT_IMAGE = "turnfleet/turnfleet:e2e"
INTERVAL = "1s"
FOR = "5s"

TMP = None
PROCS = []     # (what, Popen): stopped at the end whatever happened
HOLDERS = []


def wait_for(what, f, timeout=60.0, delay=0.25):
    """Poll f until it returns something true; fail after timeout seconds (a bound, never asserted)."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = f()
        except (AssertionError, OSError, ValueError) as e:
            v, last = None, e
        if v:
            return v
        time.sleep(delay)
    raise AssertionError("timed out waiting for %s%s" % (what, (": %s" % last) if last else ""))


def spawn(what, cmd, **kw):
    log = open(os.path.join(TMP, what + ".log"), "ab")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, **kw)
    log.close()
    PROCS.append((what, p))
    return p


def stop(p, sig=signal.SIGTERM, timeout=30):
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def secret_file():
    path = os.path.join(TMP, "secret")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(path, 0o600)
    return path


def kubectl(*args, input=None, check=True):
    cmd = [KUBECTL, "--kubeconfig", os.path.join(TMP, "cluster", "kubeconfig"), "--cache-dir",
           os.path.join(TMP, "kcache")] + list(args)
    p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=60, env=dict(os.environ, HOME=TMP))
    if check and p.returncode != 0:
        raise AssertionError("kubectl %s: %s%s" % (" ".join(args), p.stdout, p.stderr))
    return p


def api(path, **params):
    url = "http://%s/api/v1/%s" % (PROM, path)
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    if body.get("status") != "success":
        raise AssertionError("%s: %s" % (url, body))
    return body["data"]


def query(expr):
    return api("query", query=expr)["result"]


def hold_one(uri):
    """Hold one allocation on uri: the Popen while it holds, or the error code of the refusal."""
    p = subprocess.Popen([PROBE, "--uri", uri, "--secret-file", secret_file(), "--hold", "1", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    r = json.loads(p.stdout.readline() or "{}")
    if r.get("ok"):
        HOLDERS.append(p)
        return p
    stop(p)
    p.stdout.close()
    return r.get("errorCode")


def release(ps):
    for p in ps:
        stop(p)
        p.stdout.close()
        HOLDERS.remove(p)


def alerts(name):
    return [a for a in api("alerts")["alerts"] if a["labels"].get("alertname") == name]


def up_pool_yaml():
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s}\n"
            "spec:\n  replicas: 1\n  dataplane: {coturnVersion: \"4.6.1\"}\n"
            "  relayPortRange: {start: 23100, end: 23107}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 23478}\n  - {name: turn-tcp, protocol: tcp, port: 23478}\n"
            "  auth: {realm: monup.test, secretRef: {name: s}}\n  drainTimeout: 2s\n" % UP_POOL)


def pool_yaml():
    return ("apiVersion: turnfleet.hzmi.dev/v1alpha1\nkind: TURNPool\nmetadata: {name: %s, namespace: %s}\n"
            "spec:\n  replicas: 2\n  dataplane: {image: \"coturn/coturn:4.6.1\", coturnVersion: \"4.6.1\"}\n"
            "  addressing: {mode: HostNetwork, family: IPv4}\n"
            "  relayPortRange: {start: 23200, end: 23209}\n"
            "  listeners:\n  - {name: turn, protocol: udp, port: 23479}\n  - {name: turn-tcp, protocol: tcp, port: 23479}\n"
            "  auth:\n    realm: mon.turnfleet.test\n    secretRef: {name: mon-secret, key: secret}\n"
            "  drainTimeout: 4s\n" % (POOL, NS))


def operator_pod():
    """The pod the shipped operator Deployment would make, at the address this test's operator serves on."""
    with open(os.path.join(m.SOURCE, "deploy", "operator", "deployment.yaml")) as f:
        dep = yaml.safe_load(f)
    tpl = dep["spec"]["template"]
    host, port = OP_METRICS.split(":")
    containers = []
    for c in tpl["spec"]["containers"]:
        c = dict(c)
        c["ports"] = [dict(pt, containerPort=int(port)) if pt.get("name") == "metrics" else pt for pt in c.get("ports", [])]
        containers.append(c)
    return {"metadata": {"name": dep["metadata"]["name"] + "-0", "namespace": dep["metadata"]["namespace"],
                         "labels": tpl["metadata"]["labels"], "annotations": tpl["metadata"].get("annotations") or {}},
            "spec": {"containers": containers}, "status": {"podIP": host}}


def write_targets(job, groups):
    path = os.path.join(TMP, "sd", job + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(groups, f)
    os.replace(path + ".tmp", path)


def main():
    global TMP, KUBECTL, PROBE
    build = os.path.abspath(sys.argv[1])
    prometheus = m.tool("prometheus")
    turnfleet = os.path.join(build, "tools", "turnfleet", "turnfleet")
    operator = os.path.join(build, "tools", "turnfleet-operator", "turnfleet-operator")
    PROBE = os.path.join(build, "tools", "turnfleet-probe", "turnfleet-probe")
    out = subprocess.run([os.path.join(KUBE, "clients.sh")], capture_output=True, text=True)
    clients = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    KUBECTL = clients.get("kubectl-host") or clients.get("kubectl-rootfs")
    if not KUBECTL:
        raise AssertionError("no kubectl (tests/kube/clients.sh): %s" % out.stderr)
    TMP = tempfile.mkdtemp(prefix="tf-monitoring-e2e-")
    os.chmod(TMP, 0o755)
    os.mkdir(os.path.join(TMP, "sd"))

    # `turnfleet up` and the stand-in start side by side
    with open(os.path.join(TMP, "up.yaml"), "w") as f:
        f.write(up_pool_yaml())
    spawn("up", [turnfleet, "up", "-f", os.path.join(TMP, "up.yaml"), "--secret-file", secret_file(), "--addresses",
                 UP_ADDR, "--state-dir", os.path.join(TMP, "up-state"), "--metrics-addr", UP_METRICS,
                 "--probe-interval", "0.5", "--cli-port", "23610"])
    d = os.path.join(TMP, "cluster")
    cmd = [sys.executable, os.path.join(KUBE, "cluster.py"), "--dir", d, "--address", API_ADDR, "--port", str(API_PORT),
           "--heartbeat", "1", "--node-grace", "4", "--restart-backoff", "1", "--shutdown-grace", "3",
           "--bookmark-interval", "2", "--build", build]
    for name, addr in NODES:
        cmd += ["--node", "%s=%s" % (name, addr), "--node-label", "%s:turnfleet.hzmi.dev/relay-node=true" % name]
    cluster = spawn("cluster", cmd, start_new_session=True)
    wait_for("the cluster", lambda: os.path.exists(os.path.join(d, "ready")) or cluster.poll() is not None, 600)
    if cluster.poll() is not None:
        raise AssertionError("cluster.py exited: %s" % open(os.path.join(TMP, "cluster.log")).read())
    for part in ("crd", "rbac"):
        kubectl("apply", "-k", os.path.join(m.SOURCE, "deploy", part))
    kubectl("create", "namespace", NS)
    token = kubectl("create", "token", "-n", "turnfleet-system", "turnfleet-operator", "--duration=1h").stdout.strip()
    kc = json.load(open(os.path.join(d, "kubeconfig")))
    kc["users"] = [{"name": "operator", "user": {"token": token}}]
    kc["contexts"][0]["context"]["user"] = "operator"
    okc = os.path.join(TMP, "operator.kubeconfig")
    with open(okc, "w") as f:
        json.dump(kc, f)
    os.chmod(okc, 0o600)
    spawn("operator", [operator, "--kubeconfig", okc, "--agent-image", AGENT_IMAGE, "--probe-interval", "1s",
                       "--publish-delay", "1s", "--metrics-addr", OP_METRICS, "--leader-elect", "--lease-namespace",
                       "turnfleet-system", "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms",
                       "--identity", "operator-mon", "--agent-port", "23700", "--cli-port", "23800", "--resync", "0"])
    kubectl("create", "secret", "generic", "-n", NS, POOL + "-secret", "--from-literal=secret=" + SECRET)
    kubectl("apply", "-f", "-", input=pool_yaml())

    def ready_pods():
        pods = json.loads(kubectl("get", "pods", "-n", NS, "-l", "turnfleet.hzmi.dev/pool=" + POOL, "-o", "json").stdout)
        items = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
        ok = len(items) == 2 and all(any(c["type"] == "Ready" and c["status"] == "True"
                                         for c in (p.get("status") or {}).get("conditions") or []) for p in items)
        return items if ok else None
    pods = wait_for("two ready relay pods of %s/%s" % (NS, POOL), ready_pods, 120)
    relays = sorted(p["metadata"]["name"] for p in pods)

    # Prometheus: the shipped configuration and rules, as Debian's build runs them
    config = m.file_sd_config(m.load("prometheus.yml"), os.path.join(TMP, "sd"), UP_METRICS, INTERVAL)
    # the agents answer only with the pool's token, from its relay-config Secret, in the job's credentials file
    secret = json.loads(kubectl("get", "secret", "-n", NS, POOL + "-relay-config", "-o", "json").stdout)
    token_file = os.path.join(TMP, "sd", "metrics-token")
    with open(token_file, "wb") as f:
        f.write(base64.b64decode(secret["data"]["metrics-token"]))
    os.chmod(token_file, 0o600)
    with open(os.path.join(TMP, "rules.yaml"), "w") as f:
        yaml.safe_dump(m.rules_with_for(m.load("rules.yaml"), FOR), f)
    config["rule_files"] = [os.path.join(TMP, "rules.yaml")]
    with open(os.path.join(TMP, "prometheus.yml"), "w") as f:
        yaml.safe_dump(config, f)
    write_targets("turnfleet-operator", m.pod_targets([operator_pod()]))
    all_pods = json.loads(kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    write_targets("turnfleet-agents", m.pod_targets(all_pods))
    spawn("prometheus", [prometheus, "--config.file", os.path.join(TMP, "prometheus.yml"), "--storage.tsdb.path",
                         os.path.join(TMP, "tsdb"), "--web.listen-address", PROM])

    def targets_up():
        active = api("targets", state="active")["activeTargets"]
        by = {}
        for t in active:
            by.setdefault(t["labels"]["job"], []).append(t)
        want = {"turnfleet-up": 1, "turnfleet-operator": 1, "turnfleet-agents": 2}
        if {j: len(v) for j, v in by.items()} != want:
            raise AssertionError("targets: %s" % {j: [t["scrapeUrl"] for t in v] for j, v in by.items()})
        if not all(t["health"] == "up" for v in by.values() for t in v):
            raise AssertionError("not all up: %s" % [(t["scrapeUrl"], t["health"], t["lastError"])
                                                    for v in by.values() for t in v])
        return by
    by = wait_for("every target up", targets_up, 60)
    addrs = sorted(t["labels"]["instance"] for t in by["turnfleet-agents"])
    want_addrs = sorted("%s:23700" % p["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"] for p in pods)
    assert addrs == want_addrs, "the agents are scraped on their relay addresses: %s, want %s" % (addrs, want_addrs)
    print("ok: every target up: turnfleet up, the operator, the agents at %s" % ", ".join(addrs))

    # one source per series: each relay's ports in use once from the driver, once (by another name) from its agent
    def one_source():
        drv = query('turnfleet_relay_ports_in_use{namespace="%s",pool="%s"}' % (NS, POOL))
        agt = query('turnfleet_agent_ports_in_use{namespace="%s",pool="%s"}' % (NS, POOL))
        if sorted(s["metric"]["relay"] for s in drv) != relays or sorted(s["metric"]["relay"] for s in agt) != relays:
            raise AssertionError("driver %s, agents %s" % (drv, agt))
        assert {s["metric"]["job"] for s in drv} == {"turnfleet-operator"}, drv
        assert {s["metric"]["job"] for s in agt} == {"turnfleet-agents"}, agt
        both = query('count by (namespace, pool, relay) ({__name__="turnfleet_relay_ports_in_use",namespace="%s"})' % NS)
        return all(s["value"][1] == "1" for s in both) and len(both) == 2
    wait_for("one series per relay and source", one_source, 30)
    print("ok: each relay's ports in use: one series from the operator, one from its agent (another name)")

    # the HPA and KEDA samples' queries, with allocations held on the first relay
    with open(os.path.join(m.SOURCE, "deploy", "samples", "hpa.yaml")) as f:
        hpa = yaml.safe_load(f)
    with open(os.path.join(m.SOURCE, "deploy", "samples", "keda-scaledobject.yaml")) as f:
        keda = yaml.safe_load(f)
    hpa_metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    keda_query = keda["spec"]["triggers"][0]["metadata"]["query"]
    keda_query = re.sub(r'namespace="[^"]*"', 'namespace="%s"' % NS, keda_query)
    keda_query = re.sub(r'pool="[^"]*"', 'pool="%s"' % POOL, keda_query)
    first = [p for p in pods if p["metadata"]["name"] == relays[0]][0]
    addr = first["metadata"]["annotations"]["turnfleet.hzmi.dev/relay-address"]
    held = []
    for _ in range(40):
        if len(held) == 2:
            break
        r = hold_one("turn:%s:23479?transport=udp" % addr)
        if isinstance(r, subprocess.Popen):
            held.append(r)
        else:
            time.sleep(0.3)
    assert len(held) == 2, "could not hold 2 allocations on %s" % relays[0]

    def hpa_values():
        # prometheus-adapter's Pods metric: a series per pod, by its namespace and pod labels
        rs = query('%s{namespace="%s",pool="%s"}' % (hpa_metric, NS, POOL))
        got = {s["metric"].get("pod"): float(s["value"][1]) for s in rs}
        if len(rs) != 2 or got != {relays[0]: 2.0, relays[1]: 0.0}:
            raise AssertionError("%s: %s" % (hpa_metric, got))
        return got
    got = wait_for("the HPA sample's metric per relay pod", hpa_values, 60)
    print("ok: hpa.yaml's Pods metric %s: one value per relay pod %s" % (hpa_metric, got))

    def keda_value():
        rs = query(keda_query)
        per_relay = query(re.sub(r"^sum\((.*)\)$", r"\1", keda_query.strip()))
        if len(rs) != 1 or float(rs[0]["value"][1]) != 2.0 or len(per_relay) != 2:
            raise AssertionError("%s: %s (per relay %s)" % (keda_query, rs, per_relay))
        return rs
    wait_for("the KEDA sample's query", keda_value, 60)
    print("ok: keda-scaledobject.yaml's query %s = 2 (one series per relay under the sum)" % keda_query)
    release(held)

    # fill the `up` relay until 508: TurnfleetCapacityPressure pending, then firing, for that relay
    up_uri = "turn:%s:23478?transport=udp" % UP_ADDR
    wait_for("`up`'s relay serving", lambda: query('turnfleet_probe_success{pool="%s"} == 1' % UP_POOL), 60)
    full = []
    refusals = 0
    while len(full) < 8 and refusals < 40:
        r = hold_one(up_uri)
        if isinstance(r, subprocess.Popen):
            full.append(r)
        elif r == 508:
            refusals += 1
            if len(full) >= 7:
                break      # the probe's own just-released allocation may keep the last port a moment
            time.sleep(0.3)
        else:
            raise AssertionError("holding on %s: error %s" % (up_uri, r))
    assert len(full) >= 7, "could hold only %d allocations on the 8-port relay" % len(full)
    print("ok: %d allocations held on the 8-port `up` relay" % len(full))

    def firing():
        a = [x for x in alerts("TurnfleetCapacityPressure") if x["labels"].get("pool") == UP_POOL]
        return a if a and a[0]["state"] == "firing" else None
    a = wait_for("TurnfleetCapacityPressure firing", firing, 60)
    pending = query('max_over_time(ALERTS{alertname="TurnfleetCapacityPressure",alertstate="pending",pool="%s"}[5m])'
                    % UP_POOL)
    assert pending, "the alert fired without a pending phase"
    assert a[0]["labels"]["namespace"] == "default" and a[0]["labels"]["severity"] == "warning", a
    print("ok: TurnfleetCapacityPressure went pending, then firing for %s (%s)" % (a[0]["labels"]["relay"],
                                                                                a[0]["annotations"]["summary"]))

    # every dashboard panel's queries return series (the 508 rate once the full relay's probes got 508)
    def panels():
        empty = [(t, ref) for t, ref, e in m.dashboard_queries(m.dashboard()) if not query(e)]
        if empty:
            raise AssertionError("no series for %s" % empty)
        return True
    wait_for("every dashboard query with series", panels, 60)
    print("ok: every dashboard query (%d) returns series" % len(m.dashboard_queries(m.dashboard())))

    # the operator is here and leads: its alerts stay quiet
    for name in ("TurnfleetOperatorAbsent", "TurnfleetOperatorNoLeader"):
        assert not alerts(name), "%s: %s" % (name, alerts(name))
    print("ok: TurnfleetOperatorAbsent and TurnfleetOperatorNoLeader quiet")

    release(full)

    def resolved():
        a = [x for x in alerts("TurnfleetCapacityPressure") if x["labels"].get("pool") == UP_POOL]
        if a:
            return None
        groups = api("rules", type="alert")["groups"]
        rule = [r for g in groups for r in g["rules"] if r["name"] == "TurnfleetCapacityPressure"][0]
        return rule["state"] == "inactive"
    wait_for("TurnfleetCapacityPressure resolved", resolved, 60)
    print("ok: released, TurnfleetCapacityPressure resolved")
    print("monitoring_prometheus: all passed")


def teardown(ok):
    for p in list(HOLDERS):
        stop(p)
        p.stdout.close()
    for what, p in reversed(PROCS):
        if what == "cluster":
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(90)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        else:
            stop(p)
    if TMP and not ok:
        for what, _ in PROCS:
            path = os.path.join(TMP, what + ".log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    tail = f.read()[-3000:]
                print("---- %s.log (tail)\n%s" % (what, tail))
    if TMP and os.environ.get("TF_E2E_KEEP") != "1":
        shutil.rmtree(TMP, ignore_errors=True)
    elif TMP:
        print("kept", TMP, file=sys.stderr)


if __name__ == "__main__":
    KUBECTL = PROBE = None
    ok = False
    try:
        main()
        ok = True
    finally:
        teardown(ok)
    sys.exit(0 if ok else 1)
