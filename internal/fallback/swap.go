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
