package dsl

import (
	"bytes"
	"fmt"
	"go/format"
	"reflect"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/golden"
)

// The parser (parse_gen.go) is generated from the grammar's struct tags
// in ast.go, the definition participle reads too: a change to the grammar
// is an edit of a tag and `go test ./dsl -update`.
// TestParserGenerated fails while the committed file differs from
// what the tags give. The generated code reads tokens with the cursor
// primitives of handparse.go (is, expect, kind, take, elem) and takes the
// grammar as participle does with one token of lookahead: an optional
// part, a repetition or an alternative is entered when the current token
// can start it, and once entered it must match; an alternative that
// starts with two words is entered when both are there (altCond).

// genRoot is the production the generated parser starts from.
var genRoot = reflect.TypeOf(File{})

// genDepth are the productions that nest without a bracket the scanner
// counts (<T> in a type): the parser bounds their recursion itself.
var genDepth = map[string]bool{"ConfType": true}

// genWords say, as a user would, what a production or token stands for
// where one was expected.
var genWords = map[string]string{
	"Ident": "a name", "Ref": "a name", "Num": "a number", "Number": "a number", "Str": "a string", "String": "a string",
	"Tok": "an address", "MAC": "an address", "IP": "an address", "Addr": "an address or *",
	"NamedType": "a type", "ConfType": "a type", "Value": "a value",
}

// genHints word a literal of one production better than the literal
// itself.
var genHints = map[string]string{
	"CIDR /": "/ and the prefix length (as in 10.0.0.1/24)",
}

// genHooks are the Parseable types: the generated code calls the
// hand-written method named, which reads the type or nothing.
var genHooks = map[reflect.Type]string{
	reflect.TypeOf(AttrUnit("")): "AttrUnit(p.unit(attrDims))",
	reflect.TypeOf(PropUnit("")): "PropUnit(p.unit(nil))",
}

var genKinds = map[string]string{"Ident": "kIdent", "Ref": "kRef", "Number": "kNumber", "String": "kString", "MAC": "kMAC", "IP": "kIP"}

func TestParserGenerated(t *testing.T) {
	golden.Check(t, "parse_gen.go", generateParser(t, genRoot))
}

// gnode is a node of a production's expression.
type gnode struct {
	op       byte // 's' sequence, '|' alternatives, 'l' literal, 't' token types, 'r' @@ (the field's type)
	kids     []*gnode
	lit      string
	toks     []string
	mod      byte // 0, '?', '*', '+'
	capture  bool // @ before a literal, token types or a group
	neg      bool // ~: any token but these (and the end of the file)
	field    reflect.StructField
	hasField bool
}

type tagTok struct {
	text  string
	field reflect.StructField
}

// tagTokens splits the tags of a struct's fields into tokens, each with
// the field it belongs to, in order: participle reads the tags of a
// struct as one expression.
func structTokens(t reflect.Type) []tagTok {
	var out []tagTok
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("parser")
		if !ok {
			continue
		}
		for j := 0; j < len(tag); {
			c := tag[j]
			switch {
			case c == ' ':
				j++
			case c == '\'':
				k := strings.IndexByte(tag[j+1:], '\'')
				out = append(out, tagTok{tag[j : j+k+2], f})
				j += k + 2
			case c == '@' && j+1 < len(tag) && tag[j+1] == '@':
				out = append(out, tagTok{"@@", f})
				j += 2
			case 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z':
				k := j
				for k < len(tag) && ('A' <= tag[k] && tag[k] <= 'Z' || 'a' <= tag[k] && tag[k] <= 'z') {
					k++
				}
				out = append(out, tagTok{tag[j:k], f})
				j = k
			default:
				out = append(out, tagTok{string(c), f})
				j++
			}
		}
	}
	return out
}

type tagParser struct {
	toks []tagTok
	i    int
	t    testing.TB
	typ  reflect.Type
}

func (p *tagParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i].text
	}
	return ""
}

