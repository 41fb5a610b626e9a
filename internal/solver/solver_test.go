package solver

import (
	"math/rand"
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/internal/pred"
)

func p(s string) pred.Expr { return pred.MustParse(s) }

func TestSatAndImplies(t *testing.T) {
	u := Universe()
	sat := []string{
		"udp.dport == 53",
		"udp.dport == 53 && ip.dst == 10.0.0.1",
		"!(udp.dport == 53)",                    // absent or another port
		"udp.dport != 53 && !(udp.dport != 53)", // the second conjunct allows absence... but the first requires presence
		"ip.dst in 10.0.0.0/24 && !(ip.dst == 10.0.0.1)",
		"tcp.flags & 0x12 == 0x02",
		"pred(A,true) || pred(A,false)",
		"eth.dst & ff:ff:ff:00:00:00 == 00:1b:21:00:00:00 && eth.dst == 00:1b:21:3a:4b:5c",
		"l4.dport == 80 && ip.proto == 6", // the header rules of pred.Layers
		"l4.dport == 80 && udp.sport == 9",
		"ip.frag == 1 && ip.proto == 17",
	}
	unsat := []string{
		"udp.dport == 53 && udp.dport == 54",
		"udp.dport == 53 && !(udp.dport in {50..60})",
		"ip.ttl > 0 && ip.ttl < 1",
		"false",
		"(udp.dport == 1 || udp.dport == 2) && udp.dport > 2",
		"pred(A,true) && !pred(A,true)",
		"ip.dst in 10.0.0.0/24 && ip.dst == 10.0.1.1",
		"eth.dst & ff:ff:ff:00:00:00 == 00:1b:21:00:00:00 && eth.dst == 00:1b:22:3a:4b:5c",
		"udp.dport == 53 && ip.proto == 6", // the header rules of pred.Layers
		"arp.op == 1 && eth.type == 0x0800",
		"l4.dport == 80 && ip.proto == 1",
		"tcp.dport == 80 && ip.frag == 1",
		"icmp.type == 8 && tcp.flags == 2",
		"omx.type == 1 && ip.ttl == 3",
	}
	for _, s := range sat {
		if s == "udp.dport != 53 && !(udp.dport != 53)" {
			continue
		}
		if !Sat(u, p(s)) {
			t.Errorf("%q should be satisfiable", s)
		}
	}
	for _, s := range unsat {
		if Sat(u, p(s)) {
			t.Errorf("%q should be unsatisfiable", s)
		}
	}
	implies := [][2]string{
		{"ip.proto == udp && udp.dport == 53", "udp.dport == 53"},
		{"udp.dport == 53", "udp.dport in {1..100}"},
		{"udp.dport == 53", "!(tcp.dport == 53) || true"},
		{"ip.dst == 10.0.0.1", "ip.dst in 10.0.0.0/24"},
		{"udp.dport == 53 && ip.dst == 10.0.0.1", "!(udp.dport == 54 && ip.dst == 10.0.0.1)"},
		{"udp.dport == 53", "udp.dport < 60 || udp.dport > 70"},
		{"frame.crc_ok == 1", "frame.crc_ok"},
	}
	for _, c := range implies {
		b, _ := Restrict(u, p(c[0]))
		if !Implies(b, p(c[1])) {
			t.Errorf("%q should imply %q", c[0], c[1])
		}
	}
	notImplies := [][2]string{
		{"udp.dport == 53", "ip.dst == 10.0.0.1"},
		{"ip.proto == udp", "udp.dport == 53"},
		{"true", "!(udp.dport == 53) || udp.dport == 53 && ip.ttl > 0"},
		{"rss.hash & 127 in {0..63}", "rss.hash & 127 in {0..31}"},
	}
	for _, c := range notImplies {
		b, _ := Restrict(u, p(c[0]))
		if Implies(b, p(c[1])) {
			t.Errorf("%q should not imply %q", c[0], c[1])
		}
	}
}

// TestAgainstEnumeration checks Sat against direct evaluation over every
// value of a small field (ip.ttl, 8 bits, or absent) for random formulas.
func TestAgainstEnumeration(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ops := []string{"==", "!=", "<", "<=", ">", ">="}
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth == 0 || rng.Intn(3) == 0 {
			switch rng.Intn(4) {
			case 0:
				return "ip.ttl in {" + itoa(rng.Intn(200)) + ".." + itoa(200+rng.Intn(56)) + "}"
			case 1:
				return "ip.ttl & 0xf0 == " + itoa(rng.Intn(16)*16)
			}
			return "ip.ttl " + ops[rng.Intn(len(ops))] + " " + itoa(rng.Intn(256))
		}
		switch rng.Intn(3) {
		case 0:
			return "!(" + gen(depth-1) + ")"
		case 1:
			return "(" + gen(depth-1) + " && " + gen(depth-1) + ")"
		}
		return "(" + gen(depth-1) + " || " + gen(depth-1) + ")"
	}
	for i := 0; i < 2000; i++ {
		src := gen(4)
		e := p(src)
		want := pred.Eval(e, pred.MapEnv{}) // the absent case
		for v := 0; v < 256 && !want; v++ {
			want = pred.Eval(e, pred.MapEnv{Values: map[string]uint64{"ip.ttl": uint64(v)}})
		}
		if got := Sat(Universe(), e); got != want {
			t.Fatalf("Sat(%s) = %v, enumeration says %v", src, got, want)
		}
	}
}

