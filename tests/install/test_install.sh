#!/bin/sh
# Install the libraries into a scratch prefix, then build examples/c against the
# INSTALLED copies twice: with pkg-config (examples/c/Makefile) and with
# find_package(Turnfleet) (examples/c/CMakeLists.txt); run both: plan links libturnfleet
# alone, event libturnfleet-kube (which brings libturnfleet). Then without libturnfleet-kube
# in the prefix, plan still builds both ways. The installed tools run from the prefix with
# no LD_LIBRARY_PATH (RUNPATH $ORIGIN/../<libdir>).
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

# the library and the tools (component python: python_install tests it)
cmake --install "$build" --prefix "$prefix" --component Unspecified > "$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libturnfleet.so' | head -n 1)")
for f in libturnfleet.a libturnfleet-kube.so libturnfleet-kube.a pkgconfig/turnfleet.pc pkgconfig/turnfleet-kube.pc \
  cmake/Turnfleet/TurnfleetConfig.cmake cmake/Turnfleet/TurnfleetTargets.cmake cmake/Turnfleet/TurnfleetKubeTargets.cmake; do
  test -f "$libdir/$f" || { echo "$f not installed"; exit 1; }
done
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
  (unset LD_LIBRARY_PATH; ldd "$prefix/bin/$tool") > "$tmp/$tool.ldd"
  grep -q "libturnfleet.so.0.2 => $prefix/" "$tmp/$tool.ldd" || { echo "$tool does not load the installed library"; exit 1; }
  # the Kubernetes tools link libturnfleet-kube, the CLI does not
  case $tool in turnfleet) kube=0 ;; *) kube=1 ;; esac
  if [ "$(grep -c "libturnfleet-kube.so.0.2 => $prefix/" "$tmp/$tool.ldd")" != $kube ]; then
    echo "$tool: libturnfleet-kube loaded $(grep -c "libturnfleet-kube" "$tmp/$tool.ldd") times, expected $kube:"; cat "$tmp/$tool.ldd"; exit 1
  fi
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
# the Event body event prints (cJSON's formatted output: one member a line)
event_ok() {
  head -n 1 "$1" | grep -q '^libturnfleet-kube 0\.2\.0: {$' && grep -q '"kind":[[:space:]]*"Event"' "$1" &&
    grep -q '"reason":[[:space:]]*"Installed"' "$1" && grep -q '"message":[[:space:]]*"from the prefix"' "$1"
}

# 1. pkg-config
mkdir "$tmp/pc"
cp "$src/examples/c/plan.c" "$src/examples/c/event.c" "$src/examples/c/Makefile" "$tmp/pc/"
PKG_CONFIG_PATH=$libdir/pkgconfig make -s -C "$tmp/pc" plan event
LD_LIBRARY_PATH=$libdir "$tmp/pc/plan" "$pool" "$nodes" > "$tmp/pc.out"
grep -q '^libturnfleet 0\.2\.0: pool demo, 3 relays$' "$tmp/pc.out" || { echo "pkg-config build printed:"; cat "$tmp/pc.out"; exit 1; }
LD_LIBRARY_PATH=$libdir "$tmp/pc/event" "$pool" Installed "from the prefix" > "$tmp/pc-event.out"
event_ok "$tmp/pc-event.out" || { echo "pkg-config build of event printed:"; cat "$tmp/pc-event.out"; exit 1; }
# they really link the installed shared libraries: plan libturnfleet alone, event both
LD_LIBRARY_PATH=$libdir ldd "$tmp/pc/plan" > "$tmp/plan.ldd"
grep -q "$libdir/libturnfleet.so.0.2" "$tmp/plan.ldd" || { echo "plan: not linked to the installed library"; exit 1; }
if grep -q "libturnfleet-kube" "$tmp/plan.ldd"; then echo "plan: links libturnfleet-kube"; cat "$tmp/plan.ldd"; exit 1; fi
LD_LIBRARY_PATH=$libdir ldd "$tmp/pc/event" > "$tmp/event.ldd"
grep -q "$libdir/libturnfleet-kube.so.0.2" "$tmp/event.ldd" && grep -q "$libdir/libturnfleet.so.0.2" "$tmp/event.ldd" ||
  { echo "event: not linked to both installed libraries"; cat "$tmp/event.ldd"; exit 1; }

# 2. find_package(Turnfleet COMPONENTS kube)
cmake -S "$src/examples/c" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cm.log"
cmake --build "$tmp/cm" > "$tmp/cm-build.log"
LD_LIBRARY_PATH=$libdir "$tmp/cm/plan" "$pool" "$nodes" > "$tmp/cm.out"
cmp "$tmp/pc.out" "$tmp/cm.out" || { echo "pkg-config and find_package builds disagree"; exit 1; }
LD_LIBRARY_PATH=$libdir "$tmp/cm/event" "$pool" Installed "from the prefix" > "$tmp/cm-event.out"
cmp "$tmp/pc-event.out" "$tmp/cm-event.out" || { echo "pkg-config and find_package builds of event disagree"; exit 1; }
LD_LIBRARY_PATH=$libdir ldd "$tmp/cm/plan" | grep -q "libturnfleet-kube" && { echo "find_package: plan links libturnfleet-kube"; exit 1; }

# 3. a prefix without libturnfleet-kube: a consumer of libturnfleet alone does not need it
rm -f "$libdir"/libturnfleet-kube.* "$libdir/pkgconfig/turnfleet-kube.pc" "$libdir"/cmake/Turnfleet/TurnfleetKubeTargets*.cmake
mkdir "$tmp/pc-alone"
cp "$src/examples/c/plan.c" "$src/examples/c/Makefile" "$tmp/pc-alone/"
PKG_CONFIG_PATH=$libdir/pkgconfig make -s -C "$tmp/pc-alone" plan
LD_LIBRARY_PATH=$libdir "$tmp/pc-alone/plan" "$pool" "$nodes" | cmp - "$tmp/pc.out" || { echo "plan without libturnfleet-kube differs"; exit 1; }
cmake -S "$src/examples/c" -B "$tmp/cm-alone" -DCMAKE_PREFIX_PATH="$prefix" -DTF_EXAMPLE_KUBE=OFF > "$tmp/cm-alone.log"
cmake --build "$tmp/cm-alone" > "$tmp/cm-alone-build.log"
LD_LIBRARY_PATH=$libdir "$tmp/cm-alone/plan" "$pool" "$nodes" | cmp - "$tmp/pc.out" || { echo "find_package plan without libturnfleet-kube differs"; exit 1; }
# and asking for the component says it is missing
if cmake -S "$src/examples/c" -B "$tmp/cm-missing" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cm-missing.log" 2>&1; then
  echo "find_package(Turnfleet COMPONENTS kube) succeeded without libturnfleet-kube"; exit 1
fi
grep -q "kube" "$tmp/cm-missing.log" || { echo "the missing component is not named:"; cat "$tmp/cm-missing.log"; exit 1; }

echo "install: examples/c built with pkg-config and find_package(Turnfleet) against $(basename "$libdir")/libturnfleet.so.0.2 (plan)"
echo "and libturnfleet-kube.so.0.2 (event), and plan again without libturnfleet-kube in the prefix:"
cat "$tmp/cm.out" "$tmp/cm-event.out"
