// Package solver decides satisfiability and implication of predicates over
// packet fields, exactly for the forms NIC filters and protocol checks
// produce: equalities, ranges, sets, prefix masks, and/or/not.
//
// Each field is an unknown that is either absent (the frame has no such
// header) or an unsigned value of the field's width; a comparison is false
// on an absent field. A field's possible values are kept as a set of
// intervals plus whether it may be absent, so a conjunction of comparisons
// on one field is decided exactly and a negated comparison never needs a
// case split. Fields are independent, which over-approximates real frames
// (udp.dport and ip.proto are related on the wire): anything proven
// impossible here is impossible on the wire, which is the direction every
// use in dragonc relies on (proving implications and pruning paths).
// Comparisons the interval form cannot hold exactly (masks that are not a
// prefix, the opaque rss.hash) and node outcomes are opaque atoms.
package solver

import (
	"slices"

	"github.com/dragonc/dragonc/internal/pred"
)

// Domain is what one field may be.
type Domain struct {
	Vals   []pred.Range // sorted, disjoint, non-adjacent
	Absent bool         // the field may be absent
}

// Box is a conjunction of per-field domains and atom values: a set of
// frames. Only fields whose domain differs from the universe are stored,
// so boxes stay small and cheap to copy. The zero Box is the universe.
type Box struct {
	ids   []uint8   // sorted IDs of the restricted fields
	doms  []*Domain // their domains, never changed once stored: clones share them
	empty bool      // known to hold no frame
	gone  uint16    // layers known absent: their unrestricted fields are absent
	atoms map[string]bool
}

var (
	maxOf    []uint64
	universe []Domain // shared; interval slices are never mutated
)

func init() {
	maxOf = make([]uint64, pred.NumFields)
	for _, name := range pred.FieldNames() {
		f := pred.Fields[name]
		if f.Bits >= 64 {
			maxOf[f.ID] = ^uint64(0)
		} else {
			maxOf[f.ID] = 1<<uint(f.Bits) - 1
		}
	}
	universe = make([]Domain, pred.NumFields)
	for i := range universe {
		universe[i] = Domain{Vals: []pred.Range{{Lo: 0, Hi: maxOf[i]}}, Absent: true}
	}
}

// Universe is the set of all frames.
func Universe() *Box { return &Box{} }

// Clone copies a box; interval slices are shared and never mutated. The
// copy has room for two more fields: most clones are narrowed next
// (Restrict), and put then appends without growing the slices.
func (b *Box) Clone() *Box {
	const room = 2
	c := &Box{ids: make([]uint8, len(b.ids), len(b.ids)+room), doms: make([]*Domain, len(b.doms), len(b.doms)+room), empty: b.empty, gone: b.gone}
	copy(c.ids, b.ids)
	copy(c.doms, b.doms)
	if len(b.atoms) > 0 {
		c.atoms = make(map[string]bool, len(b.atoms))
		for k, v := range b.atoms {
			c.atoms[k] = v
		}
	}
	return c
}

