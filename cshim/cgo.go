package cshim

/*
#cgo CFLAGS: -std=c11 -Wall -Wextra -Werror -I${SRCDIR}/../provider/dataplane -I${SRCDIR}/../uapi/c
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"

// The engine's C functions (usb4v_*) that objects.c calls: linked from the
// same package the Go part uses.
import _ "usb4verbs/provider/dataplane"
