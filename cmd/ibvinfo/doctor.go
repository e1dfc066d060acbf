package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/rdmanl"
)

// Verdicts, from best to worst; "skip" means the check does not apply.
const (
	verdictOK    = "ok"
	verdictSkip  = "skip"
	verdictWarn  = "warn"
	verdictError = "error"
)

// check is one doctor check and its outcome. A finding is a check whose
// verdict is warn or error.
type check struct {
	ID      string `json:"id"`
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	// Fix is one concrete line to act on (empty for ok and skip).
	Fix string `json:"fix,omitempty"`
}

type doctorReport struct {
	Root     string  `json:"root"`
	Checks   []check `json:"checks"`
	Errors   int     `json:"errors"`
	Warnings int     `json:"warnings"`
}

// doctorEnv is what the checks look at.
type doctorEnv struct {
	sys *sysinfo.System
	// use are the devices the user is about to use (doctor arguments).
	use []string
	// watch is set with --watch; second is the later debugfs summary.
	watch    bool
	interval time.Duration
	second   []sysinfo.KV
	secondOK bool
	// netns is the RDMA subsystem's netns mode (live only, from netlink).
	netns netnsMode
	// gpu is NCCL's dma-buf probe per usb4 device (live only; gpu.go).
	gpu map[string]gpuMemory
}

// netnsMode is `rdma system show netns` as the doctor saw it.
type netnsMode struct {
	known     bool
	exclusive bool
	err       string // why it is unknown on the live system
}

func runDoctor(w io.Writer, opts options, watch durationFlag, args []string) (int, error) {
	env := doctorEnv{sys: collect(opts), use: args, watch: watch.set, interval: watch.d}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			return 0, usageError{fmt.Sprintf("doctor: unexpected %q", a)}
		}
	}
	if opts.live() {
		env.netns = liveNetnsMode()
		var names []string
		for _, d := range usb4Devices(env.sys) {
			names = append(names, d.Name)
		}
		env.gpu = probeGPULive(env.sys, names)
	}
	if env.watch {
		env.second, env.secondOK = secondSummary(opts, watch.d, env.sys.Debugfs.Present)
	}
	rep := doctorReport{Root: env.sys.Root, Checks: runChecks(env)}
	for _, c := range rep.Checks {
		switch c.Verdict {
		case verdictError:
			rep.Errors++
		case verdictWarn:
			rep.Warnings++
		}
	}
	if opts.json {
		if err := writeJSON(w, rep); err != nil {
			return 0, fmt.Errorf("write output: %w", err)
		}
	} else {
		p := &printer{w: w, color: opts.color}
		printDoctor(p, rep)
		if p.err != nil {
			return 0, fmt.Errorf("write output: %w", p.err)
		}
	}
	if rep.Errors > 0 {
		return exitFindings, nil
	}
	return exitOK, nil
}

// secondSummary takes the later counter snapshot for --watch: on the live
// system it waits and re-reads; in a captured tree it reads "summary.2"
// (the capture's later snapshot), or "summary" again when there is none.
func secondSummary(opts options, d time.Duration, present bool) ([]sysinfo.KV, bool) {
	if !present {
		return nil, false
	}
	name := "summary"
	if opts.live() {
		time.Sleep(d)
	} else if _, probs := sysinfo.ReadSummary(opts.root, "summary.2"); probs == nil {
		name = "summary.2"
	}
	kv, probs := sysinfo.ReadSummary(opts.root, name)
	return kv, probs == nil
}

func runChecks(e doctorEnv) []check {
	return []check{
		checkUSB4Devices(e),
		checkLinks(e),
		checkMultiCable(e),
		checkTBNetBound(e),
		checkTBNetLoaded(e),
		checkGIDs(e),
		checkUdev(e),
		checkDevNodes(e),
		checkNetnsExclusive(e),
		checkMemlock(e),
		checkIOMMU(e),
		checkProvider(e),
		checkOtherProvider(e),
		checkAppleSlot(e),
		checkGPUMemory(e),
		checkCounters(e),
		checkNCCLEnv(e),
		checkNCCLWriteImmByteLen(e),
		checkNCCLFlushLoopback(e),
		checkNCCLAdaptiveRouting(e),
		checkRetransmits(e),
		checkUnreadable(e),
	}
}

