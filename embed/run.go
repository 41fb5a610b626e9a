package embed

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embedding"
	"github.com/dragonc/dragonc/engines"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/streams"
)

// Result is a finished plan with the embedding behind it.
type Result struct {
	Plan      *plan.Plan
	Embedding *embedding.Embedding
	Cost      costmodel.Cost
	p         *problem
	state     *state
	// Tasks is the placement of the NIC's tasks on its engines, if any.
	Tasks *TaskPlacement
	// VIA is the NIC's VIA provider, if it has Virtual Interfaces.
	VIA *streams.Provider
}

// TaskPlacement is the partition of a NIC's tasks over its engines.
type TaskPlacement struct {
	Tasks   []engines.Task
	Engines []engines.Engine
	engines.Placement
}

// steers reports whether table holds entries in cfg.
func steers(cfg *prg.Config, table string) bool {
	v := cfg.Values[table]
	return v != nil && len(v.Entries) > 0
}

// placeTasks partitions the NIC's tasks (firmware handlers) over its
// engines and records it as the value of its place node.
func (p *problem) placeTasks(cfg *prg.Config) *TaskPlacement {
	m := p.in.Model
	var sp *prg.Space
	for _, s := range m.Spaces {
		if s.Kind == prg.Place {
			sp = s
		}
	}
	// A task serving a table (firmware steering) runs per packet, at the
	// stack's rate, only while the table holds entries.
	rate := 0.0
	for _, e := range p.in.Stack.Endpoints {
		rate += e.Rate
	}
	tasks, engs := engines.ModelTasks(m, rate, func(table string) bool { return steers(cfg, table) })
	if sp == nil || len(tasks) == 0 || len(engs) == 0 {
		return nil
	}
	if p.in.Driver != nil {
		if ok, why := p.in.Driver.Exposes(sp); !ok {
			w := fmt.Sprintf("%s: the tasks are not partitioned over the NIC's engines: %s", sp.Node, why)
			if !slices.Contains(p.warns, w) {
				p.warns = append(p.warns, w)
			}
			return nil
		}
	}
	pl := engines.Place(tasks, engs)
	v := &prg.Value{Kind: prg.Place, Placement: map[string]string{}}
	for i, t := range tasks {
		v.Placement[t.Name] = engs[pl.Engine[i]].Name
	}
	cfg.Values[sp.Node] = v
	return &TaskPlacement{Tasks: tasks, Engines: engs, Placement: pl}
}

// placeStage places on each programmable stage of the model (the eBPF
// stage of linux-xdp) the part of the LPG's receive path it can run.
func placeStage(m *prg.Model, cfg *prg.Config, lpgGraph *graph.Graph) {
	for _, sp := range m.Spaces {
		if sp.Kind == prg.Program {
			cfg.Values[sp.Node] = prg.PlaceProgram(sp, lpgGraph)
		}
	}
}

// Greedy returns dragonet-greedy's cost on the same input, for
// comparison, or the error that stopped it (Dragonet's search stops when
// its tables are full). The problem runs it once.
func (r *Result) Greedy() (costmodel.Cost, error) {
	if r.p.in.Strategy == StrategyDragonetGreedy {
		return r.Cost, nil
	}
	g, err := r.p.dragonetGreedy()
	if err != nil {
		return costmodel.Cost{}, err
	}
	return g.ev.Cost(), nil
}

// Run searches a configuration, embeds the LPG, and builds the plan.
func Run(in *Input) (*Result, error) {
	return run(in, func(p *problem) (*state, error) { return p.search(in.Strategy) })
}

