#!/bin/sh
# Install the library into a scratch prefix, then build examples/c against the
# INSTALLED copy twice: with pkg-config (examples/c/Makefile) and with
# find_package(Turnfleet) (examples/c/CMakeLists.txt); run both.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

# the library only: component python goes to the interpreter's site-packages (python_install tests it)
cmake --install "$build" --prefix "$prefix" --component Unspecified > "$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libturnfleet.so' | head -n 1)")
test -f "$libdir/libturnfleet.a" || { echo "static library not installed"; exit 1; }
test -f "$libdir/pkgconfig/turnfleet.pc" || { echo "turnfleet.pc not installed"; exit 1; }
test -f "$libdir/cmake/Turnfleet/TurnfleetConfig.cmake" || { echo "CMake package not installed"; exit 1; }
test -f "$prefix/include/turnfleet.h" || { echo "turnfleet.h not installed"; exit 1; }
if find "$prefix/include" -name 'internal.h' -o -name 'model.h' | grep -q .; then
  echo "private headers were installed"; exit 1
fi

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
