package embed

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/internal/solver"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// A Session keeps a plan up to date while endpoints come and go, the way
// Dragonet's incremental search does while its stack serves (Search.hs,
// incrSearchGreedyFlows): each change is searched from the current
// configuration, touching only what it affects, and returns a Delta, the
// entries to write and remove and the endpoints whose queues changed.
//
// A Session made by NewSession follows dragonc's rules: an added endpoint
// takes the cheapest of every entry the tables have room for (or none),
// trying the queues from a start queue that turns with every placement,
// as Dragonet's oracle does (allQueues_, Search.hs lines 132-133 and
// 1339-1341), so that ties spread; a removed endpoint's entry is freed
// and its location is the next one given out (slotTable); then a few
// repairs are tried (repair), each kept only when it saves MoveThreshold
// of the cost, the hysteresis --strategy incremental uses, so that
// placements stay put unless the cost demands a move; last, the session
// takes the plan of Dragonet's incremental search, which it runs beside
// it on the same changes (its shadow), when that costs less (follow), so
// that it is never costlier than Dragonet's search on the same sequence.
// Each change costs the evaluation of a few hundred candidates, each
// O(queues) (costmodel.Evaluator; an endpoint that overlaps many keeps
// an overlapIndex), Dragonet's search of the same change, plus
// O(endpoints) of plain bookkeeping: well under a millisecond at 10,000
// endpoints. Taking Dragonet's plan moves every endpoint the two place
// differently, and the first change of endpoints starts the shadow, a
// search of Dragonet's over every endpoint (startShadow; Prepare starts
// it beforehand). The bound holds while the shadow lives: a stack whose
// endpoints the tables cannot all hold has none (Dragonet's search stops
// there), and a shadow whose plan is rejected with more than
// shadowJumpMax flows stops (Dragonet's jump would re-place them all on
// every change); the session's own repairs then place what comes.
//
// A Session made by NewDragonetSession is a port of Dragonet's own
// incremental search, for comparison (see there).
//
// The cost a Session sees of an added endpoint is worked out from the
// box of its protocol's demultiplexer narrowed by its own predicate, as
// the LPG's paths give it for a demultiplexer of many endpoints; Result
// embeds the whole stack afresh. A Session is not safe for concurrent
// use.
type Session struct {
	p    *problem
	s    *state
	base *plan.Plan // the plan the session started from
	// dragonet: the search is Dragonet's (NewDragonetSession).
	dragonet bool
	byName   map[string]*endpoint
	groups   map[string][]*endpoint // endpoints by protocol and port: those whose packets may overlap
	slots    slotTable              // the tables' entries' locations
	startQ   int                    // where the next placement starts trying queues
	moves    []choice               // place's, reused
	on       []int                  // repair's, reused
	seq      int                    // entries inserted so far (Dragonet's order of its filters)
	orphans  []orphan               // Dragonet: entries whose flow left, the newest inserted first
	// repurposed names, for each endpoint of the change under way that
	// took an orphan's entry, the endpoint the entry was for.
	repurposed map[*endpoint]string
	// err stops a Dragonet session whose oracle ran out of entries, as it
	// stops Dragonet's search.
	err error
	// The change under way: every endpoint it touched, in the order
	// touched, with what it was before.
	rec   map[*endpoint]*record
	order []*endpoint
	// held are the endpoints Hold keeps where they are.
	held map[string]bool
	// shadow is Dragonet's incremental search run on the same changes
	// (startShadow; nil when there is none), which follow takes the plan
	// of when it is cheaper; tmap and qmap map its tables (by table.idx)
	// and queues (indexes) to the session's.
	shadow *Session
	tmap   []*table
	qmap   []int
	// shadowIn is the input the shadow starts from, until it starts.
	shadowIn *Input
	// overlapping counts the endpoints whose packets overlap another's
	// (Cost).
	overlapping int
	// quiet: a shadow's changes leave their Deltas' costs out (nobody
	// reads them), and its jumps are bounded (shadowJumpMax).
	quiet bool
	// follows counts the changes that took the shadow's plan.
	follows int
}

// record is an endpoint as it was before the change under way.
type record struct {
	choice choice
	queues []int // queue IDs
	added  bool  // added by this change
}

// orphan is an entry of Dragonet's whose flow was removed: it stays in its
// table, counted against its capacity, until a new flow repurposes it.
type orphan struct {
	t          *table
	q          int
	slot, rank int
	entry      plan.Entry
}

// slotTable is where the tables' entries sit: a Delta names each entry's
// slot, its location, which stays the same while the entry lives.
// Locations are numbered across the tables, in the order plan.json lists
// the tables and their entries, as linux.sh numbers its ntuple rules
// (ethtool -N ... loc N: backends/linux's StepRule); a freed location is
// the next one given out.
type slotTable struct {
	owner []*endpoint // by slot; nil when free or held by an orphan
	free  slotHeap    // free slots below len(owner)
}

type slotHeap []int

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h slotHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *slotHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Delta is what one change did to the plan.
type Delta struct {
	Added, Removed []string // endpoints, in the order of the change
	// Insert lists the entries to write, each at its slot (replacing
	// what the slot held: the entry of a removed endpoint, or the same
	// endpoint's entry to another queue); Delete those to take out, whose
	// slots are then free. Apply Insert before Delete: no frame of an
	// endpoint that keeps its queue is ever without its entry. Both are
	// ordered by node and slot.
	Insert, Delete []EntryChange
	// Queues lists every endpoint whose receive queues changed: From is
	// empty for an added endpoint, To for a removed one. By name.
	Queues []QueueChange
	// Cost is the plan's cost after the change, Before before it.
	Cost, Before costmodel.Cost
}

// EntryChange is one entry of one configuration node.
type EntryChange struct {
	Node string
	// Slot is a table entry's location, numbered across the tables as
	// linux.sh numbers its rules (ethtool -N ... loc; slotTable), or an
	// identity hash's bucket.
	Slot  int
	Entry plan.Entry
	// Replaces names the endpoint whose entry the slot held, when this
	// change removed or moved it ("" when the slot was free).
	Replaces string
}

// QueueChange is an endpoint's receive queues (IDs) before and after.
type QueueChange struct {
	Endpoint string
	From, To []int
}

// Changed reports whether the change touched the NIC's configuration.
func (d *Delta) Changed() bool { return len(d.Insert)+len(d.Delete) > 0 }

