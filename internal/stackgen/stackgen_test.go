package stackgen_test

import (
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/stackgen"
	"github.com/dragonc/dragonc/lpg"
)

// TestShaped: every shape is a valid stack with the endpoints and
// services it asks for; Open-MX ids run out at 256 and the other kinds
// take the rest.
func TestShaped(t *testing.T) {
	for kinds := stackgen.Kinds(0); kinds <= stackgen.UDP|stackgen.TCP|stackgen.OpenMX; kinds++ {
		for _, n := range []int{0, 1, 40, 700} {
			s := stackgen.Shape{Endpoints: n, Kinds: kinds, ARP: n%2 == 0, ICMPEcho: kinds%2 == 0}
			st, diags := lpg.LoadStack("shaped.lpg", stackgen.Shaped(s))
			if st == nil || diags.HasErrors() {
				t.Fatalf("%+v: %v", s, diags)
			}
			count := map[lpg.Proto]int{}
			for _, e := range st.Endpoints {
				count[e.Proto]++
			}
			want := n
			if kinds == 0 {
				want = 0
			} else if kinds == stackgen.OpenMX {
				want = min(n, 256)
			}
			if len(st.Endpoints) != want || count[lpg.OpenMX] > 256 || st.ARP != s.ARP || st.ICMPEcho != s.ICMPEcho {
				t.Errorf("%+v: %d endpoints (%v), ARP %v, echo %v", s, len(st.Endpoints), count, st.ARP, st.ICMPEcho)
			}
			for _, k := range []struct {
				kind  stackgen.Kinds
				proto lpg.Proto
			}{{stackgen.UDP, lpg.UDP}, {stackgen.TCP, lpg.TCP}, {stackgen.OpenMX, lpg.OpenMX}} {
				if n >= 40 && (count[k.proto] > 0) != (kinds&k.kind != 0) {
					t.Errorf("%+v: %d endpoints of kind %v", s, count[k.proto], k.proto)
				}
			}
		}
	}
}
