package run

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	_ "github.com/dragonc/dragonc/internal/golden"
)

var (
	ourMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	peerMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
	ourIP   = net.IP{10, 9, 0, 1}
	peerIP  = net.IP{10, 9, 0, 2}
)

func frame(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	for _, l := range ls {
		if n, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			for _, m := range ls {
				if ip, ok := m.(*layers.IPv4); ok {
					n.SetNetworkLayerForChecksum(ip)
				}
			}
		}
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func eth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: peerMAC, DstMAC: ourMAC, EthernetType: t}
}

func ip4(dst net.IP, p layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: p, SrcIP: peerIP, DstIP: dst}
}

func udp(t testing.TB, dst net.IP, sport, dport uint16, frag bool) []byte {
	ip := ip4(dst, layers.IPProtocolUDP)
	if frag {
		ip.Flags = layers.IPv4MoreFragments
	}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(ip)
	return frame(t, eth(layers.EthernetTypeIPv4), ip, u, gopacket.Payload("hi"))
}

var bpfLoads = sync.OnceValue(func() error {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err == nil {
		p.Close()
	}
	return err
})

// needBPF skips a test that loads eBPF programs where none can be loaded:
// without root, or where the kernel refuses even a program that passes
// every frame (no BPF, a sandbox).
func needBPF(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading eBPF programs needs root")
	}
	if err := bpfLoads(); err != nil {
		t.Skipf("the kernel loads no eBPF program here: %v", err)
	}
}

