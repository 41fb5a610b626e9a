package embed

import (
	"slices"

	"github.com/dragonc/dragonc/costmodel"
)

// manyOverlaps is how many overlapping endpoints make an endpoint's
// shares worth an overlapIndex: a listener on the port of many connected
// flows, whose shares depend on every flow's entry.
const manyOverlaps = 32

// overlapIndex keeps, for an endpoint whose packets overlap many others'
// (e.over), what shares works out from them, so that a change of one of
// them updates it in O(1) instead of walking them all. shares walks the
// entries of the endpoint and of those it overlaps in the NIC's order
// (candKey) and collects the queue of each entry that takes a part of
// its packets until the first that takes them all; the index keeps that
// first one (star) and how many entries of each queue come before it.
// It serves dragonc's search (not Dragonet's first match or one
// priority, nor a search that places endpoints one by one); set keeps it
// up to date, and anything else that changes the endpoint, its entry or
// its overlaps drops it (state.forget), to be built again when next
// needed.
type overlapIndex struct {
	pos     map[int]int // overlapping endpoint -> its place in over
	count   []int       // per queue index: entries before star that take a part
	total   int
	hasStar bool
	star    candKey
	starJ   int // the endpoint whose entry star is
	starQ   int
}

// candKey orders entries as shares tries them: by the table's place in
// the NIC, then higher priority first, then declaration order.
type candKey struct{ order, prio, seq int }

func (a candKey) less(b candKey) bool {
	if a.order != b.order {
		return a.order < b.order
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return a.seq < b.seq
}

// indexed reports whether endpoint i's shares come from an overlapIndex.
func (s *state) indexed(i int) bool {
	return len(s.p.eps[i].over) > manyOverlaps && s.placed == nil && !s.firstMatch && !s.dragonetPrio
}

// key is endpoint j's entry c as shares orders it.
func (s *state) key(j int, c choice) candKey {
	return candKey{c.t.order, s.p.eps[j].prio, j}
}

// index returns endpoint i's overlapIndex, built from scratch when it was
// dropped.
func (s *state) index(i int) *overlapIndex {
	e := s.p.eps[i]
	if x := s.ovx[e]; x != nil {
		return x
	}
	x := &overlapIndex{pos: make(map[int]int, len(e.over)), count: make([]int, len(s.p.queues))}
	for k, j := range e.over {
		x.pos[j] = k
	}
	// The first entry that takes all of i's packets.
	for k := -1; k < len(e.over); k++ {
		j := i
		if k >= 0 {
			j = e.over[k]
		}
		c := s.choice[j]
		if c.t == nil || s.p.relation(i, k, j, c.t) != 2 {
			continue
		}
		if key := s.key(j, c); !x.hasStar || key.less(x.star) {
			x.hasStar, x.star, x.starJ, x.starQ = true, key, j, c.q
		}
	}
	for k := -1; k < len(e.over); k++ {
		j := i
		if k >= 0 {
			j = e.over[k]
		}
		if c := s.choice[j]; c.t != nil && s.p.relation(i, k, j, c.t) == 1 && x.before(s.key(j, c)) {
			x.count[c.q]++
			x.total++
		}
	}
	if s.ovx == nil {
		s.ovx = map[*endpoint]*overlapIndex{}
	}
	s.ovx[e] = x
	return x
}

// before reports whether an entry of key comes before star.
func (x *overlapIndex) before(key candKey) bool { return !x.hasStar || key.less(x.star) }

// moved updates endpoint i's index, if it has one, for endpoint j's
// entry (i's own, or an overlapping endpoint's) going from old to c. An
// entry that takes all of i's packets, before or after, drops the index,
// unless it only changed queue in its table: then its place in the NIC's
// order is the same, and so are the entries before it.
func (s *state) moved(i, j int, old, c choice) {
	x := s.ovx[s.p.eps[i]]
	if x == nil {
		return
	}
	k := -1 // i's own entry
	if j != i {
		var ok bool
		if k, ok = x.pos[j]; !ok {
			s.forget(i)
			return
		}
	}
	var relOld, relNew int8
	if old.t != nil {
		relOld = s.p.relation(i, k, j, old.t)
	}
	if c.t != nil {
		relNew = s.p.relation(i, k, j, c.t)
	}
	if relOld == 2 && relNew == 2 && old.t == c.t {
		if x.starJ == j {
			x.starQ = c.q
		}
		return // after the star, or the star itself on another queue
	}
	if relOld == 2 || relNew == 2 {
		s.forget(i)
		return
	}
	if relOld == 1 && x.before(s.key(j, old)) {
		x.count[old.q]--
		x.total--
	}
	if relNew == 1 && x.before(s.key(j, c)) {
		x.count[c.q]++
		x.total++
	}
}

// forget drops endpoint i's index.
func (s *state) forget(i int) {
	if s.ovx != nil {
		delete(s.ovx, s.p.eps[i])
	}
}

// indexedShares is shares for an endpoint with an index: the same
// shares, from the index.
func (s *state) indexedShares(i int) []costmodel.Share {
	x := s.index(i)
	out := s.scratch[:0]
	if x.hasStar && x.total == 0 {
		s.scratch = append(out, costmodel.Share{Queue: x.starQ, Frac: 1, Exact: x.starJ == i})
		return s.scratch
	}
	on := s.qscratch[:0]
	for q, n := range x.count {
		if n > 0 {
			on = append(on, q)
		}
	}
	if x.hasStar {
		if x.count[x.starQ] == 0 {
			on = append(on, x.starQ)
		}
	} else {
		for _, q := range s.fallback(i) {
			if x.count[q] == 0 {
				on = append(on, q)
			}
		}
	}
	slices.Sort(on)
	for _, q := range on {
		out = append(out, costmodel.Share{Queue: q, Frac: 1 / float64(len(on))})
	}
	s.qscratch = on[:0]
	s.scratch = out
	return out
}
