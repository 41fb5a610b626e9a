package dsl

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/golden"
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

// TestTokens: the scanner's tokens of the inputs where one kind's match
// stops and another's starts, with their positions, as expected
// (testdata/tokens.golden).
func TestTokens(t *testing.T) {
	var b strings.Builder
	for _, src := range tricky {
		fmt.Fprintf(&b, "%q\n", src)
		lx, _ := Lexer.(scanDef).LexString("tricky", src)
		for {
			tok, _ := lx.Next()
			if tok.EOF() {
				break
			}
			if tok.Type == kindType[kWhitespace] {
				continue
			}
			fmt.Fprintf(&b, "\t%d:%d %s %q\n", tok.Pos.Line, tok.Pos.Column, kindNames[kindOf(tok.Type)], tok.Value)
		}
	}
	golden.Check(t, "../testdata/tokens.golden", []byte(b.String()))
}

func kindOf(tt lexer.TokenType) kind { return kind(lexer.EOF - tt) }

// FuzzScanner: whatever the input, the tokens, whitespace included, are
// the input cut into pieces, in order, and each starts at the line and
// column diag.File gives its offset.
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
		checkScan(t, src)
	})
}

func checkScan(t *testing.T, src string) {
	file := diag.NewFile("fuzz", []byte(src))
	lx, _ := Lexer.(scanDef).LexString("fuzz", src)
	var whole strings.Builder
	for i := 0; ; i++ {
		tok, _ := lx.Next()
		if tok.EOF() {
			break
		}
		if tok.Pos.Offset != whole.Len() || tok.Value == "" {
			t.Fatalf("token %d %q at offset %d, want %d", i, tok.Value, tok.Pos.Offset, whole.Len())
		}
		if line, col := file.Position(tok.Pos.Offset); line != tok.Pos.Line || col != tok.Pos.Column {
			t.Fatalf("token %d %q at %d:%d, want %d:%d", i, tok.Value, tok.Pos.Line, tok.Pos.Column, line, col)
		}
		whole.WriteString(tok.Value)
	}
	if whole.String() != src {
		t.Fatalf("the tokens make %q, not %q", whole.String(), src)
	}
}

// TestScannerPieces is FuzzScanner on every file of the repository and on
// the tricky inputs.
func TestScannerPieces(t *testing.T) {
	for _, src := range repoFiles(t) {
		checkScan(t, src)
	}
	for _, src := range tricky {
		checkScan(t, src)
		checkScan(t, "x "+src+" y")
	}
}

