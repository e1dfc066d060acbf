package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/constant"
	"log"
	"os"
	"reflect"
	"sort"
	"strings"

	"usb4verbs/uapi"
	"usb4verbs/uapi/internal/cname"
	"usb4verbs/uapi/internal/gosrc"
)

// structs lists the mirrored types, each after the types it contains.
var structs = []reflect.Type{
	// write-command framing and the ioctl header
	reflect.TypeFor[uapi.IbUverbsCmdHdr](),
	reflect.TypeFor[uapi.IbUverbsExCmdHdr](),
	reflect.TypeFor[uapi.IbUverbsAttr](),
	reflect.TypeFor[uapi.IbUverbsIoctlHdr](),
	// data-path commands
	reflect.TypeFor[uapi.IbUverbsWc](),
	reflect.TypeFor[uapi.IbUverbsSge](),
	reflect.TypeFor[uapi.IbUverbsSendWrRdma](),
	reflect.TypeFor[uapi.IbUverbsSendWrAtomic](),
	reflect.TypeFor[uapi.IbUverbsSendWrUd](),
	reflect.TypeFor[uapi.IbUverbsSendWr](),
	reflect.TypeFor[uapi.IbUverbsRecvWr](),
	reflect.TypeFor[uapi.IbUverbsPostSend](),
	reflect.TypeFor[uapi.IbUverbsPostSendResp](),
	reflect.TypeFor[uapi.IbUverbsPostRecv](),
	reflect.TypeFor[uapi.IbUverbsPostRecvResp](),
	reflect.TypeFor[uapi.IbUverbsPostSrqRecv](),
	reflect.TypeFor[uapi.IbUverbsPostSrqRecvResp](),
	reflect.TypeFor[uapi.IbUverbsPollCq](),
	reflect.TypeFor[uapi.IbUverbsPollCqResp](),
	reflect.TypeFor[uapi.IbUverbsReqNotifyCq](),
	// rdma_user_rxe.h
	reflect.TypeFor[uapi.RxeGlobalRoute](),
	reflect.TypeFor[uapi.RxeAv](),
	reflect.TypeFor[uapi.RxeSendWrRdma](),
	reflect.TypeFor[uapi.RxeSendWrAtomic](),
	reflect.TypeFor[uapi.RxeSendWrUd](),
	reflect.TypeFor[uapi.RxeSendWrMw](),
	reflect.TypeFor[uapi.RxeSendWrFlush](),
	reflect.TypeFor[uapi.RxeSendWr](),
	reflect.TypeFor[uapi.RxeSge](),
	reflect.TypeFor[uapi.Mminfo](),
	reflect.TypeFor[uapi.RxeDmaInfo](),
	reflect.TypeFor[uapi.RxeSendWqe](),
	reflect.TypeFor[uapi.RxeRecvWqe](),
	reflect.TypeFor[uapi.RxeCreateAhResp](),
	reflect.TypeFor[uapi.RxeCreateCqResp](),
	reflect.TypeFor[uapi.RxeResizeCqResp](),
	reflect.TypeFor[uapi.RxeCreateQpResp](),
	reflect.TypeFor[uapi.RxeCreateSrqResp](),
	reflect.TypeFor[uapi.RxeModifySrqCmd](),
	reflect.TypeFor[uapi.RxeQueueBuf](),
	// usb4 vendor ABIs
	reflect.TypeFor[uapi.TbvCqShm](),
	reflect.TypeFor[uapi.TbvUrespCreateCq](),
	reflect.TypeFor[uapi.Usb4RdmaDvWqe](),
	reflect.TypeFor[uapi.Usb4RdmaDvCqe](),
	reflect.TypeFor[uapi.Usb4RdmaDvDoorbellProducerLine](),
	reflect.TypeFor[uapi.Usb4RdmaDvDoorbellConsumerLine](),
	reflect.TypeFor[uapi.Usb4RdmaDvDoorbell](),
	reflect.TypeFor[uapi.Usb4RdmaDvQueryCapsResp](),
	reflect.TypeFor[uapi.Usb4RdmaDvQueueCreate](),
	reflect.TypeFor[uapi.Usb4RdmaDvQueueResp](),
	reflect.TypeFor[uapi.Usb4RdmaDvKick](),
}

// packedAligned64 are the structs the vendor header declares
// __attribute__((packed, aligned(64))).
var packedAligned64 = map[string]bool{
	"Usb4RdmaDvWqe":                  true,
	"Usb4RdmaDvCqe":                  true,
	"Usb4RdmaDvDoorbellProducerLine": true,
	"Usb4RdmaDvDoorbellConsumerLine": true,
	"Usb4RdmaDvDoorbell":             true,
}

