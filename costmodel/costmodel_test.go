package costmodel

import (
	"math"
	"slices"
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

func TestOrder(t *testing.T) {
	ok, v1, v2, r1, r2 := Cost{Kind: OK}, Cost{Kind: Value, V: 1}, Cost{Kind: Value, V: 2}, Cost{Kind: Reject, V: 1}, Cost{Kind: Reject, V: 5}
	order := []Cost{ok, v1, v2, r1, r2}
	for i := range order {
		for j := range order {
			if got := order[i].Less(order[j]); got != (i < j) {
				t.Errorf("%v < %v = %v", order[i], order[j], got)
			}
		}
	}
	if !(Cost{Kind: Value, V: 3, Tie: 1}).Less(Cost{Kind: Value, V: 3, Tie: 2}) {
		t.Error("tie breaks")
	}
}

// TestFormat: costs print as plain numbers of four significant digits,
// with decimals only where the value has a fractional part.
func TestFormat(t *testing.T) {
	for _, c := range []struct {
		c    Cost
		want string
	}{
		{Cost{Kind: OK}, "ok"},
		{Cost{Kind: Value, V: 346712}, "346700"},
		{Cost{Kind: Reject, V: 251000}, "reject(251000)"},
		{Cost{Kind: Value, V: 1e7}, "10000000"},
		{Cost{Kind: Value, V: 2.21e6}, "2210000"},
		{Cost{Kind: Value, V: 0}, "0"},
		{Cost{Kind: Value, V: -0.0}, "0"},
		{Cost{Kind: Value, V: 0.5}, "0.5"},
		{Cost{Kind: Value, V: 12.25}, "12.25"},
		{Cost{Kind: Value, V: 1234.5678}, "1235"},
		{Cost{Kind: Value, V: 0.000123456}, "0.0001235"},
		{Cost{Kind: Value, V: -42.5}, "-42.5"},
		{Cost{Kind: Reject, V: 2.5}, "reject(2.5)"},
	} {
		if got := c.c.String(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.c, got, c.want)
		}
	}
	for _, k := range []Kind{OK, Value, Reject} {
		b, err := k.MarshalText()
		var got Kind
		if err != nil || string(b) != k.String() || got.UnmarshalText(b) != nil || got != k {
			t.Errorf("kind %v: text %q (%v), read back as %v", k, b, err, got)
		}
	}
	var k Kind
	if err := k.UnmarshalText([]byte("cheap")); err == nil || !strings.Contains(err.Error(), `unknown cost kind "cheap"`) {
		t.Errorf("an unknown kind's name: %v", err)
	}
	if _, err := Kind(7).MarshalText(); err == nil {
		t.Errorf("Kind(7) has a name")
	}
}

func problem(gold ...bool) *Problem {
	p := &Problem{Queues: []Queue{{ID: 0, Core: 0, Default: true}, {ID: 1, Core: 1}, {ID: 2, Core: 2}}}
	for i, g := range gold {
		p.Endpoints = append(p.Endpoints, Endpoint{Name: string(rune('a' + i)), Gold: g, Cycles: 300, ExclusiveCycles: 200})
	}
	return p
}

func TestBalance(t *testing.T) {
	p := problem(false, false)
	spread := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 2, Frac: 1}}}
	same := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 1, Frac: 1}}}
	def := Assignment{{{Queue: 0, Frac: 1}}, {{Queue: 0, Frac: 1}}}
	b := Balance{}
	if !b.Cost(p, spread).Less(b.Cost(p, same)) || !b.Cost(p, same).Less(b.Cost(p, def)) {
		t.Errorf("spread %v, same %v, default %v", b.Cost(p, spread), b.Cost(p, same), b.Cost(p, def))
	}
	if c := b.Cost(p, spread); c.V != 0 {
		t.Errorf("a perfect spread costs %v", c)
	}
}

// TestBalanceOwnCore: an endpoint bound to the default queue's core
// costs nothing there (the Open-MX paper's rank 0 on core 0, served on
// its own core's queue), and beats being served off its core; one bound
// elsewhere, or to no core, still counts as load left on the default
// queue.
func TestBalanceOwnCore(t *testing.T) {
	b := Balance{}
	for _, c := range []struct {
		cores []int
		free  bool
	}{{[]int{0}, true}, {[]int{0, 2}, true}, {[]int{1}, false}, {nil, false}} {
		p := problem(false)
		p.Endpoints[0].Cores = c.cores
		onDefault := b.Cost(p, Assignment{{{Queue: 0, Frac: 1}}})
		if free := onDefault.V == 0; free != c.free {
			t.Errorf("cores %v: on the default queue costs %v", c.cores, onDefault)
		}
		if c.free && !onDefault.Less(b.Cost(p, Assignment{{{Queue: 1, Frac: 1}}})) {
			t.Errorf("cores %v: its own core's default queue does not beat queue 1", c.cores)
		}
	}
}

