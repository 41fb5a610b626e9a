package graph

import (
	"fmt"
	"math/bits"

	"github.com/dragonc/dragonc/internal/pred"
)

// Program is a graph prepared for execution: a topological order and, for
// every gate, its predecessor nodes. It is immutable and safe to share.
type Program struct {
	G     *Graph
	Entry int
	order []int
	// inputs[n] lists, for every predecessor node of n, the ports of that
	// predecessor that lead to n.
	inputs [][]input
	// defaults[n][i] marks ports without a predicate.
	defaults [][]bool
	// pos[n] is n's place in order; next[n][i] lists the places of the
	// successors of n's port i, so a run visits only the nodes a packet
	// reaches instead of every node of a large graph.
	pos    []int32
	next   [][][]int32
	isGate []bool
	// index[n], for a node with many guarded ports, finds the ports whose
	// predicate can hold from one field's value (nil: none).
	index []*portIndex
}

// portIndex narrows a demultiplexer's ports to those that can hold: every
// guarded port requires field == some value (alone or in a conjunction),
// so only the ports listed under the frame's value need evaluating.
type portIndex struct {
	field int
	ports map[uint64][]int // in declared order
}

// indexMin is the fewest guarded ports worth an index.
const indexMin = 8

// newPortIndex indexes n's guarded ports by the field every one of them
// compares for equality, the one with the most distinct values; nil when
// there are few ports or no such field.
func newPortIndex(n *Node) *portIndex {
	var counts map[int]map[uint64]bool
	guarded := 0
	for _, port := range n.Ports {
		if port.Pred == nil {
			continue
		}
		guarded++
		eqs := equalities(port.Pred)
		if counts == nil {
			counts = map[int]map[uint64]bool{}
			for id := range eqs {
				counts[id] = map[uint64]bool{}
			}
		}
		for id := range counts {
			v, ok := eqs[id]
			if !ok {
				delete(counts, id)
				continue
			}
			counts[id][v] = true
		}
	}
	best, distinct := -1, 0
	for id, vals := range counts {
		if len(vals) > distinct || len(vals) == distinct && id < best {
			best, distinct = id, len(vals)
		}
	}
	if guarded < indexMin || best < 0 || distinct < 2 {
		return nil
	}
	ix := &portIndex{field: best, ports: map[uint64][]int{}}
	for i, port := range n.Ports {
		if port.Pred != nil {
			v := equalities(port.Pred)[best]
			ix.ports[v] = append(ix.ports[v], i)
		}
	}
	return ix
}

// equalities lists the fields e requires to equal a constant, unmasked:
// e itself or a conjunct of it.
func equalities(e pred.Expr) map[int]uint64 {
	out := map[int]uint64{}
	add := func(x pred.Expr) {
		if c, ok := x.(pred.Cmp); ok && c.Op == pred.Eq && c.Mask == 0 {
			out[c.ID] = c.Value
		}
	}
	if a, ok := e.(pred.And); ok {
		for _, x := range a.X {
			add(x)
		}
	} else {
		add(e)
	}
	return out
}

type input struct {
	from  int
	ports []int // port indexes of `from` whose successors include the node
}

// Compile prepares g for execution from the entry node. It fails on a
// cycle or on a configuration node, which must be applied first.
func Compile(g *Graph, entry int) (*Program, error) {
	order, err := g.TopoOrder()
	if err != nil {
		return nil, err
	}
	p := &Program{G: g, Entry: entry, order: order, inputs: make([][]input, len(g.Nodes)), defaults: make([][]bool, len(g.Nodes)),
		pos: make([]int32, len(g.Nodes)), next: make([][][]int32, len(g.Nodes)), isGate: make([]bool, len(g.Nodes)), index: make([]*portIndex, len(g.Nodes))}
	for i, id := range order {
		p.pos[id] = int32(i)
	}
	for _, n := range g.Nodes {
		p.isGate[n.ID] = n.Kind.IsGate()
		if !p.isGate[n.ID] {
			p.index[n.ID] = newPortIndex(n)
		}
		p.next[n.ID] = make([][]int32, len(n.Ports))
		for i, port := range n.Ports {
			for _, s := range port.Succ {
				p.next[n.ID][i] = append(p.next[n.ID][i], p.pos[s])
			}
		}
		if n.Kind == Config {
			return nil, fmt.Errorf("node %s is a configuration node; apply a configuration before running the graph", n.Name)
		}
		p.defaults[n.ID] = make([]bool, len(n.Ports))
		for i, port := range n.Ports {
			p.defaults[n.ID][i] = port.Pred == nil
			for _, s := range port.Succ {
				in := p.inputs[s]
				if k := len(in) - 1; k >= 0 && in[k].from == n.ID {
					if in[k].ports[len(in[k].ports)-1] != i {
						in[k].ports = append(in[k].ports, i)
					}
					continue
				}
				p.inputs[s] = append(in, input{from: n.ID, ports: []int{i}})
			}
		}
	}
	return p, nil
}

// Trace is the result of running a program on one packet: for every node,
// the port it enabled (-1 when it did not fire).
type Trace struct {
	Port []int
	// fired lists the nodes whose Port the last run set, so the next run
	// resets only those; pending marks, by place in the order, the nodes a
	// predecessor activated and the run has not reached yet.
	fired   []int
	pending []uint64
}

// FiredOrder lists the nodes that fired in the last run, in execution
// order. It is the trace's own slice: read it before the next run.
func (t *Trace) FiredOrder() []int { return t.fired }

// Fired reports whether node id fired.
func (t *Trace) Fired(id int) bool { return t.Port[id] >= 0 }

