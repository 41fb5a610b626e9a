package baseline

import (
	"encoding/binary"
	"slices"
)

// Careful is the hand-written baseline as a performance engineer writes
// it for one stack: Hand's checks, but frames of the common layout
// (untagged Ethernet II, IPv4 without options) have a path of their own
// that reads every field at its fixed offset, the common stack (one
// interface, a few addresses) is tested without loops, and the endpoint
// is found by port in an array rather than in maps. Other frames take a
// decoder like Hand's with the same port tables.
type Careful struct {
	mac      uint64 // the first interface's MAC
	maxFrame int    // its largest untagged frame
	bcastMax int    // the largest untagged broadcast frame
	oneMAC   bool   // the first interface is the only one
	quads    bool   // ours and unicast are quads
	ours     quad   // our addresses and broadcasts, 255.255.255.255
	unicast  quad
	t        *tables
	udp, tcp ports
}

// quad is a set of one to four addresses, the last repeated to fill the
// array: a test is four comparisons and no loop.
type quad [4]uint32

func newQuad(as []uint32) (quad, bool) {
	var q quad
	if len(as) == 0 || len(as) > len(q) {
		return q, false
	}
	for i := range q {
		q[i] = as[min(i, len(as)-1)]
	}
	return q, true
}

func (q *quad) has(a uint32) bool { return a == q[0] || a == q[1] || a == q[2] || a == q[3] }

// NewCareful prepares the careful hand-written baseline for a stack.
func NewCareful(c Config) *Careful { return newCareful(c, maxSpan, few) }

// The limits of the careful baseline's tables: an array over at most
// maxSpan ports of a protocol (64 KB), and at most few flows or further
// listeners on one port scanned in order (more take Hand's maps).
const (
	maxSpan = 4096
	few     = 8
)

func newCareful(c Config, span, few int) *Careful {
	t := newTables(c)
	k := &Careful{t: t, udp: newPorts(c, t, UDP, span, few), tcp: newPorts(c, t, TCP, span, few)}
	k.mac, k.maxFrame, k.bcastMax, k.oneMAC = 1<<48, -1, t.bcastMax, len(c.Interfaces) == 1 // 1<<48 is no MAC
	if len(c.Interfaces) > 0 {
		k.mac, k.maxFrame = c.Interfaces[0].MAC, c.Interfaces[0].MaxFrame
	}
	var ok1, ok2 bool
	k.ours, ok1 = newQuad(append(append(append([]uint32(nil), c.Unicast...), c.Broadcasts...), 0xffffffff))
	k.unicast, ok2 = newQuad(c.Unicast)
	k.quads = ok1 && ok2
	return k
}

