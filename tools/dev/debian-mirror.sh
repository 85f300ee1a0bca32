# Sourced by the root-filesystem scripts: debian_mirror prints the first Debian
# archive URI in apt's sources (deb822 .sources files or one-line
# sources.list), never the security archive.
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
