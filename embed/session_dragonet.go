package embed

import (
	"fmt"
	"slices"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/lpg"
)

// dragonetSorted is the order Dragonet's incremental search takes the
// flows a change adds in: the set of added flows as a list (S.toList of
// fsAdded, Search.hs lines 1109 and 1115), in the order of Flows.hs's Flow (lines
// 43-51: derived Ord over source address, destination address,
// destination port, source port, each Nothing before any value), then
// isOrderFlows: gold first for the priority functions, as listed
// otherwise (dragonetOrder). Dragonet's Flow is UDP's; TCP endpoints are
// ordered as if they were, and endpoints of other protocols come last.
func dragonetSorted(p *problem, eps []*lpg.Endpoint) []*lpg.Endpoint {
	eps = slices.Clone(eps)
	slices.SortStableFunc(eps, compareFlows)
	switch p.in.Cost.(type) {
	case costmodel.Priority, costmodel.DragonetPriority:
		out := make([]*lpg.Endpoint, 0, len(eps))
		for pass := 0; pass < 2; pass++ {
			for _, e := range eps {
				if (e.Class == lpg.Gold) == (pass == 0) {
					out = append(out, e)
				}
			}
		}
		return out
	}
	return eps
}

// dragonetAdd adds a flow as incSearchGreedyFlows_ does (Search.hs lines
// 1170-1206): the oracle's offers, costed by incSearchMinCost.
func (ss *Session) dragonetAdd(le *lpg.Endpoint) error {
	i := ss.addEndpoint(le)
	if err := ss.dragonetPlace(i); err != nil {
		return fmt.Errorf("dragonet-incremental: %w; Dragonet's search stops there (Search.hs line 1187, \"Run out of CCs\"), and so does this session", err)
	}
	return nil
}

// dragonetPlace places flow i, which has no entry: the oracle's offers
// (dragonetIncrOffers), costed in order over every current flow, keeping
// the first cheapest and stopping once five more than the first were
// costed and the best is acceptable (incSearchMinCost and stopFoldM,
// lines 1209-1259). A flow no table of the NIC can hold stays on the
// catch-all queue, as dragonet-greedy leaves it.
func (ss *Session) dragonetPlace(i int) error {
	p, s := ss.p, ss.s
	e := p.eps[i]
	if !e.steerable() {
		return nil
	}
	offers, from := ss.dragonetIncrOffers(i)
	if len(offers) == 0 {
		return fmt.Errorf("the oracle offers nothing for endpoint %s: every table that can hold it is full", e.ep.Name)
	}
	best, bestCost := 0, costmodel.Cost{}
	for k, c := range offers {
		s.set(i, c)
		if cost := s.ev.Cost(); k == 0 || cost.Less(bestCost) {
			best, bestCost = k, cost
		}
		if k >= 5 && bestCost.Kind != costmodel.Reject {
			break
		}
	}
	s.set(i, offers[best])
	if k := from[best]; k >= 0 {
		// The orphan's entry now steers this flow: same table, queue and
		// slot, and its place in Dragonet's list of entries.
		o := ss.orphans[k]
		ss.orphans = slices.Delete(ss.orphans, k, k+1)
		s.used[o.t.idx]--
		ss.own(o.t, o.slot, e)
		e.slot = o.slot
		p.rank[i] = o.rank
		if ss.repurposed == nil {
			ss.repurposed = map[*endpoint]string{}
		}
		ss.repurposed[e] = o.entry.Endpoint
		return nil
	}
	ss.seq++
	p.rank[i] = ss.seq
	return nil
}

// dragonetIncrOffers is the E10k oracle's flowConfChangesS for flow i
// (Search.hs lines 1328-1365), on this NIC's tables in the NIC's order,
// as dragonetOffers maps its flowConfChanges: the entries whose flow
// left that a table holding the flow has, the newest inserted first,
// each on its own queue; with those, while the first table that can hold the flow has
// room, an entry there to each queue they leave uncovered, in ascending
// order; without them, entries in the first table that can hold the flow
// and has room, to each queue from the start queue on. Queue 0 is never
// a target. from says, per offer, which orphan it repurposes (-1: a new
// entry). The start queue turns when something is offered.
func (ss *Session) dragonetIncrOffers(i int) (offers []choice, from []int) {
	p, s := ss.p, ss.s
	e := p.eps[i]
	holds := func(t *table) bool {
		return e.match[t.idx] != nil && (t.identity || len(t.sp.Wildcard) > 0 || e.fullySpecified())
	}
	covered := map[int]bool{}
	for k, o := range ss.orphans {
		if holds(o.t) && (!o.t.sp.GlobalMask || s.shapeN[o.t.idx] == 0 || s.shape[o.t.idx] == e.shape) {
			offers = append(offers, o.c())
			from = append(from, k)
			covered[o.q] = true
		}
	}
	if len(offers) > 0 {
		for _, t := range p.tables {
			if !holds(t) {
				continue
			}
			if s.canUse(t, i) {
				for _, q := range t.targets {
					if q > 0 && !covered[q] {
						offers = append(offers, choice{t, q})
						from = append(from, -1)
					}
				}
			}
			break // only the first table that can hold the flow (the five-tuple filters)
		}
	} else {
		for _, t := range p.tables {
			if !holds(t) || !s.canUse(t, i) {
				continue
			}
			var qs []int
			for _, q := range t.targets {
				if q > 0 {
					qs = append(qs, q)
				}
			}
			for k := range qs {
				offers = append(offers, choice{t, qs[(k+ss.startQ)%len(qs)]})
				from = append(from, -1)
			}
			break
		}
	}
	if len(offers) > 0 {
		ss.startQ = (ss.startQ + 1) % len(p.queues)
	}
	return offers, from
}

