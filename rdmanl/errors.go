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
// while it was read. Retrying gives a consistent answer. It matches
// unix.EINTR too.
var ErrDumpInterrupted = errors.New("dump interrupted")

// notFoundError says which device or chardev is missing; it matches both
// ErrNotFound and unix.ENODEV.
type notFoundError struct{ what string }

func (e *notFoundError) Error() string { return e.what + ": " + ErrNotFound.Error() }

func (e *notFoundError) Is(target error) bool {
	return target == ErrNotFound || target == unix.ENODEV
}