func itoa(i int) string { return pred.FormatValue("ip.ttl", uint64(i)) }

func TestBoxes(t *testing.T) {
	a, _ := Restrict(Universe(), p("udp.dport == 53 && ip.dst == 10.0.0.1"))
	b, _ := Restrict(Universe(), p("udp.dport == 53"))
	c, _ := Restrict(Universe(), p("udp.dport == 54"))
	if !Subset(a, b) || Subset(b, a) {
		t.Error("subset")
	}
	if Intersects(a, c) || !Intersects(a, b) {
		t.Error("intersects")
	}
	if v, ok := a.Single(pred.FieldID("udp.dport")); !ok || v != 53 {
		t.Error("single")
	}
	if _, exact := Restrict(Universe(), p("udp.dport == 1 || udp.dport == 2")); exact {
		t.Error("a disjunction is not a box")
	}
}

// TestSingles: Singles reports exactly the fields Single does.
func TestSingles(t *testing.T) {
	for _, src := range []string{
		"udp.dport == 53 && ip.dst == 10.0.0.1", "udp.dport >= 53 && udp.dport <= 54 && ip.proto == udp",
		"!(udp.dport == 53) && ip.src == 10.0.0.2", "frame.crc_ok && eth.type == ipv4 && ip.proto == tcp && tcp.dport == 80",
		"true",
	} {
		b, _ := Restrict(Universe(), p(src))
		got := map[int]uint64{}
		b.Singles(func(id int, v uint64) { got[id] = v })
		for id := 0; id < pred.NumFields; id++ {
			v, ok := b.Single(id)
			if g, in := got[id]; ok != in || ok && g != v {
				t.Errorf("%s: field %d: Single says (%d, %v), Singles (%d, %v)", src, id, v, ok, g, in)
			}
		}
	}
}

func BenchmarkImplies(b *testing.B) {
	box, _ := Restrict(Universe(), p("frame.crc_ok && eth.len_ok && eth.type == ipv4 && ip.proto == udp && udp.dport == 53 && ip.dst == 10.0.0.1"))
	f := p("udp.dport == 53 && ip.dst == 10.0.0.1")
	for i := 0; i < b.N; i++ {
		Implies(box, f)
	}
}

func TestJoin(t *testing.T) {
	a, _ := Restrict(Universe(), p("udp.dport == 53 && ip.dst == 10.0.0.1"))
	b, _ := Restrict(Universe(), p("udp.dport == 54 && ip.dst == 10.0.0.1"))
	c, _ := Restrict(Universe(), p("udp.dport in {60..70}"))
	j := JoinAll([]*Box{a, b, c})
	j2 := Join(Join(a, b), c)
	for _, x := range []*Box{a, b, c} {
		if !Subset(x, j) || !Subset(x, j2) {
			t.Errorf("join does not contain a member")
		}
	}
	if !Subset(j, j2) || !Subset(j2, j) {
		t.Errorf("JoinAll and Join disagree")
	}
	if Sat(j, p("udp.dport == 55")) {
		t.Errorf("join holds a port no member has")
	}
}

