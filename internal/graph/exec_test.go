package graph

import (
	"math/rand"
	"testing"

	"github.com/dragonc/dragonc/internal/pred"
)

// env gives field values from a map; absent fields have no value.
type env map[int]uint64

func (e env) Value(id int) (uint64, bool) { v, ok := e[id]; return v, ok }
func (e env) Atom(pred.Atom) bool         { return false }

// linear is choose's rule written plainly: the first guarded port whose
// predicate holds, else the first unguarded port, else none.
func linear(n *Node, e env) int {
	for i, p := range n.Ports {
		if p.Pred != nil && pred.Eval(p.Pred, e) {
			return i
		}
	}
	for i, p := range n.Ports {
		if p.Pred == nil {
			return i
		}
	}
	return len(n.Ports)
}

// TestPortIndexAgrees runs demultiplexers with and without an index on
// random frames: flows (four fields) and listeners (two) side by side,
// repeated values (the port declared first wins), an unguarded port in
// the middle, and nodes the index must refuse (no common equality).
func TestPortIndexAgrees(t *testing.T) {
	const dst, dport, src, sport = 1, 2, 3, 4
	eq := func(id int, v uint64) pred.Cmp { return pred.Cmp{ID: id, Op: pred.Eq, Value: v} }
	rng := rand.New(rand.NewSource(1))
	indexed := 0
	for round := 0; round < 50; round++ {
		g := New("t")
		n := g.Add(&Node{Name: "demux"})
		sink := g.Add(&Node{Name: "sink"})
		ports := 8 + rng.Intn(40)
		for i := 0; i < ports; i++ {
			var e pred.Expr
			port := uint64(rng.Intn(ports/2 + 1))
			switch rng.Intn(4) {
			case 0:
				e = pred.And{X: []pred.Expr{eq(src, uint64(rng.Intn(3))), eq(sport, uint64(rng.Intn(3))), eq(dst, 7), eq(dport, port)}}
			case 1:
				e = eq(dport, port)
			default:
				e = pred.And{X: []pred.Expr{eq(dst, uint64(7+rng.Intn(2))), eq(dport, port)}}
			}
			if round%10 == 9 && i == 3 {
				e = pred.Cmp{ID: dport, Op: pred.Gt, Value: 5} // no equality: no index
			}
			if i == ports/2 && round%3 == 0 {
				e = nil // an unguarded port in the middle
			}
			n.Ports = append(n.Ports, &Port{Name: "p", Pred: e, Succ: []int{sink.ID}})
		}
		p, err := Compile(g, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		if round%10 != 9 && p.index[n.ID] == nil {
			t.Fatalf("round %d: no index for %d ports that all compare dport", round, ports)
		}
		if round%10 == 9 && p.index[n.ID] != nil {
			t.Fatalf("round %d: an index although port 3 has no equality", round)
		}
		if p.index[n.ID] != nil {
			indexed++
		}
		tr := p.NewTrace()
		for f := 0; f < 200; f++ {
			e := env{dst: uint64(7 + rng.Intn(2)), src: uint64(rng.Intn(3)), sport: uint64(rng.Intn(3))}
			if rng.Intn(10) > 0 {
				e[dport] = uint64(rng.Intn(ports/2 + 3))
			}
			p.Run(e, tr)
			if got, want := tr.Port[n.ID], linear(n, e); got != want {
				t.Fatalf("round %d frame %v: port %d, want %d", round, e, got, want)
			}
			if fired := tr.Fired(sink.ID); fired != (linear(n, e) < ports) {
				t.Fatalf("round %d frame %v: sink fired %v", round, e, fired)
			}
		}
	}
	if indexed == 0 {
		t.Fatal("no node was indexed")
	}
}
