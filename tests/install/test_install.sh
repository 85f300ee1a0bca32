#!/bin/sh
# Install the library into a scratch prefix, then build examples/c against the
# INSTALLED copy twice: with pkg-config (examples/c/Makefile) and with
# find_package(Turnfleet) (examples/c/CMakeLists.txt); run both. The installed tools
# run from the prefix with no LD_LIBRARY_PATH (RUNPATH $ORIGIN/../<libdir>).
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

# the library and the tools (component python: python_install tests it)
cmake --install "$build" --prefix "$prefix" --component Unspecified > "$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libturnfleet.so' | head -n 1)")
test -f "$libdir/libturnfleet.a" || { echo "static library not installed"; exit 1; }
test -f "$libdir/pkgconfig/turnfleet.pc" || { echo "turnfleet.pc not installed"; exit 1; }
test -f "$libdir/cmake/Turnfleet/TurnfleetConfig.cmake" || { echo "CMake package not installed"; exit 1; }
test -f "$prefix/include/turnfleet.h" || { echo "turnfleet.h not installed"; exit 1; }
if find "$prefix/include" -name 'internal.h' -o -name 'model.h' | grep -q .; then
  echo "private headers were installed"; exit 1
fi

# the installed tools run from the prefix alone, the library found through a relative RUNPATH
for tool in turnfleet turnfleet-probe-vantage turnfleet-webhook turnfleet-operator; do
  test -x "$prefix/bin/$tool" || { echo "$tool not installed"; exit 1; }
  readelf -d "$prefix/bin/$tool" | grep -q 'RUNPATH.*\$ORIGIN/\.\./' || { echo "$tool: no RUNPATH \$ORIGIN/../"; readelf -d "$prefix/bin/$tool"; exit 1; }
  (unset LD_LIBRARY_PATH; "$prefix/bin/$tool" --version) > "$tmp/$tool.version" 2>&1 || { echo "$tool does not run:"; cat "$tmp/$tool.version"; exit 1; }
  grep -q "^turnfleet[a-z-]* 0\.2\.0$" "$tmp/$tool.version" || { echo "$tool --version printed:"; cat "$tmp/$tool.version"; exit 1; }
  (unset LD_LIBRARY_PATH; ldd "$prefix/bin/$tool") | grep -q "libturnfleet.so.0.2 => $prefix/" || { echo "$tool does not load the installed library"; exit 1; }
done
# turnfleet-probe carries the library (static) and loads only OpenSSL and libc: a load test's start-up
test -x "$prefix/bin/turnfleet-probe" || { echo "turnfleet-probe not installed"; exit 1; }
(unset LD_LIBRARY_PATH; "$prefix/bin/turnfleet-probe" --version) | grep -q '^turnfleet-probe 0\.2\.0$' || { echo "turnfleet-probe does not run"; exit 1; }
if (unset LD_LIBRARY_PATH; ldd "$prefix/bin/turnfleet-probe") | grep -E -q 'libturnfleet|libcurl|libyaml'; then
  echo "turnfleet-probe loads more than it probes with:"; ldd "$prefix/bin/turnfleet-probe"; exit 1
fi
# and the prefix can move: the RUNPATH is relative
mv "$prefix" "$tmp/moved"
(unset LD_LIBRARY_PATH; "$tmp/moved/bin/turnfleet" --version) | grep -q '^turnfleet 0\.2\.0$' || { echo "a moved prefix does not run"; exit 1; }
mv "$tmp/moved" "$prefix"

pool=$src/examples/pools/loopback.yaml
nodes=$src/examples/nodes/loopback.json

# 1. pkg-config
mkdir "$tmp/pc"
cp "$src/examples/c/plan.c" "$src/examples/c/Makefile" "$tmp/pc/"
PKG_CONFIG_PATH=$libdir/pkgconfig make -s -C "$tmp/pc" plan
LD_LIBRARY_PATH=$libdir "$tmp/pc/plan" "$pool" "$nodes" > "$tmp/pc.out"
grep -q '^libturnfleet 0\.2\.0: pool demo, 3 relays$' "$tmp/pc.out" || { echo "pkg-config build printed:"; cat "$tmp/pc.out"; exit 1; }
# it really links the installed shared library
LD_LIBRARY_PATH=$libdir ldd "$tmp/pc/plan" | grep -q "$libdir/libturnfleet.so.0.2" || { echo "not linked to the installed library"; exit 1; }

# 2. find_package(Turnfleet)
cmake -S "$src/examples/c" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cm.log"
cmake --build "$tmp/cm" > "$tmp/cm-build.log"
LD_LIBRARY_PATH=$libdir "$tmp/cm/plan" "$pool" "$nodes" > "$tmp/cm.out"
cmp "$tmp/pc.out" "$tmp/cm.out" || { echo "pkg-config and find_package builds disagree"; exit 1; }
echo "install: examples/c built with pkg-config and find_package(Turnfleet) against $(basename "$libdir")/libturnfleet.so.0.2:"
cat "$tmp/cm.out"
