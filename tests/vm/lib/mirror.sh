# shellcheck shell=bash
# apt_mirror [APTDIR]: prints the Debian mirror the apt sources under APTDIR
# (default /etc/apt) use, without a trailing slash, or returns 1 and prints
# nothing when they name none. Read in apt's order: sources.list, then
# sources.list.d/*.list (one-line format) and *.sources (deb822), by name.
# Taken: binary ("deb") entries over http(s) (or a mirror+file: list of them)
# with the main component, never a security archive, never a disabled stanza. Third-party repositories also
# say "main", so a URI whose path ends in /debian (what Debian mirrors and
# caching proxies of them serve) wins over the first other candidate.
# Sourced by tests/vm/lib/common.sh; tests/vm/selftest/mirror_test.go feeds it
# fixture apt directories.
apt_mirror() {
  local dir=${1:-/etc/apt} f files=()
  [[ -f $dir/sources.list ]] && files+=("$dir/sources.list")
  for f in "$dir"/sources.list.d/*; do
    [[ -f $f && ( $f == *.list || $f == *.sources ) ]] && files+=("$f")
  done
  ((${#files[@]})) || return 1
  awk -v aptdir="$dir" '
    function consider(types, uris, comps,   n, u, i) {
      if (!(" " types " " ~ / deb /) || !(" " comps " " ~ / main /)) return
      n = split(uris, u, " ")
      for (i = 1; i <= n; i++) {
        if (u[i] ~ /^mirror\+file:/) u[i] = from_mirror_list(u[i])
        if (u[i] !~ /^https?:\/\// || u[i] ~ /-security\/?$/) continue
        sub(/\/+$/, "", u[i])
        if (u[i] ~ /\/debian$/) { if (best == "") best = u[i] }
        else if (other == "") other = u[i]
      }
    }
    # mirror+file:/etc/apt/mirrors/x.list (Debian cloud images): the first
    # http(s) mirror in that file; under a fixture APTDIR, /etc/apt/ is APTDIR.
    function from_mirror_list(uri,   path, line, f) {
      path = uri; sub(/^mirror\+file:(\/\/)?/, "", path)
      if (aptdir != "/etc/apt" && index(path, "/etc/apt/") == 1) path = aptdir "/" substr(path, 10)
      while ((getline line < path) > 0) {
        split(line, f, /[ \t]+/)
        if (f[1] ~ /^https?:\/\//) { close(path); return f[1] }
      }
      close(path)
      return ""
    }
    function flush() {
      if (inst && tolower(en) != "no" && tolower(en) != "false") consider(ty, ur, co)
      inst = 0; ty = ur = co = en = ""; last = ""
    }
    FNR == 1 { flush(); deb822 = FILENAME ~ /\.sources$/ }
    { sub(/\r$/, "") }
    /^[ \t]*#/ { next }
    !deb822 {
      sub(/#.*/, "")
      if ($1 != "deb") next
      i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      comps = ""
      for (j = i + 2; j <= NF; j++) comps = comps " " $j
      consider("deb", $i, comps)
      next
    }
    /^[ \t]*$/ { flush(); next }
    /^[ \t]/ { # a continuation line of the field before
      if (last == "uris") ur = ur " " $0
      else if (last == "types") ty = ty " " $0
      else if (last == "components") co = co " " $0
      next
    }
    {
      inst = 1
      key = tolower($1); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
      last = ""
      if (key == "types:") { ty = val; last = "types" }
      else if (key == "uris:") { ur = val; last = "uris" }
      else if (key == "components:") { co = val; last = "components" }
      else if (key == "enabled:") en = val
    }
    END {
      flush()
      m = best != "" ? best : other
      if (m == "") exit 1
      print m
    }
  ' "${files[@]}"
}
