// Package costmodel holds the cost type, the cost functions a user picks
// (balance, priority, cycles) and their default parameters with sources.
// Cost functions see an abstract assignment (which share of each
// endpoint's packets lands on which queue) so that a search can evaluate
// thousands of candidates without embedding each one.
package costmodel

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kind orders costs: ok < any value < any reject.
type Kind int

// Cost kinds, in order.
const (
	OK Kind = iota
	Value
	Reject
)

// Cost is the result of a cost function (Dragonet's shape): ok, a value
// (lower is better), or a rejection that still carries a value so a search
// can climb out of rejected configurations.
type Cost struct {
	Kind Kind
	V    float64
	Tie  float64 // second key among equal values (cycles: total after makespan)
}

// Less orders costs.
func (c Cost) Less(d Cost) bool {
	if c.Kind != d.Kind {
		return c.Kind < d.Kind
	}
	if c.Kind == OK {
		return false
	}
	const eps = 1e-9
	if math.Abs(c.V-d.V) > eps*math.Max(1, math.Abs(d.V)) {
		return c.V < d.V
	}
	return c.Tie < d.Tie-eps*math.Max(1, math.Abs(d.Tie))
}

// Equal reports whether neither cost is less than the other.
func (c Cost) Equal(d Cost) bool { return !c.Less(d) && !d.Less(c) }

