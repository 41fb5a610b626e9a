package lpg_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/stackgen"
	"github.com/dragonc/dragonc/lpg"
)

const testStack = `stack t {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    cores 0..3
    endpoint dns udp listen *:53
    endpoint mc udp listen 10.0.0.1:11211 { class gold }
    endpoint repl udp flow 10.0.0.1:7000 -> 10.0.0.9:7001
    endpoint any7000 udp listen *:7000
    endpoint web tcp listen *:80
    endpoint ssh tcp flow 10.0.0.1:22 -> 10.0.0.7:51000
    endpoint r3 openmx 3 { core 2 }
    service icmp-echo
    service arp
}`

func load(t testing.TB, src string) (*lpg.Stack, *graph.Graph, *lpg.Interp) {
	t.Helper()
	st, diags := lpg.LoadStack("t.lpg", []byte(src))
	if st == nil {
		t.Fatal(diags)
	}
	g, err := lpg.Derive(st)
	if err != nil {
		t.Fatal(err)
	}
	in, err := lpg.NewInterp(g)
	if err != nil {
		t.Fatal(err)
	}
	return st, g, in
}

var (
	ourMAC = net.HardwareAddr{0x00, 0x1b, 0x21, 0x3a, 0x4b, 0x5c}
	us     = net.IP{10, 0, 0, 1}
	peer   = net.IP{10, 0, 0, 9}
)

func spec(proto uint8, sport, dport uint16) packet.Spec {
	return packet.Spec{DstMAC: ourMAC, Src: peer, Dst: us, Proto: proto, SrcPort: sport, DstPort: dport}
}

func with(s packet.Spec, f func(*packet.Spec)) packet.Spec {
	f(&s)
	return s
}

