package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/outdir"
	"github.com/dragonc/dragonc/load"
	"github.com/dragonc/dragonc/nics"
)

func init() {
	builders = append(builders, newCheckCmd, newFmtCmd, newDotCmd)
}

func newCheckCmd(e *env) *cobra.Command {
	var verbose, long, asJSON bool
	c := &cobra.Command{
		Use:   "check [flags] FILE...",
		Short: "parse and validate files",
		Long: `Parses and validates .prg, .lpg and .unicorn files (a stack file's LPG is
derived too) and prints every diagnostic as
FILE:LINE:COL: severity: message [CODE]. "-" reads standard input.

With -v, one summary line per valid file:
    FILE: graph NAME: N nodes, M edges, S spawn edges
    FILE: stack NAME: E endpoints; LPG N nodes, M edges, S spawn edges

Exit: 0 valid (warnings allowed), 1 errors in the input, 2 usage.`,
		Example: `  dragonc check nics/82599.prg
  dragonc check -v examples/*.lpg
  dragonc check --json my.lpg | jq '.diagnostics[] | select(.severity == "error")'`,
		Args: minArgs("one or more files to check"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runCheck(e, args, verbose, long, asJSON))
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "one summary line per valid file")
	c.Flags().BoolVar(&long, "long", false, "show the source line and a caret under each diagnostic")
	c.Flags().BoolVar(&asJSON, "json", false, "files and diagnostics as JSON")
	return c
}

func newFmtCmd(e *env) *cobra.Command {
	var write, list bool
	c := &cobra.Command{
		Use:   "fmt [flags] FILE...",
		Short: "print files in canonical layout",
		Long: `Prints the canonical layout of each file (4-space indentation, one item a
line, comments kept). A list that would pass column 100 is broken over
lines: a table a row a line with its columns aligned, plain values filling
the lines. Formatting is idempotent and never changes meaning. "-" reads
standard input and prints to standard output.

Exit: 0, 1 on a parse error, 2 usage.`,
		Example: `  dragonc fmt examples/web_and_dns.lpg
  dragonc fmt -w nics/*.prg
  cat my.prg | dragonc fmt -`,
		Args: minArgs("one or more files to format"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if write && slices.Contains(args, "-") {
				return usagef("-w cannot rewrite standard input")
			}
			return exitStatus(runFmt(e, args, write, list))
		},
	}
	c.Flags().BoolVarP(&write, "write", "w", false, "rewrite the files in place instead of printing them")
	c.Flags().BoolVarP(&list, "list", "l", false, "list the files whose layout differs, print nothing else")
	c.MarkFlagsMutuallyExclusive("write", "list")
	return c
}

func newDotCmd(e *env) *cobra.Command {
	var svg, png bool
	c := &cobra.Command{
		Use:   "dot [flags] FILE|NIC",
		Short: "draw a graph as Graphviz DOT",
		Long: `Prints a PRG or LPG (a built-in NIC model by name, a graph file, or the
LPG derived from a stack file) as Graphviz DOT: clusters as subgraphs,
gates and configuration nodes drawn apart, port names on edges, spawn
edges dashed, runs of unused numbered nodes (Queue4..127) folded into
one. With --svg or --png the picture is rendered by Graphviz's dot, which
must be installed (apt-get install graphviz).

Exit: 0, 1 on errors in the input or when rendering is impossible, 2 usage.`,
		Example: `  dragonc dot model.unicorn > model.dot
  dragonc dot --svg model.unicorn > model.svg
  dragonc dot 82599 | dot -Tsvg > 82599.svg`,
		Args: nArgs(1, "one graph file or NIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runDot(e, args[0], svg, png))
		},
	}
	c.Flags().BoolVar(&svg, "svg", false, "render SVG with Graphviz")
	c.Flags().BoolVar(&png, "png", false, "render PNG with Graphviz")
	c.MarkFlagsMutuallyExclusive("svg", "png")
	return c
}

// stdinName is how standard input is named in diagnostics.
const stdinName = "<stdin>"