func TestPriority(t *testing.T) {
	p := problem(true, false)
	own := Assignment{{{Queue: 1, Frac: 1, Exact: true}}, {{Queue: 2, Frac: 1}}}
	shared := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 1, Frac: 1}}}
	pr := Priority{}
	if c := pr.Cost(p, shared); c.Kind != Reject {
		t.Errorf("gold sharing a queue: %v", c)
	}
	if c := pr.Cost(p, own); c.Kind != Value {
		t.Errorf("gold alone: %v", c)
	}
	// Two gold endpoints, one queue each; best-effort starves on queue 0.
	p = problem(true, true, false)
	starve := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 2, Frac: 1}}, {{Queue: 0, Frac: 1}}}
	if c := pr.Cost(p, starve); c.Kind != Value || c.V < 100 {
		t.Errorf("starving best effort: %v", c)
	}
}

func TestCycles(t *testing.T) {
	p := problem(false, false)
	p.Endpoints[0].Rate, p.Endpoints[1].Rate = 1000, 1000
	p.Endpoints[0].Cores = []int{1}
	bound := Assignment{{{Queue: 1, Frac: 1, Exact: true}}, {{Queue: 2, Frac: 1, Exact: true}}}
	bounced := Assignment{{{Queue: 2, Frac: 1, Exact: true}}, {{Queue: 1, Frac: 1, Exact: true}}}
	c := Cycles{}
	if !c.Cost(p, bound).Less(c.Cost(p, bounced)) {
		t.Errorf("bound %v, bounced %v", c.Cost(p, bound), c.Cost(p, bounced))
	}
	if got := CoreLoads(p, bound)["core 1"]; got != 200*1000 {
		t.Errorf("core 1 load %v", got)
	}
}

// TestEvaluatorMatches changes random endpoints many times and compares the
// incremental cost with a from-scratch evaluation after each change.
func TestEvaluatorMatches(t *testing.T) {
	p := problem(true, false, false, true, false)
	p.Endpoints[1].Rate = 5000
	p.Endpoints[2].Cores = []int{2}
	// Spread endpoints: named cores (one of them the default queue's), and
	// one too hot for a core when every endpoint declares a rate.
	for i := range p.Endpoints {
		p.Endpoints[i].Listener = true
	}
	p.Endpoints[0].Cores = []int{0, 1}
	p.Endpoints[3].Cores = []int{1, 2}
	rated := *p
	rated.Endpoints = slices.Clone(p.Endpoints)
	for i := range rated.Endpoints {
		rated.Endpoints[i].Rate = float64(1000 * (i + 1))
	}
	rated.Endpoints[4].Rate = 2 * rated.Endpoints[4].CoreRate()
	if sp := rated.Spread(4); sp.N != 2 || sp.Cores != nil {
		t.Fatalf("a listener at twice a core's rate: %+v, want spread over 2 cores", sp)
	}
	for _, fn := range []Function{Balance{}, Priority{}, Cycles{}, DragonetBalance{}, DragonetPriority{GoldPerQueue: 1}, DragonetPriority{GoldPerQueue: 2}} {
		for _, p := range []*Problem{p, &rated} {
			testEvaluator(t, p, fn)
		}
	}
}

func testEvaluator(t *testing.T, p *Problem, fn Function) {
	t.Helper()
	ev := NewEvaluator(p, fn, nil)
	seed := uint32(7)
	for step := 0; step < 500; step++ {
		seed = seed*1664525 + 1013904223
		i := int(seed>>8) % len(p.Endpoints)
		q := int(seed>>16) % len(p.Queues)
		var shares []Share
		switch seed % 4 {
		case 3:
			shares = nil // not placed yet (Dragonet's greedy search)
		case 0:
			shares = []Share{{Queue: q, Frac: 1, Exact: true}}
		case 1:
			shares = []Share{{Queue: 1, Frac: 0.5}, {Queue: 2, Frac: 0.5}}
			if seed&(1<<20) != 0 {
				shares[1].Queue = 0 // the default queue, spread over
			}
		default:
			shares = []Share{{Queue: q, Frac: 1}}
		}
		ev.Set(i, shares)
		if err := ev.Check(); err != nil {
			t.Fatalf("%s step %d: %v", fn.Name(), step, err)
		}
	}
}

