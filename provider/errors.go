package provider

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is returned (wrapped, with the verb's name) when the kernel
// or the device's driver lacks a feature. It also matches unix.EOPNOTSUPP.
var ErrNotSupported = errors.New("not supported")

// ErrClosed is returned (wrapped) when an object, or the context it belongs
// to, has already been destroyed or closed. It also matches unix.EBADF, the
// errno cshim reports for use after free.
var ErrClosed = errors.New("already closed or destroyed")

// errno keeps a kernel errno behind an unexported type, as cilium/ebpf's
// wrappedErrno does (cilium/ebpf:internal/sys/syscall_other.go), so callers
// compare with errors.Is(err, unix.EINVAL) instead of ==.
type errno struct{ no unix.Errno }

func (e errno) Error() string { return e.no.Error() }

// Unwrap lets errors.Is and errors.As reach the unix.Errno.
func (e errno) Unwrap() error { return e.no }

// wrapErrno turns an error returned by the syscall seam into our errno type;
// anything that is not an errno passes through unchanged.
func wrapErrno(err error) error {
	if err == nil {
		return nil
	}
	var no unix.Errno
	if errors.As(err, &no) {
		if no == 0 {
			return nil
		}
		return errno{no}
	}
	return err
}

// sentinelErrno matches both a public sentinel and an errno, like
// cilium/ebpf's sys.Error (cilium/ebpf:internal/sys/syscall.go).
type sentinelErrno struct {
	sentinel error
	no       unix.Errno
	detail   string
}

func (e *sentinelErrno) Error() string {
	if e.detail != "" {
		return e.sentinel.Error() + ": " + e.detail
	}
	return e.sentinel.Error()
}

func (e *sentinelErrno) Is(target error) bool { return target == e.sentinel }

func (e *sentinelErrno) Unwrap() error { return errno{e.no} }

// errClosed reports use after close/destroy of the named object.
func errClosed(what string) error {
	return &sentinelErrno{sentinel: ErrClosed, no: unix.EBADF, detail: what}
}

// errNotSupported reports a missing kernel or driver feature. no is the errno
// the kernel gave (EOPNOTSUPP when we decided without asking it).
func errNotSupported(what string, no unix.Errno) error {
	if no == 0 {
		no = unix.EOPNOTSUPP
	}
	return &sentinelErrno{sentinel: ErrNotSupported, no: no, detail: what}
}

// errInvalid reports an argument the caller got wrong, before any syscall.
func errInvalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errno{unix.EINVAL})
}

// errNoMem reports a provider limit reached (ENOMEM, as a kernel answers).
func errNoMem(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errno{unix.ENOMEM})
}

// errBusy reports an object still in use (EBUSY, as the kernel answers).
func errBusy(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errno{unix.EBUSY})
}

// isNotSupportedErrno reports the errnos the uverbs core and drivers use for
// "this verb is not implemented here".
func isNotSupportedErrno(err error) (unix.Errno, bool) {
	var no unix.Errno
	if !errors.As(err, &no) {
		return 0, false
	}
	switch no {
	case unix.EOPNOTSUPP, unix.ENOSYS, unix.EPROTONOSUPPORT:
		return no, true
	}
	return no, false
}

// verbError prefixes err with "provider: <verb>: ". A kernel "not supported"
// errno becomes ErrNotSupported so callers can test one sentinel.
func verbError(verb string, err error) error {
	if err == nil {
		return nil
	}
	if no, ok := isNotSupportedErrno(err); ok && !errors.Is(err, ErrNotSupported) {
		err = &sentinelErrno{sentinel: ErrNotSupported, no: no, detail: "kernel: " + no.Error()}
	}
	return fmt.Errorf("provider: %s: %w", verb, err)
}

// regMRHint adds the memlock hint where pinning memory is the likely cause,
// as cilium/ebpf's handleMapCreateError adds its MEMLOCK hint.
func regMRHint(err error) error {
	if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w (memlock limit too low? check ulimit -l)", err)
	}
	return err
}
