// Package gorace runs the provider's Go control path from many goroutines at
// once on the test VM's Soft-RoCE devices, built with -race
// (tests/reliability/run.sh builds `go test -race -c` of it and hands the
// binary to the VM harness). It is the Go side of issue 8's concurrency
// check: a -race build of the c-shared provider cannot be loaded into a C
// program (the race runtime maps shadow memory only for Go's own address
// ranges, and a dlopen()ed library lives above them), so the same objects
// and tables are exercised here through package provider directly.
// Outside the VM (USB4VERBS_VM unset) the tests skip.
package gorace
