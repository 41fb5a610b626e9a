package prg

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
)

// Dragonet's own PRGs (BarrelfishOS/dragonet, Dragonet/Graphs/*/prg*.unicorn)
// follow conventions that its Haskell code applies, not its files. dragonc
// reads such a file as it is and gives it the same meaning:
//
//   - Receive queues are the nodes whose label starts with "RxQueue"
//     (lib/Dragonet/Conventions.hs rxQPref; ProtocolGraph/Utils.hs
//     isRxQueueNode and nodeRxQueueId read the number after the prefix).
//     The "source" attribute marks where packets enter, not a queue.
//   - "software" is a drawing hint (lib/Dragonet/DotGenerator.hs is its
//     only reader). A node that reports its outcome in the receive
//     descriptor is a dead end: no port leads anywhere.
//   - A C-node's configuration function is chosen by its label; the
//     `function` clause is ignored (Graphs/E10k.hs and Graphs/SF.hs,
//     addCfgFun).
//   - A filter entry's action is the OR gate RxQ<n>Valid (or Q<n>Valid) in
//     front of queue n (Graphs/E10k.hs isRxQValidN, filterQueueNid).
//   - configRxQueues creates the queues: RxQueue<n> behind the OR gate
//     RxQ<n>Valid, the C-node's "default" inputs feeding queue 0 only, and
//     the nodes after the C-node copied for every other queue with the
//     suffix __RxQ<n> (Graphs/E10k.hs configRxQueues, duplicateDFS).
//   - A port without a predicate means pred(NODE,PORT)
//     (lib/Dragonet/Predicate.hs portPred_). Dragonet's hardware labels get
//     their meaning from dragonetLabels; other labels stay opaque atoms.
//
// A model follows these conventions when no node is a queue by dragonc's
// own rule (attr "source" and a name ending in Queue<n>).

// dragonetQueue is Dragonet's receive queue label: the prefix and the
// queue number (a bare RxQueue, as in the Tap model, is queue 0).
var dragonetQueue = regexp.MustCompile(`^RxQueue(\d*)$`)

// dragonetOrGate is the OR gate in front of a queue (Graphs/E10k.hs
// isRxQValidN).
var dragonetOrGate = regexp.MustCompile(`^(?:Rx)?Q(\d+)Valid$`)

// dragonetFunctions binds configuration functions by C-node label, as
// addCfgFun does in Graphs/E10k.hs and Graphs/SF.hs.
var dragonetFunctions = map[string]string{
	"RxC5TupleFilter": "config5tuple",
	"RxCFDirFilter":   "configFDir",
	"RxQueues":        "configRxQueues",
	"TxQueues":        "configTxQueues",
}

// dragonetQueueCount is how many queues configRxQueues creates when the
// model declares no rx_queues resource: Dragonet's E10k and Solarflare
// models declare eleven (Queue0 ... Queue10 in prgE10kImpl.unicorn and
// prgSFImpl.unicorn).
const dragonetQueueCount = 11

// maxQueueNodes bounds the nodes configRxQueues may create: the queues
// and the copies of what follows them (a numbered range of a file names at
// most as many, dsl's maxFileRange).
const maxQueueNodes = 1 << 16