type member struct {
	name string
	typ  reflect.Type
}

var u32 = reflect.TypeFor[uint32]()

// unions restores the C unions that Go stores as one field.
var unions = map[string][]member{
	"IbUverbsWc.Ex":     {{"imm_data", u32}, {"invalidate_rkey", u32}},
	"IbUverbsSendWr.Ex": {{"imm_data", u32}, {"invalidate_rkey", u32}},
	"IbUverbsSendWr.Wr": {
		{"rdma", reflect.TypeFor[uapi.IbUverbsSendWrRdma]()},
		{"atomic", reflect.TypeFor[uapi.IbUverbsSendWrAtomic]()},
		{"ud", reflect.TypeFor[uapi.IbUverbsSendWrUd]()},
	},
	"RxeSendWr.Ex": {{"imm_data", u32}, {"invalidate_rkey", u32}},
	"RxeSendWr.Wr": {
		{"rdma", reflect.TypeFor[uapi.RxeSendWrRdma]()},
		{"atomic", reflect.TypeFor[uapi.RxeSendWrAtomic]()},
		{"ud", reflect.TypeFor[uapi.RxeSendWrUd]()},
		{"mw", reflect.TypeFor[uapi.RxeSendWrMw]()},
		{"flush", reflect.TypeFor[uapi.RxeSendWrFlush]()},
	},
}

// constPrefixes and constNames select the constants the C data path needs.
var constPrefixes = []string{
	"IB_USER_VERBS_", // write command numbers and flags
	"IB_UVERBS_WR_",  // work request opcodes
	"IB_UVERBS_WC_",  // completion opcodes
	"IB_UVERBS_QPT_", // QP types
	"IB_SEND_",       // send flags
	"IB_WC_",         // completion status and flags
	"IB_QPS_",        // QP states (flush on error)
	"IB_CQ_",         // notify flags
	"RXE_",           // rxe
	"TBV_",           // usb4 mapped CQ
	"USB4_RDMA_",     // usb4 DV and ABI version
	"UVERBS_ATTR_F_", // ioctl attribute flags
}

var constNames = []string{
	"RDMA_IOCTL_MAGIC",
	"RDMA_VERBS_IOCTL",
	"UVERBS_ID_DRIVER_NS",
	"UVERBS_OBJECT_DEVICE",
	"UVERBS_METHOD_INVOKE_WRITE",
	"UVERBS_ATTR_CORE_IN",
	"UVERBS_ATTR_CORE_OUT",
	"UVERBS_ATTR_WRITE_CMD",
	"UVERBS_ATTR_UHW_IN",
	"UVERBS_ATTR_UHW_OUT",
}

const command = "go run ./internal/cmd/gencheader"

func main() {
	log.SetFlags(0)
	log.SetPrefix("gencheader: ")
	out := flag.String("o", "c/usb4verbs_uapi.h", "output file")
	dir := flag.String("uapi", ".", "directory of package uapi (for constant values)")
	flag.Parse()
	pkg, err := gosrc.Load(*dir)
	if err != nil {
		log.Fatal(err)
	}
	src, err := generate(pkg)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

func cStructName(t reflect.Type) string { return "usb4v_" + cname.Snake(t.Name()) }

func cScalar(t reflect.Type) (string, error) {
	switch t.Kind() {
	case reflect.Uint8:
		return "uint8_t", nil
	case reflect.Uint16:
		return "uint16_t", nil
	case reflect.Uint32:
		return "uint32_t", nil
	case reflect.Uint64:
		return "uint64_t", nil
	case reflect.Int32:
		return "int32_t", nil
	case reflect.Int64:
		return "int64_t", nil
	case reflect.Struct:
		if t.Name() == "" {
			return "", fmt.Errorf("anonymous struct type %v", t)
		}
		return "struct " + cStructName(t), nil
	}
	return "", fmt.Errorf("no C type for %v", t)
}

// cDecl returns the C declaration of a member named name of type t.
func cDecl(t reflect.Type, name string) (string, error) {
	dims := ""
	for t.Kind() == reflect.Array {
		dims += fmt.Sprintf("[%d]", t.Len())
		t = t.Elem()
	}
	base, err := cScalar(t)
	if err != nil {
		return "", err
	}
	return base + " " + name + dims, nil
}

func fieldCName(goName string) string {
	return cname.Snake(goName)
}

func generate(pkg *gosrc.Package) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "/* %s */\n/* Code generated by the command above; DO NOT EDIT. */\n\n", command)
	b.WriteString(`/*
 * C mirror of package usb4verbs/uapi for the C data path: kernel uverbs
 * write commands and work requests, struct ib_uverbs_wc, the rdma_rxe queue
 * ABI and the usb4_rdma vendor ABIs. Host-endian like the kernel ABI.
 * Flexible array members of the kernel structs (driver_data[], send_wr[],
 * wc[], data[], sge[]) are omitted: they start at sizeof the struct.
 */
#ifndef USB4VERBS_UAPI_H
#define USB4VERBS_UAPI_H

#include <stddef.h>
#include <stdint.h>

`)
	if err := writeConsts(&b, pkg); err != nil {
		return nil, err
	}
	for _, t := range structs {
		if err := writeStruct(&b, t); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
	}
	b.WriteString(`/* Packed DV head/tail words: 24-bit index, 8-bit generation on top. */
static inline uint32_t usb4v_dv_tail_pack(uint32_t index, uint8_t generation)
{
	return (index & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK) |
	       ((uint32_t)generation << USB4V_USB4_RDMA_DV_TAIL_GEN_SHIFT);
}

static inline uint32_t usb4v_dv_tail_index(uint32_t packed)
{
	return packed & USB4V_USB4_RDMA_DV_TAIL_INDEX_MASK;
}

static inline uint8_t usb4v_dv_tail_generation(uint32_t packed)
{
	return (uint8_t)(packed >> USB4V_USB4_RDMA_DV_TAIL_GEN_SHIFT);
}

#endif /* USB4VERBS_UAPI_H */
`)
	return b.Bytes(), nil
}

