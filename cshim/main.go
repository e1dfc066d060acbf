package main

/*
#cgo CFLAGS: -std=c11 -Wall -Wextra -Werror
#cgo LDFLAGS: -ldl
#include <stdint.h>
#include "shim.h"
*/
import "C"

import "golang.org/x/sys/unix"

// main is never called: this package is built with -buildmode=c-shared.
func main() {}

// usb4goOpenContext is called by alloc_context (context.c) on the
// application's thread. It returns 0 and a handle, or a positive errno.
//
// The Go provider's context API (usb4verbs/provider) is not wired yet, so
// every open fails with EOPNOTSUPP and libibverbs reports the device as
// unusable instead of crashing.
//
//export usb4goOpenContext
func usb4goOpenContext(name *C.char, cmdFD C.int, kind C.int, handle *C.uintptr_t) C.int {
	*handle = 0
	return C.int(unix.EOPNOTSUPP)
}

// usb4goCloseContext releases what usb4goOpenContext returned.
//
//export usb4goCloseContext
func usb4goCloseContext(handle C.uintptr_t) {}
