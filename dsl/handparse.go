package dsl

// Every file is read by the parser generated from the grammar's struct
// tags in ast.go (parse_gen.go, written by TestParserGenerated: go test
// ./dsl -update), not by participle, which keeps every token it is given
// and allocates 1 to 2.5 KB for each (a stack of 100,000 endpoints could
// not afford it). It builds participle's syntax tree, positions included;
// its tokens are the scanner's (lex.go, which participle lexes with too)
// and units are one table (units.go). TestStackParserAgrees,
// TestGraphParserAgrees and their fuzz targets compare it with participle
// on every file of the repository and on arbitrary input. This file holds
// what the generated code reads tokens with: the cursor, the noting of
// what was looked for, and the tree's allocator.
//
// On a syntax error the parser stops and says where. To explain the
// error, the file is read again up to that token, and every word the
// parser looks for there is noted (is, isKind, ...): they are what was
// expected, in the words of the language.

// hparser is the generated parser's state: the token cursor, where it
// stopped, and the tree's allocator.
type hparser struct {
	sc        scanner
	cur       token // the current token, never a comment
	last      token // the last token taken
	file, src string
	// dry parsers build no tree: syntax recovery tries a file again and
	// again, and only the last try's tree is kept.
	dry bool
	// watch is the offset of the token whose expectations are noted in
	// tried (-1: none); inner is how many of them the innermost
	// construction tried, before a list went on to its next element.
	watch int32
	tried []string
	inner int
	// badUnit is set when the parser stopped at a word against a number
	// that is no unit.
	badUnit *unitError
	// depth counts the types open; nest is set when they are too many.
	depth int
	nest  bool
	arena
}

// halt is where the parser stopped on a syntax error.
type halt struct {
	at   token // the token it could not take
	last token // the token before
	// tried lists what the parser looked for at the token, when it was
	// watched; the first inner of them are the innermost construction's.
	tried []string
	inner int
	unit  *unitError
	// scanned is where the scan stopped; nest is set when types nest
	// deeper than MaxNesting at the token.
	scanned int
	nest    bool
}

// elem marks the start of a list's next element (or of its closer): the
// words tried at the token so far are the innermost construction's.
func (p *hparser) elem() {
	if p.cur.off == p.watch && p.inner < 0 {
		p.inner = len(p.tried)
	}
}

// try notes that the parser looked for what at the current token.
func (p *hparser) try(what string) {
	if p.cur.off == p.watch && what != "" {
		p.tried = append(p.tried, what)
	}
}

// bailout unwinds a parser on the first token it cannot take.
type bailout struct{}

// handParse reads a graph or stack file, reading the ranges in skips as
// blanks, and shows check (if not nil) every token it scans. It returns
// the tree (none when dry), or where it stopped. When watch is a token's
// offset, the halt lists what the parser looked for there.
func handParse(file, src string, skips []span, dry bool, check *lexCheck, watch int32) (f *File, h *halt) {
	p := &hparser{sc: newScanner(src, skips), file: file, src: src, dry: dry, watch: watch, inner: -1}
	p.sc.check = check
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			f, h = nil, &halt{at: p.cur, last: p.last, tried: p.tried, inner: p.inner, unit: p.badUnit, scanned: p.sc.off, nest: p.nest}
		}
	}()
	p.scan()
	f = p.parseFile()
	if p.cur.kind != kEOF {
		p.fail("the end of the file")
	}
	if dry {
		return nil, nil
	}
	return f, nil
}

// scan reads the next token that is not a comment into p.cur. It stops
// the parser at a lexical error.
func (p *hparser) scan() {
	p.sc.read(&p.cur, true)
	if p.sc.check != nil && p.sc.check.found {
		panic(bailout{})
	}
}

// peek returns the token after the current one.
func (p *hparser) peek() token {
	sc := p.sc
	sc.check = nil // the token is seen when it is scanned
	var t token
	sc.read(&t, true)
	return t
}

