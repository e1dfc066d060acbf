//go:build cgo

package main

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"usb4verbs/cmd/ibvinfo/internal/verbspair"
	"usb4verbs/internal/sysinfo"
	"usb4verbs/provider"
)

// The data path is provider/dataplane's C engine, so it exists only in cgo
// builds; without cgo, perf reports it is not available (exit 4) and the
// negotiated data path reads "not reported".
func init() {
	newDataPath = func(po perfOptions) (dataPath, error) {
		return verbsDataPath{timeout: po.timeout, gidIndex: po.gidIndex}, nil
	}
	dataPathOf = func(ctx *provider.Context) string {
		n := verbspair.Probe(ctx)
		dv := sysinfo.ReadProviderDV("/", true)
		n.ProviderDV = &dv
		return n.String()
	}
}

// verbsDataPath opens endpoints built by verbspair.
type verbsDataPath struct {
	timeout  time.Duration
	gidIndex int
}

func (d verbsDataPath) Open(dev string, size int) (endpoint, error) {
	ep, err := verbspair.Open(verbspair.Config{Device: dev, Size: size, GIDIndex: d.gidIndex, Timeout: d.timeout,
		DVSend: sysinfo.ReadProviderDV("/", true).On})
	if err != nil {
		return nil, err
	}
	return verbsEndpoint{ep: ep, dev: dev}, nil
}

// verbsEndpoint adapts a verbspair.Endpoint to perf's exchange format.
type verbsEndpoint struct {
	ep  *verbspair.Endpoint
	dev string
}

func (v verbsEndpoint) Info() endpointInfo {
	i := v.ep.Info()
	return endpointInfo{Device: v.dev, QPN: i.QPN, PSN: i.PSN, GID: net.IP(i.GID[:]).String(), LID: i.LID,
		MTU: i.MTU, RKey: i.RKey, Addr: i.Addr, Size: i.Size}
}

func (v verbsEndpoint) Connect(r endpointInfo) error {
	p := verbspair.PeerInfo{QPN: r.QPN, PSN: r.PSN, LID: r.LID, MTU: r.MTU, RKey: r.RKey, Addr: r.Addr, Size: r.Size}
	if r.GID != "" {
		ip := net.ParseIP(r.GID)
		if ip == nil {
			return fmt.Errorf("connect: peer GID %q is not an IPv6-style address: %w", r.GID, unix.EINVAL)
		}
		copy(p.GID[:], ip.To16())
	}
	return v.ep.Connect(p)
}

func (v verbsEndpoint) PingPong(initiator bool) error { return v.ep.PingPong(initiator) }
func (v verbsEndpoint) WriteBurst(n int) error        { return v.ep.WriteBurst(n) }
func (v verbsEndpoint) Close() error                  { return v.ep.Close() }
func (v verbsEndpoint) Backends() string              { return v.ep.Backends() }
