package embed

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/internal/solver"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
)

// packetBox is a set of frames (the packets of an endpoint, or those an
// entry matches).
type packetBox = *solver.Box

func endpointBox(e *lpg.Endpoint) packetBox {
	b, _ := solver.Restrict(solver.Universe(), lpg.EndpointPredicate(e))
	return b
}

func intersects(a, b packetBox) bool { return solver.Intersects(a, b) }

// choice is how one endpoint is steered: an entry in a table to a queue, or
// no entry (RSS or the default queue).
type choice struct {
	t *table // nil: no entry
	q int    // queue index
}

// state is a candidate solution with its evaluator.
type state struct {
	p      *problem
	mode   int // index into p.modes: how the RSS table is set
	choice []choice
	// placed, when not nil, says which endpoints the cost sees: Dragonet's
	// greedy search evaluates each step over the flows placed so far.
	placed []bool
	// dragonetPrio: every entry at Dragonet's one priority (1), so the
	// NIC orders overlapping entries by insertion alone (problem.rank).
	dragonetPrio bool
	// firstMatch: shares is Dragonet's QMap, which counts a flow whole
	// against the first entry whose match its packets can satisfy
	// (Search.hs lines 840-853, doFlowQueueNextPort_: "we assume that each
	// flow is assigned exclusively to a single queue, so we return the
	// first match"), not dragonc's split over the entries that take a
	// part of them.
	firstMatch bool
	moveBuf    []choice // moveSweep's list of moves, reused
	qscratch   []int    // shares' list of queues, reused
	cscratch   []cand   // shares' list of entries, reused
	used       []int    // per table (table.idx): entries in use
	shape      []string // global-mask tables: the shape of their entries
	shapeN     []int
	ev         *costmodel.Evaluator
	scratch    []costmodel.Share // shares' result, valid until the next call (the evaluator copies it)
	// watch, when set, is told of every endpoint whose choice or shares
	// set is about to change (touch).
	watch func(i int)
	// ovx holds the overlapIndex of endpoints whose packets overlap many
	// others'.
	ovx map[*endpoint]*overlapIndex
	// loose counts, when countLoose, the endpoints whose own entry does
	// not cover their packets (a Session's Cost).
	loose      int
	countLoose bool
}

func (p *problem) newState(mode int) *state {
	nt := len(p.tables)
	s := &state{p: p, mode: mode, choice: make([]choice, len(p.eps)), used: make([]int, nt), shape: make([]string, nt), shapeN: make([]int, nt),
		dragonetPrio: p.dragonetSpace, firstMatch: p.dragonetSpace}
	s.ev = costmodel.NewEvaluator(p.cp, p.in.Cost, nil)
	for i := range p.eps {
		s.ev.Set(i, s.shares(i))
	}
	if _, ok := p.emptyCost[mode]; !ok {
		if p.emptyCost == nil {
			p.emptyCost = map[int]costmodel.Cost{}
		}
		p.emptyCost[mode] = s.ev.Cost()
	}
	return s
}

// costWithoutEntries is the cost of mode with no entry anywhere.
func (p *problem) costWithoutEntries(mode int) costmodel.Cost {
	if c, ok := p.emptyCost[mode]; ok {
		return c
	}
	return p.newState(mode).ev.Cost()
}

// snapshot copies the choices (not the evaluator), to restore them later.
func (s *state) snapshot() []choice { return slices.Clone(s.choice) }

func (s *state) restore(cs []choice) {
	for i, c := range cs {
		if s.choice[i] != c {
			s.set(i, c)
		}
	}
}

// canUse reports whether t can take one more entry of endpoint i.
func (s *state) canUse(t *table, i int) bool {
	e := s.p.eps[i]
	if e.match[t.idx] == nil {
		return false
	}
	if s.choice[i].t == t {
		return true
	}
	if t.sp.Capacity > 0 && s.used[t.idx] >= t.sp.Capacity {
		return false
	}
	if t.sp.GlobalMask && s.shapeN[t.idx] > 0 && s.shape[t.idx] != e.shape {
		return false
	}
	return true
}

