// Package lpg turns stack files into Logical Protocol Graphs: the
// endpoints a user declares, validated with positioned diagnostics; the
// derivation of the full receive and transmit protocol graph from protocol
// templates; and the reference interpreter, the LPG run in software on one
// raw frame, which every embedding is checked against.
package lpg

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/pred"
)

// MaxRate bounds an endpoint's declared packet rate: 1 Gpps, above what
// any link carries to one endpoint (a 400 Gb/s link carries about 595 Mpps
// of 64-byte frames with their preamble and gap), so that costs stay
// finite.
const MaxRate = 1e9

// Stack is a validated stack file.
type Stack struct {
	Name       string
	Interfaces []Interface
	Cores      []int // sorted; nil when the file declares none
	Endpoints  []*Endpoint
	ICMPEcho   bool
	ARP        bool
	// ICMPErrors limits the ICMP errors the stack sends: Linux's
	// defaults, or what `service icmp-errors { ... }` sets.
	ICMPErrors ICMPErrorLimit
	File       *diag.File
}

// ICMPErrorLimit bounds the ICMP errors (port unreachable) a stack sends,
// as Linux bounds them (Documentation/networking/ip-sysctl.rst;
// net/ipv4/icmp.c, icmp_global_allow and icmpv4_xrlim_allow): a token
// bucket for the host, earning Rate errors a second and holding Burst, and
// one for each peer, earning PeerRate and holding PeerBurst. An error goes
// out when both buckets hold one. The limits slow errors down and never
// stop them: a host should answer a datagram to a closed port (RFC 1122
// §4.1.3.1), so every field is at least its minimum.
type ICMPErrorLimit struct {
	Rate  int // errors a second for the host: icmp_msgs_per_sec, 1000
	Burst int // the host's bucket: icmp_msgs_burst, 50
	// PeerRate is the errors a second one peer earns: one every
	// icmp_ratelimit, 1000 ms. PeerBurst is its bucket:
	// XRLIM_BURST_FACTOR, 6 (net/ipv4/inetpeer.c).
	PeerRate  float64
	PeerBurst int
}

// LinuxICMPErrors is Linux's limit, every stack's unless its file sets
// another.
var LinuxICMPErrors = ICMPErrorLimit{Rate: 1000, Burst: 50, PeerRate: 1, PeerBurst: 6}

// Bounds on ICMP error limits. A rate is at most MaxRate, like an
// endpoint's. A bucket's time, its burst over its rate, must fit the data
// plane's clock (time.Duration, 292 years): 10^6 errors at one in
// 1,000 s is 32 years.
const (
	MinICMPPeerRate = 0.001
	MaxICMPBurst    = 1_000_000
)

// Interface is a network interface of the host.
type Interface struct {
	Name string
	MAC  uint64
	IPs  []Prefix
	MTU  int
}

// Prefix is an IPv4 address with its prefix length.
type Prefix struct {
	Addr uint32
	Len  int
}

// Proto is an endpoint's protocol.
type Proto string

// Endpoint protocols.
const (
	UDP    Proto = "udp"
	TCP    Proto = "tcp"
	OpenMX Proto = "openmx"
)

// Class is an endpoint's service class.
type Class string

// Service classes.
const (
	Gold       Class = "gold"
	BestEffort Class = "best-effort"
)

// Endpoint is one declared endpoint; a listener with a port range is
// expanded into one endpoint per port.
type Endpoint struct {
	Name    string // as declared, NAME-PORT for ranges
	Ident   string // a safe identifier derived from Name, unique in the stack
	Proto   Proto
	Flow    bool   // a connected flow rather than a listener
	AnyAddr bool   // listens on every address (*)
	Addr    uint32 // local address
	Port    uint16 // local port
	Remote  uint32 // flows: remote address
	RPort   uint16 // flows: remote port
	OMXID   uint8  // Open-MX destination endpoint id
	App     string
	Cores   []int // cores the application runs on; nil: any
	Class   Class
	Rate    float64 // packets per second; 0 when not declared
	Message int     // bytes; 0 when not declared
	// NoDelay asks that small writes of a stream endpoint go out at once,
	// not combined (TCP_NODELAY; SOVIA's combining off).
	NoDelay bool
	Pos     diag.Range
	// Shadowed is set for a listener that can never receive a packet
	// (Stack.Shadowed); it gets no NIC filter.
	Shadowed bool
}

