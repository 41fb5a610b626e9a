package dataplane

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// An Update numbers new endpoints after the old ones, keeps a removed
// endpoint's number and counters, rewrites the tables' deliveries to the
// server's numbers, and is refused whole when it names an unknown
// application.
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
	var got map[string][]TableEntry
	set := func(name string, es []TableEntry) error { got[name] = es; return nil }

	got = map[string][]TableEntry{}
	u := &Update{Seq: 1, Endpoints: []UpdateEndpoint{{Name: "b", App: "echo"}, {Name: "c", App: "discard"}},
		Tables: []UpdateTable{{Name: "table0", Entries: []TableEntry{{K0: 7, Kind: Deliver, Index: 0}, {K0: 9, Kind: Deliver, Index: 1}, {K0: 11, Kind: Sink, Index: 1}}}}}
	if answer := s.control(mustJSON(t, u), set); answer != "applied 1" {
		t.Fatalf("control: %q", answer)
	}
	want := []TableEntry{{K0: 7, Kind: Deliver, Index: 1}, {K0: 9, Kind: Deliver, Index: 2}, {K0: 11, Kind: Sink, Index: 1}}
	if !slices.Equal(got["table0"], want) {
		t.Errorf("table0: %+v, want %+v", got["table0"], want)
	}
	eps := st.eps.Load()
	if !slices.Equal(eps.names, []string{"a", "b", "c"}) || eps.handlers[1] == nil || !eps.udp[1] || !eps.udp[2] {
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

	got = map[string][]TableEntry{}
	bad := &Update{Seq: 2, Endpoints: []UpdateEndpoint{{Name: "d", App: "nosuch"}}, Tables: u.Tables}
	if answer := s.control(mustJSON(t, bad), set); !strings.HasPrefix(answer, "failed 2: endpoint d: no built-in application") || len(got) > 0 {
		t.Errorf("an unknown application: %q, tables set %v", answer, got)
	}
	if eps := st.eps.Load(); len(eps.names) != 3 {
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