func ok(id, msg string) check   { return check{ID: id, Verdict: verdictOK, Message: msg} }
func skip(id, msg string) check { return check{ID: id, Verdict: verdictSkip, Message: msg} }
func warn(id, msg, fix string) check {
	return check{ID: id, Verdict: verdictWarn, Message: msg, Fix: fix}
}
func fail(id, msg, fix string) check {
	return check{ID: id, Verdict: verdictError, Message: msg, Fix: fix}
}

// usb4Setup reports whether this machine has usb4 RDMA at all; the
// usb4-only checks skip otherwise.
func usb4Setup(s *sysinfo.System) bool {
	return s.Module("thunderbolt_ibverbs").Loaded || len(usb4Devices(s)) > 0
}

const noUSB4 = "no thunderbolt_ibverbs module and no usb4 devices"

func checkUSB4Devices(e doctorEnv) check {
	const id = "usb4-devices"
	s := e.sys
	devs := usb4Devices(s)
	switch {
	case len(devs) > 0:
		return ok(id, fmt.Sprintf("%d usb4 device(s) registered: %s", len(devs), deviceNames(devs)))
	case !s.Module("thunderbolt_ibverbs").Loaded:
		return skip(id, noUSB4)
	}
	if len(s.Thunderbolt) == 0 {
		// No XDomain on the bus: the module has nobody to negotiate with
		// (a pulled cable removes the XDomain and its services at once).
		return fail(id, "thunderbolt_ibverbs is loaded but registered no RDMA device: no peer host on the Thunderbolt bus (no XDomain in /sys/bus/thunderbolt/devices)",
			"plug the cable into a USB4/Thunderbolt port on both hosts and check the other host is up with thunderbolt_ibverbs loaded; the devices return once the module has negotiated with it")
	}
	return fail(id, "thunderbolt_ibverbs is loaded but registered no RDMA device",
		"load it with register_verbs=1 (and allocate_rings=1 start_rings=1 negotiate_native=1 enable_tunnels=1), check dmesg and that the peer runs it too")
}

// Full USB4 training: 20 Gb/s per lane (Gen 3) on 2 lanes each way
// (user-workflows.md "Link trained down").
const (
	fullLaneGbps = 20.0
	fullLanes    = 2
)

func checkLinks(e doctorEnv) check {
	const id = "link-trained-down"
	s := e.sys
	if len(s.Thunderbolt) == 0 {
		if usb4Setup(s) {
			return warn(id, "no Thunderbolt link found in /sys/bus/thunderbolt/devices", "check the cable is plugged into a USB4/Thunderbolt port on both hosts; then re-plug it")
		}
		return skip(id, "no Thunderbolt links")
	}
	var bad []string
	for _, t := range s.Thunderbolt {
		if (t.RxSpeed >= 0 && t.RxSpeed < fullLaneGbps) || (t.TxSpeed >= 0 && t.TxSpeed < fullLaneGbps) ||
			(t.RxLanes >= 0 && t.RxLanes < fullLanes) || (t.TxLanes >= 0 && t.TxLanes < fullLanes) {
			bad = append(bad, fmt.Sprintf("%s rx %s tx %s", t.Name, linkText(t.RxSpeed, t.RxLanes), linkText(t.TxSpeed, t.TxLanes)))
		}
	}
	if len(bad) > 0 {
		return fail(id, "link trained below 2 x 20 Gb/s: "+strings.Join(bad, "; "),
			"re-plug the cable (both ends); if it stays slow use a certified 40 Gb/s USB4/Thunderbolt 4 cable")
	}
	return ok(id, fmt.Sprintf("%d link(s) at full speed and width", len(s.Thunderbolt)))
}

const tbnetDriver = "thunderbolt-net"
const tbnetFix = "blacklist thunderbolt_net: echo 'blacklist thunderbolt_net' > /etc/modprobe.d/usb4verbs.conf, then rmmod thunderbolt_net and reload thunderbolt_ibverbs (IP over Thunderbolt goes away)"

