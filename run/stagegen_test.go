package run

import (
	"bytes"
	gomaps "maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/embedtest"
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
			s, err := StageOf(r.Plan, st)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Program) == 0 || len(s.DropSites) == 0 {
				t.Fatalf("nothing placed on the eBPF stage: %d nodes, %d drop sites", len(s.Program), len(s.DropSites))
			}
			m, err := newMaps(s, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			xdp, err := loadProgram(progXDP, s, m)
			if err != nil {
				t.Fatal(err)
			}
			defer xdp.Close()
			sm, err := sim.New(r.Embedding)
			if err != nil {
				t.Fatal(err)
			}
			gen := sim.NewGen(st, 7)
			ran, dropped, mismatches, answered := 0, map[string]int{}, 0, 0
			for range 15000 {
				f := gen.Next()
				if !f.CRCOK || len(f.Data) < 14 {
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
				ro := &ebpf.RunOptions{Data: f.Data, DataOut: make([]byte, len(f.Data)+64)}
				act, err := xdp.Run(ro)
				if err != nil {
					t.Fatalf("%s: test run: %v", f.Label, err)
				}
				ran++
				arp := res.Ref == lpg.Outcome{Kind: lpg.Reply, Reply: "arp"}
				switch {
				case act == 3 && !arp:
					t.Errorf("%s: the XDP stage answers it; the LPG: %s\n% x", f.Label, res.Ref, f.Data)
					mismatches++
				case act == 3:
					// The answer the data plane's transmit nodes build.
					tx := &dataplane.Tx{Req: f.Data, Buf: make([]byte, 1514), MAC: s.MAC}
					if !dataplane.TxL3ARPInitiateResponse(tx) || !dataplane.TxL2EtherFillHeader(tx) {
						t.Fatalf("%s: the data plane does not answer it", f.Label)
					}
					if want := tx.Buf[:tx.N]; !bytes.Equal(ro.DataOut, want) {
						t.Errorf("%s: the XDP stage answers\n% x\nthe data plane\n% x", f.Label, ro.DataOut, want)
						mismatches++
					}
					answered++
				case arp && len(s.Answers) > 0:
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
			if len(dropped) == 0 || st.ARP && answered == 0 {
				t.Errorf("the stage dropped none of %d frames, or answered no ARP request (%d)", ran, answered)
			}
			t.Logf("%d frames, %d drop sites, dropped %v, %d ARP requests answered", ran, len(s.DropSites), dropped, answered)
			// What run shows: the same counts, by outcome.
			want := map[string]uint64{}
			for site, n := range dropped {
				want["drop "+site] = uint64(n)
			}
			if answered > 0 {
				want["reply arp"] = uint64(answered)
			}
			got := map[string]uint64{}
			for _, o := range stageCounts(s, m.drops) {
				got[o.Name] = o.Count
			}
			if !gomaps.Equal(got, want) {
				t.Errorf("the stage's counters read %v; the test counted %v", got, want)
			}
		})
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
