package embed

import (
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/lpg"
)

// churnPool is a stack of n endpoints a churn draws from: UDP and TCP
// connected flows and UDP listeners, on distinct ports, with rates that
// differ (seeded), some of them gold; cores 0..cores-1.
func churnPool(t testing.TB, n, cores int, seed int64) *lpg.Stack {
	return churnPoolOf(t, n, cores, seed, false)
}

// churnPoolOf is churnPool; with shared, a UDP flow takes the port of a
// UDP listener before it when there is one, one time in two: the
// listener's packets overlap the flow's.
func churnPoolOf(t testing.TB, n, cores int, seed int64, shared bool) *lpg.Stack {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	var b strings.Builder
	fmt.Fprintf(&b, "stack churn {\n    interface eth0 { mac 00:1b:21:00:00:09 ip 10.0.0.1/16 }\n    cores 0..%d\n", cores-1)
	var listeners []int
	for i := 0; i < n; i++ {
		rate := fmt.Sprintf("rate %dkpps", 1+r.Intn(20))
		class := ""
		if r.Intn(10) == 0 {
			class = " class gold"
		}
		switch r.Intn(3) {
		case 0:
			fmt.Fprintf(&b, "    endpoint u%d udp listen 10.0.0.1:%d { %s%s }\n", i, 10000+i, rate, class)
			listeners = append(listeners, i)
		case 1:
			port := 10000 + i
			if shared && len(listeners) > 0 && r.Intn(2) == 0 {
				port = 10000 + listeners[r.Intn(len(listeners))]
			}
			fmt.Fprintf(&b, "    endpoint f%d udp flow 10.0.0.1:%d -> 10.0.%d.%d:%d { %s%s }\n", i, port, 1+i/200, 1+i%200, 20000+i, rate, class)
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

// plannedSession plans st on nic with the default strategy and starts a
// Session from the plan.
func plannedSession(t testing.TB, nic string, st *lpg.Stack, cost string) (*Session, *Result) {
	t.Helper()
	r, err := Run(churnInput(t, nic, st, cost, StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	return ss, r
}

func churnInput(t testing.TB, nic string, st *lpg.Stack, cost string, strategy Strategy) *Input {
	t.Helper()
	return stackInputOf(t, nic, st, cost, strategy, TargetSilicon)
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

// TestSessionChurnAgainstDragonet replays recorded churns of adds and
// removes on an 82599 (eight queues) under every cost function (1,000
// changes under dragonc's, 300 under Dragonet's, whose full re-plan is
// slower; a fifth of that with -short) through a Session, through the
// port of Dragonet's incremental search, and through a full re-plan (the
// default strategy) of the same endpoints: a churn of endpoints on
// ports of their own, another of other seeds (a quarter as long), and
// one where UDP flows share their listeners' ports (a quarter as long).
// After every change the Session's plan may be costlier than the full
// re-plan by at most what Dragonet's incremental search is (its cost
// never above Dragonet's), the session's evaluator agrees with a fresh
// problem's, and at the end the Session's plan embeds and passes the
// self-check.
func TestSessionChurnAgainstDragonet(t *testing.T) {
	for _, sq := range []struct {
		name        string
		pool, churn int64
		shared      bool
		part        int
	}{{"seed1", 1, 2, false, 1}, {"seed7", 7, 8, false, 4}, {"shared", 5, 6, true, 4}} {
		for _, c := range []struct {
			cost  string
			steps int
		}{{"balance", 1000}, {"priority", 1000}, {"cycles", 1000}, {"dragonet-balance", 300}, {"dragonet-priority", 300}} {
			t.Run(sq.name+"/"+c.cost, func(t *testing.T) {
				steps := c.steps / sq.part
				if testing.Short() {
					steps /= 5
				}
				pool := churnPoolOf(t, 160, 8, sq.pool, sq.shared)
				testChurnAgainstDragonet(t, c.cost, pool, churn(pool, 40, steps, 20, 70, sq.churn))
			})
		}
	}
}

func testChurnAgainstDragonet(t *testing.T, cost string, pool *lpg.Stack, seq []churnStep) {
	const nic = "82599"
	start := 40
	first := withEndpoints(pool, pool.Endpoints[:start])
	ss, _ := plannedSession(t, nic, first, cost)
	dg, err := NewDragonetSession(churnInput(t, nic, first, cost, StrategyDragonetGreedy))
	if err != nil {
		t.Fatal(err)
	}
	var worse, gapS, gapD, sumFull float64
	var rejS, rejD, rejF, valued, ordered int
	for k, c := range seq {
		if _, err := c.apply(ss); err != nil {
			t.Fatalf("step %d: session: %v", k, err)
		}
		if _, err := c.apply(dg); err != nil {
			t.Fatalf("step %d: dragonet: %v", k, err)
		}
		if got, want := slices.Sorted(slices.Values(names(ss.Stack()))), slices.Sorted(slices.Values(names(dg.Stack()))); !slices.Equal(got, want) {
			t.Fatalf("step %d: the sessions serve %v and %v", k, got, want)
		}
		full, err := SearchCost(churnInput(t, nic, ss.Stack(), cost, StrategyDefault))
		if err != nil {
			t.Fatalf("step %d: full re-plan: %v", k, err)
		}
		// Above a full re-plan by at most what Dragonet's search is:
		// never costlier than Dragonet's.
		cs, cd := ss.Cost(), dg.Cost()
		if above(cs, cd) {
			// Only where overlapping entries order differently
			// (follow): then never above Dragonet's choices costed in
			// the session's order of entries.
			here := shadowHere(t, ss)
			if ss.overlapping == 0 || above(cs, here) {
				t.Errorf("step %d (%d endpoints): the session's plan costs %v, Dragonet's incremental search's %v (%v in the session's order of entries), a full re-plan's %v", k, ss.Len(), cs, cd, here, full)
			} else {
				ordered++
			}
		}
		if cs.Kind == costmodel.Value && cd.Kind == costmodel.Value && full.Kind == costmodel.Value {
			gapS += cs.V - full.V
			gapD += cd.V - full.V
			sumFull += full.V
			valued++
		}
		for _, x := range []struct {
			c costmodel.Cost
			n *int
		}{{cs, &rejS}, {cd, &rejD}, {full, &rejF}} {
			if x.c.Kind == costmodel.Reject {
				*x.n++
			}
		}
		if full.Less(cs) {
			worse++
		}
		if k%97 == 0 {
			checkSessionEvaluator(t, ss, k)
		}
	}
	if ss.shadow == nil {
		t.Fatal("the session has no shadow")
	}
	n := float64(max(1, valued))
	t.Logf("%d changes: rejected after %d (session), %d (Dragonet's incremental search), %d (full re-plan); over the %d where none is, mean cost of a full re-plan %.4g, mean gap to it: session %.4g, Dragonet's %.4g; the session above a full re-plan %d times, following Dragonet's plan %d times, above Dragonet's where overlapping entries order differently %d times",
		len(seq), rejS, rejD, rejF, valued, sumFull/n, gapS/n, gapD/n, int(worse), ss.follows, ordered)
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

// above reports whether cost a is above b (beyond rounding).
func above(a, b costmodel.Cost) bool {
	return a.Kind > b.Kind || a.Kind == b.Kind && a.V > b.V+1e-6*max(1, abs(b.V))
}

// shadowHere is the cost of the session's shadow's choices in the
// session's state (follow's moves made and undone).
func shadowHere(t *testing.T, ss *Session) costmodel.Cost {
	t.Helper()
	ms, ok := ss.shadowMoves()
	if !ok {
		t.Fatal("the shadow's choices are not the session's")
	}
	ss.swap(ms, true)
	c := ss.Cost()
	ss.swap(ms, false)
	return c
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
	for i, e := range ss.p.eps {
		want := slices.Clone(ss.s.shares(i))
		if diff := gocmp.Diff(want, ss.s.ev.Shares(i)); diff != "" {
			t.Fatalf("step %d: %s's shares (-from scratch +held):\n%s", step, e.ep.Name, diff)
		}
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

// sixFlows is six UDP flows on an 82599 with four queues.
func sixFlows(t *testing.T) *lpg.Stack {
	t.Helper()
	var flows []string
	for i := 1; i <= 7; i++ {
		flows = append(flows, fmt.Sprintf("endpoint f%d udp flow 10.0.0.1:%d -> 10.0.0.9:%d", i, 7000+i, 8000+i))
	}
	st, diags := lpg.LoadStack("s.lpg", []byte(flowStack(4, flows)))
	if st == nil {
		t.Fatal(diags)
	}
	return st
}

func queuesOf(ss *Session) map[string]int {
	out := map[string]int{}
	for i, e := range ss.p.eps {
		out[e.ep.Name] = -1
		if c := ss.s.choice[i]; c.t != nil {
			out[e.ep.Name] = ss.p.queues[c.q].id
		}
	}
	return out
}

// TestDragonetSessionRepurposes works Dragonet's incremental search by
// hand on six flows under dragonet-balance. The start queue turns with
// every flow (allQueues_), so the first six go to queues 1, 2, 3, 1, 2,
// 3 (each offer list starts one queue later; among equal costs the first
// wins). Removing f2 leaves its five-tuple entry, to queue 2 in slot 1,
// in the table (no entry is deleted). f7 is then offered that entry
// first, on its queue, then new entries to queues 1 and 3: the orphan
// balances the queues (2, 2, 2 flows) and f7 takes it, slot and all.
func TestDragonetSessionRepurposes(t *testing.T) {
	all := sixFlows(t)
	ss, err := NewDragonetSession(churnInput(t, "82599", withEndpoints(all, all.Endpoints[:6]), "dragonet-balance", StrategyDragonetGreedy))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"f1": 1, "f2": 2, "f3": 3, "f4": 1, "f5": 2, "f6": 3}
	if got := queuesOf(ss); !maps.Equal(got, want) {
		t.Fatalf("queues %v, want %v", got, want)
	}
	d, err := ss.Remove("f2")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Delete)+len(d.Insert) != 0 || !slices.Equal(d.Removed, []string{"f2"}) {
		t.Fatalf("removing f2: %+v; Dragonet leaves the entry in place", d)
	}
	if len(ss.orphans) != 1 || ss.orphans[0].slot != 1 || ss.p.queues[ss.orphans[0].q].id != 2 {
		t.Fatalf("orphans %+v, want f2's entry to queue 2 in slot 1", ss.orphans)
	}
	d, err = ss.Add(all.Endpoints[6])
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Insert) != 1 || d.Insert[0].Slot != 1 || d.Insert[0].Replaces != "f2" || d.Insert[0].Entry.Action != "RxQueue2" || len(d.Delete) != 0 {
		t.Fatalf("adding f7: %+v, want f2's entry (slot 1, queue 2) repurposed", d)
	}
	if len(ss.orphans) != 0 {
		t.Fatalf("orphans left: %+v", ss.orphans)
	}
	// Entries whose flow left are offered newest inserted first, however
	// they were removed: f5's (inserted fifth, queue 2, slot 4) before
	// f1's (first, queue 1, slot 0), though f1 left last. Without f7 the
	// queues hold 1, 1 and 2 flows (f4; f2; f3 and f6): f5's entry and
	// f1's both balance them as well (sd 0.471), a new entry to queue 3
	// does not; the first offer wins.
	ss2, err := NewDragonetSession(churnInput(t, "82599", withEndpoints(all, all.Endpoints[:6]), "dragonet-balance", StrategyDragonetGreedy))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f5", "f1"} {
		if _, err := ss2.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if len(ss2.orphans) != 2 || ss2.orphans[0].entry.Endpoint != "f5" || ss2.orphans[1].entry.Endpoint != "f1" {
		t.Fatalf("orphans %+v, want f5's then f1's", ss2.orphans)
	}
	d, err = ss2.Add(all.Endpoints[6])
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Insert) != 1 || d.Insert[0].Slot != 4 || d.Insert[0].Replaces != "f5" || d.Insert[0].Entry.Action != "RxQueue2" {
		t.Fatalf("adding f7: %+v, want f5's entry (slot 4, queue 2) repurposed", d.Insert)
	}
	res, err := ss.Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := res.SelfCheck(); err != nil {
		t.Fatal(err)
	}
	for _, pe := range res.Plan.Endpoints {
		if want := queuesOf(ss)[pe.Name]; !slices.Equal(pe.Queues, []int{want}) {
			t.Errorf("the embedded plan sends %s to %v, the session to queue %d", pe.Name, pe.Queues, want)
		}
	}
}

// TestSessionDelta: a removed endpoint's entry is deleted and its slot
// is the next new entry's; a change touches only what it affects; a
// stack with the same endpoints changes nothing; one whose endpoint
// changed its rate removes and adds it again; bad changes are refused
// and change nothing.
func TestSessionDelta(t *testing.T) {
	all := sixFlows(t)
	// Dragonet's balance: every flow has an entry while a table has room
	// (without RSS, a flow without one would land on queue 0).
	ss, _ := plannedSession(t, "82599", withEndpoints(all, all.Endpoints[:6]), "dragonet-balance")
	victim := ss.byName["f2"]
	if victim.slot < 0 {
		t.Fatalf("f2 has no entry: %v", queuesOf(ss))
	}
	slot, node := victim.slot, ss.s.choice[victim.index].t.sp.Node
	before := queuesOf(ss)
	d, err := ss.Remove("f2")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Delete) != 1 || d.Delete[0].Slot != slot || d.Delete[0].Node != node || d.Delete[0].Entry.Endpoint != "f2" {
		t.Fatalf("removing f2 deletes %+v, want its entry in %s slot %d", d.Delete, node, slot)
	}
	for _, q := range d.Queues {
		if q.Endpoint != "f2" && before[q.Endpoint] >= 0 {
			t.Logf("removing f2 moved %s: %v -> %v", q.Endpoint, q.From, q.To)
		}
	}
	moved := 0
	for name, q := range queuesOf(ss) {
		if before[name] != q {
			moved++
		}
	}
	if moved != len(d.Queues)-1 {
		t.Fatalf("%d endpoints changed queue, the Delta lists %d: %+v", moved, len(d.Queues)-1, d.Queues)
	}
	d, err = ss.Add(all.Endpoints[6])
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Insert) != 1 || d.Insert[0].Slot != slot || d.Insert[0].Entry.Endpoint != "f7" {
		t.Fatalf("adding f7 inserts %+v, want its entry in f2's slot %d", d.Insert, slot)
	}
	if !slices.Equal(d.Added, []string{"f7"}) || len(d.Removed) != 0 || len(d.Delete) != 0 {
		t.Fatalf("adding f7: %+v", d)
	}
	// The same endpoints: nothing to do.
	cur := ss.Stack()
	d, err = ss.Apply(cur)
	if err != nil {
		t.Fatal(err)
	}
	if d.Changed() || len(d.Added)+len(d.Removed)+len(d.Queues) != 0 {
		t.Fatalf("applying the same stack: %+v", d)
	}
	// f3 declares another rate: it takes it where it is; f4 another
	// application: removed and added again.
	next := ss.Stack()
	k := slices.IndexFunc(next.Endpoints, func(e *lpg.Endpoint) bool { return e.Name == "f3" })
	f3 := *next.Endpoints[k]
	f3.Rate = 1500
	next.Endpoints[k] = &f3
	k = slices.IndexFunc(next.Endpoints, func(e *lpg.Endpoint) bool { return e.Name == "f4" })
	f4 := *next.Endpoints[k]
	f4.App = "echo"
	next.Endpoints[k] = &f4
	d, err = ss.Apply(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Removed, []string{"f4"}) || !slices.Equal(d.Added, []string{"f4"}) || ss.Len() != 6 {
		t.Fatalf("f3's new rate, f4's new app: %+v (%d endpoints)", d, ss.Len())
	}
	if e := ss.byName["f3"]; e.ep.Rate != 1500 || ss.p.cp.Endpoints[e.index].Rate != 1500 {
		t.Fatalf("f3's rate is %v, the cost model's %v", e.ep.Rate, ss.p.cp.Endpoints[e.index].Rate)
	}
	// Refused, changing nothing.
	n, cost := ss.Len(), ss.Cost()
	omx := &lpg.Endpoint{Name: "mx", Ident: "mx", Proto: lpg.OpenMX, OMXID: 3}
	for _, c := range []struct {
		do   func() error
		want string
	}{
		{func() error { _, err := ss.Remove("nosuch"); return err }, "no endpoint nosuch"},
		{func() error { _, err := ss.Add(all.Endpoints[0]); return err }, "already in the plan"},
		{func() error { _, err := ss.Add(omx); return err }, "no openmx demultiplexer"},
		{func() error { _, err := ss.Add(nil); return err }, "needs a name"},
		{func() error { _, err := ss.Apply(nil); return err }, "no stack"},
		{func() error { _, err := ss.SetRates(map[string]float64{"f1": -1}); return err }, "a rate is between"},
		{func() error {
			other := ss.Stack()
			other.Cores = []int{0, 1}
			_, err := ss.Apply(other)
			return err
		}, "differs from the running one in its cores"},
	} {
		err := c.do()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error saying %q", err, c.want)
		}
	}
	if ss.Len() != n || !ss.Cost().Equal(cost) {
		t.Fatalf("a refused change changed the session: %d endpoints, cost %v; was %d, %v", ss.Len(), ss.Cost(), n, cost)
	}
	checkSessionEvaluator(t, ss, 0)
}

// TestSessionDeterministic: two sessions replaying one churn return the
// same Deltas.
// Apply matches endpoints by name wherever they stand: the same
// endpoints in another order change nothing, and a new one between is
// added.
func TestSessionApplyOrder(t *testing.T) {
	all := sixFlows(t)
	ss, _ := plannedSession(t, "82599", withEndpoints(all, all.Endpoints[:5]), "dragonet-balance")
	cur := ss.Stack()
	turned := *cur
	turned.Endpoints = append(slices.Clone(cur.Endpoints[1:]), cur.Endpoints[0])
	d, err := ss.Apply(&turned)
	if err != nil || d.Changed() || len(d.Added)+len(d.Removed) != 0 {
		t.Fatalf("the same endpoints in another order: %+v, %v", d, err)
	}
	between := *cur
	between.Endpoints = slices.Insert(slices.Clone(cur.Endpoints), 2, all.Endpoints[5])
	if d, err := ss.Apply(&between); err != nil || !slices.Equal(d.Added, []string{"f6"}) || len(d.Removed) != 0 {
		t.Fatalf("f6 added between: %+v, %v", d, err)
	}
	// A name twice (a stack no check passed: run.Live.Reload takes any):
	// refused, the plan as it was.
	twice := *ss.Stack()
	other := *all.Endpoints[6]
	other.Name = "f6"
	twice.Endpoints = append(slices.Clone(twice.Endpoints), &other)
	before := names(ss.Stack())
	if d, err := ss.Apply(&twice); err == nil || !strings.Contains(err.Error(), "declares endpoint f6 twice") {
		t.Fatalf("f6 twice: %+v, %v; want refused", d, err)
	}
	if got := names(ss.Stack()); !slices.Equal(got, before) {
		t.Errorf("after a refused Apply the session serves %v, want %v", got, before)
	}
	// A change that adds one new name twice (change, under Apply's
	// check): refused too, as one that adds a name the plan has.
	f7 := *all.Endpoints[6]
	for _, rm := range [][]string{nil, {"f6"}} {
		add := []*lpg.Endpoint{&f7, &f7}
		if rm != nil {
			add = []*lpg.Endpoint{all.Endpoints[5], all.Endpoints[5]}
		}
		if d, err := ss.change(rm, add, nil); err == nil {
			t.Fatalf("removing %v and adding %s twice: %+v; want refused", rm, add[0].Name, d)
		}
		if got := names(ss.Stack()); !slices.Equal(got, before) {
			t.Errorf("after a refused change the session serves %v, want %v", got, before)
		}
	}
}

func TestSessionDeterministic(t *testing.T) {
	pool := churnPool(t, 120, 8, 3)
	seq := churn(pool, 30, 300, 10, 60, 4)
	var runs [2][]*Delta
	for k := range runs {
		ss, _ := plannedSession(t, "82599", withEndpoints(pool, pool.Endpoints[:30]), "balance")
		for _, c := range seq {
			d, err := c.apply(ss)
			if err != nil {
				t.Fatal(err)
			}
			runs[k] = append(runs[k], d)
		}
	}
	if diff := gocmp.Diff(runs[0], runs[1]); diff != "" {
		t.Fatalf("the same churn, other Deltas (-first +second):\n%s", diff)
	}
}

// skewedSixFlows is sixFlows' first six declared at 1,000 packets a
// second, and rates measured with f1 at ten times that.
func skewedSixFlows(t *testing.T) (stack *lpg.Stack, rates map[string]float64) {
	all := sixFlows(t)
	eps := slices.Clone(all.Endpoints[:6])
	rates = map[string]float64{}
	for i, e := range eps {
		c := *e
		c.Rate = 1000
		eps[i] = &c
		rates[e.Name] = 1000
	}
	rates["f1"] = 10000
	return withEndpoints(all, eps), rates
}

// TestSessionSetRates: six flows of one rate spread over three queues;
// one of them measured at ten times the others' rate moves what the
// new rates make worth moving, and the same rates again move nothing
// (the hysteresis: no oscillation).
func TestSessionSetRates(t *testing.T) {
	stack, rates := skewedSixFlows(t)
	ss, r := plannedSession(t, "82599", stack, "balance")
	d, err := ss.SetRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Queues) == 0 || !d.Changed() {
		t.Fatalf("f1 at 10 times the others' rate moves nothing: %+v", d)
	}
	// Without the moves the plan would cost more.
	stay, err := NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	stay.begin()
	for name, rate := range rates {
		stay.setRate(stay.byName[name], rate)
	}
	if !d.Cost.Less(stay.Cost()) {
		t.Fatalf("after the moves %v, without them %v", d.Cost, stay.Cost())
	}
	checkSessionEvaluator(t, ss, 0)
	// The prediction follows the new rates and the moves: f1's rate, and
	// the queues' loads summing to every endpoint's.
	pl := ss.PredictedLoad()
	var total, sum float64
	for _, pe := range pl.Endpoints {
		total += pe.Rate
		if pe.Name == "f1" && pe.Rate != 10000 {
			t.Errorf("f1's predicted rate %v", pe.Rate)
		}
	}
	for _, q := range pl.Queues {
		sum += q.Load
	}
	if !pl.ByRate || math.Abs(sum-total) > 1e-6*total || total != 15000 {
		t.Errorf("predicted queue loads sum to %v, the endpoints' rates to %v (by rate %v)", sum, total, pl.ByRate)
	}
	again, err := ss.SetRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() || len(again.Queues) != 0 {
		t.Fatalf("the same rates again: %+v", again)
	}
	if _, err := ss.SetRates(map[string]float64{"nosuch": 1}); err == nil || !strings.Contains(err.Error(), "no endpoint nosuch") {
		t.Fatalf("a rate for no endpoint: %v", err)
	}
}

// TestSessionHold: the same measured rates as TestSessionSetRates, with
// the endpoints it moved held, move none of them (only others, or
// nothing); Hold() lets them move again.
func TestSessionHold(t *testing.T) {
	stack, rates := skewedSixFlows(t)
	free, _ := plannedSession(t, "82599", stack, "balance")
	d, err := free.SetRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, q := range d.Queues {
		moved = append(moved, q.Endpoint)
	}
	if len(moved) == 0 {
		t.Fatal("nothing moves without a hold")
	}
	held, _ := plannedSession(t, "82599", stack, "balance")
	held.Hold(moved...)
	d, err = held.SetRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range d.Queues {
		if slices.Contains(moved, q.Endpoint) {
			t.Errorf("held endpoint %s moved from %v to %v", q.Endpoint, q.From, q.To)
		}
	}
	checkSessionEvaluator(t, held, 0)
	held.Hold()
	rates["f1"] = 10001 // a change, so the repairs run again
	d, err = held.SetRates(rates)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Queues) == 0 {
		t.Errorf("released, the endpoints the rates make worth moving do not move: %+v", d)
	}
}

