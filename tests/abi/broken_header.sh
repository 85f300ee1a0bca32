#!/bin/sh
# The ABI guard must catch a break: build the library again from a copy of the
# public headers with one deliberate incompatible change (tf_port_range's fields
# widened from uint16_t to uint32_t, same SONAME) and expect check_abi.sh to fail
# on it, then expect it to pass on the real library.
# usage: broken_header.sh SOURCE_DIR BUILD_DIR REAL_LIBRARY BASELINE
set -eu
src=$1 build=$2 real=$3 baseline=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp -r "$src/libturnfleet/include" "$tmp/include"
sed -i 's/^  uint16_t start;$/  uint32_t start;/; s/^  uint16_t end;$/  uint32_t end;/' "$tmp/include/turnfleet/addr.h"
if cmp -s "$src/libturnfleet/include/turnfleet/addr.h" "$tmp/include/turnfleet/addr.h"; then
  echo "broken_header: the deliberate break did not apply (addr.h changed?)"; exit 1
fi
echo "broken_header: the deliberate break, in a copy of include/turnfleet/addr.h:"
diff -u "$src/libturnfleet/include/turnfleet/addr.h" "$tmp/include/turnfleet/addr.h" | sed -n '3,$p' | grep '^[-+]' || true

# libturnfleet's layers (libturnfleet/CMakeLists.txt)
layers="base turn probe relayctl"
soname=$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
# shellcheck disable=SC2046
cc -shared -fPIC -g -O0 -std=c11 -D_GNU_SOURCE -fvisibility=hidden \
  -I "$tmp/include" $(for d in $layers; do printf ' -I %s' "$src/libturnfleet/src/$d"; done) $(pkg-config --cflags libcjson yaml-0.1 libssl libcrypto) \
  -Wl,-soname,"$soname" -Wl,--version-script="$build/libturnfleet/turnfleet.map" \
  -o "$tmp/$soname" $(for d in $layers; do printf ' %s' "$src/libturnfleet/src/$d"/*.c; done) $(pkg-config --libs libcjson yaml-0.1 libssl libcrypto) -lm \
  > "$tmp/cc.log" 2>&1 || { echo "broken_header: cannot build the broken library:"; cat "$tmp/cc.log"; exit 1; }

if sh "$(dirname "$0")/check_abi.sh" "$tmp/$soname" "$baseline" "$tmp/include" > "$tmp/broken.out" 2>&1; then
  echo "broken_header: FAIL: the ABI guard accepted the broken library:"; cat "$tmp/broken.out"; exit 1
fi
echo "broken_header: the ABI guard rejected the broken library, as it must:"
sed 's/^/  | /' "$tmp/broken.out"
grep -q 'tf_port_range' "$tmp/broken.out" || { echo "broken_header: FAIL: the report does not name tf_port_range"; exit 1; }
sh "$(dirname "$0")/check_abi.sh" "$real" "$baseline" "$src/libturnfleet/include"
echo "broken_header: and it accepts the real library"
