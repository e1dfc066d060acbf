package verbspair

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
	"usb4verbs/uapi"
)

// Config describes the endpoint to open.
type Config struct {
	Device string
	// Size is the message size in bytes (1 .. MaxSize).
	Size int
	// GIDIndex picks the source GID; -1 chooses (ChooseGID).
	GIDIndex int
	// Timeout bounds each wait for completions; 0 means DefaultTimeout.
	Timeout time.Duration
	// DVSend: on usb4, a DV send queue of ours at the QP's first post, as
	// the provider attaches one with its dv_send setting; otherwise
	// kernel commands, its default (sysinfo.ReadProviderDV).
	DVSend bool
}

// MaxSize bounds a message: the buffer holds two of them.
const MaxSize = 1 << 30

// DefaultTimeout is how long a wait for the peer lasts by default. rxe's
// RC retry budget at Timeout 14 and RetryCnt 7 is about half a second per
// message, so this leaves room for slow (emulated) machines.
const DefaultTimeout = 10 * time.Second

// port is the device port perf uses: usb4 and rxe devices have one.
const port = 1

// linkLayerEthernet is IB_LINK_LAYER_ETHERNET, the query_port link_layer
// of RoCE ports (linux:include/rdma/ib_verbs.h; uapi/ does not carry it).
const linkLayerEthernet = 2

// Queue depths: a WRITE burst of up to maxBurst WRs is in flight at once;
// recvDepth receives stay posted so a SEND never meets an empty RQ.
const (
	maxBurst  = 64
	recvDepth = 16
	sqDepth   = maxBurst + 8
	cqDepth   = sqDepth + recvDepth + 8
)

// PeerInfo is what one endpoint tells the other out of band.
type PeerInfo struct {
	QPN  uint32
	PSN  uint32 // 24 bits
	GID  provider.GID
	LID  uint16
	MTU  int // active MTU in bytes
	RKey uint32
	Addr uint64 // target of the peer's SENDs and WRITEs, Size bytes
	Size int
}

// poller is the CQ as the waits see it (a double stands in on the host).
type poller interface {
	Poll(wc []dataplane.WC) (int, error)
}

// Endpoint is one side of an RC connection.
type Endpoint struct {
	cfg     Config
	timeout time.Duration

	ctx  *provider.Context
	pd   *provider.PD
	buf  []byte
	mr   *provider.MR
	cq   *provider.CQ
	dcq  *dataplane.CQ
	qp   *provider.QP
	dqp  *dataplane.QP
	poll poller

	portAttr provider.PortAttr
	gid      provider.GIDEntry
	psn      uint32
	remote   *PeerInfo

	wc          []dataplane.WC
	sendsReady  int // completions polled, not yet consumed by a wait
	recvsReady  int
	recvsPosted int
	nextWrID    uint64
	checked     bool // the first received message was compared with the pattern
	recvWRs     []dataplane.RecvWR
	recvSGE     []dataplane.SGE
}

// Open creates the endpoint's objects on cfg.Device. On error nothing is
// left behind.
func Open(cfg Config) (ep *Endpoint, err error) {
	if cfg.Size <= 0 || cfg.Size > MaxSize {
		return nil, fmt.Errorf("open endpoint on %s: message size %d outside 1..%d: %w", cfg.Device, cfg.Size, MaxSize, unix.EINVAL)
	}
	e := &Endpoint{cfg: cfg, timeout: cfg.Timeout, wc: make([]dataplane.WC, 32)}
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	defer func() {
		if err != nil {
			e.Close()
			err = fmt.Errorf("open endpoint on %s: %w", cfg.Device, err)
		}
	}()
	if e.ctx, err = provider.Open(cfg.Device); err != nil {
		return nil, err
	}
	if e.portAttr, err = e.ctx.QueryPort(port); err != nil {
		return nil, err
	}
	if e.portAttr.State != uapi.IB_PORT_ACTIVE {
		return nil, fmt.Errorf("port %d is not ACTIVE (state %d): %w", port, e.portAttr.State, unix.ENETDOWN)
	}
	gids, err := e.ctx.GIDTable(port)
	if err != nil {
		return nil, err
	}
	if e.gid, err = ChooseGID(gids, cfg.GIDIndex); err != nil {
		return nil, err
	}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return nil, err
	}
	n := (2*cfg.Size + unix.Getpagesize() - 1) &^ (unix.Getpagesize() - 1)
	if e.buf, err = unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	for i := range cfg.Size { // both sides send this pattern: the first message received is checked
		e.buf[i] = patternByte(i)
	}
	a := uintptr(unsafe.Pointer(&e.buf[0]))
	access := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE)
	if e.mr, err = e.pd.RegMR(a, uint64(n), uint64(a), access); err != nil {
		return nil, err
	}
	if err = e.createQueues(); err != nil {
		return nil, err
	}
	e.psn = rand.Uint32() & 0xFFFFFF
	return e, nil
}

