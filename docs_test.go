package dragonc_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
)

// userDocs are the documents a user of the repository reads.
func userDocs(t *testing.T) []string {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil || len(docs) < 5 {
		t.Fatalf("docs/: %v, %d files", err, len(docs))
	}
	return append([]string{"README.md"}, docs...)
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link of the README and docs/ leads to a
// file of the repository (and an anchor to a heading there), and nothing
// points outside the repository.
func TestDocLinks(t *testing.T) {
	for _, doc := range userDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.Contains(text, "../shared") || strings.Contains(text, "shared/design") {
			t.Errorf("%s points outside the repository", doc)
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			dest, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %s: %v", doc, target, err)
				continue
			}
			if anchor != "" && !hasHeading(string(dest), anchor) {
				t.Errorf("%s: link %s: no heading for #%s in %s", doc, target, anchor, path)
			}
		}
	}
}

// hasHeading reports whether markdown text has a heading whose GitHub
// anchor is a.
func hasHeading(text, a string) bool {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		if b.String() == a {
			return true
		}
	}
	return false
}

// TestNoInternalCitations: code, models and examples cite documents of the
// repository or papers by title, not the design notes or paper files the
// project was started from.
func TestNoInternalCitations(t *testing.T) {
	bad := regexp.MustCompile(`\b(NICS|STYLE|CLI|DSL|COSTMODEL|ARCHITECTURE)\.md\b|[0-9a-f]{16}\.txt|\.\./shared`)
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, d) {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".prg", ".lpg", ".md", ".unicorn":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if path != "docs_test.go" && bad.MatchString(line) {
				t.Errorf("%s:%d cites %q", path, i+1, bad.FindString(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLanguageReference: the language reference lists every field of the
// vocabulary, and its examples load.
func TestLanguageReference(t *testing.T) {
	b, err := os.ReadFile("docs/language.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, name := range pred.FieldNames() {
		if !strings.Contains(text, "`"+name+"`") {
			t.Errorf("docs/language.md does not document the field %s", name)
		}
	}
	for _, l := range pred.Layers {
		row := "| `" + l.Name + "` | "
		i := strings.Index(text, row)
		if i < 0 {
			t.Errorf("docs/language.md has no row for the header %s", l.Name)
			continue
		}
		line, _, _ := strings.Cut(text[i:], "\n")
		for _, c := range l.When {
			if !strings.Contains(line, "`"+c.Field) {
				t.Errorf("docs/language.md: the row of %s does not name %s", l.Name, c.Field)
			}
		}
	}
	blocks := regexp.MustCompile("(?s)```\n(.*?)```").FindAllStringSubmatch(text, -1)
	n := 0
	decl := regexp.MustCompile(`^(graph|stack) \w+ \{`)
	for _, m := range blocks {
		src := m[1]
		switch kind := decl.FindStringSubmatch(src); {
		case kind == nil:
		case kind[1] == "graph":
			n++
			if _, _, diags := dsl.Load("docs/language.md", []byte(src)); diags.HasErrors() {
				t.Errorf("an example does not load:\n%s\n%s", src, diags.Error())
			}
		default:
			n++
			if st, diags := lpg.LoadStack("docs/language.md", []byte(src)); st == nil {
				t.Errorf("an example stack does not load:\n%s\n%s", src, diags.Error())
			}
		}
	}
	if n < 2 {
		t.Errorf("only %d examples checked", n)
	}
}

// squash joins a document's words with single spaces, so that a sentence
// can be found whatever its line breaks.
func squash(text string) string { return strings.Join(strings.Fields(text), " ") }

var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans returns the code spans of s, in order.
func spans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// between returns the text of s after the first occurrence of start and
// before the next end.
func between(t *testing.T, doc, s, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		t.Fatalf("%s no longer says %q", doc, start)
	}
	in, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("%s: nothing ends %q with %q", doc, start, end)
	}
	return in
}

// tableAfter returns the cells of the first markdown table after the
// first line of text that contains marker, without its header.
func tableAfter(t *testing.T, doc, text, marker string) [][]string {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("%s no longer says %q", doc, marker)
	}
	var rows [][]string
	for _, line := range strings.Split(text[i:], "\n")[1:] {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "|"):
			line = strings.ReplaceAll(line, `\|`, "\x00")
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|")))
			}
			rows = append(rows, cells)
		case len(rows) > 0:
			if len(rows) < 3 {
				t.Fatalf("%s: the table after %q has no rows", doc, marker)
			}
			return rows[2:]
		}
	}
	if len(rows) < 3 {
		t.Fatalf("%s: no table after %q", doc, marker)
	}
	return rows[2:]
}

