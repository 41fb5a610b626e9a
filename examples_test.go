package dragonc_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/verify"
)

// tourCapture is the capture the README's tour traces: traffic a DNS and
// NTP server (examples/dns_ntp.lpg) sees on its link.
const tourCapture = "examples/dns_ntp.pcap"

// tourFrame is one frame of the tour's capture and what the LPG does
// with it, in verify's notation.
type tourFrame struct {
	what string
	data []byte
	want string
}

// tourFrames are the frames of examples/dns_ntp.pcap: DNS and NTP
// queries, ARP, ping, a closed port, damaged checksums, broadcasts and
// frames that are not the host's. Everything random comes from one
// seeded generator, so the capture is the same on every run.
func tourFrames() []tourFrame {
	rng := rand.New(rand.NewPCG(38, 1))
	var (
		hostMAC   = net.HardwareAddr{0x00, 0x1b, 0x21, 0x00, 0x00, 0x01}
		routerMAC = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x01, 0x01}
		peerMAC   = net.HardwareAddr{0x02, 0x42, 0xac, 0x11, 0x00, 0x07}
		otherMAC  = net.HardwareAddr{0x00, 0x1b, 0x21, 0x00, 0x00, 0x02}
		bcastMAC  = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		host      = net.IP{192, 0, 2, 10}
		router    = net.IP{192, 0, 2, 1}
		neighbour = net.IP{192, 0, 2, 7}
		bcast     = net.IP{192, 0, 2, 255}
	)
	clients := []net.IP{{198, 51, 100, 7}, {198, 51, 100, 23}, {203, 0, 113, 5}, {203, 0, 113, 77}, {198, 51, 100, 140}, {203, 0, 113, 200}}
	ephemeral := func() uint16 { return uint16(32768 + rng.IntN(28232)) } // Linux's ip_local_port_range
	dns := func(name string, qtype layers.DNSType) []byte {
		return serialize(&layers.DNS{ID: uint16(rng.Uint32()), RD: true, QDCount: 1,
			Questions: []layers.DNSQuestion{{Name: []byte(name), Type: qtype, Class: layers.DNSClassIN}}})
	}
	ntp := func() []byte {
		return serialize(&layers.NTP{Version: 4, Mode: 3, Poll: 6, Precision: -20, TransmitTimestamp: layers.NTPTimestamp(rng.Uint64())})
	}
	udp := func(src net.IP, dst net.IP, sport, dport uint16, payload []byte, f func(*packet.Spec)) []byte {
		s := packet.Spec{SrcMAC: routerMAC, DstMAC: hostMAC, Src: src, Dst: dst, Proto: packet.ProtoUDP, SrcPort: sport, DstPort: dport, Payload: payload}
		if f != nil {
			f(&s)
		}
		return packet.MustBuild(s)
	}
	ping := func(src, dst net.IP, f func(*packet.Spec)) []byte {
		s := packet.Spec{SrcMAC: routerMAC, DstMAC: hostMAC, Src: src, Dst: dst, Proto: packet.ProtoICMP, ICMPType: 8, Payload: []byte("abcdefghijklmnopqrstuvwabcdefghi")}
		if f != nil {
			f(&s)
		}
		return packet.MustBuild(s)
	}
	arp := func(sha net.HardwareAddr, spa, tpa net.IP) []byte {
		return packet.MustBuild(packet.Spec{SrcMAC: sha, DstMAC: bcastMAC, EtherType: packet.EtherTypeARP, Src: spa, ARPTarget: tpa})
	}
	broadcast := func(s *packet.Spec) { s.SrcMAC, s.DstMAC = peerMAC, bcastMAC }
	names := []string{"example.com", "www.example.org", "mail.example.net", "ntp.example.com", "example.com", "cdn.example.org"}
	types := []layers.DNSType{layers.DNSTypeA, layers.DNSTypeAAAA, layers.DNSTypeMX, layers.DNSTypeA, layers.DNSTypeTXT, layers.DNSTypeA}

	out := []tourFrame{
		{"ARP: the router asks for the host", arp(routerMAC, router, host), "reply arp"},
	}
	for i, c := range clients {
		out = append(out, tourFrame{"DNS query " + names[i], udp(c, host, ephemeral(), 53, dns(names[i], types[i]), nil), "deliver dns"})
	}
	for i, c := range clients[:4] {
		sport := ephemeral()
		if i%2 == 0 {
			sport = 123 // ntpd and chronyd send from the NTP port
		}
		out = append(out, tourFrame{"NTP client request", udp(c, host, sport, 123, ntp(), nil), "deliver ntp"})
	}
	out = append(out,
		tourFrame{"ping", ping(clients[0], host, nil), "reply icmp-echo"},
		tourFrame{"ping", ping(clients[2], host, nil), "reply icmp-echo"},
		tourFrame{"SNMP to a closed port", udp(clients[1], host, ephemeral(), 161, []byte{0x30, 0x00}, nil), "sink RxL4UDPPortUnreachable"},
		tourFrame{"traceroute probe to a closed port", udp(clients[3], host, ephemeral(), 33434, make([]byte, 32), func(s *packet.Spec) { s.TTL = 1 }), "sink RxL4UDPPortUnreachable"},
		tourFrame{"DNS query with a bad UDP checksum", udp(clients[4], host, ephemeral(), 53, dns("example.com", layers.DNSTypeA), func(s *packet.Spec) { s.BadL4Checksum = true }), "drop RxL4UDPValidChecksum.false"},
		tourFrame{"DNS query with a bad IPv4 header checksum", udp(clients[5], host, ephemeral(), 53, dns("example.org", layers.DNSTypeA), func(s *packet.Spec) { s.BadIPChecksum = true }), "drop RxL3IPv4ValidChecksum.false"},
		tourFrame{"DNS query to the subnet broadcast", udp(neighbour, bcast, ephemeral(), 53, dns("printer.local", layers.DNSTypeA), broadcast), "deliver dns"},
		tourFrame{"NTP to the subnet broadcast (ntp listens on 192.0.2.10 only)", udp(neighbour, bcast, 123, 123, ntp(), broadcast), "drop RxL4UDPValidUnicastDest.false"},
		tourFrame{"ping to the subnet broadcast", ping(neighbour, bcast, broadcast), "drop RxL3ICMPValidUnicastDest.false"},
		tourFrame{"ARP: a neighbour asks for another host", arp(peerMAC, neighbour, net.IP{192, 0, 2, 20}), "drop RxL3ARPLocalIPDest.false"},
		tourFrame{"ARP: a neighbour asks for the host", arp(peerMAC, neighbour, host), "reply arp"},
		tourFrame{"DNS query for another host's MAC, flooded by a switch", udp(clients[0], net.IP{192, 0, 2, 11}, ephemeral(), 53, dns("example.com", layers.DNSTypeA), func(s *packet.Spec) { s.DstMAC = otherMAC }), "drop RxL2EtherValidDest.false"},
		tourFrame{"DNS query from a spoofed loopback source", udp(net.IP{127, 0, 0, 1}, host, ephemeral(), 53, dns("example.com", layers.DNSTypeA), nil), "drop RxL3IPv4ValidSource.false"},
		tourFrame{"DNS over TCP: a SYN to port 53 (no TCP endpoint)", packet.MustBuild(packet.Spec{SrcMAC: routerMAC, DstMAC: hostMAC, Src: clients[1], Dst: host, Proto: packet.ProtoTCP, SrcPort: ephemeral(), DstPort: 53, TCPFlags: 0x02}), "sink RxL4TCPReset"},
	)
	for i, c := range clients[2:] {
		out = append(out, tourFrame{"DNS query " + names[i], udp(c, host, ephemeral(), 53, dns(names[len(names)-1-i], layers.DNSTypeA), nil), "deliver dns"})
	}
	for i := range out {
		// A NIC receives no frame shorter than Ethernet's minimum: a
		// capture on the receiving host shows the sender's padding.
		if n := len(out[i].data); n < packet.MinFrame {
			out[i].data = append(out[i].data, make([]byte, packet.MinFrame-n)...)
		}
	}
	return out
}