// set changes endpoint i's choice and updates the evaluator for it and the
// endpoints whose packets overlap it.
func (s *state) set(i int, c choice) {
	s.touch(i)
	old := s.choice[i]
	if s.countLoose {
		s.loose += s.looseIn(i, c) - s.looseIn(i, old)
	}
	if old.t != nil {
		s.used[old.t.idx]--
		if old.t.sp.GlobalMask {
			s.shapeN[old.t.idx]--
		}
	}
	s.choice[i] = c
	if c.t != nil {
		s.used[c.t.idx]++
		if c.t.sp.GlobalMask {
			if s.shapeN[c.t.idx] == 0 {
				s.shape[c.t.idx] = s.p.eps[i].shape
			}
			s.shapeN[c.t.idx]++
		}
	}
	if s.ovx != nil {
		s.moved(i, i, old, c) // its own entry is one of its index's
	}
	s.ev.Set(i, s.seen(i))
	for _, j := range s.p.eps[i].over {
		if s.ovx != nil {
			s.moved(j, i, old, c)
		}
		s.ev.Set(j, s.seen(j))
	}
}

// looseIn is 1 when choice c gives endpoint i an entry that does not
// cover its packets, else 0.
func (s *state) looseIn(i int, c choice) int {
	if c.t != nil && s.p.relation(i, -1, i, c.t) != 2 {
		return 1
	}
	return 0
}

// touch tells the state's watcher (a Session) that endpoint i's choice or
// shares are about to change, and those of the endpoints whose packets
// overlap it.
func (s *state) touch(i int) {
	if s.watch == nil {
		return
	}
	s.watch(i)
	for _, j := range s.p.eps[i].over {
		s.watch(j)
	}
}

// seen is endpoint i's shares as the cost sees them: none while it is not
// placed.
func (s *state) seen(i int) []costmodel.Share {
	if s.placed != nil && !s.placed[i] {
		return nil
	}
	if s.indexed(i) {
		return s.indexedShares(i)
	}
	return s.shares(i)
}

// place marks endpoint i as placed (Dragonet's greedy search).
func (s *state) place(i int) {
	s.placed[i] = true
	s.ev.Set(i, s.shares(i))
}

// entryBox is the box endpoint i's entry in t matches, kept with i.
func (p *problem) entryBox(i int, t *table) packetBox {
	ep := p.eps[i]
	if ep.entry == nil {
		ep.entry = make([]packetBox, len(p.tables))
	}
	if b := ep.entry[t.idx]; b != nil {
		return b
	}
	e := prg.Entry{Match: ep.match[t.idx]}
	b, _ := solver.Restrict(solver.Universe(), e.Predicate(t.sp))
	ep.entry[t.idx] = b
	return b
}

// cand is an entry shares tries for an endpoint's packets.
type cand struct {
	k, j  int // j is e.over[k], or the endpoint itself (k = -1)
	seq   int // among entries of one priority, lower is tried first
	order int
	prio  int
}