// createQueues makes the CQ and RC QP and attaches their data-path
// objects to the backend the device offers.
func (e *Endpoint) createQueues() error {
	var err error
	if e.cq, err = e.ctx.CreateCQ(provider.CQAttr{CQE: cqDepth}); err != nil {
		return err
	}
	if e.dcq, err = attachCQ(e.ctx, e.cq, cqDepth); err != nil {
		return err
	}
	e.poll = e.dcq
	e.qp, err = e.pd.CreateQP(provider.QPInitAttr{Type: provider.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: provider.QPCap{MaxSendWR: sqDepth, MaxRecvWR: recvDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	e.dqp, err = attachQP(e.ctx, e.qp, e.dcq, dvSetting(e.cfg.DVSend))
	return err
}

// attachCQ creates the data-path CQ for cq: rxe rings on rxe, the usb4
// mapped ring when the kernel offers a valid one, kernel commands
// otherwise (the same choice cshim makes for libibverbs applications).
func attachCQ(ctx *provider.Context, cq *provider.CQ, requested uint32) (*dataplane.CQ, error) {
	d, err := dataplane.NewCQ(nil, ctx.CmdFD(), cq.Handle(), cq.CQE())
	if err != nil {
		return nil, err
	}
	switch ctx.Driver().Kind {
	case provider.DriverRXE:
		mi, ok := cq.RxeQueue()
		if !ok {
			d.Close()
			return nil, fmt.Errorf("create cq: rxe answered no ring mmap info: %w", unix.EPROTO)
		}
		if err := d.AttachRxe(nil, mi.Offset, mi.Size); err != nil {
			d.Close()
			return nil, err
		}
	case provider.DriverUSB4:
		if tail := cq.DriverResp(); len(tail) >= dataplane.SizeofCreateCQTail {
			d.TryMappedRing(tail, requested)
		}
	}
	return d, nil
}

// How attachQP treats a usb4 QP's DV offer.
type dvUse int

const (
	dvLeave    dvUse = iota // kernel commands: the provider's default
	dvDeferred              // a DV queue of ours at the first post (dv_send on)
	dvNow                   // a DV queue now: the probe validates the offer on its own QP
)

func dvSetting(on bool) dvUse {
	if on {
		return dvDeferred
	}
	return dvLeave
}

// attachQP creates the data-path QP for qp (rxe rings, or on usb4 kernel
// commands, with a DV send queue as use says when QUERY_CAPS and
// CREATE_QUEUE answer).
func attachQP(ctx *provider.Context, qp *provider.QP, dcq *dataplane.CQ, use dvUse) (*dataplane.QP, error) {
	c := qp.InitAttr().Cap
	d, err := dataplane.NewQP(dataplane.QPConfig{CmdFd: ctx.CmdFD(), Handle: qp.Handle(), QPNum: qp.QPN(),
		Type: dataplane.QPTypeRC, MaxSendWR: c.MaxSendWR, MaxSendSGE: c.MaxSendSGE, MaxRecvSGE: c.MaxRecvSGE, MaxInline: c.MaxInlineData,
		SendCQ: dcq, RecvCQ: dcq})
	if err != nil {
		return nil, err
	}
	switch drv := ctx.Driver(); drv.Kind {
	case provider.DriverRXE:
		rq, sq, ok := qp.RxeQueues()
		if !ok {
			d.Close()
			return nil, fmt.Errorf("create qp: rxe answered no ring mmap info: %w", unix.EPROTO)
		}
		if err := d.AttachRxe(nil, sq.Offset, sq.Size, nil, rq.Offset, rq.Size); err != nil {
			d.Close()
			return nil, err
		}
	case provider.DriverUSB4:
		switch use { // each falls back to kernel commands by itself
		case dvNow:
			d.TryDV(drv.ID)
		case dvDeferred:
			d.DeferDV(drv.ID)
		default:
			d.LeaveDV("the provider's own DV use is off (dv_send)")
		}
	}
	return d, nil
}

// ChooseGID picks the source GID: the entry at index want when want >= 0;
// otherwise a RoCE v2 IPv4-mapped GID (routable, what rdma_cm picks for
// IPv4), then any RoCE v2 GID, then the first non-zero entry.
func ChooseGID(entries []provider.GIDEntry, want int) (provider.GIDEntry, error) {
	if want >= 0 {
		for _, e := range entries {
			if int(e.Index) == want && e.GID != (provider.GID{}) {
				return e, nil
			}
		}
		return provider.GIDEntry{}, fmt.Errorf("gid index %d: empty or not in the table: %w", want, unix.EINVAL)
	}
	best, bestRank := provider.GIDEntry{}, 0
	for _, e := range entries {
		if e.GID == (provider.GID{}) {
			continue
		}
		rank := 1
		if e.Type == provider.GIDTypeRoCEv2 {
			rank = 2
			if net.IP(e.GID[:]).To4() != nil {
				rank = 3
			}
		}
		if rank > bestRank {
			best, bestRank = e, rank
		}
	}
	if bestRank == 0 {
		return provider.GIDEntry{}, fmt.Errorf("port %d has an empty GID table (for usb4: set roce_netdev): %w", port, unix.ENODATA)
	}
	return best, nil
}

// Info is what the peer needs to reach this endpoint.
func (e *Endpoint) Info() PeerInfo {
	return PeerInfo{QPN: e.qp.QPN(), PSN: e.psn, GID: e.gid.GID, LID: e.portAttr.LID,
		MTU: MTUBytes(e.portAttr.ActiveMTU), RKey: e.mr.RKey(), Addr: e.addr(e.cfg.Size), Size: e.cfg.Size}
}

// Backends names the data paths in use: CQ, QP send and QP receive.
func (e *Endpoint) Backends() string {
	return fmt.Sprintf("cq %s, send %s, recv %s", e.dcq.Backend(), e.dqp.SendBackend(), e.dqp.RecvBackend())
}

func (e *Endpoint) addr(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&e.buf[off]))) }

