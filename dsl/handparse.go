package dsl

import "strconv"

// The hand-written parsers read every file first: stack files
// (stackparse.go), which users write at scale, and graph files
// (graphparse.go). They build the same syntax tree, positions included, as
// the participle grammar in ast.go, which stays the definition of the
// language: TestStackParserAgrees, TestGraphParserAgrees and their fuzz
// targets compare the two on every file in the repository and on arbitrary
// input, and each accepts exactly what participle accepts. They only take
// the happy path: on a syntax error they stop and say where, and Parse
// asks participle about the tokens around that place, whose messages the
// diagnostics are made of. Participle keeps every token it is given and
// allocates 1 to 2.5 KB for each, so it is never given the whole of a
// large file: a file of closing braces once cost 816 bytes a byte.

// hparser is what both grammars share: the token cursor, where the parser
// stopped, and the tree's allocator.
type hparser struct {
	sc        scanner
	cur       token // the current token, never a comment
	last      token // the last token taken
	file, src string
	// dry parsers build no tree: syntax recovery tries a file again and
	// again, and only the last try's tree is kept.
	dry    bool
	frames []frame // the lists open at the current token, outermost first
	want   string  // what the parser wanted where it stopped
	// depth counts the types open; nest is set when they are too many.
	depth int
	nest  bool
	arena
}

// halt is where a hand-written parser stopped on a syntax error.
type halt struct {
	at   token  // the token it could not take
	want string // what it wanted there
	// window lists what participle may leave out of the file and still
	// stop where the parser did: of each list open there, the elements
	// before the previous one.
	window []span
	// scanned is where the scan stopped; nest is set when types nest
	// deeper than MaxNesting at the token.
	scanned int
	nest    bool
}

// frame is a list open at the current token (a graph's declarations, a
// node's items, a block's SMT-LIB tokens and the like): the offset just
// past its opening token, and where its previous and current elements
// start. Each element of such a list parses the same whatever precedes
// it, so participle, given the file with the earlier elements left out,
// stops with the same message. The previous element stays in, because
// participle reports the deepest error it met, and the previous
// element's last try looks one token into the current one.
type frame struct{ body, prev, cur int }

// open starts a list after its opening token.
func (p *hparser) open() {
	p.frames = append(p.frames, frame{body: int(p.last.end), prev: -1, cur: -1})
}

// elem marks the start of the list's next element (or of its closer).
func (p *hparser) elem() {
	f := &p.frames[len(p.frames)-1]
	f.prev, f.cur = f.cur, int(p.cur.off)
}

// shut ends the innermost list.
func (p *hparser) shut() { p.frames = p.frames[:len(p.frames)-1] }

func (p *hparser) window() []span {
	var out []span
	for _, f := range p.frames {
		if f.prev > f.body {
			out = append(out, span{f.body, f.prev})
		}
	}
	return out
}

// bailout unwinds a parser on the first token it cannot take.
type bailout struct{}

// handParse reads a graph or stack file, reading the ranges in skips as
// blanks, and shows check (if not nil) every token it scans. It returns
// the tree (none when dry), or where it stopped.
func handParse(file, src string, skips []span, dry bool, check *lexCheck) (f *File, h *halt) {
	p := &hparser{sc: newScanner(src, skips), file: file, src: src, dry: dry}
	p.sc.check = check
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			f, h = nil, &halt{at: p.cur, want: p.want, window: p.window(), scanned: p.sc.off, nest: p.nest}
		}
	}()
	p.scan()
	f = p.files.new(dry)
	f.Pos = p.pos()
	switch {
	case p.is("graph"):
		f.Graph = p.graph()
	case p.is("stack"):
		f.Stack = p.stack()
	default:
		p.fail(`"graph" or "stack"`)
	}
	f.EndPos = p.end()
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

// fail stops the parser at the current token, which is not what it wanted.
func (p *hparser) fail(want string) {
	p.want = want
	panic(bailout{})
}

func (p *hparser) val() string { return p.src[p.cur.off:p.cur.end] }

func (p *hparser) is(v string) bool {
	t := p.cur
	return int(t.end-t.off) == len(v) && p.src[t.off:t.end] == v
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
		p.fail(strconv.Quote(v))
	}
	p.advance()
}

func (p *hparser) isIdent() bool { k := p.kind(); return k == kIdent || k == kRef }

// ident is Ident = <Ident> | <Ref>.
func (p *hparser) ident() *Ident {
	if !p.isIdent() {
		p.fail("<ident>")
	}
	id := p.idents.new(p.dry)
	id.Pos = p.pos()
	id.Text = p.take()
	id.EndPos = p.end()
	return id
}

func (p *hparser) startsNum() bool { return p.kind() == kNumber || p.is("-") }

// num is Num = "-"? <Number>.
func (p *hparser) num() *Num {
	n := p.nums.new(p.dry)
	n.Pos = p.pos()
	if p.is("-") {
		n.Neg = true
		p.advance()
	}
	if p.kind() != kNumber {
		p.fail("<number>")
	}
	n.Text = p.take()
	n.EndPos = p.end()
	return n
}

// str is Str = <String>.
func (p *hparser) str() *Str {
	if p.kind() != kString {
		p.fail("<string>")
	}
	s := p.strs.new(p.dry)
	s.Pos = p.pos()
	s.Raw = p.take()
	s.EndPos = p.end()
	return s
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
	files  slab[File]
	idents slab[Ident]
	nums   slab[Num]
	strs   slab[Str]
	// stacks
	stacks     slab[Stack]
	stackItems slab[StackItem]
	ifaces     slab[Interface]
	cidrs      slab[CIDR]
	tokens     slab[Tok]
	rangeLists slab[RangeList]
	rangeItems slab[RangeItem]
	eps        slab[Endpoint]
	listens    slab[Listen]
	flows      slab[Flow]
	addrs      slab[Addr]
	attrs      slab[EpAttr]
	flags      slab[Flag]
	services   slab[Service]
	// graphs
	graphs      slab[Graph]
	decls       slab[Decl]
	clusters    slab[Cluster]
	nodes       slab[Node]
	items       slab[Item]
	spawns      slab[Spawn]
	ports       slab[Port]
	targets     slab[Target]
	constraints slab[Constraint]
	semantics   slab[Semantics]
	predicates  slab[Predicate]
	costs       slab[Cost]
	configs     slab[ConfigSpec]
	resources   slab[Resource]
	props       slab[Prop]
	values      slab[Value]
	smtBlocks   slab[SMTBlock]
	smtItems    slab[SMTItem]
	smtParens   slab[SMTParen]
	confTypes   slab[ConfType]
	tupleEls    slab[TupleEl]
	namedTypes  slab[NamedType]
	bounds      slab[ListBounds]
}