func (b *Box) find(id int) (int, bool) {
	lo, hi := 0, len(b.ids)
	for lo < hi {
		m := (lo + hi) / 2
		if int(b.ids[m]) < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(b.ids) && int(b.ids[lo]) == id
}

var absentOnly = &Domain{Absent: true}

// get returns a field's domain.
func (b *Box) get(id int) Domain {
	if i, ok := b.find(id); ok {
		return *b.doms[i]
	}
	if b.gone&layerBit[id] != 0 {
		return *absentOnly
	}
	return universe[id]
}

// put sets a field's domain.
func (b *Box) put(id int, d Domain) {
	if len(d.Vals) == 0 && !d.Absent {
		b.empty = true
	}
	i, ok := b.find(id)
	if d.Absent && slices.Equal(d.Vals, universe[id].Vals) {
		if ok {
			b.ids = append(b.ids[:i], b.ids[i+1:]...)
			b.doms = append(b.doms[:i], b.doms[i+1:]...)
		}
		return
	}
	if ok && b.doms[i].Absent == d.Absent && slices.Equal(b.doms[i].Vals, d.Vals) {
		return // no change: keep the shared domain
	}
	nd := &d
	if ok {
		b.doms[i] = nd
		return
	}
	b.ids = append(b.ids, 0)
	b.doms = append(b.doms, nil)
	copy(b.ids[i+1:], b.ids[i:])
	copy(b.doms[i+1:], b.doms[i:])
	b.ids[i], b.doms[i] = uint8(id), nd
}

// Domain returns a field's domain.
func (b *Box) Domain(id int) Domain { return b.get(id) }

// Empty reports whether the box holds no frame.
func (b *Box) Empty() bool {
	if b.empty {
		return true
	}
	for _, d := range b.doms {
		if len(d.Vals) == 0 && !d.Absent {
			return true
		}
	}
	return false
}

// fieldsOf merges the restricted field IDs of two boxes.
func fieldsOf(a, b *Box) []uint8 {
	out := make([]uint8, 0, len(a.ids)+len(b.ids))
	i, j := 0, 0
	for i < len(a.ids) || j < len(b.ids) {
		switch {
		case j == len(b.ids) || i < len(a.ids) && a.ids[i] < b.ids[j]:
			out = append(out, a.ids[i])
			i++
		case i == len(a.ids) || b.ids[j] < a.ids[i]:
			out = append(out, b.ids[j])
			j++
		default:
			out = append(out, a.ids[i])
			i++
			j++
		}
	}
	return out
}

// lit is a comparison turned into the set of values it accepts, or marked
// opaque.
type lit struct {
	id     int
	set    []pred.Range
	opaque string
}

// literal converts a comparison.
func literal(c pred.Cmp) lit {
	max := maxOf[c.ID]
	if c.Field == "rss.hash" {
		return lit{opaque: c.String()}
	}
	mask := c.Mask
	if mask != 0 && mask != max {
		// A prefix mask (high bits) with == or != is an interval of the
		// unmasked value; anything else stays opaque.
		low := ^mask & max
		if low&(low+1) != 0 || (c.Op != pred.Eq && c.Op != pred.Ne) || c.Value&low != 0 {
			return lit{opaque: c.String()}
		}
		r := []pred.Range{{Lo: c.Value, Hi: c.Value | low}}
		if c.Op == pred.Ne {
			r = complement(r, max)
		}
		return lit{id: c.ID, set: r}
	}
	var r []pred.Range
	v := c.Value
	switch c.Op {
	case pred.Eq:
		r = []pred.Range{{Lo: v, Hi: v}}
	case pred.Ne:
		r = complement([]pred.Range{{Lo: v, Hi: v}}, max)
	case pred.Lt:
		if v > 0 {
			r = []pred.Range{{Lo: 0, Hi: v - 1}}
		}
	case pred.Le:
		r = []pred.Range{{Lo: 0, Hi: min(v, max)}}
	case pred.Gt:
		if v < max {
			r = []pred.Range{{Lo: v + 1, Hi: max}}
		}
	case pred.Ge:
		if v <= max {
			r = []pred.Range{{Lo: v, Hi: max}}
		}
	case pred.In:
		for _, x := range c.Ranges {
			if x.Lo <= max {
				r = append(r, pred.Range{Lo: x.Lo, Hi: min(x.Hi, max)})
			}
		}
	}
	return lit{id: c.ID, set: r}
}

// complement returns [0,max] minus a sorted disjoint set.
func complement(rs []pred.Range, max uint64) []pred.Range {
	var out []pred.Range
	next := uint64(0)
	open := true
	for _, r := range rs {
		if r.Lo > next {
			out = append(out, pred.Range{Lo: next, Hi: r.Lo - 1})
		}
		if r.Hi == max {
			open = false
			break
		}
		next = r.Hi + 1
	}
	if open && (len(rs) == 0 || next <= max) {
		out = append(out, pred.Range{Lo: next, Hi: max})
	}
	return out
}

// intersect returns the intersection of two sorted disjoint sets.
func intersect(a, b []pred.Range) []pred.Range {
	var out []pred.Range
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo := max(a[i].Lo, b[j].Lo)
		hi := min(a[i].Hi, b[j].Hi)
		if lo <= hi {
			out = append(out, pred.Range{Lo: lo, Hi: hi})
		}
		if a[i].Hi < b[j].Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// subset reports whether every value of a is in b, without allocating.
func subset(a, b []pred.Range) bool {
	j := 0
	for _, r := range a {
		for j < len(b) && b[j].Hi < r.Lo {
			j++
		}
		if j == len(b) || b[j].Lo > r.Lo || b[j].Hi < r.Hi {
			return false
		}
	}
	return true
}

// overlaps reports whether two sorted sets share a value, without allocating.
func overlaps(a, b []pred.Range) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i].Hi < b[j].Lo {
			i++
		} else if b[j].Hi < a[i].Lo {
			j++
		} else {
			return true
		}
	}
	return false
}