// MTUBytes maps enum ib_mtu to bytes (0 for an unknown value).
func MTUBytes(m uint8) int {
	if m >= uapi.IB_MTU_256 && m <= uapi.IB_MTU_4096 {
		return 128 << m
	}
	return 0
}

// MTUEnum maps bytes to enum ib_mtu, 0 for a size that is not one.
func MTUEnum(b int) uint8 {
	for m := uint8(uapi.IB_MTU_256); m <= uapi.IB_MTU_4096; m++ {
		if 128<<m == b {
			return m
		}
	}
	return 0
}

// Connect moves the QP through INIT, RTR and RTS towards remote, with the
// receives the peer's SENDs need posted before RTR.
func (e *Endpoint) Connect(remote PeerInfo) error {
	const verb = "connect"
	if e.qp == nil {
		return fmt.Errorf("%s: endpoint closed: %w", verb, unix.EBADF)
	}
	if e.remote != nil {
		return fmt.Errorf("%s: already connected: %w", verb, unix.EINVAL)
	}
	switch {
	case remote.QPN == 0 || remote.QPN > 0xFFFFFF:
		return fmt.Errorf("%s: peer QPN %#x: %w", verb, remote.QPN, unix.EINVAL)
	case remote.PSN > 0xFFFFFF:
		return fmt.Errorf("%s: peer PSN %#x beyond 24 bits: %w", verb, remote.PSN, unix.EINVAL)
	case remote.Size != e.cfg.Size:
		return fmt.Errorf("%s: peer message size %d, ours %d: %w", verb, remote.Size, e.cfg.Size, unix.EINVAL)
	case remote.GID == (provider.GID{}) && remote.LID == 0:
		return fmt.Errorf("%s: peer has neither GID nor LID: %w", verb, unix.EINVAL)
	}
	step := func(name string, attr provider.QPAttr, mask uint32) error {
		if err := e.qp.Modify(&attr, mask); err != nil {
			return fmt.Errorf("%s: to %s: %w", verb, name, err)
		}
		e.dqp.SetState(int(attr.State))
		return nil
	}
	access := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE)
	if err := step("INIT", provider.QPAttr{State: uapi.IB_QPS_INIT, Port: port, AccessFlags: access},
		uapi.IB_QP_STATE|uapi.IB_QP_PKEY_INDEX|uapi.IB_QP_PORT|uapi.IB_QP_ACCESS_FLAGS); err != nil {
		return err
	}
	if err := e.postRecvs(recvDepth); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	mtu := e.portAttr.ActiveMTU
	if r := MTUEnum(remote.MTU); r != 0 && r < mtu {
		mtu = r
	}
	ah := provider.AHAttr{Port: port, DLID: remote.LID}
	if e.portAttr.LinkLayer == linkLayerEthernet || remote.LID == 0 {
		ah.IsGlobal = true
		ah.GRH = provider.GlobalRoute{DGID: remote.GID, SGIDIndex: uint8(e.gid.Index), HopLimit: 64}
	}
	rtr := provider.QPAttr{State: uapi.IB_QPS_RTR, PathMTU: mtu, DestQPN: remote.QPN, RQPSN: remote.PSN,
		MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: ah}
	if err := step("RTR", rtr, uapi.IB_QP_STATE|uapi.IB_QP_AV|uapi.IB_QP_PATH_MTU|uapi.IB_QP_DEST_QPN|
		uapi.IB_QP_RQ_PSN|uapi.IB_QP_MAX_DEST_RD_ATOMIC|uapi.IB_QP_MIN_RNR_TIMER); err != nil {
		return err
	}
	rts := provider.QPAttr{State: uapi.IB_QPS_RTS, SQPSN: e.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	if err := step("RTS", rts, uapi.IB_QP_STATE|uapi.IB_QP_SQ_PSN|uapi.IB_QP_TIMEOUT|uapi.IB_QP_RETRY_CNT|
		uapi.IB_QP_RNR_RETRY|uapi.IB_QP_MAX_QP_RD_ATOMIC); err != nil {
		return err
	}
	e.remote = &remote
	return nil
}

