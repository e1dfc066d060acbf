#!/usr/bin/env bash
# Installs what the build and tests need on a fresh Debian 12 machine. Idempotent and
# quiet when everything is present. Downloads are cached under .cache/ (see Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$PWD/.cache}
mkdir -p "$CACHE/bin"

# Debian packages: qemu for the VM tests, the tools that build its initramfs, and the
# system headers the layout tests compile against.
need=()
for pair in qemu-system-x86_64:qemu-system-x86 xz:xz-utils zstd:zstd cpio:cpio \
            gcc:gcc dpkg-deb:dpkg make:make; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
[[ -f /usr/include/rdma/ib_user_verbs.h ]] || need+=(linux-libc-dev)
# The real Debian 12 libibverbs: cshim's host tests load our provider into it.
[[ -e /usr/lib/x86_64-linux-gnu/libibverbs.so.1 ]] || need+=(libibverbs1)
# Its headers: the C test programs (cshim contracts, reliability, microbenchmarks) compile against them.
[[ -e /usr/include/infiniband/verbs.h ]] || need+=(libibverbs-dev)
# rdma_cm's headers: tests/reliability/fork.c (cshim/lazyvm.sh) builds against them; without
# them that stage printed one line and no result on a fresh machine.
[[ -e /usr/include/rdma/rdma_cma.h ]] || need+=(librdmacm-dev)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
# Reading back the .rpm the packaging tests build.
command -v rpm2cpio >/dev/null 2>&1 || need+=(rpm)
if ((${#need[@]})); then
  echo "deps: apt-get install ${need[*]}" >&2
  if [[ ! -e $CACHE/apt-updated ]]; then
    apt-get update -qq >&2 && touch "$CACHE/apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# Go modules and the linters, pinned.
go mod download
STATICCHECK_VERSION=v0.8.2
if [[ ! -x $CACHE/bin/staticcheck ]] || ! grep -q "$STATICCHECK_VERSION" "$CACHE/bin/.staticcheck-version" 2>/dev/null; then
  echo "deps: go install staticcheck@$STATICCHECK_VERSION" >&2
  GOBIN="$CACHE/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
  echo "$STATICCHECK_VERSION" > "$CACHE/bin/.staticcheck-version"
fi
