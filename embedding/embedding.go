// Package embedding embeds a Logical Protocol Graph into a configured
// Physical Resource Graph, queue by queue: for the frames that reach each
// receive queue it works out what the configured NIC has already decided
// or reported, and so where each LPG node runs (in hardware, removed, or
// in the queue's software pipeline); and for each endpoint, the queues
// its frames reach and how they are steered.
package embedding

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/internal/solver"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
)

// Status is where an LPG node's work happens on one queue.
type Status int

// Node statuses, per queue.
const (
	Unreachable  Status = iota // no frame that reaches this queue gets here
	Software                   // runs in the queue's software pipeline
	HardwareFlag               // the NIC computed it; software reads the descriptor flag
	Hardware                   // a PRG node of the same name decided it
	Removed                    // the path into the queue already decides it
)

var statusNames = [...]string{"unreachable", "software", "hardware (descriptor flag)", "hardware", "removed"}

func (s Status) String() string { return statusNames[s] }

// class is a set of frames that reach a queue along one path through the
// configured PRG.
type class struct {
	box      *solver.Box
	steer    string          // the decision that steered it: a table node, rss or default
	reported map[string]bool // descriptor-reported nodes that ran on the path
}

// QueueEmbedding is what one receive queue receives and runs.
type QueueEmbedding struct {
	ID        int
	Node      string
	Core      int
	Endpoints []string // endpoints whose packets may arrive here
	classes   []class
	join      *solver.Box // every class in one box (over-approximate)
	epOn      []bool      // per endpoint number: its packets may arrive here
	status    []Status    // per LPG node ID
	live      []bool      // per LPG port (Embedding.portOff): taken by some frame here
	lpg       *graph.Graph
	em        *Embedding
	reachable []bool // per LPG node ID: some frame here gets there
	keep      []bool // per LPG node ID: a node of the software graph
	fixed     []int  // per LPG node ID: the live port of a bypassed node
	swOnce    sync.Once
	sw        atomic.Pointer[graph.Graph]
}

// SW returns the queue's software graph: the LPG with decided nodes
// bypassed, unreachable ones removed, and descriptor flags read. It is
// built when first asked for (a plan alone does not need it).
func (qe *QueueEmbedding) SW() *graph.Graph {
	qe.swOnce.Do(func() { qe.sw.Store(qe.em.software(qe)) })
	return qe.sw.Load()
}

// BuildSW returns the queue's software graph like SW, but does not keep a
// graph it has to build: for a caller that visits each queue's graph once
// and would otherwise hold every queue's graph at the same time.
func (qe *QueueEmbedding) BuildSW() *graph.Graph {
	if g := qe.sw.Load(); g != nil {
		return g
	}
	return qe.em.software(qe)
}

// Software lists the nodes of the queue's software graph in order.
func (qe *QueueEmbedding) Software() []string {
	n := 0
	for _, k := range qe.keep {
		if k {
			n++
		}
	}
	out := make([]string, 0, n)
	for _, n := range qe.lpg.Nodes {
		if qe.keep[n.ID] {
			out = append(out, n.Name)
		}
	}
	return out
}

// Embedding is a configured NIC plus the software each queue runs: the
// result of New. What only its construction reads (path boxes, port
// indexes and boxes) is the builder's, gone once New returns.
type Embedding struct {
	Model   *prg.Model
	Config  *prg.Config
	HW      *graph.Graph // the configured PRG
	LPG     *graph.Graph
	Queues  []*QueueEmbedding // every queue some frame can reach, by ID
	Reach   map[string][]int  // endpoint -> queue IDs its packets reach
	Steer   map[string]string // endpoint -> steering (table node, rss, default)
	epNode  map[string]int    // endpoint -> its LPG delivery node
	qByID   map[int]*QueueEmbedding
	portOff []int // per LPG node ID, where its ports start in a queue's live
	order   []int
}

// builder is the construction of an Embedding: the result it fills in
// and the caches its walks read.
type builder struct {
	*Embedding
	lpgBox     []*solver.Box      // LPG node -> path box
	hwIndex    map[int]*portIndex // configured PRG node -> index of its many ports
	lpgIndex   map[int]*portIndex // LPG node -> index of its many ports
	epNum      map[string]int     // endpoint -> its number
	epOf       []int              // LPG node -> the number of the endpoint it delivers to, or -1
	hwPortBox  [][]portBox        // configured PRG node -> its ports' boxes (nil: none made yet)
	lpgPortBox [][]portBox        // LPG node -> its ports' boxes
	inPorts    [][]graph.InPort
	space      []*prg.Space // configured PRG node -> its configuration space
	hwNode     []hwFacts    // configured PRG node -> what the walks ask of it
	iota       []int        // 0, 1, 2, ...: see allPorts
	// frozen is set while walks run in parallel: the caches above are
	// then read, never written (see warm).
	frozen bool
}

// hwFacts are what the walks ask of a configured PRG node, found once
// (a Flow Director node has thousands of ports to look through).
type hwFacts struct {
	source   bool // a receive queue
	software bool // reported in the descriptor, drawn as software
	def      int  // the first port without a predicate, or -1
}

