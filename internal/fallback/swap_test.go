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
