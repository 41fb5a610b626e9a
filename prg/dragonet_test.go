package prg_test

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

// TestDragonetModelsUnchanged: the shipped Dragonet models are the files
// of BarrelfishOS/dragonet at commit e1a7c78 (nics/dragonet/README.md),
// byte for byte: dragonc reads them as they are.
func TestDragonetModelsUnchanged(t *testing.T) {
	for name, want := range map[string]string{
		// sha256sum of Dragonet/Graphs/E10k/prgE10kImpl.unicorn and
		// Dragonet/Graphs/SF/prgSFImpl.unicorn at that commit.
		"dragonet-e10k": "974fa17f948a3137ba34ca466d06659807989861f7514cd256f8a19a7de6dd1d",
		"dragonet-sf":   "b89fcdcf4ce5cca39fc371e500aa7cf511597db052c8e889eafdf2d93e5d4f71",
	} {
		src, ok := nics.Source(name)
		if !ok {
			t.Fatalf("%s is not built in", name)
		}
		sum := sha256.Sum256(src)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s: sha256 %s, want Dragonet's %s", name, got, want)
		}
	}
}

// TestDragonetConventions reads Dragonet's E10k model with Dragonet's
// conventions: queues by the RxQueue label prefix, the first node (marked
// "source") a check and not a queue, configuration functions by label,
// filter actions through the OR gates, "software" as a drawing hint except
// on dead ends, which report into the descriptor.
func TestDragonetConventions(t *testing.T) {
	m := dragonetModel(t, "dragonet-e10k")
	if !m.Dragonet {
		t.Fatal("the model is not read with Dragonet's conventions")
	}
	var ids []int
	for _, q := range m.Queues {
		ids = append(ids, q.ID)
		if want := "RxQueue" + strconv.Itoa(q.ID); q.Name != want {
			t.Errorf("queue %d is node %s, want %s", q.ID, q.Name, want)
		}
	}
	if !slices.Equal(ids, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("queues %v, want 0..10 (Queue0 ... Queue10 in cluster Rx)", ids)
	}
	node := func(name string) int {
		n, ok := m.G.Lookup(name)
		if !ok {
			t.Fatalf("no node %s", name)
		}
		return n.ID
	}
	if m.IsQueue(node("RxL2EtherClassified")) {
		t.Error(`RxL2EtherClassified (attr "source") is taken for a queue`)
	}
	for name, want := range map[string]bool{"RxL3IPv4ValidChecksum": true, "RxL3IPv4Classified": true, "RxQueue3": false, "RxL2EtherValidCRC": false} {
		if got := m.Reported(node(name)); got != want {
			t.Errorf("Reported(%s) = %v, want %v", name, got, want)
		}
	}
	// Graphs/E10k.hs: ftCount = 128 five-tuple filters with priorities
	// 1..7 and wildcards; fdirCount = 2048 flow director filters, exact,
	// one mask.
	five, fdir := m.Space("RxC5TupleFilter"), m.Space("RxCFDirFilter")
	if five == nil || five.Function != "config5tuple" || five.Capacity != 128 || five.PrioLo != 1 || five.PrioHi != 7 || len(five.Wildcard) != 5 {
		t.Fatalf("RxC5TupleFilter: %+v", five)
	}
	if fdir == nil || fdir.Function != "configFDir" || fdir.Capacity != 2048 || !fdir.GlobalMask || len(fdir.Wildcard) != 0 {
		t.Fatalf("RxCFDirFilter: %+v", fdir)
	}
	for q := 0; q <= 10; q++ {
		if a, ok := five.ActionFor(q); !ok || a != "RxQ"+strconv.Itoa(q)+"Valid" {
			t.Errorf("the action to queue %d is %q, want RxQ%dValid", q, a, q)
		}
		if got := m.QueueIndex("RxQ" + strconv.Itoa(q) + "Valid"); got != q {
			t.Errorf("QueueIndex(RxQ%dValid) = %d", q, got)
		}
	}

	// Frames: a five-tuple entry and a flow director entry steer through
	// their OR gates; the rest fall to ToDefaultQueue and queue 0; a bad
	// CRC is dropped by the MAC; the IPv4 checksum verdict is reported.
	c := prg.NewConfig()
	c.Table("RxC5TupleFilter").Entries = []prg.Entry{{Match: m5(packet.ProtoUDP, nil, 53), Priority: 1, Action: "RxQ2Valid"}}
	full := []prg.FieldMatch{{Field: "ip.proto", Value: 6}, {Field: "ip.src", Value: ipv(peer)}, {Field: "ip.dst", Value: ipv(us)},
		{Field: "l4.sport", Value: 1000}, {Field: "l4.dport", Value: 80}}
	c.Table("RxCFDirFilter").Entries = []prg.Entry{{Match: full, Action: "RxQ7Valid"}}
	in := interp(t, m, c)
	for _, tc := range []struct {
		name  string
		frame []byte
		crcOK bool
		queue int
	}{
		{"udp 53", udp(us, 7, 53), true, 2},
		{"tcp flow", tcp(us, 1000, 80, 0x10), true, 7},
		{"other tcp", tcp(us, 1001, 80, 0x10), true, 0},
		{"arp", packet.MustBuild(packet.Spec{EtherType: packet.EtherTypeARP, ARPOp: 1, ARPTarget: us}), true, 0},
		{"bad crc", udp(us, 7, 53), false, -1},
	} {
		r := in.Run(tc.frame, tc.crcOK)
		if r.Queue != tc.queue {
			t.Errorf("%s: queue %d, want %d (dropped at %s.%s)", tc.name, r.Queue, tc.queue, r.DropNode, r.DropPort)
		}
		if tc.name == "bad crc" && r.DropNode != "RxL2EtherValidCRC" {
			t.Errorf("bad crc: dropped at %s, want RxL2EtherValidCRC", r.DropNode)
		}
	}
	bad := packet.MustBuild(packet.Spec{Src: peer, Dst: us, Proto: packet.ProtoUDP, SrcPort: 7, DstPort: 53, BadIPChecksum: true})
	r := in.Run(bad, true)
	if !slices.Contains(r.Reported(), [2]string{"RxL3IPv4ValidChecksum", "false"}) {
		t.Errorf("a bad IPv4 checksum is not reported: %v", r.Reported())
	}
}