// LoadStack parses and validates a stack file.
func LoadStack(name string, src []byte) (*Stack, diag.List) {
	st, diags, _ := loadStack(name, src)
	return st, diags
}

// loadStack is LoadStack, which also returns the lowerer of a file that
// parsed (its indexes; nil otherwise).
func loadStack(name string, src []byte) (*Stack, diag.List, *stackLowerer) {
	s, diags := dsl.Parse(name, src)
	if diags.HasErrors() {
		return nil, diags, nil
	}
	if s.AST.Stack == nil {
		diags.Errorf(diag.Range{File: s.File}, diag.CodeBadKind, "%s holds a graph, not a stack of endpoints", name)
		return nil, diags, nil
	}
	l := lower(s)
	diags = append(diags, l.diags...)
	diags.Sort()
	if diags.HasErrors() {
		return nil, diags, l
	}
	return l.st, diags, l
}

// position is the syntax tree's position type, named through the dsl
// package so that participle enters only there.
type position = dsl.Position

type stackLowerer struct {
	src   *dsl.Source
	st    *Stack
	diags diag.List
	// The endpoints' identifiers and what they receive (conflictKey), as
	// checkNames and checkConflicts index them (a Loader keeps them).
	idents map[string]bool
	keys   map[conflictKey]int // the index of the first endpoint of each
	block  []Endpoint          // where add puts the next endpoints
}

func (l *stackLowerer) rng(start, end position) diag.Range { return l.src.Range(start, end) }

// Lower validates a parsed stack file.
func Lower(s *dsl.Source) (*Stack, diag.List) {
	l := lower(s)
	return l.st, l.diags
}

func lower(s *dsl.Source) *stackLowerer {
	ast := s.AST.Stack
	l := &stackLowerer{src: s, st: &Stack{Name: ast.Name.Text, File: s.File, ICMPErrors: LinuxICMPErrors}}
	var coresAt *dsl.StackItem
	services := map[string]*dsl.StackItem{}
	for _, it := range ast.Items {
		switch {
		case it.Interface != nil:
			l.iface(it.Interface)
		case it.Cores != nil:
			if coresAt != nil {
				l.diags.Errorf(l.rng(it.Pos, it.EndPos), diag.CodeDupStackName, "cores is declared twice")
			}
			coresAt = it
			l.st.Cores = l.ranges(it.Cores, 1<<16)
		case it.Service != nil:
			l.service(it, services)
		}
	}
	if len(l.st.Interfaces) == 0 {
		l.diags.Errorf(l.rng(ast.Name.Pos, ast.Name.EndPos), diag.CodeNoInterface, "stack %q declares no interface", ast.Name.Text).Detail =
			"add interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }"
	}
	for _, it := range ast.Items {
		if it.Endpoint != nil {
			l.endpoint(it, it.Endpoint)
		}
	}
	l.checkNames()
	l.checkConflicts()
	l.checkShadowed()
	return l
}

// serviceNames are the services a stack may declare.
var serviceNames = []string{"icmp-echo", "arp", "icmp-errors"}

// service lowers `service NAME [{ settings }]`; seen holds the services
// declared before it.
func (l *stackLowerer) service(it *dsl.StackItem, seen map[string]*dsl.StackItem) {
	sv := it.Service
	name := sv.Name.Text
	if !slices.Contains(serviceNames, name) {
		d := l.diags.Errorf(l.rng(sv.Name.Pos, sv.Name.EndPos), diag.CodeBadService, "unknown service %q", name)
		if best := diag.Closest(name, serviceNames); best != "" {
			d.Detail = diag.Sprintf("did you mean %q?", best)
		} else {
			d.Detail = "services are icmp-echo, arp and icmp-errors"
		}
		return
	}
	if first, dup := seen[name]; dup {
		line, _ := l.src.File.Position(first.Pos.Offset)
		l.diags.Errorf(l.rng(it.Pos, it.EndPos), diag.CodeDupStackName, "service %s is declared twice", name).Detail = fmt.Sprintf("the first is on line %d", line)
		return
	}
	seen[name] = it
	switch name {
	case "icmp-echo":
		l.st.ICMPEcho = true
	case "arp":
		l.st.ARP = true
	case "icmp-errors":
		l.st.ICMPErrors = l.icmpErrors(sv.Settings)
		return
	}
	if n := len(sv.Settings); n > 0 {
		first, last := sv.Settings[0], sv.Settings[n-1]
		l.diags.Errorf(l.rng(first.Pos, last.EndPos), diag.CodeBadService, "service %s takes no settings", name).Detail =
			"only icmp-errors does: rate, burst, peer-rate and peer-burst"
	}
}

