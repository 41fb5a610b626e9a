package sim

import (
	"fmt"
	"math/rand"
	"net"

	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
)

// Frame is a generated frame with what it aims at.
type Frame struct {
	Data  []byte
	CRCOK bool
	Label string
}

// Gen makes frames aimed at a stack: at every endpoint, at the neighbours
// of every filter boundary (ports and addresses one off, other peers,
// wildcard against exact), at every validity check (checksums, TTL 0, bad
// header lengths, fragments, VLAN tags, truncation at each header
// boundary, bad CRC, foreign MACs, unknown EtherTypes, ARP, ICMP, Open-MX
// to known and unknown endpoints), and random frames. The sequence depends
// only on the stack and the seed.
type Gen struct {
	st    *lpg.Stack
	rng   *rand.Rand
	base  []target
	fixed []fixedTarget
	n     int
	mac   net.HardwareAddr
	addrs []net.IP
	peer  net.IP
	other net.IP
}

// target is a valid frame aimed at something, before damage, kept small
// (a stack of 100,000 endpoints has a million of them): the spec is made
// when the frame is.
type target struct {
	ep    int32 // index in the stack's endpoints; -1: fixed[arg]
	kind  uint8
	sport uint16
	arg   int32 // the TCP flags' index, the second address's, the Open-MX endpoint, the fixed target's
}

// Kinds of endpoint targets.
const (
	atEndpoint uint8 = iota
	portAbove
	portBelow
	otherAddress
	otherPeer
	otherProtocol
	secondAddress
	openMX
)

// tcpFlags are the flags of the frames aimed at a TCP endpoint: SYN, ACK,
// SYN+ACK, PSH+ACK.
var tcpFlags = []uint8{0x02, 0x10, 0x12, 0x18}

type fixedTarget struct {
	spec  packet.Spec
	label string
}

// NewGen prepares a generator.
func NewGen(st *lpg.Stack, seed int64) *Gen {
	g := &Gen{st: st, rng: rand.New(rand.NewSource(seed))}
	g.mac = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x42}
	if len(st.Interfaces) > 0 {
		m := st.Interfaces[0].MAC
		g.mac = net.HardwareAddr{byte(m >> 40), byte(m >> 32), byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
	}
	for _, in := range st.Interfaces {
		for _, p := range in.IPs {
			g.addrs = append(g.addrs, ip(p.Addr))
		}
	}
	if len(g.addrs) == 0 {
		g.addrs = []net.IP{{10, 0, 0, 1}}
	}
	g.targets()
	return g
}

func ip(a uint32) net.IP { return pred.Addr(a).AsSlice() }

func (g *Gen) add(s packet.Spec, label string) {
	g.base = append(g.base, target{ep: -1, arg: int32(len(g.fixed))})
	g.fixed = append(g.fixed, fixedTarget{s, label})
}

