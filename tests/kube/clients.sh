#!/usr/bin/env bash
# Print the real clients the stand-in's conformance suite drives, one
# "NAME PATH" a line, fetching what is missing:
#
#   kubectl-1.20   Debian 12's kubernetes-client, `apt-get download` + `dpkg -x`
#                  into a cache outside the clone (never installed: its
#                  /usr/bin/kubectl clashes with the machine's)
#   kubectl-rootfs the kubectl of the Debian unstable root filesystem
#                  (tools/dev/coturn-rootfs.sh)
#   kubectl-host   /usr/bin/kubectl when the machine has one
#
# python3-kubernetes comes from tools/dev/install-deps.sh (/usr/bin/python3).
# A client that cannot be had is an error (exit 1), never a silent skip.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${TF_ROOTFS_CACHE:-/var/cache/turnfleet}
die() { echo "clients: $*" >&2; exit 1; }

k120="$cache/kubectl-1.20"
if ! "$k120/usr/bin/kubectl" version --client >/dev/null 2>&1; then
  mkdir -p "$cache"
  exec 9>"$cache/.kubectl-1.20.lock"
  flock 9
  if ! "$k120/usr/bin/kubectl" version --client >/dev/null 2>&1; then
    tmp=$(mktemp -d "$cache/.kubectl-1.20.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    # bookworm's kubernetes-client is 1.20 ("1.20.5+really1.20.2")
    (cd "$tmp" && apt-get download -q kubernetes-client/bookworm >/dev/null 2>&1 ||
       apt-get download -q kubernetes-client >/dev/null) || die "apt-get download kubernetes-client failed"
    deb=$(ls "$tmp"/kubernetes-client_*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || die "no kubernetes-client package downloaded"
    case "$deb" in *_1.20.*) ;; *) die "downloaded $deb, not kubectl 1.20" ;; esac
    dpkg -x "$deb" "$tmp/root"
    rm -rf "$k120"
    mv "$tmp/root" "$k120"
  fi
  flock -u 9
fi
echo "kubectl-1.20 $k120/usr/bin/kubectl"

root=$("$src/tools/dev/coturn-rootfs.sh") || die "no Debian unstable root filesystem"
[ -x "$root/usr/bin/kubectl" ] || die "$root has no kubectl"
# Debian's kubectl is a Go binary linked against libc only (GLIBC_2.34 at most
# today): it runs on the host as it is. Should a newer one need a newer glibc,
# say so here rather than fail inside a test.
"$root/usr/bin/kubectl" version --client >/dev/null 2>&1 ||
  die "$root/usr/bin/kubectl does not run on this host (glibc?): $(ldd "$root/usr/bin/kubectl" 2>&1 | tr '\n' ' ')"
echo "kubectl-rootfs $root/usr/bin/kubectl"

if [ -e /usr/bin/kubectl ]; then
  echo "kubectl-host /usr/bin/kubectl"
fi
