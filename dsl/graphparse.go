package dsl

// The graph grammar of the hand-written parser (handparse.go). It follows
// the productions Graph to Value of ast.go (testdata/grammar.ebnf,
// generated from it, states them).
//
// Where participle's ordered choice with one token of lookahead decides
// (Enum not followed by "(" is a NamedType, "<" after a type always
// starts its bounds, a unit after a number always belongs to it), this
// parser decides the same way.

func (p *hparser) graph() *Graph {
	g := p.graphs.new(p.dry)
	g.Pos = p.pos()
	p.expectAny(keywords.graph)
	g.Name = p.parseIdent()
	p.expect("{")
	g.Decls = p.declList()
	g.EndPos = p.end()
	return g
}

// declList reads Decl* "}".
func (p *hparser) declList() []*Decl {
	var out []*Decl
	for {
		p.elem()
		if !p.isAny(keywords.decls) {
			p.expect("}")
			return out
		}
		v := p.val()
		d := p.decls.new(p.dry)
		d.Pos = p.pos()
		switch {
		case keywords.helpers.has(v):
			p.advance()
			d.Helpers = p.smtBlock()
		case keywords.cluster.has(v):
			c := p.clusters.new(p.dry)
			c.Pos = p.pos()
			p.advance()
			c.Name = p.parseIdent()
			p.expect("{")
			c.Decls = p.declList()
			c.EndPos = p.end()
			d.Cluster = c
		case keywords.nodeKinds.has(v):
			d.Node = p.node()
		default:
			r := p.resources.new(p.dry)
			r.Pos = p.pos()
			r.Kind = p.take()
			r.Name = p.parseIdent()
			r.Props = p.propBlock()
			r.EndPos = p.end()
			d.Resource = r
		}
		d.EndPos = p.end()
		add(p, &out, d)
	}
}

func (p *hparser) node() *Node {
	n := p.nodes.new(p.dry)
	n.Pos = p.pos()
	n.Kind = p.take()
	n.Name = p.parseIdent()
	if p.is("..") {
		p.advance()
		n.Hi = p.parseNum()
	}
	p.expect("{")
	for {
		p.elem()
		it := p.nodeItem()
		if it == nil {
			break
		}
		add(p, &n.Items, it)
	}
	p.expect("}")
	n.EndPos = p.end()
	return n
}

// nodeItem reads one Item, or returns nil when none starts here.
func (p *hparser) nodeItem() *Item {
	k := &keywords
	if p.kind() != kIdent || !p.isAny(k.nodeItems) {
		return nil
	}
	v := p.val()
	it := p.items.new(p.dry)
	it.Pos = p.pos()
	switch {
	case k.impl.has(v):
		p.advance()
		it.Impl = p.parseIdent()
	case k.attr.has(v):
		p.advance()
		it.Attr = p.parseStr()
	case k.spawn.has(v):
		p.advance()
		s := p.spawns.new(p.dry)
		s.Name = p.parseIdent()
		s.Target = p.parseIdent()
		for p.is("[") {
			p.advance()
			p.expectAny(k.spawnPredicate)
			add(p, &s.Preds, p.parseStr())
			p.expect("]")
		}
		it.Spawn = s
	case k.port.has(v):
		p.advance()
		port := p.ports.new(p.dry)
		add(p, &port.Names, p.parseIdent())
		for p.startsIdent() {
			add(p, &port.Names, p.parseIdent())
		}
		p.expect("[")
		for p.elem(); p.startsIdent(); p.elem() {
			t := p.targets.new(p.dry)
			t.Ref = p.parseIdent()
			if p.is("..") {
				p.advance()
				t.Hi = p.parseNum()
			}
			add(p, &port.Targets, t)
		}
		p.expect("]")
		it.Port = port
	case k.constraint.has(v):
		p.advance()
		c := p.constraints.new(p.dry)
		c.Port = p.parseIdent()
		c.Text = p.parseStr()
		it.Constraint = c
	case k.semantics.has(v):
		p.advance()
		s := p.semantics.new(p.dry)
		add(p, &s.Ports, p.parseIdent())
		for p.startsIdent() {
			add(p, &s.Ports, p.parseIdent())
		}
		s.Body = p.smtBlock()
		it.Semantics = s
	case k.predicate.has(v):
		p.advance()
		pr := p.predicates.new(p.dry)
		pr.Port = p.parseIdent()
		pr.Expr = p.parseStr()
		it.Predicate = pr
	case k.typ.has(v):
		p.advance()
		it.Type = p.confType()
	case k.function.has(v):
		p.advance()
		it.Function = p.parseIdent()
	case k.cost.has(v):
		p.advance()
		c := p.costs.new(p.dry)
		c.Unit = p.parseIdent()
		c.Value = p.parseNum()
		it.Cost = c
	case k.config.has(v):
		c := p.configs.new(p.dry)
		c.Pos = p.pos()
		c.Kind = p.take()
		c.Props = p.propBlock()
		c.EndPos = p.end()
		it.Config = c
	default:
		return nil
	}
	it.EndPos = p.end()
	return it
}

