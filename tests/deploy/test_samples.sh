#!/bin/sh
# deploy/samples: every TURNPool sample is valid to `turnfleet validate`, and the
# HPA and KEDA samples scale a TURNPool that a sample defines, in its namespace.
# usage: test_samples.sh TURNFLEET SOURCE_DIR
set -eu
tf=$1 samples=$2/deploy/samples
n=0 pools=""
for f in "$samples"/pool-*.yaml; do
  out=$("$tf" validate -f "$f" -o json) || { echo "FAIL: $f is not a valid TURNPool"; exit 1; }
  pools="$pools $(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); m = d["metadata"]; print(m["namespace"] + "/" + m["name"])')"
  n=$((n + 1))
done
[ "$n" -ge 4 ] || { echo "FAIL: only $n pool samples"; exit 1; }
for f in hpa.yaml keda-scaledobject.yaml; do
  target=$(python3 - "$samples/$f" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
ref = d["spec"]["scaleTargetRef"]
assert ref["apiVersion"] == "turnfleet.hzmi.dev/v1alpha1" and ref["kind"] == "TURNPool", ref
print(d["metadata"]["namespace"] + "/" + ref["name"])
PY
) || { echo "FAIL: $f does not target a TURNPool"; exit 1; }
  case " $pools " in *" $target "*) ;; *) echo "FAIL: $f scales $target, which no sample defines ($pools)"; exit 1 ;; esac
done
echo "samples: $n pools valid ($pools ); hpa and keda scale one of them"
