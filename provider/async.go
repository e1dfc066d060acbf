package provider

import (
	"fmt"
	"time"

	"usb4verbs/uapi"
)

// AsyncEvent is one event from the context's async event fd.
type AsyncEvent struct {
	Type uint32 // uapi.IB_EVENT_*
	// Element is what the kernel sent: the user handle of the CQ, QP or SRQ,
	// or the port number.
	Element uint64
	CQ      *CQ   // set for CQ events when the CQ is still known
	QP      *QP   // set for QP events
	SRQ     *SRQ  // set for SRQ events
	Port    uint8 // set for port events
}

func (e AsyncEvent) String() string {
	return fmt.Sprintf("%s (element %#x)", asyncEventName(e.Type), e.Element)
}

// GetAsyncEvent waits up to timeout (negative: forever) for the next async
// event. A timeout returns an error wrapping ETIMEDOUT; a context without an
// async fd returns ErrNotSupported.
func (c *Context) GetAsyncEvent(timeout time.Duration) (AsyncEvent, error) {
	const verb = "get async event"
	if err := c.lock(verb); err != nil {
		return AsyncEvent{}, err
	}
	fd := c.asyncFD
	c.mu.Unlock()
	if fd < 0 {
		return AsyncEvent{}, verbError(verb, errNotSupported("no async event fd", 0))
	}
	var d uapi.IbUverbsAsyncEventDesc
	if err := readEvent(c.cmd.sys, fd, timeout, bytesOf(&d)); err != nil {
		return AsyncEvent{}, verbError(verb, err)
	}
	ev := AsyncEvent{Type: d.EventType, Element: d.Element}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch d.EventType {
	case uapi.IB_EVENT_CQ_ERR:
		ev.CQ = c.cqs[d.Element]
	case uapi.IB_EVENT_QP_FATAL, uapi.IB_EVENT_QP_REQ_ERR, uapi.IB_EVENT_QP_ACCESS_ERR,
		uapi.IB_EVENT_COMM_EST, uapi.IB_EVENT_SQ_DRAINED, uapi.IB_EVENT_PATH_MIG,
		uapi.IB_EVENT_PATH_MIG_ERR, uapi.IB_EVENT_QP_LAST_WQE_REACHED:
		ev.QP = c.qps[d.Element]
	case uapi.IB_EVENT_SRQ_ERR, uapi.IB_EVENT_SRQ_LIMIT_REACHED:
		ev.SRQ = c.srqs[d.Element]
	case uapi.IB_EVENT_PORT_ACTIVE, uapi.IB_EVENT_PORT_ERR, uapi.IB_EVENT_LID_CHANGE,
		uapi.IB_EVENT_PKEY_CHANGE, uapi.IB_EVENT_SM_CHANGE, uapi.IB_EVENT_CLIENT_REREGISTER,
		uapi.IB_EVENT_GID_CHANGE:
		ev.Port = uint8(d.Element)
	}
	return ev, nil
}

func asyncEventName(t uint32) string {
	names := map[uint32]string{
		uapi.IB_EVENT_CQ_ERR: "CQ_ERR", uapi.IB_EVENT_QP_FATAL: "QP_FATAL",
		uapi.IB_EVENT_QP_REQ_ERR: "QP_REQ_ERR", uapi.IB_EVENT_QP_ACCESS_ERR: "QP_ACCESS_ERR",
		uapi.IB_EVENT_COMM_EST: "COMM_EST", uapi.IB_EVENT_SQ_DRAINED: "SQ_DRAINED",
		uapi.IB_EVENT_PATH_MIG: "PATH_MIG", uapi.IB_EVENT_PATH_MIG_ERR: "PATH_MIG_ERR",
		uapi.IB_EVENT_DEVICE_FATAL: "DEVICE_FATAL", uapi.IB_EVENT_PORT_ACTIVE: "PORT_ACTIVE",
		uapi.IB_EVENT_PORT_ERR: "PORT_ERR", uapi.IB_EVENT_LID_CHANGE: "LID_CHANGE",
		uapi.IB_EVENT_PKEY_CHANGE: "PKEY_CHANGE", uapi.IB_EVENT_SM_CHANGE: "SM_CHANGE",
		uapi.IB_EVENT_SRQ_ERR: "SRQ_ERR", uapi.IB_EVENT_SRQ_LIMIT_REACHED: "SRQ_LIMIT_REACHED",
		uapi.IB_EVENT_QP_LAST_WQE_REACHED: "QP_LAST_WQE_REACHED",
		uapi.IB_EVENT_CLIENT_REREGISTER:   "CLIENT_REREGISTER", uapi.IB_EVENT_GID_CHANGE: "GID_CHANGE",
		uapi.IB_EVENT_WQ_FATAL: "WQ_FATAL",
	}
	if n, ok := names[t]; ok {
		return "IB_EVENT_" + n
	}
	return fmt.Sprintf("event %d", t)
}
