package rdmanl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The sysfs fallback reads the same facts as netlink from
// /sys/class/infiniband (linux:drivers/infiniband/core/sysfs.c) and
// /sys/class/infiniband_verbs (uverbs_main.c), for containers and kernels
// without NETLINK_RDMA. It cannot see device indexes or driver ids; those
// fields stay 0.

// maxSysfsFile bounds every sysfs read; the attributes we read are one line.
const maxSysfsFile = 4096

func sysRoot(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// readSysfs returns the first line of a sysfs attribute, trimmed.
func readSysfs(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSysfsFile))
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(s), nil
}

// readOptional is readSysfs where a missing file means "".
func readOptional(p string) (string, error) {
	s, err := readSysfs(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return s, err
}

// parseSysfsGUID parses "0002:c9ff:fe00:0001" (four 16-bit groups, the
// big-endian GUID in reading order) into the value netlink reports.
func parseSysfsGUID(s string) (uint64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return 0, fmt.Errorf("GUID %q: want 4 colon-separated groups: %w", s, unix.EINVAL)
	}
	var v uint64
	for _, p := range parts {
		if len(p) != 4 {
			return 0, fmt.Errorf("GUID %q: group %q is not 4 hex digits: %w", s, p, unix.EINVAL)
		}
		g, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("GUID %q: %w", s, unix.EINVAL)
		}
		v = v<<16 | g
	}
	return v, nil
}

// parseLeadingUint parses the number in "4: ACTIVE" or "1: CA".
func parseLeadingUint(s string, bits int) (uint64, error) {
	num, _, _ := strings.Cut(s, ":")
	v, err := strconv.ParseUint(strings.TrimSpace(num), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("value %q: want a leading number: %w", s, unix.EINVAL)
	}
	return v, nil
}

// parseHexOrDec parses "0x1a" or "26".
func parseHexOrDec(s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("value %q: want a number: %w", s, unix.EINVAL)
	}
	return v, nil
}

