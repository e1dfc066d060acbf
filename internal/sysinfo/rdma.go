package sysinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Device is one RDMA device under /sys/class/infiniband.
type Device struct {
	Name         string `json:"name"`
	Driver       string `json:"driver"` // kernel driver, best effort ("" when unknown)
	NodeGUID     uint64 `json:"-"`
	NodeGUIDText string `json:"node_guid"`
	SysImageGUID string `json:"sys_image_guid,omitempty"`
	NodeType     string `json:"node_type,omitempty"`
	FWVersion    string `json:"fw_ver,omitempty"`
	Parent       string `json:"parent,omitempty"` // netdev of a software device (rxe, siw)
	// Bus is the driver of the device's parent ("thunderbolt" for the NHI).
	Bus    string `json:"parent_driver,omitempty"`
	Uverbs string `json:"uverbs,omitempty"` // uverbsN
	// DevNode is what /dev/infiniband/<Uverbs> is to this process: DevNodeOK,
	// DevNodeMissing (a container started without --device), "no access: <err>"
	// (a device cgroup or mode that refuses it; live only), or "" when unknown
	// (no uverbs node, or a captured tree without dev/).
	DevNode string `json:"dev_node,omitempty"`
	ABI     int    `json:"abi_version"` // -1 when unknown
	Ports   []Port `json:"ports"`
	Renamed bool   `json:"renamed"` // usb4 GUID under a name that is not usb4_*
	// USB4 is set for devices whose node GUID is a usb4_rdma GUID.
	USB4 *USB4Identity `json:"usb4,omitempty"`
	// Domain and Slot come from a kernel-assigned usb4_rdmaN name (-1 when
	// renamed or not usb4).
	Domain int `json:"domain"`
	Slot   int `json:"slot"`
	// Peer is the host a usb4 device reaches, when it can be told (resolvePeers).
	Peer *USB4Peer `json:"peer,omitempty"`
}

// Port is one port of a device.
type Port struct {
	Num       int     `json:"port"`
	State     string  `json:"state"`      // "ACTIVE"
	PhysState string  `json:"phys_state"` // "LinkUp"
	Rate      string  `json:"rate"`       // "40 Gb/sec (4X FDR10)"
	SpeedGbps float64 `json:"speed_gbps"`
	Width     string  `json:"width"` // "4X"
	LinkLayer string  `json:"link_layer"`
	// MTU is the active MTU in bytes when it can be derived from the tree
	// (0 otherwise); MTUSource says how.
	MTU       int    `json:"active_mtu,omitempty"`
	MTUSource string `json:"active_mtu_source,omitempty"`
	GIDs      []GID  `json:"gids"`
	// GIDTableLen counts all entries, empty ones included.
	GIDTableLen int `json:"gid_tbl_len"`
}

// GID is one non-zero GID table entry.
type GID struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Type   string `json:"type,omitempty"`   // "RoCE v2", "IB/RoCE v1"
	Netdev string `json:"netdev,omitempty"` // from gid_attrs/ndevs
}

const zeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

func (t *tree) devices() []Device {
	uverbs := t.uverbsByDevice()
	var devs []Device
	for _, name := range t.list("sys/class/infiniband") {
		devs = append(devs, t.device(name, uverbs))
	}
	return devs
}

type uverbsInfo struct {
	name string
	abi  int
}

// uverbsByDevice maps ib device names to their uverbs char device, from
// /sys/class/infiniband_verbs/uverbsN/{ibdev,abi_version}.
func (t *tree) uverbsByDevice() map[string]uverbsInfo {
	m := map[string]uverbsInfo{}
	for _, u := range t.list("sys/class/infiniband_verbs") {
		if !strings.HasPrefix(u, "uverbs") {
			continue // abi_version and other class attributes
		}
		base := "sys/class/infiniband_verbs/" + u
		ibdev, ok := t.attr(base+"/ibdev", false)
		if !ok || ibdev == "" {
			continue
		}
		info := uverbsInfo{name: u, abi: -1}
		if s, ok := t.attr(base+"/abi_version", false); ok {
			if v, err := strconv.Atoi(s); err == nil {
				info.abi = v
			} else {
				t.problem(base+"/abi_version", fmt.Errorf("not a number: %q", s))
			}
		}
		m[ibdev] = info
	}
	return m
}

