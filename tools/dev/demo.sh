#!/usr/bin/env bash
# `make demo`: run the loopback example pool with `turnfleet up` (3 relays on
# 127.0.0.11-13, one real turnserver each), prove every relay with a TURN
# Allocate, hold allocations, fill one relay (Full), kill one (Failing, then
# restarted), scale to 2 and watch the drain, then a browser call: headless Chromium asks
# turnfleet-issuer for credentials and two peers exchange a message over relay-only ICE through each
# remaining relay; then stop it all (not Ready after).
# The relay states: Starting, Ready, Full, Failing, Draining.
# Every process is stopped by PID; bounded by `timeout`; exits 0 on success.
# usage: demo.sh BUILD_DIR
# The addresses and ports can be moved (to share a machine): TF_DEMO_NET (the first three octets,
# default 127.0.0), TF_DEMO_FIRST (the first relay's last octet, default 11), TF_DEMO_TURN_PORT (3478),
# TF_DEMO_RELAY_START (50000), TF_DEMO_HTTP (the metrics, issuer and page ports' address, 127.0.0.1),
# TF_DEMO_HTTP_PORT (9650; the issuer takes +1, the page +2), TF_DEMO_CLI_PORT (5766).
set -euo pipefail
build=${1:-build}
tf="$build/tools/turnfleet/turnfleet"
probe="$build/tools/turnfleet-probe/turnfleet-probe"
issuer="$build/tools/turnfleet-issuer/turnfleet-issuer"
net=${TF_DEMO_NET:-127.0.0}
first=${TF_DEMO_FIRST:-11}
a1="$net.$first" a2="$net.$((first + 1))" a3="$net.$((first + 2))"
turn_port=${TF_DEMO_TURN_PORT:-3478}
relay_start=${TF_DEMO_RELAY_START:-50000}
http=${TF_DEMO_HTTP:-127.0.0.1}
http_port=${TF_DEMO_HTTP_PORT:-9650}
cli_port=${TF_DEMO_CLI_PORT:-5766}
work=$(mktemp -d)
state="$work/state"
pool="$work/pool.yaml"
up_pid=""
issuer_pid=""
holds=()
declare -A hold_of
cleanup() {
  for pid in "${holds[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ -n "$issuer_pid" ]; then kill -TERM "$issuer_pid" 2>/dev/null || true; fi
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
sed -e 's/drainTimeout: .*/drainTimeout: 20s/' \
  -e "s/relayPortRange: .*/relayPortRange: {start: $relay_start, end: $((relay_start + 9))}/" \
  -e "s/port: 3478}/port: $turn_port}/" \
  -e 's/quota: .*/quota: {userQuota: 0, totalQuota: 0}/' examples/pools/loopback.yaml > "$pool"
head -c 24 /dev/urandom | base64 > "$work/secret"
chmod 600 "$work/secret"

step "turnfleet up -f pool.yaml --addresses $a1-$((first + 2)) (3 relays, probe every 1 s)"
# --allow-loopback-peers: the browser's two peers are on this host, and relay to each other's loopback addresses
timeout 200 "$tf" up -f "$pool" --secret-file "$work/secret" --addresses "$a1-$((first + 2))" --state-dir "$state" \
  --metrics-addr "$http:$http_port" --probe-interval 1 --cli-port "$cli_port" --allow-loopback-peers --json \
  > "$work/up.log" 2> "$work/up.err" &
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
for addr in $a1 $a2 $a3; do states "$(relay_on $addr)"; done
step "turn-uris (published: ready relays only)"
cat "$state/turn-uris"

step "hold allocations with turnfleet-probe --hold 2 on every relay"
for addr in $a1 $a2 $a3; do
  "$probe" --uri "turn:$addr:$turn_port?transport=udp" --secret-file "$work/secret" --hold 2 > "$work/hold-$addr.log" 2>&1 &
  holds+=($!)
  hold_of[$addr]=$!
done
held() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if all((r["portsInUse"] or 0) >= 2 for r in s["relays"]) else 1)' "$state/status.json"; }
wait_until 15 "held allocations counted" held
table
step "fill $a3's 10 relay ports: its probe gets 508, the relay is Full (healthy, just no port free)"
fillers=()
state_of() { python3 -c 'import json,sys; print([r["state"] for r in json.load(open(sys.argv[1]))["relays"] if r["relayAddress"] == sys.argv[2]][0])' "$state/status.json" "$1"; }
fill() {
  "$probe" --uri "turn:$a3:$turn_port?transport=udp" --secret-file "$work/secret" --hold 1 --json > "$work/fill.log" 2>&1 &
  local p=$!
  holds+=($p)
  fillers+=($p)
  sleep 0.2
  [ "$(state_of "$a3")" = Full ]
}
wait_until 30 "$a3 Full" fill
table
step "release the fillers: Ready again"
for pid in "${fillers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
ready_again() { [ "$(state_of "$a3")" = Ready ]; }
wait_until 20 "$a3 Ready" ready_again
table

step "kill $a2's turnserver (SIGKILL): Failing, restarted after its backoff, Ready again"
victim=$(relay_on "$a2")
vpid=$(python3 -c 'import json,sys; print([r["pid"] for l in open(sys.argv[1]) if l.startswith("{\"event\":\"reconcile\"") for r in json.loads(l)["relays"] if r["name"] == sys.argv[2]][-1])' "$work/up.log" "$victim")
kill -KILL "$vpid"
restarted() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); r=[r for r in s["relays"] if r["relayAddress"] == sys.argv[2]][0]; sys.exit(0 if r["state"] == "Ready" and r.get("restarts", 0) >= 1 else 1)' "$state/status.json" "$a2"; }
wait_until 20 "the killed relay restarted" restarted
states "$victim"
"$probe" --uri "turn:$a2:$turn_port?transport=udp" --secret-file "$work/secret" --hold 2 > "$work/hold-again.log" 2>&1 &
holds+=($!)
hold_of[$a2]=$!
wait_until 15 "held allocations counted" held
table

step "/metrics (served by turnfleet up)"
curl -s "http://$http:$http_port/metrics" | grep -v '^#' | grep ports_in_use || true

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

step "a browser call: turnfleet-issuer hands out credentials, headless Chromium calls through each relay"
head -c 18 /dev/urandom | base64 > "$work/tokens"
"$issuer" --listen "$http:$((http_port + 1))" --state-dir "$state" --secret-file "$work/secret" --pool demo \
  --tokens-file "$work/tokens" --cors-origin "http://$http:$((http_port + 2))" --max-relays 2 > "$work/issuer.log" 2>&1 &
issuer_pid=$!
issuer_ready() { curl -sf "http://$http:$((http_port + 1))/readyz" > /dev/null; }
wait_until 10 "the issuer" issuer_ready
echo "GET /ice?pool=demo&user=demo-browser (the credential shortened):"
curl -s -H "Authorization: Bearer $(cat "$work/tokens")" "http://$http:$((http_port + 1))/ice?pool=demo&user=demo-browser" |
  python3 -c 'import json,sys; a=json.load(sys.stdin); [s.update(credential=s["credential"][:6] + "...") for s in a["iceServers"]]; print(json.dumps(a, indent=1))'
python3 tools/dev/browser_call.py --issuer "http://$http:$((http_port + 1))" --pool demo --user demo-browser \
  --token-file "$work/tokens" --page "$http:$((http_port + 2))" --expect-relays 2
kill -TERM "$issuer_pid"
wait "$issuer_pid" 2>/dev/null || true
issuer_pid=""

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
