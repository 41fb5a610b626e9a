package dataplane

import "encoding/binary"

// Tx is a frame being built in answer to a received one. The transmit
// path is a chain of TxFuncs, one per Tx node of the LPG, in the order the
// LPG connects them (the generated main program lists the chains); each
// writes its part at a fixed place: Ethernet at 0, IPv4 at 14, the
// transport header at 34 (replies carry no IPv4 options).
type Tx struct {
	Req     []byte // the received frame (untagged or priority-tagged, see l2)
	Buf     []byte // the frame being built
	N       int    // its length so far
	MAC     [6]byte
	Proto   uint8
	Src     [4]byte
	Dst     [4]byte
	DstMAC  [6]byte
	EthType uint16
	SPort   uint16
	DPort   uint16
	Payload []byte // UDP: what the application sends
	Flags   uint8  // transmit descriptor flags (TxInsertIPv4Checksum, ...)
	id      uint16
}

// A TxFunc is one transmit node; false means there is nothing to send
// (the received frame was not what the node answers).
type TxFunc func(t *Tx) bool

// TxNodes maps the LPG's transmit node names to their work. The generated
// main program looks every node of a chain up here; a node missing from
// the table is an error at generation, not at run time.
var TxNodes = map[string]TxFunc{
	"TxL3ARPInitiateResponse":     TxL3ARPInitiateResponse,
	"TxL3ICMPInitiateResponse":    TxL3ICMPInitiateResponse,
	"TxL3ICMPInitiateUnreachable": TxL3ICMPInitiateUnreachable,
	"TxL3ICMPFillChecksum":        TxL3ICMPFillChecksum,
	"TxL4UDPStart":                TxL4UDPStart,
	"TxOMXStart":                  TxOMXStart,
	"TxL4UDPFillChecksum":         TxL4UDPFillChecksum,
	"TxL3IPv4FillHeader":          TxL3IPv4FillHeader,
	"TxL3IPv4FillChecksum":        TxL3IPv4FillChecksum,
	"TxL2EtherFillHeader":         TxL2EtherFillHeader,
	"TxQueueSelect":               TxQueueSelect,
	"TxQueue":                     TxQueue,
}

// ICMPErrorNodes are the transmit nodes that start an ICMP error message
// (RFC 792's error types), which Host.ICMPErrors limits.
var ICMPErrorNodes = map[string]bool{"TxL3ICMPInitiateUnreachable": true}

// TxQueueSelect picks the transmit queue: the receive loop's own socket.
func TxQueueSelect(*Tx) bool { return true }

// TxQueue hands the frame over; the receive loop sends it once the chain
// is through.
func TxQueue(*Tx) bool { return true }

const (
	ethLen  = 14
	ipLen   = 20
	l4At    = ethLen + ipLen
	maxIPv4 = 1500 // the largest datagram built (IEEE 802.3 basic frame)
)

// l2 returns the length of the received frame's Ethernet header and its
// EtherType: 14 bytes, or 18 with an 802.1Q tag. The LPG lets through only
// untagged frames and priority-tagged ones (VID 0, IEEE 802.1Q §9.6),
// which are answered untagged as Linux answers them; ok is false for a
// frame too short to hold the header.
func l2(req []byte) (n int, etype uint16, ok bool) {
	if len(req) < ethLen {
		return 0, 0, false
	}
	etype = binary.BigEndian.Uint16(req[12:])
	if etype != 0x8100 {
		return ethLen, etype, true
	}
	if len(req) < ethLen+4 {
		return 0, 0, false
	}
	return ethLen + 4, binary.BigEndian.Uint16(req[16:]), true
}

// ipv4 returns the offsets of the received frame's IPv4 header and
// transport header and the datagram's end, or ok false. The datagram ends
// where its total length says (RFC 791 §3.1); bytes after it are the
// link's padding.
func ipv4(req []byte) (l3, l4, end int, ok bool) {
	l3, etype, ok := l2(req)
	if !ok || etype != 0x0800 || len(req) < l3+ipLen {
		return 0, 0, 0, false
	}
	ihl := int(req[l3]&0xf) * 4
	total := int(binary.BigEndian.Uint16(req[l3+2:]))
	if ihl < ipLen || total < ihl || l3+total > len(req) {
		return 0, 0, 0, false
	}
	return l3, l3 + ihl, l3 + total, true
}

// TxL3ARPInitiateResponse answers an ARP request (RFC 826, "Packet
// Reception"): opcode reply, our hardware address for the asked protocol
// address, sent to the asker.
func TxL3ARPInitiateResponse(t *Tx) bool {
	at, etype, ok := l2(t.Req)
	if !ok || etype != 0x0806 || len(t.Req) < at+28 {
		return false
	}
	a := t.Req[at:]
	b := t.Buf[ethLen : ethLen+28]
	binary.BigEndian.PutUint16(b[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[2:], 0x0800) // IPv4
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], 2) // reply
	copy(b[8:14], t.MAC[:])
	copy(b[14:18], a[24:28]) // the address asked for is ours
	copy(b[18:24], a[8:14])
	copy(b[24:28], a[14:18])
	copy(t.DstMAC[:], a[8:14])
	t.EthType = 0x0806
	t.N = ethLen + 28
	return true
}