// run is Run with the search given: it returns the state the plan
// configures, for a problem of in (a second problem when firmware
// steering must be left to the host).
func run(in *Input, search func(p *problem) (*state, error)) (*Result, error) {
	for _, n := range in.LPG.Nodes {
		if n.Kind == graph.Config {
			return nil, fmt.Errorf("%s is not an LPG: node %s is a configuration node (LPGs describe protocol work; configuration belongs to PRGs)", in.LPG.Name, n.Name)
		}
	}
	if len(in.Model.Foreign) > 0 {
		// Atoms naming LPG nodes (Dragonet's models): resolved against
		// this LPG, or the model is refused where it names them.
		m, diags := in.Model.Resolve(in.LPG)
		if diags.HasErrors() {
			return nil, diags
		}
		resolved := *in
		resolved.Model = m
		in = &resolved
	}
	via, err := streams.ProviderOf(in.Model)
	if err != nil {
		return nil, err
	}
	if in.Calibration != nil {
		if via == nil {
			return nil, fmt.Errorf("a calibration of %s decides the streams of a model with Virtual Interfaces; %s has none", in.Calibration.Provider, in.Model.Name)
		}
		via = via.Calibrated(in.Calibration)
	}
	p, err := newProblem(in)
	if err != nil {
		return nil, err
	}
	s, err := search(p)
	if err != nil {
		return nil, err
	}
	cfg := p.config(s.choice, s.mode, s.dragonetPrio)
	placement := p.placeTasks(cfg)
	// Firmware steering that would overload the NIC's cores is left to the
	// host: search again without those tables.
	if placement != nil && placement.MaxLoad() > 100 {
		exclude := map[string]bool{}
		for _, n := range in.Model.TaskTables() {
			if steers(cfg, n) {
				exclude[n] = true
			}
		}
		if len(exclude) > 0 {
			load := placement.MaxLoad()
			if p, err = newProblemExcluding(in, exclude); err != nil {
				return nil, err
			}
			if s, err = search(p); err != nil {
				return nil, err
			}
			cfg = p.config(s.choice, s.mode, s.dragonetPrio)
			placement = p.placeTasks(cfg)
			p.warns = append(p.warns, fmt.Sprintf("demultiplexing in the NIC's firmware at the declared rates would load a core %.0f%%; the host does it", load))
		}
	}
	placeStage(in.Model, cfg, in.LPG)
	if errs := in.Model.Validate(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("dragonc: internal error: the search produced an invalid configuration: %v", errs[0])
	}
	em, err := embedding.New(in.Model, cfg, in.LPG, p.paths)
	if err != nil {
		return nil, err
	}
	r := &Result{Embedding: em, Cost: s.ev.Cost(), p: p, state: s, Tasks: placement, VIA: via}
	r.Plan = r.plan()
	p.modeStates = nil
	p.paths = nil // the endpoints keep their own boxes
	return r, nil
}

// SearchCost evaluates an input's cost function on a strategy's result, for
// comparisons.
func SearchCost(in *Input) (costmodel.Cost, error) {
	p, err := newProblem(in)
	if err != nil {
		return costmodel.Cost{}, err
	}
	s, err := p.search(in.Strategy)
	if err != nil {
		return costmodel.Cost{}, err
	}
	return s.ev.Cost(), nil
}

// references computes the two reference costs with the search's own
// rules: no entry anywhere and no RSS (everything on queue 0, in
// software), and no entry with RSS over every queue (Linux's default).
func (p *problem) references() (soft, rss costmodel.Cost) {
	soft = p.costWithoutEntries(p.mode(modeNone))
	rss = soft
	if m := p.mode(modeAll); m >= 0 {
		rss = p.costWithoutEntries(m)
	}
	return soft, rss
}

