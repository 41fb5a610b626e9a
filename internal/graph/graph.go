// Package graph is the dataflow graph shared by PRGs and LPGs: nodes with a
// kind, ordered ports, per-port successor lists and predicates, spawn edges
// kept apart from normal edges, attributes and costs. Graph algorithms
// (cycles, reachability, ordering) run on gonum views of it.
package graph

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	gograph "gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"

	"github.com/dragonc/dragonc/internal/pred"
)

// Kind is what a node does with a packet.
type Kind int

// Node kinds: F-nodes (node, boolean), O-nodes (the four gates) and
// C-nodes (config).
const (
	FNode Kind = iota
	Boolean
	And
	Or
	Nand
	Nor
	Config
)

var kindNames = [...]string{"node", "boolean", "and", "or", "nand", "nor", "config"}

func (k Kind) String() string { return kindNames[k] }

// KindFromKeyword maps a declaration keyword to its kind.
func KindFromKeyword(kw string) (Kind, bool) {
	for i, n := range kindNames {
		if n == kw {
			return Kind(i), true
		}
	}
	return 0, false
}

// IsGate reports whether k is an O-node.
func (k Kind) IsGate() bool { return k >= And && k <= Nor }

// Graph is a PRG or an LPG.
type Graph struct {
	Name    string
	Nodes   []*Node // in declaration order; a node's ID is its index
	Helpers string  // SMT-LIB helpers text, kept verbatim
	// Resources are graph-level declarations (engines, tasks, ...) in
	// declaration order.
	Resources []*Resource
	byName    map[string]int
}

// Node is one vertex.
type Node struct {
	ID      int
	Name    string   // full name: cluster prefixes + local name
	Cluster []string // enclosing clusters, outermost first
	Kind    Kind
	Impl    string
	Attrs   []string
	Ports   []*Port
	Spawns  []*Spawn
	// Constraints are Unicorn `constraint PORT "TEXT"` entries.
	Constraints []Constraint
	ConfType    *ConfType
	ConfFunc    string
	ConfSpec    *Spec // a generic configuration kind (docs/language.md section 2)
	Costs       []Cost
	Src         Source
}

// Source locates a declaration for diagnostics. It is not part of a
// graph's meaning and comparisons ignore it.
type Source struct {
	File   string
	Offset int
}

// Port is a named output of a node.
type Port struct {
	Name      string
	Succ      []int     // successor node IDs, in the order written
	Pred      pred.Expr // which packets leave through it; nil: unconstrained
	Semantics string    // SMT-LIB term, verbatim
}

// Spawn is a spawn edge: the node may start a new activation of Target.
type Spawn struct {
	Name   string
	Target int
	Preds  []pred.Expr
}

// Constraint is a Unicorn port constraint.
type Constraint struct {
	Port string
	Text string
}

// Cost is one cost of a node: `cost cycles 40`.
type Cost struct {
	Unit  string
	Value float64
}

// Spec is a generic configuration kind with its properties, interpreted by
// package prg.
type Spec struct {
	Kind  string // table, hash, place, enum
	Props []Prop
}

// Resource is a graph-level resource declaration.
type Resource struct {
	Kind  string // engine, task, resources
	Name  string
	Props []Prop
	Src   Source
}

// Prop is a key and its value.
type Prop struct {
	Key   string
	Value Value
	Src   Source
}

// Value is a property value.
type Value struct {
	Kind  ValueKind
	Num   float64
	Hi    float64 // for ranges
	Unit  string
	Str   string // string contents or name
	List  []Value
	Range bool
}

// ValueKind says which field of a Value is set.
type ValueKind int

// Value kinds.
const (
	NumValue ValueKind = iota
	StrValue
	NameValue
	ListValue
)

// ConfType is a Unicorn configuration type.
type ConfType struct {
	Kind     TypeKind
	Min, Max int64     // integers (UInt, SInt, Int)
	Enum     []string  // Enum
	Elem     *ConfType // Maybe, List, Set
	Fields   []TupleField
	LenMin   int  // lists: -1 when unbounded
	LenMax   int  // lists: -1 when unbounded
	Ordered  bool // [T] rather than {T}
}

