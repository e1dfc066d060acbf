package provider

import "usb4verbs/uapi"

// GlobalRoute is the GRH part of an address vector.
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector: where packets go (ibv_ah_attr).
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool // RoCE needs it, with GRH.SGIDIndex and GRH.DGID
	Port        uint8
	UserHandle  uint64 // CreateAH only
}

func (a *AHAttr) toQPDest() uapi.IbUverbsQpDest {
	d := uapi.IbUverbsQpDest{
		Dgid: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, Dlid: a.DLID,
		SgidIndex: a.GRH.SGIDIndex, HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass,
		Sl: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, PortNum: a.Port,
	}
	if a.IsGlobal {
		d.IsGlobal = 1
	}
	return d
}

func ahFromQPDest(d *uapi.IbUverbsQpDest) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{DGID: d.Dgid, FlowLabel: d.FlowLabel, SGIDIndex: d.SgidIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		DLID: d.Dlid, SL: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal != 0, Port: d.PortNum,
	}
}

// AH is an address handle, used by UD sends.
type AH struct {
	pd         *PD
	handle     uint32
	attr       AHAttr
	driverResp []byte
	destroyed  bool
}

// CreateAH creates an address handle in the kernel (CREATE_AH write
// command). The usb4 kernel rejects AHs from userspace (EOPNOTSUPP, reported
// as ErrNotSupported).
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	const verb = "create ah"
	if err := pd.lock(verb); err != nil {
		return nil, err
	}
	defer pd.ctx.mu.Unlock()
	req := uapi.IbUverbsCreateAh{UserHandle: attr.UserHandle, PdHandle: pd.handle}
	d := attr.toQPDest()
	req.Attr = uapi.IbUverbsAhAttr{
		Grh: uapi.IbUverbsGlobalRoute{Dgid: d.Dgid, FlowLabel: d.FlowLabel, SgidIndex: d.SgidIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		Dlid: d.Dlid, Sl: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal, PortNum: d.PortNum,
	}
	var drv []byte
	if pd.ctx.info.Driver.Kind == DriverRXE {
		drv = make([]byte, uapi.SizeofRxeCreateAhResp) // rxe reports its AH index here
	}
	var resp uapi.IbUverbsCreateAhResp
	if err := pd.ctx.cmd.execWrite(&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_CREATE_AH, in: bytesOf(&req), out: bytesOf(&resp), uhwOut: drv}); err != nil {
		return nil, verbError(verb, err)
	}
	ah := &AH{pd: pd, handle: resp.AhHandle, attr: attr, driverResp: drv}
	pd.ctx.track(ah)
	return ah, nil
}

// Handle is the kernel's handle of the AH (what UD work requests carry).
func (ah *AH) Handle() uint32 { return ah.handle }

// Attr returns the attributes the AH was created with.
func (ah *AH) Attr() AHAttr { return ah.attr }

// PD returns the protection domain of the AH.
func (ah *AH) PD() *PD { return ah.pd }

// DriverResp is the raw driver response of create_ah (rxe: rxe_create_ah_resp).
func (ah *AH) DriverResp() []byte { return ah.driverResp }

// Destroy destroys the AH.
func (ah *AH) Destroy() error {
	const verb = "destroy ah"
	if ah == nil || ah.pd == nil {
		return verbError(verb, errInvalid("nil ah"))
	}
	c := ah.pd.ctx
	if err := c.lock(verb); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if ah.destroyed {
		return verbError(verb, errClosed("ah"))
	}
	if err := ah.destroyLocked(); err != nil {
		return verbError(verb, err)
	}
	c.untrack(ah)
	return nil
}

func (ah *AH) destroyRank() int { return rankAH }

func (ah *AH) destroyLocked() error {
	req := uapi.IbUverbsDestroyAh{AhHandle: ah.handle}
	err := ah.pd.ctx.cmd.destroy(uapi.UVERBS_OBJECT_AH, uapi.UVERBS_METHOD_AH_DESTROY,
		uapi.UVERBS_ATTR_DESTROY_AH_HANDLE, ah.handle, 0, nil,
		&writeCmd{cmd: uapi.IB_USER_VERBS_CMD_DESTROY_AH, in: bytesOf(&req)})
	if err != nil {
		return err
	}
	ah.destroyed = true
	return nil
}
