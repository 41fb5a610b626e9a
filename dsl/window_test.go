package dsl

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dragonc/dragonc/internal/diag"
)

// TestWindowsAgree: participle, given only the window of a broken file
// around where the hand-written parser stopped, words the error exactly as
// it does given the whole file. The broken files are every file in the
// repository with one token dropped, doubled or replaced, at many places.
func TestWindowsAgree(t *testing.T) {
	n := 0
	for name, src := range repoFiles(t) {
		if strings.Contains(name, "/bad/") || strings.Contains(name, "/badstack/") {
			continue
		}
		var toks []token
		sc := newScanner(src, nil)
		for tk := sc.next(); tk.kind != kEOF; tk = sc.next() {
			toks = append(toks, tk)
		}
		step := max(1, len(toks)/40)
		for i := 0; i < len(toks); i += step {
			tk := toks[i]
			for _, broken := range []string{
				src[:tk.off] + src[tk.end:],
				src[:tk.end] + " " + src[tk.off:],
				src[:tk.off] + "@" + src[tk.end:],
				src[:tk.off] + "}" + src[tk.end:],
				src[:tk.off] + "x" + src[tk.end:],
			} {
				if checkWindow(t, name, broken) {
					n++
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d broken files compared", n)
	}
}

// checkWindow compares the windowed and the whole-file wording of src's
// first syntax error and reports whether src has one.
func checkWindow(t *testing.T, name, src string) bool {
	t.Helper()
	s := &Source{File: diag.NewFile(name, []byte(src)), text: src}
	_, h := handParse(name, src, nil, false, nil)
	if h == nil {
		return false
	}
	if _, ok := s.stray(h.at); ok || h.nest {
		return false
	}
	got, tree := s.syntaxError(nil, h)
	_, err := parser.ParseFromLexer(peeking(newScanner(src, nil), name))
	if err == nil {
		t.Fatalf("%s: participle accepts what the hand-written parser does not:\n%s", name, src)
	}
	if tree != nil {
		t.Fatalf("%s: a tree for a broken file", name)
	}
	want := s.errorAt(err, diag.CodeSyntax)
	if got.String() != want.String() || got.Range != want.Range {
		t.Fatalf("%s: the window gives\n%s\nthe whole file\n%s\n%s", name, got, want, src)
	}
	return true
}

func FuzzWindows(f *testing.F) {
	for _, src := range repoFiles(f) {
		f.Add(src)
	}
	for _, src := range graphCases {
		f.Add("graph g { " + src + " }")
	}
	f.Fuzz(func(t *testing.T, src string) {
		if !utf8.ValidString(src) || len(src) > 1<<16 {
			return
		}
		checkWindow(t, "fuzz", src)
	})
}