func (g *Gen) targets() {
	g.peer = net.IP{198, 51, 100, 77}
	us := g.addrs[0]
	g.other = net.IP{us[0], us[1], us[2], us[3] ^ 0x80}
	peer, other := g.peer, g.other
	n := 0
	for range g.st.Endpoints {
		n += 5 + len(g.addrs) - 1 + len(tcpFlags)
	}
	g.base = make([]target, 0, n+11)
	for i, e := range g.st.Endpoints {
		ep := int32(i)
		if e.Proto == lpg.OpenMX {
			for _, d := range []int{0, 1, -1} {
				if id := int(e.OMXID) + d; id >= 0 && id <= 255 {
					g.base = append(g.base, target{ep: ep, kind: openMX, arg: int32(id)})
				}
			}
			continue
		}
		sport := uint16(40000 + g.rng.Intn(20000))
		if e.Flow {
			sport = e.RPort
		}
		flags := 1
		if e.Proto == lpg.TCP {
			flags = len(tcpFlags)
		}
		for f := range flags {
			g.base = append(g.base, target{ep: ep, kind: atEndpoint, sport: sport, arg: int32(f)})
		}
		// Filter boundaries: one port off, another local address, another
		// peer, the other protocol.
		for _, k := range []uint8{portAbove, portBelow, otherAddress, otherPeer, otherProtocol} {
			g.base = append(g.base, target{ep: ep, kind: k, sport: sport})
		}
		for a := 1; a < len(g.addrs); a++ {
			g.base = append(g.base, target{ep: ep, kind: secondAddress, sport: sport, arg: int32(a)})
		}
	}
	g.add(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us}, "arp for us")
	g.add(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: other}, "arp for another host")
	g.add(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us, ARPOp: 2}, "arp reply")
	g.add(packet.Spec{Src: peer, Dst: us, Proto: packet.ProtoICMP, ICMPType: 8}, "icmp echo")
	g.add(packet.Spec{Src: peer, Dst: us, Proto: packet.ProtoICMP, ICMPType: 3}, "icmp other")
	g.add(packet.Spec{Src: peer, Dst: us, Proto: packet.ProtoUDP, SrcPort: 1, DstPort: 9}, "udp to a closed port")
	g.add(packet.Spec{Src: peer, Dst: us, Proto: packet.ProtoTCP, SrcPort: 1, DstPort: 9, TCPFlags: 0x02}, "tcp to a closed port")
	g.add(packet.Spec{Src: peer, Dst: us, Proto: 47, Payload: make([]byte, 24)}, "gre")
	g.add(packet.Spec{EtherType: packet.EtherTypeOpenMX, OMXDstEP: 200, OMXType: 0x11}, "openmx elsewhere")
	g.add(packet.Spec{EtherType: 0x88cc, Payload: make([]byte, 46)}, "lldp")
	g.add(packet.Spec{EtherType: 0x86dd, Payload: make([]byte, 46)}, "ipv6")
}

// spec makes a target's frame description and label.
func (g *Gen) spec(t target) (packet.Spec, string) {
	if t.ep < 0 {
		f := g.fixed[t.arg]
		f.spec.DstMAC = g.mac
		return f.spec, f.label
	}
	e := g.st.Endpoints[t.ep]
	if t.kind == openMX {
		return packet.Spec{DstMAC: g.mac, EtherType: packet.EtherTypeOpenMX, OMXDstEP: uint8(t.arg), OMXType: 0x11}, "openmx " + e.Name
	}
	proto := uint8(packet.ProtoUDP)
	if e.Proto == lpg.TCP {
		proto = packet.ProtoTCP
	}
	dst := g.addrs[0]
	if !e.AnyAddr {
		dst = ip(e.Addr)
	}
	src := g.peer
	if e.Flow {
		src = ip(e.Remote)
	}
	s := packet.Spec{DstMAC: g.mac, Src: src, Dst: dst, Proto: proto, SrcPort: t.sport, DstPort: e.Port, TCPFlags: 0x02}
	switch t.kind {
	case atEndpoint:
		s.TCPFlags = 0
		if proto == packet.ProtoTCP {
			s.TCPFlags = tcpFlags[t.arg]
		}
		return s, "at " + e.Name
	case portAbove:
		s.DstPort++
		return s, "port above " + e.Name
	case portBelow:
		s.DstPort--
		return s, "port below " + e.Name
	case otherAddress:
		s.Dst = g.other
		return s, "other address " + e.Name
	case otherPeer:
		s.Src, s.SrcPort, s.TCPFlags = g.peer, t.sport+1, 0x18
		return s, "other peer " + e.Name
	case otherProtocol:
		s.Proto = 23 - proto
		return s, "other protocol " + e.Name
	default: // secondAddress
		s.Dst = g.addrs[t.arg]
		return s, "second address " + e.Name
	}
}

// Targeted is how many targeted frames Next returns before damaged and
// random ones: every endpoint and filter boundary once, then the last
// Unaimed of them, which aim at no endpoint (ARP, ICMP, closed ports,
// other EtherTypes).
func (g *Gen) Targeted() int { return len(g.base) }

