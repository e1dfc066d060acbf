package provider

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// Context is an open uverbs device: the command fd, the async event fd and
// every object created through it. All methods are safe for concurrent use;
// the control path takes one mutex per context, which the slow memory
// registration verbs drop while they are in the kernel (see outsideLock).
type Context struct {
	cmd       *cmdFD
	owned     *ownedFDs
	ownFDs    bool // Close closes the command and async fds
	info      DeviceInfo
	sysfsRoot string

	asyncFD        int // -1 when the kernel could not give one
	numCompVectors uint32
	coreSupport    uint64

	mu         sync.Mutex
	closed     bool
	inflight   int              // verbs in the kernel without mu (outsideLock)
	idle       *sync.Cond       // on mu: signalled when inflight drops to 0
	objects    []object         // tracked objects in creation order; nil where untracked
	objIndex   map[object]int   // position of each tracked object in objects
	objLive    int              // tracked objects (non-nil entries of objects)
	cqs        map[uint64]*CQ   // by user handle, for completion and async events
	qps        map[uint64]*QP   // by user handle, for async events
	srqs       map[uint64]*SRQ  // by user handle, for async events
	nextHandle uint64           // generated user handles when the caller gives none
	maps       map[*byte][]byte // mappings of the command fd we own

	gone      atomic.Bool     // the device was removed (removal.go): commands answer EIO
	onRemoved func()          // WatchRemoval's callback
	watcher   *removalWatcher // set while watched
	realFDs   bool            // the fds are the process's (not a fake kernel's)

	dmabufImport *DmabufImport // on mu: DmabufImport's answer, once tried
	kattr        *DeviceAttr   // on mu: the kernel's first QUERY_DEVICE answer

	nextProviderSRQ uint32      // on mu: provider SRQs made (their handles)
	relay           *asyncRelay // on mu: the provider's async events (asyncrelay.go)
	srqForced       bool        // USB4VERBS_SRQ=provider at open (srqmode.go)
}

// object is what the context tracks so Close can destroy leftovers.
type object interface {
	// destroyRank orders teardown: lower ranks are destroyed first.
	destroyRank() int
	// destroyLocked releases the kernel object; the context lock is held.
	destroyLocked() error
}

// Teardown order: dependants before what they depend on.
const (
	rankMW = iota // a bound window holds its MR (and, type 2, its QP)
	rankAH
	rankQP
	rankSRQ
	rankCQ
	rankMR
	rankPD
	rankCompChannel
)

// Open opens the RDMA device called name (as `rdma dev` and ibv_devices
// list it) and creates a uverbs context on it.
func Open(name string) (*Context, error) {
	info, err := systemLookup{}.byName(name)
	if err != nil {
		return nil, verbError("open device", err)
	}
	return openInfo(realSys{}, info, "")
}

// openInfo opens a resolved device through the given syscall seam.
func openInfo(sys sysCalls, info DeviceInfo, sysfsRoot string) (*Context, error) {
	if info.Chardev == "" {
		return nil, verbError("open device", fmt.Errorf("%s has no uverbs char device: %w", info.Name, errno{unix.ENODEV}))
	}
	fd, err := sys.Open(info.Chardev, unix.O_RDWR|unix.O_CLOEXEC)
	if err != nil {
		return nil, verbError("open device", fmt.Errorf("%s: %w", info.Chardev, wrapErrno(err)))
	}
	c, err := newContext(sys, info, sysfsRoot, fd, true)
	if err != nil {
		_ = sys.Close(fd)
		return nil, err
	}
	return c, nil
}

// OpenFD creates a context on a uverbs command fd the caller opened, as
// libibverbs hands one to a provider's alloc_context. name is the device's
// name (for its driver id). The context never closes cmdFD, nor the async fd
// it allocates (AsyncFD): the caller owns both (libibverbs closes them in
// verbs_uninit_context). Close still destroys every object.
func OpenFD(name string, cmdFD int) (*Context, error) {
	info, err := systemLookup{}.byName(name)
	if err != nil {
		return nil, verbError("open device", err)
	}
	return newContext(realSys{}, info, "", cmdFD, false)
}

// KnownDevice is what a caller that has already resolved a device knows
// about it: libibverbs hands a provider's alloc_context a device it found
// through its own netlink or sysfs scan, so looking it up again is redundant
// (and, for a device renamed or re-created meanwhile, less exact).
type KnownDevice struct {
	Name     string
	NodeGUID uint64 // host order; 0 when unknown
	Kind     DriverKind
	// DriverID is the kernel's enum rdma_driver_id for the ioctl headers:
	// RDMA_DRIVER_RXE for rxe; RDMA_DRIVER_UNKNOWN for usb4, whose module
	// sets uverbs_no_driver_id_binding, so the kernel accepts any id.
	DriverID uint32
}

