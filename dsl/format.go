package dsl

import (
	"bytes"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Format prints the canonical layout of a parsed file: four-space
// indentation, one item a line, at most one blank line kept between items,
// and every comment kept. Tokens are printed as written, so formatting
// never changes the syntax tree, only the layout. It is idempotent.
func Format(s *Source) []byte {
	p := &printer{src: s, comments: s.Comments(), prevEnd: 0, afterOpen: true}
	switch {
	case s.AST.Graph != nil:
		p.graph(s.AST.Graph)
	case s.AST.Stack != nil:
		p.stack(s.AST.Stack)
	}
	p.flush(len(s.File.Src) + 1)
	out := p.buf.Bytes()
	return append(bytes.TrimRight(out, "\n"), '\n')
}

type printer struct {
	src       *Source
	comments  []lexer.Token // the file's comments, in order
	buf       bytes.Buffer
	indent    int
	ci        int  // next comment to print
	prevEnd   int  // source offset just after the last thing printed
	afterOpen bool // the last line printed opened a block (or nothing yet)
}

// tokAfter returns the offset of the first token with value val at or
// after off, or -1.
func (p *printer) tokAfter(off int, val string) int {
	toks := p.src.Tokens()
	i := sort.Search(len(toks), func(i int) bool { return toks[i].Pos.Offset >= off })
	for ; i < len(toks); i++ {
		if toks[i].Value == val && toks[i].Type != kindType[kComment] && toks[i].Type != kindType[kString] {
			return toks[i].Pos.Offset
		}
	}
	return -1
}

// blankBefore reports whether the source has an empty line between the
// last printed thing and off.
func (p *printer) blankBefore(off int) bool {
	if p.afterOpen || off <= p.prevEnd || off > len(p.src.File.Src) {
		return false
	}
	gap := p.src.File.Src[p.prevEnd:off]
	return bytes.Count(gap, []byte("\n")) >= 2
}

func (p *printer) writeLine(text string, start int) {
	if p.blankBefore(start) {
		p.buf.WriteByte('\n')
	}
	p.buf.WriteString(strings.Repeat("    ", p.indent))
	p.buf.WriteString(text)
}

// flush prints, each on its own line, the comments that start before upTo.
func (p *printer) flush(upTo int) {
	cs := p.comments
	for p.ci < len(cs) && cs[p.ci].Pos.Offset < upTo {
		c := cs[p.ci]
		p.ci++
		p.writeLine(strings.TrimRight(c.Value, " \t\r"), c.Pos.Offset)
		p.buf.WriteByte('\n')
		p.prevEnd = c.Pos.Offset + len(c.Value)
		p.afterOpen = false
	}
}

// line prints one unit of output that spans [start, end) in the source.
// Comments inside the span go above it; a comment that follows it on the
// same source line stays at its end.
func (p *printer) line(text string, start, end int, opens bool) {
	p.flush(end)
	p.writeLine(text, start)
	p.prevEnd = max(p.prevEnd, end)
	p.trailing()
	p.buf.WriteByte('\n')
	p.afterOpen = opens
}

// trailing appends a comment that sits on the same source line as the
// last thing printed.
func (p *printer) trailing() {
	cs := p.comments
	if p.ci >= len(cs) {
		return
	}
	c := cs[p.ci]
	src := p.src.File.Src
	if c.Pos.Offset < p.prevEnd || bytes.ContainsAny(src[p.prevEnd:c.Pos.Offset], "\n") {
		return
	}
	if strings.HasPrefix(c.Value, "/*") && strings.Contains(c.Value, "\n") {
		return
	}
	// Only whitespace may lie between; anything else is a token and will be
	// printed with its own line.
	if len(bytes.TrimSpace(src[p.prevEnd:c.Pos.Offset])) != 0 {
		return
	}
	p.buf.WriteString(" " + strings.TrimRight(c.Value, " \t\r"))
	p.prevEnd = c.Pos.Offset + len(c.Value)
	p.ci++
}

// open prints a header line ending in "{" found at or after from.
func (p *printer) open(text string, start, from int) {
	brace := p.tokAfter(from, "{")
	p.line(text+" {", start, brace+1, true)
	p.indent++
}

// close prints the "}" that ends at end (an EndPos offset).
func (p *printer) close(end int) { p.closeWith("}", end) }

// closeWith ends a level of indentation with its closing bracket, which
// ends at end; the comments before the bracket stay inside.
func (p *printer) closeWith(bracket string, end int) {
	p.flush(end - 1)
	p.indent--
	p.afterOpen = false
	p.buf.WriteString(strings.Repeat("    ", p.indent))
	p.buf.WriteString(bracket)
	p.prevEnd = end
	p.trailing()
	p.buf.WriteByte('\n')
}

func (p *printer) graph(g *Graph) {
	p.open(keywords.graph[0]+" "+g.Name.Text, g.Pos.Offset, g.Name.EndPos.Offset)
	p.decls(g.Decls)
	p.close(g.EndPos.Offset)
}

func (p *printer) decls(ds []*Decl) {
	for _, d := range ds {
		switch {
		case d.Helpers != nil:
			p.line(keywords.helpers[0]+" "+p.raw(d.Helpers.Pos, d.Helpers.EndPos), d.Pos.Offset, d.EndPos.Offset, false)
		case d.Cluster != nil:
			c := d.Cluster
			p.open(keywords.cluster[0]+" "+c.Name.Text, c.Pos.Offset, c.Name.EndPos.Offset)
			p.decls(c.Decls)
			p.close(c.EndPos.Offset)
		case d.Node != nil:
			p.node(d.Node)
		case d.Resource != nil:
			r := d.Resource
			p.block(r.Kind+" "+r.Name.Text, r.Pos.Offset, r.Name.EndPos.Offset, r.EndPos.Offset, len(r.Props), func() { p.props(r.Props) })
		}
	}
}

// block prints `HEADER { ... }`, or `HEADER {}` when it is empty and has no
// comments inside.
func (p *printer) block(header string, start, from, end, items int, body func()) {
	if items == 0 && !p.commentBefore(end) {
		p.line(header+" {}", start, end, false)
		return
	}
	p.open(header, start, from)
	body()
	p.close(end)
}

func (p *printer) commentBefore(end int) bool {
	return p.ci < len(p.comments) && p.comments[p.ci].Pos.Offset < end
}

func (p *printer) node(n *Node) {
	name := n.Name.Text
	if n.Hi != nil {
		name += ".." + numText(n.Hi)
	}
	p.block(n.Kind+" "+name, n.Pos.Offset, n.Name.EndPos.Offset, n.EndPos.Offset, len(n.Items), func() {
		for _, it := range n.Items {
			p.item(it)
		}
	})
}

func (p *printer) item(it *Item) {
	start, end := it.Pos.Offset, it.EndPos.Offset
	var t string
	switch {
	case it.Impl != nil:
		t = keywords.impl[0] + " " + it.Impl.Text
	case it.Attr != nil:
		t = keywords.attr[0] + " " + it.Attr.Raw
	case it.Spawn != nil:
		t = keywords.spawn[0] + " " + it.Spawn.Name.Text + " " + it.Spawn.Target.Text
		for _, pr := range it.Spawn.Preds {
			t += " [" + keywords.spawnPredicate[0] + " " + pr.Raw + "]"
		}
	case it.Port != nil:
		targets := make([]string, len(it.Port.Targets))
		for i, tg := range it.Port.Targets {
			targets[i] = tg.Ref.Text
			if tg.Hi != nil {
				targets[i] += ".." + numText(tg.Hi)
			}
		}
		t = p.hang(keywords.port[0]+" "+joinIdents(it.Port.Names, " ")+"[", targets, "]")
	case it.Constraint != nil:
		t = keywords.constraint[0] + " " + it.Constraint.Port.Text + " " + it.Constraint.Text.Raw
	case it.Semantics != nil:
		t = keywords.semantics[0] + " " + joinIdents(it.Semantics.Ports, " ") + " " + p.raw(it.Semantics.Body.Pos, it.Semantics.Body.EndPos)
	case it.Predicate != nil:
		t = keywords.predicate[0] + " " + it.Predicate.Port.Text + " " + it.Predicate.Expr.Raw
	case it.Type != nil:
		t = keywords.typ[0] + " " + typeText(it.Type)
		if !p.fits(t) {
			t = keywords.typ[0] + " " + typeHang(it.Type, 4*p.indent+len(keywords.typ[0])+1)
		}
	case it.Function != nil:
		t = keywords.function[0] + " " + it.Function.Text
	case it.Cost != nil:
		t = keywords.cost[0] + " " + it.Cost.Unit.Text + " " + numText(it.Cost.Value)
	case it.Config != nil:
		// A configuration of one property, the usual
		// `enum { feature rx_checksum }`, reads best on one line.
		c := it.Config
		if len(c.Props) == 1 && !p.commentBefore(end) {
			if one := c.Kind + " { " + propText(c.Props[0]) + " }"; p.fits(one) {
				p.line(one, start, end, false)
				return
			}
		}
		p.block(c.Kind, start, start, end, len(c.Props), func() { p.props(c.Props) })
		return
	}
	p.line(t, start, end, false)
}

func (p *printer) props(ps []*Prop) {
	for _, pr := range ps {
		p.value(pr.Key.Text+" ", pr.Value, pr.Pos.Offset, pr.EndPos.Offset)
	}
}

func propText(pr *Prop) string { return pr.Key.Text + " " + valueText(pr.Value) }

// maxWidth is the column a line of values should end within: a list that
// would pass it is broken over lines.
const maxWidth = 100

// fits reports whether text, at the current indentation, ends within
// maxWidth.
func (p *printer) fits(text string) bool {
	return 4*p.indent+utf8.RuneCountInString(text) <= maxWidth
}

// value prints head and v, which span [start, end) in the source: on one
// line when that fits, otherwise the list broken over lines between head
// with its "[" and a line of its own for the "]". The layout depends on
// the values alone, never on how the source was laid out, so that a
// table of latencies reads the same in every file and formatting stays
// idempotent.
func (p *printer) value(head string, v *Value, start, end int) {
	text := head + valueText(v)
	if !isList(v) || len(v.List) == 0 || p.fits(text) {
		p.line(text, start, end, false)
		return
	}
	p.line(head+"[", start, v.Pos.Offset+1, true)
	p.indent++
	p.elems(v.List)
	p.closeWith("]", v.EndPos.Offset)
}

// elems prints the elements of a broken list. A table (a list of lists)
// has a row a line with its columns aligned; a list of plain values fills
// its lines; anything else has an element a line.
func (p *printer) elems(vs []*Value) {
	table, plain := true, true
	for _, v := range vs {
		table = table && isList(v)
		plain = plain && !isList(v)
	}
	switch {
	case table:
		if rows, ok := p.alignRows(vs); ok {
			for i, v := range vs {
				p.line(rows[i], v.Pos.Offset, v.EndPos.Offset, false)
			}
			return
		}
	case plain:
		for i := 0; i < len(vs); {
			text, j := valueText(vs[i]), i+1
			for ; j < len(vs); j++ {
				next := text + " " + valueText(vs[j])
				if !p.fits(next) {
					break
				}
				text = next
			}
			p.line(text, vs[i].Pos.Offset, vs[j-1].EndPos.Offset, false)
			i = j
		}
		return
	}
	for _, v := range vs {
		p.value("", v, v.Pos.Offset, v.EndPos.Offset)
	}
}

// alignRows lays out the rows of a table with each column padded to its
// widest cell, numbers to the right and anything else to the left, or
// reports false when a row would then pass maxWidth.
func (p *printer) alignRows(rows []*Value) ([]string, bool) {
	var widths []int
	var left []bool // the column holds something other than a plain number
	for _, r := range rows {
		for j, c := range r.List {
			if j == len(widths) {
				widths, left = append(widths, 0), append(left, false)
			}
			widths[j] = max(widths[j], utf8.RuneCountInString(valueText(c)))
			left[j] = left[j] || c.Num == nil || c.Hi != nil || c.Unit != ""
		}
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		var b strings.Builder
		b.WriteByte('[')
		for j, c := range r.List {
			text := valueText(c)
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(text))
			if j > 0 {
				b.WriteByte(' ')
			}
			switch {
			case !left[j]:
				b.WriteString(pad + text)
			case j < len(r.List)-1:
				b.WriteString(text + pad)
			default:
				b.WriteString(text)
			}
		}
		b.WriteByte(']')
		out[i] = b.String()
		if !p.fits(out[i]) {
			return nil, false
		}
	}
	return out, true
}

