package rdmanl

// conn is the seam between Handle and the kernel: it carries whole netlink
// datagrams. The real one is a NETLINK_RDMA socket (conn_linux.go); tests use
// a fake that answers requests from fixtures.
type conn interface {
	// Send writes one request datagram.
	Send(b []byte) error
	// Receive reads one datagram; it fails rather than block forever.
	Receive() ([]byte, error)
	Close() error
}