// OpenFDKnown is OpenFD for a device the caller has already identified: it
// creates the context on cmdFD without the netlink lookup (two netlink
// sockets per open, most of OpenFD's cost under open/close churn). The
// caller owns cmdFD and the async fd, as with OpenFD.
func OpenFDKnown(dev KnownDevice, cmdFD int) (*Context, error) {
	if dev.Name == "" || cmdFD < 0 {
		return nil, verbError("open device", errInvalid("device %q, command fd %d", dev.Name, cmdFD))
	}
	if err := checkUverbsFD(cmdFD); err != nil {
		return nil, verbError("open device", fmt.Errorf("%s: %w", dev.Name, err))
	}
	info := DeviceInfo{
		Name:     dev.Name,
		NodeGUID: dev.NodeGUID,
		Driver:   Driver{Kind: dev.Kind, ID: dev.DriverID},
	}
	if dev.Kind == DriverRXE {
		info.Protocol = "roce" // what netlink reports for rxe; sysfsGID reads it
	}
	return newContext(realSys{}, info, "", cmdFD, false)
}

// AdoptFDKnown makes a Context for a kernel ucontext that already exists on
// cmdFD: the one a fork() parent created through a Go runtime that is gone
// in the child (cshim's Go part, issue 24). fork() shares the open file, so
// the kernel serves the child's commands on it as the parent's, as it does
// for rdma-core's providers; the Context issues no GET_CONTEXT and allocates
// no async fd. asyncFD (libibverbs' async fd of that context, -1 if none),
// numCompVectors and coreSupport are what the first open reported. Objects
// the parent created are not known to the new Context; new ones work. The
// fds stay the caller's.
func AdoptFDKnown(dev KnownDevice, cmdFD, asyncFD int, numCompVectors uint32, coreSupport uint64) (*Context, error) {
	if dev.Name == "" || cmdFD < 0 {
		return nil, verbError("adopt context", errInvalid("device %q, command fd %d", dev.Name, cmdFD))
	}
	if err := checkUverbsFD(cmdFD); err != nil {
		return nil, verbError("adopt context", fmt.Errorf("%s: %w", dev.Name, err))
	}
	info := DeviceInfo{Name: dev.Name, NodeGUID: dev.NodeGUID, Driver: Driver{Kind: dev.Kind, ID: dev.DriverID}}
	if dev.Kind == DriverRXE {
		info.Protocol = "roce"
	}
	c, err := newContextAdopted(realSys{}, info, cmdFD)
	if err != nil {
		return nil, err
	}
	c.asyncFD = asyncFD
	c.numCompVectors = numCompVectors
	c.coreSupport = coreSupport
	return c, nil
}

// checkUverbsFD refuses an fd that is not a uverbs character device (with
// the lookup skipped, nothing else would notice: write() to /dev/null
// "succeeds" with a zeroed GET_CONTEXT response). One fstat and one
// readlink; without a readable /sys only the character-device test remains.
func checkUverbsFD(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("command fd %d: %w", fd, wrapErrno(err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("command fd %d is not a character device: %w", fd, errno{unix.ENODEV})
	}
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/char/%d:%d/subsystem", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	if err == nil && filepath.Base(link) != "infiniband_verbs" {
		return fmt.Errorf("command fd %d is a %s device, not uverbs: %w", fd, filepath.Base(link), errno{unix.ENODEV})
	}
	return nil
}

// newContext creates the ucontext on fd. With ownFDs the context closes the
// command and async fds on Close (and a GC cleanup does if Close is
// forgotten); completion channels it creates are always its own.
func newContext(sys sysCalls, info DeviceInfo, sysfsRoot string, fd int, ownFDs bool) (*Context, error) {
	return newContextOn(sys, info, sysfsRoot, fd, ownFDs, false)
}

// newContextAdopted is newContext on an fd whose ucontext exists (AdoptFDKnown).
func newContextAdopted(sys sysCalls, info DeviceInfo, fd int) (*Context, error) {
	return newContextOn(sys, info, "", fd, false, true)
}

func newContextOn(sys sysCalls, info DeviceInfo, sysfsRoot string, fd int, ownFDs, adopt bool) (*Context, error) {
	owned := &ownedFDs{sys: sys, fds: map[int]struct{}{}}
	if ownFDs {
		owned.add(fd)
	}
	c := &Context{
		cmd:        &cmdFD{sys: sys, fd: fd, driverID: info.Driver.ID},
		owned:      owned,
		ownFDs:     ownFDs,
		info:       info,
		sysfsRoot:  sysfsRoot,
		asyncFD:    -1,
		cqs:        make(map[uint64]*CQ),
		qps:        make(map[uint64]*QP),
		srqs:       make(map[uint64]*SRQ),
		nextHandle: 1 << 63, // above any user-space address cshim may pass
		maps:       make(map[*byte][]byte),
		srqForced:  providerSRQForcedFromEnv(),
	}
	c.idle = sync.NewCond(&c.mu)
	c.cmd.sys = removedGate{sysCalls: sys, gone: &c.gone}
	_, c.realFDs = sys.(realSys)
	if info.FromSysfs && info.Driver.ID == uapi.RDMA_DRIVER_UNKNOWN {
		c.probeDriverID()
	}
	if adopt {
		return c, nil // no GC cleanup: the fds are the caller's
	}
	if err := c.getContext(); err != nil {
		if c.asyncFD >= 0 {
			_ = sys.Close(c.asyncFD)
		}
		return nil, verbError("get context", err)
	}
	// Safety net for a forgotten Close: the kernel frees every object of a
	// context when its fds are closed.
	runtime.AddCleanup(c, (*ownedFDs).closeAll, owned)
	return c, nil
}

