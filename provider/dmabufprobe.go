package provider

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DmabufImportState says what a context knows about importing dma-bufs.
type DmabufImportState int

const (
	// DmabufImportUnknown: not established (not tried, or the attempt was
	// not conclusive); the kernel's answers stand.
	DmabufImportUnknown DmabufImportState = iota
	// DmabufImportWorks: a real dma-buf registered on the device.
	DmabufImportWorks
	// DmabufImportRefused: a well-formed registration of a real dma-buf was
	// refused with EINVAL: the device cannot import any (docs/dmabuf.md).
	DmabufImportRefused
	// DmabufImportNotOffered: the kernel has no dma-buf MRs for the device
	// (EOPNOTSUPP or EPROTONOSUPPORT from the uverbs core).
	DmabufImportNotOffered
)

func (s DmabufImportState) String() string {
	switch s {
	case DmabufImportWorks:
		return "works"
	case DmabufImportRefused:
		return "refused"
	case DmabufImportNotOffered:
		return "not offered"
	}
	return "unknown"
}

// DmabufImport is what one real dma-buf registration on a device showed.
type DmabufImport struct {
	State DmabufImportState
	// Why says how it was established, or why it could not be.
	Why string
}

// dmabufProbeEnv turns the import attempt off (USB4VERBS_DMABUF_PROBE=0):
// NCCL's probe then gets the kernel's answer, as through the module's C
// provider.
const dmabufProbeEnv = "USB4VERBS_DMABUF_PROBE"

// probeDmabuf makes the dma-buf the import attempt registers: one page of a
// memfd exported through /dev/udmabuf. It returns the dma-buf fd, its size
// and what closes it. A variable for the tests (the fake kernel takes any fd).
var probeDmabuf = udmabufPage

// panicOnWarn reports whether a kernel WARN would panic the machine
// (/proc/sys/kernel/panic_on_warn not 0, or unreadable). A variable for the
// tests.
var panicOnWarn = func() bool {
	b, err := os.ReadFile("/proc/sys/kernel/panic_on_warn")
	return err != nil || strings.TrimSpace(string(b)) != "0"
}

// udmabufCreate is struct udmabuf_create (include/uapi/linux/udmabuf.h).
type udmabufCreate struct {
	memfd  uint32
	flags  uint32
	offset uint64
	size   uint64
}

const (
	udmabufFlagsCloexec = 0x01
	// UDMABUF_CREATE: _IOW('u', 0x42, struct udmabuf_create).
	udmabufCreateIoctl = 1<<30 | uint32(unsafe.Sizeof(udmabufCreate{}))<<16 | 'u'<<8 | 0x42
)