// TxL3ICMPInitiateResponse turns an echo request into its reply (RFC 792,
// "Echo or Echo Reply Message"; RFC 1122 §3.2.2.6: the data returned
// unchanged, the reply's source the address the request was sent to).
func TxL3ICMPInitiateResponse(t *Tx) bool {
	l3, l4, end, ok := ipv4(t.Req)
	if !ok || end-l4 < 8 || l4At+end-l4 > len(t.Buf) {
		return false
	}
	n := copy(t.Buf[l4At:], t.Req[l4:end])
	t.Buf[l4At] = 0 // echo reply
	t.Buf[l4At+1] = 0
	t.Buf[l4At+2], t.Buf[l4At+3] = 0, 0
	t.answer(l3)
	t.Proto = 1
	t.N = l4At + n
	return true
}

// TxL3ICMPInitiateUnreachable builds a port unreachable (RFC 792,
// "Destination Unreachable Message", code 3; RFC 1122 §3.2.2.1 and
// §4.1.3.1: a host SHOULD send it for a UDP datagram no one listens to)
// quoting the datagram's IP header and its first 8 data octets.
func TxL3ICMPInitiateUnreachable(t *Tx) bool {
	l3, l4, end, ok := ipv4(t.Req)
	if !ok {
		return false
	}
	quote := min(end, l4+8) - l3
	b := t.Buf[l4At:]
	b[0], b[1] = 3, 3
	clear(b[2:8])
	copy(b[8:], t.Req[l3:l3+quote])
	t.answer(l3)
	t.Proto = 1
	t.N = l4At + 8 + quote
	return true
}

// answer addresses the reply to the request's sender, from the address
// the request was sent to.
func (t *Tx) answer(l3 int) {
	copy(t.Src[:], t.Req[l3+16:l3+20])
	copy(t.Dst[:], t.Req[l3+12:l3+16])
	copy(t.DstMAC[:], t.Req[6:12])
}

// TxL3ICMPFillChecksum fills the ICMP checksum (RFC 792: the one's
// complement of the one's complement sum of the message).
func TxL3ICMPFillChecksum(t *Tx) bool {
	b := t.Buf[l4At:t.N]
	binary.BigEndian.PutUint16(b[2:], ^fold(sum(b, 0)))
	return true
}

// TxL4UDPStart writes a UDP header before the payload (RFC 768).
func TxL4UDPStart(t *Tx) bool {
	if l4At+8+len(t.Payload) > ethLen+maxIPv4 {
		return false
	}
	b := t.Buf[l4At:]
	binary.BigEndian.PutUint16(b[0:], t.SPort)
	binary.BigEndian.PutUint16(b[2:], t.DPort)
	binary.BigEndian.PutUint16(b[4:], uint16(8+len(t.Payload)))
	b[6], b[7] = 0, 0
	n := copy(b[8:], t.Payload)
	t.Proto = 17
	t.EthType = 0x0800
	t.N = l4At + 8 + n
	return true
}

// omxHeader is the length of the Open-MX header as dragonc models it
// (internal/packet: type, destination and source endpoint at bytes 2..4).
const omxHeader = 8

// TxOMXStart writes an Open-MX message to the endpoint that sent the
// request: the request's type, its source endpoint as the destination
// and its destination endpoint as the source, then the payload.
func TxOMXStart(t *Tx) bool {
	at, _, ok := l2(t.Req)
	if !ok || len(t.Req) < at+omxHeader || ethLen+omxHeader+len(t.Payload) > len(t.Buf) {
		return false
	}
	r := t.Req[at:]
	h := t.Buf[ethLen : ethLen+omxHeader]
	clear(h)
	h[2], h[3], h[4] = r[2], r[4], r[3]
	n := copy(t.Buf[ethLen+omxHeader:], t.Payload)
	t.EthType = 0x86DF
	t.N = ethLen + omxHeader + n
	return true
}

// TxL4UDPFillChecksum fills the UDP checksum over the pseudo header
// (RFC 768); a computed zero is sent as all ones.
func TxL4UDPFillChecksum(t *Tx) bool {
	b := t.Buf[l4At:t.N]
	s := sum(t.Src[:], 0)
	s = sum(t.Dst[:], s)
	s += uint32(17) + uint32(len(b))
	c := ^fold(sum(b, s))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(b[6:], c)
	return true
}

// TxL3IPv4FillHeader writes the IPv4 header (RFC 791 §3.1): no options,
// TTL 64 (RFC 1700's recommended default), a fresh identification.
func TxL3IPv4FillHeader(t *Tx) bool {
	b := t.Buf[ethLen:l4At]
	b[0], b[1] = 0x45, 0
	binary.BigEndian.PutUint16(b[2:], uint16(t.N-ethLen))
	t.id++
	binary.BigEndian.PutUint16(b[4:], t.id)
	b[6], b[7] = 0, 0
	b[8], b[9] = 64, t.Proto
	b[10], b[11] = 0, 0
	copy(b[12:16], t.Src[:])
	copy(b[16:20], t.Dst[:])
	t.EthType = 0x0800
	return true
}

// TxL3IPv4FillChecksum fills the header checksum (RFC 791 §3.1).
func TxL3IPv4FillChecksum(t *Tx) bool {
	b := t.Buf[ethLen:l4At]
	binary.BigEndian.PutUint16(b[10:], ^fold(sum(b, 0)))
	return true
}

// TxL2EtherFillHeader writes the Ethernet header.
func TxL2EtherFillHeader(t *Tx) bool {
	copy(t.Buf[0:6], t.DstMAC[:])
	copy(t.Buf[6:12], t.MAC[:])
	binary.BigEndian.PutUint16(t.Buf[12:], t.EthType)
	return true
}

// sum adds b as big-endian 16-bit words to s (RFC 1071 §4.1).
func sum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