// plan assembles plan.json.
func (r *Result) plan() *plan.Plan {
	p, em := r.p, r.Embedding
	pl := &plan.Plan{GeneratedBy: "dragonc", SchemaVersion: plan.SchemaVersion, NIC: p.in.NIC, Stack: p.in.Stack.Name, Strategy: strategyName(p.in.Strategy), Target: TargetSilicon,
		Placement: map[string]plan.Place{}, Warnings: []string{}}
	if p.in.Driver != nil {
		pl.Target, pl.Driver = TargetLinux, p.in.Driver.Name
	}
	soft, rss := p.references()
	pl.Cost = plan.Cost{Function: p.in.Cost.Name(), Value: round(r.Cost.V), Kind: r.Cost.Kind, Tie: round(r.Cost.Tie),
		SoftwareOnly: plan.Ref{Value: round(soft.V), Kind: soft.Kind}, RSSOnly: plan.Ref{Value: round(rss.V), Kind: rss.Kind}}
	coreOf := map[int]int{}
	for _, q := range p.queues {
		coreOf[q.id] = q.core
	}
	for _, qe := range em.Queues {
		qe.Core = coreOf[qe.ID]
		pq := plan.Queue{ID: qe.ID, Core: qe.Core, Endpoints: append([]string{}, qe.Endpoints...), Software: qe.Software()}
		pl.Queues = append(pl.Queues, pq)
	}
	pl.Config = r.planConfig()
	pl.Endpoints = make([]plan.Endpoint, 0, len(p.eps))
	for _, e := range p.eps {
		pe := plan.Endpoint{Name: e.ep.Name, Queues: em.Reach[e.ep.Name], Steering: em.Steer[e.ep.Name], AppCores: e.ep.Cores, App: e.ep.App}
		if pe.Queues == nil {
			pe.Queues = []int{}
		}
		pe.IRQCores = make([]int, 0, len(pe.Queues))
		for _, q := range pe.Queues {
			pe.IRQCores = append(pe.IRQCores, coreOf[q])
		}
		slices.Sort(pe.IRQCores)
		pe.IRQCores = slices.Compact(pe.IRQCores)
		if w := r.spreadInto(&pe, e.index); w != "" {
			pl.Warnings = append(pl.Warnings, w)
		}
		if w := r.coresInto(&pe, e.index); w != "" {
			pl.Warnings = append(pl.Warnings, w)
		}
		pl.Endpoints = append(pl.Endpoints, pe)
	}
	pl.Placement = r.placement()
	if tp := r.Tasks; tp != nil {
		mem := make([]float64, len(tp.Engines))
		for i, t := range tp.Tasks {
			e := tp.Engine[i]
			pl.Placement[t.Name] = plan.Place{Where: "engine", Engine: tp.Engines[e].Name}
			mem[e] += t.Memory
		}
		for e, en := range tp.Engines {
			pe := plan.Engine{Name: en.Name, Percent: round(tp.Loads[e]), Memory: mem[e], Tasks: []string{}}
			for i, t := range tp.Tasks {
				if tp.Engine[i] == e {
					pe.Tasks = append(pe.Tasks, t.Name)
				}
			}
			sort.Strings(pe.Tasks)
			pl.Engines = append(pl.Engines, pe)
		}
		if !tp.MemoryOK {
			pl.Warnings = append(pl.Warnings, "the tasks do not fit the engines' fast memory: some run from shared memory")
		}
		for e, en := range tp.Engines {
			if tp.Loads[e] > 100 {
				pl.Warnings = append(pl.Warnings, fmt.Sprintf("engine %s is loaded %.0f%% at the declared rates: beyond its cycle budget", en.Name, tp.Loads[e]))
			}
		}
	}
	for i := range pl.Endpoints {
		e := p.in.Stack.Endpoints[i]
		if e.Message > 0 {
			c := engines.Copies(p.in.CopyEngine, string(e.Proto), e.Message)
			pl.Endpoints[i].Copy, pl.Endpoints[i].Why = c.Engine, c.Reason
		}
	}
	if r.VIA != nil {
		pl.VIA = planVIA(r.VIA, p.in.Stack)
	}
	// Endpoints left to RSS that a table could hold: when the tables that
	// could hold them have less room left than that, the tables are full
	// for this stack (the search may also leave a few to RSS on purpose).
	left, free := 0, 0
	tables := map[*table]bool{}
	for i, c := range r.state.choice {
		if c.t != nil || !p.eps[i].steerable() {
			continue
		}
		left++
		for ti, m := range p.eps[i].match {
			if t := p.tables[ti]; m != nil && !tables[t] {
				tables[t] = true
				if t.sp.Capacity == 0 {
					free = math.MaxInt
				} else if free < math.MaxInt {
					free += max(0, t.sp.Capacity-r.state.used[t.idx])
				}
			}
		}
	}
	if left > free {
		var names []string
		for t := range tables {
			names = append(names, t.sp.Node)
		}
		slices.Sort(names)
		pl.Warnings = append(pl.Warnings, fmt.Sprintf("the filter tables are full: %d endpoints are steered by RSS or the default queue and demultiplexed in software; %s have room for %d more", left, strings.Join(names, ", "), free))
	}
	if p.in.Strategy == StrategyIncremental && p.in.Previous != nil {
		pl.Changes = r.changes(pl)
	}
	pl.Warnings = append(pl.Warnings, p.warns...)
	// The NIC drops frames at checks of its own; where the LPG has no
	// check of that name it would have accepted them, and the embedded
	// stack treats them differently (verify shows the frames).
	m := r.Embedding.Model
	for _, n := range r.Embedding.HW.Nodes {
		if m.Reported(n.ID) || m.IsQueue(n.ID) || n.Kind.IsGate() || n.HasAttr("source") || graph.Transmit(n.Name) {
			continue
		}
		if _, ok := r.Embedding.LPG.Lookup(n.Name); ok {
			continue
		}
		for i, port := range n.Ports {
			if slices.ContainsFunc(n.Ports[:i], func(p *graph.Port) bool { return p.Pred == pred.Const(true) }) {
				break // an earlier port takes every frame
			}
			if len(port.Succ) == 0 && port.Pred == nil && len(n.Ports) > 1 || len(port.Succ) == 0 && port.Pred != nil {
				pl.Warnings = append(pl.Warnings, fmt.Sprintf("the NIC drops frames at %s.%s, a check the LPG does not make: those frames are treated differently", n.Name, port.Name))
				break
			}
		}
	}
	sort.Strings(pl.Warnings)
	return pl
}

