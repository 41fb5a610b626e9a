// Package baseline holds the programs dragonc's generated code is measured
// against: what an engineer would write by hand for the same job. Careful
// is what a performance engineer writes (the common layout read at fixed
// offsets, endpoints in an array indexed by port); Hand is a plain
// decoder that finds the endpoint with packed keys in Go maps, and
// Gopacket the same with gopacket. All make the checks the Logical
// Protocol Graph makes before it delivers a frame (the tests hold them to
// it, frame by frame) and take the NIC's checksum verdicts as a driver
// would from the receive descriptor. `dragonc bench` copies these files
// into its harness so that every variant runs in one process on the same
// frames.
package baseline

// Config is what a baseline knows about the stack.
type Config struct {
	Interfaces []Interface
	Unicast    []uint32 // the interfaces' addresses
	Broadcasts []uint32 // the directed broadcasts of their subnets
	Endpoints  []Endpoint
}

// Interface is one interface: its MAC and its largest untagged frame
// (MTU + 14 bytes, without the FCS).
type Interface struct {
	MAC      uint64
	MaxFrame int
}

// Protocols (IANA).
const (
	UDP    = 17
	TCP    = 6
	OpenMX = 0x86df // an EtherType: Open-MX endpoints are not IP
)

// Endpoint is one declared endpoint, in declaration order.
type Endpoint struct {
	Proto   int
	Flow    bool
	AnyAddr bool
	Dsts    []uint32 // the destinations of an address-specific endpoint
	Port    uint16
	Remote  uint32 // flows
	RPort   uint16
	OMXID   uint8
}

// tables are the lookups the baselines share.
type tables struct {
	macs      []Interface // few: a linear scan beats a map
	bcastMax  int         // largest untagged broadcast frame
	local     addrSet
	unicast   addrSet
	bad       addrSet // our addresses and broadcasts as sources
	flows     map[[2]uint64]int32
	listeners map[uint64]int32 // proto, ip.dst, port
	wildcard  map[uint64]int32 // proto, port
	omx       [256]int32
	hasFlows  bool
}

func flowKey(proto int, src, dst uint32, sport, dport uint16) [2]uint64 {
	return [2]uint64{uint64(src)<<32 | uint64(dst), uint64(proto)<<32 | uint64(sport)<<16 | uint64(dport)}
}

func listenerKey(proto int, dst uint32, port uint16) uint64 {
	return uint64(proto)<<48 | uint64(dst)<<16 | uint64(port)
}

func newTables(c Config) *tables {
	t := &tables{macs: c.Interfaces, flows: map[[2]uint64]int32{}, listeners: map[uint64]int32{}, wildcard: map[uint64]int32{}}
	for _, in := range c.Interfaces {
		t.bcastMax = max(t.bcastMax, in.MaxFrame)
	}
	var local []uint32
	local = append(append(append(local, c.Unicast...), c.Broadcasts...), 0xffffffff)
	t.local, t.bad, t.unicast = newAddrSet(local), newAddrSet(local), newAddrSet(c.Unicast)
	for i := range t.omx {
		t.omx[i] = -1
	}
	add := func(m map[uint64]int32, k uint64, i int) {
		if _, ok := m[k]; !ok {
			m[k] = int32(i)
		}
	}
	for i, e := range c.Endpoints {
		switch {
		case e.Proto == OpenMX:
			if t.omx[e.OMXID] < 0 {
				t.omx[e.OMXID] = int32(i)
			}
		case e.Flow:
			t.hasFlows = true
			dsts := e.Dsts
			if e.AnyAddr {
				dsts = []uint32{0}
			}
			for _, d := range dsts {
				k := flowKey(e.Proto, e.Remote, d, e.RPort, e.Port)
				if _, ok := t.flows[k]; !ok {
					t.flows[k] = int32(i)
				}
			}
		case e.AnyAddr:
			add(t.wildcard, listenerKey(e.Proto, 0, e.Port), i)
		default:
			for _, d := range e.Dsts {
				add(t.listeners, listenerKey(e.Proto, d, e.Port), i)
			}
		}
	}
	return t
}

// addrSet is a set of addresses: a slice scanned in order while it is
// small, a map beyond.
type addrSet struct {
	few  []uint32
	many map[uint32]bool
}

func newAddrSet(as []uint32) addrSet {
	if len(as) <= 8 {
		return addrSet{few: as}
	}
	m := map[uint32]bool{}
	for _, a := range as {
		m[a] = true
	}
	return addrSet{many: m}
}

func (s *addrSet) has(a uint32) bool {
	if s.many != nil {
		return s.many[a]
	}
	for _, x := range s.few {
		if x == a {
			return true
		}
	}
	return false
}

// source reports whether a datagram's source address is acceptable
// (RFC 1122 section 3.2.1.3): not one of ours, no broadcast, not
// loopback or multicast, and 0/8 only towards the limited broadcast.
func (t *tables) source(src, dst uint32) bool {
	switch {
	case src>>24 == 127, src>>28 == 0xe, t.bad.has(src):
		return false
	case src>>24 == 0:
		return dst == 0xffffffff
	}
	return true
}

// frameFits applies the MTU of the interface a frame is addressed to.
func (t *tables) frameFits(dst uint64, n int, tagged bool) bool {
	limit := -1
	for _, in := range t.macs {
		if in.MAC == dst {
			limit = in.MaxFrame
			break
		}
	}
	if limit < 0 {
		if dst != 0xffffffffffff {
			return false
		}
		limit = t.bcastMax
	}
	return n <= limit || tagged && n <= limit+4
}

// demux finds the endpoint of a UDP or TCP datagram: flows first, then
// listeners on an address, then listeners on every address.
func (t *tables) demux(proto int, src, dst uint32, sport, dport uint16, flags uint8) int32 {
	if t.hasFlows {
		a, ok1 := t.flows[flowKey(proto, src, dst, sport, dport)]
		b, ok2 := t.flows[flowKey(proto, src, 0, sport, dport)]
		switch {
		case ok1 && (!ok2 || a < b):
			return a
		case ok2:
			return b
		}
	}
	// A TCP listener takes connection requests only: SYN without ACK,
	// RST or FIN (RFC 9293 section 3.10.7.2).
	if proto == TCP && flags&0x17 != 0x02 {
		return -1
	}
	if ep, ok := t.listeners[listenerKey(proto, dst, dport)]; ok {
		return ep
	}
	if ep, ok := t.wildcard[listenerKey(proto, 0, dport)]; ok {
		return ep
	}
	return -1
}
