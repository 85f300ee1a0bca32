#!/usr/bin/env bash
# Build the Turnfleet image's contents as a root filesystem and print its path:
# Debian 12 with the packages in deploy/image/packages (mmdebstrap, the mirror
# this machine's apt uses), plus the project's install tree from BUILD_DIR
# installed by deploy/image/install-tree.sh — the same two steps as
# deploy/image/Dockerfile. The stand-in kubelet runs the image's pods chrooted
# into it, so the image is proven, not just written.
#
#   tools/dev/image-rootfs.sh BUILD_DIR [OUT_DIR]   (OUT_DIR defaults to BUILD_DIR/image-root)
#
# The Debian part is cached outside the clone under $TF_ROOTFS_CACHE (default
# /var/cache/turnfleet), named after the package list, and built once (with a
# lock); OUT_DIR is made afresh each call: hard links to the cached tree (never
# written through: the install adds files under /usr/local only), then the
# install tree, then ldconfig. Every installed executable must start inside it
# as uid 65532 (`--version`), or the script fails naming the one that did not.
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: tools/dev/image-rootfs.sh BUILD_DIR [OUT_DIR]" >&2; exit 2; }
build=$(cd "$1" && pwd)
out=${2:-$build/image-root}
suite=bookworm
cache=${TF_ROOTFS_CACHE:-/var/cache/turnfleet}
packages=$(grep -v '^#' "$src/deploy/image/packages" | paste -sd, -)

die() { echo "image-rootfs: $*" >&2; exit 1; }
# shellcheck source=debian-mirror.sh
. "$src/tools/dev/debian-mirror.sh"

key=$(printf '%s\n' "v1" "$suite" "$packages" "essential" "$(uname -m)" | sha256sum | cut -c1-16)
base="$cache/rootfs-$suite-$key"
marker="$base/.turnfleet-rootfs"

mkdir -p "$cache"
exec 9>"$cache/.rootfs.lock"
flock 9
if ! [ -f "$marker" ]; then
  command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is not installed (tools/dev/install-deps.sh installs it)"
  [ "$(id -u)" -eq 0 ] || die "building the root filesystem needs root (mmdebstrap in root mode, chroot)"
  uri=$(debian_mirror)
  [ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d"
  echo "image-rootfs: building Debian $suite with $packages into $base" >&2
  rm -rf "$base" "$base.tmp"
  if ! mmdebstrap --quiet --variant=essential --include="$packages" \
      "$suite" "$base.tmp" "$uri" >"$cache/image-rootfs-build.log" 2>&1; then
    rm -rf "$base.tmp"
    die "mmdebstrap failed (log: $cache/image-rootfs-build.log): $(tail -n 3 "$cache/image-rootfs-build.log" | tr '\n' ' ')"
  fi
  mv "$base.tmp" "$base"
  { echo "suite=$suite"; echo "packages=$packages"; } >"$marker"
fi
exec 9>&-

rm -rf "$out"
cp -al "$base" "$out" 2>/dev/null || { rm -rf "$out"; cp -a "$base" "$out"; }
rm -f "$out/.turnfleet-rootfs"
sh "$src/deploy/image/install-tree.sh" "$build" "$out"
chroot "$out" /sbin/ldconfig
n=0
for exe in "$out"/usr/local/bin/*; do
  name=${exe##*/}
  chroot --userspec=65532:65532 "$out" "/usr/local/bin/$name" --version >/dev/null 2>"$out.err" ||
    die "/usr/local/bin/$name does not start in the image: $(head -c 300 "$out.err")"
  n=$((n + 1))
done
rm -f "$out.err"
[ "$n" -gt 0 ] || die "no executable was installed from $build"
echo "$out"
