package prg_test

import (
	"net"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

// model loads a built-in model that must load without a diagnostic.
func model(t *testing.T, name string) *prg.Model {
	t.Helper()
	m, diags := loadModel(t, name)
	if len(diags) > 0 {
		t.Fatalf("%s: %v", name, diags)
	}
	return m
}

// loadModel loads a built-in model, stopping the test on an error.
func loadModel(t *testing.T, name string) (*prg.Model, diag.List) {
	t.Helper()
	file, src, err := nics.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	m, diags := prg.Load(file, src)
	if m == nil {
		t.Fatalf("%s: %v", name, diags)
	}
	return m, diags
}

// TestModelsCheckClean loads every built-in model without a diagnostic and
// keeps its DOT picture as a golden file.
func TestModelsCheckClean(t *testing.T) {
	if len(nics.List()) < 5 {
		t.Fatalf("want at least 5 built-in models, have %v", nics.Names())
	}
	for _, b := range nics.List() {
		t.Run(b.Name, func(t *testing.T) {
			var m *prg.Model
			if strings.HasPrefix(b.Name, "dragonet-") {
				m = dragonetModel(t, b.Name) // Dragonet's files, as published
			} else {
				m = model(t, b.Name)
			}
			golden.Check(t, "../testdata/nics/"+b.Name+".dot.golden", []byte(dot.Graph(m.G)))
		})
	}
}

var (
	ourMAC = net.HardwareAddr{0x00, 0x1b, 0x21, 0x3a, 0x4b, 0x5c}
	us     = net.IP{10, 0, 0, 1}
	other  = net.IP{10, 0, 0, 2}
	peer   = net.IP{10, 0, 0, 9}
)

func udp(dst net.IP, sport, dport uint16) []byte {
	return packet.MustBuild(packet.Spec{DstMAC: ourMAC, Src: peer, Dst: dst, Proto: packet.ProtoUDP, SrcPort: sport, DstPort: dport})
}

func tcp(dst net.IP, sport, dport uint16, flags uint8) []byte {
	return packet.MustBuild(packet.Spec{DstMAC: ourMAC, Src: peer, Dst: dst, Proto: packet.ProtoTCP, SrcPort: sport, DstPort: dport, TCPFlags: flags})
}

func m5(proto uint8, dst net.IP, dport uint16) []prg.FieldMatch {
	var out []prg.FieldMatch
	if proto != 0 {
		out = append(out, prg.FieldMatch{Field: "ip.proto", Value: uint64(proto)})
	}
	if dst != nil {
		out = append(out, prg.FieldMatch{Field: "ip.dst", Value: ipv(dst)})
	}
	if dport != 0 {
		out = append(out, prg.FieldMatch{Field: "l4.dport", Value: uint64(dport)})
	}
	return out
}

func ipv(ip net.IP) uint64 {
	b := ip.To4()
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}

func interp(t *testing.T, m *prg.Model, c *prg.Config) *prg.Interp {
	t.Helper()
	in, err := prg.NewInterp(m, c)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestSteering82599(t *testing.T) {
	m := model(t, "82599")
	c := prg.NewConfig()
	five := c.Table("RxC5TupleFilter")
	five.Entries = []prg.Entry{
		{Match: m5(packet.ProtoUDP, nil, 53), Priority: 1, Action: "RxQueue3"},
		{Match: m5(packet.ProtoUDP, us, 53), Priority: 7, Action: "RxQueue5"},
	}
	fdir := c.Table("RxCFDir")
	fdir.Entries = []prg.Entry{
		{Match: m5(packet.ProtoUDP, us, 53), Action: "RxQueue9"},
		{Match: m5(packet.ProtoTCP, us, 80), Action: "RxQueue7"},
		{Match: m5(packet.ProtoTCP, us, 81), Drop: true},
	}
	c.Table("RxCEtherTypeFilter").Entries = []prg.Entry{{Match: []prg.FieldMatch{{Field: "eth.type", Value: packet.EtherTypeOpenMX}}, Action: "RxQueue2"}}
	c.Table("RxCSynFilter").Entries = []prg.Entry{{Action: "RxQueue4"}}
	in := interp(t, m, c)

	omx := packet.MustBuild(packet.Spec{DstMAC: ourMAC, EtherType: packet.EtherTypeOpenMX, OMXDstEP: 3})
	arp := packet.MustBuild(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us})
	cases := []struct {
		name  string
		frame []byte
		crc   bool
		queue int
		drop  string
	}{
		{"5-tuple: the priority-7 entry beats the priority-1 entry", udp(us, 1000, 53), true, 5, ""},
		{"5-tuple: only the wildcard entry matches", udp(other, 1000, 53), true, 3, ""},
		{"flow director after 5-tuple", tcp(us, 1000, 80, 0x10), true, 7, ""},
		{"flow director drop", tcp(us, 1000, 81, 0x10), true, -1, "RxCFDir"},
		{"ethertype filter", omx, true, 2, ""},
		{"SYN filter", tcp(us, 1000, 22, 0x02), true, 4, ""},
		{"SYN-ACK is not a SYN", tcp(us, 1000, 22, 0x12), true, 0, ""},
		{"no filter, RSS off: default queue", udp(us, 1000, 54), true, 0, ""},
		{"ARP: default queue", arp, true, 0, ""},
		{"bad CRC: dropped by the MAC", udp(us, 1000, 53), false, -1, "RxL2EtherValidCRC"},
		{"no whole Ethernet header: dropped", udp(us, 1000, 53)[:13], true, -1, "RxL2EtherValidLength"},
	}
	for _, tc := range cases {
		r := in.Run(tc.frame, tc.crc)
		if r.Queue != tc.queue || r.DropNode != tc.drop {
			t.Errorf("%s: queue %d, drop %q; want queue %d, drop %q", tc.name, r.Queue, r.DropNode, tc.queue, tc.drop)
		}
	}
}

// TestRSSSpread spreads TCP and UDP flows over four queues with the real
// Toeplitz hash: every queue gets traffic, and each frame lands where the
// indirection table says.
func TestRSSSpread(t *testing.T) {
	m := model(t, "82599")
	c := prg.NewConfig()
	sp := m.Space("RxCRSS")
	targets := []string{"RxQueue0", "RxQueue1", "RxQueue2", "RxQueue3"}
	c.Values["RxCRSS"] = &prg.Value{Kind: prg.Hash, Indirection: prg.SpreadEvenly(sp, targets)}
	in := interp(t, m, c)
	counts := map[int]int{}
	for port := uint16(1000); port < 1400; port++ {
		frame := tcp(us, port, 80, 0x10)
		if port%2 == 0 {
			frame = udp(us, port, 53)
		}
		r := in.Run(frame, true)
		if !r.HasHash {
			t.Fatal("no hash for an IPv4 frame")
		}
		want := m.QueueIndex(c.Values["RxCRSS"].Indirection[r.Hash&127])
		if r.Queue != want {
			t.Fatalf("port %d: queue %d, indirection says %d", port, r.Queue, want)
		}
		counts[r.Queue]++
	}
	for q := 0; q < 4; q++ {
		if counts[q] < 50 {
			t.Errorf("queue %d got %d of 400 flows: %v", q, counts[q], counts)
		}
	}
	// Frames RSS does not hash go to the default queue.
	arp := packet.MustBuild(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us})
	if r := in.Run(arp, true); r.Queue != 0 || r.HasHash {
		t.Errorf("ARP: queue %d, hash %v", r.Queue, r.HasHash)
	}
}

