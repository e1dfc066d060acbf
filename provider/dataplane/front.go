//go:build usb4front

package dataplane

/*
#include "engine.h"
#include "engine_api.h"
void usb4v_use_front(const struct usb4v_engine_api *api);
*/
import "C"

import "unsafe"

// UseFront makes this package drive the front library's engine: api is the
// struct usb4v_engine_api the front hands over at usb4goStart. In the
// usb4front build (the Go part, cshim/gopart) the package has no engine of
// its own, so this must come before any other call into it.
func UseFront(api unsafe.Pointer) {
	C.usb4v_use_front((*C.struct_usb4v_engine_api)(api))
}

// HasOwnEngine says whether this build of the package carries its own copy
// of the engine (false: it calls the front's, UseFront).
const HasOwnEngine = false
