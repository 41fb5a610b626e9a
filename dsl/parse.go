// Package dsl is the dragonc language: its lexer and grammar (participle
// v2), the concrete syntax tree with positions, name resolution, validation,
// diagnostics, lowering into graphs, and the canonical formatter. It knows
// nothing about NICs.
package dsl

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/dragonc/dragonc/internal/diag"
)

var parser = participle.MustBuild[File](
	participle.Lexer(Lexer),
	participle.Elide("Comment", "Whitespace"),
	participle.UseLookahead(1),
)

// Limits on one file: its size, and how deeply brackets nest (the parser
// recurses once per level, like go/parser, which stops at a fixed depth).
const (
	MaxSource  = 64 << 20
	MaxNesting = 256
)

// Grammar returns the EBNF of the grammar, kept as a golden file.
func Grammar() string { return parser.String() }

// Source is a parsed file: its text and the syntax tree (possibly partial
// or nil on a syntax error).
type Source struct {
	File     *diag.File
	AST      *File
	text     string
	tokens   []lexer.Token // Tokens, made when first asked for
	comments []lexer.Token // Comments, made when first asked for
}

// Parse reads one file. It never panics on any input: lexical and syntax
// errors come back as diagnostics with positions, sorted. Like go/parser,
// it always returns a tree: on a syntax error, the tree of the file with
// the declarations that hold errors left out (empty when no part of the
// file parses). A caller lowers the tree only when there is no error.
//
// Reading a file costs little more memory than the file and its tree
// (TestParseMemory): no list of its tokens is kept, and participle, which
// words the syntax errors, is given only the part of the file around each.
func Parse(name string, src []byte) (*Source, diag.List) {
	s, diags := parse(name, src)
	if s.AST == nil {
		s.AST = &File{}
	}
	diags.Sort()
	return s, diags
}

func parse(name string, src []byte) (*Source, diag.List) {
	s := &Source{File: diag.NewFile(name, src)}
	var diags diag.List
	if len(src) > MaxSource {
		diags.Errorf(diag.Range{File: s.File}, diag.CodeTooLarge, "file is %d bytes; dragonc reads files of at most %d bytes (%d MiB)", len(src), MaxSource, MaxSource>>20)
		return s, diags
	}
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		d := diags.Errorf(diag.Range{File: s.File, Start: 0, End: 3}, diag.CodeBOM, "the file starts with a UTF-8 byte-order mark (U+FEFF)")
		d.Detail = "save it as UTF-8 without a BOM (or remove its first three bytes)"
		return s, diags
	}
	if !utf8Valid(src) {
		diags.Errorf(diag.Range{File: s.File, Start: invalidUTF8(src)}, diag.CodeUTF8, "file is not valid UTF-8")
		return s, diags
	}
	text := string(src)
	s.text = text
	lex := &lexCheck{}
	ast, h := handParse(name, text, nil, false, lex, -1)
	if h != nil && !lex.found {
		// The parser stopped early: the rest may hold a lexical error,
		// which comes first.
		sc := newScanner(text, nil)
		sc.off, sc.check = h.scanned, lex
		for t := sc.next(); t.kind != kEOF && !lex.found; t = sc.next() {
		}
	}
	if lex.found {
		t := lex.bad
		switch t.kind {
		case kBadComment:
			diags.Errorf(s.spanOf(t), diag.CodeOpenComment, "block comment is not closed").Detail = "add */ to end it"
		case kBadString:
			diags.Errorf(s.spanOf(t), diag.CodeOpenString, "string literal is not closed").Detail = `strings end with " on the same line`
		default:
			diags.Errorf(s.spanOf(t), diag.CodeTooDeep, "brackets nest deeper than %d levels", MaxNesting).Detail = "no model needs that many; is a closing bracket missing?"
		}
		return s, diags
	}
	if h == nil {
		s.AST = ast
		return s, diags
	}
	open := lex.open
	first := s.syntaxError(nil, h)
	s.refine(&first)
	if n := len(open); n > 0 && strings.HasPrefix(first.Summary, "unexpected end of file") {
		// The file ends inside a bracket: say which one.
		t := open[n-1]
		v := text[t.off:t.end]
		closer := map[string]string{"{": "}", "(": ")", "[": "]"}[v]
		first = diag.Diagnostic{Severity: diag.Error, Code: diag.CodeUnclosed, Range: s.spanOf(t),
			Summary: fmt.Sprintf("this %q is never closed: the file ends before its %q", v, closer), Detail: "add the missing " + closer}
		diags.Add(first)
		return s, diags
	}
	diags.Add(first)
	more, partial := s.recover(first)
	diags = append(diags, more...)
	s.AST = partial
	return s, diags
}

