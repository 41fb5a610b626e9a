package dsl

import (
	"io"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// The scanner below is the one definition of the language's tokens. It
// tokenises a file in one pass, and participle lexes with it too (Lexer).
// The token kinds, as regular expressions tried in order where the first
// match wins (next spells each out):
//
//	Comment     //[^\n]*  |  /\*([^*]|\*+[^*/])*\*+/
//	BadComment  /\*                      (a block comment never closed)
//	String      "(\\.|[^"\\\n])*"
//	BadString   "                        (a string not closed on its line)
//	Whitespace  [ \t\r\n\f\v]+
//	SMTComment  ;[^\n]*                  (SMT-LIB: a brace inside does not count)
//	SMTSymbol   \|[^|]*\|
//	MAC         [0-9A-Fa-f]+(:[0-9A-Fa-f]+){2,}
//	IP          [0-9]+(\.[0-9]+){2,}
//	Number      [0-9]+(\.[0-9]+)?
//	Ref         \.+[A-Za-z_][A-Za-z0-9_]*
//	Ident       [A-Za-z_][A-Za-z0-9_]*([.-][A-Za-z_][A-Za-z0-9_]*)*
//	Punct       ->  |  \.\.  |  any other character
//
// TestTokens holds the scanner to its expected tokens, with positions, on
// the inputs where one kind's match stops and another's starts.

// kind is a token's kind, in the order of the rules above.
type kind uint8

const (
	kEOF kind = iota
	kComment
	kBadComment
	kString
	kBadString
	kWhitespace
	kSMTComment
	kSMTSymbol
	kMAC
	kIP
	kNumber
	kRef
	kIdent
	kPunct
	numKinds
)

var kindNames = [numKinds]string{"EOF", "Comment", "BadComment", "String", "BadString", "Whitespace",
	"SMTComment", "SMTSymbol", "MAC", "IP", "Number", "Ref", "Ident", "Punct"}

// kindType maps a kind to participle's token type: EOF is participle's,
// the others count down from it.
var kindType = func() (out [numKinds]lexer.TokenType) {
	for k := range out {
		out[k] = lexer.EOF - lexer.TokenType(k)
	}
	return out
}()

// Lexer is the token definition of every dragonc file for participle:
// the scanner. Comments and whitespace are elided in one place, the
// parser's options.
var Lexer lexer.Definition = scanDef{}

type scanDef struct{}

func (scanDef) Symbols() map[string]lexer.TokenType {
	out := make(map[string]lexer.TokenType, numKinds)
	for k, name := range kindNames {
		out[name] = kindType[k]
	}
	return out
}

func (d scanDef) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return d.LexString(filename, string(b))
}

// LexString scans src; every input scans (anything unmatched is a
// one-character Punct).
func (scanDef) LexString(filename, src string) (lexer.Lexer, error) {
	return newFeed(newScanner(src, nil), filename), nil
}

// token is one scanned token: its rule, its byte span, and the line and
// column (1-based, in characters) where it starts.
type token struct {
	kind      kind
	off, end  int32
	line, col int32
}

// span is a byte range [start, end) of a file.
type span struct{ start, end int }

// scanner reads a file's tokens one at a time, whitespace left out, with
// the line and column where each starts. Nothing is kept: a file of
// 64 MiB costs no memory to scan however many tokens it has (a slice of
// them once cost 20 bytes and more per input byte). Syntax recovery has
// it read some ranges of the file as blank, and a window given to
// participle ends early.
type scanner struct {
	src       string
	off       int   // where scanning goes on
	line, col int32 // the position of off
	skips     []span
	stop      int       // where the scan ends: EOF sits at the first token at or after it
	check     *lexCheck // when set, sees every token scanned
}

// lexCheck finds the errors a file's tokens show by themselves: a block
// comment or a string never closed, brackets nested too deep. Any of them
// is the file's error, wherever it lies, and the scanner looks for them as
// the parser reads, so that a file is scanned once.
type lexCheck struct {
	open []token // the brackets not yet closed
	bad  token   // the first error, when found
	// found says an error was found; the parser stops there.
	found bool
}

