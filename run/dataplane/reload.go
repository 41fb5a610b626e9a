package dataplane

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// A running data plane takes new endpoints while it serves (dragonc
// reload): endpoints are numbered for the life of the server, a new one
// gets the next number, and one the new plan no longer has keeps its
// number (and its counters), though no table leads to it any more. So a
// frame that was looked up in the old tables still finds its endpoint's
// handler, and none of the counters a report has shown goes back.

// endpointSet is what the loops read of the endpoints: one pointer,
// swapped whole.
type endpointSet struct {
	names    []string
	udp, omx []bool
	handlers []Handler
	index    map[string]int
}

func newEndpointSet(names []string, udp, omx []bool, handlers []Handler) *endpointSet {
	e := &endpointSet{names: names, udp: udp, omx: omx, handlers: handlers, index: map[string]int{}}
	for i, n := range names {
		e.index[n] = i
	}
	return e
}

// counterChunk holds the delivery counters of 64 endpoints; a queue's
// chunks grow with its endpoints and are never copied, so that no count
// made during a reload is lost.
type counterChunk [64]atomic.Uint64

// deliverCounters are a queue's delivery counters by endpoint number.
type deliverCounters struct {
	p atomic.Pointer[[]*counterChunk]
}

func (d *deliverCounters) grow(n int) {
	old := d.p.Load()
	var chunks []*counterChunk
	if old != nil {
		chunks = *old
	}
	if len(chunks)*64 >= n {
		return
	}
	chunks = append([]*counterChunk(nil), chunks...)
	for len(chunks)*64 < n {
		chunks = append(chunks, new(counterChunk))
	}
	d.p.Store(&chunks)
}

// at is the counter of endpoint i, or nil beyond the counters.
func (d *deliverCounters) at(i uint32) *atomic.Uint64 {
	c := *d.p.Load()
	if int(i>>6) >= len(c) {
		return nil
	}
	return &c[i>>6][i&63]
}

// Update is a reload's message to a running data plane: the new plan's
// endpoints, in its order, and the generated code's swapped tables whose
// entries changed (TableEntry.Index of a Deliver is the endpoint's
// position in Endpoints).
type Update struct {
	Seq       int              `json:"seq"`
	Endpoints []UpdateEndpoint `json:"endpoints"`
	Tables    []UpdateTable    `json:"tables"`
}

// UpdateEndpoint is an endpoint of an Update: its name, its built-in
// application (a name of Apps; "" for a kernel's endpoint, which no
// handler serves) and whether it is an Open-MX endpoint.
type UpdateEndpoint struct {
	Name   string `json:"name"`
	App    string `json:"app,omitempty"`
	OpenMX bool   `json:"omx,omitempty"`
}

// UpdateTable is the new content of one swapped table.
type UpdateTable struct {
	Name    string       `json:"name"`
	Entries []TableEntry `json:"entries"`
}

// TableEntry is a key of a swapped table and its verdict.
type TableEntry struct {
	K0    uint64 `json:"k0"`
	K1    uint64 `json:"k1,omitempty"`
	Kind  uint8  `json:"kind"`
	Index uint32 `json:"index"`
}

// SetTable replaces a swapped table of the generated code (its package's
// SetTable, the indexes of its Deliver entries the server's endpoint
// numbers).
type SetTable func(name string, entries []TableEntry) error

// reloadMu serialises Apply.
var reloadMu sync.Mutex

// Apply makes u the server's endpoints and tables: the endpoints first
// (numbers for the new ones, their counters, their handlers), then each
// table, so that no table names an endpoint the loops do not know yet.
func (s *Server) Apply(u *Update, set SetTable) error {
	reloadMu.Lock()
	defer reloadMu.Unlock()
	cur := s.st.eps.Load()
	names := append([]string(nil), cur.names...)
	udp := append([]bool(nil), cur.udp...)
	omx := append([]bool(nil), cur.omx...)
	handlers := append([]Handler(nil), cur.handlers...)
	index := make([]uint32, len(u.Endpoints)) // Update's position → server's number
	seen := map[string]bool{}
	for i, e := range u.Endpoints {
		if seen[e.Name] {
			return fmt.Errorf("endpoint %s twice", e.Name)
		}
		seen[e.Name] = true
		var h Handler
		if e.App != "" {
			if h = Apps[e.App]; h == nil {
				return fmt.Errorf("endpoint %s: no built-in application %q", e.Name, e.App)
			}
		}
		n, ok := cur.index[e.Name]
		if !ok {
			n = len(names)
			names, udp, omx, handlers = append(names, e.Name), append(udp, false), append(omx, false), append(handlers, nil)
		}
		udp[n], omx[n], handlers[n] = h != nil && !e.OpenMX, h != nil && e.OpenMX, h
		index[i] = uint32(n)
	}
	tables := make([][]TableEntry, len(u.Tables))
	for t, tab := range u.Tables {
		es := make([]TableEntry, len(tab.Entries))
		for i, e := range tab.Entries {
			if e.Kind == Deliver {
				if int(e.Index) >= len(index) {
					return fmt.Errorf("table %s: entry %d delivers to endpoint %d of %d", tab.Name, i, e.Index, len(index))
				}
				e.Index = index[e.Index]
			}
			es[i] = e
		}
		tables[t] = es
	}
	for _, l := range s.queues {
		l.c.deliver.grow(len(names))
	}
	s.st.eps.Store(newEndpointSet(names, udp, omx, handlers))
	for t, tab := range u.Tables {
		if err := set(tab.Name, tables[t]); err != nil {
			return err
		}
	}
	return nil
}

// control reads a control line of the parent (an Update as JSON) and
// applies it; the answer is "applied SEQ" or "failed SEQ: REASON".
func (s *Server) control(line []byte, set SetTable) string {
	var u Update
	if err := json.Unmarshal(line, &u); err != nil {
		return fmt.Sprintf("failed %d: the update does not read: %v", u.Seq, err)
	}
	if set == nil {
		return fmt.Sprintf("failed %d: this program's generated code has no swapped tables", u.Seq)
	}
	if err := s.Apply(&u, set); err != nil {
		return fmt.Sprintf("failed %d: %v", u.Seq, err)
	}
	return fmt.Sprintf("applied %d", u.Seq)
}
