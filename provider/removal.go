package provider

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/rdmanl"
	"usb4verbs/uapi"
)

// Device removal without the kernel's help.
//
// A kernel driver without disassociate_ucontext (hellas-main, rxe) makes
// ib_uverbs_remove_one wait for every open uverbs file of the device to be
// closed (linux:drivers/infiniband/core/uverbs_main.c): the application gets
// no IB_EVENT_DEVICE_FATAL, its commands still work on objects that never
// complete, and the unplug blocks until the process exits. disable_device
// (linux:drivers/infiniband/core/device.c) clears the device's registered mark
// before it removes the clients, so a netlink device dump stops listing the
// device while uverbs waits. A watcher polls that dump and, when a watched
// context's device is missing, does what the kernel's disassociate would
// have done: every verb fails with EIO, the application's async fd yields
// one IB_EVENT_DEVICE_FATAL, completion channels wake, and the kernel's
// files are let go so the unregistration can finish.

// Why a poll and not the kernel's RDMA monitor events (issue 25 item 7):
// kernels since 6.11 multicast RDMA_UNREGISTER_EVENT to the
// RDMA_NL_GROUP_NOTIFY group, but __ib_unregister_device sends it after
// disable_device returns (linux:drivers/infiniband/core/device.c,
// "RDMA/nldev: Add support for RDMA monitoring"), and disable_device is
// where ib_uverbs_remove_one waits for the files this watcher must let go.
// For the drivers it exists for, the event would come only after the
// process released the device, so it cannot start the release. (Joining
// the group also takes CAP_NET_ADMIN, and in the default shared mode the
// events go to the initial network namespace only.)

// RemovalPollInterval is how often the watcher lists the devices while at
// least one watched context is open.
const RemovalPollInterval = time.Second

// removalWatcher runs one goroutine for every watched context of the
// process; it has none while nothing is watched.
type removalWatcher struct {
	list     func() ([]rdmanl.Device, error)
	interval time.Duration

	mu      sync.Mutex
	watched map[*Context]struct{}
	stop    chan struct{} // closed to stop the goroutine; nil when none runs
}

// The bare dump (rdmanl.ListDevices): names and GUIDs are all check needs.
var defaultWatcher = &removalWatcher{list: rdmanl.ListDevices, interval: RemovalPollInterval}

// WatchRemoval makes c watch for its device's removal. onRemoved runs once,
// on the watcher's goroutine, after the context fails every verb with EIO
// and before its fds are released: the caller stops its own users of the
// kernel objects there (the data path's engine objects). Close stops the
// watch.
func (c *Context) WatchRemoval(onRemoved func()) {
	c.mu.Lock()
	c.onRemoved = onRemoved
	c.mu.Unlock()
	defaultWatcher.add(c)
}

// Removed reports whether the watcher found the context's device gone.
func (c *Context) Removed() bool { return c.gone.Load() }

func (w *removalWatcher) add(c *Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched == nil {
		w.watched = map[*Context]struct{}{}
	}
	w.watched[c] = struct{}{}
	c.watcher = w
	if w.stop == nil {
		w.stop = make(chan struct{})
		go w.run(w.stop)
	}
}

// remove stops watching c; the goroutine ends with the last context. It
// does not wait for the goroutine, which may be running c's removal and
// then needs c's lock, held by Close.
func (w *removalWatcher) remove(c *Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.watched, c)
	if len(w.watched) == 0 && w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
}

func (w *removalWatcher) run(stop chan struct{}) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.check()
	}
}

// check lists the devices and handles every watched context whose device
// is missing. A failed dump decides nothing. A miss is confirmed by a second
// dump at once: a multi-part dump resumes by position, so when an earlier
// device goes away between its parts, a present one can be skipped, and one
// skip would kill its healthy contexts.
func (w *removalWatcher) check() {
	missing := w.missingFrom(w.watchedContexts())
	if len(missing) == 0 {
		return
	}
	missing = w.missingFrom(missing)
	var gone []*Context
	w.mu.Lock()
	for _, c := range missing {
		if _, ok := w.watched[c]; ok {
			gone = append(gone, c)
			delete(w.watched, c)
		}
	}
	w.mu.Unlock()
	for _, c := range gone {
		c.deviceRemoved()
	}
}