// runModels returns the built-in models `dragonc run` serves and those it
// refuses. It serves linux-xdp, the steering stage it builds itself, and
// every model with a Linux driver dragonc knows; without a driver embed
// makes the plan for the whole silicon, which run refuses (run.prepare).
func runModels(t *testing.T) (serves, refuses []string) {
	for _, name := range nics.Names() {
		m, _, err := nics.Load(name)
		if err != nil || m == nil {
			t.Fatalf("model %s: %v", name, err)
		}
		if d, _ := nics.DriverFor(m); d != nil || m.Props["stage"].Str == "ebpf" {
			serves = append(serves, name)
		} else {
			refuses = append(refuses, name)
		}
	}
	return serves, refuses
}

// TestDocNICs: the documents list every built-in model of the registry
// (package nics, `dragonc nics`) and no other, and say which ones
// `dragonc run` serves.
func TestDocNICs(t *testing.T) {
	want := nics.Names()
	b, err := os.ReadFile("docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	cli := squash(string(b))
	if got := spans(between(t, "docs/cli.md", cli, "A NIC argument is a built-in model (`dragonc nics`:", ";")); !slices.Equal(got, want) {
		t.Errorf("docs/cli.md lists the NIC models %v; the registry has %v", got, want)
	}
	serves, refuses := runModels(t)
	got := spans(between(t, "docs/cli.md", cli, "`dragonc run` serves on these built-in models:", ". "))
	if !sameSet(got, serves) {
		t.Errorf("docs/cli.md says dragonc run serves %v; it serves %v", got, serves)
	}
	got = spans(between(t, "docs/cli.md", cli, "`run` refuses", ":"))
	if !sameSet(got, refuses) {
		t.Errorf("docs/cli.md says dragonc run refuses %v; it refuses %v", got, refuses)
	}
	b, err = os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := between(t, "README.md", string(b), "# built-in models: ", "\n")
	if got := strings.Split(strings.TrimSpace(line), ", "); !slices.Equal(got, want) {
		t.Errorf("the README's tour lists the NIC models %v; the registry has %v", got, want)
	}
	b, err = os.ReadFile("docs/nics.md")
	if err != nil {
		t.Fatal(err)
	}
	var headed []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			for _, s := range spans(line) {
				if nics.IsBuiltin(s) {
					headed = append(headed, s)
				}
			}
		}
	}
	if !sameSet(headed, want) {
		t.Errorf("docs/nics.md has sections for %v; the registry has %v", headed, want)
	}
}

// TestDocStrategies: docs/cli.md's --strategy row names the search
// strategies in the order dragonc lists them, and docs/costs.md's table
// of search strategies has a row for each and for nothing else.
func TestDocStrategies(t *testing.T) {
	want := embed.Strategies()
	b, err := os.ReadFile("docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	row := between(t, "docs/cli.md", string(b), "| `--strategy ", "`")
	if got := strings.Split(row, `\|`); !slices.Equal(got, want) {
		t.Errorf("docs/cli.md's --strategy row lists %v; dragonc has %v", got, want)
	}
	b, err = os.ReadFile("docs/costs.md")
	if err != nil {
		t.Fatal(err)
	}
	table := between(t, "docs/costs.md", string(b), "| `--strategy` | what it does |\n| --- | --- |\n", "\n\n")
	var got []string
	for _, line := range strings.Split(table, "\n") {
		if sp := spans(strings.SplitN(line, " | ", 2)[0]); len(sp) > 0 {
			got = append(got, sp[0])
		}
	}
	if !sameSet(got, want) {
		t.Errorf("docs/costs.md's table of search strategies has rows for %v; dragonc has %v", got, want)
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// TestNicsJSONDocumented: every key of `dragonc nics --json` is in the
// table of docs/cli.md, and every key there is in the output. The output
// is testdata/cli/nics.json.golden, which cmd/dragonc's TestNics keeps
// identical to what the command prints.
func TestNicsJSONDocumented(t *testing.T) {
	b, err := os.ReadFile("testdata/cli/nics.json.golden")
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys[prefix+k] = true
				walk(prefix+k, x)
			}
		case []any:
			for _, x := range v {
				walk(prefix+"[].", x)
			}
		}
	}
	walk("", out)
	delete(keys, "nics") // the one top-level key, shown in the sentence above the table
	b, err = os.ReadFile("docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, row := range tableAfter(t, "docs/cli.md", string(b), "* `nics --json`:") {
		for _, k := range spans(row[0]) {
			documented[k] = true
		}
	}
	for k := range keys {
		if !documented[k] {
			t.Errorf("nics --json has the key %s, which docs/cli.md does not document", k)
		}
	}
	for k := range documented {
		if !keys[k] {
			t.Errorf("docs/cli.md documents %s, which nics --json does not have", k)
		}
	}
	if !strings.Contains(string(b), "`nics --json`: `{\"nics\": [...]}`") {
		t.Error("docs/cli.md no longer shows the top-level object of nics --json")
	}
}

