package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"usb4verbs/internal/sysinfo"
)

// peerSettings is what NCCL/RCCL, UCX and gloo need to reach one peer host over its
// usb4 rails: the native devices whose GUID names that peer, the GID index of their
// RoCE v2 IPv4 entry, and the netdev that GID belongs to.
type peerSettings struct {
	Peer uint32 `json:"peer"`
	// Host is the peer host as its devices reach it (sysinfo.USB4Peer), when
	// every device of the group tells the same one.
	Host     *sysinfo.USB4Peer `json:"host,omitempty"`
	Devices  []string          `json:"devices"`
	GIDIndex int               `json:"gid_index"` // -1: no usable GID
	GID      string            `json:"gid,omitempty"`
	Netdev   string            `json:"netdev,omitempty"`
	Env      []envVar          `json:"env"`
	// Notes say what could not be settled and what to do instead.
	Notes []string `json:"notes,omitempty"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type ncclReport struct {
	Root  string         `json:"root"`
	Peers []peerSettings `json:"peers"`
}

// ipv4MappedPrefix starts a GID that carries an IPv4 address (RoCE v2 over IPv4,
// what NCCL's own GID choice prefers: NVIDIA/nccl src/transport/net_ib ncclIbGetGidIndex).
const ipv4MappedPrefix = "0000:0000:0000:0000:0000:ffff:"

// roceV2IPv4 returns the port's RoCE v2 IPv4 GID entry, or false.
func roceV2IPv4(p sysinfo.Port) (sysinfo.GID, bool) {
	for _, g := range p.GIDs {
		if g.Type == "RoCE v2" && strings.HasPrefix(g.GID, ipv4MappedPrefix) {
			return g, true
		}
	}
	return sysinfo.GID{}, false
}

// ncclPeers groups the native usb4 devices by the peer host their GUID names, in peer
// order; the Apple slot (max_qp 1, no RDMA READ) never goes into NCCL's list.
func ncclPeers(s *sysinfo.System) []peerSettings {
	byPeer := map[uint32]*peerSettings{}
	var order []uint32
	for _, d := range usb4Devices(s) {
		if d.USB4.AppleSlot {
			continue
		}
		ps := byPeer[d.USB4.Peer]
		if ps == nil {
			ps = &peerSettings{Peer: d.USB4.Peer, GIDIndex: -1, Host: d.Peer}
			byPeer[d.USB4.Peer] = ps
			order = append(order, d.USB4.Peer)
		} else if ps.Host != nil && (d.Peer == nil || d.Peer.UUID != ps.Host.UUID) {
			ps.Host = nil // the devices disagree: name no host
		}
		ps.Devices = append(ps.Devices, d.Name)
		for _, p := range d.Ports {
			g, found := roceV2IPv4(p)
			switch {
			case !found:
				ps.Notes = append(ps.Notes, fmt.Sprintf("%s port %d has no RoCE v2 IPv4 GID (set the module's roce_netdev to a netdev with an IPv4 address; ibvinfo doctor)", d.Name, p.Num))
			case ps.GIDIndex < 0:
				ps.GIDIndex, ps.GID, ps.Netdev = g.Index, g.GID, g.Netdev
			case ps.GIDIndex != g.Index:
				ps.Notes = append(ps.Notes, fmt.Sprintf("%s has its RoCE v2 IPv4 GID at index %d, not %d: NCCL_IB_GID_INDEX is one value for every device", d.Name, g.Index, ps.GIDIndex))
			}
		}
	}
	slices.Sort(order)
	var out []peerSettings
	for _, p := range order {
		ps := byPeer[p]
		slices.Sort(ps.Devices)
		ps.Env = ncclEnv(s, ps)
		out = append(out, *ps)
	}
	return out
}

// ncclEnv is the environment for one peer. NCCL_IB_HCA takes names as prefixes unless
// the list starts with '=' (NVIDIA/nccl src/misc/utils.cc parseStringList/matchIfList):
// usb4_rdma1 would also pick usb4_rdma10 to usb4_rdma19, so the list is exact.
func ncclEnv(s *sysinfo.System, ps *peerSettings) []envVar {
	// device:port, as NCCL_IB_HCA and UCX_NET_DEVICES both name a rail.
	var rails []string
	for _, d := range ps.Devices {
		rails = append(rails, d+":1")
	}
	env := []envVar{{"NCCL_IB_HCA", "=" + strings.Join(rails, ",")}}
	if ps.GIDIndex >= 0 {
		env = append(env, envVar{"NCCL_IB_GID_INDEX", strconv.Itoa(ps.GIDIndex)})
	}
	// UCX: rc_verbs (over the provider's SRQ, docs/srq.md), wired up over TCP:
	// the module has no UD QPs, so ud_verbs, UCX's default auxiliary transport,
	// cannot carry rc_verbs' connection setup; tcp can, as an auxiliary only
	// (tcp:aux), from UCX 1.16 on (openucx/ucx src/ucp/wireup/select.c
	// ucp_wireup_select_aux_transport: an aux transport without async callbacks
	// is taken when none has them). tcp needs its netdev in UCX_NET_DEVICES.
	ucxDevs := strings.Join(rails, ",")
	real := ps.Netdev != "" && busBacked(s, ps.Netdev)
	if real {
		ucxDevs += "," + ps.Netdev
	}
	// UCX reserves 5 send SGEs per rc_verbs QP (TX_MIN_SGE); every module tree
	// grants 4 (TBV_IBDEV_MAX_SGE, hellas-main:kernel/ibdev.c:46) and refuses
	// the QP otherwise.
	env = append(env, envVar{"UCX_NET_DEVICES", ucxDevs}, envVar{"UCX_TLS", "rc_verbs,sm,self,tcp:aux"},
		envVar{"UCX_RC_VERBS_TX_MIN_SGE", "4"})
	// Open MPI's pml ucx takes only devices matching pml_ucx_devices, "mlx*" by
	// default (Open MPI 5.0.7: ompi_info --param pml ucx --level 9), so it declines
	// every usb4 device and MPI falls back to TCP; docs/srq.md "UCX and Open MPI".
	env = append(env, envVar{"OMPI_MCA_pml_ucx_devices", "any"})
	if real {
		env = append(env, envVar{"NCCL_SOCKET_IFNAME", "=" + ps.Netdev}, envVar{"GLOO_SOCKET_IFNAME", ps.Netdev})
	} else if ps.Netdev != "" {
		ps.Notes = append(ps.Notes, "the GIDs' netdev "+ps.Netdev+" is a virtual one (a dummy for roce_netdev carries no traffic to the other host): set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the interface that reaches the other host's IP address (NCCL and gloo bootstrap over TCP), and add it to UCX_NET_DEVICES (UCX wires rc_verbs up over TCP: the module has no UD)")
	}
	return env
}

// busBacked: the netdev sits on a bus device (a NIC, thunderbolt-net's XDomain
// service), unlike dummy, veth and bridge netdevs, which have no device link.
func busBacked(s *sysinfo.System, netdev string) bool {
	_, err := os.Stat(filepath.Join(s.Root, "sys/class/net", netdev, "device"))
	return err == nil
}

// runNCCL prints the settings for the peer named in args (a peer number, a device
// that reaches it, or the peer host's name or UUID), or for every peer.
func runNCCL(w io.Writer, opts options, args []string) error {
	if len(args) > 1 {
		return usageError{fmt.Sprintf("nccl takes one peer (a number, a device that reaches it, or the host's name or UUID), got %q", args)}
	}
	s := collect(opts)
	peers := ncclPeers(s)
	if len(args) == 1 {
		want, err := peerOf(s, args[0])
		if err != nil {
			return err
		}
		peers = slices.DeleteFunc(peers, func(p peerSettings) bool { return !slices.Contains(want, p.Peer) })
	}
	if len(peers) == 0 {
		if len(args) == 1 {
			return fmt.Errorf("no native usb4 device reaches peer %s (ibvinfo lists the devices per peer)", args[0])
		}
		return fmt.Errorf("no native usb4_rdma device: nothing to set (ibvinfo doctor says why)")
	}
	if opts.json {
		if err := writeJSON(w, ncclReport{Root: s.Root, Peers: peers}); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
	p := &printer{w: w}
	for i, ps := range peers {
		if i > 0 {
			p.printf("\n")
		}
		host := ""
		if ps.Host != nil {
			host = fmt.Sprintf(" (host %s %s, XDomain %s)", orDash(ps.Host.Name), orDash(ps.Host.UUID), ps.Host.XDomain)
		}
		p.printf("# peer %d%s: %s, GID index %s (%s)\n", ps.Peer, host, strings.Join(ps.Devices, ", "),
			gidIndexText(ps.GIDIndex), orDash(ps.GID))
		for _, e := range ps.Env {
			p.printf("export %s=%s\n", e.Name, e.Value)
		}
		for _, n := range ps.Notes {
			p.printf("# %s\n", n)
		}
	}
	if p.err != nil {
		return fmt.Errorf("write output: %w", p.err)
	}
	return nil
}

func gidIndexText(i int) string {
	if i < 0 {
		return "none"
	}
	return strconv.Itoa(i)
}

// peerOf resolves a peer argument: a peer number, the name of a usb4 device, or the
// name (XDomain device_name) or UUID of the host the devices reach. A host reached
// from several domains (in one kernel, the bed's hosts) gives several peers.
func peerOf(s *sysinfo.System, arg string) ([]uint32, error) {
	if n, err := strconv.ParseUint(arg, 10, 32); err == nil {
		return []uint32{uint32(n)}, nil
	}
	var out []uint32
	for _, d := range usb4Devices(s) {
		if d.Name == arg {
			return []uint32{d.USB4.Peer}, nil
		}
		if d.Peer != nil && (strings.EqualFold(d.Peer.UUID, arg) || d.Peer.Name == arg) && !slices.Contains(out, d.USB4.Peer) {
			out = append(out, d.USB4.Peer)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	return nil, usageError{fmt.Sprintf("nccl: %q is neither a peer number, a usb4 device, nor a host a usb4 device reaches", arg)}
}

// checkNCCLEnv: the device and GID selectors this process has set (NCCL_IB_HCA,
// NCCL_IB_GID_INDEX, UCX_NET_DEVICES) against the devices and GIDs that exist.
func checkNCCLEnv(e doctorEnv) check {
	const id = "nccl-env-devices"
	s := e.sys
	hca, hasHCA := s.Env["NCCL_IB_HCA"]
	gidIdx, hasGID := s.Env["NCCL_IB_GID_INDEX"]
	ucx := s.Env["UCX_NET_DEVICES"]
	if !hasHCA && !hasGID && ucx == "" {
		return skip(id, "NCCL_IB_HCA, NCCL_IB_GID_INDEX and UCX_NET_DEVICES are unset")
	}
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	fix := "use the lines of `ibvinfo nccl` for the peer you connect to"
	var chosen []sysinfo.Device
	if hasHCA && strings.TrimSpace(hca) != "" {
		for _, d := range s.Devices {
			if ncclSelects(hca, d.Name) {
				chosen = append(chosen, d)
			}
		}
		if len(chosen) == 0 {
			return fail(id, "NCCL_IB_HCA="+hca+" matches no RDMA device here ("+deviceNames(s.Devices)+"): NCCL finds no IB device and falls back to sockets or fails", fix)
		}
		var other []string
		for _, d := range chosen {
			if d.USB4 == nil {
				other = append(other, d.Name)
			}
		}
		if len(other) > 0 {
			return warn(id, "NCCL_IB_HCA="+hca+" also selects "+strings.Join(other, ", ")+", which are not usb4 devices: NCCL may take them first", fix)
		}
		if !strings.HasPrefix(strings.TrimPrefix(hca, "^"), "=") && len(chosen) > len(strings.Split(hca, ",")) {
			return warn(id, "NCCL_IB_HCA="+hca+" selects "+deviceNames(chosen)+": NCCL matches names as prefixes", "start the list with '=' for exact names; "+fix)
		}
	} else {
		chosen = usb4Devices(s)
	}
	if hasGID {
		idx, err := strconv.Atoi(strings.TrimSpace(gidIdx))
		if err != nil || idx < 0 {
			return fail(id, "NCCL_IB_GID_INDEX="+gidIdx+" is not a GID index", fix)
		}
		for _, d := range chosen {
			for _, p := range d.Ports {
				g, found := gidAt(p, idx)
				switch {
				case !found:
					return fail(id, fmt.Sprintf("NCCL_IB_GID_INDEX=%d: %s port %d has no GID at that index; NCCL's connection setup fails", idx, d.Name, p.Num), fix)
				case g.Type != "RoCE v2" || !strings.HasPrefix(g.GID, ipv4MappedPrefix):
					if want, ok := roceV2IPv4(p); ok {
						return warn(id, fmt.Sprintf("NCCL_IB_GID_INDEX=%d on %s is %s %s, not the RoCE v2 IPv4 GID (index %d)", idx, d.Name, orDash(g.Type), g.GID, want.Index),
							fmt.Sprintf("export NCCL_IB_GID_INDEX=%d", want.Index))
					}
				}
			}
		}
	}
	if ucx != "" {
		for _, f := range strings.Split(ucx, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(f), ":")
			if name == "" || name == "all" || isNetdevName(s, name) {
				continue
			}
			if !slices.ContainsFunc(s.Devices, func(d sysinfo.Device) bool { return d.Name == name }) {
				return fail(id, "UCX_NET_DEVICES names "+name+", which is no RDMA device or netdev here", fix)
			}
		}
	}
	return ok(id, "the NCCL/UCX device and GID settings of this environment point at existing usb4 devices and GIDs")
}

func gidAt(p sysinfo.Port, idx int) (sysinfo.GID, bool) {
	for _, g := range p.GIDs {
		if g.Index == idx {
			return g, true
		}
	}
	return sysinfo.GID{}, false
}

// isNetdevName: UCX_NET_DEVICES also lists TCP and shared-memory devices by netdev name.
func isNetdevName(s *sysinfo.System, name string) bool {
	_, err := os.Stat(filepath.Join(s.Root, "sys/class/net", name))
	return err == nil
}
