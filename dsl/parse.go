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

// Source is a parsed file: its text and the syntax tree (possibly partial
// or nil on a syntax error).
type Source struct {
	File     *diag.File
	AST      *File
	text     string
	tokens   []lexer.Token // Tokens, made when first asked for
	comments []lexer.Token // Comments, made when first asked for
	// participleTokens counts the tokens given to participle.
	participleTokens int
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
	ast, h := handParse(name, text, nil, false, lex)
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
	first, tree := s.syntaxError(nil, h)
	if tree != nil {
		s.AST = tree
		return s, diags
	}
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

// Participle is given a window of the file: the part the hand-written
// parser read last (halt.window), up to windowMargin tokens past where it
// stopped, then more if participle's error lies at the window's end, and
// at last the whole file. Participle allocates 1 to 2.5 KB for each token
// it is given (measured on windows of 800 to 12,000 tokens), so all the
// windows of one file hold at most participleBudget tokens, or one for
// every participleBytes bytes of the file if that is more: some 10 bytes
// a byte of the file at most. Past that, the hand-written parser words
// the messages.
const (
	windowMargin     = 8
	participleBudget = 4096
	participleBytes  = 256
)

// syntaxError words the syntax error where the hand-written parser
// stopped (h) in the file with the ranges skips blanked. Participle words
// it, unless types nest too deep there or the token there is a character
// outside ASCII. When participle accepts the whole file (the two parsers
// disagree, which the tests rule out), its tree comes back instead.
func (s *Source) syntaxError(skips []span, h *halt) (diag.Diagnostic, *File) {
	if h.nest {
		return diag.Diagnostic{Severity: diag.Error, Code: diag.CodeTooDeep, Range: s.spanOf(h.at),
			Summary: fmt.Sprintf("types nest deeper than %d levels", MaxNesting)}, nil
	}
	if d, ok := s.stray(h.at); ok {
		return d, nil
	}
	windowed := skips
	for _, r := range h.window {
		windowed = withSkip(windowed, r)
	}
	type try struct {
		skips  []span
		margin int // tokens past the stop; -1: to the end of the file
	}
	tries := []try{{windowed, windowMargin}, {windowed, 64 * windowMargin}}
	if len(h.window) > 0 {
		tries = append(tries, try{windowed, -1})
	}
	tries = append(tries, try{skips, -1})
	budget := max(participleBudget, len(s.text)/participleBytes) - s.participleTokens
	for i, try := range tries {
		full := i == len(tries)-1
		cut, n := s.window(try.skips, h.at, try.margin)
		if cut == len(s.text) && !full && len(h.window) == 0 {
			continue // the same as the whole file
		}
		if n > budget {
			break
		}
		budget -= n
		s.participleTokens += n
		sc := newScanner(s.text, try.skips)
		sc.stop = cut
		ast, err := parser.ParseFromLexer(peeking(sc, s.File.Name))
		if err == nil {
			if full {
				return diag.Diagnostic{}, ast
			}
			continue
		}
		if d := s.errorAt(err, diag.CodeSyntax); d.Range.Start < cut || cut == len(s.text) {
			return d, nil
		}
	}
	return s.handError(h), nil
}

// window returns the offset of the token margin tokens past at (or the
// end of the file) and how many tokens participle is given up to there.
func (s *Source) window(skips []span, at token, margin int) (cut, n int) {
	sc := newScanner(s.text, skips)
	past := -1 // tokens at or past at
	for t := sc.next(); t.kind != kEOF; t = sc.next() {
		if t.off >= at.off {
			past++
			if margin >= 0 && past > margin {
				return int(t.off), n
			}
		}
		n++
	}
	return len(s.text), n
}

// handError words a syntax error as the hand-written parser found it.
func (s *Source) handError(h *halt) diag.Diagnostic {
	d := diag.Diagnostic{Severity: diag.Error, Code: diag.CodeSyntax, Range: s.spanOf(h.at)}
	if h.at.kind == kEOF {
		d.Summary = "unexpected end of file"
	} else {
		d.Summary = "unexpected token " + diag.Quote(s.text[h.at.off:h.at.end])
	}
	if h.want != "" {
		d.Summary += " (expected " + h.want + ")"
	}
	return d
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

// startKeywords begin a declaration at graph, cluster or stack level.
var startKeywords = map[string]bool{"node": true, "boolean": true, "and": true, "or": true, "nand": true, "nor": true,
	"config": true, "cluster": true, "engine": true, "task": true, "resources": true, "helpers": true,
	"endpoint": true, "interface": true, "service": true, "cores": true}

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
		_, h := handParse(s.File.Name, s.text, skips, true, nil)
		if h == nil {
			partial, _ = handParse(s.File.Name, s.text, skips, false, nil)
			break
		}
		read += int(h.at.end) + at
		d, tree := s.syntaxError(skips, h)
		if tree != nil {
			partial = tree
			break
		}
		if d.Range.Start < end {
			break // no progress: the rest would only repeat this error
		}
		out.Add(d)
		at = d.Range.Start
	}
	return out, partial
}

// enclosingDecl returns the byte range of the declaration that holds
// offset: from its keyword to its matching closing brace. Of the keywords
// at or before offset, it is the last whose block (the first brace after
// it, if that opens one) ends after offset.
func (s *Source) enclosingDecl(offset int) (int, int, bool) {
	// An open "{": the keyword it belongs to (or -1), and the last such
	// keyword of the braces open down to it.
	type open struct{ kw, last int }
	var stack []open
	kw := -1   // the last keyword at or before offset since the last brace
	best := -1 // the best keyword found, and its block's end
	bestEnd := 0
	sc := newScanner(s.text, nil)
	for t := sc.next(); t.kind != kEOF; t = sc.next() {
		if t.kind == kComment {
			continue
		}
		v := s.text[t.off:t.end]
		switch {
		case t.kind == kIdent && startKeywords[v]:
			if int(t.off) <= offset {
				kw = int(t.off)
			}
		case t.kind == kPunct && v == "{":
			o := open{kw, kw}
			if len(stack) > 0 {
				o.last = max(o.last, stack[len(stack)-1].last)
			}
			stack = append(stack, o)
			kw = -1
		case t.kind == kPunct && v == "}":
			kw = -1
			if len(stack) == 0 {
				continue
			}
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if end := int(t.end); o.kw > best && end > offset {
				best, bestEnd = o.kw, end
			}
		}
		if int(t.off) > offset {
			// Only the blocks open now, and that of the keyword kw, can
			// still end after offset; once none of theirs is later than
			// best, nothing better is to come.
			if (len(stack) == 0 || stack[len(stack)-1].last <= best) && kw <= best {
				break
			}
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return best, bestEnd, true
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
		msg := perr.Message()
		var ute *participle.UnexpectedTokenError
		if errors.As(err, &ute) {
			d.Range.End = d.Range.Start + len(ute.Unexpected.Value)
			// Participle quotes the token whole, and a name can be as long
			// as the file.
			if rest, ok := strings.CutPrefix(msg, fmt.Sprintf("unexpected token %q", ute.Unexpected)); ok {
				msg = "unexpected token " + diag.Quote(ute.Unexpected.String()) + rest
			}
		}
		d.Summary = reword(msg)
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