// ownedFDs are the fds a context opened (command, async, completion
// channels). Closing through it means an fd number is closed at most once,
// even by the cleanup that runs when a context is garbage collected unclosed.
type ownedFDs struct {
	mu  sync.Mutex
	sys sysCalls
	fds map[int]struct{}
}

func (o *ownedFDs) add(fd int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fds[fd] = struct{}{}
}

func (o *ownedFDs) close(fd int) error {
	o.mu.Lock()
	_, ok := o.fds[fd]
	delete(o.fds, fd)
	o.mu.Unlock()
	if !ok {
		return errClosed(fmt.Sprintf("fd %d", fd))
	}
	return wrapErrno(o.sys.Close(fd))
}

func (o *ownedFDs) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for fd := range o.fds {
		_ = o.sys.Close(fd)
	}
	clear(o.fds)
}

// probeDriverID finds the kernel's driver id when the device was found
// through sysfs, which does not show it. The uverbs core rejects an ioctl
// whose header carries another driver's id with EINVAL before it looks at
// the method (linux:drivers/infiniband/core/uverbs_ioctl.c), and
// UVERBS_METHOD_INFO_HANDLES has no side effects and needs no context, so
// the ids are tried in turn. Without the ioctl framework the id is moot.
func (c *Context) probeDriverID() {
	for id := uint32(0); id < 64; id++ {
		c.cmd.driverID = id
		var total uint32
		var list [1]uint32
		ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INFO_HANDLES).
			constIn(uapi.UVERBS_ATTR_INFO_OBJECT_ID, uapi.UVERBS_OBJECT_PD).
			out(uapi.UVERBS_ATTR_INFO_TOTAL_HANDLES, bytesOf(&total)).
			out(uapi.UVERBS_ATTR_INFO_HANDLES_LIST, bytesOf(&list))
		err := c.cmd.ioctl(ic)
		if err == nil {
			c.info.Driver = classifyDriver(c.info.Name, c.info.NodeGUID, id)
			return
		}
		if !errors.Is(err, unix.EINVAL) {
			break // no ioctl framework or no INFO_HANDLES: keep UNKNOWN
		}
	}
	c.cmd.driverID = uapi.RDMA_DRIVER_UNKNOWN
}

// getContext creates the kernel ucontext: the ioctl GET_CONTEXT plus
// ASYNC_EVENT_ALLOC, or the write command, which returns the async fd itself
// (rdma-private-abi §7.1).
func (c *Context) getContext() error {
	var ncomp uint32
	var core uint64
	ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_GET_CONTEXT).
		out(uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, bytesOf(&ncomp)).optional().
		out(uapi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, bytesOf(&core)).optional()
	err := c.cmd.ioctl(ic)
	if errors.Is(err, errIoctlUnsupported) {
		req := uapi.IbUverbsGetContext{}
		var resp uapi.IbUverbsGetContextResp
		if err := c.cmd.write(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_GET_CONTEXT, in: bytesOf(&req), out: bytesOf(&resp)}); err != nil {
			return err
		}
		c.numCompVectors = resp.NumCompVectors
		c.asyncFD = int(int32(resp.AsyncFd))
		if !c.ownFDs {
			return nil // the caller's fd: leave its blocking mode alone
		}
		c.owned.add(c.asyncFD)
		return c.cmd.sys.SetNonblock(c.asyncFD)
	}
	if err != nil {
		return err
	}
	c.numCompVectors = ncomp
	if ic.validOutput(uapi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT) {
		c.coreSupport = core
	}

	ac := newIoctl(uapi.UVERBS_OBJECT_ASYNC_EVENT, uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC).
		newObj(uapi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	if err := c.cmd.ioctl(ac); err != nil {
		// A context without async events still works; AsyncEvent reports it.
		return nil
	}
	fd, _ := ac.result(uapi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	c.asyncFD = int(int32(fd))
	if !c.ownFDs {
		return nil // handed to the caller (libibverbs reads it blocking)
	}
	c.owned.add(c.asyncFD)
	if err := c.cmd.sys.SetNonblock(c.asyncFD); err != nil {
		return fmt.Errorf("async fd: %w", wrapErrno(err))
	}
	return nil
}

// Device returns what was known about the device when it was opened.
func (c *Context) Device() DeviceInfo { return c.info }

// Driver returns the backend kind and the kernel driver id.
func (c *Context) Driver() Driver { return c.info.Driver }

// CoreSupport is the kernel's IB_UVERBS_CORE_SUPPORT_* bits (0 when the
// kernel did not say, e.g. through the write path).
func (c *Context) CoreSupport() uint64 { return c.coreSupport }

// NumCompVectors is the number of completion vectors of the device.
func (c *Context) NumCompVectors() uint32 { return c.numCompVectors }

// CmdFD is the uverbs command file descriptor (for the data path and cshim).
// It is -1 after Close.
func (c *Context) CmdFD() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1
	}
	return c.cmd.fd
}