// String names the kind as plan.json does: ok, value or reject.
func (k Kind) String() string {
	if k < OK || k > Reject {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

var kindNames = [...]string{OK: "ok", Value: "value", Reject: "reject"}

// MarshalText writes the kind's name (plan.json's cost kinds).
func (k Kind) MarshalText() ([]byte, error) {
	if k < OK || k > Reject {
		return nil, fmt.Errorf("no cost kind %d", int(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText reads a name MarshalText writes.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown cost kind %q; a cost is %s", b, strings.Join(kindNames[:], ", "))
}

// String is how dragonc prints a cost for people, everywhere: ok, a
// number, or reject(number), the number as FormatNumber writes it.
func (c Cost) String() string {
	switch c.Kind {
	case OK:
		return "ok"
	case Reject:
		return "reject(" + FormatNumber(c.V) + ")"
	}
	return FormatNumber(c.V)
}

// FormatNumber prints a cost figure for people: four significant digits,
// never in exponent form (346700, not 3.467e+05), and decimals only for
// the fractional part the four digits keep (0.5, 12.25, 0.0001234).
func FormatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	if r == 0 {
		return "0" // and not -0
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// Endpoint is what a cost function knows of an endpoint.
type Endpoint struct {
	Name  string
	Gold  bool
	Rate  float64 // packets per second; 0 when not declared
	Cores []int   // where the application runs; nil: anywhere
	// Listener: its packets come from many flows (a UDP or TCP
	// listener), so they can be spread over queues (Problem.Spread).
	Listener bool
	// Software cycles per packet on a queue it shares with others, and on
	// a queue where it is alone and exactly steered (demultiplexing done
	// by the filter).
	Cycles, ExclusiveCycles float64
}

// Queue is a receive queue the search may use.
type Queue struct {
	ID      int
	Core    int  // core serving its interrupt
	Default bool // the queue of last resort (misses)
}

// Share is a fraction of an endpoint's packets on one queue.
type Share struct {
	Queue int // index into Problem.Queues
	Frac  float64
	Exact bool // steered by a filter entry for this endpoint alone
}

// Problem is the fixed part of a cost evaluation.
type Problem struct {
	Endpoints []Endpoint
	Queues    []Queue
	// Engines are extra loads (cycles per second) on named cores or engines
	// that do not depend on the assignment (NIC cores, copy engine).
	Engines map[string]float64
}

// Assignment maps each endpoint to its shares.
type Assignment [][]Share

// Function is a cost function.
type Function interface {
	Name() string
	Cost(p *Problem, a Assignment) Cost
}

// ByName returns a cost function.
func ByName(name string) (Function, error) {
	switch name {
	case "balance", "":
		return Balance{}, nil
	case "priority":
		return Priority{}, nil
	case "cycles":
		return Cycles{}, nil
	case "dragonet-balance":
		return DragonetBalance{}, nil
	case "dragonet-priority":
		return DragonetPriority{GoldPerQueue: DefaultGoldPerQueue}, nil
	}
	return nil, fmt.Errorf("unknown cost function %q; choose %s", name, strings.Join(Names(), ", "))
}

// Names lists the cost functions: dragonc's own, then Dragonet's.
func Names() []string {
	return []string{"balance", "priority", "cycles", "dragonet-balance", "dragonet-priority"}
}

// weights are the endpoints' loads: each one's rate when every endpoint declares one,
// else 1 (Dragonet counts flows).
func weights(p *Problem) []float64 {
	w := make([]float64, len(p.Endpoints))
	all := len(p.Endpoints) > 0
	for _, e := range p.Endpoints {
		if e.Rate <= 0 {
			all = false
		}
	}
	for i, e := range p.Endpoints {
		if all {
			w[i] = e.Rate
		} else {
			w[i] = 1
		}
	}
	return w
}

// loads returns per-queue loads of the endpoints selected by keep.
func loads(p *Problem, a Assignment, w []float64, keep func(int) bool) []float64 {
	l := make([]float64, len(p.Queues))
	for i, shares := range a {
		if keep != nil && !keep(i) {
			continue
		}
		for _, s := range shares {
			l[s.Queue] += w[i] * s.Frac
		}
	}
	return l
}

func stddev(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v / float64(len(xs)))
}

// Balance spreads endpoints over the non-default queues: the standard
// deviation of their loads, plus the load left on the default queue (which
// serves misses and should carry no endpoint a filter or RSS can place),
// plus the load of endpoints the spread rule spreads (Problem.Spread)
// above their even share of a core (spreadTerms), plus the load served
// away from its applications' cores weighed by the Open-MX paper's
// bouncing (bounceLoad). Among equal costs the one that serves fewer
// packets away from their applications' cores wins (the tie,
// offCoreLoad).
type Balance struct{}

// Name implements Function.
func (Balance) Name() string { return "balance" }

// Cost implements Function.
func (Balance) Cost(p *Problem, a Assignment) Cost {
	w := weights(p)
	excess, exempt := spreadSums(p, a, w, nil)
	return Cost{Kind: Value, V: balance(p, a, w, nil, nil, exempt) + excess + bounceLoad(p, a, w), Tie: offCoreLoad(p, a, w)}
}

// spreadSums adds up the spread rule's terms of every endpoint: the
// excess of all, the default-queue exemption of those keep selects.
func spreadSums(p *Problem, a Assignment, w []float64, keep func(int) bool) (excess, exempt float64) {
	for i, sp := range p.spreads() {
		if i >= len(a) {
			break
		}
		x, e := p.spreadTerms(sp, p.Endpoints[i].Cores, a[i], w[i])
		excess += x
		if keep == nil || keep(i) {
			exempt += e
		}
	}
	return excess, exempt
}

// offCoreLoad is the load (in the weights balance uses) served on queues
// whose core is not one its application runs on: the cores a stack names
// are a preference the balance and priority functions weigh after their
// own objective.
func offCoreLoad(p *Problem, a Assignment, w []float64) float64 {
	var off float64
	for i, shares := range a {
		for _, s := range shares {
			if offCore(p, i, s.Queue) {
				off += w[i] * s.Frac
			}
		}
	}
	return off
}

// bounceLoad is the load-equivalent of processing packets away from
// their applications' cores: each such packet costs BouncePenalty cycles
// more (the Open-MX paper's cache-line bouncing), as much as
// BouncePenalty/Cycles more packets of the endpoint's receive path
// (bounceWeight). balance and priority add it to their objective, so
// that a rule or RSS that keeps an endpoint on its own cores wins
// whenever the imbalance it causes costs less than the bouncing it
// saves.
func bounceLoad(p *Problem, a Assignment, w []float64) float64 {
	var b float64
	for i, shares := range a {
		for _, s := range shares {
			if offCore(p, i, s.Queue) {
				b += w[i] * s.Frac * p.Endpoints[i].bounceWeight()
			}
		}
	}
	return b
}

// bounceWeight is BouncePenalty in packets of e's receive path: the
// penalty over its software cycles a packet (1 when they are not known).
func (e Endpoint) bounceWeight() float64 {
	if e.Cycles <= 0 {
		return 1
	}
	return BouncePenalty / e.Cycles
}

// offCore reports whether endpoint i's application runs on named cores
// none of which serves queue q.
func offCore(p *Problem, i, q int) bool {
	cores := p.Endpoints[i].Cores
	return cores != nil && !slices.Contains(cores, p.Queues[q].Core)
}

// balance is the deviation of the loads over the non-default queues (of
// those queues selects) plus the default queue's load less exempt, the
// spread endpoints' share of it.
func balance(p *Problem, a Assignment, w []float64, keep func(int) bool, queues func(int) bool, exempt float64) float64 {
	l := loads(p, a, w, keep)
	var nondef []float64
	var def float64
	for qi, q := range p.Queues {
		if queues != nil && !queues(qi) {
			continue
		}
		if q.Default {
			def += l[qi]
		} else {
			nondef = append(nondef, l[qi])
		}
	}
	if len(nondef) == 0 {
		return 0 // one queue: nothing to balance
	}
	def = max(0, def-exempt)
	var sum float64
	for _, x := range nondef {
		sum += x
	}
	sd := stddev(nondef)
	if sd < 1e-7*(sum+def+1) {
		sd = 0
	}
	return sd + def
}

// Priority gives gold endpoints queues of their own. Rejected when gold
// endpoints lack exclusive queues (by the shortfall); penalised when
// best-effort endpoints are left on the default queue because gold took
// every other; otherwise the balance of each class over its own queues
// (with the spread rule's terms and the bouncing, as in Balance). Ties
// go to the assignment with less load off its applications' cores.
type Priority struct{}

// Name implements Function.
func (Priority) Name() string { return "priority" }

// Cost implements Function.
func (Priority) Cost(p *Problem, a Assignment) Cost {
	w := weights(p)
	// Who uses each queue.
	users := make([]int, len(p.Queues))
	goldQ := make([]bool, len(p.Queues))
	for i, shares := range a {
		for _, s := range shares {
			if s.Frac > 0 {
				users[s.Queue]++
				if p.Endpoints[i].Gold {
					goldQ[s.Queue] = true
				}
			}
		}
	}
	shortfall := 0
	gold, be := 0, 0
	for i, shares := range a {
		if !p.Endpoints[i].Gold {
			be++
			continue
		}
		gold++
		if len(shares) != 1 || p.Queues[shares[0].Queue].Default || users[shares[0].Queue] != 1 {
			shortfall++
		}
	}
	isGold := func(i int) bool { return p.Endpoints[i].Gold }
	isBE := func(i int) bool { return !p.Endpoints[i].Gold }
	excess, exemptGold := spreadSums(p, a, w, isGold)
	_, exemptBE := spreadSums(p, a, w, isBE)
	v := balance(p, a, w, isGold, func(q int) bool { return goldQ[q] }, exemptGold) +
		balance(p, a, w, isBE, func(q int) bool { return !goldQ[q] }, exemptBE) + excess + bounceLoad(p, a, w)
	tie := offCoreLoad(p, a, w)
	if shortfall > 0 {
		return Cost{Kind: Reject, V: float64(shortfall)*1000 + v, Tie: tie}
	}
	if be > 0 {
		free := 0
		for qi, q := range p.Queues {
			if !q.Default && !goldQ[qi] {
				free++
			}
		}
		if free == 0 {
			// Best-effort traffic starves on the default queue.
			v += 100 * float64(be)
		}
	}
	return Cost{Kind: Value, V: v, Tie: tie}
}

// BouncePenalty is the extra work, in cycles per packet, when an endpoint's
// application runs on another core than the one serving its queue. The
// Open-MX paper (Goglin, "NIC-assisted Cache-Efficient Receive Stack for Message Passing over Ethernet", Table 1) measures 0-byte
// ping-pong latency of 11.4 us with the interrupt spread round-robin over
// cores against 10.96 us with it bound to one core, on 2.33 GHz Xeon E5345
// hosts: 0.44 us, about 1,025 cycles a message, from cache-line bounces.
const BouncePenalty = 1025

// DefaultRate is the packet rate assumed for an endpoint that declares none
// when cycles are computed (so that such endpoints still count).
const DefaultRate = 1000

// Cycles predicts CPU cycles per second on each core: for every endpoint
// its rate times the software cycles left on its queue's pipeline, plus the
// bounce penalty when its application runs elsewhere, plus fixed engine
// loads. The objective is the busiest core (makespan), then the total.
type Cycles struct{}

// Name implements Function.
func (Cycles) Name() string { return "cycles" }

// Cost implements Function.
func (Cycles) Cost(p *Problem, a Assignment) Cost {
	cores := CoreLoads(p, a)
	var makespan, total float64
	for _, v := range cores {
		total += v
		makespan = math.Max(makespan, v)
	}
	return Cost{Kind: Value, V: makespan, Tie: total}
}

// CoreLoads returns the predicted cycles per second on every core (and
// engine), keyed "core N" or the engine's name.
func CoreLoads(p *Problem, a Assignment) map[string]float64 {
	out := map[string]float64{}
	for k, v := range p.Engines {
		out[k] += v
	}
	users := make([]int, len(p.Queues))
	for _, shares := range a {
		for _, s := range shares {
			users[s.Queue]++
		}
	}
	for i, shares := range a {
		e := p.Endpoints[i]
		rate := e.Rate
		if rate <= 0 {
			rate = DefaultRate
		}
		for _, s := range shares {
			q := p.Queues[s.Queue]
			cyc := e.Cycles
			if s.Exact && users[s.Queue] == 1 {
				cyc = e.ExclusiveCycles
			}
			if offCore(p, i, s.Queue) {
				cyc += BouncePenalty
			}
			out[fmt.Sprintf("core %d", q.Core)] += rate * s.Frac * cyc
		}
	}
	return out
}
