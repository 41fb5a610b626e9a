package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docExample is a dragonc command line of a fenced code block of the
// README or docs/.
type docExample struct {
	where string   // FILE:LINE
	args  []string // after "dragonc", up to a pipe, redirection or ";"
	exit  int      // 0, or N when the line's comment says "exits N"
	// shown is the output the document shows after the command: in a block
	// whose commands have a "$ " prompt, the lines up to the next prompt. A
	// line "..." stands for lines left out.
	shown []string
}

var (
	docFence      = regexp.MustCompile("^```")
	docInvocation = regexp.MustCompile(`(?:^|[\s/])dragonc +([-a-z].*)$`)
	docExit       = regexp.MustCompile(`\bexits (\d+)\b`)
	// docPlaceholder is an argument a reader replaces: NIC, STACK.lpg, FILE...
	docPlaceholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]+(\.[a-z]+)?$|\.\.\.`)
)

// docExamples reads the dragonc command lines of the fenced code blocks of
// the README and docs/*.md (paths from the repository root).
func docExamples(t *testing.T) []docExample {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) < 5 {
		t.Fatalf("docs/: %v, %d files", err, len(docs))
	}
	var out []docExample
	for _, doc := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(doc, "../../")
		var block []string
		start, in := 0, false
		for i, line := range strings.Split(string(b), "\n") {
			switch {
			case docFence.MatchString(line) && !in:
				in, start, block = true, i+1, nil
			case docFence.MatchString(line):
				in = false
				out = append(out, blockExamples(name, start, block)...)
			case in:
				block = append(block, line)
			}
		}
	}
	return out
}

// blockExamples returns the examples of one code block, whose first line
// is line first+1 of doc.
func blockExamples(doc string, first int, lines []string) []docExample {
	console := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "$ ") })
	var out []docExample
	for i, line := range lines {
		if console {
			var ok bool
			if line, ok = strings.CutPrefix(line, "$ "); !ok {
				continue
			}
		}
		line, comment, _ := strings.Cut(line, " #")
		m := docInvocation.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		ex := docExample{where: doc + ":" + strconv.Itoa(first+i+1)}
		if e := docExit.FindStringSubmatch(comment); e != nil {
			ex.exit, _ = strconv.Atoi(e[1])
		}
		for _, w := range strings.Fields(m[1]) {
			if strings.ContainsAny(w[:1], "|>&;") || strings.HasPrefix(w, "2>") {
				break
			}
			if w, ok := strings.CutSuffix(w, ";"); ok {
				ex.args = append(ex.args, w)
				break
			}
			ex.args = append(ex.args, w)
		}
		if console {
			for _, l := range lines[i+1:] {
				if strings.HasPrefix(l, "$ ") {
					break
				}
				ex.shown = append(ex.shown, l)
			}
			for len(ex.shown) > 0 && ex.shown[len(ex.shown)-1] == "" {
				ex.shown = ex.shown[:len(ex.shown)-1]
			}
		}
		out = append(out, ex)
	}
	return out
}

// TestDocExamples runs, in-process, every dragonc command line of the
// README's and docs/'s code blocks, as a reader would paste it: it must
// exit 0 (or as its comment says, "exits 1"), and the output a document
// shows after a "$ " prompt must be the command's. What a pipe or a
// redirection adds is left off, -o DIR writes into a temporary directory,
// and globs are expanded as a shell would. Not run: the commands that
// serve, build or look at an interface (run, status, stop, build,
// discover: the namespace suites and TestReadmeRecipe run them), synopses
// with placeholders, and files of the reader's own.
func TestDocExamples(t *testing.T) {
	skipCommands := map[string]string{
		"run":       "serves on an interface, as root (TestReadmeRecipe runs the README's recipe)",
		"status":    "reports the runs of an interface (TestReadmeRecipe)",
		"stop":      "stops a run (TestReadmeRecipe)",
		"reload":    "reloads a run (TestReloadCommand)",
		"build":     "builds a server with the go command",
		"discover":  "reads a live interface",
		"sovia":     "talks to a live stream over an interface, as root (TestSoviaBench and TestSoviaConnect run it)",
		"calibrate": "measures as root in namespaces of its own (TestCalibrate runs it)",
	}
	readerFiles := map[string]bool{"my.prg": true} // README: fmt -w my.prg
	_, noDot := exec.LookPath("dot")
	ran := 0
	for _, ex := range docExamples(t) {
		line := "dragonc " + strings.Join(ex.args, " ")
		if len(line) > 90 {
			line = line[:90] + "..."
		}
		skip := func(why string) { t.Logf("%s: not run, %s: %s", ex.where, why, line) }
		if why, ok := skipCommands[ex.args[0]]; ok {
			skip(why)
			continue
		}
		if slices.Contains(ex.args, "--live") {
			skip("measures servers for minutes, as root (TestBenchLive runs it briefly)")
			continue
		}
		var args []string
		reason := ""
		for i := 0; i < len(ex.args); i++ {
			w := strings.Trim(ex.args[i], "[]")
			switch {
			case w == "" || w == "flags":
			case docPlaceholder.MatchString(w):
				reason = "a synopsis (" + w + ")"
			case readerFiles[w]:
				reason = "a file of the reader's own (" + w + ")"
			case w == "--svg" || w == "--png":
				if noDot != nil {
					reason = "Graphviz's dot is not installed"
				}
				args = append(args, w)
			case (w == "-o" || w == "--output") && i+1 < len(ex.args):
				args = append(args, w, filepath.Join(t.TempDir(), "out"))
				i++
			case strings.ContainsAny(w, "*?"):
				m, err := filepath.Glob(filepath.Join("../..", w))
				if err != nil || len(m) == 0 {
					t.Errorf("%s: %s matches no file", ex.where, w)
				}
				for _, f := range m {
					args = append(args, strings.TrimPrefix(filepath.ToSlash(f), "../../"))
				}
			default:
				args = append(args, w)
			}
		}
		if reason != "" {
			skip(reason)
			continue
		}
		ran++
		code, stdout, stderr := dragonc(t, args...)
		if code != ex.exit {
			t.Errorf("%s: %s: exit %d, want %d; stderr:\n%s", ex.where, line, code, ex.exit, stderr)
			continue
		}
		out := stdout
		if out == "" {
			out = stderr // diagnostics
		}
		if msg := matchShown(ex.shown, strings.Split(strings.TrimRight(out, "\n"), "\n")); msg != "" {
			t.Errorf("%s: %s: the document shows output the command does not print: %s", ex.where, line, msg)
		}
	}
	if ran < 15 {
		t.Errorf("ran only %d examples of the documents", ran)
	}
}

// matchShown reports how the lines a document shows differ from a
// command's output, or "" when they agree: the lines before the first
// "..." begin the output, and each later run of lines comes, in order,
// somewhere after the run before it.
func matchShown(shown, out []string) string {
	at := 0
	for k, run := range splitRuns(shown) {
		found := -1
		for i := at; i+len(run) <= len(out); i++ {
			if slices.Equal(out[i:i+len(run)], run) {
				found = i
				break
			}
			if k == 0 {
				break // the first run starts the output
			}
		}
		if found < 0 {
			return "no " + strconv.Quote(strings.Join(run, "\n")) + " in:\n" + strings.Join(out, "\n")
		}
		at = found + len(run)
	}
	return ""
}

// splitRuns splits shown lines at the "..." lines.
func splitRuns(shown []string) [][]string {
	var runs [][]string
	var run []string
	for _, l := range shown {
		if strings.TrimSpace(l) == "..." {
			runs = append(runs, run)
			run = nil
			continue
		}
		run = append(run, l)
	}
	return append(runs, run)
}

// TestMatchShown pins how shown output is compared.
func TestMatchShown(t *testing.T) {
	out := []string{"a", "b", "c", "d", "e"}
	for _, c := range []struct {
		shown []string
		ok    bool
	}{
		{nil, true},
		{[]string{"a", "b"}, true},
		{[]string{"b"}, false},
		{[]string{"a", "...", "d", "e"}, true},
		{[]string{"a", "  ...", "c", "...", "e"}, true},
		{[]string{"a", "...", "d", "...", "c"}, false},
		{[]string{"a", "...", "c", "e"}, false},
		{[]string{"...", "e"}, true},
	} {
		if got := matchShown(c.shown, out) == ""; got != c.ok {
			t.Errorf("%q: match %v, want %v", c.shown, got, c.ok)
		}
	}
}