// icmpErrors reads the settings of `service icmp-errors { ... }`: each of
// rate, burst, peer-rate and peer-burst at most once, Linux's default for
// any left out.
func (l *stackLowerer) icmpErrors(settings []*dsl.EpAttr) ICMPErrorLimit {
	lim := LinuxICMPErrors
	seen := map[string]bool{}
	for _, a := range settings {
		at := l.rng(a.Pos, a.EndPos)
		name := a.Name()
		key := name.Text
		switch key {
		case "rate", "burst", "peer-rate", "peer-burst":
		default:
			d := l.diags.Errorf(l.rng(name.Pos, name.EndPos), diag.CodeBadAttr, "unknown icmp-errors setting %q", key)
			if best := diag.Closest(key, []string{"rate", "burst", "peer-rate", "peer-burst"}); best != "" {
				d.Detail = diag.Sprintf("did you mean %q?", best)
			} else {
				d.Detail = "settings are rate, burst, peer-rate and peer-burst"
			}
			continue
		}
		if seen[key] {
			l.diags.Errorf(at, diag.CodeBadAttr, "icmp-errors sets %s twice", key)
			continue
		}
		seen[key] = true
		if a.Range == nil {
			l.diags.Errorf(at, diag.CodeBadAttr, "icmp-errors %s takes a number", key)
			continue
		}
		if len(a.Range.Items) != 1 || a.Range.Items[0].Hi != nil {
			l.diags.Errorf(at, diag.CodeBadAttr, "icmp-errors %s takes one number, not a range", key)
			continue
		}
		n := a.Range.Items[0].Lo
		switch key {
		case "burst", "peer-burst":
			if a.Unit != "" {
				l.diags.Errorf(at, diag.CodeBadAttr, "icmp-errors %s counts errors and takes no unit", key)
				continue
			}
			v := l.integer(n, 1, MaxICMPBurst, "icmp-errors "+key)
			if key == "burst" {
				lim.Burst = v
			} else {
				lim.PeerBurst = v
			}
		case "rate", "peer-rate":
			v, ok := l.icmpRate(a, n, key)
			if !ok {
				continue
			}
			if key == "rate" {
				lim.Rate = int(math.Round(v)) // 1.1kpps is 1100.0000000000002
			} else {
				lim.PeerRate = v
			}
		}
	}
	return lim
}

// icmpRate reads the rate n of setting a (rate or peer-rate) of
// icmp-errors, in errors a second. The host's rate is a whole number,
// as icmp_msgs_per_sec is.
func (l *stackLowerer) icmpRate(a *dsl.EpAttr, n *dsl.Num, key string) (float64, bool) {
	at := l.rng(a.Pos, a.EndPos)
	v, err := strconv.ParseFloat(n.Text, 64)
	mult, _ := dsl.Scale(string(a.Unit), dsl.Rate)
	if err != nil || mult == 0 {
		l.diags.Errorf(at, diag.CodeBadAttr, "icmp-errors %s needs a unit: %s (as in %s)", key, rateUnits(),
			map[string]string{"rate": "1000pps", "peer-rate": "1pps"}[key])
		return 0, false
	}
	v *= mult
	if n.Neg {
		v = -v
	}
	written := numText(n) + string(a.Unit)
	least, leastText := 1.0, "1pps"
	if key == "peer-rate" {
		least, leastText = MinICMPPeerRate, FormatRate(MinICMPPeerRate)
	}
	switch {
	case v < least:
		d := l.diags.Errorf(at, diag.CodeBadNumber, "icmp-errors %s %s is below %s", key, written, leastText)
		d.Detail = "the limits slow ICMP errors down and cannot stop them: a host answers a datagram to a closed port (RFC 1122 §4.1.3.1)"
		return 0, false
	case v > MaxRate:
		l.diags.Errorf(at, diag.CodeBadNumber, "icmp-errors %s %s is above %s", key, written, FormatRate(MaxRate))
		return 0, false
	case key == "rate" && math.Abs(v-math.Round(v)) > 1e-6:
		l.diags.Errorf(at, diag.CodeBadNumber, "icmp-errors rate %s is not a whole number of errors a second", written).Detail =
			"the host's rate counts whole errors, as Linux's icmp_msgs_per_sec does"
		return 0, false
	}
	return v, true
}

