package baseline

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Gopacket is the baseline written with gopacket as its documentation
// recommends for speed: a DecodingLayerParser over preallocated layers
// (no allocation per packet), then the same checks on the decoded headers
// and the same packed-key maps.
type Gopacket struct {
	t       *tables
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	udp     layers.UDP
	tcp     layers.TCP
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

// NewGopacket prepares the gopacket baseline for a stack.
func NewGopacket(c Config) *Gopacket {
	g := &Gopacket{t: newTables(c), decoded: make([]gopacket.LayerType, 0, 8)}
	g.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &g.eth, &g.dot1q, &g.ip4, &g.udp, &g.tcp, &g.payload)
	g.parser.IgnoreUnsupported = true
	return g
}

// Process is Hand.Process, decoding with gopacket.
func (g *Gopacket) Process(b []byte, crcOK, ipOK, l4OK bool) int32 {
	t := g.t
	if !crcOK || len(b) < 18 || b[6]&1 != 0 {
		return -1
	}
	err := g.parser.DecodeLayers(b, &g.decoded)
	var haveIP, haveUDP, haveTCP, tagged bool
	for _, lt := range g.decoded {
		switch lt {
		case layers.LayerTypeDot1Q:
			if g.dot1q.VLANIdentifier != 0 {
				return -1
			}
			tagged = true
		case layers.LayerTypeIPv4:
			haveIP = true
		case layers.LayerTypeUDP:
			haveUDP = true
		case layers.LayerTypeTCP:
			haveTCP = true
		}
	}
	if len(g.decoded) == 0 {
		return -1
	}
	d := g.eth.DstMAC
	if !t.frameFits(uint64(binary.BigEndian.Uint16(d[0:2]))<<32|uint64(binary.BigEndian.Uint32(d[2:6])), len(b), tagged) {
		return -1
	}
	l3 := g.eth.Payload // the bytes after Ethernet and any tag
	if tagged {
		l3 = g.dot1q.Payload
	}
	if g.eth.EthernetType == layers.EthernetType(OpenMX) || tagged && g.dot1q.Type == layers.EthernetType(OpenMX) {
		// gopacket has no Open-MX layer: the endpoint id is byte 3 of the
		// header after Ethernet (and the tag).
		if len(l3) < 5 {
			return -1
		}
		return t.omx[l3[3]]
	}
	if !haveIP || err != nil && !haveUDP && !haveTCP {
		return -1
	}
	ip := &g.ip4
	hlen := int(ip.IHL) * 4
	if ip.Version != 4 || hlen < 20 || int(ip.Length) < hlen || int(ip.Length) > len(l3) || !ipOK {
		return -1
	}
	src, dst := binary.BigEndian.Uint32(ip.SrcIP), binary.BigEndian.Uint32(ip.DstIP)
	if !t.source(src, dst) || !t.local.has(dst) {
		return -1
	}
	if ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 {
		return -1
	}
	switch {
	case ip.Protocol == layers.IPProtocolUDP && haveUDP:
		if g.udp.Length < 8 || int(g.udp.Length) > int(ip.Length)-hlen || !l4OK {
			return -1
		}
		return t.demux(UDP, src, dst, uint16(g.udp.SrcPort), uint16(g.udp.DstPort), 0)
	case ip.Protocol == layers.IPProtocolTCP && haveTCP:
		if !t.unicast.has(dst) || !l4OK {
			return -1
		}
		tcp := &g.tcp
		flags := bit(tcp.FIN, 0x01) | bit(tcp.SYN, 0x02) | bit(tcp.RST, 0x04) | bit(tcp.ACK, 0x10)
		return t.demux(TCP, src, dst, uint16(g.tcp.SrcPort), uint16(g.tcp.DstPort), flags)
	}
	return -1
}

func bit(b bool, v uint8) uint8 {
	if b {
		return v
	}
	return 0
}
