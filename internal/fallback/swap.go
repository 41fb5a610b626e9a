package fallback

import (
	"fmt"
	"sync/atomic"
)

// A module generated for a stack whose endpoints change while it serves
// (gofallback's Options.Swappable) looks its endpoints up in swapped
// tables: a reload builds a new table and stores it whole, so that a
// frame is looked up in the old table or in the new one, never in half of
// each, and the receive loops never wait.

// swapped is a table a reload replaces.
type swapped struct{ p atomic.Pointer[hashed] }

// swappable are the module's swapped tables by name.
var swappable = map[string]*swapped{}

func newSwapped(name string, entries []entry) *swapped {
	s := &swapped{}
	s.p.Store(newHashed(entries))
	swappable[name] = s
	return s
}

func (s *swapped) find(k0, k1 uint64) Verdict { return s.p.Load().find(k0, k1) }

// Entry is one key of a swapped table and its verdict, as a reload gives
// it.
type Entry struct {
	K0, K1 uint64
	V      Verdict
}

// SetTable replaces the entries of the swapped table name. Frames looked
// up meanwhile see the old entries or the new ones, all of them.
func SetTable(name string, entries []Entry) error {
	s := swappable[name]
	if s == nil {
		return fmt.Errorf("no swapped table %s", name)
	}
	es := make([]entry, len(entries))
	for i, e := range entries {
		if e.V.Kind == missing {
			return fmt.Errorf("table %s: entry %d has no verdict", name, i)
		}
		es[i] = entry{e.K0, e.K1, e.V}
	}
	s.p.Store(newHashed(es))
	return nil
}

// PatchTable changes some entries of the swapped table name: the keys
// del lists go, then the entries of set are written (replacing an entry
// of the same key). The table is copied, changed and stored whole, as
// SetTable stores one, in time linear in its slots rather than in
// building it again; one that would be more than half full is built
// again.
func PatchTable(name string, set []Entry, del [][2]uint64) error {
	s := swappable[name]
	if s == nil {
		return fmt.Errorf("no swapped table %s", name)
	}
	for i, e := range set {
		if e.V.Kind == missing {
			return fmt.Errorf("table %s: entry %d has no verdict", name, i)
		}
	}
	cur := s.p.Load()
	n := 0
	for _, e := range cur.slots {
		if e.v.Kind != missing {
			n++
		}
	}
	if 2*(n+len(set)) > len(cur.slots) {
		gone := make(map[[2]uint64]bool, len(del)+len(set))
		for _, k := range del {
			gone[k] = true
		}
		for _, e := range set {
			gone[[2]uint64{e.K0, e.K1}] = true
		}
		es := make([]entry, 0, n+len(set))
		for _, e := range cur.slots {
			if e.v.Kind != missing && !gone[[2]uint64{e.k0, e.k1}] {
				es = append(es, e)
			}
		}
		for _, e := range set {
			es = append(es, entry{e.K0, e.K1, e.V})
		}
		s.p.Store(newHashed(es))
		return nil
	}
	h := &hashed{shift: cur.shift, slots: append([]entry(nil), cur.slots...)}
	for _, k := range del {
		h.remove(k[0], k[1])
	}
	for _, e := range set {
		h.put(entry{e.K0, e.K1, e.V})
	}
	s.p.Store(h)
	return nil
}

// put writes e into its key's slot, or the first free one after its
// home (linear probing).
func (h *hashed) put(e entry) {
	mask := uint64(len(h.slots) - 1)
	for i := h.home(e.k0, e.k1); ; i = (i + 1) & mask {
		s := &h.slots[i]
		if s.v.Kind == missing || s.k0 == e.k0 && s.k1 == e.k1 {
			*s = e
			return
		}
	}
}

// remove takes out the key's entry and moves back the entries after it
// that probed past its slot (backward-shift deletion), so that every key
// is still found before the first free slot.
func (h *hashed) remove(k0, k1 uint64) {
	mask := uint64(len(h.slots) - 1)
	i := h.home(k0, k1)
	for ; ; i = (i + 1) & mask {
		s := &h.slots[i]
		if s.v.Kind == missing {
			return
		}
		if s.k0 == k0 && s.k1 == k1 {
			break
		}
	}
	for j := i; ; {
		j = (j + 1) & mask
		s := h.slots[j]
		if s.v.Kind == missing {
			break
		}
		// s stays unless its home is cyclically outside (i, j].
		if k := h.home(s.k0, s.k1); (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		h.slots[i] = s
		i = j
	}
	h.slots[i] = entry{v: Verdict{Kind: missing}}
}