// dragonetLabels gives the predicate-less ports of Dragonet's hardware
// nodes their meaning, by label and port. Dragonet embeds by label: a PRG
// node that carries the label of an LPG node does that node's work
// (lib/Dragonet/Embedding.hs), so a label dragonc's LPG also uses gets the
// LPG's predicate (lpg/derive.go; TestDragonetLabelsAgreeWithLPG checks
// it). The others are hardware-only nodes of prgE10kImpl.unicorn and
// prgSFImpl.unicorn. A port left out is the node's default.
var dragonetLabels = map[string]map[string]string{
	// c_impl/impl_ethernet.c, do_pg__RxL2EtherClassified: always P_true.
	"RxL2EtherClassified": {"true": "true"},
	// The MAC drops runts and frames with a bad CRC (the LPG's checks).
	"RxL2EtherValidLength": {"true": "eth.len_ok"},
	"RxL2EtherValidCRC":    {"true": "frame.crc_ok"},
	// The parser's split of IPv4 from everything else (port other).
	"RxL2EtherClassifyL3_": {"ipv4": "eth.type == ipv4"},
	// Descriptor flags: the packet type ("IPv4", the model's constraint)
	// and the IPv4 header checksum verdict.
	"RxL3IPv4Classified":    {"true": "eth.type == ipv4"},
	"RxL3IPv4ValidChecksum": {"true": "ip.csum_ok"},
	// Frames no filter took reach queue 0 (both ports feed Q0Valid; only
	// true makes the OR gate fire).
	"RxToDefaultQueue": {"true": "true"},
}

// dragonet rewrites a graph that follows Dragonet's conventions into the
// meaning dragonc gives its own models. It reports whether it did.
func dragonet(g *graph.Graph, file *diag.File, diags *diag.List) (*graph.Graph, bool) {
	for _, n := range g.Nodes {
		if dragoncQueue(n) {
			return g, false
		}
	}
	g = g.Clone() // the caller's graph keeps the file's own meaning
	at := func(src graph.Source) diag.Range { return diag.Range{File: file, Start: src.Offset, End: src.Offset} }
	for _, n := range g.Nodes {
		if n.Kind == graph.Config && dragonetFunctions[n.Name] != "" {
			n.ConfFunc = dragonetFunctions[n.Name]
		}
	}
	if n, ok := g.Lookup("RxQueues"); ok && n.Kind == graph.Config {
		count := dragonetQueueCount
		for _, r := range g.Resources {
			for _, p := range r.Props {
				if r.Kind == "resources" && p.Key == "rx_queues" && p.Value.Kind == graph.NumValue && p.Value.Num >= 1 && p.Value.Num <= 4096 {
					count = int(p.Value.Num)
				}
			}
		}
		reach := g.Reachable([]int{n.ID}) // the C-node and the nodes after it
		after := 0
		for _, r := range reach {
			if r {
				after++
			}
		}
		if nodes := count * (after + 1); nodes > maxQueueNodes {
			diags.Errorf(at(n.Src), diag.CodeTooManyQueues, "configRxQueues would make %d queues of %d nodes each (%d in all); dragonc builds at most %d", count, after+1, nodes, maxQueueNodes).Detail =
				"give the model fewer queues (resources { rx_queues N }) or fewer nodes after RxQueues"
			return g, true
		}
		g = expandQueues(g, n.ID, count, reach)
	}
	for _, n := range g.Nodes {
		if n.Kind != graph.FNode && n.Kind != graph.Boolean || dragonetQueue.MatchString(n.Name) || len(n.Ports) < 2 {
			continue
		}
		meaning := dragonetLabels[n.Name]
		for _, p := range n.Ports {
			if p.Pred != nil {
				continue
			}
			if s, ok := meaning[p.Name]; ok {
				p.Pred = pred.MustParse(s)
				continue
			}
			if meaning != nil {
				continue // the node's default port
			}
			p.Pred = pred.Atom{Name: n.Name, Value: p.Name}
			diags.Warnf(at(n.Src), diag.CodeUnknownLabel, "node %s: port %s has no predicate and dragonc knows no meaning for the Dragonet label %s; it stays the opaque atom pred(%s,%s), which no frame satisfies", n.Name, p.Name, n.Name, n.Name, p.Name)
		}
	}
	return g, true
}

// dragoncQueue is dragonc's own queue rule: a receive node marked
// "source" whose name ends in its number.
func dragoncQueue(n *graph.Node) bool {
	return n.HasAttr("source") && !graph.Transmit(n.Name) && queueName.MatchString(n.Name)
}

