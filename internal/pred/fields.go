package pred

import "sort"

// FieldInfo describes one packet field of the predicate vocabulary.
type FieldInfo struct {
	ID    int // index into decoded frames; fields are numbered in name order
	Name  string
	Bits  int    // width of its value; values are unsigned
	Doc   string // what it is, for `dragonc help fields` and docs/language.md
	Layer string // which header must be present for the field to exist
}

// Fields is the field vocabulary of docs/language.md section 2. A comparison on a
// field that the frame does not have (udp.dport of a TCP segment) is false,
// whatever the operator; `!` is ordinary negation. Metadata fields
// (frame.crc_ok, rss.hash) come from the NIC, not from the frame bytes.
var Fields = map[string]FieldInfo{
	"frame.len":    {Bits: 16, Doc: "frame length in bytes, without the FCS", Layer: "frame"},
	"frame.crc_ok": {Bits: 1, Doc: "1 when the Ethernet CRC was correct (NIC metadata)", Layer: "frame"},
	"eth.dst":      {Bits: 48, Doc: "destination MAC address", Layer: "eth"},
	"eth.src":      {Bits: 48, Doc: "source MAC address", Layer: "eth"},
	"eth.type":     {Bits: 16, Doc: "EtherType after any VLAN tag", Layer: "eth"},
	"vlan.id":      {Bits: 12, Doc: "VLAN identifier of an 802.1Q tag", Layer: "vlan"},
	"arp.op":       {Bits: 16, Doc: "ARP operation (1 request, 2 reply)", Layer: "arp"},
	"arp.tpa":      {Bits: 32, Doc: "ARP target protocol (IPv4) address", Layer: "arp"},
	"arp.sha":      {Bits: 48, Doc: "ARP sender hardware (MAC) address", Layer: "arp"},
	"arp.spa":      {Bits: 32, Doc: "ARP sender protocol (IPv4) address", Layer: "arp"},
	"ip.version":   {Bits: 4, Doc: "IP version nibble", Layer: "ip"},
	"ip.ihl":       {Bits: 4, Doc: "IPv4 header length in 32-bit words", Layer: "ip"},
	"ip.len":       {Bits: 16, Doc: "IPv4 total length", Layer: "ip"},
	"ip.ttl":       {Bits: 8, Doc: "IPv4 time to live", Layer: "ip"},
	"ip.frag":      {Bits: 1, Doc: "1 when the datagram is a fragment (MF set or offset non-zero)", Layer: "ip"},
	"ip.proto":     {Bits: 8, Doc: "IPv4 protocol number", Layer: "ip"},
	"ip.src":       {Bits: 32, Doc: "IPv4 source address", Layer: "ip"},
	"ip.dst":       {Bits: 32, Doc: "IPv4 destination address", Layer: "ip"},
	"ip.csum_ok":   {Bits: 1, Doc: "1 when the IPv4 header checksum is correct", Layer: "ip"},
	"icmp.type":    {Bits: 8, Doc: "ICMP type", Layer: "icmp"},
	"udp.sport":    {Bits: 16, Doc: "UDP source port", Layer: "udp"},
	"udp.dport":    {Bits: 16, Doc: "UDP destination port", Layer: "udp"},
	"udp.len":      {Bits: 16, Doc: "UDP length field", Layer: "udp"},
	"udp.csum_ok":  {Bits: 1, Doc: "1 when the UDP checksum is correct or absent (zero)", Layer: "udp"},
	"tcp.sport":    {Bits: 16, Doc: "TCP source port", Layer: "tcp"},
	"tcp.dport":    {Bits: 16, Doc: "TCP destination port", Layer: "tcp"},
	"tcp.flags":    {Bits: 8, Doc: "TCP flags (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20)", Layer: "tcp"},
	"tcp.csum_ok":  {Bits: 1, Doc: "1 when the TCP checksum is correct", Layer: "tcp"},
	"l4.sport":     {Bits: 16, Doc: "UDP or TCP source port", Layer: "l4"},
	"l4.dport":     {Bits: 16, Doc: "UDP or TCP destination port", Layer: "l4"},
	"omx.dst_ep":   {Bits: 8, Doc: "Open-MX destination endpoint (byte 17)", Layer: "omx"},
	"omx.type":     {Bits: 8, Doc: "Open-MX packet type (byte 16)", Layer: "omx"},
	"rss.hash":     {Bits: 32, Doc: "the NIC's RSS hash (NIC metadata; opaque to the solver)", Layer: "meta"},
	// Derived validity checks: comparisons the header bytes alone cannot
	// express without arithmetic.
	"eth.len_ok":   {Bits: 1, Doc: "1 when the frame holds a whole Ethernet header (14 bytes); the 60-byte minimum is the sender's padding, which a software link omits", Layer: "eth"},
	"arp.valid":    {Bits: 1, Doc: "1 when the ARP header is Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4)", Layer: "arp"},
	"ip.hdr_ok":    {Bits: 1, Doc: "1 when IHL >= 5 and the whole IPv4 header is present", Layer: "ip"},
	"ip.len_ok":    {Bits: 1, Doc: "1 when IPv4 total length covers the header and fits in the frame", Layer: "ip"},
	"ip.options":   {Bits: 1, Doc: "1 when the IPv4 header carries options (IHL > 5)", Layer: "ip"},
	"icmp.code":    {Bits: 8, Doc: "ICMP code", Layer: "icmp"},
	"icmp.csum_ok": {Bits: 1, Doc: "1 when the ICMP checksum is correct", Layer: "icmp"},
	"udp.len_ok":   {Bits: 1, Doc: "1 when 8 <= UDP length <= the IPv4 payload", Layer: "udp"},
	"tcp.hdr_ok":   {Bits: 1, Doc: "1 when the TCP data offset is >= 5 and the header fits the IPv4 payload", Layer: "tcp"},
	"omx.src_ep":   {Bits: 8, Doc: "Open-MX source endpoint (byte 18)", Layer: "omx"},
}