// portBox caches a port predicate as a box when it is a conjunction.
type portBox struct {
	box   *solver.Box
	exact bool
}

// portBoxOf returns the box of port i of node n, kept in cache (em.hwPortBox
// for the configured PRG, em.lpgPortBox for the LPG) unless the caches are
// frozen.
func (em *builder) portBoxOf(cache [][]portBox, n *graph.Node, i int) portBox {
	row := cache[n.ID]
	if row != nil && row[i].box != nil {
		return row[i]
	}
	b, exact := solver.Restrict(solver.Universe(), n.Ports[i].Pred)
	pb := portBox{b, exact}
	if !em.frozen {
		if row == nil {
			row = make([]portBox, len(n.Ports))
			cache[n.ID] = row
		}
		row[i] = pb
	}
	return pb
}

// mayTake reports whether some frame of b satisfies the predicate of port
// i of n.
func (em *builder) mayTake(cache [][]portBox, b *solver.Box, n *graph.Node, i int) bool {
	if pb := em.portBoxOf(cache, n, i); pb.exact {
		return solver.Intersects(b, pb.box)
	}
	return solver.Sat(b, n.Ports[i].Pred)
}

// mustTake reports whether every frame of b satisfies it.
func (em *builder) mustTake(cache [][]portBox, b *solver.Box, n *graph.Node, i int) bool {
	if pb := em.portBoxOf(cache, n, i); pb.exact {
		return solver.Subset(b, pb.box)
	}
	return solver.Implies(b, n.Ports[i].Pred)
}

// narrow restricts b by the port's predicate.
func (em *builder) narrow(cache [][]portBox, b *solver.Box, n *graph.Node, i int) *solver.Box {
	if pb := em.portBoxOf(cache, n, i); pb.exact {
		return solver.Meet(b, pb.box)
	}
	r, _ := solver.Restrict(b, n.Ports[i].Pred)
	return r
}

// StatusOf returns where an LPG node's work happens on this queue.
func (qe *QueueEmbedding) StatusOf(node string) Status {
	n, ok := qe.lpg.Lookup(node)
	if !ok || n.ID >= len(qe.status) {
		return Unreachable
	}
	return qe.status[n.ID]
}

// StatusAt is StatusOf for the LPG node with the given ID.
func (qe *QueueEmbedding) StatusAt(id int) Status {
	if id < 0 || id >= len(qe.status) {
		return Unreachable
	}
	return qe.status[id]
}

// Queue returns a queue's embedding.
func (em *Embedding) Queue(id int) *QueueEmbedding { return em.qByID[id] }

// Delivery returns the LPG node that delivers to an endpoint.
func (em *Embedding) Delivery(endpoint string) (*graph.Node, bool) {
	id, ok := em.epNode[endpoint]
	if !ok {
		return nil, false
	}
	return em.LPG.Nodes[id], true
}

// Order returns the LPG's node IDs in a topological order.
func (em *Embedding) Order() []int { return em.order }

// Paths are the facts about an LPG that every embedding of it shares.
type Paths struct {
	Order     []int          // a topological order of the nodes
	Boxes     []*solver.Box  // per node ID, a box holding every frame that reaches it
	Endpoints map[string]int // the delivery node of each endpoint
}

// LPGPaths works out an LPG's Paths: the boxes are exact along chains of
// conjunctive checks and the universe where paths merge.
func LPGPaths(g *graph.Graph) *Paths {
	order := lpgOrder(g)
	boxes, eps := pathBoxes(g, order)
	return &Paths{Order: order, Boxes: boxes, Endpoints: eps}
}