// TestOutputTables: the README's and docs/cli.md's tables of what
// `embed -o DIR` writes list exactly the files it writes for stacks and
// NICs that between them make every kind: backends.Files, and the picture
// the command renders with --svg or --png (cmd/dragonc/embed.go).
func TestOutputTables(t *testing.T) {
	cases := []struct {
		nic, stack, target string
		makes              string // the kind of file the case is here for
	}{
		{"82599", "examples/dns_ntp.lpg", embed.TargetLinux, "plan.json"},
		{"myri10g", "examples/mpi_openmx.lpg", embed.TargetLinux, "myri10g-openmx.conf"},
		{"tigon", "examples/web_ssh.lpg", embed.TargetSilicon, "tigon-partition.conf"},
		{"mvia", "examples/cluster_db.lpg", embed.TargetLinux, "sovia.conf"},
		{"82599", "examples/web_and_dns.lpg", embed.TargetLinux, "copies.conf"},
	}
	written := map[string]bool{"embedding.svg": true, "embedding.png": true}
	for _, c := range cases {
		r, st := embedtest.PlanTarget(t, c.nic, c.stack, costmodel.Balance{}, c.target)
		files, err := backends.Files(r, st, c.stack)
		if err != nil {
			t.Fatal(err)
		}
		if files[c.makes] == nil {
			t.Errorf("%s on %s (--target %s) no longer writes %s", c.stack, c.nic, c.target, c.makes)
		}
		for name := range files {
			if dir, _, ok := strings.Cut(name, "/"); ok {
				name = dir + "/"
			}
			written[name] = true
		}
	}
	for _, doc := range []struct{ path, marker string }{
		{"README.md", "`embed -o DIR` writes these files"},
		{"docs/cli.md", "## What `embed -o DIR` writes"},
	} {
		b, err := os.ReadFile(doc.path)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, row := range tableAfter(t, doc.path, string(b), doc.marker) {
			for _, name := range spans(row[0]) {
				listed[name] = true
			}
		}
		for name := range written {
			if !listed[name] {
				t.Errorf("%s: the table of embed -o's files leaves out %s", doc.path, name)
			}
		}
		for name := range listed {
			if !written[name] {
				t.Errorf("%s: the table of embed -o's files lists %s, which embed -o does not write", doc.path, name)
			}
		}
	}
}

// cli is what the documents may quote of the command line, read from
// cmd/dragonc's sources (the root package cannot import package main):
// the commands, named by the first word of each cobra.Command's Use, and
// the flags, long and short, each with whether it takes a value.
type cli struct {
	commands map[string]bool
	flags    map[string]bool // name (or one-letter shorthand) -> takes a value
}

// commandWord is how a command's or subcommand's name is spelled.
var commandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)

var flagCall = regexp.MustCompile(`^(Bool|Count|String|StringArray|StringSlice|Int|IntSlice|Int64|Uint|Uint64|Float64|Duration|)(Var)?(P)?$`)

