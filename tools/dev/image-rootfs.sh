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
packages=$(grep -v '^#' "$src/deploy/image/packages" | paste -sd, -)

die() { echo "image-rootfs: $*" >&2; exit 1; }
# shellcheck source=debian-rootfs.sh
. "$src/tools/dev/debian-rootfs.sh"

base=$(rootfs_path "$suite" "$packages")
rootfs_lock
[ -f "$base/.turnfleet-rootfs" ] || rootfs_build "$suite" "$packages" "$base" "$rootfs_cache/image-rootfs-build.log"
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