// AsyncFD is the async event file descriptor, or -1.
func (c *Context) AsyncFD() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1
	}
	return c.asyncFD
}

// lock takes the context lock and fails if the context is closed. On success
// the caller must unlock c.mu.
func (c *Context) lock(verb string) error {
	if c == nil || c.cmd == nil {
		return verbError(verb, errInvalid("nil or unopened context"))
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return verbError(verb, errClosed("context"))
	}
	return nil
}

// outsideLock runs call, a kernel command, without the context lock, so
// that a slow one (REG_MR of gigabytes pins every page first) does not stall
// the other threads' verbs. c.mu must be held on entry and is held again on
// return. The call counts as in flight: Close marks the context closed (no
// new verb starts) and then waits for in-flight calls before it destroys
// what is tracked, so an object a call creates is tracked and destroyed
// with the rest, and no call runs on a closed fd. The caller guards its own
// object against a concurrent destroy (MR.deregistering).
func (c *Context) outsideLock(call func() error) error {
	c.inflight++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight--
		if c.inflight == 0 && c.idle != nil {
			c.idle.Broadcast()
		}
	}()
	return call()
}

// track and untrack are O(1) amortised: an application may hold 100,000 MRs.
func (c *Context) track(o object) {
	if c.objIndex == nil {
		c.objIndex = make(map[object]int)
	}
	c.objIndex[o] = len(c.objects)
	c.objects = append(c.objects, o)
	c.objLive++
}

func (c *Context) untrack(o object) {
	i, ok := c.objIndex[o]
	if !ok {
		return
	}
	delete(c.objIndex, o)
	c.objects[i] = nil
	c.objLive--
	if len(c.objects) > 64 && c.objLive < len(c.objects)/2 {
		// Compact, keeping creation order (Close's teardown order).
		kept := c.objects[:0]
		for _, x := range c.objects {
			if x != nil {
				c.objIndex[x] = len(kept)
				kept = append(kept, x)
			}
		}
		clear(c.objects[len(kept):])
		c.objects = kept
	}
}

// userHandle returns h, or a fresh context-unique handle when h is 0.
func (c *Context) userHandle(h uint64) uint64 {
	if h != 0 {
		return h
	}
	c.nextHandle++
	return c.nextHandle
}

