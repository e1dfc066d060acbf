package selftest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// vmEnv returns the harness's environment, skipping the test outside the VM.
func vmEnv(t *testing.T) map[string]string {
	t.Helper()
	if os.Getenv("USB4VERBS_VM") != "1" {
		t.Skip("needs the VM harness (tests/vm/run.sh); USB4VERBS_VM is not 1")
	}
	env := map[string]string{}
	for _, k := range []string{"DEV0", "DEV1", "NETDEV0", "NETDEV1", "IP0", "IP1",
		"GID0", "GID1", "KERNEL", "USERLAND"} {
		v := os.Getenv("USB4VERBS_" + k)
		if v == "" {
			t.Fatalf("USB4VERBS_%s is not set", k)
		}
		env[k] = v
	}
	return env
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

// mappedGID is the sysfs spelling of the IPv4-mapped GID ::ffff:a.b.c.d.
func mappedGID(t *testing.T, ip string) string {
	t.Helper()
	v4 := net.ParseIP(ip).To4()
	if v4 == nil {
		t.Fatalf("not an IPv4 address: %q", ip)
	}
	return fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", v4[0], v4[1], v4[2], v4[3])
}

func TestEnvironmentMatchesKernel(t *testing.T) {
	env := vmEnv(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if got := unix.ByteSliceToString(u.Release[:]); got != env["KERNEL"] {
		t.Errorf("USB4VERBS_KERNEL=%q, uname -r says %q", env["KERNEL"], got)
	}
}

func TestDevicesActiveWithRoCEv2GIDs(t *testing.T) {
	env := vmEnv(t)
	for _, i := range []string{"0", "1"} {
		dev, netdev, ip, gid := env["DEV"+i], env["NETDEV"+i], env["IP"+i], env["GID"+i]
		t.Run(dev, func(t *testing.T) {
			port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
			if state := readTrim(t, filepath.Join(port, "state")); !strings.HasSuffix(state, "ACTIVE") {
				t.Errorf("%s port 1 state %q, want ACTIVE", dev, state)
			}
			if _, err := strconv.ParseUint(gid, 10, 16); err != nil {
				t.Fatalf("USB4VERBS_GID%s=%q is not a GID index", i, gid)
			}
			if got, want := readTrim(t, filepath.Join(port, "gids", gid)), mappedGID(t, ip); got != want {
				t.Errorf("%s gid[%s] = %s, want %s (::ffff:%s)", dev, gid, got, want, ip)
			}
			if got := readTrim(t, filepath.Join(port, "gid_attrs/types", gid)); got != "RoCE v2" {
				t.Errorf("%s gid[%s] type %q, want RoCE v2", dev, gid, got)
			}
			if got := readTrim(t, filepath.Join(port, "gid_attrs/ndevs", gid)); got != netdev {
				t.Errorf("%s gid[%s] netdev %q, want %s", dev, gid, got, netdev)
			}
		})
	}
}

func TestUverbsCharDevices(t *testing.T) {
	env := vmEnv(t)
	owners := map[string]bool{}
	for _, n := range []string{"uverbs0", "uverbs1"} {
		fi, err := os.Stat("/dev/infiniband/" + n)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("/dev/infiniband/%s is %v, not a character device", n, fi.Mode())
		}
		owners[readTrim(t, "/sys/class/infiniband_verbs/"+n+"/ibdev")] = true
	}
	for _, dev := range []string{env["DEV0"], env["DEV1"]} {
		if !owners[dev] {
			t.Errorf("no uverbs0/uverbs1 belongs to %s (owners %v)", dev, owners)
		}
	}
}

func TestMemlockUnlimited(t *testing.T) {
	vmEnv(t)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur != unix.RLIM_INFINITY || rl.Max != unix.RLIM_INFINITY {
		t.Errorf("RLIMIT_MEMLOCK = %d/%d, want unlimited", rl.Cur, rl.Max)
	}
}

func netCounter(t *testing.T, netdev, name string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(readTrim(t, filepath.Join("/sys/class/net", netdev, "statistics", name)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTrafficCrossesVeth sends UDP from one address to the other and checks that it
// went over the veth pair. Both addresses are local to the one netns, so without the
// harness's routing fix the kernel delivers through lo and rxe cannot connect.
func TestTrafficCrossesVeth(t *testing.T) {
	env := vmEnv(t)
	const datagrams = 5
	for _, dir := range [][2]string{{"0", "1"}, {"1", "0"}} {
		from, to := dir[0], dir[1]
		t.Run(env["NETDEV"+from]+"->"+env["NETDEV"+to], func(t *testing.T) {
			src := &net.UDPAddr{IP: net.ParseIP(env["IP"+from])}
			dst := &net.UDPAddr{IP: net.ParseIP(env["IP"+to])}
			srv, err := net.ListenUDP("udp4", dst)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			cli, err := net.DialUDP("udp4", src, srv.LocalAddr().(*net.UDPAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			tx0 := netCounter(t, env["NETDEV"+from], "tx_packets")
			rx0 := netCounter(t, env["NETDEV"+to], "rx_packets")
			buf := make([]byte, 64)
			for i := range datagrams {
				msg := fmt.Sprintf("selftest %d", i)
				if _, err := cli.Write([]byte(msg)); err != nil {
					t.Fatal(err)
				}
				if err := srv.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
					t.Fatal(err)
				}
				n, peer, err := srv.ReadFromUDP(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if string(buf[:n]) != msg || !peer.IP.Equal(src.IP) {
					t.Fatalf("got %q from %v, want %q from %v", buf[:n], peer, msg, src.IP)
				}
			}
			if d := netCounter(t, env["NETDEV"+from], "tx_packets") - tx0; d < datagrams {
				t.Errorf("%s sent %d packets for %d datagrams: traffic took another path (lo?)", env["NETDEV"+from], d, datagrams)
			}
			if d := netCounter(t, env["NETDEV"+to], "rx_packets") - rx0; d < datagrams {
				t.Errorf("%s received %d packets for %d datagrams", env["NETDEV"+to], d, datagrams)
			}
		})
	}
}

// TestLibibverbsOpensDevices proves the image's libibverbs, its providers directory,
// /etc/libibverbs.d and /dev/infiniband work together: both rxe devices are listed and
// open. Skipped when the stock rxe provider was left out of the image on purpose.
func TestLibibverbsOpensDevices(t *testing.T) {
	env := vmEnv(t)
	drivers, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so")
	if _, err := os.Stat("/etc/libibverbs.d/rxe.driver"); err != nil || len(drivers) == 0 {
		t.Skip("stock librxe is not in the image (VM_EXCLUDE_GLOB)")
	}
	devs, err := verbsDevices()
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{env["DEV0"], env["DEV1"]} {
		e, ok := devs[dev]
		switch {
		case !ok:
			t.Errorf("libibverbs does not list %s (lists %v)", dev, devs)
		case e != 0:
			t.Errorf("ibv_open_device(%s): %v", dev, e)
		}
	}
}
