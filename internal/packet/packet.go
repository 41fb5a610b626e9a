// Package packet reads the fields of the predicate vocabulary out of raw
// Ethernet frames. Decoding never panics and never allocates: a truncated
// or hostile frame simply lacks the fields it cannot carry, and the first
// malformation is recorded as a reason.
package packet

import (
	"encoding/binary"

	"github.com/dragonc/dragonc/internal/pred"
)

// Well-known constants (IEEE EtherType registry, IANA protocol numbers).
const (
	EtherTypeIPv4   = 0x0800
	EtherTypeARP    = 0x0806
	EtherTypeVLAN   = 0x8100
	EtherTypeOpenMX = 0x86DF // Open-MX paper, docs/nics.md
	ProtoICMP       = 1
	ProtoTCP        = 6
	ProtoUDP        = 17
	// MinFrame is the Ethernet minimum without the 4-byte FCS (IEEE 802.3).
	MinFrame = 60
)

// Field IDs, resolved once.
var (
	fFrameLen   = pred.FieldID("frame.len")
	fCRCOk      = pred.FieldID("frame.crc_ok")
	fEthDst     = pred.FieldID("eth.dst")
	fEthSrc     = pred.FieldID("eth.src")
	fEthType    = pred.FieldID("eth.type")
	fEthLenOk   = pred.FieldID("eth.len_ok")
	fVLANID     = pred.FieldID("vlan.id")
	fARPOp      = pred.FieldID("arp.op")
	fARPTPA     = pred.FieldID("arp.tpa")
	fARPValid   = pred.FieldID("arp.valid")
	fIPVersion  = pred.FieldID("ip.version")
	fIPIHL      = pred.FieldID("ip.ihl")
	fIPLen      = pred.FieldID("ip.len")
	fIPTTL      = pred.FieldID("ip.ttl")
	fIPFrag     = pred.FieldID("ip.frag")
	fIPProto    = pred.FieldID("ip.proto")
	fIPSrc      = pred.FieldID("ip.src")
	fIPDst      = pred.FieldID("ip.dst")
	fIPCsumOk   = pred.FieldID("ip.csum_ok")
	fIPHdrOk    = pred.FieldID("ip.hdr_ok")
	fIPLenOk    = pred.FieldID("ip.len_ok")
	fIPOptions  = pred.FieldID("ip.options")
	fICMPType   = pred.FieldID("icmp.type")
	fICMPCode   = pred.FieldID("icmp.code")
	fICMPCsumOk = pred.FieldID("icmp.csum_ok")
	fUDPSport   = pred.FieldID("udp.sport")
	fUDPDport   = pred.FieldID("udp.dport")
	fUDPLen     = pred.FieldID("udp.len")
	fUDPCsumOk  = pred.FieldID("udp.csum_ok")
	fUDPLenOk   = pred.FieldID("udp.len_ok")
	fTCPSport   = pred.FieldID("tcp.sport")
	fTCPDport   = pred.FieldID("tcp.dport")
	fTCPFlags   = pred.FieldID("tcp.flags")
	fTCPCsumOk  = pred.FieldID("tcp.csum_ok")
	fTCPHdrOk   = pred.FieldID("tcp.hdr_ok")
	fL4Sport    = pred.FieldID("l4.sport")
	fL4Dport    = pred.FieldID("l4.dport")
	fOMXType    = pred.FieldID("omx.type")
	fOMXDstEP   = pred.FieldID("omx.dst_ep")
	fOMXSrcEP   = pred.FieldID("omx.src_ep")
	fRSSHash    = pred.FieldID("rss.hash")
)

// Frame holds the decoded fields of one frame. The zero value is an empty
// frame; Decode fills it in place so a caller can reuse one Frame.
type Frame struct {
	vals    [64]uint64
	present uint64
	// Reason names the first malformation found ("" when none).
	Reason string
	// L3 and L4 are the offsets of the network and transport headers
	// (0 when absent); Payload the offset of the transport payload.
	L3, L4, Payload int
	Bytes           []byte
}

func init() {
	if pred.NumFields > 64 {
		panic("dragonc: internal error: more than 64 predicate fields")
	}
}

