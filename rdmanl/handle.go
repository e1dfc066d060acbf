package rdmanl

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"usb4verbs/uapi"
)

// Handle is one NETLINK_RDMA socket, optionally opened in another network
// namespace. Its methods are safe for concurrent use; requests on one handle
// are serialised.
type Handle struct {
	mu  sync.Mutex
	c   conn
	seq uint32
}

// NewHandle opens a NETLINK_RDMA socket in the caller's network namespace.
func NewHandle() (*Handle, error) {
	c, err := dialSocket()
	if err != nil {
		return nil, &OpError{Op: "open NETLINK_RDMA socket", Err: err}
	}
	return newHandle(c), nil
}

// NewHandleAt opens a NETLINK_RDMA socket in network namespace ns. In
// exclusive netns mode each namespace sees only its own RDMA devices.
func NewHandleAt(ns netns.NsHandle) (*Handle, error) {
	c, err := dialSocketIn(ns)
	if err != nil {
		return nil, &OpError{Op: "open NETLINK_RDMA socket in netns", Err: err}
	}
	return newHandle(c), nil
}

func newHandle(c conn) *Handle { return &Handle{c: c, seq: 1} }

// Close releases the socket. Calling it twice returns an error wrapping
// unix.EBADF.
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return &OpError{Op: "close", Err: unix.EBADF}
	}
	err := h.c.Close()
	h.c = nil
	return err
}

// nldevType is the nlmsg_type of nldev command cmd.
func nldevType(cmd uint16) uint16 { return uapi.RDMA_NL_GET_TYPE(uapi.RDMA_NL_NLDEV, cmd) }

// execute sends one nldev request and collects the payloads of its replies.
// A dump ends at NLMSG_DONE; any other request is sent with NLM_F_ACK and
// ends at the ACK. A dump flagged NLM_F_DUMP_INTR returns everything read
// together with ErrDumpInterrupted.
func (h *Handle) execute(op string, cmd uint16, dump bool, attrs []byte) ([][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return nil, &OpError{Op: op, Err: unix.EBADF}
	}
	h.seq++
	seq := h.seq
	flags := uint16(unix.NLM_F_REQUEST)
	if dump {
		flags |= unix.NLM_F_DUMP
	} else {
		flags |= unix.NLM_F_ACK
	}
	want := nldevType(cmd)
	if err := h.c.Send(marshalMessage(want, flags, seq, attrs)); err != nil {
		return nil, &OpError{Op: op, Err: err}
	}
	var (
		payloads    [][]byte
		interrupted bool
	)
	for {
		dgram, err := h.c.Receive()
		if err != nil {
			return payloads, &OpError{Op: op, Err: err}
		}
		msgs, err := parseMessages(dgram)
		if err != nil {
			return payloads, &OpError{Op: op, Err: err}
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // a late reply to an earlier, abandoned request
			}
			if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.Header.Type {
			case unix.NLMSG_NOOP:
				continue
			case unix.NLMSG_ERROR, unix.NLMSG_DONE:
				errno, text, off, err := parseErrorPayload(m)
				if err != nil {
					return payloads, &OpError{Op: op, Err: err}
				}
				if errno != 0 {
					return payloads, &OpError{Op: op, Err: errno, Message: text, Offset: off}
				}
				if m.Header.Type == unix.NLMSG_ERROR && dump {
					continue // an ACK inside a dump: keep reading until DONE
				}
				if interrupted {
					return payloads, &OpError{Op: op, Err: ErrDumpInterrupted}
				}
				return payloads, nil
			case unix.NLMSG_OVERRUN:
				return payloads, &OpError{Op: op, Err: unix.ENOBUFS}
			case want:
				payloads = append(payloads, m.Data)
			default:
				return payloads, &OpError{Op: op, Err: errBadMessage("reply type %#x, want %#x", m.Header.Type, want)}
			}
		}
	}
}

// Devices lists all RDMA devices visible in the handle's network namespace.
// DriverID is filled from each device's uverbs chardev where it has one.
// Equivalent to: `rdma dev show`
//
// If the error is ErrDumpInterrupted the list may be incomplete; retry.
func (h *Handle) Devices() ([]Device, error) {
	devs, err := h.devices()
	if err != nil && !errors.Is(err, ErrDumpInterrupted) {
		return nil, err
	}
	for i := range devs {
		if cd, cerr := h.UverbsChardev(devs[i].Index); cerr == nil {
			devs[i].DriverID = cd.DriverID
		}
	}
	return devs, err
}