// TestDragonetConfigRxQueues: configRxQueues as Dragonet's own test
// "multiple queues (prg1,lpg1)" in Dragonet/tests/Embedding.hs expects
// it: two queues behind OR gates, the default port feeding queue 0 only.
// A node after the C-node is copied for queue 1 (duplicateDFS).
func TestDragonetConfigRxQueues(t *testing.T) {
	src := `graph prg1 {
    node Foo {
        port queues[RxQueues]
        port default[RxQueues]
        predicate queues "udp.dport == 53"
        predicate default "udp.dport != 53"
    }
    config RxQueues {
        attr "software"
        spawn poll RxQueues
        port out[After] }
    node After { port out[] }
    resources Device { rx_queues 2 }
}`
	m, diags := prg.Load("prg1.unicorn", []byte(src))
	if m == nil {
		t.Fatal(diags)
	}
	// Dragonet's expected graph emb1, without the LPG part.
	want := []string{
		"Foo <- [] -> [RxQ0Valid RxQ1Valid]",
		"RxQ0Valid <- [Foo] -> [RxQueue0]",
		"RxQ1Valid <- [Foo] -> [RxQueue1]",
		"RxQueue0 <- [RxQ0Valid] -> [After]",
		"RxQueue1 <- [RxQ1Valid] -> [After__RxQ1]",
		"After <- [RxQueue0] -> []",
		"After__RxQ1 <- [RxQueue1] -> []",
	}
	got := nodeSet(m.G)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("graph:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	foo, _ := m.G.Lookup("Foo")
	if d := foo.Port("default"); len(d.Succ) != 1 || m.G.Nodes[d.Succ[0]].Name != "RxQ0Valid" {
		t.Errorf("the default port leads to %v, want RxQ0Valid alone", d.Succ)
	}
	if len(m.Queues) != 2 || m.QueueIndex("RxQ1Valid") != 1 {
		t.Errorf("queues %+v", m.Queues)
	}
	if len(diags) != 0 {
		t.Errorf("diagnostics: %v", diags)
	}
	in := interp(t, m, prg.NewConfig())
	if r := in.Run(udp(us, 7, 99), true); r.Queue != 0 {
		t.Errorf("a default frame reached queue %d, want 0", r.Queue)
	}
}

// TestDragonetOpaquePorts: a predicate-less port of a node whose label
// dragonc does not know means pred(NODE,PORT), as in Dragonet; the model
// says so in a warning and no frame takes the port.
func TestDragonetOpaquePorts(t *testing.T) {
	src := `graph g {
    node Mystery { port a[RxQueue0] port b[RxQueue1] }
    node RxQueue0 { port out[] }
    node RxQueue1 { port out[] }
}`
	m, diags := prg.Load("g.unicorn", []byte(src))
	if m == nil {
		t.Fatal(diags)
	}
	if len(diags) != 2 || diags[0].Code != "W403" || !strings.Contains(diags[0].Summary, "pred(Mystery,a)") {
		t.Fatalf("diagnostics %v, want two W403 naming pred(Mystery,a) and pred(Mystery,b)", diags)
	}
	if r := interp(t, m, prg.NewConfig()).Run(udp(us, 7, 53), true); r.Queue != -1 || r.DropNode != "Mystery" {
		t.Errorf("queue %d, dropped at %q; want a drop at Mystery", r.Queue, r.DropNode)
	}
}

func dragonetModel(t *testing.T, name string) *prg.Model {
	t.Helper()
	m, diags := loadModel(t, name)
	for _, d := range diags {
		// Dragonet's file declares TxQueue3 twice (W201); nothing else.
		if d.Code != "W201" || !strings.Contains(d.Summary, "TxQueue3") {
			t.Errorf("%s: %s", name, d.Summary)
		}
	}
	return m
}

// nodeSet renders every node with its predecessors and successors, as
// Dragonet's tests compare graphs (tests/Embedding.hs nodeSet).
func nodeSet(g *graph.Graph) []string {
	preds := g.Preds()
	var out []string
	for _, n := range g.Nodes {
		var ps, ss []string
		for _, p := range preds[n.ID] {
			ps = append(ps, g.Nodes[p].Name)
		}
		for _, p := range n.Ports {
			for _, s := range p.Succ {
				if name := g.Nodes[s].Name; !slices.Contains(ss, name) {
					ss = append(ss, name)
				}
			}
		}
		sort.Strings(ps)
		sort.Strings(ss)
		out = append(out, n.Name+" <- ["+strings.Join(ps, " ")+"] -> ["+strings.Join(ss, " ")+"]")
	}
	sort.Strings(out)
	return out
}

// FuzzModel: any source either fails to load with diagnostics or gives a
// model whose empty configuration runs a frame without a panic (Dragonet's
// conventions rewrite the graph first: queue creation, labels, atoms).
func FuzzModel(f *testing.F) {
	for _, name := range nics.Names() {
		src, _ := nics.Source(name)
		f.Add(src)
	}
	f.Add([]byte(`graph prg1 {
    node Foo { port queues[RxQueues] port default[RxQueues] }
    config RxQueues { attr "software" spawn poll RxQueues port out[After] }
    node After { port out[After2] port other[] }
    node After2 { port out[] }
}`))
	f.Add([]byte(`graph tap { node RxQueue { attr "source" port out[] } node TxQueue { attr "sink" } }`))
	frame := udp(us, 7, 53)
	f.Fuzz(func(t *testing.T, src []byte) {
		m, diags := prg.Load("fuzz.unicorn", src)
		if m == nil {
			if !diags.HasErrors() {
				t.Fatal("no model and no error")
			}
			return
		}
		in, err := prg.NewInterp(m, prg.NewConfig())
		if err != nil {
			return // e.g. a cycle: reported when the model is used
		}
		r := in.Run(frame, true)
		if r.Queue >= 0 && m.QueueIndex(m.G.Nodes[m.Queues[0].Node].Name) < 0 {
			t.Fatal("a queue node that QueueIndex does not know")
		}
	})
}
