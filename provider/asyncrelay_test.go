package provider

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The relay over a pipe standing for the kernel's async file: the fd keeps
// its number and O_NONBLOCK, an epoll set that watched it wakes for the
// relayed kernel events and for the provider's own, and stop releases the
// kernel file (its writer then gets EPIPE).
func TestAsyncRelay(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	afd, kw := p[0], p[1]
	defer unix.Close(afd)
	defer unix.Close(kw)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, afd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: 77}); err != nil {
		t.Fatal(err)
	}
	r, err := startRelay(afd)
	if err != nil {
		t.Fatal(err)
	}
	if fl, _ := unix.FcntlInt(uintptr(afd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Fatal("O_NONBLOCK lost")
	}
	ev := func(el uint64, typ uint32) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, el)
		binary.LittleEndian.PutUint32(b[8:], typ)
		return b
	}
	// wait for readiness through the epoll set, then read one event.
	next := func() (uint64, uint32) {
		t.Helper()
		evs := make([]unix.EpollEvent, 4)
		for {
			n, err := unix.EpollWait(ep, evs, 5000)
			if err != nil && !errors.Is(err, unix.EINTR) {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatal("epoll: no readiness within 5 s")
			}
			b := make([]byte, 16)
			m, err := unix.Read(afd, b)
			if errors.Is(err, unix.EAGAIN) {
				continue // the kernel file's old registration woke us first
			}
			if err != nil || m != 16 {
				t.Fatalf("read %d: %v", m, err)
			}
			return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:])
		}
	}
	if _, err := unix.Write(kw, ev(0x1234, 1)); err != nil { // QP_FATAL from the "kernel"
		t.Fatal(err)
	}
	if el, typ := next(); el != 0x1234 || typ != 1 {
		t.Fatalf("relayed kernel event %#x %d", el, typ)
	}
	if err := unix.Sendto(r.out, ev(0xabc, 15), unix.MSG_NOSIGNAL, nil); err != nil {
		t.Fatal(err)
	}
	if el, typ := next(); el != 0xabc || typ != 15 {
		t.Fatalf("provider event %#x %d", el, typ)
	}
	r.stopOnce.Do(r.stop)
	if _, err := unix.Write(kw, ev(1, 1)); !errors.Is(err, unix.EPIPE) {
		t.Fatalf("write to the kernel file after stop: %v, want EPIPE (released)", err)
	}
	unix.Close(r.out)
}