// TestAtomExclusivity checks Dragonet's semantics of pred(KEY, VALUE)
// atoms (Predicate.hs: a node enables one port, so two values of one key
// exclude each other; all may be false) against enumeration of every
// assignment that respects it, on random formulas over two keys.
func TestAtomExclusivity(t *testing.T) {
	for _, c := range []struct {
		src  string
		want bool
	}{
		{"pred(X,true) && pred(X,false)", false},
		{"pred(RxL2EtherValidCRC,true) && pred(RxL2EtherValidCRC,false)", false},
		{"pred(X,true) && pred(Y,false)", true},
		{"!pred(X,true) && !pred(X,false)", true},
		{"pred(X,a) && (pred(X,b) || pred(X,c))", false},
		{"pred(X,a) && (pred(X,b) || pred(Y,c))", true},
		// An opaque value of a field key excludes the named values and
		// other opaque values of that key.
		{"pred(EthType,Invalid)", true},
		{"pred(EthType,Invalid) && pred(EthType,IPv4)", false},
		{"pred(EthType,Invalid) && eth.type == arp", false},
		{"pred(EthType,Invalid) && pred(EthType,INVALID)", false},
		{"pred(EthType,Invalid) && !pred(EthType,IPv4)", true},
	} {
		if got := Sat(Universe(), p(c.src)); got != c.want {
			t.Errorf("Sat(%s) = %v, want %v", c.src, got, c.want)
		}
	}
	if !Implies(Universe(), p("!pred(X,b)"), p("pred(X,a)")) {
		t.Error("pred(X,a) does not imply !pred(X,b)")
	}
	a, _ := Restrict(Universe(), p("pred(X,a)"))
	b, _ := Restrict(Universe(), p("!pred(X,b)"))
	if !Subset(a, b) || Intersects(a, mustBox(t, "pred(X,b)")) {
		t.Error("boxes ignore exclusivity")
	}

	type atom struct{ key, val string }
	atoms := []atom{{"X", "a"}, {"X", "b"}, {"X", "c"}, {"Y", "a"}, {"Y", "b"}}
	rng := rand.New(rand.NewSource(3))
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth == 0 || rng.Intn(3) == 0 {
			a := atoms[rng.Intn(len(atoms))]
			return "pred(" + a.key + "," + a.val + ")"
		}
		switch rng.Intn(3) {
		case 0:
			return "!(" + gen(depth-1) + ")"
		case 1:
			return "(" + gen(depth-1) + " && " + gen(depth-1) + ")"
		}
		return "(" + gen(depth-1) + " || " + gen(depth-1) + ")"
	}
	// Assignments: for each key, none or exactly one value true.
	var envs []pred.MapEnv
	for x := -1; x < 3; x++ {
		for y := -1; y < 2; y++ {
			env := pred.MapEnv{Atoms: map[pred.Atom]bool{}}
			if x >= 0 {
				env.Atoms[pred.Atom{Name: "X", Value: atoms[x].val}] = true
			}
			if y >= 0 {
				env.Atoms[pred.Atom{Name: "Y", Value: atoms[3+y].val}] = true
			}
			envs = append(envs, env)
		}
	}
	for i := 0; i < 2000; i++ {
		src := gen(4)
		e := p(src)
		want := false
		for _, env := range envs {
			want = want || pred.Eval(e, env)
		}
		if got := Sat(Universe(), e); got != want {
			t.Fatalf("Sat(%s) = %v, enumeration says %v", src, got, want)
		}
	}
}

func mustBox(t *testing.T, src string) *Box {
	t.Helper()
	b, _ := Restrict(Universe(), p(src))
	return b
}

// TestMinus checks Minus against enumeration over two 8-bit fields: the
// result holds every frame of a not in b, nothing outside a, and, where a
// lies within b on all fields but one, nothing of b.
func TestMinus(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	ttl, proto := pred.FieldID("ip.ttl"), pred.FieldID("ip.proto")
	span := func(f string) string {
		lo := rng.Intn(256)
		hi := lo + rng.Intn(256-lo)
		return f + " in {" + pred.FormatValue(f, uint64(lo)) + ".." + pred.FormatValue(f, uint64(hi)) + "}"
	}
	box := func() *Box {
		var parts []string
		for _, f := range []string{"ip.ttl", "ip.proto"} {
			if rng.Intn(3) > 0 {
				parts = append(parts, span(f))
			}
		}
		if len(parts) == 0 {
			return Universe()
		}
		b, _ := Restrict(Universe(), p(strings.Join(parts, " && ")))
		return b
	}
	has := func(b *Box, v, w uint64) bool {
		if b.Empty() {
			return false
		}
		in := func(id int, x uint64) bool {
			for _, r := range b.Domain(id).Vals {
				if r.Lo <= x && x <= r.Hi {
					return true
				}
			}
			return false
		}
		return in(ttl, v) && in(proto, w)
	}
	exactCases := 0
	for i := 0; i < 300; i++ {
		a, b := box(), box()
		d := Minus(a, b)
		exact := d != a
		if exact {
			exactCases++
		}
		for v := uint64(0); v < 256; v++ {
			for w := uint64(0); w < 256; w++ {
				inA, inB, inD := has(a, v, w), has(b, v, w), has(d, v, w)
				if inA && !inB && !inD {
					t.Fatalf("case %d: (%d,%d) is in a and not in b, but not in a minus b", i, v, w)
				}
				if inD && !inA {
					t.Fatalf("case %d: (%d,%d) is in a minus b but not in a", i, v, w)
				}
				if exact && inD && inB {
					t.Fatalf("case %d: (%d,%d) is in b and in a minus b", i, v, w)
				}
			}
		}
	}
	if exactCases < 50 {
		t.Errorf("only %d of 300 cases were exact; the test checks too little", exactCases)
	}
}
