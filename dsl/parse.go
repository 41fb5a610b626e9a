// Package dsl is the dragonc language: its lexer and grammar (participle
// v2), the concrete syntax tree with positions, name resolution, validation,
// diagnostics, lowering into graphs, and the canonical formatter. It knows
// nothing about NICs.
package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/dragonc/dragonc/internal/diag"
)

// Lexer is the one token definition for every dragonc file. Rules are
// tried in order and the first match wins, so the more specific shapes
// (MAC before IP before Number, Ref before Punct) come first. Comments and
// whitespace are elided in one place, the parser options below.
var Lexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*|/\*([^*]|\*+[^*/])*\*+/`},
	{Name: "BadComment", Pattern: `/\*`},
	{Name: "String", Pattern: `"(\\.|[^"\\\n])*"`},
	{Name: "BadString", Pattern: `"`},
	{Name: "Whitespace", Pattern: `[ \t\r\n\f\v]+`},
	// SMT-LIB line comments and quoted symbols are single tokens, so a
	// brace inside them does not upset a block's balance.
	{Name: "SMTComment", Pattern: `;[^\n]*`},
	{Name: "SMTSymbol", Pattern: `\|[^|]*\|`},
	{Name: "MAC", Pattern: `[0-9A-Fa-f]+(:[0-9A-Fa-f]+){2,}`},
	{Name: "IP", Pattern: `[0-9]+(\.[0-9]+){2,}`},
	{Name: "Number", Pattern: `[0-9]+(\.[0-9]+)?`},
	{Name: "Ref", Pattern: `\.+[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*([.-][A-Za-z_][A-Za-z0-9_]*)*`},
	{Name: "Punct", Pattern: `->|\.\.|[^ \t\r\n\f\vA-Za-z0-9_"]`},
})

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

// Source is a parsed file: its text, the syntax tree (possibly partial or
// nil on a syntax error), and every comment with its offset for the
// formatter.
type Source struct {
	File     *diag.File
	AST      *File
	Comments []lexer.Token
	text     string
	toks     []token       // every token but whitespace, EOF last
	tokens   []lexer.Token // Tokens, made when first asked for
}

// Parse reads one file. It never panics on any input: lexical and syntax
// errors come back as diagnostics with positions, sorted. Like go/parser,
// it always returns a tree: on a syntax error, the tree of the file with
// the declarations that hold errors left out (empty when no part of the
// file parses). A caller lowers the tree only when there is no error.
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
		diags.Errorf(diag.Range{File: s.File}, "E112", "file is %d bytes; dragonc reads files of at most %d bytes (%d MiB)", len(src), MaxSource, MaxSource>>20)
		return s, diags
	}
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		d := diags.Errorf(diag.Range{File: s.File, Start: 0, End: 3}, "E113", "the file starts with a UTF-8 byte-order mark (U+FEFF)")
		d.Detail = "save it as UTF-8 without a BOM (or remove its first three bytes)"
		return s, diags
	}
	if !utf8Valid(src) {
		diags.Errorf(diag.Range{File: s.File, Start: invalidUTF8(src)}, "E100", "file is not valid UTF-8")
		return s, diags
	}
	text := string(src)
	s.text = text
	s.toks = scan(text)
	var open []token // brackets not yet closed
	for _, t := range s.toks {
		switch t.kind {
		case kComment:
			s.Comments = append(s.Comments, t.lexerToken(name, text))
		case kBadComment:
			diags.Errorf(s.spanOf(t), "E102", "block comment is not closed").Detail = "add */ to end it"
			return s, diags
		case kBadString:
			diags.Errorf(s.spanOf(t), "E103", "string literal is not closed").Detail = `strings end with " on the same line`
			return s, diags
		case kPunct:
			switch text[t.off:t.end] {
			case "{", "(", "[":
				open = append(open, t)
				if len(open) > MaxNesting {
					diags.Errorf(s.spanOf(t), "E111", "brackets nest deeper than %d levels", MaxNesting).Detail = "no model needs that many; is a closing bracket missing?"
					return s, diags
				}
			case "}", ")", "]":
				if len(open) > 0 {
					open = open[:len(open)-1]
				}
			}
		}
	}
	// Stack files, which users write at scale, take the fast parser; any
	// other file, and any stack it rejects, goes to participle.
	if first := s.firstToken(); first.kind == kIdent && text[first.off:first.end] == "stack" {
		if ast := parseStack(s.toks, name, text); ast != nil {
			s.AST = ast
			return s, diags
		}
	}
	ast, err := parser.ParseFromLexer(peeking(s.toks, name, text))
	if err != nil {
		first := s.errorAt(err, "E110")
		s.refine(&first)
		if n := len(open); n > 0 && strings.HasPrefix(first.Summary, "unexpected end of file") {
			// The file ends inside a bracket: say which one.
			t := open[n-1]
			v := text[t.off:t.end]
			closer := map[string]string{"{": "}", "(": ")", "[": "]"}[v]
			first = diag.Diagnostic{Severity: diag.Error, Code: "E114", Range: s.spanOf(t),
				Summary: fmt.Sprintf("this %q is never closed: the file ends before its %q", v, closer), Detail: "add the missing " + closer}
			diags.Add(first)
			return s, diags
		}
		diags.Add(first)
		more, partial := s.recover(src, first)
		diags = append(diags, more...)
		s.AST = partial
		return s, diags
	}
	s.AST = ast
	return s, diags
}

