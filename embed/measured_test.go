package embed_test

import (
	"math"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed/embedtest"
)

// flowsStack has five connected flows on three non-default queues, the
// first declared ten times busier than the others.
const flowsStack = `stack flows {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..3
    endpoint e0 udp flow 10.9.0.1:7000 -> 10.9.0.2:5000 { app "echo" rate 100kpps }
    endpoint e1 udp flow 10.9.0.1:7001 -> 10.9.0.2:5001 { app "echo" rate 10kpps }
    endpoint e2 udp flow 10.9.0.1:7002 -> 10.9.0.2:5002 { app "echo" rate 10kpps }
    endpoint e3 udp flow 10.9.0.1:7003 -> 10.9.0.2:5003 { app "echo" rate 10kpps }
    endpoint e4 udp flow 10.9.0.1:7004 -> 10.9.0.2:5004 { app "echo" rate 10kpps }
}
`

// TestPredictedLoad: the prediction is the plan's: each endpoint on the
// queues plan.json names, each queue's load the sum of the declared rates
// there, the shares adding up to 1.
func TestPredictedLoad(t *testing.T) {
	r, _ := embedtest.Plan(t, "linux-xdp", "flows.lpg", []byte(flowsStack), costmodel.Balance{})
	pl := r.PredictedLoad()
	if !pl.ByRate || len(pl.Endpoints) != 5 {
		t.Fatalf("prediction %+v: want 5 endpoints weighed by rate", pl)
	}
	load := map[int]float64{}
	for i, e := range pl.Endpoints {
		pe := r.Plan.Endpoints[i]
		if e.Name != pe.Name || len(e.Shares) != len(pe.Queues) {
			t.Fatalf("endpoint %d: predicted %+v, plan %+v", i, e, pe)
		}
		for j, s := range e.Shares {
			if s.Queue != pe.Queues[j] {
				t.Errorf("%s: predicted on queue %d, the plan says %v", e.Name, s.Queue, pe.Queues)
			}
			load[s.Queue] += e.Rate * s.Frac
		}
	}
	var sum float64
	for _, q := range pl.Queues {
		if math.Abs(q.Load-load[q.Queue]) > 1e-6 {
			t.Errorf("queue %d: load %v, the endpoints add up to %v", q.Queue, q.Load, load[q.Queue])
		}
		sum += q.Share
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares add up to %v", sum)
	}
}

// TestPlanAtRates: planned again with e0 as quiet as the others and e4
// ten times busier, the plan gives e4 a queue of its own; at those rates
// the old plan costs more than the new one, and at its own rates exactly
// its cost. The input's stack keeps its rates.
func TestPlanAtRates(t *testing.T) {
	r, st := embedtest.Plan(t, "linux-xdp", "flows.lpg", []byte(flowsStack), costmodel.Balance{})
	rates := map[string]float64{"e0": 10e3, "e4": 100e3}
	n, err := r.PlanAtRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range n.Plan.Queues {
		for _, e := range q.Endpoints {
			if e == "e4" && len(q.Endpoints) != 1 {
				t.Errorf("e4 at 100 kpps shares queue %d with %v", q.ID, q.Endpoints)
			}
		}
	}
	if st.Endpoints[4].Rate != 10e3 || r.Stack().Endpoints[4].Rate != 10e3 {
		t.Error("PlanAtRates changed the original stack's rates")
	}
	old, err := r.CostAtRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	if !n.Cost.Less(old) {
		t.Errorf("at the new rates the old plan costs %v, the new one %v: want it cheaper", old, n.Cost)
	}
	same, err := r.CostAtRates(nil)
	if err != nil || !same.Equal(r.Cost) {
		t.Errorf("at its own rates the plan costs %v (%v), want %v", same, err, r.Cost)
	}
	if _, err := r.CostAtRates(map[string]float64{"nope": 1}); err == nil {
		t.Error("a rate for an endpoint the stack lacks was taken")
	}
	if _, err := r.PlanAtRates(map[string]float64{"e1": -1}); err == nil {
		t.Error("a negative rate was taken")
	}
}
