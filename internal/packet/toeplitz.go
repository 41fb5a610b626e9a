package packet

import (
	"encoding/binary"

	"github.com/dragonc/dragonc/internal/pred"
)

// DefaultRSSKey is the 40-byte key of Microsoft's RSS specification
// ("Verifying the RSS Hash Calculation"), which Intel's datasheets and the
// Linux drivers also use as their example key.
var DefaultRSSKey = []byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// Toeplitz computes the RSS hash of input under key: for every set bit of
// the input, the 32 key bits starting at that bit position are XORed into
// the result. The key must be at least 4 bytes longer than the input.
func Toeplitz(key, input []byte) uint32 {
	var result uint32
	if len(key) < 4 {
		// Models are validated; a short key still never panics.
		key = append(append([]byte(nil), key...), make([]byte, 4-len(key))...)
	}
	window := binary.BigEndian.Uint32(key[0:4])
	next := 4 // next key byte to shift into the window
	for _, b := range input {
		var kb byte
		if next < len(key) {
			kb = key[next]
		}
		next++
		for bit := 7; bit >= 0; bit-- {
			if b&(1<<uint(bit)) != 0 {
				result ^= window
			}
			window = window<<1 | uint32(kb>>uint(bit)&1)
		}
	}
	return result
}

// RSSHash hashes a decoded frame the way an RSS engine does for IPv4:
// source and destination address, then, when ports are enabled for the
// protocol and the datagram is not a fragment, source and destination
// port. ok is false for frames an RSS engine does not hash (non-IPv4).
func RSSHash(f *Frame, key []byte, tcpPorts, udpPorts bool) (hash uint32, ok bool) {
	src, hasSrc := f.Get(fIPSrc)
	dst, _ := f.Get(fIPDst)
	if hdrOK, _ := f.Get(fIPHdrOk); !hasSrc || hdrOK == 0 {
		return 0, false
	}
	var in [12]byte
	binary.BigEndian.PutUint32(in[0:4], uint32(src))
	binary.BigEndian.PutUint32(in[4:8], uint32(dst))
	n := 8
	proto, _ := f.Get(fIPProto)
	if sp, ok := f.Get(fL4Sport); ok && PortsHashed(proto, tcpPorts, udpPorts) {
		dp, _ := f.Get(fL4Dport)
		binary.BigEndian.PutUint16(in[8:10], uint16(sp))
		binary.BigEndian.PutUint16(in[10:12], uint16(dp))
		n = 12
	}
	return Toeplitz(key, in[:n]), true
}

// PortsHashed is the one rule for whether a hash engine that hashes TCP
// ports when tcpPorts and UDP ports when udpPorts puts the ports of an
// IPv4 datagram of protocol proto into its hash: only TCP and UDP have
// ports to hash, each when its protocol is enabled. RSSHash, PortSumHash,
// prg.Space.TupleHash and the embedding's knownBucket all decide by it.
func PortsHashed(proto uint64, tcpPorts, udpPorts bool) bool {
	return proto == ProtoTCP && tcpPorts || proto == ProtoUDP && udpPorts
}

var (
	fIPSrc   = pred.FieldID("ip.src")
	fIPDst   = pred.FieldID("ip.dst")
	fIPHdrOk = pred.FieldID("ip.hdr_ok")
	fIPProto = pred.FieldID("ip.proto")
	fL4Sport = pred.FieldID("l4.sport")
	fL4Dport = pred.FieldID("l4.dport")
)

// HashTuple is RSSHash for known field values: the addresses, and the ports
// when withPorts.
func HashTuple(key []byte, src, dst uint32, sport, dport uint16, withPorts bool) uint32 {
	var in [12]byte
	binary.BigEndian.PutUint32(in[0:4], src)
	binary.BigEndian.PutUint32(in[4:8], dst)
	if !withPorts {
		return Toeplitz(key, in[:8])
	}
	binary.BigEndian.PutUint16(in[8:10], sport)
	binary.BigEndian.PutUint16(in[10:12], dport)
	return Toeplitz(key, in[:12])
}

// PortSum is the Myri-10G firmware's port hash for the myri10ge module
// parameter myri10ge_rss_hash = MXGEFW_RSS_HASH_TYPE_SRC_DST_PORT (5, the
// default; myri10ge_mcp.h: "5: source port + destination port"): the low
// byte of the destination port plus the low byte of the source port. The
// firmware is closed; Myricom's own host mirror of it,
// myri10ge_simple_send_hash in illumos-gate
// usr/src/uts/common/io/myri10ge/drv/myri10ge.c ("so as to match NIC's
// hashing"), computes exactly this and takes its low bits as the slice.
func PortSum(sport, dport uint16) uint32 {
	return uint32(dport&0xff) + uint32(sport&0xff)
}

// PortSumHash hashes a decoded frame as the Myri-10G firmware does with
// the port hash: the ports of TCP or UDP over IPv4 (not a fragment, when
// ports are enabled for the protocol). Every other IPv4 frame hashes to
// 0: Myricom's host mirror (see PortSum) sends those to slice 0, which is
// bucket 0 of the driver's identity table. ok is false for frames that
// are not IPv4 with a readable header, as for RSSHash.
func PortSumHash(f *Frame, tcpPorts, udpPorts bool) (hash uint32, ok bool) {
	if hdrOK, _ := f.Get(fIPHdrOk); hdrOK == 0 {
		return 0, false
	}
	if _, ok := f.Get(fIPSrc); !ok {
		return 0, false
	}
	proto, _ := f.Get(fIPProto)
	sp, ok := f.Get(fL4Sport)
	if !ok || !PortsHashed(proto, tcpPorts, udpPorts) {
		return 0, true
	}
	dp, _ := f.Get(fL4Dport)
	return PortSum(uint16(sp), uint16(dp)), true
}
