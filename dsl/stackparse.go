package dsl

// parseStack is a recursive-descent parser for stack files, the files users
// write at scale (one line per endpoint, 100,000 lines and more). It builds
// the same syntax tree, positions included, as the participle grammar in
// ast.go, which stays the definition of the language: TestStackParserAgrees
// compares the two on every stack in the repository and FuzzStackParser on
// arbitrary input. It only takes the happy path: on any syntax error it
// gives up, and Parse asks participle, whose messages and recovery the
// diagnostics are made of.
//
// The grammar, as ast.go states it:
//
//	File      = Stack EOF .
//	Stack     = "stack" Ident "{" StackItem* "}" .
//	StackItem = Interface | "cores" RangeList | Endpoint | "service" Ident .
//	Interface = "interface" Ident "{" "mac" Tok ( "ip" CIDR )* ( "mtu" Num )? "}" .
//	CIDR      = Tok "/" Num .
//	RangeList = RangeItem ( "," RangeItem )* .
//	RangeItem = Num ( ".." Num )? .
//	Endpoint  = "endpoint" Ident Ident ( "listen" Listen | "flow" Flow | Num )? ( "{" EpAttr* "}" )? .
//	Listen    = Addr ":" Num ( ".." Num )? .
//	Flow      = Addr ":" Num "->" Addr ":" Num .
//	Addr      = "*" | Tok .
//	EpAttr    = "nodelay" | Ident ( Str | RangeList Unit? | Ident ) .
//	Ident     = <Ident> | <Ref> .   Tok = <MAC> | <IP> | <Number> | <Ident> .
//	Num       = "-"? <Number> .     Str = <String> .
//
// A quoted word matches a token of that text whatever its kind, as in
// participle.

type stackParser struct {
	toks      []token // the tokens, EOF last
	i         int     // the current token, never a comment
	last      int     // the last token taken
	file, src string
	// The tree's nodes are allocated in blocks: a 100,000-endpoint stack
	// has a million of them.
	idents slab[Ident]
	nums   slab[Num]
	tokens slab[Tok]
	addrs  slab[Addr]
	attrs  slab[EpAttr]
	eps    slab[Endpoint]
	items  slab[StackItem]
}

// slab hands out pointers into blocks of T.
type slab[T any] struct{ buf []T }

func (s *slab[T]) new() *T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, 256)
	}
	s.buf = s.buf[:len(s.buf)+1]
	return &s.buf[len(s.buf)-1]
}

// bailout unwinds the parser on the first token it cannot take.
type bailout struct{}

// parseStack returns the syntax tree of a stack file, or nil when the file
// is not a well-formed stack.
func parseStack(toks []token, file, src string) (f *File) {
	p := &stackParser{toks: toks, file: file, src: src}
	p.skipComments()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			f = nil
		}
	}()
	f = &File{Pos: p.pos()}
	f.Stack = p.stack()
	f.EndPos = p.end()
	if p.toks[p.i].kind != kEOF {
		panic(bailout{})
	}
	return f
}

func (p *stackParser) val() string {
	t := p.toks[p.i]
	return p.src[t.off:t.end]
}

func (p *stackParser) is(v string) bool {
	t := p.toks[p.i]
	return int(t.end-t.off) == len(v) && p.src[t.off:t.end] == v
}

func (p *stackParser) kind() kind { return p.toks[p.i].kind }

func (p *stackParser) pos() Position { return p.toks[p.i].position(p.file) }

// end is where the last token taken ends.
func (p *stackParser) end() Position { return p.toks[p.last].endPosition(p.file, p.src) }

func (p *stackParser) skipComments() {
	for p.toks[p.i].kind == kComment {
		p.i++
	}
}

// advance takes the current token.
func (p *stackParser) advance() {
	if p.toks[p.i].kind == kEOF {
		panic(bailout{})
	}
	p.last = p.i
	p.i++
	p.skipComments()
}

// take consumes the current token and returns its text.
func (p *stackParser) take() string {
	v := p.val()
	p.advance()
	return v
}

func (p *stackParser) expect(v string) {
	if !p.is(v) {
		panic(bailout{})
	}
	p.advance()
}

func (p *stackParser) stack() *Stack {
	s := &Stack{Pos: p.pos()}
	p.expect("stack")
	s.Name = p.ident()
	p.expect("{")
	for {
		it := p.items.new()
		it.Pos = p.pos()
		switch {
		case p.is("interface"):
			it.Interface = p.iface()
		case p.is("cores"):
			p.advance()
			it.Cores = p.rangeList()
		case p.is("endpoint"):
			it.Endpoint = p.endpoint()
		case p.is("service"):
			p.advance()
			it.Service = p.ident()
		default:
			p.expect("}")
			s.EndPos = p.end()
			return s
		}
		it.EndPos = p.end()
		s.Items = append(s.Items, it)
	}
}