// fail stops the parser at the current token, which is not what it
// wanted (want, if not "", besides what it tried).
func (p *hparser) fail(want string) {
	p.try(want)
	panic(bailout{})
}

// failUnit stops the parser at a word against a number that is no unit.
func (p *hparser) failUnit(err *unitError) {
	p.badUnit = err
	p.fail(err.expected())
}

func (p *hparser) val() string { return p.src[p.cur.off:p.cur.end] }

// is reports whether the current token is v, noting that v was looked
// for.
func (p *hparser) is(v string) bool {
	t := p.cur
	if int(t.end-t.off) == len(v) && p.src[t.off:t.end] == v {
		return true
	}
	p.try(v)
	return false
}

// at reports whether the current token is v, noting nothing.
func (p *hparser) at(v string) bool {
	t := p.cur
	return int(t.end-t.off) == len(v) && p.src[t.off:t.end] == v
}

// peekIs reports whether the token after the current one is v.
func (p *hparser) peekIs(v string) bool {
	t := p.peek()
	return int(t.end-t.off) == len(v) && p.src[t.off:t.end] == v
}

// enter counts a type opened; "<" nests types without a bracket the
// scanner counts, so the parser bounds its recursion itself (a file of
// "<" once overflowed the stack).
func (p *hparser) enter() {
	if p.depth++; p.depth > MaxNesting {
		p.nest = true
		panic(bailout{})
	}
}

// expectAs is expect whose expectation is said as what.
func (p *hparser) expectAs(v, what string) {
	if t := p.cur; int(t.end-t.off) != len(v) || p.src[t.off:t.end] != v {
		p.fail(what)
	}
	p.advance()
}

func (p *hparser) kind() kind { return p.cur.kind }

func (p *hparser) pos() Position { return p.cur.position(p.file) }

// end is where the last token taken ends.
func (p *hparser) end() Position { return p.last.endPosition(p.file, p.src) }

// advance takes the current token.
func (p *hparser) advance() {
	if p.cur.kind == kEOF {
		p.fail("")
	}
	p.last = p.cur
	p.scan()
}

// take consumes the current token and returns its text.
func (p *hparser) take() string {
	v := p.val()
	p.advance()
	return v
}

func (p *hparser) expect(v string) {
	if !p.is(v) {
		p.fail("")
	}
	p.advance()
}

// isKind reports ok, noting word as looked for when it does not hold:
// the generated parser asks for tokens by kind through it.
func (p *hparser) isKind(word string, ok bool) bool {
	if !ok {
		p.try(word)
	}
	return ok
}

// unit reads the unit after a number, if there is one (UnitAt).
func (p *hparser) unit(dims []Dimension) string {
	u, err := UnitAt(p.val(), p.kind() == kIdent, p.cur.off == p.last.end, dims)
	if err != nil {
		p.failUnit(err.(*unitError))
	}
	if u != "" {
		p.advance()
	}
	return u
}

// add appends v to *list unless the parser is dry.
func add[T any](p *hparser, list *[]T, v T) {
	if !p.dry {
		*list = append(*list, v)
	}
}

// slab hands out pointers into blocks of T: a 100,000-endpoint stack has a
// million nodes. A dry parser gets the same one each time.
type slab[T any] struct {
	buf     []T
	scratch *T
}

func (s *slab[T]) new(dry bool) *T {
	if dry {
		if s.scratch == nil {
			s.scratch = new(T)
		}
		return s.scratch
	}
	if len(s.buf) == cap(s.buf) {
		// Blocks grow to 256, so that a small file costs little.
		s.buf = make([]T, 0, min(256, max(8, 2*cap(s.buf))))
	}
	s.buf = s.buf[:len(s.buf)+1]
	return &s.buf[len(s.buf)-1]
}

// arena holds a slab for each node type.
type arena struct {
	genArena // a slab for each production
}