// tri is a three-valued truth.
type tri int8

const (
	no tri = iota
	yes
	maybe
)

// evalLit decides a literal (negated if neg) on a box: yes when every frame of
// the box satisfies it, no when none does.
func (b *Box) evalLit(l lit, neg bool) tri {
	if l.opaque != "" {
		return b.evalAtom(l.opaque, neg)
	}
	d := b.get(l.id)
	in := intersect(d.Vals, l.set)
	allIn := !d.Absent && slices.Equal(in, d.Vals)
	noneIn := len(in) == 0
	if neg {
		allIn, noneIn = noneIn, allIn
	}
	switch {
	case allIn:
		return yes
	case noneIn:
		return no
	}
	return maybe
}

func (b *Box) evalAtom(name string, neg bool) tri {
	v, ok := b.atoms[name]
	if !ok {
		if !b.otherValueTrue(name) {
			return maybe
		}
		v = false // another value of its key holds
	}
	if v != neg {
		return yes
	}
	return no
}

// atomKey returns the key of a Unicorn atom's name ("@KEY=VALUE"), or ""
// for other opaque literals. Dragonet's semantics (Predicate.hs): a node
// enables one port, so two atoms with the same key and different values
// are mutually exclusive; all of them may be false.
func atomKey(name string) string {
	if len(name) < 2 || name[0] != '@' {
		return ""
	}
	for i := 1; i < len(name); i++ {
		if name[i] == '=' {
			return name[:i+1]
		}
	}
	return ""
}

// otherValueTrue reports whether the box makes another value of name's
// key true.
func (b *Box) otherValueTrue(name string) bool {
	key := atomKey(name)
	if key == "" {
		return false
	}
	for k, v := range b.atoms {
		if v && k != name && len(k) > len(key) && k[:len(key)] == key {
			return true
		}
	}
	return false
}

// assume restricts the box to frames satisfying the literal; false when
// that leaves none.
func (b *Box) assume(l lit, neg bool) bool {
	if l.opaque != "" {
		return b.assumeAtom(l.opaque, !neg)
	}
	d := b.get(l.id)
	if neg {
		d = Domain{Vals: intersect(d.Vals, complement(l.set, maxOf[l.id])), Absent: d.Absent}
	} else {
		d = Domain{Vals: intersect(d.Vals, l.set), Absent: false}
	}
	b.put(l.id, d)
	return len(d.Vals) > 0 || d.Absent
}

func (b *Box) assumeAtom(name string, v bool) bool {
	if old, ok := b.atoms[name]; ok {
		return old == v
	}
	if v && b.otherValueTrue(name) {
		return false
	}
	if b.atoms == nil {
		b.atoms = map[string]bool{}
	}
	b.atoms[name] = v
	return true
}

func atomName(a pred.Atom) string { return "@" + a.Name + "=" + a.Value }

// item is a formula with a polarity.
type item struct {
	e   pred.Expr
	neg bool
}

