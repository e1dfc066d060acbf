package provider

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// fakeKernel plays the uverbs kernel at the syscall seam: it decodes each
// ioctl and write, records it, and answers through per-method handlers.

type fakeAttr struct {
	uapi.IbUverbsAttr
	in []byte // copy of the payload (inline or pointed to) for PTR_IN attrs
}

type fakeCall struct {
	hdr   uapi.IbUverbsIoctlHdr
	attrs []fakeAttr
	// for writes: the raw request and the decoded header
	write    []byte
	writeCmd uint32
}

func (c *fakeCall) attr(id uint16) *fakeAttr {
	for i := range c.attrs {
		if c.attrs[i].AttrId == id {
			return &c.attrs[i]
		}
	}
	return nil
}

// ioctlHandler answers one method; out gives the user memory of a PTR_OUT
// attribute, setData writes an attribute's data field back (new handles).
type ioctlHandler func(call *fakeCall, out func(id uint16) []byte, setData func(id uint16, v uint64)) error

type fakeKernel struct {
	mu       sync.Mutex
	calls    []*fakeCall
	methods  map[uint64]ioctlHandler               // by methodKey(object, method)
	writeCmd map[uint32]func(in, out []byte) error // INVOKE_WRITE and write() bodies
	ioctlErr unix.Errno                            // if set, every ioctl fails with it
	checkID  bool                                  // reject headers whose driver id is not wantID, as the kernel does
	wantID   uint32
	noMethod map[uint64]bool // EPROTONOSUPPORT for these
	nextFD   int
	openFDs  map[int]string
	events   map[int][][]byte // fd -> queued event records
	mapped   int
	nextObj  uint64
}

func newFakeKernel() *fakeKernel {
	k := &fakeKernel{
		methods:  map[uint64]ioctlHandler{},
		writeCmd: map[uint32]func(in, out []byte) error{},
		noMethod: map[uint64]bool{},
		nextFD:   100,
		openFDs:  map[int]string{},
		events:   map[int][][]byte{},
		nextObj:  1,
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_GET_CONTEXT)] = func(c *fakeCall, out func(uint16) []byte, _ func(uint16, uint64)) error {
		if b := out(uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS); b != nil {
			*(*uint32)(unsafe.Pointer(&b[0])) = 3
		}
		return nil
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_ASYNC_EVENT, uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC)] = func(c *fakeCall, _ func(uint16) []byte, set func(uint16, uint64)) error {
		set(uapi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, uint64(k.newFD("async")))
		return nil
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE)] = func(c *fakeCall, out func(uint16) []byte, _ func(uint16, uint64)) error {
		cmd := uint32(c.attr(uapi.UVERBS_ATTR_WRITE_CMD).Data)
		c.writeCmd = cmd
		var in []byte
		if a := c.attr(uapi.UVERBS_ATTR_CORE_IN); a != nil {
			in = a.in
		}
		return k.runWrite(cmd, in, out(uapi.UVERBS_ATTR_CORE_OUT))
	}
	k.methods[methodKey(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INFO_HANDLES)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error { return nil }
	// Object creation and destruction methods: hand out handles.
	for _, m := range []struct {
		obj    uint16
		method uint32
		handle uint16
	}{
		{uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE, uapi.UVERBS_ATTR_CREATE_CQ_HANDLE},
		{uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE, uapi.UVERBS_ATTR_CREATE_QP_HANDLE},
		{uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE, uapi.UVERBS_ATTR_CREATE_SRQ_HANDLE},
	} {
		m := m
		k.methods[methodKey(m.obj, m.method)] = func(c *fakeCall, out func(uint16) []byte, set func(uint16, uint64)) error {
			set(m.handle, k.newObj())
			return nil
		}
	}
	for _, m := range []struct {
		obj    uint16
		method uint32
	}{
		{uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY}, {uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY},
		{uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY}, {uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY},
		{uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY}, {uapi.UVERBS_OBJECT_AH, uapi.UVERBS_METHOD_AH_DESTROY},
	} {
		k.methods[methodKey(m.obj, m.method)] = func(*fakeCall, func(uint16) []byte, func(uint16, uint64)) error { return nil }
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_ALLOC_PD] = func(in, out []byte) error {
		*(*uint32)(unsafe.Pointer(&out[0])) = uint32(k.newObj())
		return nil
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_GET_CONTEXT] = func(in, out []byte) error {
		r := (*uapi.IbUverbsGetContextResp)(unsafe.Pointer(&out[0]))
		r.AsyncFd = uint32(k.newFD("async"))
		r.NumCompVectors = 5
		return nil
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL] = func(in, out []byte) error {
		*(*uint32)(unsafe.Pointer(&out[0])) = uint32(k.newFD("comp channel"))
		return nil
	}
	for _, cmd := range []uint32{uapi.IB_USER_VERBS_CMD_DEALLOC_PD, uapi.IB_USER_VERBS_CMD_DESTROY_CQ,
		uapi.IB_USER_VERBS_CMD_DESTROY_QP, uapi.IB_USER_VERBS_CMD_MODIFY_QP, uapi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ} {
		k.writeCmd[cmd] = func(in, out []byte) error { return nil }
	}
	k.writeCmd[uapi.IB_USER_VERBS_CMD_CREATE_CQ] = func(in, out []byte) error {
		req := (*uapi.IbUverbsCreateCq)(unsafe.Pointer(&in[0]))
		r := (*uapi.IbUverbsCreateCqResp)(unsafe.Pointer(&out[0]))
		r.CqHandle, r.Cqe = uint32(k.newObj()), req.Cqe+1
		return nil
	}
	k.writeCmd[uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE|uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED] = func(in, out []byte) error {
		r := (*uapi.IbUverbsExQueryDeviceResp)(unsafe.Pointer(&out[0]))
		r.Base.NodeGuid = 0x5342525642540002 // 02 00 54 42 56 52 42 53 on the wire
		r.Base.MaxCqe = 4096
		r.Base.PhysPortCnt = 1
		r.ResponseLength = uapi.SizeofIbUverbsExQueryDeviceResp // whole response, as uverbs_response_length reports
		r.DeviceCapFlagsEx = 1 << 40
		return nil
	}
	return k
}

