#!/usr/bin/env bash
# `make demo`: run the loopback example pool with `turnfleet up` (3 relays on
# 127.0.0.11-13, one real turnserver each), prove every relay with a TURN
# Allocate, hold allocations, fill one relay (Full), kill one (Failing, then
# restarted), scale to 2 and watch the drain, then stop it all (not Ready after).
# The relay states: Starting, Ready, Full, Failing, Draining.
# Every process is stopped by PID; bounded by `timeout`; exits 0 on success.
# usage: demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
tf="$build/tools/turnfleet/turnfleet"
probe="$build/tools/turnfleet-probe/turnfleet-probe"
work=$(mktemp -d)
state="$work/state"
pool="$work/pool.yaml"
up_pid=""
holds=()
declare -A hold_of
cleanup() {
  for pid in "${holds[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -TERM "$up_pid" 2>/dev/null || true
    sleep 1
    kill -KILL "$up_pid" 2>/dev/null || true # its turnservers die with it
  fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
status() { cat "$state/status.json" 2>/dev/null || echo '{}'; }
jq_ready() { python3 -c 'import json,sys; print(json.load(sys.stdin).get("readyRelays", 0))'; }
table() { # the relays of status.json, as the live table shows them
  python3 - "$state/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("%-18s %-12s %-12s %-9s %-11s %s" % ("RELAY", "ADDRESS", "PORTS", "STATE", "PORTS USED", "LAST PROBE"))
for r in s["relays"]:
    p = r["lastProbe"] or {}
    print("%-18s %-12s %-12s %-9s %-11s %s" % (r["name"], r["relayAddress"], "%d-%d" % (r["portRange"]["start"], r["portRange"]["end"]),
          r.get("state", "-"), "%s/%s" % (r["portsInUse"], r["portsTotal"]), "ok" if p.get("ok") else p.get("message", "-")))
print("replicas: desired %s, placed %s" % (s.get("desiredReplicas"), s.get("placedReplicas")))
print("readyRelays %d   conditions: %s" % (s["readyRelays"], ", ".join("%s=%s" % (c["type"], c["status"]) for c in s["conditions"])))
PY
}
wait_until() { # wait_until SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2
  shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    if [ $SECONDS -ge $end ]; then
      echo "demo: timed out waiting for $what" >&2; tail -5 "$work/up.err" >&2; table >&2 || true; exit 1
    fi
    sleep 0.3
  done
}

# the example pool (examples/pools/loopback.yaml) with a short drain, and 10 relay ports and no per-user
# quota so that one relay fills (coturn answers 508) for the demo
sed -e 's/drainTimeout: .*/drainTimeout: 20s/' -e 's/relayPortRange: .*/relayPortRange: {start: 50000, end: 50009}/' \
  -e 's/quota: .*/quota: {userQuota: 0, totalQuota: 0}/' examples/pools/loopback.yaml > "$pool"
head -c 24 /dev/urandom | base64 > "$work/secret"
chmod 600 "$work/secret"

step "turnfleet up -f pool.yaml --addresses 127.0.0.11-13 (3 relays, probe every 1 s)"
timeout 160 "$tf" up -f "$pool" --secret-file "$work/secret" --addresses 127.0.0.11-13 --state-dir "$state" \
  --metrics-addr 127.0.0.1:9650 --probe-interval 1 --json > "$work/up.log" 2> "$work/up.err" &
up_pid=$!

ready3() { [ "$(status | jq_ready)" = 3 ]; }
wait_until 30 "3 ready relays" ready3
echo "every relay passed a real TURN Allocate (its probe) before it was marked ready:"
table
echo "their states in the JSON events so far (turnfleet up --json):"
states() { python3 - "$work/up.log" "$1" <<'PY'
import json, sys
seen = []
for line in open(sys.argv[1]):
    if line.startswith('{"event":"reconcile"'):
        for r in json.loads(line)["relays"]:
            if r["name"] == sys.argv[2] and (not seen or seen[-1] != r["state"]):
                seen.append(r["state"])
print("  %s: %s" % (sys.argv[2], " -> ".join(seen)))
PY
}
relay_on() { python3 -c 'import json,sys; print([r["name"] for r in json.load(open(sys.argv[1]))["relays"] if r["relayAddress"] == sys.argv[2]][0])' "$state/status.json" "$1"; }
for addr in 127.0.0.11 127.0.0.12 127.0.0.13; do states "$(relay_on $addr)"; done
step "turn-uris (published: ready relays only)"
cat "$state/turn-uris"

step "hold allocations with turnfleet-probe --hold 2 on every relay"
for addr in 127.0.0.11 127.0.0.12 127.0.0.13; do
  "$probe" --uri "turn:$addr:3478?transport=udp" --secret-file "$work/secret" --hold 2 > "$work/hold-$addr.log" 2>&1 &
  holds+=($!)
  hold_of[$addr]=$!
done
held() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if all((r["portsInUse"] or 0) >= 2 for r in s["relays"]) else 1)' "$state/status.json"; }
wait_until 15 "held allocations counted" held
table
step "fill 127.0.0.13's 10 relay ports: its probe gets 508, the relay is Full (healthy, just no port free)"
fillers=()
state_of() { python3 -c 'import json,sys; print([r["state"] for r in json.load(open(sys.argv[1]))["relays"] if r["relayAddress"] == sys.argv[2]][0])' "$state/status.json" "$1"; }
fill() {
  "$probe" --uri "turn:127.0.0.13:3478?transport=udp" --secret-file "$work/secret" --hold 1 --json > "$work/fill.log" 2>&1 &
  local p=$!
  holds+=($p)
  fillers+=($p)
  sleep 0.2
  [ "$(state_of 127.0.0.13)" = Full ]
}
wait_until 30 "127.0.0.13 Full" fill
table
step "release the fillers: Ready again"
for pid in "${fillers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
ready_again() { [ "$(state_of 127.0.0.13)" = Ready ]; }
wait_until 20 "127.0.0.13 Ready" ready_again
table