// spreadInto says in pe how the plan spreads endpoint i when the spread
// rule (costmodel.Problem.Spread) wants it spread, and returns a warning
// when the plan serves it on fewer cores than the rule asks.
func (r *Result) spreadInto(pe *plan.Endpoint, i int) string {
	p := r.p
	sp := p.cp.Spread(i)
	if sp.N <= 1 {
		return ""
	}
	pe.SpreadWhy = sp.Why
	want, mine := fmt.Sprintf("%d cores", sp.N), pe.IRQCores
	if sp.Cores != nil {
		want = "cores " + joinInts(sp.Cores)
		mine = slices.DeleteFunc(slices.Clone(pe.IRQCores), func(c int) bool { return !slices.Contains(sp.Cores, c) })
	}
	if len(mine) >= 2 {
		pe.Spread = fmt.Sprintf("%s over queues %s on cores %s", pe.Steering, joinInts(pe.Queues), joinInts(pe.IRQCores))
		if len(mine) < sp.N {
			pe.Spread += fmt.Sprintf(", %d of the %s it should be spread over", len(mine), want)
		}
		return ""
	}
	why := r.whyNotSpread(i, sp)
	pe.Spread = fmt.Sprintf("not spread: served on %s", coreList(pe.IRQCores))
	return fmt.Sprintf("endpoint %s should be spread over %s (%s) but is served on %s: %s", pe.Name, want, sp.Why, coreList(pe.IRQCores), why)
}

// strategyName is the strategy's name in plan.json: "" is the default.
func strategyName(s Strategy) string {
	if s == "" {
		return string(StrategyDefault)
	}
	return string(s)
}

// round keeps plan numbers stable across platforms.
func round(v float64) float64 {
	if v == 0 {
		return 0
	}
	const scale = 1e6
	return float64(int64(v*scale+0.5)) / scale
}

func (r *Result) planConfig() []plan.Config {
	m := r.p.in.Model
	c := r.Embedding.Config
	var out []plan.Config
	owner := map[string]string{} // entry key -> endpoint
	for i, ch := range r.state.choice {
		if ch.t != nil && !ch.t.identity {
			e := r.p.eps[i]
			owner[entryKeyOf(ch.t.sp.Node, e.match[ch.t.idx])] = e.ep.Name
		}
	}
	for _, sp := range m.Spaces {
		v := c.Values[sp.Node]
		pc := plan.Config{Node: sp.Node, Kind: string(sp.Kind)}
		switch sp.Kind {
		case prg.Enum:
			pc.Choice = sp.Choices[0]
			if v != nil {
				pc.Choice = v.Choice
			}
		case prg.Table:
			if v == nil || len(v.Entries) == 0 {
				continue
			}
			for _, e := range v.Entries {
				pe := plan.Entry{Match: e.Predicate(sp).String(), Action: e.Action, Priority: e.Priority, Endpoint: owner[entryKeyOf(sp.Node, e.Match)]}
				for _, f := range e.Match {
					pe.Fields = append(pe.Fields, plan.Field{Field: f.Field, Value: f.Value, Mask: f.Mask})
				}
				pc.Entries = append(pc.Entries, pe)
			}
		case prg.Hash:
			if v == nil || v.Indirection == nil {
				continue
			}
			pc.Indirection = v.Indirection
		case prg.Place:
			if v == nil {
				continue
			}
			pc.Placement = v.Placement
		case prg.Program:
			if v == nil || len(v.Program) == 0 {
				continue
			}
			pc.Runs, pc.Drops = v.StageNodes()
		}
		out = append(out, pc)
	}
	return out
}

