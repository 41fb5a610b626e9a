package packet

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/internal/pred"
)

// TestToeplitzVectors checks the RSS hash against the verification suite of
// Microsoft's RSS specification (IPv4 with and without ports).
func TestToeplitzVectors(t *testing.T) {
	vectors := []struct {
		dst, src          string
		dport, sport      uint16
		withPorts, ipOnly uint32
	}{
		{"161.142.100.80", "66.9.149.187", 1766, 2794, 0x51ccc178, 0x323e8fc2},
		{"65.69.140.83", "199.92.111.2", 4739, 14230, 0xc626b0ea, 0xd718262a},
		{"12.22.207.184", "24.19.198.95", 38024, 12898, 0x5c2b394a, 0xd2d0a5de},
		{"209.142.163.6", "38.27.205.30", 2217, 48228, 0xafc7327f, 0x82989176},
		{"202.188.127.2", "153.39.163.191", 1303, 44251, 0x10e828a2, 0x5d1809c5},
	}
	for _, v := range vectors {
		in := make([]byte, 12)
		copy(in[0:4], net.ParseIP(v.src).To4())
		copy(in[4:8], net.ParseIP(v.dst).To4())
		binary.BigEndian.PutUint16(in[8:10], v.sport)
		binary.BigEndian.PutUint16(in[10:12], v.dport)
		if got := Toeplitz(DefaultRSSKey, in); got != v.withPorts {
			t.Errorf("%s:%d -> %s:%d with ports: %#08x, want %#08x", v.src, v.sport, v.dst, v.dport, got, v.withPorts)
		}
		if got := Toeplitz(DefaultRSSKey, in[:8]); got != v.ipOnly {
			t.Errorf("%s -> %s: %#08x, want %#08x", v.src, v.dst, got, v.ipOnly)
		}
		// The same through a decoded TCP frame.
		frame := buildL4(t, &layers.TCP{SrcPort: layers.TCPPort(v.sport), DstPort: layers.TCPPort(v.dport), SYN: true}, v.src, v.dst)
		var f Frame
		f.Decode(frame)
		if h, ok := RSSHash(&f, DefaultRSSKey, true, false); !ok || h != v.withPorts {
			t.Errorf("RSSHash of the TCP frame = %#08x, %v", h, ok)
		}
	}
}

