// Package dot draws graphs as Graphviz DOT with emicklei/dot: clusters as
// subgraphs, gates and configuration nodes drawn apart from F-nodes, port
// names on edges, spawn edges dashed. Output is deterministic.
package dot

import (
	"fmt"
	"strings"

	gv "github.com/emicklei/dot"

	"github.com/dragonc/dragonc/internal/graph"
)

// Graph renders g as DOT text.
func Graph(g *graph.Graph) string {
	d := gv.NewGraph(gv.Directed)
	d.ID(quoteID(g.Name))
	d.Attr("rankdir", "LR")
	d.Attr("label", g.Name)
	d.Attr("fontname", "Helvetica")
	nodes := make([]gv.Node, len(g.Nodes))
	clusters := map[string]*gv.Graph{}
	var sub func(path []string) *gv.Graph
	sub = func(path []string) *gv.Graph {
		if len(path) == 0 {
			return d
		}
		key := strings.Join(path, "/")
		if c, ok := clusters[key]; ok {
			return c
		}
		parent := sub(path[:len(path)-1])
		c := parent.Subgraph(key, gv.ClusterOption{})
		c.Attr("label", path[len(path)-1])
		c.Attr("style", "rounded")
		clusters[key] = c
		return c
	}
	for _, n := range g.Nodes {
		parent := sub(n.Cluster)
		dn := parent.Node(fmt.Sprintf("n%d", n.ID))
		dn.Attr("label", Label(n))
		dn.Attr("fontname", "Helvetica")
		style(dn, n)
		nodes[n.ID] = dn
	}
	for _, n := range g.Nodes {
		for _, p := range n.Ports {
			seen := map[int]bool{}
			for _, s := range p.Succ {
				if seen[s] {
					continue
				}
				seen[s] = true
				e := d.Edge(nodes[n.ID], nodes[s])
				e.Attr("label", p.Name)
				e.Attr("fontsize", "9")
				if p.Name == "false" {
					e.Attr("color", "gray40")
				}
			}
		}
		for _, s := range n.Spawns {
			e := d.Edge(nodes[n.ID], nodes[s.Target])
			e.Attr("label", "spawn "+s.Name)
			e.Attr("fontsize", "9")
			e.Dashed()
		}
	}
	return d.String()
}

// Label is the text drawn in a node: its name without the cluster prefix,
// and the gate or configuration kind where it has one.
func Label(n *graph.Node) string {
	local := strings.TrimPrefix(n.Name, strings.Join(n.Cluster, ""))
	switch {
	case n.Kind.IsGate():
		return strings.ToUpper(n.Kind.String()) + "\n" + local
	case n.Kind == graph.Config:
		kind := "config"
		if n.ConfSpec != nil {
			kind = n.ConfSpec.Kind
		} else if n.ConfFunc != "" {
			kind = n.ConfFunc
		}
		return local + "\n[" + kind + "]"
	}
	return local
}

func style(dn gv.Node, n *graph.Node) {
	switch {
	case n.Kind.IsGate():
		dn.Attr("shape", "invhouse")
		dn.Attr("fontsize", "10")
	case n.Kind == graph.Config:
		dn.Attr("shape", "hexagon")
		dn.Attr("style", "filled")
		dn.Attr("fillcolor", "lightyellow")
	case n.Kind == graph.Boolean:
		dn.Attr("shape", "box")
		dn.Attr("style", "rounded")
	default:
		dn.Attr("shape", "box")
	}
	if n.HasAttr("source") || n.HasAttr("sink") {
		dn.Attr("peripheries", "2")
	}
}

func quoteID(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// Status is how the embedding drawing shows an LPG node on a queue.
type Status int

// Drawing statuses.
const (
	Omit     Status = iota // not drawn
	Software               // plain
	Hardware               // shaded: the NIC does the work
	Removed                // dashed: the path decides it
)

// QueueView is one queue of an embedding picture.
type QueueView struct {
	Name   string
	Status func(node string) Status
}

// Embedding draws the configured PRG as one cluster and, for every queue,
// the LPG nodes that matter there: software nodes plain, nodes the NIC
// does shaded (as in Fig. 3 of the Dragonet seed), nodes the path decides
// dashed. Edges are labelled with their ports.
func Embedding(title string, hw, l *graph.Graph, queues []QueueView) string {
	d := gv.NewGraph(gv.Directed)
	d.ID(quoteID(title))
	d.Attr("rankdir", "LR")
	d.Attr("label", title)
	d.Attr("fontname", "Helvetica")
	d.Attr("compound", "true")
	prg := d.Subgraph("PRG (configured)", gv.ClusterOption{})
	prg.Attr("style", "rounded")
	hwNodes := make([]gv.Node, len(hw.Nodes))
	for _, n := range hw.Nodes {
		dn := prg.Node(fmt.Sprintf("h%d", n.ID))
		dn.Attr("label", n.Name)
		dn.Attr("fontname", "Helvetica")
		style(dn, n)
		hwNodes[n.ID] = dn
	}
	for _, n := range hw.Nodes {
		for _, p := range n.Ports {
			for _, s := range p.Succ {
				e := prg.Edge(hwNodes[n.ID], hwNodes[s])
				e.Attr("label", p.Name)
				e.Attr("fontsize", "9")
			}
		}
	}
	for qi, q := range queues {
		c := d.Subgraph(q.Name, gv.ClusterOption{})
		c.Attr("style", "rounded")
		shown := map[int]gv.Node{}
		for _, n := range l.Nodes {
			st := q.Status(n.Name)
			if st == Omit {
				continue
			}
			dn := c.Node(fmt.Sprintf("q%d_%d", qi, n.ID))
			dn.Attr("label", n.Name)
			dn.Attr("fontname", "Helvetica")
			dn.Attr("shape", "box")
			switch st {
			case Hardware:
				dn.Attr("style", "filled")
				dn.Attr("fillcolor", "gray80")
			case Removed:
				dn.Attr("style", "dashed")
			}
			shown[n.ID] = dn
		}
		for _, n := range l.Nodes {
			from, ok := shown[n.ID]
			if !ok {
				continue
			}
			for _, p := range n.Ports {
				for _, s := range p.Succ {
					if to, ok := shown[s]; ok {
						e := c.Edge(from, to)
						e.Attr("label", p.Name)
						e.Attr("fontsize", "9")
					}
				}
			}
		}
	}
	return d.String()
}