// shares works out, into a buffer valid until its next call, where
// endpoint i's packets go under the current choices: through the first
// entry, in the NIC's order, whose match
// covers them (its own, or an overlapping endpoint's), else by RSS or to
// the default queue. Partial overlaps split the packets evenly, an
// over-approximation the embedding refines. With firstMatch the first
// entry that takes any of them takes the endpoint whole (Dragonet's QMap).
// Entries of one table and priority are tried in declaration order, or
// with Dragonet's one priority in Dragonet's order of insertion.
func (s *state) shares(i int) []costmodel.Share {
	e := s.p.eps[i]
	cands := s.cscratch[:0]
	defer func() { s.cscratch = cands[:0] }()
	for k := -1; k < len(e.over); k++ {
		j := i
		if k >= 0 {
			j = e.over[k]
		}
		if c := s.choice[j]; c.t != nil {
			prio, seq := s.p.eps[j].prio, j
			if s.dragonetPrio {
				prio, seq = 0, s.p.rank[j]
			}
			cands = append(cands, cand{k, j, seq, c.t.order, prio})
		}
	}
	// k last: the order they were listed in among equals.
	byOrder := func(a, b cand) int {
		if a.order != b.order {
			return cmp.Compare(a.order, b.order)
		}
		if a.prio != b.prio {
			return cmp.Compare(b.prio, a.prio)
		}
		if a.seq != b.seq {
			return cmp.Compare(a.seq, b.seq)
		}
		return cmp.Compare(a.k, b.k)
	}
	qs := s.qscratch[:0]
	defer func() { s.qscratch = qs[:0] }()
	covered := false
	winner := -1
	if s.firstMatch {
		// Only the first entry that takes any of them counts: the least
		// of those, without sorting them all.
		best := -1
		for x, c := range cands {
			if (best < 0 || byOrder(c, cands[best]) < 0) && s.p.relation(i, c.k, c.j, s.choice[c.j].t) != 0 {
				best = x
			}
		}
		if best >= 0 {
			c := cands[best]
			qs = append(qs, s.choice[c.j].q)
			covered, winner = true, c.j
		}
	} else {
		// The first entry that covers them, and every one before it that
		// takes a part of them (in any order: the queues are sorted).
		cut := -1
		for x, c := range cands {
			if (cut < 0 || byOrder(c, cands[cut]) < 0) && s.p.relation(i, c.k, c.j, s.choice[c.j].t) == 2 {
				cut = x
			}
		}
		for x, c := range cands {
			if x == cut || (cut < 0 || byOrder(c, cands[cut]) < 0) && s.p.relation(i, c.k, c.j, s.choice[c.j].t) != 0 {
				qs = append(qs, s.choice[c.j].q)
			}
		}
		if cut >= 0 {
			covered, winner = true, cands[cut].j
		}
	}
	out := s.scratch[:0]
	if covered && len(qs) == 1 {
		s.scratch = append(out, costmodel.Share{Queue: qs[0], Frac: 1, Exact: winner == i})
		return s.scratch
	}
	if !covered {
		qs = append(qs, s.fallback(i)...)
	}
	slices.Sort(qs)
	qs = slices.Compact(qs)
	for _, q := range qs {
		out = append(out, costmodel.Share{Queue: q, Frac: 1 / float64(len(qs))})
	}
	s.scratch = out
	return out
}

// relation says how endpoint j's entry in t relates to endpoint i's
// packets: 0 disjoint, 1 overlapping, 2 covering. j is i itself (k = -1)
// or i's k-th overlapping endpoint (over[k]). Boxes never change, so the
// answer is kept, with i, for every state of the problem.
func (p *problem) relation(i, k, j int, t *table) int8 {
	e := p.eps[i]
	if n := (len(e.over) + 1) * len(p.tables); len(e.rel) != n {
		e.rel = make([]int8, n) // over is complete before any search
	}
	slot := (k+1)*len(p.tables) + t.idx
	if r := e.rel[slot]; r != 0 {
		return r - 1
	}
	eb := p.entryBox(j, t)
	var r int8
	switch {
	case solver.Subset(p.eps[i].box, eb):
		r = 2
	case intersects(p.eps[i].box, eb):
		r = 1
	}
	e.rel[slot] = r + 1
	return r
}

// fallback is where RSS (or the lack of it) sends an endpoint's packets
// in the state's mode.
func (s *state) fallback(i int) []int {
	e := s.p.eps[i]
	qs := s.p.modes[s.mode].queues
	switch {
	case e.ep.Proto == lpg.OpenMX || len(qs) == 0:
		return queueZero
	case e.rssQueue[s.mode] >= 0:
		return e.rssQueue[s.mode : s.mode+1]
	}
	return qs
}

