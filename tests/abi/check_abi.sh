#!/bin/sh
# The ABI guard: compare a built libturnfleet or libturnfleet-kube with its committed
# baseline (abi/libturnfleet.abi, abi/libturnfleet-kube.abi). An incompatible change fails unless the SONAME changed
# with it; a compatible one (additions) passes and says so.
# abidiff flags only symbol removals as "incompatible" (status bit 8); a changed
# type (a field widened, a struct resized) is an "ABI change" (bit 4) for review.
# For libturnfleet every change but an addition breaks callers, so any removed
# or changed function or variable counts as incompatible here, but for an
# options struct that grew at its end, and libturnfleet's tf_private helpers (abi/options.suppr).
# usage: check_abi.sh LIBRARY BASELINE INCLUDE_DIR
set -u
lib=$1 baseline=$2 inc=$3
report=$(mktemp)
trap 'rm -f "$report"' EXIT

# options structs may grow at their end (abi/options.suppr); nothing else may change
suppr=$(dirname "$baseline")/options.suppr
abidiff --suppressions "$suppr" --headers-dir2 "$inc/turnfleet" --headers-dir2 "$inc" "$baseline" "$lib" > "$report" 2>&1
rc=$?
old_soname=$(sed -n "s/.*<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$baseline" | head -n 1)
new_soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')

if [ $((rc & 3)) -ne 0 ]; then
  echo "abi: abidiff could not compare (status $rc):"; cat "$report"; exit 1
fi
changed=$(grep -E '^(Functions|Variables|Function symbols|Variable symbols) changes summary:' "$report" |
  grep -cE '(^|[^0-9])[1-9][0-9]* (Removed|Changed)')
if [ $((rc & 8)) -ne 0 ] || { [ $((rc & 4)) -ne 0 ] && [ "$changed" -gt 0 ]; }; then
  if [ "$old_soname" != "$new_soname" ]; then
    echo "abi: incompatible change with a new SONAME ($old_soname -> $new_soname): allowed; record a new baseline"
    exit 0
  fi
  echo "abi: INCOMPATIBLE change to the public ABI while the SONAME stays $new_soname:"
  cat "$report"
  echo "abi: restore compatibility, or bump the SONAME (docs/api-stability.md)"
  exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
  echo "abi: compatible changes since the baseline (additions); record them with tools/dev/abi-baseline.sh:"
  cat "$report"
  exit 0
fi
echo "abi: $(basename "$lib") matches the baseline (SONAME $new_soname)"
exit 0