// TestSpreadRule: listeners that name several of the queues' cores, or
// whose rate exceeds a core's, are spread; one core named, a connected
// flow, or a cool listener are not.
func TestSpreadRule(t *testing.T) {
	p := problem(false, false, false, false, false, false)
	e := p.Endpoints
	for i := range e {
		e[i].Listener = true
	}
	e[0].Cores = []int{0, 1}
	e[1].Cores = []int{1, 7} // core 7 serves no queue
	e[2].Rate = 3 * e[2].CoreRate()
	e[3].Rate, e[3].Cores = 3*e[3].CoreRate(), []int{2}
	e[4].Cores, e[4].Listener = []int{0, 1, 2}, false
	e[5].Rate = e[5].CoreRate() / 2
	for i, want := range []Spread{{Cores: []int{0, 1}, N: 2}, {N: 1}, {N: 3}, {N: 1}, {N: 1}, {N: 1}} {
		got := p.Spread(i)
		if got.N != want.N || !slices.Equal(got.Cores, want.Cores) || (got.N > 1) != (got.Why != "") {
			t.Errorf("endpoint %d: %+v, want %+v", i, got, want)
		}
	}
	if r := e[0].CoreRate(); r != CoreHz/300 {
		t.Errorf("a core serves %v packets/s of a 300-cycle path, want %v", r, CoreHz/300)
	}
}

// TestBalanceSpread: one listener on a two-core stack that names both
// cores: on one queue it costs half its load (the share its other core
// should serve), spread over both queues (the default one included) it
// costs nothing, under balance and priority; cycles sees the halved
// per-core load.
func TestBalanceSpread(t *testing.T) {
	p := &Problem{Queues: []Queue{{ID: 0, Core: 0, Default: true}, {ID: 1, Core: 1}},
		Endpoints: []Endpoint{{Name: "echo", Rate: 1e6, Cores: []int{0, 1}, Listener: true, Cycles: 240, ExclusiveCycles: 200}}}
	one := Assignment{{{Queue: 1, Frac: 1, Exact: true}}}
	both := Assignment{{{Queue: 0, Frac: 0.5}, {Queue: 1, Frac: 0.5}}}
	for _, fn := range []Function{Balance{}, Priority{}} {
		if c := fn.Cost(p, one); c.V != 5e5 {
			t.Errorf("%s: one queue costs %v, want 500000", fn.Name(), c)
		}
		if c := fn.Cost(p, both); c.V != 0 {
			t.Errorf("%s: spread over both costs %v, want 0", fn.Name(), c)
		}
	}
	loads := CoreLoads(p, both)
	if loads["core 0"] != 240*5e5 || loads["core 1"] != 240*5e5 {
		t.Errorf("cycles per core of the spread endpoint: %v", loads)
	}
	if !(Cycles{}).Cost(p, both).Less(Cycles{}.Cost(p, one)) {
		t.Errorf("cycles: spread %v, one queue %v", Cycles{}.Cost(p, both), Cycles{}.Cost(p, one))
	}
	// Without the spread rule (a connected flow) one queue is balanced.
	p.Endpoints[0].Listener = false
	if c := (Balance{}).Cost(p, one); c.V != 0 {
		t.Errorf("a flow on one queue costs %v", c)
	}
}

// TestBounceOutweighsBalance: two endpoints whose application runs on
// core 1 are served together on queue 1 rather than spread over queues 1
// and 2: the bouncing of the spread one (BouncePenalty over its 240
// cycles a packet, about 4.3 packets' worth of each) costs more than the
// imbalance. Without declared cores spreading wins, as before. The
// incremental evaluator agrees.
func TestBounceOutweighsBalance(t *testing.T) {
	mk := func(cores []int) *Problem {
		p := &Problem{Queues: []Queue{{ID: 0, Core: 0, Default: true}, {ID: 1, Core: 1}, {ID: 2, Core: 2}}}
		for _, n := range []string{"a", "b"} {
			p.Endpoints = append(p.Endpoints, Endpoint{Name: n, Rate: 100000, Cores: cores, Cycles: 240, ExclusiveCycles: 200})
		}
		return p
	}
	together := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 1, Frac: 1}}}
	apart := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 2, Frac: 1}}}
	for _, fn := range []Function{Balance{}, Priority{}} {
		p := mk([]int{1})
		ct, ca := fn.Cost(p, together), fn.Cost(p, apart)
		if !ct.Less(ca) {
			t.Errorf("%s, cores 1: together %v, apart %v", fn.Name(), ct, ca)
		}
		if want := 100000 * BouncePenalty / 240.0; math.Abs(ca.V-want) > 1 {
			t.Errorf("%s: apart costs %v, want the bouncing of b, %v", fn.Name(), ca.V, want)
		}
		if ct, ca := fn.Cost(mk(nil), together), fn.Cost(mk(nil), apart); !ca.Less(ct) {
			t.Errorf("%s, no cores: together %v, apart %v", fn.Name(), ct, ca)
		}
		for _, a := range []Assignment{together, apart} {
			if err := NewEvaluator(p, fn, a).Check(); err != nil {
				t.Errorf("%s: %v", fn.Name(), err)
			}
		}
	}
}

