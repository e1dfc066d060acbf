// Command gencheader writes uapi/c/usb4verbs_uapi.h, the C mirror of the
// parts of package uapi that the C data path uses: the write-command and
// work-request structs, ib_uverbs_wc, the rxe queue ABI and the usb4 vendor
// ABIs, with their constants. Struct layouts come from reflect over the Go
// types, constant values from type-checking the uapi sources, so the header
// cannot drift from the Go definitions. Every C name carries a usb4v_ /
// USB4V_ prefix so the header can be included next to <rdma/*.h> and
// <infiniband/verbs.h>. Each struct gets _Static_asserts on its size and
// every member offset.
//
// Run from the uapi directory: go run ./internal/cmd/gencheader
package main
