#!/bin/sh
# The shared library exports exactly the tf_* symbols listed in docs/symbols.txt,
# and each is declared with TF_EXTERN in a public header.
# usage: symbols.sh LIBRARY SYMBOLS_TXT INCLUDE_DIR
set -eu
lib=$1 list=$2 inc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u > "$tmp/all"
# the version node (an absolute symbol, tf_<soname>) is not an API symbol
nm -D --defined-only "$lib" | awk '$2 != "A" {print $NF}' | sed 's/@.*//' | sort -u > "$tmp/exported"
grep -v '^#' "$list" | awk 'NF {print $1}' | sort -u > "$tmp/listed"
grep -rhoE 'TF_EXTERN\([^)]*\)[[:space:]]*tf_[a-z0-9_]+' "$inc" | sed -E 's/.*(tf_[a-z0-9_]+)$/\1/' | sort -u > "$tmp/declared"

status=0
if grep -v '^tf_' "$tmp/all" > "$tmp/foreign"; then
  echo "symbols: the library exports non-tf_ symbols:"; cat "$tmp/foreign"; status=1
fi
if ! diff -u "$tmp/listed" "$tmp/exported" > "$tmp/d1"; then
  echo "symbols: docs/symbols.txt (-) and the library's exports (+) disagree:"; cat "$tmp/d1"; status=1
fi
if ! diff -u "$tmp/listed" "$tmp/declared" > "$tmp/d2"; then
  echo "symbols: docs/symbols.txt (-) and the TF_EXTERN declarations (+) disagree:"; cat "$tmp/d2"; status=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
case "$soname" in
  libturnfleet.so.[0-9]*) ;;
  *) echo "symbols: unexpected SONAME '$soname'"; status=1 ;;
esac
[ $status -eq 0 ] && echo "symbols: $(wc -l < "$tmp/exported") tf_* symbols exported, listed and declared; SONAME $soname"
exit $status
