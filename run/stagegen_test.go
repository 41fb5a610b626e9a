package run

import (
	"bytes"
	"fmt"
	gomaps "maps"
	"net"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run/dataplane"
	"github.com/dragonc/dragonc/sim"
)

// TestStageChecksMatchLPG checks the XDP program's checks like hardware:
// for every example stack on linux-xdp, verify's frames run through the
// generated program (BPF_PROG_TEST_RUN) and through the LPG. A frame the
// program drops must be one the LPG drops at the same node and port (the
// site's counter tells which), and every frame the LPG drops at a site of
// the stage must be dropped by the program; the frames it hands on must
// be decided as the LPG decides by the configured model and its queue's
// software (verify's simulation). Frames with a bad CRC never reach a
// program (the kernel drops them), nor do frames shorter than an
// Ethernet header (the test run refuses them).
func TestStageChecksMatchLPG(t *testing.T) {
	needBPF(t)
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.lpg"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example stacks: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r, st := embedtest.PlanTarget(t, Model, path, costmodel.Balance{}, dembed.TargetSilicon)
			stageMatchesLPG(t, r, st)
		})
	}
	// An interface with jumbo frames: echo requests longer than the
	// stage sums go on to the software.
	t.Run("jumbo", func(t *testing.T) {
		src := []byte("stack jumbo {\n interface eth0 { mac 02:00:00:00:00:01 ip 10.0.0.1/24 mtu 9000 }\n endpoint dns udp listen *:53\n service icmp-echo\n service arp\n}\n")
		r, err := planSpace(Model, dembed.TargetSilicon, "jumbo", src)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := lpg.LoadStack("jumbo", src)
		stageMatchesLPG(t, r, st)
	})
}