// TestSessionLocal: a change on 2,000 endpoints touches (costs, moves or
// records) a bounded number of them, however many the stack has, and
// the Result of the session embeds its stack on linux-xdp, dragonc run's
// eBPF stage, with the changes since the first plan.
func TestSessionLocal(t *testing.T) {
	var b strings.Builder
	b.WriteString("stack many {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/24 }\n    cores 0..7\n")
	for i := 0; i < 2010; i++ {
		fmt.Fprintf(&b, "    endpoint kv%d udp listen 10.3.0.1:%d { rate %dkpps }\n", i, 10000+i, 1+i%7)
	}
	b.WriteString("    service arp\n}\n")
	pool, diags := lpg.LoadStack("many.lpg", []byte(b.String()))
	if pool == nil {
		t.Fatal(diags)
	}
	ss, _ := plannedSession(t, "linux-xdp", withEndpoints(pool, pool.Endpoints[:2000]), "balance")
	const bound = repairRounds*(4*repairCandidates) + vacateMax + 1
	most := 0
	for k, c := range churn(withEndpoints(pool, append(slices.Clone(pool.Endpoints[:2000]), pool.Endpoints[2000:]...)), 2000, 40, 1990, 2010, 5) {
		if _, err := c.apply(ss); err != nil {
			t.Fatal(err)
		}
		most = max(most, len(ss.order))
		if len(ss.order) > bound {
			t.Fatalf("change %d touched %d of %d endpoints, more than %d", k, len(ss.order), ss.Len(), bound)
		}
	}
	t.Logf("a change touched at most %d of about 2,000 endpoints", most)
	res, err := ss.Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := res.SelfCheck(); err != nil {
		t.Fatal(err)
	}
	pl := res.Plan
	if pl.Strategy != string(StrategyIncremental) || pl.Changes == nil || len(pl.Endpoints) != ss.Len() {
		t.Fatalf("the session's plan: strategy %s, changes %v, %d endpoints (the session has %d)", pl.Strategy, pl.Changes != nil, len(pl.Endpoints), ss.Len())
	}
	if got, want := res.Cost, ss.Cost(); !got.Equal(want) {
		t.Errorf("the embedded plan costs %v, the session says %v", got, want)
	}
}

