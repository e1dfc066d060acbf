package dataplane

import (
	"sync"
	"testing"
)

// The post_send+poll_cq pair, through the Go API (one cgo call each) and
// through the C engine alone (one C loop), on each backend. The kernels are
// the in-process doubles, so this measures the user-space data path only.

func benchEnv(b *testing.B, backend string) (qp *QP, cq *CQ, w SendWR) {
	switch backend {
	case "rxe":
		e := newRxeEnvTB(b)
		e.f.AutoComplete(true)
		return e.qp, e.cq, SendWR{Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}
	default:
		e := newUSB4EnvTB(b, backend, 256)
		return e.qpA, e.cqA, SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 64)},
			RemoteAddr: addr(e.bufB), RKey: e.rkeyB}
	}
}

var benchBackends = []string{"rxe", "kcmd", "cqring", "dv"}

func BenchmarkPostPollGo(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be, func(b *testing.B) {
			qp, cq, w := benchEnv(b, be)
			wrs := []SendWR{w}
			wc := make([]WC, 1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := qp.PostSend(wrs); err != nil {
					b.Fatal(err)
				}
				for {
					n, err := cq.Poll(wc)
					if err != nil || (n == 1 && wc[0].Status != WCSuccess) {
						b.Fatalf("poll: %v %+v", err, wc[0])
					}
					if n == 1 {
						break
					}
				}
			}
		})
	}
}

func BenchmarkPostPollC(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be, func(b *testing.B) {
			qp, cq, w := benchEnv(b, be)
			b.ResetTimer()
			if err := qp.postPollLoopC(cq, w, b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// Empty poll_cq on an rxe ring: the generic dispatch against the fast path
// the ops table installs on rxe contexts.
func BenchmarkPollEmptyC(b *testing.B) {
	for _, path := range []string{"generic", "fast"} {
		b.Run(path, func(b *testing.B) {
			_, cq, _ := benchEnv(b, "rxe")
			b.ResetTimer()
			if err := cq.pollEmptyLoopC(b.N, path == "fast"); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// The ibv_start_poll miss (ENOENT) on an empty CQ of each backend, against
// which BenchmarkPollEmptyC/fast is the poll_cq cost it must stay within
// on rxe.
func BenchmarkStartPollEmptyC(b *testing.B) {
	for _, be := range []string{"rxe", "kcmd", "cqring"} {
		b.Run(be, func(b *testing.B) {
			_, cq, _ := benchEnv(b, be)
			b.ResetTimer()
			if err := cq.startPollEmptyLoopC(b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// Posters and pollers on different goroutines (run with -race).
func TestConcurrentPostAndPoll(t *testing.T) {
	for _, m := range usb4Modes {
		t.Run(m, func(t *testing.T) {
			e := newUSB4Env(t, m, 4096)
			const total = 2000
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < total; i += 10 {
					var wrs []SendWR
					for j := i; j < i+10; j++ {
						wrs = append(wrs, SendWR{WrID: uint64(j), Opcode: WRRDMAWrite, Flags: SendSignaled,
							SGEs: []SGE{e.sgeA(0, 8)}, RemoteAddr: addr(e.bufB), RKey: e.rkeyB})
					}
					for {
						err := e.qpA.PostSend(wrs)
						if err == nil {
							break
						}
						pe, ok := err.(*PostError)
						if !ok || pe.Err != 12 /* ENOMEM: queue full, retry the rest */ {
							t.Error(err)
							return
						}
						wrs = wrs[pe.Index:]
					}
				}
			}()
			next := uint64(0)
			wc := make([]WC, 32)
			for next < total {
				n, err := e.cqA.Poll(wc)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range wc[:n] {
					if c.WrID != next || c.Status != WCSuccess {
						t.Fatalf("completion %+v, want wr_id %d", c, next)
					}
					next++
				}
			}
			wg.Wait()
		})
	}
}
