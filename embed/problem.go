// Package embed is the heart of dragonc: it chooses a configuration of the
// NIC under a cost model (the search strategies), has package embedding
// work out, for every receive queue, where each LPG node runs (in
// hardware, removed because the path already decides it, or in that
// queue's software pipeline), and assembles the plan and its report.
package embed

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embedding"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/streams"
)

// Input is everything a plan is computed from.
type Input struct {
	NIC      string // name shown in the plan
	Model    *prg.Model
	Stack    *lpg.Stack
	LPG      *graph.Graph
	Cost     costmodel.Function
	Strategy Strategy   // "" is StrategyDefault
	Previous *plan.Plan // for the incremental strategy
	// CopyEngine is a host copy engine (I/OAT) that bulk copies may use.
	CopyEngine *prg.Engine
	// Driver restricts the search to what a Linux driver exposes of the
	// silicon (--target linux); nil searches the whole PRG (--target
	// silicon).
	Driver *prg.Driver
	// Fixed sets on/off configuration nodes to a choice of the caller's,
	// whatever the driver exposes (dragonc run fixes the checksum offloads
	// off: their per-frame verdicts never reach its sockets).
	Fixed map[string]string
	// Calibration, if set, is the VIA provider that will carry the
	// streams as measured beside kernel TCP (dragonc calibrate): on a
	// model with Virtual Interfaces it decides each stream instead of the
	// model's table (streams.Provider.Calibrated). dragonc run serves
	// every VI on the software VI, so it passes that one's.
	Calibration *streams.Calibration
}

// Strategy names a search strategy, as --strategy and plan.json's
// strategy spell it (docs/costs.md describes each).
type Strategy string

// Search strategies.
const (
	StrategyDefault        Strategy = "default"
	StrategyDragonetGreedy Strategy = "dragonet-greedy"
	StrategyIncremental    Strategy = "incremental"
)

// strategies is every strategy, in the order help and errors list them.
var strategies = []Strategy{StrategyDefault, StrategyDragonetGreedy, StrategyIncremental}

// Strategies lists the search strategies' names.
func Strategies() []string {
	names := make([]string, len(strategies))
	for i, s := range strategies {
		names[i] = string(s)
	}
	return names
}

// Targets of an embedding.
const (
	TargetLinux   = "linux"
	TargetSilicon = "silicon"
)

// Targets lists the targets of an embedding.
func Targets() []string { return []string{TargetLinux, TargetSilicon} }

// qinfo is a receive queue the plan uses.
type qinfo struct {
	id   int    // queue number on the NIC
	node string // PRG node name
	core int    // core serving its interrupt
}

// table is a configuration node that can steer single endpoints.
type table struct {
	sp     *prg.Space
	idx    int          // index in problem.tables
	order  int          // precedence: lower is tried first by the NIC
	queues map[int]bool // usable queue indexes reachable from its action port
	// targets lists the same queue indexes in order: the queues an entry
	// may steer to (an application's cores are a preference the cost
	// functions weigh, not a restriction of the search).
	targets  []int
	identity bool // an identity hash (Open-MX endpoint hashing)
}

// endpoint is an endpoint with its steering options.
type endpoint struct {
	ep     *lpg.Endpoint
	index  int
	fields []prg.FieldMatch   // the fields an entry for it matches (matchFields)
	match  [][]prg.FieldMatch // the entry that matches it, by table.idx (nil: none)
	shape  string             // fields matched, for global-mask tables
	prio   int                // 5-tuple priority: flows above listeners
	// rssQueue is, per RSS mode, the queue index RSS sends it to when its
	// hash is known (connected flows), else -1.
	rssQueue []int
	// over lists endpoints whose packets overlap this one's (a listener
	// covering a flow on the same port).
	over []int
	box  packetBox
	// Kept for every search state: the box its entry matches, per table
	// index (entryBox), and relation's answers, 1 + the relation per
	// (k+1, table index), 0 while not worked out.
	entry []packetBox
	rel   []int8
	// A Session's: the slot of its entry in its table (-1: none),
	// whether it was removed, and the same endpoint in the session's
	// shadow (Session.follow).
	slot int
	gone bool
	twin *endpoint
}