// ListDevices is Devices without the per-device chardev query: one
// RDMA_NLDEV_CMD_GET dump, DriverID left 0. For callers that list often and
// need names and GUIDs only (the provider's removal watcher, once a second).
// If the error is ErrDumpInterrupted the list may be incomplete; retry.
func (h *Handle) ListDevices() ([]Device, error) { return h.devices() }

// devices is the bare RDMA_NLDEV_CMD_GET dump.
func (h *Handle) devices() ([]Device, error) {
	const op = "dev show"
	payloads, execErr := h.execute(op, uapi.RDMA_NLDEV_CMD_GET, true, nil)
	if execErr != nil && !errors.Is(execErr, ErrDumpInterrupted) {
		return nil, execErr
	}
	devs := make([]Device, 0, len(payloads))
	for _, p := range payloads {
		d, err := decodeDevice(p)
		if err != nil {
			return nil, &OpError{Op: op, Err: err}
		}
		devs = append(devs, d)
	}
	return devs, execErr
}

// DeviceByName returns the device called name. A missing device yields an
// error matching ErrNotFound and unix.ENODEV.
func (h *Handle) DeviceByName(name string) (Device, error) {
	return h.findDevice("dev show "+name, func(d *Device) bool { return d.Name == name })
}

// DeviceByIndex returns the device with kernel index idx. A missing device
// yields an error matching ErrNotFound and unix.ENODEV.
func (h *Handle) DeviceByIndex(idx uint32) (Device, error) {
	return h.findDevice(fmt.Sprintf("dev show index %d", idx), func(d *Device) bool { return d.Index == idx })
}

func (h *Handle) findDevice(what string, match func(*Device) bool) (Device, error) {
	devs, err := h.devices()
	for i := range devs {
		if match(&devs[i]) {
			d := devs[i]
			if cd, cerr := h.UverbsChardev(d.Index); cerr == nil {
				d.DriverID = cd.DriverID
			}
			return d, nil
		}
	}
	if err != nil {
		return Device{}, err
	}
	return Device{}, &OpError{Op: what, Err: &notFoundError{what: "RDMA device"}}
}

// Ports lists the ports of device index dev. A missing device yields an
// error matching ErrNotFound and unix.ENODEV.
// Equivalent to: `rdma link show DEV`
func (h *Handle) Ports(dev uint32) ([]Port, error) {
	// The port dump carries no protocol; the device's decides the link layer.
	d, err := h.DeviceByIndex(dev)
	if err != nil {
		return nil, err
	}
	op := "link show " + d.Name
	var enc attrEncoder
	enc.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	payloads, execErr := h.execute(op, uapi.RDMA_NLDEV_CMD_PORT_GET, true, enc.Bytes())
	if execErr != nil && !errors.Is(execErr, ErrDumpInterrupted) {
		if errors.Is(execErr, unix.EINVAL) {
			// nldev answers EINVAL for an index it does not know: the
			// device went away between the two requests.
			return nil, notFound(op, "RDMA device", execErr)
		}
		return nil, execErr
	}
	ports := make([]Port, 0, len(payloads))
	for _, p := range payloads {
		port, err := decodePort(p)
		if err != nil {
			return nil, &OpError{Op: op, Err: err}
		}
		if port.DeviceIndex != dev {
			return nil, &OpError{Op: op, Err: errBadMessage("port of device %d in the dump of device %d", port.DeviceIndex, dev)}
		}
		port.LinkLayer = linkLayer(d.Protocol)
		ports = append(ports, port)
	}
	return ports, execErr
}

// notFound turns the kernel's answer err (an *OpError) into a not-found
// error for op that keeps the kernel's errno and text.
func notFound(op, what string, err error) error {
	var kerr *OpError
	if errors.As(err, &kerr) {
		return &OpError{Op: op, Err: &notFoundError{what: what, err: kerr.Err}, Message: kerr.Message, Offset: kerr.Offset}
	}
	return &OpError{Op: op, Err: &notFoundError{what: what, err: err}}
}

// linkLayer names the link layer the way sysfs ports/N/link_layer does.
func linkLayer(protocol string) string {
	switch protocol {
	case "roce", "iw", "usnic":
		return "Ethernet"
	case "ib", "opa":
		return "InfiniBand"
	}
	return ""
}

