package baseline

import "encoding/binary"

// Hand is the plain hand-written baseline: a decoder over the frame bytes
// that checks as it goes and stops at the first failed check, and Go maps
// with packed keys for the endpoints.
type Hand struct{ t *tables }

// NewHand prepares the hand-written baseline for a stack.
func NewHand(c Config) *Hand { return &Hand{newTables(c)} }

// Process returns the endpoint a frame is delivered to, or -1. crcOK,
// ipOK and l4OK are the NIC's verdicts on the Ethernet CRC and the IPv4
// and UDP/TCP checksums.
func (h *Hand) Process(b []byte, crcOK, ipOK, l4OK bool) int32 {
	f, ep, done := h.t.decode(b, crcOK, ipOK, l4OK)
	if done {
		return ep
	}
	if f.proto == UDP {
		return h.t.demux(UDP, f.src, f.dst, f.sport, f.dport, 0)
	}
	return h.t.demux(TCP, f.src, f.dst, f.sport, f.dport, f.flags)
}

// segment is what a frame's transport header says, for the demultiplexer.
type segment struct {
	proto        int
	src, dst     uint32
	sport, dport uint16
	flags        uint8
}

// decode checks a frame of any layout as it goes, stopping at the first
// failed check: done is set when the frame's fate is settled without a
// transport demultiplexer (ep: -1 or an Open-MX endpoint); otherwise f is
// the UDP or TCP segment to demultiplex. Hand and Careful's general path
// share it.
func (t *tables) decode(b []byte, crcOK, ipOK, l4OK bool) (f segment, ep int32, done bool) {
	if !crcOK || len(b) < 18 || b[6]&1 != 0 { // a whole header (VLAN room); an individual source (IEEE 802.3 §3.2.3)
		return f, -1, true
	}
	etype := binary.BigEndian.Uint16(b[12:14])
	off, tagged := 14, false
	if etype == 0x8100 { // 802.1Q: only priority tags (VID 0) are ours
		if binary.BigEndian.Uint16(b[14:16])&0x0fff != 0 {
			return f, -1, true
		}
		etype = binary.BigEndian.Uint16(b[16:18])
		off, tagged = 18, true
	}
	dmac := uint64(binary.BigEndian.Uint16(b[0:2]))<<32 | uint64(binary.BigEndian.Uint32(b[2:6]))
	if !t.frameFits(dmac, len(b), tagged) {
		return f, -1, true
	}
	switch etype {
	case 0x0800:
	case OpenMX:
		if len(b) < off+5 {
			return f, -1, true
		}
		return f, t.omx[b[off+3]], true
	default:
		return f, -1, true
	}
	ip := b[off:]
	if len(ip) < 20 || ip[0]>>4 != 4 {
		return f, -1, true
	}
	hlen := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if hlen < 20 || hlen > len(ip) || total < hlen || total > len(ip) || !ipOK {
		return f, -1, true
	}
	src, dst := binary.BigEndian.Uint32(ip[12:16]), binary.BigEndian.Uint32(ip[16:20])
	if !t.source(src, dst) || !t.local.has(dst) {
		return f, -1, true
	}
	if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 { // MF or an offset: a fragment
		return f, -1, true
	}
	l4 := ip[hlen:total]
	switch ip[9] {
	case UDP:
		if len(l4) < 8 {
			return f, -1, true
		}
		ulen := int(binary.BigEndian.Uint16(l4[4:6]))
		if ulen < 8 || ulen > len(l4) || !l4OK {
			return f, -1, true
		}
		return segment{UDP, src, dst, binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), 0}, 0, false
	case TCP:
		if !t.unicast.has(dst) || len(l4) < 20 {
			return f, -1, true
		}
		doff := int(l4[12]>>4) * 4
		if doff < 20 || doff > len(l4) || !l4OK {
			return f, -1, true
		}
		return segment{TCP, src, dst, binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), l4[13]}, 0, false
	}
	return f, -1, true
}