func (e *Endpoint) postRecvs(n int) error {
	if e.recvSGE == nil {
		e.recvSGE = []dataplane.SGE{{Addr: e.addr(e.cfg.Size), Length: uint32(e.cfg.Size), LKey: e.mr.LKey()}}
	}
	wrs := e.recvWRs[:0]
	for range n {
		e.nextWrID++
		wrs = append(wrs, dataplane.RecvWR{WrID: e.nextWrID, SGEs: e.recvSGE})
	}
	e.recvWRs = wrs // the engine copies WRs into C memory, so the slice is reused
	if err := e.dqp.PostRecv(wrs); err != nil {
		return err
	}
	e.recvsPosted += n
	return nil
}

func (e *Endpoint) connected(verb string) error {
	if e.qp == nil {
		return fmt.Errorf("%s: endpoint closed: %w", verb, unix.EBADF)
	}
	if e.remote == nil {
		return fmt.Errorf("%s: not connected: %w", verb, unix.ENOTCONN)
	}
	return nil
}

// PingPong runs one SEND/RECV round trip with the peer. The initiator
// sends and waits for the echo; the other side waits for the message and
// answers it.
func (e *Endpoint) PingPong(initiator bool) error {
	const verb = "ping-pong"
	if err := e.connected(verb); err != nil {
		return err
	}
	if initiator {
		if err := e.send(verb); err != nil {
			return err
		}
		return e.wait(verb, 1, 1)
	}
	if err := e.wait(verb, 0, 1); err != nil {
		return err
	}
	if err := e.send(verb); err != nil {
		return err
	}
	return e.wait(verb, 1, 0)
}

