#!/usr/bin/env python3
"""bench/issuer: turnfleet-issuer answers/s and p99 against a static HTTPS response served by the same
stack (bench_webhook_static: libmicrohttpd over GnuTLS through tools/common/tool_tls.c, same limits,
same threads), under the same load (bench_webhook_load: C keep-alive connections on libcurl multi,
GET with a bearer token), alternating in one run. The issuer answers from a `turnfleet up` state
directory of N relays (written here as `up` writes it, no relays running): every answer checks the
token file and the state files, chooses relays for the user and mints a credential.

    bench/issuer [BUILD_DIR] [--seconds S] [--connections C] [--rounds R] [--threads T] [--relays N]

Addresses: 127.0.6.1, ports 26800 (issuer), 26801 (static)."""
import argparse
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "webhook"))
import harness  # noqa: E402  (openssl certificates, process stop)

ADDR = "127.0.6.1"
ISSUER, STATIC = 26800, 26801
TOKEN = "bench-issuer-token"


def load(build, url, ca, expect, conns, seconds):
    p = subprocess.run([os.path.join(build, "bench", "bench_webhook_load"), url, ca, "-", expect, str(conns),
                        str(seconds), "Authorization: Bearer " + TOKEN], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("bench/issuer: the load against %s failed: %s" % (url, p.stderr))
    return json.loads(p.stdout)


def write_state(d, n):
    os.makedirs(d)
    ice = [{"urls": ["turn:198.51.100.%d:3478?transport=udp" % (i + 1), "turn:198.51.100.%d:3478?transport=tcp" % (i + 1)]}
           for i in range(n)]
    status = {"replicas": n, "readyRelays": n, "relays": [
        {"name": "bench-relay-%03d" % i, "relayAddress": "198.51.100.%d" % (i + 1),
         "portRange": {"start": 49152, "end": 65535}, "ready": True, "draining": False, "allocations": 37 * i % 500,
         "portsInUse": 37 * i % 500, "portsTotal": 16384, "lastProbe": None, "state": "Ready", "restarts": 0}
        for i in range(n)]}
    with open(os.path.join(d, "iceServers.json"), "w") as f:
        json.dump(ice, f, indent=2)
    with open(os.path.join(d, "status.json"), "w") as f:
        json.dump(status, f, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--relays", type=int, default=20)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="tf-bench-issuer-")
    procs = []
    try:
        ca = harness.make_ca(tmp)
        key, crt = harness.make_cert(tmp, ca, "issuer", ["IP:" + ADDR], cn="turnfleet-issuer")
        state = os.path.join(tmp, "state")
        write_state(state, a.relays)
        secret, tokens = os.path.join(tmp, "secret"), os.path.join(tmp, "tokens")
        for path, text in ((secret, "bench-secret-0f1e\n"), (tokens, TOKEN + "\n")):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o600)
        log = open(os.path.join(tmp, "issuer.log"), "wb")
        iss = subprocess.Popen([os.path.join(build, "tools", "turnfleet-issuer", "turnfleet-issuer"), "--listen",
                                "%s:%d" % (ADDR, ISSUER), "--cert", crt, "--key", key, "--state-dir", state,
                                "--secret-file", secret, "--pool", "bench", "--tokens-file", tokens, "--rate", "0",
                                "--threads", str(a.threads), "--quiet"], stdout=log, stderr=log)
        procs.append(iss)
        ctx = ssl.create_default_context(cafile=ca[1])
        path = "/ice?pool=bench&user=bench-user"

        def answer():
            try:
                req = urllib.request.Request("https://%s:%d%s" % (ADDR, ISSUER, path),
                                             headers={"Authorization": "Bearer " + TOKEN})
                return urllib.request.urlopen(req, context=ctx).read()
            except OSError:
                return None
        harness.wait_for("the issuer", lambda: iss.poll() is not None or answer() is not None, 30, 0.2)
        if iss.poll() is not None:
            raise SystemExit("bench/issuer: the issuer exited %s" % iss.returncode)
        body = answer()
        if len(json.loads(body)["iceServers"]) != 2:
            raise SystemExit("bench/issuer: unexpected answer %s" % body)
        resp = os.path.join(tmp, "response.json")
        with open(resp, "wb") as f:
            f.write(body)
        st = subprocess.Popen([os.path.join(build, "bench", "bench_webhook_static"), "%s:%d" % (ADDR, STATIC), crt, key,
                               resp, str(a.threads)])
        procs.append(st)
        harness.wait_for("the static server", lambda: subprocess.run(
            ["curl", "-sf", "--cacert", ca[1], "https://%s:%d/" % (ADDR, STATIC)],
            stdout=subprocess.DEVNULL).returncode == 0, 10, 0.1)
        runs = {"static": [], "issuer": []}
        for _ in range(a.rounds):
            runs["static"].append(load(build, "https://%s:%d%s" % (ADDR, STATIC, path), ca[1], '"iceServers"',
                                       a.connections, a.seconds))
            runs["issuer"].append(load(build, "https://%s:%d%s" % (ADDR, ISSUER, path), ca[1], '"iceServers"',
                                       a.connections, a.seconds))
        med = {k: {m: statistics.median(x[m] for x in v) for m in ("rps", "p50_ms", "p99_ms")} for k, v in runs.items()}
        print("load: %d keep-alive connections (C, libcurl multi), %d rounds of %.0f s each, alternating; "
              "server threads %d; a pool of %d relays" % (a.connections, a.rounds, a.seconds, a.threads, a.relays))
        for k in ("static", "issuer"):
            print("%-8s %8.0f requests/s  p50 %.3f ms  p99 %.3f ms   (rounds: %s)" % (
                k, med[k]["rps"], med[k]["p50_ms"], med[k]["p99_ms"],
                ", ".join("%.0f/s p99 %.2f ms" % (x["rps"], x["p99_ms"]) for x in runs[k])))
        ratio = med["issuer"]["rps"] / med["static"]["rps"]
        print("ratio issuer/static answers per second: %.2f (goal >= 0.5)" % ratio)
        print("issuer p99: %.3f ms (goal < 5 ms)" % med["issuer"]["p99_ms"])
    finally:
        for p in procs:
            harness.stop_process(p)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