// New embeds the LPG lpgGraph, queue by queue, into the model m
// configured by c: which LPG nodes the configured hardware does for the
// frames each queue receives, which stay in software and which no frame
// of the queue reaches. paths are lpgGraph's (nil: worked out here).
func New(m *prg.Model, c *prg.Config, lpgGraph *graph.Graph, paths *Paths) (*Embedding, error) {
	// A programmable stage's checks decide frames before any queue, but
	// the software of a queue does not count on them: the same software
	// serves where the stage does not run (dragonc run's AF_PACKET path
	// has no XDP program), so the walks see the PRG without them.
	hw, err := m.Apply(c.WithoutPrograms())
	if err != nil {
		return nil, err
	}
	em := &builder{Embedding: &Embedding{Model: m, Config: c, HW: hw, LPG: lpgGraph, Reach: map[string][]int{}, Steer: map[string]string{},
		epNode: map[string]int{}, qByID: map[int]*QueueEmbedding{}},
		hwIndex: map[int]*portIndex{}, lpgIndex: map[int]*portIndex{},
		hwPortBox: make([][]portBox, len(hw.Nodes)), lpgPortBox: make([][]portBox, len(lpgGraph.Nodes))}
	if paths == nil {
		paths = LPGPaths(lpgGraph)
	}
	em.lpgBox, em.epNode, em.order = paths.Boxes, paths.Endpoints, paths.Order
	em.epNum = map[string]int{}
	em.epOf = make([]int, len(lpgGraph.Nodes))
	for _, n := range lpgGraph.Nodes {
		em.epOf[n.ID] = -1
		if name := endpointName(n); name != "" {
			k, ok := em.epNum[name]
			if !ok {
				k = len(em.epNum)
				em.epNum[name] = k
			}
			em.epOf[n.ID] = k
		}
	}
	em.space = make([]*prg.Space, len(hw.Nodes))
	em.hwNode = make([]hwFacts, len(hw.Nodes))
	for _, n := range hw.Nodes {
		em.space[n.ID] = m.Space(n.Name)
		f := hwFacts{source: m.IsQueue(n.ID), software: m.Reported(n.ID), def: -1}
		for i, p := range n.Ports {
			if p.Pred == nil {
				f.def = i
				break
			}
		}
		em.hwNode[n.ID] = f
	}
	byQueue := map[int][]class{}
	em.walk(0, solver.Universe(), "default", map[string]bool{}, func(q int, c class) { byQueue[q] = append(byQueue[q], c) }, true)
	for _, q := range m.Queues {
		if cs := byQueue[q.Node]; len(cs) > 0 {
			qe := &QueueEmbedding{ID: q.ID, Node: q.Name, classes: cs, epOn: make([]bool, len(em.epNum)), lpg: lpgGraph,
				status: make([]Status, len(lpgGraph.Nodes)), em: em.Embedding}
			boxes := make([]*solver.Box, len(cs))
			for i, c := range cs {
				boxes[i] = c.box
			}
			qe.join = solver.JoinAll(boxes)
			em.Queues = append(em.Queues, qe)
			em.qByID[q.ID] = qe
		}
	}
	em.warm()
	em.endpointReach()
	parallel(len(em.Queues), func(i int) { em.place(em.Queues[i]) })
	return em.Embedding, nil
}

// warm fills the caches the walks read (the port boxes and indexes of the
// configured PRG and of the LPG, the port-number buffer, the LPG's order
// and in-ports) and freezes them: a frozen cache is only read, so the
// walks of different endpoints and queues run at the same time.
func (em *builder) warm() {
	most := 0
	for _, g := range []*graph.Graph{em.HW, em.LPG} {
		for _, n := range g.Nodes {
			most = max(most, len(n.Ports))
		}
	}
	for len(em.iota) < most {
		em.iota = append(em.iota, len(em.iota))
	}
	u := solver.Universe()
	for _, n := range em.HW.Nodes {
		if len(n.Ports) >= indexMin {
			em.indexed(em.hwIndex, em.hwPortBox, n, u)
			continue
		}
		for i, p := range n.Ports {
			if p.Pred != nil {
				em.portBoxOf(em.hwPortBox, n, i)
			}
		}
	}
	for _, n := range em.LPG.Nodes {
		if len(n.Ports) >= indexMin {
			em.portsForLPG(n, u)
		}
	}
	if em.order == nil {
		em.order = lpgOrder(em.LPG)
	}
	if em.inPorts == nil {
		em.inPorts = em.LPG.InPorts()
	}
	if em.portOff == nil {
		em.portOff = make([]int, len(em.LPG.Nodes)+1)
		for i, n := range em.LPG.Nodes {
			em.portOff[i+1] = em.portOff[i] + len(n.Ports)
		}
	}
	em.frozen = true
}

// liveOf returns which ports of LPG node id some frame on the queue takes
// (nil when no frame reaches the node).
func (qe *QueueEmbedding) liveOf(id int) []bool {
	if qe.live == nil || !qe.reachable[id] {
		return nil
	}
	off := qe.em.portOff
	return qe.live[off[id]:off[id+1]:off[id+1]]
}

// parallel calls f(0) ... f(n-1), on as many goroutines as Go may run at
// once. A panic in f is raised again in the caller.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var failure any
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					once.Do(func() { failure = p })
				}
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		panic(failure)
	}
}

// portIndex finds, among the many ports of a table node, those whose
// predicate may hold for a box, without trying each. Ports are grouped by
// the set of fields their predicates fix to one value (a Flow Director
// table holds TCP listeners on (proto, dst, tcp.dport), UDP listeners on
// (proto, dst, udp.dport) and flows on five fields), and each group is
// indexed by each of its fields. A box meets, in each group, only the
// ports that agree with it on the field where it narrows the group most:
// a UDP flow meets no TCP entry (they differ on ip.proto) and only the UDP
// entries for its port.
type portIndex struct {
	groups  []portGroup
	generic []int // ports whose predicates are not conjunctions
}

type portGroup struct {
	ports   []int
	byField []fieldIndex
}

type fieldIndex struct {
	field   int
	byValue map[uint64][]int // ascending port numbers
}

const indexMin = 16