// queueZero is the default queue alone; callers only read it.
var queueZero = []int{0}

// order lists endpoints gold first, then in declaration order.
func (p *problem) order() []int {
	idx := make([]int, 0, len(p.eps))
	for pass := 0; pass < 2; pass++ {
		for i, e := range p.eps {
			if (e.ep.Class == lpg.Gold) == (pass == 0) {
				idx = append(idx, i)
			}
		}
	}
	return idx
}

// search runs a strategy and returns the final state.
func (p *problem) search(strategy Strategy) (*state, error) {
	switch strategy {
	case StrategyDragonetGreedy:
		return p.dragonetGreedy()
	case StrategyDefault, "":
		return p.searchModes(), nil
	case StrategyIncremental:
		return p.incremental()
	}
	return nil, fmt.Errorf("unknown strategy %q; choose %v", strategy, Strategies())
}

// searchModes is the default strategy: for every RSS mode the driver can
// set, start from the cheaper of greedy's solution and the mode with no
// entry at all (RSS only, or everything on the default queue), improve
// locally, search small inputs exactly, and keep the cheapest. The plan
// is therefore never costlier than greedy, than Linux's default (RSS over
// every queue) or than software only, whenever the driver can express
// them.
func (p *problem) searchModes() *state {
	var best *state
	var bestCost costmodel.Cost
	none := make([]choice, len(p.eps))
	// Dragonet's own greedy result is a start too, in its mode (no RSS),
	// so the plan is never worse than it either.
	var dg []choice
	if p.dragonetMayFit() {
		if d, err := p.dragonetGreedy(); err == nil {
			dg = d.choice
		}
	}
	for m := range p.modes {
		s := p.newState(m)
		empty := s.ev.Cost()
		p.greedy(s)
		if empty.Less(s.ev.Cost()) && !p.dragonetSpace {
			s.restore(none) // not in Dragonet's space: it steers every flow it can
		}
		if dg != nil && p.modes[m].name == modeNone {
			g := s.snapshot()
			cur := s.ev.Cost()
			if s.restore(dg); !s.ev.Cost().Less(cur) {
				s.restore(g)
			}
		}
		p.improve(s)
		p.exact(s)
		p.modeStates = append(p.modeStates, s)
		if c := s.ev.Cost(); best == nil || c.Less(bestCost) {
			best, bestCost = s, c
		}
	}
	return best
}

// greedy is dragonc's first pass: flows in order (gold first); for each,
// every candidate change the NIC offers is tried (an entry in the first
// table with room, to each queue), the cost evaluated over every
// endpoint, and the cheapest kept. When every table is full the flow is
// left to RSS or the default queue.
func (p *problem) greedy(s *state) {
	for _, i := range p.order() {
		p.placeGreedily(s, i)
	}
}

// placeGreedily gives flow i an entry in the first table with room for it,
// to the queue that makes the whole configuration cheapest; it leaves the
// flow alone when no table has room.
func (p *problem) placeGreedily(s *state, i int) {
	for _, t := range p.tables {
		if !s.canUse(t, i) {
			continue
		}
		var best choice
		var bestCost costmodel.Cost
		found := false
		for _, q := range t.targets {
			c := choice{t, q}
			s.set(i, c)
			if cost := s.ev.Cost(); !found || cost.Less(bestCost) {
				best, bestCost, found = c, cost, true
			}
		}
		s.set(i, best)
		return
	}
}