// Process returns the endpoint a frame is delivered to, or -1, as
// Hand.Process does.
func (c *Careful) Process(b []byte, crcOK, ipOK, l4OK bool) int32 {
	if len(b) < 34 || b[12] != 0x08 || b[13] != 0x00 || b[14] != 0x45 {
		return c.general(b, crcOK, ipOK, l4OK)
	}
	// Untagged IPv4, IHL 5 words: the IPv4 header is b[14:34].
	if !crcOK || !ipOK || b[6]&1 != 0 {
		return -1
	}
	dmac := uint64(binary.BigEndian.Uint16(b[0:2]))<<32 | uint64(binary.BigEndian.Uint32(b[2:6]))
	switch {
	case dmac == c.mac:
		if len(b) > c.maxFrame {
			return -1
		}
	case c.oneMAC:
		if dmac != 0xffffffffffff || len(b) > c.bcastMax {
			return -1
		}
	case !c.t.frameFits(dmac, len(b), false):
		return -1
	}
	total := int(binary.BigEndian.Uint16(b[16:18]))
	if total < 20 || total > len(b)-14 || b[20]&0x3f != 0 || b[21] != 0 {
		return -1
	}
	src, dst := binary.BigEndian.Uint32(b[26:30]), binary.BigEndian.Uint32(b[30:34])
	if c.quads {
		// RFC 1122 section 3.2.1.3, as tables.source.
		if !c.ours.has(dst) || src>>24 == 127 || src>>28 == 0xe || c.ours.has(src) || src>>24 == 0 && dst != 0xffffffff {
			return -1
		}
	} else if !c.t.source(src, dst) || !c.t.local.has(dst) {
		return -1
	}
	l4 := b[34 : 14+total]
	switch b[23] {
	case UDP:
		if len(l4) < 8 || !l4OK {
			return -1
		}
		if ulen := int(binary.BigEndian.Uint16(l4[4:6])); ulen < 8 || ulen > len(l4) {
			return -1
		}
		dport := binary.BigEndian.Uint16(l4[2:4])
		e := c.udp.find(dport)
		if e.more >= 0 {
			return c.udp.demuxMore(e, src, dst, binary.BigEndian.Uint16(l4[0:2]), dport, 0x02)
		}
		return e.listener(dst)
	case TCP:
		if len(l4) < 20 || !l4OK {
			return -1
		}
		if !c.unicastDst(dst) {
			return -1
		}
		if doff := int(l4[12]>>4) * 4; doff < 20 || doff > len(l4) {
			return -1
		}
		dport := binary.BigEndian.Uint16(l4[2:4])
		e := c.tcp.find(dport)
		if e.more >= 0 {
			return c.tcp.demuxMore(e, src, dst, binary.BigEndian.Uint16(l4[0:2]), dport, l4[13])
		}
		if l4[13]&0x17 != 0x02 { // see demux
			return -1
		}
		return e.listener(dst)
	}
	return -1
}

// unicastDst reports whether a is one of our unicast addresses.
func (c *Careful) unicastDst(a uint32) bool {
	if c.quads {
		return c.unicast.has(a)
	}
	return c.t.unicast.has(a)
}

// general is Process for frames of any layout: Hand's decoder, then the
// port tables.
func (c *Careful) general(b []byte, crcOK, ipOK, l4OK bool) int32 {
	f, ep, done := c.t.decode(b, crcOK, ipOK, l4OK)
	if done {
		return ep
	}
	if f.proto == UDP {
		return c.udp.demux(f.src, f.dst, f.sport, f.dport, 0x02)
	}
	return c.tcp.demux(f.src, f.dst, f.sport, f.dport, f.flags)
}

// ports finds the endpoints of one protocol by local port: an array
// indexed by port over the window of at most span ports that holds the
// most of them, and a map for the ports outside it.
type ports struct {
	lo    uint16
	near  []port           // by port - lo
	far   map[uint16]*port // the ports outside the array
	extra []extra
	t     *tables
	proto int
}

// port is what one local port delivers to. Most ports have one listener,
// on one address or on every address, and need nothing else.
type port struct {
	addr uint32 // the address of the first listener on one address
	ep   int32  // that listener, or -1
	any  int32  // the listener on every address, or -1
	more int32  // the index in extra of the port's flows and further listeners, or -1
}

// none is a port without endpoints.
var none = port{ep: -1, any: -1, more: -1}

// extra are a port's flows, in declaration order, and its listeners on
// further addresses. When there are many, Hand's maps find them.
type extra struct {
	flows            []flow
	addrs            []listener
	mapFlows, mapEPs bool
}

type flow struct {
	remote, dst uint32 // dst 0: any of ours
	rport       uint16
	ep          int32
}

type listener struct {
	addr uint32
	ep   int32
}