// ports returns, in order, the ports whose predicates may hold for b; nil
// when the index cannot rule out any.
func (ix *portIndex) ports(b *solver.Box, total int) []int {
	out := slices.Clone(ix.generic)
	for gi := range ix.groups {
		g := &ix.groups[gi]
		best := g.ports
		for fi := range g.byField {
			f := &g.byField[fi]
			if v, single := b.Single(f.field); single {
				if vals := f.byValue[v]; len(vals) < len(best) {
					best = vals
				}
			}
		}
		out = append(out, best...)
	}
	if len(out) == total {
		return nil
	}
	slices.Sort(out)
	return out
}

// allPorts returns 0, 1, ..., len(n.Ports)-1, from a buffer the
// embedding keeps: callers only read it.
func (em *builder) allPorts(n *graph.Node) []int {
	for len(em.iota) < len(n.Ports) {
		em.iota = append(em.iota, len(em.iota))
	}
	return em.iota[:len(n.Ports)]
}

// portsFor returns, in order, the ports of a configured PRG node that
// frames of b may take (a superset).
func (em *builder) portsFor(g *graph.Graph, id int, b *solver.Box) []int {
	n := g.Nodes[id]
	if len(n.Ports) < indexMin {
		return em.allPorts(n)
	}
	return em.indexed(em.hwIndex, em.hwPortBox, n, b)
}

// indexed looks b up in the index of node n, built from the port boxes of
// cache when first asked for and kept in index (the configured PRG's or
// the LPG's) unless the caches are frozen.
func (em *builder) indexed(index map[int]*portIndex, cache [][]portBox, n *graph.Node, b *solver.Box) []int {
	ix, ok := index[n.ID]
	if !ok {
		ix = em.buildIndex(cache, n)
		if !em.frozen {
			index[n.ID] = ix
		}
	}
	if out := ix.ports(b, len(n.Ports)); out != nil {
		return out
	}
	return em.allPorts(n)
}

func (em *builder) buildIndex(cache [][]portBox, n *graph.Node) *portIndex {
	ix := &portIndex{}
	bySig := map[string]int{} // the fields a port fixes -> its group
	var sig []byte
	var vals []uint64
	for i, p := range n.Ports {
		if p.Pred == nil {
			ix.generic = append(ix.generic, i)
			continue
		}
		pb := em.portBoxOf(cache, n, i)
		if !pb.exact {
			ix.generic = append(ix.generic, i)
			continue
		}
		sig, vals = sig[:0], vals[:0]
		pb.box.Singles(func(id int, v uint64) {
			sig = append(sig, byte(id))
			vals = append(vals, v)
		})
		gi, ok := bySig[string(sig)]
		if !ok {
			gi = len(ix.groups)
			bySig[string(sig)] = gi
			g := portGroup{}
			for _, id := range sig {
				g.byField = append(g.byField, fieldIndex{field: int(id), byValue: map[uint64][]int{}})
			}
			ix.groups = append(ix.groups, g)
		}
		g := &ix.groups[gi]
		g.ports = append(g.ports, i)
		for k, v := range vals {
			g.byField[k].byValue[v] = append(g.byField[k].byValue[v], i)
		}
	}
	return ix
}

// walk follows a box through the configured PRG from node id, calling emit
// for every queue it may reach. A port whose predicate holds for the whole
// box captures it: later ports are not tried, which is exact for the
// first-match semantics of tables; partial matches continue to later ports
// (an over-approximation).
//
// With boxes false, emit does not read the class boxes, so a port that
// leads straight to queues does not narrow the box it hands on (listeners
// spread by RSS meet every bucket).
func (em *builder) walk(id int, b *solver.Box, steer string, reported map[string]bool, emit func(int, class), boxes bool) {
	g := em.HW
	n := g.Nodes[id]
	if em.hwNode[id].source {
		emit(id, class{box: b, steer: steer, reported: reported})
		return
	}
	if n.Kind.IsGate() {
		em.walkGate(n, b, steer, reported, emit, boxes)
		return
	}
	sp := em.space[id]
	follow := func(p *graph.Port, sub *solver.Box, label string) {
		rep := reported
		for _, s := range p.Succ {
			// Only the walks that build classes (boxes) keep what the
			// descriptor reports; the others ask where frames go.
			if boxes && em.hwNode[s].software {
				if rep == nil || rep[g.Nodes[s].Name] == false {
					rep = cloneSet(rep)
					rep[g.Nodes[s].Name] = true
				}
			}
		}
		v := steer
		if sp != nil && label != sp.MissPort {
			switch {
			case sp.Kind == prg.Table, sp.Kind == prg.Hash && sp.Identity:
				v = n.Name
			case sp.Kind == prg.Hash:
				v = "rss"
			}
		}
		for _, s := range p.Succ {
			if !em.hwNode[s].software {
				em.walk(s, sub, v, rep, emit, boxes)
			}
		}
	}
	// A box that fixes every hashed field hashes to one known bucket.
	if p := em.knownBucket(n, b); p != nil {
		follow(p, b, p.Name)
		return
	}
	captured := false
	for _, i := range em.portsFor(g, id, b) {
		p := n.Ports[i]
		if p.Pred == nil {
			continue
		}
		if !em.mayTake(em.hwPortBox, b, n, i) {
			continue
		}
		if em.mustTake(em.hwPortBox, b, n, i) {
			follow(p, b, p.Name)
			captured = true
			break
		}
		if boxes || !em.toQueues(p) {
			b := em.narrow(em.hwPortBox, b, n, i)
			follow(p, b, p.Name)
			continue
		}
		follow(p, b, p.Name)
	}
	if d := em.hwNode[id].def; !captured && d >= 0 {
		if boxes && len(n.Ports) < indexMin {
			b = em.besides(b, n)
		}
		follow(n.Ports[d], b, n.Ports[d].Name)
	}
}

