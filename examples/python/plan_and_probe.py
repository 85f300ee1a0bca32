#!/usr/bin/env python3
"""Plan a TURNPool on a node inventory, print its relays and, given relay URIs
and the shared secret, probe them with a real TURN Allocate.

    examples/python/plan_and_probe.py [POOL [NODES]] [--probe-uri URI ... --secret-file F]

POOL and NODES default to examples/pools/loopback.yaml and examples/nodes/loopback.json.
The secret comes from a file, never from the command line.
"""

import argparse
import os
import sys

import turnfleet

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pool", nargs="?", default=os.path.join(EXAMPLES, "pools", "loopback.yaml"))
    ap.add_argument("nodes", nargs="?", default=os.path.join(EXAMPLES, "nodes", "loopback.json"))
    ap.add_argument("--probe-uri", action="append", default=[], metavar="URI", help="a relay URI to probe (repeatable)")
    ap.add_argument("--secret-file", help="the shared TURN secret (one line)")
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds per probe")
    args = ap.parse_args()
    if args.probe_uri and not args.secret_file:
        ap.error("--probe-uri needs --secret-file")

    try:
        with turnfleet.Pool.load(args.pool) as pool, turnfleet.Nodes.load(args.nodes) as nodes:
            problems = pool.validate()
            if problems:
                for path, message in problems:
                    print(f"{args.pool}: {path}: {message}", file=sys.stderr)
                return 2
            plan = turnfleet.plan(pool, nodes)
    except turnfleet.Error as e:  # unreadable or malformed input
        print(f"plan_and_probe: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"plan_and_probe: {e}", file=sys.stderr)
        return 2

    print(f"pool {plan.pool_name}: {len(plan.relays)} relays ({plan.placeable} placeable)")
    for r in plan.relays:
        print(f"  {r.name:24} {r.node:10} {','.join(r.addresses):18} {r.port_range[0]}-{r.port_range[1]}")
    for c in plan.conditions:
        print(f"  {c.type}={c.status} ({c.reason}): {c.message}")

    if not args.probe_uri:
        return 0
    secret = turnfleet.read_secret(args.secret_file)
    worst = 0
    for r in turnfleet.probe_many(args.probe_uri, secret, timeout=args.timeout):
        where = f"{r.relayed_address}:{r.relayed_port}" if r.relayed_address else "-"
        print(f"{'ok' if r.ok else 'fail'} {r.uri} stage={r.stage} code={r.error_code} relayed={where}"
              + (f" ({r.message})" if r.message else ""))
        worst = max(worst, r.exit_code)
    return worst


if __name__ == "__main__":
    sys.exit(main())