// SysfsDevices reads the devices under <root>/sys/class/infiniband; root ""
// means "/". Index and DriverID are not in sysfs and stay 0. Protocol is
// inferred from port 1: InfiniBand is "ib", Ethernet is "iw" on an RNIC node
// and "roce" otherwise. No devices (or no such directory) is an empty list.
func SysfsDevices(root string) ([]Device, error) {
	base := filepath.Join(sysRoot(root), "sys/class/infiniband")
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rdmanl: sysfs devices: %w", err)
	}
	var devs []Device
	for _, e := range entries {
		d, err := sysfsDevice(filepath.Join(base, e.Name()), e.Name())
		if err != nil {
			return nil, fmt.Errorf("rdmanl: sysfs device %s: %w", e.Name(), err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func sysfsDevice(dir, name string) (Device, error) {
	d := Device{Name: name}
	var err error
	if s, rerr := readSysfs(filepath.Join(dir, "node_guid")); rerr != nil {
		return d, rerr
	} else if d.NodeGUID, err = parseSysfsGUID(s); err != nil {
		return d, err
	}
	if s, rerr := readOptional(filepath.Join(dir, "sys_image_guid")); rerr != nil {
		return d, rerr
	} else if s != "" {
		if d.SysImageGUID, err = parseSysfsGUID(s); err != nil {
			return d, err
		}
	}
	if s, rerr := readOptional(filepath.Join(dir, "node_type")); rerr != nil {
		return d, rerr
	} else if s != "" {
		v, err := parseLeadingUint(s, 8)
		if err != nil {
			return d, err
		}
		d.NodeType = uint8(v)
	}
	if d.FirmwareVersion, err = readOptional(filepath.Join(dir, "fw_ver")); err != nil {
		return d, err
	}
	ports, err := sysfsPortNumbers(dir)
	if err != nil {
		return d, err
	}
	if len(ports) > 0 {
		d.NumPorts = ports[len(ports)-1]
		ll, err := readOptional(filepath.Join(dir, "ports", strconv.FormatUint(uint64(ports[0]), 10), "link_layer"))
		if err != nil {
			return d, err
		}
		switch {
		case ll == "InfiniBand":
			d.Protocol = "ib"
		case ll == "Ethernet" && d.NodeType == 4: // RDMA_NODE_RNIC
			d.Protocol = "iw"
		case ll == "Ethernet":
			d.Protocol = "roce"
		}
	}
	return d, nil
}

// sysfsPortNumbers lists the numeric entries of dir/ports, ascending.
func sysfsPortNumbers(dir string) ([]uint32, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "ports"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ports []uint32
	for _, e := range entries {
		n, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || n == 0 {
			continue
		}
		ports = append(ports, uint32(n))
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	return ports, nil
}

// SysfsPorts reads the ports of device dev under
// <root>/sys/class/infiniband/<dev>/ports; root "" means "/". The netdev
// comes from gid_attrs/ndevs/0 and its index from
// <root>/sys/class/net/<netdev>/ifindex. CapFlags is the port's cap_mask on
// InfiniBand ports only, as netlink reports it. DeviceIndex stays 0.
func SysfsPorts(root, dev string) ([]Port, error) {
	if err := validateLinkName(dev); err != nil {
		return nil, fmt.Errorf("rdmanl: sysfs ports of %q: %s: %w", dev, err, unix.EINVAL)
	}
	dir := filepath.Join(sysRoot(root), "sys/class/infiniband", dev)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rdmanl: sysfs ports of %s: %w", dev, &notFoundError{what: "RDMA device"})
		}
		return nil, fmt.Errorf("rdmanl: sysfs ports of %s: %w", dev, err)
	}
	nums, err := sysfsPortNumbers(dir)
	if err != nil {
		return nil, fmt.Errorf("rdmanl: sysfs ports of %s: %w", dev, err)
	}
	ports := make([]Port, 0, len(nums))
	for _, n := range nums {
		p, err := sysfsPort(sysRoot(root), filepath.Join(dir, "ports", strconv.FormatUint(uint64(n), 10)))
		if err != nil {
			return nil, fmt.Errorf("rdmanl: sysfs port %s/%d: %w", dev, n, err)
		}
		p.DeviceName, p.Port = dev, n
		ports = append(ports, p)
	}
	return ports, nil
}

func sysfsPort(root, dir string) (Port, error) {
	var p Port
	for _, f := range []struct {
		file string
		dst  *uint8
	}{{"state", &p.State}, {"phys_state", &p.PhysState}} {
		s, err := readSysfs(filepath.Join(dir, f.file))
		if err != nil {
			return p, err
		}
		v, err := parseLeadingUint(s, 8)
		if err != nil {
			return p, fmt.Errorf("%s: %w", f.file, err)
		}
		*f.dst = uint8(v)
	}
	var err error
	if p.LinkLayer, err = readOptional(filepath.Join(dir, "link_layer")); err != nil {
		return p, err
	}
	for _, f := range []struct {
		file string
		dst  *uint32
	}{{"lid", &p.LID}, {"sm_lid", &p.SMLID}} {
		s, err := readOptional(filepath.Join(dir, f.file))
		if err != nil {
			return p, err
		}
		if s == "" {
			continue
		}
		v, err := parseHexOrDec(s, 32)
		if err != nil {
			return p, fmt.Errorf("%s: %w", f.file, err)
		}
		*f.dst = uint32(v)
	}
	if p.LinkLayer == "InfiniBand" {
		s, err := readOptional(filepath.Join(dir, "cap_mask"))
		if err != nil {
			return p, err
		}
		if s != "" {
			if p.CapFlags, err = parseHexOrDec(s, 32); err != nil {
				return p, fmt.Errorf("cap_mask: %w", err)
			}
		}
	}
	// gid_attrs/ndevs/0 reads EINVAL on IB ports and for unset GIDs.
	ndev, err := readSysfs(filepath.Join(dir, "gid_attrs/ndevs/0"))
	if err == nil && ndev != "" && validateNetdevName(ndev) == nil {
		p.NetdevName = ndev
		if s, err := readOptional(filepath.Join(root, "sys/class/net", ndev, "ifindex")); err == nil && s != "" {
			if v, err := parseHexOrDec(s, 32); err == nil {
				p.NetdevIndex = uint32(v)
			}
		}
	}
	return p, nil
}

// SysfsUverbs finds the uverbs chardev of device dev under
// <root>/sys/class/infiniband_verbs; root "" means "/". Path is
// <root>/dev/infiniband/uverbsN. DriverID is not in sysfs and stays 0. No
// chardev for dev yields an error matching ErrNotFound and unix.ENODEV.
func SysfsUverbs(root, dev string) (Chardev, error) {
	base := filepath.Join(sysRoot(root), "sys/class/infiniband_verbs")
	entries, err := os.ReadDir(base)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Chardev{}, fmt.Errorf("rdmanl: sysfs uverbs of %s: %w", dev, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue // abi_version, the class-wide attribute
		}
		dir := filepath.Join(base, e.Name())
		ibdev, err := readOptional(filepath.Join(dir, "ibdev"))
		if err != nil {
			return Chardev{}, fmt.Errorf("rdmanl: sysfs uverbs %s: %w", e.Name(), err)
		}
		if ibdev != dev {
			continue
		}
		c, err := sysfsChardev(root, dir, e.Name())
		if err != nil {
			return Chardev{}, fmt.Errorf("rdmanl: sysfs uverbs %s: %w", e.Name(), err)
		}
		return c, nil
	}
	return Chardev{}, fmt.Errorf("rdmanl: sysfs uverbs of %s: %w", dev, &notFoundError{what: "uverbs chardev"})
}

func sysfsChardev(root, dir, name string) (Chardev, error) {
	c := Chardev{Name: name, Path: filepath.Join(sysRoot(root), "dev/infiniband", name)}
	s, err := readSysfs(filepath.Join(dir, "abi_version"))
	if err != nil {
		return c, err
	}
	if c.ABIVersion, err = parseHexOrDec(s, 64); err != nil {
		return c, fmt.Errorf("abi_version: %w", err)
	}
	s, err = readSysfs(filepath.Join(dir, "dev"))
	if err != nil {
		return c, err
	}
	majStr, minStr, ok := strings.Cut(s, ":")
	majV, err1 := strconv.ParseUint(majStr, 10, 32)
	minV, err2 := strconv.ParseUint(minStr, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return c, fmt.Errorf("dev %q: want MAJOR:MINOR: %w", s, unix.EINVAL)
	}
	c.Dev = unix.Mkdev(uint32(majV), uint32(minV))
	return c, nil
}
