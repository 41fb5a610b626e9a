package dsl_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
)

const root = ".."

// TestGoldenGraphs lowers every small graph under testdata/graphs and
// testdata/unicorn and compares the dump with its golden file.
func TestGoldenGraphs(t *testing.T) {
	files := globAll(t, "testdata/graphs/*", "testdata/unicorn/*.unicorn")
	if len(files) < 3 {
		t.Fatalf("found only %d graph files", len(files))
	}
	for _, path := range files {
		if strings.HasSuffix(path, ".golden") {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			src := read(t, path)
			g, _, diags := dsl.Load(rel(path), src)
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", diags.Error())
			}
			var out strings.Builder
			for _, d := range diags {
				out.WriteString(d.String() + "\n")
			}
			out.WriteString(graph.Dump(g))
			golden.Check(t, path+".golden", []byte(out.String()))
		})
	}
}

var wantRE = regexp.MustCompile(`^// want: (\d+):(\d+) ([EW]\d+)`)

// TestMalformed checks every file under testdata/bad: the diagnostic named
// in the file's golden .want line must be reported at that line and column,
// the file must be rejected, and the full output must match its golden file.
func TestMalformed(t *testing.T) {
	files := globAll(t, "testdata/bad/*.unicorn", "testdata/bad/*.prg")
	if len(files) < 30 {
		t.Fatalf("want at least 30 malformed inputs, have %d", len(files))
	}
	wants := readWants(t)
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			_, _, diags := dsl.Load(rel(path), read(t, path))
			if !diags.HasErrors() {
				t.Fatalf("no error reported")
			}
			var out strings.Builder
			for _, d := range diags {
				out.WriteString(d.String() + "\n")
			}
			want, ok := wants[name]
			if !ok {
				t.Fatalf("testdata/bad/WANT has no line for %s", name)
			}
			if !strings.Contains(out.String(), rel(path)+":"+want.pos+": error") && !strings.Contains(out.String(), rel(path)+":"+want.pos+": warning") {
				t.Errorf("want a diagnostic at %s, got:\n%s", want.pos, out.String())
			}
			if !strings.Contains(out.String(), "["+want.code+"]") {
				t.Errorf("want code %s, got:\n%s", want.code, out.String())
			}
			golden.Check(t, path+".golden", []byte(out.String()))
		})
	}
}

type want struct{ pos, code string }

// readWants reads testdata/bad/WANT: one line per file, `FILE LINE:COL CODE`.
func readWants(t *testing.T) map[string]want {
	out := map[string]want{}
	for _, line := range strings.Split(string(read(t, filepath.Join(root, "testdata/bad/WANT"))), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 3 {
			t.Fatalf("bad WANT line %q", line)
		}
		out[f[0]] = want{f[1], f[2]}
	}
	return out
}

// TestFormat formats every language file in the repository: the output
// parses, formatting it again changes nothing, and the syntax tree and the
// lowered graph are unchanged.
func TestFormat(t *testing.T) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bad" || d.Name() == "badstack" || d.Name() == "diag") {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".prg", ".lpg", ".unicorn":
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found only %d files", len(files))
	}
	for _, path := range files {
		t.Run(rel(path), func(t *testing.T) {
			checkFormat(t, rel(path), read(t, path))
		})
	}
}

