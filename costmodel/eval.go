package costmodel

import (
	"fmt"
	"math"
	"slices"
)

// Evaluator keeps the aggregates every cost function needs (per-queue
// loads by class, users, exact users, cycles) so that changing one
// endpoint's shares costs O(its shares) and a cost costs O(queues + gold
// endpoints). Searches use it to try many candidates cheaply.
type Evaluator struct {
	p      *Problem
	fn     Function
	w      []float64
	shares Assignment
	// Per queue.
	load, loadGold, loadBE []float64
	users, goldUsers       []int
	exactUsers             []int
	cycShared, cycExcl     []float64
	gold                   []int // indexes of gold endpoints
	be                     int
	engines                float64
	offCore                float64 // load served off its application's cores (the tie of balance and priority)
	bounce                 float64 // that load weighed by bounceWeight (bounceLoad)
	// The spread rule (Problem.Spread) per endpoint, and its terms
	// (spreadTerms) summed: the excess of all endpoints, the
	// default-queue exemption of each class.
	spread                       []Spread
	excess, exemptGold, exemptBE float64
	// Dragonet's cost functions count placed flows: per queue and class
	// (fractions of flows, and flows with a share there), and per class.
	dl     dragonetLoads
	coreOf []int // queue -> index into cores
	nCores int
	// unrated counts the endpoints that declare no rate (Add, Remove).
	unrated int
}

// NewEvaluator starts from an assignment (nil: nothing assigned).
func NewEvaluator(p *Problem, fn Function, a Assignment) *Evaluator {
	nq := len(p.Queues)
	ev := &Evaluator{p: p, fn: fn, w: weights(p), shares: make(Assignment, len(p.Endpoints)),
		load: make([]float64, nq), loadGold: make([]float64, nq), loadBE: make([]float64, nq),
		users: make([]int, nq), goldUsers: make([]int, nq), exactUsers: make([]int, nq),
		cycShared: make([]float64, nq), cycExcl: make([]float64, nq), coreOf: make([]int, nq)}
	cores := map[int]int{}
	for qi, q := range p.Queues {
		if _, ok := cores[q.Core]; !ok {
			cores[q.Core] = len(cores)
		}
		ev.coreOf[qi] = cores[q.Core]
	}
	ev.nCores = len(cores)
	ev.spread = p.spreads()
	ev.dl = dragonetLoads{nq: nq, gold: make([]float64, nq), be: make([]float64, nq), goldAt: ev.goldUsers, beAt: make([]int, nq)}
	for i, e := range p.Endpoints {
		if e.Gold {
			ev.gold = append(ev.gold, i)
		} else {
			ev.be++
		}
		if e.Rate <= 0 {
			ev.unrated++
		}
	}
	for _, v := range p.Engines {
		ev.engines = math.Max(ev.engines, v)
	}
	for i := range a {
		ev.Set(i, a[i])
	}
	return ev
}

func (ev *Evaluator) apply(i int, shares []Share, sign float64) {
	e := ev.p.Endpoints[i]
	if len(shares) > 0 {
		n := int(sign)
		if e.Gold {
			ev.dl.nGold += n
		} else {
			ev.dl.nBE += n
		}
	}
	rate := e.Rate
	if rate <= 0 {
		rate = DefaultRate
	}
	if x, ex := ev.p.spreadTerms(ev.spread[i], e.Cores, shares, ev.w[i]); x != 0 || ex != 0 {
		ev.excess += sign * x
		if e.Gold {
			ev.exemptGold += sign * ex
		} else {
			ev.exemptBE += sign * ex
		}
	}
	for _, s := range shares {
		q := s.Queue
		l := ev.w[i] * s.Frac * sign
		ev.load[q] += l
		n := 1
		if sign < 0 {
			n = -1
		}
		if e.Gold {
			ev.loadGold[q] += l
			ev.goldUsers[q] += n
			ev.dl.gold[q] += sign * s.Frac
		} else {
			ev.loadBE[q] += l
			ev.dl.beAt[q] += n
			ev.dl.be[q] += sign * s.Frac
		}
		ev.users[q] += n
		bounce := 0.0
		if offCore(ev.p, i, q) {
			bounce = BouncePenalty
			ev.offCore += l
			ev.bounce += l * e.bounceWeight()
		}
		ev.cycShared[q] += sign * rate * s.Frac * (e.Cycles + bounce)
		if s.Exact {
			ev.exactUsers[q] += n
			ev.cycExcl[q] += sign * rate * s.Frac * (e.ExclusiveCycles + bounce)
		}
	}
}

