package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The UCX section: ucx_perftest beside the perftest row of the same size, the
// ratios between the sides and UCX / perftest, and the baseline's failure as
// "cannot" with what it printed instead of a number.
func TestUCXTable(t *testing.T) {
	bed := strings.Join([]string{
		"@@BENCHINFO mode=usb4 reps=2 tree=hellas-main kernel=7.2.12+deb13-amd64 userland=trixie nproc=2 sides=\"up ours\"",
		"@@BENCHINFO what=ucx side=ours ucx=1.18.1 rc_verbs_on_dev0=1 ucp_env=\"UCX_TLS=rc_verbs,tcp:aux\" uct_env=\"UCX_RC_VERBS_TX_MIN_SGE=4\" aux_dev=\"tbv0\" mpi=\"-P 0\"",
		"@@BENCHINFO what=ucx side=up ucx=1.18.1 rc_verbs_on_dev0=0 ucp_env=\"UCX_TLS=rc_verbs,tcp:aux\" uct_env=\"UCX_RC_VERBS_TX_MIN_SGE=4\" aux_dev=\"tbv0\" mpi=\"-P 0\"",
		"@@BENCHINFO what=ucx side=up ucx=1.18.1 default_rc_verbs_on_dev0=0 default_ucx_info_errors=\"Caught signal 11 (Segmentation fault) libibverbs.so.1(ibv_reg_dmabuf_mr+0x1e)\" ucp_env=\"UCX_TLS=rc_verbs,tcp:aux\"",
		"@@BENCH mode=usb4 side=ours tool=ucx_tag_lat size=2 qps=1 pl=1 rep=1 loaded=ours metric=t_typical_us value=6000",
		"@@BENCH mode=usb4 side=ours tool=ucx_tag_lat size=2 qps=1 pl=1 rep=2 loaded=ours metric=t_typical_us value=8000",
		"@@BENCH mode=usb4 side=ours tool=ucx_tag_lat size=2 qps=1 pl=1 rep=1 loaded=ours metric=t_avg_us value=9000",
		"@@BENCHFAIL mode=usb4 side=up tool=ucx_tag_lat size=2 qps=1 pl=1 rep=1 loaded=up rc=139 why=ucx-crashed",
		"# srv: [1796318459.920269] [(none):1832 :0]     ucp_context.c:1524 UCX  ERROR no usable transports/devices (asked rc_verbs,tcp:aux on network:usb4_rdma0:1,tbv0 )",
		"# srv: [(none):2214 :0:2214] Caught signal 11 (Segmentation fault: Sent by the kernel at address (nil))",
		"@@BENCHSKIP mode=usb4 side=up tool=ucx_tag_lat size=2 qps=1 pl=1 rep=2 why=failed-2-times",
		"@@BENCH mode=usb4 side=ours tool=ib_send_lat size=2 qps=1 pl=1 rep=1 loaded=ours metric=t_typical_us value=70",
		"@@BENCH mode=usb4 side=up tool=ib_send_lat size=2 qps=1 pl=1 rep=1 loaded=up metric=t_typical_us value=64",
		"@@BENCH mode=usb4 side=ours tool=ucx_put_bw size=65536 qps=1 pl=1 rep=1 loaded=ours metric=bw_avg_mbps value=30",
		"@@BENCH mode=usb4 side=ours tool=ib_write_bw size=65536 qps=1 pl=1 rep=1 loaded=ours metric=bw_avg_mbps value=60",
		"@@BENCH mode=usb4 side=up tool=ib_write_bw size=65536 qps=1 pl=1 rep=1 loaded=up metric=bw_avg_mbps value=50",
		"@@BENCHFAIL mode=usb4 side=up tool=ucx_put_bw size=65536 qps=1 pl=1 rep=1 loaded=up rc=1 why=ucx-client-exit",
		"# cli: [1796318782.935961] [(none):5677 :0]    perftest_run.c:348  UCX  ERROR Failed to run test: Unsupported operation",
	}, "\n") + "\n"
	rxe := strings.Join([]string{
		"@@BENCHINFO mode=ab reps=1 kernel=6.1.0-57-amd64 userland=bookworm nproc=2",
		"@@BENCH mode=ab side=ours tool=ucx_tag_bw size=64 qps=1 pl=1 rep=1 loaded=usb4_rdma+rxe metric=bw_avg_mbps value=2",
		"@@BENCH mode=ab side=librxe tool=ucx_tag_bw size=64 qps=1 pl=1 rep=1 loaded=rxe metric=bw_avg_mbps value=4",
		"@@BENCH mode=ab side=ours tool=ib_send_bw size=64 qps=1 pl=1 rep=1 loaded=usb4_rdma+rxe metric=bw_avg_mbps value=8",
		"@@BENCH mode=ab side=librxe tool=ib_send_bw size=64 qps=1 pl=1 rep=1 loaded=rxe metric=bw_avg_mbps value=8",
	}, "\n") + "\n"
	dir := t.TempDir()
	for name, text := range map[string]string{"ucx-hellas-main.log": bed, "ucx-rxe.log": rxe} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := loadUCX(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Name != "rxe" || runs[0].Base != SideLibrxe || runs[1].Name != "hellas-main" || runs[1].Base != SideUp {
		t.Fatalf("runs = %+v, want rxe (librxe) then hellas-main (up)", runs)
	}
	var out strings.Builder
	writeUCX(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }, runs, "")
	doc := out.String()
	for _, want := range []string{
		"### UCX on rxe: ours against librxe",
		"| tag_bw | 64 B | 2.00 (2.00–2.00) | 4.00 (4.00–4.00) | 0.50 | ib_send_bw | 8.00 (8.00–8.00) | 8.00 (8.00–8.00) | 1.00 | 0.25 | 0.50 |",
		"### UCX on hellas-main: ours against C provider",
		"| tag_lat | 2 B | 7000 (6000–8000) | cannot: ucx-crashed, exit 139: `srv: Caught signal 11 (Segmentation fault: Sent by the kernel at address (nil))` | – | ib_send_lat | 70.0 (70.0–70.0) | 64.0 (64.0–64.0) | 1.09 | 100.00 | – |",
		"| put_bw | 64 KiB | 30.0 (30.0–30.0) | cannot: ucx-client-exit, exit 1: `cli: Failed to run test: Unsupported operation` | – | ib_write_bw | 60.0 (60.0–60.0) | 50.0 (50.0–50.0) | 1.20 | 0.50 | – |",
		"side up: UCX 1.18.1, `rc_verbs` on the server's device listed by `ucx_info -d`: 0",
		"- side up, ucx_tag_lat: 1 run(s) skipped (failed-2-times)",
		"- side up, ucx_tag_lat 2 B, rep 1: ucx-crashed (exit 139): `srv: no usable transports/devices (asked rc_verbs,tcp:aux on network:usb4_rdma0:1,tbv0 )` `srv: Caught signal 11",
		"side up with UCX's default settings: `rc_verbs` listed by `ucx_info -d`: 0 (it printed `Caught signal 11 (Segmentation fault) libibverbs.so.1(ibv_reg_dmabuf_mr+0x1e)`)",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("missing %q in:\n%s", want, doc)
		}
	}
}
