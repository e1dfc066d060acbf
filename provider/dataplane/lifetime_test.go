package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/provider/dataplane/internal/usb4double"
)

// freeAfterDestroy frees a QP's engine object the way cshim's destroy_qp
// does once the kernel QP is destroyed and its events are acknowledged
// (objects.c calls the same usb4v_qp_free_destroyed).
func freeAfterDestroy(qp *QP) { qp.CloseDestroyed() }

// TestDVQueueSurvivesReusedHandle (issue 12 item 5): after DESTROY_QP the
// kernel has torn the DV queue down and the next create_qp may get the same
// handle; freeing the destroyed QP's engine object must not send
// DESTROY_QUEUE, which would now destroy the new QP's queue.
func TestDVQueueSurvivesReusedHandle(t *testing.T) {
	e := newUSB4Env(t, "dv", 64)
	if err := e.d.DestroyQP(e.hqpA); err != nil {
		t.Fatal(err)
	}
	qpC, hC, _ := e.newQP(t, e.cqA, e.hcqA)
	defer qpC.Close()
	if hC != e.hqpA {
		t.Fatalf("the double gave handle %d, want the freed %d reused", hC, e.hqpA)
	}
	if qpC.SendBackend() != BackendDV {
		t.Fatalf("new QP not on DV: %s", qpC.FallbackReason())
	}
	e.d.Connect(hC, e.hqpB)
	freeAfterDestroy(e.qpA)
	e.qpA = nil
	if n := e.d.DestroyQueues(); n != 0 {
		t.Errorf("%d DESTROY_QUEUE after the kernel destroyed the QP, want 0", n)
	}
	if err := e.qpB.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{e.sgeB(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := qpC.PostSend([]SendWR{{WrID: 7, Opcode: WRSend, Flags: SendSignaled, SGEs: []SGE{e.sgeA(0, 16)}}}); err != nil {
		t.Fatalf("post on the new QP: %v", err)
	}
	if c := pollN(t, e.cqA, 1); c[0].WrID != 7 || c[0].Status != WCSuccess {
		t.Fatalf("new QP's send: %+v", c)
	}
}

// TestDVCreateDestroyFromTwoThreads: two threads create DV QPs, check that
// their queue is alive, destroy them and free their engine objects, with
// handles reused between them all the time. No queue may die of the other
// thread's teardown.
func TestDVCreateDestroyFromTwoThreads(t *testing.T) {
	d := usb4double.New()
	defer d.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hcq, tail, err := d.CreateCQ(64)
			if err != nil {
				errs <- err.Error()
				return
			}
			cq, _ := NewCQ(d.Sys(), 3, hcq, 64)
			defer cq.Close()
			cq.TryMappedRing(tail[:], 64)
			for i := 0; i < 300; i++ {
				h, qpn, err := d.CreateQP(QPTypeRC, hcq, hcq)
				if err != nil {
					errs <- err.Error()
					return
				}
				qp, _ := NewQP(QPConfig{Sys: d.Sys(), CmdFd: 3, Handle: h, QPNum: qpn, Type: QPTypeRC,
					MaxSendSGE: 1, MaxRecvSGE: 1, MaxSendWR: 64, SendCQ: cq, RecvCQ: cq})
				if !qp.TryDV(0) {
					errs <- "TryDV: " + qp.FallbackReason()
					return
				}
				if d.DVQPState(h) == ^uint32(0) {
					errs <- "a live QP's DV queue was destroyed by another QP's teardown"
					qp.Close()
					return
				}
				if err := d.DestroyQP(h); err != nil {
					errs <- err.Error()
					return
				}
				freeAfterDestroy(qp)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := d.DestroyQueues(); n != 0 {
		t.Errorf("%d DESTROY_QUEUE after kernel destroys, want 0", n)
	}
}

// threadState is the scheduler state letter of thread tid of this process
// (R running, S sleeping, ...), from /proc.
func threadState(t *testing.T, tid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		t.Fatalf("stat %q", b)
	}
	return b[i+2]
}

// TestKernelCommandPollersSleep (issue 12 item 9): while one thread's
// POLL_CQ write is in the kernel (the double holds it there), a second
// poller of the same kernel-command CQ must sleep, not spin on the CQ's
// spinlock for the whole system call.
func TestKernelCommandPollersSleep(t *testing.T) {
	e := newUSB4Env(t, "kcmd", 64)
	e.d.HoldPolls(true) // until the second poller has been sampled
	defer e.d.HoldPolls(false)
	first := make(chan error, 1)
	go func() {
		var wc [4]WC
		_, err := e.cqA.Poll(wc[:])
		first <- err
	}()
	for e.d.PollsEntered() == 0 {
		time.Sleep(time.Millisecond)
	}
	tidc := make(chan int)
	var calling atomic.Bool
	second := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		var wc [4]WC
		calling.Store(true)
		_, err := e.cqA.Poll(wc[:])
		second <- err
	}()
	tid := <-tidc
	for !calling.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // into the C call
	var states []byte
	for e.d.PollsEntered() == 1 && len(states) < 20 {
		states = append(states, threadState(t, tid))
		time.Sleep(5 * time.Millisecond)
	}
	e.d.HoldPolls(false)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if len(states) == 0 {
		t.Fatal("the first poll returned before the second poller could be sampled")
	}
	if bytes.Count(states, []byte("R")) > len(states)/2 {
		t.Errorf("second poller's states while the first was in the kernel: %q; want it sleeping (S), not spinning (R)", states)
	}
}

// TestKernelCommandPollWithDVQPsFreesTheSpinlock (issue 12 item 9): with DV
// QPs merging into a kernel-command CQ (pleite-gda's shape), the POLL_CQ
// write() must not run under the CQ's spinlock either: a DV QP's teardown,
// which unlinks it under that lock, completes while a poll sits in the kernel.
func TestKernelCommandPollWithDVQPsFreesTheSpinlock(t *testing.T) {
	e := newUSB4Env(t, "kcmd+dv", 64)
	// A receive through the kernel: the CQ then has kernel work, and its
	// poll asks the kernel (usb4v_cq.kwork).
	if err := e.qpA.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{e.sgeA(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	// The poll stays in the "kernel" until released: the teardown must
	// return meanwhile, however slow the host (a 400 ms sleep in the double
	// was once too short in a loaded VM).
	e.d.HoldPolls(true)
	defer e.d.HoldPolls(false)
	polled := make(chan error, 1)
	go func() {
		var wc [4]WC
		_, err := e.cqA.Poll(wc[:])
		polled <- err
	}()
	for e.d.PollsEntered() == 0 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() {
		e.qpA.Close()
		close(closed)
	}()
	var waited bool
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		waited = true // the teardown waits for the poll: let it end
	}
	e.d.HoldPolls(false)
	<-closed
	e.qpA = nil
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	if waited {
		t.Error("the DV QP's teardown waited for a POLL_CQ in the kernel: the write ran under the CQ's spinlock")
	}
}

// TestGoPollWaitsForClose (issue 12 item 10): CQ.Close waits for a Poll
// under way instead of freeing the engine object under it.
func TestGoPollWaitsForClose(t *testing.T) {
	e := newUSB4Env(t, "kcmd", 64)
	e.d.SetPollDelay(200_000)
	done := make(chan error, 1)
	go func() {
		var wc [4]WC
		_, err := e.cqA.Poll(wc[:])
		done <- err
	}()
	for e.d.PollsEntered() == 0 {
		time.Sleep(time.Millisecond)
	}
	e.cqA.Close()
	closedFirst := e.d.PollsDone() == 0 // the poll was still in the "kernel"
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.cqA = nil
	if closedFirst {
		t.Error("Close returned while a Poll was inside the engine")
	}
	var wc [1]WC
	if _, err := (&CQ{}).Poll(wc[:]); err == nil {
		t.Error("Poll on a closed CQ succeeded")
	}
}

// Lock order (docs/DESIGN.md): the removal marks engine objects gone
// (usb4v_*_mark_gone, through the context's record: Dev.Remove), and a
// thread that holds an engine lock may call a verb, which takes the locks
// outside it (an rxe start_poll holder calls a control verb; a CQ resize
// holds the CQ across RESIZE_CQ). So the marks take no engine lock and wait
// for no holder.
func TestMarkGoneWaitsForNoHolder(t *testing.T) {
	t.Run("cq held by start_poll", func(t *testing.T) {
		e := newRxeEnv(t, QPTypeRC, false)
		dev := removalRecord(t, e.cq.Join)
		produceRxeCQE(t, e.f, 1)
		k := e.cq.NewCursor()
		defer k.Free()
		held := make(chan struct{})
		release := make(chan struct{})
		released := make(chan struct{})
		go func() {
			defer close(released)
			if _, err := k.Start(); err != nil {
				t.Errorf("start: %v", err)
			}
			close(held)
			<-release
			k.End()
		}()
		done(t, "start_poll", held)
		marked := make(chan struct{})
		go func() {
			dev.Remove()
			close(marked)
		}()
		done(t, "the removal while start_poll holds the CQ", marked)
		close(release)
		done(t, "end_poll", released)
		if _, err := e.cq.Poll(make([]WC, 1)); !errors.Is(err, unix.EIO) {
			t.Fatalf("poll after the removal: %v, want EIO", err)
		}
	})
	t.Run("cq in resize", func(t *testing.T) {
		e := newRxeEnv(t, QPTypeRC, false)
		dev := removalRecord(t, e.cq.Join)
		in, release, resized := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(resized)
			_ = e.cq.Resize(func() (uint64, uint32, error) {
				close(in)
				<-release
				return 0, 0, unix.EIO
			})
		}()
		done(t, "resize", in)
		marked := make(chan struct{})
		go func() {
			dev.Remove()
			close(marked)
		}()
		done(t, "the removal during a CQ resize", marked)
		close(release)
		done(t, "resize end", resized)
		if _, err := e.cq.Poll(make([]WC, 1)); !errors.Is(err, unix.EIO) {
			t.Fatalf("poll after the removal: %v, want EIO", err)
		}
	})
	t.Run("srq in resize", func(t *testing.T) {
		f := usb4double.NewRxeFake(8, 9, 8, 7, 4)
		defer f.Close()
		srq, err := NewSRQ(f.Sys(), 3, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer srq.Close()
		if err := srq.AttachRxe(nil, usb4double.RxeRQ, f.Len(usb4double.RxeRQ)); err != nil {
			t.Fatal(err)
		}
		dev := removalRecord(t, srq.Join)
		in, release, resized := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(resized)
			_ = srq.Resize(func() (uint64, uint32, error) {
				close(in)
				<-release
				return 0, 0, unix.EIO
			})
		}()
		done(t, "resize", in)
		marked := make(chan struct{})
		go func() {
			dev.Remove()
			close(marked)
		}()
		done(t, "the removal during an SRQ resize", marked)
		close(release)
		done(t, "resize end", resized)
		if err := srq.PostRecv([]RecvWR{{WrID: 1, SGEs: []SGE{{Addr: 1, Length: 1}}}}); !errors.Is(err, unix.EIO) {
			t.Fatalf("post after the removal: %v, want EIO", err)
		}
	})
}

// At removal the rings the engine mapped from the command fd become
// anonymous memory: /proc/self/maps no longer lists the file, so it does
// not hold the kernel's device (ib_uverbs_remove_one waits for that). A
// memfd stands for the command fd, with an rxe CQ ring in it.
func TestReleaseMapsLetsTheFileGo(t *testing.T) {
	const name = "usb4v-release-maps-test"
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	const size = 4096
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	hdr[0] = 6 // log2_elem_size: 64-byte entries
	hdr[4] = 7 // index_mask: 8 entries
	if _, err := unix.Pwrite(fd, hdr[:], 0); err != nil {
		t.Fatal(err)
	}
	mapped := func() bool {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(b, []byte("/memfd:"+name))
	}
	cq, err := NewCQ(nil, fd, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	if err := cq.AttachRxe(nil, 0, size); err != nil {
		t.Fatal(err)
	}
	if !mapped() {
		t.Fatal("the ring is not mapped from the memfd")
	}
	if busy := removalRecord(t, cq.Join).Remove(); busy != 0 {
		t.Fatalf("the removal found %d objects busy with nothing held", busy)
	}
	k := cq.NewCursor()
	defer k.Free()
	if _, err := k.Start(); !errors.Is(err, unix.EIO) {
		t.Fatalf("start_poll after the removal: %v, want EIO", err)
	}
	if mapped() {
		t.Fatal("the memfd is still mapped after the removal")
	}
	if _, err := cq.Poll(make([]WC, 1)); !errors.Is(err, unix.EIO) {
		t.Fatalf("poll after the release: %v, want EIO", err)
	}
}

// The release of the rings (usb4v_cq_release_maps) waits for no holder:
// with the rxe CQ held by start_poll the removal reports it busy, and a
// later pass succeeds once end_poll let go.
func TestReleaseMapsBusyWhileHeld(t *testing.T) {
	e := newRxeEnv(t, QPTypeRC, false)
	dev := removalRecord(t, e.cq.Join)
	produceRxeCQE(t, e.f, 1)
	k := e.cq.NewCursor()
	defer k.Free()
	if _, err := k.Start(); err != nil {
		t.Fatal(err)
	}
	busy := dev.Remove()
	k.End()
	if busy != 1 {
		t.Fatalf("the removal found %d objects busy while start_poll held the CQ, want 1", busy)
	}
	if busy := dev.Remove(); busy != 0 {
		t.Fatalf("%d objects still busy after end_poll", busy)
	}
}
