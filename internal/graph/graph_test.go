package graph

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/graph/topo"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

func chain(edges map[string][]string, order ...string) *Graph {
	g := New("t")
	for _, n := range order {
		g.Add(&Node{Name: n})
	}
	for _, n := range order {
		node, _ := g.Lookup(n)
		p := &Port{Name: "out"}
		for _, s := range edges[n] {
			succ, _ := g.Lookup(s)
			p.Succ = append(p.Succ, succ.ID)
		}
		node.Ports = append(node.Ports, p)
	}
	return g
}

func TestCycles(t *testing.T) {
	g := chain(map[string][]string{"A": {"B"}, "B": {"C", "A"}, "C": {"C"}, "D": {"A"}}, "A", "B", "C", "D")
	got := g.Cycles()
	want := [][]int{{0, 1}, {2}}
	if len(got) != len(want) || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Errorf("Cycles() = %v, want %v", got, want)
	}
	if _, err := g.TopoOrder(); err == nil {
		t.Error("TopoOrder on a cyclic graph should fail")
	}
}

func TestTopoOrderStable(t *testing.T) {
	g := chain(map[string][]string{"A": {"C"}, "B": {"C"}, "C": {"D"}}, "D", "C", "B", "A")
	got, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	// B (2) and A (3) are both roots; the lower ID comes first.
	if want := []int{2, 3, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("TopoOrder() = %v, want %v", got, want)
	}
}

func TestEdgesAndReach(t *testing.T) {
	g := chain(map[string][]string{"A": {"B", "B", "C"}}, "A", "B", "C", "D")
	if n := len(g.Edges()); n != 2 {
		t.Errorf("a successor listed twice is one edge: got %d edges", n)
	}
	d, _ := g.Lookup("D")
	a, _ := g.Lookup("A")
	a.Spawns = append(a.Spawns, &Spawn{Name: "s", Target: d.ID})
	seen := g.Reachable([]int{0})
	if !seen[3] {
		t.Error("spawn edges count for reachability")
	}
	if len(g.Cycles()) != 0 {
		t.Error("no cycle expected")
	}
	if g.SpawnEdges() != 1 {
		t.Error("one spawn edge expected")
	}
}

func TestDuplicateLookup(t *testing.T) {
	g := New("t")
	g.Add(&Node{Name: "X", Attrs: []string{"first"}})
	g.Add(&Node{Name: "X", Attrs: []string{"second"}})
	n, _ := g.Lookup("X")
	if n.ID != 0 || len(g.Nodes) != 2 {
		t.Errorf("Lookup must return the first declaration and keep both")
	}
}

func TestConfTypeString(t *testing.T) {
	ty := &ConfType{Kind: ListType, LenMin: -1, LenMax: 128, Elem: &ConfType{Kind: TupleType, Fields: []TupleField{
		{"dport", &ConfType{Kind: IntType, Min: 0, Max: 65535}},
		{"proto", &ConfType{Kind: MaybeType, Elem: &ConfType{Kind: EnumType, Enum: []string{"TCP", "UDP"}}}},
	}}}
	if got, want := ty.String(), "{(dport: Int 0 65535, proto: <Enum (TCP, UDP)>)}<,128>"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestTopoOrderView: the slice-backed gonum view sorts as gonum's simple
// graph does, on random DAGs with repeated and parallel edges, and
// reports self edges and cycles.
func TestTopoOrderView(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := range 300 {
		n := 1 + rng.Intn(60)
		g := New("g")
		for i := range n {
			g.Add(&Node{Name: fmt.Sprintf("n%d", i), Kind: FNode})
		}
		// Edges go from a higher to a lower ID only half the time, so the
		// order is not the ID order.
		perm := rng.Perm(n)
		for _, nd := range g.Nodes {
			for range rng.Intn(3) {
				p := &Port{Name: fmt.Sprintf("p%d", len(nd.Ports))}
				for range rng.Intn(4) {
					to := rng.Intn(n)
					if perm[to] > perm[nd.ID] {
						p.Succ = append(p.Succ, to)
					}
				}
				nd.Ports = append(nd.Ports, p)
			}
		}
		d, _ := g.directed(false)
		want, err := topo.SortStabilized(d, func(ns []gonumNode) {
			slices.SortFunc(ns, func(a, b gonumNode) int { return int(a.ID() - b.ID()) })
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := g.TopoOrder()
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int, len(want))
		for i, w := range want {
			ids[i] = int(w.ID())
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("trial %d: TopoOrder %v, gonum's simple graph %v", trial, got, ids)
		}
	}
	g := New("g")
	a := g.Add(&Node{Name: "a", Kind: FNode})
	b := g.Add(&Node{Name: "b", Kind: FNode})
	a.Ports = []*Port{{Name: "x", Succ: []int{b.ID}}}
	b.Ports = []*Port{{Name: "y", Succ: []int{a.ID}}}
	if _, err := g.TopoOrder(); err == nil {
		t.Error("a cycle was sorted")
	}
	b.Ports[0].Succ = []int{b.ID}
	if _, err := g.TopoOrder(); err == nil || !strings.Contains(err.Error(), "b has an edge to itself") {
		t.Errorf("self edge: %v", err)
	}
}
