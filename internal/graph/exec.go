package graph

import (
	"fmt"

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
	p := &Program{G: g, Entry: entry, order: order, inputs: make([][]input, len(g.Nodes)), defaults: make([][]bool, len(g.Nodes))}
	for _, n := range g.Nodes {
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
}

// Fired reports whether node id fired.
func (t *Trace) Fired(id int) bool { return t.Port[id] >= 0 }

// NewTrace allocates a trace for p; Run reuses it.
func (p *Program) NewTrace() *Trace { return &Trace{Port: make([]int, len(p.G.Nodes))} }

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
	for i := range t.Port {
		t.Port[i] = -1
	}
	g := p.G
	for _, id := range p.order {
		n := g.Nodes[id]
		if n.Kind.IsGate() {
			t.Port[id] = p.gate(n, t)
			continue
		}
		if id != p.Entry && !p.activated(id, t) {
			continue
		}
		t.Port[id] = p.choose(n, env)
	}
}

// activated reports whether some predecessor enabled a port leading to id.
func (p *Program) activated(id int, t *Trace) bool {
	for _, in := range p.inputs[id] {
		chosen := t.Port[in.from]
		if chosen < 0 {
			continue
		}
		for _, port := range in.ports {
			if port == chosen {
				return true
			}
		}
	}
	return false
}

// choose picks the port an F-node enables.
func (p *Program) choose(n *Node, env pred.Env) int {
	if len(n.Ports) == 0 {
		return 0 // fired, leads nowhere
	}
	defs := p.defaults[n.ID]
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
	for i := range n.Ports {
		if defs[i] {
			return i
		}
	}
	// Every port has a predicate and none holds: the node drops the packet.
	return len(n.Ports)
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
	for _, id := range p.order {
		if !t.Fired(id) {
			continue
		}
		out = append(out, Step{Node: p.G.Nodes[id], Port: t.Enabled(p.G, id)})
	}
	return out
}