// TestOutcomes runs the reference interpreter on a crafted frame for every
// path of the LPG.
func TestOutcomes(t *testing.T) {
	_, _, in := load(t, testStack)
	udp := spec(packet.ProtoUDP, 5000, 53)
	cases := []struct {
		name string
		s    packet.Spec
		crc  bool
		want string
	}{
		{"UDP to a wildcard listener", udp, true, "deliver dns"},
		{"UDP to a listener on our address", spec(packet.ProtoUDP, 5000, 11211), true, "deliver mc"},
		{"a connected flow beats a listener on the same port", with(spec(packet.ProtoUDP, 7001, 7000), func(s *packet.Spec) { s.Src = net.IP{10, 0, 0, 9} }), true, "deliver repl"},
		{"same port, other peer: the listener", with(spec(packet.ProtoUDP, 7002, 7000), func(s *packet.Spec) {}), true, "deliver any7000"},
		{"unknown UDP port", spec(packet.ProtoUDP, 5000, 54), true, "sink RxL4UDPPortUnreachable"},
		{"bad IPv4 checksum", with(udp, func(s *packet.Spec) { s.BadIPChecksum = true }), true, "drop RxL3IPv4ValidChecksum.false"},
		{"bad UDP checksum", with(udp, func(s *packet.Spec) { s.BadL4Checksum = true }), true, "drop RxL4UDPValidChecksum.false"},
		{"bad CRC", udp, false, "drop RxL2EtherValidCRC.false"},
		{"not our address", with(udp, func(s *packet.Spec) { s.Dst = net.IP{10, 0, 0, 2} }), true, "drop RxL3IPv4ValidLocalIP.false"},
		{"not our MAC", with(udp, func(s *packet.Spec) { s.DstMAC = net.HardwareAddr{2, 0, 0, 0, 0, 9} }), true, "drop RxL2EtherValidDest.false"},
		{"broadcast MAC is ours", with(udp, func(s *packet.Spec) { s.DstMAC = net.HardwareAddr{255, 255, 255, 255, 255, 255} }), true, "deliver dns"},
		{"IPv4 with options", with(udp, func(s *packet.Spec) { s.Options = 2 }), true, "deliver dns"},
		{"fragment (MF)", with(udp, func(s *packet.Spec) { s.MoreFragments = true }), true, "sink RxL3IPv4Fragments"},
		{"fragment (offset)", with(udp, func(s *packet.Spec) { s.FragOffset = 8 }), true, "sink RxL3IPv4Fragments"},
		{"VLAN-tagged", with(udp, func(s *packet.Spec) { s.VLAN = 10 }), true, "drop RxL2EtherValidUntagged.false"},
		{"TCP with no flags to a listener", spec(packet.ProtoTCP, 40000, 80), true, "drop RxL4TCPListenDiscard.web"},
		{"TCP SYN to a listener", with(spec(packet.ProtoTCP, 40000, 80), func(s *packet.Spec) { s.TCPFlags = 0x02 }), true, "deliver web"},
		{"TCP segment of an established flow", with(spec(packet.ProtoTCP, 51000, 22), func(s *packet.Spec) { s.Src = net.IP{10, 0, 0, 7}; s.TCPFlags = 0x18 }), true, "deliver ssh"},
		{"TCP ACK to a listener port, no flow", with(spec(packet.ProtoTCP, 40000, 80), func(s *packet.Spec) { s.TCPFlags = 0x10 }), true, "sink RxL4TCPReset"},
		{"bad TCP checksum", with(spec(packet.ProtoTCP, 40000, 80), func(s *packet.Spec) { s.TCPFlags = 0x02; s.BadL4Checksum = true }), true, "drop RxL4TCPValidChecksum.false"},
		{"ICMP echo request", with(spec(packet.ProtoICMP, 0, 0), func(s *packet.Spec) { s.ICMPType = 8 }), true, "reply icmp-echo"},
		{"ICMP echo reply", with(spec(packet.ProtoICMP, 0, 0), func(s *packet.Spec) { s.ICMPType = 0 }), true, "drop RxL3ICMPIsTypeRequest.false"},
		{"ICMP bad checksum", with(spec(packet.ProtoICMP, 0, 0), func(s *packet.Spec) { s.ICMPType = 8; s.BadL4Checksum = true }), true, "drop RxL3ICMPValidChecksum.false"},
		{"ARP request for us", packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us}, true, "reply arp"},
		{"ARP request for someone else", packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: net.IP{10, 0, 0, 5}}, true, "drop RxL3ARPLocalIPDest.false"},
		{"ARP reply", packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us, ARPOp: 2}, true, "drop RxL3ARPIsRequest.false"},
		{"Open-MX to a known endpoint", packet.Spec{DstMAC: ourMAC, EtherType: packet.EtherTypeOpenMX, OMXDstEP: 3}, true, "deliver r3"},
		{"Open-MX to an unknown endpoint", packet.Spec{DstMAC: ourMAC, EtherType: packet.EtherTypeOpenMX, OMXDstEP: 4}, true, "sink RxOMXUnknownEndpoint"},
		{"unknown ethertype", packet.Spec{DstMAC: ourMAC, EtherType: 0x88cc}, true, "drop RxL2EtherClassifyL3.other"},
		{"other IP protocol", with(spec(47, 0, 0), func(s *packet.Spec) {}), true, "drop RxL3IPv4Classify.other"},
	}
	for _, c := range cases {
		frame := packet.MustBuild(c.s)
		if got := in.Run(frame, c.crc).String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestHostRequirements checks the LPG against the host requirements RFCs,
// on frames built by gopacket; each case names the section it follows.
func TestHostRequirements(t *testing.T) {
	_, _, in := load(t, testStack)
	udp := spec(packet.ProtoUDP, 5000, 53)
	tcp := func(flags uint8, dport uint16) packet.Spec {
		return with(spec(packet.ProtoTCP, 40000, dport), func(s *packet.Spec) { s.TCPFlags = flags })
	}
	bcastMAC := net.HardwareAddr{255, 255, 255, 255, 255, 255}
	payload := func(n int) func(*packet.Spec) { return func(s *packet.Spec) { s.Payload = make([]byte, n) } }
	cases := []struct {
		rule string
		s    packet.Spec
		want string
	}{
		// IEEE 802.3 clause 3.2.7 / the stack's MTU (1500 by default):
		// 14 + 20 + 8 + 1472 = 1514 bytes fit, one more does not.
		{"MTU: largest datagram", with(udp, payload(1472)), "deliver dns"},
		{"MTU: one byte over", with(udp, payload(1473)), "drop RxL2EtherValidMTU.false"},
		{"MTU: priority tag adds 4 bytes", with(udp, func(s *packet.Spec) { s.Payload = make([]byte, 1472); s.PriorityTag = true }), "deliver dns"},
		{"MTU: priority-tagged, one byte over", with(udp, func(s *packet.Spec) { s.Payload = make([]byte, 1473); s.PriorityTag = true }), "drop RxL2EtherValidMTU.false"},
		// IEEE 802.1Q §9.6: VID 0 is a priority tag, not a VLAN.
		{"802.1Q: VID 0 is untagged", with(udp, func(s *packet.Spec) { s.PriorityTag = true }), "deliver dns"},
		{"802.1Q: VID 1 is a VLAN", with(udp, func(s *packet.Spec) { s.VLAN = 1 }), "drop RxL2EtherValidUntagged.false"},
		// RFC 1122 §3.2.1.3: martian sources are discarded silently.
		{"3.2.1.3 (c): limited broadcast source", with(udp, func(s *packet.Spec) { s.Src = net.IP{255, 255, 255, 255} }), "drop RxL3IPv4ValidSource.false"},
		{"3.2.1.3 (d): directed broadcast source", with(udp, func(s *packet.Spec) { s.Src = net.IP{10, 0, 0, 255} }), "drop RxL3IPv4ValidSource.false"},
		{"3.2.1.3 (g): loopback source", with(udp, func(s *packet.Spec) { s.Src = net.IP{127, 0, 0, 1} }), "drop RxL3IPv4ValidSource.false"},
		{"RFC 1112 §4: multicast source", with(udp, func(s *packet.Spec) { s.Src = net.IP{224, 0, 0, 1} }), "drop RxL3IPv4ValidSource.false"},
		{"3.2.1.3 (a): 0.0.0.0 to a unicast address", with(udp, func(s *packet.Spec) { s.Src = net.IP{0, 0, 0, 0} }), "drop RxL3IPv4ValidSource.false"},
		{"3.2.1.3 (a): 0.0.0.0 to the limited broadcast (DHCP)", with(udp, func(s *packet.Spec) { s.Src = net.IP{0, 0, 0, 0}; s.Dst = net.IP{255, 255, 255, 255} }), "deliver dns"},
		{"our own address as source", with(udp, func(s *packet.Spec) { s.Src = us }), "drop RxL3IPv4ValidSource.false"},
		// RFC 1122 §3.2.1.7: TTL 0 and 1 are not reasons to discard.
		{"3.2.1.7: TTL 0", with(udp, func(s *packet.Spec) { s.ZeroTTL = true }), "deliver dns"},
		{"3.2.1.7: TTL 1", with(udp, func(s *packet.Spec) { s.TTL = 1 }), "deliver dns"},
		// RFC 1122 §3.3.6: broadcasts are ours for UDP.
		{"3.3.6: limited broadcast to a wildcard listener", with(udp, func(s *packet.Spec) { s.Dst = net.IP{255, 255, 255, 255}; s.DstMAC = bcastMAC }), "deliver dns"},
		{"3.3.6: directed broadcast to a wildcard listener", with(udp, func(s *packet.Spec) { s.Dst = net.IP{10, 0, 0, 255} }), "deliver dns"},
		// A listener bound to one address takes datagrams to that address
		// only, as Linux's __udp_is_mcast_sock decides: a broadcast to its
		// port, with no wildcard listener, is no one's.
		{"udp.c: directed broadcast to a listener on that subnet", with(spec(packet.ProtoUDP, 5000, 11211), func(s *packet.Spec) { s.Dst = net.IP{10, 0, 0, 255} }), "drop RxL4UDPValidUnicastDest.false"},
		{"udp.c: limited broadcast to an address-specific listener", with(spec(packet.ProtoUDP, 5000, 11211), func(s *packet.Spec) { s.Dst = net.IP{255, 255, 255, 255} }), "drop RxL4UDPValidUnicastDest.false"},
		// IEEE 802.3 §3.2.3: a source MAC is an individual address.
		{"802.3: a group source MAC", with(udp, func(s *packet.Spec) { s.SrcMAC = net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1} }), "drop RxL2EtherValidSource.false"},
		{"802.3: the broadcast as source MAC", with(udp, func(s *packet.Spec) { s.SrcMAC = bcastMAC }), "drop RxL2EtherValidSource.false"},
		// RFC 1122 §3.2.2: no ICMP error to a source that is no single host.
		{"3.2.2: class E source to a closed UDP port", with(spec(packet.ProtoUDP, 5000, 54), func(s *packet.Spec) { s.Src = net.IP{240, 0, 0, 1} }), "drop RxL4UDPValidErrorSource.false"},
		{"3.2.2: a class E source is still delivered", with(udp, func(s *packet.Spec) { s.Src = net.IP{240, 0, 0, 1} }), "deliver dns"},
		// ARP (RFC 826) from senders no host may be; 0.0.0.0 is a probe
		// (RFC 5227 §2.1.1) and is answered.
		{"arp: a request", packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us}, "reply arp"},
		{"arp: a probe from 0.0.0.0", packet.Spec{EtherType: packet.EtherTypeARP, Src: net.IP{0, 0, 0, 0}, ARPTarget: us}, "reply arp"},
		{"arp: from our own address", packet.Spec{EtherType: packet.EtherTypeARP, Src: us, ARPTarget: us}, "drop RxL3ARPValidSender.false"},
		{"arp: from the limited broadcast", packet.Spec{EtherType: packet.EtherTypeARP, Src: net.IP{255, 255, 255, 255}, ARPTarget: us}, "drop RxL3ARPValidSender.false"},
		{"arp: from our directed broadcast", packet.Spec{EtherType: packet.EtherTypeARP, Src: net.IP{10, 0, 0, 255}, ARPTarget: us}, "drop RxL3ARPValidSender.false"},
		{"arp: from a multicast address", packet.Spec{EtherType: packet.EtherTypeARP, Src: net.IP{224, 0, 0, 1}, ARPTarget: us}, "drop RxL3ARPValidSender.false"},
		{"arp: from 0/8 but not the probe's 0.0.0.0", packet.Spec{EtherType: packet.EtherTypeARP, Src: net.IP{0, 1, 2, 3}, ARPTarget: us}, "drop RxL3ARPValidSender.false"},
		{"arp: from a group hardware address", packet.Spec{EtherType: packet.EtherTypeARP, SrcMAC: net.HardwareAddr{0x03, 0, 0, 0, 0, 1}, Src: peer, ARPTarget: us}, "drop RxL2EtherValidSource.false"},
		{"3.3.6: another subnet's broadcast is not ours", with(udp, func(s *packet.Spec) { s.Dst = net.IP{10, 0, 1, 255} }), "drop RxL3IPv4ValidLocalIP.false"},
		{"a connected flow is unicast", with(spec(packet.ProtoUDP, 7001, 7000), func(s *packet.Spec) { s.Dst = net.IP{10, 0, 0, 255} }), "deliver any7000"},
		// RFC 1122 §3.2.2: no ICMP error for a broadcast datagram.
		{"3.2.2: broadcast to a closed UDP port", with(spec(packet.ProtoUDP, 5000, 54), func(s *packet.Spec) { s.Dst = net.IP{255, 255, 255, 255} }), "drop RxL4UDPValidUnicastDest.false"},
		{"3.2.2: link-layer broadcast to a closed UDP port", with(spec(packet.ProtoUDP, 5000, 54), func(s *packet.Spec) { s.DstMAC = bcastMAC }), "drop RxL4UDPValidUnicastDest.false"},
		{"3.2.2: unicast to a closed UDP port", spec(packet.ProtoUDP, 5000, 54), "sink RxL4UDPPortUnreachable"},
		// RFC 1122 §3.2.2.6: echo requests to a broadcast are not answered.
		{"3.2.2.6: echo to broadcast", with(spec(packet.ProtoICMP, 0, 0), func(s *packet.Spec) { s.ICMPType = 8; s.Dst = net.IP{10, 0, 0, 255} }), "drop RxL3ICMPValidUnicastDest.false"},
		// RFC 1122 §4.2.3.10: no TCP to a broadcast address.
		{"4.2.3.10: SYN to broadcast", with(tcp(0x02, 80), func(s *packet.Spec) { s.Dst = net.IP{255, 255, 255, 255} }), "drop RxL4TCPValidUnicastDest.false"},
		// RFC 9293 §3.10.7.1 (CLOSED) and §3.10.7.2 (LISTEN).
		{"3.10.7.2: SYN to a listener", tcp(0x02, 80), "deliver web"},
		{"3.10.7.2: SYN+RST is no connection request", tcp(0x06, 80), "drop RxL4TCPValidNotReset.false"},
		{"3.10.7.2: RST to a listener is dropped", tcp(0x04, 80), "drop RxL4TCPValidNotReset.false"},
		{"3.10.7.2: RST+ACK to a listener is dropped", tcp(0x14, 80), "drop RxL4TCPValidNotReset.false"},
		{"3.10.7.2: ACK to a listener draws a RST", tcp(0x10, 80), "sink RxL4TCPReset"},
		{"3.10.7.2: FIN alone to a listener is dropped", tcp(0x01, 80), "drop RxL4TCPListenDiscard.web"},
		{"3.10.7.2: no flags to a listener is dropped", tcp(0x00, 80), "drop RxL4TCPListenDiscard.web"},
		{"3.10.7.2: FIN+PSH+URG to a listener is dropped", tcp(0x29, 80), "drop RxL4TCPListenDiscard.web"},
		{"3.10.7.2: SYN+FIN to a listener is dropped", tcp(0x03, 80), "drop RxL4TCPListenDiscard.web"},
		{"3.10.7.1: RST to a closed port is dropped", tcp(0x04, 81), "drop RxL4TCPValidNotReset.false"},
		{"3.10.7.1: SYN to a closed port draws a RST", tcp(0x02, 81), "sink RxL4TCPReset"},
		{"3.10.7.1: FIN+PSH+URG to a closed port draws a RST", tcp(0x29, 81), "sink RxL4TCPReset"},
		{"a flow receives its RST", with(spec(packet.ProtoTCP, 51000, 22), func(s *packet.Spec) { s.Src = net.IP{10, 0, 0, 7}; s.TCPFlags = 0x04 }), "deliver ssh"},
	}
	for _, c := range cases {
		frame := packet.MustBuild(c.s)
		if got := in.Run(frame, true).String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.rule, got, c.want)
		}
	}
	// The ARP reply goes to the sender hardware address of the request,
	// not to the frame's source: a group address there is refused too.
	arp := packet.MustBuild(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us})
	arp[14+8] |= 1
	if got := in.Run(arp, true).String(); got != "drop RxL3ARPValidSender.false" {
		t.Errorf("arp: a group sender hardware address: %s", got)
	}
}

