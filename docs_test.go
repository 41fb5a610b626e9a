package dragonc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
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