// Close destroys every object still alive (AHs and QPs first, PDs and
// completion channels last), unmaps what the provider mapped and closes the
// async and command fds. Closing twice returns an error wrapping ErrClosed.
func (c *Context) Close() error {
	if c == nil || c.cmd == nil {
		return verbError("close context", errInvalid("nil or unopened context"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return verbError("close context", errClosed("context"))
	}
	c.closed = true
	if c.watcher != nil {
		c.watcher.remove(c)
	}
	for c.inflight > 0 {
		c.idle.Wait()
	}
	var errs []error
	for rank := rankMW; rank <= rankCompChannel; rank++ {
		for i := len(c.objects) - 1; i >= 0; i-- {
			o := c.objects[i]
			if o == nil || o.destroyRank() != rank {
				continue
			}
			if err := o.destroyLocked(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.objects, c.objIndex, c.objLive = nil, nil, 0
	for _, m := range c.maps {
		if err := c.cmd.sys.Munmap(m); err != nil {
			errs = append(errs, fmt.Errorf("munmap: %w", wrapErrno(err)))
		}
	}
	c.maps = nil
	c.closeRelayLocked()
	if c.ownFDs {
		if c.asyncFD >= 0 {
			if err := c.owned.close(c.asyncFD); err != nil {
				errs = append(errs, fmt.Errorf("close async fd: %w", err))
			}
		}
		if err := c.owned.close(c.cmd.fd); err != nil {
			errs = append(errs, fmt.Errorf("close command fd: %w", err))
		}
	}
	c.asyncFD = -1
	c.cmd.fd = -1
	if len(errs) > 0 {
		return verbError("close context", errors.Join(errs...))
	}
	return nil
}

// MapCmdFD maps length bytes of the command fd at offset, shared and
// read-write: the ring offers of rxe (Mminfo of CQ/QP/SRQ) and usb4. The
// context owns the mapping: UnmapCmdFD releases it early, Close at the latest.
func (c *Context) MapCmdFD(offset uint64, length int) ([]byte, error) {
	const verb = "mmap"
	if length <= 0 {
		return nil, verbError(verb, errInvalid("length %d", length))
	}
	if err := c.lock(verb); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	b, err := c.mapCmdFDLocked(offset, length)
	if err != nil {
		return nil, verbError(verb, err)
	}
	return b, nil
}

// UnmapCmdFD releases a mapping made by MapCmdFD.
func (c *Context) UnmapCmdFD(b []byte) error {
	const verb = "munmap"
	if err := c.lock(verb); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if len(b) == 0 || c.maps[&b[0]] == nil {
		return verbError(verb, errInvalid("not a mapping of this context"))
	}
	if err := c.unmapCmdFDLocked(b); err != nil {
		return verbError(verb, err)
	}
	return nil
}

func (c *Context) mapCmdFDLocked(offset uint64, length int) ([]byte, error) {
	b, err := c.cmd.sys.Mmap(c.cmd.fd, int64(offset), length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", wrapErrno(err))
	}
	c.maps[&b[0]] = b
	return b, nil
}

func (c *Context) unmapCmdFDLocked(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	delete(c.maps, &b[0])
	return wrapErrno(c.cmd.sys.Munmap(b))
}

// ---- device and port queries ----

// ODPCaps are the on-demand-paging capabilities.
type ODPCaps struct {
	GeneralCaps                     uint64
	RCCaps, UCCaps, UDCaps, XRCCaps uint32
}

// RSSCaps are the receive-side-scaling capabilities.
type RSSCaps struct {
	SupportedQPTs              uint32
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
}

// TMCaps are the tag-matching capabilities.
type TMCaps struct {
	MaxRndvHdrSize, MaxNumTags, Flags, MaxOps, MaxSGE uint32
}

// DeviceAttr is everything ib_uverbs_ex_query_device_resp carries.
type DeviceAttr struct {
	FWVer                 uint64
	NodeGUID              uint64 // host order (the kernel sends big endian)
	SysImageGUID          uint64 // host order
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint64 // the 64-bit ex flags when present, else the legacy 32 bits
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             uint32
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPkeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8

	CompMask        uint32
	ResponseLength  uint32 // bytes of the extended response the kernel filled
	ODPCaps         ODPCaps
	TimestampMask   uint64
	HCACoreClock    uint64 // kHz
	RSSCaps         RSSCaps
	MaxWQTypeRQ     uint32
	RawPacketCaps   uint32
	TMCaps          TMCaps
	MaxCQModeration uint16 // count
	MaxCQModPeriod  uint16 // µs
	MaxDMSize       uint64

	// ProviderSRQ: the kernel has no SRQs and MaxSRQ* are the provider's
	// SRQ's (srq.go); ibvinfo says so.
	ProviderSRQ bool
}

func be64(v uint64) uint64 { return bits.ReverseBytes64(v) } // amd64/arm64 are little endian

// QueryDevice issues the extended QUERY_DEVICE write command.
//
// On a usb4 kernel without SRQs (max_srq 0, every thunderbolt_ibverbs tree)
// the SRQ limits are the provider's SRQ's (ProviderSRQ set; srq.go).
func (c *Context) QueryDevice() (DeviceAttr, error) {
	const verb = "query device"
	if err := c.lock(verb); err != nil {
		return DeviceAttr{}, err
	}
	defer c.mu.Unlock()
	a, err := c.queryDeviceLocked()
	if err != nil {
		return DeviceAttr{}, verbError(verb, err)
	}
	if c.providerSRQLocked(a) {
		a.ProviderSRQ = true
		a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE = ProviderSRQMaxSRQ, ProviderSRQMaxWR, ProviderSRQMaxSGE
	}
	return a, nil
}

// queryDeviceLocked is QueryDevice's command, under c.mu, as the kernel
// answers it; the first answer is kept in c.kattr.
func (c *Context) queryDeviceLocked() (DeviceAttr, error) {
	var req uapi.IbUverbsExQueryDevice
	var r uapi.IbUverbsExQueryDeviceResp
	err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, ex: true, in: bytesOf(&req), out: bytesOf(&r)})
	if err != nil {
		return DeviceAttr{}, err
	}
	b := r.Base
	a := DeviceAttr{
		FWVer: b.FwVer, NodeGUID: be64(b.NodeGuid), SysImageGUID: be64(b.SysImageGuid),
		MaxMRSize: b.MaxMrSize, PageSizeCap: b.PageSizeCap, VendorID: b.VendorId,
		VendorPartID: b.VendorPartId, HWVer: b.HwVer, MaxQP: b.MaxQp, MaxQPWR: b.MaxQpWr,
		DeviceCapFlags: uint64(b.DeviceCapFlags), MaxSGE: b.MaxSge, MaxSGERd: b.MaxSgeRd,
		MaxCQ: b.MaxCq, MaxCQE: b.MaxCqe, MaxMR: b.MaxMr, MaxPD: b.MaxPd,
		MaxQPRdAtom: b.MaxQpRdAtom, MaxEERdAtom: b.MaxEeRdAtom, MaxResRdAtom: b.MaxResRdAtom,
		MaxQPInitRdAtom: b.MaxQpInitRdAtom, MaxEEInitRdAtom: b.MaxEeInitRdAtom,
		AtomicCap: b.AtomicCap, MaxEE: b.MaxEe, MaxRDD: b.MaxRdd, MaxMW: b.MaxMw,
		MaxRawIPv6QP: b.MaxRawIpv6Qp, MaxRawEthyQP: b.MaxRawEthyQp, MaxMcastGrp: b.MaxMcastGrp,
		MaxMcastQPAttach: b.MaxMcastQpAttach, MaxTotalMcastQPAttach: b.MaxTotalMcastQpAttach,
		MaxAH: b.MaxAh, MaxFMR: b.MaxFmr, MaxMapPerFMR: b.MaxMapPerFmr, MaxSRQ: b.MaxSrq,
		MaxSRQWR: b.MaxSrqWr, MaxSRQSGE: b.MaxSrqSge, MaxPkeys: b.MaxPkeys,
		LocalCAAckDelay: b.LocalCaAckDelay, PhysPortCnt: b.PhysPortCnt,

		CompMask: r.CompMask, ResponseLength: r.ResponseLength,
		ODPCaps: ODPCaps{
			GeneralCaps: r.OdpCaps.GeneralCaps, RCCaps: r.OdpCaps.PerTransportCaps.RcOdpCaps,
			UCCaps: r.OdpCaps.PerTransportCaps.UcOdpCaps, UDCaps: r.OdpCaps.PerTransportCaps.UdOdpCaps,
			XRCCaps: r.XrcOdpCaps,
		},
		TimestampMask: r.TimestampMask, HCACoreClock: r.HcaCoreClock,
		RSSCaps: RSSCaps{
			SupportedQPTs: r.RssCaps.SupportedQpts, MaxRWQIndirectionTables: r.RssCaps.MaxRwqIndirectionTables,
			MaxRWQIndirectionTableSize: r.RssCaps.MaxRwqIndirectionTableSize,
		},
		MaxWQTypeRQ: r.MaxWqTypeRq, RawPacketCaps: r.RawPacketCaps,
		TMCaps: TMCaps{
			MaxRndvHdrSize: r.TmCaps.MaxRndvHdrSize, MaxNumTags: r.TmCaps.MaxNumTags,
			Flags: r.TmCaps.Flags, MaxOps: r.TmCaps.MaxOps, MaxSGE: r.TmCaps.MaxSge,
		},
		MaxCQModeration: r.CqModerationCaps.MaxCqModerationCount,
		MaxCQModPeriod:  r.CqModerationCaps.MaxCqModerationPeriod,
		MaxDMSize:       r.MaxDmSize,
	}
	// response_length is how much of the whole response the kernel filled;
	// older kernels stop before device_cap_flags_ex.
	if r.ResponseLength >= uint32(unsafe.Offsetof(r.DeviceCapFlagsEx)+8) {
		a.DeviceCapFlags = r.DeviceCapFlagsEx
	}
	if c.kattr == nil {
		k := a
		c.kattr = &k
	}
	return a, nil
}

// PortAttr is ib_uverbs_query_port_resp_ex in Go terms.
type PortAttr struct {
	State         uint8 // uapi.IB_PORT_DOWN .. IB_PORT_ACTIVE
	MaxMTU        uint8 // uapi.IB_MTU_*
	ActiveMTU     uint8
	GIDTblLen     uint32
	PortCapFlags  uint32
	PortCapFlags2 uint16
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8 // IB_LINK_LAYER_*: 1 InfiniBand, 2 Ethernet
	Flags         uint8 // IB_UVERBS_QPF_GRH_REQUIRED
}

// QueryPort queries port (1-based) with UVERBS_METHOD_QUERY_PORT, or the
// QUERY_PORT write command on kernels without it.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	verb := fmt.Sprintf("query port %d", port)
	if err := c.lock(verb); err != nil {
		return PortAttr{}, err
	}
	defer c.mu.Unlock()
	pa, err := c.queryPortLocked(port)
	if err != nil {
		return PortAttr{}, verbError(verb, err)
	}
	return pa, nil
}

func (c *Context) queryPortLocked(port uint8) (PortAttr, error) {
	var r uapi.IbUverbsQueryPortRespEx
	ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_PORT).
		constIn(uapi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port)).
		out(uapi.UVERBS_ATTR_QUERY_PORT_RESP, bytesOf(&r))
	err := c.cmd.ioctl(ic)
	if errors.Is(err, errIoctlUnsupported) {
		req := uapi.IbUverbsQueryPort{PortNum: port}
		err = c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_QUERY_PORT, in: bytesOf(&req), out: bytesOf(&r.LegacyResp)})
	}
	if err != nil {
		return PortAttr{}, err
	}
	l := r.LegacyResp
	return PortAttr{
		State: l.State, MaxMTU: l.MaxMtu, ActiveMTU: l.ActiveMtu, GIDTblLen: l.GidTblLen,
		PortCapFlags: l.PortCapFlags, PortCapFlags2: r.PortCapFlags2, MaxMsgSz: l.MaxMsgSz,
		BadPkeyCntr: l.BadPkeyCntr, QkeyViolCntr: l.QkeyViolCntr, PkeyTblLen: l.PkeyTblLen,
		LID: l.Lid, SMLID: l.SmLid, LMC: l.Lmc, MaxVLNum: l.MaxVlNum, SMSL: l.SmSl,
		SubnetTimeout: l.SubnetTimeout, InitTypeReply: l.InitTypeReply,
		ActiveWidth: l.ActiveWidth, ActiveSpeed: l.ActiveSpeed, PhysState: l.PhysState,
		LinkLayer: l.LinkLayer, Flags: l.Flags,
	}, nil
}

