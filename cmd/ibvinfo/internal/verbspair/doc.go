// Package verbspair builds one side of an RC connection on an RDMA device
// the way our provider drives it, for ibvinfo's self-test and data-path
// report: a PD, a registered mmap'd buffer, a CQ and an RC QP created by
// package provider, with their data-path objects from provider/dataplane
// attached to the best backend the device offers (rxe mapped rings; usb4
// mapped CQ ring and DV send queues when the kernel offers them, kernel
// commands otherwise).
//
// An Endpoint publishes its PeerInfo (QPN, PSN, GID, LID, MTU, rkey,
// buffer address), connects to a peer's through INIT, RTR and RTS, and
// then runs SEND/RECV ping-pongs (latency) and RDMA WRITE bursts
// (bandwidth). Every wait for a completion has a deadline: a peer that
// never answers gives an error wrapping ETIMEDOUT, never a hang.
//
// Probe reports which backends the provider negotiates on a device by
// creating a throwaway CQ and QP and destroying them again.
//
// The buffer is anonymous mmap'd memory (never the Go heap: the kernel
// pins it for the MR). Its first Size bytes are the send source, the next
// Size bytes the target of the peer's SENDs and RDMA WRITEs.
package verbspair