// TestSessionOverlaps: a churn of connected flows on the port of two
// listeners (one on every address, one on the stack's), which come and
// go too: the session's costs stay those of a fresh problem of the same
// endpoints and choices (the listeners' overlapIndex and relation
// caches kept up to date through adds and removes), and its plan embeds
// and passes the self-check.
func TestSessionOverlaps(t *testing.T) {
	var b strings.Builder
	b.WriteString("stack web {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/16 }\n    cores 0..7\n")
	b.WriteString("    endpoint www tcp listen *:80 { rate 10kpps }\n    endpoint local tcp listen 10.3.0.1:80 { rate 5kpps }\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "    endpoint c%d tcp flow 10.3.0.1:80 -> 10.4.%d.%d:%d { rate %dkpps }\n", i, i/250, 1+i%250, 20000+i, 1+i%5)
	}
	b.WriteString("}\n")
	pool, diags := lpg.LoadStack("web.lpg", []byte(b.String()))
	if pool == nil {
		t.Fatal(diags)
	}
	seq := churn(pool, 60, 300, 40, 90, 6)
	listeners := 0
	for _, c := range seq {
		if c.drop == "www" || c.drop == "local" || c.add != nil && !c.add.Flow {
			listeners++
		}
	}
	if listeners < 2 {
		t.Fatalf("the churn removes or adds a listener %d times; want it to come and go", listeners)
	}
	for _, nic := range []string{"82599", "linux-xdp"} {
		ss, _ := plannedSession(t, nic, withEndpoints(pool, pool.Endpoints[:60]), "balance")
		for k, c := range seq {
			if _, err := c.apply(ss); err != nil {
				t.Fatalf("%s step %d: %v", nic, k, err)
			}
			if k%25 == 0 {
				checkSessionEvaluator(t, ss, k)
			}
		}
		checkSessionEvaluator(t, ss, 300)
		res, err := ss.Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := res.SelfCheck(); err != nil {
			t.Fatalf("%s: %v", nic, err)
		}
	}
}

