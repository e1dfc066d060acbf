# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh and the other libs read
# Debian packages for the VM, fetched with apt-get into a private apt state per suite so
# the host's apt configuration and lists are never touched. Every download lands under
# $VMCACHE (one ignored folder): apt/<suite>/ holds lists, debs/<suite>/ the .debs.

# Packages never worth following when closing a dependency set: maintainer-script and
# system plumbing that an initramfs running one /init does not need. Pruning them also
# prunes what only they depend on (perl, debconf, PAM, systemd).
DENY_PKGS=" debconf cdebconf perl-base perl dpkg libc-bin coreutils base-files base-passwd
  init-system-helpers adduser lsb-base sysvinit-utils usrmerge usr-is-merged libpam-runtime
  libpam-modules libpam-modules-bin passwd login tzdata systemd systemd-sysv udev
  libcap2-bin python3 mount util-linux bash dash readline-common sensible-utils
  opensysusers systemd-standalone-sysusers systemd-sysusers
  libamdhip64-* libamd-comgr* libhsa-runtime64-* libhsakmt* libllvm* libclang* libze1
  ocl-icd-libopencl1 libxnvctrl0 libz3-* "
# The last line: GPU runtimes (~270 MB) that UCX and Open MPI reach only through
# plugins they dlopen and skip when absent; without them a trixie image with ucx-utils
# is ~60 MB instead of ~300 MB and boots 10 s sooner.