// Sat reports whether some frame of the box satisfies every formula.
func Sat(b *Box, fs ...pred.Expr) bool {
	todo := make([]item, 0, len(fs))
	for _, f := range fs {
		todo = append(todo, item{f, false})
	}
	return sat(b.Clone(), todo, nil)
}

// Implies reports whether every frame of the box that satisfies all of
// given also satisfies f.
func Implies(b *Box, f pred.Expr, given ...pred.Expr) bool {
	todo := make([]item, 0, len(given)+1)
	for _, g := range given {
		todo = append(todo, item{g, false})
	}
	todo = append(todo, item{f, true})
	return !sat(b.Clone(), todo, nil)
}

// Restrict returns the box narrowed by a conjunction of literals in f, and
// whether f is exactly such a conjunction (or/and nesting under it is
// ignored and reported false). Used to turn path conditions into boxes.
func Restrict(b *Box, f pred.Expr) (*Box, bool) {
	c := b.Clone()
	exact := c.restrict(item{f, false})
	if !c.normalize() {
		c.empty = true
	}
	return c, exact
}

func (b *Box) restrict(it item) bool {
	switch e := it.e.(type) {
	case nil:
		return true
	case pred.Const:
		if bool(e) == it.neg {
			b.empty = true
		}
		return true
	case pred.Cmp:
		b.assume(literal(e), it.neg)
		return true
	case pred.Atom:
		if !b.assumeAtom(atomName(e), !it.neg) {
			b.empty = true
		}
		return true
	case pred.Not:
		return b.restrict(item{e.X, !it.neg})
	case pred.And:
		if it.neg {
			return false
		}
		ok := true
		for _, x := range e.X {
			ok = b.restrict(item{x, false}) && ok
		}
		return ok
	case pred.Or:
		if !it.neg {
			return false
		}
		ok := true
		for _, x := range e.X {
			ok = b.restrict(item{x, true}) && ok
		}
		return ok
	}
	return false
}

// sat is a DPLL-style search: conjunctions narrow the box, disjunctions
// wait until every conjunct is in, are simplified against the box, and are
// split on only when no disjunct is decided.
func sat(b *Box, todo []item, ors []item) bool {
	for {
		for len(todo) > 0 {
			it := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			switch e := it.e.(type) {
			case nil:
				if it.neg {
					return false
				}
			case pred.Const:
				if bool(e) == it.neg {
					return false
				}
			case pred.Cmp:
				if !b.assume(literal(e), it.neg) {
					return false
				}
			case pred.Atom:
				if !b.assumeAtom(atomName(e), !it.neg) {
					return false
				}
			case pred.Not:
				todo = append(todo, item{e.X, !it.neg})
			case pred.And:
				if it.neg {
					ors = append(ors, it)
				} else {
					for _, x := range e.X {
						todo = append(todo, item{x, false})
					}
				}
			case pred.Or:
				if it.neg {
					for _, x := range e.X {
						todo = append(todo, item{x, true})
					}
				} else {
					ors = append(ors, it)
				}
			}
		}
		// Simplify every pending disjunction against the box.
		var live []item
		best, bestN := -1, 0
		for _, o := range ors {
			xs := children(o.e)
			var alive []pred.Expr
			done := false
			for _, x := range xs {
				switch b.eval(item{x, o.neg}) {
				case yes:
					done = true
				case maybe:
					alive = append(alive, x)
				}
				if done {
					break
				}
			}
			if done {
				continue
			}
			switch len(alive) {
			case 0:
				return false
			case 1:
				todo = append(todo, item{alive[0], o.neg})
				continue
			}
			o = item{rebuild(o.e, alive), o.neg}
			if best < 0 || len(alive) < bestN {
				best, bestN = len(live), len(alive)
			}
			live = append(live, o)
		}
		if len(todo) > 0 {
			ors = live
			continue
		}
		if len(live) == 0 {
			return b.normalize()
		}
		// Split on the smallest disjunction.
		o := live[best]
		rest := append(append([]item(nil), live[:best]...), live[best+1:]...)
		for _, x := range children(o.e) {
			if sat(b.Clone(), []item{{x, o.neg}}, rest) {
				return true
			}
		}
		return false
	}
}