// TestMTUPerInterface: each interface's MTU applies to frames addressed
// to it; a broadcast frame may be as large as the largest MTU.
func TestMTUPerInterface(t *testing.T) {
	_, _, in := load(t, `stack m {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 mtu 9000 }
    interface eth1 { mac 00:1b:21:3a:4b:5d ip 10.0.1.1/24 }
    endpoint dns udp listen *:53
}`)
	big := func(mac net.HardwareAddr, dst net.IP, n int) []byte {
		return packet.MustBuild(packet.Spec{DstMAC: mac, Src: peer, Dst: dst, Proto: packet.ProtoUDP, SrcPort: 1, DstPort: 53, Payload: make([]byte, n)})
	}
	eth1 := net.HardwareAddr{0x00, 0x1b, 0x21, 0x3a, 0x4b, 0x5d}
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{big(ourMAC, us, 8972), "deliver dns"},
		{big(ourMAC, us, 8973), "drop RxL2EtherValidMTU.false"},
		{big(eth1, net.IP{10, 0, 1, 1}, 1472), "deliver dns"},
		{big(eth1, net.IP{10, 0, 1, 1}, 1473), "drop RxL2EtherValidMTU.false"},
		{big(net.HardwareAddr{255, 255, 255, 255, 255, 255}, net.IP{255, 255, 255, 255}, 8972), "deliver dns"},
	} {
		if got := in.Run(c.frame, true).String(); got != c.want {
			t.Errorf("%d-byte frame: %s, want %s", len(c.frame), got, c.want)
		}
	}
}

