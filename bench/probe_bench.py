#!/usr/bin/env python3
"""bench/probe: authenticated Allocate+release per second and client CPU seconds
per allocation, for turnfleet-probe, coturn's own turnutils_uclient and a
minimal Python reference client, against ONE coturn on loopback, measured in the
same run. coturn's own CPU per allocation is read from /proc/<pid>/stat, so the
last column says who saturates first (goal: the probe is never the bottleneck).

usage: probe_bench.py BUILD_DIR [COUNT] [CONCURRENCY]
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ADDR, PORT, PEER, PEER_PORT = "127.0.0.61", 3540, "127.0.0.62", 3541
TICK = os.sysconf("SC_CLK_TCK")

POOL = """metadata: {name: bench}
spec:
  replicas: 1
  relayPortRange: {start: 40000, end: 59999}
  listeners:
    - {name: turn, protocol: udp, port: %d}
    - {name: turn-tcp, protocol: tcp, port: %d}
  auth: {realm: bench.test, secretRef: {name: bench-secret}}
  peerPolicy: {denyPrivate: false}
""" % (PORT, PORT)
NODES = json.dumps({"kind": "List", "items": [{
    "metadata": {"name": "bench", "labels": {"turnfleet.hzmi.dev/relay-node": "true"}},
    "status": {"addresses": [{"type": "InternalIP", "address": ADDR}]}}]})


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(name, argv, server_pid, allocations_of):
    # coturn keeps a released allocation's 5-tuple about 1 s: let the previous run's go
    time.sleep(2.5)
    c0, s0, t0 = children_cpu(), cpu_of(server_pid), time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    client, server = children_cpu() - c0, cpu_of(server_pid) - s0
    allocations = allocations_of(out)
    if not allocations:
        sys.exit(f"bench/probe: {name} made no allocation (exit {out.returncode}):\n{out.stdout[-800:]}{out.stderr[-800:]}")
    return {"client": name, "allocations": allocations, "wall": wall, "rate": allocations / wall,
            "clientCpu": client / allocations, "serverCpu": server / allocations}


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    tf = os.path.join(build, "tools/turnfleet/turnfleet")
    probe = os.path.join(build, "tools/turnfleet-probe/turnfleet-probe")
    for exe in (tf, probe, shutil.which("turnserver"), shutil.which("turnutils_uclient")):
        if not exe or not os.access(exe, os.X_OK):
            sys.exit(f"bench/probe: missing {exe or 'coturn (turnserver, turnutils_uclient)'}: build first, install coturn")

    work = tempfile.mkdtemp(prefix="turnfleet-bench-")
    procs = []
    try:
        def put(name, text, mode=0o600):
            path = os.path.join(work, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
                f.write(text)
            return path

        pool, nodes = put("pool.yaml", POOL), put("nodes.json", NODES)
        secret_file = put("secret", "bench-" + os.urandom(12).hex() + "\n")
        plan = json.loads(subprocess.check_output([tf, "plan", "-f", pool, "--nodes", nodes, "-o", "json"]))
        relay = plan["relays"][0]["name"]
        os.makedirs(os.path.join(work, relay))
        conf = os.path.join(work, "turnserver.conf")
        subprocess.check_call([tf, "render", "-f", pool, "--nodes", nodes, "--relay", relay, "--secret-file",
                               secret_file, "--state-dir", work, "--log-file", os.path.join(work, "turn.log"),
                               "--out", conf])
        # turnutils_uclient needs a loopback peer for its data: the one deliberate addition to the rendered config
        with open(conf, "a") as f:
            f.write("allow-loopback-peers\n")
        server = subprocess.Popen(["turnserver", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(server)
        peer = subprocess.Popen(["turnutils_peer", "-L", PEER, "-p", str(PEER_PORT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(peer)
        ref = [sys.executable, os.path.join(HERE, "ref_client.py"), ADDR, str(PORT), secret_file]
        for _ in range(50):  # wait until the relay answers
            if subprocess.run(ref + ["1"], capture_output=True, text=True).stdout.find('"allocations": 1') >= 0:
                break
            time.sleep(0.1)
        else:
            sys.exit("bench/probe: turnserver did not come up")

        with open(secret_file) as f:
            secret = f.read().strip()
        uri = f"turn:{ADDR}:{PORT}?transport=udp"

        def probe_allocations(out):
            for line in out.stdout.splitlines():
                if '"summary"' in line:
                    s = json.loads(line)["summary"]
                    return s["allocations"] if not s.get("failures") else 0
            return 0

        def ref_allocations(out):
            r = json.loads(out.stdout)
            return r["allocations"] if not r["failures"] else 0

        # uclient paces itself (about 25 s for 200 clients, coturn.md §6): keep it bounded
        clients = max(1, min(count // 2, 200))
        rows = [
            measure("turnfleet-probe", [probe, "--uri", uri, "--secret-file", secret_file, "--count", str(count),
                                        "--concurrency", str(concurrency), "--json"], server.pid, probe_allocations),
            measure("python-reference", ref + [str(count)], server.pid, ref_allocations),
            # uclient makes a probe allocation per client first (coturn.md §6): -m M gives 2M allocations.
            # It takes the secret on its command line (-W): a bench-only secret, deleted with the work dir.
            measure("turnutils_uclient", ["turnutils_uclient", "-n", "1", "-c", "-m", str(clients), "-W", secret,
                                          "-u", "bench", "-e", PEER, "-r", str(PEER_PORT), "-p", str(PORT), ADDR],
                    server.pid, lambda out: 2 * clients if out.returncode == 0 else 0),
        ]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)

    ref_row = rows[1]
    print(f"one coturn {subprocess.check_output(['turnserver', '--version'], text=True).strip()} on {ADDR}:{PORT}; "
          f"{count} allocate+release cycles for turnfleet-probe (concurrency {concurrency}) and the "
          f"Python reference (sequential); turnutils_uclient -m {clients} ({2 * clients} allocations)")
    print(f"{'client':<20}{'allocs':>8}{'wall s':>9}{'allocs/s':>10}{'x ref':>7}"
          f"{'client CPU ms/alloc':>21}{'x ref':>7}{'coturn CPU ms/alloc':>21}{'client/coturn CPU':>19}")
    for r in rows:
        print(f"{r['client']:<20}{r['allocations']:>8}{r['wall']:>9.2f}{r['rate']:>10.0f}{r['rate'] / ref_row['rate']:>7.2f}"
              f"{r['clientCpu'] * 1e3:>21.3f}{r['clientCpu'] / ref_row['clientCpu']:>7.2f}"
              f"{r['serverCpu'] * 1e3:>21.3f}{r['clientCpu'] / max(r['serverCpu'], 1e-9):>19.2f}")
    p = rows[0]
    verdict = "met" if p["clientCpu"] < p["serverCpu"] else "NOT met"
    print(f"goal (the probe is never the bottleneck: its CPU per allocation below coturn's): {verdict}")


if __name__ == "__main__":
    main()