// children returns the operands of a disjunction (Or, or a negated And).
func children(e pred.Expr) []pred.Expr {
	switch e := e.(type) {
	case pred.Or:
		return e.X
	case pred.And:
		return e.X
	}
	return nil
}

func rebuild(e pred.Expr, xs []pred.Expr) pred.Expr {
	if _, ok := e.(pred.Or); ok {
		return pred.Or{X: xs}
	}
	return pred.And{X: xs}
}

// eval is Kleene's three-valued evaluation of a formula on a box.
func (b *Box) eval(it item) tri {
	switch e := it.e.(type) {
	case nil:
		if it.neg {
			return no
		}
		return yes
	case pred.Const:
		if bool(e) != it.neg {
			return yes
		}
		return no
	case pred.Cmp:
		return b.evalLit(literal(e), it.neg)
	case pred.Atom:
		return b.evalAtom(atomName(e), it.neg)
	case pred.Not:
		return b.eval(item{e.X, !it.neg})
	case pred.And, pred.Or:
		_, isAnd := e.(pred.And)
		conj := isAnd != it.neg // a conjunction after pushing the negation
		result := yes
		if !conj {
			result = no
		}
		for _, x := range children(e) {
			v := b.eval(item{x, it.neg})
			switch {
			case conj && v == no, !conj && v == yes:
				return v
			case v == maybe:
				result = maybe
			}
		}
		return result
	}
	return maybe
}

// Single returns the value of a field when the box fixes it to one present
// value.
func (b *Box) Single(id int) (uint64, bool) {
	d := b.get(id)
	if d.Absent || len(d.Vals) != 1 || d.Vals[0].Lo != d.Vals[0].Hi {
		return 0, false
	}
	return d.Vals[0].Lo, true
}

// Singles calls fn, in field order, for every field the box fixes to one
// present value (the fields Single reports; a field the box leaves open
// may be absent, so it is never single).
func (b *Box) Singles(fn func(id int, v uint64)) {
	for i, id := range b.ids {
		if d := b.doms[i]; !d.Absent && len(d.Vals) == 1 && d.Vals[0].Lo == d.Vals[0].Hi {
			fn(int(id), d.Vals[0].Lo)
		}
	}
}

// Subset reports whether every frame of a is in b (atoms must agree).
func Subset(a, b *Box) bool {
	if a.empty {
		return true
	}
	for k, id := range b.ids {
		ad, bd := a.get(int(id)), *b.doms[k]
		if ad.Absent && !bd.Absent || !subset(ad.Vals, bd.Vals) {
			return false
		}
	}
	if extra := b.gone &^ a.gone; extra != 0 {
		for id := range layerBit {
			if layerBit[id]&extra != 0 && len(a.get(id).Vals) > 0 {
				if _, restricted := b.find(id); !restricted {
					return false
				}
			}
		}
	}
	for k, v := range b.atoms {
		av, ok := a.atoms[k]
		if !ok && !v && a.otherValueTrue(k) {
			continue // another value of the key holds in a, so this one is false
		}
		if !ok || av != v {
			return false
		}
	}
	return true
}

// Intersects reports whether two boxes share a frame.
func Intersects(a, b *Box) bool {
	if a.empty || b.empty {
		return false
	}
	// Absent layers never conflict (absence meets absence); restricted
	// fields are checked against the other box's domain.
	for k, id := range a.ids {
		x, y := *a.doms[k], b.get(int(id))
		if !(x.Absent && y.Absent) && !overlaps(x.Vals, y.Vals) {
			return false
		}
	}
	for k, id := range b.ids {
		if _, ok := a.find(int(id)); ok {
			continue
		}
		x, y := a.get(int(id)), *b.doms[k]
		if !(x.Absent && y.Absent) && !overlaps(x.Vals, y.Vals) {
			return false
		}
	}
	for k, v := range b.atoms {
		if av, ok := a.atoms[k]; ok && av != v || v && a.otherValueTrue(k) {
			return false
		}
	}
	return true
}