// syntaxError words the syntax error where the generated parser
// stopped (h) in the file with the ranges skips blanked: types nested too
// deep, a character outside ASCII, or what the parser looked for there,
// found by reading the file again up to that token.
func (s *Source) syntaxError(skips []span, h *halt) diag.Diagnostic {
	if h.nest {
		return diag.Diagnostic{Severity: diag.Error, Code: diag.CodeTooDeep, Range: s.spanOf(h.at),
			Summary: fmt.Sprintf("types nest deeper than %d levels", MaxNesting)}
	}
	if d, ok := s.stray(h.at); ok {
		return d
	}
	if _, w := handParse(s.File.Name, s.text, skips, true, nil, h.at.off); w != nil && w.at.off == h.at.off {
		h = w
	}
	return s.handError(h)
}

// handError words a syntax error from what the parser looked for where it
// stopped, and the word among them nearest to a misspelt one. When that
// word belongs to the innermost construction (listen after `endpoint e
// udp`), only that construction's words are listed, not also the stack's
// next items.
func (s *Source) handError(h *halt) diag.Diagnostic {
	d := diag.Diagnostic{Severity: diag.Error, Code: diag.CodeSyntax, Range: s.spanOf(h.at)}
	found := s.text[h.at.off:h.at.end]
	if h.unit != nil {
		d.Summary = h.unit.Error() + " after " + diag.Quote(s.text[h.last.off:h.last.end])
		d.Detail = "units here are " + orList(unitsOf(h.unit.dims))
		if c := diag.Closest(found, unitsOf(h.unit.dims)); c != "" {
			d.Detail = fmt.Sprintf("did you mean %q? ", c) + d.Detail
		}
		return d
	}
	if h.at.kind == kEOF {
		d.Summary = "unexpected end of file"
	} else {
		d.Summary = "unexpected " + diag.Quote(found)
	}
	tried := h.tried
	if h.at.kind == kIdent {
		if h.inner > 0 {
			if c := diag.Closest(found, keywordsOf(tried[:h.inner])); c != "" {
				// A word of the innermost construction, misspelt: what
				// else the file could say there is beside the point.
				tried = tried[:h.inner]
			}
		}
		if c := diag.Closest(found, keywordsOf(tried)); c != "" {
			d.Detail = fmt.Sprintf("did you mean %q?", c)
		}
	}
	if expected := expectations(tried); len(expected) > 0 {
		d.Summary += ": expected " + orList(expected)
	}
	return d
}

// expectations are the words tried, each once, in order, as a message
// says them: keywords as written, punctuation in quotes.
func expectations(tried []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range tried {
		if seen[w] {
			continue
		}
		seen[w] = true
		if !strings.ContainsAny(w, " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			w = strconv.Quote(w)
		}
		out = append(out, w)
	}
	return out
}

// keywordsOf are the keywords among the words tried: a misspelt word may
// be meant as one of them.
func keywordsOf(tried []string) []string {
	var out []string
	for _, w := range tried {
		if w != "" && isLetter(w[0]) && !strings.Contains(w, " ") {
			out = append(out, w)
		}
	}
	return out
}