// ---- GIDs ----

// GID is a 128-bit global identifier in network byte order.
type GID [16]byte

// GIDType says which protocol a GID table entry is for.
type GIDType uint32

// GID types (enum ib_uverbs_gid_type).
const (
	GIDTypeIB     GIDType = uapi.IB_UVERBS_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = uapi.IB_UVERBS_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = uapi.IB_UVERBS_GID_TYPE_ROCE_V2
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint32(t))
}

// GIDEntry is one populated entry of a port's GID table.
type GIDEntry struct {
	GID         GID
	Index       uint32
	Port        uint32
	Type        GIDType
	NetdevIndex uint32 // 0 when no netdev is associated
}

func gidEntryFrom(e *uapi.IbUverbsGidEntry) GIDEntry {
	var g GID
	copy(g[:], unsafe.Slice((*byte)(unsafe.Pointer(&e.Gid)), 16))
	return GIDEntry{GID: g, Index: e.GidIndex, Port: e.PortNum, Type: GIDType(e.GidType), NetdevIndex: e.NetdevIfindex}
}

// QueryGID returns the GID at index of port. An empty entry yields the zero
// GID, as ibv_query_gid reports it.
func (c *Context) QueryGID(port uint8, index int) (GID, error) {
	e, err := c.QueryGIDEntry(port, index)
	if errors.Is(err, unix.ENODATA) {
		return GID{}, nil
	}
	return e.GID, err
}

