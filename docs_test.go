package dragonc_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/embedtest"
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