func (f *Frame) set(id int, v uint64) {
	f.vals[id] = v
	f.present |= 1 << uint(id)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Get returns the value of a field by ID.
func (f *Frame) Get(id int) (uint64, bool) {
	return f.vals[id], f.present&(1<<uint(id)) != 0
}

// Value implements pred.Env.
func (f *Frame) Value(id int) (uint64, bool) { return f.Get(id) }

// Field returns a field by name.
func (f *Frame) Field(name string) (uint64, bool) {
	info, ok := pred.Fields[name]
	if !ok {
		return 0, false
	}
	return f.Get(info.ID)
}

// Atom implements pred.Env: frames know no node outcomes.
func (f *Frame) Atom(pred.Atom) bool { return false }

// SetMeta records NIC metadata (CRC result, RSS hash) on a decoded frame.
func (f *Frame) SetMeta(crcOK bool, rssHash uint32, hasHash bool) {
	f.set(fCRCOk, b2u(crcOK))
	if hasHash {
		f.set(fRSSHash, uint64(rssHash))
	}
}

// Has reports whether a field is present.
func (f *Frame) Has(id int) bool { return f.present&(1<<uint(id)) != 0 }

func mac(b []byte) uint64 {
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

// Decode reads every field it can from b. Frames captured without their
// FCS are assumed to have had a good CRC; callers override with SetMeta.
func (f *Frame) Decode(b []byte) {
	*f = Frame{Bytes: b}
	f.set(fFrameLen, uint64(len(b)))
	f.set(fCRCOk, 1)
	if len(b) < 14 {
		f.Reason = "frame shorter than an Ethernet header"
		return
	}
	f.set(fEthDst, mac(b[0:6]))
	f.set(fEthSrc, mac(b[6:12]))
	f.set(fEthLenOk, b2u(len(b) >= MinFrame))
	etype := binary.BigEndian.Uint16(b[12:14])
	off := 14
	if etype == EtherTypeVLAN {
		if len(b) < 18 {
			f.Reason = "VLAN tag truncated"
			return
		}
		f.set(fVLANID, uint64(binary.BigEndian.Uint16(b[14:16])&0x0FFF))
		etype = binary.BigEndian.Uint16(b[16:18])
		off = 18
	}
	f.set(fEthType, uint64(etype))
	switch etype {
	case EtherTypeARP:
		f.decodeARP(b[off:])
	case EtherTypeIPv4:
		f.L3 = off
		f.decodeIPv4(b, off)
	case EtherTypeOpenMX:
		// Open-MX: 16-bit peer index at 14-15, then type, destination and
		// source endpoint (docs/nics.md, from the Open-MX paper).
		if len(b) < off+5 {
			f.Reason = "Open-MX header truncated"
			return
		}
		f.set(fOMXType, uint64(b[off+2]))
		f.set(fOMXDstEP, uint64(b[off+3]))
		f.set(fOMXSrcEP, uint64(b[off+4]))
	}
}

func (f *Frame) decodeARP(a []byte) {
	if len(a) < 28 {
		f.Reason = "ARP header truncated"
		return
	}
	f.set(fARPOp, uint64(binary.BigEndian.Uint16(a[6:8])))
	f.set(fARPTPA, uint64(binary.BigEndian.Uint32(a[24:28])))
	valid := binary.BigEndian.Uint16(a[0:2]) == 1 && binary.BigEndian.Uint16(a[2:4]) == EtherTypeIPv4 && a[4] == 6 && a[5] == 4
	f.set(fARPValid, b2u(valid))
}

func (f *Frame) decodeIPv4(b []byte, off int) {
	ip := b[off:]
	if len(ip) < 20 {
		f.Reason = "IPv4 header truncated"
		return
	}
	ihl := int(ip[0] & 0x0F)
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	fragField := binary.BigEndian.Uint16(ip[6:8])
	frag := fragField&0x2000 != 0 || fragField&0x1FFF != 0
	f.set(fIPVersion, uint64(ip[0]>>4))
	f.set(fIPIHL, uint64(ihl))
	f.set(fIPLen, uint64(total))
	f.set(fIPTTL, uint64(ip[8]))
	f.set(fIPFrag, b2u(frag))
	f.set(fIPProto, uint64(ip[9]))
	f.set(fIPSrc, uint64(binary.BigEndian.Uint32(ip[12:16])))
	f.set(fIPDst, uint64(binary.BigEndian.Uint32(ip[16:20])))
	f.set(fIPOptions, b2u(ihl > 5))
	hlen := ihl * 4
	hdrOK := ihl >= 5 && hlen <= len(ip)
	f.set(fIPHdrOk, b2u(hdrOK))
	if !hdrOK {
		f.set(fIPCsumOk, 0)
		f.set(fIPLenOk, 0)
		f.Reason = "IPv4 header length invalid or truncated"
		return
	}
	f.set(fIPCsumOk, b2u(checksum(ip[:hlen], 0) == 0xFFFF))
	lenOK := total >= hlen && total <= len(ip)
	f.set(fIPLenOk, b2u(lenOK))
	if !lenOK {
		f.Reason = "IPv4 total length does not fit the frame"
		return
	}
	if ip[0]>>4 != 4 {
		f.Reason = "IP version is not 4"
		return
	}
	if frag {
		// Fragments carry no transport header dragonc may rely on.
		return
	}
	f.L4 = off + hlen
	l4 := ip[hlen:total]
	src, dst := ip[12:16], ip[16:20]
	switch ip[9] {
	case ProtoICMP:
		if len(l4) < 8 {
			f.Reason = "ICMP header truncated"
			return
		}
		f.set(fICMPType, uint64(l4[0]))
		f.set(fICMPCode, uint64(l4[1]))
		f.set(fICMPCsumOk, b2u(checksum(l4, 0) == 0xFFFF))
		f.Payload = f.L4 + 8
	case ProtoUDP:
		if len(l4) < 8 {
			f.Reason = "UDP header truncated"
			return
		}
		sport := uint64(binary.BigEndian.Uint16(l4[0:2]))
		dport := uint64(binary.BigEndian.Uint16(l4[2:4]))
		ulen := int(binary.BigEndian.Uint16(l4[4:6]))
		f.set(fUDPSport, sport)
		f.set(fUDPDport, dport)
		f.set(fL4Sport, sport)
		f.set(fL4Dport, dport)
		f.set(fUDPLen, uint64(ulen))
		lenOK := ulen >= 8 && ulen <= len(l4)
		f.set(fUDPLenOk, b2u(lenOK))
		csumOK := false
		switch {
		case binary.BigEndian.Uint16(l4[6:8]) == 0:
			csumOK = true // no checksum (RFC 768)
		case lenOK:
			csumOK = checksum(l4[:ulen], pseudo(src, dst, ProtoUDP, ulen)) == 0xFFFF
		}
		f.set(fUDPCsumOk, b2u(csumOK))
		f.Payload = f.L4 + 8
	case ProtoTCP:
		if len(l4) < 20 {
			f.Reason = "TCP header truncated"
			return
		}
		sport := uint64(binary.BigEndian.Uint16(l4[0:2]))
		dport := uint64(binary.BigEndian.Uint16(l4[2:4]))
		doff := int(l4[12]>>4) * 4
		f.set(fTCPSport, sport)
		f.set(fTCPDport, dport)
		f.set(fL4Sport, sport)
		f.set(fL4Dport, dport)
		f.set(fTCPFlags, uint64(l4[13]))
		f.set(fTCPHdrOk, b2u(doff >= 20 && doff <= len(l4)))
		f.set(fTCPCsumOk, b2u(checksum(l4, pseudo(src, dst, ProtoTCP, len(l4))) == 0xFFFF))
		f.Payload = f.L4 + min(max(doff, 20), len(l4))
	}
}

// pseudo returns the ones-complement sum of the IPv4 pseudo-header.
func pseudo(src, dst []byte, proto byte, length int) uint32 {
	var s uint32
	s += uint32(binary.BigEndian.Uint16(src[0:2])) + uint32(binary.BigEndian.Uint16(src[2:4]))
	s += uint32(binary.BigEndian.Uint16(dst[0:2])) + uint32(binary.BigEndian.Uint16(dst[2:4]))
	s += uint32(proto) + uint32(length)
	return s
}

// checksum folds the Internet checksum (RFC 1071) of b onto an initial
// sum; a correct header or segment folds to 0xFFFF.
func checksum(b []byte, sum uint32) uint16 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return uint16(sum)
}
