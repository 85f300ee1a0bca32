#!/bin/sh
# Record the public ABI of a built libturnfleet and libturnfleet-kube as the baselines
# (abi/libturnfleet.abi, abi/libturnfleet-kube.abi). Run it when a release adds to the API
# (a compatible change) or bumps the SONAME; commit the result with the change.
# usage: tools/dev/abi-baseline.sh [BUILD_DIR]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
for name in libturnfleet libturnfleet-kube; do
  lib=$(readlink -f "$build/libturnfleet/$name.so")  # the current build, not a stale older version
  # tf_private (libturnfleet's helpers for libturnfleet-kube) is left out: not public ABI
  abidw --headers-dir "$root/libturnfleet/include/turnfleet" --headers-dir "$root/libturnfleet/include" \
    --suppressions "$root/abi/options.suppr" \
    --no-corpus-path --no-comp-dir-path --out-file "$root/abi/$name.abi.tmp" "$lib"
  # the baseline is committed: keep the source tree's location out of it (paths relative to the tree)
  sed "s#$root/##g" "$root/abi/$name.abi.tmp" > "$root/abi/$name.abi"
  rm -f "$root/abi/$name.abi.tmp"
  echo "abi-baseline: wrote abi/$name.abi from $(basename "$lib")"
done