// ResultLater's function makes the plan of the session as it was when
// it was called, whatever the session did since; its entries are the
// session's then.
func TestSessionResultLater(t *testing.T) {
	all := sixFlows(t)
	ss, _ := plannedSession(t, "82599", withEndpoints(all, all.Endpoints[:6]), "dragonet-balance")
	if _, err := ss.Add(all.Endpoints[6]); err != nil {
		t.Fatal(err)
	}
	later := ss.ResultLater()
	entries := ss.Entries()
	if _, err := ss.Remove(all.Endpoints[6].Name); err != nil {
		t.Fatal(err)
	}
	r, err := later()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range r.Plan.Endpoints {
		names = append(names, e.Name)
	}
	if !slices.Contains(names, all.Endpoints[6].Name) {
		t.Fatalf("the plan of the session then has no %s: %v", all.Endpoints[6].Name, names)
	}
	placed := 0
	for _, c := range r.Plan.Config {
		for _, e := range c.Entries {
			if slices.ContainsFunc(entries, func(x EntryChange) bool { return x.Node == c.Node && x.Entry.Endpoint == e.Endpoint }) {
				placed++
			}
		}
	}
	if placed != len(entries) {
		t.Errorf("the plan has %d of the session's %d entries then", placed, len(entries))
	}
}