// orList says a list of alternatives: "a", "a or b", "a, b or c".
func orList(list []string) string {
	switch len(list) {
	case 0:
		return ""
	case 1:
		return list[0]
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}

// stray reports a character outside ASCII where the syntax error is,
// such as a letter with an accent in a name: no token of the language
// but strings, comments and SMT-LIB symbols holds one, so the error is that
// character. Participle, whose alternatives back up to the start of the
// declaration, would report it at the declaration's first word.
func (s *Source) stray(t token) (diag.Diagnostic, bool) {
	v := s.text[t.off:t.end]
	if t.kind != kPunct || v[0] < utf8.RuneSelf {
		return diag.Diagnostic{}, false
	}
	r, _ := utf8.DecodeRuneInString(v)
	return diag.Diagnostic{Severity: diag.Error, Code: diag.CodeLex, Range: s.spanOf(t),
		Summary: fmt.Sprintf("unexpected character %q (%U): names and keywords are ASCII letters, digits and _", v, r),
		Detail:  "other text belongs in strings and comments; the column counts characters, not bytes"}, true
}

// Tokens returns every token of the file but whitespace, comments
// included, in order.
func (s *Source) Tokens() []lexer.Token {
	if s.tokens == nil {
		s.tokens = []lexer.Token{}
		sc := newScanner(s.text, nil)
		for t := sc.next(); t.kind != kEOF; t = sc.next() {
			s.tokens = append(s.tokens, t.lexerToken(s.File.Name, s.text))
		}
	}
	return s.tokens
}

// Comments returns every comment of the file with its position, in order,
// for the formatter.
func (s *Source) Comments() []lexer.Token {
	if s.comments == nil {
		s.comments = []lexer.Token{}
		for _, t := range s.Tokens() {
			if t.Type == kindType[kComment] {
				s.comments = append(s.comments, t)
			}
		}
	}
	return s.comments
}

func (s *Source) spanOf(t token) diag.Range {
	return diag.Range{File: s.File, Start: int(t.off), End: int(t.end)}
}

// recoverBudget bounds the text that recovery reads again in all (each
// try reads the file from its start to the next error, building no tree),
// so that a large, badly broken file costs at most about half a second
// more (8 MiB with an error every 1,000 lines: 32 errors in 0.4 s; a file
// of up to about 600 KB reports every error diag.MaxErrors allows).
const recoverBudget = 32 << 20

// recover finds further syntax errors after the first: it blanks the
// declaration holding the last error (reads it as whitespace, so positions
// stay right) and parses again, as long as each new error lies after the
// part blanked. Participle itself stops at the first error. When the
// file parses once the bad declarations are blanked, that tree is
// returned too.
func (s *Source) recover(first diag.Diagnostic) (diag.List, *File) {
	var out diag.List
	var partial *File
	var skips []span
	at := first.Range.Start
	for read := 0; len(out)+1 < diag.MaxErrors && read < recoverBudget; {
		start, end, ok := s.enclosingDecl(at)
		if !ok {
			break
		}
		skips = withSkip(skips, span{start, end})
		_, h := handParse(s.File.Name, s.text, skips, true, nil, -1)
		if h == nil {
			partial, _ = handParse(s.File.Name, s.text, skips, false, nil, -1)
			break
		}
		read += 2*int(h.at.end) + at
		d := s.syntaxError(skips, h)
		s.refine(&d)
		if d.Range.Start < end {
			break // no progress: the rest would only repeat this error
		}
		out.Add(d)
		at = d.Range.Start
	}
	return out, partial
}

// enclosingDecl returns the byte range of the innermost declaration
// that holds offset: from its keyword to the last token before the next
// declaration of the same block or that block's closing brace. A
// declaration is an element of a block that holds declarations (a
// graph's, a cluster's or a stack's: keywords.containers), beginning with
// one of their keywords (keywords.decls and keywords.items); an
// endpoint's attribute named cores is no stack item.
func (s *Source) enclosingDecl(offset int) (int, int, bool) {
	type block struct {
		container bool
		decl      int // the start of its current declaration, or -1
		lastEnd   int // the end of the last token read in it
	}
	stack := []block{{decl: -1}}
	pending := false // a container keyword was read since the last brace
	found := -1      // the depth of the declaration holding offset
	var start int
	sc := newScanner(s.text, nil)
	for t := sc.next(); t.kind != kEOF; t = sc.next() {
		if t.kind == kComment {
			continue
		}
		v := s.text[t.off:t.end]
		top := &stack[len(stack)-1]
		isDecl := top.container && t.kind == kIdent && (keywords.decls.has(v) || keywords.items.has(v))
		closes := t.kind == kPunct && v == "}"
		if found >= 0 && len(stack)-1 == found && (isDecl || closes) {
			return start, top.lastEnd, true
		}
		switch {
		case isDecl:
			top.decl = int(t.off)
			pending = keywords.containers.has(v)
		case t.kind == kIdent && keywords.containers.has(v) && len(stack) == 1:
			pending = true
		case t.kind == kPunct && v == "{":
			stack = append(stack, block{container: pending, decl: -1})
			pending = false
		case closes && len(stack) > 1:
			stack = stack[:len(stack)-1]
			pending = false
		}
		stack[len(stack)-1].lastEnd = int(t.end)
		if found < 0 && int(t.end) > offset {
			// The token at offset: the innermost block with a declaration
			// under way holds it.
			for d := len(stack) - 1; d >= 0; d-- {
				if stack[d].decl >= 0 && stack[d].decl <= offset {
					found, start = d, stack[d].decl
					break
				}
			}
			if found < 0 {
				return 0, 0, false
			}
		}
	}
	if found >= 0 {
		return start, stack[found].lastEnd, true
	}
	return 0, 0, false
}

// Range turns a node's start and end positions into a diagnostic range.
func (s *Source) Range(start, end lexer.Position) diag.Range { return s.rng(start, end) }

// rng turns a participle start/end pair into a range.
func (s *Source) rng(start, end lexer.Position) diag.Range {
	if end.Offset < start.Offset {
		end = start
	}
	return diag.Range{File: s.File, Start: start.Offset, End: end.Offset}
}

var (
	ipv6Addr = regexp.MustCompile(`\b(listen|flow)\s+(\[[0-9A-Fa-f:.]*\]|[0-9A-Fa-f]*::[0-9A-Fa-f:.]*|[0-9A-Fa-f]{1,4}(:[0-9A-Fa-f]{0,4}){2,7})`)
	macWord  = regexp.MustCompile(`\bmac\s+([^\s{}]+)`)
	macValid = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)
)

