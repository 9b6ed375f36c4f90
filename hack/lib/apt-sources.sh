# hack/lib/apt-sources.sh: the machine's own apt configuration, for builds that fetch Debian
# packages outside apt (debootstrap in hack/images.sh). Sourced; defines functions only.
#
# apt_debian_mirror SUITE: prints the URI of the machine's apt source for Debian SUITE, read from
#   $APT_ROOT/etc/apt/sources.list and $APT_ROOT/etc/apt/sources.list.d/*.list (one-line format)
#   and *.sources (deb822 format); APT_ROOT defaults to empty (the machine's own /etc/apt).
#   Only enabled "deb" entries with the component "main" and an http, https, ftp or file URI
#   count. The first entry of SUITE itself wins; failing that, the first entry of another Debian
#   release (a suite without a "-updates"/"-security"-like suffix, on a URI ending in /debian),
#   since a Debian mirror serves every release. Prints nothing and returns 1 when none is found.
# apt_http_proxy: prints Acquire::http::Proxy of the machine's apt configuration (apt-config dump),
#   nothing when unset, "DIRECT" or "false", or when apt-config is missing.
# apt_proxy_from_dump: the same, from `apt-config dump` output on stdin (for tests).

# apt_source_entries prints one line "URI SUITE COMPONENTS..." per enabled deb entry of every
# sources file, in apt's order: sources.list first, then sources.list.d in name order.
apt_source_entries() {
  local etc=${APT_ROOT:-}/etc/apt f
  if [ -f "$etc/sources.list" ]; then apt_list_entries <"$etc/sources.list"; fi
  for f in "$etc"/sources.list.d/*; do
    [ -f "$f" ] || continue
    case $f in
      *.list) apt_list_entries <"$f" ;;
      *.sources) apt_deb822_entries <"$f" ;;
    esac
  done
}

# apt_list_entries: one-line-style entries ("deb [opts] URI SUITE COMPONENT...").
apt_list_entries() {
  sed -e 's/#.*//' -e 's/\[[^]]*\]//' | awk '$1 == "deb" && NF >= 4 { $1 = ""; sub(/^ /, ""); print }'
}

# apt_deb822_entries: deb822 stanzas (Types, URIs, Suites, Components, Enabled), every URI ×
# suite of a stanza whose Types include deb. Continuation lines and comments are skipped.
apt_deb822_entries() {
  awk '
    function flush(   i, j, nu, ns, u, s) {
      if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no") {
        nu = split(uris, u, " "); ns = split(suites, s, " ")
        for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j], comps
      }
      types = uris = suites = comps = ""; enabled = "yes"
    }
    BEGIN { enabled = "yes" }
    /^[ \t]*#/ { next }
    /^[ \t]*$/ { flush(); next }
    /^[ \t]/ { next }
    {
      key = tolower($0); sub(/:.*/, "", key)
      val = $0; sub(/^[^:]*:[ \t]*/, "", val); gsub(/[ \t]+/, " ", val)
      if (key == "types") types = val
      else if (key == "uris") uris = val
      else if (key == "suites") suites = val
      else if (key == "components") comps = val
      else if (key == "enabled") enabled = val
    }
    END { flush() }
  '
}

apt_debian_mirror() {
  local suite=$1
  apt_source_entries | awk -v suite="$suite" '
    $1 !~ /^(https?|ftp|file):/ { next }
    { main = 0; for (i = 3; i <= NF; i++) if ($i == "main") main = 1 }
    !main { next }
    { uri = $1; sub(/\/+$/, "", uri) }
    $2 == suite && exact == "" { exact = uri }
    $2 !~ /[-\/]/ && uri ~ /\/debian$/ && other == "" { other = uri }
    END {
      if (exact != "") print exact
      else if (other != "") print other
      else exit 1
    }
  '
}

apt_proxy_from_dump() {
  sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | head -n1 | grep -vixE 'direct|false|' || true
}

apt_http_proxy() {
  command -v apt-config >/dev/null 2>&1 || return 0
  apt-config dump Acquire::http::Proxy 2>/dev/null | apt_proxy_from_dump
}