func checkFormat(t *testing.T, name string, src []byte) {
	t.Helper()
	s1, diags := dsl.Parse(name, src)
	if diags.HasErrors() {
		t.Fatalf("parse: %s", diags.Error())
	}
	out1 := dsl.Format(s1)
	s2, diags := dsl.Parse(name, out1)
	if diags.HasErrors() {
		t.Fatalf("formatted output does not parse: %s\n%s", diags.Error(), out1)
	}
	out2 := dsl.Format(s2)
	if diff := cmp.Diff(string(out1), string(out2)); diff != "" {
		t.Errorf("formatting is not idempotent (-first +second):\n%s", diff)
	}
	ignorePos := cmpopts.IgnoreTypes(lexer.Position{})
	if diff := cmp.Diff(s1.AST, s2.AST, ignorePos); diff != "" {
		t.Errorf("formatting changed the syntax tree (-before +after):\n%s", diff)
	}
	if len(s1.Comments()) != len(s2.Comments()) {
		t.Errorf("formatting changed the number of comments: %d before, %d after", len(s1.Comments()), len(s2.Comments()))
	}
	if s1.AST.Graph != nil {
		g1, d1 := dsl.Lower(s1)
		g2, d2 := dsl.Lower(s2)
		if d1.HasErrors() != d2.HasErrors() {
			t.Fatalf("validity changed: %v vs %v", d1.Error(), d2.Error())
		}
		if diff := cmp.Diff(g1, g2, cmpopts.IgnoreTypes(graph.Source{}), cmpopts.IgnoreUnexported(graph.Graph{})); diff != "" {
			t.Errorf("formatting changed the graph (-before +after):\n%s", diff)
		}
	}
}

// TestFormatGolden keeps the formatted layout of the everything file.
func TestFormatGolden(t *testing.T) {
	path := filepath.Join(root, "testdata/unicorn/everything.unicorn")
	s, diags := dsl.Parse(rel(path), read(t, path))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	golden.Check(t, filepath.Join(root, "testdata/unicorn/everything.fmt.golden"), dsl.Format(s))
}

