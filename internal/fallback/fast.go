package fallback

import "encoding/binary"

// Most frames have one layout: untagged Ethernet II, then IPv4 without
// options. In that layout every header field the checks read sits at a
// fixed offset, so a queue's generated code has a second copy of its
// checks that reads the fields straight from the frame (the methods
// below, which the compiler inlines and folds), without decoding them
// first. Frames of any other layout take the decoder. The methods give
// what the decoder would store, field by field and header by header
// (the tests compare them on every slot).

// fastHdr is the one header byte fast frames share: IPv4 (RFC 791
// section 3.1), IHL 5 words.
const fastHdr = 0x45

// isFast reports whether b has the fixed layout: an EtherType of IPv4,
// no VLAN tag, a complete IPv4 header without options.
func isFast(b []byte) bool {
	return len(b) >= 34 && b[12] == 0x08 && b[13] == 0x00 && b[14] == fastHdr
}

// fast is a frame in the fixed layout and what the NIC reported with it.
type fast struct {
	b []byte
	m *Meta
}

func (x fast) u16(i int) uint64 { return uint64(binary.BigEndian.Uint16(x.b[i : i+2])) }
func (x fast) u32(i int) uint64 { return uint64(binary.BigEndian.Uint32(x.b[i : i+4])) }

// ipLen is the IPv4 total length.
func (x fast) ipLen() uint64 { return x.u16(16) }

// ipLenOK is the decoder's ip.len_ok: the total length covers the header
// and fits in the frame.
func (x fast) ipLenOK() bool { return x.ipLen() >= 20 && x.ipLen() <= uint64(len(x.b))-14 }

// fits reports whether the decoder looks past the IPv4 header and finds
// a transport header of at least min bytes: the total length is valid
// and leaves min bytes after the header, and the datagram is not a
// fragment (no MF flag, offset 0; RFC 791 section 3.2). Kept small so
// that the compiler inlines it.
func (x fast) fits(min uint64) bool {
	n := x.ipLen()
	return n >= 20+min && n <= uint64(len(x.b))-14 && x.b[20]&0x3f == 0 && x.b[21] == 0
}

// seg is the transport segment, when fits holds.
func (x fast) seg() []byte { return x.b[34 : 14+x.ipLen()] }

// Presence of each header's fields, as the has bits of the decoder.
func (x fast) hasFrame() bool   { return true }
func (x fast) hasMeta() bool    { return x.m.HasRSSHash }
func (x fast) hasEth() bool     { return true }
func (x fast) hasVlan() bool    { return false }
func (x fast) hasEthType() bool { return true }
func (x fast) hasArp() bool     { return false }
func (x fast) hasOmx() bool     { return false }
func (x fast) hasIp() bool      { return true }
func (x fast) hasIcmp() bool    { return x.b[23] == 1 && x.fits(8) }
func (x fast) hasUdp() bool     { return x.b[23] == 17 && x.fits(8) }
func (x fast) hasTcp() bool     { return x.b[23] == 6 && x.fits(20) }
func (x fast) hasL4() bool {
	min := uint64(20) // TCP
	if x.b[23] == 17 {
		min = 8 // UDP
	} else if x.b[23] != 6 {
		return false
	}
	return x.fits(min)
}

// The fields, one method each, named as the slot constants. A field of a
// header the layout lacks reads 0; the generated code tests presence
// before it reads a field.
func (x fast) FrameLen() uint64   { return uint64(len(x.b)) }
func (x fast) FrameCrcOk() uint64 { return b2u(x.m.CRCOK) }
func (x fast) RssHash() uint64    { return uint64(x.m.RSSHash) }
func (x fast) EthDst() uint64     { return mac(x.b[0:6]) }
func (x fast) EthSrc() uint64     { return mac(x.b[6:12]) }
func (x fast) EthLenOk() uint64   { return 1 }
func (x fast) EthType() uint64    { return 0x0800 }
func (x fast) VlanId() uint64     { return 0 }
func (x fast) ArpOp() uint64      { return 0 }
func (x fast) ArpSha() uint64     { return 0 }
func (x fast) ArpSpa() uint64     { return 0 }
func (x fast) ArpTpa() uint64     { return 0 }
func (x fast) ArpValid() uint64   { return 0 }
func (x fast) OmxType() uint64    { return 0 }
func (x fast) OmxDstEp() uint64   { return 0 }
func (x fast) OmxSrcEp() uint64   { return 0 }
func (x fast) IpVersion() uint64  { return fastHdr >> 4 }
func (x fast) IpIhl() uint64      { return fastHdr & 0x0f }
func (x fast) IpLen() uint64      { return x.ipLen() }
func (x fast) IpTtl() uint64      { return uint64(x.b[22]) }
func (x fast) IpFrag() uint64     { return b2u(x.u16(20)&0x3fff != 0) }
func (x fast) IpProto() uint64    { return uint64(x.b[23]) }
func (x fast) IpSrc() uint64      { return x.u32(26) }
func (x fast) IpDst() uint64      { return x.u32(30) }
func (x fast) IpOptions() uint64  { return 0 }
func (x fast) IpHdrOk() uint64    { return 1 }
func (x fast) IpCsumOk() uint64   { return b2u(checksum(x.b[14:34], 0) == 0xffff) }
func (x fast) IpLenOk() uint64    { return b2u(x.ipLenOK()) }
func (x fast) IcmpType() uint64   { return uint64(x.b[34]) }
func (x fast) IcmpCode() uint64   { return uint64(x.b[35]) }
func (x fast) IcmpCsumOk() uint64 { return b2u(icmpCsumOK(x.seg())) }
func (x fast) UdpSport() uint64   { return x.u16(34) }
func (x fast) UdpDport() uint64   { return x.u16(36) }
func (x fast) UdpLen() uint64     { return x.u16(38) }
func (x fast) UdpLenOk() uint64   { return b2u(udpLenOK(int(x.u16(38)), int(x.ipLen())-20)) }
func (x fast) UdpCsumOk() uint64 {
	return b2u(udpCsumOK(x.seg(), x.b[26:30], x.b[30:34]))
}
func (x fast) TcpSport() uint64 { return x.u16(34) }
func (x fast) TcpDport() uint64 { return x.u16(36) }
func (x fast) TcpFlags() uint64 { return uint64(x.b[47]) }
func (x fast) TcpHdrOk() uint64 { return b2u(tcpHdrOK(x.b[46], int(x.ipLen())-20)) }
func (x fast) TcpCsumOk() uint64 {
	return b2u(tcpCsumOK(x.seg(), x.b[26:30], x.b[30:34]))
}
func (x fast) L4Sport() uint64 { return x.u16(34) }
func (x fast) L4Dport() uint64 { return x.u16(36) }
