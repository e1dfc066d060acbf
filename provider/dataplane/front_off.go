//go:build !usb4front

package dataplane

import "unsafe"

// UseFront does nothing in this build: without the usb4front tag (Go
// programs and tests, which have no front library) the package links its
// own copy of the engine.
func UseFront(unsafe.Pointer) {}

// HasOwnEngine says whether this build of the package carries its own copy
// of the engine (false: it calls the front's, UseFront).
const HasOwnEngine = true