// Unaimed is how many of the targeted frames, the last ones, aim at no
// endpoint.
func (g *Gen) Unaimed() int { return len(g.fixed) }

// Target returns targeted frame i (0 <= i < Targeted()), the frame Next
// returns i-th, without moving the generator: targeted frames depend on
// nothing drawn at random after NewGen.
func (g *Gen) Target(i int) Frame {
	s, label := g.spec(g.base[i])
	b, err := packet.Build(s)
	if err != nil {
		return Frame{Data: nil, CRCOK: true, Label: "empty"}
	}
	return Frame{Data: b, CRCOK: true, Label: label}
}

// SkipTargeted moves the generator past the targeted frames: Next then
// returns the damaged and random frames it would return after them all.
func (g *Gen) SkipTargeted() { g.n = max(g.n, len(g.base)) }

// Next returns the next frame: targeted frames first, each in turn, then
// damaged and random ones.
func (g *Gen) Next() Frame {
	i := g.n
	g.n++
	if i < len(g.base) {
		return g.Target(i)
	}
	s, label := g.spec(g.base[g.rng.Intn(len(g.base))])
	var post func([]byte) []byte
	crc := true
	if g.rng.Intn(4) == 0 && s.EtherType == 0 {
		// Host requirements (RFC 1122, RFC 9293): sources, broadcast
		// destinations, TTLs, sizes, priority tags and TCP flags.
		label = g.hostReq(&s, label)
		b, err := packet.Build(s)
		if err != nil {
			return Frame{Data: []byte{}, CRCOK: true, Label: "empty"}
		}
		return Frame{Data: b, CRCOK: true, Label: label}
	}
	switch g.rng.Intn(20) {
	case 0:
		s.BadIPChecksum, label = true, label+", bad IPv4 checksum"
	case 1:
		s.BadL4Checksum, label = true, label+", bad L4 checksum"
	case 2:
		s.ZeroTTL, label = true, label+", TTL 0"
	case 3:
		s.MoreFragments, label = true, label+", fragment"
	case 4:
		s.FragOffset, label = uint16(1+g.rng.Intn(100)), label+", later fragment"
	case 5:
		s.VLAN, label = 1+g.rng.Intn(4094), label+", VLAN-tagged"
	case 6:
		s.Options, label = 1+g.rng.Intn(10), label+", IPv4 options"
	case 7:
		crc, label = false, label+", bad CRC"
	case 8:
		s.DstMAC, label = net.HardwareAddr{0x02, 0xaa, 0, 0, 0, byte(g.rng.Intn(256))}, label+", another MAC"
	case 9:
		s.DstMAC, label = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, label+", broadcast"
	case 10:
		s.DstMAC, label = net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, 1}, label+", multicast"
	case 11, 12:
		cuts := []int{0, 1, 13, 14, 15, 17, 18, 20, 33, 34, 35, 41, 42, 43, 45, 53, 54, 55, 59}
		cut := cuts[g.rng.Intn(len(cuts))]
		label += ", truncated"
		post = func(b []byte) []byte { return b[:min(cut, len(b))] }
	case 13:
		label += ", bad IHL"
		ihl := []byte{0x40, 0x44, 0x4f, 0x46}[g.rng.Intn(4)]
		post = func(b []byte) []byte {
			if len(b) > 14 {
				b[14] = ihl
			}
			return b
		}
	case 14:
		label += ", bad version"
		post = func(b []byte) []byte {
			if len(b) > 14 {
				b[14] = b[14]&0x0f | 0x60
			}
			return b
		}
	case 15:
		label += ", bad total length"
		post = func(b []byte) []byte {
			if len(b) > 17 {
				b[16], b[17] = 0xff, byte(g.rng.Intn(256))
			}
			return b
		}
	case 16:
		label += ", bad UDP length"
		post = func(b []byte) []byte {
			if len(b) > 39 {
				b[38], b[39] = byte(g.rng.Intn(256)), byte(g.rng.Intn(256))
			}
			return b
		}
	case 17:
		s.Payload, label = make([]byte, g.rng.Intn(1400)), label+", payload"
		g.rng.Read(s.Payload)
	case 18:
		n := g.rng.Intn(120)
		b := make([]byte, n)
		g.rng.Read(b)
		if n >= 14 && g.rng.Intn(2) == 0 {
			copy(b[0:6], g.mac)
			b[12], b[13] = 0x08, 0x00
		}
		return Frame{Data: b, CRCOK: true, Label: "random bytes"}
	default:
		// A random flip in an otherwise valid frame.
		post = func(b []byte) []byte {
			if len(b) > 0 {
				b[g.rng.Intn(len(b))] ^= byte(1 << uint(g.rng.Intn(8)))
			}
			return b
		}
		label += ", one bit flipped"
	}
	b, err := packet.Build(s)
	if err != nil {
		return Frame{Data: []byte{}, CRCOK: true, Label: "empty"}
	}
	if post != nil {
		b = post(b)
	}
	return Frame{Data: b, CRCOK: crc, Label: label}
}

