package provider

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// CompChannel is a completion event channel: an fd that becomes readable when
// a CQ armed with ReqNotify gets a completion.
type CompChannel struct {
	ctx       *Context
	fd        int
	foreign   bool // fd belongs to the caller (CompChannelFromFD)
	destroyed bool
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL write
// command, through INVOKE_WRITE where the kernel has it).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	const verb = "create comp channel"
	if err := c.lock(verb); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	req := uapi.IbUverbsCreateCompChannel{}
	var resp uapi.IbUverbsCreateCompChannelResp
	if err := c.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, in: bytesOf(&req), out: bytesOf(&resp)}); err != nil {
		return nil, verbError(verb, err)
	}
	ch := &CompChannel{ctx: c, fd: int(int32(resp.Fd))}
	c.owned.add(ch.fd)
	if err := c.cmd.sys.SetNonblock(ch.fd); err != nil {
		_ = c.owned.close(ch.fd)
		return nil, verbError(verb, wrapErrno(err))
	}
	c.track(ch)
	return ch, nil
}

// CompChannelFromFD wraps a completion channel fd created elsewhere
// (libibverbs creates them itself, in ibv_create_comp_channel) so CQs can be
// bound to it. The context does not own the fd: Close on the result only
// forgets it.
func (c *Context) CompChannelFromFD(fd int) (*CompChannel, error) {
	const verb = "adopt comp channel"
	if fd < 0 {
		return nil, verbError(verb, errInvalid("fd %d", fd))
	}
	if err := c.lock(verb); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	ch := &CompChannel{ctx: c, fd: fd, foreign: true}
	c.track(ch)
	return ch, nil
}

// FD is the channel's file descriptor (poll it for POLLIN), -1 once closed.
func (ch *CompChannel) FD() int {
	if ch == nil || ch.ctx == nil {
		return -1
	}
	ch.ctx.mu.Lock()
	defer ch.ctx.mu.Unlock()
	if ch.destroyed {
		return -1
	}
	return ch.fd
}

// GetEvent waits up to timeout (negative: forever) for a completion event
// and returns the CQ it is for. Each event must eventually be acknowledged
// with (*CQ).AckEvents. A timeout returns an error wrapping ETIMEDOUT.
func (ch *CompChannel) GetEvent(timeout time.Duration) (*CQ, error) {
	const verb = "get cq event"
	if ch == nil || ch.ctx == nil {
		return nil, verbError(verb, errInvalid("nil comp channel"))
	}
	if err := ch.ctx.lock(verb); err != nil {
		return nil, err
	}
	if ch.destroyed {
		ch.ctx.mu.Unlock()
		return nil, verbError(verb, errClosed("comp channel"))
	}
	fd := ch.fd
	ch.ctx.mu.Unlock()

	var desc uapi.IbUverbsCompEventDesc
	if err := readEvent(ch.ctx.cmd.sys, fd, timeout, bytesOf(&desc)); err != nil {
		return nil, verbError(verb, err)
	}
	ch.ctx.mu.Lock()
	defer ch.ctx.mu.Unlock()
	cq := ch.ctx.cqs[desc.CqHandle]
	if cq == nil {
		return nil, verbError(verb, fmt.Errorf("event for unknown cq user handle %#x: %w", desc.CqHandle, errno{unix.ENOENT}))
	}
	cq.compEvents++
	return cq, nil
}

// readEvent polls fd and reads exactly one event record. Our own event fds
// are non-blocking; on a caller's blocking fd a reader racing us for the
// same event could make the read wait for the next one.
func readEvent(sys sysCalls, fd int, timeout time.Duration, buf []byte) error {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	deadline := time.Now().Add(timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := sys.Poll(fds, ms)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll: %w", wrapErrno(err))
		}
		if n == 0 && err == nil {
			return fmt.Errorf("no event within %v: %w", timeout, errno{unix.ETIMEDOUT})
		}
		if n > 0 {
			if fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
				return fmt.Errorf("event fd %d: %w", fd, errno{unix.EBADF})
			}
			r, err := sys.Read(fd, buf)
			switch {
			case err == nil && r == len(buf):
				return nil
			case err == nil:
				return fmt.Errorf("short event read (%d of %d bytes): %w", r, len(buf), errno{unix.EIO})
			case !errors.Is(err, unix.EAGAIN):
				return fmt.Errorf("read: %w", wrapErrno(err))
			}
			// Another reader took the event; wait again.
		}
		if timeout >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("no event within %v: %w", timeout, errno{unix.ETIMEDOUT})
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
	}
}

// Close closes the channel's fd. CQs that still use it keep the kernel
// object alive until they are destroyed.
func (ch *CompChannel) Close() error {
	const verb = "destroy comp channel"
	if ch == nil || ch.ctx == nil {
		return verbError(verb, errInvalid("nil comp channel"))
	}
	if err := ch.ctx.lock(verb); err != nil {
		return err
	}
	defer ch.ctx.mu.Unlock()
	if ch.destroyed {
		return verbError(verb, errClosed("comp channel"))
	}
	if err := ch.destroyLocked(); err != nil {
		return verbError(verb, err)
	}
	ch.ctx.untrack(ch)
	return nil
}

func (ch *CompChannel) destroyRank() int { return rankCompChannel }

func (ch *CompChannel) destroyLocked() error {
	ch.destroyed = true
	if ch.foreign {
		return nil
	}
	return ch.ctx.owned.close(ch.fd)
}