// QueryGIDEntry returns the GID table entry at index of port, with its type
// and netdev, via UVERBS_METHOD_QUERY_GID_ENTRY or sysfs. An empty entry is
// an error wrapping ENODATA.
func (c *Context) QueryGIDEntry(port uint8, index int) (GIDEntry, error) {
	verb := fmt.Sprintf("query gid %d/%d", port, index)
	if index < 0 {
		return GIDEntry{}, verbError(verb, errInvalid("negative index"))
	}
	if err := c.lock(verb); err != nil {
		return GIDEntry{}, err
	}
	defer c.mu.Unlock()
	var e uapi.IbUverbsGidEntry
	ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_ENTRY).
		constIn(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port)).
		constIn(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index)).
		inU32(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0). // mandatory, must be 0
		out(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, bytesOf(&e))
	err := c.cmd.ioctl(ic)
	if errors.Is(err, errIoctlUnsupported) {
		ge, err := c.sysfsGID(port, index)
		if err != nil {
			return GIDEntry{}, verbError(verb, err)
		}
		return ge, nil
	}
	if err != nil {
		return GIDEntry{}, verbError(verb, err)
	}
	return gidEntryFrom(&e), nil
}

// GIDTable returns the populated entries of port's GID table, through
// UVERBS_METHOD_QUERY_GID_TABLE or, on older kernels, sysfs.
func (c *Context) GIDTable(port uint8) ([]GIDEntry, error) {
	verb := fmt.Sprintf("query gid table of port %d", port)
	if err := c.lock(verb); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	pa, err := c.queryPortLocked(port)
	if err != nil {
		return nil, verbError(verb, err)
	}
	// The method returns the whole device's table and fails with EINVAL when
	// the buffer is smaller; size it for every port as libibverbs does.
	var da uapi.IbUverbsExQueryDevice
	var dr uapi.IbUverbsExQueryDeviceResp
	nports := 1
	if err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, ex: true, in: bytesOf(&da), out: bytesOf(&dr)}); err == nil && dr.Base.PhysPortCnt > 0 {
		nports = int(dr.Base.PhysPortCnt)
	}
	max := int(pa.GIDTblLen) * nports
	if max == 0 {
		return nil, nil
	}
	// An attribute carries at most 65535 bytes; a larger table would need
	// a kernel answer we cannot receive in one call (EINVAL below).
	max = min(max, 0xFFFF/uapi.SizeofIbUverbsGidEntry)
	entries := make([]uapi.IbUverbsGidEntry, max)
	var n uint64
	ic := newIoctl(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_TABLE).
		constIn(uapi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, uapi.SizeofIbUverbsGidEntry).
		inU32(uapi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0).optional().
		out(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, unsafe.Slice((*byte)(unsafe.Pointer(&entries[0])), max*uapi.SizeofIbUverbsGidEntry)).
		out(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, bytesOf(&n))
	err = c.cmd.ioctl(ic)
	if errors.Is(err, errIoctlUnsupported) {
		var out []GIDEntry
		for i := 0; i < int(pa.GIDTblLen); i++ {
			ge, err := c.sysfsGID(port, i)
			if err != nil {
				continue // empty or unreadable entry
			}
			out = append(out, ge)
		}
		return out, nil
	}
	if err != nil {
		return nil, verbError(verb, err)
	}
	if n > uint64(max) {
		return nil, verbError(verb, fmt.Errorf("kernel reported %d entries for a buffer of %d: %w", n, max, errno{unix.EOVERFLOW}))
	}
	var out []GIDEntry
	for i := range entries[:n] {
		if entries[i].PortNum == uint32(port) {
			out = append(out, gidEntryFrom(&entries[i]))
		}
	}
	return out, nil
}