// readFile reads a file, or standard input for "-".
func readFile(e *env, path string) ([]byte, bool) {
	if path == "-" {
		b, err := io.ReadAll(io.LimitReader(e.stdin, dsl.MaxSource+1))
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: reading standard input: %v\n", err)
			return nil, false
		}
		if len(b) > dsl.MaxSource {
			fmt.Fprintf(e.stderr, "dragonc: standard input holds more than %d MiB; dragonc reads inputs of at most that size\n", dsl.MaxSource>>20)
			return nil, false
		}
		return b, true
	}
	if err := checkRegular(path, dsl.MaxSource); err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", describeIOError(err))
		return nil, false
	}
	return b, true
}

// checkRegular refuses what is not a regular file (a device, a pipe, a
// directory: reading /dev/zero would never end) and files over limit
// bytes.
func checkRegular(path string, limit int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return errors.New(describeIOError(err))
	}
	switch {
	case st.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	case !st.Mode().IsRegular():
		what := "not a regular file"
		switch m := st.Mode(); {
		case m&os.ModeDevice != 0:
			what = "a device, not a file"
		case m&os.ModeNamedPipe != 0:
			what = "a named pipe, not a file"
		case m&os.ModeSocket != 0:
			what = "a socket, not a file"
		}
		return fmt.Errorf("%s is %s; give a file, or - for standard input", path, what)
	case st.Size() > limit:
		return fmt.Errorf("%s is %d bytes; dragonc reads files of at most %d MiB", path, st.Size(), limit>>20)
	}
	return nil
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

// printDiags prints diagnostics on standard error; with --quiet, errors
// only.
func printDiags(e *env, diags diag.List, long bool) {
	if e.quiet {
		diags = slices.DeleteFunc(slices.Clone(diags), func(d diag.Diagnostic) bool { return d.Severity != diag.Error })
	}
	for _, d := range diags.Shown() {
		if long {
			fmt.Fprintln(e.stderr, d.Long())
		} else {
			fmt.Fprintln(e.stderr, d.String())
		}
	}
}

// displayName is the name diagnostics use for a path argument.
func displayName(path string) string {
	if path == "-" {
		return stdinName
	}
	return path
}

func runCheck(e *env, paths []string, verbose, long, asJSON bool) int {
	code := exitOK
	rep := checkReport{Files: []checkFile{}, Diagnostics: []jsonDiag{}}
	for _, path := range paths {
		src, ok := readFile(e, path)
		if !ok {
			code = exitInput
			continue
		}
		name := displayName(path)
		l := load.Parse(name, src)
		if asJSON {
			rep.Diagnostics = append(rep.Diagnostics, toJSONDiags(l.Diags)...)
		} else {
			printDiags(e, l.Diags, long)
		}
		if l.Diags.HasErrors() {
			code = exitInput
			continue
		}
		f := checkFile{File: name}
		switch {
		case l.Stack != nil:
			g := l.Graph
			f.Kind, f.Name, f.Endpoints = "stack", l.Stack.Name, len(l.Stack.Endpoints)
			f.Nodes, f.Edges, f.SpawnEdges = len(g.Nodes), len(g.Edges()), g.SpawnEdges()
			if verbose && !asJSON {
				fmt.Fprintf(e.stdout, "%s: stack %s: %d endpoints; LPG %d nodes, %d edges, %d spawn edges\n",
					name, l.Stack.Name, len(l.Stack.Endpoints), len(g.Nodes), len(g.Edges()), g.SpawnEdges())
			}
		case l.Graph != nil:
			g := l.Graph
			f.Kind, f.Name = "graph", g.Name
			f.Nodes, f.Edges, f.SpawnEdges = len(g.Nodes), len(g.Edges()), g.SpawnEdges()
			if verbose && !asJSON {
				fmt.Fprintf(e.stdout, "%s: graph %s: %d nodes, %d edges, %d spawn edges\n",
					name, g.Name, len(g.Nodes), len(g.Edges()), g.SpawnEdges())
			}
		}
		rep.Files = append(rep.Files, f)
	}
	if asJSON {
		writeJSON(e, rep)
		// The diagnostics are in the JSON; standard error says why the
		// exit is not 0.
		if errs := countErrors(rep.Diagnostics); errs > 0 {
			fmt.Fprintf(e.stderr, "dragonc: %d error(s) in the input; the JSON lists them\n", errs)
		}
	}
	return code
}

