package fallback

import "encoding/binary"

// The decoder reads the fields of dragonc's predicate vocabulary straight
// from the frame bytes, with the rules of dragonc's own decoder for absent
// headers (dragonc's tests compare the two field by field). It stores only
// the fields the stack's checks read: need* and the slot constants f* come
// with the generated code, and the compiler removes the work for the
// fields no check reads. Nothing allocates; a truncated or hostile frame
// lacks the fields it cannot carry.

// Presence bits: each header's fields are stored together, so one bit
// says they are all there.
const (
	hasFrame   = 1 << iota // frame.len, frame.crc_ok
	hasMeta                // rss.hash
	hasEth                 // eth.dst, eth.src, eth.len_ok
	hasVlan                // vlan.id
	hasEthType             // eth.type (absent after a cut VLAN tag)
	hasArp
	hasOmx
	hasIp
	hasIcmp
	hasUdp
	hasTcp
	hasL4 // l4.sport, l4.dport, from UDP or TCP
)

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func mac(b []byte) uint64 {
	return uint64(binary.BigEndian.Uint16(b[0:2]))<<32 | uint64(binary.BigEndian.Uint32(b[2:6]))
}

// checksum folds the Internet checksum (RFC 1071) of b onto a sum; a
// correct header or segment folds to 0xffff.
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

// pseudo sums the IPv4 pseudo-header of a UDP or TCP checksum (RFC 768,
// RFC 9293 section 3.1).
func pseudo(src, dst []byte, proto byte, length int) uint32 {
	return uint32(binary.BigEndian.Uint16(src[0:2])) + uint32(binary.BigEndian.Uint16(src[2:4])) +
		uint32(binary.BigEndian.Uint16(dst[0:2])) + uint32(binary.BigEndian.Uint16(dst[2:4])) +
		uint32(proto) + uint32(length)
}

// The transport checks the decoder and the fixed-layout reads share.

// icmpCsumOK: the ICMP checksum covers the whole message (RFC 792).
func icmpCsumOK(l4 []byte) bool { return checksum(l4, 0) == 0xffff }

// udpLenOK: the UDP length covers the header and fits in the datagram
// (RFC 768).
func udpLenOK(ulen, segLen int) bool { return ulen >= 8 && ulen <= segLen }

// udpCsumOK: a zero checksum means none was sent (RFC 768); otherwise
// the sum over the pseudo-header and the UDP length's bytes must fold
// to 0xffff, and a length that does not fit fails.
func udpCsumOK(l4, src, dst []byte) bool {
	if binary.BigEndian.Uint16(l4[6:8]) == 0 {
		return true
	}
	ulen := int(binary.BigEndian.Uint16(l4[4:6]))
	return udpLenOK(ulen, len(l4)) && checksum(l4[:ulen], pseudo(src, dst, 17, ulen)) == 0xffff
}

// tcpHdrOK: the data offset (in 32-bit words) covers the fixed header
// and fits in the segment (RFC 9293 section 3.1).
func tcpHdrOK(offByte byte, segLen int) bool {
	doff := int(offByte>>4) * 4
	return doff >= 20 && doff <= segLen
}

// tcpCsumOK: the sum over the pseudo-header and the whole segment folds
// to 0xffff (RFC 9293 section 3.1).
func tcpCsumOK(l4, src, dst []byte) bool {
	return checksum(l4, pseudo(src, dst, 6, len(l4))) == 0xffff
}

// ports reads the ports UDP and TCP share at the head of their headers,
// and stores them as l4.sport and l4.dport.
func (f *fields) ports(l4 []byte) (sport, dport uint64) {
	sport = uint64(binary.BigEndian.Uint16(l4[0:2]))
	dport = uint64(binary.BigEndian.Uint16(l4[2:4]))
	f.has |= hasL4
	if needL4Sport {
		f.v[fL4Sport] = sport
	}
	if needL4Dport {
		f.v[fL4Dport] = dport
	}
	return sport, dport
}