// buildL4 makes a valid Ethernet/IPv4 frame around a transport layer with
// correct checksums, using gopacket.
func buildL4(t testing.TB, l4 gopacket.SerializableLayer, src, dst string, payload ...byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0, 0x1b, 0x21, 0x3a, 0x4b, 0x5c}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	switch l := l4.(type) {
	case *layers.UDP:
		ip.Protocol = layers.IPProtocolUDP
		l.SetNetworkLayerForChecksum(ip)
	case *layers.TCP:
		ip.Protocol = layers.IPProtocolTCP
		l.SetNetworkLayerForChecksum(ip)
	case *layers.ICMPv4:
		ip.Protocol = layers.IPProtocolICMPv4
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, l4, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func field(f *Frame, name string) (uint64, bool) { return f.Field(name) }

func TestDecodeUDP(t *testing.T) {
	b := buildL4(t, &layers.UDP{SrcPort: 5353, DstPort: 53}, "10.0.0.9", "10.0.0.1", []byte("hello")...)
	var f Frame
	f.Decode(b)
	want := map[string]uint64{"eth.type": 0x0800, "ip.proto": 17, "ip.dst": 0x0a000001, "udp.dport": 53, "l4.dport": 53,
		"udp.sport": 5353, "ip.csum_ok": 1, "udp.csum_ok": 1, "udp.len_ok": 1, "ip.len_ok": 1, "ip.hdr_ok": 1, "ip.frag": 0, "ip.ttl": 64,
		"eth.dst": 0x001b213a4b5c, "frame.crc_ok": 1}
	for k, v := range want {
		if got, ok := field(&f, k); !ok || got != v {
			t.Errorf("%s = %#x (%v), want %#x", k, got, ok, v)
		}
	}
	if _, ok := field(&f, "tcp.dport"); ok {
		t.Error("a UDP frame has no tcp.dport")
	}
	// Corrupt the UDP checksum, then the IP checksum.
	b[14+20+8] ^= 0xFF // first payload byte (the frame is padded to 60 bytes)
	f.Decode(b)
	if v, _ := field(&f, "udp.csum_ok"); v != 0 {
		t.Error("corrupted UDP payload still has a good checksum")
	}
	b[14+10] ^= 0xFF
	f.Decode(b)
	if v, _ := field(&f, "ip.csum_ok"); v != 0 {
		t.Error("corrupted IPv4 checksum still good")
	}
}

func TestDecodeTCPAndICMP(t *testing.T) {
	var f Frame
	f.Decode(buildL4(t, &layers.TCP{SrcPort: 40000, DstPort: 80, SYN: true, Window: 100}, "10.0.0.7", "10.0.0.1"))
	if v, _ := field(&f, "tcp.flags"); v != 0x02 {
		t.Errorf("tcp.flags = %#x", v)
	}
	if v, _ := field(&f, "tcp.csum_ok"); v != 1 {
		t.Error("TCP checksum should be good")
	}
	f.Decode(buildL4(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, "10.0.0.7", "10.0.0.1"))
	if v, _ := field(&f, "icmp.type"); v != 8 {
		t.Errorf("icmp.type = %d", v)
	}
	if v, _ := field(&f, "icmp.csum_ok"); v != 1 {
		t.Error("ICMP checksum should be good")
	}
}

func TestDecodeVLANOptionsFragments(t *testing.T) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeDot1Q}
	vlan := &layers.Dot1Q{VLANIdentifier: 42, Type: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 9, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 2}, DstIP: net.IP{10, 0, 0, 1},
		Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}}
	udp := &layers.UDP{SrcPort: 1, DstPort: 53}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, vlan, ip, udp); err != nil {
		t.Fatal(err)
	}
	var f Frame
	f.Decode(buf.Bytes())
	for k, v := range map[string]uint64{"vlan.id": 42, "eth.type": 0x0800, "ip.ihl": 6, "ip.options": 1, "udp.dport": 53, "ip.csum_ok": 1, "udp.csum_ok": 1} {
		if got, ok := field(&f, k); !ok || got != v {
			t.Errorf("%s = %d (%v), want %d", k, got, ok, v)
		}
	}
	// A fragment: MF set. No transport fields.
	ip2 := &layers.IPv4{Version: 4, TTL: 9, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 2}, DstIP: net.IP{10, 0, 0, 1}, Flags: layers.IPv4MoreFragments}
	buf = gopacket.NewSerializeBuffer()
	eth.EthernetType = layers.EthernetTypeIPv4
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip2, gopacket.Payload(make([]byte, 16))); err != nil {
		t.Fatal(err)
	}
	f.Decode(buf.Bytes())
	if v, _ := field(&f, "ip.frag"); v != 1 {
		t.Error("ip.frag should be 1")
	}
	if _, ok := field(&f, "udp.dport"); ok {
		t.Error("a fragment exposes no ports")
	}
}

// TestTruncation decodes every prefix of valid frames: never a panic, and
// a short frame lacks the fields it cannot hold.
func TestTruncation(t *testing.T) {
	frames := [][]byte{
		buildL4(t, &layers.UDP{SrcPort: 1, DstPort: 53}, "10.0.0.9", "10.0.0.1", make([]byte, 20)...),
		buildL4(t, &layers.TCP{SrcPort: 1, DstPort: 80, SYN: true}, "10.0.0.9", "10.0.0.1"),
		buildL4(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}, "10.0.0.9", "10.0.0.1"),
	}
	for _, full := range frames {
		ipEnd := 14 + int(binary.BigEndian.Uint16(full[16:18])) // frames may be padded beyond the datagram
		for n := 0; n <= len(full); n++ {
			var f Frame
			f.Decode(full[:n])
			if _, ok := field(&f, "eth.dst"); n < 14 && ok {
				t.Errorf("len %d: eth.dst present", n)
			}
			if n < 34 {
				if _, ok := field(&f, "ip.dst"); ok {
					t.Errorf("len %d: ip.dst present", n)
				}
			}
			if v, ok := field(&f, "ip.len_ok"); ok && v == 1 && n < ipEnd {
				t.Errorf("len %d of %d: ip.len_ok despite truncation", n, ipEnd)
			}
		}
	}
}