// refineReach is how far from a syntax error refine looks on its line.
const refineReach = 512

// refine replaces a syntax error that a common mistake explains with a
// message naming the mistake: an IPv6 address where dragonc takes IPv4,
// a malformed MAC address.
func (s *Source) refine(d *diag.Diagnostic) {
	// The line of the error, or its refineReach bytes either side of the
	// error: a line can be as long as the file.
	at := min(d.Range.Start, len(s.text))
	start := strings.LastIndexByte(s.text[:at], '\n') + 1
	end := strings.IndexByte(s.text[at:], '\n')
	if end < 0 {
		end = len(s.text)
	} else {
		end += at
	}
	text := s.text[max(start, at-refineReach):min(end, at+refineReach)]
	if m := ipv6Addr.FindStringSubmatch(text); m != nil && strings.Contains(m[2], ":") && !macValid.MatchString(m[2]) {
		d.Code, d.Summary = diag.CodeIPv6, diag.Sprintf("%q is not an IPv4 address: dragonc stacks are IPv4 only", m[2])
		d.Detail = "write an address such as 10.0.0.1, or * for every address of the stack"
		return
	}
	if m := macWord.FindStringSubmatch(text); m != nil && !macValid.MatchString(m[1]) {
		d.Code, d.Summary = diag.CodeBadMAC, diag.Sprintf("malformed MAC address %q", m[1])
		d.Detail = "write six hexadecimal bytes separated by colons, as 00:1b:21:3a:4b:5c"
	}
}

func utf8Valid(b []byte) bool { return utf8.Valid(b) }

// invalidUTF8 returns the offset of the first byte that is not UTF-8.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// Unquote decodes a string literal as written in a dragonc file.
func Unquote(raw string) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", fmt.Errorf("not a string literal")
	}
	var b strings.Builder
	body := raw[1 : len(raw)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", fmt.Errorf("string ends in a backslash")
		}
		switch body[i] {
		case '"', '\\', '\'':
			b.WriteByte(body[i])
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			return "", fmt.Errorf("unknown escape \\%c", body[i])
		}
	}
	return b.String(), nil
}
