package provider

// Foreign objects: a fork() child's view of objects its parent created on a
// context the child adopted (AdoptFDKnown on the inherited command fd). The
// kernel serves the parent's ucontext for the child too, so a control verb
// on such an object goes to the kernel with the object's handle, as
// rdma-core's providers do there (ibv_cmd_query_qp and the like on the
// parent's struct): the answer is the kernel's, including a destroy, which
// destroys the object for the parent as well.
//
// A foreign object is not tracked: closing the child's context leaves it to
// the parent, as closing the child's copy of the command fd does in rdma-core
// (the kernel keeps the file while the parent has it open).

// ForeignPD is the PD with the kernel handle handle on c's ucontext.
func (c *Context) ForeignPD(handle uint32) *PD {
	return &PD{ctx: c, handle: handle}
}

// ForeignCQ is the CQ with the kernel handle handle and cqe entries.
func (c *Context) ForeignCQ(handle, cqe uint32) *CQ {
	return &CQ{ctx: c, handle: handle, cqe: cqe}
}

// ForeignQP is the QP of type typ with the kernel handle handle and number
// qpn, on pd.
func (pd *PD) ForeignQP(handle, qpn uint32, typ QPType) *QP {
	return &QP{pd: pd, handle: handle, qpn: qpn, init: QPInitAttr{Type: typ}}
}

// ForeignSRQ is the SRQ with the kernel handle handle, on pd.
func (pd *PD) ForeignSRQ(handle uint32) *SRQ {
	return &SRQ{pd: pd, handle: handle}
}

// ForeignProviderSRQ is a provider SRQ of the parent's (no kernel object:
// srq.go), on pd, with the sizes attr its data path holds. There is no
// kernel answer to give for it: the child's verbs act on the child's copy of
// its data path, and a destroy there leaves the parent's SRQ alone.
func (pd *PD) ForeignProviderSRQ(handle uint32, attr SRQAttr) *SRQ {
	return &SRQ{pd: pd, handle: handle, provider: true, attr: attr}
}

// ForeignMR is the MR with the kernel handle handle and its keys and range
// (ibv_mr's), on pd.
func (pd *PD) ForeignMR(handle, lkey, rkey uint32, addr, length uint64) *MR {
	return &MR{pd: pd, handle: handle, lkey: lkey, rkey: rkey, addr: uintptr(addr), length: length, iova: addr, dmabufFD: -1}
}

// ForeignAH is the AH with the kernel handle handle, on pd.
func (pd *PD) ForeignAH(handle uint32) *AH {
	return &AH{pd: pd, handle: handle}
}

// ForeignMW is the memory window of mwType with the kernel handle handle and
// rkey, on pd.
func (pd *PD) ForeignMW(handle, rkey uint32, mwType uint8) *MW {
	return &MW{pd: pd, handle: handle, rkey: rkey, mwType: mwType}
}