// TestSessionFollowsDragonet: a session whose plan is far costlier than
// Dragonet's incremental search's (30 flows piled onto one queue, as no
// search would leave them, more than its repairs can spread) takes
// Dragonet's plan at its next change: its cost is then Dragonet's, every
// flow has Dragonet's queue, and the Delta lists every move (the same
// slot, another queue) and no other. A held flow stays where it is.
func TestSessionFollowsDragonet(t *testing.T) {
	var flows []string
	for i := 1; i <= 31; i++ {
		flows = append(flows, fmt.Sprintf("endpoint f%d udp flow 10.0.0.1:%d -> 10.0.0.9:%d { rate %dkpps }", i, 7000+i, 8000+i, 1+i%5))
	}
	all, diags := lpg.LoadStack("s.lpg", []byte(flowStack(4, flows)))
	if all == nil {
		t.Fatal(diags)
	}
	for _, held := range []string{"", "f3"} {
		t.Run("held="+held, func(t *testing.T) {
			ss, _ := plannedSession(t, "82599", withEndpoints(all, all.Endpoints[:29]), "balance")
			if _, err := ss.Add(all.Endpoints[29]); err != nil { // the shadow starts
				t.Fatal(err)
			}
			if ss.shadow == nil {
				t.Fatal("no shadow")
			}
			q := ss.s.choice[0].q
			for i, c := range ss.s.choice {
				if c.t == nil {
					continue // left to RSS
				}
				if !slices.Contains(c.t.targets, q) {
					t.Fatalf("%s has no entry that can go to queue %d", ss.p.eps[i].ep.Name, ss.p.queues[q].id)
				}
				ss.s.set(i, choice{c.t, q})
			}
			ss.Hold(held)
			// Each flow's entry (queue, or -1) and receive queues, its
			// entry's slot and table.
			before, slots, nodes := queuesOf(ss), map[string]int{}, map[string]string{}
			recv := func() map[string][]int {
				out := map[string][]int{}
				for i, e := range ss.p.eps {
					out[e.ep.Name] = ss.queueIDs(i)
				}
				return out
			}
			recvBefore := recv()
			for i, e := range ss.p.eps {
				if c := ss.s.choice[i]; c.t != nil {
					slots[e.ep.Name], nodes[e.ep.Name] = e.slot, c.t.sp.Node
				}
			}
			d, err := ss.Add(all.Endpoints[30])
			if err != nil {
				t.Fatal(err)
			}
			after, dragonet, recvAfter := queuesOf(ss), queuesOf(ss.shadow), recv()
			if held == "" {
				if ss.follows != 1 || !ss.Cost().Equal(ss.shadow.Cost()) || !maps.Equal(after, dragonet) {
					t.Fatalf("followed %d times; cost %v, Dragonet's %v; queues %v, Dragonet's %v", ss.follows, ss.Cost(), ss.shadow.Cost(), after, dragonet)
				}
			} else if after[held] != before[held] {
				t.Fatalf("held %s moved from queue %d to %d", held, before[held], after[held])
			}
			if !d.Cost.Less(d.Before) {
				t.Fatalf("the change costs %v, was %v", d.Cost, d.Before)
			}
			// The Delta lists every flow whose receive queues changed,
			// and writes every entry that changed, an entry that stays in
			// its table in its slot; one that leaves its table is deleted
			// there.
			listed := map[string]bool{}
			for _, q := range d.Queues {
				listed[q.Endpoint] = true
				if q.Endpoint != "f31" && (!slices.Equal(q.From, recvBefore[q.Endpoint]) || !slices.Equal(q.To, recvAfter[q.Endpoint])) {
					t.Errorf("the Delta moves %s %v -> %v; it was on %v, is on %v", q.Endpoint, q.From, q.To, recvBefore[q.Endpoint], recvAfter[q.Endpoint])
				}
			}
			for name, q := range recvBefore {
				if !slices.Equal(recvAfter[name], q) != listed[name] {
					t.Errorf("%s: queues %v -> %v, in the Delta: %v", name, q, recvAfter[name], listed[name])
				}
			}
			written := map[string]bool{}
			for _, in := range d.Insert {
				name := in.Entry.Endpoint
				written[name] = true
				if name != "f31" && in.Node == nodes[name] && (in.Slot != slots[name] || in.Replaces != name) {
					t.Errorf("the Delta writes %s's entry in slot %d (replacing %q); its slot is %d", name, in.Slot, in.Replaces, slots[name])
				}
			}
			for name, q := range before {
				if changed := after[name] != q; changed && after[name] >= 0 && !written[name] || !changed && written[name] {
					t.Errorf("%s: entry to queue %d -> %d, written: %v", name, q, after[name], written[name])
				}
			}
			for _, del := range d.Delete {
				if name := del.Entry.Endpoint; del.Node != nodes[name] || del.Slot != slots[name] {
					t.Errorf("the Delta deletes %s's entry in %s slot %d; it was in %s slot %d", name, del.Node, del.Slot, nodes[name], slots[name])
				}
			}
			checkSessionEvaluator(t, ss, 0)
		})
	}
}