// NewSession starts a session from a plan dragonc made (Run, with any
// strategy): the session has its own copy of the plan's state, and r is
// left as it is.
func NewSession(r *Result) (*Session, error) {
	if r == nil || r.p == nil || r.state == nil {
		return nil, fmt.Errorf("a session starts from a plan embed.Run made")
	}
	p := r.p.clone()
	s := p.newState(r.state.mode)
	if s.dragonetPrio != r.state.dragonetPrio || s.firstMatch != r.state.firstMatch {
		s.dragonetPrio, s.firstMatch = r.state.dragonetPrio, r.state.firstMatch
		for i := range p.eps {
			s.ev.Set(i, s.shares(i))
		}
	}
	for i, c := range r.state.choice {
		if c.t != nil {
			s.set(i, c)
		}
	}
	ss := newSession(p, s, r.Plan)
	order := p.declared()
	if s.dragonetPrio {
		order = p.dorder
	}
	// Locations in the order the plan lists its entries (planConfig: the
	// model's tables in its order, each table's entries in the order
	// config writes them).
	for _, sp := range p.in.Model.Spaces {
		for _, i := range order {
			if c := s.choice[i]; c.t != nil && c.t.sp.Node == sp.Node {
				ss.takeSlot(p.eps[i], c.t, -1)
			}
		}
	}
	ss.shadowIn = r.p.in
	return ss, nil
}

// Prepare starts now what the session's first change of endpoints would
// start (its shadow, startShadow: a search of Dragonet's over every
// endpoint, 0.15 s at 10,000 listeners here), so that the first change
// takes no longer than the others. A program that serves the session's
// plan calls it while nothing waits on the session (dragonc run does, in
// the background, once the plan serves).
func (ss *Session) Prepare() {
	if ss.shadowIn != nil {
		ss.startShadow()
	}
}

// startShadow starts the session's shadow, at its first change of
// endpoints: Dragonet's incremental search (NewDragonetSession) from the
// stack the session has then (its first, with the rates SetRates gave
// since), which every change is applied to as well (change, SetRates),
// and whose plan the session takes when it is cheaper (follow). A stack
// whose endpoints the tables cannot all hold has none: Dragonet's search
// stops there ("Run out of CCs"), and so does a shadow whose search
// stops later. Starting costs a search of Dragonet's over every
// endpoint, O(endpoints); a session that only changes rates (run's
// Rebalancer) never starts one.
func (ss *Session) startShadow() {
	in := ss.shadowIn
	ss.shadowIn = nil
	if in == nil || !ss.p.dragonetMayFit() {
		return
	}
	own := *in
	own.Stack = ss.Stack()
	own.Strategy = StrategyDragonetGreedy
	sh, err := newDragonetSession(&own, true)
	if err != nil {
		return
	}
	ss.tmap = make([]*table, len(sh.p.tables))
	for k, t := range sh.p.tables {
		if j := slices.IndexFunc(ss.p.tables, func(u *table) bool { return u.sp.Node == t.sp.Node }); j >= 0 {
			ss.tmap[k] = ss.p.tables[j]
		}
	}
	ss.qmap = make([]int, len(sh.p.queues))
	for k, q := range sh.p.queues {
		ss.qmap[k] = slices.IndexFunc(ss.p.queues, func(u qinfo) bool { return u.id == q.id })
	}
	for _, e := range ss.p.eps {
		if e.twin = sh.byName[e.ep.Name]; e.twin == nil {
			ss.dropShadow()
			return
		}
	}
	ss.shadow = sh
}

// dropShadow ends the shadow (its search stopped).
func (ss *Session) dropShadow() {
	ss.shadow = nil
	for _, e := range ss.p.eps {
		e.twin = nil
	}
}

// NewDragonetSession starts a port of Dragonet's incremental search,
// incrSearchGreedyFlows (Search.hs lines 1075-1164, its
// incSearchGreedyFlows_ and incSearchMinCost, lines 1170-1259, with the
// E10k oracle's flowConfChangesS, lines 1328-1365), from an empty
// configuration, adding the stack's endpoints as Dragonet's runIncrSearch
// adds a first set of flows. In Dragonet's search space (see
// dragonetGreedy: no RSS, queue 0 the catch-all and never a target, the
// QMap counts a flow against its first match), on every change:
//
//   - a removed flow's entry stays in its table, steering nothing
//     (FM.rmFlow only forgets the flow: FlowMap.hs lines 413-428), and
//     counts against the table's capacity;
//   - each added flow (in dragonetSorted's order) is offered by the
//     oracle, first, the entries whose flow was removed, the newest
//     inserted first, each kept on its queue ("XXX: queue has to be the
//     same for now", E10k.hs lines 1009-1017; a table without wildcards
//     takes only fully specified flows), then, while the first table that can hold the flow has
//     room, an entry there to each queue no repurposed entry covers, in
//     ascending order (lines 1355-1365); with no entry to repurpose, an
//     entry in the first table that can hold it and has room, to each
//     queue from the start queue on (allQueues_); the start queue turns
//     by one each time the oracle offers something (line 1341);
//   - the offers are costed over every current flow, in order, keeping
//     the first cheapest, and stop after five more than the first once
//     the best is acceptable (incSearchMinCost and stopFoldM, lines
//     1209-1259; stopFn, line 1247);
//   - an oracle that offers nothing stops the search ("Run out of CCs",
//     line 1187): the call returns the error, and so does every later
//     call of the session;
//   - when the cost is a rejection, Dragonet jumps (lines 1127-1164): its
//     default confJump discards every entry (lines 252-254; the E10k
//     oracle's own jump is commented out, line 1309) and every flow is
//     searched again, reusing the discarded entries. Dragonet's jump
//     starts from the state before the change's removals (fm = isFlowMapSt
//     st), which would bring the removed flows back; the port leaves them
//     out, and jumps once: Dragonet jumps again as long as the cost is
//     rejected, and its jump does the same thing each time.
//
// Its entries whose flow left steer nothing and are not in Result's
// plan. Cost is the cost function's own view of the plan (for a cost of
// dragonc's, the shares of overlapping entries split, as every other
// strategy is costed), not the QMap the search costs its offers on.
func NewDragonetSession(in *Input) (*Session, error) { return newDragonetSession(in, false) }

// newDragonetSession is NewDragonetSession; a shadow's (startShadow) is
// quiet, and its jumps bounded, from the start.
func newDragonetSession(in *Input, shadow bool) (*Session, error) {
	own := *in
	st := *in.Stack
	st.Endpoints = slices.Clone(st.Endpoints)
	own.Stack = &st
	p, err := newProblem(&own)
	if err != nil {
		return nil, err
	}
	p.paths = nil
	s := p.newState(p.mode(modeNone))
	s.dragonetPrio, s.firstMatch = true, true
	ss := newSession(p, s, nil)
	ss.dragonet, ss.quiet = true, shadow
	eps := slices.Clone(p.in.Stack.Endpoints)
	for i := len(p.eps) - 1; i >= 0; i-- {
		ss.removeEndpoint(i)
	}
	ss.begin()
	for _, e := range dragonetSorted(p, eps) {
		if err := ss.dragonetAdd(e); err != nil {
			return nil, err
		}
	}
	ss.dragonetJump()
	if ss.err != nil {
		return nil, ss.err // a shadow's jump over too many flows
	}
	ss.commit()
	return ss, nil
}