// see checks one token of the file, in order.
func (c *lexCheck) see(t token, src string) {
	if c.found {
		return
	}
	switch t.kind {
	case kBadComment, kBadString:
		c.bad, c.found = t, true
	case kPunct:
		switch src[t.off:t.end] {
		case "{", "(", "[":
			c.open = append(c.open, t)
			if len(c.open) > MaxNesting {
				c.bad, c.found = t, true
			}
		case "}", ")", "]":
			if len(c.open) > 0 {
				c.open = c.open[:len(c.open)-1]
			}
		}
	}
}

// newScanner scans src, which must be valid UTF-8 of at most MaxSource
// bytes, reading each range of skips (sorted, disjoint, each from one
// token's start to another's end) as whitespace. Every input scans
// (anything unmatched is a one-rune Punct).
func newScanner(src string, skips []span) scanner {
	return scanner{src: src, line: 1, col: 1, skips: skips, stop: len(src)}
}

// next returns the next token that is not whitespace; at the end, EOF
// (again at every call).
func (s *scanner) next() token {
	var t token
	s.read(&t, false)
	return t
}

// read sets *t to the next token that is not whitespace, nor a comment
// if noComments. Parsers read every token of a large file through it.
func (s *scanner) read(t *token, noComments bool) {
	for {
		if len(s.skips) > 0 && s.off >= s.skips[0].start {
			if end := s.skips[0].end; end > s.off {
				s.advance(end)
			}
			s.skips = s.skips[1:]
			continue
		}
		if s.off >= s.stop || s.off >= len(s.src) {
			*t = token{kind: kEOF, off: int32(s.off), end: int32(s.off), line: s.line, col: s.col}
			return
		}
		k, j := next(s.src, s.off)
		if k == kWhitespace || k == kComment && noComments {
			s.advance(j)
			continue
		}
		*t = token{kind: k, off: int32(s.off), end: int32(j), line: s.line, col: s.col}
		s.advance(j)
		if s.check != nil {
			s.check.see(*t, s.src)
		}
		return
	}
}

// advance moves the scan to offset to, counting the lines and characters
// on the way.
func (s *scanner) advance(to int) {
	text := s.src[s.off:to]
	if nl := strings.LastIndexByte(text, '\n'); nl >= 0 {
		s.line += int32(strings.Count(text, "\n"))
		s.col = int32(utf8.RuneCountInString(text[nl:]))
	} else {
		s.col += int32(utf8.RuneCountInString(text))
	}
	s.off = to
}

// withSkip adds r to a sorted list of disjoint ranges, merging those it
// overlaps or touches, and returns a new list.
func withSkip(skips []span, r span) []span {
	out := make([]span, 0, len(skips)+1)
	i := 0
	for ; i < len(skips) && skips[i].end < r.start; i++ {
		out = append(out, skips[i])
	}
	for ; i < len(skips) && skips[i].start <= r.end; i++ {
		r = span{min(r.start, skips[i].start), max(r.end, skips[i].end)}
	}
	out = append(out, r)
	return append(out, skips[i:]...)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' }
func isWord(c byte) bool   { return isLetter(c) || isDigit(c) }

// IsSpace says whether c is a byte of the lexer's whitespace.
func IsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'
}

// run returns the end of the run of bytes from i that satisfy ok.
func run(src string, i int, ok func(byte) bool) int {
	for i < len(src) && ok(src[i]) {
		i++
	}
	return i
}

// groups extends a match at j by `SEP RUN` groups for as long as they
// match, returning the end and how many there were.
func groups(src string, j int, sep byte, ok func(byte) bool) (int, int) {
	n := 0
	for j+1 < len(src) && src[j] == sep && ok(src[j+1]) {
		j = run(src, j+1, ok)
		n++
	}
	return j, n
}