// dragonetGreedy is Dragonet's search, ported from Search.hs
// (searchGreedyFlows_, lines 402-453, with the E10k oracle
// e10kFlowConfChanges, lines 1313-1324, and the SF one, lines 1458-1467):
//
//   - no RSS: what no filter claims lands on queue 0, Dragonet's
//     catch-all (its E10k model sends misses to ToDefaultQueue);
//   - flows in dragonetOrder: gold first for the priority functions
//     (prioritySort, lines 1578-1582), declaration order otherwise
//     (sOrderFlows = id, line 334);
//   - for each flow, the oracle offers entries in the first table that
//     can hold it and is not full (the five-tuple filters before Flow
//     Director, the NIC's order: lines 1317-1318), one to each queue
//     1..n-1 (allQueues, lines 118-121: queue 0 is never a target); a
//     table whose entries cannot leave single fields out (Flow Director)
//     holds only fully specified flows (E10k.hs lines 1044-1056,
//     mkFDirFromFl: "flow director filters do not support wildcards",
//     Nothing for a listener, which catMaybes drops);
//   - each offer is costed on Dragonet's QMap of the flows placed so far,
//     this one included (lines 424 and 434-436; state.firstMatch), and
//     the first cheapest is kept (L.minimumBy, line 444);
//   - when the oracle offers nothing Dragonet's search stops ("Oracle did
//     not return any confs, bailing out", line 422): so does this one,
//     with an error naming the flow and why.
//
// Every entry gets one priority, Dragonet's 1 where the table has
// priorities: Dragonet writes all its five-tuple filters at priority 1
// (E10k.hs lines 1019-1033, mk5TupleFromFl), and chains them in the
// order it inserted them (E10k.hs lines 459-463 sort by priority, stable,
// the list addToCVL, line 850, builds newest first reversed).
func (p *problem) dragonetGreedy() (*state, error) {
	if p.dragonet == nil {
		s, err := p.runDragonetGreedy()
		p.dragonet = &dragonetRun{s, err}
	}
	return p.dragonet.s, p.dragonet.err
}

func (p *problem) runDragonetGreedy() (*state, error) {
	mode := p.mode(modeNone)
	s := p.newState(mode)
	s.placed, s.dragonetPrio, s.firstMatch = make([]bool, len(p.eps)), true, true
	for i := range p.eps {
		s.ev.Set(i, nil)
	}
	for k, i := range p.dorder {
		s.place(i)
		if !p.eps[i].steerable() {
			// No table of this NIC can hold it at all (a kind of flow
			// Dragonet's oracles do not know, or a listener that never
			// receives a packet): it stays on the catch-all queue.
			continue
		}
		offers, why := p.dragonetOffers(s, i)
		if len(offers) == 0 {
			return nil, fmt.Errorf("dragonet-greedy: Dragonet's oracle offers nothing for endpoint %s (after %d placed): %s; Dragonet's search stops there (Search.hs line 422, \"Oracle did not return any confs, bailing out\"), and so does dragonet-greedy (the default strategy leaves such endpoints to RSS or the default queue)", p.eps[i].ep.Name, k, why)
		}
		var best choice
		var bestCost costmodel.Cost
		for k, c := range offers {
			s.set(i, c)
			if cost := s.ev.Cost(); k == 0 || cost.Less(bestCost) {
				best, bestCost = c, cost
			}
		}
		s.set(i, best)
	}
	s.placed = nil
	s.firstMatch = p.dragonetSpace // the cost's own view of the plan
	for i := range p.eps {
		s.ev.Set(i, s.shares(i))
	}
	return s, nil
}

// dragonetOffers is Dragonet's oracle for endpoint i: entries in the
// first table, in the NIC's order, that can hold it and is not full, one
// to each of its queues but queue 0. A table whose entries cannot leave
// single fields out (Flow Director) holds only fully specified flows. With
// no offer it says why.
func (p *problem) dragonetOffers(s *state, i int) ([]choice, string) {
	e := p.eps[i]
	var exact []string // tables Dragonet keeps for fully specified flows
	for _, t := range p.tables {
		if e.match[t.idx] == nil {
			continue // a table that cannot express it
		}
		if !t.identity && len(t.sp.Wildcard) == 0 && !e.fullySpecified() {
			exact = append(exact, t.sp.Node)
			continue
		}
		if !s.canUse(t, i) {
			continue // full, or bound to another mask
		}
		var offers []choice
		for _, q := range t.targets {
			if q > 0 {
				offers = append(offers, choice{t, q})
			}
		}
		if len(offers) > 0 {
			return offers, ""
		}
	}
	why := "every table that can hold it is full, bound to another mask, or steers only to queue 0, which Dragonet never targets (Search.hs lines 118-121)"
	if len(exact) > 0 {
		why = "the tables with wildcards are full, and " + strings.Join(exact, ", ") + " cannot leave single fields out: Dragonet gives such entries only to fully specified flows (E10k.hs lines 1044-1056, mkFDirFromFl returns Nothing for a listener)"
	}
	return nil, why
}

