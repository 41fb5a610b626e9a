// Package dot draws graphs as Graphviz DOT with emicklei/dot: clusters as
// subgraphs, gates and configuration nodes drawn apart from F-nodes, port
// names on edges, spawn edges dashed. Output is deterministic.
package dot

import (
	"fmt"
	"html"
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
	ids := make([]int, len(g.Nodes))
	for i := range ids {
		ids[i] = i
	}
	f := fold(g, ids, nil, nil)
	for _, n := range g.Nodes {
		if f.rep[n.ID] != n.ID {
			continue
		}
		parent := sub(n.Cluster)
		dn := parent.Node(fmt.Sprintf("n%d", n.ID))
		label := Label(n)
		if l, ok := f.label[n.ID]; ok {
			label = strings.Replace(label, strings.TrimPrefix(n.Name, strings.Join(n.Cluster, "")), l, 1)
		}
		dn.Attr("label", label)
		dn.Attr("fontname", "Helvetica")
		style(dn, n)
		nodes[n.ID] = dn
	}
	for _, e := range foldEdges(g, ids, f, func(int) bool { return true }) {
		de := d.Edge(nodes[e.from], nodes[e.to])
		de.Attr("label", e.label())
		de.Attr("fontsize", "9")
		if e.labels[0] == "false" {
			de.Attr("color", "gray40")
		}
	}
	for _, n := range g.Nodes {
		for _, s := range n.Spawns {
			if f.rep[n.ID] != n.ID {
				continue
			}
			e := d.Edge(nodes[n.ID], nodes[f.rep[s.Target]])
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

// leftLines is a label of left-aligned lines (DOT's \l line ends), given
// as a literal so that the line ends are not escaped.
func leftLines(lines []string) gv.Literal {
	var b strings.Builder
	b.WriteByte('"')
	for _, l := range lines {
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(l))
		b.WriteString(`\l`)
	}
	b.WriteByte('"')
	return gv.Literal(b.String())
}

// quoteID quotes a graph ID for DOT: backslashes and quotes escaped,
// line breaks and other control characters shown as spaces.
func quoteID(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
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
	ID, Core int
	Status   func(node string) Status
}

// EngineView is an engine with the tasks placed on it.
type EngineView struct {
	Name  string
	Load  string // e.g. "47%"
	Tasks []string
}

// Picture is everything an embedding picture shows.
type Picture struct {
	Title  string
	HW     *graph.Graph // the configured PRG
	LPG    *graph.Graph
	Queues []QueueView // in ascending queue order
	// Endpoint tells the LPG's delivery nodes: queues drawn alike but for
	// which endpoints they deliver are drawn as one (nil: none are).
	Endpoint func(lpgNode *graph.Node) bool
	Used     func(hwNode *graph.Node) bool
	IsQueue  func(hwNode *graph.Node) bool
	Engines  []EngineView
}

// Embedding draws the configured PRG as one cluster (runs of unused
// queues folded into one node), for every queue, in ascending order, the
// LPG nodes that matter there: software nodes plain, nodes the NIC does
// shaded (as in Fig. 3 of the Dragonet paper), nodes the path decides
// dashed; the engines with their tasks; and a legend. Edges are labelled
// with their ports. Queues that differ only in their endpoints are drawn
// as one (queueViews), and a chain of nodes is one box whatever their
// statuses (chainBox), so the picture grows with the branch points of
// the LPG, not with the queues or the hand-offs between NIC and software.
func Embedding(p Picture) string {
	d := gv.NewGraph(gv.Directed)
	d.ID(quoteID(p.Title))
	d.Attr("rankdir", "LR")
	d.Attr("label", p.Title)
	d.Attr("fontname", "Helvetica")
	d.Attr("compound", "true")
	d.Attr("nodesep", "0.12")
	d.Attr("ranksep", "0.18")
	d.Attr("fontsize", "12")
	legend(d)
	prg := d.Subgraph("PRG (configured)", gv.ClusterOption{})
	prg.Attr("style", "rounded")
	hw := p.HW
	ids := make([]int, len(hw.Nodes))
	for i := range ids {
		ids[i] = i
	}
	suffix := func(n *graph.Node) string {
		if p.IsQueue != nil && p.IsQueue(n) {
			return " (unused)"
		}
		return ""
	}
	f := fold(hw, ids, p.Used, suffix)
	hwNodes := make([]gv.Node, len(hw.Nodes))
	for _, n := range hw.Nodes {
		if f.rep[n.ID] != n.ID {
			continue
		}
		dn := prg.Node(fmt.Sprintf("h%d", n.ID))
		label := n.Name
		if l, ok := f.label[n.ID]; ok {
			label = strings.Join(n.Cluster, "") + l
		}
		dn.Attr("label", label)
		dn.Attr("fontname", "Helvetica")
		dn.Attr("fontsize", "10")
		style(dn, n)
		if _, folded := f.label[n.ID]; folded {
			dn.Attr("style", "dotted")
		}
		hwNodes[n.ID] = dn
	}
	for _, e := range foldEdges(hw, ids, f, func(int) bool { return true }) {
		de := prg.Edge(hwNodes[e.from], hwNodes[e.to])
		de.Attr("label", e.label())
		de.Attr("fontsize", "8")
	}
	views := queueViews(p)
	// An invisible anchor with ordered edges to the first node of every
	// queue keeps the queues in ascending order from the top (Graphviz
	// otherwise orders clusters to reduce crossings).
	anchor := d.Node("queues")
	anchor.Attr("style", "invis")
	anchor.Attr("ordering", "out")
	anchor.Attr("width", "0")
	for qi, v := range views {
		name := v.name()
		c := d.Subgraph(fmt.Sprintf("%03d %s", qi, name), gv.ClusterOption{})
		c.Attr("label", name)
		c.Attr("style", "rounded")
		l := p.LPG
		ids, more := trimFanout(l, v.ids, v.status, fanoutOf(len(views)))
		status := v.status
		if len(more) > 0 {
			status = make(map[int]Status, len(ids))
			for _, id := range ids {
				status[id] = v.status[id]
			}
		}
		f := fold(l, ids, nil, nil)
		edges := foldEdges(l, ids, f, func(id int) bool { _, ok := status[id]; return ok })
		// Chains of nodes with one way in and one way out become one box
		// listing them in order, in bands by status: a queue is as wide as
		// its branch points, however often the NIC takes over on the way.
		head, members := chains(ids, f, edges)
		on := v.deliveredOn(ids, f)
		label := func(id int) string {
			text := l.Nodes[id].Name
			if fl, ok := f.label[id]; ok {
				text = fl
			}
			if qs, ok := on[id]; ok {
				text += " (" + qs + ")"
			}
			return text
		}
		shown := map[int]gv.Node{}
		first := true
		for _, id := range ids {
			if f.rep[id] != id || head[id] != id {
				continue
			}
			dn := c.Node(fmt.Sprintf("q%d_%d", qi, id))
			chainBox(dn, members[id], label, status)
			shown[id] = dn
			if first {
				d.Edge(anchor, dn).Attr("style", "invis")
				first = false
			}
		}
		for _, e := range edges {
			from, to := head[e.from], head[e.to]
			if from == to {
				continue
			}
			de := c.Edge(shown[from], shown[to])
			ports(de, members[from], members[to])
			if l := e.label(); l != "true" && l != "out" {
				de.Attr("label", l) // the obvious ports stay unlabelled
				de.Attr("fontsize", "8")
			}
		}
		for _, m := range more {
			dn := c.Node(fmt.Sprintf("q%d_%d_more", qi, m.from))
			dn.Attr("label", fmt.Sprintf("%d more ports: %d nodes not drawn", m.ports, m.nodes))
			dn.Attr("fontname", "Helvetica")
			dn.Attr("fontsize", "9")
			dn.Attr("shape", "note")
			dn.Attr("style", "dotted")
			de := c.Edge(shown[head[m.from]], dn)
			de.Attr("style", "dotted")
			ports(de, members[head[m.from]], nil)
		}
	}
	if len(p.Engines) > 0 {
		c := d.Subgraph("engines", gv.ClusterOption{})
		c.Attr("style", "rounded")
		for i, en := range p.Engines {
			dn := c.Node(fmt.Sprintf("e%d", i))
			dn.Attr("label", fmt.Sprintf("%s (%s)\n%s", en.Name, en.Load, strings.Join(en.Tasks, "\n")))
			dn.Attr("fontname", "Helvetica")
			dn.Attr("shape", "box")
			engineStyle(dn)
		}
	}
	return d.String()
}

// maxFanout is how many successors of one node a queue's picture draws: a
// demultiplexer with 100,000 endpoints would make a picture no one can
// open, let alone read.
const maxFanout = 24

// fanoutOf shares the fan-out a picture draws among its queue views: one
// or two draw maxFanout successors of a node each, more share maxFanout
// (at least 2 each), so that eight queues with a demultiplexer each stay
// about as tall as one.
func fanoutOf(views int) int {
	if views <= 2 {
		return maxFanout
	}
	return max(2, maxFanout/views)
}

// hiddenFanout is what trimFanout left out below one node.
type hiddenFanout struct {
	from  int // the node whose successors were cut
	ports int // how many of its successors were not drawn
	nodes int // how many nodes that left out in all
}

// trimFanout draws, of a node's successors, only the first limit; the
// others, and every node reached only through them, are left out and
// counted.
func trimFanout(g *graph.Graph, ids []int, status map[int]Status, limit int) ([]int, []hiddenFanout) {
	drawn := func(id int) bool { _, ok := status[id]; return ok }
	succs := map[int][]int{}
	preds := map[int]int{} // drawn edges into a node, counted once per predecessor
	cut := map[[2]int]bool{}
	var more []hiddenFanout
	for _, id := range ids {
		seen := map[int]bool{}
		for _, p := range g.Nodes[id].Ports {
			for _, s := range p.Succ {
				if drawn(s) && !seen[s] && s != id {
					seen[s] = true
					succs[id] = append(succs[id], s)
					preds[s]++
				}
			}
		}
		if ss := succs[id]; len(ss) > limit {
			for _, s := range ss[limit:] {
				cut[[2]int{id, s}] = true
			}
			more = append(more, hiddenFanout{from: id, ports: len(ss) - limit})
		}
	}
	if len(more) == 0 {
		return ids, nil
	}
	// A node is hidden when every drawn edge into it is cut or comes from
	// a hidden node.
	hidden := map[int]bool{}
	gone := map[int]int{} // edges into a node that are cut or from hidden nodes
	by := map[int]int{}   // hidden node -> the fan-out it is counted under
	var work []int
	for _, m := range more {
		for _, s := range succs[m.from][limit:] {
			gone[s]++
			if gone[s] == preds[s] && !hidden[s] {
				hidden[s], by[s] = true, m.from
				work = append(work, s)
			}
		}
	}
	for len(work) > 0 {
		id := work[len(work)-1]
		work = work[:len(work)-1]
		for _, s := range succs[id] {
			if hidden[s] || cut[[2]int{id, s}] {
				continue
			}
			gone[s]++
			if gone[s] == preds[s] {
				hidden[s], by[s] = true, by[id]
				work = append(work, s)
			}
		}
	}
	counted := map[int]int{}
	for id := range hidden {
		counted[by[id]]++
	}
	for i := range more {
		more[i].nodes = counted[more[i].from]
	}
	kept := make([]int, 0, len(ids)-len(hidden))
	for _, id := range ids {
		if !hidden[id] {
			kept = append(kept, id)
		}
	}
	return kept, more
}

// chainLink is one node of a chain and the port it leaves by to the next
// node of the chain ("" for the last node or an obvious port).
type chainLink struct {
	id   int
	port string
}

// chains maps each drawn node to the first node of the chain it belongs
// to, and each first node to its chain in order: a node joins its
// predecessor's chain when it is that node's only successor and that node
// is its only predecessor, whatever either's status. Folded runs stay
// boxes of their own.
func chains(ids []int, f folding, edges []edge) (map[int]int, map[int][]chainLink) {
	outs, ins := map[int][]edge{}, map[int][]int{}
	for _, e := range edges {
		outs[e.from] = append(outs[e.from], e)
		ins[e.to] = append(ins[e.to], e.from)
	}
	joins := func(id int) bool {
		in := ins[id]
		return len(in) == 1 && in[0] != id && len(outs[in[0]]) == 1 && f.label[id] == "" && f.label[in[0]] == ""
	}
	head := map[int]int{}
	var find func(id int) int
	find = func(id int) int {
		if h, ok := head[id]; ok {
			return h
		}
		head[id] = id
		if joins(id) {
			head[id] = find(ins[id][0])
		}
		return head[id]
	}
	members := map[int][]chainLink{}
	for _, id := range ids {
		if f.rep[id] != id || find(id) != id {
			continue
		}
		for cur := id; ; {
			link := chainLink{id: cur}
			next := -1
			if o := outs[cur]; len(o) == 1 && o[0].to != id && joins(o[0].to) {
				next = o[0].to
				if l := o[0].label(); l != "true" && l != "out" {
					link.port = l
				}
			}
			members[id] = append(members[id], link)
			if next < 0 {
				break
			}
			cur = next
		}
	}
	return head, members
}

// chainBox labels and styles the box of one chain. The box is drawn in
// the chain's status when it has one (statusStyle); a chain of several
// statuses is a plain box with a band for each run of a status: hardware
// shaded, removed dashed, as in the legend. A port other than the obvious
// one is named after the node that leaves by it ("RxL2EtherClassifyL3 →
// ipv4"). A chain of more than one node is a table whose first line is
// the port "in" and whose last line is the port "out", so that edges
// join the right nodes.
func chainBox(dn gv.Node, chain []chainLink, label func(int) string, status map[int]Status) {
	dn.Attr("fontname", "Helvetica")
	dn.Attr("fontsize", "9")
	dn.Attr("margin", "0.05,0.03")
	dn.Attr("shape", "box")
	line := func(c chainLink) string {
		if c.port != "" {
			return label(c.id) + " → " + c.port
		}
		return label(c.id)
	}
	mixed := false
	for _, c := range chain {
		mixed = mixed || status[c.id] != status[chain[0].id]
	}
	if !mixed {
		statusStyle(dn, status[chain[0].id])
	}
	if len(chain) == 1 {
		dn.Attr("label", leftLines([]string{line(chain[0])}))
		return
	}
	var b strings.Builder
	b.WriteString(`<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="1">`)
	for i := 0; i < len(chain); {
		st := status[chain[i].id]
		b.WriteString(`<TR><TD`)
		if mixed {
			switch st {
			case Hardware:
				b.WriteString(` BGCOLOR="gray80"`)
			case Removed:
				b.WriteString(` BORDER="1" STYLE="dashed"`)
			}
		}
		b.WriteString(`><TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">`)
		for ; i < len(chain) && (!mixed || status[chain[i].id] == st); i++ {
			b.WriteString(`<TR><TD ALIGN="LEFT"`)
			switch i {
			case 0:
				b.WriteString(` PORT="in"`)
			case len(chain) - 1:
				b.WriteString(` PORT="out"`)
			}
			b.WriteString(">" + html.EscapeString(line(chain[i])) + "</TD></TR>")
		}
		b.WriteString(`</TABLE></TD></TR>`)
	}
	b.WriteString(`</TABLE>`)
	dn.Attr("label", gv.HTML(b.String()))
}

// ports makes an edge leave the last line of a chain of several nodes and
// enter the first (see chainBox).
func ports(e gv.Edge, from, to []chainLink) {
	if len(from) > 1 {
		e.Attr("tailport", "out:e")
	}
	if len(to) > 1 {
		e.Attr("headport", "in:w")
	}
}

func statusStyle(dn gv.Node, st Status) {
	switch st {
	case Hardware:
		dn.Attr("style", "filled")
		dn.Attr("fillcolor", "gray80")
	case Removed:
		dn.Attr("style", "dashed")
	}
}

func engineStyle(dn gv.Node) {
	dn.Attr("style", "filled")
	dn.Attr("fillcolor", "lightblue")
}

// legend explains the node styles of an embedding picture.
func legend(d *gv.Graph) {
	c := d.Subgraph("legend", gv.ClusterOption{})
	c.Attr("label", "legend")
	c.Attr("style", "rounded")
	var prev gv.Node
	for i, it := range []struct {
		label string
		st    Status
	}{{"software", Software}, {"hardware", Hardware}, {"removed (decided by the path)", Removed}, {"engine", Omit}} {
		dn := c.Node(fmt.Sprintf("legend%d", i))
		dn.Attr("label", it.label)
		dn.Attr("fontname", "Helvetica")
		dn.Attr("shape", "box")
		if it.label == "engine" {
			engineStyle(dn)
		} else {
			statusStyle(dn, it.st)
		}
		if i > 0 {
			c.Edge(prev, dn).Attr("style", "invis")
		}
		prev = dn
	}
}
