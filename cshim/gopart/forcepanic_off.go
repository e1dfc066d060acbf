//go:build !usb4panictest

package main

// forcedPanic is the test hook of forcepanic_on.go; in release
// builds it does nothing and is inlined away.
func forcedPanic(string) {}