// problem is the fixed part of a search.
type problem struct {
	in     *Input
	queues []qinfo
	tables []*table
	hash   *prg.Space // the RSS hash, if any
	// modes are the ways the plan may set the RSS table, the first the
	// preferred one (see rssModes).
	modes []rssMode
	eps   []*endpoint
	cp    *costmodel.Problem
	warns []string
	paths *embedding.Paths // the LPG's order and path boxes, shared with the embedding
	// exclude names tables the search may not use (firmware steering that
	// would overload the NIC's cores).
	exclude map[string]bool
	// hidden holds the silicon's steering nodes the driver does not
	// expose, with the reason.
	hidden []hiddenSpace
	// emptyCost is, per RSS mode, the cost with no entry anywhere: the
	// reference costs of the plan, known once a state of the mode was made.
	emptyCost map[int]costmodel.Cost
	// dragonet caches dragonet-greedy's result (or why it stopped): the
	// default strategy starts from it and the report compares with it.
	dragonet *dragonetRun
	// dragonetSpace: the cost is one of Dragonet's, and every strategy
	// searches Dragonet's space (costmodel.DragonetSpace): no RSS, no
	// entry to queue 0, an entry for every endpoint while a table has
	// room, and Dragonet's QMap (first match).
	dragonetSpace bool
	// modeStates are the default strategy's best states, one per RSS
	// mode: the plan says what the others would have cost an endpoint
	// the chosen one serves off its cores (Result.coresInto). Dropped
	// once the plan is made.
	modeStates []*state
	// dorder is Dragonet's order of flows (dragonetOrder), the order its
	// filters are inserted in and so the order a NIC tries entries of one
	// priority in; rank is, per endpoint, its place in dorder.
	dorder, rank []int
	// demux is, per protocol, the box of the frames that reach the
	// LPG's demultiplexer of its endpoints: an endpoint a Session adds
	// gets that box narrowed by its own predicate, as the LPG's paths
	// would give it (demuxBoxes).
	demux map[lpg.Proto]packetBox
	// shared and exclusive are the software cycles a packet of each
	// protocol costs (pathCycles).
	shared, exclusive map[lpg.Proto]float64
}

type dragonetRun struct {
	s   *state
	err error
}

// hiddenSpace is a configuration node of the silicon that the target
// driver does not reach.
type hiddenSpace struct {
	sp  *prg.Space
	why string
}

// usableQueues decides how many queues to use: one per declared core (the
// Linux convention of `ethtool -L combined N`), at most the NIC's, with
// queue i's interrupt on the i-th core. A stack without cores gets
// min(queues, 8), on cores 0.. .
func usableQueues(m *prg.Model, st *lpg.Stack, d *prg.Driver) []qinfo {
	cores := st.Cores
	n := len(cores)
	if n == 0 {
		n = min(len(m.Queues), 8)
		for i := 0; i < n; i++ {
			cores = append(cores, i)
		}
	}
	n = min(n, len(m.Queues))
	if d != nil && d.MaxChannels > 0 {
		n = min(n, d.MaxChannels)
	}
	var out []qinfo
	for i := 0; i < n; i++ {
		q := m.Queues[i]
		out = append(out, qinfo{id: q.ID, node: q.Name, core: cores[i%len(cores)]})
	}
	return out
}

// newProblem sets up the search.
func newProblem(in *Input) (*problem, error) {
	return newProblemExcluding(in, nil)
}

