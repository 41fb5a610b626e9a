package costmodel

import (
	"math"
)

// Dragonet's own cost functions, ported from Dragonet's Search.hs
// (BarrelfishOS/dragonet, Dragonet/lib/Dragonet/Search.hs: balanceCost_,
// balanceCost, priorityCost) so that --strategy dragonet-greedy can
// reproduce Dragonet's assignments. They differ from dragonc's balance and
// priority on purpose:
//
//   - they count flows, never rates (a QMap is a list of flows);
//   - queue 0 is Dragonet's catch-all and is left out of every balance
//     (allQueues nq = [1..nq-1]);
//   - they see only the endpoints placed so far: Dragonet's greedy search
//     evaluates each step over the flows it has configured (an endpoint
//     with no shares is not yet placed and is not counted).
//
// A QMap sends each flow to one queue. dragonc's assignment may split an
// endpoint when entries overlap it partly; such an endpoint counts as a
// fraction of a flow on each of its queues and belongs to every queue it
// reaches. Where Haskell's sd of an empty list is NaN, these return 0.
//
// Dragonet's costs are single precision (Search.hs lines 152-154: CostVal
// Float; sd, lines 1548-1551, over loads of type Float): mathematically
// equal deviations of different assignments differ in their last bits
// depending on where the load sits in the list, and L.minimumBy keeps the
// first of the smallest (line 444). These compute in float32, in
// Search.hs's order of operations, so they pick what Dragonet picks.
//
// Dragonet's costs are defined over Dragonet's search space: its oracle
// never targets queue 0 (allQueues, lines 118-121) and gives every flow a
// filter while its tables have room (e10kFlowConfChanges, lines
// 1313-1324), and its QMap counts a flow against the first filter whose
// predicate it satisfies (doFlowQueueNextPort_, lines 840-853). Searches
// costing with them search that space (DragonetSpace).

// DragonetSpace reports whether fn is one of Dragonet's cost functions,
// which a search must evaluate over Dragonet's search space (see above):
// over dragonc's wider space (filters to queue 0, flows left without a
// filter) they are blind to whatever lands on queue 0, and a search
// would put everything there at cost 0.
func DragonetSpace(fn Function) bool {
	switch fn.(type) {
	case DragonetBalance, DragonetPriority:
		return true
	}
	return false
}

// DragonetBalance is Dragonet's balanceCost: the standard deviation of
// the number of flows on queues 1..n-1.
type DragonetBalance struct{}

// Name implements Function.
func (DragonetBalance) Name() string { return "dragonet-balance" }

// Cost implements Function.
func (DragonetBalance) Cost(p *Problem, a Assignment) Cost {
	d := newDragonetLoads(p, a)
	return Cost{Kind: Value, V: float64(d.balance(d.all(), d.total()))}
}

// DragonetPriority is Dragonet's priorityCost with gold flows per queue
// as its parameter; below 1 is DefaultGoldPerQueue.
type DragonetPriority struct{ GoldPerQueue int }

// DefaultGoldPerQueue is DragonetPriority's default: Dragonet's
// Scenarios/S1.hs uses 1.
const DefaultGoldPerQueue = 1

// Name implements Function.
func (DragonetPriority) Name() string { return "dragonet-priority" }

// Cost implements Function.
func (f DragonetPriority) Cost(p *Problem, a Assignment) Cost {
	return newDragonetLoads(p, a).priority(f.perQueue())
}

func (f DragonetPriority) perQueue() int {
	if f.GoldPerQueue < 1 {
		return DefaultGoldPerQueue
	}
	return f.GoldPerQueue
}

// dragonetLoads are the aggregates Dragonet's cost functions read: per
// queue, the (fractional) count of gold and best-effort flows and whether
// any flow of each class reaches it; the number of placed flows of each
// class.
type dragonetLoads struct {
	nq           int
	gold, be     []float64
	goldAt, beAt []int // flows of the class with a share on the queue
	nGold, nBE   int
	scratchQ     []int
	scratchT     []float64
}