// TestFormatComments pins where comments go.
func TestFormatComments(t *testing.T) {
	src := `// leading
graph g { // after the brace
    /* before a node */
    node A { port out[B /* inside */ C] } // trailing


    node B {} // two blank lines above collapse to one
    node C {
        // only a comment
    }
    // before the closing brace
}
// after everything
`
	want := `// leading
graph g { // after the brace
    /* before a node */
    node A {
        /* inside */
        port out[B C]
    } // trailing

    node B {} // two blank lines above collapse to one
    node C {
        // only a comment
    }
    // before the closing brace
}
// after everything
`
	s, diags := dsl.Parse("c.unicorn", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff(want, string(dsl.Format(s))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkFormat(t, "c.unicorn", []byte(src))
}

// TestFormatServiceSettings: a service's settings print on its line, as
// an endpoint's attributes do, in the order written; an empty block goes.
func TestFormatServiceSettings(t *testing.T) {
	src := `stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
  service   icmp-errors {
      rate 1.5 kpps   peer-burst 6
      burst 50 peer-rate 1pps } // Linux's, but 1.5kpps
    service arp { }
    service icmp-echo {rate 1pps}
}
`
	want := `stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    service icmp-errors { rate 1.5kpps peer-burst 6 burst 50 peer-rate 1pps } // Linux's, but 1.5kpps
    service arp
    service icmp-echo { rate 1pps }
}
`
	s, diags := dsl.Parse("s.lpg", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff(want, string(dsl.Format(s))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkFormat(t, "s.lpg", []byte(src))
}

// TestGrammar keeps the grammar's EBNF as a golden file, so a change to the
// language shows up in review.
func TestGrammar(t *testing.T) {
	golden.Check(t, filepath.Join(root, "testdata/grammar.ebnf"), []byte(dsl.Grammar()+"\n"))
}

// TestResolution pins the naming rules of Unicorn.
func TestResolution(t *testing.T) {
	src := `graph g {
    cluster Rx { cluster L2 { cluster Eth {
        node A { port out[B .C ..D ...E] }
        node B {}
    }
    node C {}
    }
    node D {}
    }
    node E {}
    cluster Tx { node .F { port out[.G] } }
    node G {}
}`
	g, _, diags := dsl.Load("r.unicorn", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	a, ok := g.Lookup("RxL2EthA")
	if !ok {
		t.Fatal("RxL2EthA not declared")
	}
	var got []string
	for _, s := range a.Ports[0].Succ {
		got = append(got, g.Nodes[s].Name)
	}
	if want := []string{"RxL2EthB", "RxL2C", "RxD", "E"}; !cmp.Equal(got, want) {
		t.Errorf("successors %v, want %v", got, want)
	}
	f, ok := g.Lookup("F")
	if !ok {
		t.Fatalf("a declaration .F in cluster Tx should be F")
	}
	if g.Nodes[f.Ports[0].Succ[0]].Name != "G" {
		t.Errorf("references inside .F resolve from the cluster it is written in, as in Unicorn")
	}
}

// TestDuplicateBindsFirst checks the lenient duplicate rule.
func TestDuplicateBindsFirst(t *testing.T) {
	src := `graph g {
    node A { port out[X] }
    node X { attr "first" }
    node X { attr "second" }
}`
	g, _, diags := dsl.Load("d.unicorn", []byte(src))
	if diags.HasErrors() || len(diags) != 2 {
		t.Fatalf("want a duplicate warning and an unreachable warning, got %v", diags)
	}
	if len(g.Nodes) != 3 {
		t.Errorf("both declarations should exist, have %d nodes", len(g.Nodes))
	}
	a, _ := g.Lookup("A")
	if got := g.Nodes[a.Ports[0].Succ[0]].Attrs[0]; got != "first" {
		t.Errorf("reference bound to the %s declaration", got)
	}
}

// TestCheckCounts pins the numbers `check -v` prints for the everything file.
func TestCheckCounts(t *testing.T) {
	path := filepath.Join(root, "testdata/unicorn/everything.unicorn")
	g, _, diags := dsl.Load(rel(path), read(t, path))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	nodes, edges, spawns := len(g.Nodes), len(g.Edges()), g.SpawnEdges()
	if nodes != 23 || edges != 29 || spawns != 3 {
		t.Errorf("got %d nodes, %d edges, %d spawn edges; want 23, 29, 3", nodes, edges, spawns)
	}
}

// TestLongForm checks the caret rendering.
func TestLongForm(t *testing.T) {
	_, _, diags := dsl.Load("x.unicorn", []byte("graph g {\n\tnode A { port out[Bee] }\n\tnode Be {}\n}\n"))
	if len(diags) == 0 {
		t.Fatal("no diagnostics")
	}
	want := "x.unicorn:2:20: error: unknown node \"Bee\"; did you mean \"Be\"? [E201]\n    \tnode A { port out[Bee] }\n    \t                  ^^^"
	if got := diags[0].Long(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// FuzzParse feeds arbitrary bytes to the parser, the lowering and the
// formatter: nothing may panic, and whatever parses must format to text
// that parses to the same tree.
func FuzzParse(f *testing.F) {
	for _, path := range globAll(f, "testdata/graphs/*", "testdata/unicorn/*.unicorn", "testdata/bad/*.unicorn", "testdata/bad/*.prg", "examples/*", "nics/*.prg") {
		if b, err := os.ReadFile(path); err == nil && !strings.HasSuffix(path, ".golden") {
			f.Add(b)
		}
	}
	// Deep nesting, within and beyond the limits (the seeds the first
	// fuzzing never reached).
	for _, depth := range []int{100, 255, 300} {
		f.Add([]byte("graph g { node A { port out[] predicate out \"" + strings.Repeat("not(", depth) + "pred(A,out)" + strings.Repeat(")", depth) + "\" } }"))
		f.Add([]byte("graph g { node A { port out[] predicate out \"" + strings.Repeat("!", depth) + "udp.dport == 1\" } }"))
		f.Add([]byte("graph g { " + strings.Repeat("cluster C { ", depth) + "node A { port out[] }" + strings.Repeat(" }", depth) + " }"))
		f.Add([]byte("graph g { node A { port out[] semantics out { " + strings.Repeat("(", depth) + strings.Repeat(")", depth) + " } } }"))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, diags := dsl.Parse("fuzz", src)
		if s.AST == nil {
			t.Fatal("no tree")
		}
		if diags.HasErrors() {
			// A partial tree holds what parsed: it formats to a file
			// that parses.
			if s.AST.Graph == nil && s.AST.Stack == nil {
				return
			}
			if _, more := dsl.Parse("fuzz", dsl.Format(s)); more.HasErrors() {
				t.Fatalf("the partial tree formats to a file that does not parse: %v", more)
			}
			return
		}
		if s.AST.Graph != nil {
			dsl.Lower(s)
		}
		out := dsl.Format(s)
		s2, diags := dsl.Parse("fuzz", out)
		if diags.HasErrors() {
			t.Fatalf("formatted output does not parse: %v\ninput:\n%q\noutput:\n%q", diags.Error(), src, out)
		}
		if !bytes.Equal(dsl.Format(s2), out) {
			t.Fatalf("formatting is not idempotent on %q", src)
		}
		// reflect.DeepEqual without positions first: go-cmp compares
		// slices twice at every level of nesting, which deep (but legal)
		// inputs make exponential; cmp.Diff only explains a failure.
		zeroPositions(reflect.ValueOf(s.AST))
		zeroPositions(reflect.ValueOf(s2.AST))
		if reflect.DeepEqual(s.AST, s2.AST) {
			return
		}
		if diff := cmp.Diff(s.AST, s2.AST, cmpopts.IgnoreTypes(lexer.Position{})); diff != "" {
			t.Fatalf("formatting changed the tree of %q:\n%s", src, diff)
		}
	})
}

// zeroPositions clears every lexer.Position reachable from v, so that
// two trees parsed from different texts compare by structure alone.
func zeroPositions(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroPositions(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			zeroPositions(v.Index(i))
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(lexer.Position{}) {
			if v.CanSet() {
				v.Set(reflect.Zero(v.Type()))
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				zeroPositions(v.Field(i))
			}
		}
	}
}

func globAll(t testing.TB, patterns ...string) []string {
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rel names a file relative to the repository root, as a user would.
func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// TestSeveralSyntaxErrors: syntax errors in separate declarations are all
// reported, in order, without cascades.
func TestSeveralSyntaxErrors(t *testing.T) {
	path := filepath.Join(root, "testdata/bad/three_syntax_errors.unicorn")
	_, _, diags := dsl.Load(rel(path), read(t, path))
	var got []string
	for _, d := range diags {
		line, col := d.Range.File.Position(d.Range.Start)
		got = append(got, fmt.Sprintf("%d:%d %s", line, col, d.Code))
	}
	want := []string{"2:25 E110", "4:41 E110", "6:23 E110"}
	if !cmp.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestDragonetAtoms: Unicorn pred() atoms keep Dragonet's meaning, with a
// warning wherever dragonc cannot check them (modelled on Dragonet's
// lpgConfImpl-offload and prgE10kImpl-minimal, which use all three).
func TestDragonetAtoms(t *testing.T) {
	src := `graph g {
    node ClassifyL3 {
        port ipv4[Valid]
        port invalid[]
        port unknown[]
        predicate ipv4 "pred(EthType, IPv4)"
        predicate invalid "pred(EthType,Invalid)"
        predicate unknown "not(or(pred(EthType,IPv4),pred(EthType,ARP)))"
    }
    boolean Valid {
        port true false[Out]
        predicate true "pred(ClassifyL3,ipv4)"
        predicate false "pred(ClasifyL3,ipv4)"
    }
    node Out {
        port out[]
        predicate out "pred(Valid,maybe)"
    }
}`
	_, _, diags := dsl.Load("a.unicorn", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var got []string
	for _, d := range diags {
		line, col := d.Range.File.Position(d.Range.Start)
		got = append(got, fmt.Sprintf("%d:%d %s %s", line, col, d.Code, d.Detail))
	}
	want := []string{
		`7:33 W311 no frame satisfies it by itself, and it excludes every other value of EthType, as in Dragonet`,
		`13:31 W312 did you mean "ClassifyL3"?`,
		`17:29 W313 its ports are true, false`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDragonetModels loads the Dragonet models this repository ships
// (nics/dragonet, testdata/unicorn/dragonet) and, with
// DRAGONC_DRAGONET=/path/to/dragonet, every Unicorn file of a Dragonet
// checkout (github.com/BarrelfishOS/dragonet).
func TestDragonetModels(t *testing.T) {
	dirs := []string{"../nics/dragonet", "../testdata/unicorn/dragonet"}
	if dir := os.Getenv("DRAGONC_DRAGONET"); dir != "" {
		dirs = append(dirs, dir)
	}
	for _, dir := range dirs {
		loadUnicornTree(t, dir)
	}
}

func loadUnicornTree(t *testing.T, dir string) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".unicorn") {
			return err
		}
		n++
		if _, _, diags := dsl.Load(path, read(t, path)); diags.HasErrors() {
			t.Errorf("%s:\n%s", path, diags.Error())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no .unicorn file under %s", dir)
	}
	t.Logf("%d Unicorn models loaded", n)
}

// TestHostileInputs: inputs built to crash, hang or exhaust memory get a
// positioned diagnostic instead.
func TestHostileInputs(t *testing.T) {
	rep := strings.Repeat
	cases := []struct {
		name, src, code string
	}{
		{"not( nested 100,000 deep", `graph g { node A { port out[] predicate out "` + rep("not(", 100000) + "pred(A,out)" + rep(")", 100000) + `" } }`, "E310"},
		{"! repeated 1,000,000 times", `graph g { node A { port out[] predicate out "` + rep("!", 1000000) + `udp.dport == 1" } }`, "E310"},
		{"types nested 1,000,000 deep", "graph g { node A { type " + rep("<", 1000000) + "UInt" + rep(">", 1000000) + " } }", "E111"},
		{"1,000,000 parentheses in semantics", `graph g { node A { port out[] semantics out { ` + rep("(", 1000000) + rep(")", 1000000) + ` } } }`, "E111"},
		{"10,000 nested clusters", "graph g { " + rep("cluster C { ", 10000) + "node A { port out[] }" + rep(" }", 10000) + " }", "E111"},
		{"40 ranges of 65,535 nodes", "graph g {\n" + rep(" node Q0..65534 { port out[] }\n", 40) + "}", "E207"},
		{"a byte-order mark", "\ufeffgraph g { node A { port out[] } }", "E113"},
		{"an unclosed brace", "graph g {\n node A { port out[] }\n", "E114"},
		{"an IPv6 listener", "stack s {\n interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n endpoint a udp listen [::1]:53\n}", "E515"},
		{"a MAC with letters", "stack s {\n interface eth0 { mac zz:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n}", "E504"},
	}
	for _, c := range cases {
		s, diags := dsl.Parse("h", []byte(c.src))
		if !diags.HasErrors() && s.AST != nil && s.AST.Graph != nil {
			_, more := dsl.Lower(s)
			diags = append(diags, more...)
		}
		found := false
		for _, d := range diags {
			found = found || d.Code == c.code && d.Range.File != nil
		}
		if !found {
			t.Errorf("%s: want %s, got %v", c.name, c.code, diags)
		}
	}
	big := make([]byte, dsl.MaxSource+1)
	if _, diags := dsl.Parse("big", big); !diags.HasErrors() || diags[0].Code != "E112" {
		t.Errorf("a file over the size limit: %v", diags)
	}
}

// TestHugeNames: a name as long as a file is quoted by its first
// characters and its length in every message about it, here a stack's, an
// endpoint's, a node's, a graph's and a token's where none goes (a 50 MB
// stack name was repeated whole in an error).
func TestHugeNames(t *testing.T) {
	huge := strings.Repeat("N", 50<<20)
	big := huge[:1<<20]
	iface := "interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }\n"
	for _, c := range []struct{ src, code string }{
		{"stack " + huge + " { }", "E512"},
		{"stack s { " + iface + " endpoint " + big + " udp listen *:53\n endpoint " + big + " udp listen *:54 }", "E501"},
		{"stack s { " + iface + " endpoint e " + big + " listen *:53 }", "E508"},
		{"stack s { " + iface + " endpoint e udp listen *:53 { class " + big + " } }", "E509"},
		{"stack s { " + big + " }", "E110"},
		{"graph g { node " + big + " { port out[] } node " + big + "x { port out[" + big + "y] } }", "E201"},
		{"graph g { node A { port out[B] } node B { port " + big + " [] predicate out \"x\" } }", "E206"},
		{"graph " + big + " { }", "W333"},
	} {
		var diags diag.List
		if strings.HasPrefix(c.src, "stack") {
			_, diags = lpg.LoadStack("huge.lpg", []byte(c.src))
		} else {
			_, _, diags = dsl.Load("huge.prg", []byte(c.src))
		}
		found := false
		for _, d := range diags {
			found = found || d.Code == c.code
			if len(d.String()) > 1024 || len(d.Long()) > 2048 {
				t.Errorf("%s: a diagnostic of %d bytes (%d long): %.300s", c.code, len(d.String()), len(d.Long()), d.String())
			}
		}
		if !found {
			t.Errorf("want %s, got %.1000v", c.code, diags)
		}
	}
}

// TestManyPortsAndUnknownNames stays linear: 100,000 ports on one node and
// 10,000 unknown references (both quadratic once).
func TestManyPortsAndUnknownNames(t *testing.T) {
	var b strings.Builder
	b.WriteString("graph g {\n node A {")
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&b, " port p%d[]", i)
	}
	b.WriteString(" }\n}\n")
	if _, _, diags := dsl.Load("ports", []byte(b.String())); diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	b.Reset()
	b.WriteString("graph g {\n node A { port out[")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&b, " Unknown%d", i)
	}
	b.WriteString("] }\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, " node N%d { port out[] }\n", i)
	}
	b.WriteString("}\n")
	_, _, diags := dsl.Load("unknown", []byte(b.String()))
	n := 0
	for _, d := range diags {
		if d.Code == diag.CodeUnknownNode {
			n++
		}
	}
	if n == 0 || len(diags.Shown()) > 2*diag.MaxShown+2 {
		t.Errorf("%d unknown-node errors, %d shown", n, len(diags.Shown()))
	}
}

// TestPartialTree: like go/parser, Parse returns a tree on a syntax error,
// without the declarations that hold errors, and its errors sorted.
func TestPartialTree(t *testing.T) {
	src := "graph g {\n  node A { port o[B] }\n  node B { port o[C] port }\n  node C { port o[] }\n  node D { port ]] }\n}\n"
	s, diags := dsl.Parse("p.unicorn", []byte(src))
	if !diags.HasErrors() || s.AST == nil || s.AST.Graph == nil {
		t.Fatalf("tree %v, diagnostics %v", s.AST, diags)
	}
	var names []string
	for _, d := range s.AST.Graph.Decls {
		if d.Node != nil {
			names = append(names, d.Node.Name.Text)
		}
	}
	if !slices.Equal(names, []string{"A", "C"}) {
		t.Errorf("partial tree holds nodes %v, want A and C", names)
	}
	if len(diags) != 2 || diags[0].Range.Start > diags[1].Range.Start {
		t.Errorf("want two sorted errors, got %v", diags)
	}
	s, diags = dsl.Parse("q.lpg", []byte("stack s { endpoint"))
	if !diags.HasErrors() || s.AST == nil || s.AST.Stack != nil {
		t.Errorf("a file with no whole declaration: tree %v, %v", s.AST, diags)
	}
}

// TestOneErrorLimit: syntax recovery reports errors up to the limit every
// diagnostic list keeps (diag.MaxErrors), one per broken declaration.
func TestOneErrorLimit(t *testing.T) {
	broken := func(n int) []byte {
		var b strings.Builder
		b.WriteString("graph g {\n")
		for i := range n {
			fmt.Fprintf(&b, "  node N%d { port ]] }\n", i)
		}
		b.WriteString("  node OK { port o[] }\n}\n")
		return []byte(b.String())
	}
	for _, c := range []struct{ nodes, want int }{{3, 3}, {30, 30}, {diag.MaxErrors + 10, diag.MaxErrors}} {
		_, diags := dsl.Parse("many.unicorn", broken(c.nodes))
		if len(diags) != c.want {
			t.Errorf("%d broken nodes: %d diagnostics, want %d: %v", c.nodes, len(diags), c.want, diags)
		}
	}
}
