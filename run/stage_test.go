package run

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// nicFrames are frames for the stack web_and_dns (10.0.0.1/24): datagrams
// to its endpoints and to closed ports, from many sources, whole and as
// fragments, with IPv4 options, with total lengths that lie, truncated
// and padded; echo requests, ARP requests and Open-MX frames.
func nicFrames(t testing.TB, n int) [][]byte {
	rng := rand.New(rand.NewPCG(12, 99))
	us := net.IP{10, 0, 0, 1}
	mac := net.HardwareAddr{0x00, 0x1b, 0x21, 0x3a, 0x4b, 0x5c}
	peer := net.HardwareAddr{0x02, 0, 0, 0, 0, 9}
	ether := func(t layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: peer, DstMAC: mac, EthernetType: t}
	}
	var out [][]byte
	for len(out) < n {
		src := net.IP{10, 0, 0, byte(2 + rng.IntN(250))}
		if rng.IntN(4) == 0 {
			src = net.IP{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
		}
		dst := us
		if rng.IntN(10) == 0 {
			dst = net.IP{10, 0, 0, 255}
		}
		var f []byte
		switch k := rng.IntN(10); {
		case k < 6:
			ports := []uint16{53, 11211, 7000, uint16(20000 + rng.IntN(100)), uint16(rng.Uint32())}
			sport, dport := uint16(rng.Uint32()), ports[rng.IntN(len(ports))]
			if dport == 7000 && rng.IntN(2) == 0 {
				src, sport = net.IP{10, 0, 0, 9}, 7001
			}
			ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src, DstIP: dst}
			if rng.IntN(5) == 0 {
				ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
			}
			switch rng.IntN(8) {
			case 0:
				ip.Flags = layers.IPv4MoreFragments
			case 1:
				ip.FragOffset = uint16(1 + rng.IntN(100))
			}
			u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
			u.SetNetworkLayerForChecksum(ip)
			f = frame(t, ether(layers.EthernetTypeIPv4), ip, u, gopacket.Payload(make([]byte, rng.IntN(64))))
			hl := 14 + int(f[14]&0xf)*4
			switch rng.IntN(8) {
			case 0: // a total length too short for the UDP header
				binary.BigEndian.PutUint16(f[16:], uint16(hl-14+rng.IntN(8)))
			case 1: // a total length longer than the frame
				binary.BigEndian.PutUint16(f[16:], uint16(len(f)-14+1+rng.IntN(100)))
			case 2: // cut short
				f = f[:hl+rng.IntN(len(f)-hl)]
			}
		case k < 8:
			ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: src, DstIP: us}
			f = frame(t, ether(layers.EthernetTypeIPv4), ip, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: uint16(rng.Uint32())}, gopacket.Payload("ping"))
		case k < 9:
			f = frame(t, &layers.Ethernet{SrcMAC: peer, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
				&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
					Operation: 1, SourceHwAddress: peer, SourceProtAddress: src, DstHwAddress: make([]byte, 6), DstProtAddress: us})
		default:
			f = append(append([]byte(mac), peer...), 0x86, 0xdf)
			f = append(f, make([]byte, 32)...)
			f[14+rng.IntN(32)] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 {
			f = pad60(f) // the wire's padding; a veth's frames come without
		}
		out = append(out, f)
	}
	return out
}

// pad60 is a frame as a wire carries it: padded by the sender to
// Ethernet's 60-byte minimum (a software link carries it unpadded).
func pad60(f []byte) []byte {
	if len(f) >= 60 {
		return f
	}
	return append(slices.Clone(f), make([]byte, 60-len(f))...)
}

// stageRun runs a stage's XDP and fanout programs on a frame: the queue
// each chose, whether it is ours, whether the XDP program dropped it.
type stageRun struct{ xdp, fan *ebpf.Program }