// fullySpecified reports whether an endpoint's packets are one flow whose
// every field is known: a connected flow (Dragonet's FlowUDPv4 with every
// field Just), or an Open-MX endpoint (its EtherType and endpoint number).
func (e *endpoint) fullySpecified() bool {
	return e.ep.Proto == lpg.OpenMX || e.ep.Flow && !e.ep.AnyAddr
}

// dragonetOrder is the order Dragonet's search takes flows in: gold first
// for the priority functions (prioritySort, Search.hs lines 1578-1582),
// declaration order otherwise (sOrderFlows = id, line 334).
func (p *problem) dragonetOrder() []int {
	switch p.in.Cost.(type) {
	case costmodel.Priority, costmodel.DragonetPriority:
		return p.order()
	}
	return p.declared()
}

// declared lists the endpoints in declaration order.
func (p *problem) declared() []int {
	idx := make([]int, len(p.eps))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// dragonetMayFit reports whether the tables could hold every endpoint
// some table takes: when they cannot, dragonet-greedy is sure to stop, and
// the default strategy does not run it.
func (p *problem) dragonetMayFit() bool {
	need, room := 0, 0
	for _, e := range p.eps {
		if e.steerable() {
			need++
		}
	}
	for _, t := range p.tables {
		if t.sp.Capacity <= 0 {
			return true
		}
		room += t.sp.Capacity
	}
	return need <= room
}

// moves lists every choice endpoint i could take: no entry (RSS or the
// default queue), or an entry in a table with room to each queue.
func (p *problem) moves(s *state, i int) []choice {
	return p.appendMoves(nil, s, i)
}

// appendMoves appends endpoint i's moves to out. In Dragonet's space an
// endpoint some table has room for always gets an entry: no entry at all
// is a move only when no table can take it.
func (p *problem) appendMoves(out []choice, s *state, i int) []choice {
	return p.appendMovesFrom(out, s, i, 0)
}

// appendMovesFrom is appendMoves with each table's queues tried from its
// start-th target on (a Session's turning start queue).
func (p *problem) appendMovesFrom(out []choice, s *state, i, start int) []choice {
	n := len(out)
	out = append(out, choice{})
	for _, t := range p.tables {
		if !s.canUse(t, i) {
			continue
		}
		for k := range t.targets {
			out = append(out, choice{t, t.targets[(k+start)%len(t.targets)]})
		}
	}
	if p.dragonetSpace && len(out) > n+1 {
		out = append(out[:n], out[n+1:]...)
	}
	return out
}

// moveSweep moves each endpoint in turn to its cheapest alternative
// (another entry, or releasing its entry to RSS) when that is strictly
// cheaper than cur; endpoints for which sticky says true move only for a
// clear gain. It returns the new cost and whether anything moved.
func (p *problem) moveSweep(s *state, cur costmodel.Cost, sticky func(i int) bool) (costmodel.Cost, bool) {
	improved := false
	for _, i := range p.order() {
		old := s.choice[i]
		best, bestCost := old, cur
		s.moveBuf = p.appendMoves(s.moveBuf[:0], s, i)
		for _, c := range s.moveBuf {
			if c == old {
				continue
			}
			s.set(i, c)
			cost := s.ev.Cost()
			if sticky != nil && sticky(i) && !clearlyBetter(cost, bestCost) {
				continue
			}
			if cost.Less(bestCost) {
				best, bestCost = c, cost
			}
		}
		s.set(i, best)
		if best != old {
			cur = bestCost
			improved = true
		}
	}
	return cur, improved
}

// improve is local search from the greedy solution: move single endpoints
// (including releasing their entry to RSS) and swap pairs, keeping only
// strict improvements, so the result is never worse than greedy's.
func (p *problem) improve(s *state) {
	n := len(p.eps)
	sweeps := 20
	if n > 0 {
		sweeps = max(1, min(20, 4000/n))
	}
	cur := s.ev.Cost()
	for sweep := 0; sweep < sweeps; sweep++ {
		var improved bool
		cur, improved = p.moveSweep(s, cur, nil)
		if n <= 16 {
			// Small inputs: every pair of endpoints moved together, which
			// escapes the local minima single moves and swaps leave when
			// one endpoint's packets are split (an address-specific UDP
			// listener also receives broadcasts, which its entry does not
			// steer).
			cur, improved = p.pairSweep(s, cur, improved)
		} else if n <= 64 {
			for a := 0; a < n; a++ {
				for b := a + 1; b < n; b++ {
					ca, cb := s.choice[a], s.choice[b]
					if ca.t == nil || cb.t == nil || ca.q == cb.q || ca.t != cb.t {
						continue
					}
					s.set(a, choice{ca.t, cb.q})
					s.set(b, choice{cb.t, ca.q})
					if cost := s.ev.Cost(); cost.Less(cur) {
						cur = cost
						improved = true
						continue
					}
					s.set(a, ca)
					s.set(b, cb)
				}
			}
		}
		if !improved {
			break
		}
	}
}

// pairSweep tries every combination of moves of every pair of endpoints,
// keeping strict improvements.
func (p *problem) pairSweep(s *state, cur costmodel.Cost, improved bool) (costmodel.Cost, bool) {
	n := len(p.eps)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			ca, cb := s.choice[a], s.choice[b]
			best := [2]choice{ca, cb}
			for _, ma := range p.moves(s, a) {
				s.set(a, ma)
				for _, mb := range p.moves(s, b) {
					s.set(b, mb)
					if cost := s.ev.Cost(); cost.Less(cur) {
						cur, best, improved = cost, [2]choice{ma, mb}, true
					}
				}
				s.set(b, cb)
			}
			s.set(a, best[0])
			s.set(b, best[1])
		}
	}
	return cur, improved
}

