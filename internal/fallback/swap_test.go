package fallback

import (
	"sync"
	"testing"
)

// A swapped table serves its first entries until SetTable replaces them
// all at once; an entry both tables have is never missing to a lookup
// racing the swaps.
func TestSwapped(t *testing.T) {
	tab := newSwapped("test", []entry{{7, 0, Verdict{Deliver, 0}}, {8, 0, Verdict{Deliver, 1}}})
	if v := tab.find(7, 0); v != (Verdict{Deliver, 0}) {
		t.Fatalf("find 7: %v", v)
	}
	if v := tab.find(9, 0); v.Kind != missing {
		t.Fatalf("find 9 before the swap: %v", v)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	missed := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if tab.find(7, 0) != (Verdict{Deliver, 0}) {
				missed++
			}
		}
	}()
	for i := range 1000 {
		es := []Entry{{7, 0, Verdict{Deliver, 0}}, {8, 0, Verdict{Deliver, 1}}}
		if i%2 == 0 {
			es[1] = Entry{9, 0, Verdict{Deliver, 2}}
		}
		if err := SetTable("test", es); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if missed > 0 {
		t.Errorf("the unchanged entry was missing %d times during the swaps", missed)
	}
	if v := tab.find(8, 0); v != (Verdict{Deliver, 1}) {
		t.Errorf("find 8 after the swaps: %v", v)
	}
	if v := tab.find(9, 0); v.Kind != missing {
		t.Errorf("find 9 after the last swap: %v", v)
	}
	if err := SetTable("nosuch", nil); err == nil {
		t.Error("SetTable of no table: no error")
	}
	if err := SetTable("test", []Entry{{1, 0, Verdict{Kind: missing}}}); err == nil {
		t.Error("an entry without a verdict: no error")
	}
}

// PatchTable leaves a table that finds what SetTable's would: random
// keys, many of them in one neighbourhood of slots, put and removed.
func TestPatchTable(t *testing.T) {
	tab := newSwapped("patch", nil)
	want := map[[2]uint64]uint32{}
	seed := uint64(1)
	next := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 33 }
	for round := range 3000 {
		var set []Entry
		var del [][2]uint64
		for range 3 {
			k := [2]uint64{next() % 400, next() % 2}
			if next()%3 == 0 {
				del = append(del, k)
				delete(want, k)
			} else {
				v := uint32(round)
				set = append(set, Entry{k[0], k[1], Verdict{Deliver, v}})
				want[k] = v
			}
		}
		// A key both set and removed is set: PatchTable removes first.
		for _, e := range set {
			want[[2]uint64{e.K0, e.K1}] = e.V.Index
		}
		if err := PatchTable("patch", set, del); err != nil {
			t.Fatal(err)
		}
		for k0 := range uint64(400) {
			for k1 := range uint64(2) {
				v := tab.find(k0, k1)
				w, ok := want[[2]uint64{k0, k1}]
				if ok != (v.Kind != missing) || ok && v.Index != w {
					t.Fatalf("round %d: key %d/%d finds %v, want %v (%v)", round, k0, k1, v, w, ok)
				}
			}
		}
	}
	if err := PatchTable("nosuch", nil, nil); err == nil {
		t.Error("PatchTable of no table: no error")
	}
}
