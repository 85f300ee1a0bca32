#!/usr/bin/env python3
"""bench/up: how long `turnfleet up`'s /healthz takes to answer while its probe rounds run, with
N relays (default 50) on loopback addresses 127.0.20.11 and up (TURN port 3611, CLI ports from
40120, metrics on 127.0.0.1:40112), beside a reference: the same runtime with no relay to probe
(replicas 0), in the same run. One client asks /healthz over one keep-alive connection, one
request at a time, for S seconds per phase.

By default the relays are silent: a --turnserver wrapper runs the real turnserver for --version
and -h and for `-c CONF` binds CONF's UDP listener and answers nothing, so every probe waits its
whole timeout and a round is always in progress (the wrapper counts the datagrams it gets: the
rounds ran). With --coturn each relay is the host's turnserver.

usage: up_bench.py BUILD_DIR [--relays N] [--seconds S] [--coturn]
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SECRET = "up-bench-secret-0b7e"
METRICS_PORT, CLI_PORT, TURN_PORT = 40112, 40120, 3611
POOL = """apiVersion: turnfleet.hzmi.dev/v1alpha1
kind: TURNPool
metadata: {{name: ub}}
spec:
  replicas: {replicas}
  relayPortRange: {{start: 40400, end: 40999}}
  listeners:
    - {{name: turn, protocol: udp, port: %d}}
  auth: {{realm: ub.test, secretRef: {{name: s}}}}
  drainTimeout: 1s
""" % TURN_PORT
WRAPPER = """#!%s
import os, socket, sys
if sys.argv[1:2] != ["-c"]:
    os.execv(%r, [%r] + sys.argv[1:])
conf = dict(l.strip().split("=", 1) for l in open(sys.argv[2]) if "=" in l and not l.startswith("#"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((conf["listening-ip"].strip(), int(conf["listening-port"])))
n = 0
while True:
    s.recv(2048)
    n += 1
    with open(%r, "a") as f:
        f.write("x")
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_phase(build, tmp, replicas, seconds, turnserver, dgrams):
    state = os.path.join(tmp, "state-%d" % replicas)
    pool = os.path.join(tmp, "pool-%d.yaml" % replicas)
    with open(pool, "w") as f:
        f.write(POOL.format(replicas=replicas))
    last = 11 + max(replicas, 1) - 1
    argv = [os.path.join(build, "tools/turnfleet/turnfleet"), "up", "-f", pool, "--secret-file",
            os.path.join(tmp, "secret"), "--addresses", "127.0.20.11-%d" % last, "--state-dir", state,
            "--turnserver", turnserver, "--metrics-addr", "127.0.0.1:%d" % METRICS_PORT, "--probe-interval", "1",
            "--cli-port", str(CLI_PORT), "--json"]
    out = open(os.path.join(tmp, "out-%d.log" % replicas), "w")
    err = open(os.path.join(tmp, "err-%d.log" % replicas), "w")
    proc = subprocess.Popen(argv, stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while True:  # every relay started (status.json lists them) before measuring
            try:
                with open(os.path.join(state, "status.json")) as f:
                    st = json.load(f)
                if len(st["relays"]) == replicas and all(r.get("lastProbe") for r in st["relays"]):
                    break
            except (OSError, ValueError, KeyError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(err.name) as f:
                    sys.exit("up did not start its relays: " + f.read()[-2000:])
            time.sleep(0.1)
        before = os.path.getsize(dgrams) if os.path.exists(dgrams) else 0
        cpu0, w0 = cpu_s(proc.pid), time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", METRICS_PORT, timeout=5)
        lat = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            r.read()
            lat.append((time.perf_counter() - t0) * 1000.0)
        conn.close()
        after = os.path.getsize(dgrams) if os.path.exists(dgrams) else 0
        return lat, after - before, (cpu_s(proc.pid) - cpu0) / (time.monotonic() - w0) * 100.0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()
        err.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--relays", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--coturn", action="store_true")
    a = ap.parse_args()
    real = shutil.which("turnserver")
    if not real:
        sys.exit("no turnserver on PATH")
    tmp = tempfile.mkdtemp(prefix="tf-bench-up-")
    try:
        with open(os.path.join(tmp, "secret"), "w") as f:
            f.write(SECRET + "\n")
        os.chmod(os.path.join(tmp, "secret"), 0o600)
        dgrams = os.path.join(tmp, "datagrams")
        turnserver = real
        if not a.coturn:
            turnserver = os.path.join(tmp, "turnserver")
            with open(turnserver, "w") as f:
                f.write(WRAPPER % (sys.executable, real, real, dgrams))
            os.chmod(turnserver, 0o755)
        ref, _, ref_cpu = run_phase(a.build, tmp, 0, a.seconds, turnserver, dgrams)
        lat, got, cpu = run_phase(a.build, tmp, a.relays, a.seconds, turnserver, dgrams)
        kind = "coturn" if a.coturn else "silent"
        print("bench/up: /healthz over one keep-alive connection, %.0f s per phase" % a.seconds)
        print("  %-40s %7s %8s %8s %8s %7s" % ("", "answers", "p50 ms", "p99 ms", "max ms", "up CPU"))
        print("  %-40s %7d %8.2f %8.2f %8.2f %6.1f%%" % ("reference: no relay to probe", len(ref), pct(ref, 50),
                                                        pct(ref, 99), max(ref), ref_cpu))
        print("  %-40s %7d %8.2f %8.2f %8.2f %6.1f%%" % ("%d %s relays, probe rounds running" % (a.relays, kind),
                                                        len(lat), pct(lat, 50), pct(lat, 99), max(lat), cpu))
        if not a.coturn:
            print("  the silent relays received %d probe datagrams while measured" % got)
        print("  p99 ratio: %.2f (goal: p99 within 10 ms)" % (pct(lat, 99) / pct(ref, 99)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