func newProblemExcluding(in *Input, exclude map[string]bool) (*problem, error) {
	m := in.Model
	p := &problem{in: in, queues: usableQueues(m, in.Stack, in.Driver), exclude: exclude, dragonetSpace: costmodel.DragonetSpace(in.Cost)}
	if len(p.queues) == 0 {
		return nil, fmt.Errorf("%s has no receive queue", in.NIC)
	}
	qidx := map[int]int{} // queue ID -> index in p.queues
	for i, q := range p.queues {
		qidx[q.id] = i
	}
	order := topoIndex(m.G)
	for _, sp := range m.Spaces {
		if in.Driver != nil && (sp.Kind == prg.Table || sp.Kind == prg.Hash) {
			if ok, why := in.Driver.Exposes(sp); !ok {
				p.hidden = append(p.hidden, hiddenSpace{sp, why})
				continue
			}
			sp = in.Driver.Restrict(sp)
		}
		switch sp.Kind {
		case prg.Table:
			if sp.When != nil || exclude[sp.Node] {
				continue // SYN filters steer a class of packets, not an endpoint
			}
		case prg.Hash:
			if !sp.Identity {
				if p.hash == nil {
					p.hash = sp
				}
				continue
			}
		default:
			continue
		}
		t := &table{sp: sp, order: order[sp.ID], queues: map[int]bool{}, identity: sp.Kind == prg.Hash}
		for qid, qi := range qidx {
			if _, ok := sp.ActionFor(qid); ok {
				t.queues[qi] = true
			}
		}
		if len(t.queues) > 0 {
			p.tables = append(p.tables, t)
		}
	}
	sort.SliceStable(p.tables, func(i, j int) bool { return p.tables[i].order < p.tables[j].order })
	for i, t := range p.tables {
		t.idx = i
		for qi := range p.queues {
			if t.queues[qi] && (qi > 0 || !p.dragonetSpace) {
				t.targets = append(t.targets, qi)
			}
		}
	}
	p.cp = p.costProblem()
	p.modes = p.rssModes()
	if p.dragonetSpace {
		p.modes = []rssMode{{name: modeNone}}
	}
	p.paths = embedding.LPGPaths(in.LPG)
	p.demux = demuxBoxes(in.LPG, p.paths)
	for i, e := range in.Stack.Endpoints {
		ep := p.newEndpoint(i, e)
		if id, ok := p.paths.Endpoints[e.Name]; ok {
			ep.box = p.paths.Boxes[id]
		} else {
			ep.box = endpointBox(e)
		}
		p.eps = append(p.eps, ep)
	}
	p.overlaps()
	p.rank = make([]int, len(p.eps))
	p.dorder = p.dragonetOrder()
	for k, i := range p.dorder {
		p.rank[i] = k
	}
	p.warnHidden()
	return p, nil
}

// warnHidden names the silicon's steering the driver does not expose,
// where it could have held an endpoint of this stack.
func (p *problem) warnHidden() {
	for _, h := range p.hidden {
		n := 0
		for _, e := range p.eps {
			if h.sp.Kind == prg.Table && h.sp.When == nil && fits(h.sp, e.fields) ||
				h.sp.Kind == prg.Hash && h.sp.Identity && e.ep.Proto == lpg.OpenMX {
				n++
			}
		}
		if n == 0 {
			continue
		}
		p.warns = append(p.warns, fmt.Sprintf("%s could steer %d endpoint(s) on the silicon, but %s; they are steered by what the driver exposes or in software (--target silicon searches the whole NIC)", h.sp.Node, n, h.why))
	}
}

func topoIndex(g *graph.Graph) map[int]int {
	order, err := g.TopoOrder()
	out := map[int]int{}
	if err != nil {
		for _, n := range g.Nodes {
			out[n.ID] = n.ID
		}
		return out
	}
	for i, id := range order {
		out[id] = i
	}
	return out
}

