package embed

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/lpg"
)

// churnPool is a stack of n endpoints a churn draws from: UDP and TCP
// connected flows and UDP listeners, on distinct ports, with rates that
// differ (seeded), some of them gold; cores 0..cores-1.
func churnPool(t testing.TB, n, cores int, seed int64) *lpg.Stack {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	var b strings.Builder
	fmt.Fprintf(&b, "stack churn {\n    interface eth0 { mac 00:1b:21:00:00:09 ip 10.0.0.1/16 }\n    cores 0..%d\n", cores-1)
	for i := 0; i < n; i++ {
		rate := fmt.Sprintf("rate %dkpps", 1+r.Intn(20))
		class := ""
		if r.Intn(10) == 0 {
			class = " class gold"
		}
		switch r.Intn(3) {
		case 0:
			fmt.Fprintf(&b, "    endpoint u%d udp listen 10.0.0.1:%d { %s%s }\n", i, 10000+i, rate, class)
		case 1:
			fmt.Fprintf(&b, "    endpoint f%d udp flow 10.0.0.1:%d -> 10.0.%d.%d:%d { %s%s }\n", i, 10000+i, 1+i/200, 1+i%200, 20000+i, rate, class)
		default:
			fmt.Fprintf(&b, "    endpoint t%d tcp flow 10.0.0.1:%d -> 10.0.%d.%d:%d { %s%s }\n", i, 10000+i, 1+i/200, 1+i%200, 30000+i, rate, class)
		}
	}
	b.WriteString("    service arp\n}\n")
	st, diags := lpg.LoadStack("churn.lpg", []byte(b.String()))
	if st == nil {
		t.Fatal(diags)
	}
	return st
}

// withEndpoints is st with the endpoints eps.
func withEndpoints(st *lpg.Stack, eps []*lpg.Endpoint) *lpg.Stack {
	c := *st
	c.Endpoints = slices.Clone(eps)
	return &c
}