# denied PKG: PKG matches one of DENY_PKGS or VM_DENY_DEBS (shell patterns).
DENY_PATTERNS=()
denied() {
  local pat
  if ((${#DENY_PATTERNS[@]} == 0)); then
    read -r -d '' -a DENY_PATTERNS <<<"$DENY_PKGS ${VM_DENY_DEBS:-}" || true  # no globbing
  fi
  for pat in "${DENY_PATTERNS[@]}"; do
    # shellcheck disable=SC2053 # pat is a pattern on purpose
    [[ $1 == $pat ]] && return 0
  done
  return 1
}

# Ubuntu releases usable as a guest userland (never as KSUITE: the kernel stays Debian's).
# They are what container images of PyTorch, vLLM and NCCL are built on.
UBUNTU_SUITES=" jammy noble resolute "
UBUNTU_MIRROR=${UBUNTU_MIRROR:-}

# ubuntu_suite SUITE: true for an Ubuntu release.
ubuntu_suite() { [[ $UBUNTU_SUITES == *" $1 "* ]]; }

# ubuntu_keyring: the path of Ubuntu's archive keyring, taken from Debian trixie's
# ubuntu-keyring package (bookworm has none), which apt verified against Debian's own
# keys; cached under $VMCACHE/keyrings. Called in a subshell: its apt_use trixie does
# not change the caller's APTOPTS.
ubuntu_keyring() {
  local kr="$VMCACHE/keyrings/ubuntu-archive-keyring.gpg" deb tmp
  if [[ ! -s $kr ]]; then
    apt_use trixie
    deb=$(apt_fetch "$VMCACHE/debs/trixie" ubuntu-keyring) || exit 1
    tmp=$(mktemp -d)
    dpkg-deb -x "$deb" "$tmp" || die "dpkg-deb -x $deb failed"
    [[ -s $tmp/usr/share/keyrings/ubuntu-archive-keyring.gpg ]] \
      || die "$deb has no usr/share/keyrings/ubuntu-archive-keyring.gpg"
    mkdir -p "${kr%/*}"
    cp "$tmp/usr/share/keyrings/ubuntu-archive-keyring.gpg" "$kr"
    rm -rf "$tmp"
  fi
  printf '%s\n' "$kr"
}

# ubuntu_mirror: Ubuntu's archive for current releases as Debian's debootstrap
# package knows it (the default_mirror of its Ubuntu suite script other than the one
# for releases out of support), so that no host name is written here; cached under
# $VMCACHE/keyrings. Called in a subshell, as ubuntu_keyring.
ubuntu_mirror() {
  local f="$VMCACHE/keyrings/ubuntu-mirror" deb tmp m
  if [[ ! -s $f ]]; then
    apt_use bookworm
    deb=$(apt_fetch "$VMCACHE/debs/bookworm" debootstrap) || exit 1
    tmp=$(mktemp -d)
    dpkg-deb -x "$deb" "$tmp" || die "dpkg-deb -x $deb failed"
    m=$(sed -n 's/^[[:space:]]*default_mirror[[:space:]]\{1,\}\(https\{0,1\}:[^[:space:]]*\)[[:space:]]*$/\1/p' \
          "$tmp/usr/share/debootstrap/scripts/gutsy" | grep -v old-releases | head -n1)
    rm -rf "$tmp"
    [[ -n $m ]] || die "$deb: no current default_mirror in scripts/gutsy (set UBUNTU_MIRROR)"
    mkdir -p "${f%/*}"
    printf '%s\n' "$m" > "$f"
  fi
  cat "$f"
}

# apt_use SUITE: point APTOPTS at SUITE's private apt state, refreshing its lists when
# they are missing or older than 12 hours. The binary caches are named explicitly:
# container images often disable them in apt.conf.d, and without them every apt-cache
# call re-parses the lists (~1 s instead of ~0.2 s). bookworm/trixie (and the Ubuntu
# suites) also get their -updates and -security suites, so the kernel and libs are the
# ones a patched system has. Ubuntu suites take main and universe (perftest, UCX and the
# rdma-core tools are in universe there), signed by Ubuntu's archive key.
apt_use() {
  local suite=$1 d="$VMCACHE/apt/$1" kr="" s
  if ubuntu_suite "$suite"; then
    kr=$(ubuntu_keyring) || exit 1
    [[ -n $UBUNTU_MIRROR ]] || UBUNTU_MIRROR=$(ubuntu_mirror) || exit 1
  fi
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
  {
    case $suite in
      bookworm | trixie)
        echo "deb $MIRROR $suite main"
        echo "deb $MIRROR $suite-updates main"
        echo "deb ${MIRROR%/debian}/debian-security $suite-security main" ;;
      *)
        if [[ -n $kr ]]; then
          for s in "$suite" "$suite-updates" "$suite-security"; do
            echo "deb [signed-by=$kr] $UBUNTU_MIRROR $s main universe"
          done
        else
          echo "deb $MIRROR $suite main"
        fi ;;
    esac
  } > "$d/sources.list"
  APTOPTS=(-o Dir::Etc::sourcelist="$d/sources.list" -o Dir::Etc::sourceparts=-
           -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache"
           -o Dir::State::status=/dev/null
           -o Dir::Cache::pkgcache="$d/cache/pkgcache.bin" -o Dir::Cache::srcpkgcache="$d/cache/srcpkgcache.bin"
           -o APT::Sandbox::User=root -o Debug::NoLocking=1 -o Acquire::Retries=3)
  if [[ ! -e $d/updated || -n $(find "$d/updated" -mmin +720 2>/dev/null) ]]; then
    log "apt-get update ($suite, $(grep -o 'https\?://[^ ]*' "$d/sources.list" | head -n1))"
    # apt-get update exits 0 when an index could not be fetched (a warning); for the
    # Ubuntu suites, where that is the expected way to fail, make it an error, with
    # short timeouts, and remember an unreachable archive for an hour so that the
    # many boots of one `make test` do not each wait for it again.
    local strict=() unreachable
    unreachable="$VMCACHE/apt/.unreachable-$(printf '%s' "$UBUNTU_MIRROR" | sha256sum | cut -c1-12)"
    if [[ -n $kr ]]; then
      strict=(--error-on=any -o Acquire::http::Timeout=20 -o Acquire::Retries=1)
      if [[ ! -e $d/updated && -n $(find "$unreachable" -mmin -60 2>/dev/null) ]]; then
        result SKIP vm/userland "$suite: the Ubuntu archive $UBUNTU_MIRROR was not reachable at $(date -r "$unreachable" +%H:%M) (retried after an hour)"
        exit 77
      fi
    fi
    if apt-get "${APTOPTS[@]}" "${strict[@]}" -qq update >&2; then
      touch "$d/updated"
      [[ -z $kr ]] || rm -f "$unreachable"
    elif [[ -e $d/updated ]]; then
      log "WARN: apt-get update for $suite failed; using the lists from $(date -r "$d/updated" +%F)"
    elif [[ -n $kr ]]; then
      # Debian's archive is what this project's machines are promised; Ubuntu's is
      # reached where the network allows. Without it the userland is not tested, and
      # says so: a SKIP line, and exit status 77 for the callers to tell apart.
      touch "$unreachable"
      result SKIP vm/userland "$suite: the Ubuntu archive $UBUNTU_MIRROR is not reachable from this machine"
      exit 77
    else
      die "apt-get update for $suite failed (sources: $(tr '\n' ';' < "$d/sources.list"))"
    fi
  fi
  APTSUITE=$suite
}

# apt_closure PKG...: PKG and everything it Depends/Pre-Depends on, transitively, in
# the current suite, minus DENY_PKGS. A virtual package (a name that trixie renamed
# for t64, like librdmacm1 -> librdmacm1t64, or debconf-2.0) stands for its first
# provider that is not denied. Prints one package name per line.
apt_closure() {
  local -A seen=()
  local frontier=("$@") next p line target virtual=0
  while ((${#frontier[@]})); do
    next=()
    for p in "${frontier[@]}"; do seen[$p]=1; done
    while IFS= read -r line; do
      if [[ $line =~ ^\<(.+)\>$ ]]; then
        # A name asked for that is only virtual: take its provider instead.
        unset "seen[${BASH_REMATCH[1]}]"
        target=$(apt_provider "${BASH_REMATCH[1]}") || exit 1
      elif [[ $line =~ ^[[:space:]]+\|?(Depends|PreDepends):[[:space:]]+([^[:space:]]+) ]]; then
        target=${BASH_REMATCH[2]}
        virtual=0
        [[ $target == \<* ]] && { virtual=1; continue; }
      elif ((virtual)) && [[ $line =~ ^[[:space:]]{4}([^[:space:]]+)$ ]]; then
        target=${BASH_REMATCH[1]}  # a provider of the virtual package above
        denied "$target" && continue
        virtual=0
      else
        continue
      fi
      [[ -n ${seen[$target]:-} ]] && continue
      denied "$target" && continue
      seen[$target]=1
      next+=("$target")
    done < <(apt-cache "${APTOPTS[@]}" depends --no-recommends --no-suggests --no-conflicts \
               --no-breaks --no-replaces --no-enhances "${frontier[@]}" 2>/dev/null)
    frontier=("${next[@]}")
  done
  printf '%s\n' "${!seen[@]}" | sort
}

# apt_provider NAME: the first package that provides the virtual package NAME.
apt_provider() {
  local p
  p=$(apt-cache "${APTOPTS[@]}" showpkg "$1" 2>/dev/null \
      | sed -n '/^Reverse Provides:/,$p' | awk 'NR == 2 {print $1}')
  [[ -n $p ]] || die "apt: no package $1 in $APTSUITE"
  printf '%s\n' "$p"
}

# apt_fetch DESTDIR PKG...: make sure DESTDIR holds the candidate .deb of every PKG and
# print their paths, one a line. Already downloaded versions are not fetched again.
apt_fetch() {
  local dest=$1; shift
  mkdir -p "$dest"
  local pkg ver arch need=() files=() f
  while read -r pkg ver arch; do
    f="$dest/${pkg}_${ver//:/%3a}_${arch}.deb"
    files+=("$f")
    [[ -s $f ]] || need+=("$pkg=$ver")
  done < <(apt-cache "${APTOPTS[@]}" show --no-all-versions "$@" 2>/dev/null \
             | awk '/^Package:/{p=$2} /^Version:/{v=$2} /^Architecture:/{a=$2}
                    /^$/{if (p != "") print p, v, a; p=""} END{if (p != "") print p, v, a}')
  (( ${#files[@]} == $# )) || die "apt: cannot resolve all of: $* (got ${#files[@]} of $#)"
  if ((${#need[@]})); then
    log "apt-get download ${need[*]%%=*}"
    (cd "$dest" && apt-get "${APTOPTS[@]}" -qq download "${need[@]}" >&2) \
      || die "apt-get download failed: ${need[*]}"
  fi
  printf '%s\n' "${files[@]}"
}

# stage_build_root ROOT DEBS: a root to chroot into for building, from the .deb
# files listed one per line in DEBS (no maintainer scripts run): each extracted
# into ROOT, docs dropped, /bin /sbin /lib /lib64 merged into /usr as Debian's
# usrmerge lays them out, /bin/sh and awk linked as their alternatives would,
# and /proc /dev /tmp /build made. The caller adds its own links and marks.
stage_build_root() {
  local root=$1 debs=$2 p d
  rm -rf "$root"; mkdir -p "$root"
  while read -r p; do dpkg-deb -x "$p" "$root" || die "dpkg-deb -x $p failed"; done <<<"$debs"
  rm -rf "$root"/usr/share/{doc,man,info,locale,lintian}
  for d in bin sbin lib lib64; do
    if [[ -d $root/$d && ! -L $root/$d ]]; then
      mkdir -p "$root/usr/$d"; cp -a "$root/$d/." "$root/usr/$d/"; rm -rf "${root:?}/$d"
    fi
    mkdir -p "$root/usr/$d"; ln -sfn "usr/$d" "$root/$d"
  done
  [[ -e $root/usr/bin/sh ]] || ln -s dash "$root/usr/bin/sh"
  [[ -e $root/usr/bin/awk ]] || ln -s gawk "$root/usr/bin/awk"
  mkdir -p "$root"/{proc,dev,tmp,build}
  chmod 1777 "$root/tmp"
}