// matchFields is the entry an endpoint needs: the fields it fixes.
func matchFields(e *lpg.Endpoint) []prg.FieldMatch {
	out := make([]prg.FieldMatch, 0, 5) // protocol, addresses, ports
	switch e.Proto {
	case lpg.OpenMX:
		return []prg.FieldMatch{{Field: "eth.type", Value: packet.EtherTypeOpenMX}, {Field: "omx.dst_ep", Value: uint64(e.OMXID)}}
	case lpg.UDP:
		out = append(out, prg.FieldMatch{Field: "ip.proto", Value: packet.ProtoUDP})
	case lpg.TCP:
		out = append(out, prg.FieldMatch{Field: "ip.proto", Value: packet.ProtoTCP})
	}
	if e.Flow {
		out = append(out, prg.FieldMatch{Field: "ip.src", Value: uint64(e.Remote)}, prg.FieldMatch{Field: "l4.sport", Value: uint64(e.RPort)})
	}
	if !e.AnyAddr {
		out = append(out, prg.FieldMatch{Field: "ip.dst", Value: uint64(e.Addr)})
	}
	out = append(out, prg.FieldMatch{Field: "l4.dport", Value: uint64(e.Port)})
	return out
}

// fits reports whether a table can hold the entry: every matched field is
// one of its fields, and every field left out may be wildcarded or masked.
func fits(sp *prg.Space, ms []prg.FieldMatch) bool {
	for _, m := range ms {
		if !slices.Contains(sp.Fields, m.Field) {
			return false
		}
	}
	for _, f := range sp.Fields {
		matched := slices.ContainsFunc(ms, func(m prg.FieldMatch) bool { return m.Field == f })
		if !matched && !slices.Contains(sp.Wildcard, f) && !slices.Contains(sp.Masked, f) {
			return false
		}
	}
	return true
}

// steerable reports whether some table can hold an entry for e.
func (e *endpoint) steerable() bool {
	return slices.ContainsFunc(e.match, func(m []prg.FieldMatch) bool { return m != nil })
}

func (p *problem) newEndpoint(i int, e *lpg.Endpoint) *endpoint {
	ms := matchFields(e)
	ep := &endpoint{ep: e, index: i, match: make([][]prg.FieldMatch, len(p.tables)), fields: ms}
	shape := make([]string, 0, len(ms))
	for _, m := range ms {
		shape = append(shape, m.Field)
	}
	ep.shape = "[" + strings.Join(shape, " ") + "]" // as fmt.Sprint prints it
	switch {
	case e.Flow:
		ep.prio = 7
	case !e.AnyAddr:
		ep.prio = 4
	default:
		ep.prio = 1
	}
	for _, t := range p.tables {
		if e.Shadowed {
			break // it never receives a packet: no entry is spent on it
		}
		if t.identity {
			if e.Proto == lpg.OpenMX && len(t.sp.Fields) == 1 && t.sp.Fields[0] == "omx.dst_ep" {
				ep.match[t.idx] = []prg.FieldMatch{{Field: "omx.dst_ep", Value: uint64(e.OMXID)}}
			}
			continue
		}
		if fits(t.sp, ms) {
			ep.match[t.idx] = ms
		}
	}
	// A connected flow hashes to one known bucket.
	ep.rssQueue = make([]int, len(p.modes))
	for m, mode := range p.modes {
		ep.rssQueue[m] = -1
		if p.hash != nil && e.Flow && len(mode.queues) > 0 && !e.AnyAddr {
			ep.rssQueue[m] = mode.queues[p.flowSpread(e, len(mode.queues))]
		}
	}
	return ep
}

// flowHash is the RSS hash of a connected flow's frames:
// prg.Space.TupleHash of its tuple, which decides by packet.PortsHashed
// whether the ports enter the hash. The embedding's walk (knownBucket)
// hashes a box that fixes a flow's fields by the same two functions, so
// the bucket the search expects a flow in (rssQueue, by Space.Bucket and
// prg.SpreadIndex) is the one the embedding sends it to.
func flowHash(sp *prg.Space, e *lpg.Endpoint) uint32 {
	proto := uint8(0)
	switch e.Proto {
	case lpg.TCP:
		proto = packet.ProtoTCP
	case lpg.UDP:
		proto = packet.ProtoUDP
	}
	// Connected flows are TCP or UDP, which every hash node hashes.
	h, _ := sp.TupleHash(e.Remote, e.Addr, proto, e.RPort, e.Port)
	return h
}

