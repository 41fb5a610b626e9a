// Package diag holds the diagnostics every phase of dragonc reports: a
// severity, a stable code, a one-line summary, an optional detail with advice,
// and an exact source range. Rendering is kept apart from the data, as in
// HCL v2: the same diagnostic prints as one line or with the source line and
// a caret.
package diag

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
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
	Code     string // stable, one of the catalogue (codes.go); tests match on it
	Summary  string // one line, lower case, no trailing period
	Detail   string // optional advice, e.g. `did you mean "ValidCRC"?`
	Range    Range
}

// File is a named source text with a line table.
type File struct {
	Name string
	Src  []byte
	// lines holds the byte offset of the start of each line. It is made
	// when a position is first asked for, at its exact size: most files
	// never need it, and a file of newlines would otherwise cost eight
	// bytes and more a byte. Offsets fit in 32 bits: dragonc reads no file
	// of 2 GiB.
	lines     []int32
	linesOnce sync.Once
}

// NewFile records a source text for position lookups.
func NewFile(name string, src []byte) *File {
	return &File{Name: name, Src: src}
}

func (f *File) lineStarts() []int32 {
	f.linesOnce.Do(func() {
		f.lines = make([]int32, 1, bytes.Count(f.Src, []byte("\n"))+1)
		for i, b := range f.Src {
			if b == '\n' {
				f.lines = append(f.lines, int32(i+1))
			}
		}
	})
	return f.lines
}

// Position returns the 1-based line and column of an offset. Columns count
// characters (Unicode code points), not bytes, as the scanner does.
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
	lines := f.lineStarts()
	i := sort.Search(len(lines), func(i int) bool { return int(lines[i]) > off }) - 1
	start := int(lines[i])
	return i + 1, utf8.RuneCount(f.Src[start:off]) + 1
}

// Line returns the text of 1-based line n without its newline.
func (f *File) Line(n int) string {
	if f == nil {
		return ""
	}
	start, end := f.lineBounds(n)
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

// maxShownLine is how many characters of a source line Long shows: a
// line can be as long as the file (a name of 50 MB on one line), and a
// terminal needs only the part around the caret.
const maxShownLine = 160

// Long renders the short form followed by the source line and a caret
// under the range. Of a line longer than maxShownLine characters it shows
// those around the range, with an ellipsis where it cuts.
func (d Diagnostic) Long() string {
	s := d.String()
	f := d.Range.File
	if f == nil {
		return s
	}
	line, col := f.Position(d.Range.Start)
	start, end := f.lineBounds(line)
	text := f.Src[start:end]
	if len(bytes.TrimRight(text, "\r")) == 0 {
		return s
	}
	width := 1
	if d.Range.End > d.Range.Start {
		endLine, endCol := f.Position(d.Range.End)
		if endLine == line && endCol > col {
			width = endCol - col
		}
	}
	// The characters [first, last) of the line are shown.
	first, last := 0, utf8.RuneCount(text)
	if last > maxShownLine {
		first = max(0, col-1-maxShownLine/4)
		last = min(last, first+maxShownLine)
	}
	var shown, pad strings.Builder
	if first > 0 {
		shown.WriteString("…")
		pad.WriteByte(' ')
	}
	i := 0
	for _, r := range string(text) {
		if i >= last {
			shown.WriteString("…")
			break
		}
		if i >= first {
			shown.WriteRune(r)
			if i < col-1 {
				// Tabs are kept so the caret lines up in a terminal.
				if r == '\t' {
					pad.WriteByte('\t')
				} else {
					pad.WriteByte(' ')
				}
			}
		}
		i++
	}
	width = max(1, min(width, last-(col-1)))
	return fmt.Sprintf("%s\n    %s\n    %s%s", s, strings.TrimRight(shown.String(), "\r"), pad.String(), strings.Repeat("^", width))
}

// lineBounds returns the byte span of 1-based line n without its newline.
func (f *File) lineBounds(n int) (start, end int) {
	lines := f.lineStarts()
	if n < 1 || n > len(lines) {
		return 0, 0
	}
	start, end = int(lines[n-1]), len(f.Src)
	if n < len(lines) {
		end = int(lines[n]) - 1
	}
	return start, end
}

// List is an ordered collection of diagnostics.
type List []Diagnostic

// MaxErrors bounds how many errors one file reports, so a badly broken file
// does not flood the terminal.
const MaxErrors = 50

// Add appends a diagnostic.
func (l *List) Add(d Diagnostic) { *l = append(*l, d) }

// Errorf appends an error at r. Its string arguments are user text (names,
// literals, tokens as written) and are clipped to MaxQuoted characters, as
// Quote and Clip do.
func (l *List) Errorf(r Range, code, format string, args ...any) *Diagnostic {
	l.Add(Diagnostic{Severity: Error, Code: code, Summary: Sprintf(format, args...), Range: r})
	return &(*l)[len(*l)-1]
}

// Warnf appends a warning at r, its string arguments clipped as Errorf's.
func (l *List) Warnf(r Range, code, format string, args ...any) *Diagnostic {
	l.Add(Diagnostic{Severity: Warning, Code: code, Summary: Sprintf(format, args...), Range: r})
	return &(*l)[len(*l)-1]
}

// MaxQuoted is how many characters of one piece of user text (a name, a
// string literal, a token) a diagnostic repeats. Names can be as long as
// the file: a 50 MB stack name was once repeated whole in an error.
const MaxQuoted = 64

// Sprintf is fmt.Sprintf for diagnostic text: every string argument is
// clipped to MaxQuoted characters. It is the one place where messages
// quote what the user wrote; a message built another way quotes through
// Quote or Clip.
func Sprintf(format string, args ...any) string {
	var clipped []any
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > MaxQuoted {
			if clipped == nil {
				clipped = append([]any(nil), args...)
			}
			clipped[i] = userText(s)
		}
	}
	if clipped == nil {
		return fmt.Sprintf(format, args...)
	}
	return fmt.Sprintf(format, clipped...)
}

// Quote is %q of s, clipped to its first MaxQuoted characters with an
// ellipsis and its length in bytes: "xxxx…" (52428800 bytes).
func Quote(s string) string { return fmt.Sprintf("%q", userText(s)) }

// Clip is s, clipped as Quote clips it but without quotes.
func Clip(s string) string { return fmt.Sprintf("%s", userText(s)) }

// MaxListed is how many names Names shows.
const MaxListed = 20

// Names is a list of user names as a message shows it: separated by
// commas, each clipped as Clip clips it, the first MaxListed of them and
// how many more there are. Sprintf does not clip it as one string.
type Names []string

func (n Names) String() string {
	var b strings.Builder
	for i, name := range n {
		if i == MaxListed {
			fmt.Fprintf(&b, " and %d more", len(n)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Clip(name))
	}
	return b.String()
}

// userText formats a string argument clipped to MaxQuoted characters.
type userText string

func (u userText) Format(f fmt.State, verb rune) {
	s := string(u)
	head, cut := s, false
	if len(s) > MaxQuoted {
		n := 0
		for i := range s {
			if n == MaxQuoted {
				head, cut = s[:i], true
				break
			}
			n++
		}
	}
	if !cut {
		fmt.Fprintf(f, fmt.FormatString(f, verb), s)
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), head+"…")
	fmt.Fprintf(f, " (%d bytes)", len(s))
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
