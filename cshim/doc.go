// Command libusb4_rdma is the libibverbs provider shared object, built with
//
//	go build -buildmode=c-shared -o build/libusb4_rdma.so ./cshim
//
// and installed as libusb4_rdma-rdmav{34,57,59,64,65}.so. It is the only
// place in usb4verbs that knows libibverbs' private ABI.
//
// Loading: a C constructor (register.c) finds the libibverbs that is already
// loaded (dlopen RTLD_NOLOAD; never a link-time dependency), probes its
// private ABI and ops-table layout without side effects (probe.c), and
// registers through verbs_register_driver_NN. An unknown (PABI, layout)
// pair gets one line on stderr and no registration. Registration and
// matching are C because the Go runtime is not up at constructor time.
//
// Matching (match.c, DESIGN.md decision 6): usb4 devices by node GUID,
// name prefix or Thunderbolt parent; rxe devices only when opted in with
// USB4VERBS_CLAIM_RXE=1 or "claim_rxe yes" in /etc/usb4verbs/usb4_rdma.conf
// (USB4VERBS_CONF overrides the path). USB4VERBS_FORCE_KERNEL_COMMANDS=1
// (or TBV_CQ_FORCE_IOCTL, or "force_kernel_commands yes") keeps usb4 CQs and
// QPs on kernel commands: no mapped CQ ring, no DV send queue.
//
// Contexts (context.c) are allocated by libibverbs at its own size, on its
// own command fd, on which provider.OpenFDKnown then creates the kernel
// ucontext for the device as libibverbs identified it;
// ops are installed by slot index of the running layout from the generated
// zopslayout.h. Control ops (verbs.c, objects.c) call the Go exports in
// control.go and objects.go, which wrap usb4verbs/provider and create the
// data-path objects of usb4verbs/provider/dataplane; Go objects are reached
// through a handle table whose stale handles give EBADF (handles.go).
// Objects handed to libibverbs are C memory: its struct first, then our Go
// handle and the engine object. The data-path ops (post_send, post_recv,
// post_srq_recv, poll_cq, req_notify_cq) are C trampolines into the engine
// and never enter Go. A destroyed CQ, QP or SRQ keeps its memory on a
// bounded per-context quarantine (context.c) so data ops on it fail with
// EINVAL instead of reading freed memory. The kernel user_handle of each CQ, QP and SRQ is the
// C object's address, so libibverbs maps completion and async events back.
// CQs are bound to the completion channel libibverbs created
// (provider.CompChannelFromFD). destroy_cq/qp/srq wait, in C, until the
// application acknowledged every event the kernel reported for the object
// (provider's DestroyWithEvents), as libibverbs' ibv_cmd_destroy_* do.
//
// fork.c: in a fork() child (marked by a pthread_atfork handler) every op
// that would enter Go fails with ENOSYS and one log line; a context open
// runs two threads through a no-op Go call so that later first calls from
// new threads find the runtime warm.
//
// See README.md for the layouts, settings and what has been verified.
package main