func (t *tree) device(name string, uverbs map[string]uverbsInfo) Device {
	base := "sys/class/infiniband/" + name
	d := Device{Name: name, ABI: -1, Domain: -1, Slot: -1}
	if s, ok := t.attr(base+"/node_guid", false); ok {
		if g, err := ParseGUID(s); err == nil {
			d.NodeGUID = g
			d.NodeGUIDText = FormatGUID(g)
		} else {
			t.problem(base+"/node_guid", err)
		}
	}
	d.SysImageGUID, _ = t.attr(base+"/sys_image_guid", true)
	if nt, ok := t.attr(base+"/node_type", true); ok {
		d.NodeType = stripNumPrefix(nt)
	}
	d.FWVersion, _ = t.attr(base+"/fw_ver", true)
	d.Parent, _ = t.attr(base+"/parent", true)
	d.Bus = t.linkBase(base + "/device/driver")
	if u, ok := uverbs[name]; ok {
		d.Uverbs, d.ABI = u.name, u.abi
	}
	if id, ok := DecodeUSB4GUID(d.NodeGUID); ok && d.NodeGUIDText != "" {
		d.USB4 = &id
		d.Renamed = !strings.HasPrefix(name, "usb4_")
		if dom, slot, ok := USB4Slot(name); ok {
			d.Domain, d.Slot = dom, slot
		}
	}
	d.Driver = driverOf(d)
	for _, p := range t.list(base + "/ports") {
		n, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		d.Ports = append(d.Ports, t.port(base+"/ports/"+p, n, d))
	}
	return d
}

// driverOf names the kernel driver behind a device from what sysfs shows:
// sysfs has no "driver" attribute for ib devices, so the GUID, the
// software-device parent file and the parent's driver decide.
func driverOf(d Device) string {
	switch {
	case d.USB4 != nil:
		return "thunderbolt_ibverbs"
	case d.Parent != "" && strings.HasPrefix(d.Name, "rxe"):
		return "rdma_rxe"
	case d.Parent != "" && strings.HasPrefix(d.Name, "siw"):
		return "siw"
	case d.Bus != "":
		return d.Bus
	case d.Parent != "":
		return "software (parent " + d.Parent + ")"
	}
	return ""
}

func (t *tree) port(base string, n int, d Device) Port {
	p := Port{Num: n}
	if s, ok := t.attr(base+"/state", false); ok {
		p.State = stripNumPrefix(s)
	}
	if s, ok := t.attr(base+"/phys_state", true); ok {
		p.PhysState = stripNumPrefix(s)
	}
	if s, ok := t.attr(base+"/rate", true); ok {
		p.Rate = s
		if sp, w, err := ParseRate(s); err == nil {
			p.SpeedGbps, p.Width = sp, w
		} else {
			t.problem(base+"/rate", err)
		}
	}
	p.LinkLayer, _ = t.attr(base+"/link_layer", true)
	for _, g := range t.list(base + "/gids") {
		i, err := strconv.Atoi(g)
		if err != nil {
			continue
		}
		p.GIDTableLen++
		// Reading an empty RoCE entry fails with EINVAL in some kernels;
		// that is an empty entry, not a problem.
		s, ok := t.attr(base+"/gids/"+g, true)
		if !ok || s == "" || s == zeroGID {
			continue
		}
		gid := GID{Index: i, GID: s}
		gid.Type, _ = t.attr(base+"/gid_attrs/types/"+g, true)
		gid.Netdev, _ = t.attr(base+"/gid_attrs/ndevs/"+g, true)
		p.GIDs = append(p.GIDs, gid)
	}
	p.MTU, p.MTUSource = t.activeMTU(d, p)
	return p
}

// activeMTU derives the active MTU. usb4_rdma reports a fixed 4096
// (hellas-ai/thunderbolt-ibverbs:kernel/ibdev.c tbv_query_port); RoCE
// devices use the largest IB MTU that fits the netdev MTU minus the RoCE
// headers (kernel include/rdma/ib_addr.h iboe_get_mtu: GRH 40 + BTH 12 +
// XRC 4 + AtomicETH 28 + ICRC 4 = 88 bytes).
func (t *tree) activeMTU(d Device, p Port) (int, string) {
	if d.USB4 != nil {
		return 4096, "driver"
	}
	if p.LinkLayer != "Ethernet" {
		return 0, ""
	}
	ndev := d.Parent
	for _, g := range p.GIDs {
		if g.Netdev != "" {
			ndev = g.Netdev
			break
		}
	}
	if ndev == "" {
		return 0, ""
	}
	if !t.netdevIsDevices(d, ndev) {
		return 0, ""
	}
	s, ok := t.attr("sys/class/net/"+ndev+"/mtu", true)
	if !ok {
		return 0, ""
	}
	mtu, err := strconv.Atoi(s)
	if err != nil {
		return 0, ""
	}
	return IBMTUForNetdev(mtu), "netdev " + ndev
}