// TestShadowed: a wildcard listener whose every address is taken by
// address-specific listeners gets a warning and no filter.
func TestShadowed(t *testing.T) {
	src := `stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    endpoint a udp listen 10.0.0.1:53
    endpoint b udp listen *:53
    endpoint c tcp listen 10.0.0.1:80
    endpoint d tcp listen *:80
    endpoint e udp listen *:54
}`
	st, diags := lpg.LoadStack("s.lpg", []byte(src))
	if st == nil {
		t.Fatal(diags)
	}
	var got []string
	for _, d := range diags {
		if d.Code == diag.CodeShadowed {
			got = append(got, d.Summary)
		}
	}
	// b still takes the broadcasts to port 53, which a is not bound to.
	want := []string{
		`endpoint "d" can never receive a packet: "c" take every address it listens on`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	for _, e := range st.Endpoints {
		if e.Shadowed != (e.Name == "d") {
			t.Errorf("%s: shadowed %v", e.Name, e.Shadowed)
		}
	}
	// With two addresses and one specific listener, it is not.
	st, _ = lpg.LoadStack("s.lpg", []byte(`stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 ip 10.0.1.1/24 }
    endpoint a udp listen 10.0.0.1:53
    endpoint b udp listen *:53
}`))
	if st == nil || len(st.Shadowed()) != 0 {
		t.Errorf("b is reachable through 10.0.1.1 and its broadcast")
	}
}

// TestTruncation cuts valid frames at every length: no panic, each cut
// frame is a drop with a reason until it holds what its headers say it
// carries (an IPv4 datagram's total length, RFC 791 §3.1; the ARP
// packet; the Open-MX header), and from there on it is treated as the
// whole frame. Nothing short is padded into a datagram.
func TestTruncation(t *testing.T) {
	_, _, in := load(t, testStack)
	frames := [][]byte{
		packet.MustBuild(spec(packet.ProtoUDP, 5000, 53)),
		packet.MustBuild(with(spec(packet.ProtoTCP, 40000, 80), func(s *packet.Spec) { s.TCPFlags = 0x02 })),
		packet.MustBuild(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us}),
		packet.MustBuild(with(spec(packet.ProtoICMP, 0, 0), func(s *packet.Spec) { s.ICMPType = 8 })),
		packet.MustBuild(packet.Spec{DstMAC: ourMAC, EtherType: packet.EtherTypeOpenMX, OMXDstEP: 3}),
	}
	for _, f := range frames {
		whole := in.Run(f, true)
		need := len(f)
		switch binary.BigEndian.Uint16(f[12:]) {
		case packet.EtherTypeIPv4:
			need = 14 + int(binary.BigEndian.Uint16(f[16:]))
		case packet.EtherTypeARP:
			need = 14 + 28
		case packet.EtherTypeOpenMX:
			need = 14 + 5
		}
		for n := 0; n <= len(f); n++ {
			o := in.Run(f[:n], true)
			switch {
			case n < need && o.Kind != lpg.Drop:
				t.Errorf("%x cut to %d of %d bytes: %s; a cut datagram is dropped", f, n, need, o)
			case n >= need && o.String() != whole.String():
				t.Errorf("%x cut to %d bytes, all it needs: %s, whole %s", f, n, o, whole)
			}
			if o.Kind == lpg.Drop && o.Node == "" {
				t.Errorf("len %d: drop without a reason", n)
			}
		}
	}
}

