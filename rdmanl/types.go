package rdmanl

// Device is one RDMA device as RDMA_NLDEV_CMD_GET reports it.
type Device struct {
	Index           uint32
	Name            string
	NodeGUID        uint64 // host order value of the big-endian GUID as the kernel reports it
	SysImageGUID    uint64
	NodeType        uint8 // RDMA_NODE_IB_CA = 1 ...
	FirmwareVersion string
	NumPorts        uint32
	Protocol        string // RDMA_NLDEV_ATTR_DEV_PROTOCOL ("roce", "ib", "iw", "opa"; "" if absent)
	DriverID        uint32 // from the chardev query when available, else 0
}

// Port is one port of an RDMA device as RDMA_NLDEV_CMD_PORT_GET reports it.
type Port struct {
	DeviceIndex uint32
	DeviceName  string
	Port        uint32
	State       uint8 // IB port state (1 DOWN .. 4 ACTIVE)
	PhysState   uint8
	LID, SMLID  uint32
	LinkLayer   string // "Ethernet" / "InfiniBand"; derived from Protocol (roce/iw -> Ethernet)
	NetdevIndex uint32
	NetdevName  string
	CapFlags    uint64
}

// Chardev is the uverbs character device of an RDMA device.
type Chardev struct {
	Path       string // /dev/infiniband/uverbsN
	Name       string // uverbsN
	ABIVersion uint64
	DriverID   uint32 // RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID
	Dev        uint64 // dev_t
}