// netdevIsDevices reports whether sys/class/net/NDEV is the netdev the
// device's GIDs name. gid_attrs/ndevs gives a name only, and /sys/class/net
// shows the reader's network namespace: in a container with its own network
// the device's netdev is not there, and a netdev of the same name (eth0 on
// both sides) is another device. Where the tree can tell, it is checked: a
// hardware device lists its netdevs under device/net, and rxe/siw derive
// their EUI-64 node GUID from the netdev's MAC address. Otherwise the name
// is trusted.
func (t *tree) netdevIsDevices(d Device, ndev string) bool {
	if !t.exists("sys/class/net/" + ndev) {
		return false
	}
	base := "sys/class/infiniband/" + d.Name
	if t.exists(base + "/device/net") {
		return t.exists(base + "/device/net/" + ndev)
	}
	if d.Parent == "" || d.NodeGUIDText == "" {
		return true
	}
	g := d.NodeGUID
	if byte(g>>32) != 0xff || byte(g>>24) != 0xfe {
		return true // not derived from a MAC address
	}
	mac := fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x",
		byte(g>>56)^0x02, byte(g>>48), byte(g>>40), byte(g>>16), byte(g>>8), byte(g))
	addr, ok := t.attr("sys/class/net/"+ndev+"/address", true)
	return !ok || strings.EqualFold(addr, mac)
}

// IBMTUForNetdev is the largest IB MTU (256..4096) usable on a RoCE port
// whose netdev has MTU mtu; 0 if none fits.
func IBMTUForNetdev(mtu int) int {
	room := mtu - 88
	for _, m := range []int{4096, 2048, 1024, 512, 256} {
		if room >= m {
			return m
		}
	}
	return 0
}

// stripNumPrefix turns "4: ACTIVE" into "ACTIVE".
func stripNumPrefix(s string) string {
	if _, after, ok := strings.Cut(s, ": "); ok {
		return strings.TrimSpace(after)
	}
	return s
}

// ParseRate parses a port's rate attribute, "40 Gb/sec (4X FDR10)" or
// "2.5 Gb/sec (1X SDR)", into Gb/s and width.
func ParseRate(s string) (gbps float64, width string, err error) {
	num, rest, ok := strings.Cut(strings.TrimSpace(s), " Gb/sec")
	if !ok {
		return 0, "", fmt.Errorf("malformed rate %q", s)
	}
	gbps, err = strconv.ParseFloat(num, 64)
	if err != nil || gbps < 0 {
		return 0, "", fmt.Errorf("malformed rate %q", s)
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")") {
		width, _, _ = strings.Cut(rest[1:len(rest)-1], " ")
	}
	return gbps, width, nil
}

// Values of Device.DevNode.
const (
	DevNodeOK      = "ok"
	DevNodeMissing = "missing"
)

// devNodes fills in DevNode: whether each device's uverbs character device is
// there and, on the live system, whether this process may open it. Only the
// nodes that are passed into a container exist in it, while its sysfs still
// lists every device.
func (t *tree) devNodes(devs []Device, live bool) {
	if !t.exists("dev") {
		return
	}
	for i := range devs {
		d := &devs[i]
		if d.Uverbs == "" {
			continue
		}
		rel := "dev/infiniband/" + d.Uverbs
		if !t.exists(rel) {
			d.DevNode = DevNodeMissing
			continue
		}
		d.DevNode = DevNodeOK
		if !live {
			continue
		}
		// Opening a uverbs node only creates a file context in the kernel;
		// closing it frees that again.
		f, err := os.OpenFile(t.abs(rel), os.O_RDWR, 0)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			d.DevNode = "no access: " + err.Error()
			continue
		}
		f.Close()
	}
}
