package dataplane

import (
	"encoding/binary"
	"strings"
)

// NICPrefix marks, in a chain, a transmit node the plan leaves to the NIC
// (checksum insertion, asked for in the transmit descriptor).
const NICPrefix = "nic:"

// NICTxNodes are the NIC's transmit nodes as the NIC runs them: on the
// finished frame, on the way out, each on the frames of its kind and a
// no-op on the rest. The sockets the data plane sends through (AF_XDP in
// copy mode, AF_PACKET without a virtio-net header) cannot carry the
// descriptor's request to the NIC, so the data plane runs them itself,
// after the chain, where the NIC would.
var NICTxNodes = map[string]TxFunc{
	"TxL3IPv4FillChecksum": nicIPv4Checksum,
	"TxL4UDPFillChecksum":  func(t *Tx) bool { return nicL4Checksum(t, 17, 6) },
	"TxL4TCPFillChecksum":  func(t *Tx) bool { return nicL4Checksum(t, 6, 16) },
}

// Transmit descriptor flags, the POPTS bits of Intel's advanced transmit
// descriptor (ixgbe_type.h, e1000_82575.h): what a frame asks the NIC to
// insert.
const (
	TxInsertIPv4Checksum = 0x01 // IXSM: insert the IPv4 header checksum
	TxInsertL4Checksum   = 0x02 // TXSM: insert the TCP/UDP checksum
)

// nicFlags is the descriptor flag each NIC node answers to.
var nicFlags = map[string]uint8{
	"TxL3IPv4FillChecksum": TxInsertIPv4Checksum,
	"TxL4UDPFillChecksum":  TxInsertL4Checksum,
	"TxL4TCPFillChecksum":  TxInsertL4Checksum,
}

// nicNode splits a chain entry into the node and whether the NIC runs it.
func nicNode(name string) (string, bool) {
	if n, ok := strings.CutPrefix(name, NICPrefix); ok {
		return n, true
	}
	return name, false
}

// nicIPv4Checksum fills the IPv4 header checksum (RFC 791 §3.1) of an
// IPv4 frame.
func nicIPv4Checksum(t *Tx) bool {
	b := t.Buf[:t.N]
	l3, _, _, ok := ipv4(b)
	if !ok {
		return true
	}
	h := b[l3 : l3+int(b[l3]&0xf)*4]
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], ^fold(sum(h, 0)))
	return true
}

// nicL4Checksum fills the transport checksum at offset at of a segment of
// protocol proto over its pseudo-header (RFC 768, RFC 9293 §3.1); a UDP
// checksum that computes to zero is sent as all ones.
func nicL4Checksum(t *Tx, proto uint8, at int) bool {
	b := t.Buf[:t.N]
	l3, l4, end, ok := ipv4(b)
	if !ok || b[l3+9] != proto || b[l3+6]&0x3f != 0 || b[l3+7] != 0 || end-l4 < at+2 {
		return true // not ours, or a fragment: nothing to fill
	}
	seg := b[l4:end]
	seg[at], seg[at+1] = 0, 0
	s := sum(b[l3+12:l3+20], 0) + uint32(proto) + uint32(len(seg))
	c := ^fold(sum(seg, s))
	if c == 0 && proto == 17 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(seg[at:], c)
	return true
}