func TestChecksumFlags(t *testing.T) {
	m := model(t, "82599")
	good := udp(us, 1, 53)
	bad := packet.MustBuild(packet.Spec{DstMAC: ourMAC, Src: peer, Dst: us, Proto: packet.ProtoUDP, SrcPort: 1, DstPort: 53, BadIPChecksum: true})
	ipOK := pred.Atom{Name: "RxL3IPv4ValidChecksum", Value: "true"}
	in := interp(t, m, prg.NewConfig())
	if r := in.Run(good, true); !r.Atom(ipOK) {
		t.Errorf("offload on: a good IPv4 checksum should be reported true: %v", r.Reported())
	}
	if r := in.Run(bad, true); r.Atom(ipOK) || !r.Atom(pred.Atom{Name: "RxL3IPv4ValidChecksum", Value: "false"}) {
		t.Errorf("offload on: a bad IPv4 checksum should be reported false: %v", r.Reported())
	}
	c := prg.NewConfig()
	c.Values["RxCsumOffload"] = &prg.Value{Kind: prg.Enum, Choice: "off"}
	in = interp(t, m, c)
	if r := in.Run(good, true); len(r.Reported()) != 0 || r.Queue != 0 {
		t.Errorf("offload off: nothing reported, got %v (queue %d)", r.Reported(), r.Queue)
	}
}

