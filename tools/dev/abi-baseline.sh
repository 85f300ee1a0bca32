#!/bin/sh
# Record the public ABI of a built libturnfleet as the baseline (abi/libturnfleet.abi).
# Run it when a release adds to the API (a compatible change) or bumps the SONAME;
# commit the result with the change. usage: tools/dev/abi-baseline.sh [BUILD_DIR]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
lib=$(readlink -f "$build/libturnfleet/libturnfleet.so")  # the current build, not a stale older version
abidw --headers-dir "$root/libturnfleet/include/turnfleet" --headers-dir "$root/libturnfleet/include" \
  --no-corpus-path --no-comp-dir-path --out-file "$root/abi/libturnfleet.abi.tmp" "$lib"
# the baseline is committed: keep the source tree's location out of it (paths relative to the tree)
sed "s#$root/##g" "$root/abi/libturnfleet.abi.tmp" > "$root/abi/libturnfleet.abi"
rm -f "$root/abi/libturnfleet.abi.tmp"
echo "abi-baseline: wrote abi/libturnfleet.abi from $(basename "$lib")"
