package main

/*
#cgo CFLAGS: -std=c11 -Wall -Wextra -Werror -I${SRCDIR}/.. -I${SRCDIR}/../../provider/dataplane -I${SRCDIR}/../../uapi/c
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane"
)

// main is never called: this package is built with -buildmode=c-shared.
func main() {}

// settings are the front library's user settings (settings.c), handed over
// once by usb4goStart.
var settings struct {
	forceKernelCommands bool
	// dvSend: the provider attaches DV send queues of its own, each at
	// its QP's first post (off by default: DV queues are the
	// applications', DESIGN.md decision 4).
	dvSend bool
}

// usb4goStart is the first call the front library makes after loading the Go
// part (cshim/golib.c): it checks that both were built from the same table
// of entry points (ELIBBAD) and the same shared headers (EPROTO, with this
// part's hash in *layout: shim.h USB4_LAYOUT_HASH), then takes over the
// settings. Nothing else of the pair runs after a refusal.
//
//export usb4goStart
func usb4goStart(apiVersion C.uint32_t, layout *C.uint64_t, cfg *C.struct_usb4_go_config) (rc C.int) {
	defer contain("start", &rc)
	forcedPanic("start")
	if apiVersion != C.USB4_GO_API_VERSION {
		return C.int(unix.ELIBBAD)
	}
	if *layout != C.USB4_LAYOUT_HASH {
		*layout = C.USB4_LAYOUT_HASH
		return C.int(unix.EPROTO)
	}
	settings.forceKernelCommands = bool(cfg.force_kernel_commands)
	settings.dvSend = bool(cfg.dv_send) && !settings.forceKernelCommands
	if cfg.engine == nil && !dataplane.HasOwnEngine {
		return C.int(unix.ELIBBAD)
	}
	dataplane.UseFront(unsafe.Pointer(cfg.engine))
	startSignalCheck()
	return 0
}
