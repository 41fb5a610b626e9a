package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
)

func init() {
	register(&command{name: "check", summary: "parse and validate files", run: runCheck, usage: `Usage: dragonc check [-v] FILE...

Parses and validates .prg, .lpg and .unicorn files (a stack file's LPG is
derived too) and prints every
diagnostic as FILE:LINE:COL: severity: message [CODE].

Flags:
    -v      one summary line per valid file:
            FILE: graph NAME: N nodes, M edges, S spawn edges
            FILE: stack NAME: E endpoints; LPG N nodes, M edges, S spawn edges
    -long   show the source line and a caret under each diagnostic

Exit: 0 valid (warnings allowed), 1 errors in the input, 2 usage.

Examples:
    dragonc check nics/82599.prg
    dragonc check -v examples/*.lpg
`})
	register(&command{name: "fmt", summary: "print files in canonical layout", run: runFmt, usage: `Usage: dragonc fmt [-w] FILE...

Prints the canonical layout of each file (4-space indentation, one item a
line, comments kept). Formatting is idempotent and never changes meaning.

Flags:
    -w   rewrite the files in place instead of printing them
    -l   list the files whose layout differs, print nothing else

Exit: 0, 1 on a parse error, 2 usage.

Examples:
    dragonc fmt examples/web_and_dns.lpg
    dragonc fmt -w nics/*.prg
`})
	register(&command{name: "dot", summary: "draw a graph as Graphviz DOT", run: runDot, usage: `Usage: dragonc dot [--svg | --png] FILE|NIC

Prints a PRG or LPG (a built-in NIC model by name, a graph file, or the
LPG derived from a stack file) as Graphviz DOT: clusters as subgraphs, gates and
configuration nodes drawn apart, port names on edges, spawn edges dashed.
With --svg or --png the picture is rendered by Graphviz's dot, which must
be installed (apt-get install graphviz).

Exit: 0, 1 on errors in the input or when rendering is impossible.

Examples:
    dragonc dot model.unicorn > model.dot
    dragonc dot --svg model.unicorn > model.svg
    dragonc dot 82599 | dot -Tsvg > 82599.svg
`})
}

func newFlags(e *env, name, usageText string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, usageText) }
	return fs
}

// parseFlags parses flags and reports whether the command should go on;
// code is its exit code otherwise.
func parseFlags(fs *flag.FlagSet, args []string) (ok bool, code int) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitUsage
	}
	return true, 0
}

// loaded is a parsed and validated file: a graph, or a stack with its
// derived LPG.
type loaded struct {
	src   *dsl.Source
	graph *graph.Graph
	stack *lpg.Stack
	diags diag.List
}

func readFile(e *env, path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", describeIOError(err))
		return nil, false
	}
	return b, true
}

func describeIOError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Sprintf("%s: no such file", pe.Path)
		case errors.Is(err, os.ErrPermission):
			return fmt.Sprintf("%s: permission denied", pe.Path)
		}
		return fmt.Sprintf("%s: %v", pe.Path, pe.Err)
	}
	return err.Error()
}

// load parses and validates any dragonc file.
func load(name string, src []byte) *loaded {
	s, diags := dsl.Parse(name, src)
	l := &loaded{src: s}
	switch {
	case s.AST != nil && s.AST.Graph != nil:
		g, more := dsl.Lower(s)
		l.graph = g
		diags = append(diags, more...)
	case s.AST != nil && s.AST.Stack != nil:
		st, more := lpg.Lower(s)
		diags = append(diags, more...)
		if !more.HasErrors() {
			l.stack = st
			g, err := lpg.Derive(st)
			if err != nil {
				diags.Errorf(diag.Range{File: s.File}, "E599", "%v", err)
			}
			l.graph = g
		}
	}
	diags.Sort()
	l.diags = diags
	return l
}

func printDiags(e *env, diags diag.List, long bool) {
	for _, d := range diags {
		if long {
			fmt.Fprintln(e.stderr, d.Long())
		} else {
			fmt.Fprintln(e.stderr, d.String())
		}
	}
}

