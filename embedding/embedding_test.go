package embedding_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/embedding"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/sim"
)

// An unconfigured 82599 sends every frame to queue 0: every endpoint
// reaches queue 0 alone, by default; the NIC's CRC check is done in
// hardware, and the UDP demultiplexer, which no table decides, runs in
// software.
func TestUnconfigured(t *testing.T) {
	_, stacks := embedtest.Stacks(t, "../examples/web_and_dns.lpg")
	st := stacks[0]
	g, err := lpg.Derive(st)
	if err != nil {
		t.Fatal(err)
	}
	em, err := embedding.New(embedtest.Model(t, "82599"), prg.NewConfig(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Endpoints {
		if q := em.Reach[e.Name]; !slices.Equal(q, []int{0}) || em.Steer[e.Name] != "default" {
			t.Errorf("%s: queues %v, steering %q; want [0] by default", e.Name, q, em.Steer[e.Name])
		}
	}
	qe := em.Queue(0)
	if qe == nil || len(em.Queues) != 1 {
		t.Fatalf("%d queues embedded; want queue 0 alone", len(em.Queues))
	}
	if s := qe.StatusOf("RxL2EtherValidCRC"); s != embedding.Hardware && s != embedding.HardwareFlag {
		t.Errorf("CRC check: %v", s)
	}
	if s := qe.StatusOf("RxL4UDPDemux"); s != embedding.Software {
		t.Errorf("UDP demultiplexer: %v", s)
	}
	if s := qe.StatusOf("NoSuchNode"); s != embedding.Unreachable {
		t.Errorf("a node the LPG lacks: %v", s)
	}
}

// The queues the embedding says an endpoint's frames reach, worked out
// symbolically over boxes of frames, hold the queue the PRG interpreter
// puts each generated frame on, for every example and NIC whose plan
// configures tables or hashing.
func TestReachAgreesWithInterpreter(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.lpg")
	checked := 0
	for _, nic := range []string{"82576", "82599", "myri10g", "tigon"} {
		for _, ex := range examples {
			r, st := embedtest.PlanTarget(t, nic, ex, costmodel.Balance{}, "silicon")
			em := r.Embedding
			interp, err := prg.NewInterp(em.Model, em.Config)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := lpg.NewInterp(em.LPG)
			if err != nil {
				t.Fatal(err)
			}
			gen := sim.NewGen(st, 5)
			for i := 0; i < 400; i++ {
				f := gen.Next().Data
				out := ref.Run(f, true)
				if out.Kind != lpg.Deliver {
					continue
				}
				got := interp.Run(f, true)
				if got.Queue < 0 {
					t.Fatalf("%s %s: the NIC drops a frame the LPG delivers to %s at %s.%s", nic, filepath.Base(ex), out.Endpoint, got.DropNode, got.DropPort)
				}
				if !slices.Contains(em.Reach[out.Endpoint], got.Queue) {
					t.Fatalf("%s %s: a frame for %s lands on queue %d; the embedding says %v\n% x", nic, filepath.Base(ex), out.Endpoint, got.Queue, em.Reach[out.Endpoint], f)
				}
				checked++
			}
		}
	}
	if checked < 2000 {
		t.Fatalf("only %d frames checked", checked)
	}
	t.Logf("%d delivered frames on the queues the embedding says", checked)
}