func newPorts(c Config, t *tables, proto int, span, few int) ports {
	p := ports{t: t, proto: proto}
	all := map[uint16]*port{}
	entry := func(n uint16) *port {
		e := all[n]
		if e == nil {
			e = &port{}
			*e = none
			all[n] = e
		}
		return e
	}
	more := func(e *port) *extra {
		if e.more < 0 {
			e.more = int32(len(p.extra))
			p.extra = append(p.extra, extra{})
		}
		return &p.extra[e.more]
	}
	for i, ep := range c.Endpoints {
		if ep.Proto != proto {
			continue
		}
		e := entry(ep.Port)
		switch {
		case ep.Flow:
			x := more(e)
			dsts := ep.Dsts
			if ep.AnyAddr {
				dsts = []uint32{0}
			}
			for _, d := range dsts {
				x.flows = append(x.flows, flow{remote: ep.Remote, dst: d, rport: ep.RPort, ep: int32(i)})
			}
		case ep.AnyAddr:
			if e.any < 0 {
				e.any = int32(i)
			}
		default:
			for _, d := range ep.Dsts {
				if e.ep < 0 {
					e.addr, e.ep = d, int32(i)
					continue
				}
				if d == e.addr {
					continue
				}
				x := more(e)
				if !slices.ContainsFunc(x.addrs, func(l listener) bool { return l.addr == d }) {
					x.addrs = append(x.addrs, listener{d, int32(i)})
				}
			}
		}
	}
	for k := range p.extra {
		x := &p.extra[k]
		x.mapFlows, x.mapEPs = len(x.flows) > few, len(x.addrs) > few
	}
	// The window: the most ports within span of its first.
	sorted := make([]int, 0, len(all))
	for n := range all {
		sorted = append(sorted, int(n))
	}
	slices.Sort(sorted)
	best, bestLen := 0, 0
	for i, j := 0, 0; j < len(sorted); j++ {
		for i <= j && sorted[j]-sorted[i] >= span {
			i++
		}
		if j-i+1 > bestLen {
			best, bestLen = i, j-i+1
		}
	}
	if bestLen > 0 {
		lo, hi := sorted[best], sorted[best+bestLen-1]
		p.lo, p.near = uint16(lo), make([]port, hi-lo+1)
		for i := range p.near {
			p.near[i] = none
		}
	}
	for n, e := range all {
		if k := int(n - p.lo); k < len(p.near) {
			p.near[k] = *e
			continue
		}
		if p.far == nil {
			p.far = map[uint16]*port{}
		}
		p.far[n] = e
	}
	return p
}

// find is the entry of port n.
func (p *ports) find(n uint16) *port {
	if k := uint(n - p.lo); k < uint(len(p.near)) {
		return &p.near[k]
	}
	return p.findFar(n)
}

func (p *ports) findFar(n uint16) *port {
	if e, ok := p.far[n]; ok {
		return e
	}
	return &none
}

// listener is the listener on a port without flows or further
// listeners: on address dst, else on every address.
func (e *port) listener(dst uint32) int32 {
	if e.addr == dst && e.ep >= 0 {
		return e.ep
	}
	return e.any
}

// demux finds the endpoint of a datagram to port dport: flows first,
// then listeners on its address, then listeners on every address. flags
// are TCP's (UDP passes a SYN).
func (p *ports) demux(src, dst uint32, sport, dport uint16, flags uint8) int32 {
	e := p.find(dport)
	if e.more >= 0 {
		return p.demuxMore(e, src, dst, sport, dport, flags)
	}
	// A TCP listener takes connection requests only: SYN without ACK,
	// RST or FIN (RFC 9293 section 3.10.7.2).
	if flags&0x17 != 0x02 {
		return -1
	}
	return e.listener(dst)
}

// demuxMore is demux for a port with flows or listeners on several
// addresses.
func (p *ports) demuxMore(e *port, src, dst uint32, sport, dport uint16, flags uint8) int32 {
	x := &p.extra[e.more]
	if x.mapFlows {
		a, ok1 := p.t.flows[flowKey(p.proto, src, dst, sport, dport)]
		b, ok2 := p.t.flows[flowKey(p.proto, src, 0, sport, dport)]
		switch {
		case ok1 && (!ok2 || a < b):
			return a
		case ok2:
			return b
		}
	} else {
		for _, f := range x.flows {
			if f.remote == src && f.rport == sport && (f.dst == dst || f.dst == 0) {
				return f.ep
			}
		}
	}
	if flags&0x17 != 0x02 {
		return -1
	}
	if e.addr == dst && e.ep >= 0 {
		return e.ep
	}
	if x.mapEPs {
		if ep, ok := p.t.listeners[listenerKey(p.proto, dst, dport)]; ok {
			return ep
		}
	} else {
		for _, l := range x.addrs {
			if l.addr == dst {
				return l.ep
			}
		}
	}
	return e.any
}
