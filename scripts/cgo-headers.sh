#!/usr/bin/env bash
# scripts/cgo-headers.sh: prints -DUSB4_CGO_HEADERS=<hash of the C headers cgo packages
# include from outside their own directory> for CGO_CFLAGS. Go's build cache keys a cgo
# package on the files of its own directory only: cshim/gopart includes cshim/shim.h and
# provider/dataplane's headers, provider/dataplane includes uapi/c, and a change there
# alone left a stale cached Go part whose usb4goStart refused the new front (ELIBBAD,
# "from another usb4verbs build"), seen 2026-12-02. CGO_CFLAGS is part of the key, so
# the hash in it rebuilds them exactly when one of those headers changed. It is also the
# layout check between the two libraries: scripts/build-provider.sh compiles the front
# with the same flag, and the Go part's usb4goStart refuses a front whose hash differs
# (cshim/shim.h USB4_LAYOUT_HASH).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
hash=$(cat "$repo"/cshim/*.h "$repo"/provider/dataplane/*.h "$repo"/uapi/c/*.h | sha256sum | cut -c1-16)
printf -- '-DUSB4_CGO_HEADERS=0x%s\n' "$hash"
