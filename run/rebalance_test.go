package run

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed/embedtest"
)

// loadOf is a load over one second ending at t, each endpoint at its
// rate (frames a second), the others at 200.
func loadOf(t time.Time, rates map[string]float64) *Load {
	l := &Load{At: t, Seconds: 1, Basis: "rate"}
	for _, name := range []string{"e0", "e1", "e2", "e3", "e4"} {
		v, ok := rates[name]
		if !ok {
			v = 200
		}
		l.Endpoints = append(l.Endpoints, EndpointLoad{Endpoint: name, Frames: uint64(v), Measured: v})
	}
	return l
}

// queuesOf is each endpoint's queues in the rebalancer's current plan.
func queuesOf(b *Rebalancer) map[string]string {
	out := map[string]string{}
	for _, e := range b.Current().Plan.Endpoints {
		out[e.Name] = fmt.Sprint(e.Queues)
	}
	return out
}

// step decides on l and applies what it decides (as run would once it
// can change a served plan); it returns the decision.
func step(t *testing.T, b *Rebalancer, l *Load) Decision {
	t.Helper()
	d, err := b.Decide(l)
	if err != nil {
		t.Fatal(err)
	}
	if d.Replan {
		b.Applied(d)
	}
	return d
}

// TestRebalanceSkewOnce: the plan of evenStack shares e0's queue with
// two others; with e0 measured ten times busier, the first second with
// enough traffic re-plans (e0 gets a queue of its own, the others
// move), and the same load never re-plans again.
func TestRebalanceSkewOnce(t *testing.T) {
	r, _ := embedtest.Plan(t, Model, "even.lpg", []byte(evenStack), costmodel.Balance{})
	b := NewRebalancer(r)
	skew := map[string]float64{"e0": 2000}
	// Too little traffic decides nothing.
	if d := step(t, b, loadOf(t0, map[string]float64{"e0": 20, "e1": 2, "e2": 2, "e3": 2, "e4": 2})); d.Replan || d.Plan != nil || !strings.Contains(d.Why, "too few") {
		t.Fatalf("a quiet second: %+v", d)
	}
	replans := 0
	for s := 1; s <= 30; s++ {
		d := step(t, b, loadOf(t0.Add(time.Duration(s)*time.Second), skew))
		if d.Replan {
			replans++
			if s != 1 {
				t.Errorf("re-planned at %d s, want only at 1 s: %s", s, d.Why)
			}
			if d.Gain <= DefaultRebalanceThreshold {
				t.Errorf("re-planned for a gain of %v", d.Gain)
			}
		}
	}
	if replans != 1 {
		t.Fatalf("%d re-plans of a steady skewed load, want 1", replans)
	}
	for _, q := range b.Current().Plan.Queues {
		if slices.Contains(q.Endpoints, "e0") && len(q.Endpoints) != 1 {
			t.Errorf("e0 shares queue %d with %v", q.ID, q.Endpoints)
		}
	}
	// The gain is two thirds (a deviation of 1000 frames/s against
	// 600): a threshold above it keeps the plan, one below re-plans.
	for _, c := range []struct {
		threshold float64
		replan    bool
	}{{0.7, false}, {0.6, true}} {
		b := NewRebalancer(r)
		b.Threshold = c.threshold
		if d := step(t, b, loadOf(t0, skew)); d.Replan != c.replan {
			t.Errorf("threshold %v: re-plan %v (%s), want %v", c.threshold, d.Replan, d.Why, c.replan)
		}
	}
	// Even loads, a few percent apart, do not re-plan either.
	b = NewRebalancer(r)
	for s := 1; s <= 10; s++ {
		noisy := map[string]float64{"e0": 200 + float64(s%3)*8, "e1": 210, "e2": 190 + float64(s%2)*12, "e3": 205, "e4": 195}
		if d := step(t, b, loadOf(t0.Add(time.Duration(s)*time.Second), noisy)); d.Replan {
			t.Errorf("nearly even loads re-planned at %d s: %s", s, d.Why)
		}
	}
}

// TestRebalanceLoadMoves: a steady hot e0, then, at 30 s, the heat moves
// to e2: the first report after the move re-plans (within the 2 s the
// issue allows, reports coming every second), to a plan that costs no
// more than 1.2 times the best at the new rates, with e2 alone.
func TestRebalanceLoadMoves(t *testing.T) {
	r, _ := embedtest.Plan(t, Model, "skew.lpg", []byte(skewStack), costmodel.Balance{})
	b := NewRebalancer(r)
	var moved time.Time
	for s := 1; s <= 40; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		rates := map[string]float64{"e0": 2000}
		if s > 30 {
			rates = map[string]float64{"e2": 2000}
		}
		d := step(t, b, loadOf(now, rates))
		switch {
		case d.Replan && s <= 30:
			t.Errorf("re-planned at %d s, before the load moved (the plan was made for it): %s", s, d.Why)
		case d.Replan && moved.IsZero():
			moved = now
		case d.Replan:
			t.Errorf("re-planned again at %d s: %s", s, d.Why)
		}
	}
	if moved.IsZero() || moved.Sub(t0.Add(30*time.Second)) > 2*time.Second {
		t.Fatalf("the moved load was re-planned at %v, want within 2 s of 30 s", moved.Sub(t0))
	}
	at := map[string]float64{"e0": 200, "e1": 200, "e2": 2000, "e3": 200, "e4": 200}
	cost, err := b.Current().CostAtRates(at)
	if err != nil {
		t.Fatal(err)
	}
	best, err := r.PlanAtRates(at)
	if err != nil {
		t.Fatal(err)
	}
	if cost.V > 1.2*best.Cost.V {
		t.Errorf("after the move the plan costs %v, more than 1.2 times the best %v", cost, best.Cost)
	}
	for _, q := range b.Current().Plan.Queues {
		if slices.Contains(q.Endpoints, "e2") && len(q.Endpoints) != 1 {
			t.Errorf("e2 shares queue %d with %v", q.ID, q.Endpoints)
		}
	}
}

