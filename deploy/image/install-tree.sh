#!/bin/sh
# Install what the image carries from a CMake build into DESTDIR: the
# executables and the shared libraries under /usr/local, nothing for building
# against them (headers, static libraries, pkg-config and CMake files).
# usage: deploy/image/install-tree.sh BUILD_DIR DESTDIR
set -eu
build=$1 dest=$2
DESTDIR=$dest cmake --install "$build" --prefix /usr/local --component Unspecified >/dev/null
rm -rf "$dest/usr/local/include" "$dest/usr/local/lib/cmake" "$dest/usr/local/lib/pkgconfig"
rm -f "$dest/usr/local/lib/libturnfleet.a" "$dest/usr/local/lib/libturnfleet.so" \
  "$dest/usr/local/lib/libturnfleet-kube.a" "$dest/usr/local/lib/libturnfleet-kube.so"
