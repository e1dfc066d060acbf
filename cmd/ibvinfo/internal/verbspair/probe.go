package verbspair

import (
	"fmt"
	"strings"

	"usb4verbs/internal/sysinfo"
	"usb4verbs/provider"
	"usb4verbs/provider/dataplane"
)

// probeCQE and the QP caps of the probe: the smallest objects that still
// exercise every offer (the usb4 DV queues take the kernel's default
// depths, independent of these).
const probeCQE = 16

// Negotiated is what Probe found out for one device.
type Negotiated struct {
	Kind provider.DriverKind
	// CQ and Send/Recv are the dataplane backend names in use; empty when
	// the object could not be made.
	CQ, Send, Recv string
	// CQReason and QPReason say why a usb4 offer was not taken.
	CQReason, QPReason string
	// QPSkipped says why no QP was created (Apple slot: max_qp 1).
	QPSkipped string
	// Err is the first failure while creating the probe objects.
	Err error
	// ProviderDV is the provider's dv_send setting (the caller fills it
	// in): whether applications' QPs get DV queues of ours.
	ProviderDV *sysinfo.ProviderDV
}

// Probe creates a throwaway PD, CQ and RC QP on ctx, attaches their
// data-path objects the way perf and cshim do, records the backends and
// destroys everything again. A device with a single QP (the usb4 Apple
// slot) gets no QP: the probe must not take the slot from an application.
func Probe(ctx *provider.Context) (n Negotiated) {
	n.Kind = ctx.Driver().Kind
	if a, err := ctx.QueryDevice(); err == nil && a.MaxQP <= 1 {
		n.QPSkipped = fmt.Sprintf("max_qp %d: its only QP is left to applications", a.MaxQP)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		n.Err = err
		return n
	}
	defer pd.Destroy() // last: after the CQ below
	cq, err := ctx.CreateCQ(provider.CQAttr{CQE: probeCQE})
	if err != nil {
		n.Err = err
		return n
	}
	dcq, err := attachCQ(ctx, cq, probeCQE)
	if err != nil {
		_ = cq.Destroy()
		n.Err = err
		return n
	}
	n.CQ, n.CQReason = dcq.Backend(), dcq.FallbackReason()
	if n.QPSkipped == "" {
		n.probeQP(ctx, pd, cq, dcq)
	}
	// Kernel object first, then its data-path object, as cshim does.
	_ = cq.Destroy()
	dcq.Close()
	return n
}

func (n *Negotiated) probeQP(ctx *provider.Context, pd *provider.PD, cq *provider.CQ, dcq *dataplane.CQ) {
	qp, err := pd.CreateQP(provider.QPInitAttr{Type: provider.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: provider.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		n.Err = err
		return
	}
	// The probe's own QP: nobody else's queue to take, so the offer is
	// validated with a queue attached now.
	dqp, err := attachQP(ctx, qp, dcq, dvNow)
	if err != nil {
		_ = qp.Destroy()
		n.Err = err
		return
	}
	n.Send, n.Recv, n.QPReason = dqp.SendBackend(), dqp.RecvBackend(), dqp.FallbackReason()
	_ = qp.Destroy()
	dqp.Close()
}

// String is the one-line report ibvinfo prints as the negotiated data path.
func (n Negotiated) String() string {
	var parts []string
	switch n.Kind {
	case provider.DriverRXE:
		if n.CQ == dataplane.BackendRxe && (n.QPSkipped != "" || n.Send == dataplane.BackendRxe && n.Recv == dataplane.BackendRxe) {
			parts = append(parts, "mapped rings (rxe)")
		} else if n.CQ != "" {
			parts = append(parts, fmt.Sprintf("cq %s, send %s, recv %s", n.CQ, orNone(n.Send), orNone(n.Recv)))
		}
	case provider.DriverUSB4:
		if n.CQ == "" {
			break
		}
		parts = append(parts, "kernel commands")
		if n.CQ == dataplane.BackendCQRing {
			parts = append(parts, "CQ ring: offered, validated, in use")
		} else {
			parts = append(parts, "CQ ring: not used ("+orNone(n.CQReason)+")")
		}
		switch {
		case n.QPSkipped != "":
			parts = append(parts, "DV: not probed ("+n.QPSkipped+")")
		case n.Send == dataplane.BackendDV:
			parts = append(parts, "DV: offered, a queue attached and validated on a probe QP; "+n.dvOwners())
		case n.Send != "":
			parts = append(parts, "DV: not used ("+orNone(n.QPReason)+")")
		}
	default:
		if n.CQ != "" {
			parts = append(parts, "kernel commands only (not a usb4 or rxe device: works only where the kernel driver implements the uverbs data-path commands)")
		}
	}
	if n.Err != nil {
		parts = append(parts, "probe failed: "+n.Err.Error())
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, "; ")
}

// dvOwners says whose the DV queues of applications' QPs are: the
// applications' own (the provider's default) or the provider's.
func (n Negotiated) dvOwners() string {
	switch {
	case n.ProviderDV == nil:
		return "DV queues of QPs: the provider's setting not read"
	case n.ProviderDV.On:
		return "DV queues of QPs: the provider's own, each at the QP's first post (dv_send on: " + n.ProviderDV.Source +
			"); an application's CREATE_QUEUE on a QP already posted to gets EBUSY"
	}
	return "DV queues of QPs: left to applications (the provider's own use is off: dv_send, " + n.ProviderDV.Source + ")"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
