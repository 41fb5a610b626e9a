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
	"sort"

	"github.com/dragonc/dragonc/internal/pred"
)

// Domain is what one field may be.
type Domain struct {
	Vals   []pred.Range // sorted, disjoint, non-adjacent
	Absent bool         // the field may be absent
}

// Box is a conjunction of per-field domains and atom values: a set of
// frames. The zero Box is not valid; use Universe.
type Box struct {
	dom   []Domain // indexed by field ID
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
func Universe() *Box {
	return &Box{dom: append([]Domain(nil), universe...)}
}

// Clone copies a box; interval slices are shared and never mutated.
func (b *Box) Clone() *Box {
	c := &Box{dom: append([]Domain(nil), b.dom...)}
	if len(b.atoms) > 0 {
		c.atoms = make(map[string]bool, len(b.atoms))
		for k, v := range b.atoms {
			c.atoms[k] = v
		}
	}
	return c
}

// Domain returns a field's domain.
func (b *Box) Domain(id int) Domain { return b.dom[id] }

// Empty reports whether the box holds no frame.
func (b *Box) Empty() bool {
	for _, d := range b.dom {
		if len(d.Vals) == 0 && !d.Absent {
			return true
		}
	}
	return false
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

func equal(a, b []pred.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// tri is a three-valued truth.
type tri int8

const (
	no tri = iota
	yes
	maybe
)

// eval decides a literal (negated if neg) on a box: yes when every frame of
// the box satisfies it, no when none does.
func (b *Box) evalLit(l lit, neg bool) tri {
	if l.opaque != "" {
		return b.evalAtom(l.opaque, neg)
	}
	d := b.dom[l.id]
	in := intersect(d.Vals, l.set)
	allIn := !d.Absent && equal(in, d.Vals)
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
		return maybe
	}
	if v != neg {
		return yes
	}
	return no
}

// assume restricts the box to frames satisfying the literal; false when
// that leaves none.
func (b *Box) assume(l lit, neg bool) bool {
	if l.opaque != "" {
		return b.assumeAtom(l.opaque, !neg)
	}
	d := b.dom[l.id]
	if neg {
		d = Domain{Vals: intersect(d.Vals, complement(l.set, maxOf[l.id])), Absent: d.Absent}
	} else {
		d = Domain{Vals: intersect(d.Vals, l.set), Absent: false}
	}
	b.dom[l.id] = d
	return len(d.Vals) > 0 || d.Absent
}

func (b *Box) assumeAtom(name string, v bool) bool {
	if old, ok := b.atoms[name]; ok {
		return old == v
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
		c.dom[0] = Domain{}
	}
	return c, exact
}

func (b *Box) restrict(it item) bool {
	switch e := it.e.(type) {
	case nil:
		return true
	case pred.Const:
		if bool(e) == it.neg {
			b.dom[0] = Domain{} // empty
		}
		return true
	case pred.Cmp:
		b.assume(literal(e), it.neg)
		return true
	case pred.Atom:
		if !b.assumeAtom(atomName(e), !it.neg) {
			b.dom[0] = Domain{}
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
	d := b.dom[id]
	if d.Absent || len(d.Vals) != 1 || d.Vals[0].Lo != d.Vals[0].Hi {
		return 0, false
	}
	return d.Vals[0].Lo, true
}

// Present reports whether the box requires a field to be present.
func (b *Box) Present(id int) bool { return !b.dom[id].Absent }

// Size returns how many values a field may take (saturating).
func (b *Box) Size(id int) uint64 {
	var n uint64
	for _, r := range b.dom[id].Vals {
		w := r.Hi - r.Lo + 1
		if w == 0 || n+w < n {
			return ^uint64(0)
		}
		n += w
	}
	return n
}

// Subset reports whether every frame of a is in b (atoms must agree).
func Subset(a, b *Box) bool {
	for i := range a.dom {
		if a.dom[i].Absent && !b.dom[i].Absent {
			return false
		}
		if !subset(a.dom[i].Vals, b.dom[i].Vals) {
			return false
		}
	}
	for k, v := range b.atoms {
		if av, ok := a.atoms[k]; !ok || av != v {
			return false
		}
	}
	return true
}

// Intersects reports whether two boxes share a frame.
func Intersects(a, b *Box) bool {
	for i := range a.dom {
		if !(a.dom[i].Absent && b.dom[i].Absent) && !overlaps(a.dom[i].Vals, b.dom[i].Vals) {
			return false
		}
	}
	for k, v := range b.atoms {
		if av, ok := a.atoms[k]; ok && av != v {
			return false
		}
	}
	return true
}

// Meet returns the intersection of two boxes.
func Meet(a, b *Box) *Box {
	c := a.Clone()
	for i := range c.dom {
		c.dom[i] = Domain{Vals: intersect(a.dom[i].Vals, b.dom[i].Vals), Absent: a.dom[i].Absent && b.dom[i].Absent}
	}
	for k, v := range b.atoms {
		if old, ok := c.atoms[k]; ok && old != v {
			c.dom[0] = Domain{}
			continue
		}
		if c.atoms == nil {
			c.atoms = map[string]bool{}
		}
		c.atoms[k] = v
	}
	if !c.normalize() {
		c.dom[0] = Domain{}
	}
	return c
}

// Join returns a box holding every frame of a and of b (per-field union:
// an over-approximation of their union). Atoms on which they disagree are
// dropped.
func Join(a, b *Box) *Box {
	c := &Box{dom: make([]Domain, len(a.dom))}
	for i := range c.dom {
		c.dom[i] = Domain{Vals: union(a.dom[i].Vals, b.dom[i].Vals), Absent: a.dom[i].Absent || b.dom[i].Absent}
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
	all := append(append([]pred.Range(nil), a...), b...)
	sortRanges(all)
	var out []pred.Range
	for _, r := range all {
		if n := len(out); n > 0 && (r.Lo <= out[n-1].Hi || out[n-1].Hi != ^uint64(0) && r.Lo == out[n-1].Hi+1) {
			if r.Hi > out[n-1].Hi {
				out[n-1].Hi = r.Hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func sortRanges(rs []pred.Range) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Lo < rs[j-1].Lo; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// JoinAll is Join over many boxes, merging each field's ranges once.
func JoinAll(boxes []*Box) *Box {
	if len(boxes) == 1 {
		return boxes[0]
	}
	c := &Box{dom: make([]Domain, len(boxes[0].dom))}
	for i := range c.dom {
		var all []pred.Range
		absent := false
		same := true
		for _, b := range boxes {
			absent = absent || b.dom[i].Absent
			if same && !equal(b.dom[i].Vals, boxes[0].dom[i].Vals) {
				same = false
			}
		}
		if same {
			c.dom[i] = Domain{Vals: boxes[0].dom[i].Vals, Absent: absent}
			continue
		}
		for _, b := range boxes {
			all = append(all, b.dom[i].Vals...)
		}
		sort.Slice(all, func(x, y int) bool { return all[x].Lo < all[y].Lo })
		var out []pred.Range
		for _, r := range all {
			if n := len(out); n > 0 && (r.Lo <= out[n-1].Hi || out[n-1].Hi != ^uint64(0) && r.Lo == out[n-1].Hi+1) {
				if r.Hi > out[n-1].Hi {
					out[n-1].Hi = r.Hi
				}
				continue
			}
			out = append(out, r)
		}
		c.dom[i] = Domain{Vals: out, Absent: absent}
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

// layerRule is a fact about how frames are decoded: a field of the layer
// exists only when field takes one of vals (internal/packet sets udp.* only
// for IPv4 datagrams of protocol 17 that are not fragments, and so on).
type layerRule struct {
	layer string
	field int
	vals  []pred.Range
}

var rules []layerRule

// layerFields lists the field IDs of each layer.
var layerFields = map[string][]int{}

func init() {
	for _, name := range pred.FieldNames() {
		f := pred.Fields[name]
		layerFields[f.Layer] = append(layerFields[f.Layer], f.ID)
	}
	one := func(v uint64) []pred.Range { return []pred.Range{{Lo: v, Hi: v}} }
	add := func(layer, field string, vals []pred.Range) {
		rules = append(rules, layerRule{layer, pred.Fields[field].ID, vals})
	}
	for _, l := range []string{"ip", "icmp", "udp", "tcp", "l4"} {
		add(l, "eth.type", one(0x0800))
	}
	add("arp", "eth.type", one(0x0806))
	add("omx", "eth.type", one(0x86DF))
	add("udp", "ip.proto", one(17))
	add("tcp", "ip.proto", one(6))
	add("icmp", "ip.proto", one(1))
	add("l4", "ip.proto", []pred.Range{{Lo: 6, Hi: 6}, {Lo: 17, Hi: 17}})
	for _, l := range []string{"icmp", "udp", "tcp", "l4"} {
		add(l, "ip.frag", one(0))
	}
}

// normalize applies the decoding facts until nothing changes: a layer whose
// condition cannot hold has all its fields absent; a layer with a field
// that must be present forces its condition. It returns false when the box
// becomes empty.
func (b *Box) normalize() bool {
	for changed := true; changed; {
		changed = false
		for _, r := range rules {
			d := b.dom[r.field]
			possible := overlaps(d.Vals, r.vals)
			for _, id := range layerFields[r.layer] {
				fd := b.dom[id]
				if !possible && len(fd.Vals) > 0 {
					if !fd.Absent {
						return false
					}
					b.dom[id] = Domain{Absent: true}
					changed = true
				}
				if possible && !fd.Absent && (d.Absent || !subset(d.Vals, r.vals)) {
					b.dom[r.field] = Domain{Vals: intersect(d.Vals, r.vals)}
					d = b.dom[r.field]
					changed = true
				}
			}
		}
	}
	return !b.Empty()
}