func entryKeyOf(node string, ms []prg.FieldMatch) string {
	return fmt.Sprint(node, ms)
}

// placement summarises every LPG node over the queues.
func (r *Result) placement() map[string]plan.Place {
	em := r.Embedding
	out := make(map[string]plan.Place, len(em.LPG.Nodes))
	tx := embedding.TxOffloaded(em.Model, em.HW, em.LPG, r.p.in.Driver)
	for _, n := range em.LPG.Nodes {
		if tx[n.Name] {
			// The NIC fills it in every frame sent; the transmit
			// descriptor asks for it.
			out[n.Name] = plan.Place{Where: "hardware", Descriptor: true}
			continue
		}
		var sw []int
		hw, flag, removed := false, false, false
		for _, qe := range em.Queues {
			switch qe.StatusAt(n.ID) {
			case embedding.Software:
				sw = append(sw, qe.ID)
			case embedding.HardwareFlag:
				flag = true
				sw = append(sw, qe.ID)
			case embedding.Hardware:
				hw = true
			case embedding.Removed:
				removed = true
			}
		}
		switch {
		case flag && len(sw) > 0:
			out[n.Name] = plan.Place{Where: "hardware", Descriptor: true, Queues: sw}
		case len(sw) > 0:
			out[n.Name] = plan.Place{Where: "software", Queues: sw}
		case hw:
			out[n.Name] = plan.Place{Where: "hardware"}
		case removed:
			out[n.Name] = plan.Place{Where: "removed"}
		default:
			if graph.Transmit(n.Name) {
				out[n.Name] = plan.Place{Where: "software"}
				continue
			}
			out[n.Name] = plan.Place{Where: "removed"}
		}
	}
	return out
}

// incremental starts from the previous plan's entries for endpoints that
// still exist, places new endpoints as a Session does (placeCheapest),
// then improves; moving an endpoint that already had an entry must pay
// for itself (MoveThreshold).
func (p *problem) incremental() (*state, error) {
	prev := p.in.Previous
	if prev == nil {
		return nil, fmt.Errorf("the incremental strategy needs the previous plan (--previous plan.json)")
	}
	if probs := CheckPrevious(prev, p.in.Model); len(probs) > 0 {
		return nil, fmt.Errorf("the previous plan was not made for this NIC model: %s", strings.Join(probs, "; "))
	}
	s := p.newState(p.previousMode(prev))
	byNode := map[string]*table{}
	for _, t := range p.tables {
		byNode[t.sp.Node] = t
	}
	qByID := map[int]int{}
	for i, q := range p.queues {
		qByID[q.id] = i
	}
	idx := map[string]int{}
	for i, e := range p.eps {
		idx[e.ep.Name] = i
	}
	existing := map[int]bool{}
	for _, pc := range prev.Config {
		t := byNode[pc.Node]
		if t == nil {
			continue
		}
		for _, pe := range pc.Entries {
			i, ok := idx[pe.Endpoint]
			q, qok := qByID[p.in.Model.QueueIndex(pe.Action)]
			if !ok || !qok || !s.canUse(t, i) || !sameMatch(p.eps[i].match[t.idx], pe.Fields) {
				continue
			}
			s.set(i, choice{t, q})
			existing[i] = true
		}
	}
	known := map[string]bool{}
	for _, pe := range prev.Endpoints {
		known[pe.Name] = true
	}
	// New endpoints, each its cheapest choice, as a Session places them.
	var moves []choice
	start := 0
	for _, i := range p.order() {
		if !known[p.eps[i].ep.Name] {
			var offered bool
			if moves, offered = p.placeCheapest(s, i, start, moves); offered {
				start = (start + 1) % len(p.queues)
			}
		}
	}
	// Improve; existing endpoints move only for a clear gain.
	cur := s.ev.Cost()
	sticky := func(i int) bool { return existing[i] }
	for sweep := 0; sweep < 5; sweep++ {
		var improved bool
		if cur, improved = p.moveSweep(s, cur, sticky); !improved {
			break
		}
	}
	return s, nil
}

