package uapi

// The uverbs ioctl framework: one ioctl (RDMA_VERBS_IOCTL) on
// /dev/infiniband/uverbsN carries an IbUverbsIoctlHdr followed by NumAttrs
// IbUverbsAttr entries.
//
// Source: include/uapi/rdma/rdma_user_ioctl_cmds.h and
// include/uapi/rdma/ib_user_ioctl_cmds.h (Debian 12: /usr/include/rdma/).

// RDMA_IOCTL_MAGIC is the ioctl type byte of every RDMA uverbs ioctl.
const RDMA_IOCTL_MAGIC = 0x1b

// RDMA_VERBS_IOCTL is _IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr).
const RDMA_VERBS_IOCTL = iocDirRead<<iocDirShift | iocDirWrite<<iocDirShift |
	SizeofIbUverbsIoctlHdr<<iocSizeShift | RDMA_IOCTL_MAGIC<<iocTypeShift | 1<<iocNrShift

// asm-generic/ioctl.h encoding, shared by amd64 and arm64.
const (
	iocNrShift   = 0
	iocTypeShift = 8
	iocSizeShift = 16
	iocDirShift  = 30
	iocDirWrite  = 1
	iocDirRead   = 2
)

// IOWR returns _IOWR(typ, nr, size) as asm-generic/ioctl.h encodes it.
func IOWR(typ, nr, size uintptr) uintptr {
	return (iocDirRead|iocDirWrite)<<iocDirShift | size<<iocSizeShift | typ<<iocTypeShift | nr<<iocNrShift
}

// Attribute flags (struct ib_uverbs_attr.flags).
const (
	UVERBS_ATTR_F_MANDATORY    = 1 << 0 // the kernel must understand the attribute or fail
	UVERBS_ATTR_F_VALID_OUTPUT = 1 << 1 // kernel output: the PTR_OUT attribute was written
)

// Namespaces of object, method and attribute ids (ib_user_ioctl_cmds.h).
const (
	UVERBS_ID_NS_MASK             = 0xF000
	UVERBS_ID_NS_SHIFT            = 12
	UVERBS_UDATA_DRIVER_DATA_NS   = 1
	UVERBS_UDATA_DRIVER_DATA_FLAG = 1 << UVERBS_ID_NS_SHIFT

	// UVERBS_ID_DRIVER_NS is the first id of the driver-specific namespace,
	// where vendor objects, methods and attributes live. Newer uAPI headers
	// name it in ib_user_ioctl_cmds.h (linux-rdma/rdma-core@691953d:
	// kernel-headers/rdma/ib_user_ioctl_cmds.h); Debian 12's spell the same
	// value UVERBS_UDATA_DRIVER_DATA_FLAG.
	UVERBS_ID_DRIVER_NS = 1 << UVERBS_ID_NS_SHIFT

	// Driver udata ("uhw") in/out buffers of any method.
	UVERBS_ATTR_UHW_IN  = UVERBS_ID_DRIVER_NS
	UVERBS_ATTR_UHW_OUT = UVERBS_ID_DRIVER_NS + 1

	// UVERBS_ID_DRIVER_NS_WITH_UHW is the first driver attribute id of a
	// core method that also takes UHW_IN/UHW_OUT (same newer header).
	UVERBS_ID_DRIVER_NS_WITH_UHW = UVERBS_ID_DRIVER_NS + 2
)

// Limits of the kernel's method dispatcher. Kernel-internal, from
// include/rdma/uverbs_ioctl.h enum uapi_radix_data: attribute ids are
// packed into UVERBS_API_ATTR_KEY_BITS, so a method accepts at most
// UVERBS_API_ATTR_BKEY_LEN distinct attributes.
const (
	UVERBS_API_ATTR_KEY_BITS = 6
	UVERBS_API_ATTR_BKEY_LEN = (1 << UVERBS_API_ATTR_KEY_BITS) - 1
)

// IbUverbsAttr is struct ib_uverbs_attr, one attribute of a method call.
// Len is the length of the buffer Data points to (PTR_IN/PTR_OUT; inputs of
// at most 8 bytes may be passed inline in Data instead) or the number of
// handles of an IDRs array. AttrData is the union attr_data: for an
// ENUM_IN attribute its low byte (on little endian) is enum_data.elem_id,
// otherwise it must be zero. Data is the union of data and data_s64:
// pointer, inline value, object handle or file descriptor.
type IbUverbsAttr struct {
	AttrId   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64
}

const SizeofIbUverbsAttr = 16

// IbUverbsIoctlHdr is struct ib_uverbs_ioctl_hdr. Length covers the header
// and its NumAttrs attributes; DriverId is the device's RDMA_DRIVER_* id
// (RDMA_DRIVER_UNKNOWN for usb4_rdma); the reserved fields must be zero.
type IbUverbsIoctlHdr struct {
	Length    uint16
	ObjectId  uint16
	MethodId  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverId  uint32
	Reserved2 uint32
	// attrs[] follows (flexible array)
}

const SizeofIbUverbsIoctlHdr = 24