func checkTBNetBound(e doctorEnv) check {
	const id = "thunderbolt-net-bound"
	if b := e.sys.Bound(tbnetDriver); len(b) > 0 {
		return fail(id, "thunderbolt_net is bound to "+strings.Join(b, ", ")+" and holds DMA rings the RDMA module needs", tbnetFix)
	}
	if !e.sys.Module("thunderbolt_net").Loaded {
		return ok(id, "thunderbolt_net is not loaded")
	}
	return ok(id, "thunderbolt_net is bound to no Thunderbolt service")
}

func checkTBNetLoaded(e doctorEnv) check {
	const id = "thunderbolt-net-loaded"
	s := e.sys
	if !s.Module("thunderbolt_net").Loaded {
		return ok(id, "thunderbolt_net is not loaded")
	}
	if len(s.Bound(tbnetDriver)) > 0 {
		return skip(id, "reported by thunderbolt-net-bound")
	}
	if !usb4Setup(s) {
		return skip(id, "thunderbolt_net is loaded; "+noUSB4)
	}
	return warn(id, "thunderbolt_net is loaded; it binds and takes a ring as soon as a peer offers its network service", tbnetFix)
}

func checkGIDs(e doctorEnv) check {
	const id = "roce-netdev-unset"
	s := e.sys
	var empty, emptyUSB4 []string
	n := 0
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			if p.LinkLayer != "Ethernet" {
				continue
			}
			n++
			if len(p.GIDs) == 0 {
				name := fmt.Sprintf("%s/%d", d.Name, p.Num)
				empty = append(empty, name)
				if d.USB4 != nil {
					emptyUSB4 = append(emptyUSB4, name)
				}
			}
		}
	}
	switch {
	case n == 0:
		return skip(id, "no RoCE (Ethernet link layer) ports")
	case len(emptyUSB4) > 0:
		cur := s.Module("thunderbolt_ibverbs").Parameters["roce_netdev"]
		msg := "empty GID table on " + strings.Join(emptyUSB4, ", ") + " (roce_netdev is unset)"
		if cur != "" && cur != "(null)" {
			msg = "empty GID table on " + strings.Join(emptyUSB4, ", ") + " although roce_netdev=" + cur + " (that netdev is missing or has no address)"
		}
		return fail(id, msg+"; RC connection setup and NCCL GID selection fail",
			"set roce_netdev=<ifname> with an IP address: ip link add tbv0 type dummy; ip addr add 10.77.0.1/24 dev tbv0; ip link set tbv0 up; modprobe thunderbolt_ibverbs ... roce_netdev=tbv0")
	case len(empty) > 0:
		return fail(id, "empty GID table on "+strings.Join(empty, ", ")+"; RoCE connections need a GID",
			"give the device's netdev an IP address and bring it up (ip addr add ... dev <netdev>; ip link set <netdev> up)")
	}
	return ok(id, fmt.Sprintf("%d RoCE port(s) have GIDs", n))
}

func checkUdev(e doctorEnv) check {
	const id = "udev-rename-active"
	s := e.sys
	var renamed []string
	for _, d := range usb4Devices(s) {
		if d.Renamed {
			renamed = append(renamed, d.Name)
		}
	}
	u := s.Udev
	const fix = "cp /usr/lib/udev/rules.d/60-rdma-persistent-naming.rules /etc/udev/rules.d/ and add KERNEL==\"usb4_rdma*\", GOTO=\"rdma_naming_end\" before its rdma_rename line (our provider matches by GUID either way; name-matching tools do not)"
	switch {
	case len(renamed) > 0:
		return warn(id, "usb4 devices renamed by udev: "+strings.Join(renamed, ", ")+"; tools that pick devices by the usb4_rdma name miss them", fix)
	case !usb4Setup(s):
		return skip(id, noUSB4)
	case u.Active && !u.ExcludesUSB4:
		return warn(id, u.File+" renames RDMA devices ("+u.Policy+"); usb4_rdma devices get rocep* names when they next register", fix)
	case u.Active:
		return ok(id, u.File+" excludes usb4_rdma devices")
	}
	return ok(id, "no active rdma_rename rule")
}

