#!/usr/bin/env bash
# `make demo`: plan the loopback example pool, render each relay's coturn config,
# run one real turnserver per relay on its own 127.0.0.x address, show that each
# binds only its own address and ports, then stop every process by PID.
# usage: demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
tf="$build/tools/turnfleet/turnfleet"
pool=examples/pools/loopback.yaml
nodes=examples/nodes/loopback.json
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "validate $pool"
"$tf" validate -f "$pool"

step "plan it on $nodes (3 nodes, addresses 127.0.0.11-13)"
"$tf" plan -f "$pool" --nodes "$nodes"

step "capacity, and what 5000 concurrent allocations would need at 20% headroom"
"$tf" capacity -f "$pool" --nodes "$nodes" --target-allocations 5000 --headroom 0.2

step "render one coturn config per relay (0600: it holds the shared secret) and start turnserver"
command -v turnserver >/dev/null || { echo "turnserver not found: run tools/dev/install-deps.sh" >&2; exit 1; }
head -c 24 /dev/urandom | base64 | tr -d '\n' > "$work/secret"
chmod 600 "$work/secret"
mapfile -t relays < <("$tf" plan -f "$pool" --nodes "$nodes" -o json |
  python3 -c 'import json,sys; [print(r["name"]) for r in json.load(sys.stdin)["relays"]]')
for relay in "${relays[@]}"; do
  mkdir -p "$work/$relay"
  "$tf" render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$work/secret" \
    --state-dir "$work" --log-file "$work/$relay/turn.log" --out "$work/$relay/turnserver.conf"
  turnserver -c "$work/$relay/turnserver.conf" > "$work/$relay/stdout.log" 2>&1 &
  pids+=("$!")
  printf '%s: turnserver pid %s, config %s\n' "$relay" "$!" "$(grep -E '^(listening-ip|min-port|max-port)=' "$work/$relay/turnserver.conf" | tr '\n' ' ')"
done

step "what each relay process listens on"
sleep 2
for i in "${!relays[@]}"; do
  pid=${pids[$i]}
  kill -0 "$pid" 2>/dev/null || { echo "${relays[$i]}: turnserver exited; log:"; cat "$work/${relays[$i]}/stdout.log"; exit 1; }
  socks=$(ss -H -lnup 2>/dev/null | grep "pid=$pid," | awk '{print "udp " $4}'; ss -H -lntp 2>/dev/null | grep "pid=$pid," | awk '{print "tcp " $4}')
  printf '%s (pid %s):\n%s\n' "${relays[$i]}" "$pid" "$(printf '%s\n' "$socks" | sort -u | sed 's/^/  /')"
done

step "stop every relay by PID"
for i in "${!relays[@]}"; do
  kill -TERM "${pids[$i]}"
  wait "${pids[$i]}" 2>/dev/null || true
  echo "${relays[$i]}: stopped"
done
pids=()
echo
echo "demo done: 3 relays planned, rendered, run on their own addresses and stopped."
