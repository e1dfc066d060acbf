package provider

import (
	"errors"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// This file is the provider's one uverbs entry point (like cilium/ebpf's
// sys.BPF): an attribute builder, the RDMA_VERBS_IOCTL call with the device's
// real driver id, INVOKE_WRITE for commands without an ioctl method, and the
// write() fallback with a per-context cache of unsupported methods, which is
// what libibverbs' cmd_fallback.c does (rdma-core:libibverbs/cmd_fallback.c).

// ioctlCmd is one uverbs method call being built: object, method and the
// attribute array. Buffers referenced by pointer attributes are pinned while
// the ioctl runs.
type ioctlCmd struct {
	object uint16
	method uint32
	attrs  []uapi.IbUverbsAttr
	bufs   [][]byte // memory referenced by pointer attributes
	err    error    // first encoding error (a payload longer than the u16 len)
}

func newIoctl(object uint16, method uint32) *ioctlCmd {
	return &ioctlCmd{object: object, method: method}
}

// attrLen checks that n fits struct ib_uverbs_attr's u16 len.
func (c *ioctlCmd) attrLen(id uint16, n int) uint16 {
	if n > 0xFFFF && c.err == nil {
		c.err = errInvalid("attribute %#x: %d bytes exceed the 65535 an attribute can carry", id, n)
	}
	return uint16(n)
}

func (c *ioctlCmd) add(id uint16, length uint16, data uint64) {
	c.attrs = append(c.attrs, uapi.IbUverbsAttr{
		AttrId: id,
		Len:    length,
		Flags:  uapi.UVERBS_ATTR_F_MANDATORY,
		Data:   data,
	})
}

// optional clears the mandatory flag of the attribute added last, so a kernel
// that does not know it ignores it instead of failing with EPROTONOSUPPORT.
func (c *ioctlCmd) optional() *ioctlCmd {
	if n := len(c.attrs); n > 0 {
		c.attrs[n-1].Flags &^= uapi.UVERBS_ATTR_F_MANDATORY
	}
	return c
}

// in adds a PTR_IN attribute. The kernel reads payloads of up to 8 bytes from
// the data field itself (uverbs_attr_ptr_is_inline), larger ones by pointer.
func (c *ioctlCmd) in(id uint16, b []byte) *ioctlCmd {
	if len(b) <= 8 {
		var v uint64
		copy((*[8]byte)(unsafe.Pointer(&v))[:], b)
		c.add(id, uint16(len(b)), v)
		return c
	}
	c.bufs = append(c.bufs, b)
	c.add(id, c.attrLen(id, len(b)), uint64(uintptr(unsafe.Pointer(&b[0]))))
	return c
}

func (c *ioctlCmd) inU32(id uint16, v uint32) *ioctlCmd {
	return c.in(id, unsafe.Slice((*byte)(unsafe.Pointer(&v)), 4))
}

func (c *ioctlCmd) inU64(id uint16, v uint64) *ioctlCmd {
	return c.in(id, unsafe.Slice((*byte)(unsafe.Pointer(&v)), 8))
}

// constIn adds a UVERBS_ATTR_CONST_IN: always an inline u64.
func (c *ioctlCmd) constIn(id uint16, v uint64) *ioctlCmd {
	c.add(id, 8, v)
	return c
}

// out adds a PTR_OUT attribute the kernel copies its answer into.
func (c *ioctlCmd) out(id uint16, b []byte) *ioctlCmd {
	if len(b) == 0 {
		c.add(id, 0, 0)
		return c
	}
	c.bufs = append(c.bufs, b)
	c.add(id, c.attrLen(id, len(b)), uint64(uintptr(unsafe.Pointer(&b[0]))))
	return c
}

// idr adds an existing object handle (UVERBS_ATTR_IDR, READ/WRITE/DESTROY).
func (c *ioctlCmd) idr(id uint16, handle uint32) *ioctlCmd {
	c.add(id, 0, uint64(handle))
	return c
}

// newObj asks the kernel for a new object (IDR or FD with UVERBS_ACCESS_NEW);
// the handle or fd comes back in the attribute's data field (result).
func (c *ioctlCmd) newObj(id uint16) *ioctlCmd {
	c.add(id, 0, 0)
	return c
}

// fd adds a file-descriptor attribute; a negative fd means "absent" and the
// attribute is dropped, as rdma-core's fill_attr_in_fd does.
func (c *ioctlCmd) fd(id uint16, fd int) *ioctlCmd {
	if fd < 0 {
		return c
	}
	c.add(id, 0, uint64(fd))
	return c
}

// result returns the data field the kernel wrote back for attribute id
// (new object handles and fds).
func (c *ioctlCmd) result(id uint16) (uint64, bool) {
	for _, a := range c.attrs {
		if a.AttrId == id {
			return a.Data, true
		}
	}
	return 0, false
}

// validOutput reports whether the kernel filled the PTR_OUT attribute id.
func (c *ioctlCmd) validOutput(id uint16) bool {
	for _, a := range c.attrs {
		if a.AttrId == id {
			return a.Flags&uapi.UVERBS_ATTR_F_VALID_OUTPUT != 0
		}
	}
	return false
}

// errIoctlUnsupported is matched (errors.Is) by the error returned when a
// method is known, or just found, to be missing, so that the caller takes its
// write() fallback.
var errIoctlUnsupported = errors.New("uverbs ioctl method not supported by the kernel")

// unsupportedIoctl carries the errno that told us (ENOTTY or EPROTONOSUPPORT).
type unsupportedIoctl struct{ no unix.Errno }

func (e unsupportedIoctl) Error() string        { return errIoctlUnsupported.Error() + ": " + e.no.Error() }
func (e unsupportedIoctl) Is(target error) bool { return target == errIoctlUnsupported }
func (e unsupportedIoctl) Unwrap() error        { return errno(e) }

// cmdFD issues the uverbs commands of one open character device.
type cmdFD struct {
	sys      sysCalls
	fd       int
	driverID uint32

	mu          sync.Mutex
	noIoctl     bool                // ENOTTY: no ioctl framework at all
	unsupported map[uint64]struct{} // EPROTONOSUPPORT per (object, method)
}

func methodKey(object uint16, method uint32) uint64 { return uint64(object)<<32 | uint64(method) }

func (f *cmdFD) known(object uint16, method uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noIoctl {
		return false
	}
	_, bad := f.unsupported[methodKey(object, method)]
	return !bad
}

func (f *cmdFD) markUnsupported(object uint16, method uint32, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if all {
		f.noIoctl = true
		return
	}
	if f.unsupported == nil {
		f.unsupported = make(map[uint64]struct{})
	}
	f.unsupported[methodKey(object, method)] = struct{}{}
}

// ioctl runs c with RDMA_VERBS_IOCTL. It returns errIoctlUnsupported when the
// kernel lacks the framework (ENOTTY) or the method (EPROTONOSUPPORT) and
// caches that answer; any other errno is returned wrapped and not cached.
func (f *cmdFD) ioctl(c *ioctlCmd) error {
	if c.err != nil {
		return c.err
	}
	if !f.known(c.object, c.method) {
		return unsupportedIoctl{unix.EPROTONOSUPPORT}
	}
	n := len(c.attrs)
	size := uapi.SizeofIbUverbsIoctlHdr + n*uapi.SizeofIbUverbsAttr
	if size > 0xFFFF { // ib_uverbs_ioctl_hdr.length is a u16
		return errInvalid("%d attributes do not fit one ioctl", n)
	}
	buf := make([]uint64, (size+7)/8) // uint64 backing keeps the header 8-aligned
	hdr := (*uapi.IbUverbsIoctlHdr)(unsafe.Pointer(&buf[0]))
	hdr.Length = uint16(size)
	hdr.ObjectId = c.object
	hdr.MethodId = uint16(c.method)
	hdr.NumAttrs = uint16(n)
	hdr.DriverId = f.driverID
	var attrs []uapi.IbUverbsAttr
	if n > 0 {
		attrs = unsafe.Slice((*uapi.IbUverbsAttr)(unsafe.Add(unsafe.Pointer(&buf[0]), uapi.SizeofIbUverbsIoctlHdr)), n)
		copy(attrs, c.attrs)
	}

	var pin runtime.Pinner
	pin.Pin(&buf[0])
	for _, b := range c.bufs {
		if len(b) > 0 { // execWrite adds the caller's pins as they are
			pin.Pin(&b[0])
		}
	}
	err := f.sys.Ioctl(f.fd, uapi.RDMA_VERBS_IOCTL, unsafe.Pointer(&buf[0]))
	pin.Unpin()
	copy(c.attrs, attrs) // new handles/fds and VALID_OUTPUT flags

	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOTTY):
		f.markUnsupported(c.object, c.method, true)
		return unsupportedIoctl{unix.ENOTTY}
	case errors.Is(err, unix.EPROTONOSUPPORT):
		f.markUnsupported(c.object, c.method, false)
		return unsupportedIoctl{unix.EPROTONOSUPPORT}
	}
	return wrapErrno(err)
}

