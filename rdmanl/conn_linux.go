package rdmanl

import (
	"fmt"
	"runtime"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// receiveTimeout bounds every read so a kernel that never answers cannot
// hang a caller; nldev answers in microseconds.
const receiveTimeout = 10 * time.Second

// socketConn is a NETLINK_RDMA socket.
type socketConn struct {
	fd int
}

func dialSocket() (*socketConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Best effort: extended ACKs carry the kernel's reason text, CAP_ACK
	// keeps error replies small. Old kernels reject them; that is fine.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	tv := unix.NsecToTimeval(receiveTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &socketConn{fd: fd}, nil
}

// dialSocketIn opens the socket inside network namespace ns. A netlink
// socket stays bound to the namespace it was created in, so only the
// creation runs on a thread switched into ns.
func dialSocketIn(ns netns.NsHandle) (*socketConn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		return nil, fmt.Errorf("enter netns: %w", err)
	}
	c, dialErr := dialSocket()
	if err := netns.Set(orig); err != nil {
		// This thread is stuck in the wrong namespace; never hand it back
		// to the scheduler (LockOSThread without Unlock kills it on exit).
		runtime.LockOSThread()
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("return to original netns: %w", err)
	}
	return c, dialErr
}

func (c *socketConn) Send(b []byte) error {
	for {
		err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err != unix.EINTR {
			return err
		}
	}
}

func (c *socketConn) Receive() ([]byte, error) {
	for {
		// Peek with MSG_TRUNC to learn the datagram's size, then read it
		// whole: a dump datagram can exceed any fixed buffer.
		n, _, err := unix.Recvfrom(c.fd, nil, unix.MSG_PEEK|unix.MSG_TRUNC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("no reply within %v: %w", receiveTimeout, unix.ETIMEDOUT)
		}
		if err != nil {
			return nil, err
		}
		b := make([]byte, max(n, unix.NLMSG_HDRLEN))
		n, _, err = unix.Recvfrom(c.fd, b, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		return b[:n], nil
	}
}

func (c *socketConn) Close() error { return unix.Close(c.fd) }