// newObj hands out a kernel object handle. Handlers run without k.mu (a
// test may block in one), so they take it here.
func (k *fakeKernel) newObj() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.nextObj
	k.nextObj++
	return h
}

// newFD hands out an fd; like newObj it takes k.mu, since handlers run
// without it. newFDLocked is for callers that hold it.
func (k *fakeKernel) newFD(what string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.newFDLocked(what)
}

func (k *fakeKernel) newFDLocked(what string) int {
	fd := k.nextFD
	k.nextFD++
	k.openFDs[fd] = what
	return fd
}

func (k *fakeKernel) runWrite(cmd uint32, in, out []byte) error {
	h := k.writeCmd[cmd]
	if h == nil {
		return unix.EOPNOTSUPP
	}
	return h(in, out)
}

func (k *fakeKernel) last() *fakeCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[len(k.calls)-1]
}

func (k *fakeKernel) callsTo(object uint16, method uint32) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, c := range k.calls {
		if c.write == nil && c.hdr.ObjectId == object && uint32(c.hdr.MethodId) == method {
			n++
		}
	}
	return n
}

// ---- sysCalls ----

func (k *fakeKernel) Open(path string, flags int) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if flags&unix.O_CLOEXEC == 0 {
		return -1, unix.EINVAL // every fd of ours must be close-on-exec
	}
	return k.newFDLocked(path), nil
}

func (k *fakeKernel) Close(fd int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.openFDs[fd]; !ok {
		return unix.EBADF
	}
	delete(k.openFDs, fd)
	return nil
}

func ptrBytes(a *uapi.IbUverbsAttr) []byte {
	if a.Len == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a.Data))
	return unsafe.Slice((*byte)(p), a.Len)
}

func (k *fakeKernel) Ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if req != uapi.RDMA_VERBS_IOCTL {
		return unix.ENOTTY
	}
	hdr := (*uapi.IbUverbsIoctlHdr)(arg)
	if int(hdr.Length) != uapi.SizeofIbUverbsIoctlHdr+int(hdr.NumAttrs)*uapi.SizeofIbUverbsAttr {
		return unix.EINVAL
	}
	var attrs []uapi.IbUverbsAttr
	if hdr.NumAttrs > 0 { // no pointer past the header's allocation (checkptr)
		attrs = unsafe.Slice((*uapi.IbUverbsAttr)(unsafe.Add(arg, uapi.SizeofIbUverbsIoctlHdr)), hdr.NumAttrs)
	}
	call := &fakeCall{hdr: *hdr}
	for i := range attrs {
		fa := fakeAttr{IbUverbsAttr: attrs[i]}
		if attrs[i].Len > 0 && attrs[i].Len <= 8 {
			fa.in = append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&attrs[i].Data)), attrs[i].Len)...)
		} else if attrs[i].Len > 8 {
			fa.in = append([]byte(nil), ptrBytes(&attrs[i])...)
		}
		call.attrs = append(call.attrs, fa)
	}
	k.calls = append(k.calls, call)
	if k.ioctlErr != 0 {
		return k.ioctlErr
	}
	if k.checkID && hdr.DriverId != k.wantID {
		return unix.EINVAL
	}
	key := methodKey(hdr.ObjectId, uint32(hdr.MethodId))
	h := k.methods[key]
	if h == nil || k.noMethod[key] {
		return unix.EPROTONOSUPPORT
	}
	out := func(id uint16) []byte {
		for i := range attrs {
			if attrs[i].AttrId == id {
				attrs[i].Flags |= uapi.UVERBS_ATTR_F_VALID_OUTPUT
				return ptrBytes(&attrs[i])
			}
		}
		return nil
	}
	set := func(id uint16, v uint64) {
		for i := range attrs {
			if attrs[i].AttrId == id {
				attrs[i].Data = v
			}
		}
	}
	k.mu.Unlock()
	err := h(call, out, set)
	k.mu.Lock()
	return err
}