func loadStage(t testing.TB, s *Stage) *stageRun {
	t.Helper()
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	sr := &stageRun{}
	for _, p := range []struct {
		kind int
		to   **ebpf.Program
	}{{progXDP, &sr.xdp}, {progFanout, &sr.fan}, {progFilter, new(*ebpf.Program)}, {progTC, new(*ebpf.Program)}} {
		prog, err := loadProgram(p.kind, s, m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { prog.Close() })
		*p.to = prog
	}
	return sr
}

func (sr *stageRun) run(t testing.TB, f []byte) (xq int, ours, dropped bool, fq uint32) {
	t.Helper()
	ro := &ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+64)}
	act, err := sr.xdp.Run(ro)
	if err != nil {
		t.Fatalf("XDP test run: %v", err)
	}
	fq, _, err = sr.fan.Test(f)
	if errors.Is(err, syscall.EINVAL) && len(f) < 14+40 {
		// The kernel's test run of an skb program pulls a whole IPv4 or
		// IPv6 header before the program runs (bpf_prog_test_run_skb).
		t.Skip("the test harness refuses a frame too short for its IP header")
	}
	if err != nil {
		t.Fatalf("fanout test run: %v", err)
	}
	switch {
	case act == 1:
		return -1, true, true, fq
	case len(ro.DataOut)-len(f) == 4:
		return int(binary.NativeEndian.Uint32(ro.DataOut)), true, false, fq
	}
	return -1, false, false, fq
}

// TestHardwareStageMatchesNIC: when the driver refuses all of an 82599
// plan's steering (a veth refuses it all), the eBPF stage must put every
// frame of the stack on the queue the configured NIC would, as the PRG
// interpreter runs it: the Flow Director rules in their order, then RSS
// (Toeplitz over the addresses, and ports where the NIC hashes them) and
// the indirection table. When only some rules are refused, the frames
// those rules steer must go to their queues and the rest stay on the
// queue the NIC chose. The plan is the priority cost's, which keeps
// Flow Director rules for the gold endpoint and most of the rest (balance
// spreads the stack by RSS alone).
func TestHardwareStageMatchesNIC(t *testing.T) {
	needBPF(t)
	r, st := embedtest.PlanTarget(t, "82599", filepath.Join("..", "examples", "web_and_dns.lpg"), costmodel.Priority{}, dembed.TargetLinux)
	steps := linux.Steps(r)
	interp, err := prg.NewInterp(r.Model(), r.Embedding.Config)
	if err != nil {
		t.Fatal(err)
	}
	frames := nicFrames(t, 4000)

	s, notes, err := hardwareStage(r, st, steps, dragoncServes(st))
	if err != nil {
		t.Fatal(err)
	}
	if s.Miss != MissRSS || len(s.Groups) != 1 || len(s.Groups[0].Rules) == 0 {
		t.Fatalf("all refused: miss %d, %d groups; notes %q", s.Miss, len(s.Groups), notes)
	}
	sr := loadStage(t, s)
	compared, queues, unowned := 0, map[int]int{}, 0
	for i, f := range frames {
		want := interp.Run(f, true)
		xq, ours, dropped, fq := sr.run(t, f)
		if !ours {
			continue
		}
		if want.Queue < 0 {
			unowned++ // the NIC itself drops it (its own checks)
			continue
		}
		compared++
		queues[want.Queue]++
		if dropped || xq != want.Queue || int(fq) != want.Queue {
			t.Errorf("frame %d: the NIC puts it on queue %d; XDP chose %d (dropped %v), fanout %d\n% x", i, want.Queue, xq, dropped, fq, f)
			if compared > 20 {
				t.FailNow()
			}
		}
	}
	t.Logf("all refused: %d frames compared over queues %v (%d the NIC drops itself)", compared, queues, unowned)
	if compared < 2000 || len(queues) < 6 {
		t.Errorf("too few frames compared (%d) or queues reached (%v)", compared, queues)
	}

	// Some rules refused: ten of the Flow Director rules.
	var refused []linux.Step
	refusedEntry := map[int]bool{}
	for i, st := range steps {
		if st.Kind == linux.StepRule && len(refused) < 10 && i%3 == 0 {
			refused = append(refused, st)
		}
	}
	for _, c := range r.Plan.Config {
		for i, e := range c.Entries {
			for _, st := range refused {
				if st.Entry.Match == e.Match && st.Entry.Action == e.Action {
					refusedEntry[i] = true
				}
			}
		}
	}
	s, _, err = hardwareStage(r, st, refused, dragoncServes(st))
	if err != nil {
		t.Fatal(err)
	}
	if s.Miss != MissDevice {
		t.Fatalf("some refused: miss %d", s.Miss)
	}
	sr = loadStage(t, s)
	taken := 0
	for i, f := range frames {
		want := interp.Run(f, true)
		byRefused := false
		for _, step := range interp.Path() {
			if step.Node.Name == "RxCFDir" && step.Port != nil {
				if k, err := strconv.Atoi(strings.TrimPrefix(step.Port.Name, "entry")); err == nil && refusedEntry[k] {
					byRefused = true
				}
			}
		}
		xq, ours, _, _ := sr.run(t, f)
		if !ours || want.Queue < 0 {
			continue
		}
		wantQ := 0 // the test run's receive queue: the NIC's choice
		if byRefused {
			wantQ = want.Queue
			taken++
		}
		if xq != wantQ {
			t.Errorf("frame %d: want queue %d (steered by a refused rule: %v), XDP chose %d\n% x", i, wantQ, byRefused, xq, f)
		}
	}
	if taken < 20 {
		t.Errorf("only %d frames were steered by the refused rules", taken)
	}
}