// flowSpread is the index, among n targets spread evenly over the RSS
// table's buckets (prg.SpreadEvenly), that a connected flow reaches.
func (p *problem) flowSpread(e *lpg.Endpoint, n int) int {
	return prg.SpreadIndex(p.hash.Bucket(flowHash(p.hash, e)), n)
}

// rssTargets names the queues of an RSS mode's table, in the order
// prg.SpreadEvenly spreads its buckets over them; a mode without RSS
// points every bucket at the default queue.
func (p *problem) rssTargets(mode int) []string {
	qs := p.modes[mode].queues
	if len(qs) == 0 {
		qs = []int{0}
	}
	var out []string
	for _, qi := range qs {
		a, _ := p.hash.ActionFor(p.queues[qi].id)
		out = append(out, a)
	}
	return out
}

// maxSpreadModes bounds the RSS modes of single spread endpoints'
// cores: every mode is a search of its own.
const maxSpreadModes = 4

// rssMode is one way to set the RSS table.
type rssMode struct {
	name   string
	queues []int // queue indexes RSS spreads over; none: misses go to queue 0
}

// RSS modes. Dragonet keeps queue 0 for whatever no filter claims and
// spreads nothing else (Search.hs, allQueues: "We reserve queue 0 ... as a
// catch-all queue"); Linux's drivers spread RSS over every queue
// (ethtool_rxfh_indir_default in include/linux/ethtool.h: bucket i goes
// to queue i mod n). The search tries each mode the driver can set.
const (
	modeRest   = "rss-nondefault" // queues 1..n-1: queue 0 keeps misses and non-IP frames
	modeAll    = "rss-all"        // queues 0..n-1: Linux's default
	modeSpread = "rss-spread"     // the queues of the cores spread endpoints name (costmodel's spread rule), or one of them names
	modeNone   = "no-rss"         // everything no filter claims lands on queue 0
)

// rssModes lists the RSS modes this NIC and driver can realise, the
// preferred first: RSS over the non-default queues, then over all of
// them, then over the queues of the cores that endpoints the spread rule
// spreads name (costmodel.Problem.Spread), all of them and then each
// endpoint's alone, then none. A driver that fills the table itself (myri10ge)
// spreads over every queue it has: it cannot leave queue 0 out, and it
// keeps RSS off only when the plan uses queue 0 alone (linux.sh then
// asks for one channel). A NIC without RSS has no choice.
func (p *problem) rssModes() []rssMode {
	n := len(p.queues)
	if p.hash == nil || n == 1 {
		return []rssMode{{name: modeNone}}
	}
	spread := func(first int, keep func(qi int) bool) []int {
		var out []int
		for i := first; i < n; i++ {
			if _, ok := p.hash.ActionFor(p.queues[i].id); ok && len(out) < p.hash.MaxTargets && (keep == nil || keep(i)) {
				out = append(out, i)
			}
		}
		return out
	}
	cores := map[int]bool{}
	var sets [][]int // each spread endpoint's cores, once, in stack order
	for i := range p.cp.Endpoints {
		sp := p.cp.Spread(i)
		for _, c := range sp.Cores {
			cores[c] = true
		}
		if len(sp.Cores) >= 2 && !slices.ContainsFunc(sets, func(s []int) bool { return slices.Equal(s, sp.Cores) }) {
			sets = append(sets, sp.Cores)
		}
	}
	try := []rssMode{{name: modeRest, queues: spread(1, nil)}, {name: modeAll, queues: spread(0, nil)}}
	if s := spread(0, func(qi int) bool { return cores[p.queues[qi].core] }); len(s) >= 2 {
		try = append(try, rssMode{name: modeSpread, queues: s})
	}
	// One table has one set of queues: when spread endpoints name
	// different cores (memcached_gold's hot on 0..3, batch on 4..7),
	// RSS over the queues of one endpoint's cores keeps that one on its
	// own cores, and a rule can keep another on one of its own (the
	// Open-MX paper's cost of processing a packet away from its
	// application, costmodel.BouncePenalty). The first maxSpreadModes
	// sets are tried, in stack order.
	for k, set := range sets {
		if k == maxSpreadModes {
			break
		}
		if s := spread(0, func(qi int) bool { return slices.Contains(set, p.queues[qi].core) }); len(s) >= 2 {
			try = append(try, rssMode{name: modeSpread, queues: s})
		}
	}
	if d := p.in.Driver; d != nil && d.RSS != nil && !d.RSS.SetTable {
		try = try[1:2] // the driver spreads over every queue
	}
	var modes []rssMode
	for _, m := range try {
		if len(m.queues) > 0 && !slices.ContainsFunc(modes, func(o rssMode) bool { return slices.Equal(o.queues, m.queues) }) {
			modes = append(modes, m)
		}
	}
	return append(modes, rssMode{name: modeNone})
}