// sysfsGID reads one GID entry the way libibverbs does without the ioctl:
// /sys/class/infiniband/<dev>/ports/<port>/{gids,gid_attrs/types,gid_attrs/ndevs}/<index>.
func (c *Context) sysfsGID(port uint8, index int) (GIDEntry, error) {
	dir := filepath.Join(c.sysfsRoot, "/sys/class/infiniband", c.info.Name, "ports", fmt.Sprint(port))
	raw, err := os.ReadFile(filepath.Join(dir, "gids", fmt.Sprint(index)))
	if err != nil {
		return GIDEntry{}, err
	}
	g, err := parseGID(string(raw))
	if err != nil {
		return GIDEntry{}, err
	}
	if g == (GID{}) {
		return GIDEntry{}, errno{unix.ENODATA}
	}
	e := GIDEntry{GID: g, Index: uint32(index), Port: uint32(port), Type: GIDTypeIB}
	if t, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", fmt.Sprint(index))); err == nil {
		switch string(trimNL(t)) {
		case "RoCE v2":
			e.Type = GIDTypeRoCEv2
		case "IB/RoCE v1":
			if c.info.Protocol == "roce" {
				e.Type = GIDTypeRoCEv1
			}
		}
	}
	if nd, err := os.ReadFile(filepath.Join(dir, "gid_attrs/ndevs", fmt.Sprint(index))); err == nil {
		if ifi, err := netIfIndex(c.sysfsRoot, string(trimNL(nd))); err == nil {
			e.NetdevIndex = ifi
		}
	}
	return e, nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// parseGID parses the sysfs form "fe80:0000:0000:0000:0000:0000:0000:0001":
// eight groups of exactly four hex digits (the kernel prints "%04x"), nothing
// else. fmt.Sscanf was too lenient here (spaces, short groups, trailing bytes).
func parseGID(s string) (GID, error) {
	var g GID
	t := trimNL([]byte(s))
	if len(t) != 8*5-1 {
		return g, fmt.Errorf("bad gid %q: %w", s, errno{unix.EINVAL})
	}
	for i, c := range t {
		if i%5 == 4 {
			if c != ':' {
				return g, fmt.Errorf("bad gid %q: %w", s, errno{unix.EINVAL})
			}
			continue
		}
		v, ok := hexDigit(c)
		if !ok {
			return g, fmt.Errorf("bad gid %q: %w", s, errno{unix.EINVAL})
		}
		// Digit k of group i/5 goes to byte 2*(i/5) + k/2, high nibble first.
		k := i % 5
		b := &g[2*(i/5)+k/2]
		if k%2 == 0 {
			*b |= v << 4
		} else {
			*b |= v
		}
	}
	return g, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func netIfIndex(root, name string) (uint32, error) {
	b, err := os.ReadFile(filepath.Join(root, "/sys/class/net", name, "ifindex"))
	if err != nil {
		return 0, err
	}
	var v uint32
	_, err = fmt.Sscanf(string(trimNL(b)), "%d", &v)
	return v, err
}
