package dataplane

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync/atomic"
	"time"
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

// Update is a reload's message to a running data plane, as a
// difference: the endpoints new to the server or whose application
// changed (a new one is numbered after the server's last, in this order),
// and for each swapped table of the generated code that changed, its
// entries added or changed and its keys removed, or all its entries
// (Full: the first change of a table, whose entries the server does not
// know yet). A Deliver entry's Index is the server's number of the
// endpoint.
type Update struct {
	Seq int `json:"seq"`
	// Handover asks the data plane to stop at a frame boundary and hand
	// its sockets over (Server.Handover); the answer is
	// "handover SEQ JSON" with the Handover, or "failed SEQ: REASON".
	Handover bool `json:"handover,omitempty"`
	// Drain applies the update once the frames the loops' rings hold
	// when it arrives are served (Server.drain): a change that takes
	// entries out of a queue's tables after the eBPF stage stopped
	// steering their frames there does not find one of those frames
	// still on the queue's ring.
	Drain     bool             `json:"drain,omitempty"`
	Endpoints []UpdateEndpoint `json:"endpoints,omitempty"`
	Tables    []UpdateTable    `json:"tables,omitempty"`
}

// UpdateEndpoint is an endpoint of an Update: its name, its built-in
// application (a name of Apps; "" for a kernel's endpoint, which no
// handler serves) and whether it is an Open-MX endpoint.
type UpdateEndpoint struct {
	Name   string `json:"name"`
	App    string `json:"app,omitempty"`
	OpenMX bool   `json:"omx,omitempty"`
}

// UpdateTable is the change of one swapped table.
type UpdateTable struct {
	Name   string       `json:"name"`
	Full   bool         `json:"full,omitempty"`
	Set    []TableEntry `json:"set,omitempty"`
	Delete []TableKey   `json:"delete,omitempty"`
}

// TableKey is the key of a swapped table's entry.
type TableKey struct {
	K0 uint64 `json:"k0"`
	K1 uint64 `json:"k1,omitempty"`
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

// PatchTable changes entries of a swapped table of the generated code
// (its package's PatchTable): the keys of del go, then set's entries are
// written.
type PatchTable func(name string, set []TableEntry, del []TableKey) error

// Apply makes the server's endpoints and tables what u says: the
// endpoints first (numbers for the new ones, their counters, their
// handlers), then each table, so that no table names an endpoint the
// loops do not know yet. An update it refuses changes nothing before the
// first table is set.
func (s *Server) Apply(u *Update, set SetTable) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if u.Drain {
		s.drain(drainMax)
	}
	cur := s.st.eps.Load()
	names, udp, omx, handlers, index := cur.names, cur.udp, cur.omx, cur.handlers, cur.index
	if len(u.Endpoints) > 0 {
		// A new set of endpoints, which the loops load whole.
		names = append([]string(nil), cur.names...)
		udp = append([]bool(nil), cur.udp...)
		omx = append([]bool(nil), cur.omx...)
		handlers = append([]Handler(nil), cur.handlers...)
		index = maps.Clone(cur.index)
	}
	for _, e := range u.Endpoints {
		var h Handler
		if e.App != "" {
			if h = Apps[e.App]; h == nil {
				return fmt.Errorf("endpoint %s: no built-in application %q", e.Name, e.App)
			}
		}
		n, ok := index[e.Name]
		if !ok {
			n = len(names)
			index[e.Name] = n
			names, udp, omx, handlers = append(names, e.Name), append(udp, false), append(omx, false), append(handlers, nil)
		}
		udp[n], omx[n], handlers[n] = h != nil && !e.OpenMX, h != nil && e.OpenMX, h
	}
	tables := make([]map[TableKey]TableEntry, len(u.Tables))
	patch := s.st.Patch
	for t, tab := range u.Tables {
		if !tab.Full && s.tables[tab.Name] == nil {
			return fmt.Errorf("table %s: a change of a table whose entries this server was never given", tab.Name)
		}
		for i, e := range tab.Set {
			if e.Kind == Deliver && int(e.Index) >= len(names) {
				return fmt.Errorf("table %s: entry %d delivers to endpoint %d of %d", tab.Name, i, e.Index, len(names))
			}
		}
		if !tab.Full && patch != nil {
			continue // patched in place below
		}
		m := map[TableKey]TableEntry{}
		if !tab.Full {
			m = maps.Clone(s.tables[tab.Name])
		}
		for _, k := range tab.Delete {
			delete(m, k)
		}
		for _, e := range tab.Set {
			m[TableKey{e.K0, e.K1}] = e
		}
		tables[t] = m
	}
	if len(u.Endpoints) > 0 {
		for _, l := range s.queues {
			l.c.deliver.grow(len(names))
		}
		s.st.eps.Store(&endpointSet{names: names, udp: udp, omx: omx, handlers: handlers, index: index})
	}
	if s.tables == nil {
		s.tables = map[string]map[TableKey]TableEntry{}
	}
	for t, tab := range u.Tables {
		if tables[t] == nil {
			// A change of a table given before: only what changes.
			if err := patch(tab.Name, tab.Set, tab.Delete); err != nil {
				return err
			}
			m := s.tables[tab.Name]
			for _, k := range tab.Delete {
				delete(m, k)
			}
			for _, e := range tab.Set {
				m[TableKey{e.K0, e.K1}] = e
			}
			continue
		}
		es := make([]TableEntry, 0, len(tables[t]))
		for _, e := range tables[t] {
			es = append(es, e)
		}
		if err := set(tab.Name, es); err != nil {
			return err
		}
		s.tables[tab.Name] = tables[t]
	}
	return nil
}

// drainMax bounds a drain: a loop serves a ring's worth (2,048 frames)
// in a few milliseconds.
const drainMax = 100 * time.Millisecond

// drain returns once each loop has found its rings empty since drain was
// called, or sleeps with nothing on them to read, so that every frame
// they held when it was called is served; or after d.
func (s *Server) drain(d time.Duration) {
	seen := make([]uint64, len(s.queues))
	for i, l := range s.queues {
		seen[i] = l.empty.Load()
	}
	deadline := time.Now().Add(d)
	for i, l := range s.queues {
		for l.empty.Load() == seen[i] && time.Now().Before(deadline) {
			if l.asleep.Load() && !readable(l.sock.fds()) {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// control reads a control line of the parent (an Update as JSON) and
// applies it; the answer is "applied SEQ" or "failed SEQ: REASON" (or,
// to a handover, "handover SEQ JSON").
func (s *Server) control(line []byte, set SetTable) string {
	var u Update
	if err := json.Unmarshal(line, &u); err != nil {
		return fmt.Sprintf("failed %d: the update does not read: %v", u.Seq, err)
	}
	if u.Handover {
		h, err := s.Handover()
		if err != nil {
			return fmt.Sprintf("failed %d: %v", u.Seq, err)
		}
		b, err := json.Marshal(h)
		if err != nil {
			return fmt.Sprintf("failed %d: %v", u.Seq, err)
		}
		return fmt.Sprintf("handover %d %s", u.Seq, b)
	}
	if set == nil {
		return fmt.Sprintf("failed %d: this program's generated code has no swapped tables", u.Seq)
	}
	if err := s.Apply(&u, set); err != nil {
		return fmt.Sprintf("failed %d: %v", u.Seq, err)
	}
	return fmt.Sprintf("applied %d", u.Seq)
}