func countErrors(diags []jsonDiag) int {
	n := 0
	for _, d := range diags {
		if d.Severity == diag.Error.String() {
			n++
		}
	}
	return n
}

// checkReport is `check --json`.
type checkReport struct {
	Files       []checkFile `json:"files"`
	Diagnostics []jsonDiag  `json:"diagnostics"`
}

type checkFile struct {
	File       string `json:"file"`
	Kind       string `json:"kind"` // graph or stack
	Name       string `json:"name"`
	Nodes      int    `json:"nodes"`
	Edges      int    `json:"edges"`
	SpawnEdges int    `json:"spawn_edges"`
	Endpoints  int    `json:"endpoints,omitempty"`
}

// jsonDiag is a diagnostic as JSON: positions are 1-based, columns count
// characters.
type jsonDiag struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Severity  string `json:"severity"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Detail    string `json:"detail,omitempty"`
}

func toJSONDiags(diags diag.List) []jsonDiag {
	out := []jsonDiag{}
	for _, d := range diags {
		j := jsonDiag{Severity: d.Severity.String(), Code: d.Code, Message: d.Summary, Detail: d.Detail}
		if f := d.Range.File; f != nil {
			j.File = f.Name
			j.Line, j.Column = f.Position(d.Range.Start)
			j.EndLine, j.EndColumn = f.Position(max(d.Range.End, d.Range.Start))
		}
		out = append(out, j)
	}
	return out
}

// writeJSON prints v as indented JSON.
func writeJSON(e *env, v any) {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func runFmt(e *env, paths []string, write, list bool) int {
	code := exitOK
	for _, path := range paths {
		src, ok := readFile(e, path)
		if !ok {
			code = exitInput
			continue
		}
		s, diags := dsl.Parse(displayName(path), src)
		if diags.HasErrors() {
			printDiags(e, diags, false)
			code = exitInput
			continue
		}
		out := dsl.Format(s)
		switch {
		case list:
			if !bytes.Equal(out, src) {
				fmt.Fprintln(e.stdout, displayName(path))
			}
		case write:
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

// writeFileAtomic replaces the contents of path. A symbolic link is
// written through: the link stays a link and the file it names is
// rewritten. The file keeps its owner, group and mode, setuid, setgid and
// sticky bits included. A file with several hard links is rewritten in
// place so the links keep sharing it, and so is a file whose owner or
// group this process cannot give a new file (someone else's, when not
// root). Any other file is replaced by outdir.Replace (a temporary file
// beside it, renamed over it), so a failure never leaves it half-written,
// and the temporary file is removed on failure.
func writeFileAtomic(path string, data []byte) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(target)
	if err != nil {
		return err
	}
	// chmod takes these bits; Perm alone would drop setuid, setgid and sticky.
	mode := st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read the file's owner on this system", path)
	}
	if sys.Nlink > 1 {
		return rewriteInPlace(target, data)
	}
	err = outdir.Replace(target, data, func(tmp *os.File) error {
		// Owner first: chown clears setuid and setgid, chmod sets them again.
		if err := chownFile(tmp, int(sys.Uid), int(sys.Gid)); err != nil {
			if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EINVAL) {
				return err
			}
			return errOwnerUnkept
		}
		return tmp.Chmod(mode)
	})
	if err == errOwnerUnkept {
		return rewriteInPlace(target, data)
	}
	return err
}

// errOwnerUnkept stops writeFileAtomic's replacement when a new file
// cannot be given the old one's owner: the file is rewritten in place.
var errOwnerUnkept = errors.New("the file's owner cannot be kept by a new file")

// chownFile is (*os.File).Chown; tests make it fail.
var chownFile = (*os.File).Chown

// rewriteInPlace truncates and rewrites a file, which keeps its inode and
// with it the owner, mode and links.
func rewriteInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runDot(e *env, path string, svg, png bool) int {
	path, src, err := nics.Resolve(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	l := load.Parse(path, src)
	printDiags(e, l.Diags, false)
	if l.Diags.HasErrors() {
		return exitInput
	}
	if l.Graph == nil {
		fmt.Fprintf(e.stderr, "dragonc: %s holds no graph to draw\n", path)
		return exitInput
	}
	text := dot.Graph(l.Graph)
	format := ""
	switch {
	case svg:
		format = "svg"
	case png:
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