// mode returns the index of the named RSS mode, or -1.
func (p *problem) mode(name string) int {
	return slices.IndexFunc(p.modes, func(m rssMode) bool { return m.name == name })
}

// overlaps records which endpoints receive overlapping packet classes
// (a listener and a flow on the same port and protocol).
func (p *problem) overlaps() {
	byKey := map[string][]int{}
	for i, e := range p.eps {
		if e.ep.Proto == lpg.OpenMX {
			continue
		}
		k := fmt.Sprintf("%s/%d", e.ep.Proto, e.ep.Port)
		byKey[k] = append(byKey[k], i)
	}
	for _, group := range byKey {
		for _, i := range group {
			for _, j := range group {
				if i != j && intersects(p.eps[i].box, p.eps[j].box) {
					p.eps[i].over = append(p.eps[i].over, j)
				}
			}
		}
	}
}

// costProblem describes the endpoints (the stack's, in its order) and
// queues to the cost model.
func (p *problem) costProblem() *costmodel.Problem {
	cp := &costmodel.Problem{Queues: make([]costmodel.Queue, 0, len(p.queues)), Endpoints: make([]costmodel.Endpoint, 0, len(p.eps))}
	for _, q := range p.queues {
		cp.Queues = append(cp.Queues, costmodel.Queue{ID: q.id, Core: q.core})
	}
	cp.Queues[0].Default = true
	p.shared, p.exclusive = pathCycles(p.in)
	for _, e := range p.in.Stack.Endpoints {
		cp.Endpoints = append(cp.Endpoints, p.costEndpoint(e))
	}
	return cp
}

// costEndpoint is what the cost model knows of endpoint e.
func (p *problem) costEndpoint(e *lpg.Endpoint) costmodel.Endpoint {
	return costmodel.Endpoint{
		Name: e.Name, Gold: e.Class == lpg.Gold, Rate: e.Rate, Cores: e.Cores,
		Cycles: p.shared[e.Proto], ExclusiveCycles: p.exclusive[e.Proto],
		Listener: (e.Proto == lpg.UDP || e.Proto == lpg.TCP) && !e.Flow && !e.Shadowed,
	}
}