// besides narrows b to the frames that take none of n's ports with a
// predicate (those that fall to its default port), as far as a box can
// say it: a port testing one field (eth.type == ipv4) is left out exactly;
// others leave b as it is.
func (em *builder) besides(b *solver.Box, n *graph.Node) *solver.Box {
	for _, p := range n.Ports {
		if c, ok := p.Pred.(pred.Cmp); ok {
			b, _ = solver.Restrict(b, pred.Not{X: c})
		}
	}
	return b
}

// toQueues reports whether a port of the configured PRG leads only to
// receive queues.
func (em *builder) toQueues(p *graph.Port) bool {
	for _, s := range p.Succ {
		if !em.hwNode[s].source {
			return false
		}
	}
	return len(p.Succ) > 0
}

// Field IDs knownBucket reads.
var (
	fIPHdrOK  = pred.FieldID("ip.hdr_ok")
	fIPSrc    = pred.FieldID("ip.src")
	fIPDst    = pred.FieldID("ip.dst")
	fIPProto  = pred.FieldID("ip.proto")
	fTCPSport = pred.FieldID("tcp.sport")
	fTCPDport = pred.FieldID("tcp.dport")
	fUDPSport = pred.FieldID("udp.sport")
	fUDPDport = pred.FieldID("udp.dport")
)

// knownBucket returns the port of an RSS node that every frame of b takes
// when b fixes the hashed fields (a connected flow), or nil.
func (em *builder) knownBucket(n *graph.Node, b *solver.Box) *graph.Port {
	sp := em.space[n.ID]
	if sp == nil || sp.Kind != prg.Hash || sp.Identity {
		return nil
	}
	v := em.Config.Values[n.Name]
	if v == nil || v.Indirection == nil {
		return nil
	}
	if ok, single := b.Single(fIPHdrOK); !single || ok != 1 {
		return nil
	}
	src, ok1 := b.Single(fIPSrc)
	dst, ok2 := b.Single(fIPDst)
	proto, ok3 := b.Single(fIPProto)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	var sport, dport uint64
	if packet.PortsHashed(proto, sp.TCPPorts, sp.UDPPorts) {
		fs, fd := fTCPSport, fTCPDport
		if proto == packet.ProtoUDP {
			fs, fd = fUDPSport, fUDPDport
		}
		var a, c bool
		sport, a = b.Single(fs)
		dport, c = b.Single(fd)
		if !a || !c {
			return nil
		}
	}
	h, ok := sp.TupleHash(uint32(src), uint32(dst), uint8(proto), uint16(sport), uint16(dport))
	if !ok {
		return n.Port(sp.MissPort)
	}
	return n.Port("to" + v.Indirection[sp.Bucket(h)])
}

// walkGate follows a gate over-approximately: a true input makes OR true,
// a false input makes AND false; otherwise both outcomes are followed.
func (em *builder) walkGate(n *graph.Node, b *solver.Box, steer string, reported map[string]bool, emit func(int, class), boxes bool) {
	for _, p := range n.Ports {
		for _, s := range p.Succ {
			em.walk(s, b, steer, reported, emit, boxes)
		}
	}
}

func cloneSet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// lpgOrder is a topological order of the LPG's nodes (their declaration
// order if it has a cycle).
func lpgOrder(g *graph.Graph) []int {
	order, err := g.TopoOrder()
	if err != nil {
		order = nil
		for _, n := range g.Nodes {
			order = append(order, n.ID)
		}
	}
	return order
}

func pathBoxes(g *graph.Graph, order []int) ([]*solver.Box, map[string]int) {
	boxes := make([]*solver.Box, len(g.Nodes))
	eps := map[string]int{}
	in := g.InPorts()
	for _, id := range order {
		n := g.Nodes[id]
		if name := endpointName(n); name != "" {
			eps[name] = id
		}
		if id == 0 || len(in[id]) != 1 {
			boxes[id] = solver.Universe()
			continue
		}
		p := g.Nodes[in[id][0].From]
		box := boxes[p.ID]
		if box == nil || p.Kind.IsGate() {
			boxes[id] = solver.Universe()
			continue
		}
		parent := box
		if via := p.Ports[in[id][0].Port]; via.Pred != nil {
			box, _ = solver.Restrict(box, via.Pred)
		}
		boxes[id] = takenBy(parent, box, p, in[id][0].Port)
	}
	return boxes, eps
}

