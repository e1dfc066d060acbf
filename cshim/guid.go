package cshim

// #include "shim.h"
import "C"

// guidIsUSB4 is match.c's GUID rule, for the test that holds it against
// internal/usb4guid over the whole peer and rail range.
func guidIsUSB4(guid uint64) bool { return bool(C.usb4_guid_is_usb4(C.uint64_t(guid))) }
