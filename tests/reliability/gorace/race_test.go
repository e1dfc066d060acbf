package gorace

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
	"usb4verbs/uapi"
)

const goroutines = 8

type dev struct {
	ctx    *provider.Context
	pd     *provider.PD
	gidIdx int
	gid    provider.GID
}

func openDev(t *testing.T, i int) *dev {
	t.Helper()
	name := os.Getenv("USB4VERBS_DEV" + strconv.Itoa(i))
	idx, err := strconv.Atoi(os.Getenv("USB4VERBS_GID" + strconv.Itoa(i)))
	if name == "" || err != nil {
		t.Fatalf("USB4VERBS_DEV%d/GID%d not set", i, i)
	}
	ctx, err := provider.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	gid, err := ctx.QueryGID(1, idx)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	return &dev{ctx: ctx, pd: pd, gidIdx: idx, gid: gid}
}

func needVM(t *testing.T) {
	if os.Getenv("USB4VERBS_VM") != "1" {
		t.Skip("needs the test VM (tests/reliability/run.sh)")
	}
}

// connect brings a (on da) to RTS towards b (on db).
func connect(a, b *provider.QP, da, db *dev) error {
	access := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE)
	attr := provider.QPAttr{State: uapi.IB_QPS_INIT, Port: 1, AccessFlags: access}
	if err := a.Modify(&attr, uapi.IB_QP_STATE|uapi.IB_QP_PKEY_INDEX|uapi.IB_QP_PORT|uapi.IB_QP_ACCESS_FLAGS); err != nil {
		return err
	}
	attr.State, attr.PathMTU, attr.DestQPN = uapi.IB_QPS_RTR, uapi.IB_MTU_1024, b.QPN()
	attr.MaxDestRdAtomic, attr.MinRNRTimer = 1, 12
	attr.AH = provider.AHAttr{IsGlobal: true, Port: 1,
		GRH: provider.GlobalRoute{DGID: db.gid, SGIDIndex: uint8(da.gidIdx), HopLimit: 64}}
	if err := a.Modify(&attr, uapi.IB_QP_STATE|uapi.IB_QP_AV|uapi.IB_QP_PATH_MTU|uapi.IB_QP_DEST_QPN|
		uapi.IB_QP_RQ_PSN|uapi.IB_QP_MAX_DEST_RD_ATOMIC|uapi.IB_QP_MIN_RNR_TIMER); err != nil {
		return err
	}
	attr.State, attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = uapi.IB_QPS_RTS, 14, 7, 7, 1
	return a.Modify(&attr, uapi.IB_QP_STATE|uapi.IB_QP_SQ_PSN|uapi.IB_QP_TIMEOUT|uapi.IB_QP_RETRY_CNT|
		uapi.IB_QP_RNR_RETRY|uapi.IB_QP_MAX_QP_RD_ATOMIC)
}

func rcQP(pd *provider.PD, cq *provider.CQ) (*provider.QP, error) {
	return pd.CreateQP(provider.QPInitAttr{Type: provider.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: provider.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
}

// TestVMConcurrentControl: goroutines share one context and PD per device
// and one CQ per device; each creates, connects, queries and destroys its own
// QP pairs and MRs and CQs, while another goroutine waits for async events.
func TestVMConcurrentControl(t *testing.T) {
	needVM(t)
	d0, d1 := openDev(t, 0), openDev(t, 1)
	shared0, err := d0.ctx.CreateCQ(provider.CQAttr{CQE: 256})
	if err != nil {
		t.Fatal(err)
	}
	shared1, err := d1.ctx.CreateCQ(provider.CQAttr{CQE: 256})
	if err != nil {
		t.Fatal(err)
	}
	rounds := 50
	if s := os.Getenv("GORACE_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	stop := make(chan struct{})
	var events sync.WaitGroup
	events.Add(1)
	go func() { // async events on d0, waited for without the context lock
		defer events.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := d0.ctx.GetAsyncEvent(50 * time.Millisecond); err != nil &&
				!errors.Is(err, unix.ETIMEDOUT) && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("GetAsyncEvent: %v", err)
				return
			}
		}
	}()
	buf := make([]byte, goroutines*4096)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			mem := buf[g*4096 : (g+1)*4096]
			for r := 0; r < rounds; r++ {
				if err := round(d0, d1, shared0, shared1, mem); err != nil {
					t.Errorf("goroutine %d round %d: %v", g, r, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	events.Wait()
	for _, cq := range []*provider.CQ{shared0, shared1} {
		if err := cq.Destroy(); err != nil {
			t.Error(err)
		}
	}
}

// round: an MR, an own CQ, and an RC pair on the shared CQs, connected,
// queried, moved to ERR and destroyed.
func round(d0, d1 *dev, shared0, shared1 *provider.CQ, mem []byte) error {
	mr, err := d0.pd.RegMR(uintptr(unsafe.Pointer(&mem[0])), uint64(len(mem)), uint64(uintptr(unsafe.Pointer(&mem[0]))),
		uapi.IB_UVERBS_ACCESS_LOCAL_WRITE)
	if err != nil {
		return err
	}
	own, err := d1.ctx.CreateCQ(provider.CQAttr{CQE: 16})
	if err != nil {
		return err
	}
	a, err := rcQP(d0.pd, shared0)
	if err != nil {
		return err
	}
	b, err := rcQP(d1.pd, shared1)
	if err != nil {
		return err
	}
	if err := connect(a, b, d0, d1); err != nil {
		return err
	}
	if err := connect(b, a, d1, d0); err != nil {
		return err
	}
	got, _, err := a.Query(uapi.IB_QP_STATE | uapi.IB_QP_DEST_QPN)
	if err != nil {
		return err
	}
	if got.State != uapi.IB_QPS_RTS || got.DestQPN != b.QPN() {
		return errors.New("query: state " + strconv.Itoa(int(got.State)) + " dest " + strconv.Itoa(int(got.DestQPN)))
	}
	if err := a.Modify(&provider.QPAttr{State: uapi.IB_QPS_ERR}, uapi.IB_QP_STATE); err != nil {
		return err
	}
	for _, f := range []func() error{a.Destroy, b.Destroy, own.Destroy, mr.Destroy} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// TestVMConcurrentOpenClose: contexts opened and closed from every goroutine
// at once, each with a PD and a CQ, and objects of a closed context refused.
func TestVMConcurrentOpenClose(t *testing.T) {
	needVM(t)
	name := os.Getenv("USB4VERBS_DEV0")
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 10; r++ {
				ctx, err := provider.Open(name)
				if err != nil {
					t.Error(err)
					return
				}
				pd, err := ctx.AllocPD()
				if err != nil {
					t.Error(err)
				}
				cq, err := ctx.CreateCQ(provider.CQAttr{CQE: 4})
				if err != nil {
					t.Error(err)
				}
				if err := ctx.Close(); err != nil {
					t.Error(err)
				}
				if pd != nil {
					if err := pd.Destroy(); !errors.Is(err, unix.EBADF) {
						t.Errorf("PD of a closed context: %v, want EBADF", err)
					}
				}
				_ = cq
			}
		}()
	}
	wg.Wait()
}