func runCheck(e *env, args []string) int {
	fs := newFlags(e, "check", lookup("check").usage)
	verbose := fs.Bool("v", false, "print a summary line per file")
	long := fs.Bool("long", false, "show source lines under diagnostics")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprint(e.stderr, lookup("check").usage)
		return exitUsage
	}
	code := exitOK
	for _, path := range fs.Args() {
		src, ok := readFile(e, path)
		if !ok {
			code = exitInput
			continue
		}
		l := load(path, src)
		printDiags(e, l.diags, *long)
		if l.diags.HasErrors() {
			code = exitInput
			continue
		}
		if *verbose {
			switch {
			case l.stack != nil:
				g := l.graph
				fmt.Fprintf(e.stdout, "%s: stack %s: %d endpoints; LPG %d nodes, %d edges, %d spawn edges\n",
					path, l.stack.Name, len(l.stack.Endpoints), len(g.Nodes), len(g.Edges()), g.SpawnEdges())
			case l.graph != nil:
				g := l.graph
				fmt.Fprintf(e.stdout, "%s: graph %s: %d nodes, %d edges, %d spawn edges\n",
					path, g.Name, len(g.Nodes), len(g.Edges()), g.SpawnEdges())
			}
		}
	}
	return code
}

func runFmt(e *env, args []string) int {
	fs := newFlags(e, "fmt", lookup("fmt").usage)
	write := fs.Bool("w", false, "rewrite files in place")
	list := fs.Bool("l", false, "list files whose layout differs")
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprint(e.stderr, lookup("fmt").usage)
		return exitUsage
	}
	code := exitOK
	for _, path := range fs.Args() {
		src, ok := readFile(e, path)
		if !ok {
			code = exitInput
			continue
		}
		s, diags := dsl.Parse(path, src)
		if diags.HasErrors() {
			diags.Sort()
			printDiags(e, diags, false)
			code = exitInput
			continue
		}
		out := dsl.Format(s)
		switch {
		case *list:
			if !bytes.Equal(out, src) {
				fmt.Fprintln(e.stdout, path)
			}
		case *write:
			if bytes.Equal(out, src) {
				continue
			}
			if err := writeFileAtomic(path, out); err != nil {
				fmt.Fprintf(e.stderr, "dragonc: %s\n", describeIOError(err))
				code = exitInput
			}
		default:
			e.stdout.Write(out)
		}
	}
	return code
}

// writeFileAtomic replaces path by writing a temporary file beside it and
// renaming it, so a failure never leaves a half-written file.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func runDot(e *env, args []string) int {
	fs := newFlags(e, "dot", lookup("dot").usage)
	svg := fs.Bool("svg", false, "render SVG with Graphviz")
	png := fs.Bool("png", false, "render PNG with Graphviz")
	ok, code := parseFlags(fs, args)
	if !ok {
		return code
	}
	if fs.NArg() != 1 || *svg && *png {
		fmt.Fprint(e.stderr, lookup("dot").usage)
		return exitUsage
	}
	path := fs.Arg(0)
	path, src, err := nics.Resolve(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	l := load(path, src)
	printDiags(e, l.diags, false)
	if l.diags.HasErrors() {
		return exitInput
	}
	if l.graph == nil {
		fmt.Fprintf(e.stderr, "dragonc: %s holds no graph to draw\n", path)
		return exitInput
	}
	text := dot.Graph(l.graph)
	format := ""
	switch {
	case *svg:
		format = "svg"
	case *png:
		format = "png"
	}
	return emitDot(e, text, format)
}

// emitDot prints DOT text, or renders it with Graphviz when a format is
// asked for.
func emitDot(e *env, text, format string) int {
	if format == "" {
		io.WriteString(e.stdout, text)
		return exitOK
	}
	dotPath, err := exec.LookPath("dot")
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: rendering --%s needs Graphviz's dot, which is not installed (apt-get install graphviz); without --%s, dragonc prints DOT text\n", format, format)
		return exitInput
	}
	cmd := exec.Command(dotPath, "-T"+format)
	cmd.Stdin = bytes.NewBufferString(text)
	cmd.Stdout = e.stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(e.stderr, "dragonc: graphviz dot failed: %v\n%s", err, stderr.String())
		return exitInput
	}
	return exitOK
}
