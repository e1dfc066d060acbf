package rdmanl

// Package-level shortcuts: each opens a handle in the caller's network
// namespace, runs one query and closes it again.

func withHandle[T any](fn func(h *Handle) (T, error)) (T, error) {
	h, err := NewHandle()
	if err != nil {
		var zero T
		return zero, err
	}
	defer h.Close()
	return fn(h)
}

// Devices lists all RDMA devices. Equivalent to: `rdma dev show`
func Devices() ([]Device, error) { return withHandle((*Handle).Devices) }

// ListDevices lists all RDMA devices with one dump and no chardev queries
// (DriverID 0): Handle.ListDevices.
func ListDevices() ([]Device, error) { return withHandle((*Handle).ListDevices) }

// DeviceByName returns the device called name.
func DeviceByName(name string) (Device, error) {
	return withHandle(func(h *Handle) (Device, error) { return h.DeviceByName(name) })
}

// DeviceByIndex returns the device with kernel index idx.
func DeviceByIndex(idx uint32) (Device, error) {
	return withHandle(func(h *Handle) (Device, error) { return h.DeviceByIndex(idx) })
}

// Ports lists the ports of device index dev. Equivalent to: `rdma link show DEV`
func Ports(dev uint32) ([]Port, error) {
	return withHandle(func(h *Handle) ([]Port, error) { return h.Ports(dev) })
}

// UverbsChardev resolves the uverbs character device of device index dev.
func UverbsChardev(dev uint32) (Chardev, error) {
	return withHandle(func(h *Handle) (Chardev, error) { return h.UverbsChardev(dev) })
}

// AddRxeLink creates a Soft-RoCE device name on netdev.
// Equivalent to: `rdma link add NAME type rxe netdev NETDEV`
func AddRxeLink(name, netdev string) error {
	_, err := withHandle(func(h *Handle) (struct{}, error) { return struct{}{}, h.AddRxeLink(name, netdev) })
	return err
}

// DeleteLink removes the RDMA link called name. Equivalent to: `rdma link delete NAME`
func DeleteLink(name string) error {
	_, err := withHandle(func(h *Handle) (struct{}, error) { return struct{}{}, h.DeleteLink(name) })
	return err
}

// NetnsMode reports whether RDMA devices are exclusive to one network
// namespace. Equivalent to: `rdma system show netns`
func NetnsMode() (exclusive bool, err error) { return withHandle((*Handle).NetnsMode) }