// TypeKind names a configuration type constructor.
type TypeKind int

// Configuration type constructors.
const (
	IntType TypeKind = iota
	BoolType
	EnumType
	MaybeType
	ListType
	TupleType
)

// TupleField is a labelled tuple element.
type TupleField struct {
	Label string
	Type  *ConfType
}

// String renders a type in canonical Unicorn syntax.
func (t *ConfType) String() string {
	if t == nil {
		return ""
	}
	switch t.Kind {
	case IntType:
		return fmt.Sprintf("Int %d %d", t.Min, t.Max)
	case BoolType:
		return "Bool"
	case EnumType:
		s := "Enum ("
		for i, e := range t.Enum {
			if i > 0 {
				s += ", "
			}
			s += e
		}
		return s + ")"
	case MaybeType:
		return "<" + t.Elem.String() + ">"
	case ListType:
		open, close := "{", "}"
		if t.Ordered {
			open, close = "[", "]"
		}
		s := open + t.Elem.String() + close
		switch {
		case t.LenMin < 0 && t.LenMax < 0:
		case t.LenMin == t.LenMax:
			s += fmt.Sprintf("<%d>", t.LenMin)
		case t.LenMin < 0:
			s += fmt.Sprintf("<,%d>", t.LenMax)
		case t.LenMax < 0:
			s += fmt.Sprintf("<%d,>", t.LenMin)
		default:
			s += fmt.Sprintf("<%d,%d>", t.LenMin, t.LenMax)
		}
		return s
	case TupleType:
		s := "("
		for i, f := range t.Fields {
			if i > 0 {
				s += ", "
			}
			s += f.Label + ": " + f.Type.String()
		}
		return s + ")"
	}
	return "?"
}

// New returns an empty graph.
func New(name string) *Graph {
	return &Graph{Name: name, byName: map[string]int{}}
}

// Add appends a node and returns it. A second node with the same full name
// is kept, but Lookup keeps returning the first (Unicorn's lenient habit).
func (g *Graph) Add(n *Node) *Node {
	n.ID = len(g.Nodes)
	g.Nodes = append(g.Nodes, n)
	if _, dup := g.byName[n.Name]; !dup {
		g.byName[n.Name] = n.ID
	}
	return n
}

// Lookup returns the first node declared with a full name.
func (g *Graph) Lookup(name string) (*Node, bool) {
	id, ok := g.byName[name]
	if !ok {
		return nil, false
	}
	return g.Nodes[id], true
}

