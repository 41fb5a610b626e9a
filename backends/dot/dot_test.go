package dot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/graph"
)

// fanGraph is a demultiplexer with n ports, each to an endpoint node with
// one successor of its own; the first and the last endpoint also share a
// node.
func fanGraph(n int) *graph.Graph {
	g := graph.New("fan")
	demux := g.Add(&graph.Node{Name: "Demux"})
	shared := g.Add(&graph.Node{Name: "Shared"})
	for i := 0; i < n; i++ {
		ep := g.Add(&graph.Node{Name: fmt.Sprintf("Ep%d", i)})
		leaf := g.Add(&graph.Node{Name: fmt.Sprintf("Leaf%d", i)})
		ep.Ports = []*graph.Port{{Name: "out", Succ: []int{leaf.ID}}}
		if i == 0 || i == n-1 {
			ep.Ports[0].Succ = append(ep.Ports[0].Succ, shared.ID)
		}
		demux.Ports = append(demux.Ports, &graph.Port{Name: fmt.Sprintf("p%d", i), Succ: []int{ep.ID}})
	}
	return g
}

func TestTrimFanout(t *testing.T) {
	g := fanGraph(maxFanout + 6)
	ids := make([]int, len(g.Nodes))
	status := map[int]Status{}
	for i := range ids {
		ids[i] = i
		status[i] = Software
	}
	kept, more := trimFanout(g, ids, status, maxFanout)
	if len(more) != 1 || more[0].from != 0 || more[0].ports != 6 || more[0].nodes != 12 {
		t.Fatalf("hidden %+v, want 6 ports and 12 nodes (6 endpoints, 6 leaves) under Demux", more)
	}
	if len(kept) != len(ids)-12 {
		t.Fatalf("kept %d nodes, want %d", len(kept), len(ids)-12)
	}
	names := map[string]bool{}
	for _, id := range kept {
		names[g.Nodes[id].Name] = true
	}
	for _, want := range []string{"Demux", "Shared", "Ep0", "Leaf0", fmt.Sprintf("Ep%d", maxFanout-1)} {
		if !names[want] {
			t.Errorf("%s is not drawn", want)
		}
	}
	if names[fmt.Sprintf("Ep%d", maxFanout)] || names[fmt.Sprintf("Leaf%d", maxFanout+5)] {
		t.Error("a node past the fan-out limit is drawn")
	}
	// At the limit nothing is cut.
	g = fanGraph(maxFanout)
	ids = ids[:len(g.Nodes)]
	if kept, more := trimFanout(g, ids, status, maxFanout); len(more) != 0 || len(kept) != len(ids) {
		t.Errorf("a fan-out of %d is cut: %+v", maxFanout, more)
	}
}

// TestEmbeddingSummarises: the picture of a wide demultiplexer draws
// maxFanout successors and one node that counts the rest.
func TestEmbeddingSummarises(t *testing.T) {
	g := fanGraph(1000)
	hw := graph.New("hw")
	hw.Add(&graph.Node{Name: "Queue0", Attrs: []string{"source"}})
	text := Embedding(Picture{Title: "t", HW: hw, LPG: g, Queues: []QueueView{{ID: 0, Status: func(string) Status { return Software }}}})
	if !strings.Contains(text, `label="976 more ports: 1952 nodes not drawn"`) {
		t.Errorf("no summary node for the 976 ports past the first %d", maxFanout)
	}
	if n := strings.Count(text, "Ep"); n > 2*maxFanout {
		t.Errorf("%d endpoint labels drawn", n)
	}
	golden.Check(t, "testdata/fan.dot.golden", []byte(text))
}

// TestEmbeddingQueues: queues drawn alike but for their endpoints share a
// view that says which queue delivers which endpoint; a queue whose
// endpoint is drawn differently keeps its own; a chain of checks is one
// box with a band per status, edges leaving from its last line.
func TestEmbeddingQueues(t *testing.T) {
	g := graph.New("lpg")
	rx := g.Add(&graph.Node{Name: "RxQueue"})
	a := g.Add(&graph.Node{Name: "CheckA"})
	b := g.Add(&graph.Node{Name: "CheckB"})
	demux := g.Add(&graph.Node{Name: "Demux"})
	rx.Ports = []*graph.Port{{Name: "out", Succ: []int{a.ID}}}
	a.Ports = []*graph.Port{{Name: "true", Succ: []int{b.ID}}}
	b.Ports = []*graph.Port{{Name: "ipv4", Succ: []int{demux.ID}}}
	eps := map[int]bool{}
	for _, name := range []string{"EpX", "EpY", "EpZ"} {
		ep := g.Add(&graph.Node{Name: name})
		eps[ep.ID] = true
		demux.Ports = append(demux.Ports, &graph.Port{Name: strings.ToLower(name[2:]), Succ: []int{ep.ID}})
	}
	queue := func(id int, hwA bool, ep string, epStatus Status) QueueView {
		return QueueView{ID: id, Core: id, Status: func(node string) Status {
			switch {
			case node == "CheckA" && hwA:
				return Hardware
			case strings.HasPrefix(node, "Ep") && node != ep:
				return Omit
			case node == ep:
				return epStatus
			}
			return Software
		}}
	}
	hw := graph.New("hw")
	hw.Add(&graph.Node{Name: "Queue0", Attrs: []string{"source"}})
	text := Embedding(Picture{
		Title: "t", HW: hw, LPG: g,
		Queues: []QueueView{
			queue(1, true, "EpX", Software), queue(2, true, "EpY", Software),
			queue(3, false, "EpZ", Software), queue(4, true, "EpX", Removed),
		},
		Endpoint: func(n *graph.Node) bool { return eps[n.ID] },
	})
	for _, want := range []string{
		`label="queues 1, 2 (cores 1, 2)"`, `label="queue 3 (core 3)"`, `label="queue 4 (core 4)"`,
		`EpX (queue 1)\l`, `EpY (queue 2)\l`, `STYLE="dashed"><TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0"><TR><TD ALIGN="LEFT" PORT="out">EpX<`,
		`<TD BGCOLOR="gray80">`, `CheckB → ipv4`, `PORT="out"`, `tailport="out:e"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the picture lacks %s", want)
		}
	}
	if strings.Contains(text, "queues 1, 2, 4") || strings.Contains(text, "EpZ (queue") {
		t.Error("a queue whose endpoint is drawn differently shares a view, or a view of one queue names it on its endpoint")
	}
	golden.Check(t, "testdata/queues.dot.golden", []byte(text))
}

func TestRuns(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{[]int{5, 1, 2, 3}, "1..3, 5"}, {[]int{1, 2}, "1, 2"}, {[]int{7, 7, 3}, "3, 7"}, {nil, ""}} {
		if got := runs(c.in); got != c.want {
			t.Errorf("runs(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