// TestCaptures runs gopacket's sample captures through the interpreter,
// each with a stack that owns the captured addresses.
func TestCaptures(t *testing.T) {
	dir := "/usr/share/gocode/src/github.com/gopacket/gopacket/pcap"
	for _, c := range []struct {
		name, stack string
		want        map[string]int
	}{
		{"test_dns.pcap", "dns_server.lpg", map[string]int{"deliver dns": 10}},
		// The server's replies go to the client's MAC; the SYN comes from the
		// flow's peer, and a connected flow beats the listener.
		{"test_ethernet.pcap", "http_server.lpg", map[string]int{"deliver conn": 5, "drop RxL2EtherValidDest.false": 5}},
	} {
		name := c.name
		src, err := os.ReadFile("../testdata/captures/" + c.stack)
		if err != nil {
			t.Fatal(err)
		}
		_, _, in := load(t, string(src))
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Skipf("%s not installed (apt-get install golang-github-gopacket-gopacket-dev): %v", name, err)
		}
		frames, _, err := packet.ReadCapture(name, f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(frames) == 0 {
			t.Fatalf("%s: no frames", name)
		}
		counts := map[string]int{}
		for _, fr := range frames {
			counts[in.Run(fr.Data, true).String()]++
		}
		t.Logf("%s: %d frames: %v", name, len(frames), counts)
		if !reflect.DeepEqual(counts, c.want) {
			t.Errorf("%s: outcomes %v, want %v", name, counts, c.want)
		}
	}
	// A capture of another link type is reported, not crashed on.
	f, err := os.Open(filepath.Join(dir, "test_loopback.pcap"))
	if err == nil {
		_, _, err = packet.ReadCapture("test_loopback.pcap", f)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), "not Ethernet") {
			t.Errorf("loopback capture: %v", err)
		}
	}
}

// TestExamples keeps the summary and the LPG of every example as golden
// files.
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.lpg")
	if len(files) < 6 {
		t.Fatalf("want at least six examples, have %d", len(files))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".lpg")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			st, diags := lpg.LoadStack("examples/"+name+".lpg", src)
			if st == nil || len(diags) > 0 {
				t.Fatalf("%v", diags)
			}
			g, err := lpg.Derive(st)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lpg.NewInterp(g); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "../testdata/lpg/"+name+".summary.golden", []byte(lpg.Summary(st, g)))
			if len(g.Nodes) < 200 {
				golden.Check(t, "../testdata/lpg/"+name+".lpg.golden", []byte(graph.Dump(g)))
			}
		})
	}
}

var wantRE = regexp.MustCompile(`^// want: (\d+:\d+) (E\d+)`)