// writeCmd describes one legacy uverbs write command.
type writeCmd struct {
	cmd    uint32 // IB_USER_VERBS_CMD_* or IB_USER_VERBS_EX_CMD_*
	ex     bool   // extended command (ib_uverbs_ex_cmd_hdr)
	in     []byte // core request; non-ex requests with a response start with the u64 response field
	out    []byte // core response (nil when the command has none)
	uhwIn  []byte // driver request data
	uhwOut []byte // driver response data
	// pin lists further memory the kernel reaches through addresses inside
	// the request (e.g. rxe_modify_srq_cmd.mmap_info_addr).
	pin [][]byte
}

// execWrite runs a write command through INVOKE_WRITE, or through write() on
// the character device when the kernel has no ioctl path.
func (f *cmdFD) execWrite(w *writeCmd) error {
	code := uint64(w.cmd)
	if w.ex {
		code |= uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED
	}
	c := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE)
	c.constIn(uapi.UVERBS_ATTR_WRITE_CMD, code)
	if len(w.in) > 0 {
		c.in(uapi.UVERBS_ATTR_CORE_IN, w.in)
	}
	if len(w.out) > 0 {
		c.out(uapi.UVERBS_ATTR_CORE_OUT, w.out)
	}
	if len(w.uhwIn) > 0 {
		c.in(uapi.UVERBS_ATTR_UHW_IN, w.uhwIn)
	}
	if len(w.uhwOut) > 0 {
		c.out(uapi.UVERBS_ATTR_UHW_OUT, w.uhwOut)
	}
	c.bufs = append(c.bufs, w.pin...)
	err := f.ioctl(c)
	if !errors.Is(err, errIoctlUnsupported) {
		return err
	}
	return f.write(w)
}