// checkDevNodes: sysfs lists every RDMA device of the host, also in a
// container, but only the /dev/infiniband nodes passed in with --device
// exist there (and a device cgroup may refuse the ones that do).
func checkDevNodes(e doctorEnv) check {
	const id = "uverbs-device-missing"
	var missing, denied, fixes []string
	known := false
	for _, d := range e.sys.Devices {
		switch d.DevNode {
		case "":
			continue
		case sysinfo.DevNodeOK:
		case sysinfo.DevNodeMissing:
			missing = append(missing, d.Name+" (/dev/infiniband/"+d.Uverbs+")")
			fixes = append(fixes, "--device=/dev/infiniband/"+d.Uverbs)
		default:
			denied = append(denied, d.Name+" (/dev/infiniband/"+d.Uverbs+": "+strings.TrimPrefix(d.DevNode, "no access: ")+")")
			fixes = append(fixes, "--device=/dev/infiniband/"+d.Uverbs)
		}
		known = true
	}
	if !known {
		return skip(id, "no uverbs device nodes to check (no RDMA device, or a captured tree without dev/)")
	}
	if len(missing)+len(denied) == len(e.sys.Devices) || len(e.use) > 0 && !anyUsable(e) {
		msg := ""
		if len(missing) > 0 {
			msg = "no device node for " + strings.Join(missing, ", ") + ": libibverbs lists none of these (a container started without --device)"
		}
		if len(denied) > 0 {
			msg += cond(msg != "", "; ", "") + "not allowed to open " + strings.Join(denied, ", ")
		}
		return fail(id, msg, "pass the devices into the container: podman/docker run "+strings.Join(fixes, " ")+
			" --device=/dev/infiniband/rdma_cm (or --device=/dev/infiniband for all of them)")
	}
	if len(missing)+len(denied) > 0 {
		return ok(id, fmt.Sprintf("%d of %d device node(s) present; not passed in: %s", len(e.sys.Devices)-len(missing)-len(denied),
			len(e.sys.Devices), strings.Join(append(missing, denied...), ", ")))
	}
	return ok(id, "every device has its /dev/infiniband node")
}

// liveNetnsMode asks the kernel over RDMA netlink, which answers in every
// network namespace.
func liveNetnsMode() netnsMode {
	excl, err := rdmanl.NetnsMode()
	if err != nil {
		return netnsMode{err: err.Error()}
	}
	return netnsMode{known: true, exclusive: excl}
}

// checkNetnsExclusive: in exclusive mode a network namespace sees only the
// RDMA devices registered in or moved into it, so a container with its own
// network (the engines' default) sees none of the host's.
func checkNetnsExclusive(e doctorEnv) check {
	const id = "rdma-netns-exclusive"
	switch {
	case !e.netns.known && e.netns.err != "":
		return skip(id, "netns mode unknown: "+e.netns.err)
	case !e.netns.known:
		return skip(id, "netns mode is read on the live system only")
	case !e.netns.exclusive:
		return ok(id, "rdma netns mode shared: every network namespace sees the RDMA devices")
	case len(e.sys.Devices) == 0:
		return fail(id, "rdma netns mode exclusive, and no RDMA device is in this network namespace",
			"run the container with --network=host, or on the host: rdma system set netns shared (allowed while no other network namespace exists), or move a device in: rdma dev set <dev> netns <name>")
	}
	return ok(id, fmt.Sprintf("rdma netns mode exclusive; %d device(s) in this network namespace", len(e.sys.Devices)))
}

// anyUsable: one of the devices named on the command line has its node.
func anyUsable(e doctorEnv) bool {
	for _, d := range e.sys.Devices {
		if slices.Contains(e.use, d.Name) && (d.DevNode == sysinfo.DevNodeOK || d.DevNode == "") {
			return true
		}
	}
	return false
}

