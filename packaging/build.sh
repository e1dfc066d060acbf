#!/usr/bin/env bash
# packaging/build.sh: the deb, rpm and Arch packages and the tarball, under build/pkg/,
# from build/libusb4_rdma.so (the front library), build/libusb4_rdma-go.so (the Go part,
# installed beside it) and build/ibvinfo (`make package` builds those first).
# Fails when either file needs a glibc newer than the floor (2.35, Ubuntu 22.04).
# Environment: VERSION (default 0.1.0), PKG_ARCH (amd64), PKG_OUT (build/pkg),
# PKG_SO, PKG_GO_SO (default: libusb4_rdma-go.so beside PKG_SO), PKG_IBVINFO (the inputs), NFPM (an nfpm binary; else $CACHE/bin/nfpm,
# installed with `go install` at the pinned version when missing).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CACHE=${CACHE:-$REPO/.cache}
VERSION=${VERSION:-0.1.0}
PKG_ARCH=${PKG_ARCH:-amd64}
PKG_OUT=${PKG_OUT:-build/pkg}
PKG_SO=${PKG_SO:-build/libusb4_rdma.so}
PKG_GO_SO=${PKG_GO_SO:-$(dirname "$PKG_SO")/libusb4_rdma-go.so}
PKG_IBVINFO=${PKG_IBVINFO:-build/ibvinfo}
GLIBC_FLOOR=2.35
NFPM_MODULE=github.com/goreleaser/nfpm/v2
NFPM_VERSION=v2.45.2
PABIS=(34 57 59 64 65)

die() { echo "package: $*" >&2; exit 1; }
log() { echo "package: $*" >&2; }

[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION must be X.Y.Z (got '$VERSION')"
case $PKG_ARCH in
  amd64) DEB_MULTIARCH=x86_64-linux-gnu; ELF_ARCH='i386:x86-64' ;;
  arm64) DEB_MULTIARCH=aarch64-linux-gnu; ELF_ARCH='aarch64' ;;
  *) die "PKG_ARCH $PKG_ARCH: only amd64 and arm64 are known" ;;
esac
for f in "$PKG_SO" "$PKG_GO_SO" "$PKG_IBVINFO"; do
  [[ -f $f ]] || die "$f is missing; run 'make build' first"
  objdump -f "$f" | grep -q "architecture: $ELF_ARCH" || die "$f is not an $PKG_ARCH ELF file"
done
# The provider is dlopened by absolute path and has no SONAME; anything else it links
# against would have to exist in every target image, so only libc is allowed.
for f in "$PKG_SO" "$PKG_GO_SO"; do
  needed=$(objdump -p "$f" | awk '$1 == "NEEDED" {print $2}' | tr '\n' ' ')
  [[ $needed == "libc.so.6 " ]] || die "$f needs '$needed'; only libc.so.6 is allowed"
done

GLIBC_NEEDED=$(packaging/check-glibc.sh --floor "$GLIBC_FLOOR" "$PKG_SO" "$PKG_GO_SO" "$PKG_IBVINFO") \
  || die "glibc floor $GLIBC_FLOOR exceeded (see above)"
log "glibc: needs GLIBC_$GLIBC_NEEDED, floor $GLIBC_FLOOR"

# nfpm at the pinned version; `go version -m` reads the module version from the binary.
nfpm_version() { go version -m "$1" 2>/dev/null | awk -v m="$NFPM_MODULE" '$1 == "mod" && $2 == m {print $3}'; }
if [[ -z ${NFPM:-} ]]; then
  NFPM=$CACHE/bin/nfpm
  if [[ ! -x $NFPM || $(nfpm_version "$NFPM") != "$NFPM_VERSION" ]]; then
    log "go install $NFPM_MODULE/cmd/nfpm@$NFPM_VERSION"
    mkdir -p "$CACHE/bin"
    GOBIN=$CACHE/bin go install "$NFPM_MODULE/cmd/nfpm@$NFPM_VERSION"
  fi
fi
[[ -x $NFPM ]] || die "nfpm not executable: $NFPM"

rm -rf "$PKG_OUT"; mkdir -p "$PKG_OUT/.stage"
# usb4verbs-container with this build's PABI names and glibc floor filled in.
PKG_CONTAINER_CMD=$PKG_OUT/.stage/usb4verbs-container
sed -e "s/@VERSION@/$VERSION/g" -e "s/@PABIS@/${PABIS[*]}/g" -e "s/@DEB_MULTIARCH@/$DEB_MULTIARCH/g" \
  -e "s/@GLIBC_NEEDED@/$GLIBC_NEEDED/g" packaging/usb4verbs-container > "$PKG_CONTAINER_CMD"
chmod 755 "$PKG_CONTAINER_CMD"
# Reproducible timestamps: the last commit's time when there is one.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH VERSION PKG_ARCH PKG_SO PKG_GO_SO PKG_IBVINFO PKG_CONTAINER_CMD DEB_MULTIARCH GLIBC_NEEDED
export PKG_MAINTAINER=${PKG_MAINTAINER:-usb4verbs maintainers <maintainers@usb4verbs.invalid>}
export PKG_HOMEPAGE=${PKG_HOMEPAGE:-https://usb4verbs.invalid/}
for fmt in deb rpm archlinux; do
  "$NFPM" package --config packaging/nfpm.yaml --packager "$fmt" --target "$PKG_OUT/" >&2 \
    || die "nfpm $fmt failed"
done

# Tarball: the files plus install.sh, which finds the provider dir on the target.
name=usb4verbs-$VERSION-linux-$PKG_ARCH
stage=$PKG_OUT/.stage/$name
mkdir -p "$stage"/{lib,bin,share/doc/usb4verbs}
install -m755 "$PKG_SO" "$stage/lib/libusb4_rdma.so.$VERSION"
install -m755 "$PKG_GO_SO" "$stage/lib/libusb4_rdma-go.so"
install -m755 "$PKG_IBVINFO" "$stage/bin/ibvinfo"
install -m755 "$PKG_CONTAINER_CMD" "$stage/bin/usb4verbs-container"
install -m644 README.md "$stage/share/doc/usb4verbs/README.md"
install -m644 packaging/README.md "$stage/share/doc/usb4verbs/PACKAGING.md"
install -m644 cshim/README.md "$stage/share/doc/usb4verbs/PROVIDER.md"
sed -e "s/@VERSION@/$VERSION/g" -e "s/@PABIS@/${PABIS[*]}/g" -e "s/@DEB_MULTIARCH@/$DEB_MULTIARCH/g" \
  packaging/tarball/install.sh > "$stage/install.sh"
chmod 755 "$stage/install.sh"
tar -C "$PKG_OUT/.stage" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$SOURCE_DATE_EPOCH" -czf "$PKG_OUT/$name.tar.gz" "$name"
rm -rf "$PKG_OUT/.stage"

(cd "$PKG_OUT" && sha256sum -- *.deb *.rpm *.pkg.tar.zst *.tar.gz > SHA256SUMS)
log "wrote $PKG_OUT:"
(cd "$PKG_OUT" && ls -1 -- *.deb *.rpm *.pkg.tar.zst *.tar.gz) | sed 's/^/  /' >&2