// TestStackParserAgrees: the generated parser builds participle's
// tree, with positions, for every stack in the repository and generated
// ones, and stops exactly where participle finds a syntax error.
func TestStackParserAgrees(t *testing.T) {
	n := 0
	for name, src := range repoFiles(t) {
		if f := checkHandParse(t, name, src); f != nil && f.Stack != nil {
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d files in the repository are stacks", n)
	}
	for _, flowsFirst := range []bool{false, true} {
		src := string(stackgen.Mixed(300, flowsFirst))
		if checkHandParse(t, "mixed", src) == nil {
			t.Fatal("a generated stack does not parse")
		}
		// Each line cut short, and each token dropped, somewhere.
		lines := strings.SplitAfter(src, "\n")
		for i := 1; i < len(lines); i += 7 {
			cut := strings.Join(lines[:i], "") + lines[i][:len(lines[i])/2] + strings.Join(lines[i+1:], "")
			checkHandParse(t, "cut", cut)
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
		"stack s { service icmp-errors { rate 1000pps burst 50 peer-rate 1pps peer-burst 6 } }",
		"stack s { service icmp-errors {} service arp { } service icmp-echo }", "stack s { service icmp-errors { rate } }",
		"stack s { service icmp-errors { rate 5 kpps nodelay burst 1..2 x \"s\" w .y } }", "stack s { service icmp-errors {",
		"stack s { service { rate 1pps } }", "stack s { service x { 3 } }", "stack s { service x { rate 1pps } endpoint e udp 7 {} }",
		"stack s { service x } { }", "stack s { service x { rate 1pps }", "stack s { service x { nodelay } }",
	} {
		checkHandParse(t, "case", src)
	}
}

// TestGraphParserAgrees is TestStackParserAgrees for graph files: every
// model in the repository, each cut short and with tokens dropped, and the
// places where participle's choices with one token of lookahead decide.
func TestGraphParserAgrees(t *testing.T) {
	var graphs atomic.Int32
	t.Run("files", func(t *testing.T) {
		for name, src := range repoFiles(t) {
			t.Run(name, func(t *testing.T) {
				t.Parallel() // independent files: both cores
				f := checkHandParse(t, name, src)
				if f == nil || f.Graph == nil {
					return
				}
				graphs.Add(1)
				// Each line cut short, and each line dropped, somewhere.
				lines := strings.SplitAfter(src, "\n")
				for i := 1; i < len(lines); i += 5 {
					checkHandParse(t, name+" cut", strings.Join(lines[:i], "")+lines[i][:len(lines[i])/2]+strings.Join(lines[i+1:], ""))
					checkHandParse(t, name+" dropped", strings.Join(lines[:i], "")+strings.Join(lines[i+1:], ""))
				}
			})
		}
	})
	if n := graphs.Load(); n < 20 {
		t.Fatalf("only %d files in the repository are graphs", n)
	}
	for _, src := range graphCases {
		checkHandParse(t, "case", "graph g { "+src+" }")
	}
}

// graphCases are declarations where participle's ordered choice, its one
// token of lookahead or an optional part decides.
var graphCases = []string{
	"config C { type Enum }", "config C { type Enum 3 }", "config C { type Enum (a) }", "config C { type Enum ( 3 ) }",
	"config C { type Enum (a, b) <3> }", "config C { type UInt 8 <1,2> }", "config C { type < UInt 8 > }",
	"config C { type UInt 8 < }", "config C { type UInt 8 < 3 x }", "config C { type (a: UInt 8 <3>) }",
	"config C { type (a: UInt, ) }", "config C { type < UInt < > > }", "config C { type < UInt > < 3 > }",
	"node A { spawn a b [ x ] }", "node A { spawn a b [ predicate \"x\" ] [predicate \"y\"] }",
	"engine E { x 5 B 7 }", "engine E { x 5 B y 7 }", "engine E { x - y }", "engine E { x [1 2 [a b] \"s\" 3..4 MHz] }",
	"engine E { x [] y 1..2 }", "engine E { x 5..x }", "engine E { x 5 .. -3 percent }",
	"helpers { ( ( ) { } abc \"x\" ; c\n |sym| /* q */ ) }", "helpers { ( ( ) { } abc \"x\" ; c\n |sym| /* q */ } }",
	"helpers { ) }", "helpers { ", "helpers { é @ # }", "helpers { { ( } ) }",
	"node A { port a b [ c d..3 e ] }", "node A { port [ c ] }", "node A..3 { }", "node A..x { }", "node A.. { }",
	"node A { type UInt }", "node A { type .x }", "node A { type UInt 8 8 8 }", "node A { type UInt -8 }", "node A { type UInt - }",
	"node A { type (a: UInt, b: Bool) }", "node A { type () }", "node A { type <> }", "node A { type UInt <,> }",
	"node A { type UInt <,3> }", "node A { type UInt < - > }", "node A { cost a -3 }", "node A { cost a - 3 }", "node A { cost a -x }",
	"config A { table { a b } }", "config A { enum { } }", "node A { semantics a b { x } }", "node A { semantics { x } }",
	"node A { attr \"x\" implementation I function F constraint p \"c\" predicate p \"q\" }",
	"cluster C { node A { } cluster D { } helpers { } } task T { }", "resources R { driver \"x\" }", "cluster { }",
	"node node { port port [ port ] }", "node A { port a [ .b ..c ] }", "node A { port a [ b.. ] }",
	"node é { }", "node Aé { }", "node A { port o [ Tx€ ] }",
}

// checkHandParse compares the generated parser with participle on src
// and returns the tree when participle accepts it.
func checkHandParse(t *testing.T, name, src string) *File {
	t.Helper()
	want, err := parser.ParseString(name, src)
	got, h := handParse(name, src, nil, false, nil, -1)
	_, dry := handParse(name, src, nil, true, nil, -1)
	if (h == nil) != (dry == nil) {
		t.Fatalf("%s: the dry parser decides otherwise (%v, dry %v):\n%s", name, h, dry, src)
	}
	if err != nil {
		if h == nil {
			t.Fatalf("%s: participle rejects (%v) but the generated parser accepts:\n%s", name, err, src)
		}
		return nil
	}
	if h != nil {
		t.Fatalf("%s: participle accepts but the generated parser stops at offset %d:\n%s", name, h.at.off, src)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: the trees differ (-participle +generated parser):\n%s", name, diff)
	}
	return got
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
	f.Add("stack s { service icmp-errors { rate 1.5kpps burst 50 peer-rate 0.5pps peer-burst 6 } service arp }")
	f.Add("stack s { service icmp-errors { } service icmp-errors { rate 1 } }")
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) || len(src) > 1<<16 {
			return
		}
		checkHandParse(t, "fuzz", src)
	})
}

func FuzzGraphParser(f *testing.F) {
	for _, src := range repoFiles(f) {
		if strings.Contains(src, "graph") {
			f.Add(src)
		}
	}
	for _, src := range graphCases {
		f.Add("graph g { " + src + " }")
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) || len(src) > 1<<16 {
			return
		}
		checkHandParse(t, "fuzz", src)
	})
}