// LayerInfo is a header of the vocabulary (the Layer of its fields). A
// decoder reads a layer's fields only from a frame that has the parent
// layer and whose field When.Field takes one of When.Vals; layers without
// a condition depend on the frame's length alone.
type LayerInfo struct {
	Name   string
	Parent string // "" for the frame and the NIC's metadata
	When   []Cond
}

// Cond says that a field takes one of a set of values.
type Cond struct {
	Field string
	Vals  []uint64
}

// Layers are the headers a frame may carry and when a decoder reads them:
// the one statement of these facts, which internal/fallback's decoder
// follows (its tests check that), the solver reasons with, and the
// generator's switches for whole headers are derived from.
var Layers = []LayerInfo{
	{Name: "frame"},
	{Name: "meta"},
	{Name: "eth", Parent: "frame"},
	{Name: "vlan", Parent: "eth"},
	{Name: "arp", Parent: "eth", When: []Cond{{"eth.type", []uint64{0x0806}}}},         // RFC 826
	{Name: "omx", Parent: "eth", When: []Cond{{"eth.type", []uint64{0x86DF}}}},         // Open-MX
	{Name: "ip", Parent: "eth", When: []Cond{{"eth.type", []uint64{0x0800}}}},          // RFC 894
	{Name: "icmp", Parent: "ip", When: []Cond{{"ip.proto", []uint64{1}}, notFragment}}, // RFC 792
	{Name: "udp", Parent: "ip", When: []Cond{{"ip.proto", []uint64{17}}, notFragment}}, // RFC 768
	{Name: "tcp", Parent: "ip", When: []Cond{{"ip.proto", []uint64{6}}, notFragment}},  // RFC 9293
	// The ports of UDP or TCP, whichever the datagram carries.
	{Name: "l4", Parent: "ip", When: []Cond{{"ip.proto", []uint64{6, 17}}, notFragment}},
}

// A fragment carries no transport header dragonc may rely on (RFC 791
// section 3.2: only the first fragment has it, and not necessarily whole).
var notFragment = Cond{"ip.frag", []uint64{0}}

// Layer returns a layer by name.
func Layer(name string) (LayerInfo, bool) {
	for _, l := range Layers {
		if l.Name == name {
			return l, true
		}
	}
	return LayerInfo{}, false
}

// LayerConds returns every condition under which a layer's fields exist:
// its own and its ancestors', outermost first.
func LayerConds(name string) []Cond {
	l, ok := Layer(name)
	if !ok {
		return nil
	}
	return append(LayerConds(l.Parent), l.When...)
}

