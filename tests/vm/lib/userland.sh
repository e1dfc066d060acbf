# shellcheck shell=bash
# shellcheck disable=SC2034 # sets globals that run.sh and the other libs read
# The guest userland: Debian packages of suite USERLAND (plus VM_EXTRA_DEBS and their
# dependency closure) extracted into one tree, cached under $VMCACHE/stage/. Every
# shared library in the guest comes from these packages, never from the host, so a
# userland of another Debian release (another glibc, another rdma-core) works the same.

# Always present: busybox for /init and the shell tools, glibc, libgcc_s (glibc dlopens
# it for pthread_exit/cancellation, which no dependency scan finds), iproute2 for `ip`
# (veth pairs; busybox's applet cannot) and `rdma` (rxe links), and rdma-core's libs.
BASE_PKGS="busybox-static libc6 libgcc-s1 iproute2 libibverbs1 ibverbs-providers librdmacm1 libibumad3"

# userland_prepare: sets STAGE (a ready tree to copy into the image) and UDESC.
userland_prepare() {
  apt_use "$USERLAND"
  local pkgs debs key
  # shellcheck disable=SC2086 # word splitting of the package lists is intended
  pkgs=$(apt_closure $BASE_PKGS $VM_EXTRA_DEBS) || exit 1
  # shellcheck disable=SC2086
  debs=$(apt_fetch "$VMCACHE/debs/$USERLAND" $pkgs) || exit 1
  key=$(printf '%s\n' "$debs" | sed 's#.*/##' | sort | sha256sum | cut -c1-16)
  STAGE="$VMCACHE/stage/$USERLAND-$key"
  if [[ ! -e $STAGE/.done ]]; then
    log "userland $USERLAND: staging $(wc -l <<<"$debs") packages"
    rm -rf "$STAGE"; mkdir -p "$STAGE"
    local d
    while read -r d; do dpkg-deb -x "$d" "$STAGE" || die "dpkg-deb -x $d failed"; done <<<"$debs"
    rm -rf "$STAGE"/usr/share/{doc,man,info,locale,lintian,bug,bash-completion,zsh,doc-base,menu} \
           "$STAGE"/usr/lib/x86_64-linux-gnu/gconv
    stage_usrmerge
    stage_busybox
    stage_check_needed
    printf '%s\n' "$debs" | sed 's#.*/##' > "$STAGE/.debs"
    touch "$STAGE/.done"
  fi
  touch "$STAGE/.done"  # marks it used; trees unused for a week are removed
  find "$VMCACHE/stage" -mindepth 2 -maxdepth 2 -name .done -mtime +7 -printf '%h\n' \
    | xargs -r rm -rf
  UDESC="$USERLAND: $(userland_versions)"
}

# stage_usrmerge: bookworm packages still install into /bin, /lib, /sbin; trixie and
# later into /usr. Merge the tree the way base-files does on a current system, so paths
# (the loader, /sbin/modprobe, /lib/modules) resolve the same for every suite.
stage_usrmerge() {
  local d
  for d in bin sbin lib lib64; do
    if [[ -d $STAGE/$d && ! -L $STAGE/$d ]]; then
      mkdir -p "$STAGE/usr/$d"
      cp -a "$STAGE/$d/." "$STAGE/usr/$d/"
      rm -rf "${STAGE:?}/$d"
    fi
    mkdir -p "$STAGE/usr/$d"
    ln -sfn "usr/$d" "$STAGE/$d"
  done
}

# stage_busybox: busybox applets as symlinks wherever no real tool of that name exists.
stage_busybox() {
  local bb="$STAGE/usr/bin/busybox" a name dir
  [[ -x $bb ]] || die "busybox-static did not provide /bin/busybox"
  while read -r a; do
    name=${a##*/}
    [[ $name == busybox ]] || present "$STAGE/usr/bin/$name" || present "$STAGE/usr/sbin/$name" \
      && continue
    case $a in sbin/* | usr/sbin/*) dir=usr/sbin ;; *) dir=usr/bin ;; esac
    ln -s /usr/bin/busybox "$STAGE/$dir/$name"
  done < <("$bb" --list-full 2>/dev/null || "$bb" --list)
  present "$STAGE/usr/bin/sh" || ln -s busybox "$STAGE/usr/bin/sh"
}

# present PATH: PATH exists in the staged tree. Its symlinks may be absolute (meant for
# the guest), so a dangling one on the host still counts.
present() { [[ -e $1 || -L $1 ]]; }

# stage_check_needed: warn (once, when staging) about programs and libraries whose
# DT_NEEDED libraries are not in the tree, e.g. after DENY_PKGS pruned a package they
# need. Plugins in subdirectories (UCX's GPU transports) are not checked: their
# loaders skip them when they do not load.
stage_check_needed() {
  command -v readelf >/dev/null || return 0
  local -A have=()
  local f lib missing=()
  for f in "$STAGE"/usr/lib/x86_64-linux-gnu/* "$STAGE"/usr/lib64/*; do have[${f##*/}]=1; done
  for f in "$STAGE"/usr/bin/* "$STAGE"/usr/sbin/* "$STAGE"/usr/lib/x86_64-linux-gnu/*.so* \
           "$STAGE"/usr/lib/x86_64-linux-gnu/libibverbs/*.so; do
    [[ -f $f && ! -L $f ]] || continue
    while read -r lib; do
      [[ -n ${have[$lib]:-} ]] || missing+=("${f#"$STAGE"/}: $lib")
    done < <(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  ((${#missing[@]} == 0)) && return 0
  log "WARN: libraries missing from the $USERLAND image (add their packages to VM_EXTRA_DEBS):"
  printf '[vm]   %s\n' "${missing[@]}" >&2
}

# userland_versions: the versions that matter when reading a log.
userland_versions() {
  local p out=()
  for p in libc6 libibverbs1 busybox-static; do
    out+=("$p $(sed -n "s/^${p}_\([^_]*\)_.*/\1/p" "$STAGE/.debs" | sed 's/%3a/:/')")
  done
  local IFS=,; printf '%s' "${out[*]}"
}