func churnInput(t testing.TB, nic string, st *lpg.Stack, cost string, strategy Strategy) *Input {
	t.Helper()
	fn, err := costmodel.ByName(cost)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := NewInput(nic, loadModel(t, nic), st, nil, Options{Cost: fn, Strategy: strategy, Target: TargetSilicon})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// churnStep is one change of a recorded churn: an endpoint of the pool
// added, or one of the live ones removed.
type churnStep struct {
	add  *lpg.Endpoint
	drop string
}

// churn records steps changes (seeded): from the first start endpoints
// of the pool, each step removes a live endpoint (at random) or adds one
// of the pool's others, keeping between lo and hi endpoints live.
func churn(pool *lpg.Stack, start, steps, lo, hi int, seed int64) []churnStep {
	r := rand.New(rand.NewSource(seed))
	live := slices.Clone(pool.Endpoints[:start])
	idle := slices.Clone(pool.Endpoints[start:])
	var out []churnStep
	for len(out) < steps {
		if len(live) > lo && (len(live) >= hi || len(idle) == 0 || r.Intn(2) == 0) {
			k := r.Intn(len(live))
			out = append(out, churnStep{drop: live[k].Name})
			idle = append(idle, live[k])
			live = slices.Delete(live, k, k+1)
			continue
		}
		k := r.Intn(len(idle))
		out = append(out, churnStep{add: idle[k]})
		live = append(live, idle[k])
		idle = slices.Delete(idle, k, k+1)
	}
	return out
}

func (c churnStep) apply(ss *Session) (*Delta, error) {
	if c.add != nil {
		return ss.Add(c.add)
	}
	return ss.Remove(c.drop)
}

// TestSessionChurnAgainstDragonet replays a recorded churn of 1,000
// adds and removes on an 82599 (eight queues, balance) through a Session,
// through the port of Dragonet's incremental search, and through a full
// re-plan (the default strategy) of the same endpoints. After every
// change the Session's plan may be costlier than the full re-plan by at
// most what Dragonet's incremental search is (its cost never above
// Dragonet's), the session's evaluator agrees with a fresh problem's,
// and at the end the Session's plan embeds and passes the self-check.
func TestSessionChurnAgainstDragonet(t *testing.T) {
	steps := 1000
	if testing.Short() {
		steps = 200
	}
	const nic, cost = "82599", "balance"
	pool := churnPool(t, 160, 8, 1)
	start := 40
	seq := churn(pool, start, steps, 20, 70, 2)
	first := withEndpoints(pool, pool.Endpoints[:start])
	r, err := Run(churnInput(t, nic, first, cost, StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	dg, err := NewDragonetSession(churnInput(t, nic, first, cost, StrategyDragonetGreedy))
	if err != nil {
		t.Fatal(err)
	}
	var worse, gapS, gapD float64
	for k, c := range seq {
		if _, err := c.apply(ss); err != nil {
			t.Fatalf("step %d: session: %v", k, err)
		}
		if _, err := c.apply(dg); err != nil {
			t.Fatalf("step %d: dragonet: %v", k, err)
		}
		if got, want := names(ss.Stack()), names(dg.Stack()); !slices.Equal(got, want) {
			t.Fatalf("step %d: the sessions serve %v and %v", k, got, want)
		}
		full, err := SearchCost(churnInput(t, nic, ss.Stack(), cost, StrategyDefault))
		if err != nil {
			t.Fatalf("step %d: full re-plan: %v", k, err)
		}
		cs, cd := ss.Cost(), dg.Cost()
		if cs.Kind != costmodel.Value || cd.Kind != costmodel.Value || full.Kind != costmodel.Value {
			t.Fatalf("step %d: costs %v, %v, %v", k, cs, cd, full)
		}
		if cs.V-full.V > cd.V-full.V+1e-6*max(1, full.V) {
			t.Errorf("step %d (%d endpoints): the session's plan costs %v, %v above a full re-plan's %v; Dragonet's incremental search's %v", k, ss.Len(), cs, cs.V-full.V, full, cd)
		}
		gapS += cs.V - full.V
		gapD += cd.V - full.V
		if full.Less(cs) {
			worse++
		}
		if k%97 == 0 {
			checkSessionEvaluator(t, ss, k)
		}
	}
	t.Logf("%d changes: mean gap to a full re-plan: session %.1f, Dragonet's incremental %.1f; the session above a full re-plan %d times", len(seq), gapS/float64(len(seq)), gapD/float64(len(seq)), int(worse))
	checkSessionEvaluator(t, ss, len(seq))
	res, err := ss.Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := res.SelfCheck(); err != nil {
		t.Fatal(err)
	}
	if errs := res.Model().Validate(res.Embedding.Config); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := names(res.Stack()); !slices.Equal(got, names(ss.Stack())) {
		t.Fatalf("the result embeds %v, the session serves %v", got, names(ss.Stack()))
	}
}

func names(st *lpg.Stack) []string {
	var out []string
	for _, e := range st.Endpoints {
		out = append(out, e.Name)
	}
	return out
}

// checkSessionEvaluator compares the session's incremental cost with its
// evaluator checked from scratch, and with a fresh problem of the same
// endpoints given the same choices.
func checkSessionEvaluator(t *testing.T, ss *Session, step int) {
	t.Helper()
	if err := ss.s.ev.Check(); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	p, err := newProblem(churnInput(t, ss.p.in.NIC, ss.Stack(), ss.p.in.Cost.Name(), StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	mode := slices.IndexFunc(p.modes, func(m rssMode) bool { return slices.Equal(m.queues, ss.p.modes[ss.s.mode].queues) })
	if mode < 0 {
		t.Fatalf("step %d: no RSS mode %s", step, ss.p.modes[ss.s.mode].name)
	}
	s := p.newState(mode)
	for i, c := range ss.s.choice {
		if c.t != nil {
			s.set(i, choice{p.tables[c.t.idx], c.q})
		}
	}
	if got, want := ss.s.ev.Cost(), s.ev.Cost(); !got.Equal(want) {
		t.Fatalf("step %d: the session's cost %v, a fresh problem's %v", step, got, want)
	}
}