// UverbsChardev resolves the uverbs character device of device index dev
// (RDMA_NLDEV_CMD_GET_CHARDEV, client "uverbs"). A missing device, or one
// without a uverbs chardev, yields an error matching ErrNotFound and
// unix.ENODEV.
func (h *Handle) UverbsChardev(dev uint32) (Chardev, error) {
	op := fmt.Sprintf("chardev uverbs of device %d", dev)
	var enc attrEncoder
	enc.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, dev)
	enc.String(uapi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
	payloads, err := h.execute(op, uapi.RDMA_NLDEV_CMD_GET_CHARDEV, false, enc.Bytes())
	if err != nil {
		// nldev_get_chardev: EINVAL for an unknown index, ENOENT when
		// ib_uverbs is not loaded, EOPNOTSUPP for a device without uverbs
		// (linux:drivers/infiniband/core/device.c ib_get_client_nl_info).
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return Chardev{}, notFound(op, "uverbs chardev", err)
		}
		return Chardev{}, err
	}
	if len(payloads) != 1 {
		return Chardev{}, &OpError{Op: op, Err: errBadMessage("%d replies, want 1", len(payloads))}
	}
	cd, err := decodeChardev(payloads[0])
	if err != nil {
		return Chardev{}, &OpError{Op: op, Err: err}
	}
	return cd, nil
}

// maxDeviceName is IB_DEVICE_NAME_MAX (linux:include/rdma/ib_verbs.h),
// including the NUL.
const maxDeviceName = 64

func validateLinkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty device name")
	case len(name) >= maxDeviceName:
		return fmt.Errorf("device name %q longer than %d bytes", name, maxDeviceName-1)
	case strings.ContainsAny(name, "%/\x00") || name == "." || name == "..":
		// '%' would make the kernel pick a name; '/' and NUL cannot be
		// a sysfs name.
		return fmt.Errorf("device name %q contains '%%', '/' or NUL", name)
	}
	return nil
}

func validateNetdevName(name string) error {
	switch {
	case name == "":
		return errors.New("empty netdev name")
	case len(name) >= unix.IFNAMSIZ:
		return fmt.Errorf("netdev name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	case strings.ContainsAny(name, "/\x00 ") || name == "." || name == "..":
		return fmt.Errorf("netdev name %q is not a valid interface name", name)
	}
	return nil
}

// AddRxeLink creates a Soft-RoCE device name on netdev. Needs CAP_NET_ADMIN
// and the rdma_rxe module (the kernel loads it on demand).
// Equivalent to: `rdma link add NAME type rxe netdev NETDEV`
func (h *Handle) AddRxeLink(name, netdev string) error {
	op := fmt.Sprintf("link add %s type rxe netdev %s", name, netdev)
	if err := validateLinkName(name); err != nil {
		return &OpError{Op: op, Err: unix.EINVAL, Message: err.Error()}
	}
	if err := validateNetdevName(netdev); err != nil {
		return &OpError{Op: op, Err: unix.EINVAL, Message: err.Error()}
	}
	var enc attrEncoder
	enc.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, name)
	enc.String(uapi.RDMA_NLDEV_ATTR_LINK_TYPE, "rxe")
	enc.String(uapi.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
	_, err := h.execute(op, uapi.RDMA_NLDEV_CMD_NEWLINK, false, enc.Bytes())
	return err
}

// DeleteLink removes the RDMA link (rxe, siw) called name. A missing device
// yields an error matching ErrNotFound and unix.ENODEV.
// Equivalent to: `rdma link delete NAME`
func (h *Handle) DeleteLink(name string) error {
	op := "link delete " + name
	if err := validateLinkName(name); err != nil {
		return &OpError{Op: op, Err: unix.EINVAL, Message: err.Error()}
	}
	d, err := h.DeviceByName(name)
	if err != nil {
		return err
	}
	var enc attrEncoder
	enc.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, d.Index)
	_, err = h.execute(op, uapi.RDMA_NLDEV_CMD_DELLINK, false, enc.Bytes())
	return err
}

// NetnsMode reports whether RDMA devices are exclusive to one network
// namespace (true) or shared by all (false).
// Equivalent to: `rdma system show netns`
func (h *Handle) NetnsMode() (exclusive bool, err error) {
	const op = "system show netns"
	payloads, err := h.execute(op, uapi.RDMA_NLDEV_CMD_SYS_GET, false, nil)
	if err != nil {
		return false, err
	}
	if len(payloads) != 1 {
		return false, &OpError{Op: op, Err: errBadMessage("%d replies, want 1", len(payloads))}
	}
	mode, err := decodeNetnsMode(payloads[0])
	if err != nil {
		return false, &OpError{Op: op, Err: err}
	}
	// ib_devices_shared_netns: 1 shared, 0 exclusive
	// (linux:drivers/infiniband/core/nldev.c nldev_sys_get_doit).
	return mode == 0, nil
}

// chardevPath is where udev creates the node for a uverbs chardev name.
func chardevPath(name string) string { return path.Join("/dev/infiniband", name) }