func selected(name string) bool {
	for _, n := range constNames {
		if n == name {
			return true
		}
	}
	for _, p := range constPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func writeConsts(b *bytes.Buffer, pkg *gosrc.Package) error {
	var names []string
	vals := map[string]constant.Value{}
	for _, c := range pkg.Consts {
		if selected(c.Name) {
			names = append(names, c.Name)
			vals[c.Name] = c.Value
		}
	}
	for _, n := range constNames {
		if _, ok := vals[n]; !ok {
			return fmt.Errorf("constant %s not found in package uapi", n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		v, ok := constant.Uint64Val(constant.ToInt(vals[n]))
		if !ok {
			return fmt.Errorf("constant %s = %s is not a non-negative integer", n, vals[n])
		}
		fmt.Fprintf(b, "#define USB4V_%s %s\n", n, cLiteral(v))
	}
	b.WriteString("\n")
	return nil
}

func cLiteral(v uint64) string {
	switch {
	case v < 1<<16:
		return fmt.Sprintf("%d", v)
	case v <= 0x7fffffff:
		return fmt.Sprintf("0x%x", v)
	case v <= 0xffffffff:
		return fmt.Sprintf("0x%xU", v)
	}
	return fmt.Sprintf("0x%xULL", v)
}

func writeStruct(b *bytes.Buffer, t reflect.Type) error {
	name := cStructName(t)
	fmt.Fprintf(b, "/* %s: uapi.%s */\nstruct %s {\n", cname.Snake(t.Name()), t.Name(), name)
	var asserts []string
	var end uintptr
	pad := 0
	emitPad := func(n uintptr) {
		fmt.Fprintf(b, "\tuint8_t _pad%d[%d];\n", pad, n)
		pad++
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Offset > end {
			emitPad(f.Offset - end)
		}
		end = f.Offset + f.Type.Size()
		if f.Name == "_" {
			emitPad(f.Type.Size())
			continue
		}
		fn := fieldCName(f.Name)
		if ms, ok := unions[t.Name()+"."+f.Name]; ok {
			b.WriteString("\tunion {\n")
			for _, m := range ms {
				d, err := cDecl(m.typ, m.name)
				if err != nil {
					return err
				}
				fmt.Fprintf(b, "\t\t%s;\n", d)
			}
			fmt.Fprintf(b, "\t} %s;\n", fn)
			asserts = append(asserts, fmt.Sprintf("_Static_assert(sizeof(((struct %s *)0)->%s) == %d, \"%s.%s size\");", name, fn, f.Type.Size(), name, fn))
		} else {
			d, err := cDecl(f.Type, fn)
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "\t%s;\n", d)
		}
		asserts = append(asserts, fmt.Sprintf("_Static_assert(offsetof(struct %s, %s) == %d, \"%s.%s offset\");", name, fn, f.Offset, name, fn))
	}
	if t.Size() > end {
		emitPad(t.Size() - end)
	}
	attr := ""
	if packedAligned64[t.Name()] {
		attr = " __attribute__((packed, aligned(64)))"
	}
	fmt.Fprintf(b, "}%s;\n", attr)
	fmt.Fprintf(b, "_Static_assert(sizeof(struct %s) == %d, \"%s size\");\n", name, t.Size(), name)
	for _, a := range asserts {
		b.WriteString(a + "\n")
	}
	b.WriteString("\n")
	return nil
}
