// Package fakeelf writes tiny ELF64 shared objects for tests: a symbol
// version definition table (.gnu.version_d) with the nodes a real
// libibverbs defines, and optionally a Go build-info blob (.go.buildinfo)
// naming a module, which is how a Go c-shared provider is recognised. The
// files hold no code; they exist so fixture trees can stand in for a
// system's libibverbs and providers.
package fakeelf

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// ELF constants (System V ABI, include/uapi/linux/elf.h).
const (
	ehdrSize     = 64
	phdrSize     = 56
	shdrSize     = 64
	shtProgbits  = 1
	shtStrtab    = 3
	shtGnuVerdef = 0x6ffffffd
	ptLoad       = 1
	verdefSize   = 20
	verdauxSize  = 8
)

// SharedObject returns an ELF file defining version nodes (the first is
// the base node, named after the file, as ld does). With goModule != "",
// it also carries a .go.buildinfo section in the format debug/buildinfo
// reads (Go ≥ 1.18: 32-byte header, then the varint-prefixed version and
// module-info strings).
func SharedObject(soname string, nodes []string, goModule string) []byte {
	return build(soname, nodes, goModule, nil)
}

// FrontLibrary returns a stand-in for usb4verbs' C front library: no Go
// build info, and the .usb4verbs section that marks the file
// (cshim/register.c).
func FrontLibrary(soname string) []byte {
	return build(soname, nil, "", []byte("usb4verbs front library\x00"))
}

func build(soname string, nodes []string, goModule string, frontMarker []byte) []byte {
	// .dynstr: leading NUL, then each name.
	dynstr := []byte{0}
	offs := []uint32{}
	for _, n := range append([]string{soname}, nodes...) {
		offs = append(offs, uint32(len(dynstr)))
		dynstr = append(append(dynstr, n...), 0)
	}
	le := binary.LittleEndian
	var verdef []byte
	for i, off := range offs {
		rec := make([]byte, verdefSize+verdauxSize)
		le.PutUint16(rec[0:], 1) // vd_version
		if i == 0 {
			le.PutUint16(rec[2:], 1) // VER_FLG_BASE
		}
		le.PutUint16(rec[4:], uint16(i+1)) // vd_ndx
		le.PutUint16(rec[6:], 1)           // vd_cnt
		le.PutUint32(rec[12:], verdefSize) // vd_aux
		if i != len(offs)-1 {
			le.PutUint32(rec[16:], verdefSize+verdauxSize) // vd_next
		}
		le.PutUint32(rec[20:], off) // vda_name
		verdef = append(verdef, rec...)
	}
	var bi []byte
	if goModule != "" {
		bi = make([]byte, 32)
		copy(bi, "\xff Go buildinf:")
		bi[14] = 8   // pointer size
		bi[15] = 0x2 // inline strings, little endian
		bi = appendString(bi, "go1.26")
		// Module info is framed by two 16-byte sentinels; the byte before
		// the closing one is a newline.
		mod := "path\t" + goModule + "/cshim\nmod\t" + goModule + "\t(devel)\t\n"
		frame := bytes.Repeat([]byte{0x30}, 16)
		bi = appendString(bi, string(frame)+mod+string(frame))
	}

	type section struct {
		name  string
		typ   uint32
		data  []byte
		link  uint32
		info  uint32
		align uint64
		off   uint64
	}
	secs := []*section{
		{name: ".dynstr", typ: shtStrtab, data: dynstr, align: 1},
		{name: ".gnu.version_d", typ: shtGnuVerdef, data: verdef, link: 1, info: uint32(len(offs)), align: 8},
	}
	if bi != nil {
		secs = append(secs, &section{name: ".go.buildinfo", typ: shtProgbits, data: bi, align: 32})
	}
	if frontMarker != nil {
		secs = append(secs, &section{name: ".usb4verbs", typ: shtProgbits, data: frontMarker, align: 1})
	}
	shstr := []byte{0}
	nameOff := map[string]uint32{}
	for _, s := range append(secs, &section{name: ".shstrtab"}) {
		nameOff[s.name] = uint32(len(shstr))
		shstr = append(append(shstr, s.name...), 0)
	}
	secs = append(secs, &section{name: ".shstrtab", typ: shtStrtab, data: shstr, align: 1})

	body := make([]byte, ehdrSize+phdrSize)
	for _, s := range secs {
		for uint64(len(body))%s.align != 0 {
			body = append(body, 0)
		}
		s.off = uint64(len(body))
		body = append(body, s.data...)
	}
	for len(body)%8 != 0 {
		body = append(body, 0)
	}
	shoff := uint64(len(body))
	sh := make([]byte, shdrSize) // section 0 is the null section
	for _, s := range secs {
		h := make([]byte, shdrSize)
		le.PutUint32(h[0:], nameOff[s.name])
		le.PutUint32(h[4:], s.typ)
		le.PutUint64(h[16:], s.off) // sh_addr = offset: one identity-mapped load segment
		le.PutUint64(h[24:], s.off)
		le.PutUint64(h[32:], uint64(len(s.data)))
		le.PutUint32(h[40:], s.link)
		le.PutUint32(h[44:], s.info)
		le.PutUint64(h[48:], s.align)
		sh = append(sh, h...)
	}
	out := append(body, sh...)

	// ELF header.
	copy(out, "\x7fELF")
	out[4], out[5], out[6] = 2, 1, 1 // ELFCLASS64, little endian, EV_CURRENT
	le.PutUint16(out[16:], 3)        // ET_DYN
	le.PutUint16(out[18:], 62)       // EM_X86_64
	le.PutUint32(out[20:], 1)
	le.PutUint64(out[32:], ehdrSize) // e_phoff
	le.PutUint64(out[40:], shoff)
	le.PutUint16(out[52:], ehdrSize)
	le.PutUint16(out[54:], phdrSize)
	le.PutUint16(out[56:], 1)
	le.PutUint16(out[58:], shdrSize)
	le.PutUint16(out[60:], uint16(len(secs)+1))
	le.PutUint16(out[62:], uint16(len(secs))) // .shstrtab is last

	// One PT_LOAD covering the file, so debug/buildinfo can read data by
	// address.
	p := out[ehdrSize:]
	le.PutUint32(p[0:], ptLoad)
	le.PutUint32(p[4:], 4|2) // PF_R|PF_W
	le.PutUint64(p[32:], uint64(len(out)))
	le.PutUint64(p[40:], uint64(len(out)))
	le.PutUint64(p[48:], 0x1000)
	return out
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// LibibverbsNodes returns the version nodes of the libibverbs of rdma-core
// with public node IBVERBS_1.<public> and private ABI pabi: IBVERBS_1.0
// through IBVERBS_1.<public> plus IBVERBS_PRIVATE_<pabi>.
func LibibverbsNodes(public, pabi int) []string {
	nodes := []string{}
	for i := 0; i <= public; i++ {
		nodes = append(nodes, "IBVERBS_1."+strconv.Itoa(i))
	}
	return append(nodes, "IBVERBS_PRIVATE_"+strconv.Itoa(pabi))
}
