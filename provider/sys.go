package provider

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysCalls is the seam between the provider and the kernel: every open,
// close, ioctl, write, read, mmap, munmap and poll the provider issues goes
// through it. Tests plug in a fake that plays the kernel's side (the usb4
// test doubles of issue 3 attach here too). Errors are unix.Errno values.
type sysCalls interface {
	Open(path string, flags int) (int, error)
	Close(fd int) error
	// Ioctl issues ioctl(fd, req, arg). arg points at memory the caller
	// keeps pinned for the duration of the call.
	Ioctl(fd int, req uintptr, arg unsafe.Pointer) error
	Write(fd int, p []byte) (int, error)
	Read(fd int, p []byte) (int, error)
	Mmap(fd int, offset int64, length int, prot, flags int) ([]byte, error)
	Munmap(b []byte) error
	Poll(fds []unix.PollFd, timeoutMs int) (int, error)
	SetNonblock(fd int) error
}

// realSys is the default seam: the Linux system calls.
type realSys struct{}

func (realSys) Open(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func (realSys) Close(fd int) error { return unix.Close(fd) }

// rawIoctl is the system call under realSys.Ioctl (a variable so that a test
// can interrupt it).
var rawIoctl = func(fd int, req uintptr, arg unsafe.Pointer) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	return e
}

// Ioctl retries on EINTR, as rdma-core's command path does: a signal that
// interrupts a uverbs ioctl is no failure of the verb.
func (realSys) Ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		switch e := rawIoctl(fd, req, arg); e {
		case 0:
			return nil
		case unix.EINTR:
		default:
			return e
		}
	}
}

func (realSys) Write(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Write(fd, p)
		if err != unix.EINTR {
			return n, err
		}
	}
}

func (realSys) Read(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		if err != unix.EINTR {
			return n, err
		}
	}
}

func (realSys) Mmap(fd int, offset int64, length int, prot, flags int) ([]byte, error) {
	return unix.Mmap(fd, offset, length, prot, flags)
}

func (realSys) Munmap(b []byte) error { return unix.Munmap(b) }

func (realSys) Poll(fds []unix.PollFd, timeoutMs int) (int, error) {
	return unix.Poll(fds, timeoutMs)
}

func (realSys) SetNonblock(fd int) error { return unix.SetNonblock(fd, true) }
