package provider

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// asyncRelay puts a socket in the place of the kernel's async event file,
// so that the provider can add events of its own (the provider SRQ's limit
// event: docs/srq.md) to what ibv_get_async_event reads. The fd number the
// application and libibverbs hold (ctx->async_fd) keeps its number, flags
// and epoll registrations; a goroutine copies the kernel's events from a
// duplicate of the kernel file into the socket, and the engine sends its
// own into the same socket (SOCK_SEQPACKET: one event a record, 16 bytes
// as the kernel's).
type asyncRelay struct {
	kfd  int // the kernel's async file (a duplicate)
	out  int // our end of the socket pair
	wake int // eventfd: stop
	done chan struct{}

	stopOnce sync.Once
}

// ProviderEventFD returns the socket to which the provider sends async
// events of its own (struct ib_uverbs_async_event_desc records), putting the
// relay in place at the first call. It fails where the context has no async
// fd of the process's own (a fake kernel), or the async fd is not the
// kernel's (a fork() child's adopted context, whose parent relays).
func (c *Context) ProviderEventFD() (int, error) {
	const verb = "provider async events"
	if err := c.lock(verb); err != nil {
		return -1, err
	}
	defer c.mu.Unlock()
	if c.relay != nil {
		return c.relay.out, nil
	}
	if c.asyncFD < 0 || !c.realFDs || c.gone.Load() {
		return -1, verbError(verb, errNotSupported("no async fd of the kernel's", 0))
	}
	r, err := startRelay(c.asyncFD)
	if err != nil {
		return -1, verbError(verb, err)
	}
	c.relay = r
	return r.out, nil
}

func startRelay(fd int) (*asyncRelay, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		return nil, errNotSupported("the async fd is a relay already (another process image's)", 0)
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, err
	}
	fdfl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return nil, err
	}
	kfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(kfd)
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(kfd)
		_ = unix.Close(sp[0])
		_ = unix.Close(sp[1])
		return nil, err
	}
	if fl&unix.O_NONBLOCK != 0 {
		_ = unix.SetNonblock(sp[0], true)
	}
	watchers := epollWatchers(fd)
	dupfl := 0
	if fdfl&unix.FD_CLOEXEC != 0 {
		dupfl = unix.O_CLOEXEC
	}
	if err := unix.Dup3(sp[0], fd, dupfl); err != nil {
		for _, f := range []int{kfd, sp[0], sp[1], wake} {
			_ = unix.Close(f)
		}
		return nil, err
	}
	_ = unix.Close(sp[0])
	// An epoll set that watched the kernel file at fd watches the socket
	// too (the old registration stays with the kernel file, which the
	// relay keeps open: it reports readiness the relay drains at once).
	for _, w := range watchers {
		ev := unix.EpollEvent{Events: w.events, Fd: int32(uint32(w.data)), Pad: int32(uint32(w.data >> 32))}
		_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	}
	_ = unix.SetNonblock(kfd, true) // the kernel file is the relay's alone now
	r := &asyncRelay{kfd: kfd, out: sp[1], wake: wake, done: make(chan struct{})}
	go r.run()
	return r, nil
}

func (r *asyncRelay) run() {
	defer close(r.done)
	buf := make([]byte, 16*64)
	for {
		pfd := []unix.PollFd{{Fd: int32(r.kfd), Events: unix.POLLIN}, {Fd: int32(r.wake), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if pfd[1].Revents != 0 {
			return
		}
		if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 && pfd[0].Revents&unix.POLLIN == 0 {
			return
		}
		n, err := unix.Read(r.kfd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+16 <= n; off += 16 {
			// Blocking: a kernel event is never dropped; an application
			// that closed its end ends the relay (EPIPE, no SIGPIPE).
			if err := unix.Sendto(r.out, buf[off:off+16], unix.MSG_NOSIGNAL, nil); err != nil {
				return
			}
		}
	}
}

// stop ends the relay and releases the kernel file (at close, and at
// removal, where the kernel's file must go). The socket end the engine
// sends to stays open until the context closes (closeRelayLocked): its
// number must not become another file's while an SRQ may still send.
func (r *asyncRelay) stop() {
	if r.kfd < 0 {
		return
	}
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(r.wake, one[:])
	<-r.done
	_ = unix.Close(r.kfd)
	_ = unix.Close(r.wake)
	r.kfd, r.wake = -1, -1
}

// StopAsyncRelay ends the provider's async event relay, if one runs: the
// removal calls it (through WatchRemoval's callback) before it replaces the
// async fd, so the kernel's file is released.
func (c *Context) StopAsyncRelay() {
	c.mu.Lock()
	r := c.relay
	c.mu.Unlock()
	if r != nil {
		r.stopOnce.Do(r.stop)
	}
}

// closeRelayLocked stops the relay and closes the engine's socket end (at
// the context's close, when no SRQ of it polls any more).
func (c *Context) closeRelayLocked() {
	r := c.relay
	if r == nil {
		return
	}
	c.relay = nil
	r.stopOnce.Do(r.stop)
	_ = unix.Close(r.out)
}