func (l *stackLowerer) iface(in *dsl.Interface) {
	out := Interface{Name: in.Name.Text}
	hw, err := net.ParseMAC(in.MAC.Text)
	if err != nil || len(hw) != 6 {
		l.diags.Errorf(l.rng(in.MAC.Pos, in.MAC.EndPos), diag.CodeBadMAC, "malformed MAC address %q", in.MAC.Text).Detail = "write six hexadecimal bytes separated by colons, as 00:1b:21:3a:4b:5c"
	} else {
		for _, b := range hw {
			out.MAC = out.MAC<<8 | uint64(b)
		}
		if hw[0]&1 != 0 {
			l.diags.Errorf(l.rng(in.MAC.Pos, in.MAC.EndPos), diag.CodeBadMAC, "%s is a multicast address; an interface needs a unicast MAC", in.MAC.Text)
		}
	}
	for _, c := range in.IPs {
		addr, ok := l.ipv4(c.Addr)
		n, err := strconv.Atoi(c.Len.Text)
		if err != nil || n < 0 || n > 32 || c.Len.Neg {
			l.diags.Errorf(l.rng(c.Len.Pos, c.Len.EndPos), diag.CodeBadAddr, "prefix length %s is not 0..32", numText(c.Len))
			continue
		}
		if !ok {
			continue
		}
		// RFC 1122 §3.2.1.3: a host's own address is a unicast address: not
		// {0, 0}, not a broadcast, not multicast (224/4) or loopback
		// (127/8, which never appears on a network interface).
		at := l.rng(c.Addr.Pos, c.Addr.EndPos)
		p := Prefix{addr, n}
		b, hasB := p.Broadcast()
		switch {
		case addr == 0:
			l.diags.Errorf(at, diag.CodeBadAddr, "0.0.0.0 is not an address an interface can have")
			continue
		case addr == LimitedBroadcast || hasB && addr == b:
			l.diags.Errorf(at, diag.CodeBadAddr, "%s is a broadcast address, not an interface's own", c.Addr.Text)
			continue
		case addr>>28 == 0xE:
			l.diags.Errorf(at, diag.CodeBadAddr, "%s is a multicast address, not an interface's own", c.Addr.Text)
			continue
		case addr>>24 == 127:
			l.diags.Errorf(at, diag.CodeBadAddr, "%s is a loopback address; dragonc stacks serve network interfaces", c.Addr.Text)
			continue
		}
		for _, other := range l.st.Interfaces {
			for _, q := range other.IPs {
				if q.Addr == addr {
					l.diags.Errorf(at, diag.CodeConflict, "%s is already an address of interface %s", c.Addr.Text, other.Name)
				}
			}
		}
		out.IPs = append(out.IPs, p)
	}
	if in.MTU != nil {
		out.MTU = l.integer(in.MTU, 68, 65535, "MTU")
	} else {
		out.MTU = 1500
	}
	for _, other := range l.st.Interfaces {
		if other.Name == out.Name {
			l.diags.Errorf(l.rng(in.Name.Pos, in.Name.EndPos), diag.CodeDupStackName, "interface %q is declared twice", out.Name)
		}
		if other.MAC == out.MAC && out.MAC != 0 {
			l.diags.Errorf(l.rng(in.MAC.Pos, in.MAC.EndPos), diag.CodeConflict, "MAC %s is already interface %s's", in.MAC.Text, other.Name)
		}
	}
	l.st.Interfaces = append(l.st.Interfaces, out)
}

func numText(n *dsl.Num) string {
	if n.Neg {
		return "-" + n.Text
	}
	return n.Text
}

