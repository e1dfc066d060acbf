// Package cshim holds the sources of libusb4_rdma, the libibverbs provider:
// a small C library (this directory's *.c, the front) that libibverbs loads,
// and the Go part (./gopart, libusb4_rdma-go.so) that the front loads only
// when it opens a device it claimed. scripts/build-provider.sh builds both:
//
//	scripts/build-provider.sh build   # build/libusb4_rdma.so, build/libusb4_rdma-go.so
//
// The front is installed as libusb4_rdma-rdmav{34,57,59,64,65}.so and the Go
// part beside its file. The front is the only place in usb4verbs that knows
// libibverbs' private ABI. This Go package exists for the tests: cgo compiles
// the front's C files into it (with the data-path engine of
// usb4verbs/provider/dataplane), and shim_test.go builds the real libraries.
//
// Loading: a C constructor (register.c) finds the libibverbs that is already
// loaded (dlopen RTLD_NOLOAD; never a link-time dependency), probes its
// private ABI and ops-table layout without side effects (probe.c), and
// registers through verbs_register_driver_NN. An unknown (PABI, layout)
// pair gets one line on stderr and no registration. Registration, matching
// and settings are C, and no Go runtime exists in the process until the
// first alloc_context of a device we claimed loads the Go part (golib.c:
// once per process, RTLD_LOCAL, from the directory of the front's own file;
// a failure is an errno and one line naming the cause and the fix). A
// process that already runs a Go runtime is refused there with EOPNOTSUPP
// (gohost.c): Go programs use the provider package directly.
//
// Matching (match.c, DESIGN.md decision 6): usb4 devices by node GUID,
// name prefix or Thunderbolt parent; rxe devices only when opted in with
// USB4VERBS_CLAIM_RXE=1 or "claim_rxe yes" in /etc/usb4verbs/usb4_rdma.conf
// (USB4VERBS_CONF overrides the path). USB4VERBS_FORCE_KERNEL_COMMANDS=1
// (or TBV_CQ_FORCE_IOCTL, or "force_kernel_commands yes") keeps usb4 CQs and
// QPs on kernel commands: no mapped CQ ring, no DV send queue. DV send
// queues are the applications' unless USB4VERBS_DV_SEND=1 or "dv_send yes"
// lets the provider attach its own, each at its QP's first post_send.
//
// Contexts (context.c) are allocated by libibverbs at its own size, on its
// own command fd, on which the Go part's provider.OpenFDKnown then creates
// the kernel ucontext for the device as libibverbs identified it;
// ops are installed by slot index of the running layout from the generated
// zopslayout.h. Control ops (verbs.c, objects.c) call the Go part through
// the table golib.c resolved (struct usb4_go_api), whose exports wrap
// usb4verbs/provider and create the data-path objects of
// usb4verbs/provider/dataplane; Go objects are reached through a handle
// table whose stale handles give EBADF (gopart/handles.go).
// Objects handed to libibverbs are C memory: its struct first, then our Go
// handle and the engine object. The data-path ops (post_send, post_recv,
// post_srq_recv, poll_cq, req_notify_cq) are C trampolines into the engine,
// compiled into the front itself, and never enter the Go part. A destroyed
// CQ, QP or SRQ keeps its memory on a bounded per-context quarantine
// (context.c) so data ops on it fail with EINVAL instead of reading freed
// memory. The kernel user_handle of each CQ, QP and SRQ is the C object's
// address, so libibverbs maps completion and async events back. CQs are
// bound to the completion channel libibverbs created
// (provider.CompChannelFromFD). destroy_cq/qp/srq wait, in C, until the
// application acknowledged every event the kernel reported for the object
// (provider's DestroyWithEvents), as libibverbs' ibv_cmd_destroy_* do.
//
// fork.c: in a fork() child of a process that had begun loading the Go part,
// every op that would enter Go fails with ENOSYS and one log line; a child
// of a process that never did may open contexts of its own. A context open
// runs two threads through a no-op Go call so that later first calls from
// new threads find the runtime warm.
//
// See README.md for the layouts, settings and what has been verified.
package cshim
