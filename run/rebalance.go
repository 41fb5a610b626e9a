package run

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
)

// Rebalancing defaults (Rebalancer's fields; `dragonc run --rebalance`).
const (
	// DefaultRebalanceThreshold is the least gain a re-plan must bring:
	// the plan served must cost, at the measured rates, more than 1.2
	// times the plan made from them.
	DefaultRebalanceThreshold = 0.2
	// RebalanceHold is how long an endpoint that changed queues stays
	// where it went: no endpoint moves twice within it, so loads that
	// alternate faster than that never make it go back and forth.
	RebalanceHold = 10 * time.Second
	// RebalanceMinFrames is how many endpoint frames an interval must
	// count before its rates decide anything: fewer measure too coarsely.
	RebalanceMinFrames = 1000
	// RebalanceFloor is the least a re-plan must save, as a fraction of
	// the measured rate, in the cost's unit (frames a second for balance
	// and priority): the noise of nearly even loads can make a plan a
	// fifth cheaper than another when both are almost even, which is no
	// gain worth a move.
	RebalanceFloor = 0.05
)

// Rebalancer decides, from measured rates, whether to re-plan a served
// stack: it plans again with each endpoint's declared rate replaced by
// its measured one (an embed.Session of the plan served, SetRates: the
// incremental search, in milliseconds at 10,000 endpoints; atRates) and
// says re-plan when the
// plan served costs more at those rates (CostAtRates) than Threshold
// above the new plan's cost, unless that moves an endpoint that moved
// within Hold. It keeps no clock: the Load's time is the decision's, so
// a test's loads carry any times. A program serving a stack drives its
// own re-planning with it (Decide, then Applied once the plan serves).
type Rebalancer struct {
	Threshold float64       // DefaultRebalanceThreshold when 0
	Hold      time.Duration // RebalanceHold when 0
	MinFrames uint64        // RebalanceMinFrames when 0
	// NoPlan leaves a re-plan's Decision.Plan nil: the caller serves
	// the moves from its own session at Decision.Rates (dragonc run's
	// serving does), and Applied records them; the plan served comes
	// back through Served.
	NoPlan bool
	cur    *dembed.Result
	moved  map[string]time.Time // each endpoint's last change of queues
}

// NewRebalancer starts from the plan served, r.
func NewRebalancer(r *dembed.Result) *Rebalancer {
	return &Rebalancer{cur: r, moved: map[string]time.Time{}}
}

// Current is the plan the rebalancer takes as served.
func (b *Rebalancer) Current() *dembed.Result { return b.cur }

// Decision is what Decide concluded from a Load.
type Decision struct {
	At     time.Time
	Replan bool
	// Plan is the plan at the measured rates when Decide re-plans (nil
	// otherwise: only a re-plan needs the Result); Cost what the plan
	// served costs at those rates and Best what the plan at them costs;
	// Gain is Cost over Best, less 1 (+Inf for a better kind of cost).
	Plan       *dembed.Result
	Rates      map[string]float64 // the measured rates planned at
	Cost, Best costmodel.Cost
	Gain       float64
	// Moves are the endpoints Plan puts on other queues; Held those of
	// them that moved within Hold, which keep Plan from being served.
	Moves []Move
	Held  []Move
	Why   string // in words: why (not) re-plan
}

// Move is an endpoint's change of queues; Last is when it last moved
// (zero if never).
type Move struct {
	Endpoint string
	From, To []int
	Last     time.Time
}

func (m Move) String() string {
	return fmt.Sprintf("%s from queue %s to %s", m.Endpoint, ints(m.From), ints(m.To))
}