func readCLI(t *testing.T) cli {
	t.Helper()
	// cobra adds completion, help and --help; --version comes with the
	// root command's Version.
	c := cli{commands: map[string]bool{"completion": true, "help": true}, flags: map[string]bool{"help": false, "h": false, "version": false}}
	files, err := filepath.Glob("cmd/dragonc/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cmd/dragonc: %v", err)
	}
	fset := token.NewFileSet()
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Use" {
					if use, ok := str(n.Value); ok && len(strings.Fields(use)) > 0 && strings.Fields(use)[0] != "dragonc" {
						c.commands[strings.Fields(use)[0]] = true
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				m := flagCall.FindStringSubmatch(sel.Sel.Name)
				if m == nil || m[1] == "" && m[2] == "" {
					return true
				}
				i := 0
				if m[2] != "" {
					i = 1 // XxxVar(&v, name, ...)
				}
				if len(n.Args) <= i {
					return true
				}
				name, ok := str(n.Args[i])
				if !ok {
					return true
				}
				value := m[1] != "Bool" && m[1] != "Count"
				c.flags[name] = value
				if m[3] != "" && len(n.Args) > i+1 {
					if short, ok := str(n.Args[i+1]); ok && short != "" {
						c.flags[short] = value
					}
				}
			}
			return true
		})
	}
	if len(c.commands) < 10 || len(c.flags) < 20 {
		t.Fatalf("read %d commands and %d flags from cmd/dragonc; the sources changed shape", len(c.commands), len(c.flags))
	}
	return c
}

var (
	fence      = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	invocation = regexp.MustCompile(`(?:^|[\s/])dragonc +([-a-z].*)$`)
	quotedDiag = regexp.MustCompile(`^(\S+\.(?:lpg|prg|unicorn)):\d+:\d+: (?:error|warning): .*\[[EW]\d+\]$`)
	// placeholder is an argument a reader replaces: NIC, STACK.lpg, FILE...
	placeholder = regexp.MustCompile(`[A-Z]{2,}|\.\.\.`)
)

// commandLines returns the dragonc command lines a document quotes: in
// code blocks (after a prompt such as `go run ./cmd/dragonc` or `ip netns
// exec NS`, without the comment and what a pipe, redirection or & adds)
// and in code spans of the text. Each is split into words after
// "dragonc", the brackets of a synopsis taken off.
func commandLines(text string) [][]string {
	var lines []string
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if c, _, ok := strings.Cut(line, " #"); ok {
				line = c
			}
			if m := invocation.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				lines = append(lines, m[1])
			}
		}
	}
	for _, s := range spans(fence.ReplaceAllString(text, "")) {
		if rest, ok := strings.CutPrefix(s, "dragonc "); ok {
			lines = append(lines, rest)
		}
	}
	var out [][]string
	for _, line := range lines {
		var words []string
		for _, w := range strings.Fields(line) {
			if strings.ContainsAny(w[:1], "|>&;") || strings.HasPrefix(w, "2>") {
				break
			}
			if w == "[flags]" {
				continue
			}
			if w = strings.Trim(w, "[]"); w != "" && w != `\|` {
				words = append(words, w)
			}
		}
		if len(words) > 0 {
			out = append(out, words)
		}
	}
	return out
}

