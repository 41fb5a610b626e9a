package lpg

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
)

// Cycles are the software costs of LPG nodes, in CPU cycles per packet of
// minimum size. They are estimates for a straightforward software stack on
// a current x86 core: a header field test costs a few cycles, the IPv4
// header checksum folds 20 bytes, a transport checksum folds the segment
// (about half a cycle a byte plus setup), demultiplexing is one hash-table
// lookup, delivery enqueues into a socket ring, and building a reply
// allocates and fills a frame. `dragonc bench` (issue 7) measures the
// generated code; these numbers are the cost model's defaults until then.
var Cycles = map[string]float64{
	"queue":    50,  // read a receive descriptor and its buffer
	"field":    2,   // compare one header field
	"mac":      4,   // compare a 48-bit address against a small set
	"classify": 3,   // branch on a type field
	"ipcsum":   15,  // fold the 20-byte IPv4 header
	"l4csum":   40,  // fold a minimum-size UDP/TCP segment with its pseudo-header
	"demux":    40,  // one hash-table lookup of the flow key
	"deliver":  100, // enqueue into the endpoint's ring
	"reply":    300, // allocate and fill a reply frame
	"fill":     20,  // write a header
	"txcsum":   40,  // compute a transport checksum on transmit
	"txqueue":  50,  // write a transmit descriptor
}

// builder assembles an LPG; edges are given by name and resolved at the end.
type builder struct {
	g       *graph.Graph
	pending []pendingEdge
	spawns  []pendingSpawn
	sockets []socket
}

// socket is an endpoint's delivery node and its protocol's first
// transmit node.
type socket struct {
	node *graph.Node
	tx   string
}

type pendingEdge struct {
	node, port int
	target     string
}

type pendingSpawn struct {
	node   int
	name   string
	target string
}

func (b *builder) add(name string, kind graph.Kind, cost string, attrs ...string) *graph.Node {
	n := b.g.Add(&graph.Node{Name: name, Kind: kind, Attrs: attrs})
	if c, ok := Cycles[cost]; ok {
		n.Costs = []graph.Cost{{Unit: "cycles", Value: c}}
	}
	return n
}

// port adds a port with a predicate (nil for a default port) and targets.
func (b *builder) port(n *graph.Node, name string, p pred.Expr, targets ...string) {
	n.Ports = append(n.Ports, &graph.Port{Name: name, Pred: p})
	for _, t := range targets {
		b.pending = append(b.pending, pendingEdge{n.ID, len(n.Ports) - 1, t})
	}
}

// check adds a boolean whose true port continues to next and whose false
// port drops the packet.
func (b *builder) check(name, predicate, cost, next string) {
	n := b.add(name, graph.Boolean, cost)
	b.port(n, "true", pred.MustParse(predicate), next)
	b.port(n, "false", nil)
}

func (b *builder) spawn(n *graph.Node, name, target string) {
	b.spawns = append(b.spawns, pendingSpawn{n.ID, name, target})
}

func (b *builder) finish() (*graph.Graph, error) {
	for _, e := range b.pending {
		t, ok := b.g.Lookup(e.target)
		if !ok {
			return nil, fmt.Errorf("dragonc: internal error: LPG edge to unknown node %s", e.target)
		}
		p := b.g.Nodes[e.node].Ports[e.port]
		p.Succ = append(p.Succ, t.ID)
	}
	for _, s := range b.spawns {
		t, ok := b.g.Lookup(s.target)
		if !ok {
			return nil, fmt.Errorf("dragonc: internal error: LPG spawn of unknown node %s", s.target)
		}
		n := b.g.Nodes[s.node]
		n.Spawns = append(n.Spawns, &graph.Spawn{Name: s.name, Target: t.ID})
	}
	return b.g, nil
}

// Attribute prefixes that tell the interpreter what a terminal node means.
const (
	AttrEndpoint = "endpoint="
	AttrReply    = "reply="
	AttrSink     = "sink"
	// AttrShadowed marks the delivery node of a listener that can never
	// receive a packet (Stack.Shadowed): no queue is planned for it.
	AttrShadowed = "shadowed"
)

