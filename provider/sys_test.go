package provider

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestIoctlRetriesEINTR (issue 12 item 10): an ioctl interrupted by a
// signal is issued again, not reported as the verb's failure.
func TestIoctlRetriesEINTR(t *testing.T) {
	saved := rawIoctl
	defer func() { rawIoctl = saved }()
	calls := 0
	rawIoctl = func(int, uintptr, unsafe.Pointer) unix.Errno {
		calls++
		if calls <= 2 {
			return unix.EINTR
		}
		return 0
	}
	if err := (realSys{}).Ioctl(3, 0, nil); err != nil || calls != 3 {
		t.Errorf("Ioctl = %v after %d calls, want nil after 3", err, calls)
	}
	calls = 10
	rawIoctl = func(int, uintptr, unsafe.Pointer) unix.Errno { return unix.EINVAL }
	if err := (realSys{}).Ioctl(3, 0, nil); err != unix.EINVAL {
		t.Errorf("Ioctl = %v, want EINVAL", err)
	}
}