// placeCheapest gives endpoint i the cheapest of its moves (appendMoves:
// no entry, or an entry in a table with room to one of its queues; in
// Dragonet's space an entry whenever a table has room), each table's
// queues tried from its start-th target on, so that among equal costs
// successive placements take successive queues, as Dragonet's oracle
// turns its start queue (allQueues_, Search.hs lines 132-133 and 1341).
// The first cheapest wins. buf is scratch space, returned for reuse;
// offered says whether there were entries to choose from.
func (p *problem) placeCheapest(s *state, i, start int, buf []choice) ([]choice, bool) {
	buf = p.appendMovesFrom(buf[:0], s, i, start)
	best, bestCost := choice{}, costmodel.Cost{}
	for k, c := range buf {
		s.set(i, c)
		if cost := s.ev.Cost(); k == 0 || cost.Less(bestCost) {
			best, bestCost = c, cost
		}
	}
	s.set(i, best)
	return buf, len(buf) > 1 || buf[0].t != nil
}

// previousMode is the RSS mode of a previous plan: the mode whose table
// names the same queues, else the preferred one.
func (p *problem) previousMode(prev *plan.Plan) int {
	if p.hash == nil {
		return 0
	}
	for _, pc := range prev.Config {
		if pc.Node != p.hash.Node {
			continue
		}
		for m := range p.modes {
			want := p.rssTargets(m)
			got := slices.Compact(slices.Sorted(slices.Values(pc.Indirection)))
			if slices.Equal(slices.Sorted(slices.Values(want)), got) {
				return m
			}
		}
	}
	return 0
}

// MoveThreshold is the share of the cost a move of an existing endpoint must
// save: moving a flow disturbs its connection's cache and its interrupt.
// It is the hysteresis of --strategy incremental and of a Session.
const MoveThreshold = 0.05

func clearlyBetter(a, b costmodel.Cost) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.V < b.V-MoveThreshold*abs(b.V)-1e-9
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func sameMatch(ms []prg.FieldMatch, fs []plan.Field) bool {
	if len(ms) != len(fs) {
		return false
	}
	for i := range ms {
		if ms[i].Field != fs[i].Field || ms[i].Value != fs[i].Value || ms[i].Mask != fs[i].Mask {
			return false
		}
	}
	return true
}

// changes lists the rules to remove and add against the previous plan.
func (r *Result) changes(pl *plan.Plan) *plan.Changes {
	prev := r.p.in.Previous
	type key struct{ node, endpoint, match, action string }
	old := map[key]bool{}
	for _, pc := range prev.Config {
		for _, e := range pc.Entries {
			old[key{pc.Node, e.Endpoint, e.Match, e.Action}] = true
		}
	}
	cur := map[key]bool{}
	for _, pc := range pl.Config {
		for _, e := range pc.Entries {
			cur[key{pc.Node, e.Endpoint, e.Match, e.Action}] = true
		}
	}
	ch := &plan.Changes{Remove: []plan.Rule{}, Add: []plan.Rule{}, Moved: []string{}}
	for k := range old {
		if !cur[k] {
			ch.Remove = append(ch.Remove, plan.Rule{Node: k.node, Endpoint: k.endpoint, Match: k.match, Action: k.action})
		}
	}
	for k := range cur {
		if !old[k] {
			ch.Add = append(ch.Add, plan.Rule{Node: k.node, Endpoint: k.endpoint, Match: k.match, Action: k.action})
		}
	}
	less := func(rs []plan.Rule) func(i, j int) bool {
		return func(i, j int) bool {
			if rs[i].Node != rs[j].Node {
				return rs[i].Node < rs[j].Node
			}
			if rs[i].Endpoint != rs[j].Endpoint {
				return rs[i].Endpoint < rs[j].Endpoint
			}
			return rs[i].Action < rs[j].Action
		}
	}
	sort.Slice(ch.Remove, less(ch.Remove))
	sort.Slice(ch.Add, less(ch.Add))
	// An endpoint that keeps existing but loses or changes its rule moves:
	// its packets land elsewhere (another queue, or wherever RSS puts them).
	exists := map[string]bool{}
	for _, e := range r.p.eps {
		exists[e.ep.Name] = true
	}
	for _, x := range ch.Remove {
		if exists[x.Endpoint] && x.Endpoint != "" {
			ch.Moved = append(ch.Moved, x.Endpoint)
		}
	}
	sort.Strings(ch.Moved)
	ch.Moved = slices.Compact(ch.Moved)
	return ch
}