func (e *Endpoint) send(verb string) error {
	e.nextWrID++
	err := e.dqp.PostSend([]dataplane.SendWR{{WrID: e.nextWrID, Opcode: dataplane.WRSend, Flags: dataplane.SendSignaled,
		SGEs: []dataplane.SGE{{Addr: e.addr(0), Length: uint32(e.cfg.Size), LKey: e.mr.LKey()}}}})
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	return nil
}

// WriteBurst posts n RDMA WRITEs of the message size into the peer's
// buffer and waits until they completed. Only the last WR of each batch
// is signaled: RC completes in order, and an earlier failure surfaces as
// an error completion anyway.
func (e *Endpoint) WriteBurst(n int) error {
	const verb = "write burst"
	if err := e.connected(verb); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%s: %d writes: %w", verb, n, unix.EINVAL)
	}
	sge := []dataplane.SGE{{Addr: e.addr(0), Length: uint32(e.cfg.Size), LKey: e.mr.LKey()}}
	wrs := make([]dataplane.SendWR, 0, maxBurst)
	for n > 0 {
		k := min(n, maxBurst)
		wrs = wrs[:0]
		for i := range k {
			e.nextWrID++
			w := dataplane.SendWR{WrID: e.nextWrID, Opcode: dataplane.WRRDMAWrite, SGEs: sge,
				RemoteAddr: e.remote.Addr, RKey: e.remote.RKey}
			if i == k-1 {
				w.Flags = dataplane.SendSignaled
			}
			wrs = append(wrs, w)
		}
		if err := e.dqp.PostSend(wrs); err != nil {
			return fmt.Errorf("%s: %w", verb, err)
		}
		if err := e.wait(verb, 1, 0); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// A wait polls without pause for spinFor (lowest latency), then yields the
// CPU between polls until yieldFor (rxe runs its packet tasks in softirq
// context, which a spinning thread on a small machine starves: a yield
// lets ksoftirqd run without the latency of a sleep), then sleeps between
// polls so a slow peer does not cost a core.
const (
	spinFor  = 50 * time.Microsecond
	yieldFor = 5 * time.Millisecond
	sleepFor = 50 * time.Microsecond
)

// wait polls until sends send completions and recvs receive completions
// are available and consumes them; receives consumed are posted again.
// A failed completion or the deadline ends it with an error.
func (e *Endpoint) wait(verb string, sends, recvs int) error {
	start := time.Now()
	deadline := start.Add(e.timeout)
	spinning := true
	empty := 0
	for e.sendsReady < sends || e.recvsReady < recvs {
		n, err := e.poll.Poll(e.wc)
		if err != nil {
			return fmt.Errorf("%s: %w", verb, err)
		}
		for _, c := range e.wc[:n] {
			if err := e.account(c); err != nil {
				return fmt.Errorf("%s: %w", verb, err)
			}
		}
		if n > 0 {
			continue
		}
		empty++
		if spinning && empty%64 != 0 {
			continue // reading the clock on every empty poll would cost more than the poll
		}
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("%s: peer did not answer within %s: %w", verb, e.timeout, unix.ETIMEDOUT)
		}
		switch waited := now.Sub(start); {
		case waited < spinFor:
		case waited < yieldFor:
			spinning = false
			_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		default:
			time.Sleep(sleepFor)
		}
	}
	e.sendsReady -= sends
	e.recvsReady -= recvs
	if recvs > 0 && !e.checked && e.buf != nil {
		// Once, not per message: comparing every message would distort
		// the latency measured for large sizes.
		e.checked = true
		if i := firstMismatch(e.buf[e.cfg.Size : 2*e.cfg.Size]); i >= 0 {
			return fmt.Errorf("%s: received message differs from what the peer sent at byte %d: %w", verb, i, unix.EBADMSG)
		}
	}
	if recvs > 0 && e.dqp != nil {
		e.recvsPosted -= recvs
		if err := e.postRecvs(recvs); err != nil {
			return fmt.Errorf("%s: repost receives: %w", verb, err)
		}
	}
	return nil
}