// xdpStage makes the maps of stage s and loads its XDP program, both
// closed when the test ends.
func xdpStage(t *testing.T, s *Stage) (*maps, *ebpf.Program) {
	t.Helper()
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	p, err := loadProgram(progXDP, s, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return m, p
}

// TestClassifier runs the generated programs on frames in the kernel
// (BPF_PROG_TEST_RUN) and checks which are the stack's and which queue
// each goes to.
func TestClassifier(t *testing.T) {
	needBPF(t)
	us, peer := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	full, port := [16]byte{}, [16]byte{}
	for i := 0; i < 13; i++ {
		full[i] = 0xff
	}
	port[10], port[11], port[12] = 0xff, 0xff, 0xff
	s := &Stage{
		Addrs:  []netip.Addr{us},
		Bcasts: []netip.Addr{netip.MustParseAddr("10.9.0.255")},
		ARP:    true, ICMP: true, Queues: []uint32{0, 1, 2, 3},
		Groups: []Group{
			{Table: "RxCFlow", Mask: full, Ports: true, Capacity: 16, Rules: []Rule{{Key: Key(17, peer, us, 5000, 7), Queue: 3}}},
			{Table: "RxCPort", Mask: port, Ports: true, Capacity: 16, Rules: []Rule{
				{Key: Key(17, netip.IPv4Unspecified(), netip.IPv4Unspecified(), 0, 7), Queue: 1},
				{Key: Key(17, netip.IPv4Unspecified(), netip.IPv4Unspecified(), 0, 9), Queue: 2},
			}},
		},
	}
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var progs [4]*ebpf.Program
	for i, kind := range []int{progFanout, progFilter, progTC, progXDP} {
		if progs[i], err = loadProgram(kind, s, m); err != nil {
			t.Fatal(err)
		}
		defer progs[i].Close()
	}
	fan, filt, tc, xdp := progs[0], progs[1], progs[2], progs[3]

	arp := func(op uint16, tpa net.IP) []byte {
		return frame(t, &layers.Ethernet{SrcMAC: peerMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
				Operation: op, SourceHwAddress: peerMAC, SourceProtAddress: peerIP, DstHwAddress: make([]byte, 6), DstProtAddress: tpa})
	}
	icmp := func(typ uint8, dst net.IP) []byte {
		return frame(t, eth(layers.EthernetTypeIPv4), ip4(dst, layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: 1, Seq: 1}, gopacket.Payload("ping"))
	}
	tcp := func() []byte {
		ip := ip4(ourIP, layers.IPProtocolTCP)
		tc := &layers.TCP{SrcPort: 4000, DstPort: 80, SYN: true, Window: 100}
		tc.SetNetworkLayerForChecksum(ip)
		return frame(t, eth(layers.EthernetTypeIPv4), ip, tc)
	}
	// 802.1Q: a priority tag (VID 0) is no tag; a frame of a VLAN is
	// the kernel's (the LPG drops it).
	tagged := func(vid uint16, typ layers.EthernetType, ls ...gopacket.SerializableLayer) []byte {
		return frame(t, append([]gopacket.SerializableLayer{eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{Priority: 5, VLANIdentifier: vid, Type: typ}}, ls...)...)
	}
	taggedUDP := func(vid uint16, dport uint16) []byte {
		ip := ip4(ourIP, layers.IPProtocolUDP)
		u := &layers.UDP{SrcPort: 5001, DstPort: layers.UDPPort(dport)}
		u.SetNetworkLayerForChecksum(ip)
		return tagged(vid, layers.EthernetTypeIPv4, ip, u, gopacket.Payload("hi"))
	}
	taggedARP := tagged(0, layers.EthernetTypeARP, &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: 1, SourceHwAddress: peerMAC, SourceProtAddress: peerIP, DstHwAddress: make([]byte, 6), DstProtAddress: ourIP})
	// A frame of the software VI (package sovia): EtherType 0x88B5,
	// then the VI header. It is never the stage's: every program leaves
	// it to the kernel, which hands it to the VIs' own packet socket
	// (the tc program too, or that socket would not see it).
	vi := frame(t, &layers.Ethernet{SrcMAC: peerMAC, DstMAC: ourMAC, EthernetType: layers.EthernetType(0x88B5)}, gopacket.Payload(make([]byte, 40)))
	for _, c := range []struct {
		name  string
		frame []byte
		ours  bool
		queue uint32
	}{
		{"software VI", vi, false, 0},
		{"arp request for us", arp(1, ourIP), true, 0},
		{"arp request for another host", arp(1, net.IP{10, 9, 0, 7}), false, 0},
		{"arp reply", arp(2, ourIP), false, 0},
		{"arp request for the broadcast address", arp(1, net.IP{10, 9, 0, 255}), false, 0},
		{"echo request", icmp(8, ourIP), true, 0},
		{"echo reply (the kernel's)", icmp(0, ourIP), false, 0},
		{"echo request to another host", icmp(8, net.IP{10, 9, 0, 7}), false, 0},
		{"udp flow rule", udp(t, ourIP, 5000, 7, false), true, 3},
		{"udp port rule", udp(t, ourIP, 5001, 7, false), true, 1},
		{"udp second port", udp(t, ourIP, 5001, 9, false), true, 2},
		{"udp closed port", udp(t, ourIP, 5001, 10, false), true, 0},
		{"udp broadcast", udp(t, net.IP{10, 9, 0, 255}, 5001, 9, false), true, 2},
		{"udp to another host", udp(t, net.IP{10, 9, 0, 7}, 5001, 7, false), false, 0},
		{"udp fragment", udp(t, ourIP, 5000, 7, true), true, 0},
		{"udp port rule, priority tag", taggedUDP(0, 9), true, 2},
		{"udp closed port, priority tag", taggedUDP(0, 10), true, 0},
		{"udp of VLAN 5", taggedUDP(5, 9), false, 0},
		{"arp request for us, priority tag", taggedARP, true, 0},
		{"tcp", tcp(), false, 0},
		{"ipv6", frame(t, eth(layers.EthernetTypeIPv6), &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolNoNextHeader, HopLimit: 1, SrcIP: net.IPv6loopback, DstIP: net.IPv6loopback}), false, 0},
		{"runt", []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.frame
			if len(in) < 60 {
				in = append(in, make([]byte, 60-len(in))...) // the kernel's test runs want a full frame
			}
			if c.name == "runt" {
				in = c.frame
			}
			q, _, err := fan.Test(in)
			if err != nil {
				t.Fatal(err)
			}
			keep, _, err := filt.Test(in)
			if err != nil {
				t.Fatal(err)
			}
			tcv, _, err := tc.Test(in)
			if err != nil {
				t.Fatal(err)
			}
			if (keep != 0) != c.ours || (tcv == 2) != c.ours {
				t.Errorf("filter kept %d, tc said %d; want ours=%v", keep, int32(tcv), c.ours)
			}
			if c.ours && q != c.queue {
				t.Errorf("fanout chose queue %d, want %d", q, c.queue)
			}
			// The XDP program: the XSKMAP is empty, so every frame
			// passes, but the stack's carry their queue in four bytes of
			// metadata (a test run's output starts at the metadata).
			ro := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+64)}
			act, err := xdp.Run(ro)
			if err != nil {
				t.Fatal(err)
			}
			out := ro.DataOut
			if act != 2 {
				t.Errorf("XDP said %d, want XDP_PASS (no socket in the map)", act)
			}
			if c.name != "runt" {
				meta := len(out) - len(in)
				if meta != 0 && meta != 4 {
					t.Fatalf("XDP output is %d bytes for a %d-byte frame", len(out), len(in))
				}
				if (meta == 4) != c.ours {
					t.Errorf("XDP metadata: %d bytes; want ours=%v", meta, c.ours)
				}
				if meta == 4 && binary.NativeEndian.Uint32(out) != c.queue {
					t.Errorf("XDP metadata queue %d, want %d", binary.NativeEndian.Uint32(out), c.queue)
				}
			}
		})
	}
}

