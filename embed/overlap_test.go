package embed

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/costmodel"
)

// TestOverlapIndex: listeners on the port of many connected flows (one on
// every address, one on the stack's) get their shares from an
// overlapIndex; after every one of many random moves of the flows and the
// listeners, on the 82599 (two tables, entries of three priorities) and
// on linux-xdp, the shares the evaluator holds are those shares works out
// from scratch, and the cost is the evaluation's from scratch.
func TestOverlapIndex(t *testing.T) {
	var b strings.Builder
	b.WriteString("stack web {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/16 }\n    cores 0..7\n")
	b.WriteString("    endpoint www tcp listen *:80 { rate 10kpps }\n    endpoint local tcp listen 10.3.0.1:80 { rate 5kpps }\n")
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&b, "    endpoint c%d tcp flow 10.3.0.1:80 -> 10.4.%d.%d:%d { rate %dkpps }\n", i, i/250, 1+i%250, 20000+i, 1+i%5)
	}
	b.WriteString("}\n")
	for _, nic := range []string{"82599", "linux-xdp"} {
		p, err := newProblem(stackInput(t, nic, b.String(), "balance", StrategyDefault))
		if err != nil {
			t.Fatal(err)
		}
		for m := range p.modes {
			s := p.newState(m)
			var big []int
			for i := range p.eps {
				if s.indexed(i) {
					big = append(big, i)
				}
			}
			if len(big) != 2 {
				t.Fatalf("%s: %d endpoints with an index, want the two listeners", nic, len(big))
			}
			r := rand.New(rand.NewSource(int64(m)))
			for step := 0; step < 600; step++ {
				i := r.Intn(len(p.eps))
				if step%10 == 0 {
					i = big[r.Intn(len(big))]
				}
				moves := p.moves(s, i)
				s.set(i, moves[r.Intn(len(moves))])
				for _, j := range big {
					want := append([]costmodel.Share(nil), s.shares(j)...)
					if diff := gocmp.Diff(want, s.ev.Shares(j)); diff != "" {
						t.Fatalf("%s mode %s step %d: %s's shares (-from scratch +indexed):\n%s", nic, p.modes[m].name, step, p.eps[j].ep.Name, diff)
					}
				}
				if err := s.ev.Check(); err != nil {
					t.Fatalf("%s step %d: %v", nic, step, err)
				}
			}
		}
	}
}