func (p *tagParser) expr() *gnode {
	alts := []*gnode{p.seq()}
	for p.peek() == "|" {
		p.i++
		alts = append(alts, p.seq())
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return &gnode{op: '|', kids: alts}
}

func (p *tagParser) seq() *gnode {
	s := &gnode{op: 's'}
	for p.peek() != "" && p.peek() != "|" && p.peek() != ")" {
		s.kids = append(s.kids, p.term())
	}
	if len(s.kids) == 1 {
		return s.kids[0]
	}
	return s
}

func (p *tagParser) term() *gnode {
	tok := p.toks[p.i]
	var n *gnode
	switch tok.text {
	case "@@":
		p.i++
		n = &gnode{op: 'r', field: tok.field, hasField: true}
	case "@":
		p.i++
		n = p.unit()
		n.capture, n.field, n.hasField = true, tok.field, true
	default:
		n = p.unit()
	}
	switch p.peek() {
	case "?", "*", "+":
		n.mod = p.peek()[0]
		p.i++
	}
	return n
}

func (p *tagParser) unit() *gnode {
	tok := p.toks[p.i]
	p.i++
	switch {
	case tok.text == "(":
		e := p.expr()
		if p.peek() != ")" {
			p.t.Fatalf("%s: unbalanced tag", p.typ)
		}
		p.i++
		// A group of token types or literals alone is one token.
		if e.op == '|' {
			one := &gnode{op: 't'}
			for _, k := range e.kids {
				switch k.op {
				case 't':
					one.toks = append(one.toks, k.toks...)
				case 'l':
					one.toks = append(one.toks, k.lit)
				default:
					return &gnode{op: 's', kids: []*gnode{e}}
				}
			}
			return one
		}
		return &gnode{op: 's', kids: []*gnode{e}}
	case tok.text == "~":
		n := p.unit()
		if n.op != 't' && n.op != 'l' {
			p.t.Fatalf("%s: ~ of more than tokens", p.typ)
		}
		if n.op == 'l' {
			n = &gnode{op: 't', toks: []string{n.lit}}
		}
		n.neg = true
		return n
	case strings.HasPrefix(tok.text, "'"):
		return &gnode{op: 'l', lit: tok.text[1 : len(tok.text)-1]}
	case genKinds[tok.text] != "":
		return &gnode{op: 't', toks: []string{tok.text}}
	}
	p.t.Fatalf("%s: the generator does not know %q in a tag", p.typ, tok.text)
	return nil
}

// gen writes the parser of the types reachable from the root.
type gen struct {
	t     testing.TB
	b     bytes.Buffer
	types map[reflect.Type]*gnode
	order []reflect.Type
	typ   reflect.Type // the production being written
}

func generateParser(t testing.TB, root reflect.Type) []byte {
	g := &gen{t: t, types: map[reflect.Type]*gnode{}}
	g.collect(root)
	names := make([]string, len(g.order))
	for i, ty := range g.order {
		names[i] = ty.Name()
	}
	fmt.Fprintf(&g.b, "// Code generated by dragonc from the grammar of ast.go (TestParserGenerated, go test ./dsl -update). DO NOT EDIT.\n\n")
	fmt.Fprintf(&g.b, "package dsl\n\n")
	fmt.Fprintf(&g.b, "// genArena holds a slab for each production of the generated parser.\ntype genArena struct {\n")
	for _, ty := range g.order {
		fmt.Fprintf(&g.b, "\ts%s slab[%s]\n", ty.Name(), ty.Name())
	}
	fmt.Fprintf(&g.b, "}\n")
	for _, ty := range g.order {
		g.production(ty)
	}
	src, err := format.Source(g.b.Bytes())
	if err != nil {
		t.Fatalf("generated parser: %v\n%s", err, g.b.String())
	}
	return src
}

func (g *gen) collect(ty reflect.Type) {
	if _, ok := g.types[ty]; ok {
		return
	}
	p := &tagParser{toks: structTokens(ty), t: g.t, typ: ty}
	e := p.expr()
	if p.i != len(p.toks) {
		g.t.Fatalf("%s: tag left over at %q", ty, p.peek())
	}
	g.types[ty] = e
	g.order = append(g.order, ty)
	var walk func(n *gnode)
	walk = func(n *gnode) {
		if n.op == 'r' {
			if ft := elemType(n.field.Type); genHooks[n.field.Type] == "" {
				g.collect(ft)
			}
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(e)
}

func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

func (g *gen) printf(format string, args ...any) { fmt.Fprintf(&g.b, format, args...) }

func (g *gen) production(ty reflect.Type) {
	g.typ = ty
	name := ty.Name()
	g.printf("\n// parse%s reads %s = %s .\n", name, name, ebnfOf(g.types[ty]))
	g.printf("func (p *hparser) parse%s() *%s {\n\tv := p.s%s.new(p.dry)\n", name, name, name)
	if genDepth[name] {
		g.printf("\tp.enter()\n")
	}
	if _, ok := ty.FieldByName("Pos"); ok {
		g.printf("\tv.Pos = p.pos()\n")
	}
	g.node(g.types[ty], false)
	if _, ok := ty.FieldByName("EndPos"); ok {
		g.printf("\tv.EndPos = p.end()\n")
	}
	if genDepth[name] {
		g.printf("\tp.depth--\n")
	}
	g.printf("\treturn v\n}\n")
	// Whether the production can start at the current token.
	g.printf("\n// starts%s reports whether %s can start at the current token.\n", name, name)
	if word := genWords[name]; word != "" {
		// Only the production is noted as looked for, not its parts.
		g.printf("func (p *hparser) starts%s() bool {\n\tw := p.watch\n\tp.watch = -1\n\tok := %s\n\tp.watch = w\n\tif !ok {\n\t\tp.try(%q)\n\t}\n\treturn ok\n}\n", name, g.cond(g.types[ty]), word)
	} else {
		g.printf("func (p *hparser) starts%s() bool {\n\treturn %s\n}\n", name, g.cond(g.types[ty]))
	}
}

// ebnfOf is a node in the notation of testdata/grammar.ebnf.
func ebnfOf(n *gnode) string {
	var s string
	switch n.op {
	case 's':
		var parts []string
		for _, k := range n.kids {
			parts = append(parts, ebnfOf(k))
		}
		s = strings.Join(parts, " ")
		if n.mod != 0 && !(len(n.kids) == 1 && strings.HasPrefix(s, "(")) {
			s = "(" + s + ")"
		}
	case '|':
		var parts []string
		for _, k := range n.kids {
			parts = append(parts, ebnfOf(k))
		}
		s = "(" + strings.Join(parts, " | ") + ")"
	case 'l':
		s = fmt.Sprintf("%q", n.lit)
	case 't':
		var parts []string
		for _, t := range n.toks {
			if genKinds[t] != "" {
				parts = append(parts, "<"+strings.ToLower(t)+">")
			} else {
				parts = append(parts, fmt.Sprintf("%q", t))
			}
		}
		s = strings.Join(parts, " | ")
		if len(parts) > 1 {
			s = "(" + s + ")"
		}
		if n.neg {
			s = "~" + s
		}
	case 'r':
		if genHooks[n.field.Type] != "" {
			s = n.field.Type.Name()
		} else {
			s = elemType(n.field.Type).Name()
		}
	}
	if n.mod != 0 {
		s += string(n.mod)
	}
	return s
}

// cond is a Go condition that holds when n can start at the current
// token, noting what was looked for.
func (g *gen) cond(n *gnode) string {
	switch n.op {
	case 'l':
		return fmt.Sprintf("p.is(%q)", n.lit)
	case 't':
		if n.neg {
			var parts []string
			for _, t := range n.toks {
				parts = append(parts, fmt.Sprintf("p.at(%q)", t))
			}
			return fmt.Sprintf("p.kind() != kEOF && !(%s)", strings.Join(parts, " || "))
		}
		var parts []string
		var kinds []string
		for _, t := range n.toks {
			if k := genKinds[t]; k != "" {
				kinds = append(kinds, "p.kind() == "+k)
			} else {
				parts = append(parts, fmt.Sprintf("p.is(%q)", t))
			}
		}
		if len(kinds) > 0 {
			word := genWords[n.toks[0]]
			parts = append(parts, fmt.Sprintf("p.isKind(%q, %s)", word, strings.Join(kinds, " || ")))
		}
		return strings.Join(parts, " || ")
	case 'r':
		if h := genHooks[n.field.Type]; h != "" {
			g.t.Fatalf("%s: a hook (%s) cannot decide an alternative", g.typ, h)
		}
		return fmt.Sprintf("p.starts%s()", elemType(n.field.Type).Name())
	case '|':
		var parts []string
		for _, k := range n.kids {
			parts = append(parts, g.cond(k))
		}
		return strings.Join(parts, " || ")
	case 's':
		// The first part that cannot be empty decides; optional parts
		// before it may start the sequence too.
		var parts []string
		for _, k := range n.kids {
			if k.op == 'r' && genHooks[k.field.Type] != "" {
				continue
			}
			parts = append(parts, g.cond(k))
			if k.mod != '?' && k.mod != '*' {
				break
			}
		}
		return strings.Join(parts, " || ")
	}
	g.t.Fatalf("cond of %c", n.op)
	return ""
}

// altCond is the condition of an alternative. One that starts with two
// literals is taken only when both are there, as participle, which backs
// out of an alternative that fails at its second token: `Enum` not
// followed by "(" is a named type.
func (g *gen) altCond(n *gnode) string {
	if n.op == 's' && len(n.kids) >= 2 && n.kids[0].op == 'l' && n.kids[1].op == 'l' && n.kids[0].mod == 0 && n.kids[1].mod == 0 {
		return fmt.Sprintf("p.is(%q) && p.peekIs(%q)", n.kids[0].lit, n.kids[1].lit)
	}
	return g.cond(n)
}

// node writes the code that reads n, which the current token is known to
// start when started is set.
func (g *gen) node(n *gnode, started bool) {
	if n.op == 'r' && genHooks[n.field.Type] != "" {
		g.one(n, started) // the hook reads the type or nothing
		return
	}
	switch n.mod {
	case '?':
		g.printf("\tif %s {\n", g.cond(n))
		g.one(n, true)
		g.printf("\t}\n")
		return
	case '*':
		g.printf("\tfor p.elem(); %s; p.elem() {\n", g.cond(n))
		g.one(n, true)
		g.printf("\t}\n")
		return
	case '+':
		g.one(n, started)
		g.printf("\tfor p.elem(); %s; p.elem() {\n", g.cond(n))
		g.one(n, true)
		g.printf("\t}\n")
		return
	}
	g.one(n, started)
}

// one writes the code that reads n once.
func (g *gen) one(n *gnode, started bool) {
	switch n.op {
	case 's':
		for i, k := range n.kids {
			g.node(k, started && i == 0)
		}
	case '|':
		g.printf("\tswitch {\n")
		for _, k := range n.kids {
			g.printf("\tcase %s:\n", g.altCond(k))
			g.node(k, true)
		}
		g.printf("\tdefault:\n\t\tp.fail(\"\")\n\t}\n")
	case 'l':
		if n.capture {
			g.capture(n, fmt.Sprintf("p.is(%q)", n.lit))
			return
		}
		if hint := genHints[g.typ.Name()+" "+n.lit]; hint != "" {
			g.printf("\tp.expectAs(%q, %q)\n", n.lit, hint)
			return
		}
		g.printf("\tp.expect(%q)\n", n.lit)
	case 't':
		g.capture(n, g.cond(n))
	case 'r':
		f := n.field
		var read string
		if h := genHooks[f.Type]; h != "" {
			read = h
		} else {
			read = fmt.Sprintf("p.parse%s()", elemType(f.Type).Name())
		}
		if f.Type.Kind() == reflect.Slice {
			g.printf("\tadd(p, &v.%s, %s)\n", f.Name, read)
		} else {
			g.printf("\tv.%s = %s\n", f.Name, read)
		}
	}
}

// capture writes the code that takes one token that cond accepts and
// keeps it in n's field.
func (g *gen) capture(n *gnode, cond string) {
	g.printf("\tif !(%s) {\n\t\tp.fail(\"\")\n\t}\n", cond)
	if !n.capture {
		g.printf("\tp.advance()\n")
		return
	}
	switch n.field.Type.Kind() {
	case reflect.Bool:
		g.printf("\tv.%s = true\n\tp.advance()\n", n.field.Name)
	case reflect.String:
		g.printf("\tv.%s = p.take()\n", n.field.Name)
	default:
		g.t.Fatalf("%s.%s: cannot capture a token into %s", g.typ, n.field.Name, n.field.Type)
	}
}
