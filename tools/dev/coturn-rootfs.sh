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
cache=${TF_ROOTFS_CACHE:-/var/cache/turnfleet}
check_only=0
[ "${1:-}" = "--check" ] && check_only=1

die() { echo "coturn-rootfs: $*" >&2; exit 1; }

# shellcheck source=debian-mirror.sh
. "$(dirname "$0")/debian-mirror.sh"

key=$(printf '%s\n' "v1" "$suite" "$packages" "essential" "$(uname -m)" | sha256sum | cut -c1-16)
root="$cache/rootfs-$suite-$key"
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

mkdir -p "$cache"
exec 9>"$cache/.rootfs.lock"
flock 9
if valid; then
  echo "$root"
  exit 0
fi

command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is not installed (tools/dev/install-deps.sh installs it)"
[ "$(id -u)" -eq 0 ] || die "building the root filesystem needs root (mmdebstrap in root mode, chroot)"
uri=$(debian_mirror)
[ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d"

echo "coturn-rootfs: building Debian $suite with $packages into $root (about a minute)" >&2
rm -rf "$root" "$root.tmp"
# The mirror's unstable Release file can be past its Valid-Until date (a
# snapshot of the archive is served): apt would then refuse it as stale, so the
# check is skipped. The signatures are still verified against Debian's keyring.
if ! mmdebstrap --quiet --variant=essential --include="$packages" \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    "$suite" "$root.tmp" "$uri" >"$cache/rootfs-build.log" 2>&1; then
  rm -rf "$root.tmp"
  die "mmdebstrap failed (log: $cache/rootfs-build.log): $(tail -n 3 "$cache/rootfs-build.log" | tr '\n' ' ')"
fi
mv "$root.tmp" "$root"
{
  echo "suite=$suite"
  echo "packages=$packages"
  chroot "$root" dpkg-query -W -f='${Package}=${Version}\n' coturn kubernetes-client
} >"$marker"
valid || { rm -rf "$root"; die "the new root filesystem does not run turnserver and kubectl"; }
echo "$root"