// Meet returns the intersection of two boxes.
func Meet(a, b *Box) *Box {
	c := a.Clone()
	c.empty = a.empty || b.empty
	for k, id := range b.ids {
		ad, bd := a.get(int(id)), *b.doms[k]
		c.put(int(id), Domain{Vals: intersect(ad.Vals, bd.Vals), Absent: ad.Absent && bd.Absent})
	}
	if extra := b.gone &^ a.gone; extra != 0 {
		// a's restricted fields in layers b knows absent become absent.
		for k, id := range a.ids {
			if layerBit[id]&extra != 0 {
				if _, inB := b.find(int(id)); !inB {
					c.put(int(id), Domain{Absent: a.doms[k].Absent})
				}
			}
		}
		c.gone |= b.gone
	}
	for k, v := range b.atoms {
		if old, ok := c.atoms[k]; ok && old != v || v && c.otherValueTrue(k) {
			c.empty = true
			continue
		}
		if c.atoms == nil {
			c.atoms = map[string]bool{}
		}
		c.atoms[k] = v
	}
	if !c.normalize() {
		c.empty = true
	}
	return c
}

// Join returns a box holding every frame of a and of b (per-field union:
// an over-approximation of their union). Atoms on which they disagree are
// dropped.
func Join(a, b *Box) *Box {
	if a.empty {
		return b.Clone()
	}
	if b.empty {
		return a.Clone()
	}
	c := &Box{gone: a.gone & b.gone}
	for _, id := range fieldsOf(a, b) {
		ad, bd := a.get(int(id)), b.get(int(id))
		c.put(int(id), Domain{Vals: union(ad.Vals, bd.Vals), Absent: ad.Absent || bd.Absent})
	}
	for k, v := range a.atoms {
		if bv, ok := b.atoms[k]; ok && bv == v {
			if c.atoms == nil {
				c.atoms = map[string]bool{}
			}
			c.atoms[k] = v
		}
	}
	return c
}

func union(a, b []pred.Range) []pred.Range {
	if subset(b, a) {
		return a
	}
	if subset(a, b) {
		return b
	}
	return pred.NormRanges(append(append([]pred.Range(nil), a...), b...))
}

// JoinAll is Join over many boxes, merging each field's ranges once.
func JoinAll(boxes []*Box) *Box {
	if len(boxes) == 1 {
		return boxes[0]
	}
	var live []*Box
	for _, b := range boxes {
		if !b.empty {
			live = append(live, b)
		}
	}
	if len(live) == 0 {
		return &Box{empty: true}
	}
	boxes = live
	c := &Box{gone: ^uint16(0)}
	for _, b := range boxes {
		c.gone &= b.gone
	}
	restricted := map[uint8]bool{}
	for _, b := range boxes {
		for _, id := range b.ids {
			restricted[id] = true
		}
	}
	for i := 0; i < pred.NumFields; i++ {
		if !restricted[uint8(i)] && c.gone&layerBit[i] == 0 {
			continue // unrestricted in some box: the universe
		}
		var all []pred.Range
		absent := false
		same := true
		first := boxes[0].get(i)
		for _, b := range boxes {
			d := b.get(i)
			absent = absent || d.Absent
			if same && !slices.Equal(d.Vals, first.Vals) {
				same = false
			}
		}
		if same {
			c.put(i, Domain{Vals: first.Vals, Absent: absent})
			continue
		}
		for _, b := range boxes {
			all = append(all, b.get(i).Vals...)
		}
		c.put(i, Domain{Vals: pred.NormRanges(all), Absent: absent})
	}
	for k, v := range boxes[0].atoms {
		agree := true
		for _, b := range boxes[1:] {
			if bv, ok := b.atoms[k]; !ok || bv != v {
				agree = false
				break
			}
		}
		if agree {
			if c.atoms == nil {
				c.atoms = map[string]bool{}
			}
			c.atoms[k] = v
		}
	}
	return c
}

