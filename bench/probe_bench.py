#!/usr/bin/env python3
"""bench/probe: authenticated Allocate+release per second and CPU per allocation
for turnfleet-probe, coturn's own turnutils_uclient and a minimal Python
reference client, against ONE coturn on loopback, measured in the same run, for
each coturn given (default: the host's turnserver, 4.6.1, and Debian unstable's
4.18 through tools/dev/turnserver-rootfs when its root filesystem is cached).

The client's user and system CPU per allocation are shown apart, beside coturn's
own CPU per allocation (read from /proc/<pid>/stat); the floor line is a bare
UDP socket-connect-(send-receive)x3-close loop (bench_probe_floor) against the
same coturn in the same run: what the kernel costs for the probe's datagrams.

usage: probe_bench.py BUILD_DIR [COUNT] [CONCURRENCY] [--turnserver CMD]... [--no-uclient] [--repeat R]
"""
import argparse
import json
import math
import os
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
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
    "metadata": {"name": "bench", "labels": {"turnfleet.hzmi.dev/relay-node": "true",
                                             "node-restriction.kubernetes.io/turnfleet-development": "true"}},
    "status": {"addresses": [{"type": "InternalIP", "address": ADDR}]}}]})


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime, r.ru_stime


def measure(name, argv, server_pid, allocations_of, repeat=1, optional=False, settle=True):
    """CPU per allocation over @repeat runs of argv, each after a pause (@settle), or only the
    first (one-probe runs back to back, once the previous client's thousands of 5-tuples are let
    go). The kernel splits a process's CPU time into user and system by sampling at the tick (4 ms
    here): a run of 2000 allocations spends about 5 ticks in user space, so one run's user figure
    is a count of a few ticks, and only the mean of many runs says something; its standard error
    is reported beside it."""
    allocations = wall = user = system = server = 0
    per_run = []
    for i in range(repeat):
        if settle or i == 0:  # coturn keeps a released allocation's 5-tuple about 1 s: let the previous run's go
            time.sleep(2.5)
        (u0, s0), c0, t0 = children_cpu(), cpu_of(server_pid), time.monotonic()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        wall += time.monotonic() - t0
        (u1, s1) = children_cpu()
        server += cpu_of(server_pid) - c0
        user += u1 - u0
        system += s1 - s0
        n = allocations_of(out)
        if not n:
            why = f"{name} made no allocation or failed (exit {out.returncode}): {(out.stdout + out.stderr)[-300:]}"
            if optional:  # a reference client that does not work with this coturn: said, not fatal
                return {"client": name, "failed": why.strip()}
            sys.exit(f"bench/probe: {why}")
        allocations += n
        per_run.append((u1 - u0) / n)
    se = statistics.stdev(per_run) / math.sqrt(len(per_run)) if len(per_run) > 1 else float("nan")
    return {"client": name, "allocations": allocations, "wall": wall, "rate": allocations / wall,
            "user": user / allocations, "userSe": se, "sys": system / allocations,
            "serverCpu": server / allocations, "runs": repeat}


def default_turnservers():
    found = [["turnserver"]]
    rootfs = subprocess.run(["bash", os.path.join(ROOT, "tools/dev/coturn-rootfs.sh")], capture_output=True, text=True)
    if rootfs.returncode == 0:
        found.append([os.path.join(ROOT, "tools/dev/turnserver-rootfs")])
    else:
        print(f"bench/probe: no coturn 4.18 root filesystem, only the host's turnserver "
              f"({rootfs.stderr.strip()[-200:]})", file=sys.stderr)
    return found