// TestMalformedStacks checks the diagnostics of malformed stack files: the
// first line of each names the position and code it must produce.
func TestMalformedStacks(t *testing.T) {
	files, _ := filepath.Glob("../testdata/badstack/*.lpg")
	if len(files) < 12 {
		t.Fatalf("only %d malformed stacks", len(files))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			src, _ := os.ReadFile(path)
			m := wantRE.FindStringSubmatch(string(src))
			if m == nil {
				t.Fatalf("first line must be // want: LINE:COL CODE")
			}
			st, diags := lpg.LoadStack("testdata/badstack/"+name, src)
			if st != nil || !diags.HasErrors() {
				t.Fatalf("accepted")
			}
			var out strings.Builder
			for _, d := range diags {
				out.WriteString(d.String() + "\n")
			}
			if !strings.Contains(out.String(), name+":"+m[1]+": error") || !strings.Contains(out.String(), "["+m[2]+"]") {
				t.Errorf("want %s %s, got:\n%s", m[1], m[2], out.String())
			}
			golden.Check(t, path+".golden", []byte(out.String()))
		})
	}
}

// TestSanitize: names from user files become safe, unique identifiers.
func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"shard-20000": "shard_20000", "9lives": "e9lives", "héllo": "h_llo", "a`$(rm)": "a___rm_", "": "e"} {
		if got := lpg.Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	st, _, _ := load(t, `stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    endpoint a-b udp listen *:1
    endpoint a_b udp listen *:2
}`)
	if st.Endpoints[0].Ident == st.Endpoints[1].Ident {
		t.Errorf("identifiers collide: %s", st.Endpoints[0].Ident)
	}
}

func BenchmarkInterp(b *testing.B) {
	_, _, in := load(b, testStack)
	frame := packet.MustBuild(spec(packet.ProtoUDP, 5000, 53))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		in.Run(frame, true)
	}
}

// TestStackValidation: addresses an interface cannot have, a shared IP or
// MAC, reversed core ranges and rates beyond any link are diagnostics.
func TestStackValidation(t *testing.T) {
	for _, c := range []struct{ item, code string }{
		{"interface eth1 { mac 00:1b:21:3a:4b:5d ip 0.0.0.0/24 }", diag.CodeBadAddr},
		{"interface eth1 { mac 00:1b:21:3a:4b:5d ip 255.255.255.255/32 }", diag.CodeBadAddr},
		{"interface eth1 { mac 00:1b:21:3a:4b:5d ip 10.1.0.255/24 }", diag.CodeBadAddr},
		{"interface eth1 { mac 00:1b:21:3a:4b:5d ip 224.0.0.5/32 }", diag.CodeBadAddr},
		{"interface eth1 { mac 00:1b:21:3a:4b:5d ip 127.0.0.1/8 }", diag.CodeBadAddr},
		{"interface eth1 { mac 00:1b:21:3a:4b:5d ip 10.0.0.1/24 }", diag.CodeConflict},
		{"interface eth1 { mac 00:1b:21:3a:4b:5c ip 10.1.0.1/24 }", diag.CodeConflict},
		{"endpoint x udp listen *:9 { cores 3..1 }", diag.CodeBadNumber},
		{"endpoint x udp listen *:9 { rate 100000000000000pps }", diag.CodeBadAttr},
		{"endpoint x udp listen *:9 { rate 2000Mpps }", diag.CodeBadAttr},
	} {
		src := "stack s {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n    cores 0..3\n    " + c.item + "\n}\n"
		_, diags := lpg.LoadStack("s.lpg", []byte(src))
		found := false
		for _, d := range diags {
			found = found || d.Code == c.code
		}
		if !found {
			t.Errorf("%s: want %s, got %v", c.item, c.code, diags)
		}
	}
	// nodelay and message on a stream, in either order.
	for _, item := range []string{"{ message 4KiB nodelay }", "{ nodelay message 4KiB }"} {
		src := "stack s {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n    endpoint db tcp flow 10.0.0.1:5000 -> 10.0.0.2:6000 " + item + "\n}\n"
		st, diags := lpg.LoadStack("s.lpg", []byte(src))
		if st == nil || len(st.Endpoints) != 1 {
			t.Fatalf("%s: %v", item, diags)
		}
		if e := st.Endpoints[0]; !e.NoDelay || e.Message != 4096 {
			t.Errorf("%s: NoDelay %v, Message %d; want true, 4096", item, e.NoDelay, e.Message)
		}
	}
	// A /31 has no broadcast (RFC 3021): both its addresses are hosts.
	if st, diags := lpg.LoadStack("s.lpg", []byte("stack s {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/31 }\n}\n")); st == nil {
		t.Errorf("a /31 address: %v", diags)
	}
}