// FuzzHardwareStage feeds hostile frames to the stage that does all of an
// 82599 plan's steering: a frame the configured NIC puts on a queue must
// reach that queue through the XDP and the fanout programs alike, and
// no frame may make a program fail.
func FuzzHardwareStage(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("loading eBPF programs needs root")
	}
	r, st := embedtest.PlanTarget(f, "82599", filepath.Join("..", "examples", "web_and_dns.lpg"), costmodel.Balance{}, dembed.TargetLinux)
	interp, err := prg.NewInterp(r.Model(), r.Embedding.Config)
	if err != nil {
		f.Fatal(err)
	}
	s, _, err := hardwareStage(r, st, linux.Steps(r), dragoncServes(st))
	if err != nil {
		f.Fatal(err)
	}
	sr := loadStage(f, s)
	for _, fr := range nicFrames(f, 40) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, fr []byte) {
		if len(fr) < 14 || len(fr) > 1514 {
			t.Skip("the kernel's test runs take 14 to 1514 bytes")
		}
		want := interp.Run(fr, true)
		xq, ours, dropped, fq := sr.run(t, fr)
		if !ours || want.Queue < 0 {
			return
		}
		if dropped || xq != want.Queue || int(fq) != want.Queue {
			t.Errorf("the NIC puts it on queue %d; XDP chose %d (dropped %v), fanout %d\n% x", want.Queue, xq, dropped, fq, fr)
		}
	})
}

// TestLinuxXDPStageMatchesModel: the linux-xdp stage (flow table, port
// table, queue 0) puts every frame of the stack where the linux-xdp
// model's PRG, configured by the plan, puts it.
func TestLinuxXDPStageMatchesModel(t *testing.T) {
	needBPF(t)
	r, st := embedtest.PlanTarget(t, Model, filepath.Join("..", "examples", "web_and_dns.lpg"), costmodel.Balance{}, dembed.TargetSilicon)
	interp, err := prg.NewInterp(r.Model(), r.Embedding.Config)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stageOf(r.Plan, st, dragoncServes(st))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range s.Groups {
		if sp := r.Model().Space(g.Table); sp == nil || g.Capacity != sp.Capacity {
			t.Errorf("group of %s: capacity %d, the model's table %v", g.Table, g.Capacity, sp)
		}
	}
	sr := loadStage(t, s)
	compared, queues := 0, map[int]int{}
	for i, f := range nicFrames(t, 3000) {
		want := interp.Run(f, true)
		xq, ours, dropped, fq := sr.run(t, f)
		if !ours || want.Queue < 0 {
			continue
		}
		compared++
		queues[want.Queue]++
		if dropped || xq != want.Queue || int(fq) != want.Queue {
			t.Fatalf("frame %d: the model puts it on queue %d; XDP chose %d (dropped %v), fanout %d\n% x", i, want.Queue, xq, dropped, fq, f)
		}
	}
	t.Logf("%d frames compared over queues %v", compared, queues)
	// A fifth of the frames are echo requests, which the stage answers.
	if compared < 1200 || len(queues) < 3 {
		t.Errorf("too few frames compared (%d) or queues reached (%v)", compared, queues)
	}
}