// TestQueueLoads: the loads the balance function sees, by rate when every
// endpoint declares one and by flows otherwise, and the evaluator's
// assignment as it was set.
func TestQueueLoads(t *testing.T) {
	p := &Problem{Queues: []Queue{{ID: 0, Default: true}, {ID: 1, Core: 1}, {ID: 2, Core: 2}},
		Endpoints: []Endpoint{{Name: "a", Rate: 100}, {Name: "b", Rate: 10}, {Name: "c", Rate: 30}}}
	a := Assignment{{{Queue: 1, Frac: 1}}, {{Queue: 2, Frac: 0.5}, {Queue: 1, Frac: 0.5}}, {{Queue: 2, Frac: 1}}}
	got, byRate := QueueLoads(p, a)
	if want := []float64{0, 105, 35}; !slices.Equal(got, want) || !byRate {
		t.Errorf("QueueLoads = %v, %v; want %v, true", got, byRate, want)
	}
	p.Endpoints[2].Rate = 0
	got, byRate = QueueLoads(p, a)
	if want := []float64{0, 1.5, 1.5}; !slices.Equal(got, want) || byRate {
		t.Errorf("without c's rate QueueLoads = %v, %v; want %v, false (flows)", got, byRate, want)
	}
	ev := NewEvaluator(p, Balance{}, a)
	b := ev.Assignment()
	if len(b) != 3 || len(b[1]) != 2 || b[1][1] != a[1][1] {
		t.Errorf("Assignment = %v, want %v", b, a)
	}
	b[0][0].Frac = 0 // a copy: the evaluator keeps its own
	if ev.Assignment()[0][0].Frac != 1 {
		t.Error("Assignment shares the evaluator's slices")
	}
}

// TestEvaluatorAddRemove adds, removes and updates endpoints (gold and
// best effort, with and without a rate, listeners on named cores)
// between changes of shares, and compares the incremental cost with a
// from-scratch evaluation of the changed Problem after each step; the
// weights switch between rates and counts as the last endpoint without
// a rate comes and goes.
func TestEvaluatorAddRemove(t *testing.T) {
	for _, fn := range []Function{Balance{}, Priority{}, Cycles{}, DragonetBalance{}, DragonetPriority{GoldPerQueue: 1}} {
		p := problem(false, true, false)
		for i := range p.Endpoints {
			p.Endpoints[i].Rate = float64(1000 * (i + 1))
		}
		ev := NewEvaluator(p, fn, nil)
		seed := uint32(11)
		next := func() uint32 { seed = seed*1664525 + 1013904223; return seed >> 8 }
		switched := 0
		for step := 0; step < 600; step++ {
			r := next()
			n := len(p.Endpoints)
			switch {
			case r%5 == 0 || n == 0:
				e := Endpoint{Name: "x", Gold: r%7 == 0, Cycles: 300, ExclusiveCycles: 200, Listener: r%3 == 0}
				if r%11 != 0 {
					e.Rate = float64(500 * (1 + r%9))
				}
				if r%13 == 0 {
					e.Cores = []int{1, 2}
				}
				before := ev.allRated()
				i := ev.Add(e)
				if i != n {
					t.Fatalf("%s: Add returned %d, want %d", fn.Name(), i, n)
				}
				if before != ev.allRated() {
					switched++
				}
				ev.Set(i, []Share{{Queue: int(r>>4) % len(p.Queues), Frac: 1, Exact: true}})
			case r%5 == 1 && n > 1:
				before := ev.allRated()
				ev.Remove(int(r>>4) % n)
				if len(p.Endpoints) != n-1 || len(ev.shares) != n-1 {
					t.Fatalf("%s: %d endpoints after a remove, want %d", fn.Name(), len(p.Endpoints), n-1)
				}
				if before != ev.allRated() {
					switched++
				}
			case r%5 == 2:
				// A new rate (none, now and then), class or cores.
				i := int(r>>4) % n
				e := p.Endpoints[i]
				e.Rate = float64(200 * (r % 17))
				e.Gold = r%3 == 0
				e.Listener = !e.Listener
				before := ev.allRated()
				ev.Update(i, e)
				if before != ev.allRated() {
					switched++
				}
			default:
				i := int(r>>4) % n
				q := int(r>>12) % len(p.Queues)
				ev.Set(i, []Share{{Queue: q, Frac: 0.5}, {Queue: (q + 1) % len(p.Queues), Frac: 0.5}})
			}
			if err := ev.Check(); err != nil {
				t.Fatalf("%s step %d: %v", fn.Name(), step, err)
			}
		}
		if switched == 0 {
			t.Errorf("%s: the weights never switched between rates and counts", fn.Name())
		}
	}
}