func patternByte(i int) byte { return byte(i*7 + 1) }

// firstMismatch is the first index where b departs from the pattern, or -1.
func firstMismatch(b []byte) int {
	for i, v := range b {
		if v != patternByte(i) {
			return i
		}
	}
	return -1
}

// account counts one completion, or says why it failed.
func (e *Endpoint) account(c dataplane.WC) error {
	if c.Status != dataplane.WCSuccess {
		return &CompletionError{Status: c.Status, Opcode: c.Opcode, WrID: c.WrID}
	}
	if c.Opcode&dataplane.WCRecv != 0 {
		if int(c.ByteLen) != e.cfg.Size {
			return fmt.Errorf("received %d bytes, expected %d: %w", c.ByteLen, e.cfg.Size, unix.EMSGSIZE)
		}
		e.recvsReady++
		return nil
	}
	e.sendsReady++
	return nil
}

// CompletionError is a work completion with an error status. It wraps
// EIO; Status is the enum ibv_wc_status value.
type CompletionError struct {
	Status, Opcode uint32
	WrID           uint64
}

func (e *CompletionError) Error() string {
	s := fmt.Sprintf("work completion %d failed: %s", e.WrID, StatusName(e.Status))
	switch e.Status {
	case dataplane.WCRetryExcErr:
		s += " (the peer did not acknowledge: unreachable, or its QP is not connected)"
	case dataplane.WCRemAccessErr:
		s += " (the peer's rkey or address was refused)"
	}
	return s
}

func (e *CompletionError) Unwrap() error { return unix.EIO }

// StatusName names an enum ibv_wc_status value.
func StatusName(s uint32) string {
	switch s {
	case dataplane.WCSuccess:
		return "success"
	case dataplane.WCLocLenErr:
		return "local length error"
	case dataplane.WCLocProtErr:
		return "local protection error"
	case dataplane.WCWRFlushErr:
		return "flushed"
	case dataplane.WCRemAccessErr:
		return "remote access error"
	case dataplane.WCRetryExcErr:
		return "transport retry counter exceeded"
	case dataplane.WCRNRRetryExcErr:
		return "RNR retry counter exceeded"
	case dataplane.WCGeneralErr:
		return "general error"
	}
	return fmt.Sprintf("status %d", s)
}

// Close destroys the endpoint's objects; it may be called more than once.
// Kernel objects go before their data-path objects, QP before CQ, as
// cshim does.
func (e *Endpoint) Close() error {
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, provider.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if e.qp != nil {
		keep(e.qp.Destroy())
		e.qp = nil
	}
	if e.dqp != nil {
		e.dqp.Close()
		e.dqp = nil
	}
	if e.cq != nil {
		keep(e.cq.Destroy())
		e.cq = nil
	}
	if e.dcq != nil {
		e.dcq.Close()
		e.dcq = nil
	}
	if e.ctx != nil {
		keep(e.ctx.Close()) // the MR and PD with it
		e.ctx = nil
	}
	if e.buf != nil {
		keep(unix.Munmap(e.buf))
		e.buf = nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("close endpoint on %s: %w", e.cfg.Device, errors.Join(errs...))
	}
	return nil
}