// integer reads a whole number in [lo, hi].
func (l *stackLowerer) integer(n *dsl.Num, lo, hi int, what string) int {
	v, err := strconv.Atoi(n.Text)
	if n.Neg {
		v = -v
	}
	if err != nil || v < lo || v > hi {
		l.diags.Errorf(l.rng(n.Pos, n.EndPos), diag.CodeBadNumber, "%s %s is not a whole number in %d..%d", what, numText(n), lo, hi)
		return lo
	}
	return v
}

func (l *stackLowerer) ipv4(t *dsl.Tok) (uint32, bool) {
	a, err := netip.ParseAddr(t.Text)
	if err != nil || !a.Is4() || a.Zone() != "" {
		detail := "each part is a number 0..255 without leading zeros"
		if strings.Count(t.Text, ".") != 3 {
			detail = "write four numbers 0..255 separated by dots"
		}
		l.diags.Errorf(l.rng(t.Pos, t.EndPos), diag.CodeBadAddr, "malformed IPv4 address %q", t.Text).Detail = detail
		return 0, false
	}
	return pred.AddrValue(a), true
}

func (l *stackLowerer) ranges(r *dsl.RangeList, limit int) []int {
	// A set, so that overlapping ranges cost nothing: at most limit values.
	seen := make([]bool, limit)
	var out []int
	for _, it := range r.Items {
		lo := l.integer(it.Lo, 0, limit-1, "core")
		hi := lo
		if it.Hi != nil {
			hi = l.integer(it.Hi, 0, limit-1, "core")
			if hi < lo {
				l.diags.Errorf(l.rng(it.Hi.Pos, it.Hi.EndPos), diag.CodeBadNumber, "range %d..%d ends below its start", lo, hi)
				continue
			}
		}
		for c := lo; c <= hi; c++ {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Ints(out)
	return out
}

// ours reports whether addr belongs to an interface.
func (st *Stack) ours(addr uint32) bool {
	for _, in := range st.Interfaces {
		for _, p := range in.IPs {
			if p.Addr == addr {
				return true
			}
		}
	}
	return false
}

func (l *stackLowerer) endpoint(it *dsl.StackItem, ep *dsl.Endpoint) {
	at := l.rng(it.Pos, it.EndPos)
	base := Endpoint{Name: ep.Name.Text, Class: BestEffort, Pos: at}
	switch ep.Kind.Text {
	case "udp", "tcp":
		base.Proto = Proto(ep.Kind.Text)
		if ep.Listen == nil && ep.Flow == nil {
			l.diags.Errorf(l.rng(ep.Kind.Pos, ep.Kind.EndPos), diag.CodeBadKind, "a %s endpoint needs `listen ADDR:PORT` or `flow ADDR:PORT -> ADDR:PORT`", ep.Kind.Text)
			return
		}
	case "openmx":
		base.Proto = OpenMX
		if ep.ID == nil {
			l.diags.Errorf(l.rng(ep.Kind.Pos, ep.Kind.EndPos), diag.CodeBadKind, "an openmx endpoint needs its destination endpoint id, 0..255")
			return
		}
		id, err := strconv.Atoi(ep.ID.Text)
		if err != nil || id > 255 || ep.ID.Neg {
			l.diags.Errorf(l.rng(ep.ID.Pos, ep.ID.EndPos), diag.CodeBadOMX, "Open-MX endpoint id %s is above 255", numText(ep.ID)).Detail = "the destination endpoint is one byte of the Open-MX header"
			return
		}
		base.OMXID = uint8(id)
	default:
		d := l.diags.Errorf(l.rng(ep.Kind.Pos, ep.Kind.EndPos), diag.CodeBadKind, "unknown endpoint kind %q", ep.Kind.Text)
		suggest(d, ep.Kind.Text, endpointKinds, "endpoint kinds are udp, tcp and openmx")
		return
	}
	if (ep.Listen != nil || ep.Flow != nil) && base.Proto == OpenMX {
		l.diags.Errorf(l.rng(ep.Kind.Pos, ep.Kind.EndPos), diag.CodeBadKind, "openmx endpoints take an endpoint id, not addresses")
		return
	}
	l.attrs(&base, ep.Attrs)
	switch {
	case ep.Flow != nil:
		f := ep.Flow
		base.Flow = true
		base.AnyAddr, base.Addr = l.localAddr(f.LAddr)
		base.Port = uint16(l.integer(f.LPort, 1, 65535, "port"))
		if f.RAddr.Any {
			l.diags.Errorf(l.rng(f.RAddr.Pos, f.RAddr.EndPos), diag.CodeBadAddr, "a flow's remote address must be an address, not *")
		} else if r, ok := l.ipv4(f.RAddr.IP); ok {
			base.Remote = r
		}
		base.RPort = uint16(l.integer(f.RPort, 1, 65535, "port"))
		l.add(base)
	case ep.Listen != nil:
		ls := ep.Listen
		base.AnyAddr, base.Addr = l.localAddr(ls.Addr)
		lo := l.integer(ls.Port, 1, 65535, "port")
		if ls.Hi == nil {
			base.Port = uint16(lo)
			l.add(base)
			return
		}
		hi := l.integer(ls.Hi, 1, 65535, "port")
		if hi < lo {
			l.diags.Errorf(l.rng(ls.Hi.Pos, ls.Hi.EndPos), diag.CodeBadPort, "port range %d..%d ends below its start", lo, hi)
			return
		}
		for p := lo; p <= hi; p++ {
			e := base
			e.Name = fmt.Sprintf("%s-%d", base.Name, p)
			e.Port = uint16(p)
			l.add(e)
		}
	default:
		l.add(base)
	}
}

func (l *stackLowerer) add(e Endpoint) {
	if len(l.block) == 0 {
		// Endpoints in blocks that grow to 256: a stack of 10,000 is 40
		// allocations, not 10,000.
		l.block = make([]Endpoint, min(256, max(4, len(l.st.Endpoints))))
	}
	ep := &l.block[0]
	l.block = l.block[1:]
	*ep = e
	l.st.Endpoints = append(l.st.Endpoints, ep)
}

func (l *stackLowerer) localAddr(a *dsl.Addr) (bool, uint32) {
	if a.Any {
		return true, 0
	}
	v, ok := l.ipv4(a.IP)
	if !ok {
		return false, 0
	}
	if !l.st.ours(v) {
		var have []string
		for _, in := range l.st.Interfaces {
			for _, p := range in.IPs {
				have = append(have, FormatIP(p.Addr))
			}
		}
		d := l.diags.Errorf(l.rng(a.Pos, a.EndPos), diag.CodeNotOurs, "%s is not an address of any interface of this stack", a.IP.Text)
		if len(have) > 0 {
			d.Detail = "its addresses are " + strings.Join(have, ", ") + "; * means all of them"
		}
	}
	return false, v
}

// FormatIP prints an IPv4 address.
func FormatIP(a uint32) string { return pred.Addr(a).String() }

func (l *stackLowerer) attrs(e *Endpoint, attrs []*dsl.EpAttr) {
	seen := map[string]bool{}
	for _, a := range attrs {
		at := l.rng(a.Pos, a.EndPos)
		name := a.Name()
		key := name.Text
		if seen[key] {
			l.diags.Errorf(at, diag.CodeBadAttr, "attribute %s is given twice", key)
			continue
		}
		seen[key] = true
		want := func(kind string) bool {
			ok := kind == "string" && a.Str != nil || kind == "range" && a.Range != nil || kind == "word" && a.Word != nil
			if !ok {
				l.diags.Errorf(at, diag.CodeBadAttr, "attribute %s takes a %s", key, map[string]string{"string": "quoted string", "range": "number", "word": "name"}[kind])
			}
			return ok
		}
		single := func() (*dsl.Num, bool) {
			if !want("range") {
				return nil, false
			}
			if len(a.Range.Items) != 1 || a.Range.Items[0].Hi != nil {
				l.diags.Errorf(at, diag.CodeBadAttr, "attribute %s takes one number, not a range", key)
				return nil, false
			}
			return a.Range.Items[0].Lo, true
		}
		switch key {
		case "nodelay":
			if e.Proto != TCP {
				l.diags.Errorf(at, diag.CodeBadAttr, "nodelay applies to tcp endpoints").Detail = "it turns off the combining of small writes on a stream, as TCP_NODELAY does"
				continue
			}
			e.NoDelay = true
		case "app":
			if want("string") {
				s, err := dsl.Unquote(a.Str.Raw)
				if err != nil {
					l.diags.Errorf(at, diag.CodeBadAttr, "bad string: %v", err)
				}
				e.App = s
			}
		case "core":
			if n, ok := single(); ok {
				e.Cores = []int{l.core(n)}
			}
		case "cores":
			if want("range") {
				e.Cores = nil
				for _, it := range a.Range.Items {
					lo := l.core(it.Lo)
					hi := lo
					if it.Hi != nil {
						hi = l.core(it.Hi)
						if hi < lo {
							l.diags.Errorf(l.rng(it.Hi.Pos, it.Hi.EndPos), diag.CodeBadNumber, "core range %d..%d ends below its start", lo, hi)
							continue
						}
					}
					for c := lo; c <= hi; c++ {
						e.Cores = append(e.Cores, c)
					}
				}
				sort.Ints(e.Cores)
				e.Cores = slices.Compact(e.Cores)
			}
		case "class":
			if want("word") {
				switch a.Word.Text {
				case "gold":
					e.Class = Gold
				case "best-effort":
					e.Class = BestEffort
				default:
					suggest(l.diags.Errorf(at, diag.CodeBadAttr, "unknown class %q", a.Word.Text), a.Word.Text, classNames, "classes are gold and best-effort")
				}
			}
		case "rate":
			if n, ok := single(); ok {
				v, err := strconv.ParseFloat(n.Text, 64)
				mult, _ := dsl.Scale(string(a.Unit), dsl.Rate)
				if err != nil || mult == 0 || n.Neg {
					l.diags.Errorf(at, diag.CodeBadAttr, "rate needs a unit: %s (as in 1.2Mpps)", rateUnits())
					continue
				}
				e.Rate = v * mult
				if e.Rate > MaxRate || math.IsInf(e.Rate, 0) || math.IsNaN(e.Rate) {
					l.diags.Errorf(at, diag.CodeBadAttr, "rate %s%s is above %gMpps, more than any one endpoint receives", n.Text, a.Unit, MaxRate/1e6).Detail =
						"a 400 Gb/s link carries about 600 Mpps of minimum-size frames"
					e.Rate = 0
				}
			}
		case "message":
			if n, ok := single(); ok {
				v, err := strconv.Atoi(n.Text)
				scale, ok := dsl.Scale(string(a.Unit), dsl.Size)
				mult := int(scale)
				if a.Unit == "" {
					mult, ok = 1, true
				}
				if err != nil || !ok || n.Neg || v > math.MaxInt32/mult {
					l.diags.Errorf(at, diag.CodeBadAttr, "message takes a whole number of bytes, optionally %s", orWords(dsl.UnitNames(dsl.Size)))
					continue
				}
				e.Message = v * mult
			}
		default:
			suggest(l.diags.Errorf(l.rng(name.Pos, name.EndPos), diag.CodeBadAttr, "unknown endpoint attribute %q", key), key, attrNames, "attributes are "+listWords(attrNames, "and"))
		}
	}
}

func (l *stackLowerer) core(n *dsl.Num) int {
	c := l.integer(n, 0, 1<<16-1, "core")
	if l.st.Cores == nil {
		l.diags.Errorf(l.rng(n.Pos, n.EndPos), diag.CodeBadCore, "core %d is named, but the stack declares no cores", c).Detail = "add a line such as: cores 0..7"
	} else if !slices.Contains(l.st.Cores, c) {
		l.diags.Errorf(l.rng(n.Pos, n.EndPos), diag.CodeBadCore, "core %d is not among the stack's cores", c)
	}
	return c
}

// checkNames rejects duplicate endpoint names and gives each endpoint a
// unique identifier for generated code and graph nodes.
func (l *stackLowerer) checkNames() {
	byName := make(map[string]*Endpoint, len(l.st.Endpoints))
	idents := make(map[string]bool, len(l.st.Endpoints))
	l.idents = idents
	for _, e := range l.st.Endpoints {
		if prev, dup := byName[e.Name]; dup {
			line, _ := l.src.File.Position(prev.Pos.Start)
			l.diags.Errorf(e.Pos, diag.CodeDupStackName, "endpoint %q is declared twice", e.Name).Detail = fmt.Sprintf("the first is on line %d", line)
			continue
		}
		byName[e.Name] = e
		id := Sanitize(e.Name)
		if idents[id] {
			first := id
			for n := 2; idents[id]; n++ {
				id = fmt.Sprintf("%s_%d", first, n)
			}
			l.diags.Warnf(e.Pos, diag.CodeIdentClash, "endpoint %q becomes the identifier %s in generated code, as an earlier endpoint does; it is %s there", e.Name, first, id)
		}
		idents[id] = true
		e.Ident = id
	}
}

// The words a stack's semantics give meaning to, beyond the grammar's:
// for the likely word in a diagnostic.
var (
	endpointKinds = []string{"udp", "tcp", "openmx"}
	classNames    = []string{"gold", "best-effort"}
	attrNames     = []string{"app", "core", "cores", "class", "rate", "message", "nodelay"}
)

// suggest gives d the likely word among cands, if there is one, before
// the list of what may stand there.
func suggest(d *diag.Diagnostic, word string, cands []string, list string) {
	d.Detail = list
	if best := diag.Closest(word, cands); best != "" {
		d.Detail = diag.Sprintf("did you mean %q? ", best) + list
	}
}

// rateUnits says the units of a rate, as a message lists them.
func rateUnits() string { return orWords(dsl.UnitNames(dsl.Rate)) }

// orWords says a list of words: "a, b or c".
func orWords(ws []string) string { return listWords(ws, "or") }

// listWords says a list of words joined by conj: "a, b and c".
func listWords(ws []string, conj string) string {
	if len(ws) < 2 {
		return strings.Join(ws, "")
	}
	return strings.Join(ws[:len(ws)-1], ", ") + " " + conj + " " + ws[len(ws)-1]
}

// Sanitize turns any name into an identifier: letters, digits and _ kept,
// everything else _, a leading digit prefixed.
func Sanitize(name string) string {
	if isIdent(name) {
		return name // most names are identifiers already
	}
	var b strings.Builder
	b.Grow(len(name) + 1)
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "e" + s
	}
	return s
}

// isIdent reports whether Sanitize leaves name as it is.
func isIdent(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// checkShadowed warns about listeners that can never receive a packet.
func (l *stackLowerer) checkShadowed() {
	for _, e := range l.st.Shadowed() {
		e.Shadowed = true
		var by []string
		for _, o := range l.st.Endpoints {
			if o.Proto == e.Proto && o.Port == e.Port && !o.Flow && !o.AnyAddr {
				by = append(by, strconv.Quote(o.Name))
			}
		}
		d := l.diags.Warnf(e.Pos, diag.CodeShadowed, "endpoint %q can never receive a packet: %s take every address it listens on", e.Name, strings.Join(by, ", "))
		d.Detail = "address-specific listeners are tried before wildcard ones; remove the wildcard listener or one of the others"
	}
}

// checkConflicts rejects two endpoints that would receive the same packets
// with equal specificity.
func (l *stackLowerer) checkConflicts() {
	seen := make(map[conflictKey]int, len(l.st.Endpoints))
	l.keys = seen
	for i, e := range l.st.Endpoints {
		key := conflictKeyOf(e)
		if prev, dup := seen[key]; dup {
			l.diags.Errorf(e.Pos, diag.CodeConflict, "endpoint %q receives the same packets as %q", e.Name, l.st.Endpoints[prev].Name)
			continue
		}
		seen[key] = i
	}
}

// conflictKey is what an endpoint receives: two endpoints of one key
// would receive the same packets with equal specificity.
type conflictKey struct {
	proto        Proto
	omx          uint8
	flow, any    bool
	addr, remote uint32
	port, rport  uint16
}

func conflictKeyOf(e *Endpoint) conflictKey {
	switch {
	case e.Proto == OpenMX:
		return conflictKey{proto: OpenMX, omx: e.OMXID}
	case e.Flow:
		return conflictKey{proto: e.Proto, flow: true, addr: e.Addr, port: e.Port, remote: e.Remote, rport: e.RPort, any: e.AnyAddr}
	default:
		return conflictKey{proto: e.Proto, addr: e.Addr, port: e.Port, any: e.AnyAddr}
	}
}