func (w *removalWatcher) watchedContexts() []*Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	cs := make([]*Context, 0, len(w.watched))
	for c := range w.watched {
		cs = append(cs, c)
	}
	return cs
}

// missingFrom dumps the devices once and returns the contexts of cs whose
// device the dump lacks; none when the dump fails.
func (w *removalWatcher) missingFrom(cs []*Context) []*Context {
	devs, err := w.list()
	if err != nil {
		return nil
	}
	var out []*Context
	for _, c := range cs {
		if !deviceListed(devs, c.info) {
			out = append(out, c)
		}
	}
	return out
}

// deviceListed: a rename keeps the node GUID, and a GUID the lookup did not
// know (0) leaves the name to decide.
func deviceListed(devs []rdmanl.Device, info DeviceInfo) bool {
	for _, d := range devs {
		if d.Name == info.Name || (info.NodeGUID != 0 && d.NodeGUID == info.NodeGUID) {
			return true
		}
	}
	return false
}

// removalLog is where the one line goes (a test swaps it).
var removalLog io.Writer = os.Stderr

// deviceRemoved is the disassociate: EIO first, so no new command starts;
// then the caller's data path stops; then the events; then the kernel's
// files and mappings are released.
//
// Lock order (docs/DESIGN.md, "Lock order"): a verb may run while its caller
// holds a data-path lock (a CQ resize holds the engine's CQ lock across
// RESIZE_CQ, an rxe start_poll holder may call any verb), and onRemoved
// takes the handle table's and the data path's locks. So c.mu is not held
// while onRemoved runs: the gone mark alone turns every later command into
// EIO, and a command that already holds c.mu finishes first.
func (c *Context) deviceRemoved() {
	c.mu.Lock()
	if c.closed || c.gone.Swap(true) {
		c.mu.Unlock()
		return
	}
	onRemoved := c.onRemoved
	c.mu.Unlock()
	fmt.Fprintf(removalLog, "libusb4_rdma: %s: device removed (cable pulled or module unloaded); every verb now fails with EIO\n", c.info.Name)
	if onRemoved != nil {
		onRemoved()
	}
	c.mu.Lock()
	if c.closed || !c.realFDs {
		c.mu.Unlock()
		return // closed meanwhile; or a fake kernel's fds are not the process's
	}
	var eventFDs []int
	// Comp channels: every one the context knows, with a CQ bound or not
	// (none yet, or all destroyed), since each fd holds the kernel's file;
	// in each one event per CQ bound to it, so a thread waiting in
	// ibv_get_cq_event wakes, polls, and sees EIO, and end of file after.
	// By fd: the front wraps one channel fd once per CQ made on it.
	perChannel := map[int][]byte{}
	for _, o := range c.objects {
		if ch, ok := o.(*CompChannel); ok && !ch.destroyed {
			perChannel[ch.fd] = nil
		}
	}
	for _, cq := range c.cqs {
		if cq.channel == nil || cq.channel.destroyed {
			continue
		}
		d := uapi.IbUverbsCompEventDesc{CqHandle: cq.userHandle}
		perChannel[cq.channel.fd] = append(perChannel[cq.channel.fd], bytesOf(&d)...)
	}
	for fd, evs := range perChannel {
		replaceWithEvents(fd, evs)
		eventFDs = append(eventFDs, fd)
	}
	if c.asyncFD >= 0 {
		d := uapi.IbUverbsAsyncEventDesc{EventType: uapi.IB_EVENT_DEVICE_FATAL}
		replaceWithEvents(c.asyncFD, bytesOf(&d))
		eventFDs = append(eventFDs, c.asyncFD)
	}
	// The mappings of the command fd hold the kernel file too: anonymous
	// memory takes their place at the same address, so a data path that
	// still reads them reads zeros instead of faulting.
	for _, m := range c.maps {
		_, _ = unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(m)), uintptr(len(m)),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	}
	// Last the command fd: a read-only /dev/null answers every late write
	// with EBADF, ioctl with ENOTTY, mmap with ENODEV; none reaches a kernel
	// object.
	if null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Dup3(null, c.cmd.fd, unix.O_CLOEXEC)
		_ = unix.Close(null)
	}
	c.mu.Unlock()
	// Threads still blocked in read() on the old event files: outside
	// c.mu, since waking them may take a while.
	if wake := WakeBlockedReaders; wake != nil {
		wake(eventFDs)
	}
}