// Set replaces endpoint i's shares.
func (ev *Evaluator) Set(i int, shares []Share) {
	ev.apply(i, ev.shares[i], -1)
	ev.shares[i] = append(ev.shares[i][:0], shares...) // the search sets each endpoint many times
	ev.apply(i, ev.shares[i], 1)
}

// Cost evaluates the current assignment with the evaluator's function.
func (ev *Evaluator) Cost() Cost {
	switch f := ev.fn.(type) {
	case Balance:
		return Cost{Kind: Value, V: ev.balance(ev.load, nil, ev.exemptGold+ev.exemptBE) + ev.excessLoad() + ev.bounceLoad(), Tie: ev.tie()}
	case Priority:
		return ev.priority()
	case DragonetBalance:
		return Cost{Kind: Value, V: float64(ev.dl.balance(ev.dl.all(), ev.dl.total()))}
	case DragonetPriority:
		return ev.dl.priority(f.perQueue())
	case Cycles:
		loads := make([]float64, ev.nCores)
		for q := range ev.load {
			c := ev.cycShared[q]
			if ev.users[q] == 1 && ev.exactUsers[q] == 1 {
				c = ev.cycExcl[q]
			}
			loads[ev.coreOf[q]] += c
		}
		var makespan, total float64
		for _, v := range loads {
			total += v
			makespan = math.Max(makespan, v)
		}
		makespan = math.Max(makespan, ev.engines)
		return Cost{Kind: Value, V: makespan, Tie: total}
	}
	return ev.fn.Cost(ev.p, ev.shares)
}

// excessLoad is the spread rule's excess, with the drift of incremental
// sums cut to 0.
func (ev *Evaluator) excessLoad() float64 {
	if ev.excess < 1e-9*(1+sum(ev.load)) {
		return 0
	}
	return ev.excess
}

// balance is the Balance function's figure over load: exempt is the
// spread endpoints' share of the default queue.
func (ev *Evaluator) balance(load []float64, keep func(int) bool, exempt float64) float64 {
	var sum, sq float64
	n := 0
	def := 0.0
	for qi, q := range ev.p.Queues {
		if keep != nil && !keep(qi) {
			continue
		}
		if q.Default {
			def += load[qi]
			continue
		}
		sum += load[qi]
		sq += load[qi] * load[qi]
		n++
	}
	if n == 0 {
		return 0
	}
	def = max(0, def-exempt)
	mean := sum / float64(n)
	v := sq/float64(n) - mean*mean
	sd := 0.0
	if v > 0 {
		sd = math.Sqrt(v)
	}
	// Incremental sums drift by rounding; a deviation this small against
	// the total load is zero.
	if sd < 1e-7*(sum+def+1) {
		sd = 0
	}
	if def < 1e-9*(sum+1) {
		def = 0
	}
	return sd + def
}

func (ev *Evaluator) priority() Cost {
	shortfall := 0
	for _, i := range ev.gold {
		s := ev.shares[i]
		if len(s) != 1 || ev.p.Queues[s[0].Queue].Default || ev.users[s[0].Queue] != 1 {
			shortfall++
		}
	}
	isGoldQ := func(q int) bool { return ev.goldUsers[q] > 0 }
	v := ev.balance(ev.loadGold, isGoldQ, ev.exemptGold) + ev.balance(ev.loadBE, func(q int) bool { return !isGoldQ(q) }, ev.exemptBE) + ev.excessLoad() + ev.bounceLoad()
	if shortfall > 0 {
		return Cost{Kind: Reject, V: float64(shortfall)*1000 + v, Tie: ev.tie()}
	}
	if ev.be > 0 {
		free := 0
		for qi, q := range ev.p.Queues {
			if !q.Default && !isGoldQ(qi) {
				free++
			}
		}
		if free == 0 {
			v += 100 * float64(ev.be)
		}
	}
	return Cost{Kind: Value, V: v, Tie: ev.tie()}
}

// bounceLoad is bounceLoad's figure, with the drift of incremental sums
// cut to 0.
func (ev *Evaluator) bounceLoad() float64 {
	if ev.bounce < 1e-9*(1+sum(ev.load)) {
		return 0
	}
	return ev.bounce
}

// tie is the off-core load, with the drift of incremental sums cut to 0.
func (ev *Evaluator) tie() float64 {
	if ev.offCore < 1e-9*(1+sum(ev.load)) {
		return 0
	}
	return ev.offCore
}

func sum(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t
}

// Check compares the evaluator with a from-scratch evaluation; tests use it.
func (ev *Evaluator) Check() error {
	want := ev.fn.Cost(ev.p, ev.shares)
	got := ev.Cost()
	if !want.Equal(got) || want.Kind != got.Kind {
		return fmt.Errorf("incremental cost %v (tie %g), from scratch %v (tie %g)", got, got.Tie, want, want.Tie)
	}
	return nil
}

