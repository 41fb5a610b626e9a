package live

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// udpFrame builds an Ethernet frame of an IPv4 UDP datagram with valid
// checksums.
func udpFrame(t *testing.T, dport layers.UDPPort, frag bool) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 9, 0, 2}, DstIP: net.IP{10, 9, 0, 1}}
	if frag {
		ip.Flags = layers.IPv4MoreFragments
	}
	udp := &layers.UDP{SrcPort: 40000, DstPort: dport}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload("thirty-two bytes of payload ...")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// icmpFrame builds an Ethernet frame of an ICMP echo message with valid
// checksums.
func icmpFrame(t *testing.T, typ uint8, id uint16) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{10, 9, 0, 2}, DstIP: net.IP{10, 9, 0, 1}}
	ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: id, Seq: 7}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, ic, gopacket.Payload("thirty-two bytes of payload ...")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReflector runs the XDP_TX reflector with BPF_PROG_TEST_RUN: a
// datagram to port 7 comes back with its addresses and ports swapped and
// both checksums still valid, and an echo request as its reply
// (gopacket recomputes the checksums to compare); other datagrams,
// fragments, echo replies and short frames pass.
func TestReflector(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading an XDP program needs root")
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, Instructions: reflectorInsns(), License: "GPL"})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	run := func(in []byte) (uint32, []byte) {
		out := make([]byte, len(in)+64)
		act, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		return act, out[:len(in)]
	}
	in := udpFrame(t, 7, false)
	act, out := run(in)
	if act != 3 { // XDP_TX
		t.Fatalf("a datagram to port 7: action %d, want XDP_TX", act)
	}
	want := udpFrame(t, 7, false)
	p := gopacket.NewPacket(want, layers.LayerTypeEthernet, gopacket.Default)
	e, ip, udp := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), p.Layer(layers.LayerTypeIPv4).(*layers.IPv4), p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	e.SrcMAC, e.DstMAC = e.DstMAC, e.SrcMAC
	ip.SrcIP, ip.DstIP = ip.DstIP, ip.SrcIP
	udp.SrcPort, udp.DstPort = udp.DstPort, udp.SrcPort
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, e, ip, udp, gopacket.Payload(udp.Payload)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, buf.Bytes()) {
		t.Errorf("the reflected frame is not the datagram turned around with fresh checksums:\n got %x\nwant %x", out, buf.Bytes())
	}
	// Echo requests whose checksums put the update's carry both ways
	// (the identifier moves the sum), turned around as gopacket
	// computes a reply.
	var ids []uint16
	carries := 0
	for id := 0; id < 1<<16 && carries < 3; id++ {
		// The update's carry: the checksum read in this machine's order
		// (little-endian) plus 0x0008 passes 0xffff.
		f := icmpFrame(t, layers.ICMPv4TypeEchoRequest, uint16(id))
		if f[37] == 0xff && f[36] >= 0xf8 || id%4099 == 0 {
			ids = append(ids, uint16(id))
			if f[37] == 0xff && f[36] >= 0xf8 {
				carries++
			}
		}
	}
	if carries == 0 {
		t.Fatal("no identifier makes the checksum update carry")
	}
	for _, id := range ids {
		in, act := icmpFrame(t, layers.ICMPv4TypeEchoRequest, id), uint32(0)
		act, out = run(in)
		if act != 3 {
			t.Fatalf("an echo request: action %d, want XDP_TX", act)
		}
		p := gopacket.NewPacket(icmpFrame(t, layers.ICMPv4TypeEchoRequest, id), layers.LayerTypeEthernet, gopacket.Default)
		e, ip, ic := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), p.Layer(layers.LayerTypeIPv4).(*layers.IPv4), p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		e.SrcMAC, e.DstMAC = e.DstMAC, e.SrcMAC
		ip.SrcIP, ip.DstIP = ip.DstIP, ip.SrcIP
		ic.TypeCode = layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, e, ip, ic, gopacket.Payload(ic.Payload)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, buf.Bytes()) {
			t.Fatalf("identifier %d: the reflected echo request is not its reply:\n got %x\nwant %x", id, out, buf.Bytes())
		}
	}
	for name, f := range map[string][]byte{
		"port 9":     udpFrame(t, 9, false),
		"fragment":   udpFrame(t, 7, true),
		"short":      in[:40],
		"echo reply": icmpFrame(t, layers.ICMPv4TypeEchoReply, 1),
	} {
		if act, _ := run(f); act != 2 { // XDP_PASS
			t.Errorf("%s: action %d, want XDP_PASS", name, act)
		}
	}
}

// TestRemoveStale: a namespace named for a benchmark process that is
// gone is removed; one of a live process is not.
func TestRemoveStale(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := nsPrefix + strconv.Itoa(dead.Process.Pid) + "-1-a"
	alive := nsPrefix + strconv.Itoa(os.Getppid()) + "-1-a"
	for _, ns := range []string{gone, alive} {
		if err := ipCmd("netns", "add", ns); err != nil {
			t.Fatal(err)
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
	}
	var said []string
	removeStale(func(f string, args ...any) { said = append(said, f) })
	if _, err := os.Stat(netnsPath(gone)); err == nil {
		t.Errorf("%s was left", gone)
	}
	if _, err := os.Stat(netnsPath(alive)); err != nil {
		t.Errorf("%s, of a live process, was removed", alive)
	}
	if len(said) != 1 {
		t.Errorf("said %q", said)
	}
}