// TestDocCommands: every dragonc command line the README and docs/ quote
// names a command and flags dragonc has, a NIC of the registry (and for
// run, one it serves) and files of the repository; the command table of
// docs/cli.md has a row for every command.
func TestDocCommands(t *testing.T) {
	c := readCLI(t)
	serves, _ := runModels(t)
	nicArg := map[string]bool{"embed": true, "verify": true, "trace": true, "bench": true, "run": true}
	n := 0
	for _, doc := range userDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, words := range commandLines(string(b)) {
			n++
			line := "dragonc " + strings.Join(words, " ")
			cmd := ""
			var args []string
			for i := 0; i < len(words); i++ {
				w := words[i]
				if !strings.HasPrefix(w, "-") || w == "-" {
					if cmd == "" {
						cmd = w
					} else {
						args = append(args, w)
					}
					continue
				}
				name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
				value, ok := c.flags[name]
				if !ok {
					t.Errorf("%s quotes %q: dragonc has no flag %s", doc, line, w)
				}
				if value && !hasValue {
					i++
				}
			}
			switch {
			case cmd == "":
			case !c.commands[cmd]:
				t.Errorf("%s quotes %q: dragonc has no command %s", doc, line, cmd)
			case cmd == "help" && len(args) > 0 && !c.commands[args[0]]:
				t.Errorf("%s quotes %q: dragonc has no command %s", doc, line, args[0])
			case (nicArg[cmd] || cmd == "dot") && len(args) > 0 && !placeholder.MatchString(args[0]):
				for _, nic := range strings.Split(args[0], "|") { // run mvia|clan1000
					file := strings.Contains(nic, "/") || filepath.Ext(nic) != ""
					switch {
					case !file && !nics.IsBuiltin(nic):
						t.Errorf("%s quotes %q: %s is no built-in model", doc, line, nic)
					case cmd == "run" && !file && !slices.Contains(serves, nic):
						t.Errorf("%s quotes %q: dragonc run does not serve %s", doc, line, nic)
					}
				}
				if nicArg[cmd] && len(args) > 1 && !placeholder.MatchString(args[1]) && filepath.Ext(args[1]) != ".lpg" {
					t.Errorf("%s quotes %q: %s is not a stack file", doc, line, args[1])
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d command lines found in the documents", n)
	}
	b, err := os.ReadFile("docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{"help": true} // `dragonc help` is shown above the table
	for _, row := range tableAfter(t, "docs/cli.md", string(b), "## Commands") {
		for _, s := range spans(row[0]) {
			if rest, ok := strings.CutPrefix(s, "dragonc "); ok {
				// The command and its subcommand (dragonc sovia
				// connect): the words before the first flag or
				// placeholder.
				for _, name := range strings.Fields(rest) {
					if !commandWord.MatchString(name) {
						break
					}
					rows[name] = true
				}
			}
		}
	}
	for name := range c.commands {
		if !rows[name] {
			t.Errorf("docs/cli.md: the command table has no row for dragonc %s", name)
		}
	}
	for name := range rows {
		if !c.commands[name] {
			t.Errorf("docs/cli.md: the command table has a row for dragonc %s, which is no command", name)
		}
	}
}

// TestDocPaths: every path into the repository that the README and docs/
// name (examples/dns_ntp.lpg, nics/*.prg, testdata/...) exists, and every
// diagnostic they quote is one the test suite expects of that file (in
// its .golden file, which the tests of lpg and dsl check).
func TestDocPaths(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, regexp.QuoteMeta(e.Name()))
		}
	}
	repoPath := regexp.MustCompile("(?:^|[\\s(`\"'\\[])(?:\\./)?((?:" + strings.Join(dirs, "|") + ")/[A-Za-z0-9_./*+-]*)")
	n := 0
	for _, doc := range userDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range repoPath.FindAllStringSubmatch(text, -1) {
			p := strings.TrimRight(m[1], ".")
			n++
			if match, _ := filepath.Glob(p); len(match) == 0 {
				t.Errorf("%s names %s, which is not in the repository", doc, p)
			}
		}
		for _, block := range fence.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(block[1], "\n") {
				m := quotedDiag.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				n++
				want, err := os.ReadFile(m[1] + ".golden")
				if err != nil {
					t.Errorf("%s quotes a diagnostic of %s, which has no golden file: %v", doc, m[1], err)
					continue
				}
				if !slices.Contains(strings.Split(string(want), "\n"), line) {
					t.Errorf("%s quotes a diagnostic that %s.golden does not hold:\n%s", doc, m[1], line)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d paths and diagnostics found in the documents", n)
	}
}

// TestCIRunsTheReadme: .ci/run ends with the README's two opening
// commands, in order and word for word, so CI runs what a newcomer runs.
func TestCIRunsTheReadme(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := strings.Split(strings.TrimSpace(between(t, "README.md", string(b), "```sh\n", "```")), "\n")
	if len(block) != 2 {
		t.Fatalf("the README's first block has %d commands, want 2 (the main job, the tests): %q", len(block), block)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	if got := lines[len(lines)-2:]; !slices.Equal(got, block) {
		t.Errorf(".ci/run ends with %q; the README's commands are %q", got, block)
	}
	if !strings.Contains(block[1], "-timeout") {
		t.Errorf("the README's test command %q sets no -timeout: a loaded machine hits go test's 10-minute default", block[1])
	}
}