// stageMatchesLPG runs the checks of TestStageChecksMatchLPG for one stack.
func stageMatchesLPG(t *testing.T, r *dembed.Result, st *lpg.Stack) {
	s, err := stageOf(r.Plan, st, dragoncServes(st))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Program) == 0 || len(s.DropSites) == 0 {
		t.Fatalf("nothing placed on the eBPF stage: %d nodes, %d drop sites", len(s.Program), len(s.DropSites))
	}
	m, xdp := xdpStage(t, s)
	sm, err := sim.New(r.Embedding)
	if err != nil {
		t.Fatal(err)
	}
	g, err := lpg.Derive(st)
	if err != nil {
		t.Fatal(err)
	}
	chains, err := TxChains(g, r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	echoChain, err := dataplane.Bind(chains.Replies["icmp-echo"])
	if err != nil {
		t.Fatal(err)
	}
	// The software's replies, one transmit state per CPU as the
	// data plane has one per receive loop (its IPv4
	// identification counts the loop's frames).
	txs := map[int]*dataplane.Tx{}
	gen := sim.NewGen(st, 7)
	frames := echoFrames(t, st)
	ran, dropped, mismatches, answered, long := 0, map[string]int{}, 0, map[string]int{}, 0
	for i := range 15000 + len(frames) {
		var f sim.Frame
		if i < len(frames) {
			f = frames[i]
		} else {
			f = gen.Next()
		}
		if !f.CRCOK || len(f.Data) < 14 || len(f.Data) > 3000 {
			// The kernel drops a bad CRC before any program runs; the
			// test run takes an Ethernet header at least and one page
			// at most (a driver gives a program without
			// BPF_F_XDP_HAS_FRAGS no longer frame).
			continue
		}
		res := sm.Run(f.Data, true)
		if !res.Match() {
			t.Errorf("%s: the embedded stack decides %s, the LPG %s", f.Label, res.Embedded, res.Ref)
			mismatches++
		}
		site := -1
		if res.Ref.Kind == lpg.Drop {
			site = slices.Index(s.DropSites, StageDrop{res.Ref.Node, res.Ref.Port})
		}
		before := dropCount(t, m.drops, site)
		echoKey := uint32(len(s.DropSites) + slices.Index(s.Answers, "RxL3ICMPNeedsResponse"))
		var echoBefore []uint64
		if err := m.drops.Lookup(echoKey, &echoBefore); err != nil && slices.Contains(s.Answers, "RxL3ICMPNeedsResponse") {
			t.Fatal(err)
		}
		ro := &ebpf.RunOptions{Data: f.Data, DataOut: make([]byte, len(f.Data)+64)}
		act, err := xdp.Run(ro)
		if err != nil {
			t.Fatalf("%s: test run: %v", f.Label, err)
		}
		ran++
		echo := res.Ref == lpg.Outcome{Kind: lpg.Reply, Reply: "icmp-echo"}
		answers := stageAnswers(s, res.Ref, f.Data)
		switch {
		case act == 3 && !answers:
			t.Errorf("%s: the XDP stage answers it; the LPG: %s\n% x", f.Label, res.Ref, f.Data)
			mismatches++
		case act == 3:
			// The answer the data plane's transmit nodes build.
			tx := &dataplane.Tx{Req: f.Data, Buf: make([]byte, 1514), MAC: s.MAC}
			chain := []dataplane.TxFunc{dataplane.TxL3ARPInitiateResponse, dataplane.TxL2EtherFillHeader}
			if echo {
				var after []uint64
				if err := m.drops.Lookup(echoKey, &after); err != nil {
					t.Fatal(err)
				}
				cpu := slices.IndexFunc(after, func(n uint64) bool { return n > 0 })
				for c := range after {
					if after[c] != echoBefore[c] {
						cpu = c
					}
				}
				if txs[cpu] == nil {
					txs[cpu] = &dataplane.Tx{Buf: make([]byte, 1514), MAC: s.MAC}
				}
				tx = txs[cpu]
				tx.Req = f.Data
				chain = echoChain
			}
			for _, fn := range chain {
				if !fn(tx) {
					t.Fatalf("%s: the data plane does not answer it", f.Label)
				}
			}
			if want := tx.Buf[:tx.N]; !bytes.Equal(ro.DataOut, want) {
				t.Errorf("%s: the XDP stage answers\n% x\nthe data plane\n% x", f.Label, ro.DataOut, want)
				mismatches++
			}
			answered[res.Ref.Reply]++
		case echo && act != 1:
			long++ // beyond the guard: the software answers
		case answers:
			t.Errorf("%s: the LPG answers it; the XDP stage's action is %d\n% x", f.Label, act, f.Data)
			mismatches++
		case act == 1 && site < 0:
			t.Errorf("%s: the XDP stage drops it; the LPG: %s\n% x", f.Label, res.Ref, f.Data)
			mismatches++
		case act == 1 && dropCount(t, m.drops, site) != before+1:
			t.Errorf("%s: the XDP stage drops it, but not at %s where the LPG does\n% x", f.Label, s.DropSites[site], f.Data)
			mismatches++
		case act != 1 && site >= 0:
			t.Errorf("%s: the LPG drops it at %s; the XDP stage hands it on (action %d)\n% x", f.Label, s.DropSites[site], act, f.Data)
			mismatches++
		case act == 1:
			dropped[s.DropSites[site].String()]++
		}
		if (act == 1 || act == 3) != (res.Queue < 0) {
			t.Errorf("%s: the XDP stage's action is %d, the model's queue %d", f.Label, act, res.Queue)
			mismatches++
		}
		if mismatches > 10 {
			t.FailNow()
		}
	}
	if len(dropped) == 0 || st.ARP && answered["arp"] == 0 || st.ICMPEcho && answered["icmp-echo"] < 20 {
		t.Errorf("the stage dropped none of %d frames, or answered too few ARP or echo requests (%v)", ran, answered)
	}
	if st.ICMPEcho && dropped["RxL3ICMPValidChecksum.false"] == 0 {
		t.Errorf("the stage dropped no bad ICMP checksum: %v", dropped)
	}
	if st.ICMPEcho && st.Interfaces[0].MTU > 1500 && long == 0 {
		t.Errorf("no echo request longer than the stage sums was handed on")
	}
	t.Logf("%d frames, %d drop sites, dropped %v, answered %v, %d echo requests handed on (longer than the stage sums)", ran, len(s.DropSites), dropped, answered, long)
	// What run shows: the same counts, by outcome.
	want := map[string]uint64{}
	for site, n := range dropped {
		want["drop "+site] = uint64(n)
	}
	for r, n := range answered {
		want["reply "+r] = uint64(n)
	}
	got := map[string]uint64{}
	for _, o := range stageCounts(s, m.drops) {
		got[o.Name] = o.Count
	}
	if !gomaps.Equal(got, want) {
		t.Errorf("the stage's counters read %v; the test counted %v", got, want)
	}
}