// exactLimit bounds the exhaustive search: at most this many complete
// assignments are enumerated.
const exactLimit = 600000

// exact searches every assignment of small inputs (a few flows and queues)
// depth first, keeping the best; it starts from the current solution so
// it can only improve on it.
func (p *problem) exact(s *state) {
	n := len(p.eps)
	if n == 0 || n > 8 {
		return
	}
	total := 1.0
	for i := range p.eps {
		total *= float64(len(p.moves(s, i)))
		if total > exactLimit {
			return
		}
	}
	best := s.snapshot()
	bestCost := s.ev.Cost()
	// Start from nothing assigned so capacities are counted from zero. Every
	// endpoint's options are listed once; capacity is checked as the walk
	// goes.
	for i := range p.eps {
		s.set(i, choice{})
	}
	opts := make([][]choice, n)
	for i := range p.eps {
		opts[i] = p.moves(s, i)
	}
	var dfs func(k int)
	dfs = func(k int) {
		if k == n {
			if cost := s.ev.Cost(); cost.Less(bestCost) {
				bestCost = cost
				best = s.snapshot()
			}
			return
		}
		for _, c := range opts[k] {
			if c.t != nil && !s.canUse(c.t, k) {
				continue
			}
			s.set(k, c)
			dfs(k + 1)
		}
		s.set(k, choice{})
	}
	dfs(0)
	s.restore(best)
}