// expandQueues applies configRxQueues to the C-node id: count queues
// RxQueue<n>, each behind an OR gate RxQ<n>Valid; the C-node's inputs
// through a port named default* feed queue 0 only, the others every
// queue; queue 0 continues to the C-node's successors and every other
// queue to a copy of the nodes after it (Graphs/E10k.hs configRxQueues
// and duplicateDFS). The C-node itself goes.
func expandQueues(g *graph.Graph, id, count int, reach []bool) *graph.Graph {
	c := g.Nodes[id]
	// The nodes after the C-node, in declaration order.
	after := slices.Clone(reach)
	after[id] = false
	out := graph.New(g.Name)
	out.Helpers, out.Resources = g.Helpers, g.Resources
	newID := make([]int, len(g.Nodes))
	for _, n := range g.Nodes {
		newID[n.ID] = -1
		if n.ID == id {
			continue
		}
		cp := cloneNode(n, "")
		newID[n.ID] = out.Add(cp).ID
	}
	remap := func(succ []int, ids []int) []int {
		var out []int
		for _, s := range succ {
			if ids[s] >= 0 {
				out = append(out, ids[s])
			}
		}
		return out
	}
	ors := make([]int, count)
	for q := 0; q < count; q++ {
		ids := newID
		if q > 0 {
			// Copies of the nodes after the C-node for this queue.
			ids = slices.Clone(newID)
			var copies []*graph.Node
			for _, n := range g.Nodes {
				if after[n.ID] {
					cp := out.Add(cloneNode(n, "__RxQ"+strconv.Itoa(q)))
					ids[n.ID] = cp.ID
					copies = append(copies, cp)
				}
			}
			for _, cp := range copies {
				for _, p := range cp.Ports {
					p.Succ = remap(p.Succ, ids)
				}
			}
		}
		qn := &graph.Node{Name: fmt.Sprintf("RxQueue%d", q), Cluster: slices.Clone(c.Cluster), Kind: graph.FNode,
			Attrs: slices.Clone(c.Attrs), Impl: c.Impl, Src: c.Src}
		for _, p := range c.Ports {
			qn.Ports = append(qn.Ports, &graph.Port{Name: p.Name, Succ: remap(p.Succ, ids)})
		}
		qn = out.Add(qn)
		or := out.Add(&graph.Node{Name: fmt.Sprintf("RxQ%dValid", q), Cluster: slices.Clone(c.Cluster), Kind: graph.Or, Src: c.Src,
			Ports: []*graph.Port{{Name: "true", Succ: []int{qn.ID}}, {Name: "false"}}})
		ors[q] = or.ID
	}
	// The remaining nodes' edges: into the C-node becomes into the gates.
	for _, n := range g.Nodes {
		if n.ID == id {
			continue
		}
		cp := out.Nodes[newID[n.ID]]
		for _, sp := range n.Spawns {
			if newID[sp.Target] >= 0 {
				s := *sp
				s.Target = newID[sp.Target]
				cp.Spawns = append(cp.Spawns, &s)
			}
		}
		for i, p := range n.Ports {
			var succ []int
			for _, s := range p.Succ {
				switch {
				case s != id:
					succ = append(succ, newID[s])
				case strings.HasPrefix(p.Name, "default"):
					succ = append(succ, ors[0])
				default:
					succ = append(succ, ors...)
				}
			}
			cp.Ports[i].Succ = succ
		}
	}
	return out
}

// cloneNode copies a node, with a suffix on its name.
func cloneNode(n *graph.Node, suffix string) *graph.Node {
	cp := *n
	cp.Name += suffix
	cp.Cluster = slices.Clone(n.Cluster)
	cp.Attrs = slices.Clone(n.Attrs)
	cp.Constraints = slices.Clone(n.Constraints)
	cp.Costs = slices.Clone(n.Costs)
	cp.Spawns = nil
	cp.Ports = make([]*graph.Port, len(n.Ports))
	for i, p := range n.Ports {
		pc := *p
		pc.Succ = slices.Clone(p.Succ)
		cp.Ports[i] = &pc
	}
	return &cp
}
