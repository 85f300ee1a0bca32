#!/usr/bin/env bash
# Build (once) and print the path of the Debian unstable root filesystem that
# carries coturn 4.18 and the newer kubectl the tests use:
#
#   tools/dev/coturn-rootfs.sh            print the path, building it when missing or broken
#   tools/dev/coturn-rootfs.sh --check    exit 0 only when a valid cache exists (never builds)
#
# The tree is made by mmdebstrap from Debian's packages, with the Debian mirror
# this machine's apt already uses. It is cached outside the clone (CI clones
# afresh every run) under $TF_ROOTFS_CACHE (default /var/cache/turnfleet), in
# a directory named after what it contains, so changing the package list or
# the suite builds a new one. A tree counts as valid when its marker file is
# there and its turnserver and kubectl run; anything else is rebuilt. Builds
# are serialised with a lock, so parallel tests wait for one build.
set -euo pipefail

suite=unstable
packages=coturn,kubernetes-client
check_only=0
[ "${1:-}" = "--check" ] && check_only=1

die() { echo "coturn-rootfs: $*" >&2; exit 1; }

# shellcheck source=debian-rootfs.sh
. "$(dirname "$0")/debian-rootfs.sh"

root=$(rootfs_path "$suite" "$packages")
marker="$root/.turnfleet-rootfs"

valid() {
  [ -f "$marker" ] &&
    chroot "$root" /usr/bin/turnserver --version >/dev/null 2>&1 &&
    chroot "$root" /usr/bin/kubectl version --client >/dev/null 2>&1
}

if [ "$check_only" = 1 ]; then
  valid && { echo "$root"; exit 0; }
  exit 1
fi

rootfs_lock
if valid; then
  echo "$root"
  exit 0
fi

# The mirror's unstable Release file can be past its Valid-Until date (a
# snapshot of the archive is served): apt would then refuse it as stale, so the
# check is skipped. The signatures are still verified against Debian's keyring.
rootfs_build "$suite" "$packages" "$root" "$rootfs_cache/rootfs-build.log" \
  --aptopt='Acquire::Check-Valid-Until "false"'
chroot "$root" dpkg-query -W -f='${Package}=${Version}\n' coturn kubernetes-client >>"$marker"
valid || { rm -rf "$root"; die "the new root filesystem does not run turnserver and kubectl"; }
echo "$root"
