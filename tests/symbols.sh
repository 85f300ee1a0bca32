#!/bin/sh
# Each shared library exports exactly the tf_* symbols of its section of docs/symbols.txt, under its
# own version node: libturnfleet [libturnfleet] under tf_<soname> and [private] under tf_private,
# libturnfleet-kube [libturnfleet-kube] under tf_kube_<soname>. Every public symbol is declared with
# TF_EXTERN in a public header, each header's symbols all come from one library, and no private
# symbol is in a public header.
# usage: symbols.sh SYMBOLS_TXT INCLUDE_DIR LIBTURNFLEET LIBTURNFLEET_KUBE
set -eu
list=$1 inc=$2 lib=$3 kube=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name and version node of every defined dynamic symbol but the nodes themselves (absolute, "A")
exports() { nm -D --defined-only "$1" | awk '$2 != "A" {n = $NF; v = n; sub(/@.*/, "", n); sub(/^[^@]*@+/, "", v); print n, v}'; }
# the names of one section of the list
section() { awk -v s="[$1]" '/^#/ || !NF {next} /^\[/ {on = ($1 == s); next} on {print $1}' "$list" | sort -u; }

soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'; }
status=0
so=$(soname "$lib") kso=$(soname "$kube")
case "$so" in libturnfleet.so.[0-9]*) ;; *) echo "symbols: unexpected SONAME '$so'"; status=1 ;; esac
case "$kso" in libturnfleet-kube.so.[0-9]*) ;; *) echo "symbols: unexpected SONAME '$kso'"; status=1 ;; esac
ver=${so#libturnfleet.so.}

exports "$lib" > "$tmp/lib"
exports "$kube" > "$tmp/kube"
for l in "$lib" "$kube"; do  # the version nodes included
  if nm -D --defined-only "$l" | awk '{print $NF}' | sed 's/@.*//' | grep -v '^tf_' > "$tmp/foreign"; then
    echo "symbols: $(basename "$l") exports non-tf_ symbols:"; cat "$tmp/foreign"; status=1
  fi
done

# name section node: what each library must export, under which node
check() { # FILE NODE SECTION
  awk -v v="$2" '$2 == v {print $1}' "$tmp/$1" | sort -u > "$tmp/got"
  section "$3" > "$tmp/want"
  if ! diff -u "$tmp/want" "$tmp/got" > "$tmp/d"; then
    echo "symbols: docs/symbols.txt [$3] (-) and the exports under $2 (+) disagree:"; cat "$tmp/d"; status=1
  fi
}
check lib "tf_$ver" libturnfleet
check lib tf_private private
check kube "tf_kube_$ver" libturnfleet-kube
if awk -v a="tf_$ver" '$2 != a && $2 != "tf_private"' "$tmp/lib" | grep . > "$tmp/other"; then
  echo "symbols: libturnfleet exports under another node:"; cat "$tmp/other"; status=1
fi
if awk -v a="tf_kube_$ver" '$2 != a' "$tmp/kube" | grep . > "$tmp/other"; then
  echo "symbols: libturnfleet-kube exports under another node:"; cat "$tmp/other"; status=1
fi

# the public sections and the TF_EXTERN declarations
{ section libturnfleet; section libturnfleet-kube; } | sort > "$tmp/listed"
decl() { grep -rhoE 'TF_EXTERN\([^)]*\)[[:space:]]*tf_[a-z0-9_]+' "$@" | sed -E 's/.*(tf_[a-z0-9_]+)$/\1/' | sort -u; }
decl "$inc" > "$tmp/declared"
if ! diff -u "$tmp/listed" "$tmp/declared" > "$tmp/d"; then
  echo "symbols: docs/symbols.txt (-) and the TF_EXTERN declarations (+) disagree:"; cat "$tmp/d"; status=1
fi
section private > "$tmp/private"
if grep -rhoE 'tf_[a-z0-9_]+__[a-z0-9_]*' "$inc" | sort -u | comm -12 - "$tmp/private" | grep . > "$tmp/d"; then
  echo "symbols: private symbols in a public header:"; cat "$tmp/d"; status=1
fi
# one header, one library
section libturnfleet > "$tmp/turn"
section libturnfleet-kube > "$tmp/kubes"
for h in "$inc"/turnfleet/*.h; do
  decl "$h" > "$tmp/h"
  t=$(comm -12 "$tmp/h" "$tmp/turn" | wc -l) k=$(comm -12 "$tmp/h" "$tmp/kubes" | wc -l)
  if [ "$t" -gt 0 ] && [ "$k" -gt 0 ]; then
    echo "symbols: $(basename "$h") declares symbols of both libraries ($t of libturnfleet, $k of libturnfleet-kube)"
    status=1
  fi
done

[ $status -eq 0 ] && echo "symbols: $(wc -l < "$tmp/turn") tf_* symbols in $so (tf_$ver, and $(wc -l < "$tmp/private") under tf_private)," \
  "$(wc -l < "$tmp/kubes") in $kso (tf_kube_$ver): exported, listed and declared"
exit $status
