package dragonc_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/load"
	"github.com/dragonc/dragonc/prg"
)

// The diagnostic corpus: the malformed inputs of testdata/bad (graphs) and
// testdata/badstack (stacks), whose outputs the dsl and lpg tests hold to
// golden files, and testdata/diag, one file for each code those lack
// (testdata/diag/nic: NIC models, read as embed reads them). Their goldens
// sit next to them.

// corpusCodes loads every file of the corpus and returns the codes each
// produces, by file.
func corpusCodes(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	record := func(name string, diags diag.List) {
		for _, d := range diags {
			out[d.Code] = append(out[d.Code], name)
		}
	}
	for _, pattern := range []string{"testdata/bad/*.unicorn", "testdata/bad/*.prg", "testdata/badstack/*.lpg", "testdata/diag/*.*", "testdata/diag/nic/*"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v, %d files", pattern, err, len(files))
		}
		for _, path := range files {
			if strings.HasSuffix(path, ".golden") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.ToSlash(path)
			var diags diag.List
			if strings.HasPrefix(name, "testdata/diag/nic/") {
				// A NIC model, read as embed reads one, without a stack:
				// an atom naming a node of neither graph stays unresolved.
				var m *prg.Model
				if m, diags = prg.Load(name, src); m != nil {
					_, more := m.Resolve(nil)
					diags = append(diags, more...)
				}
			} else {
				diags = load.Parse(name, src).Diags
			}
			record(path, diags)
			if strings.HasPrefix(name, "testdata/diag/") {
				golden.Check(t, path+".golden", []byte(lines(diags)))
			}
		}
	}
	// Files the repository does not keep: too large, and nested too deep
	// for the tests that compare parsers on every file of the repository.
	_, diags := dsl.Parse("huge.lpg", make([]byte, dsl.MaxSource+1))
	record("a generated file of MaxSource+1 bytes", diags)
	deep := "graph g { node A { port out[] semantics out { " + strings.Repeat("(", dsl.MaxNesting+1) + strings.Repeat(")", dsl.MaxNesting+1) + " } } }"
	_, diags = dsl.Parse("deep.unicorn", []byte(deep))
	record("a generated file with brackets nested MaxNesting+1 deep", diags)
	return out
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

func lines(l diag.List) string {
	var b strings.Builder
	for _, d := range l {
		b.WriteString(d.String() + "\n")
	}
	return b.String()
}

// TestCatalogueEmitted: every code of the catalogue but those marked
// internal is produced by some file of the corpus, and every code the
// corpus produces is in the catalogue with the severity it was reported
// with.
func TestCatalogueEmitted(t *testing.T) {
	emitted := corpusCodes(t)
	seen := map[string]bool{}
	for _, e := range diag.Catalogue {
		if seen[e.Code] {
			t.Errorf("%s is in the catalogue twice", e.Code)
		}
		seen[e.Code] = true
		switch n := len(emitted[e.Code]); {
		case e.Internal && n > 0:
			t.Errorf("%s is marked internal, but %s produces it", e.Code, emitted[e.Code][0])
		case !e.Internal && n == 0:
			t.Errorf("no file of the corpus produces %s (%s): add one to testdata/diag", e.Code, e.Meaning)
		}
	}
	for code, files := range emitted {
		if !seen[code] {
			t.Errorf("%s (produced by %s) is not in the catalogue (internal/diag/codes.go)", code, files[0])
		}
	}
}

var codeLiteral = regexp.MustCompile(`"[EW][0-9]{3}"`)

// TestNoCodeLiterals: the catalogue is the one place a code is spelled;
// package code names codes by their constants.
func TestNoCodeLiterals(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(path, d) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.FromSlash("internal/diag/codes.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, loc := range codeLiteral.FindAllIndex(src, -1) {
			line := 1 + strings.Count(string(src[:loc[0]]), "\n")
			t.Errorf("%s:%d: the code %s is spelled as a literal; use its constant in internal/diag/codes.go", path, line, src[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDiagnosticsDoc: docs/diagnostics.md is the catalogue as a table,
// with an example of each code from the corpus; go test . -update
// rewrites it.
func TestDiagnosticsDoc(t *testing.T) {
	emitted := corpusCodes(t)
	const example = "testdata/badstack/misspelt_words.lpg"
	src, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	_, diags := dsl.Parse(example, src)
	var b strings.Builder
	b.WriteString(`<!-- Code generated from internal/diag/codes.go by TestDiagnosticsDoc (go test . -update). DO NOT EDIT. -->

# Diagnostics

Every message dragonc prints about an input file carries a stable code in
brackets. Of the stack [misspelt_words.lpg](../` + example + `)

` + indent(string(src)) + `
dragonc check says

` + indent(lines(diags)) + `
The letter is the severity: **E** is an error (the file is rejected and
the command exits 1), **W** a warning (reported; the file is used). The
first digit is the phase that finds it: 1 reading the file (characters,
tokens, syntax), 2 names, 3 node bodies and types, 4 NIC models, 5 stack
files. A file's errors are all reported, sorted by position, up to 50.
The example named beside each code is a file of the repository that
produces it.

| code | severity | meaning | example |
| --- | --- | --- | --- |
`)
	for _, e := range diag.Catalogue {
		example := "—"
		if files := emitted[e.Code]; len(files) > 0 {
			sort.Strings(files)
			if strings.HasPrefix(files[0], "testdata/") {
				example = fmt.Sprintf("[%s](../%s)", filepath.Base(files[0]), files[0])
			} else {
				example = files[0]
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", e.Code, e.Severity(), e.Meaning, example)
	}
	golden.Check(t, "docs/diagnostics.md", []byte(b.String()))
}
