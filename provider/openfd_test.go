package provider

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenFDKnown skips the netlink lookup, so it must itself refuse an fd that
// is no uverbs device: /dev/null would accept the GET_CONTEXT write and
// answer with zeros (async fd 0).
func TestOpenFDKnownRefusesNonUverbsFD(t *testing.T) {
	null, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	dev := KnownDevice{Name: "rxe0", Kind: DriverRXE, DriverID: 14}
	for _, c := range []struct {
		name string
		dev  KnownDevice
		fd   int
		want error
	}{
		{"/dev/null", dev, int(null.Fd()), unix.ENODEV},
		{"regular file", dev, int(regular.Fd()), unix.ENODEV},
		{"closed fd", dev, 1 << 20, unix.EBADF},
		{"negative fd", dev, -1, unix.EINVAL},
		{"no name", KnownDevice{Kind: DriverRXE}, int(null.Fd()), unix.EINVAL},
	} {
		ctx, err := OpenFDKnown(c.dev, c.fd)
		if ctx != nil {
			ctx.Close()
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