// orphan takes endpoint i's entry from it and leaves it in its table,
// steering nothing, as FM.rmFlow does (FlowMap.hs lines 393-428: the
// entry keeps its place in the configuration state, which lists entries
// the newest inserted first, line 624).
func (ss *Session) orphan(i int) {
	s, e := ss.s, ss.p.eps[i]
	c := s.choice[i]
	o := orphan{t: c.t, q: c.q, slot: e.slot, rank: ss.p.rank[i], entry: ss.entry(e, c)}
	k, _ := slices.BinarySearchFunc(ss.orphans, o.rank, func(x orphan, rank int) int { return rank - x.rank })
	ss.orphans = slices.Insert(ss.orphans, k, o)
	ss.own(c.t, e.slot, nil)
	e.slot = -1
	s.set(i, choice{})
	s.used[c.t.idx]++ // the orphan keeps its place
}

// c is the orphan's entry as a choice.
func (o orphan) c() choice { return choice{o.t, o.q} }

// dragonetJump is Dragonet's jump when the cost is rejected (Search.hs
// lines 1127-1164) with its default confJump, which discards every
// entry: every entry becomes an orphan, and every flow is searched
// again, in Dragonet's order, reusing them. A flow the oracle then has
// nothing for stays on the catch-all queue. Once (see
// NewDragonetSession).
func (ss *Session) dragonetJump() {
	p, s := ss.p, ss.s
	if s.ev.Cost().Kind != costmodel.Reject {
		return
	}
	if ss.quiet && len(p.eps) > shadowJumpMax {
		// A session's shadow: the session stops following it.
		ss.err = fmt.Errorf("dragonet-incremental: a jump over %d flows, more than a shadow re-places (%d)", len(p.eps), shadowJumpMax)
		return
	}
	for i, c := range s.choice {
		if c.t != nil {
			ss.orphan(i)
		}
	}
	idx := map[*lpg.Endpoint]int{}
	for i, e := range p.eps {
		idx[e.ep] = i
	}
	for _, le := range dragonetSorted(p, slices.Clone(p.in.Stack.Endpoints)) {
		_ = ss.dragonetPlace(idx[le]) // a flow with no offer stays on the catch-all
	}
}

// shadowJumpMax bounds the flows a session's shadow re-places in a jump:
// Dragonet's jump searches every flow again, each over every current
// flow, so its time grows with the square of their number (0.37 s a
// change at 1,000 listeners under priority here, against 0.5 ms for the
// session's own repairs). A shadow that would jump over more stops, and
// the session goes on without it (Session's comment says what that
// leaves unbounded).
const shadowJumpMax = 128

// compareFlows orders endpoints as Flows.hs's derived Ord orders
// Dragonet's flows (dragonetSorted).
func compareFlows(a, b *lpg.Endpoint) int {
	ka, kb := flowKey(a), flowKey(b)
	return slices.Compare(ka[:], kb[:])
}

// flowKey is an endpoint as Dragonet's Flow: not a flow (0) or a flow
// (1), then source address, destination address, destination port and
// source port, each a Maybe: 0 for Nothing, else 1 and the value.
func flowKey(e *lpg.Endpoint) [9]int64 {
	if e.Proto != lpg.UDP && e.Proto != lpg.TCP {
		return [9]int64{1}
	}
	maybe := func(ok bool, v int64) (int64, int64) {
		if !ok {
			return 0, 0
		}
		return 1, v
	}
	var k [9]int64
	k[1], k[2] = maybe(e.Flow, int64(e.Remote))
	k[3], k[4] = maybe(!e.AnyAddr, int64(e.Addr))
	k[5], k[6] = maybe(true, int64(e.Port))
	k[7], k[8] = maybe(e.Flow, int64(e.RPort))
	return k
}
