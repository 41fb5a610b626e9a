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
