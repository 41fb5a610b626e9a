package pred

import (
	"fmt"
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

func TestParseRoundTrip(t *testing.T) {
	cases := []struct{ in, want string }{
		{"udp.dport == 53 && ip.dst == 10.0.0.1", "udp.dport == 53 && ip.dst == 10.0.0.1"},
		{"pred(EthType, IPv4)", "eth.type == 0x0800"},
		{"and(pred(EthType,IPv4),not(pred(IpProt,UDP)))", "eth.type == 0x0800 && !(ip.proto == 17)"},
		{"not(or(pred(EthType,IPv4),pred(EthType,IPv6),pred(EthType,ARP)))", "!(eth.type == 0x0800 || eth.type == 0x86dd || eth.type == 0x0806)"},
		{"pred(RxL2EtherValidCRC,true)", "pred(RxL2EtherValidCRC,true)"},
		{"ip.dst in 10.0.0.0/24", "ip.dst in {10.0.0.0..10.0.0.255}"},
		{"udp.dport in {53, 20000..20099, 54}", "udp.dport in {53..54, 20000..20099}"},
		{"eth.dst & 01:00:00:00:00:00 != 0", "eth.dst & 01:00:00:00:00:00 != 00:00:00:00:00:00"},
		{"eth.type == openmx && omx.dst_ep == 3", "eth.type == 0x86df && omx.dst_ep == 3"},
		{"udp.csum_ok", "udp.csum_ok != 0"},
		{"(a.b.c == 1)", ""},
		{"tcp.flags & syn == syn || true", "tcp.flags & 0x0002 == 0x0002 || true"},
		{"ip.ttl > 0 && !(ip.frag)", "ip.ttl > 0 && !(ip.frag != 0)"},
	}
	for _, c := range cases {
		e, err := Parse(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", c.in, e)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("Parse(%q) = %q, want %q", c.in, got, c.want)
		}
		// The canonical form parses back to the same form.
		e2, err := Parse(e.String())
		if err != nil || e2.String() != e.String() {
			t.Errorf("round trip of %q: %v, %v", e.String(), e2, err)
		}
	}
}

// TestOpaqueValue: a value dragonc does not know for a known key (Dragonet's
// pred(EthType, Invalid)) is accepted, prints as written, excludes every
// named value of the key, and is false on every frame.
func TestOpaqueValue(t *testing.T) {
	e, err := Parse("pred(EthType, Invalid)")
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != "pred(EthType,Invalid)" {
		t.Errorf("prints as %s", e)
	}
	if a, ok := OpaqueValue(e); !ok || a != (Atom{"EthType", "Invalid"}) {
		t.Errorf("OpaqueValue = %v, %v", a, ok)
	}
	for _, v := range []uint64{0x0800, 0x0806, 0x86dd, 0x0600, 0x1234} {
		if Eval(e, MapEnv{Values: map[string]uint64{"eth.type": v}}) {
			t.Errorf("true on a frame with EtherType %#x", v)
		}
	}
	c := e.(And).X[0].(Cmp)
	for _, v := range []uint64{0x0800, 0x0806, 0x86dd} {
		if c.Holds(v) {
			t.Errorf("does not exclude %#x", v)
		}
	}
	if !c.Holds(0x0600) {
		t.Error("excludes an unnamed EtherType")
	}
}

func TestErrors(t *testing.T) {
	for _, in := range []string{"", "udp.dprot == 53", "ip.ttl == 256", "udp.dport ==", "pred(EthType)", "ip.dst in 10.0.0.0/33", "udp.dport in 9..3", "&& x", "eth.type & 0 == 0"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", in)
		} else {
			t.Logf("%q: %v", in, err)
		}
	}
}

func TestEval(t *testing.T) {
	env := MapEnv{Values: map[string]uint64{"eth.type": 0x800, "ip.proto": 17, "udp.dport": 53, "ip.dst": 0x0a000001},
		Atoms: map[Atom]bool{{"RxL2EtherValidCRC", "true"}: true}}
	cases := map[string]bool{
		"udp.dport == 53 && ip.dst == 10.0.0.1":         true,
		"udp.dport == 54":                               false,
		"tcp.dport == 80":                               false,
		"tcp.dport != 80":                               false, // absent fields compare false
		"!(tcp.dport == 80)":                            true,
		"pred(RxL2EtherValidCRC,true)":                  true,
		"pred(RxL2EtherValidCRC,false)":                 false,
		"ip.dst in 10.0.0.0/8":                          true,
		"udp.dport in {1..52, 54..100}":                 false,
		"and(pred(EthType,IPv4),not(pred(IpProt,UDP)))": false,
		"or(pred(EthType,ARP),pred(IpProt,UDP))":        true,
		"udp.dport & 0xff00 == 0":                       true,
	}
	for in, want := range cases {
		if got := Eval(MustParse(in), env); got != want {
			t.Errorf("Eval(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestInspect(t *testing.T) {
	e, err := Parse("ip.proto == 17 && !(udp.dport == 53 || udp.dport == 54)")
	if err != nil {
		t.Fatal(err)
	}
	var all, top []string
	Inspect(e, func(x Expr) bool {
		if c, ok := x.(Cmp); ok {
			all = append(all, c.Field)
		}
		return true
	})
	Inspect(e, func(x Expr) bool {
		if c, ok := x.(Cmp); ok {
			top = append(top, c.Field)
		}
		_, isNot := x.(Not)
		return !isNot // skip what is under the negation
	})
	if fmt.Sprint(all) != "[ip.proto udp.dport udp.dport]" || fmt.Sprint(top) != "[ip.proto]" {
		t.Errorf("all %v, without the negation %v", all, top)
	}
}

// TestSyntaxErrorWords: syntax errors name what was expected in the
// words of the language, never a token type or a production.
func TestSyntaxErrorWords(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"udp.dport = 53", `offset 10: "=" is no operator: compare with ==`},
		{"udp.dport == ", "offset 13: unexpected end of expression: expected a value (a number, an address or a name)"},
		{"(udp.dport == 53", `offset 16: unexpected end of expression: expected ")"`},
		{"udp.dport in {1, }", `offset 17: unexpected "}": expected a value or a range`},
		{"udp.dport == 53 &&", "offset 18: unexpected end of expression: expected an expression"},
		{"€", `offset 0: unexpected character "€"`},
	} {
		_, err := Parse(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q): %v, want %s", c.in, err, c.want)
		}
	}
	for _, line := range strings.Split(exprParser.String(), "\n") {
		if name, _, ok := strings.Cut(line, " = "); ok && productionWords[name] == "" {
			t.Errorf("production %s has no words in productionWords", name)
		}
	}
}