// TestICMPErrors: `service icmp-errors` sets the stack's limit on ICMP
// errors, each setting left out keeping Linux's default; bad settings are
// diagnostics at the setting, in the stack file's words.
func TestICMPErrors(t *testing.T) {
	linux := lpg.ICMPErrorLimit{Rate: 1000, Burst: 50, PeerRate: 1, PeerBurst: 6}
	if lpg.LinuxICMPErrors != linux {
		t.Fatalf("LinuxICMPErrors = %+v, want ip-sysctl.rst's %+v", lpg.LinuxICMPErrors, linux)
	}
	stack := func(items string) string {
		return "stack s {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n" + items + "}\n"
	}
	for _, c := range []struct {
		items string
		want  lpg.ICMPErrorLimit
	}{
		{"", linux},
		{"    service icmp-errors\n", linux},
		{"    service icmp-errors {}\n", linux},
		{"    service icmp-errors { rate 1000pps burst 50 peer-rate 1pps peer-burst 6 }\n", linux},
		{"    service icmp-errors { rate 200pps }\n", lpg.ICMPErrorLimit{Rate: 200, Burst: 50, PeerRate: 1, PeerBurst: 6}},
		{"    service icmp-errors { peer-burst 1 burst 1 }\n", lpg.ICMPErrorLimit{Rate: 1000, Burst: 1, PeerRate: 1, PeerBurst: 1}},
		{"    service icmp-errors { rate 1.1kpps peer-rate 0.5pps }\n", lpg.ICMPErrorLimit{Rate: 1100, Burst: 50, PeerRate: 0.5, PeerBurst: 6}},
		{"    service icmp-errors { rate 1Mpps peer-rate 2 kpps burst 1000000 }\n    service arp\n", lpg.ICMPErrorLimit{Rate: 1e6, Burst: 1e6, PeerRate: 2000, PeerBurst: 6}},
		{"    service icmp-errors { rate 1000Mpps peer-rate 0.001pps }\n", lpg.ICMPErrorLimit{Rate: 1e9, Burst: 50, PeerRate: 0.001, PeerBurst: 6}},
	} {
		st, diags := lpg.LoadStack("s.lpg", []byte(stack(c.items)))
		if st == nil || len(diags) > 0 {
			t.Errorf("%q: %v", c.items, diags)
			continue
		}
		if st.ICMPErrors != c.want {
			t.Errorf("%q: %+v, want %+v", c.items, st.ICMPErrors, c.want)
		}
	}
	for _, c := range []struct{ items, want string }{
		{"    service icmp-errors { rate 0pps }", "3:27: error: icmp-errors rate 0pps is below 1pps"},
		{"    service icmp-errors { rate -5pps }", "3:27: error: icmp-errors rate -5pps is below 1pps"},
		{"    service icmp-errors { rate 0.5pps }", "3:27: error: icmp-errors rate 0.5pps is below 1pps"},
		{"    service icmp-errors { rate 1.5pps }", "3:27: error: icmp-errors rate 1.5pps is not a whole number of errors a second"},
		{"    service icmp-errors { rate 1001Mpps }", "3:27: error: icmp-errors rate 1001Mpps is above 1000Mpps"},
		{"    service icmp-errors { rate 1000 }", "3:27: error: icmp-errors rate needs a unit: pps, kpps or Mpps (as in 1000pps)"},
		{"    service icmp-errors { rate 1000KiB }", "3:27: error: icmp-errors rate needs a unit"},
		{"    service icmp-errors { peer-rate 0pps }", "3:27: error: icmp-errors peer-rate 0pps is below 0.001pps"},
		{"    service icmp-errors { peer-rate 1 }", "3:27: error: icmp-errors peer-rate needs a unit: pps, kpps or Mpps (as in 1pps)"},
		{"    service icmp-errors { peer-rate 2000Mpps }", "3:27: error: icmp-errors peer-rate 2000Mpps is above 1000Mpps"},
		{"    service icmp-errors { burst 0 }", "3:33: error: icmp-errors burst 0 is not a whole number in 1..1000000"},
		{"    service icmp-errors { burst 1000001 }", "3:33: error: icmp-errors burst 1000001 is not a whole number in 1..1000000"},
		{"    service icmp-errors { burst 2.5 }", "3:33: error: icmp-errors burst 2.5 is not a whole number in 1..1000000"},
		{"    service icmp-errors { peer-burst -1 }", "3:38: error: icmp-errors peer-burst -1 is not a whole number in 1..1000000"},
		{"    service icmp-errors { peer-burst 6pps }", "3:27: error: icmp-errors peer-burst counts errors and takes no unit"},
		{"    service icmp-errors { burst 1..5 }", "3:27: error: icmp-errors burst takes one number, not a range"},
		{"    service icmp-errors { burst 1,5 }", "3:27: error: icmp-errors burst takes one number, not a range"},
		{"    service icmp-errors { rate fast }", "3:27: error: icmp-errors rate takes a number"},
		{"    service icmp-errors { rate \"1pps\" }", "3:27: error: icmp-errors rate takes a number"},
		{"    service icmp-errors { burst 5 rate 1pps burst 6 }", "3:45: error: icmp-errors sets burst twice"},
		{"    service icmp-errors { brust 5 }", `3:27: error: unknown icmp-errors setting "brust"; did you mean "burst"?`},
		{"    service icmp-errors { nodelay }", `3:27: error: unknown icmp-errors setting "nodelay"; settings are rate, burst, peer-rate and peer-burst`},
		{"    service icmp-errors\n    service icmp-errors", "4:5: error: service icmp-errors is declared twice; the first is on line 3"},
		{"    service icmp-echo\n    service icmp-echo", "4:5: error: service icmp-echo is declared twice"},
		{"    service icmp-error { rate 1pps }", `3:13: error: unknown service "icmp-error"; did you mean "icmp-errors"?`},
		{"    service icmp-echo { rate 1pps burst 2 }", "3:25: error: service icmp-echo takes no settings"},
	} {
		st, diags := lpg.LoadStack("s.lpg", []byte(stack(c.items+"\n")))
		if st != nil || !strings.Contains(diags.Error(), "s.lpg:"+c.want) {
			t.Errorf("%q: want %q, got %v", c.items, c.want, diags)
		}
	}
}