// isList reports whether v is a bracketed list (possibly empty).
func isList(v *Value) bool { return v.Str == nil && v.Num == nil && v.Name == nil }

// raw returns source text verbatim (SMT-LIB blocks).
func (p *printer) raw(start, end lexer.Position) string {
	src := p.src.File.Src
	if start.Offset < 0 || end.Offset > len(src) || start.Offset > end.Offset {
		return "{}"
	}
	text := string(src[start.Offset:end.Offset])
	// The block's comments are part of its verbatim text.
	for p.ci < len(p.comments) && p.comments[p.ci].Pos.Offset < end.Offset && p.comments[p.ci].Pos.Offset >= start.Offset {
		p.ci++
	}
	return text
}

func joinIdents(ids []*Ident, sep string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.Text
	}
	return strings.Join(parts, sep)
}

func numText(n *Num) string {
	if n.Neg {
		return "-" + n.Text
	}
	return n.Text
}

func valueText(v *Value) string {
	switch {
	case v.Str != nil:
		return v.Str.Raw
	case v.Num != nil:
		t := numText(v.Num)
		if v.Hi != nil {
			t += ".." + numText(v.Hi)
		}
		return t + string(v.Unit)
	case v.Name != nil:
		return v.Name.Text
	}
	parts := make([]string, len(v.List))
	for i, e := range v.List {
		parts[i] = valueText(e)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// hang returns open, the words and close on one line when that fits at
// the current indentation; otherwise the words fill lines that continue
// under the first word.
func (p *printer) hang(open string, words []string, close string) string {
	one := open + strings.Join(words, " ") + close
	if len(words) < 2 || p.fits(one) {
		return one
	}
	var b strings.Builder
	b.WriteString(open)
	col := 4*p.indent + utf8.RuneCountInString(open)
	at := col
	for i, w := range words {
		n := utf8.RuneCountInString(w)
		switch {
		case i == 0:
		case at+1+n > maxWidth:
			b.WriteString("\n" + strings.Repeat(" ", col))
			at = col
		default:
			b.WriteByte(' ')
			at++
		}
		b.WriteString(w)
		at += n
	}
	return b.String() + close
}

func typeText(t *ConfType) string { return typeLayout(t, -1) }

// typeHang returns t with the fields of its outermost tuple one a line,
// labels aligned, as Dragonet's own models lay out their filter types;
// the type starts at column col.
func typeHang(t *ConfType, col int) string { return typeLayout(t, col) }

// typeLayout returns t on one line when col is negative, otherwise with
// its outermost tuple hung from column col.
func typeLayout(t *ConfType, col int) string {
	inner := func(open int) int {
		if col < 0 {
			return -1
		}
		return col + open
	}
	var s string
	switch {
	case t.Optional != nil:
		s = "<" + typeLayout(t.Optional, inner(1)) + ">"
	case t.Set != nil:
		s = "{ " + typeLayout(t.Set, inner(2)) + " }"
	case t.List != nil:
		s = "[ " + typeLayout(t.List, inner(2)) + " ]"
	case len(t.Tuple) > 0:
		labels := 0
		for _, el := range t.Tuple {
			labels = max(labels, utf8.RuneCountInString(el.Label.Text))
		}
		parts := make([]string, len(t.Tuple))
		for i, el := range t.Tuple {
			parts[i] = el.Label.Text + ": " + typeText(el.Type)
			if col >= 0 {
				parts[i] = el.Label.Text + ":" + strings.Repeat(" ", labels-utf8.RuneCountInString(el.Label.Text)+1) + typeText(el.Type)
			}
		}
		sep := ", "
		if col >= 0 {
			sep = ",\n" + strings.Repeat(" ", col+1)
		}
		s = "(" + strings.Join(parts, sep) + ")"
	case len(t.Enum) > 0:
		s = keywords.enum[0] + " (" + joinIdents(t.Enum, ", ") + ")"
	case t.Named != nil:
		s = t.Named.Name
		for _, a := range t.Named.Args {
			s += " " + numText(a)
		}
	}
	if b := t.Bounds; b != nil {
		s += " <"
		if b.Lo != nil {
			s += numText(b.Lo)
		}
		if b.Comma {
			s += ","
		}
		if b.Hi != nil {
			s += numText(b.Hi)
		}
		s += ">"
	}
	return s
}

func (p *printer) stack(st *Stack) {
	p.open(keywords.stack[0]+" "+st.Name.Text, st.Pos.Offset, st.Name.EndPos.Offset)
	for _, it := range st.Items {
		p.line(stackItemText(it), it.Pos.Offset, it.EndPos.Offset, false)
	}
	p.close(st.EndPos.Offset)
}

func stackItemText(it *StackItem) string {
	switch {
	case it.Interface != nil:
		in := it.Interface
		t := keywords.iface[0] + " " + in.Name.Text + " { " + keywords.mac[0] + " " + in.MAC.Text
		for _, ip := range in.IPs {
			t += " " + keywords.ip[0] + " " + ip.Addr.Text + "/" + numText(ip.Len)
		}
		if in.MTU != nil {
			t += " " + keywords.mtu[0] + " " + numText(in.MTU)
		}
		return t + " }"
	case it.Cores != nil:
		return keywords.cores[0] + " " + rangeText(it.Cores)
	case it.Service != nil:
		return keywords.service[0] + " " + it.Service.Name.Text + attrsText(it.Service.Settings)
	}
	ep := it.Endpoint
	t := keywords.endpoint[0] + " " + ep.Name.Text + " " + ep.Kind.Text
	switch {
	case ep.Listen != nil:
		t += " " + keywords.listen[0] + " " + addrText(ep.Listen.Addr) + ":" + numText(ep.Listen.Port)
		if ep.Listen.Hi != nil {
			t += ".." + numText(ep.Listen.Hi)
		}
	case ep.Flow != nil:
		f := ep.Flow
		t += " " + keywords.flow[0] + " " + addrText(f.LAddr) + ":" + numText(f.LPort) + " -> " + addrText(f.RAddr) + ":" + numText(f.RPort)
	case ep.ID != nil:
		t += " " + numText(ep.ID)
	}
	return t + attrsText(ep.Attrs)
}

// attrsText prints an endpoint's attributes or a service's settings as
// ` { a 1 b 2 }` on the item's line, or nothing when there are none (an
// empty block means the same).
func attrsText(attrs []*EpAttr) string {
	if len(attrs) == 0 {
		return ""
	}
	t := " {"
	for _, a := range attrs {
		if a.Flag != nil {
			t += " " + a.Flag.Text
			continue
		}
		t += " " + a.Key.Text + " "
		switch {
		case a.Str != nil:
			t += a.Str.Raw
		case a.Range != nil:
			t += rangeText(a.Range) + string(a.Unit)
		case a.Word != nil:
			t += a.Word.Text
		}
	}
	return t + " }"
}

func addrText(a *Addr) string {
	if a.Any {
		return "*"
	}
	return a.IP.Text
}

func rangeText(r *RangeList) string {
	parts := make([]string, len(r.Items))
	for i, it := range r.Items {
		parts[i] = numText(it.Lo)
		if it.Hi != nil {
			parts[i] += ".." + numText(it.Hi)
		}
	}
	return strings.Join(parts, ",")
}