// Derive builds the Logical Protocol Graph of a stack: the receive path
// (Ethernet, ARP, IPv4, ICMP, UDP, TCP, Open-MX, demultiplexing to the
// declared endpoints) and the transmit path its endpoints and replies
// spawn. Node names follow Dragonet's convention so that a PRG node doing
// the same work has the same name.
func Derive(st *Stack) (*graph.Graph, error) {
	b := &builder{g: graph.New(st.Name)}
	var udps, tcps, omxs []*Endpoint
	for _, e := range st.Endpoints {
		switch e.Proto {
		case UDP:
			udps = append(udps, e)
		case TCP:
			tcps = append(tcps, e)
		case OpenMX:
			omxs = append(omxs, e)
		}
	}

	q := b.add("RxQueue", graph.FNode, "queue", "source")
	b.port(q, "out", nil, "RxL2EtherValidCRC")
	b.check("RxL2EtherValidCRC", "frame.crc_ok", "field", "RxL2EtherValidLength")
	b.check("RxL2EtherValidLength", "eth.len_ok", "field", "RxL2EtherValidUntagged")
	// No interface declares a VLAN, so tagged frames are not ours; a
	// priority-tagged frame (VID 0) carries only a priority and is treated
	// as untagged (IEEE 802.1Q-2018 §9.6: "the frame does not belong to any
	// VLAN"; VID 4095 is reserved).
	b.check("RxL2EtherValidUntagged", "!(vlan.id in {1..4095})", "field", "RxL2EtherValidMTU")
	// IEEE 802.3 clause 3.2.7: the MAC client data of a basic frame is at
	// most 1500 bytes; an interface's MTU sets the largest datagram it
	// takes, 4 more bytes with an 802.1Q tag.
	b.check("RxL2EtherValidMTU", mtuPredicate(st), "field", "RxL2EtherValidDest")
	var macs []string
	for _, in := range st.Interfaces {
		macs = append(macs, pred.FormatValue("eth.dst", in.MAC))
	}
	macs = append(macs, "ff:ff:ff:ff:ff:ff")
	b.check("RxL2EtherValidDest", "eth.dst in {"+strings.Join(dedup(macs), ", ")+"}", "mac", "RxL2EtherValidSource")
	// IEEE 802.3 §3.2.3 (b): a source address is an individual address.
	// A frame from a group address (the I/G bit, the first octet's least
	// significant bit) is forged, and every answer to it would go to the
	// whole segment.
	b.check("RxL2EtherValidSource", "eth.src & "+groupBit+" == 0", "field", "RxL2EtherClassifyL3")

	cl := b.add("RxL2EtherClassifyL3", graph.FNode, "classify")
	b.port(cl, "ipv4", pred.MustParse("eth.type == ipv4"), "RxL3IPv4ValidVersion")
	if st.ARP {
		b.port(cl, "arp", pred.MustParse("eth.type == arp"), "RxL3ARPValidHeader")
	}
	if len(omxs) > 0 {
		b.port(cl, "openmx", pred.MustParse("eth.type == openmx"), "RxOMXValidHeader")
	}
	b.port(cl, "other", nil)

	uni := ipSet(st.Unicast())
	if uni == "" {
		// No address: no IPv4 packet is ours. 0.0.0.0 is never a valid
		// destination, so the set is effectively empty.
		uni = "0.0.0.0"
	}
	if st.ARP {
		b.check("RxL3ARPValidHeader", "arp.valid", "field", "RxL3ARPIsRequest")
		b.check("RxL3ARPIsRequest", "arp.op == 1", "field", "RxL3ARPLocalIPDest")
		b.check("RxL3ARPLocalIPDest", "arp.tpa in {"+uni+"}", "field", "RxL3ARPValidSender")
		// The reply goes to the sender's hardware address, so it must be
		// an individual one (IEEE 802.3 §3.2.3); and the sender's protocol
		// address must be one a host may have, as for an IPv4 source:
		// Linux answers a request only when the route lookup from the
		// sender's address succeeds (arp_process, ip_route_input_noref),
		// which refuses multicast, broadcast, loopback, 0/8 and our own
		// addresses; 0.0.0.0 alone is a probe (RFC 5227 §2.1.1), which
		// arp_process answers before the lookup.
		b.check("RxL3ARPValidSender", "arp.sha & "+groupBit+" == 0 && !(arp.spa in {"+strings.Join(append(martians(st), "0.0.0.1..0.255.255.255"), ", ")+"})", "field", "RxL3ARPNeedsResponse")
		n := b.add("RxL3ARPNeedsResponse", graph.FNode, "reply", AttrReply+"arp")
		b.spawn(n, "response", "TxL3ARPInitiateResponse")
	}

	b.check("RxL3IPv4ValidVersion", "ip.version == 4", "field", "RxL3IPv4ValidHeaderLength")
	b.check("RxL3IPv4ValidHeaderLength", "ip.hdr_ok", "field", "RxL3IPv4ValidLength")
	b.check("RxL3IPv4ValidLength", "ip.len_ok", "field", "RxL3IPv4ValidChecksum")
	// No TTL check: RFC 1122 §3.2.1.7, a host MUST NOT discard a datagram
	// addressed to it because its TTL is 0 or 1.
	b.check("RxL3IPv4ValidChecksum", "ip.csum_ok", "ipcsum", "RxL3IPv4ValidSource")
	b.check("RxL3IPv4ValidSource", martianPredicate(st), "field", "RxL3IPv4ValidLocalIP")
	// Ours: a unicast address of an interface, or a broadcast valid on a
	// connected network (RFC 1122 §3.2.1.3, §3.3.6).
	b.check("RxL3IPv4ValidLocalIP", "ip.dst in {"+ipSet(append(st.Unicast(), st.Broadcasts()...))+"}", "field", "RxL3IPv4ValidReassembly")
	// Fragments are not reassembled here: they go to a named sink.
	ra := b.add("RxL3IPv4ValidReassembly", graph.Boolean, "field")
	b.port(ra, "true", pred.MustParse("ip.frag == 0"), "RxL3IPv4Classify")
	b.port(ra, "false", nil, "RxL3IPv4Fragments")
	b.add("RxL3IPv4Fragments", graph.FNode, "deliver", AttrSink)

	ic := b.add("RxL3IPv4Classify", graph.FNode, "classify")
	b.port(ic, "udp", pred.MustParse("ip.proto == udp"), "RxL4UDPValidHeaderLength")
	b.port(ic, "tcp", pred.MustParse("ip.proto == tcp"), "RxL4TCPValidUnicastDest")
	if st.ICMPEcho {
		b.port(ic, "icmp", pred.MustParse("ip.proto == icmp"), "RxL3ICMPValidHeaderLength")
	}
	b.port(ic, "other", nil)

	unicastDest := "ip.dst in {" + uni + "}"
	if st.ICMPEcho {
		b.check("RxL3ICMPValidHeaderLength", "icmp.type in {0..255}", "field", "RxL3ICMPValidChecksum")
		b.check("RxL3ICMPValidChecksum", "icmp.csum_ok", "l4csum", "RxL3ICMPIsTypeRequest")
		b.check("RxL3ICMPIsTypeRequest", "icmp.type == 8", "field", "RxL3ICMPValidUnicastDest")
		// RFC 1122 §3.2.2.6: an echo request to a broadcast address MAY be
		// silently discarded; dragonc does (as Linux does by default,
		// net.ipv4.icmp_echo_ignore_broadcasts = 1), so a ping to a
		// broadcast cannot be amplified.
		b.check("RxL3ICMPValidUnicastDest", unicastDest, "field", "RxL3ICMPNeedsResponse")
		n := b.add("RxL3ICMPNeedsResponse", graph.FNode, "reply", AttrReply+"icmp-echo")
		b.spawn(n, "response", "TxL3ICMPInitiateResponse")
	}

	b.check("RxL4UDPValidHeaderLength", "udp.len in {0..65535}", "field", "RxL4UDPValidLength")
	b.check("RxL4UDPValidLength", "udp.len_ok", "field", "RxL4UDPValidChecksum")
	b.check("RxL4UDPValidChecksum", "udp.csum_ok", "l4csum", "RxL4UDPDemux")
	b.demux("RxL4UDPDemux", "udp", udps, "RxL4UDPValidUnicastDest")
	// RFC 1122 §3.2.2: no ICMP error for a datagram sent to an IP broadcast
	// or as a link-layer broadcast; such a datagram no one wants is
	// dropped silently.
	b.check("RxL4UDPValidUnicastDest", unicastDest+" && eth.dst != ff:ff:ff:ff:ff:ff", "field", "RxL4UDPValidErrorSource")
	// RFC 1122 §3.2.2: nor for a datagram whose source does not define a
	// single host. Zero, loopback, broadcast and multicast sources were
	// dropped as martians; a class E source (240/4, RFC 1112 §4) is still
	// accepted, as Linux accepts it, but draws no error.
	b.check("RxL4UDPValidErrorSource", "!(ip.src in {240.0.0.0..255.255.255.255})", "field", "RxL4UDPPortUnreachable")
	// RFC 1122 §4.1.3.1: a host SHOULD answer a datagram to a port no one
	// listens to with an ICMP port unreachable; the transmit path builds it.
	pu := b.add("RxL4UDPPortUnreachable", graph.FNode, "reply", AttrSink)
	b.spawn(pu, "response", "TxL3ICMPInitiateUnreachable")

	// RFC 1122 §4.2.3.10: a SYN to a broadcast address MUST be discarded
	// silently; no TCP connection has a broadcast end, so every segment to
	// one is.
	b.check("RxL4TCPValidUnicastDest", unicastDest, "field", "RxL4TCPValidHeaderLength")
	b.check("RxL4TCPValidHeaderLength", "tcp.hdr_ok", "field", "RxL4TCPValidChecksum")
	b.check("RxL4TCPValidChecksum", "tcp.csum_ok", "l4csum", "RxL4TCPDemux")
	b.demux("RxL4TCPDemux", "tcp", tcps, "RxL4TCPValidNotReset")
	// RFC 9293 §3.10.7.1 and §3.10.7.2: a segment carrying RST is
	// discarded, never answered with a RST.
	b.check("RxL4TCPValidNotReset", "tcp.flags & rst == 0", "field", "RxL4TCPListenDiscard")
	// RFC 9293 §3.10.7.2: in LISTEN, a segment with ACK draws a RST; one
	// with neither SYN nor ACK (FIN alone, no flags, FIN+PSH+URG) is
	// dropped silently, and so is a SYN the listener did not take (SYN
	// with FIN, which Linux's tcp_rcv_state_process discards too). To a
	// closed port every segment without RST draws a RST (§3.10.7.1).
	// Ports in the demultiplexer's order, listeners on an address before
	// listeners on every address (all of them drop; the order names the
	// one that did, and keeps each kind together for the generated code).
	ld := b.add("RxL4TCPListenDiscard", graph.FNode, "demux")
	for _, any := range []bool{false, true} {
		for _, e := range tcps {
			if e.Flow || e.AnyAddr != any {
				continue
			}
			b.port(ld, e.Ident, pred.And{X: append(listenerAddr(e), flagsMasked(0x10, 0))})
		}
	}
	b.port(ld, "closed", nil, "RxL4TCPReset")
	b.add("RxL4TCPReset", graph.FNode, "reply", AttrSink)

	if len(omxs) > 0 {
		b.check("RxOMXValidHeader", "omx.dst_ep in {0..255}", "field", "RxOMXDemux")
		n := b.add("RxOMXDemux", graph.FNode, "demux")
		for _, e := range omxs {
			b.port(n, e.Ident, pred.MustParse(fmt.Sprintf("omx.dst_ep == %d", e.OMXID)), "RxOMXEndpoint_"+e.Ident)
		}
		b.port(n, "unknown", nil, "RxOMXUnknownEndpoint")
		b.add("RxOMXUnknownEndpoint", graph.FNode, "field", AttrSink)
		for _, e := range omxs {
			ep := b.add("RxOMXEndpoint_"+e.Ident, graph.FNode, "deliver", AttrEndpoint+e.Name)
			b.spawn(ep, "send", "TxOMXStart")
		}
	}

	// Transmit: endpoints send, replies answer; checksums are filled,
	// headers written, a transmit queue chosen.
	udpStart := b.add("TxL4UDPStart", graph.FNode, "fill")
	b.port(udpStart, "out", nil, "TxL4UDPFillChecksum")
	b.txcsum("TxL4UDPFillChecksum", "TxL3IPv4FillHeader")
	tcpStart := b.add("TxL4TCPStart", graph.FNode, "fill")
	b.port(tcpStart, "out", nil, "TxL4TCPFillChecksum")
	b.txcsum("TxL4TCPFillChecksum", "TxL3IPv4FillHeader")
	if st.ICMPEcho {
		n := b.add("TxL3ICMPInitiateResponse", graph.FNode, "fill")
		b.port(n, "out", nil, "TxL3ICMPFillChecksum")
	}
	un := b.add("TxL3ICMPInitiateUnreachable", graph.FNode, "fill")
	b.port(un, "out", nil, "TxL3ICMPFillChecksum")
	b.txcsum("TxL3ICMPFillChecksum", "TxL3IPv4FillHeader")
	ipfill := b.add("TxL3IPv4FillHeader", graph.FNode, "fill")
	b.port(ipfill, "out", nil, "TxL3IPv4FillChecksum")
	ipcs := b.add("TxL3IPv4FillChecksum", graph.FNode, "ipcsum")
	b.port(ipcs, "out", nil, "TxL2EtherFillHeader")
	if st.ARP {
		n := b.add("TxL3ARPInitiateResponse", graph.FNode, "fill")
		b.port(n, "out", nil, "TxL2EtherFillHeader")
	}
	if len(omxs) > 0 {
		// An Open-MX endpoint answers the endpoint that wrote to it.
		n := b.add("TxOMXStart", graph.FNode, "fill")
		b.port(n, "out", nil, "TxL2EtherFillHeader")
	}
	eth := b.add("TxL2EtherFillHeader", graph.FNode, "fill")
	b.port(eth, "out", nil, "TxQueueSelect")
	sel := b.add("TxQueueSelect", graph.FNode, "field")
	b.port(sel, "out", nil, "TxQueue")
	b.add("TxQueue", graph.FNode, "txqueue", "sink")

	for _, s := range b.sockets {
		b.spawn(s.node, "send", s.tx)
	}
	return b.finish()
}