func (p *stackParser) ident() *Ident {
	if k := p.kind(); k != kIdent && k != kRef {
		panic(bailout{})
	}
	id := p.idents.new()
	id.Pos = p.pos()
	id.Text = p.take()
	id.EndPos = p.end()
	return id
}

func (p *stackParser) tok() *Tok {
	switch p.kind() {
	case kMAC, kIP, kNumber, kIdent:
	default:
		panic(bailout{})
	}
	t := p.tokens.new()
	t.Pos = p.pos()
	t.Text = p.take()
	t.EndPos = p.end()
	return t
}

func (p *stackParser) startsNum() bool { return p.kind() == kNumber || p.is("-") }

func (p *stackParser) num() *Num {
	n := p.nums.new()
	n.Pos = p.pos()
	if p.is("-") {
		n.Neg = true
		p.advance()
	}
	if p.kind() != kNumber {
		panic(bailout{})
	}
	n.Text = p.take()
	n.EndPos = p.end()
	return n
}

func (p *stackParser) iface() *Interface {
	p.expect("interface")
	in := &Interface{Name: p.ident()}
	p.expect("{")
	p.expect("mac")
	in.MAC = p.tok()
	for p.is("ip") {
		p.advance()
		c := &CIDR{Pos: p.pos()}
		c.Addr = p.tok()
		p.expect("/")
		c.Len = p.num()
		c.EndPos = p.end()
		in.IPs = append(in.IPs, c)
	}
	if p.is("mtu") {
		p.advance()
		in.MTU = p.num()
	}
	p.expect("}")
	return in
}

func (p *stackParser) rangeList() *RangeList {
	rl := &RangeList{Pos: p.pos()}
	for {
		it := &RangeItem{Lo: p.num()}
		if p.is("..") {
			p.advance()
			it.Hi = p.num()
		}
		rl.Items = append(rl.Items, it)
		if !p.is(",") {
			break
		}
		p.advance()
	}
	rl.EndPos = p.end()
	return rl
}

func (p *stackParser) addr() *Addr {
	a := p.addrs.new()
	a.Pos = p.pos()
	if p.is("*") {
		a.Any = true
		p.advance()
	} else {
		a.IP = p.tok()
	}
	a.EndPos = p.end()
	return a
}

func (p *stackParser) endpoint() *Endpoint {
	p.expect("endpoint")
	ep := p.eps.new()
	ep.Name = p.ident()
	ep.Kind = p.ident()
	switch {
	case p.is("listen"):
		p.advance()
		l := &Listen{Addr: p.addr()}
		p.expect(":")
		l.Port = p.num()
		if p.is("..") {
			p.advance()
			l.Hi = p.num()
		}
		ep.Listen = l
	case p.is("flow"):
		p.advance()
		f := &Flow{LAddr: p.addr()}
		p.expect(":")
		f.LPort = p.num()
		p.expect("->")
		f.RAddr = p.addr()
		p.expect(":")
		f.RPort = p.num()
		ep.Flow = f
	case p.startsNum():
		ep.ID = p.num()
	}
	if !p.is("{") {
		return ep
	}
	p.advance()
	for p.kind() == kIdent || p.kind() == kRef {
		ep.Attrs = append(ep.Attrs, p.epAttr())
	}
	p.expect("}")
	return ep
}

// attrUnits are the units an attribute's number may carry.
var attrUnits = map[string]bool{"pps": true, "kpps": true, "Mpps": true, "B": true, "KiB": true, "MiB": true}

func (p *stackParser) epAttr() *EpAttr {
	a := p.attrs.new()
	a.Pos = p.pos()
	if p.is("nodelay") {
		a.Flag = &Flag{Pos: a.Pos}
		a.Flag.Text = p.take()
		a.Flag.EndPos = p.end()
		a.EndPos = a.Flag.EndPos
		return a
	}
	a.Key = p.ident()
	switch k := p.kind(); {
	case k == kString:
		s := &Str{Pos: p.pos()}
		s.Raw = p.take()
		s.EndPos = p.end()
		a.Str = s
	case p.startsNum():
		a.Range = p.rangeList()
		if attrUnits[p.val()] {
			a.Unit = p.take()
		}
	case k == kIdent || k == kRef:
		a.Word = p.ident()
	default:
		panic(bailout{})
	}
	a.EndPos = p.end()
	return a
}
