// Package uapi mirrors the Linux RDMA user-space ABI byte for byte: the
// uverbs ioctl framework and its object/method/attribute ids, the legacy
// write-command structs, the verbs enums the kernel exposes by value, the
// Soft-RoCE (rxe) queue ABI, the usb4_rdma vendor ABIs, and the RDMA netlink
// constants.
//
// Names follow the C ones: constants keep their C spelling verbatim and
// structs are the C name in CamelCase (struct ib_uverbs_wc is IbUverbsWc).
// Every struct has a Sizeof<Type> constant. Structs are host-endian and
// contain no Go pointers, so a caller may view them as bytes with
// unsafe.Slice at the single ioctl entry point.
//
// The C header uapi/c/usb4verbs_uapi.h is generated from these definitions
// for the C data path.
package uapi

//go:generate go run ./internal/cmd/gencabi
//go:generate go run ./internal/cmd/gencheader