func TestOpenMX(t *testing.T) {
	b := make([]byte, 60)
	copy(b[0:6], []byte{2, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(b[12:14], EtherTypeOpenMX)
	b[16], b[17], b[18] = 0x11, 7, 3
	var f Frame
	f.Decode(b)
	if v, _ := field(&f, "omx.dst_ep"); v != 7 {
		t.Errorf("omx.dst_ep = %d", v)
	}
	if !pred.Eval(pred.MustParse("eth.type == openmx && omx.dst_ep == 7 && omx.type == 0x11"), &f) {
		t.Error("predicate over Open-MX fields")
	}
}

func BenchmarkDecode(b *testing.B) {
	frame := buildL4(b, &layers.UDP{SrcPort: 1, DstPort: 53}, "10.0.0.9", "10.0.0.1", make([]byte, 18)...)
	var f Frame
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.Decode(frame)
	}
}

// TestPortSumHash: the Myri-10G port hash adds the low bytes of the two
// ports (myri10ge_simple_send_hash); frames without hashed ports hash to
// 0, frames that are not IPv4 are not hashed.
func TestPortSumHash(t *testing.T) {
	ip := func(s string) net.IP { return net.ParseIP(s).To4() }
	for _, c := range []struct {
		name   string
		spec   Spec
		udp    bool
		hash   uint32
		hashed bool
	}{
		{"udp", Spec{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Proto: ProtoUDP, SrcPort: 0x1234, DstPort: 0x0035}, true, 0x34 + 0x35, true},
		{"tcp, low bytes only", Spec{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Proto: ProtoTCP, SrcPort: 0xffff, DstPort: 0x01ff}, true, 0xff + 0xff, true},
		{"udp ports off", Spec{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Proto: ProtoUDP, SrcPort: 0x1234, DstPort: 0x0035}, false, 0, true},
		{"icmp", Spec{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Proto: ProtoICMP}, true, 0, true},
		{"fragment", Spec{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Proto: ProtoUDP, SrcPort: 7, DstPort: 9, FragOffset: 100}, true, 0, true},
		{"arp", Spec{EtherType: EtherTypeARP, ARPOp: 1, ARPTarget: ip("10.0.0.2")}, true, 0, false},
	} {
		b, err := Build(c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var f Frame
		f.Decode(b)
		h, ok := PortSumHash(&f, true, c.udp)
		if h != c.hash || ok != c.hashed {
			t.Errorf("%s: hash %#x %v, want %#x %v", c.name, h, ok, c.hash, c.hashed)
		}
	}
}

// TestPortsHashed: only TCP and UDP have ports to hash, each only when its
// protocol's ports are enabled.
func TestPortsHashed(t *testing.T) {
	for _, c := range []struct {
		proto    uint64
		tcp, udp bool
		want     bool
	}{
		{ProtoTCP, true, false, true},
		{ProtoTCP, false, true, false},
		{ProtoUDP, false, true, true},
		{ProtoUDP, true, false, false},
		{ProtoICMP, true, true, false},
		{ProtoTCP + 256, true, true, false},
	} {
		if got := PortsHashed(c.proto, c.tcp, c.udp); got != c.want {
			t.Errorf("PortsHashed(%d, tcp %v, udp %v) = %v, want %v", c.proto, c.tcp, c.udp, got, c.want)
		}
	}
}