// pathCycles estimates the software cycles per packet of an endpoint's
// receive path: on a shared queue every check and the demultiplexer run in
// software (less what the NIC does on every path: CRC, length, and the
// checksum verdicts it reports); alone on an exactly steered queue the
// demultiplexer is removed. The embedding computes the exact numbers.
func pathCycles(in *Input) (shared, exclusive map[lpg.Proto]float64) {
	shared, exclusive = map[lpg.Proto]float64{}, map[lpg.Proto]float64{}
	hw := map[string]bool{}
	for _, n := range in.Model.G.Nodes {
		hw[n.Name] = true
	}
	paths := map[lpg.Proto][]string{
		lpg.UDP:    {"RxQueue", "RxL2EtherValidCRC", "RxL2EtherValidLength", "RxL2EtherValidUntagged", "RxL2EtherValidMTU", "RxL2EtherValidDest", "RxL2EtherClassifyL3", "RxL3IPv4ValidVersion", "RxL3IPv4ValidHeaderLength", "RxL3IPv4ValidLength", "RxL3IPv4ValidChecksum", "RxL3IPv4ValidSource", "RxL3IPv4ValidLocalIP", "RxL3IPv4ValidReassembly", "RxL3IPv4Classify", "RxL4UDPValidHeaderLength", "RxL4UDPValidLength", "RxL4UDPValidChecksum", "RxL4UDPDemux"},
		lpg.TCP:    {"RxQueue", "RxL2EtherValidCRC", "RxL2EtherValidLength", "RxL2EtherValidUntagged", "RxL2EtherValidMTU", "RxL2EtherValidDest", "RxL2EtherClassifyL3", "RxL3IPv4ValidVersion", "RxL3IPv4ValidHeaderLength", "RxL3IPv4ValidLength", "RxL3IPv4ValidChecksum", "RxL3IPv4ValidSource", "RxL3IPv4ValidLocalIP", "RxL3IPv4ValidReassembly", "RxL3IPv4Classify", "RxL4TCPValidUnicastDest", "RxL4TCPValidHeaderLength", "RxL4TCPValidChecksum", "RxL4TCPDemux"},
		lpg.OpenMX: {"RxQueue", "RxL2EtherValidCRC", "RxL2EtherValidLength", "RxL2EtherValidUntagged", "RxL2EtherValidMTU", "RxL2EtherValidDest", "RxL2EtherClassifyL3", "RxOMXValidHeader", "RxOMXDemux"},
	}
	for proto, path := range paths {
		var s, x float64
		for _, name := range path {
			n, ok := in.LPG.Lookup(name)
			if !ok {
				continue
			}
			c, _ := n.Cost("cycles")
			if hw[name] {
				c = lpg.Cycles["field"] // done in hardware, at most a flag read
				if name == "RxL2EtherValidCRC" || name == "RxL2EtherValidLength" {
					c = 0
				}
			}
			s += c
			if name != "RxL4UDPDemux" && name != "RxL4TCPDemux" && name != "RxOMXDemux" {
				x += c
			}
		}
		s += lpg.Cycles["deliver"]
		x += lpg.Cycles["deliver"]
		shared[proto], exclusive[proto] = s, x
	}
	return shared, exclusive
}

// demuxBoxes finds, for each protocol with an endpoint in the LPG, the
// box of the demultiplexer the endpoint's delivery node hangs off: the
// frames of that protocol the stack's checks let through. The box of an
// endpoint is that box narrowed by the demultiplexer's port predicate
// (embedding's pathBoxes), less what earlier ports take when the
// demultiplexer has few ports.
func demuxBoxes(g *graph.Graph, paths *embedding.Paths) map[lpg.Proto]packetBox {
	out := map[lpg.Proto]packetBox{}
	var in [][]graph.InPort
	for _, n := range g.Nodes {
		proto, ok := demuxProto(n.Name)
		if !ok || out[proto] != nil || !slices.ContainsFunc(n.Attrs, func(a string) bool { return strings.HasPrefix(a, lpg.AttrEndpoint) }) {
			continue
		}
		if in == nil {
			in = g.InPorts()
		}
		if len(in[n.ID]) == 1 {
			out[proto] = paths.Boxes[in[n.ID][0].From]
		}
	}
	return out
}

// demuxProto is the protocol of an endpoint's delivery node, by the
// prefix lpg.Derive names it with.
func demuxProto(node string) (lpg.Proto, bool) {
	for prefix, proto := range map[string]lpg.Proto{"RxL4UDPSocket_": lpg.UDP, "RxL4TCPSocket_": lpg.TCP, "RxOMXEndpoint_": lpg.OpenMX} {
		if strings.HasPrefix(node, prefix) {
			return proto, true
		}
	}
	return "", false
}