func TestOpenMXHashing(t *testing.T) {
	m := model(t, "myri10g")
	frame := func(ep uint8) []byte {
		return packet.MustBuild(packet.Spec{DstMAC: ourMAC, EtherType: packet.EtherTypeOpenMX, OMXDstEP: ep, OMXType: 0x11})
	}
	// Off: Open-MX is not IP, so it falls to slice 0.
	in := interp(t, m, prg.NewConfig())
	for ep := uint8(0); ep < 8; ep++ {
		if r := in.Run(frame(ep), true); r.Queue != 0 {
			t.Errorf("hashing off: endpoint %d went to slice %d", ep, r.Queue)
		}
	}
	// On: endpoint i to slice i mod 8, through the driver's table.
	c := prg.NewConfig()
	c.Values["RxOMXHashMode"] = &prg.Value{Kind: prg.Enum, Choice: "on"}
	sp := m.Space("RxCOMXHash")
	var targets []string
	for i := 0; i < 8; i++ {
		targets = append(targets, "RxQueue"+string(rune('0'+i)))
	}
	c.Values["RxCOMXHash"] = &prg.Value{Kind: prg.Hash, Indirection: prg.SpreadEvenly(sp, targets)}
	in = interp(t, m, c)
	for ep := 0; ep < 256; ep += 7 {
		if r := in.Run(frame(uint8(ep)), true); r.Queue != ep%8 {
			t.Errorf("hashing on: endpoint %d went to slice %d, want %d", ep, r.Queue, ep%8)
		}
	}
	// IP traffic is still spread by the IP hash (off here: slice 0).
	if r := in.Run(udp(us, 1, 2), true); r.Queue != 0 {
		t.Errorf("UDP went to slice %d", r.Queue)
	}
}

func TestSteering82576AndTigon(t *testing.T) {
	m := model(t, "82576")
	c := prg.NewConfig()
	c.Table("RxCEtherTypeFilter").Entries = []prg.Entry{{Match: []prg.FieldMatch{{Field: "eth.type", Value: 0x0800}}, Action: "RxQueue6"}}
	c.Table("RxC5TupleFilter").Entries = []prg.Entry{{Match: m5(packet.ProtoUDP, nil, 53), Priority: 3, Action: "RxQueue1"}}
	in := interp(t, m, c)
	if r := in.Run(udp(us, 1, 53), true); r.Queue != 6 {
		t.Errorf("EtherType filter before the 5-tuple filters: queue %d, want 6", r.Queue)
	}
	c.Table("RxCEtherTypeFilter").Entries = nil
	in = interp(t, m, c)
	if r := in.Run(udp(us, 1, 53), true); r.Queue != 1 {
		t.Errorf("5-tuple filter: queue %d, want 1", r.Queue)
	}
	// ETQF's queue field is 3 bits: queues 8..15 are out of its reach; and
	// the 82576 has no flex filters that steer.
	c.Table("RxCEtherTypeFilter").Entries = []prg.Entry{{Match: []prg.FieldMatch{{Field: "eth.type", Value: 0x0800}}, Action: "RxQueue9"}}
	if _, err := prg.NewInterp(m, c); err == nil {
		t.Error("an EtherType filter steering to queue 9 was accepted")
	}
	if m.Space("RxCFlexFilter") != nil {
		t.Error("the 82576 model has a steering flex filter table")
	}
	tg := model(t, "tigon")
	in = interp(t, tg, prg.NewConfig())
	if r := in.Run(udp(us, 1, 53), true); r.Queue != 0 {
		t.Errorf("tigon: queue %d", r.Queue)
	}
}