// takenBy narrows box, the frames of parent that port i of n admits, to
// those that no port n tries before it takes: an F-node enables the first
// port whose predicate holds, and a port without one only when none
// does. Ports tried earlier are subtracted where a box says it exactly (a
// listener on one address loses the broadcasts a listener before it on
// the same port takes); a node with more than earlierMax other ports (a
// demultiplexer of many endpoints) leaves the box as it is.
func takenBy(parent, box *solver.Box, n *graph.Node, i int) *solver.Box {
	const earlierMax = 16
	if len(n.Ports) > earlierMax+1 {
		return box
	}
	for j, p := range n.Ports {
		if j != i && p.Pred != nil && (j < i || n.Ports[i].Pred == nil) {
			if eb, exact := solver.Restrict(parent, p.Pred); exact {
				box = solver.Minus(box, eb)
			}
		}
	}
	return box
}

// endpointReach walks each endpoint's packets through the configured PRG.
func (em *builder) endpointReach() {
	names := make([]string, 0, len(em.epNode))
	for name := range em.epNode {
		names = append(names, name)
	}
	sort.Strings(names)
	// Each endpoint's walk is its own; the results are merged in name order.
	type reach struct {
		ids   []int
		steer string
	}
	out := make([]reach, len(names))
	parallel(len(names), func(k int) {
		name := names[k]
		if em.LPG.Nodes[em.epNode[name]].HasAttr(lpg.AttrShadowed) {
			out[k] = reach{[]int{}, "none (shadowed by more specific listeners)"}
			return
		}
		b := em.lpgBox[em.epNode[name]]
		// A walk reaches a few queues by a few steerings, each many times.
		var nodes []int
		var steer []string
		em.walk(0, b, "default", nil, func(q int, c class) {
			if !slices.Contains(nodes, q) {
				nodes = append(nodes, q)
			}
			if !slices.Contains(steer, c.steer) {
				steer = append(steer, c.steer)
			}
		}, false)
		ids := make([]int, 0, len(nodes))
		for _, nodeID := range nodes {
			if q, ok := em.Model.QueueByNode(nodeID); ok {
				ids = append(ids, q.ID)
			}
		}
		sort.Ints(ids)
		slices.Sort(steer)
		out[k] = reach{ids, strings.Join(steer, "+")}
	})
	count := map[int]int{}
	for k := range names {
		for _, id := range out[k].ids {
			count[id]++
		}
	}
	for _, qe := range em.Queues {
		qe.Endpoints = make([]string, 0, count[qe.ID])
	}
	em.Reach, em.Steer = make(map[string][]int, len(names)), make(map[string]string, len(names))
	for k, name := range names {
		em.Reach[name], em.Steer[name] = out[k].ids, out[k].steer
		for _, id := range out[k].ids {
			if qe := em.qByID[id]; qe != nil {
				qe.Endpoints = append(qe.Endpoints, name)
				qe.epOn[em.epNum[name]] = true
			}
		}
	}
	for _, qe := range em.Queues {
		sort.Strings(qe.Endpoints)
	}
}

// place decides every LPG node's status on one queue and builds its
// software graph.
func (em *builder) place(qe *QueueEmbedding) {
	g := em.LPG
	off := em.portOff
	live := make([]bool, off[len(g.Nodes)]) // per node, per port
	if em.order == nil {
		em.order = lpgOrder(g)
	}
	order := em.order
	reachable := make([]bool, len(g.Nodes))
	if em.inPorts == nil {
		em.inPorts = g.InPorts()
	}
	for _, id := range order {
		n := g.Nodes[id]
		if graph.Transmit(n.Name) {
			continue
		}
		b := em.lpgBox[id]
		r := false
		switch {
		case id == 0:
			r = true
		default:
			for _, ip := range em.inPorts[id] {
				if reachable[ip.From] && live[off[ip.From]+ip.Port] {
					r = true
					break
				}
			}
		}
		if r {
			if k := em.epOf[id]; k >= 0 {
				r = qe.epOn[k]
			} else {
				r = solver.Intersects(qe.join, b)
			}
		}
		reachable[id] = r
		if !r {
			qe.status[id] = Unreachable
			continue
		}
		ports := live[off[id]:off[id+1]:off[id+1]]
		em.livePorts(qe, n, b, ports)
		em.decide(qe, n, b, ports)
	}
	qe.live = live
	qe.reachable = reachable
	em.keepNodes(qe)
}

// endpointName names the endpoint an LPG node delivers to ("" if none).
func endpointName(n *graph.Node) string {
	if o, ok := lpg.Terminal(n); ok && o.Kind == lpg.Deliver {
		return o.Endpoint
	}
	return ""
}

