package packet

import (
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Spec describes a frame to build. Zero fields take defaults that make a
// valid frame; the Bad* and Trunc fields damage it on purpose.
type Spec struct {
	SrcMAC, DstMAC net.HardwareAddr
	VLAN           int  // 802.1Q VLAN id; 0 for none (see PriorityTag)
	PriorityTag    bool // with VLAN 0: an 802.1Q tag with VID 0 (priority-tagged)
	EtherType      uint16
	Src, Dst       net.IP
	TTL            uint8 // 0 means 64; see ZeroTTL
	ZeroTTL        bool  // send TTL 0
	Proto          uint8 // ProtoUDP, ProtoTCP, ProtoICMP
	SrcPort        uint16
	DstPort        uint16
	TCPFlags       uint8
	ICMPType       uint8
	Options        int  // IPv4 option words (NOPs)
	MoreFragments  bool // set MF
	FragOffset     uint16
	Payload        []byte
	BadIPChecksum  bool
	BadL4Checksum  bool
	OMXType        uint8 // Open-MX
	OMXDstEP       uint8
	OMXSrcEP       uint8
	ARPOp          uint16
	ARPTarget      net.IP
}

// Build serializes a frame with gopacket's layers: lengths and checksums
// fixed, then damaged if the spec asks.
func Build(s Spec) ([]byte, error) {
	if s.SrcMAC == nil {
		s.SrcMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	}
	if s.DstMAC == nil {
		s.DstMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	etype := s.EtherType
	if etype == 0 {
		etype = EtherTypeIPv4
	}
	var ls []gopacket.SerializableLayer
	eth := &layers.Ethernet{SrcMAC: s.SrcMAC, DstMAC: s.DstMAC, EthernetType: layers.EthernetType(etype)}
	ls = append(ls, eth)
	tagged := s.VLAN != 0 || s.PriorityTag
	if tagged {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: uint16(s.VLAN), Type: layers.EthernetType(etype)})
	}
	switch etype {
	case EtherTypeARP:
		tpa := s.ARPTarget.To4()
		if tpa == nil {
			tpa = net.IPv4zero.To4()
		}
		spa := s.Src.To4()
		if spa == nil {
			spa = net.IPv4zero.To4()
		}
		op := s.ARPOp
		if op == 0 {
			op = 1
		}
		ls = append(ls, &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: op, SourceHwAddress: s.SrcMAC, SourceProtAddress: spa, DstHwAddress: make([]byte, 6), DstProtAddress: tpa})
	case EtherTypeOpenMX:
		hdr := []byte{0, 0, s.OMXType, s.OMXDstEP, s.OMXSrcEP, 0, 0, 0}
		ls = append(ls, gopacket.Payload(append(hdr, s.Payload...)))
	case EtherTypeIPv4:
		ttl := s.TTL
		switch {
		case s.ZeroTTL:
			ttl = 0
		case ttl == 0:
			ttl = 64
		}
		ip := &layers.IPv4{Version: 4, TTL: ttl, SrcIP: s.Src.To4(), DstIP: s.Dst.To4(), Protocol: layers.IPProtocol(s.Proto), FragOffset: s.FragOffset}
		if s.MoreFragments {
			ip.Flags = layers.IPv4MoreFragments
		}
		for i := 0; i < s.Options; i++ {
			ip.Options = append(ip.Options, layers.IPv4Option{OptionType: 1})
		}
		if ip.SrcIP == nil || ip.DstIP == nil {
			return nil, fmt.Errorf("an IPv4 frame needs source and destination addresses")
		}
		ls = append(ls, ip)
		switch s.Proto {
		case ProtoUDP:
			u := &layers.UDP{SrcPort: layers.UDPPort(s.SrcPort), DstPort: layers.UDPPort(s.DstPort)}
			u.SetNetworkLayerForChecksum(ip)
			ls = append(ls, u)
		case ProtoTCP:
			t := &layers.TCP{SrcPort: layers.TCPPort(s.SrcPort), DstPort: layers.TCPPort(s.DstPort), Window: 1024, Seq: 1,
				FIN: s.TCPFlags&0x01 != 0, SYN: s.TCPFlags&0x02 != 0, RST: s.TCPFlags&0x04 != 0, PSH: s.TCPFlags&0x08 != 0, ACK: s.TCPFlags&0x10 != 0, URG: s.TCPFlags&0x20 != 0}
			t.SetNetworkLayerForChecksum(ip)
			ls = append(ls, t)
		case ProtoICMP:
			ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(s.ICMPType, 0), Id: 7, Seq: 1})
		}
		ls = append(ls, gopacket.Payload(s.Payload))
	default:
		ls = append(ls, gopacket.Payload(s.Payload))
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return nil, err
	}
	b := append([]byte(nil), buf.Bytes()...)
	l3 := 14
	if tagged {
		l3 = 18
	}
	if etype == EtherTypeIPv4 {
		if s.BadIPChecksum {
			b[l3+10] ^= 0x5A
		}
		if s.BadL4Checksum {
			ihl := int(b[l3]&0x0F) * 4
			switch s.Proto {
			case ProtoUDP:
				b[l3+ihl+6] ^= 0x5A
				if b[l3+ihl+6] == 0 && b[l3+ihl+7] == 0 {
					b[l3+ihl+7] = 1 // zero means "no checksum"; keep it wrong
				}
			case ProtoTCP:
				b[l3+ihl+16] ^= 0x5A
			case ProtoICMP:
				b[l3+ihl+2] ^= 0x5A
			}
		}
	}
	return b, nil
}

// MustBuild is Build for specs known to be valid, as in tests.
func MustBuild(s Spec) []byte {
	b, err := Build(s)
	if err != nil {
		panic(fmt.Sprintf("dragonc: internal error: building a frame: %v", err))
	}
	return b
}
