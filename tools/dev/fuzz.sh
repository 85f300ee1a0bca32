#!/bin/sh
# Build the libFuzzer targets with clang (ASan + UBSan) and run each one for
# FUZZ_SECONDS (default 60), one after the other, starting from its seed corpus.
# New inputs go to a scratch directory, never into fuzz/corpora; a finding
# stops the run with the target's exit status and leaves the reproducer in
# $FUZZ_OUT/<target>/ (add it to fuzz/corpora/<target>/ once fixed).
# usage: tools/dev/fuzz.sh [TARGET...]   env: FUZZ_SECONDS, FUZZ_BUILD (build-fuzz), FUZZ_OUT
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD:-$here/build-fuzz}
out=${FUZZ_OUT:-$build/fuzz-runs}
CC=clang CXX=clang++ cmake -S "$here" -B "$build" -DTF_BUILD_FUZZ=ON -DTF_BUILD_PYTHON=OFF -DTF_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${JOBS:-2}"
targets=${*:-$(cat "$build/fuzz/targets.txt")}
for t in $targets; do
  mkdir -p "$out/$t"
  echo "fuzz: $t for ${seconds}s"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/${t}_fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$out/$t/" "$out/$t" "$here/fuzz/corpora/$t" 2>"$out/$t.log" || {
    echo "fuzz: $t FAILED (log: $out/$t.log)"; tail -40 "$out/$t.log"; exit 1; }
  sed -n 's/^stat::number_of_executed_units: */  execs: /p; s/^stat::peak_rss_mb: */  peak rss MB: /p' "$out/$t.log"
done
