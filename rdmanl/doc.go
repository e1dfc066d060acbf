// Package rdmanl talks RDMA netlink (NETLINK_RDMA, the kernel's "nldev"
// client): it lists RDMA devices and their ports, resolves a device's uverbs
// character device (path, ABI version, driver id), adds and deletes rxe links
// and reads the RDMA netns mode. SysfsDevices and SysfsUverbs read the same
// facts from sysfs where NETLINK_RDMA is unavailable.
//
// Every kernel reply is parsed by a bounds-checked attribute decoder that
// keeps the first error; a malformed reply yields an error wrapping
// unix.EBADMSG, never a panic. Kernel errors wrap the errno (errors.Is works)
// and keep the extended-ACK message when the kernel sends one. A device or
// chardev that does not exist yields an error matching both ErrNotFound and
// unix.ENODEV. An interrupted dump (NLM_F_DUMP_INTR) returns the partial
// results together with ErrDumpInterrupted; callers may retry.
//
// Protocol constants come from package uapi and are never redefined here.
//
// Requests go through our own codec rather than vishvananda/netlink's
// Rdma* helpers: those parse replies without length checks, drop the
// extended-ACK text unless a process-wide switch is set, and cannot be pointed
// at a Handle's namespace or a test double. vishvananda/netns provides
// NewHandleAt's namespace handles, and the real-kernel tests cross-check our
// results against vishvananda/netlink.
package rdmanl
