// Package diag holds the diagnostics every phase of dragonc reports: a
// severity, a stable code, a one-line summary, an optional detail with advice,
// and an exact source range. Rendering is kept apart from the data, as in
// HCL v2: the same diagnostic prints as one line or with the source line and
// a caret.
package diag

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Severity says whether a diagnostic stops compilation.
type Severity int

const (
	// Error diagnostics make the input invalid.
	Error Severity = iota
	// Warning diagnostics are reported but do not change the exit code.
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Pos is a byte offset into one source file. It stays compact in trees and
// is expanded to a line and column only for display, like go/token.
type Pos struct {
	Offset int
}

// Range is a half-open span of bytes [Start, End) in one file.
type Range struct {
	File  *File
	Start int
	End   int
}

// Diagnostic is one message about the input.
type Diagnostic struct {
	Severity Severity
	Code     string // stable, e.g. "E201"; tests match on it
	Summary  string // one line, lower case, no trailing period
	Detail   string // optional advice, e.g. `did you mean "ValidCRC"?`
	Range    Range
}

// File is a named source text with a line table.
type File struct {
	Name  string
	Src   []byte
	lines []int // byte offset of the start of each line
}

// NewFile records a source text for position lookups.
func NewFile(name string, src []byte) *File {
	f := &File{Name: name, Src: src, lines: []int{0}}
	for i, b := range src {
		if b == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	return f
}

// Position returns the 1-based line and column (in characters) of an offset.
func (f *File) Position(off int) (line, col int) {
	if f == nil {
		return 0, 0
	}
	if off < 0 {
		off = 0
	}
	if off > len(f.Src) {
		off = len(f.Src)
	}
	i := sort.Search(len(f.lines), func(i int) bool { return f.lines[i] > off }) - 1
	start := f.lines[i]
	return i + 1, utf8.RuneCount(f.Src[start:off]) + 1
}

// Line returns the text of 1-based line n without its newline.
func (f *File) Line(n int) string {
	if f == nil || n < 1 || n > len(f.lines) {
		return ""
	}
	start := f.lines[n-1]
	end := len(f.Src)
	if n < len(f.lines) {
		end = f.lines[n] - 1
	}
	return strings.TrimRight(string(f.Src[start:end]), "\r")
}

// String renders the short form: path:line:col: severity: summary [CODE].
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Range.File != nil {
		line, col := d.Range.File.Position(d.Range.Start)
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Range.File.Name, line, col)
	}
	fmt.Fprintf(&b, "%s: %s", d.Severity, d.Summary)
	if d.Detail != "" {
		fmt.Fprintf(&b, "; %s", d.Detail)
	}
	if d.Code != "" {
		fmt.Fprintf(&b, " [%s]", d.Code)
	}
	return b.String()
}

// Long renders the short form followed by the source line and a caret
// under the range.
func (d Diagnostic) Long() string {
	s := d.String()
	f := d.Range.File
	if f == nil {
		return s
	}
	line, col := f.Position(d.Range.Start)
	text := f.Line(line)
	if text == "" {
		return s
	}
	width := 1
	if d.Range.End > d.Range.Start {
		endLine, endCol := f.Position(d.Range.End)
		if endLine == line && endCol > col {
			width = endCol - col
		}
	}
	var pad strings.Builder
	for i, r := range []rune(text) {
		if i >= col-1 {
			break
		}
		if r == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
	}
	// Tabs in the source line are kept so the caret lines up in a terminal.
	return fmt.Sprintf("%s\n    %s\n    %s%s", s, text, pad.String(), strings.Repeat("^", width))
}

// List is an ordered collection of diagnostics.
type List []Diagnostic

// MaxErrors bounds how many errors one file reports, so a badly broken file
// does not flood the terminal.
const MaxErrors = 50

// Add appends a diagnostic.
func (l *List) Add(d Diagnostic) { *l = append(*l, d) }

// Errorf appends an error at r.
func (l *List) Errorf(r Range, code, format string, args ...any) *Diagnostic {
	l.Add(Diagnostic{Severity: Error, Code: code, Summary: fmt.Sprintf(format, args...), Range: r})
	return &(*l)[len(*l)-1]
}

// Warnf appends a warning at r.
func (l *List) Warnf(r Range, code, format string, args ...any) *Diagnostic {
	l.Add(Diagnostic{Severity: Warning, Code: code, Summary: fmt.Sprintf(format, args...), Range: r})
	return &(*l)[len(*l)-1]
}

// HasErrors reports whether any diagnostic is an error.
func (l List) HasErrors() bool {
	for _, d := range l {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Sort orders diagnostics by file, position, then code, and drops exact
// duplicates; it keeps at most MaxErrors errors per file.
func (l *List) Sort() {
	s := *l
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i], s[j]
		an, bn := fileName(a), fileName(b)
		if an != bn {
			return an < bn
		}
		if a.Range.Start != b.Range.Start {
			return a.Range.Start < b.Range.Start
		}
		return a.Code < b.Code
	})
	out := s[:0]
	errs := map[string]int{}
	for i, d := range s {
		if i > 0 && d.String() == s[i-1].String() {
			continue
		}
		if d.Severity == Error {
			errs[fileName(d)]++
			if errs[fileName(d)] > MaxErrors {
				continue
			}
		}
		out = append(out, d)
	}
	*l = out
}

func fileName(d Diagnostic) string {
	if d.Range.File == nil {
		return ""
	}
	return d.Range.File.Name
}

// Print writes every diagnostic in short form, one a line.
func (l List) Print(w io.Writer) {
	for _, d := range l {
		fmt.Fprintln(w, d.String())
	}
}

// Error makes a List usable as an error value.
func (l List) Error() string {
	var b strings.Builder
	for i, d := range l {
		if d.Severity != Error {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
		if i > 20 {
			break
		}
	}
	return b.String()
}

// Err returns the list as an error when it holds an error, else nil.
func (l List) Err() error {
	if l.HasErrors() {
		return l
	}
	return nil
}

// MaxShown is how many errors, and how many warnings, a command prints
// from one list before it counts the rest (go/parser stops at 10).
const MaxShown = 20

// Shown returns the diagnostics to print: the first MaxShown errors and
// the first MaxShown warnings, then a line counting each kind left out.
func (l List) Shown() List {
	var out List
	count := map[Severity]int{}
	for _, d := range l {
		count[d.Severity]++
		if count[d.Severity] <= MaxShown {
			out = append(out, d)
		}
	}
	var f *File
	if len(l) > 0 {
		f = l[0].Range.File
	}
	for _, sev := range []Severity{Error, Warning} {
		if n := count[sev] - MaxShown; n > 0 {
			out = append(out, Diagnostic{Severity: sev, Summary: fmt.Sprintf("%d more %ss not shown", n, sev), Range: Range{File: f, Start: len(f.srcOrNil())}})
		}
	}
	return out
}

func (f *File) srcOrNil() []byte {
	if f == nil {
		return nil
	}
	return f.Src
}