func (k *fakeKernel) Write(fd int, p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	call := &fakeCall{write: append([]byte(nil), p...)}
	k.calls = append(k.calls, call)
	hdr := (*uapi.IbUverbsCmdHdr)(unsafe.Pointer(&p[0]))
	call.writeCmd = hdr.Command
	var in, out []byte
	if hdr.Command&uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
		ex := (*uapi.IbUverbsExCmdHdr)(unsafe.Pointer(&p[uapi.SizeofIbUverbsCmdHdr]))
		body := p[uapi.SizeofIbUverbsCmdHdr+uapi.SizeofIbUverbsExCmdHdr:]
		if len(body) != (int(hdr.InWords)+int(ex.ProviderInWords))*8 {
			return 0, unix.EINVAL
		}
		in = body[:int(hdr.InWords)*8]
		if ex.Response != 0 {
			out = unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&ex.Response))), int(hdr.OutWords)*8)
		}
	} else {
		if int(hdr.InWords)*4 != len(p) {
			return 0, unix.EINVAL
		}
		in = p[uapi.SizeofIbUverbsCmdHdr:]
		if hdr.OutWords > 0 {
			resp := (*unsafe.Pointer)(unsafe.Pointer(&in[0]))
			out = unsafe.Slice((*byte)(*resp), int(hdr.OutWords)*4)
		}
	}
	k.mu.Unlock()
	err := k.runWrite(hdr.Command, in, out)
	k.mu.Lock()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (k *fakeKernel) Read(fd int, p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.events[fd]
	if len(q) == 0 {
		return 0, unix.EAGAIN
	}
	k.events[fd] = q[1:]
	return copy(p, q[0]), nil
}

func (k *fakeKernel) Mmap(fd int, offset int64, length int, prot, flags int) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mapped++
	return make([]byte, length), nil
}

func (k *fakeKernel) Munmap(b []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mapped--
	return nil
}

func (k *fakeKernel) Poll(fds []unix.PollFd, timeoutMs int) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for i := range fds {
		if len(k.events[int(fds[i].Fd)]) > 0 {
			fds[i].Revents = unix.POLLIN
			n++
		}
	}
	return n, nil
}

func (k *fakeKernel) SetNonblock(fd int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.openFDs[fd]; !ok {
		return unix.EBADF
	}
	return nil
}

func (k *fakeKernel) queueEvent(fd int, rec []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events[fd] = append(k.events[fd], append([]byte(nil), rec...))
}

// openFake opens a context of the given driver on a fake kernel.
func openFake(t *testing.T, k *fakeKernel, drv Driver) *Context {
	t.Helper()
	c, err := openInfo(k, DeviceInfo{Name: "fake0", Chardev: "/dev/infiniband/uverbs9", Driver: drv}, t.TempDir())
	if err != nil {
		t.Fatalf("openInfo: %v", err)
	}
	return c
}

// fakeQP opens a context on k (driver rxe) and creates a PD, a 4-entry CQ
// and a QP of typ with cp on them; the context is closed when t ends.
func fakeQP(t *testing.T, k *fakeKernel, typ QPType, cp QPCap) *QP {
	t.Helper()
	c := openFake(t, k, rxe)
	t.Cleanup(func() { c.Close() })
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQAttr{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: cp})
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

func (a *fakeAttr) String() string {
	return fmt.Sprintf("attr{id %#x len %d flags %#x data %#x}", a.AttrId, a.Len, a.Flags, a.Data)
}