// layerRule is a fact about how frames are decoded (pred.Layers): a field
// of the layer exists only when field takes one of vals (udp.* only for
// IPv4 datagrams of protocol 17 that are not fragments, and so on).
type layerRule struct {
	layer  string
	field  int
	vals   []pred.Range
	bit    uint16 // layerBits[layer], looked up once
	fields []int  // layerFields[layer]
}

var rules []layerRule

// layerFields lists the field IDs of each layer; layerBit gives each
// field its layer's bit in Box.gone.
var (
	layerFields = map[string][]int{}
	layerBits   = map[string]uint16{}
	layerBit    []uint16
)

func init() {
	layerBit = make([]uint16, pred.NumFields)
	for _, name := range pred.FieldNames() {
		f := pred.Fields[name]
		layerFields[f.Layer] = append(layerFields[f.Layer], f.ID)
	}
	// Every layer that exists only under a condition on other fields
	// (pred.Layers) gets a bit and a rule per condition.
	for _, l := range pred.Layers {
		conds := pred.LayerConds(l.Name)
		if len(conds) == 0 {
			continue
		}
		layerBits[l.Name] = 1 << uint(len(layerBits))
		for _, id := range layerFields[l.Name] {
			layerBit[id] = layerBits[l.Name]
		}
		for _, c := range conds {
			var vals []pred.Range
			for _, v := range c.Vals {
				vals = append(vals, pred.Range{Lo: v, Hi: v})
			}
			rules = append(rules, layerRule{l.Name, pred.Fields[c.Field].ID, vals, layerBits[l.Name], layerFields[l.Name]})
		}
	}
}

// normalize applies the decoding facts until nothing changes: a layer whose
// condition cannot hold has all its fields absent; a layer with a field
// that must be present forces its condition. It returns false when the box
// becomes empty.
func (b *Box) normalize() bool {
	for changed := true; changed; {
		changed = false
		for i := range rules {
			r := &rules[i]
			d := b.get(r.field)
			if !overlaps(d.Vals, r.vals) {
				if b.gone&r.bit == 0 {
					b.gone |= r.bit
					changed = true
				}
				for _, id := range r.fields {
					if k, ok := b.find(id); ok && len(b.doms[k].Vals) > 0 {
						if !b.doms[k].Absent {
							return false
						}
						b.doms[k] = absentOnly
						changed = true
					}
				}
				continue
			}
			if d.Absent || !subset(d.Vals, r.vals) {
				for _, id := range r.fields {
					if k, ok := b.find(id); ok && !b.doms[k].Absent {
						b.put(r.field, Domain{Vals: intersect(d.Vals, r.vals)})
						changed = true
						break
					}
				}
			}
		}
	}
	return !b.Empty()
}

// Minus returns a box of the frames of a that are not in b, when a box
// holds exactly those: when a lies within b on every field but one, that
// field loses b's values (and a within b entirely leaves nothing).
// Otherwise it returns a, which over-approximates the difference.
func Minus(a, b *Box) *Box {
	if a.empty || b.empty || len(b.atoms) > 0 || b.gone&^a.gone != 0 || !Intersects(a, b) {
		return a
	}
	diff := -1
	for _, id := range fieldsOf(a, b) {
		ad, bd := a.get(int(id)), b.get(int(id))
		if subset(ad.Vals, bd.Vals) && (!ad.Absent || bd.Absent) {
			continue
		}
		if diff >= 0 {
			return a
		}
		diff = int(id)
	}
	c := a.Clone()
	if diff < 0 {
		c.empty = true
		return c
	}
	ad, bd := a.get(diff), b.get(diff)
	c.put(diff, Domain{Vals: intersect(ad.Vals, complement(bd.Vals, maxOf[diff])), Absent: ad.Absent && !bd.Absent})
	if !c.normalize() {
		c.empty = true
	}
	return c
}