// TestRejected: configurations beyond a capacity, or breaking a rule of the
// table, are rejected with the table's name and its limit.
func TestRejected(t *testing.T) {
	m := model(t, "82599")
	many := func(n int) []prg.Entry {
		var out []prg.Entry
		for i := 0; i < n; i++ {
			out = append(out, prg.Entry{Match: m5(packet.ProtoUDP, nil, uint16(1000+i)), Priority: 1, Action: "RxQueue1"})
		}
		return out
	}
	cases := []struct {
		name string
		set  func(c *prg.Config)
		want string
	}{
		{"5-tuple capacity", func(c *prg.Config) { c.Table("RxC5TupleFilter").Entries = many(129) },
			"RxC5TupleFilter: table holds at most 128 entries; the configuration has 129"},
		{"flow director global mask", func(c *prg.Config) {
			c.Table("RxCFDir").Entries = []prg.Entry{
				{Match: m5(packet.ProtoUDP, us, 53), Action: "RxQueue1"},
				{Match: m5(packet.ProtoUDP, nil, 54), Action: "RxQueue1"},
			}
		}, "RxCFDir: entry 1 masks ip.dst with 0x0, entry 0 with 0xffffffff: every entry of this table must use one mask set"},
		{"5-tuple fields are compared whole", func(c *prg.Config) {
			c.Table("RxC5TupleFilter").Entries = []prg.Entry{{Match: []prg.FieldMatch{{Field: "ip.dst", Value: 0x0a000000, Mask: 0xff000000}}, Priority: 1, Action: "RxQueue1"}}
		}, "RxC5TupleFilter: entry 0 masks ip.dst, which this table matches only exactly"},
		{"priority range", func(c *prg.Config) {
			c.Table("RxC5TupleFilter").Entries = []prg.Entry{{Match: m5(packet.ProtoUDP, nil, 53), Priority: 9, Action: "RxQueue1"}}
		}, "RxC5TupleFilter: entry 0 has priority 9 outside 1..7"},
		{"5-tuple cannot drop", func(c *prg.Config) {
			c.Table("RxC5TupleFilter").Entries = []prg.Entry{{Match: m5(packet.ProtoUDP, nil, 53), Priority: 1, Drop: true}}
		}, "RxC5TupleFilter: entry 0 drops, but this table's entries can only steer"},
		{"unknown field", func(c *prg.Config) {
			c.Table("RxCEtherTypeFilter").Entries = []prg.Entry{{Match: m5(0, nil, 53), Action: "RxQueue1"}}
		}, "RxCEtherTypeFilter: entry 0 matches l4.dport; the table matches only [eth.type]"},
		{"RSS bucket aimed at a queue RSS cannot reach", func(c *prg.Config) {
			ind := make([]string, 128)
			for i := range ind {
				ind[i] = m.Space("RxCRSS").Actions[i%16]
			}
			ind[127] = "RxQueue100"
			c.Values["RxCRSS"] = &prg.Value{Kind: prg.Hash, Indirection: ind}
		}, "RxCRSS: bucket target \"RxQueue100\" is not a successor of port queues"},
		{"steering to a queue that is not a successor", func(c *prg.Config) {
			c.Table("RxCSynFilter").Entries = []prg.Entry{{Action: "RxCRSS"}}
		}, "RxCSynFilter: entry 0 steers to \"RxCRSS\", which is not a successor of port queues"},
	}
	for _, tc := range cases {
		c := prg.NewConfig()
		tc.set(c)
		errs := m.Validate(c)
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		if len(errs) == 0 || !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, msgs, tc.want)
		}
		if _, err := m.Apply(c); err == nil {
			t.Errorf("%s: Apply accepted an invalid configuration", tc.name)
		}
	}
}