// write issues w with write(2): header, core request and driver request in
// one buffer, core and driver response in another that the header (ex) or the
// request's leading response field (non-ex) points at, as ib_uverbs_write
// expects (linux:drivers/infiniband/core/uverbs_main.c).
func (f *cmdFD) write(w *writeCmd) error {
	resp := make([]byte, len(w.out)+len(w.uhwOut))
	var respPtr uint64
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, b := range w.pin {
		if len(b) > 0 {
			pin.Pin(&b[0])
		}
	}
	if len(resp) > 0 {
		pin.Pin(&resp[0])
		respPtr = uint64(uintptr(unsafe.Pointer(&resp[0])))
	}

	var req []byte
	if w.ex {
		if len(w.in)%8 != 0 || len(w.out)%8 != 0 || len(w.uhwIn)%8 != 0 || len(w.uhwOut)%8 != 0 {
			return errInvalid("extended command %d: sizes must be multiples of 8", w.cmd)
		}
		if len(w.in)/8 > 0xFFFF || len(w.out)/8 > 0xFFFF || len(w.uhwIn)/8 > 0xFFFF || len(w.uhwOut)/8 > 0xFFFF {
			return errInvalid("extended command %d: a part exceeds the u16 word counts", w.cmd)
		}
		hdr := uapi.IbUverbsCmdHdr{
			Command:  w.cmd | uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED,
			InWords:  uint16(len(w.in) / 8),
			OutWords: uint16(len(w.out) / 8),
		}
		exHdr := uapi.IbUverbsExCmdHdr{
			Response:         respPtr,
			ProviderInWords:  uint16(len(w.uhwIn) / 8),
			ProviderOutWords: uint16(len(w.uhwOut) / 8),
		}
		req = append(req, bytesOf(&hdr)...)
		req = append(req, bytesOf(&exHdr)...)
	} else {
		total := uapi.SizeofIbUverbsCmdHdr + len(w.in) + len(w.uhwIn)
		if total%4 != 0 || len(resp)%4 != 0 {
			return errInvalid("command %d: sizes must be multiples of 4", w.cmd)
		}
		if total/4 > 0xFFFF || len(resp)/4 > 0xFFFF {
			return errInvalid("command %d: %d request bytes exceed the u16 word counts", w.cmd, total)
		}
		hdr := uapi.IbUverbsCmdHdr{
			Command:  w.cmd,
			InWords:  uint16(total / 4),
			OutWords: uint16(len(resp) / 4),
		}
		req = append(req, bytesOf(&hdr)...)
	}
	start := len(req)
	req = append(req, w.in...)
	req = append(req, w.uhwIn...)
	if !w.ex && len(w.out) > 0 && len(w.in) >= 8 {
		// The leading __aligned_u64 response field carries the address.
		*(*uint64)(unsafe.Pointer(&req[start])) = respPtr
	}
	n, err := f.sys.Write(f.fd, req)
	if err != nil {
		return wrapErrno(err)
	}
	if n != len(req) {
		return wrapErrno(unix.EIO)
	}
	copy(w.out, resp)
	copy(w.uhwOut, resp[len(w.out):])
	return nil
}

// bytesOf views a fixed-size value as its bytes (host order, no copy).
func bytesOf[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// destroy releases a kernel object through its DESTROY ioctl method, or the
// legacy write command w on kernels without that method. resp (may be nil)
// receives the method's response attribute respAttr.
func (f *cmdFD) destroy(object uint16, method uint32, handleAttr uint16, handle uint32, respAttr uint16, resp []byte, w *writeCmd) error {
	c := newIoctl(object, method).idr(handleAttr, handle)
	if resp != nil {
		c.out(respAttr, resp)
	}
	err := f.ioctl(c)
	if errors.Is(err, errIoctlUnsupported) {
		return f.execWrite(w)
	}
	return err
}

// addrOf is the address of b's first byte, for request fields that carry
// user pointers; the caller pins b for the duration of the command.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// unsafePointer is the address of b's first byte as an unsafe.Pointer (for
// views of kernel-shared memory).
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
