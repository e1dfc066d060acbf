// Package provider is the usb4verbs verbs engine usable from Go: it opens an
// RDMA device's uverbs character device and drives the kernel's control
// path — context, device/port/GID queries, PD, MR, completion channels, CQ,
// QP (RC, UC, UD), SRQ, AH and async events. cshim routes libibverbs'
// control ops here; cmd/ibvinfo and Go programs call it directly.
//
// # Layering
//
// Every kernel call goes through one seam, the unexported sysCalls interface
// (open, close, ioctl, write, read, mmap, munmap, poll). The real
// implementation is the Linux system calls; tests plug in a fake kernel there,
// and the usb4 test doubles of the data path attach at the same place.
//
// Above the seam sits one uverbs entry point (ioctl.go), built like
// cilium/ebpf's sys.BPF: an attribute builder (PTR_IN inline up to 8 bytes,
// PTR_OUT, IDR, FD, CONST_IN, mandatory/optional flags, absent optional fds
// dropped), pinning of the referenced Go memory for the duration of the call
// (runtime.Pinner), and RDMA_VERBS_IOCTL with the device's real driver id in
// the header — the kernel rejects any other id with EINVAL. Commands that
// have no ioctl method (ALLOC_PD, REG_MR, MODIFY_QP, QUERY_QP, CREATE_AH,
// QUERY_DEVICE ex, ...) go through UVERBS_METHOD_INVOKE_WRITE. When the
// kernel has no ioctl framework (ENOTTY) or lacks a method (EPROTONOSUPPORT),
// the legacy write() command is used instead, and that answer is cached per
// context (ENOTTY: every method, EPROTONOSUPPORT: that method), as
// libibverbs' cmd_fallback.c does. Other errnos are never cached.
//
// Open resolves a device by name through RDMA netlink, falling back to the
// sysfs scan libibverbs also uses; sysfs does not show the driver id, so it is
// then probed (UVERBS_METHOD_INFO_HANDLES answers EINVAL for a wrong id).
// OpenFD instead adopts a command fd its caller opened (libibverbs passes one
// to alloc_context) and leaves that fd and the async fd to the caller;
// OpenFDKnown does the same for a device the caller already identified
// (KnownDevice), without a lookup;
// CompChannelFromFD likewise wraps a caller's completion channel.
//
// The objects (one file each: pd.go, mr.go, cq.go, compchannel.go, qp.go,
// srq.go, ah.go, async.go) keep the kernel handle and a user handle: the
// value the kernel echoes in completion and async events. Callers may set
// it (cshim passes the C object's address); otherwise a context-unique value
// is chosen. A context has one mutex for its object tables; the control path
// is not hot. GetEvent and GetAsyncEvent wait without holding it, and so do
// REG_MR and DEREG_MR while they are in the kernel (pinning or unpinning
// gigabytes takes seconds): they count as in flight instead, and Close waits
// for them before it tears down.
//
// # Errors
//
// Every error is prefixed "provider: <verb>: " and wraps the kernel's errno
// behind an unexported type, so callers test errors.Is(err, unix.EINVAL) (or
// errors.As to unix.Errno, which is what cshim returns to C). Kernel "not
// implemented" errnos (EOPNOTSUPP, ENOSYS, EPROTONOSUPPORT) also match
// ErrNotSupported. Use of an object or context after Destroy/Close returns an
// error matching ErrClosed and EBADF; destroying twice is such an error, never
// a panic. Arguments the kernel would reject anyway may be refused before any
// syscall (an MR of length 0, a CQ without entries, a QP without CQs), always
// with EINVAL; everything else is left to the kernel so its errno comes
// through. reg_mr failures with ENOMEM or EPERM carry a memlock hint.
//
// # Backends
//
// The driver kind is decided at Open (DESIGN.md decision 4) and reported by
// (*Context).Driver:
//   - rxe (driver id RDMA_DRIVER_RXE): create_cq, create_qp and create_srq
//     must be given driver response buffers (rxe_create_*_resp, ring mmap
//     info), modify_srq a rxe_modify_srq_cmd, create_ah optionally a
//     rxe_create_ah_resp. The mmap info is kept on the objects (RxeQueue,
//     RxeQueues) for the data path; MapCmdFD maps a ring and the context
//     unmaps it at the latest on Close.
//   - usb4 (the module's node GUID, decoded by internal/usb4guid, or a
//     name starting usb4_rdma/usb4_apple): plain generic uverbs, no driver input,
//     driver id RDMA_DRIVER_UNKNOWN. The kernel has no SRQ and rejects AHs
//     from userspace (both surface as kernel errnos / ErrNotSupported).
//     create_cq reserves a driver response tail (usb4CQOfferLen) in which the
//     module's mapped-CQ fork offers its ring; CQ.DriverResp returns it and
//     provider/dataplane's CQ.TryMappedRing validates and takes it.
//   - generic: any other device, plain uverbs.
//
// # What was verified where
//
// On real kernels (Debian's 6.1.0-57, 7.2.13 and 7.3.4 under qemu, Soft-RoCE
// rxe0/rxe1 on a veth pair; tests/vm/run.sh with KSUITE bookworm, sid and
// trixie-backports; tests named TestVM*): every object created, queried and
// destroyed; an RC and a UC pair brought to RTS across the two devices and
// queried back attribute by attribute; a UD QP with a qkey and a kernel AH;
// SRQ limit modify/query; dma-buf MRs reported as ErrNotSupported
// (EOPNOTSUPP from rxe); port error/active async events from a carrier
// change; a completion event through a channel (a receive WQE placed in the
// mapped rxe ring and flushed by moving the QP to ERR, the CQE read back from
// the mapped CQ ring); the sysfs path with the driver id probe; OpenFD with
// INFO_HANDLES confirming Close destroyed every object; a wrong driver id
// refused by the kernel; no fd or mapping of ours left after Close; the
// bad-input list
// (unknown device, ports 0 and 2, RESET->RTS, CQ larger than max_cqe, MR of
// length 0, double destroy, use after close). The same lifecycle and RC
// connection also ran with the write() fallback and the INVOKE_WRITE
// fallback forced, against the same kernel.
//
// On the host only (fake kernel at the seam): the exact bytes of headers and
// attributes, the fallback caching, the decoding of replies and events.
//
// Not verified: the usb4 kernel module itself (no hardware here). Its control
// path is the generic uverbs one exercised above, with driver id UNKNOWN and
// no driver data, which the host tests check at the byte level.
package provider
