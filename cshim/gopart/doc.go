// Command gopart is the Go part of libusb4_rdma, built with
//
//	go build -buildmode=c-shared -o build/libusb4_rdma-go.so ./cshim/gopart
//
// (scripts/build-provider.sh builds it together with the front library).
// It is never loaded by libibverbs: the front (../golib.c) dlopens it,
// RTLD_LOCAL, from the directory of its own file when it first opens a
// device it claimed, checks it with usb4goStart, and calls the //export
// functions here through a table (struct usb4_go_api in ../shim.h). They
// wrap usb4verbs/provider and create the data-path objects of
// usb4verbs/provider/dataplane, whose C the front calls directly.
package main