// udmabufPage exports one page of a sealed memfd as a dma-buf through
// /dev/udmabuf (CONFIG_UDMABUF; the node is root:kvm 0660 on systemd hosts,
// so many users cannot: then the import stays unknown).
func udmabufPage() (int, uint64, func(), error) {
	dev, err := unix.Open("/dev/udmabuf", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, nil, fmt.Errorf("/dev/udmabuf: %w", err)
	}
	defer unix.Close(dev)
	mfd, err := unix.MemfdCreate("usb4verbs-dmabuf-probe", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		return -1, 0, nil, fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(mfd)
	size := uint64(os.Getpagesize())
	if err := unix.Ftruncate(mfd, int64(size)); err != nil {
		return -1, 0, nil, fmt.Errorf("ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(mfd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		return -1, 0, nil, fmt.Errorf("F_SEAL_SHRINK: %w", err)
	}
	req := udmabufCreate{memfd: uint32(mfd), flags: udmabufFlagsCloexec, size: size}
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(dev), uintptr(udmabufCreateIoctl), uintptr(unsafe.Pointer(&req)))
	if e != 0 {
		return -1, 0, nil, fmt.Errorf("UDMABUF_CREATE: %w", e)
	}
	fd := int(r)
	return fd, size, func() { unix.Close(fd) }, nil
}

// DmabufImport reports whether a real dma-buf imports on the context's
// device, trying it once per context (later calls return the first answer).
//
// The attempt registers one page of a udmabuf (probeDmabuf), whole, at iova
// 0, access 0: every argument check of the uverbs core and of
// ib_umem_dmabuf_get passes, so an EINVAL comes from the import itself. On
// a module that registered its ib_device without a DMA device
// (ib_register_device(..., NULL)) that is dma_buf_dynamic_attach(dmabuf,
// NULL), which refuses every dma-buf whatever its exporter, after a kernel
// WARN: so the attempt is skipped where a WARN would panic the machine
// (panic_on_warn), and when USB4VERBS_DMABUF_PROBE=0. Other errnos leave the
// answer unknown. A kernel without dma-buf MRs is not tried (NCCL's probe
// shape, length 0 on fd -1, asks the uverbs core first).
//
// A conclusive answer on a usb4 device (it imports, or it cannot) holds for
// every device of the module in this process (moduleImports): the module
// registers all of its ib_devices the same way, so a process that opens
// several (NCCL opens every rail, ibvinfo every device) makes one attempt,
// and a module that cannot import gives one kernel WARN, not one per device.
func (c *Context) DmabufImport() DmabufImport {
	c.mu.Lock()
	if c.dmabufImport != nil {
		d := *c.dmabufImport
		c.mu.Unlock()
		return d
	}
	c.mu.Unlock()
	d, shared := moduleImports.get(c)
	if !shared {
		d = c.tryDmabufImport()
		moduleImports.put(c, d)
	}
	c.mu.Lock()
	if c.dmabufImport == nil {
		c.dmabufImport = &d
	}
	d = *c.dmabufImport
	c.mu.Unlock()
	return d
}

// moduleImports keeps the conclusive import answers per module (usb4
// devices only: every one is thunderbolt_ibverbs'), keyed by the context's
// kernel interface too, so that a test's fake kernel is a module of its own.
var moduleImports = &importCache{m: map[moduleKey]DmabufImport{}}

type moduleKey struct {
	sys  sysCalls
	kind DriverKind
}

type importCache struct {
	mu sync.Mutex
	m  map[moduleKey]DmabufImport
}

func (ic *importCache) get(c *Context) (DmabufImport, bool) {
	if c.info.Driver.Kind != DriverUSB4 {
		return DmabufImport{}, false
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	d, ok := ic.m[moduleKey{c.owned.sys, c.info.Driver.Kind}]
	return d, ok
}

func (ic *importCache) put(c *Context, d DmabufImport) {
	if c.info.Driver.Kind != DriverUSB4 || (d.State != DmabufImportWorks && d.State != DmabufImportRefused) {
		return
	}
	d.Why += ", tried on " + c.info.Name + ": the answer holds for every device of the module in this process"
	k := moduleKey{c.owned.sys, c.info.Driver.Kind}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if _, ok := ic.m[k]; !ok {
		ic.m[k] = d
	}
}

func (c *Context) tryDmabufImport() DmabufImport {
	unknown := func(format string, args ...any) DmabufImport {
		return DmabufImport{State: DmabufImportUnknown, Why: fmt.Sprintf(format, args...)}
	}
	if os.Getenv(dmabufProbeEnv) == "0" {
		return unknown("not tried (%s=0)", dmabufProbeEnv)
	}
	pd, err := c.AllocPD()
	if err != nil {
		return unknown("not tried (alloc pd: %v)", err)
	}
	defer pd.Destroy()
	if _, err := pd.regDmabufMR(0, 0, 0, -1, 0); err != nil && errors.Is(err, ErrNotSupported) {
		return DmabufImport{State: DmabufImportNotOffered, Why: "the kernel has no dma-buf MRs for this device (" + errnoText(err) + ")"}
	}
	if panicOnWarn() {
		return unknown("not tried: the kernel panics on a WARN (panic_on_warn), which a device without a DMA device gives on every import")
	}
	fd, size, closeFD, err := probeDmabuf()
	if err != nil {
		return unknown("not tried (no dma-buf to try with: %v)", err)
	}
	defer closeFD()
	mr, err := pd.regDmabufMR(0, size, 0, fd, 0)
	if err == nil {
		_ = mr.Destroy()
		return DmabufImport{State: DmabufImportWorks, Why: fmt.Sprintf("a %d-byte udmabuf registered", size)}
	}
	var no unix.Errno
	if errors.As(err, &no) && no == unix.EINVAL {
		return DmabufImport{State: DmabufImportRefused, Why: fmt.Sprintf("a well-formed registration of a %d-byte udmabuf was refused with EINVAL "+
			"(the module registered the device without a DMA device)", size)}
	}
	return unknown("a %d-byte udmabuf registration failed: %v", size, err)
}

// errnoText names the errno in err, else err's text.
func errnoText(err error) string {
	var no unix.Errno
	if errors.As(err, &no) {
		if no == unix.EOPNOTSUPP {
			return "EOPNOTSUPP"
		}
		if n := unix.ErrnoName(no); n != "" {
			return n
		}
	}
	return err.Error()
}
