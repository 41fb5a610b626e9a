package dsl

import (
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// The scanner below tokenises a file in one pass without regular
// expressions. It produces exactly the tokens of Lexer, the rule list that
// defines the language's tokens (the rules are tried in order and the
// first match wins): TestScannerAgreesWithLexer and FuzzScanner hold the
// two to each other, token by token with positions.

// kind is a token's rule, in the order of Lexer's rules.
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

// kindType maps a kind to the Lexer's token type.
var kindType = func() (out [numKinds]lexer.TokenType) {
	syms := Lexer.Symbols()
	for k, name := range kindNames {
		t, ok := syms[name]
		if !ok {
			panic("dsl: Lexer has no rule " + name)
		}
		out[k] = t
	}
	return out
}()

// token is one scanned token: its rule, its byte span, and the line and
// column (1-based, in runes) where it starts.
type token struct {
	kind      kind
	off, end  int32
	line, col int32
}

// scan tokenises src, which must be valid UTF-8 of at most MaxSource
// bytes. Every input scans (anything unmatched is a one-rune Punct). The
// tokens come back without whitespace, which is whatever lies between
// them, and end with EOF.
func scan(src string) []token {
	toks := make([]token, 0, len(src)/6+1)
	line, col := int32(1), int32(1)
	for i := 0; i < len(src); {
		k, j := next(src, i)
		if k != kWhitespace {
			toks = append(toks, token{kind: k, off: int32(i), end: int32(j), line: line, col: col})
		}
		span := src[i:j]
		if k == kWhitespace || k == kComment || k == kSMTSymbol {
			if nl := strings.LastIndexByte(span, '\n'); nl >= 0 {
				line += int32(strings.Count(span, "\n"))
				col = int32(utf8.RuneCountInString(span[nl:]))
				i = j
				continue
			}
		}
		col += int32(utf8.RuneCountInString(span))
		i = j
	}
	return append(toks, token{kind: kEOF, off: int32(len(src)), end: int32(len(src)), line: line, col: col})
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' }
func isWord(c byte) bool   { return isLetter(c) || isDigit(c) }
func isSpace(c byte) bool {
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
	case isSpace(c):
		return kWhitespace, run(src, i, isSpace)
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

// replay hands scanned tokens to participle, so a file is scanned once
// whichever parser reads it. The whitespace between two tokens comes back
// as the one Whitespace token the Lexer would give.
type replay struct {
	toks      []token
	file, src string
	i         int
	gap       bool // the whitespace before toks[i] has been given
}

func (r *replay) Next() (lexer.Token, error) {
	t := r.toks[r.i]
	prevEnd, pos := int32(0), lexer.Position{Filename: r.file, Line: 1, Column: 1}
	if r.i > 0 {
		prev := r.toks[r.i-1]
		prevEnd, pos = prev.end, prev.position(r.file)
		pos.Advance(r.src[prev.off:prev.end])
	}
	if !r.gap && prevEnd < t.off {
		r.gap = true
		return lexer.Token{Type: kindType[kWhitespace], Value: r.src[prevEnd:t.off], Pos: pos}, nil
	}
	if t.kind != kEOF {
		r.i++
		r.gap = false
	}
	return t.lexerToken(r.file, r.src), nil
}

// peeking prepares scanned tokens for participle, eliding comments and
// whitespace as the parser's options say.
func peeking(toks []token, file, src string) *lexer.PeekingLexer {
	p, _ := lexer.Upgrade(&replay{toks: toks, file: file, src: src}, kindType[kComment], kindType[kWhitespace])
	return p
}
