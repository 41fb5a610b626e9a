package dsl

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/dragonc/dragonc/internal/diag"
)

// ParseStackItems reads the items of a stack that lie between offsets
// from and to of src, with the file's own parser (parse_gen.go), for a
// reload that reads again only the part of a stack file that changed
// (lpg.Loader). from must be where a token of the stack's body ends (the
// end of an item, whose stack is not nested in anything else) and to
// where one starts (an item or the stack's closing brace), in a file
// whose text outside [from, to) is known to read without error. The
// range must hold nothing but whole items, with whitespace and comments
// between them: the first token at or after to must start at to, and no
// lexical error may lie in the range. ok is false when it does not, or
// when anything in it does not parse; the caller then reads the whole
// file (Parse), which says why. The items' positions are the file's; the
// Source is the whole file's, with no tree.
//
// Unlike Parse, it does not copy src, which must not change afterwards
// (its text and the items' strings are src's bytes): a reload reads a
// small range of a large file.
func ParseStackItems(name string, src []byte, from, to int) (s *Source, items []*StackItem, ok bool) {
	if from < 0 || to < from || to > len(src) || len(src) > MaxSource || !utf8.Valid(src[from:to]) {
		return nil, nil, false
	}
	text := unsafe.String(unsafe.SliceData(src), len(src))
	s = &Source{File: diag.NewFile(name, src), text: text, AST: &File{}}
	// The scan starts at from as a scan of the whole file reaches it: its
	// line and column, and the stack's brace open.
	line := 1 + strings.Count(text[:from], "\n")
	col := 1 + utf8.RuneCountInString(text[strings.LastIndexByte(text[:from], '\n')+1:from])
	check := &lexCheck{open: []token{{kind: kPunct}}}
	sc := newScanner(text, nil)
	sc.off, sc.line, sc.col, sc.check = from, int32(line), int32(col), check
	p := &hparser{sc: sc, file: name, src: text, watch: -1, inner: -1}
	defer func() {
		if r := recover(); r != nil {
			if _, stopped := r.(bailout); !stopped {
				panic(r)
			}
			s, items, ok = nil, nil, false
		}
	}()
	p.scan()
	// The loop of parseStack, over the range only.
	for p.elem(); int(p.cur.off) < to && p.startsStackItem(); p.elem() {
		items = append(items, p.parseStackItem())
	}
	if int(p.cur.off) != to || check.found {
		return nil, nil, false
	}
	return s, items, true
}