// NewTrace allocates a trace for p; Run reuses it.
func (p *Program) NewTrace() *Trace {
	t := &Trace{Port: make([]int, len(p.G.Nodes)), pending: make([]uint64, (len(p.order)+63)/64)}
	for i := range t.Port {
		t.Port[i] = -1
	}
	return t
}

// Run executes the program on env, filling t. The rules are Dragonet's:
//
//   - An F-node fires when the entry is it or a predecessor enabled a port
//     leading to it. It enables the first port, in declared order, whose
//     predicate holds; failing that, the first port without a predicate. A
//     boolean whose ports carry no predicate asks env for the atom
//     pred(NODE,true).
//   - A gate takes one input from each predecessor node: true unless that
//     node enabled a port named "false". AND is false as soon as an input
//     is false and true once every input is true; OR the converse; NAND
//     and NOR negate them. A gate whose inputs are incomplete and
//     undecided does not fire.
//   - Successors of an enabled port are all activated (fan-out).
func (p *Program) Run(env pred.Env, t *Trace) {
	for _, id := range t.fired {
		t.Port[id] = -1
	}
	t.fired = t.fired[:0]
	g := p.G
	// A node a packet does not reach neither fires nor changes a gate's
	// outcome (a gate with no input arrived is undecided and incomplete),
	// so the run visits, in topological order, only the entry and the
	// nodes an enabled port leads to. Successors always come later in the
	// order, so one forward sweep over the pending bits finds them all.
	t.mark(p.pos[p.Entry])
	for w := range t.pending {
		for t.pending[w] != 0 {
			b := bits.TrailingZeros64(t.pending[w])
			t.pending[w] &^= 1 << b
			id := p.order[w*64+b]
			n := g.Nodes[id]
			var port int
			if p.isGate[id] {
				if port = p.gate(n, t); port < 0 {
					continue
				}
			} else {
				port = p.choose(n, env)
			}
			t.Port[id] = port
			t.fired = append(t.fired, id)
			if port < len(p.next[id]) {
				for _, at := range p.next[id][port] {
					t.mark(at)
				}
			}
		}
	}
}

func (t *Trace) mark(at int32) { t.pending[at>>6] |= 1 << (at & 63) }

// choose picks the port an F-node enables.
func (p *Program) choose(n *Node, env pred.Env) int {
	if len(n.Ports) == 0 {
		return 0 // fired, leads nowhere
	}
	defs := p.defaults[n.ID]
	if ix := p.index[n.ID]; ix != nil {
		// Only the listed ports can hold; the rest compare the field with
		// another value (and with no value, no guarded port holds).
		if v, ok := env.Value(ix.field); ok {
			for _, i := range ix.ports[v] {
				if pred.Eval(n.Ports[i].Pred, env) {
					return i
				}
			}
		}
		return firstDefault(defs, len(n.Ports))
	}
	allDefault := true
	for i, port := range n.Ports {
		if defs[i] {
			continue
		}
		allDefault = false
		if pred.Eval(port.Pred, env) {
			return i
		}
	}
	if allDefault && n.Kind == Boolean && len(n.Ports) == 2 {
		truth := env.Atom(pred.Atom{Name: n.Name, Value: "true"})
		for i, port := range n.Ports {
			if (port.Name == "true") == truth {
				return i
			}
		}
	}
	return firstDefault(defs, len(n.Ports))
}

// firstDefault is the first port without a predicate, or ports (the node
// drops the packet) when every port has one.
func firstDefault(defs []bool, ports int) int {
	for i, d := range defs {
		if d {
			return i
		}
	}
	return ports
}

// gate evaluates an O-node; -1 when it does not fire.
func (p *Program) gate(n *Node, t *Trace) int {
	isAnd := n.Kind == And || n.Kind == Nand
	complete := true
	decided := false
	for _, in := range p.inputs[n.ID] {
		chosen := t.Port[in.from]
		arrived := false
		for _, port := range in.ports {
			if port == chosen {
				arrived = true
			}
		}
		if !arrived {
			complete = false
			continue
		}
		from := p.G.Nodes[in.from]
		value := chosen >= len(from.Ports) || from.Ports[chosen].Name != "false"
		if isAnd && !value || !isAnd && value {
			decided = true
			break
		}
	}
	var result bool
	switch {
	case decided:
		result = !isAnd // AND short-circuits to false, OR to true
	case complete && len(p.inputs[n.ID]) > 0:
		result = isAnd
	default:
		return -1
	}
	if n.Kind == Nand || n.Kind == Nor {
		result = !result
	}
	for i, port := range n.Ports {
		if (port.Name == "true") == result {
			return i
		}
	}
	return -1
}

// Enabled returns the port node id enabled in t, or nil when it did not
// fire or enabled no declared port.
func (t *Trace) Enabled(g *Graph, id int) *Port {
	i := t.Port[id]
	if i < 0 || i >= len(g.Nodes[id].Ports) {
		return nil
	}
	return g.Nodes[id].Ports[i]
}

// Order returns the execution order of the program's nodes.
func (p *Program) Order() []int { return p.order }

// Step is one node a packet passed through: the node and the port it
// enabled (nil Port when it enabled none).
type Step struct {
	Node *Node
	Port *Port
}

// Path returns the nodes that fired in the last run of t, in execution
// order, each with the port it enabled.
func (p *Program) Path(t *Trace) []Step {
	var out []Step
	for _, id := range t.fired {
		out = append(out, Step{Node: p.G.Nodes[id], Port: t.Enabled(p.G, id)})
	}
	return out
}