func newSession(p *problem, s *state, base *plan.Plan) *Session {
	ss := &Session{p: p, s: s, base: base, byName: map[string]*endpoint{}, groups: map[string][]*endpoint{}}
	s.countLoose, s.loose = s.firstMatch != p.dragonetSpace, 0
	for i, e := range p.eps {
		if len(e.over) > 0 {
			ss.overlapping++
		}
		if s.countLoose {
			s.loose += s.looseIn(i, s.choice[i])
		}
		e.slot = -1
		ss.byName[e.ep.Name] = e
		if k, ok := groupKey(e.ep); ok {
			ss.groups[k] = append(ss.groups[k], e)
		}
	}
	s.watch = ss.watch
	if p.in.Strategy != StrategyDragonetGreedy {
		p.in.Strategy = StrategyIncremental
	}
	return ss
}

// clone copies the problem for a session, which changes its endpoints.
func (p *problem) clone() *problem {
	q := *p
	in := *p.in
	st := *in.Stack
	st.Endpoints = slices.Clone(st.Endpoints)
	in.Stack = &st
	q.in = &in
	q.eps = make([]*endpoint, len(p.eps))
	for i, e := range p.eps {
		c := *e
		c.over = slices.Clone(e.over)
		c.rel = slices.Clone(e.rel)
		c.entry = slices.Clone(e.entry)
		q.eps[i] = &c
	}
	cp := *p.cp
	cp.Queues = slices.Clone(p.cp.Queues)
	cp.Endpoints = slices.Clone(p.cp.Endpoints)
	q.cp = &cp
	q.rank, q.dorder = slices.Clone(p.rank), slices.Clone(p.dorder)
	q.dragonet, q.modeStates, q.paths = nil, nil, nil
	q.warns = slices.Clone(p.warns)
	q.emptyCost = map[int]costmodel.Cost{}
	for k, v := range p.emptyCost {
		q.emptyCost[k] = v
	}
	return &q
}

// otherFlows reports whether a and b are connected flows from different
// remote ends, whose packets never overlap (EndpointPredicate fixes the
// source address and port of a flow's): no box needs comparing.
func otherFlows(a, b *lpg.Endpoint) bool {
	return a.Flow && b.Flow && (a.Remote != b.Remote || a.RPort != b.RPort)
}

// groupKey groups endpoints whose packets may overlap: one protocol and
// port (Open-MX endpoints never overlap).
func groupKey(e *lpg.Endpoint) (string, bool) {
	if e.Proto == lpg.OpenMX {
		return "", false
	}
	return fmt.Sprintf("%s/%d", e.Proto, e.Port), true
}

// Cost is the plan's cost now. For a Dragonet session under a cost of
// dragonc's, whose search sees its QMap, the shares the two views may
// give differently (those of endpoints whose packets overlap others', or
// that their own entry does not cover; the session counts them) are set
// to the cost's view for the evaluation and back: O(queues) when there
// are none, else O(endpoints) and a share each of theirs.
func (ss *Session) Cost() costmodel.Cost {
	p, s := ss.p, ss.s
	if s.firstMatch == p.dragonetSpace || ss.overlapping == 0 && s.loose == 0 {
		return s.ev.Cost()
	}
	var differ []int
	var was [][]costmodel.Share
	s.firstMatch = p.dragonetSpace
	for i, e := range p.eps {
		if len(e.over) == 0 && s.looseIn(i, s.choice[i]) == 0 {
			continue
		}
		if sh := s.shares(i); !slices.Equal(sh, s.ev.Shares(i)) {
			differ = append(differ, i)
			was = append(was, slices.Clone(s.ev.Shares(i)))
			s.ev.Set(i, sh)
		}
	}
	s.firstMatch = !s.firstMatch
	c := s.ev.Cost()
	for k, i := range differ {
		s.ev.Set(i, was[k])
	}
	return c
}

// assignment is the shares of every endpoint as the cost function sees
// them: for a Dragonet session, whose search sees its QMap (the first
// match takes a flow whole), what overlapping entries share is split.
func (ss *Session) assignment() costmodel.Assignment {
	s := ss.s
	if s.firstMatch == ss.p.dragonetSpace {
		return s.ev.Assignment()
	}
	a := make(costmodel.Assignment, len(ss.p.eps))
	s.firstMatch = ss.p.dragonetSpace
	for i := range ss.p.eps {
		a[i] = slices.Clone(s.shares(i))
	}
	s.firstMatch = !s.firstMatch
	return a
}

// Stack is the stack the session serves now: the endpoints it started
// with that remain, then those added since, in the order added.
func (ss *Session) Stack() *lpg.Stack {
	st := *ss.p.in.Stack
	st.Endpoints = slices.Clone(st.Endpoints)
	return &st
}

// Entries lists the entries of the plan now, each at its slot, by node
// and slot (Dragonet's entries whose flow left are not among them).
func (ss *Session) Entries() []EntryChange {
	var out []EntryChange
	for i, e := range ss.p.eps {
		if c := ss.s.choice[i]; c.t != nil {
			out = append(out, EntryChange{Node: c.t.sp.Node, Slot: e.slot, Entry: ss.entry(e, c)})
		}
	}
	slices.SortFunc(out, byNodeSlot)
	return out
}

// byNodeSlot orders entries by configuration node and slot.
func byNodeSlot(a, b EntryChange) int {
	if a.Node != b.Node {
		return cmp.Compare(a.Node, b.Node)
	}
	return cmp.Compare(a.Slot, b.Slot)
}

// PredictedLoad is the plan's prediction now (Result.PredictedLoad), in
// the session's order of endpoints. It costs O(endpoints).
func (ss *Session) PredictedLoad() PredictedLoad {
	return predictedLoad(ss.p.cp, ss.assignment())
}

// Len is the number of endpoints.
func (ss *Session) Len() int { return len(ss.p.eps) }

// Add adds an endpoint (its name new to the session, its protocol one the
// session's LPG already demultiplexes) and places it.
func (ss *Session) Add(e *lpg.Endpoint) (*Delta, error) {
	return ss.change(nil, []*lpg.Endpoint{e}, nil)
}

// Remove removes the endpoint named name and frees its entry.
func (ss *Session) Remove(name string) (*Delta, error) {
	return ss.change([]string{name}, nil, nil)
}

