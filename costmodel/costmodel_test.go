package costmodel

import (
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
		if got := Format(c.c.Kind.String(), c.c.V); got != c.want {
			t.Errorf("Format(%q, %v): %q, want %q", c.c.Kind, c.c.V, got, c.want)
		}
	}
	for _, k := range []Kind{OK, Value, Reject} {
		if got, ok := KindNamed(k.String()); !ok || got != k {
			t.Errorf("KindNamed(%q) = %v, %v", k, got, ok)
		}
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
	for _, fn := range []Function{Balance{}, Priority{}, Cycles{}, DragonetBalance{}, DragonetPriority{GoldPerQueue: 1}, DragonetPriority{GoldPerQueue: 2}} {
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
			default:
				shares = []Share{{Queue: q, Frac: 1}}
			}
			ev.Set(i, shares)
			if err := ev.Check(); err != nil {
				t.Fatalf("%s step %d: %v", fn.Name(), step, err)
			}
		}
	}
}
