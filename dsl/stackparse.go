package dsl

// The stack grammar of the hand-written parser (handparse.go), for the
// files users write at scale: one line per endpoint, 100,000 lines and
// more. It follows the productions Stack to EpAttr of ast.go
// (testdata/grammar.ebnf, generated from it, states them); a quoted word
// matches a token of that text whatever its kind, as in participle.

func (p *hparser) stack() *Stack {
	s := p.stacks.new(p.dry)
	s.Pos = p.pos()
	p.expectAny(keywords.stack)
	s.Name = p.ident()
	p.expect("{")
	for {
		p.elem()
		it := p.stackItems.new(p.dry)
		it.Pos = p.pos()
		switch {
		case p.isAny(keywords.iface):
			it.Interface = p.iface()
		case p.isAny(keywords.cores):
			p.advance()
			it.Cores = p.rangeList()
		case p.isAny(keywords.endpoint):
			it.Endpoint = p.endpoint()
		case p.isAny(keywords.service):
			it.Service = p.service()
		default:
			p.expect("}")
			s.EndPos = p.end()
			return s
		}
		it.EndPos = p.end()
		add(p, &s.Items, it)
	}
}

func (p *hparser) tok() *Tok {
	switch p.kind() {
	case kMAC, kIP, kNumber, kIdent:
	default:
		p.fail("an address")
	}
	t := p.tokens.new(p.dry)
	t.Pos = p.pos()
	t.Text = p.take()
	t.EndPos = p.end()
	return t
}

func (p *hparser) iface() *Interface {
	p.expectAny(keywords.iface)
	in := p.ifaces.new(p.dry)
	in.Name = p.ident()
	p.expect("{")
	p.expectAny(keywords.mac)
	in.MAC = p.tok()
	for p.isAny(keywords.ip) {
		p.advance()
		c := p.cidrs.new(p.dry)
		c.Pos = p.pos()
		c.Addr = p.tok()
		p.expectAs("/", "/ and the prefix length (as in 10.0.0.1/24)")
		c.Len = p.num()
		c.EndPos = p.end()
		add(p, &in.IPs, c)
	}
	if p.isAny(keywords.mtu) {
		p.advance()
		in.MTU = p.num()
	}
	p.expect("}")
	return in
}

func (p *hparser) rangeList() *RangeList {
	rl := p.rangeLists.new(p.dry)
	rl.Pos = p.pos()
	for {
		it := p.rangeItems.new(p.dry)
		it.Lo = p.num()
		if p.is("..") {
			p.advance()
			it.Hi = p.num()
		}
		add(p, &rl.Items, it)
		if !p.is(",") {
			break
		}
		p.advance()
	}
	rl.EndPos = p.end()
	return rl
}

func (p *hparser) addr() *Addr {
	a := p.addrs.new(p.dry)
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

func (p *hparser) endpoint() *Endpoint {
	p.expectAny(keywords.endpoint)
	ep := p.eps.new(p.dry)
	ep.Name = p.ident()
	ep.Kind = p.ident()
	switch {
	case p.isAny(keywords.listen):
		p.advance()
		l := p.listens.new(p.dry)
		l.Addr = p.addr()
		p.expect(":")
		l.Port = p.num()
		if p.is("..") {
			p.advance()
			l.Hi = p.num()
		}
		ep.Listen = l
	case p.isAny(keywords.flow):
		p.advance()
		f := p.flows.new(p.dry)
		f.LAddr = p.addr()
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
	p.attrBlock(&ep.Attrs)
	return ep
}

func (p *hparser) service() *Service {
	p.expectAny(keywords.service)
	sv := p.services.new(p.dry)
	sv.Name = p.ident()
	p.attrBlock(&sv.Settings)
	return sv
}

// attrBlock reads an optional `{ EpAttr* }` into *list.
func (p *hparser) attrBlock(list *[]*EpAttr) {
	if !p.is("{") {
		return
	}
	p.advance()
	for p.elem(); p.isIdent(); p.elem() {
		add(p, list, p.epAttr())
	}
	p.expect("}")
}

func (p *hparser) epAttr() *EpAttr {
	a := p.attrs.new(p.dry)
	a.Pos = p.pos()
	if p.isAny(keywords.flag) {
		a.Flag = p.flags.new(p.dry)
		a.Flag.Pos = a.Pos
		a.Flag.Text = p.take()
		a.Flag.EndPos = p.end()
		a.EndPos = a.Flag.EndPos
		return a
	}
	a.Key = p.ident()
	switch {
	case p.isString():
		a.Str = p.str()
	case p.startsNum():
		a.Range = p.rangeList()
		a.Unit = AttrUnit(p.unit(attrDims))
	case p.isIdent():
		a.Word = p.ident()
	default:
		p.fail("")
	}
	a.EndPos = p.end()
	return a
}