// Apply changes the session's endpoints to those of next, a stack that
// differs from the session's only in its endpoints: endpoints are matched
// by name, those next lacks are removed, those it adds are added (in
// next's order), one whose rate alone changed takes the new rate (as
// SetRates), and one whose declaration changed otherwise is removed and
// added again. It is one change: one search, one Delta.
func (ss *Session) Apply(next *lpg.Stack) (*Delta, error) {
	if next == nil {
		return nil, fmt.Errorf("no stack to apply")
	}
	cur := ss.p.in.Stack
	if why := sameButEndpoints(cur, next); why != "" {
		return nil, fmt.Errorf("stack %s differs from the running one in %s, not only in its endpoints: re-plan it (dragonc embed)", next.Name, why)
	}
	// The endpoints the two share at their start and end, in order (a
	// stack file edited in one place), are the same: only those between
	// are matched by name, unless a name between is also one of those
	// (a stack that declares a name twice).
	ce, ne := cur.Endpoints, next.Endpoints
	i := 0
	for i < len(ce) && i < len(ne) && sameEndpoint(ce[i], ne[i]) {
		i++
	}
	k := 0
	for k < len(ce)-i && k < len(ne)-i && sameEndpoint(ce[len(ce)-1-k], ne[len(ne)-1-k]) {
		k++
	}
	for _, e := range ne[i : len(ne)-k] {
		if o := ss.byName[e.Name]; o != nil && (o.index < i || o.index >= len(ce)-k) {
			i, k = 0, 0
			break
		}
	}
	ce, ne = ce[i:len(ce)-k], ne[i:len(ne)-k]
	want := make(map[string]*lpg.Endpoint, len(ne))
	for _, e := range ne {
		if want[e.Name] != nil {
			return nil, fmt.Errorf("stack %s declares endpoint %s twice", next.Name, e.Name)
		}
		want[e.Name] = e
	}
	var rm []string
	var add, rated []*lpg.Endpoint
	gone := map[string]bool{}
	for _, e := range ce {
		n, ok := want[e.Name]
		switch {
		case ok && sameEndpoint(e, n):
		case ok && sameButRate(e, n):
			rated = append(rated, n) // it stays where it is unless the cost demands otherwise
		default:
			rm = append(rm, e.Name)
			gone[e.Name] = true
		}
	}
	for _, e := range ne {
		if ss.byName[e.Name] == nil || gone[e.Name] {
			add = append(add, e)
		}
	}
	if len(rm)+len(add)+len(rated) == 0 {
		c := ss.Cost()
		return &Delta{Cost: c, Before: c}, nil // nothing changed: nothing is searched
	}
	return ss.change(rm, add, rated)
}

// SetRates changes the packet rates the plan weighs endpoints by (rates
// measured while serving, say), by name, and moves what the new rates
// make worth moving (with the hysteresis of every change: a move must
// save MoveThreshold of the cost, so a plan that moved settles).
func (ss *Session) SetRates(rates map[string]float64) (*Delta, error) {
	if ss.err != nil {
		return nil, ss.err
	}
	names := slices.Sorted(maps.Keys(rates))
	for _, name := range names {
		if ss.byName[name] == nil {
			return nil, fmt.Errorf("no endpoint %s to set the rate of", name)
		}
		if r := rates[name]; !(r >= 0 && r <= lpg.MaxRate) {
			return nil, fmt.Errorf("endpoint %s: a rate is between 0 and %g packets a second, not %g", name, lpg.MaxRate, r)
		}
	}
	before := ss.Cost()
	if len(rates) == 0 {
		return &Delta{Cost: before, Before: before}, nil
	}
	if sh := ss.shadow; sh != nil {
		// The shadow weighs its endpoints alike, and moves nothing
		// unless its cost is rejected (Dragonet re-plans on changes of
		// flows, not of rates): a change of rates moves what saves
		// MoveThreshold, and the next change of endpoints follows the
		// shadow if it is cheaper then.
		if _, err := sh.SetRates(rates); err != nil {
			ss.dropShadow()
		}
	}
	ss.begin()
	for _, name := range names {
		ss.setRate(ss.byName[name], rates[name])
	}
	ss.rebalance()
	d := ss.commit()
	d.Before, d.Cost = before, ss.Cost()
	return d, nil
}

// setRate gives endpoint e another rate: a copy of its declaration with
// it (the caller's is not changed).
func (ss *Session) setRate(e *endpoint, rate float64) {
	le := *e.ep
	le.Rate = rate
	e.ep = &le
	ss.p.in.Stack.Endpoints[e.index] = &le
	ss.s.ev.Update(e.index, ss.p.costEndpoint(&le))
}

// rebalance is what a change does after its removals and additions: the
// repairs (dragonc's search), and Dragonet's jump when its cost is
// rejected (Dragonet's).
func (ss *Session) rebalance() {
	if ss.dragonet {
		ss.dragonetJump()
		return
	}
	ss.repair()
	if ss.s.dragonetPrio {
		// Dragonet's one priority: entries in Dragonet's order.
		ss.p.dorder = ss.p.dragonetOrder()
		for k, i := range ss.p.dorder {
			ss.p.rank[i] = k
		}
	}
}

// sameButEndpoints says what, besides endpoints, differs between two
// stacks: what the LPG is made of beyond its demultiplexers.
func sameButEndpoints(a, b *lpg.Stack) string {
	switch {
	case len(a.Interfaces) != len(b.Interfaces):
		return "its interfaces"
	case !slices.Equal(a.Cores, b.Cores):
		return "its cores"
	case a.ICMPEcho != b.ICMPEcho || a.ARP != b.ARP || a.ICMPErrors != b.ICMPErrors:
		return "its services"
	}
	for i := range a.Interfaces {
		x, y := a.Interfaces[i], b.Interfaces[i]
		if x.Name != y.Name || x.MAC != y.MAC || x.MTU != y.MTU || !slices.Equal(x.IPs, y.IPs) {
			return "interface " + y.Name
		}
	}
	return ""
}

// sameEndpoint reports whether two declarations of an endpoint are the
// same for the plan.
func sameEndpoint(a, b *lpg.Endpoint) bool { return a.Rate == b.Rate && sameButRate(a, b) }

// sameButRate is sameEndpoint but for their rates.
func sameButRate(a, b *lpg.Endpoint) bool {
	return a.Name == b.Name && a.Ident == b.Ident && a.Proto == b.Proto && a.Flow == b.Flow && a.AnyAddr == b.AnyAddr &&
		a.Addr == b.Addr && a.Port == b.Port && a.Remote == b.Remote && a.RPort == b.RPort && a.OMXID == b.OMXID &&
		a.App == b.App && slices.Equal(a.Cores, b.Cores) && a.Class == b.Class &&
		a.Message == b.Message && a.NoDelay == b.NoDelay && a.Shadowed == b.Shadowed
}

// change removes and adds endpoints, gives others new rates, searches,
// and returns the Delta. A change refused (a name unknown or taken, a
// protocol the LPG lacks) changes nothing; a Dragonet session whose
// oracle runs out stops (NewDragonetSession).
func (ss *Session) change(rm []string, add, rated []*lpg.Endpoint) (*Delta, error) {
	if ss.err != nil {
		return nil, ss.err
	}
	seen := map[string]bool{}
	for _, name := range rm {
		if ss.byName[name] == nil || seen[name] {
			return nil, fmt.Errorf("no endpoint %s to remove", name)
		}
		seen[name] = true
	}
	added := map[string]bool{}
	for _, e := range add {
		if err := ss.canAdd(e, seen); err != nil {
			return nil, err
		}
		if added[e.Name] {
			return nil, fmt.Errorf("endpoint %s is added twice", e.Name)
		}
		added[e.Name] = true
	}
	var before costmodel.Cost
	if !ss.quiet {
		before = ss.Cost()
	}
	if ss.shadowIn != nil && len(rm)+len(add) > 0 {
		ss.startShadow()
	}
	if sh := ss.shadow; sh != nil {
		if _, err := sh.change(rm, add, rated); err != nil || sh.err != nil {
			ss.dropShadow()
		}
	}
	ss.begin()
	for _, name := range rm {
		ss.remove(ss.byName[name].index)
	}
	if ss.dragonet {
		for _, e := range dragonetSorted(ss.p, add) {
			if err := ss.dragonetAdd(e); err != nil {
				ss.err = err
				return nil, err
			}
		}
	} else {
		for _, e := range add {
			ss.place(ss.addEndpoint(e))
		}
	}
	for _, e := range rated {
		ss.setRate(ss.byName[e.Name], e.Rate)
	}
	ss.rebalance()
	if sh := ss.shadow; sh != nil {
		for _, e := range add {
			ss.byName[e.Name].twin = sh.byName[e.Name]
		}
		if len(rm)+len(add) > 0 {
			ss.follow() // not for new rates alone (SetRates)
		}
	}
	d := ss.commit()
	if !ss.quiet {
		d.Before, d.Cost = before, ss.Cost()
	}
	return d, nil
}