// livePorts works out which ports of a node some frame on the queue
// takes, into live (one per port, all false).
func (em *builder) livePorts(qe *QueueEmbedding, n *graph.Node, b *solver.Box, live []bool) {
	if len(n.Ports) == 0 {
		return
	}
	if n.Kind.IsGate() {
		for i := range live {
			live[i] = true
		}
		return
	}
	if len(n.Ports) >= indexMin {
		em.liveMany(qe, n, b, live)
		return
	}
	var preds []pred.Expr
	for i, p := range n.Ports {
		if em.toOtherEndpoints(qe, p) {
			if p.Pred != nil {
				preds = append(preds, p.Pred)
			}
			continue
		}
		var eff []pred.Expr
		if p.Pred != nil {
			eff = append(eff, p.Pred)
		}
		for _, q := range preds {
			eff = append(eff, pred.Not{X: q})
		}
		if p.Pred == nil && i > 0 && hasDefaultBefore(n, i) {
			continue // only the first default port is ever taken
		}
		// The queue's join box over-approximates its classes, which is
		// exact for checks on one field and never wrongly kills a port.
		if solver.Intersects(qe.join, b) && solver.Sat(intersectBoxes(qe.join, b), eff...) {
			live[i] = true
		}
		if p.Pred != nil {
			preds = append(preds, p.Pred)
		}
	}
}

func hasDefaultBefore(n *graph.Node, i int) bool {
	for j := 0; j < i; j++ {
		if n.Ports[j].Pred == nil {
			return true
		}
	}
	return false
}

// toOtherEndpoints reports whether a port leads only to endpoints whose
// packets never reach the queue (so it is never taken there).
func (em *builder) toOtherEndpoints(qe *QueueEmbedding, p *graph.Port) bool {
	if len(p.Succ) == 0 {
		return false
	}
	for _, s := range p.Succ {
		if k := em.epOf[s]; k < 0 || qe.epOn[k] {
			return false
		}
	}
	return true
}

// liveMany handles demultiplexers with many ports: a port to an endpoint is
// live when that endpoint's packets reach the queue; the default port is
// dead only when every class fixes the index field and some port
// predicate covers the class.
func (em *builder) liveMany(qe *QueueEmbedding, n *graph.Node, b *solver.Box, live []bool) {
	defaultLive := false
	for i, p := range n.Ports {
		if p.Pred == nil {
			continue
		}
		if len(p.Succ) == 0 {
			// A port that drops (the listen-discard demultiplexer's): it
			// decides for its frames on every queue; removing it would
			// send them on to the default port.
			live[i] = true
			continue
		}
		for _, s := range p.Succ {
			if k := em.epOf[s]; k < 0 || qe.epOn[k] {
				live[i] = true // an endpoint whose packets arrive here, or not an endpoint
			}
		}
	}
	for _, c := range qe.classes {
		if !solver.Intersects(c.box, b) {
			continue
		}
		cb := intersectBoxes(c.box, b)
		covered := false
		for _, i := range em.portsForLPG(n, cb) {
			p := n.Ports[i]
			if p.Pred != nil && em.mustTake(em.lpgPortBox, cb, n, i) {
				covered = true
				break
			}
		}
		if !covered {
			defaultLive = true
			break
		}
	}
	for i, p := range n.Ports {
		if p.Pred == nil {
			live[i] = defaultLive
			break
		}
	}
}

func (em *builder) portsForLPG(n *graph.Node, b *solver.Box) []int {
	return em.indexed(em.lpgIndex, em.lpgPortBox, n, b)
}

// intersectBoxes narrows a class box by a path box.
func intersectBoxes(a, b *solver.Box) *solver.Box {
	return solver.Meet(a, b)
}

// decide records a reachable node's status on the queue.
func (em *builder) decide(qe *QueueEmbedding, n *graph.Node, b *solver.Box, live []bool) {
	hwNode, inPRG := em.HW.Lookup(n.Name)
	nLive := 0
	for _, l := range live {
		if l {
			nLive++
		}
	}
	switch {
	case len(n.Ports) == 0 || n.Kind.IsGate() || n.ID == 0:
		qe.status[n.ID] = Software
	case inPRG && em.hwNode[hwNode.ID].software && n.Kind == graph.Boolean && em.reportedOnAll(qe, n.Name, b):
		qe.status[n.ID] = HardwareFlag
	case nLive == 1 && inPRG && !em.hwNode[hwNode.ID].software:
		qe.status[n.ID] = Hardware
	case nLive == 1:
		qe.status[n.ID] = Removed
	default:
		qe.status[n.ID] = Software
	}
}

// Reason says why an LPG node has its status on a queue.
func (em *Embedding) Reason(qe *QueueEmbedding, node string) string {
	n, ok := em.LPG.Lookup(node)
	if !ok {
		return ""
	}
	live := qe.liveOf(n.ID)
	var ports []string
	for i, l := range live {
		if l {
			ports = append(ports, n.Ports[i].Name)
		}
	}
	switch qe.status[n.ID] {
	case Unreachable:
		return "no frame that reaches this queue gets this far"
	case HardwareFlag:
		return fmt.Sprintf("the NIC's %s reports the verdict in the receive descriptor; software reads the flag", n.Name)
	case Hardware:
		return fmt.Sprintf("the NIC's %s already decided it on every path into queue %d", n.Name, qe.ID)
	case Removed:
		return fmt.Sprintf("on queue %d every frame that gets here leaves by port %s (%s)", qe.ID, strings.Join(ports, ""), strings.Join(em.steeringSummary(qe), ", "))
	}
	if len(n.Ports) == 0 {
		return "runs in software"
	}
	if len(ports) > 6 {
		ports = append(ports[:6], fmt.Sprintf("... (%d ports)", len(ports)))
	}
	return fmt.Sprintf("frames on queue %d may leave by %s", qe.ID, strings.Join(ports, ", "))
}