func cond(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// minMemlock: below this pinned-memory limit NCCL buffers and perftest's
// default sizes already fail to register.
const minMemlock = 1 << 30

func checkMemlock(e doctorEnv) check {
	const id = "memlock-low"
	m := e.sys.Memlock
	switch {
	case !m.Known:
		return warn(id, "memlock limit unknown (could not read /proc/self/limits)", "run ulimit -l and make sure it says unlimited")
	case m.SoftUnlimited:
		return ok(id, "memlock unlimited")
	case m.IPCLock:
		return ok(id, fmt.Sprintf("memlock %s, but CAP_IPC_LOCK lifts the limit", sizeText(m.Soft)))
	case m.Soft < minMemlock:
		return fail(id, fmt.Sprintf("memlock limit %s: memory registration of larger buffers fails", sizeText(m.Soft)),
			"ulimit -l unlimited (systemd: LimitMEMLOCK=infinity; /etc/security/limits.conf: * - memlock unlimited; containers: --ulimit memlock=-1 --cap-add=IPC_LOCK)")
	}
	return ok(id, "memlock "+sizeText(m.Soft))
}

func sizeText(b uint64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return strconv.FormatUint(b>>30, 10) + " GiB"
	case b >= 1<<20 && b%(1<<20) == 0:
		return strconv.FormatUint(b>>20, 10) + " MiB"
	case b >= 1<<10 && b%(1<<10) == 0:
		return strconv.FormatUint(b>>10, 10) + " KiB"
	}
	return strconv.FormatUint(b, 10) + " bytes"
}

func checkIOMMU(e doctorEnv) check {
	const id = "iommu-on"
	io := e.sys.IOMMU
	switch io.Mode {
	case "":
		return warn(id, "IOMMU mode unknown (could not read /proc/cmdline)", "check /sys/kernel/iommu_groups/*/type")
	case "translated":
		if !usb4Setup(e.sys) {
			return ok(id, "IOMMU translates DMA; "+noUSB4)
		}
		return warn(id, "IOMMU translates DMA for devices: every ring transfer is mapped; the published USB4 RDMA numbers were measured with the IOMMU off or in passthrough",
			"add iommu=pt to the kernel command line (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot); this weakens Thunderbolt DMA protection")
	}
	return ok(id, "IOMMU "+io.Mode)
}

// ourDriver is our provider's libibverbs name.
const ourDriver = "usb4_rdma"

func isUSB4Provider(e sysinfo.DriverEntry) bool {
	return strings.Contains(strings.ToLower(e.Name), "usb4") || strings.Contains(strings.ToLower(e.Name), "tbv")
}

// installCommands are the installs of each package format (packaging/README.md).
// The packages carry no checkout, so there is no make target to offer.
const installCommands = "apt install ./usb4verbs_<version>-1_amd64.deb, dnf install ./usb4verbs-<version>-1.x86_64.rpm, " +
	"pacman -U usb4verbs-<version>-1-x86_64.pkg.tar.zst, or from the tarball sudo ./install.sh"

func checkProvider(e doctorEnv) check {
	const id = "provider-loadable"
	v := e.sys.Verbs
	const install = "install the usb4verbs package (it ships libusb4_rdma-rdmav{34,57,59,64,65}.so and usb4_rdma.driver): " + installCommands
	if v.Path == "" {
		return fail(id, "libibverbs.so.1 is not installed", "apt install libibverbs1 ibverbs-utils (dnf install libibverbs-utils), then "+install)
	}
	if v.PABI == 0 {
		return fail(id, "could not read the private ABI of "+orDash(v.RealPath), "reinstall libibverbs1")
	}
	lib := fmt.Sprintf("rdma-core %s, PABI %d", orDash(v.Version), v.PABI)
	if !slices.Contains(sysinfo.SupportedPABIs, v.PABI) {
		return fail(id, fmt.Sprintf("libibverbs (%s) has a private ABI this provider does not support (%s)", lib, joinInts(sysinfo.SupportedPABIs)),
			"use a distribution with rdma-core 34 to 65, or update usb4verbs")
	}
	var wrong []string
	for _, d := range v.Drivers {
		if d.Ours && d.Installed && d.GoPart != "" && !d.GoPartInstalled {
			return fail(id, fmt.Sprintf("%s is installed but its Go part %s is missing: every open of a usb4 device fails (ENOENT)", d.Library, d.GoPart),
				"reinstall the usb4verbs package (it installs both files): "+installCommands)
		}
		if d.Ours && d.Installed {
			return ok(id, fmt.Sprintf("%s is installed where libibverbs (%s) looks", d.Library, lib))
		}
		if isUSB4Provider(d) && len(d.OtherPABIs) > 0 && !d.Installed {
			wrong = append(wrong, fmt.Sprintf("%s has only -rdmav%s", d.Name, joinInts(d.OtherPABIs)))
		}
	}
	if len(wrong) > 0 {
		return fail(id, fmt.Sprintf("libibverbs (%s) loads lib%s-rdmav%d.so but %s; it is silently ignored", lib, ourDriver, v.PABI, strings.Join(wrong, "; ")),
			fmt.Sprintf("install the usb4verbs package, which provides lib%s-rdmav%d.so among its per-PABI names (%s); IBV_SHOW_WARNINGS=1 ibv_devices lists the devices libibverbs skipped", ourDriver, v.PABI, installCommands))
	}
	return fail(id, fmt.Sprintf("our provider is not installed for libibverbs (%s): no .driver entry in /etc/libibverbs.d leads to it", lib), install)
}