// TestSessionFollowsNoRounding churns one listener at a time among 1,000
// UDP listeners on linux-xdp under Dragonet's costs, which are single
// precision: Dragonet's search beside the session reaches plans that cost
// the session's but for the last bit (the same loads summed in another
// order), and the session must not move hundreds of endpoints to take
// them (followRounding): a change moves the endpoint it changes and a
// few the repairs move.
func TestSessionFollowsNoRounding(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("stack many {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/24 }\n    cores 0..15\n")
	for i := range 1000 {
		fmt.Fprintf(&sb, "    endpoint e%d udp listen 10.3.0.1:%d { rate %dkpps }\n", i, 10000+i, 1+(i*37)%50)
	}
	sb.WriteString("    service arp\n}\n")
	st, diags := lpg.LoadStack("many.lpg", []byte(sb.String()))
	if st == nil {
		t.Fatal(diags)
	}
	for _, cost := range []string{"dragonet-balance", "dragonet-priority"} {
		t.Run(cost, func(t *testing.T) {
			ss, _ := plannedSession(t, "linux-xdp", st, cost)
			ss.Prepare()
			if ss.shadow == nil {
				t.Fatal("no search of Dragonet's beside the session")
			}
			for k := range 60 {
				e := st.Endpoints[(k*7919)%len(st.Endpoints)]
				for _, op := range []func() (*Delta, error){func() (*Delta, error) { return ss.Remove(e.Name) }, func() (*Delta, error) { return ss.Add(e) }} {
					d, err := op()
					if err != nil {
						t.Fatal(err)
					}
					if len(d.Queues) > 20 {
						t.Fatalf("change %d of %s moved %d endpoints, the cost from %v to %v (%d times Dragonet's plan taken)", k, e.Name, len(d.Queues), d.Before, d.Cost, ss.follows)
					}
				}
			}
		})
	}
}
