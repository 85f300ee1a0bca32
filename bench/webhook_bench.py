#!/usr/bin/env python3
"""bench/webhook: turnfleet-webhook reviews/s and p99 against a static HTTPS
response served by the same stack (bench_webhook_static: libmicrohttpd over
GnuTLS through tools/common/tool_tls.c, same limits, same threads), under the
same load (bench_webhook_load: C keep-alive connections on libcurl multi),
alternating in one run. The webhook reads TURNPools and Nodes from the
Kubernetes API stand-in (3 relay nodes, 2 other pools), so each review is
parsed, validated and planned against the others, as in a cluster.

    bench/webhook [BUILD_DIR] [--seconds S] [--connections C] [--rounds R] [--threads T]

Addresses: 127.0.0.250, ports 16720 (webhook), 16721 (static), 16722-16723 (stand-in)."""
import argparse
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "webhook"))
import harness  # noqa: E402

ADDR = harness.API_ADDR
WEBHOOK, STATIC, API = 16720, 16721, 16722
REVIEW = os.path.join(ROOT, "tests", "data", "admission", "01-create-valid.review.json")


def load(build, url, ca, expect, conns, seconds):
    p = subprocess.run([os.path.join(build, "bench", "bench_webhook_load"), url, ca, REVIEW, expect, str(conns),
                        str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit("bench/webhook: the load against %s failed: %s" % (url, p.stderr))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = harness.tmpdir("tf-bench-webhook-")
    ca = harness.make_ca(tmp)
    key, crt = harness.make_cert(tmp, ca, "webhook", ["IP:" + ADDR])
    cluster = harness.Cluster(tmp, port=API)
    procs = []
    try:
        cluster.apply(open(os.path.join(ROOT, "deploy", "crd", "turnpools.yaml")).read())
        harness.wait_for("the CRD", lambda: cluster.kubectl("get", "tp", check=False).returncode == 0)
        for i, name in enumerate(("other-a", "other-b")):
            cluster.apply(harness.pool(name, relayPortRange={"start": 51000 + 1000 * i, "end": 51099 + 1000 * i},
                                       listeners=[{"name": "turn", "protocol": "udp", "port": 3480 + i}]))
        log = open(os.path.join(tmp, "webhook.log"), "wb")
        wh = subprocess.Popen([os.path.join(build, "tools", "turnfleet-webhook", "turnfleet-webhook"), "--listen",
                               "%s:%d" % (ADDR, WEBHOOK), "--cert", crt, "--key", key, "--kubeconfig",
                               cluster.kubeconfig, "--threads", str(a.threads), "--quiet"], stdout=log, stderr=log)
        procs.append(wh)
        ctx = ssl.create_default_context(cafile=ca[1])

        def answer():
            try:
                if urllib.request.urlopen("https://%s:%d/readyz" % (ADDR, WEBHOOK), context=ctx).status != 200:
                    return None
                req = urllib.request.Request("https://%s:%d/validate" % (ADDR, WEBHOOK), open(REVIEW, "rb").read(),
                                             {"Content-Type": "application/json"})
                return urllib.request.urlopen(req, context=ctx).read()
            except OSError:
                return None
        harness.wait_for("the webhook ready", lambda: answer() is not None, 30, 0.2)
        body = answer()
        if json.loads(body)["response"]["allowed"] is not True:
            raise SystemExit("bench/webhook: the review was not allowed: %s" % body)
        resp = os.path.join(tmp, "response.json")
        with open(resp, "wb") as f:
            f.write(body)
        st = subprocess.Popen([os.path.join(build, "bench", "bench_webhook_static"), "%s:%d" % (ADDR, STATIC), crt, key,
                               resp, str(a.threads)])
        procs.append(st)
        harness.wait_for("the static server", lambda: subprocess.run(
            ["curl", "-sf", "--cacert", ca[1], "-d", "{}", "https://%s:%d/" % (ADDR, STATIC)],
            stdout=subprocess.DEVNULL).returncode == 0, 10, 0.1)
        runs = {"static": [], "webhook": []}
        for r in range(a.rounds):
            runs["static"].append(load(build, "https://%s:%d/validate" % (ADDR, STATIC), ca[1], '"allowed":true',
                                       a.connections, a.seconds))
            runs["webhook"].append(load(build, "https://%s:%d/validate" % (ADDR, WEBHOOK), ca[1], '"allowed":true',
                                        a.connections, a.seconds))
        med = {k: {m: statistics.median(x[m] for x in v) for m in ("rps", "p50_ms", "p99_ms")} for k, v in runs.items()}
        print("load: %d keep-alive connections (C, libcurl multi), %d rounds of %.0f s each, alternating; "
              "server threads %d" % (a.connections, a.rounds, a.seconds, a.threads))
        for k in ("static", "webhook"):
            print("%-8s %8.0f requests/s  p50 %.3f ms  p99 %.3f ms   (rounds: %s)" % (
                k, med[k]["rps"], med[k]["p50_ms"], med[k]["p99_ms"],
                ", ".join("%.0f/s p99 %.2f ms" % (x["rps"], x["p99_ms"]) for x in runs[k])))
        ratio = med["webhook"]["rps"] / med["static"]["rps"]
        print("ratio webhook/static reviews per second: %.2f (goal >= 0.5)" % ratio)
        print("webhook p99: %.3f ms (goal < 5 ms)" % med["webhook"]["p99_ms"])
    finally:
        for p in procs:
            harness.stop_process(p)
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
