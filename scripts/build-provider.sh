#!/usr/bin/env bash
# scripts/build-provider.sh OUTDIR [GO BUILD FLAGS...]: builds the provider's two files
# into OUTDIR (cshim/README.md):
#   libusb4_rdma.so     the front library libibverbs loads: C only (cshim/*.c and the
#                       data-path engine of provider/dataplane), no Go runtime
#   libusb4_rdma-go.so  the Go part (cshim/gopart, -buildmode=c-shared), which the
#                       front dlopens from its own directory at the first open of a
#                       device it claimed; GO BUILD FLAGS (e.g. -race) apply to it
# Install both in one directory. CC (default gcc) and CFLAGS_EXTRA (e.g. -g) are honoured.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 OUTDIR [go build flags...]" >&2; exit 2; }
out=$1; shift
repo=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC:-gcc}
mkdir -p "$out"
obj=$(mktemp -d "${TMPDIR:-/tmp}/usb4-front.XXXXXX")
trap 'rm -rf "$obj"' EXIT

# The same language levels and warnings as the cgo builds of these files
# (cshim/cgo.go, provider/dataplane/dataplane.go). Only the constructor matters
# to libibverbs: every other symbol stays inside the library.
# The shared headers' hash (scripts/cgo-headers.sh, -DUSB4_CGO_HEADERS=0x...) goes
# into both files: the Go part refuses a front built from other headers
# (cshim/shim.h USB4_LAYOUT_HASH), and a header change rebuilds the Go part.
hdrs=$("$repo/scripts/cgo-headers.sh")
common=(-O2 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -I"$repo/uapi/c" "$hdrs" ${CFLAGS_EXTRA:-})
objs=()
for f in "$repo"/cshim/*.c; do
  o=$obj/front-$(basename "${f%.c}").o
  "$cc" -std=c11 "${common[@]}" -I"$repo/provider/dataplane" -c -o "$o" "$f"
  objs+=("$o")
done
for f in "$repo"/provider/dataplane/*.c; do
  case $(basename "$f") in
    bench.c) continue ;; # benchmark helper, not the engine
    front.c) continue ;; # the Go part's calls into this engine (usb4front)
  esac
  o=$obj/engine-$(basename "${f%.c}").o
  "$cc" -std=gnu11 "${common[@]}" -c -o "$o" "$f"
  objs+=("$o")
done
"$cc" -shared -Wl,-z,now -Wl,--as-needed -o "$out/libusb4_rdma.so.tmp" "${objs[@]}" -ldl -lpthread
mv "$out/libusb4_rdma.so.tmp" "$out/libusb4_rdma.so"

# The Go part is built with the usb4front tag: it has no engine of its own and
# drives the front's through the table usb4goStart hands over
# (provider/dataplane/engine_api.h). Tags given here are added to it.
tags=usb4front
# Without asynchronous preemption (GODEBUG's asyncpreemptoff=1 as the built-in
# default, go:src/runtime/runtime1.go parsedebugvars): the runtime then never
# sends SIGURG to its threads and lets them keep it blocked (signal_unix.go
# blockableSig), so an application's SIGURG handler without SA_ONSTACK never
# runs on a goroutine's stack (cshim/gogate.c). -ldflags given here are added.
ldflags="-X=runtime.godebugDefault=asyncpreemptoff=1"
goflags=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -tags) tags+=",${2:?-tags needs a value}"; shift 2 ;;
    -tags=*) tags+=",${1#-tags=}"; shift ;;
    -ldflags) ldflags+=" ${2:?-ldflags needs a value}"; shift 2 ;;
    -ldflags=*) ldflags+=" ${1#-ldflags=}"; shift ;;
    *) goflags+=("$1"); shift ;;
  esac
done
goflags+=(-ldflags "$ldflags")
# The same hash in CGO_CFLAGS for the Go part.
[[ " ${CGO_CFLAGS:-} " == *" $hdrs "* ]] || export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} $hdrs"
(cd "$repo" && go build "${goflags[@]}" -tags "$tags" -buildmode=c-shared -o "$out/libusb4_rdma-go.so" ./cshim/gopart)
rm -f "$out/libusb4_rdma-go.h"
