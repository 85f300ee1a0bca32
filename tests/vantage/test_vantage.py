#!/usr/bin/env python3
"""The vantage runner end to end: `turnfleet-probe --vantage` on the Kubernetes
API stand-in against a real turnserver started from a config `turnfleet render`
produced.

    test_vantage.py TURNFLEET TURNFLEET_PROBE [TURNSERVER]

turnserver on 127.0.0.254:3478 (udp and tcp), relays 60000-60199, no CLI; the
stand-in on 127.0.0.250:16700. The runner reads <pool>-turn-uris, probes each
URI with the secret from --secret-file, and writes <pool>-vantage (results,
runner, time; no secret); a second run after a URI went bad updates it."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "webhook"))
import harness  # noqa: E402

ADDR = "127.0.0.254"
SECRET = "vantage-shared-secret-7d1f"
NS, POOL = "edge", "edge-pool"
POOL_YAML = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {name: %s, namespace: %s}
spec:
  replicas: 1
  relayPortRange: {start: 60000, end: 60199}
  listeners:
    - {name: turn-udp, protocol: udp, port: 3478}
    - {name: turn-tcp, protocol: tcp, port: 3478}
  auth: {realm: vantage.turnfleet.test, secretRef: {name: edge-secret}}
""" % (POOL, NS)
# a loopback address: a development node
NODES = ('{"kind":"List","items":[{"metadata":{"name":"n4","labels":{"turnfleet.hzmi.dev/relay-node":"true",'
         '"node-restriction.kubernetes.io/turnfleet-development":"true"}},'
         '"status":{"addresses":[{"type":"ExternalIP","address":"%s"}]}}]}' % ADDR)


expect = harness.expect