// TestXDPSocketKey checks the XSKMAP key the XDP program computes: a
// frame of plan queue q goes to the socket of q's loop (its index in the
// stage's queues) on the device queue it arrived on. A test run cannot
// redirect to AF_XDP sockets, so the program is loaded against a DEVMAP
// of the same size holding one entry: it redirects (XDP_REDIRECT) only
// when its key is that entry's, and passes the frame otherwise.
func TestXDPSocketKey(t *testing.T) {
	needBPF(t)
	us := netip.MustParseAddr("10.9.0.1")
	port := [16]byte{}
	port[10], port[11], port[12] = 0xff, 0xff, 0xff
	for _, queues := range [][]uint32{{0, 1, 2, 3}, {2, 7, 9}, {5}} {
		for i, q := range queues {
			s := &Stage{Addrs: []netip.Addr{us}, ARP: true, Queues: queues, Groups: []Group{
				{Table: "RxCPort", Mask: port, Ports: true, Capacity: 16, Rules: []Rule{{Key: Key(17, netip.IPv4Unspecified(), netip.IPv4Unspecified(), 0, 7), Queue: q}}},
			}}
			m, err := newMaps(s, 1)
			if err != nil {
				t.Fatal(err)
			}
			m.xsks.Close()
			if m.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.DevMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(len(queues))}); err != nil {
				t.Fatal(err)
			}
			if err := m.xsks.Put(uint32(i), uint32(1)); err != nil { // lo's ifindex
				t.Fatal(err)
			}
			xdp, err := loadProgram(progXDP, s, m)
			if err != nil {
				t.Fatalf("queues %v: %v", queues, err)
			}
			in := udp(t, net.IP{10, 9, 0, 1}, 5001, 7, false)
			in = append(in, make([]byte, max(0, 60-len(in)))...)
			act, err := xdp.Run(&ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+64)})
			if err != nil {
				t.Fatal(err)
			}
			if act != 4 {
				t.Errorf("queues %v, a frame of queue %d: XDP said %d; want XDP_REDIRECT to key %d", queues, q, act, i)
			}
			// With the entry under another key, the frame passes.
			if len(queues) > 1 {
				if err := m.xsks.Delete(uint32(i)); err != nil {
					t.Fatal(err)
				}
				if err := m.xsks.Put(uint32((i+1)%len(queues)), uint32(1)); err != nil {
					t.Fatal(err)
				}
				if act, err := xdp.Run(&ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+64)}); err != nil || act != 2 {
					t.Errorf("queues %v, a frame of queue %d with no socket at key %d: XDP said %d (%v); want XDP_PASS", queues, q, i, act, err)
				}
			}
			xdp.Close()
			m.Close()
		}
	}
}
