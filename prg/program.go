package prg

import (
	"fmt"
	"slices"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
)

// A programmable stage (configuration kind program) runs LPG nodes: the
// model lists the ones its programs can do (runs), those of them that may
// drop the frames failing them (drops; a node it runs but may not drop
// at hands such frames on through the stage's out port, as a guard that
// keeps the later nodes honest), and why others cannot be run there
// (limit). Its value is the LPG nodes the embedder placed: the longest
// part of the LPG's receive path, from its first node, made of nodes the
// stage runs. Apply turns the value into copies of those nodes, with the
// LPG's own names and predicates, in front of the out port: a frame
// dropped there is dropped by the node that drops it in the LPG, and the
// embedding sees the checks done.

// AttrStage marks the nodes a program value adds to a configured PRG,
// with the stage's name.
const AttrStage = "stage="

// ProgramOut is the one port of a program stage: where the frames the
// stage does not decide go on.
const ProgramOut = "out"

// GuardPort is the port a placed node with a guard (Space.Guards) gets
// first: the frames the stage does not run it on, handed on.
const GuardPort = "unguarded"

// StageNode is one LPG node placed on a programmable stage.
type StageNode struct {
	Name  string     // the LPG node's name
	Kind  graph.Kind // Boolean or FNode
	Ports []StagePort
	// Answer is what an answering node (one of the space's answers, a
	// terminal of the LPG with no ports) answers: its LPG attributes,
	// which say the reply (lpg.AttrReply).
	Answer []string
}

// StagePort is a port of a placed node.
type StagePort struct {
	Name string
	Pred pred.Expr // nil: the default port
	// Next is the placed node the port leads to; ProgramOut when the
	// frame goes on through the stage's out port; "" when the stage
	// drops it (a port that leads nowhere in the LPG, of a node in
	// drops).
	Next string
}

// Drops reports whether the port drops its frames.
func (p StagePort) Drops() bool { return p.Next == "" }

// PlaceProgram returns the value of program space sp for an LPG: the
// nodes of the LPG's receive path the stage runs, in LPG order, reached
// from the LPG's source through placed nodes only. With no such node the
// value places nothing.
func PlaceProgram(sp *Space, lpgGraph *graph.Graph) *Value {
	v := &Value{Kind: Program}
	if len(lpgGraph.Nodes) == 0 {
		return v
	}
	runs := func(n *graph.Node) bool {
		if slices.Contains(sp.Answers, n.Name) {
			return n.Kind == graph.FNode && len(n.Ports) == 0
		}
		return slices.Contains(sp.Runs, n.Name) && (n.Kind == graph.Boolean || n.Kind == graph.FNode) && len(n.Ports) > 0
	}
	placed := make([]bool, len(lpgGraph.Nodes))
	src := lpgGraph.Nodes[0]
	var todo []int
	for _, p := range src.Ports {
		for _, s := range p.Succ {
			if runs(lpgGraph.Nodes[s]) && !placed[s] {
				placed[s] = true
				todo = append(todo, s)
			}
		}
	}
	if len(todo) != 1 {
		return v // the stage runs from the LPG's one first node, or not at all
	}
	for len(todo) > 0 {
		n := lpgGraph.Nodes[todo[0]]
		todo = todo[1:]
		for _, p := range n.Ports {
			for _, s := range p.Succ {
				if !placed[s] && runs(lpgGraph.Nodes[s]) {
					placed[s] = true
					todo = append(todo, s)
				}
			}
		}
	}
	for _, n := range lpgGraph.Nodes {
		if !placed[n.ID] {
			continue
		}
		sn := StageNode{Name: n.Name, Kind: n.Kind}
		if len(n.Ports) == 0 {
			sn.Answer = slices.Clone(n.Attrs)
		}
		if g, ok := sp.Guards[n.Name]; ok {
			// The frames the stage does not run the node on go on first.
			sn.Ports = append(sn.Ports, StagePort{Name: GuardPort, Pred: pred.Not{X: g}, Next: ProgramOut})
		}
		for _, p := range n.Ports {
			sp2 := StagePort{Name: p.Name, Pred: p.Pred, Next: ProgramOut}
			switch {
			case len(p.Succ) == 0 && slices.Contains(sp.Drops, n.Name):
				sp2.Next = ""
			case len(p.Succ) == 1 && placed[p.Succ[0]]:
				sp2.Next = lpgGraph.Nodes[p.Succ[0]].Name
			}
			sn.Ports = append(sn.Ports, sp2)
		}
		v.Program = append(v.Program, sn)
	}
	return v
}

// validateProgram checks a program value against its space.
func validateProgram(sp *Space, v *Value, bad func(string, string, ...any)) {
	names := map[string]bool{}
	for _, n := range v.Program {
		names[n.Name] = true
	}
	for _, n := range v.Program {
		if !slices.Contains(sp.Runs, n.Name) && !(len(n.Ports) == 0 && slices.Contains(sp.Answers, n.Name)) {
			bad(sp.Node, "places %s, which the stage does not run", n.Name)
		}
		for _, p := range n.Ports {
			switch {
			case p.Drops() && !slices.Contains(sp.Drops, n.Name):
				bad(sp.Node, "%s drops at port %s, but the stage may not drop at %s", n.Name, p.Name, n.Name)
			case !p.Drops() && p.Next != ProgramOut && !names[p.Next]:
				bad(sp.Node, "%s port %s leads to %s, which is not placed", n.Name, p.Name, p.Next)
			}
		}
	}
}

// applyProgram adds the placed nodes to the configured graph g and
// points the stage node n at the first of them.
func applyProgram(g *graph.Graph, n, orig *graph.Node, v *Value) {
	out := slices.Clone(orig.Port(ProgramOut).Succ)
	n.Ports = []*graph.Port{{Name: ProgramOut, Succ: out}}
	if v == nil || len(v.Program) == 0 {
		return
	}
	ids := map[string]int{}
	added := make([]*graph.Node, len(v.Program))
	for i, sn := range v.Program {
		added[i] = g.Add(&graph.Node{Name: sn.Name, Kind: sn.Kind, Cluster: slices.Clone(orig.Cluster), Attrs: append([]string{AttrStage + orig.Name}, sn.Answer...)})
		ids[sn.Name] = added[i].ID
	}
	for i, sn := range v.Program {
		for _, p := range sn.Ports {
			gp := &graph.Port{Name: p.Name, Pred: p.Pred}
			switch {
			case p.Drops():
			case p.Next == ProgramOut:
				gp.Succ = slices.Clone(out)
			default:
				gp.Succ = []int{ids[p.Next]}
			}
			added[i].Ports = append(added[i].Ports, gp)
		}
	}
	n.Ports = []*graph.Port{{Name: "run", Succ: []int{added[0].ID}}}
}

// StageNodes returns the names of the placed nodes of a program value
// (the answering ones too), and of those that may drop, in order.
func (v *Value) StageNodes() (runs, drops []string) {
	for _, n := range v.Program {
		runs = append(runs, n.Name)
		for _, p := range n.Ports {
			if p.Drops() {
				drops = append(drops, n.Name)
				break
			}
		}
	}
	return runs, drops
}

// String describes a placed node for messages.
func (n StageNode) String() string { return fmt.Sprintf("%s (%d ports)", n.Name, len(n.Ports)) }

// WithoutPrograms returns the configuration with nothing placed on the
// programmable stages (the values of other nodes shared).
func (c *Config) WithoutPrograms() *Config {
	out := NewConfig()
	for k, v := range c.Values {
		if v.Kind != Program {
			out.Values[k] = v
		}
	}
	return out
}