func newDragonetLoads(p *Problem, a Assignment) *dragonetLoads {
	nq := len(p.Queues)
	d := &dragonetLoads{nq: nq, gold: make([]float64, nq), be: make([]float64, nq), goldAt: make([]int, nq), beAt: make([]int, nq)}
	for i, shares := range a {
		if len(shares) == 0 {
			continue
		}
		g := p.Endpoints[i].Gold
		if g {
			d.nGold++
		} else {
			d.nBE++
		}
		for _, s := range shares {
			if g {
				d.gold[s.Queue] += s.Frac
				d.goldAt[s.Queue]++
			} else {
				d.be[s.Queue] += s.Frac
				d.beAt[s.Queue]++
			}
		}
	}
	return d
}

// all is Dragonet's allQueues: 1..nq-1.
func (d *dragonetLoads) all() []int {
	qs := d.scratchQ[:0]
	for q := 1; q < d.nq; q++ {
		qs = append(qs, q)
	}
	d.scratchQ = qs
	return qs
}

func (d *dragonetLoads) total() []float64 {
	t := d.scratchT[:0]
	for q := 0; q < d.nq; q++ {
		t = append(t, d.gold[q]+d.be[q])
	}
	d.scratchT = t
	return t
}

// balance is balanceCost_ (Search.hs lines 1553-1567): the population
// standard deviation of load over the listed queues, as sd computes it
// (lines 1548-1551) in single precision: mean = sum l / n, then
// sqrt (sum (map ((^2) . subtract mean) l) / n), each sum a left fold
// from 0 over the queues in the order listed.
func (d *dragonetLoads) balance(qs []int, load []float64) float32 {
	if len(qs) == 0 {
		return 0
	}
	n := float32(len(qs))
	var sum float32
	for _, q := range qs {
		sum = float32(sum + flows32(load[q]))
	}
	mean := float32(sum / n)
	var ss float32
	for _, q := range qs {
		x := float32(flows32(load[q]) - mean)
		ss = float32(ss + float32(x*x)) // conversions keep each step in single precision (no fused multiply-add)
	}
	return float32(math.Sqrt(float64(float32(ss / n)))) // a correctly rounded double root rounds to the single one
}

// flows32 is a (fractional) flow count in single precision. The
// evaluator's incremental sums of shares may drift in their last bits; a
// count is rounded to 1e-9 first so the drift never flips a rounding.
func flows32(x float64) float32 { return float32(math.Round(x*1e9) / 1e9) }

// priority is priorityCost isGold goldFlowsPerQ nq, case by case.
func (d *dragonetLoads) priority(perQ int) Cost {
	all := d.all()
	if d.nGold == 0 {
		return Cost{Kind: Value, V: float64(d.balance(all, d.be))}
	}
	// goldQs, beQs: the queues each class's flows reach (queue 0
	// included, as in Search.hs); the exclusive ones of each class.
	var goldQs, goldExcl, beExcl, restQs []int
	for q := 0; q < d.nq; q++ {
		if d.goldAt[q] > 0 {
			goldQs = append(goldQs, q)
			if d.beAt[q] == 0 {
				goldExcl = append(goldExcl, q)
			}
		} else if d.beAt[q] > 0 {
			beExcl = append(beExcl, q)
		}
		if q > 0 && d.goldAt[q] == 0 {
			restQs = append(restQs, q) // allQs \ goldQs
		}
	}
	goldNQs := min(d.nq-1, int(math.Ceil(float64(d.nGold)/float64(perQ))))
	goldNeeded := goldNQs - len(goldExcl)
	if d.nBE == 0 {
		extra := max(-goldNeeded, 0)
		return Cost{Kind: Value, V: float64(d.balance(all, d.gold) + float32(extra))}
	}
	if goldNeeded > 0 {
		return Cost{Kind: Reject, V: 100 * float64(goldNeeded)}
	}
	if nonExcl := len(goldQs) - len(goldExcl); nonExcl > 0 {
		return Cost{Kind: Reject, V: float64(nonExcl)}
	}
	beNQs := min(d.nq-goldNQs, d.nBE)
	balBE := d.balance(restQs, d.be)
	if beNeeded := beNQs - len(beExcl); beNeeded > 0 {
		return Cost{Kind: Value, V: float64(float32(100*beNeeded) + balBE)}
	}
	return Cost{Kind: Value, V: float64(d.balance(goldQs, d.gold) + balBE)}
}