// firstToken is the first token that is not whitespace or a comment.
func (s *Source) firstToken() token {
	for _, t := range s.toks {
		if t.kind != kComment {
			return t
		}
	}
	return s.toks[len(s.toks)-1]
}

// Tokens returns every token of the file but whitespace, comments
// included, in order.
func (s *Source) Tokens() []lexer.Token {
	if s.tokens == nil {
		s.tokens = make([]lexer.Token, 0, len(s.toks))
		for _, t := range s.toks {
			if t.kind != kEOF {
				s.tokens = append(s.tokens, t.lexerToken(s.File.Name, s.text))
			}
		}
	}
	return s.tokens
}

func (s *Source) spanOf(t token) diag.Range {
	return diag.Range{File: s.File, Start: int(t.off), End: int(t.end)}
}

// recoverBudget bounds the text that recovery parses again in all (each
// try parses the whole file), so that a large, badly broken file costs
// about a second more at most (a 500 KB stack file: 8 tries); a file of up
// to 80 KiB reports every error diag.MaxErrors allows.
const recoverBudget = 4 << 20

// startKeywords begin a declaration at graph, cluster or stack level.
var startKeywords = map[string]bool{"node": true, "boolean": true, "and": true, "or": true, "nand": true, "nor": true,
	"config": true, "cluster": true, "engine": true, "task": true, "resources": true, "helpers": true,
	"endpoint": true, "interface": true, "service": true, "cores": true}

// recover finds further syntax errors after the first: it blanks the
// declaration holding the last error (spaces, newlines kept, so positions
// stay right) and parses again, as long as each new error lies after the
// part blanked. Participle itself stops at the first error. When the
// file parses once the bad declarations are blanked, that tree is
// returned too.
func (s *Source) recover(src []byte, first diag.Diagnostic) (diag.List, *File) {
	var out diag.List
	var partial *File
	buf := append([]byte(nil), src...)
	at := first.Range.Start
	for parsed := 0; len(out)+1 < diag.MaxErrors && parsed+len(buf) <= recoverBudget; parsed += len(buf) {
		start, end, ok := s.enclosingDecl(at)
		if !ok {
			break
		}
		for i := start; i < end; i++ {
			if buf[i] != '\n' {
				buf[i] = ' '
			}
		}
		text := string(buf)
		ast, err := parser.ParseFromLexer(peeking(scan(text), s.File.Name, text))
		if err == nil {
			partial = ast
			break
		}
		d := s.errorAt(err, "E110")
		if d.Range.Start < end {
			break // no progress: the rest would only repeat this error
		}
		out = append(out, d)
		at = d.Range.Start
	}
	return out, partial
}

