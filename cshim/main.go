package main

/*
#cgo CFLAGS: -std=c11 -Wall -Wextra -Werror -I${SRCDIR}/../provider/dataplane -I${SRCDIR}/../uapi/c
#cgo LDFLAGS: -ldl
*/
import "C"

// main is never called: this package is built with -buildmode=c-shared.
func main() {}