// TestRebalanceNoPingPong: the heat alternates between e0 and e2 every
// 2 s for a minute, from evenStack's plan. Every re-plan is worth its
// threshold, and no endpoint changes queues twice within 10 s: the
// search leaves the endpoints that moved within their hold where they
// are (embed.Session.Hold) and re-plans with the others, so it follows
// the swings without sending anything back and forth.
func TestRebalanceNoPingPong(t *testing.T) {
	r, _ := embedtest.Plan(t, Model, "even.lpg", []byte(evenStack), costmodel.Balance{})
	b := NewRebalancer(r)
	last := map[string]time.Time{}
	prev := queuesOf(b)
	replans, held, whileHeld := 0, 0, 0
	for s := 1; s <= 60; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		hot := "e0"
		if s/2%2 == 1 {
			hot = "e2"
		}
		d := step(t, b, loadOf(now, map[string]float64{hot: 2000}))
		if len(d.Held) > 0 {
			held++
			if d.Replan {
				t.Fatalf("re-planned with held moves at %d s", s)
			}
		}
		cur := queuesOf(b)
		for name, q := range cur {
			if q == prev[name] {
				continue
			}
			if !d.Replan {
				t.Fatalf("%s changed queues at %d s without a re-plan", name, s)
			}
			if l, ok := last[name]; ok && now.Sub(l) < RebalanceHold {
				t.Errorf("%s changed queues at %v and again at %v", name, l.Sub(t0), now.Sub(t0))
			}
			last[name] = now
		}
		if d.Replan {
			replans++
			for _, l := range last {
				if now.Sub(l) < RebalanceHold {
					whileHeld++ // some endpoint stayed where it was
					break
				}
			}
			if len(d.Moves) == 0 || d.Gain <= DefaultRebalanceThreshold || math.IsNaN(d.Gain) {
				t.Errorf("a re-plan at %d s with moves %v and gain %v", s, d.Moves, d.Gain)
			}
		}
		prev = cur
	}
	// Re-plans while some endpoint was held are what the hold is for.
	if replans < 2 || whileHeld == 0 {
		t.Errorf("%d re-plans, %d of them while an endpoint was held: the test did not alternate as meant", replans, whileHeld)
	}
	t.Logf("%d re-plans (%d while an endpoint was held) and %d seconds whose best plan waited for a hold, in 60 s of heat alternating every 2 s", replans, whileHeld, held)
}

// TestRebalanceGain: the gain of a re-plan, and of better kinds of cost.
func TestRebalanceGain(t *testing.T) {
	v := func(x float64) costmodel.Cost { return costmodel.Cost{Kind: costmodel.Value, V: x} }
	for _, c := range []struct {
		cost, best costmodel.Cost
		want       float64
	}{
		{v(150), v(100), 0.5},
		{v(100), v(150), -1.0 / 3},
		{v(10), v(0), math.Inf(1)},
		{v(0), v(0), 0},
		{costmodel.Cost{Kind: costmodel.Reject, V: 1}, v(1e6), math.Inf(1)},
		{v(1), costmodel.Cost{Kind: costmodel.Reject}, math.Inf(-1)},
		{costmodel.Cost{Kind: costmodel.OK}, costmodel.Cost{Kind: costmodel.OK}, 0},
	} {
		if got := gain(c.cost, c.best); got != c.want {
			t.Errorf("gain(%v, %v) = %v, want %v", c.cost, c.best, got, c.want)
		}
	}
}

// TestApplyPlanRefused: a run whose code is the program's own (ServeCode)
// cannot serve another plan, and says why.
func TestApplyPlanRefused(t *testing.T) {
	r, st := embedtest.Plan(t, Model, "skew.lpg", []byte(skewStack), costmodel.Balance{})
	var sv serving
	if err := sv.applyPlan(r, st); err == nil || !strings.Contains(err.Error(), "ServeCode") {
		t.Errorf("applyPlan: %v", err)
	}
}

// A plan a reload served is where the next decision starts from.
func TestRebalancerServed(t *testing.T) {
	r, _ := embedtest.Plan(t, Model, "skew.lpg", []byte(skewStack), costmodel.Balance{})
	r2, _ := embedtest.Plan(t, Model, "even.lpg", []byte(evenStack), costmodel.Balance{})
	b := NewRebalancer(r)
	b.Served(r2)
	if b.Current() != r2 {
		t.Errorf("the rebalancer starts from %v after a reload served %v", b.Current().Plan.Stack, r2.Plan.Stack)
	}
}