// serialize is a layer's wire form.
func serialize(l gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := l.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
		panic("dragonc: internal error: serializing " + l.LayerType().String() + ": " + err.Error())
	}
	return buf.Bytes()
}

// tourPcap writes the frames as a pcap file, a few milliseconds apart
// from a fixed start.
func tourPcap(frames []tourFrame) []byte {
	var b bytes.Buffer
	w := pcapgo.NewWriter(&b)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(38, 2))
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, f := range frames {
		at = at.Add(time.Duration(200+rng.IntN(5000)) * time.Microsecond)
		ci := gopacket.CaptureInfo{Timestamp: at, CaptureLength: len(f.data), Length: len(f.data)}
		if err := w.WritePacket(ci, f.data); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

// TestTourCapture: the capture the README's tour traces is the one this
// test writes (go test -update rewrites it), and every frame goes where
// its description says, on the 82599 as `dragonc trace` embeds it.
func TestTourCapture(t *testing.T) {
	frames := tourFrames()
	if len(frames) < 24 {
		t.Fatalf("only %d frames", len(frames))
	}
	doc, err := os.ReadFile("docs/trace.md")
	if err != nil {
		t.Fatal(err)
	}
	if say := fmt.Sprintf("(%d frames;", len(frames)); !strings.Contains(squash(string(doc)), say) {
		t.Errorf("docs/trace.md does not say %q of %s", say, tourCapture)
	}
	got := tourPcap(frames)
	if *golden.Update {
		if err := os.WriteFile(tourCapture, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(tourCapture)
	if err != nil {
		t.Fatalf("%v (go test -run TestTourCapture -update writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("%s (%d bytes) is not what this test writes (%d bytes); rewrite it with go test -run TestTourCapture -update", tourCapture, len(want), len(got))
	}
	for i, f := range frames {
		p := gopacket.NewPacket(f.data, layers.LayerTypeEthernet, gopacket.Default)
		if e := p.ErrorLayer(); e != nil {
			t.Errorf("frame %d (%s): gopacket cannot decode it: %v", i+1, f.what, e.Error())
		}
		if strings.HasPrefix(f.what, "DNS query") && p.Layer(layers.LayerTypeDNS) == nil ||
			strings.HasPrefix(f.what, "NTP") && p.Layer(layers.LayerTypeNTP) == nil {
			t.Errorf("frame %d (%s): gopacket finds no %s layer", i+1, f.what, strings.Fields(f.what)[0])
		}
	}
	r, st := embedtest.PlanTarget(t, "82599", "examples/dns_ntp.lpg", costmodel.Balance{}, embed.TargetLinux)
	_, haveGo := exec.LookPath("go")
	fallback := haveGo == nil && !testing.Short()
	ts, _, err := verify.Trace(r, st, verify.TraceOptions{Pcaps: []string{tourCapture}, Fallback: fallback, Work: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != len(frames) {
		t.Fatalf("%d traces for %d frames", len(ts), len(frames))
	}
	for i, tr := range ts {
		f := frames[i]
		if tr.Reference != f.want || !tr.Match {
			t.Errorf("frame %d (%s): LPG %q, embedded %q, generated %q; want %q", i+1, f.what, tr.Reference, tr.Embedded, tr.Generated, f.want)
		}
		if fallback && tr.Queue >= 0 && tr.Generated == "" {
			t.Errorf("frame %d (%s): the generated code gave no verdict", i+1, f.what)
		}
	}
}