// enclosingDecl returns the byte range of the declaration that holds
// offset: from its keyword to its matching closing brace.
func (s *Source) enclosingDecl(offset int) (int, int, bool) {
	var toks []lexer.Token
	for _, t := range s.Tokens() {
		if t.Type != sym("Comment") {
			toks = append(toks, t)
		}
	}
	k := -1
	for i, t := range toks {
		if t.Pos.Offset <= offset {
			k = i
		}
	}
	for ; k >= 0; k-- {
		if !startKeywords[toks[k].Value] || toks[k].Type != sym("Ident") {
			continue
		}
		depth, opened := 0, false
		for j := k; j < len(toks); j++ {
			switch toks[j].Value {
			case "{":
				depth++
				opened = true
			case "}":
				depth--
			}
			if opened && depth == 0 {
				end := toks[j].Pos.Offset + 1
				if end > offset {
					return toks[k].Pos.Offset, end, true
				}
				break
			}
			if depth < 0 {
				break
			}
		}
	}
	return 0, 0, false
}

func sym(name string) lexer.TokenType { return Lexer.Symbols()[name] }

// Range turns a node's start and end positions into a diagnostic range.
func (s *Source) Range(start, end lexer.Position) diag.Range { return s.rng(start, end) }

// rng turns a participle start/end pair into a range.
func (s *Source) rng(start, end lexer.Position) diag.Range {
	if end.Offset < start.Offset {
		end = start
	}
	return diag.Range{File: s.File, Start: start.Offset, End: end.Offset}
}

// errorAt converts a participle error into a diagnostic, rewording its
// messages into the project's style.
func (s *Source) errorAt(err error, code string) diag.Diagnostic {
	d := diag.Diagnostic{Severity: diag.Error, Code: code, Range: diag.Range{File: s.File}}
	var perr participle.Error
	if errors.As(err, &perr) {
		d.Range.Start = perr.Position().Offset
		d.Summary = reword(perr.Message())
		var ute *participle.UnexpectedTokenError
		if errors.As(err, &ute) {
			d.Range.End = d.Range.Start + len(ute.Unexpected.Value)
		}
	} else {
		d.Summary = err.Error()
	}
	if d.Summary == "" {
		d.Summary = "syntax error"
	}
	return d
}

var (
	ipv6Addr = regexp.MustCompile(`\b(listen|flow)\s+(\[[0-9A-Fa-f:.]*\]|[0-9A-Fa-f]*::[0-9A-Fa-f:.]*|[0-9A-Fa-f]{1,4}(:[0-9A-Fa-f]{0,4}){2,7})`)
	macWord  = regexp.MustCompile(`\bmac\s+([^\s{}]+)`)
	macValid = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)
)

// refine replaces a syntax error that a common mistake explains with a
// message naming the mistake: an IPv6 address where dragonc takes IPv4,
// a malformed MAC address.
func (s *Source) refine(d *diag.Diagnostic) {
	line, _ := s.File.Position(d.Range.Start)
	text := s.File.Line(line)
	if m := ipv6Addr.FindStringSubmatch(text); m != nil && strings.Contains(m[2], ":") && !macValid.MatchString(m[2]) {
		d.Code, d.Summary = "E515", fmt.Sprintf("%q is not an IPv4 address: dragonc stacks are IPv4 only", m[2])
		d.Detail = "write an address such as 10.0.0.1, or * for every address of the stack"
		return
	}
	if m := macWord.FindStringSubmatch(text); m != nil && !macValid.MatchString(m[1]) {
		d.Code, d.Summary = "E504", fmt.Sprintf("malformed MAC address %q", m[1])
		d.Detail = "write six hexadecimal bytes separated by colons, as 00:1b:21:3a:4b:5c"
	}
}

// reword turns participle's messages into lower-case, user-facing ones.
func reword(msg string) string {
	msg = strings.ReplaceAll(msg, `unexpected token "<EOF>"`, "unexpected end of file")
	return msg
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