def main():
    turnfleet, probe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    turnserver = sys.argv[3] if len(sys.argv) > 3 else "turnserver"
    tmp = harness.tmpdir("tf-vantage-")
    p = lambda name: os.path.join(tmp, name)
    with open(p("secret"), "w") as f:
        f.write(SECRET + "\n")
    os.chmod(p("secret"), 0o600)
    with open(p("pool.yaml"), "w") as f:
        f.write(POOL_YAML)
    with open(p("nodes.json"), "w") as f:
        f.write(NODES)
    plan = json.loads(subprocess.run([turnfleet, "plan", "-f", p("pool.yaml"), "--nodes", p("nodes.json"), "-o", "json"],
                                     check=True, capture_output=True, text=True).stdout)
    relay = plan["relays"][0]["name"]
    os.makedirs(p("state/" + relay))
    subprocess.run([turnfleet, "render", "-f", p("pool.yaml"), "--nodes", p("nodes.json"), "--relay", relay,
                    "--secret-file", p("secret"), "--state-dir", p("state"), "--log-file", p("turnserver.log"),
                    "--out", p("turnserver.conf")], check=True)
    log = open(p("turnserver.out"), "wb")
    ts = subprocess.Popen([turnserver, "-c", p("turnserver.conf")], stdout=log, stderr=subprocess.STDOUT)
    cluster = None
    ok = False
    try:
        cluster = harness.Cluster(tmp, build=os.path.dirname(os.path.dirname(os.path.dirname(probe))))
        cluster.kubectl("create", "namespace", NS)
        uris = "turn:%s:3478?transport=udp\nturn:%s:3478?transport=tcp\n" % (ADDR, ADDR)
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POOL + "-turn-uris", "namespace": NS},
              "data": {"uris": uris}}
        cluster.apply(cm)

        def run(*extra):
            return subprocess.run([probe, "--vantage", POOL, "--namespace", NS, "--kubeconfig", cluster.kubeconfig,
                                   "--secret-file", p("secret"), "--timeout-ms", "3000", "--json"] + list(extra),
                                  capture_output=True, text=True, timeout=60)

        # the relay needs a moment to listen: the first good run is the proof
        deadline = time.monotonic() + 20
        while True:
            r = run("--runner", "vantage-test")
            lines = [json.loads(x) for x in r.stdout.splitlines()]
            if (r.returncode == 0 and len(lines) == 2 and all(x["ok"] for x in lines)) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        expect(r.returncode == 0 and len(lines) == 2 and all(x["ok"] for x in lines),
               "the runner probes every URI of the turn-uris ConfigMap (Allocate on the real relay)",
               r.stdout + r.stderr + open(p("turnserver.log")).read()[-2000:] if os.path.exists(p("turnserver.log")) else "")
        got = json.loads(cluster.kubectl("get", "configmap", POOL + "-vantage", "-o", "json", ns=NS).stdout)
        data = got["data"]
        results = json.loads(data["results.json"])
        expect(data["runner"] == "vantage-test" and data["time"].endswith("Z") and
               [x["uri"] for x in results] == uris.split() and all(x["ok"] for x in results) and
               all(x["relayedAddress"] == ADDR and 60000 <= x["relayedPort"] <= 60199 for x in results),
               "<pool>-vantage holds the results, the runner and the time", json.dumps(data))
        expect(SECRET not in json.dumps(got) and SECRET not in r.stdout + r.stderr,
               "no secret in the ConfigMap or the output")
        expect(got["metadata"]["labels"].get("turnfleet.hzmi.dev/pool") == POOL, "the ConfigMap is labelled with its pool")

        # a URI goes bad (nothing listens on 3479): the second run updates the ConfigMap and still exits 0
        cm["data"]["uris"] = uris + "turn:%s:3479?transport=tcp\n" % ADDR
        cluster.apply(cm)
        r = run()
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        expect(r.returncode == 0 and [x["ok"] for x in lines] == [True, True, False],
               "a run with a failing URI writes its results too (exit 0)", r.stdout + r.stderr)
        data = json.loads(cluster.kubectl("get", "configmap", POOL + "-vantage", "-o", "json", ns=NS).stdout)["data"]
        results = json.loads(data["results.json"])
        expect([x["ok"] for x in results] == [True, True, False] and results[2]["stage"] == "connect" and
               data["runner"] != "vantage-test", "the ConfigMap is updated in place (runner: the host name)",
               json.dumps(data))

        # a wrong secret is a failed Allocate, reported per URI, never printed
        with open(p("wrong"), "w") as f:
            f.write("not-the-secret\n")
        r = subprocess.run([probe, "--vantage", POOL, "--namespace", NS, "--kubeconfig", cluster.kubeconfig,
                            "--secret-file", p("wrong"), "--timeout-ms", "3000", "--json"],
                           capture_output=True, text=True, timeout=60)
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        expect(r.returncode == 0 and lines[0]["ok"] is False and lines[0]["errorCode"] == 401,
               "a wrong secret shows as 401 on Allocate", r.stdout + r.stderr)

        # bad input: no pool ConfigMap (exit 1, the API's answer), flags that do not go with --vantage (exit 2)
        r = subprocess.run([probe, "--vantage", "nope", "--namespace", NS, "--kubeconfig", cluster.kubeconfig,
                            "--secret-file", p("secret")], capture_output=True, text=True, timeout=60)
        expect(r.returncode == 1 and "nope-turn-uris" in r.stderr, "a missing turn-uris ConfigMap: exit 1", r.stderr)
        r = subprocess.run([probe, "--vantage", POOL, "--uri", "turn:%s" % ADDR, "--secret-file", p("secret")],
                           capture_output=True, text=True, timeout=60)
        expect(r.returncode == 2 and "--vantage" in r.stderr, "--uri with --vantage: exit 2", r.stderr)
        r = subprocess.run([probe, "--namespace", NS, "--uri", "turn:%s" % ADDR, "--secret-file", p("secret")],
                           capture_output=True, text=True, timeout=60)
        expect(r.returncode == 2 and "only go with --vantage" in r.stderr, "--namespace without --vantage: exit 2",
               r.stderr)

        # deploy/vantage/cronjob.yaml as shipped (pool demo in default): its ServiceAccount and Role, and a
        # Job started from the CronJob as `kubectl create job --from=cronjob/…` does (the stand-in's CronJobs
        # never fire; its Job controller runs the pod)
        cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-turn-uris", "namespace": "default"},
                       "data": {"uris": uris}})
        cluster.kubectl("create", "secret", "generic", "turn-shared-secret", "--from-file=secret=" + p("secret"),
                        ns="default")
        cj_file = os.path.join(harness.SOURCE, "deploy", "vantage", "cronjob.yaml")
        cluster.kubectl("apply", "-f", cj_file)
        job = cluster.kubectl("create", "job", "--from=cronjob/turnfleet-vantage-demo", "vantage-now", "--dry-run=client",
                              "-o", "json", ns="default").stdout  # sent as JSON: the stand-in decodes no protobuf Job
        cluster.kubectl("create", "-f", "-", input=job, ns="default")
        done = cluster.kubectl("wait", "--for=condition=complete", "--timeout=60s", "job/vantage-now", ns="default",
                               check=False)
        pods = json.loads(cluster.kubectl("get", "pods", "-l", "job-name=vantage-now", "-o", "json", ns="default").stdout)["items"]
        name = pods[0]["metadata"]["name"] if pods else ""
        logs = cluster.kubectl("logs", name, ns="default", check=False) if name else None
        expect(done.returncode == 0 and len(pods) == 1, "the shipped CronJob's Job runs the runner to success",
               done.stderr + (logs.stdout + logs.stderr if logs else ""))
        data = json.loads(cluster.kubectl("get", "configmap", "demo-vantage", "-o", "json", ns="default").stdout)["data"]
        expect(data["runner"] == name and all(x["ok"] for x in json.loads(data["results.json"])),
               "it wrote demo-vantage with its pod name as the runner, through the shipped Role only",
               json.dumps(data))
        ok = True
    finally:
        harness.stop_process(ts)
        log.close()
        harness.finish(tmp, ok, cluster)


if __name__ == "__main__":
    main()