// Port returns the port of n with that name.
func (n *Node) Port(name string) *Port {
	for _, p := range n.Ports {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Transmit reports whether a node name belongs to the transmit path. As
// in Dragonet, receive and transmit are told apart by name: the Tx prefix
// of the transmit cluster and of the transmit queues (Dragonet's
// lib/Dragonet/Conventions.hs, txQPref = "TxQueue"). This is the one place
// that rule is written.
func Transmit(name string) bool { return strings.HasPrefix(name, "Tx") }

// HasAttr reports whether n carries attribute a.
func (n *Node) HasAttr(a string) bool { return slices.Contains(n.Attrs, a) }

// Cost returns n's cost in a unit, and whether it has one.
func (n *Node) Cost(unit string) (float64, bool) {
	for _, c := range n.Costs {
		if c.Unit == unit {
			return c.Value, true
		}
	}
	return 0, false
}

// Edge is one (node, port) → successor pair.
type Edge struct {
	From int
	Port string
	To   int
}

// Edges lists the distinct (node, port) → successor pairs in node, port
// and list order.
func (g *Graph) Edges() []Edge {
	var out []Edge
	for _, n := range g.Nodes {
		for _, p := range n.Ports {
			seen := map[int]bool{}
			for _, s := range p.Succ {
				if !seen[s] {
					seen[s] = true
					out = append(out, Edge{n.ID, p.Name, s})
				}
			}
		}
	}
	return out
}

// SpawnEdges counts spawn edges.
func (g *Graph) SpawnEdges() int {
	c := 0
	for _, n := range g.Nodes {
		c += len(n.Spawns)
	}
	return c
}

// Preds returns, for every node, the IDs of nodes with an edge into it, in
// ascending order.
func (g *Graph) Preds() [][]int {
	out := make([][]int, len(g.Nodes))
	for _, e := range g.Edges() {
		if len(out[e.To]) == 0 || out[e.To][len(out[e.To])-1] != e.From {
			out[e.To] = append(out[e.To], e.From)
		}
	}
	for i := range out {
		slices.Sort(out[i])
		out[i] = slices.Compact(out[i])
	}
	return out
}

// directed builds a gonum view of the normal edges (and spawn edges if
// asked). Self edges, which gonum's simple graphs do not hold, are returned
// apart.
func (g *Graph) directed(withSpawns bool) (*simple.DirectedGraph, []int) {
	d := simple.NewDirectedGraph()
	for _, n := range g.Nodes {
		d.AddNode(simple.Node(n.ID))
	}
	var self []int
	add := func(from, to int) {
		if from == to {
			self = append(self, from)
			return
		}
		d.SetEdge(d.NewEdge(simple.Node(from), simple.Node(to)))
	}
	for _, e := range g.Edges() {
		add(e.From, e.To)
	}
	if withSpawns {
		for _, n := range g.Nodes {
			for _, s := range n.Spawns {
				if s.Target != n.ID {
					add(n.ID, s.Target)
				}
			}
		}
	}
	return d, self
}

// Cycles returns the node sets of every cycle through normal edges (spawn
// edges do not count), each sorted by ID, in order of their smallest ID.
func (g *Graph) Cycles() [][]int {
	d, self := g.directed(false)
	var out [][]int
	for _, scc := range topo.TarjanSCC(d) {
		if len(scc) < 2 {
			continue
		}
		ids := make([]int, len(scc))
		for i, n := range scc {
			ids[i] = int(n.ID())
		}
		slices.Sort(ids)
		out = append(out, ids)
	}
	for _, s := range slices.Compact(slices.Sorted(slices.Values(self))) {
		out = append(out, []int{s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// Reachable marks every node reachable from roots through normal and spawn
// edges.
func (g *Graph) Reachable(roots []int) []bool {
	seen := make([]bool, len(g.Nodes))
	stack := append([]int(nil), roots...)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id < 0 || id >= len(seen) || seen[id] {
			continue
		}
		seen[id] = true
		n := g.Nodes[id]
		for _, p := range n.Ports {
			stack = append(stack, p.Succ...)
		}
		for _, s := range n.Spawns {
			stack = append(stack, s.Target)
		}
	}
	return seen
}

// TopoOrder returns node IDs in an order where every node comes after its
// predecessors through normal edges, ties broken by ID so the order is
// stable. It fails on a cycle.
func (g *Graph) TopoOrder() ([]int, error) {
	v := newView(g)
	if v.self >= 0 {
		return nil, fmt.Errorf("node %s has an edge to itself", g.Nodes[v.self].Name)
	}
	sorted, err := topo.SortStabilized(v, func(ns []gonumNode) {
		slices.SortFunc(ns, func(a, b gonumNode) int { return cmp.Compare(a.ID(), b.ID()) })
	})
	if err != nil {
		return nil, fmt.Errorf("graph has a cycle")
	}
	out := make([]int, len(sorted))
	for i, n := range sorted {
		out[i] = int(n.ID())
	}
	return out, nil
}

type gonumNode = gograph.Node

// view is a read-only gonum view of a graph's normal edges, over slices
// rather than the maps of gonum's simple graphs: node IDs are indexes.
// It holds what gonum's sorts ask for (Nodes and From); the rest of the
// interface answers from the same slices.
type view struct {
	nodes []gonumNode
	succ  [][]gonumNode // per node, distinct successors
	self  int           // a node with an edge to itself, or -1
}

func newView(g *Graph) *view {
	v := &view{nodes: make([]gonumNode, len(g.Nodes)), succ: make([][]gonumNode, len(g.Nodes)), self: -1}
	for i := range g.Nodes {
		v.nodes[i] = simple.Node(i)
	}
	seen := make([]int, len(g.Nodes)) // stamp: node ID + 1 of the last node that listed it
	for _, n := range g.Nodes {
		for _, p := range n.Ports {
			for _, s := range p.Succ {
				if s == n.ID {
					if v.self < 0 {
						v.self = s
					}
					continue
				}
				if seen[s] != n.ID+1 {
					seen[s] = n.ID + 1
					v.succ[n.ID] = append(v.succ[n.ID], v.nodes[s])
				}
			}
		}
	}
	return v
}

func (v *view) Node(id int64) gonumNode {
	if id < 0 || id >= int64(len(v.nodes)) {
		return nil
	}
	return v.nodes[id]
}
func (v *view) Nodes() gograph.Nodes        { return iterator.NewOrderedNodes(v.nodes) }
func (v *view) From(id int64) gograph.Nodes { return iterator.NewOrderedNodes(v.succ[id]) }
func (v *view) HasEdgeFromTo(u, w int64) bool {
	return slices.ContainsFunc(v.succ[u], func(n gonumNode) bool { return n.ID() == w })
}
func (v *view) HasEdgeBetween(x, y int64) bool { return v.HasEdgeFromTo(x, y) || v.HasEdgeFromTo(y, x) }
func (v *view) Edge(u, w int64) gograph.Edge {
	if !v.HasEdgeFromTo(u, w) {
		return nil
	}
	return simple.Edge{F: v.nodes[u], T: v.nodes[w]}
}
func (v *view) To(id int64) gograph.Nodes {
	var to []gonumNode
	for u := range v.succ {
		if v.HasEdgeFromTo(int64(u), id) {
			to = append(to, v.nodes[u])
		}
	}
	return iterator.NewOrderedNodes(to)
}

// Clone returns a deep copy of g. Predicates are immutable values and are
// shared.
func (g *Graph) Clone() *Graph {
	out := &Graph{Name: g.Name, Helpers: g.Helpers, Resources: g.Resources, byName: make(map[string]int, len(g.byName))}
	for k, v := range g.byName {
		out.byName[k] = v
	}
	out.Nodes = make([]*Node, len(g.Nodes))
	for i, n := range g.Nodes {
		c := *n
		c.Cluster = slices.Clone(n.Cluster)
		c.Attrs = slices.Clone(n.Attrs)
		c.Constraints = slices.Clone(n.Constraints)
		c.Costs = slices.Clone(n.Costs)
		c.Ports = make([]*Port, len(n.Ports))
		for j, p := range n.Ports {
			cp := *p
			cp.Succ = slices.Clone(p.Succ)
			c.Ports[j] = &cp
		}
		c.Spawns = make([]*Spawn, len(n.Spawns))
		for j, s := range n.Spawns {
			cs := *s
			cs.Preds = slices.Clone(s.Preds)
			c.Spawns[j] = &cs
		}
		out.Nodes[i] = &c
	}
	return out
}

// InPort is one port leading into a node.
type InPort struct {
	From int // predecessor node
	Port int // index of its port
}

// InPorts returns, for every node, the ports that lead into it, in node and
// port order.
func (g *Graph) InPorts() [][]InPort {
	out := make([][]InPort, len(g.Nodes))
	for _, n := range g.Nodes {
		for i, p := range n.Ports {
			for _, s := range p.Succ {
				if k := len(out[s]); k > 0 && out[s][k-1] == (InPort{n.ID, i}) {
					continue
				}
				out[s] = append(out[s], InPort{n.ID, i})
			}
		}
	}
	return out
}
