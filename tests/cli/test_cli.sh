#!/bin/sh
# The turnfleet CLI end to end: outputs, exit codes (0 / 2 for bad input) and
# error messages naming the file and field. usage: test_cli.sh TURNFLEET [TURNFLEET_PROBE]
set -u
tf=$1
probe=${2:-}
src=${TF_SOURCE_DIR:?run through ctest}
data=${TF_TEST_DATA:?run through ctest}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pool=$src/examples/pools/loopback.yaml
nodes=$src/examples/nodes/loopback.json
secret='s3cr3t-for-cli-test'
printf '%s\n' "$secret" > "$tmp/secret"
passed=0 failed=0

ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# run NAME EXPECTED_EXIT ARGS...: stdout in $tmp/out, stderr in $tmp/err
run() {
  name=$1 want=$2
  shift 2
  "$tf" "$@" > "$tmp/out" 2> "$tmp/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    fail "$name: exit $got, want $want"; sed 's/^/    stderr: /' "$tmp/err"; return 1
  fi
  if grep -q "$secret" "$tmp/err"; then fail "$name: the secret reached stderr"; return 1; fi
  return 0
}

json() { python3 -c "import json,sys; d=json.load(open('$tmp/out')); $1" 2> "$tmp/pyerr"; }

run version 0 version && grep -q '^turnfleet 0\.2\.0$' "$tmp/out" && ok || fail "version output"

run validate 0 validate -f "$pool" &&
  grep -q 'valid TURNPool default/demo: HostNetwork IPv4, 3 replicas, relay ports 50000-50099' "$tmp/out" && ok || fail "validate output: $(cat "$tmp/out")"

run validate-json 0 validate -f "$pool" -o json &&
  json 'assert d["spec"]["listeners"][0]["port"]==3478 and d["spec"]["drainTimeout"]=="30s"' && ok || fail "validate -o json: $(cat "$tmp/pyerr")"

bad=$data/cli/bad-range.yaml
if run validate-bad 2 validate -f "$bad"; then
  cat > "$tmp/want" <<WANT
turnfleet: $bad: spec.replicas: -1 is negative
turnfleet: $bad: spec.relayPortRange.end: 49100 is below start 49152
WANT
  if diff -u "$tmp/want" "$tmp/err" > "$tmp/diff"; then ok; else fail "validate-bad messages"; cat "$tmp/diff"; fi
fi

if run plan-json 0 plan -f "$pool" --nodes "$nodes" -o json; then
  json '
rs=d["relays"]; assert d["pool"]=="demo" and len(rs)==3, d
for r in rs:
    assert set(["name","identity","node","addresses","portRange","portsTotal"]) <= set(r), r
    assert r["name"].startswith("demo-relay-") and len(r["name"])==len("demo-relay-")+5
    assert r["portRange"]=={"start":50000,"end":50099} and r["portsTotal"]==100
assert [r["addresses"] for r in rs]==[["127.0.0.11"],["127.0.0.12"],["127.0.0.13"]]
assert [c["type"] for c in d["conditions"]]==["Placed","AddressConflict"]
' && ok || fail "plan -o json: $(cat "$tmp/pyerr")"
  cp "$tmp/out" "$tmp/plan.json"
fi

# the previous plan as --existing keeps every name
if run plan-existing 0 plan -f "$pool" --nodes "$nodes" --existing "$tmp/plan.json" -o json; then
  cmp -s "$tmp/out" "$tmp/plan.json" && ok || fail "plan --existing changed the plan"
fi

run plan-table 0 plan -f "$pool" --nodes "$nodes" && grep -q '^demo-relay-' "$tmp/out" &&
  grep -q '^Placed=True (AllPlaced)' "$tmp/out" && ok || fail "plan table: $(cat "$tmp/out")"

printf '{"items": [1,\n' > "$tmp/bad-nodes.json"
run plan-bad-nodes 2 plan -f "$pool" --nodes "$tmp/bad-nodes.json" &&
  grep -q "^turnfleet: $tmp/bad-nodes.json: line 2, column 1 (byte 14): unexpected end of JSON" "$tmp/err" && ok || fail "bad nodes message: $(cat "$tmp/err")"