// dropCount sums a drop site's per-CPU counter (0 for no site).
func dropCount(t *testing.T, m *ebpf.Map, site int) uint64 {
	t.Helper()
	if site < 0 {
		return 0
	}
	var per []uint64
	if err := m.Lookup(uint32(site), &per); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// echoFrames are echo requests to a stack with an echo service, for the
// stage's checksum and reply: messages of odd and even lengths around
// bpf_csum_diff's 512 bytes and up to a 1500-byte datagram's 1480, with
// good and bad checksums, priority-tagged, with IPv4 options, padded;
// to a broadcast address, from martian and group sources; and, on an
// interface whose MTU allows it, longer than the stage sums.
func echoFrames(t testing.TB, st *lpg.Stack) []sim.Frame {
	if !st.ICMPEcho || len(st.Interfaces) == 0 || len(st.Unicast()) == 0 {
		return nil
	}
	in := st.Interfaces[0]
	mac := make(net.HardwareAddr, 6)
	for i := range mac {
		mac[i] = byte(in.MAC >> (40 - 8*i))
	}
	ip4 := func(a uint32) net.IP { return net.IP{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)} }
	us := ip4(st.Unicast()[0])
	peer := net.HardwareAddr{0x02, 0, 0, 0, 0, 9}
	peerIP := net.IP{us[0], us[1], us[2], us[3] ^ 0x7}
	var out []sim.Frame
	add := func(label string, f []byte) {
		out = append(out, sim.Frame{Data: f, CRCOK: true, Label: "echo: " + label})
	}
	req := func(src, dst net.IP, from, to net.HardwareAddr, payload int, opts, tag bool) []byte {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: uint16(payload), Protocol: layers.IPProtocolICMPv4, SrcIP: src, DstIP: dst}
		if opts {
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		}
		data := make([]byte, payload)
		for i := range data {
			data[i] = byte(i*7 + payload)
		}
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: uint16(payload) ^ 0x5a5a, Seq: uint16(len(out))}
		if tag {
			return frame(t, &layers.Ethernet{SrcMAC: from, DstMAC: to, EthernetType: layers.EthernetTypeDot1Q},
				&layers.Dot1Q{Priority: 5, VLANIdentifier: 0, Type: layers.EthernetTypeIPv4}, ip, icmp, gopacket.Payload(data))
		}
		return frame(t, &layers.Ethernet{SrcMAC: from, DstMAC: to, EthernetType: layers.EthernetTypeIPv4}, ip, icmp, gopacket.Payload(data))
	}
	for _, n := range []int{0, 1, 2, 3, 55, 56, 57, 503, 504, 505, 506, 507, 1000, 1001, 1467, 1468, 1471, 1472} {
		opts := n%3 == 0 && n <= 1468
		tag := n%4 == 1
		f := req(peerIP, us, peer, mac, n, opts, tag)
		add(fmt.Sprintf("%d bytes of data (options %v, tagged %v)", n, opts, tag), f)
		add(fmt.Sprintf("%d bytes of data, padded", n), append(slices.Clone(f), make([]byte, 1+n%17)...))
		for _, at := range []int{2, 3, 8 + n - 1 - n%5} {
			bad := slices.Clone(f)
			l3 := 14
			if tag {
				l3 = 18
			}
			l4 := l3 + int(bad[l3]&0xf)*4
			if at < 0 || at >= 8+n {
				continue
			}
			bad[l4+at] ^= 0x10
			add(fmt.Sprintf("%d bytes of data, a bit flipped at %d of the message", n, at), bad)
		}
	}
	// The all-zero message: its checksum folds from a sum of zero.
	z := req(peerIP, us, peer, mac, 0, false, false)
	z[len(z)-4], z[len(z)-3], z[len(z)-2], z[len(z)-1] = 0, 0, 0, 0
	z[len(z)-6], z[len(z)-5] = 0xf7, 0xff
	add("id, sequence and data zero", z)
	for _, b := range st.Broadcasts() {
		add("to broadcast "+ip4(b).String(), req(peerIP, ip4(b), peer, layers.EthernetBroadcast, 20, false, false))
	}
	add("to us, as a link broadcast", req(peerIP, us, peer, layers.EthernetBroadcast, 20, false, false))
	for _, src := range []net.IP{{127, 0, 0, 1}, {224, 0, 0, 5}, {0, 0, 0, 0}, {255, 255, 255, 255}, us} {
		add("from "+src.String(), req(src, us, peer, mac, 20, false, false))
	}
	add("from a group MAC", req(peerIP, us, net.HardwareAddr{0x03, 0, 0, 0, 0, 9}, mac, 20, false, false))
	if in.MTU > 1500 {
		n := min(in.MTU, 2900) - 20 - 8
		add("a datagram of 1501 bytes", req(peerIP, us, peer, mac, 1501-28, false, false))
		add(fmt.Sprintf("%d bytes of data", n), req(peerIP, us, peer, mac, n, false, false))
	}
	return out
}

// ipLen is a frame's IPv4 total length (0 for another frame).
func ipLen(f []byte) int {
	var fr packet.Frame
	fr.Decode(f)
	n, _ := fr.Field("ip.len")
	return int(n)
}

// stageAnswers reports whether the stage answers a frame the LPG decides
// ref for: an ARP request, or an echo request no longer than its guard,
// when it has the answering node.
func stageAnswers(s *Stage, ref lpg.Outcome, f []byte) bool {
	switch ref {
	case lpg.Outcome{Kind: lpg.Reply, Reply: "arp"}:
		return slices.Contains(s.Answers, "RxL3ARPNeedsResponse")
	case lpg.Outcome{Kind: lpg.Reply, Reply: "icmp-echo"}:
		return slices.Contains(s.Answers, "RxL3ICMPNeedsResponse") && ipLen(f) <= 1500
	}
	return false
}