func (em *builder) reportedOnAll(qe *QueueEmbedding, name string, b *solver.Box) bool {
	for _, c := range qe.classes {
		if !c.reported[name] && solver.Intersects(c.box, b) {
			return false
		}
	}
	return true
}

func (em *Embedding) steeringSummary(qe *QueueEmbedding) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range qe.classes {
		s := c.steer
		if !seen[s] {
			seen[s] = true
			out = append(out, "via "+s)
		}
	}
	sort.Strings(out)
	if len(out) > 3 {
		out = append(out[:3], "...")
	}
	return out
}

// keepNodes works out which LPG nodes the queue's software graph has:
// kept nodes in LPG order, decided nodes bypassed through their one live
// port, descriptor-flag nodes reading the flag, dead ports and unreachable
// nodes dropped. A decided node whose only live port drops is kept as a
// stub, so the drop is reported by the same node as in the LPG.
func (em *builder) keepNodes(qe *QueueEmbedding) {
	g := em.LPG
	reachable := qe.reachable
	keep := make([]bool, len(g.Nodes))
	fixed := make([]int, len(g.Nodes)) // the live port of bypassed nodes
	for _, n := range g.Nodes {
		if !reachable[n.ID] {
			continue
		}
		st := qe.status[n.ID]
		keep[n.ID] = st == Software || st == HardwareFlag
		if st == Hardware || st == Removed {
			for i, l := range qe.liveOf(n.ID) {
				if l {
					fixed[n.ID] = i
				}
			}
			if len(n.Ports[fixed[n.ID]].Succ) == 0 {
				keep[n.ID] = true // a stub that drops
			}
		}
	}
	qe.keep, qe.fixed = keep, fixed
}

// software builds the queue's software graph from the kept nodes.
func (em *Embedding) software(qe *QueueEmbedding) *graph.Graph {
	g := em.LPG
	reachable, keep, fixed := qe.reachable, qe.keep, qe.fixed
	sw := graph.New(fmt.Sprintf("%s_queue%d", g.Name, qe.ID))
	newID := make([]int, len(g.Nodes))
	for _, n := range g.Nodes {
		if keep[n.ID] {
			// Attributes and costs are shared with the LPG, clipped so
			// that appending copies.
			c := &graph.Node{Name: n.Name, Kind: n.Kind, Attrs: slices.Clip(n.Attrs), Costs: slices.Clip(n.Costs), Cluster: n.Cluster}
			newID[n.ID] = sw.Add(c).ID
		}
	}
	// resolve appends the kept nodes a successor stands for, following
	// bypassed nodes through their live port; seen marks the nodes one
	// search has passed (with its own stamp, so nothing is cleared).
	seen := make([]int, len(g.Nodes))
	stamp := 0
	var resolve func(out []int, id int) []int
	resolve = func(out []int, id int) []int {
		if !reachable[id] || seen[id] == stamp {
			return out
		}
		if keep[id] {
			return append(out, newID[id])
		}
		seen[id] = stamp
		for _, s := range g.Nodes[id].Ports[fixed[id]].Succ {
			out = resolve(out, s)
		}
		return out
	}
	for _, n := range g.Nodes {
		if !keep[n.ID] {
			continue
		}
		c := sw.Nodes[newID[n.ID]]
		st := qe.status[n.ID]
		if (st == Hardware || st == Removed) && len(n.Ports) > 0 {
			// A stub: the decided port, which drops.
			c.Kind = graph.FNode
			c.Ports = []*graph.Port{{Name: n.Ports[fixed[n.ID]].Name}}
			c.Costs = nil
			continue
		}
		live := qe.liveOf(n.ID)
		for i, p := range n.Ports {
			if live != nil && !live[i] {
				continue
			}
			np := &graph.Port{Name: p.Name, Pred: p.Pred, Semantics: p.Semantics}
			if st == HardwareFlag {
				np.Pred = nil
				if p.Name == "true" {
					np.Pred = pred.Atom{Name: n.Name, Value: "true"}
				}
			}
			for _, s := range p.Succ {
				stamp++
				np.Succ = resolve(np.Succ, s)
			}
			slices.Sort(np.Succ)
			np.Succ = slices.Compact(np.Succ)
			c.Ports = append(c.Ports, np)
		}
		if st == HardwareFlag {
			c.Costs = []graph.Cost{{Unit: "cycles", Value: lpg.Cycles["field"]}}
			c.Attrs = append(c.Attrs, "descriptor")
		}
	}
	return sw
}
