package provider

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"usb4verbs/internal/usb4guid"
	"usb4verbs/rdmanl"
	"usb4verbs/uapi"
)

// DriverKind is the backend family chosen for a device at open time
// (DESIGN.md decision 4).
type DriverKind int

const (
	// DriverGeneric speaks plain uverbs and passes no driver data.
	DriverGeneric DriverKind = iota
	// DriverRXE is Soft-RoCE: driver response data with ring mmap info is
	// required on create_cq/create_qp/create_srq.
	DriverRXE
	// DriverUSB4 is the thunderbolt_ibverbs kernel module: generic uverbs,
	// no driver data (usb4-kernel-and-consumers.md §1.6).
	DriverUSB4
)

func (k DriverKind) String() string {
	switch k {
	case DriverRXE:
		return "rxe"
	case DriverUSB4:
		return "usb4"
	}
	return "generic"
}

// Driver identifies the kernel driver behind a context.
type Driver struct {
	Kind DriverKind
	// ID is the kernel's enum rdma_driver_id (RDMA_DRIVER_RXE, ...); it is
	// what every ioctl header carries.
	ID uint32
}

// DeviceInfo describes one RDMA device and its uverbs character device.
type DeviceInfo struct {
	Name       string
	Index      uint32 // kernel device index (0 when found through sysfs)
	NodeGUID   uint64
	NodeType   uint8
	NumPorts   uint32
	Protocol   string
	Chardev    string // /dev/infiniband/uverbsN
	ABIVersion uint64
	Driver     Driver
	FromSysfs  bool // netlink was unavailable; found the way libibverbs' sysfs scan does
}

// isUSB4GUID: the module derives every device's node GUID from peer and rail
// by an addition that carries (internal/usb4guid).
func isUSB4GUID(guid uint64) bool {
	_, ok := usb4guid.Decode(guid)
	return ok
}

// classifyDriver picks the backend from the kernel's driver id, the node GUID
// and, as a last resort, the device name (udev may rename usb4 devices, so
// the GUID comes first).
func classifyDriver(name string, guid uint64, driverID uint32) Driver {
	switch {
	case driverID == uapi.RDMA_DRIVER_RXE:
		return Driver{Kind: DriverRXE, ID: driverID}
	case isUSB4GUID(guid):
		return Driver{Kind: DriverUSB4, ID: driverID}
	case strings.HasPrefix(name, "usb4_rdma") || strings.HasPrefix(name, "usb4_apple"):
		return Driver{Kind: DriverUSB4, ID: driverID}
	}
	return Driver{Kind: DriverGeneric, ID: driverID}
}

// systemLookup asks RDMA netlink first and falls back to sysfs, the same
// order libibverbs uses (rdma-core:libibverbs/ibdev_nl.c, then sysfs).
type systemLookup struct{ sysfsRoot string }

func (l systemLookup) byName(name string) (DeviceInfo, error) {
	d, err := rdmanl.DeviceByName(name)
	if err == nil {
		cd, err := rdmanl.UverbsChardev(d.Index)
		if err != nil {
			return DeviceInfo{}, fmt.Errorf("uverbs char device of %s: %w", name, err)
		}
		return infoFrom(d, cd, false), nil
	}
	if errors.Is(err, rdmanl.ErrNotFound) {
		return DeviceInfo{}, fmt.Errorf("device %q: %w", name, errno{unix.ENODEV})
	}
	// Netlink unavailable (old kernel, seccomp, ...): scan sysfs.
	info, serr := l.bySysfs(name)
	if serr != nil && !errors.Is(serr, unix.ENODEV) {
		return DeviceInfo{}, fmt.Errorf("device %q: netlink: %v; sysfs: %w", name, err, serr)
	}
	return info, serr
}

// bySysfs finds name the way libibverbs' sysfs scan does. Sysfs does not
// show the driver id; Open probes it (probeDriverID).
func (l systemLookup) bySysfs(name string) (DeviceInfo, error) {
	devs, err := rdmanl.SysfsDevices(l.sysfsRoot)
	if err != nil {
		return DeviceInfo{}, err
	}
	for _, d := range devs {
		if d.Name != name {
			continue
		}
		cd, err := rdmanl.SysfsUverbs(l.sysfsRoot, name)
		if err != nil {
			return DeviceInfo{}, fmt.Errorf("uverbs char device of %s: %w", name, err)
		}
		return infoFrom(d, cd, true), nil
	}
	return DeviceInfo{}, fmt.Errorf("device %q: %w", name, errno{unix.ENODEV})
}

func (l systemLookup) all() ([]DeviceInfo, error) {
	devs, err := rdmanl.Devices()
	fromSysfs := false
	if err != nil {
		var serr error
		devs, serr = rdmanl.SysfsDevices(l.sysfsRoot)
		if serr != nil {
			return nil, fmt.Errorf("netlink: %v; sysfs: %w", err, serr)
		}
		fromSysfs = true
	}
	out := make([]DeviceInfo, 0, len(devs))
	for _, d := range devs {
		var cd rdmanl.Chardev
		var cerr error
		if fromSysfs {
			cd, cerr = rdmanl.SysfsUverbs(l.sysfsRoot, d.Name)
		} else {
			cd, cerr = rdmanl.UverbsChardev(d.Index)
		}
		if cerr != nil {
			continue // no uverbs (kernel-only device): not usable from userspace
		}
		out = append(out, infoFrom(d, cd, fromSysfs))
	}
	return out, nil
}

func infoFrom(d rdmanl.Device, cd rdmanl.Chardev, fromSysfs bool) DeviceInfo {
	id := cd.DriverID
	if id == 0 {
		id = d.DriverID
	}
	return DeviceInfo{
		Name:       d.Name,
		Index:      d.Index,
		NodeGUID:   d.NodeGUID,
		NodeType:   d.NodeType,
		NumPorts:   d.NumPorts,
		Protocol:   d.Protocol,
		Chardev:    cd.Path,
		ABIVersion: cd.ABIVersion,
		Driver:     classifyDriver(d.Name, d.NodeGUID, id),
		FromSysfs:  fromSysfs,
	}
}

// Devices lists the RDMA devices that have a uverbs character device.
func Devices() ([]DeviceInfo, error) {
	devs, err := systemLookup{}.all()
	if err != nil {
		return nil, verbError("list devices", err)
	}
	return devs, nil
}
