package dsl

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/internal/stackgen"
)

// repoFiles returns every language file in the repository, the malformed
// ones included.
func repoFiles(t testing.TB) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "out") {
			return filepath.SkipDir
		}
		switch filepath.Ext(p) {
		case ".prg", ".lpg", ".unicorn":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(p)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d language files", len(out))
	}
	return out
}

// tricky are inputs at the edges of the token rules: where one rule's
// match stops and another's starts.
var tricky = []string{
	"", "a", "1", ".", "..", "...", "..a", ".a.b", "a.b-c.d", "a..b", "a-1", "a->b", "-", "->", "-->",
	"1.2", "1.2.3", "1.2.", "1..2", "1.2.3.4.5", "10.0.0.1:80", "10.0.0.1:80..90", "1:2", "1:2:3", "ab:cd:ef",
	"ab:cd:efg", "ab:cd:", "dead:beef:x", "0a", "1abc:de:f0", "face.b00c", "00:1b:21:3a:4b:5c",
	`"a"`, `"a\"b"`, `"a\\"`, `"a\`, "\"a\nb\"", `"a\é"`, `"é"`, `"`, `""`,
	"//", "// x\ny", "/*", "/* a */", "/***/", "/*/", "/* a **/b", "/* **a*/", "/* a *", "/", "/x",
	";", "; x\ny", "|", "|a|", "|a\nb|", "|a", "a|b|c",
	" \t\r\n\f\v", "é", "a é b", "\x00", "{[(<>)]}", "*", "@#$%^&", "µs",
}

// TestScannerAgreesWithLexer: the scanner gives exactly the tokens of the
// rule list Lexer, with positions, on every file in the repository and on
// the inputs where rules meet.
func TestScannerAgreesWithLexer(t *testing.T) {
	for name, src := range repoFiles(t) {
		checkScan(t, name, src)
	}
	for _, src := range tricky {
		checkScan(t, "tricky", src)
		checkScan(t, "tricky", "x "+src+" y")
		checkScan(t, "tricky", src+src)
	}
}

func checkScan(t *testing.T, name, src string) {
	t.Helper()
	lx, err := Lexer.LexString(name, src)
	if err != nil {
		t.Fatalf("%s: Lexer: %v", name, err)
	}
	r := &replay{toks: scan(src), file: name, src: src}
	for i := 0; ; i++ {
		want, err := lx.Next()
		if err != nil {
			t.Fatalf("%s: Lexer: %v", name, err)
		}
		got, _ := r.Next()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: token %d differs (-Lexer +scanner):\n%s", name, i, diff)
		}
		if want.EOF() {
			if r.i != len(r.toks)-1 {
				t.Fatalf("%s: Lexer ends at token %d, the scanner has %d more", name, i, len(r.toks)-1-r.i)
			}
			return
		}
	}
}

func FuzzScanner(f *testing.F) {
	for _, src := range repoFiles(f) {
		f.Add(src)
	}
	for _, src := range tricky {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) {
			return // Parse refuses it before scanning
		}
		checkScan(t, "fuzz", src)
	})
}

// TestStackParserAgrees: the stack parser builds participle's tree, with
// positions, for every stack in the repository and generated ones, and
// gives up exactly where participle finds a syntax error.
func TestStackParserAgrees(t *testing.T) {
	n := 0
	for name, src := range repoFiles(t) {
		if checkStackParse(t, name, src) {
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d files in the repository are stacks", n)
	}
	for _, flowsFirst := range []bool{false, true} {
		src := string(stackgen.Mixed(300, flowsFirst))
		if !checkStackParse(t, "mixed", src) {
			t.Fatal("a generated stack does not parse")
		}
		// Each line cut short, and each token dropped, somewhere.
		lines := strings.SplitAfter(src, "\n")
		for i := 1; i < len(lines); i += 7 {
			cut := strings.Join(lines[:i], "") + lines[i][:len(lines[i])/2] + strings.Join(lines[i+1:], "")
			checkStackParse(t, "cut", cut)
		}
	}
	for _, src := range []string{
		"stack s { }", "stack s { } x", "stack s {", "stack s { endpoint e udp }", "stack s { endpoint e udp 7 { a 1 } }",
		"stack s { endpoint e udp -7 }", "stack s { endpoint e udp - }", "stack s { cores 1, }", "stack s { cores -1..-2, 3 }",
		"stack s { endpoint e udp listen *:1..2 { rate 5 kpps cores 1,2 B b 3 B app \"x\" w .x } }",
		"stack s { endpoint e tcp flow 1.2.3.4:5 -> 6.7.8.9:10 }", "stack s { endpoint e tcp flow *:5 -> *:10 {} }",
		"stack s { interface i { mac 1:2:3 ip 1.2.3.4/24 ip a/1 mtu -9 } }", "stack s { interface i { mac x } }",
		"stack s { service .x service y.z }", "stack s { endpoint e udp listen a:1 }", "stack s { endpoint e udp ; }",
		"// c\nstack /* c */ s { // c\n endpoint e udp listen *:1 // c\n}\n// c", "stack .s { }", "stack s { endpoint .e .k }",
		"graph g { }", "stack", "", "stack s { endpoint e udp listen *:1 { rate } }",
	} {
		checkStackParse(t, "case", src)
	}
}

// checkStackParse compares the two parsers on src and reports whether it
// is a well-formed stack.
func checkStackParse(t *testing.T, name, src string) bool {
	t.Helper()
	want, err := parser.ParseString(name, src)
	got := parseStack(scan(src), name, src)
	if err != nil || want.Stack == nil {
		if got != nil {
			t.Fatalf("%s: participle rejects or is not a stack (%v) but the stack parser accepts:\n%s", name, err, src)
		}
		return false
	}
	if got == nil {
		t.Fatalf("%s: participle accepts but the stack parser gives up:\n%s", name, src)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: the trees differ (-participle +stack parser):\n%s", name, diff)
	}
	return true
}

func FuzzStackParser(f *testing.F) {
	for _, src := range repoFiles(f) {
		if strings.Contains(src, "stack") {
			f.Add(src)
		}
	}
	f.Add(string(stackgen.Mixed(40, true)))
	f.Add("stack s { endpoint a tcp flow 1.2.3.4:1 -> 1.2.3.5:2 { nodelay message 4KiB nodelay } }")
	f.Add("stack s { endpoint a tcp flow 1.2.3.4:1 -> 1.2.3.5:2 { nodelay 3 } }")
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) || len(src) > 1<<16 {
			return
		}
		checkStackParse(t, "fuzz", src)
	})
}