// Driver returns the Linux driver the plan was made for, or nil for a plan
// of the whole silicon.
func (r *Result) Driver() *prg.Driver { return r.p.in.Driver }

// Model is the NIC model the plan configures.
func (r *Result) Model() *prg.Model { return r.p.in.Model }

// Stack is the stack that was embedded (a stack of no endpoints for an
// explicit LPG).
func (r *Result) Stack() *lpg.Stack { return r.p.in.Stack }

// SoftwareStage reports whether the model is a steering stage that dragonc
// run builds in software (resources { stage "ebpf" }), not silicon a
// driver configures: nothing of its plan is for ethtool.
func (r *Result) SoftwareStage() bool {
	m := r.p.in.Model
	return m != nil && m.Props["stage"].Str == "ebpf"
}

// planVIA records the VI decision: the provider's predicted latencies and
// how each stream endpoint travels.
func planVIA(prov *streams.Provider, st *lpg.Stack) *plan.VIA {
	v := &plan.VIA{Engine: prov.Engine, Provider: prov.Name, VIs: prov.VIs, CopyMax: prov.CopyMax, Basis: "model", Sizes: []plan.VIASize{}, Streams: []plan.Stream{}}
	policy := func(size int) string {
		if size <= prov.CopyMax {
			return "copy"
		}
		return "register"
	}
	if c := prov.Calibration; c != nil {
		v.Basis, v.Calibration = "calibration", c.Source()
		for _, m := range c.Sizes {
			v.Sizes = append(v.Sizes, plan.VIASize{Size: m.Size, Policy: policy(m.Size), Predicted: m.VIP50, TCP: m.TCPP50,
				SOVIAp99: m.VIP99, TCPp99: m.TCPP99, SOVIAMbps: m.VIMbps, TCPMbps: m.TCPMbps})
		}
	} else {
		_, rows := prov.Table()
		for _, r := range rows {
			v.Sizes = append(v.Sizes, plan.VIASize{Size: r.Size, Policy: policy(r.Size), Predicted: r.Predicted, Hybrid: r.Hybrid, Native: r.Native, TCP: r.TCP})
		}
	}
	for _, c := range streams.Decide(prov, st) {
		ps := plan.Stream{Endpoint: c.Endpoint, Transport: c.Transport, Carrier: c.Carrier, Reason: c.Reason, Local: c.Local.String(), Message: c.Size,
			SOVIA: c.SOVIAus, TCP: c.TCPus, SOVIAp99: c.SOVIAp99, TCPp99: c.TCPp99}
		if c.Remote.IsValid() {
			ps.Remote = c.Remote.String()
		}
		if c.Transport == "vi" {
			v.VIsUsed++
			pr := c.Params
			ps.VI, ps.Window, ps.AckThreshold, ps.Descriptors = c.VI, pr.Window, pr.AckThreshold, pr.Descriptors()
			ps.Chunk, ps.CopyMax, ps.CombineMax, ps.NoDelay = pr.ChunkSize, pr.CopyMax, pr.CombineMax, pr.NoDelay
			ps.CombineDelayMS = float64(pr.CombineDelay) / float64(time.Millisecond)
		}
		v.Streams = append(v.Streams, ps)
	}
	return v
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}
