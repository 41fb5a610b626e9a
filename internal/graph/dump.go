package graph

import (
	"fmt"
	"strings"
)

// Dump renders a graph as stable text, one node a paragraph, for golden
// tests and debugging. Source positions are left out.
func Dump(g *Graph) string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s: %d nodes, %d edges, %d spawn edges\n", g.Name, len(g.Nodes), len(g.Edges()), g.SpawnEdges())
	if g.Helpers != "" {
		fmt.Fprintf(&b, "helpers: %d bytes\n", len(g.Helpers))
	}
	for _, r := range g.Resources {
		fmt.Fprintf(&b, "%s %s%s\n", r.Kind, r.Name, dumpProps(r.Props))
	}
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "%d %s %s", n.ID, n.Kind, n.Name)
		if len(n.Cluster) > 0 {
			fmt.Fprintf(&b, " (cluster %s)", strings.Join(n.Cluster, "/"))
		}
		b.WriteByte('\n')
		if n.Impl != "" {
			fmt.Fprintf(&b, "    implementation %s\n", n.Impl)
		}
		for _, a := range n.Attrs {
			fmt.Fprintf(&b, "    attr %q\n", a)
		}
		for _, s := range n.Spawns {
			fmt.Fprintf(&b, "    spawn %s -> %s", s.Name, g.Nodes[s.Target].Name)
			for _, p := range s.Preds {
				fmt.Fprintf(&b, " [%s]", p)
			}
			b.WriteByte('\n')
		}
		for _, p := range n.Ports {
			names := make([]string, len(p.Succ))
			for i, s := range p.Succ {
				names[i] = g.Nodes[s].Name
			}
			fmt.Fprintf(&b, "    port %s -> [%s]", p.Name, strings.Join(names, " "))
			if p.Pred != nil {
				fmt.Fprintf(&b, " when %s", p.Pred)
			}
			if p.Semantics != "" {
				fmt.Fprintf(&b, " semantics %q", p.Semantics)
			}
			b.WriteByte('\n')
		}
		for _, c := range n.Constraints {
			fmt.Fprintf(&b, "    constraint %s %q\n", c.Port, c.Text)
		}
		if n.ConfType != nil {
			fmt.Fprintf(&b, "    type %s\n", n.ConfType)
		}
		if n.ConfFunc != "" {
			fmt.Fprintf(&b, "    function %s\n", n.ConfFunc)
		}
		if n.ConfSpec != nil {
			fmt.Fprintf(&b, "    %s%s\n", n.ConfSpec.Kind, dumpProps(n.ConfSpec.Props))
		}
		for _, c := range n.Costs {
			fmt.Fprintf(&b, "    cost %s %g\n", c.Unit, c.Value)
		}
	}
	return b.String()
}

func dumpProps(ps []Prop) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, " %s=%s", p.Key, p.Value)
	}
	return b.String()
}

// String renders a property value.
func (v Value) String() string {
	switch v.Kind {
	case StrValue:
		return fmt.Sprintf("%q", v.Str)
	case NameValue:
		return v.Str
	case ListValue:
		parts := make([]string, len(v.List))
		for i, e := range v.List {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	s := fmt.Sprintf("%g", v.Num)
	if v.Range {
		s += fmt.Sprintf("..%g", v.Hi)
	}
	return s + v.Unit
}