// propBlock reads "{" Prop* "}".
func (p *hparser) propBlock() []*Prop {
	var out []*Prop
	p.expect("{")
	for p.elem(); p.startsIdent(); p.elem() {
		pr := p.props.new(p.dry)
		pr.Pos = p.pos()
		pr.Key = p.parseIdent()
		pr.Value = p.value()
		pr.EndPos = p.end()
		add(p, &out, pr)
	}
	p.expect("}")
	return out
}

func (p *hparser) startsValue() bool {
	return p.is("[") || p.startsStr() || p.startsNum() || p.startsIdent()
}

func (p *hparser) value() *Value {
	v := p.values.new(p.dry)
	v.Pos = p.pos()
	switch {
	case p.is("["):
		p.advance()
		for p.elem(); p.startsValue(); p.elem() {
			add(p, &v.List, p.value())
		}
		p.expect("]")
	case p.startsStr():
		v.Str = p.parseStr()
	case p.startsNum():
		v.Num = p.parseNum()
		if p.is("..") {
			p.advance()
			v.Hi = p.parseNum()
		}
		v.Unit = PropUnit(p.unit(nil))
	case p.startsIdent():
		v.Name = p.parseIdent()
	default:
		p.fail("a value")
	}
	v.EndPos = p.end()
	return v
}

// smtBlock reads "{" SMTItem* "}", keeping each token's text.
func (p *hparser) smtBlock() *SMTBlock {
	b := p.smtBlocks.new(p.dry)
	b.Pos = p.pos()
	p.expect("{")
	b.Items = p.smtList("}")
	b.EndPos = p.end()
	return b
}

// smtList reads SMTItem* and the closer that ends them.
func (p *hparser) smtList(closer string) []*SMTItem {
	var out []*SMTItem
	for {
		p.elem()
		if p.kind() == kEOF {
			p.fail(`"` + closer + `"`)
		}
		it := p.smtItems.new(p.dry)
		switch {
		case p.is("{"):
			it.Block = p.smtBlock()
		case p.is("("):
			p.advance()
			par := p.smtParens.new(p.dry)
			par.Items = p.smtList(")")
			it.Paren = par
		case p.is("}"), p.is(")"):
			p.expect(closer)
			return out
		default:
			it.Tok = p.take()
		}
		add(p, &out, it)
	}
}

func (p *hparser) confType() *ConfType {
	// "<" nests types without a bracket, so the parser bounds its
	// recursion itself (a file of "<" once overflowed the stack).
	if p.depth++; p.depth > MaxNesting {
		p.nest = true
		panic(bailout{})
	}
	t := p.confTypes.new(p.dry)
	t.Pos = p.pos()
	switch {
	case p.is("<"):
		p.advance()
		t.Optional = p.confType()
		p.expect(">")
	case p.is("{"):
		p.advance()
		t.Set = p.confType()
		p.expect("}")
	case p.is("["):
		p.advance()
		t.List = p.confType()
		p.expect("]")
	case p.is("("):
		p.advance()
		for {
			el := p.tupleEls.new(p.dry)
			el.Label = p.parseIdent()
			p.expect(":")
			el.Type = p.confType()
			add(p, &t.Tuple, el)
			if !p.is(",") {
				break
			}
			p.advance()
		}
		p.expect(")")
	case p.isAny(keywords.enum) && p.peekIs("("):
		p.advance()
		p.advance()
		for {
			add(p, &t.Enum, p.parseIdent())
			if !p.is(",") {
				break
			}
			p.advance()
		}
		p.expect(")")
	case p.kind() == kIdent:
		n := p.namedTypes.new(p.dry)
		n.Pos = p.pos()
		n.Name = p.take()
		for p.startsNum() {
			add(p, &n.Args, p.parseNum())
		}
		n.EndPos = p.end()
		t.Named = n
	default:
		p.fail("a type")
	}
	if p.is("<") {
		b := p.bounds.new(p.dry)
		b.Pos = p.pos()
		p.advance()
		if p.startsNum() {
			b.Lo = p.parseNum()
		}
		if p.is(",") {
			b.Comma = true
			p.advance()
			if p.startsNum() {
				b.Hi = p.parseNum()
			}
		}
		p.expect(">")
		b.EndPos = p.end()
		t.Bounds = b
	}
	t.EndPos = p.end()
	p.depth--
	return t
}

// peekIs reports whether the token after the current one is v.
func (p *hparser) peekIs(v string) bool {
	t := p.peek()
	return int(t.end-t.off) == len(v) && p.src[t.off:t.end] == v
}