// hostReq changes a valid IPv4 frame into one of the cases the host
// requirements decide.
func (g *Gen) hostReq(s *packet.Spec, label string) string {
	var bcast []net.IP
	bcast = append(bcast, net.IP{255, 255, 255, 255})
	for _, b := range g.st.Broadcasts() {
		bcast = append(bcast, ip(b))
	}
	pick := func(xs []net.IP) net.IP { return xs[g.rng.Intn(len(xs))] }
	mtu := 1500
	if len(g.st.Interfaces) > 0 {
		mtu = g.st.Interfaces[0].MTU
	}
	switch g.rng.Intn(9) {
	case 0:
		martians := []net.IP{{0, 0, 0, 0}, {0, 1, 2, 3}, {127, 0, 0, 1}, {224, 0, 0, 9}, {239, 255, 255, 250}, {255, 255, 255, 255}, pick(g.addrs)}
		martians = append(martians, bcast...)
		s.Src = pick(martians)
		return label + ", source " + s.Src.String()
	case 1:
		s.Dst = pick(bcast)
		return label + ", to broadcast " + s.Dst.String()
	case 2:
		s.Src, s.Dst = net.IP{0, 0, 0, 0}, net.IP{255, 255, 255, 255}
		return label + ", 0.0.0.0 to 255.255.255.255"
	case 3:
		s.Dst = pick(bcast)
		s.DstMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		return label + ", link and IP broadcast"
	case 4:
		if g.rng.Intn(2) == 0 {
			s.ZeroTTL = true
			return label + ", TTL 0"
		}
		s.TTL = 1
		return label + ", TTL 1"
	case 5:
		s.PriorityTag = true
		return label + ", priority-tagged (VID 0)"
	case 6:
		// Around the MTU: the largest frame that fits, one byte more, and
		// the same with a priority tag.
		hdr := 20 + 4*s.Options
		switch s.Proto {
		case packet.ProtoUDP, packet.ProtoICMP:
			hdr += 8
		case packet.ProtoTCP:
			hdr += 20
		}
		n := mtu - hdr + g.rng.Intn(2)
		if n < 0 {
			n = 0
		}
		s.Payload = make([]byte, n)
		s.PriorityTag = g.rng.Intn(3) == 0
		return label + fmt.Sprintf(", %d-byte payload at MTU %d", n, mtu)
	default:
		if s.Proto != packet.ProtoTCP {
			s.Proto = packet.ProtoTCP
		}
		fl := []uint8{0x04, 0x06, 0x14, 0x01, 0x00, 0x29, 0x03, 0x11, 0x12}
		s.TCPFlags = fl[g.rng.Intn(len(fl))]
		return label + fmt.Sprintf(", TCP flags 0x%02x", s.TCPFlags)
	}
}