run plan-missing-nodes 2 plan -f "$pool" --nodes "$tmp/none.json" &&
  grep -q "^turnfleet: $tmp/none.json: cannot open: No such file or directory" "$tmp/err" && ok || fail "missing nodes message"

run plan-no-nodes 2 plan -f "$pool" && grep -q 'nodes NODES is required' "$tmp/err" && ok || fail "plan without --nodes"

if run capacity-json 0 capacity -f "$pool" --nodes "$nodes" --target-allocations 1000 --headroom 0.2 -o json; then
  json 'assert d["allocations"]==300 and d["sizing"]["addressesNeeded"]==13, d' && ok || fail "capacity json: $(cat "$tmp/pyerr")"
fi
run capacity-bad-headroom 2 capacity -f "$pool" --nodes "$nodes" --headroom 1.5 && grep -q 'headroom' "$tmp/err" && ok || fail "capacity headroom"
run capacity-bad-target 2 capacity -f "$pool" --nodes "$nodes" --target-allocations many &&
  grep -q '^turnfleet: --target-allocations: "many" is not a non-negative integer$' "$tmp/err" && ok || fail "capacity target"

relay=$(python3 -c "import json; print(json.load(open('$tmp/plan.json'))['relays'][0]['name'])")
if run render 0 render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/secret" --state-dir "$tmp/state"; then
  grep -qx 'listening-ip=127.0.0.11' "$tmp/out" && grep -qx 'relay-ip=127.0.0.11' "$tmp/out" &&
    grep -qx "static-auth-secret=\"$secret\"" "$tmp/out" && grep -qx 'min-port=50000' "$tmp/out" &&
    ! grep -q 'multiplex-peer' "$tmp/out" && [ ! -s "$tmp/err" ] && ok || fail "render output"
fi
run render-out 0 render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/secret" --state-dir "$tmp/state" --out "$tmp/relay.conf" &&
  [ "$(stat -c %a "$tmp/relay.conf")" = 600 ] && [ ! -s "$tmp/out" ] && ok || fail "render --out mode"
run render-unknown-relay 2 render -f "$pool" --nodes "$nodes" --relay demo-relay-zzzzz --secret-file "$tmp/secret" &&
  grep -q 'demo-relay-zzzzz' "$tmp/err" && ok || fail "render unknown relay"
run render-no-secret 2 render -f "$pool" --nodes "$nodes" --relay "$relay" && grep -q 'secret-file F is required' "$tmp/err" && ok || fail "render without secret"
: > "$tmp/empty"
run render-empty-secret 2 render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/empty" &&
  grep -q "^turnfleet: --secret-file: $tmp/empty: is empty$" "$tmp/err" && ok || fail "render empty secret"
run render-old-coturn 2 render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/secret" --coturn-version 4.5.2 && ok || fail "render old coturn"

printf 'replicas: 1\nauth: {realm: r.test, secretRef: {name: s}}\n' > "$tmp/spec.yaml"
run spec-without-name 2 validate -f "$tmp/spec.yaml" && grep -q 'pass --name NAME' "$tmp/err" && ok || fail "bare spec hint"
run spec-with-name 0 validate -f "$tmp/spec.yaml" --name bare && grep -q 'default/bare' "$tmp/out" && ok || fail "bare spec --name"
(cd "$tmp" && "$tf" render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file secret --state-dir rel > out 2> err)
grep -qx "pidfile=\"$tmp/rel/$relay/turnserver.pid\"" "$tmp/out" && ok || fail "relative --state-dir made absolute: $(cat "$tmp/err")"

run unknown-command 2 frobnicate && grep -q 'unknown command "frobnicate"' "$tmp/err" && ok || fail "unknown command"
run unknown-option 2 plan --frob && grep -q 'unknown option "--frob"' "$tmp/err" && ok || fail "unknown option"
run misplaced-option 2 validate -f "$pool" --relay x && grep -q 'does not apply' "$tmp/err" && ok || fail "option for another command"
run bad-output 2 plan -f "$pool" --nodes "$nodes" -o yaml && grep -q -- '-o: "yaml" is not one of table, json' "$tmp/err" && ok || fail "bad -o"
run no-secret-flag 2 render --secret "$secret" && ok || fail "a --secret flag must not exist"

