package load

import (
	"os"
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/nics"
)

// TestKinds: each kind of file is told apart, with what the commands
// that take it need.
func TestKinds(t *testing.T) {
	example, err := os.ReadFile("../examples/dns_ntp.lpg")
	if err != nil {
		t.Fatal(err)
	}
	file, model, err := nics.Resolve("82599")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src string
		kind      Kind
		diag      string // a diagnostic the file must have
	}{
		{"dns_ntp.lpg", string(example), Stack, ""},
		{file, string(model), PRG, ""},
		{"tiny.lpg", "graph tiny {\n    node A { port out[B] }\n    node B { port out[] }\n}\n", LPG, ""},
		{"syntax.lpg", "graph tiny {\n    node A { port out[B] \n", Broken, "E114"},
		{"lower.lpg", "stack s {\n  endpoint e udp listen *:99999 { app \"x\" }\n}\n", Broken, "E513"},
		{"config.prg", "graph g {\n    config C {\n        table { fields [l4.dport] capacity 0 }\n        port out[]\n    }\n}\n", Broken, "E401"},
	}
	for _, c := range cases {
		f := Parse(c.name, []byte(c.src))
		if got := f.Kind(); got != c.kind {
			t.Errorf("%s: kind %d, want %d (%v)", c.name, got, c.kind, f.Diags)
		}
		var codes []string
		for _, d := range f.Diags {
			codes = append(codes, d.Code)
		}
		if c.diag != "" && !strings.Contains(strings.Join(codes, " "), c.diag) {
			t.Errorf("%s: diagnostics %v, want %s", c.name, f.Diags, c.diag)
		}
		if c.diag == "" && len(f.Diags) > 0 {
			t.Errorf("%s: %v", c.name, f.Diags)
		}
		switch c.kind {
		case Stack:
			if f.Stack == nil || f.Graph == nil || len(f.Stack.Endpoints) == 0 {
				t.Errorf("%s: no stack or no derived LPG", c.name)
			}
		case PRG, LPG:
			if f.Stack != nil || f.Graph == nil || HasConfig(f.Graph) != (c.kind == PRG) {
				t.Errorf("%s: stack %v, graph %v", c.name, f.Stack != nil, f.Graph != nil)
			}
		}
	}
}