func (b *builder) txcsum(name, next string) {
	n := b.add(name, graph.FNode, "txcsum")
	b.port(n, "out", nil, next)
}

// demux adds a demultiplexer: one port per endpoint, most specific first
// (connected flows, then listeners on one address, then listeners on every
// address), in declaration order within each class; unmatched packets go
// to the named sink.
func (b *builder) demux(name, proto string, eps []*Endpoint, sink string) {
	n := b.add(name, graph.FNode, "demux")
	ordered := append([]*Endpoint(nil), eps...)
	rank := func(e *Endpoint) int {
		switch {
		case e.Flow:
			return 0
		case !e.AnyAddr:
			return 1
		}
		return 2
	}
	sort.SliceStable(ordered, func(i, j int) bool { return rank(ordered[i]) < rank(ordered[j]) })
	prefix := map[string]string{"udp": "RxL4UDPSocket_", "tcp": "RxL4TCPSocket_"}[proto]
	for _, e := range ordered {
		b.port(n, e.Ident, EndpointPredicate(e), prefix+e.Ident)
	}
	b.port(n, "unmatched", nil, sink)
	for _, e := range eps {
		n := b.add(prefix+e.Ident, graph.FNode, "deliver", AttrEndpoint+e.Name)
		if e.Shadowed {
			n.Attrs = append(n.Attrs, AttrShadowed)
		}
		// The endpoint sends through its protocol's transmit path.
		b.sockets = append(b.sockets, socket{n, map[string]string{"udp": "TxL4UDPStart", "tcp": "TxL4TCPStart"}[proto]})
	}
}