// Shares returns endpoint i's shares as the evaluator holds them; the
// caller must not change them.
func (ev *Evaluator) Shares(i int) []Share { return ev.shares[i] }

// Add appends an endpoint to the evaluator's Problem, with no shares (not
// placed), and returns its index. Add and Remove change the Problem the
// evaluator was made with: an evaluator that adds or removes endpoints
// must be the only one of its Problem. Each costs O(1) but for the
// bookkeeping of the endpoints' indexes (Remove) and, when the endpoint
// is the first without a declared rate, or the last (weights count
// rates only when every endpoint declares one), re-weighing every
// endpoint.
func (ev *Evaluator) Add(e Endpoint) int {
	wasAll := ev.allRated()
	p := ev.p
	p.Endpoints = append(p.Endpoints, e)
	if e.Rate <= 0 {
		ev.unrated++
	}
	i := len(p.Endpoints) - 1
	ev.shares = append(ev.shares, nil)
	ev.spread = append(ev.spread, p.Spread(i))
	w := 1.0
	if ev.allRated() {
		w = e.Rate
	}
	ev.w = append(ev.w, w)
	if e.Gold {
		ev.gold = append(ev.gold, i)
	} else {
		ev.be++
	}
	if wasAll != ev.allRated() && i > 0 {
		ev.reweigh()
	}
	return i
}

// Remove deletes endpoint i from the evaluator and its Problem: the
// endpoints after it move down by one index.
func (ev *Evaluator) Remove(i int) {
	ev.Set(i, nil)
	p := ev.p
	e := p.Endpoints[i]
	wasAll := ev.allRated()
	if e.Rate <= 0 {
		ev.unrated--
	}
	p.Endpoints = slices.Delete(p.Endpoints, i, i+1)
	ev.shares = slices.Delete(ev.shares, i, i+1)
	ev.spread = slices.Delete(ev.spread, i, i+1)
	ev.w = slices.Delete(ev.w, i, i+1)
	if e.Gold {
		ev.gold = slices.DeleteFunc(ev.gold, func(j int) bool { return j == i })
	} else {
		ev.be--
	}
	for k, j := range ev.gold {
		if j > i {
			ev.gold[k] = j - 1
		}
	}
	if ev.allRated() != wasAll && len(p.Endpoints) > 0 {
		ev.reweigh()
	}
}

// allRated reports whether every endpoint declares a rate (weights).
func (ev *Evaluator) allRated() bool { return ev.unrated == 0 && len(ev.p.Endpoints) > 0 }

// reweigh recomputes the weights after the set of endpoints changed
// whether all of them declare a rate, and every endpoint's part of the
// aggregates with them.
func (ev *Evaluator) reweigh() {
	w := weights(ev.p)
	for i := range ev.shares {
		ev.apply(i, ev.shares[i], -1)
		ev.w[i] = w[i]
		ev.apply(i, ev.shares[i], 1)
	}
}

// Load is the load on queue q in the weights the balance functions use
// (rates when every endpoint declares one, else endpoints).
func (ev *Evaluator) Load(q int) float64 { return ev.load[q] }

// Weight is endpoint i's weight in those loads.
func (ev *Evaluator) Weight(i int) float64 { return ev.w[i] }

// Update replaces what the evaluator knows of endpoint i (its rate, say,
// as measured), keeping its shares.
func (ev *Evaluator) Update(i int, e Endpoint) {
	shares := ev.shares[i]
	ev.apply(i, shares, -1)
	ev.shares[i] = nil // i weighs nothing while the weights change
	wasAll := ev.allRated()
	old := ev.p.Endpoints[i]
	if old.Rate <= 0 {
		ev.unrated--
	}
	if e.Rate <= 0 {
		ev.unrated++
	}
	if old.Gold != e.Gold {
		if e.Gold {
			ev.gold = append(ev.gold, i)
			ev.be--
		} else {
			ev.gold = slices.DeleteFunc(ev.gold, func(j int) bool { return j == i })
			ev.be++
		}
	}
	ev.p.Endpoints[i] = e
	ev.spread[i] = ev.p.Spread(i)
	if ev.allRated() != wasAll {
		ev.reweigh()
	} else if ev.allRated() {
		ev.w[i] = e.Rate
	}
	ev.shares[i] = shares
	ev.apply(i, shares, 1)
}

// Users is the number of endpoints with a share of their packets on
// queue q.
func (ev *Evaluator) Users(q int) int { return ev.users[q] }

// GoldUsers is the number of gold endpoints with a share of their packets
// on queue q.
func (ev *Evaluator) GoldUsers(q int) int { return ev.goldUsers[q] }