// TestICMPErrorsSummary: dragonc lpg shows the limit, and says when it
// is Linux's.
func TestICMPErrorsSummary(t *testing.T) {
	for items, want := range map[string]string{
		"": "icmp-errors: rate 1kpps burst 50 peer-rate 1pps peer-burst 6 (Linux's defaults)\n",
		"    service icmp-errors { rate 200pps peer-rate 0.5pps }\n": "icmp-errors: rate 200pps burst 50 peer-rate 0.5pps peer-burst 6\n",
	} {
		st, g, _ := load(t, "stack s {\n    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n"+items+"}\n")
		if got := lpg.Summary(st, g); !strings.Contains(got, want) {
			t.Errorf("%q: summary lacks %q:\n%s", items, want, got)
		}
		s := lpg.SummaryOf(st, g)
		if l := st.ICMPErrors; s.ICMPErrors != (lpg.ICMPErrorsSummary{Rate: l.Rate, Burst: l.Burst, PeerRate: l.PeerRate, PeerBurst: l.PeerBurst}) {
			t.Errorf("%q: --json has %+v, want %+v", items, s.ICMPErrors, l)
		}
	}
}

// FuzzStack builds stacks from fuzz input: a stack either gets
// diagnostics with positions or derives an LPG the reference interpreter
// runs on frames aimed at it without a panic, every outcome named.
func FuzzStack(f *testing.F) {
	for _, seed := range [][]byte{{0}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []byte("dragonc stacks"), bytes.Repeat([]byte{7, 200, 3}, 40)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		src := string(stackgen.Random(b))
		st, diags := lpg.LoadStack("f.lpg", []byte(src))
		if st == nil {
			for _, d := range diags {
				if d.Range.File == nil {
					t.Fatalf("a diagnostic without a position: %v\n%s", d, src)
				}
			}
			return
		}
		g, err := lpg.Derive(st)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		in, err := lpg.NewInterp(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Endpoints {
			s := packet.Spec{DstMAC: net.HardwareAddr{0x00, 0x1b, 0x21, 0, 0, 0}, Src: net.IP{192, 0, 2, 1}, Dst: net.IP{10, 0, 0, 1}, Proto: packet.ProtoUDP, SrcPort: 1, DstPort: e.Port}
			if e.Proto == lpg.OpenMX {
				s = packet.Spec{EtherType: packet.EtherTypeOpenMX, OMXDstEP: e.OMXID}
			}
			o := in.Run(packet.MustBuild(s), true)
			if o.Kind == lpg.Drop && o.Node == "" && o.Port == "" {
				t.Fatalf("an unnamed drop for %s\n%s", e.Name, src)
			}
		}
	})
}

// TestIPv4Addresses: addresses are read as net/netip reads IPv4 (no
// leading zeros, four parts, each 0..255) and printed back the same way.
func TestIPv4Addresses(t *testing.T) {
	for text, want := range map[string]string{
		"10.0.0.1": "", "255.255.255.254": "", "0.0.0.1": "",
		"10.0.0.256": "without leading zeros", "010.0.0.1": "without leading zeros",
		"10.0.0": "four numbers", "10.0.0.1.2": "four numbers",
	} {
		src := "stack s {\n    interface eth0 { mac 00:1b:21:00:00:01 ip " + text + "/24 }\n    endpoint d udp listen *:53\n}\n"
		st, diags := lpg.LoadStack("s.lpg", []byte(src))
		if want == "" {
			if diags.HasErrors() || lpg.FormatIP(st.Interfaces[0].IPs[0].Addr) != text {
				t.Errorf("%s: %v", text, diags)
			}
			continue
		}
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "malformed IPv4 address") || !strings.Contains(diags[0].Detail, want) {
			t.Errorf("%s: %v", text, diags)
		}
	}
}

// TestPrefixContains: subnet membership at the edges of prefix lengths.
func TestPrefixContains(t *testing.T) {
	ip := func(a, b, c, d uint32) uint32 { return a<<24 | b<<16 | c<<8 | d }
	for _, c := range []struct {
		p    lpg.Prefix
		a    uint32
		want bool
	}{
		{lpg.Prefix{Addr: ip(10, 0, 0, 1), Len: 24}, ip(10, 0, 0, 255), true},
		{lpg.Prefix{Addr: ip(10, 0, 0, 1), Len: 24}, ip(10, 0, 1, 1), false},
		{lpg.Prefix{Addr: ip(10, 0, 0, 1), Len: 32}, ip(10, 0, 0, 1), true},
		{lpg.Prefix{Addr: ip(10, 0, 0, 1), Len: 32}, ip(10, 0, 0, 2), false},
		{lpg.Prefix{Addr: ip(10, 0, 0, 0), Len: 31}, ip(10, 0, 0, 1), true},
		{lpg.Prefix{Addr: ip(10, 0, 0, 1), Len: 0}, ip(192, 168, 7, 1), true},
		{lpg.Prefix{Addr: ip(10, 0, 0, 1), Len: 8}, ip(11, 0, 0, 1), false},
	} {
		if got := c.p.Contains(c.a); got != c.want {
			t.Errorf("%+v contains %08x: %v, want %v", c.p, c.a, got, c.want)
		}
	}
}