// EndpointPredicate is the condition under which the demultiplexer sends a
// packet that reached it to endpoint e. It is built directly (stacks may
// declare thousands of endpoints).
func EndpointPredicate(e *Endpoint) pred.Expr {
	if e.Proto == OpenMX {
		return eq("omx.dst_ep", uint64(e.OMXID))
	}
	p := string(e.Proto)
	var parts []pred.Expr
	if e.Flow {
		// A connected flow is unicast: its local end is one address.
		parts = append(parts, eq("ip.src", uint64(e.Remote)), eq(p+".sport", uint64(e.RPort)))
		if !e.AnyAddr {
			parts = append(parts, eq("ip.dst", uint64(e.Addr)))
		}
		parts = append(parts, eq(p+".dport", uint64(e.Port)))
	} else {
		parts = append(parts, listenerAddr(e)...)
	}
	if e.Proto == TCP && !e.Flow {
		// A listener accepts connection requests: SYN without ACK, RST or
		// FIN (RFC 9293 §3.10.7.2; a SYN with RST is no request, and Linux
		// discards SYN with FIN).
		parts = append(parts, flagsMasked(0x17, 0x02))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return pred.And{X: parts}
}

func eq(field string, v uint64) pred.Expr {
	return pred.Cmp{Field: field, ID: pred.Fields[field].ID, Op: pred.Eq, Value: v}
}

// listenerAddr is what a listener matches besides TCP flags: its port and,
// for an address-specific listener, its address and (UDP) the broadcasts
// of its subnet.
func listenerAddr(e *Endpoint) []pred.Expr {
	p := string(e.Proto)
	var parts []pred.Expr
	switch dsts := e.Dsts(); {
	case len(dsts) == 1:
		parts = append(parts, eq("ip.dst", uint64(dsts[0])))
	case len(dsts) > 1:
		rs := make([]pred.Range, len(dsts))
		for i, a := range dsts {
			rs[i] = pred.Range{Lo: uint64(a), Hi: uint64(a)}
		}
		parts = append(parts, pred.Cmp{Field: "ip.dst", ID: pred.Fields["ip.dst"].ID, Op: pred.In, Ranges: pred.NormRanges(rs)})
	}
	return append(parts, eq(p+".dport", uint64(e.Port)))
}

// flagsMasked is `tcp.flags & mask == v`.
func flagsMasked(mask, v uint64) pred.Expr {
	c := eq("tcp.flags", v).(pred.Cmp)
	c.Mask = mask
	return c
}

func dedup(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
