# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh reads
# Root filesystems for container images, assembled on the host from a suite's Debian or
# Ubuntu packages with tests/vm's apt machinery (same private apt state, same mirror
# from the host's apt configuration), then `podman import`ed in the VM. Unlike the VM's
# own userland (tests/vm/lib/userland.sh), a container rootfs must be a system that apt
# and dpkg can work on: the dependency closure is kept whole (only the init system is
# left out) and dpkg's status database lists every package that is really there, so
# `apt-get install ./usb4verbs_*.deb` inside `podman build` resolves the Depends
# against installed packages, offline.

# What every test image holds before our package: apt and dpkg with what they run
# (sh, tar, diff, ldconfig, perl for debconf), the stock tools the test runs (rdma-core's examples,
# perftest, rdma_cm's rping).
CTR_ROOTFS_PKGS="apt dpkg tar libc-bin dash bash coreutils grep sed findutils diffutils gzip
  perl-base debianutils base-passwd
  libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils perftest rdmacm-utils"
# Left out of the closure: the init system (a container runs one program), and the
# second choice of an "A | B" dependency, which the closure would otherwise take as well.
CTR_DENY_PKGS=" systemd systemd-sysv udev python3 cdebconf gpgv1 gpgv2 "

# ctr_rootfs SUITE: prints the path of a ready rootfs tree of SUITE, cached under
# $VMCACHE/ctr-rootfs/<suite>-<hash of the .deb set>. Exit status 77 (from apt_use):
# the suite's archive is not reachable; the SKIP line is already printed.
ctr_rootfs() (
  USERLAND=$1
  DENY_PKGS=$CTR_DENY_PKGS VM_DENY_DEBS=""
  apt_use "$USERLAND"
  local pkgs debs key root d
  # shellcheck disable=SC2086 # word splitting of the package list is intended
  pkgs=$(apt_closure $CTR_ROOTFS_PKGS) || exit 1
  # shellcheck disable=SC2086
  debs=$(apt_fetch "$VMCACHE/debs/$USERLAND" $pkgs) || exit 1
  key=$(printf '%s\n' "$debs" | sed 's#.*/##' | sort | sha256sum | cut -c1-16)
  root="$VMCACHE/ctr-rootfs/$USERLAND-$key"
  if [[ ! -e $root/.done ]]; then
    log "container rootfs $USERLAND: $(wc -l <<<"$debs") packages"
    rm -rf "$root"; mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" \
      "$root/var/lib/dpkg/triggers" "$root/var/lib/dpkg/alternatives"
    : > "$root/var/lib/dpkg/status"
    while read -r d; do
      dpkg-deb -x "$d" "$root" || die "dpkg-deb -x $d failed"
      ctr_dpkg_record "$root" "$d"
    done <<<"$debs"
    : > "$root/var/lib/dpkg/available"
    rm -rf "$root"/usr/share/{doc,man,info,locale,lintian} "$root"/usr/lib/x86_64-linux-gnu/gconv
    STAGE=$root stage_usrmerge
    # What base-passwd's and base-files' maintainer scripts would have made.
    cp "$root/usr/share/base-passwd/passwd.master" "$root/etc/passwd"
    cp "$root/usr/share/base-passwd/group.master" "$root/etc/group"
    mkdir -p "$root"/{tmp,root,proc,sys,dev,run}
    chmod 1777 "$root/tmp"
    printf '%s\n' "$debs" | sed 's#.*/##' > "$root/.debs"
    touch "$root/.done"
  fi
  touch "$root/.done"  # marks it used; trees unused for a week are removed
  find "$VMCACHE/ctr-rootfs" -mindepth 2 -maxdepth 2 -name .done -mtime +7 -printf '%h\n' \
    | xargs -r rm -rf
  printf '%s\n' "$root"
)

# ctr_dpkg_record ROOT DEB: DEB as installed in ROOT's dpkg database: its control
# stanza with "Status: install ok installed", and its file list (so a later dpkg
# knows who owns what). Multi-Arch: same packages are recorded as pkg:arch.
ctr_dpkg_record() {
  local root=$1 deb=$2 name ma arch list
  name=$(dpkg-deb -f "$deb" Package)
  ma=$(dpkg-deb -f "$deb" Multi-Arch)
  arch=$(dpkg-deb -f "$deb" Architecture)
  list=$name
  [[ $ma == same ]] && list="$name:$arch"
  dpkg-deb -f "$deb" | awk '{ print } /^Package:/ { print "Status: install ok installed" }' \
    >> "$root/var/lib/dpkg/status"
  echo >> "$root/var/lib/dpkg/status"
  dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's#^\./#/#; s#/$##; s#^$#/.#' \
    > "$root/var/lib/dpkg/info/$list.list"
}