// Decide decides on the load l, at l.At.
func (b *Rebalancer) Decide(l *Load) (Decision, error) {
	d := Decision{At: l.At}
	minFrames, threshold, hold := b.MinFrames, b.Threshold, b.Hold
	if minFrames == 0 {
		minFrames = RebalanceMinFrames
	}
	if threshold == 0 {
		threshold = DefaultRebalanceThreshold
	}
	if hold == 0 {
		hold = RebalanceHold
	}
	if n := l.Frames(); n < minFrames {
		d.Why = fmt.Sprintf("%d endpoint frames in %.2f s: too few to measure (%d)", n, l.Seconds, minFrames)
		return d, nil
	}
	// A measured rate of 0 counts as 1 frame a second: a rate of 0 is
	// an undeclared one, for which the cost model counts flows instead.
	rates := l.Rates()
	var total float64
	for name, v := range rates {
		rates[name] = max(v, 1)
		total += v
	}
	d.Rates = rates
	var err error
	if d.Cost, err = b.cur.CostAtRates(rates); err != nil {
		return d, err
	}
	// The endpoints that moved within the hold stay where they are: the
	// session's search moves the others (a full re-plan cannot be told,
	// and is held back below if it moves them).
	var held []string
	for name, at := range b.moved {
		if l.At.Sub(at) < hold {
			held = append(held, name)
		}
	}
	slices.Sort(held)
	plan, err := b.atRates(rates, held, &d)
	if err != nil {
		return d, err
	}
	d.Gain = gain(d.Cost, d.Best)
	small := d.Cost.Kind == costmodel.Value && d.Best.Kind == costmodel.Value && d.Cost.V-d.Best.V < RebalanceFloor*total
	for i := range d.Moves {
		d.Moves[i].Last = b.moved[d.Moves[i].Endpoint]
	}
	switch {
	case len(d.Moves) == 0:
		d.Why = "the plan at the measured rates keeps every endpoint where it is"
	case d.Gain <= threshold:
		d.Why = fmt.Sprintf("the plan at the measured rates would cost %v instead of %v: a gain of %s, not above %.0f%%", d.Best, d.Cost, percent(d.Gain), 100*threshold)
	case small:
		d.Why = fmt.Sprintf("the plan at the measured rates would cost %v instead of %v: less than %.0f%% of the measured rate saved", d.Best, d.Cost, 100*RebalanceFloor)
	default:
		for _, m := range d.Moves {
			if !m.Last.IsZero() && l.At.Sub(m.Last) < hold {
				d.Held = append(d.Held, m)
			}
		}
		if len(d.Held) > 0 {
			var names []string
			for _, m := range d.Held {
				names = append(names, fmt.Sprintf("%s moved %.1f s ago", m.Endpoint, l.At.Sub(m.Last).Seconds()))
			}
			d.Why = fmt.Sprintf("the plan at the measured rates would gain %s, but %s (an endpoint moves at most once in %v)", percent(d.Gain), strings.Join(names, ", "), hold)
			break
		}
		if !b.NoPlan {
			if d.Plan, err = plan(); err != nil {
				return d, err
			}
		}
		d.Replan = true
		d.Why = fmt.Sprintf("the plan at the measured rates costs %v instead of %v (a gain of %s, above %.0f%%)", d.Best, d.Cost, percent(d.Gain), 100*threshold)
	}
	return d, nil
}

// atRates plans at the measured rates from the plan served: a session of
// it (embed.Session.SetRates: the incremental search moves what the new
// rates make worth moving, each move kept only when it saves
// embed.MoveThreshold, and touches nothing else; held endpoints do not
// move, embed.Session.Hold), or, for a plan no
// session starts from (one read from a file), a full re-plan
// (Result.PlanAtRates). It sets d's Best and Moves and returns what
// makes the plan (a session's costs the time of an embedding: only a
// re-plan needs it).
func (b *Rebalancer) atRates(rates map[string]float64, held []string, d *Decision) (func() (*dembed.Result, error), error) {
	ss, err := dembed.NewSession(b.cur)
	if err != nil {
		p, err := b.cur.PlanAtRates(rates)
		if err != nil {
			return nil, err
		}
		d.Best, d.Moves = p.Cost, moves(b.cur, p)
		return func() (*dembed.Result, error) { return p, nil }, nil
	}
	ss.Hold(held...)
	delta, err := ss.SetRates(rates)
	if err != nil {
		return nil, err
	}
	d.Best = delta.Cost
	order := map[string]int{}
	for i, e := range b.cur.Plan.Endpoints {
		order[e.Name] = i
	}
	for _, q := range delta.Queues {
		d.Moves = append(d.Moves, Move{Endpoint: q.Endpoint, From: q.From, To: q.To})
	}
	slices.SortFunc(d.Moves, func(x, y Move) int { return order[x.Endpoint] - order[y.Endpoint] })
	return ss.Result, nil
}

// Applied says the plan of d (a re-plan Decide asked for) now serves:
// its moves count from d.At.
func (b *Rebalancer) Applied(d Decision) {
	if !d.Replan {
		return
	}
	for _, m := range d.Moves {
		b.moved[m.Endpoint] = d.At
	}
	if d.Plan != nil {
		b.cur = d.Plan
	}
}

