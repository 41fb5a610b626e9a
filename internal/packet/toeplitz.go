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
	if sp, ok := f.Get(fL4Sport); ok && (proto == ProtoTCP && tcpPorts || proto == ProtoUDP && udpPorts) {
		dp, _ := f.Get(fL4Dport)
		binary.BigEndian.PutUint16(in[8:10], uint16(sp))
		binary.BigEndian.PutUint16(in[10:12], uint16(dp))
		n = 12
	}
	return Toeplitz(key, in[:n]), true
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