def bench_one(cmd, build, count, concurrency, uclient, repeat):
    tf = os.path.join(build, "tools/turnfleet/turnfleet")
    probe = os.path.join(build, "tools/turnfleet-probe/turnfleet-probe")
    floor = os.path.join(build, "bench/bench_probe_floor")
    version_text = subprocess.run(cmd + ["--version"], capture_output=True, text=True).stdout.strip()
    version = version_text.split()[-1] if version_text else "4.6.1"
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):  # a relay left running there would answer too
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:  # a TIME_WAIT is no relay; a listener still refuses the bind
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((ADDR, PORT))
            except OSError as e:
                sys.exit(f"bench/probe: {ADDR}:{PORT} is taken ({e.strerror}): another relay runs there; stop it first")
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
                               secret_file, "--coturn-version", version, "--state-dir", work, "--log-file",
                               os.path.join(work, "turn.log"), "--out", conf])
        # turnutils_uclient needs a loopback peer for its data: the one deliberate addition to the rendered config
        with open(conf, "a") as f:
            f.write("allow-loopback-peers\n")
        # coturn in this session, as the probe is: where the scheduler runs coturn's threads against
        # the probe moves the probe's user CPU (a coturn in a session of its own, so its own
        # autogroup, made the same build spend 12-16 us per allocation rather than about 9)
        server = subprocess.Popen(cmd + ["-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(server)
        peer = subprocess.Popen(["turnutils_peer", "-L", PEER, "-p", str(PEER_PORT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(peer)
        ref = [sys.executable, os.path.join(HERE, "ref_client.py"), ADDR, str(PORT), secret_file]
        for _ in range(100):  # wait until the relay answers
            if subprocess.run(ref + ["1"], capture_output=True, text=True).stdout.find('"allocations": 1') >= 0:
                break
            time.sleep(0.1)
        else:
            sys.exit(f"bench/probe: {' '.join(cmd)} did not come up")

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

        def floor_iterations(out):
            r = json.loads(out.stdout)
            return r["iterations"] if not r["lost"] else 0

        probe_argv = [probe, "--uri", uri, "--secret-file", secret_file, "--json"]
        rows = [
            measure("turnfleet-probe", probe_argv + ["--count", str(count), "--concurrency", str(concurrency)],
                    server.pid, probe_allocations, repeat),
            measure("floor (bare UDP)", [floor, ADDR, str(PORT), str(count), "3"], server.pid, floor_iterations,
                    max(5, repeat // 6)),
            measure("python-reference", ref + [str(count)], server.pid, ref_allocations, optional=True),
            # the fixed cost of a run (exec, dynamic linking, OpenSSL's start): one probe
            measure("probe startup", probe_argv + ["--count", "1"], server.pid, probe_allocations, repeat, settle=False),
        ]
        if uclient:
            # uclient paces itself (about 25 s for 200 clients, coturn.md §6): keep it bounded.
            # It makes a probe allocation per client first: -m M gives 2M allocations.
            # It takes the secret on its command line (-W): a bench-only secret, deleted with the work dir.
            clients = max(1, min(count // 2, 200))
            rows.append(measure("turnutils_uclient", ["turnutils_uclient", "-n", "1", "-c", "-m", str(clients), "-W",
                                                      secret, "-u", "bench", "-e", PEER, "-r", str(PEER_PORT), "-p",
                                                      str(PORT), ADDR],
                                server.pid, lambda out: 2 * clients if out.returncode == 0 else 0, optional=True))
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
    return version_text or " ".join(cmd), rows


def report(version_text, rows, count, concurrency):
    probe, floor, startup = rows[0], rows[1], rows[3]
    print(f"\n{version_text} on {ADDR}:{PORT}: {count} allocate+release cycles per run, turnfleet-probe at "
          f"concurrency {concurrency} with --json; the floor and the Python reference sequential; CPU summed over "
          f"{probe['runs']} runs of the probe and the startup, {floor['runs']} of the floor")
    print(f"{'client':<19}{'allocs':>8}{'wall s':>8}{'allocs/s':>10}{'user us':>9}{'sys us':>8}{'total us':>10}"
          f"{'coturn us':>11}{'client/coturn':>15}")
    for r in rows[:3] + rows[4:]:
        if "failed" in r:
            print(f"{r['client']:<19}failed: {' '.join(r['failed'].split())[:160]}")
            continue
        total = r["user"] + r["sys"]
        print(f"{r['client']:<19}{r['allocations']:>8}{r['wall']:>8.2f}{r['rate']:>10.0f}{r['user'] * 1e6:>9.1f}"
              f"{r['sys'] * 1e6:>8.1f}{total * 1e6:>10.1f}{r['serverCpu'] * 1e6:>11.1f}"
              f"{total / max(r['serverCpu'], 1e-12):>15.2f}")
    ptotal = probe["user"] + probe["sys"]
    ftotal = floor["user"] + floor["sys"]
    print(f"probe over the floor: {ptotal / max(ftotal, 1e-12):.2f}x its CPU, "
          f"{(ptotal - ftotal) * 1e6:.1f} us per allocation above it; user CPU "
          f"{(probe['user'] - floor['user']) * 1e6:.1f} us above the floor's (the machine's drift moves both user "
          f"figures, this difference less)")
    print(f"probe startup (a run of one probe): user {startup['user'] * 1e3:.1f} ms, system "
          f"{startup['sys'] * 1e3:.1f} ms per run; the figures above include it: "
          f"{startup['user'] * 1e6 / count:.1f} us of their user CPU per allocation")
    ratio = ptotal / max(probe["serverCpu"], 1e-12)
    user, se = probe["user"] * 1e6, probe["userSe"] * 1e6
    # the user goal is met when the mean's interval (two standard errors) lies under it
    ok_ratio, ok_user = ratio <= 0.33, user + 2 * se <= 10.0
    verdict = "met" if ok_user else "met on the mean, not beyond its error" if user <= 10.0 else "NOT met"
    print(f"goal: client CPU/alloc <= 0.33 x coturn's: {ratio:.2f} {'met' if ok_ratio else 'NOT met'}; "
          f"user CPU/alloc <= 10 us: {user:.1f} us {verdict} (the mean of {probe['runs']} "
          f"runs; standard error {se:.1f} us, so about {max(user - 2 * se, 0):.1f}-{user + 2 * se:.1f} us)")
    return ok_ratio and ok_user


def main():
    ap = argparse.ArgumentParser(description="probe CPU per allocation against coturn, measured in one run")
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("count", nargs="?", type=int, default=2000)
    ap.add_argument("concurrency", nargs="?", type=int, default=64)
    ap.add_argument("--turnserver", action="append", metavar="CMD",
                    help="a turnserver command (same CLI as turnserver); repeat for several versions")
    ap.add_argument("--no-uclient", action="store_true", help="skip turnutils_uclient (about 25 s per coturn)")
    ap.add_argument("--repeat", type=int, default=60,
                    help="runs of the probe and of the startup per coturn (default 60: a run's user CPU is a "
                         "count of a few 4 ms ticks, so the mean's standard error is about 0.5 us); the floor, a "
                         "reference line, runs a sixth as often (at least 5)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    for exe in (os.path.join(build, "tools/turnfleet-probe/turnfleet-probe"), os.path.join(build, "bench/bench_probe_floor")):
        if not os.access(exe, os.X_OK):
            sys.exit(f"bench/probe: missing {exe}: build first")
    if not a.no_uclient and not shutil.which("turnutils_uclient"):
        sys.exit("bench/probe: missing turnutils_uclient (coturn): install coturn, or --no-uclient")
    servers = [shlex.split(c) for c in a.turnserver] if a.turnserver else default_turnservers()
    met = True
    for cmd in servers:
        version_text, rows = bench_one(cmd, build, a.count, a.concurrency, not a.no_uclient, max(1, a.repeat))
        met = report(version_text, rows, a.count, a.concurrency) and met
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