// canAdd checks an endpoint a change adds: a new name (removed ones are
// in removing), and a protocol the LPG demultiplexes.
func (ss *Session) canAdd(e *lpg.Endpoint, removing map[string]bool) error {
	if e == nil || e.Name == "" {
		return fmt.Errorf("an endpoint to add needs a name")
	}
	if ss.byName[e.Name] != nil && !removing[e.Name] {
		return fmt.Errorf("endpoint %s is already in the plan", e.Name)
	}
	if _, ok := ss.p.demux[e.Proto]; !ok {
		return fmt.Errorf("endpoint %s is the first %s endpoint: the stack's LPG has no %s demultiplexer, and the generated code none either; re-plan the stack (dragonc embed)", e.Name, e.Proto, e.Proto)
	}
	return nil
}

// begin starts recording a change.
func (ss *Session) begin() {
	ss.rec = map[*endpoint]*record{}
	ss.order = ss.order[:0]
}

// watch records endpoint i before the change touches it.
func (ss *Session) watch(i int) {
	e := ss.p.eps[i]
	if ss.rec == nil || ss.rec[e] != nil {
		return
	}
	ss.rec[e] = &record{choice: ss.s.choice[i], queues: ss.queueIDs(i)}
	ss.order = append(ss.order, e)
}