// Within reports whether layer name is layer outer or lies inside it.
func Within(name, outer string) bool {
	for name != "" {
		if name == outer {
			return true
		}
		l, _ := Layer(name)
		name = l.Parent
	}
	return false
}

// NumFields is the size of the vocabulary.
var NumFields int

func init() {
	for i, name := range FieldNames() {
		f := Fields[name]
		f.Name, f.ID = name, i
		Fields[name] = f
	}
	NumFields = len(Fields)
}

// FieldID returns the index of a field, which must exist.
func FieldID(name string) int {
	f, ok := Fields[name]
	if !ok {
		panic("dragonc: internal error: unknown field " + name)
	}
	return f.ID
}

var sortedNames []string

// FieldNames returns the vocabulary in sorted order; index i is the field
// with ID i.
func FieldNames() []string {
	if sortedNames == nil {
		for n := range Fields {
			sortedNames = append(sortedNames, n)
		}
		sort.Strings(sortedNames)
	}
	return sortedNames
}

// Constants are the named values an expression may use.
var Constants = map[string]uint64{
	// EtherTypes (IEEE registry).
	"ipv4": 0x0800, "arp": 0x0806, "ipv6": 0x86DD, "vlan": 0x8100,
	// Open-MX EtherType, per the Open-MX paper and docs/nics.md.
	"openmx": 0x86DF,
	// IP protocol numbers (IANA).
	"icmp": 1, "tcp": 6, "udp": 17,
	// TCP flag bits (RFC 793).
	"fin": 0x01, "syn": 0x02, "rst": 0x04, "psh": 0x08, "ack": 0x10, "urg": 0x20,
	"true": 1, "false": 0,
	"broadcast": 0xFFFFFFFFFFFF,
}

// unicornFields maps the field names of Dragonet's pred(FIELD,VALUE) terms
// onto the vocabulary; values go through unicornValues.
var unicornFields = map[string]string{
	"EthType": "eth.type",
	"IpProt":  "ip.proto",
	"IPProt":  "ip.proto",
	"UDPDst":  "udp.dport",
	"UDPSrc":  "udp.sport",
	"TCPDst":  "tcp.dport",
	"TCPSrc":  "tcp.sport",
	"IPv4Dst": "ip.dst",
	"IPv4Src": "ip.src",
}

var unicornValues = map[string]uint64{
	"IPv4": 0x0800, "ARP": 0x0806, "IPv6": 0x86DD,
	"UDP": 17, "TCP": 6, "ICMP": 1,
}

// unicornKeyValues lists, per Unicorn key, the values dragonc knows by
// name (the others are numbers or opaque).
var unicornKeyValues = map[string][]string{
	"EthType": {"IPv4", "ARP", "IPv6"},
	"IpProt":  {"UDP", "TCP", "ICMP"},
	"IPProt":  {"UDP", "TCP", "ICMP"},
}

// opaqueValue is pred(KEY, VALUE) for a value dragonc does not know, such
// as pred(EthType, Invalid) in Dragonet's lpgConfImpl-offload model. In
// Dragonet an atom is uninterpreted, and two values of one key exclude
// each other (Predicate.hs). dragonc keeps the atom, which no frame
// satisfies by itself (the frame cannot tell), and adds what Dragonet's
// rule implies about the field: it holds none of the key's named values,
// so the solver sees it exclude pred(EthType, IPv4) and the others.
func opaqueValue(key, field, val string) Expr {
	info := Fields[field]
	maxV := uint64(1)<<uint(info.Bits) - 1
	var named []uint64
	for _, n := range unicornKeyValues[key] {
		named = append(named, unicornValues[n])
	}
	sort.Slice(named, func(i, j int) bool { return named[i] < named[j] })
	var rs []Range
	lo := uint64(0)
	for _, v := range named {
		if v > lo {
			rs = append(rs, Range{lo, v - 1})
		}
		lo = v + 1
	}
	if lo <= maxV {
		rs = append(rs, Range{lo, maxV})
	}
	return And{X: []Expr{Cmp{Field: field, ID: info.ID, Op: In, Ranges: rs}, Atom{Name: key, Value: val}}}
}