func checkOtherProvider(e doctorEnv) check {
	const id = "device-claimed-by-another-provider"
	v := e.sys.Verbs
	var others []string
	for _, d := range v.Drivers {
		if d.Installed && !d.Ours && isUSB4Provider(d) {
			others = append(others, fmt.Sprintf("%s (%s, from %s)", d.Library, d.Name, d.File))
		}
	}
	for _, k := range []string{"RDMAV_DRIVERS", "IBV_DRIVERS"} {
		if val, ok := e.sys.Env[k]; ok && val != "" && !strings.Contains(val, ourDriver) {
			others = append(others, k+"="+val+" loads other providers first")
		}
	}
	if len(others) > 0 {
		return fail(id, "another provider can claim the usb4 devices first: "+strings.Join(others, "; "),
			"remove the old C provider (rm its .driver file and lib*-rdmav*.so, or apt remove the package that owns them) so only usb4verbs' usb4_rdma remains")
	}
	if v.Path == "" {
		return skip(id, "libibverbs is not installed")
	}
	return ok(id, "no other provider names a usb4 driver")
}

func checkAppleSlot(e doctorEnv) check {
	const id = "apple-slot-device"
	s := e.sys
	var apple []string
	for _, d := range usb4Devices(s) {
		if d.USB4.AppleSlot {
			apple = append(apple, d.Name)
		}
	}
	if len(apple) == 0 {
		if !usb4Setup(s) {
			return skip(id, noUSB4)
		}
		return ok(id, "no Apple-slot device")
	}
	var natives []string
	for _, d := range usb4Devices(s) {
		if !d.USB4.AppleSlot {
			natives = append(natives, d.Name)
		}
	}
	var chosen []string
	for _, a := range apple {
		if why := selectedBy(a, e.use, s.Env); why != "" {
			chosen = append(chosen, a+" ("+why+")")
		}
	}
	if len(chosen) > 0 {
		return fail(id, "about to use the Apple-slot device "+strings.Join(chosen, ", ")+": max_qp 1, UC only, no RDMA READ; ibv_rc_pingpong, perftest and NCCL fail on it",
			"pick a native rail instead ("+orDash(strings.Join(natives, ", "))+") and an explicit GID index, e.g. NCCL_IB_HCA="+orDash(strings.Join(natives, ",")))
	}
	return ok(id, "Apple-slot device(s) "+strings.Join(apple, ", ")+" present but not selected; use native rails")
}

// selectedBy says why device dev is about to be used: named on the command
// line, or picked by NCCL_IB_HCA, UCX_NET_DEVICES or GGML_RDMA_DEV. "" if
// not.
func selectedBy(dev string, use []string, env map[string]string) string {
	if slices.Contains(use, dev) {
		return "named on the command line"
	}
	if v, ok := env["NCCL_IB_HCA"]; ok && v != "" && ncclSelects(v, dev) {
		return "NCCL_IB_HCA=" + v
	}
	if v := env["UCX_NET_DEVICES"]; v != "" {
		for _, f := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(f), ":")
			if name == dev {
				return "UCX_NET_DEVICES=" + v
			}
		}
	}
	if v := env["GGML_RDMA_DEV"]; v == dev {
		return "GGML_RDMA_DEV=" + v
	}
	return ""
}

