package rdmanl

import (
	"golang.org/x/sys/unix"
)

// Handle is one NETLINK_RDMA socket, optionally opened in another network
// namespace. Its methods are safe for concurrent use.
type Handle struct {
	c conn
}

// conn sends one netlink request and returns the raw reply datagrams.
type conn interface {
	Close() error
}

// NewHandle opens a NETLINK_RDMA socket in the caller's network namespace.
func NewHandle() (*Handle, error) { return nil, unix.ENOSYS }

// Close releases the socket.
func (h *Handle) Close() error { return h.c.Close() }

// Devices lists all RDMA devices visible in the handle's network namespace.
// Equivalent to: `rdma dev show`
func (h *Handle) Devices() ([]Device, error) { return nil, unix.ENOSYS }

// DeviceByName returns the device called name.
func (h *Handle) DeviceByName(name string) (Device, error) { return Device{}, unix.ENOSYS }

// DeviceByIndex returns the device with kernel index idx.
func (h *Handle) DeviceByIndex(idx uint32) (Device, error) { return Device{}, unix.ENOSYS }

// Ports lists the ports of device index dev.
// Equivalent to: `rdma link show DEV`
func (h *Handle) Ports(dev uint32) ([]Port, error) { return nil, unix.ENOSYS }

// UverbsChardev resolves the uverbs character device of device index dev
// (RDMA_NLDEV_CMD_GET_CHARDEV, client "uverbs").
func (h *Handle) UverbsChardev(dev uint32) (Chardev, error) { return Chardev{}, unix.ENOSYS }

// AddRxeLink creates a Soft-RoCE device name on netdev.
// Equivalent to: `rdma link add NAME type rxe netdev NETDEV`
func (h *Handle) AddRxeLink(name, netdev string) error { return unix.ENOSYS }

// DeleteLink removes the RDMA link (rxe, siw) called name.
// Equivalent to: `rdma link delete NAME`
func (h *Handle) DeleteLink(name string) error { return unix.ENOSYS }

// NetnsMode reports whether RDMA devices are exclusive to one network
// namespace (true) or shared by all (false).
// Equivalent to: `rdma system show netns`
func (h *Handle) NetnsMode() (exclusive bool, err error) { return false, unix.ENOSYS }
