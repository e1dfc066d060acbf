package rdmanl

import (
	"strings"

	"usb4verbs/uapi"
)

// decodeDevice reads one RDMA_NLDEV_CMD_GET reply
// (linux:drivers/infiniband/core/nldev.c fill_dev_info). Index and name are
// required; everything else is optional, and unknown attributes are skipped.
func decodeDevice(b []byte) (Device, error) {
	var (
		d                 Device
		hasIndex, hasName bool
	)
	ad := newAttrDecoder(b)
	for ad.Next() {
		switch ad.Type() {
		case uapi.RDMA_NLDEV_ATTR_DEV_INDEX:
			d.Index, hasIndex = ad.Uint32(), true
		case uapi.RDMA_NLDEV_ATTR_DEV_NAME:
			d.Name, hasName = ad.String(), true
		case uapi.RDMA_NLDEV_ATTR_PORT_INDEX:
			// In a device reply this is rdma_end_port(): the port count.
			d.NumPorts = ad.Uint32()
		case uapi.RDMA_NLDEV_ATTR_FW_VERSION:
			d.FirmwareVersion = ad.String()
		case uapi.RDMA_NLDEV_ATTR_NODE_GUID:
			d.NodeGUID = ad.Uint64()
		case uapi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID:
			d.SysImageGUID = ad.Uint64()
		case uapi.RDMA_NLDEV_ATTR_DEV_NODE_TYPE:
			d.NodeType = ad.Uint8()
		case uapi.RDMA_NLDEV_ATTR_DEV_PROTOCOL:
			d.Protocol = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return Device{}, err
	}
	if !hasIndex || !hasName {
		return Device{}, errBadMessage("device reply without index or name")
	}
	if err := checkName(d.Name, maxDeviceName); err != nil {
		return Device{}, err
	}
	return d, nil
}

// decodePort reads one RDMA_NLDEV_CMD_PORT_GET reply (nldev.c
// fill_port_info). LinkLayer is left for the caller, who knows the protocol.
func decodePort(b []byte) (Port, error) {
	var (
		p                 Port
		hasIndex, hasPort bool
	)
	ad := newAttrDecoder(b)
	for ad.Next() {
		switch ad.Type() {
		case uapi.RDMA_NLDEV_ATTR_DEV_INDEX:
			p.DeviceIndex, hasIndex = ad.Uint32(), true
		case uapi.RDMA_NLDEV_ATTR_DEV_NAME:
			p.DeviceName = ad.String()
		case uapi.RDMA_NLDEV_ATTR_PORT_INDEX:
			p.Port, hasPort = ad.Uint32(), true
		case uapi.RDMA_NLDEV_ATTR_CAP_FLAGS:
			p.CapFlags = ad.Uint64()
		case uapi.RDMA_NLDEV_ATTR_LID:
			p.LID = ad.Uint32()
		case uapi.RDMA_NLDEV_ATTR_SM_LID:
			p.SMLID = ad.Uint32()
		case uapi.RDMA_NLDEV_ATTR_PORT_STATE:
			p.State = ad.Uint8()
		case uapi.RDMA_NLDEV_ATTR_PORT_PHYS_STATE:
			p.PhysState = ad.Uint8()
		case uapi.RDMA_NLDEV_ATTR_NDEV_INDEX:
			p.NetdevIndex = ad.Uint32()
		case uapi.RDMA_NLDEV_ATTR_NDEV_NAME:
			p.NetdevName = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return Port{}, err
	}
	if !hasIndex || !hasPort {
		return Port{}, errBadMessage("port reply without device or port index")
	}
	return p, nil
}

// decodeChardev reads an RDMA_NLDEV_CMD_GET_CHARDEV reply (nldev.c
// nldev_get_chardev; the driver id comes from the uverbs client,
// linux:drivers/infiniband/core/uverbs_main.c ib_uverbs_get_nl_info). The
// name becomes a path under /dev/infiniband, so it must be a plain file name.
func decodeChardev(b []byte) (Chardev, error) {
	var (
		c                       Chardev
		hasName, hasDev, hasABI bool
	)
	ad := newAttrDecoder(b)
	for ad.Next() {
		switch ad.Type() {
		case uapi.RDMA_NLDEV_ATTR_CHARDEV_NAME:
			c.Name, hasName = ad.String(), true
		case uapi.RDMA_NLDEV_ATTR_CHARDEV:
			c.Dev, hasDev = ad.Uint64(), true
		case uapi.RDMA_NLDEV_ATTR_CHARDEV_ABI:
			c.ABIVersion, hasABI = ad.Uint64(), true
		case uapi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
			c.DriverID = ad.Uint32Or64()
		}
	}
	if err := ad.Err(); err != nil {
		return Chardev{}, err
	}
	if !hasName || !hasDev || !hasABI {
		return Chardev{}, errBadMessage("chardev reply lacks name, dev or abi")
	}
	if err := checkName(c.Name, 256); err != nil {
		return Chardev{}, err
	}
	c.Path = chardevPath(c.Name)
	return c, nil
}

// decodeNetnsMode reads an RDMA_NLDEV_CMD_SYS_GET reply.
func decodeNetnsMode(b []byte) (uint8, error) {
	var (
		mode    uint8
		hasMode bool
	)
	ad := newAttrDecoder(b)
	for ad.Next() {
		if ad.Type() == uapi.RDMA_NLDEV_SYS_ATTR_NETNS_MODE {
			mode, hasMode = ad.Uint8(), true
		}
	}
	if err := ad.Err(); err != nil {
		return 0, err
	}
	if !hasMode {
		return 0, errBadMessage("system reply without netns mode")
	}
	return mode, nil
}

// checkName rejects a kernel-supplied name that is empty, too long, or would
// not be a single path component.
func checkName(name string, maxLen int) error {
	if name == "" || len(name) >= maxLen || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return errBadMessage("name %q is not a valid device name", name)
	}
	return nil
}
