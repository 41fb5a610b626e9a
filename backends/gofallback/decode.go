package gofallback

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dragonc/dragonc/internal/pred"
)

// decodeFile renders the frame decoder of the generated module. It reads
// the same fields as dragonc's internal/packet, with the same rules for
// absent headers (the generated test and dragonc verify check that the
// two agree), into a fixed array: nothing allocates.
func decodeFile(header string, used map[string]bool) string {
	var consts strings.Builder
	for _, name := range pred.FieldNames() {
		fmt.Fprintf(&consts, "\t%s = %d // %s\n", fieldConst(name), pred.Fields[name].ID, name)
	}
	// Checksums cost a pass over the bytes: compute only those the
	// software reads (the NIC reports the others in the descriptor).
	var need strings.Builder
	for _, f := range pred.FieldNames() {
		fmt.Fprintf(&need, "\tneed%s = %v\n", fieldConst(f)[1:], used[f])
	}
	return guardSets(header + `
package fallback

import "encoding/binary"

// Field indexes into fields.v; a field is present when its bit is set in
// fields.has.
const (
` + consts.String() + `)

// Which fields the software pipelines read; the compiler drops the work
// for the others.
const (
` + need.String() + `)

// fields holds the decoded fields of one frame.
type fields struct {
	has uint64
	v   [` + fmt.Sprint(pred.NumFields) + `]uint64
}

func (f *fields) set(id int, v uint64) {
	f.v[id] = v
	f.has |= 1 << uint(id)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func mac(b []byte) uint64 {
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

// checksum folds the Internet checksum (RFC 1071) of b onto a sum; a correct
// header or segment folds to 0xffff.
func checksum(b []byte, sum uint32) uint16 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

func pseudo(src, dst []byte, proto byte, length int) uint32 {
	return uint32(binary.BigEndian.Uint16(src[0:2])) + uint32(binary.BigEndian.Uint16(src[2:4])) +
		uint32(binary.BigEndian.Uint16(dst[0:2])) + uint32(binary.BigEndian.Uint16(dst[2:4])) +
		uint32(proto) + uint32(length)
}

// decode reads every field it can; a truncated or hostile frame lacks the
// fields it cannot carry.
func (f *fields) decode(b []byte, m *Meta) {
	f.set(fFrameLen, uint64(len(b)))
	f.set(fFrameCrcOk, b2u(m.CRCOK))
	if m.HasRSSHash {
		f.set(fRssHash, uint64(m.RSSHash))
	}
	if len(b) < 14 {
		return
	}
	f.set(fEthDst, mac(b[0:6]))
	f.set(fEthSrc, mac(b[6:12]))
	f.set(fEthLenOk, b2u(len(b) >= 60))
	etype := binary.BigEndian.Uint16(b[12:14])
	off := 14
	if etype == 0x8100 {
		if len(b) < 18 {
			return
		}
		f.set(fVlanId, uint64(binary.BigEndian.Uint16(b[14:16])&0x0fff))
		etype = binary.BigEndian.Uint16(b[16:18])
		off = 18
	}
	f.set(fEthType, uint64(etype))
	switch etype {
	case 0x0806:
		a := b[off:]
		if len(a) < 28 {
			return
		}
		f.set(fArpOp, uint64(binary.BigEndian.Uint16(a[6:8])))
		f.set(fArpTpa, uint64(binary.BigEndian.Uint32(a[24:28])))
		f.set(fArpValid, b2u(binary.BigEndian.Uint16(a[0:2]) == 1 && binary.BigEndian.Uint16(a[2:4]) == 0x0800 && a[4] == 6 && a[5] == 4))
	case 0x86df:
		if len(b) < off+5 {
			return
		}
		f.set(fOmxType, uint64(b[off+2]))
		f.set(fOmxDstEp, uint64(b[off+3]))
		f.set(fOmxSrcEp, uint64(b[off+4]))
	case 0x0800:
		f.ipv4(b[off:])
	}
}

func (f *fields) ipv4(ip []byte) {
	if len(ip) < 20 {
		return
	}
	ihl := int(ip[0] & 0x0f)
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	ff := binary.BigEndian.Uint16(ip[6:8])
	frag := ff&0x2000 != 0 || ff&0x1fff != 0
	f.set(fIpVersion, uint64(ip[0]>>4))
	f.set(fIpIhl, uint64(ihl))
	f.set(fIpLen, uint64(total))
	f.set(fIpTtl, uint64(ip[8]))
	f.set(fIpFrag, b2u(frag))
	f.set(fIpProto, uint64(ip[9]))
	f.set(fIpSrc, uint64(binary.BigEndian.Uint32(ip[12:16])))
	f.set(fIpDst, uint64(binary.BigEndian.Uint32(ip[16:20])))
	f.set(fIpOptions, b2u(ihl > 5))
	hlen := ihl * 4
	hdrOK := ihl >= 5 && hlen <= len(ip)
	f.set(fIpHdrOk, b2u(hdrOK))
	if !hdrOK {
		f.set(fIpCsumOk, 0)
		f.set(fIpLenOk, 0)
		return
	}
	if needIpCsumOk {
		f.set(fIpCsumOk, b2u(checksum(ip[:hlen], 0) == 0xffff))
	}
	lenOK := total >= hlen && total <= len(ip)
	f.set(fIpLenOk, b2u(lenOK))
	if !lenOK || ip[0]>>4 != 4 || frag {
		return
	}
	l4 := ip[hlen:total]
	src, dst := ip[12:16], ip[16:20]
	_, _ = src, dst
	switch ip[9] {
	case 1:
		if len(l4) < 8 {
			return
		}
		f.set(fIcmpType, uint64(l4[0]))
		f.set(fIcmpCode, uint64(l4[1]))
		if needIcmpCsumOk {
			f.set(fIcmpCsumOk, b2u(checksum(l4, 0) == 0xffff))
		}
	case 17:
		if len(l4) < 8 {
			return
		}
		sport := uint64(binary.BigEndian.Uint16(l4[0:2]))
		dport := uint64(binary.BigEndian.Uint16(l4[2:4]))
		ulen := int(binary.BigEndian.Uint16(l4[4:6]))
		f.set(fUdpSport, sport)
		f.set(fUdpDport, dport)
		f.set(fL4Sport, sport)
		f.set(fL4Dport, dport)
		f.set(fUdpLen, uint64(ulen))
		lenOK := ulen >= 8 && ulen <= len(l4)
		f.set(fUdpLenOk, b2u(lenOK))
		if needUdpCsumOk {
			ok := false
			switch {
			case binary.BigEndian.Uint16(l4[6:8]) == 0:
				ok = true
			case lenOK:
				ok = checksum(l4[:ulen], pseudo(src, dst, 17, ulen)) == 0xffff
			}
			f.set(fUdpCsumOk, b2u(ok))
		}
	case 6:
		if len(l4) < 20 {
			return
		}
		sport := uint64(binary.BigEndian.Uint16(l4[0:2]))
		dport := uint64(binary.BigEndian.Uint16(l4[2:4]))
		doff := int(l4[12]>>4) * 4
		f.set(fTcpSport, sport)
		f.set(fTcpDport, dport)
		f.set(fL4Sport, sport)
		f.set(fL4Dport, dport)
		f.set(fTcpFlags, uint64(l4[13]))
		f.set(fTcpHdrOk, b2u(doff >= 20 && doff <= len(l4)))
		if needTcpCsumOk {
			f.set(fTcpCsumOk, b2u(checksum(l4, pseudo(src, dst, 6, len(l4))) == 0xffff))
		}
	}
}
`)
}

var setLine = regexp.MustCompile(`(?m)^(\t+)f\.set\((f\w+), (.*)\)$`)

// guardSets makes every store of a field conditional on the field being
// read, so unused fields cost nothing.
func guardSets(src string) string {
	return setLine.ReplaceAllStringFunc(src, func(line string) string {
		m := setLine.FindStringSubmatch(line)
		ind, name, expr := m[1], m[2], m[3]
		return fmt.Sprintf("%sif need%s {\n%s\tf.set(%s, %s)\n%s}", ind, name[1:], ind, name, expr, ind)
	})
}