// WakeBlockedReaders, when set, is called by a removal with the event fds it
// replaced (the async fd, the completion channels), to wake the threads
// still blocked in read() on the old files, which the replacement cannot
// reach. The provider's front library sets it (cshim/gopart/wake.go: a
// real-time signal without SA_RESTART); a Go program using this package
// directly reads its events its own way and may leave it nil.
var WakeBlockedReaders func(fds []int)

// replaceWithEvents puts, atomically for other threads (dup3), a pipe holding
// evs at fd's number. Its write end is closed, so a read after the events
// gets 0 bytes, which libibverbs turns into an error, instead of blocking.
// The old file's status flags (O_NONBLOCK) carry over. The pipe is grown to
// hold evs where the system allows (fs/pipe-max-size); events beyond what it
// holds are dropped, never waited for: a reader past the last one sees end
// of file, an error too.
//
// Every epoll set that watched the old file at fd gets the pipe in its place,
// with the same events and data (from /proc/self/fdinfo), so an epoll loop
// on the fd (UCX's on the async fd) wakes: dup3 releases the old file, and
// epoll forgets a released file. A thread already blocked in read() on the
// old file stays with it (dup3 cannot wake it): WakeBlockedReaders does.
func replaceWithEvents(fd int, evs []byte) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return
	}
	watchers := epollWatchers(fd)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return
	}
	if len(evs) > 4096 {
		_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, len(evs))
	}
	for len(evs) > 0 {
		n, err := unix.Write(p[1], evs)
		if err != nil || n <= 0 {
			break // full: the rest are dropped
		}
		evs = evs[n:]
	}
	_ = unix.Close(p[1])
	if flags&unix.O_NONBLOCK == 0 {
		_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, flags&^unix.O_NONBLOCK)
	}
	_ = unix.Dup3(p[0], fd, unix.O_CLOEXEC)
	_ = unix.Close(p[0])
	for _, w := range watchers {
		ev := unix.EpollEvent{Events: w.events, Fd: int32(uint32(w.data)), Pad: int32(uint32(w.data >> 32))}
		_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	}
}

// epollWatcher is one epoll set's registration of a file descriptor.
type epollWatcher struct {
	epfd   int
	events uint32
	data   uint64
}

// epollWatchers lists the process's epoll sets that watch fd, with the
// events and data each registered, from /proc/self/fdinfo (fs/eventpoll.c
// ep_show_fdinfo: "tfd: %8d events: %8x data: %16llx ...").
func epollWatchers(fd int) []epollWatcher {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var out []epollWatcher
	for _, e := range ents {
		epfd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		out = append(out, parseEpollFdinfo(epfd, fd, string(info))...)
	}
	return out
}

// parseEpollFdinfo picks the registrations of fd out of an epoll fdinfo.
func parseEpollFdinfo(epfd, fd int, info string) []epollWatcher {
	var out []epollWatcher
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "tfd:" || f[2] != "events:" || f[4] != "data:" {
			continue
		}
		tfd, err1 := strconv.Atoi(f[1])
		ev, err2 := strconv.ParseUint(f[3], 16, 32)
		data, err3 := strconv.ParseUint(f[5], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || tfd != fd {
			continue
		}
		out = append(out, epollWatcher{epfd: epfd, events: uint32(ev), data: data})
	}
	return out
}

// removedGate answers EIO for every command on a removed device's command
// fd; reads and polls (events) pass.
type removedGate struct {
	sysCalls
	gone *atomic.Bool
}

func (g removedGate) Ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if g.gone.Load() {
		return unix.EIO
	}
	return g.sysCalls.Ioctl(fd, req, arg)
}

func (g removedGate) Write(fd int, p []byte) (int, error) {
	if g.gone.Load() {
		return 0, unix.EIO
	}
	return g.sysCalls.Write(fd, p)
}

func (g removedGate) Mmap(fd int, offset int64, length int, prot, flags int) ([]byte, error) {
	if g.gone.Load() {
		return nil, unix.EIO
	}
	return g.sysCalls.Mmap(fd, offset, length, prot, flags)
}