step "kill 127.0.0.12's turnserver (SIGKILL): Failing, restarted after its backoff, Ready again"
victim=$(relay_on 127.0.0.12)
vpid=$(python3 -c 'import json,sys; print([r["pid"] for l in open(sys.argv[1]) if l.startswith("{\"event\":\"reconcile\"") for r in json.loads(l)["relays"] if r["name"] == sys.argv[2]][-1])' "$work/up.log" "$victim")
kill -KILL "$vpid"
restarted() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); r=[r for r in s["relays"] if r["relayAddress"] == "127.0.0.12"][0]; sys.exit(0 if r["state"] == "Ready" and r.get("restarts", 0) >= 1 else 1)' "$state/status.json"; }
wait_until 20 "the killed relay restarted" restarted
states "$victim"
"$probe" --uri "turn:127.0.0.12:3478?transport=udp" --secret-file "$work/secret" --hold 2 > "$work/hold-again.log" 2>&1 &
holds+=($!)
hold_of[127.0.0.12]=$!
wait_until 15 "held allocations counted" held
table

step "/metrics (served by turnfleet up)"
curl -s http://127.0.0.1:9650/metrics | grep -v '^#' | grep ports_in_use || true

step "scale the pool to 2 replicas (edit the file)"
sed -i 's/replicas: 3/replicas: 2/' "$pool"
draining() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); d=[r for r in s["relays"] if r["draining"]]; print(d[0]["relayAddress"]) if d else sys.exit(1)' "$state/status.json"; }
wait_until 15 "a draining relay" eval "draining > /dev/null"
gone=$(draining)
echo "draining: the relay on $gone — out of turn-uris first, still serving its held allocations:"
table
cat "$state/turn-uris"
if grep -q "$gone:" "$state/turn-uris"; then echo "demo: $gone still published" >&2; exit 1; fi

step "release the held allocations on $gone: the relay leaves"
kill -TERM "${hold_of[$gone]}"
wait "${hold_of[$gone]}" 2>/dev/null || true
two() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if len(s["relays"]) == 2 else 1)' "$state/status.json"; }
wait_until 25 "the drained relay to leave" two
table
states "$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{\"event\":\"reconcile\""):
        for r in json.loads(l)["relays"]:
            if r["state"] == "Draining": print(r["name"]); sys.exit()' "$work/up.log")"
step "final turn-uris"
cat "$state/turn-uris"

step "SIGTERM turnfleet up: drain every relay, stop every turnserver"
for pid in "${holds[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
holds=()
kill -TERM "$up_pid"
rc=0
wait "$up_pid" || rc=$?
up_pid=""
if [ "$rc" != 0 ]; then echo "demo: turnfleet up exited $rc" >&2; exit 1; fi
if pgrep -f "$state" > /dev/null; then echo "demo: a turnserver is left" >&2; exit 1; fi
echo "turnfleet up exited 0; no turnserver left; status.json kept:"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); c=[c for c in s["conditions"] if c["type"] == "Ready"][0]; print("readyRelays", s["readyRelays"], "relays", len(s["relays"]), " Ready=%s (%s: %s)" % (c["status"], c["reason"], c["message"]))' "$state/status.json"
ready_after=$(python3 -c 'import json,sys; print([c["status"] for c in json.load(open(sys.argv[1]))["conditions"] if c["type"] == "Ready"][0])' "$state/status.json")
if [ "$ready_after" != False ]; then echo "demo: a stopped fleet still says Ready" >&2; exit 1; fi
step "demo done"