# render --out never follows a symlink, and replaces a file by a new 0600 one
: > "$tmp/elsewhere"
ln -s "$tmp/elsewhere" "$tmp/link.conf"
run render-out-symlink 2 render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/secret" --out "$tmp/link.conf" &&
  grep -q "^turnfleet: $tmp/link.conf: cannot write: it is a symbolic link (refusing to follow it)$" "$tmp/err" &&
  [ ! -s "$tmp/elsewhere" ] && [ -L "$tmp/link.conf" ] && ok || fail "render --out through a symlink: $(cat "$tmp/err")"
printf 'old\n' > "$tmp/old.conf"; chmod 644 "$tmp/old.conf"
inode=$(stat -c %i "$tmp/old.conf")
run render-out-replace 0 render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/secret" --out "$tmp/old.conf" &&
  [ "$(stat -c %a "$tmp/old.conf")" = 600 ] && [ "$(stat -c %i "$tmp/old.conf")" != "$inode" ] &&
  grep -qx "static-auth-secret=\"$secret\"" "$tmp/old.conf" && ok || fail "render --out over an existing file"
[ -z "$(find "$tmp" -maxdepth 1 -name '.old.conf.*')" ] && ok || fail "render --out left a temporary file"

# Tools that hold secrets cannot dump core: a secret file that is a FIFO holds
# the tool just after its startup, where its limits and dump filter are read.
blocked_on_fifo() {
  i=0
  while [ $i -lt 600 ]; do
    [ "$(cat /proc/$1/wchan 2>/dev/null)" = wait_for_partner ] && return 0
    kill -0 "$1" 2>/dev/null || return 1
    i=$((i + 1)); sleep 0.05
  done
  return 1
}
no_dumps() {
  awk '/^Max core file size/ {exit !($5 == 0 && $6 == 0)}' /proc/$1/limits &&
    [ "$(cat /proc/$1/coredump_filter)" = 00000000 ]
}
check_no_dumps() { # NAME COMMAND...: the command reads "$tmp/fifo" as its secret
  name=$1; shift
  rm -f "$tmp/fifo"; mkfifo "$tmp/fifo"
  "$@" > "$tmp/out" 2> "$tmp/err" &
  pid=$!
  if blocked_on_fifo $pid; then
    no_dumps $pid && ok || fail "$name: core dumps are possible: $(grep core /proc/$pid/limits), filter $(cat /proc/$pid/coredump_filter)"
  else
    fail "$name: never opened its secret file: $(cat "$tmp/err")"
  fi
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
}
check_no_dumps render-no-dumps "$tf" render -f "$pool" --nodes "$nodes" --relay "$relay" --secret-file "$tmp/fifo"
check_no_dumps up-no-dumps "$tf" up -f "$pool" --addresses 127.0.0.11-13 --secret-file "$tmp/fifo" --state-dir "$tmp/up"
if [ -n "$probe" ]; then
  check_no_dumps probe-no-dumps "$probe" --uri turn:127.0.0.1:3478 --secret-file "$tmp/fifo" --hold 1
fi

# Input limits: named, with the flag that raises them
run validate-over-bytes 2 validate -f "$pool" --max-input-bytes 100 &&
  grep -q "^turnfleet: $pool: input is larger than the limit of 100 bytes (tf_parse_options.max_bytes)$" "$tmp/err" &&
  grep -q "hint: raise the limit with --max-input-bytes N$" "$tmp/err" && ok || fail "input size limit: $(cat "$tmp/err")"
run validate-over-values 2 validate -f "$pool" --max-input-values 5 &&
  grep -q "hint: raise the limit with --max-input-values N$" "$tmp/err" && ok || fail "input value limit: $(cat "$tmp/err")"
run validate-bad-limit 2 validate -f "$pool" --max-input-bytes 0 && ok || fail "--max-input-bytes 0"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
