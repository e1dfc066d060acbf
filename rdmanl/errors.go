package rdmanl

import (
	"errors"

	"golang.org/x/sys/unix"
)

// ErrNotFound is wrapped by errors about a device or chardev that does not
// exist. Such errors also match unix.ENODEV.
var ErrNotFound = errors.New("not found")

// ErrDumpInterrupted is returned, together with the partial results, when the
// kernel flagged a dump with NLM_F_DUMP_INTR because the device list changed
// while it was read. Retrying gives a consistent answer. It also matches
// unix.EINTR.
var ErrDumpInterrupted error = dumpInterruptedError{}

type dumpInterruptedError struct{}

func (dumpInterruptedError) Error() string { return "dump interrupted (NLM_F_DUMP_INTR)" }

func (dumpInterruptedError) Is(target error) bool { return target == unix.EINTR }

// notFoundError says which device or chardev is missing; it matches both
// ErrNotFound and unix.ENODEV, and unwraps to the kernel's answer if any.
type notFoundError struct {
	what string
	err  error
}

func (e *notFoundError) Error() string {
	if e.err != nil {
		return e.what + " " + ErrNotFound.Error() + " (" + e.err.Error() + ")"
	}
	return e.what + " " + ErrNotFound.Error()
}

func (e *notFoundError) Is(target error) bool {
	return target == ErrNotFound || target == unix.ENODEV
}

func (e *notFoundError) Unwrap() error { return e.err }