// decode reads the fields the checks need.
func (f *fields) decode(b []byte, m *Meta) {
	f.has = hasFrame
	if needFrameLen {
		f.v[fFrameLen] = uint64(len(b))
	}
	if needFrameCrcOk {
		f.v[fFrameCrcOk] = b2u(m.CRCOK)
	}
	if needRssHash && m.HasRSSHash {
		f.v[fRssHash] = uint64(m.RSSHash)
		f.has |= hasMeta
	}
	if len(b) < 14 {
		return
	}
	f.has |= hasEth
	if needEthDst {
		f.v[fEthDst] = mac(b[0:6])
	}
	if needEthSrc {
		f.v[fEthSrc] = mac(b[6:12])
	}
	if needEthLenOk {
		f.v[fEthLenOk] = 1 // the frame holds its header (above)
	}
	etype := binary.BigEndian.Uint16(b[12:14])
	off := 14
	if etype == 0x8100 { // IEEE 802.1Q
		if len(b) < 18 {
			return
		}
		if needVlanId {
			f.v[fVlanId] = uint64(binary.BigEndian.Uint16(b[14:16]) & 0x0fff)
		}
		f.has |= hasVlan
		etype = binary.BigEndian.Uint16(b[16:18])
		off = 18
	}
	if needEthType {
		f.v[fEthType] = uint64(etype)
	}
	f.has |= hasEthType
	switch etype {
	case 0x0806: // ARP, RFC 826
		if !needArp {
			return
		}
		a := b[off:]
		if len(a) < 28 {
			return
		}
		f.has |= hasArp
		if needArpOp {
			f.v[fArpOp] = uint64(binary.BigEndian.Uint16(a[6:8]))
		}
		if needArpSha {
			f.v[fArpSha] = mac(a[8:14])
		}
		if needArpSpa {
			f.v[fArpSpa] = uint64(binary.BigEndian.Uint32(a[14:18]))
		}
		if needArpTpa {
			f.v[fArpTpa] = uint64(binary.BigEndian.Uint32(a[24:28]))
		}
		if needArpValid {
			f.v[fArpValid] = b2u(binary.BigEndian.Uint16(a[0:2]) == 1 && binary.BigEndian.Uint16(a[2:4]) == 0x0800 && a[4] == 6 && a[5] == 4)
		}
	case 0x86df: // Open-MX
		if !needOmx || len(b) < off+5 {
			return
		}
		f.has |= hasOmx
		if needOmxType {
			f.v[fOmxType] = uint64(b[off+2])
		}
		if needOmxDstEp {
			f.v[fOmxDstEp] = uint64(b[off+3])
		}
		if needOmxSrcEp {
			f.v[fOmxSrcEp] = uint64(b[off+4])
		}
	case 0x0800: // IPv4, RFC 791 section 3.1
		if !needIp {
			return
		}
		ip := b[off:]
		if len(ip) < 20 {
			return
		}
		f.has |= hasIp
		ihl := int(ip[0] & 0x0f)
		total := int(binary.BigEndian.Uint16(ip[2:4]))
		ff := binary.BigEndian.Uint16(ip[6:8])
		frag := ff&0x2000 != 0 || ff&0x1fff != 0
		if needIpVersion {
			f.v[fIpVersion] = uint64(ip[0] >> 4)
		}
		if needIpIhl {
			f.v[fIpIhl] = uint64(ihl)
		}
		if needIpLen {
			f.v[fIpLen] = uint64(total)
		}
		if needIpTtl {
			f.v[fIpTtl] = uint64(ip[8])
		}
		if needIpFrag {
			f.v[fIpFrag] = b2u(frag)
		}
		if needIpProto {
			f.v[fIpProto] = uint64(ip[9])
		}
		if needIpSrc {
			f.v[fIpSrc] = uint64(binary.BigEndian.Uint32(ip[12:16]))
		}
		if needIpDst {
			f.v[fIpDst] = uint64(binary.BigEndian.Uint32(ip[16:20]))
		}
		if needIpOptions {
			f.v[fIpOptions] = b2u(ihl > 5)
		}
		hlen := ihl * 4
		hdrOK := ihl >= 5 && hlen <= len(ip)
		if needIpHdrOk {
			f.v[fIpHdrOk] = b2u(hdrOK)
		}
		if !hdrOK {
			if needIpCsumOk {
				f.v[fIpCsumOk] = 0
			}
			if needIpLenOk {
				f.v[fIpLenOk] = 0
			}
			return
		}
		if needIpCsumOk {
			f.v[fIpCsumOk] = b2u(checksum(ip[:hlen], 0) == 0xffff)
		}
		lenOK := total >= hlen && total <= len(ip)
		if needIpLenOk {
			f.v[fIpLenOk] = b2u(lenOK)
		}
		if !needL4 || !lenOK || ip[0]>>4 != 4 || frag {
			return
		}
		l4 := ip[hlen:total]
		src, dst := ip[12:16], ip[16:20]
		switch ip[9] {
		case 1: // ICMP, RFC 792
			if !needIcmp || len(l4) < 8 {
				return
			}
			f.has |= hasIcmp
			if needIcmpType {
				f.v[fIcmpType] = uint64(l4[0])
			}
			if needIcmpCode {
				f.v[fIcmpCode] = uint64(l4[1])
			}
			if needIcmpCsumOk {
				f.v[fIcmpCsumOk] = b2u(icmpCsumOK(l4))
			}
		case 17: // UDP, RFC 768
			if !needUdp || len(l4) < 8 {
				return
			}
			f.has |= hasUdp
			sport, dport := f.ports(l4)
			ulen := int(binary.BigEndian.Uint16(l4[4:6]))
			if needUdpSport {
				f.v[fUdpSport] = sport
			}
			if needUdpDport {
				f.v[fUdpDport] = dport
			}
			if needUdpLen {
				f.v[fUdpLen] = uint64(ulen)
			}
			if needUdpLenOk {
				f.v[fUdpLenOk] = b2u(udpLenOK(ulen, len(l4)))
			}
			if needUdpCsumOk {
				f.v[fUdpCsumOk] = b2u(udpCsumOK(l4, src, dst))
			}
		case 6: // TCP, RFC 9293 section 3.1
			if !needTcp || len(l4) < 20 {
				return
			}
			f.has |= hasTcp
			sport, dport := f.ports(l4)
			if needTcpSport {
				f.v[fTcpSport] = sport
			}
			if needTcpDport {
				f.v[fTcpDport] = dport
			}
			if needTcpFlags {
				f.v[fTcpFlags] = uint64(l4[13])
			}
			if needTcpHdrOk {
				f.v[fTcpHdrOk] = b2u(tcpHdrOK(l4[12], len(l4)))
			}
			if needTcpCsumOk {
				f.v[fTcpCsumOk] = b2u(tcpCsumOK(l4, src, dst))
			}
		}
	}
}