// next returns the kind and end of the token at i.
func next(src string, i int) (kind, int) {
	c := src[i]
	switch {
	case c == '/' && i+1 < len(src) && src[i+1] == '/':
		if e := strings.IndexByte(src[i:], '\n'); e >= 0 {
			return kComment, i + e
		}
		return kComment, len(src)
	case c == '/' && i+1 < len(src) && src[i+1] == '*':
		if e := strings.Index(src[i+2:], "*/"); e >= 0 {
			return kComment, i + 2 + e + 2
		}
		return kBadComment, i + 2
	case c == '"':
		for j := i + 1; j < len(src); j++ {
			switch src[j] {
			case '"':
				return kString, j + 1
			case '\n':
				return kBadString, i + 1
			case '\\':
				if j+1 >= len(src) || src[j+1] == '\n' {
					return kBadString, i + 1
				}
				j++ // the escaped byte; the bytes of a longer rune match the body anyway
			}
		}
		return kBadString, i + 1
	case IsSpace(c):
		return kWhitespace, run(src, i, IsSpace)
	case c == ';':
		if e := strings.IndexByte(src[i:], '\n'); e >= 0 {
			return kSMTComment, i + e
		}
		return kSMTComment, len(src)
	case c == '|':
		if e := strings.IndexByte(src[i+1:], '|'); e >= 0 {
			return kSMTSymbol, i + 1 + e + 1
		}
		return kPunct, i + 1
	}
	if isHex(c) {
		if j, n := groups(src, run(src, i, isHex), ':', isHex); n >= 2 {
			return kMAC, j
		}
	}
	if isDigit(c) {
		d := run(src, i, isDigit)
		j, n := groups(src, d, '.', isDigit)
		switch {
		case n >= 2:
			return kIP, j
		case n == 1:
			return kNumber, j
		}
		return kNumber, d
	}
	if c == '.' {
		d := run(src, i, func(b byte) bool { return b == '.' })
		if d < len(src) && isLetter(src[d]) {
			return kRef, run(src, d, isWord)
		}
		if i+1 < len(src) && src[i+1] == '.' {
			return kPunct, i + 2
		}
		return kPunct, i + 1
	}
	if isLetter(c) {
		j := run(src, i, isWord)
		for j+1 < len(src) && (src[j] == '.' || src[j] == '-') && isLetter(src[j+1]) {
			j = run(src, j+1, isWord)
		}
		return kIdent, j
	}
	if c == '-' && i+1 < len(src) && src[i+1] == '>' {
		return kPunct, i + 2
	}
	if c < utf8.RuneSelf {
		return kPunct, i + 1
	}
	_, n := utf8.DecodeRuneInString(src[i:])
	return kPunct, i + n
}

// position is a token's start as a participle position.
func (t token) position(file string) lexer.Position {
	return lexer.Position{Filename: file, Offset: int(t.off), Line: int(t.line), Column: int(t.col)}
}

// endPosition is where a token ends. Only whitespace, comments and SMT
// symbols span lines, and the parser never ends a node on one of those.
func (t token) endPosition(file, src string) lexer.Position {
	return lexer.Position{Filename: file, Offset: int(t.end), Line: int(t.line),
		Column: int(t.col) + utf8.RuneCountInString(src[t.off:t.end])}
}

// lexerToken converts a scanned token into participle's form.
func (t token) lexerToken(file, src string) lexer.Token {
	return lexer.Token{Type: kindType[t.kind], Value: src[t.off:t.end], Pos: t.position(file)}
}

// feed hands scanned tokens to participle. The whitespace between two
// tokens comes back as the one Whitespace token the Lexer would give (a
// skipped range inside it too, as the blanks it stands for).
type feed struct {
	sc      scanner
	file    string
	prevEnd lexer.Position // where the last token given ends
	held    token          // the token to give after its whitespace
	holding bool
}

func newFeed(sc scanner, file string) *feed {
	return &feed{sc: sc, file: file, prevEnd: lexer.Position{Filename: file, Line: 1, Column: 1}}
}

func (f *feed) Next() (lexer.Token, error) {
	var t token
	if f.holding {
		t, f.holding = f.held, false
	} else {
		t = f.sc.next()
		if int(t.off) > f.prevEnd.Offset {
			f.held, f.holding = t, true
			return lexer.Token{Type: kindType[kWhitespace], Value: f.sc.src[f.prevEnd.Offset:t.off], Pos: f.prevEnd}, nil
		}
	}
	if t.kind == kEOF {
		return lexer.Token{Type: kindType[kEOF], Pos: t.position(f.file)}, nil
	}
	lt := t.lexerToken(f.file, f.sc.src)
	if t.kind == kComment || t.kind == kSMTSymbol {
		// These may span lines.
		f.prevEnd = lt.Pos
		f.prevEnd.Advance(lt.Value)
	} else {
		f.prevEnd = t.endPosition(f.file, f.sc.src)
	}
	return lt, nil
}