// Served makes r the plan served, which the rebalancer did not choose (a
// reload of another stack): later decisions start from it.
func (b *Rebalancer) Served(r *dembed.Result) { b.cur = r }

// gain is how much cheaper best is than cost, relative to best.
func gain(cost, best costmodel.Cost) float64 {
	switch {
	case best.Kind < cost.Kind:
		return math.Inf(1)
	case best.Kind > cost.Kind:
		return math.Inf(-1)
	case cost.Kind == costmodel.OK:
		return 0
	}
	if best.V <= 0 {
		if cost.V > 0 {
			return math.Inf(1)
		}
		return 0
	}
	return (cost.V - best.V) / best.V
}

func percent(g float64) string {
	if math.IsInf(g, 1) {
		return "a better kind of cost"
	}
	return fmt.Sprintf("%.0f%%", 100*g)
}

// moves lists the endpoints whose queues differ between two plans, in
// the stack's order.
func moves(from, to *dembed.Result) []Move {
	queues := func(r *dembed.Result) map[string][]int {
		out := map[string][]int{}
		for _, e := range r.Plan.Endpoints {
			out[e.Name] = e.Queues
		}
		return out
	}
	a, b := queues(from), queues(to)
	var out []Move
	for _, e := range to.Plan.Endpoints {
		if !slices.Equal(a[e.Name], b[e.Name]) {
			out = append(out, Move{Endpoint: e.Name, From: a[e.Name], To: b[e.Name]})
		}
	}
	return out
}

// rebalancing is a serving's Rebalancer: a decision runs on its own
// goroutine (planning can take a while), one at a time; what it decides is
// noted when it differs from what was last noted.
type rebalancing struct {
	b    *Rebalancer
	busy atomic.Bool
	wg   sync.WaitGroup
	said string
	// served is a plan a reload served since the last decision, which
	// the next starts from (Rebalancer.Served).
	served atomic.Pointer[dembed.Result]
}

// startRebalance sets up Options.Rebalance.
func (sv *serving) startRebalance() error {
	if !sv.opt.Rebalance {
		return nil
	}
	t := sv.opt.RebalanceThreshold
	if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
		return usage("--rebalance-threshold %v: want a fraction above 0 (0.2 is 20%%)", t)
	}
	if sv.opt.Every <= 0 {
		return usage("--rebalance needs rates to measure: --every must be above 0")
	}
	rb := &rebalancing{b: NewRebalancer(sv.r)}
	rb.b.Threshold = t
	rb.b.NoPlan = true // served from the serving's session (applyRates)
	sv.rebalance = rb
	sv.cleanup = append(sv.cleanup, rb.wg.Wait)
	sv.load.onLoad = append(sv.load.onLoad, sv.rebalanceOn)
	return nil
}

// rebalanceOn decides on a measured load, unless a decision is still
// being made.
func (sv *serving) rebalanceOn(l *Load) {
	rb := sv.rebalance
	if !rb.busy.CompareAndSwap(false, true) {
		return
	}
	rb.wg.Add(1)
	go func() {
		defer rb.wg.Done()
		defer rb.busy.Store(false)
		if r := rb.served.Swap(nil); r != nil {
			rb.b.Served(r)
		}
		d, err := rb.b.Decide(l)
		var msg, key string
		switch {
		case err != nil:
			msg = fmt.Sprintf("rebalance: re-planning from the measured rates failed: %v", err)
			key = msg
		case d.Replan:
			var ms []string
			for _, m := range d.Moves {
				ms = append(ms, m.String())
			}
			key = strings.Join(ms, ", ")
			msg = fmt.Sprintf("rebalance: %s; it moves %s", d.Why, key)
			var err error
			if d.Plan != nil {
				err = sv.applyPlan(d.Plan, d.Plan.Stack())
			} else {
				err = sv.applyRates(d.Rates)
			}
			if err != nil {
				msg += fmt.Sprintf(": not applied, %v", err)
			} else {
				rb.b.Applied(d)
				if d.Plan != nil {
					sv.load.mu.Lock()
					sv.meterOf().Follow(d.Plan)
					sv.load.mu.Unlock()
				}
				key = ""
			}
		}
		// A move not applied is said once, not again each report.
		if key == "" || key != rb.said {
			if msg != "" {
				sv.out.note("rebalance", "%s", msg)
			}
			rb.said = key
		}
	}()
}
