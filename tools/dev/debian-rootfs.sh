# Sourced by the root-filesystem scripts (coturn-rootfs.sh, image-rootfs.sh),
# which define die() first. Their trees are cached under $TF_ROOTFS_CACHE
# (default /var/cache/turnfleet), named after what they contain.

rootfs_cache=${TF_ROOTFS_CACHE:-/var/cache/turnfleet}

# rootfs_path SUITE PACKAGES: where the tree of that suite and package list lives.
rootfs_path() {
  local key
  key=$(printf '%s\n' "v1" "$1" "$2" "essential" "$(uname -m)" | sha256sum | cut -c1-16)
  echo "$rootfs_cache/rootfs-$1-$key"
}

# rootfs_build SUITE PACKAGES ROOT LOG [MMDEBSTRAP OPTION]...: build ROOT afresh
# with mmdebstrap from the mirror apt uses (ROOT.tmp, then renamed: a failed
# build leaves nothing), and write its marker's suite and package lines. The
# caller holds the cache lock.
rootfs_build() {
  local suite=$1 packages=$2 root=$3 log=$4 uri
  shift 4
  command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is not installed (tools/dev/install-deps.sh installs it)"
  [ "$(id -u)" -eq 0 ] || die "building the root filesystem needs root (mmdebstrap in root mode, chroot)"
  uri=$(debian_mirror)
  [ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d"
  echo "${0##*/}: building Debian $suite with $packages into $root" >&2
  rm -rf "$root" "$root.tmp"
  if ! mmdebstrap --quiet --variant=essential --include="$packages" "$@" \
      "$suite" "$root.tmp" "$uri" >"$log" 2>&1; then
    rm -rf "$root.tmp"
    die "mmdebstrap failed (log: $log): $(tail -n 3 "$log" | tr '\n' ' ')"
  fi
  mv "$root.tmp" "$root"
  { echo "suite=$suite"; echo "packages=$packages"; } >"$root/.turnfleet-rootfs"
}

# rootfs_lock: serialise builds across processes (parallel tests wait for one).
rootfs_lock() {
  mkdir -p "$rootfs_cache"
  exec 9>"$rootfs_cache/.rootfs.lock"
  flock 9
}

# debian_mirror prints the first Debian archive URI in apt's sources (deb822
# .sources files or one-line sources.list), never the security archive.
debian_mirror() {
  local f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk '
      /^[Uu][Rr][Ii][Ss]:/ { u = $2 }
      /^[Ss]uites:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) s = 1 }
      /^$/ { if (u != "" && s && u !~ /security/) { print u; exit } u = ""; s = 0 }
      END { if (u != "" && s && u !~ /security/) print u }' "$f" | head -n 1)
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { if ($i !~ /security/ && $(i+1) !~ /security/) { print $i; exit } break } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
}