// queueIDs are the receive queues endpoint i's packets reach now.
func (ss *Session) queueIDs(i int) []int {
	var out []int
	for _, sh := range ss.s.ev.Shares(i) {
		out = append(out, ss.p.queues[sh.Queue].id)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// addEndpoint appends an endpoint, with no entry, and returns its index.
func (ss *Session) addEndpoint(le *lpg.Endpoint) int {
	p, s := ss.p, ss.s
	p.in.Stack.Endpoints = append(p.in.Stack.Endpoints, le)
	i := len(p.eps)
	e := p.newEndpoint(i, le)
	e.slot = -1
	e.box, _ = solver.Restrict(p.demux[le.Proto], lpg.EndpointPredicate(le))
	if k := s.ev.Add(p.costEndpoint(le)); k != i {
		panic(fmt.Sprintf("embed: session: the evaluator has %d endpoints, the problem %d", k, i)) // an invariant of this file
	}
	p.eps = append(p.eps, e)
	s.choice = append(s.choice, choice{})
	p.rank = append(p.rank, 0)
	if k, ok := groupKey(le); ok {
		nt := len(p.tables)
		for _, o := range ss.groups[k] {
			if otherFlows(le, o.ep) || !intersects(e.box, o.box) {
				continue
			}
			if len(o.over) == 0 {
				ss.overlapping++
			}
			if len(e.over) == 0 {
				ss.overlapping++
			}
			e.over = append(e.over, o.index)
			o.over = append(o.over, i)
			if o.rel != nil {
				o.rel = append(o.rel, make([]int8, nt)...) // relation's slots of the new neighbour
			}
			s.forget(o.index)
		}
		ss.groups[k] = append(ss.groups[k], e)
	}
	ss.byName[le.Name] = e
	ss.rec[e] = &record{added: true}
	ss.order = append(ss.order, e)
	s.ev.Set(i, s.seen(i))
	return i
}

// remove frees endpoint i's entry and removes it; Dragonet's search
// leaves the entry behind (orphan).
func (ss *Session) remove(i int) {
	if ss.dragonet && ss.s.choice[i].t != nil {
		ss.orphan(i)
	} else {
		ss.s.set(i, choice{})
	}
	ss.removeEndpoint(i)
}

// removeEndpoint takes endpoint i, which has no entry, out of the problem:
// the endpoints after it move down by one.
func (ss *Session) removeEndpoint(i int) {
	p, s := ss.p, ss.s
	e := p.eps[i]
	ss.watch(i)
	nt := len(p.tables)
	for _, j := range e.over {
		o := p.eps[j]
		k := slices.Index(o.over, i)
		if o.rel != nil && len(o.rel) == (len(o.over)+1)*nt {
			o.rel = slices.Delete(o.rel, (k+1)*nt, (k+2)*nt) // relation's slots of i
		} else {
			o.rel = nil
		}
		o.over = slices.Delete(o.over, k, k+1)
		if len(o.over) == 0 {
			ss.overlapping--
		}
	}
	if len(e.over) > 0 {
		ss.overlapping--
	}
	s.ev.Remove(i)
	s.ovx = nil // the indexes name endpoints by index, which shift
	p.eps = slices.Delete(p.eps, i, i+1)
	p.in.Stack.Endpoints = slices.Delete(p.in.Stack.Endpoints, i, i+1)
	s.choice = slices.Delete(s.choice, i, i+1)
	p.rank = slices.Delete(p.rank, i, i+1)
	for k := i; k < len(p.eps); k++ {
		p.eps[k].index = k
	}
	if ss.overlapping > 0 && i < len(p.eps) {
		for _, o := range p.eps {
			for x, j := range o.over {
				if j > i {
					o.over[x] = j - 1
				}
			}
		}
	}
	if k, ok := groupKey(e.ep); ok {
		ss.groups[k] = slices.DeleteFunc(ss.groups[k], func(o *endpoint) bool { return o == e })
		if len(ss.groups[k]) == 0 {
			delete(ss.groups, k)
		}
	}
	delete(ss.byName, e.ep.Name)
	e.gone = true
}

// place gives endpoint i, new, its cheapest choice (placeCheapest), from
// the session's start queue, which turns with every placement that had
// entries to choose from.
func (ss *Session) place(i int) {
	var offered bool
	ss.moves, offered = ss.p.placeCheapest(ss.s, i, ss.startQ, ss.moves)
	if offered {
		ss.startQ = (ss.startQ + 1) % len(ss.p.queues)
	}
}

// Repairs after a change: at most repairRounds moves, each the best of
// the moves of at most repairCandidates endpoints.
const (
	repairRounds     = 4
	repairCandidates = 8
)

// repair tries, a few times, the moves a change makes worth trying: an
// endpoint without an entry takes the room a table has (a removal freed
// it), an endpoint with an entry on the most loaded queue (by load, and
// by endpoints) moves, to the least loaded one or anywhere else, or gives
// its entry up, and so does one on a queue a gold endpoint shares.
// Endpoints that overlap many others' are not moved (heavy). A move of an endpoint the change did not add must
// save MoveThreshold of the cost (clearlyBetter); one the change added
// moves for any saving.
func (ss *Session) repair() {
	p, s := ss.p, ss.s
	cur := s.ev.Cost()
	for round := 0; round < repairRounds; round++ {
		bestI, best, bestCost := -1, choice{}, cur
		consider := func(i int, moves []choice) {
			old := s.choice[i]
			r := ss.rec[p.eps[i]]
			sticky := r == nil || !r.added
			for _, c := range moves {
				if c == old {
					continue
				}
				s.set(i, c)
				cost := s.ev.Cost()
				if sticky && !clearlyBetter(cost, cur) || !cost.Less(bestCost) {
					continue
				}
				bestI, best, bestCost = i, c, cost
			}
			s.set(i, old)
		}
		// Room in a table, and endpoints it could hold left without an
		// entry.
		var room []*table
		for _, t := range p.tables {
			if t.sp.Capacity == 0 || s.used[t.idx] < t.sp.Capacity {
				room = append(room, t)
			}
		}
		n := 0
		var moves []choice
		for pass := 0; pass < 2 && len(room) > 0; pass++ {
			// Gold first, then in declaration order (problem.order).
			for i, e := range p.eps {
				if n == repairCandidates {
					break
				}
				if (e.ep.Class == lpg.Gold) != (pass == 0) || s.choice[i].t != nil || !e.steerable() || ss.fixed(i) {
					continue
				}
				moves = moves[:0]
				for _, t := range room {
					if s.canUse(t, i) {
						for _, q := range t.targets {
							moves = append(moves, choice{t, q})
						}
					}
				}
				if len(moves) > 0 {
					consider(i, moves)
					n++
				}
			}
		}
		// The most and least loaded queues, by load (the rates, when
		// declared) and by endpoints (what Dragonet's cost functions
		// count): an endpoint on the one moved to the other.
		var tried [2]int
		for k, by := range []func(q int) float64{s.ev.Load, func(q int) float64 { return float64(s.ev.Users(q)) }} {
			hi, lo := -1, -1
			for q := range p.queues {
				if hi < 0 || by(q) > by(hi) {
					hi = q
				}
				if q > 0 && (lo < 0 || by(q) < by(lo)) {
					lo = q
				}
			}
			tried[k] = hi
			if hi < 0 || lo < 0 || hi == lo || k == 1 && tried[0] == hi {
				continue
			}
			// Those on hi whose weight is nearest half the gap first
			// (the first repairCandidates of them, in that order).
			half := (s.ev.Load(hi) - s.ev.Load(lo)) / 2
			dist := func(i int) float64 { return abs(s.ev.Weight(i) - half) }
			on := ss.on[:0]
			for i, c := range s.choice {
				if c.t == nil || c.q != hi || ss.fixed(i) {
					continue
				}
				at, _ := slices.BinarySearchFunc(on, i, func(a, b int) int { return cmp.Compare(dist(a), dist(b)) })
				for at < len(on) && dist(on[at]) == dist(i) {
					at++ // after those as near: the earlier endpoint first
				}
				if at < repairCandidates {
					on = slices.Insert(on, at, i)
					on = on[:min(len(on), repairCandidates)]
				}
			}
			// Every move of theirs: to lo, elsewhere, or releasing the
			// entry to RSS (which spreads a heavy listener).
			for _, i := range on {
				ss.moves = p.appendMoves(ss.moves[:0], s, i)
				consider(i, ss.moves)
			}
			ss.on = on
		}
		// A gold endpoint that shares its queue (what the priority
		// functions reject): the others there move, or it does.
		n = 0
		for i, c := range s.choice {
			if n == repairCandidates {
				break
			}
			if c.t == nil || s.ev.GoldUsers(c.q) == 0 || s.ev.Users(c.q) < 2 || ss.fixed(i) {
				continue
			}
			ss.moves = p.appendMoves(ss.moves[:0], s, i)
			consider(i, ss.moves)
			n++
		}
		if bestI < 0 {
			if c, ok := ss.vacate(cur); ok {
				cur = c
				continue
			}
			return
		}
		s.set(bestI, best)
		cur = bestCost
	}
}

// follow takes the plan of the session's shadow, Dragonet's incremental
// search on the same changes, when it costs less than the session's
// after its repairs: every endpoint but those held (Hold) takes the
// shadow's choice for it (its entry, in the same table and to the same
// queue, or none; shadowMoves). The moves are kept when the session's
// cost is then lower, undone otherwise. So a session is never costlier
// than Dragonet's search on the same sequence of changes, as long as the
// two cost the same choices alike: when every endpoint the shadow leaves
// without an entry lands alike under the session's RSS mode and under
// Dragonet's no-rss (queue 0), and no endpoint's packets overlap
// another's. Overlapping entries are ordered differently: dragonc's by
// priority (flows above listeners) or, under Dragonet's cost functions,
// as dragonetOrder lists them; Dragonet's at its one priority, in the
// order it inserted them. Then the session is never costlier than the
// shadow's choices cost in its own order. "Lower" is lower by more than
// rounding (followSaves): a plan that costs the same but for the last
// bits is not taken. Checking costs O(queues), or O(endpoints) plain
// tests when endpoints overlap (Cost); following, a move per endpoint
// whose choice differs.
func (ss *Session) follow() {
	cur := ss.s.ev.Cost()
	if !followSaves(ss.shadow.Cost(), cur) {
		return
	}
	ms, ok := ss.shadowMoves()
	if !ok {
		return
	}
	ss.swap(ms, true)
	if !followSaves(ss.s.ev.Cost(), cur) || len(ss.held) > 0 && !ss.fits() {
		ss.swap(ms, false)
		return
	}
	ss.follows++
}

// followRounding is how much less, relative to itself, a plan of the
// shadow's must cost for the session to take it. Dragonet's costs are
// single precision (costmodel/dragonet.go), and the same queues' loads
// summed in another order differ in their last bit: at 1,000 equal UDP
// listeners under dragonet-balance the shadow's plan cost 0.48989797
// against the session's 0.48989800, one float32 ulp (6e-8 of it), and
// taking it moved 806 endpoints for nothing. The churn tests bound the
// session by Dragonet's search within the same tolerance.
const followRounding = 1e-6

// followSaves reports whether cost c is below cur by more than rounding
// (followRounding): costmodel.Cost.Less with a coarser tolerance.
func followSaves(c, cur costmodel.Cost) bool {
	if c.Kind != cur.Kind || c.Kind == costmodel.OK {
		return c.Less(cur)
	}
	tol := func(x float64) float64 { return followRounding * max(1, math.Abs(x)) }
	if d := cur.V - c.V; math.Abs(d) > tol(c.V) {
		return d > 0
	}
	return cur.Tie-c.Tie > tol(c.Tie)
}

// fits reports whether every table holds at most its capacity, and a
// global-mask table entries of one shape: true of the shadow's choices,
// and to be checked when held endpoints kept theirs beside them.
func (ss *Session) fits() bool {
	p, s := ss.p, ss.s
	shape := make([]string, len(p.tables))
	for _, t := range p.tables {
		if t.sp.Capacity > 0 && s.used[t.idx] > t.sp.Capacity {
			return false
		}
	}
	for i, c := range s.choice {
		if c.t == nil || !c.t.sp.GlobalMask {
			continue
		}
		if sh := p.eps[i].shape; shape[c.t.idx] == "" {
			shape[c.t.idx] = sh
		} else if shape[c.t.idx] != sh {
			return false
		}
	}
	return true
}

// move is one endpoint's choice before and after following the shadow.
type move struct {
	i       int
	was, to choice
}

// shadowMoves lists the moves that give every endpoint but those held
// the shadow's choice for it; false when a choice of the shadow's is not
// one of the session's.
func (ss *Session) shadowMoves() ([]move, bool) {
	p, s, sh := ss.p, ss.s, ss.shadow
	var ms []move
	for i, e := range p.eps {
		var to choice
		if c := sh.s.choice[e.twin.index]; c.t != nil {
			to = choice{ss.tmap[c.t.idx], ss.qmap[c.q]}
			if to.t == nil || to.q < 0 {
				return nil, false
			}
		}
		if to != s.choice[i] && !ss.held[e.ep.Name] {
			ms = append(ms, move{i, s.choice[i], to})
		}
	}
	return ms, true
}

// swap makes the moves (forward) or undoes them: every entry out first,
// then the new ones in, so that no table holds more than its capacity,
// or two shapes, on the way.
func (ss *Session) swap(ms []move, forward bool) {
	s := ss.s
	from, to := func(m move) choice { return m.was }, func(m move) choice { return m.to }
	if !forward {
		from, to = to, from
	}
	for _, m := range ms {
		if from(m).t != nil {
			s.set(m.i, choice{})
		}
	}
	for _, m := range ms {
		if c := to(m); c.t != nil {
			s.set(m.i, c)
		}
	}
}

// heavy reports whether endpoint i's packets overlap so many others'
// that a move of its entry re-costs every one of them (they may take
// part of its packets, or it of theirs): repairs leave it where it is.
// An added one is still placed, once.
func (ss *Session) heavy(i int) bool { return len(ss.p.eps[i].over) > manyOverlaps }

// fixed reports whether repairs leave endpoint i where it is: it is
// heavy, or held (Hold).
func (ss *Session) fixed(i int) bool { return ss.heavy(i) || ss.held[ss.p.eps[i].ep.Name] }

// Hold keeps the named endpoints where they are through the changes
// that follow (the repairs after an addition, a removal or SetRates
// move the others only), until the next Hold, which replaces the set;
// Hold() holds none. A program re-planning from measured rates holds
// the endpoints that moved lately, so that none moves back and forth
// (run's Rebalancer). Names the session does not have are ignored: an
// endpoint removed since is held by no one.
func (ss *Session) Hold(names ...string) {
	ss.held = nil
	for _, n := range names {
		if ss.held == nil {
			ss.held = map[string]bool{}
		}
		ss.held[n] = true
	}
}

// vacateMax bounds the endpoints vacate moves off one queue.
const vacateMax = 32

// vacate gives a gold endpoint that shares its queue a queue alone, when
// single moves cannot (the priority functions reject a shared gold queue
// until its last other endpoint left): its own queue, or the queue
// without gold that the fewest endpoints use, which it moves to; every
// other endpoint with an entry there (at most vacateMax) moves to its
// cheapest choice elsewhere, one after another. The moves are kept when
// together they save MoveThreshold of the cost cur (clearlyBetter), and
// undone otherwise. At most repairCandidates gold endpoints are tried. It
// returns the new cost and whether it kept the moves.
func (ss *Session) vacate(cur costmodel.Cost) (costmodel.Cost, bool) {
	p, s := ss.p, ss.s
	tried := 0
	for g, gc := range s.choice {
		if tried == repairCandidates {
			break
		}
		if gc.t == nil || p.eps[g].ep.Class != lpg.Gold || s.ev.Users(gc.q) < 2 || ss.fixed(g) {
			continue
		}
		tried++
		targets := []int{gc.q}
		fewest := -1
		for _, q := range gc.t.targets {
			if q > 0 && q != gc.q && s.ev.GoldUsers(q) == 0 && (fewest < 0 || s.ev.Users(q) < s.ev.Users(fewest)) {
				fewest = q
			}
		}
		if fewest >= 0 {
			targets = append(targets, fewest)
		}
		for _, q := range targets {
			var others []int
			costly := false
			for i, c := range s.choice {
				if i != g && c.t != nil && c.q == q {
					others = append(others, i)
					costly = costly || ss.fixed(i)
				}
			}
			if len(others) > vacateMax || costly {
				continue
			}
			s.set(g, choice{gc.t, q})
			was := make([]choice, len(others))
			for k, i := range others {
				was[k] = s.choice[i]
				ss.moves = p.appendMoves(ss.moves[:0], s, i)
				best, bestCost, found := was[k], costmodel.Cost{}, false
				for _, c := range ss.moves {
					if c.t != nil && c.q == q {
						continue
					}
					s.set(i, c)
					if cost := s.ev.Cost(); !found || cost.Less(bestCost) {
						best, bestCost, found = c, cost, true
					}
				}
				s.set(i, best)
			}
			if c := s.ev.Cost(); clearlyBetter(c, cur) {
				return c, true
			}
			for k := len(others) - 1; k >= 0; k-- {
				s.set(others[k], was[k])
			}
			s.set(g, gc)
		}
	}
	return cur, false
}

// commit turns the change's records into a Delta: locations are given to
// the new entries and taken back from the old ones.
func (ss *Session) commit() *Delta {
	s := ss.s
	d := &Delta{}
	type freed struct {
		t    *table
		slot int
		e    *endpoint
		c    choice
	}
	var frees []freed
	var need []*endpoint
	for _, e := range ss.order {
		r := ss.rec[e]
		switch {
		case e.gone && r.added:
			continue
		case e.gone:
			d.Removed = append(d.Removed, e.ep.Name)
			d.Queues = append(d.Queues, QueueChange{Endpoint: e.ep.Name, From: r.queues})
			if r.choice.t != nil && !ss.dragonet {
				frees = append(frees, freed{r.choice.t, e.slot, e, r.choice})
				e.slot = -1
			}
			continue
		}
		c := s.choice[e.index]
		qs := ss.queueIDs(e.index)
		if r.added {
			d.Added = append(d.Added, e.ep.Name)
			d.Queues = append(d.Queues, QueueChange{Endpoint: e.ep.Name, To: qs})
		} else if !slices.Equal(qs, r.queues) {
			d.Queues = append(d.Queues, QueueChange{Endpoint: e.ep.Name, From: r.queues, To: qs})
		}
		if c == r.choice {
			continue
		}
		switch {
		case r.choice.t != nil && r.choice.t == c.t:
			// Another queue, the same slot.
			d.Insert = append(d.Insert, EntryChange{Node: c.t.sp.Node, Slot: e.slot, Entry: ss.entry(e, c), Replaces: e.ep.Name})
			continue
		case r.choice.t != nil && !ss.dragonet:
			frees = append(frees, freed{r.choice.t, e.slot, e, r.choice})
			e.slot = -1
		case r.choice.t != nil:
			// Dragonet leaves the entry behind (the jump made it an
			// orphan); the endpoint took another.
		}
		if c.t != nil {
			need = append(need, e)
		}
	}
	// New entries: a location free before this change (or the one
	// Dragonet's oracle repurposed), else one a removed endpoint of this
	// change frees (the Insert replaces its entry), else a new one at the
	// end. A location an endpoint that moved left is not given out in the
	// same change: its new entry need not be written first.
	for _, e := range need {
		c := s.choice[e.index]
		replaces := ""
		if e.slot < 0 {
			k := slices.IndexFunc(frees, func(f freed) bool { return f.e.gone && !f.t.identity })
			switch {
			case c.t.identity:
				ss.takeSlot(e, c.t, -1)
			case ss.slots.free.Len() > 0:
				ss.takeSlot(e, c.t, heap.Pop(&ss.slots.free).(int))
			case k >= 0:
				replaces = frees[k].e.ep.Name
				ss.takeSlot(e, c.t, frees[k].slot)
				frees = slices.Delete(frees, k, k+1)
			default:
				ss.takeSlot(e, c.t, -1)
			}
		} else if o, ok := ss.repurposed[e]; ok {
			replaces = o
		}
		d.Insert = append(d.Insert, EntryChange{Node: c.t.sp.Node, Slot: e.slot, Entry: ss.entry(e, c), Replaces: replaces})
	}
	for _, f := range frees {
		if !f.t.identity && ss.slots.owner[f.slot] == f.e {
			ss.freeSlot(f.t, f.slot)
		}
		d.Delete = append(d.Delete, EntryChange{Node: f.t.sp.Node, Slot: f.slot, Entry: ss.entry(f.e, f.c)})
	}
	ss.repurposed = nil
	slices.SortFunc(d.Insert, byNodeSlot)
	slices.SortFunc(d.Delete, byNodeSlot)
	slices.SortFunc(d.Queues, func(a, b QueueChange) int { return cmp.Compare(a.Endpoint, b.Endpoint) })
	ss.rec = nil
	return d
}

// takeSlot gives e location slot (-1: the next one at the end); an
// identity hash's slot is the endpoint's bucket.
func (ss *Session) takeSlot(e *endpoint, t *table, slot int) {
	if t.identity {
		e.slot = int(e.ep.OMXID)
		return
	}
	st := &ss.slots
	if slot < 0 {
		slot = len(st.owner)
	}
	for len(st.owner) <= slot {
		st.owner = append(st.owner, nil)
	}
	st.owner[slot] = e
	e.slot = slot
}

// own makes e (nil: no endpoint, an orphan) the owner of location slot
// of a table t.
func (ss *Session) own(t *table, slot int, e *endpoint) {
	if !t.identity && slot >= 0 {
		ss.slots.owner[slot] = e
	}
}

// freeSlot gives location slot of a table t back.
func (ss *Session) freeSlot(t *table, slot int) {
	if t.identity || slot < 0 {
		return
	}
	ss.slots.owner[slot] = nil
	heap.Push(&ss.slots.free, slot)
}

// entry is endpoint e's entry for choice c, as plan.json writes it.
func (ss *Session) entry(e *endpoint, c choice) plan.Entry {
	sp := c.t.sp
	action, _ := sp.ActionFor(ss.p.queues[c.q].id)
	ms := e.match[c.t.idx]
	pe := plan.Entry{Match: prg.Entry{Match: ms}.Predicate(sp).String(), Action: action, Priority: entryPriority(c.t, e, ss.s.dragonetPrio), Endpoint: e.ep.Name}
	for _, f := range ms {
		pe.Fields = append(pe.Fields, plan.Field{Field: f.Field, Value: f.Value, Mask: f.Mask})
	}
	return pe
}

// Result embeds the session's stack as it is now under the session's
// configuration: a Result like Run's (its plan's strategy incremental,
// its changes those since the plan the session started from), for
// dragonc run, the backends and verify. It derives the LPG and embeds it
// afresh, which costs what embedding the stack does; a change does not
// need it when the generated code reads its endpoint tables as data.
func (ss *Session) Result() (*Result, error) { return ss.ResultLater()() }

// ResultLater is Result in two halves: it copies what Result reads of
// the session now (O(endpoints)), and returns what makes the Result from
// that copy, which may run on another goroutine while the session goes
// on changing (dragonc run makes the plan of its reloads so, without
// holding up the next reload).
func (ss *Session) ResultLater() func() (*Result, error) {
	in := *ss.p.in
	in.Stack = ss.Stack()
	in.LPG = nil
	in.Previous = ss.base
	if ss.base == nil {
		in.Strategy = StrategyDragonetGreedy
	}
	mode := ss.p.modes[ss.s.mode]
	queues, modeName := slices.Clone(mode.queues), mode.name
	prio := ss.s.dragonetPrio
	// Each endpoint's entry: its table's node and queue ("" for none).
	type pick struct {
		node string
		q    int
	}
	picks := make([]pick, len(ss.s.choice))
	for i, c := range ss.s.choice {
		if c.t != nil {
			picks[i] = pick{c.t.sp.Node, c.q}
		}
	}
	var rank []int
	if prio {
		rank = slices.Clone(ss.p.rank)
	}
	return func() (*Result, error) {
		g, err := lpg.Derive(in.Stack)
		if err != nil {
			return nil, err
		}
		in := in
		in.LPG = g
		return run(&in, func(p *problem) (*state, error) {
			mode := slices.IndexFunc(p.modes, func(m rssMode) bool { return slices.Equal(m.queues, queues) })
			if mode < 0 {
				return nil, fmt.Errorf("dragonc: internal error: the session's RSS mode %s is not one of the stack's", modeName)
			}
			s := p.newState(mode)
			s.dragonetPrio = prio
			byNode := map[string]*table{}
			for _, t := range p.tables {
				byNode[t.sp.Node] = t
			}
			for i, c := range picks {
				if c.node == "" {
					continue
				}
				if t := byNode[c.node]; t != nil {
					s.set(i, choice{t, c.q})
				}
			}
			if s.dragonetPrio {
				// Dragonet's entries in the order it inserted them.
				copy(p.rank, rank)
				p.dorder = p.declared()
				slices.SortStableFunc(p.dorder, func(a, b int) int { return cmp.Compare(p.rank[a], p.rank[b]) })
			}
			return s, nil
		})
	}
}
