#!/usr/bin/env bash
# packaging/testdata/module-provider-pkg.sh FORMAT OUTDIR [SO]: the thunderbolt_ibverbs
# module's own provider package, usb4-rdma-provider, as its packaging declares it, for
# the tests that install usb4verbs over it. FORMAT is deb, rpm or archlinux. The name,
# version, dependency and file list are the ones of hellas-main:packaging/debian/control-rdma
# with tools/ci/distro-package-rdma.sh (build_deb), packaging/rpm/usb4-rdma-provider.spec
# and packaging/arch/PKGBUILD-rdma (pleite-main's are the same): one
# <provider dir>/libusb4_rdma-rdmav<PABI>.so and /etc/libibverbs.d/usb4_rdma.driver
# ("driver usb4_rdma"), neither a conffile. SO is the provider file to package (the
# module's C provider that tests/bench/upstream-provider.sh builds, where there is one);
# without it a shared object that registers nothing stands in. Needs nfpm ($NFPM) and gcc.
# Prints the package's path.
set -euo pipefail
fmt=${1:?usage: module-provider-pkg.sh deb|rpm|archlinux OUTDIR [SO]}
out=${2:?usage: module-provider-pkg.sh deb|rpm|archlinux OUTDIR [SO]}
so=${3:-}
: "${NFPM:?NFPM must name an nfpm binary}"
case $fmt in
  deb) dir=/usr/lib/x86_64-linux-gnu/libibverbs dep=libibverbs1 ;;
  rpm) dir=/usr/lib64/libibverbs dep=libibverbs ;;
  archlinux) dir=/usr/lib/libibverbs dep=rdma-core ;;
  *) echo "module-provider-pkg: FORMAT is deb, rpm or archlinux, not $fmt" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z $so ]]; then
  so=$work/libusb4_rdma-rdmav34.so
  echo 'int usb4_rdma_stand_in;' > "$work/stand-in.c"
  gcc -shared -fPIC -o "$so" "$work/stand-in.c"
fi
printf 'driver usb4_rdma\n' > "$work/usb4_rdma.driver"
cat > "$work/nfpm.yaml" <<YAML
name: usb4-rdma-provider
arch: amd64
platform: linux
version: 0.3.4
release: "1"
section: libs
maintainer: stand-in <stand-in@usb4verbs.invalid>
description: usb4_rdma libibverbs userspace provider (the module's package, as a test input)
depends: [$dep]
contents:
  - {src: "$so", dst: "$dir/libusb4_rdma-rdmav34.so", file_info: {mode: 0644}}
  - {src: "$work/usb4_rdma.driver", dst: /etc/libibverbs.d/usb4_rdma.driver, file_info: {mode: 0644}}
YAML
mkdir -p "$out"
"$NFPM" package --config "$work/nfpm.yaml" --packager "$fmt" --target "$out/" >&2
ls -1 "$out"/usb4-rdma-provider[_-]0.3.4* | head -n1