// TestGroupsKeepPrecedence: rules of two shapes go to two hash maps tried
// one after the other, which keeps the NIC's order only when no rule of
// the later-tried shape comes first and matches frames of the other;
// otherwise dragonc run says it cannot take the table over.
func TestGroupsKeepPrecedence(t *testing.T) {
	q := func(string) (uint32, error) { return 1, nil }
	flow := plan.Entry{Action: "q", Fields: []plan.Field{{Field: "ip.proto", Value: 17}, {Field: "ip.src", Value: 0x0a000009}, {Field: "l4.dport", Value: 53}}}
	port := plan.Entry{Action: "q", Fields: []plan.Field{{Field: "ip.proto", Value: 17}, {Field: "l4.dport", Value: 53}}}
	other := plan.Entry{Action: "q", Fields: []plan.Field{{Field: "ip.proto", Value: 17}, {Field: "l4.dport", Value: 54}}}
	for _, c := range []struct {
		name    string
		entries []plan.Entry
		ok      bool
	}{
		{"specific first", []plan.Entry{flow, port}, true},
		{"general first (it wins either way)", []plan.Entry{port, flow}, true},
		{"shapes out of order, no frame in common", []plan.Entry{other, flow}, true},
		// other makes the port shape's map go first, so port would win
		// the frames flow wins on the NIC.
		{"shapes out of order, frames in common", []plan.Entry{other, flow, port}, false},
	} {
		gs, err := groups(plan.Config{Node: "T", Entries: c.entries}, nil, q)
		if (err == nil) != c.ok {
			t.Errorf("%s: %d groups, error %v; want ok=%v", c.name, len(gs), err, c.ok)
		}
	}
}

// TestHardwareStageRefusesEndpointHash: when the stage must place every
// frame of a Myri-10G plan, it cannot place the Open-MX frames the NIC's
// endpoint hash steers, and says so instead of sending them to queue 0.
func TestHardwareStageRefusesEndpointHash(t *testing.T) {
	r, st := embedtest.PlanTarget(t, "myri10g", filepath.Join("..", "examples", "mpi_openmx.lpg"), costmodel.Balance{}, dembed.TargetLinux)
	var channels []linux.Step
	for _, s := range linux.Steps(r) {
		if s.Kind == linux.StepChannels {
			channels = append(channels, s)
		}
	}
	if len(channels) == 0 {
		t.Fatal("the plan has no channel step")
	}
	// The built-in myri10ge driver does not expose the endpoint hash; a
	// driver that did would put it in the plan like this.
	pl := *r.Plan
	pl.Config = append(slices.Clone(pl.Config), plan.Config{Node: "RxCOMXHash", Kind: "hash", Indirection: []string{"RxQueue1"}})
	r2 := *r
	r2.Plan = &pl
	_, _, err := HardwareStage(&r2, st, channels)
	if err == nil || !strings.Contains(err.Error(), "endpoint hash") {
		t.Errorf("got %v, want the endpoint hash named", err)
	}
}

// dragoncServes names every endpoint of st as served by dragonc (as Go
// handlers would under ServeCode), so that a stage takes every frame the
// LPG takes: the tests of its steering against the NIC's and the LPG's
// compare on all of them. The kernel-socket endpoints' frames have tests
// of their own (kernel_test.go).
func dragoncServes(st *lpg.Stack) map[string]bool {
	out := map[string]bool{}
	for _, e := range st.Endpoints {
		out[e.Name] = true
	}
	return out
}
