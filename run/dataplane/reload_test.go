package dataplane

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// An Update numbers new endpoints after the old ones and keeps every
// number and counter; a table's first change carries all its entries,
// later ones only what changed; an update with an unknown application,
// or a change of a table never given, is refused whole.
func TestApply(t *testing.T) {
	st, err := Wire(Code{Process: func(int, []byte) Verdict { return Verdict{} }, Endpoints: []string{"a", "b"}},
		Chains{}, []Handler{Echo, Discard}, Host{})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{st: st}
	st.eps.Store(newEndpointSet(st.Endpoints, st.UDP, st.OMX, st.Handlers))
	for _, q := range []int{0, 1} {
		l := &queueLoop{q: Queue{ID: q}}
		l.c.deliver.grow(2)
		s.queues = append(s.queues, l)
	}
	s.queues[0].c.deliver.at(0).Add(5) // a was delivered to
	got := map[string][]TableEntry{}
	set := func(name string, es []TableEntry) error {
		slices.SortFunc(es, func(x, y TableEntry) int { return int(x.K0) - int(y.K0) })
		got[name] = es
		return nil
	}

	u := &Update{Seq: 1, Endpoints: []UpdateEndpoint{{Name: "b", App: "echo"}, {Name: "c", App: "discard"}},
		Tables: []UpdateTable{{Name: "table0", Full: true, Set: []TableEntry{{K0: 7, Kind: Deliver, Index: 1}, {K0: 9, Kind: Deliver, Index: 2}, {K0: 11, Kind: Sink, Index: 1}}}}}
	if answer := s.control(mustJSON(t, u), set); answer != "applied 1" {
		t.Fatalf("control: %q", answer)
	}
	eps := st.eps.Load()
	if !slices.Equal(eps.names, []string{"a", "b", "c"}) || !eps.udp[1] || !eps.udp[2] || eps.handlers[2] == nil {
		t.Errorf("endpoints after the update: %+v", eps)
	}
	for _, l := range s.queues {
		if l.c.deliver.at(2) == nil {
			t.Errorf("queue %d has no counter for the new endpoint", l.q.ID)
		}
	}
	if n := s.queues[0].c.deliver.at(0).Load(); n != 5 {
		t.Errorf("a's counter after the update: %d, want 5", n)
	}
	if r := s.Snapshot(false); len(r.Queues) != 2 || !slices.Contains(r.Queues[0].Outcomes, Outcome{"deliver a", 5}) {
		t.Errorf("the report after the update: %+v", r)
	}

	// A difference: 9 goes, 13 comes, 7 stays.
	u = &Update{Seq: 2, Endpoints: []UpdateEndpoint{{Name: "d", App: "echo"}},
		Tables: []UpdateTable{{Name: "table0", Set: []TableEntry{{K0: 13, Kind: Deliver, Index: 3}}, Delete: []TableKey{{K0: 9}}}}}
	if answer := s.control(mustJSON(t, u), set); answer != "applied 2" {
		t.Fatalf("control: %q", answer)
	}
	want := []TableEntry{{K0: 7, Kind: Deliver, Index: 1}, {K0: 11, Kind: Sink, Index: 1}, {K0: 13, Kind: Deliver, Index: 3}}
	if !slices.Equal(got["table0"], want) {
		t.Errorf("table0 after the difference: %+v, want %+v", got["table0"], want)
	}

	got = map[string][]TableEntry{}
	for _, bad := range []struct {
		u    *Update
		want string
	}{
		{&Update{Seq: 3, Endpoints: []UpdateEndpoint{{Name: "e", App: "nosuch"}}, Tables: u.Tables}, "failed 3: endpoint e: no built-in application"},
		{&Update{Seq: 4, Tables: []UpdateTable{{Name: "table1", Delete: []TableKey{{K0: 1}}}}}, "failed 4: table table1: a change of a table whose entries"},
		{&Update{Seq: 5, Tables: []UpdateTable{{Name: "table0", Set: []TableEntry{{K0: 1, Kind: Deliver, Index: 9}}}}}, "failed 5: table table0: entry 0 delivers to endpoint 9 of 4"},
	} {
		if answer := s.control(mustJSON(t, bad.u), set); !strings.HasPrefix(answer, bad.want) || len(got) > 0 {
			t.Errorf("update %d: %q, tables set %v; want %q", bad.u.Seq, answer, got, bad.want)
		}
	}
	if eps := st.eps.Load(); len(eps.names) != 4 {
		t.Errorf("a refused update changed the endpoints: %v", eps.names)
	}
	if answer := s.control([]byte("{"), set); !strings.HasPrefix(answer, "failed 0: the update does not read") {
		t.Errorf("a broken line: %q", answer)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A change of a table given before goes to Patch, when the program has
// one: only the entries that change, and the server's copy follows.
func TestApplyPatch(t *testing.T) {
	st, err := Wire(Code{Process: func(int, []byte) Verdict { return Verdict{} }, Endpoints: []string{"a", "b"}},
		Chains{}, []Handler{Echo, Discard}, Host{})
	if err != nil {
		t.Fatal(err)
	}
	var sets, patches []string
	st.Patch = func(name string, set []TableEntry, del []TableKey) error {
		patches = append(patches, fmt.Sprint(name, " ", set, del))
		return nil
	}
	s := &Server{st: st}
	st.eps.Store(newEndpointSet(st.Endpoints, st.UDP, st.OMX, st.Handlers))
	set := func(name string, es []TableEntry) error {
		sets = append(sets, fmt.Sprint(name, " ", len(es)))
		return nil
	}
	u := &Update{Seq: 1, Tables: []UpdateTable{{Name: "table0", Full: true, Set: []TableEntry{{K0: 7, Kind: Deliver, Index: 0}, {K0: 9, Kind: Deliver, Index: 1}}}}}
	if answer := s.control(mustJSON(t, u), set); answer != "applied 1" {
		t.Fatalf("control: %q", answer)
	}
	u = &Update{Seq: 2, Tables: []UpdateTable{{Name: "table0", Set: []TableEntry{{K0: 8, Kind: Deliver, Index: 1}}, Delete: []TableKey{{K0: 9}}}}}
	if answer := s.control(mustJSON(t, u), set); answer != "applied 2" {
		t.Fatalf("control: %q", answer)
	}
	if fmt.Sprint(sets) != "[table0 2]" || fmt.Sprint(patches) != "[table0 [{8 0 1 1}] [{9 0}]]" {
		t.Errorf("set %v, patched %v", sets, patches)
	}
	if _, ok := s.tables["table0"][TableKey{K0: 9}]; ok || len(s.tables["table0"]) != 2 {
		t.Errorf("the server's copy of table0 is %v", s.tables["table0"])
	}
	bad := &Update{Seq: 3, Tables: []UpdateTable{{Name: "table0", Set: []TableEntry{{K0: 5, Kind: Deliver, Index: 9}}}}}
	if answer := s.control(mustJSON(t, bad), set); !strings.HasPrefix(answer, "failed 3") || len(patches) != 1 {
		t.Errorf("an entry of no endpoint: %q, patched %v", answer, patches)
	}
}