// TestUnicornConfigFunctions: a model in the original Unicorn syntax, using
// Dragonet's config5tuple and configFDir, configures with no extra code.
func TestUnicornConfigFunctions(t *testing.T) {
	src := `graph e10k {
    cluster Rx {
        boolean ValidCRC {
            port true[C5TupleFilter]
            port false[]
            predicate true "frame.crc_ok"
        }
        config C5TupleFilter {
            type { (sip:   <UInt 32>,
                    dip:   <UInt 32>,
                    proto: <Enum (TCP,UDP,SCP,OTHER)>,
                    sport: <UInt 16>,
                    dport: <UInt 16>,
                    prio:  Int 1 7,
                    queue: UInt 2) } <,128>
            function config5tuple
            port queues[Q0Valid Q1Valid Q2Valid Q3Valid]
            port default[CFDirFilter] }
        config CFDirFilter {
            type { (sip: UInt 32, dip: UInt 32, proto: Enum (TCP,UDP,SCP,OTHER),
                    sport: UInt 16, dport: UInt 16, queue: UInt 2) }
            function configFDir
            port queues[Q0Valid Q1Valid Q2Valid Q3Valid]
            port default[Q0Valid] }
        or Q0Valid { port true[Queue0] port false[] }
        or Q1Valid { port true[Queue1] port false[] }
        or Q2Valid { port true[Queue2] port false[] }
        or Q3Valid { port true[Queue3] port false[] }
        node Queue0 { attr "source" port out[] }
        node Queue1 { attr "source" port out[] }
        node Queue2 { attr "source" port out[] }
        node Queue3 { attr "source" port out[] }
    }
}`
	m, diags := prg.Load("e10k.unicorn", []byte(src))
	if m == nil {
		t.Fatal(diags)
	}
	five := m.Space("RxC5TupleFilter")
	if five.Kind != prg.Table || five.Capacity != 128 || five.PrioLo != 1 || five.PrioHi != 7 || len(five.Wildcard) != 5 {
		t.Fatalf("config5tuple space: %+v", five)
	}
	if fd := m.Space("RxCFDirFilter"); fd.Kind != prg.Table || !fd.GlobalMask || len(fd.Wildcard) != 0 {
		t.Fatalf("configFDir space: %+v", fd)
	}
	c := prg.NewConfig()
	c.Table("RxC5TupleFilter").Entries = []prg.Entry{{Match: m5(packet.ProtoUDP, nil, 53), Priority: 2, Action: "RxQ2Valid"}}
	full := []prg.FieldMatch{{Field: "ip.proto", Value: 6}, {Field: "ip.src", Value: ipv(peer)}, {Field: "ip.dst", Value: ipv(us)},
		{Field: "l4.sport", Value: 1000}, {Field: "l4.dport", Value: 80}}
	c.Table("RxCFDirFilter").Entries = []prg.Entry{{Match: full, Action: "RxQ3Valid"}}
	in := interp(t, m, c)
	// The queues sit behind OR gates, as in Dragonet's models.
	for _, tc := range []struct {
		frame []byte
		queue int
	}{{udp(us, 7, 53), 2}, {tcp(us, 1000, 80, 0x10), 3}, {tcp(us, 1001, 80, 0x10), 0}} {
		if r := in.Run(tc.frame, true); r.Queue != tc.queue {
			t.Errorf("queue %d, want %d", r.Queue, tc.queue)
		}
	}
}

// TestRSSKeyLength: a key too short for Toeplitz over an IPv4 input is a
// diagnostic, not a panic in embed.
func TestRSSKeyLength(t *testing.T) {
	src := `graph g {
    config CRSS {
        hash {
            fields [ip.src ip.dst l4.sport l4.dport]
            buckets 4
            key "6d5a"
        }
        port queues[Q0 Q1]
        port default[Q0]
    }
    node Q0 { attr "source" port out[] }
    node Q1 { attr "source" port out[] }
}`
	m, diags := prg.Load("k.prg", []byte(src))
	if m != nil || !strings.Contains(diags.Error(), "an RSS key is 16..256 bytes") {
		t.Errorf("short key: %v", diags)
	}
}

// TestTaskTables: a task's tables are read from the model (the Tigon's
// firmware demultiplexer serves its steering table), and a task naming a
// node that is no table is an error at its declaration.
func TestTaskTables(t *testing.T) {
	m := model(t, "tigon")
	if got := m.TaskTables(); len(got) != 1 || got[0] != "RxFirmwareSteer" {
		t.Errorf("tigon's task tables: %v, want [RxFirmwareSteer]", got)
	}
	file, src, err := nics.Resolve("tigon")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "tables [RxFirmwareSteer]", "tables [RxFirmware RxNoSuch]", 1)
	_, diags := prg.Load(file, []byte(bad))
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, d.String())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{`E404`, `task FirmwareDemux serves "RxFirmware", which is not a table of the model`, `serves "RxNoSuch"`} {
		if !strings.Contains(all, want) {
			t.Errorf("diagnostics %q lack %q", all, want)
		}
	}
}

// TestEnumFeature: an enum's feature is read from the model, and an
// unknown one is an error.
func TestEnumFeature(t *testing.T) {
	m := model(t, "82599")
	for node, want := range map[string]string{"RxCsumOffload": prg.FeatureRxChecksum, "TxCsumInsert": prg.FeatureTxChecksum} {
		if got := m.Space(node).Feature; got != want {
			t.Errorf("%s: feature %q, want %q", node, got, want)
		}
	}
	file, src, err := nics.Resolve("82599")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "feature rx_checksum", "feature rx_sums", 1)
	if _, diags := prg.Load(file, []byte(bad)); !strings.Contains(diags.Error(), `features are rx_checksum, tx_checksum and openmx_hash, not "rx_sums"`) {
		t.Errorf("an unknown feature: %v", diags)
	}
}