// ncclSelects applies NCCL_IB_HCA's rules: a leading '^' excludes the
// listed devices, a leading '=' asks for exact names, otherwise each entry
// is a name prefix; ":port" suffixes are ignored.
func ncclSelects(spec, dev string) bool {
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	exact := strings.HasPrefix(spec, "=")
	spec = strings.TrimPrefix(spec, "=")
	listed := false
	for _, f := range strings.Split(spec, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(f), ":")
		if name == "" {
			continue
		}
		if name == dev || (!exact && strings.HasPrefix(dev, name)) {
			listed = true
		}
	}
	return listed != exclude
}

// trafficCounters move whenever the RDMA data path carries work.
var trafficCounters = []string{"data_wr_send", "data_tx_posted", "data_tx_completed", "data_rx_completed", "apple_sq_posted"}

func checkCounters(e doctorEnv) check {
	const id = "counters-not-moving"
	s := e.sys
	if !usb4Setup(s) {
		return skip(id, noUSB4)
	}
	if !e.watch {
		return skip(id, "run ibvinfo doctor --watch while the workload runs to see whether RDMA carries its traffic")
	}
	if len(usb4Devices(s)) == 0 {
		// Nothing can carry traffic; usb4-devices already says why.
		return skip(id, "no usb4 device registered")
	}
	if !s.Debugfs.Present || !e.secondOK {
		return warn(id, "could not read /sys/kernel/debug/thunderbolt_ibverbs/summary", "mount -t debugfs none /sys/kernel/debug and run as root")
	}
	first := sysinfo.Debugfs{Summary: s.Debugfs.Summary}
	second := sysinfo.Debugfs{Summary: e.second}
	var moved []string
	seen := 0
	for _, k := range trafficCounters {
		a, ok1 := first.Counter(k)
		b, ok2 := second.Counter(k)
		if !ok1 || !ok2 {
			continue
		}
		seen++
		if b != a {
			moved = append(moved, fmt.Sprintf("%s +%d", k, int64(b-a)))
		}
	}
	if seen == 0 {
		return warn(id, "the debugfs summary has none of the traffic counters ("+strings.Join(trafficCounters, ", ")+")", "update thunderbolt_ibverbs")
	}
	if len(moved) == 0 {
		return warn(id, "data-path counters did not move during the watch: the workload is not using the usb4 RDMA devices",
			"point the application at a native usb4_rdma device (NCCL_IB_HCA=usb4_rdma0, ib_write_bw -d usb4_rdma0) and check it is not falling back to TCP")
	}
	return ok(id, "data path carries traffic: "+strings.Join(moved, ", "))
}

func checkUnreadable(e doctorEnv) check {
	const id = "could-not-read"
	if len(e.sys.Problems) == 0 {
		return ok(id, "every file read cleanly")
	}
	var paths []string
	for _, p := range e.sys.Problems {
		paths = append(paths, p.String())
	}
	return warn(id, strings.Join(paths, "; "), "run as root; the facts from these files are missing from the other checks")
}

func deviceNames(devs []sysinfo.Device) string {
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name
	}
	return strings.Join(names, ", ")
}

func printDoctor(p *printer, rep doctorReport) {
	tags := map[string]string{verdictOK: "OK", verdictSkip: "SKIP", verdictWarn: "WARN", verdictError: "ERROR"}
	colors := map[string]string{verdictOK: green, verdictSkip: dim, verdictWarn: yellow, verdictError: red}
	width := 0
	for _, c := range rep.Checks {
		width = max(width, len(c.ID))
	}
	for _, c := range rep.Checks {
		tag := fmt.Sprintf("%-5s", tags[c.Verdict])
		p.printf("%s  %-*s  %s\n", p.paint(colors[c.Verdict], tag), width, c.ID, c.Message)
		if c.Fix != "" {
			p.printf("%s  %-*s  fix: %s\n", strings.Repeat(" ", 5), width, "", c.Fix)
		}
	}
	p.printf("\n%d error(s), %d warning(s)\n", rep.Errors, rep.Warnings)
}
