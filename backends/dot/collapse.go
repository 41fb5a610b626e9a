package dot

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/internal/graph"
)

// minRun is the shortest run of numbered nodes drawn as one node.
const minRun = 3

// folding maps each drawn node to the node that stands for it: runs of
// numbered sibling nodes drawn alike (Queue4, Queue5, ... Queue127) are
// folded into their first member, labelled with the range.
type folding struct {
	rep   map[int]int    // node ID -> the ID of the node drawn for it
	label map[int]string // representative ID -> its label
}

// fold works out the folding of the nodes in ids. keep singles out nodes
// that must be drawn on their own (a queue the plan uses); suffix, when
// not nil, gives what is added to the label of a folded run (" (unused)").
func fold(g *graph.Graph, ids []int, keep func(*graph.Node) bool, suffix func(*graph.Node) string) folding {
	f := folding{rep: map[int]int{}, label: map[int]string{}}
	type member struct {
		num int
		id  int
	}
	groups := map[string][]member{}
	var keys []string
	for _, id := range ids {
		n := g.Nodes[id]
		f.rep[id] = id
		prefix, num, ok := splitNumber(n.Name)
		if !ok || keep != nil && keep(n) {
			continue
		}
		key := strings.Join(n.Cluster, "/") + "\x00" + prefix + "\x00" + signature(g, n)
		if _, seen := groups[key]; !seen {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], member{num, id})
	}
	for _, key := range keys {
		ms := groups[key]
		sort.Slice(ms, func(i, j int) bool { return ms[i].num < ms[j].num })
		for i := 0; i < len(ms); {
			j := i
			for j+1 < len(ms) && ms[j+1].num == ms[j].num+1 {
				j++
			}
			if j-i+1 >= minRun {
				first := ms[i].id
				for k := i; k <= j; k++ {
					f.rep[ms[k].id] = first
				}
				n := g.Nodes[first]
				local := strings.TrimPrefix(n.Name, strings.Join(n.Cluster, ""))
				sfx := ""
				if suffix != nil {
					sfx = suffix(n)
				}
				f.label[first] = fmt.Sprintf("%s..%d%s", local, ms[j].num, sfx)
			}
			i = j + 1
		}
	}
	return f
}

// splitNumber splits a trailing decimal number off a name.
func splitNumber(name string) (string, int, bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) || i == 0 || len(name)-i > 9 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i:])
	if err != nil {
		return "", 0, false
	}
	return name[:i], n, true
}

// signature describes how a node is drawn and where its edges go, with
// numbers stripped from successor names, so that Queue4 and Queue5 match.
func signature(g *graph.Graph, n *graph.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%v|%v|", n.Kind, n.HasAttr("source"), n.HasAttr("sink"))
	for _, p := range n.Ports {
		b.WriteString(p.Name + "[")
		for _, s := range p.Succ {
			pre, _, ok := splitNumber(g.Nodes[s].Name)
			if !ok {
				pre = g.Nodes[s].Name
			}
			b.WriteString(pre + " ")
		}
		b.WriteString("]")
	}
	return b.String()
}

// edge is one drawn edge; parallel edges between the same drawn nodes are
// merged and their labels summarised.
type edge struct {
	from, to int
	labels   []string
}

// foldEdges maps the port edges of the drawn nodes through a folding,
// merging edges that now join the same pair of nodes.
func foldEdges(g *graph.Graph, ids []int, f folding, drawn func(int) bool) []edge {
	index := map[[2]int]int{}
	var out []edge
	for _, id := range ids {
		n := g.Nodes[id]
		for _, p := range n.Ports {
			for _, s := range p.Succ {
				if !drawn(s) {
					continue
				}
				k := [2]int{f.rep[id], f.rep[s]}
				i, ok := index[k]
				if !ok {
					i = len(out)
					index[k] = i
					out = append(out, edge{from: k[0], to: k[1]})
				}
				if ls := out[i].labels; len(ls) == 0 || ls[len(ls)-1] != p.Name {
					out[i].labels = append(ls, p.Name)
				}
			}
		}
	}
	return out
}

// label summarises the port names of a merged edge.
func (e edge) label() string {
	switch len(e.labels) {
	case 1:
		return e.labels[0]
	case 2:
		return e.labels[0] + ", " + e.labels[1]
	}
	return fmt.Sprintf("%s .. %s (%d ports)", e.labels[0], e.labels[len(e.labels)-1], len(e.labels))
}
