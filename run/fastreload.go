package run

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dragonc/dragonc/backends/gofallback"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/run/dataplane"
)

// A reload that only adds and removes UDP listeners of kinds the served
// code already looks up in its tables takes a short path (issue 39's
// goal of 50 ms at 10,000 endpoints): the serving keeps an
// embed.Session of the plan it serves, the change is one Session change
// (well under a millisecond), and its Delta is applied directly: the
// rules it inserts and deletes go to the eBPF stage's maps, and each
// added endpoint gets, in the table of every queue that receives it, an
// entry packed like that of an endpoint of the same kind already there.
// Nothing derives the LPG, embeds the stack or generates code. A change
// the short path cannot vouch for (a new kind of endpoint, a connected
// flow, a queue without such a table, a table left empty, two endpoints
// on one port, a rule of a new shape, a hardware plan, kernel sockets or
// VI streams) takes the full path: planning, code generation, and a
// swap or restart.
//
// The plan the rest of the run reads (sv.r: status, the load meter's
// prediction, the rebalancer, the next full reload) follows afterwards:
// once no change came for settleAfter, the session's Result is made in
// the background (the time of an embedding), checked against the code
// the plan generates, and served as sv.r.

// settleAfter is how long the plan may lag behind short-path changes
// once they stop.
const settleAfter = 300 * time.Millisecond

// Add adds endpoint e to the stack served (a Go program's own change, as
// a reload of a stack with e added would, without reading or checking a
// stack file). A change it cannot apply returns a result with Error set
// (and no error): the old plan serves on.
func (l *Live) Add(e lpg.Endpoint) (*ReloadResult, error) {
	return l.sv.change(func(sv *serving) (*lpg.Stack, sessionOp, error) {
		if e.Name == "" {
			return nil, nil, refuse("an endpoint to add needs a name")
		}
		ep := e
		if ep.Ident == "" {
			ep.Ident = lpg.Sanitize(ep.Name)
		}
		st := *sv.st
		for _, o := range st.Endpoints {
			if o.Name == e.Name || o.Ident == ep.Ident {
				return nil, nil, refuse("endpoint %s (or one of its identifier %s) is served already", e.Name, ep.Ident)
			}
		}
		st.Endpoints = append(slices.Clip(st.Endpoints), &ep)
		return &st, func(ss *dembed.Session) (*dembed.Delta, error) { return ss.Add(&ep) }, nil
	})
}

// Remove removes the endpoint named name from the stack served, as Add
// adds one.
func (l *Live) Remove(name string) (*ReloadResult, error) {
	return l.sv.change(func(sv *serving) (*lpg.Stack, sessionOp, error) {
		st := *sv.st
		i := slices.IndexFunc(st.Endpoints, func(e *lpg.Endpoint) bool { return e.Name == name })
		if i < 0 {
			return nil, nil, refuse("no endpoint %s is served", name)
		}
		st.Endpoints = slices.Delete(slices.Clone(st.Endpoints), i, i+1)
		return &st, func(ss *dembed.Session) (*dembed.Delta, error) { return ss.Remove(name) }, nil
	})
}

// change is a reload to the stack next makes of the served one (Live.Add
// and Remove), through the short path when it can.
func (sv *serving) change(next func(sv *serving) (*lpg.Stack, sessionOp, error)) (*ReloadResult, error) {
	start := time.Now()
	sv.reloadMu.Lock()
	sv.reloads++
	res := &ReloadResult{Seq: sv.reloads}
	st, op, err := next(sv)
	if err == nil {
		res.Stack = st.Name
		err = sv.apply(st, op, res)
	}
	res.TookMS = ms(time.Since(start))
	sv.reloadMu.Unlock()
	return sv.reloaded(res, err)
}

// fastRefused is why a change that adds add and removes rm cannot take
// the short path ("" when it may try).
func (sv *serving) fastRefused(add map[string]*lpg.Endpoint, rm []string) string {
	switch {
	case sv.via != nil:
		return "the plan has VI streams"
	case len(sv.stage.Demux) > 0 || sv.stage.KernelAddr:
		return "the run has kernel-socket endpoints"
	}
	byName := sv.endpointsByName()
	// Endpoints on a port, served and to be: the short path leaves
	// listeners that share a port (their order) to the full one.
	on := func(port uint16) int {
		n := 0
		for _, e := range sv.st.Endpoints {
			if e.Port == port && e.Proto == lpg.UDP {
				n++
			}
		}
		return n
	}
	for _, name := range rm {
		e := byName[name]
		if e == nil {
			return "no endpoint " + name
		}
		if e.Proto != lpg.UDP || e.Flow || on(e.Port) > 1 {
			return "endpoint " + name + " is not a UDP listener alone on its port"
		}
	}
	ports := map[uint16]bool{}
	for _, name := range sortedKeys(add) {
		e := add[name]
		if e.Proto != lpg.UDP || e.Flow {
			// A connected flow can change the code's shape (its table's
			// runs: TestFastChanges), which the short path does not see.
			return "endpoint " + name + " is not a UDP listener"
		}
		n := on(e.Port)
		if old := byName[name]; old != nil && old.Proto == lpg.UDP && old.Port == e.Port {
			n-- // its own old declaration, which goes
		}
		if e.Shadowed || n > 0 || ports[e.Port] {
			return "endpoint " + name + " shares its port with another"
		}
		ports[e.Port] = true
	}
	return ""
}

// endpointsByName indexes the served stack's endpoints.
func (sv *serving) endpointsByName() map[string]*lpg.Endpoint {
	if sv.byName == nil {
		sv.byName = make(map[string]*lpg.Endpoint, len(sv.st.Endpoints))
		for _, e := range sv.st.Endpoints {
			sv.byName[e.Name] = e
		}
	}
	return sv.byName
}

// applyRates serves the moves the serving's session makes at the
// measured rates (a rebalance: Session.SetRates) through the short path,
// or through the full one with the session's plan; the error says why
// they are not served.
func (sv *serving) applyRates(rates map[string]float64) error {
	return sv.rebalanced(func(res *ReloadResult) error {
		res.Stack = sv.st.Name
		if err := sv.reloadable(sv.st); err != nil {
			return err
		}
		fast, err := sv.tryFast(nil, func(ss *dembed.Session) (*dembed.Delta, error) { return ss.SetRates(rates) }, res)
		if fast || err != nil {
			return err
		}
		// No session (a plan read from a file) or one that refused the
		// rates: a full re-plan at them.
		if err := sv.settle(); err != nil {
			return err
		}
		r, err := sv.r.PlanAtRates(rates)
		if err != nil {
			return err
		}
		return sv.applyPlanned(r, r.Stack(), res)
	})
}

// rebalanced makes a rebalance's reload (do, which names the stack in
// res) under reloadMu, counted and timed as a reload, and says it when
// it is applied; the error says why not (the rebalancer's to report:
// unlike a reload's, reloaded, a refusal is not an answer).
func (sv *serving) rebalanced(do func(res *ReloadResult) error) error {
	sv.reloadMu.Lock()
	sv.reloads++
	res := &ReloadResult{Seq: sv.reloads}
	start := time.Now()
	err := do(res)
	res.TookMS = ms(time.Since(start))
	sv.reloadMu.Unlock()
	if err != nil {
		return err
	}
	res.Applied = true
	sv.said(res)
	return nil
}

// session is the session of the served plan that the short path changes,
// made when first needed; nil where the short path never serves: a
// hardware plan (whose rules are the NIC's, reloadhw.go), VI streams,
// kernel-socket endpoints, or a plan read from a file (no session).
// Under reloadMu.
func (sv *serving) session() *dembed.Session {
	if sv.code == nil || sv.hw || sv.via != nil || len(sv.stage.Demux) > 0 || sv.stage.KernelAddr {
		return nil
	}
	if sv.sess == nil {
		ss, err := dembed.NewSession(sv.r)
		if err != nil {
			return nil
		}
		sv.sess = ss
	}
	return sv.sess
}

// prepareSession makes the session of the plan that serves and has it
// start what its first change would (Session.Prepare: at 10,000
// endpoints 0.2 s), so that the first reload is as quick as the next
// ones. In the background once a plan serves.
func (sv *serving) prepareSession() {
	sv.reloadMu.Lock()
	defer sv.reloadMu.Unlock()
	if sv.ctx.Err() != nil {
		return
	}
	if ss := sv.session(); ss != nil {
		ss.Prepare()
	}
}

// A sessionOp makes a change in the session (nil: Session.Apply of the
// new stack).
type sessionOp func(*dembed.Session) (*dembed.Delta, error)

// tryFast applies the change from the served stack to st (op, if set,
// makes it in the session) through the short path, if it can: false
// (and no error) when the full path must plan it. Under reloadMu.
func (sv *serving) tryFast(st *lpg.Stack, op sessionOp, res *ReloadResult) (bool, error) {
	t := time.Now()
	if sv.session() == nil {
		return false, nil
	}
	if op == nil {
		op = func(ss *dembed.Session) (*dembed.Delta, error) { return ss.Apply(st) }
	}
	d, err := op(sv.sess)
	res.PlanMS = ms(time.Since(t))
	if err != nil {
		// The session refused it and changed nothing: the full path says
		// why, or plans it otherwise.
		return false, nil
	}
	if st == nil {
		st = sv.sess.Stack() // new rates (applyRates)
	}
	t = time.Now()
	added := map[string]*lpg.Endpoint{}
	for _, name := range d.Added {
		added[name] = nil
	}
	for _, e := range st.Endpoints {
		if _, ok := added[e.Name]; ok {
			added[e.Name] = e
		}
	}
	why := sv.fastRefused(added, d.Removed)
	var ch *fastChange
	if why == "" {
		ch, why = sv.fastChanges(d, added)
	}
	res.CodeMS = ms(time.Since(t))
	if why != "" {
		// The session has made the change: its plan is the new one, which
		// the full path serves (generating its code).
		res.NotShort = why
		r, err := sv.sess.Result()
		sv.sess = nil
		if err != nil {
			return true, refuse("no plan for the new stack: %v", err)
		}
		err = sv.applyPlanned(r, st, res)
		var rf *refused
		if errors.As(err, &rf) && sv.behind > 0 {
			// The old stack serves on, and its plan (sv.r) is behind the
			// short path's changes: a session of it is the new plan's
			// changed back to the stack served, which settle makes the
			// plan (serving its tables and rules if they differ).
			if ss, e := dembed.NewSession(r); e == nil {
				if _, e := ss.Apply(sv.st); e == nil {
					sv.sess = ss
					sv.settleLater()
				}
			}
		}
		return true, err
	}
	t = time.Now()
	defer func() { res.SwapMS = ms(time.Since(t)) }()
	res.Short = true
	res.Added, res.Removed = d.Added, d.Removed
	for _, a := range d.Added {
		if slices.Contains(d.Removed, a) {
			res.Changed = append(res.Changed, a)
		}
	}
	// The helper's tables first (an added endpoint is served before its
	// rule steers frames to it; one that moves queue is in both queues'
	// tables), then the rules, then the tables as they are to be, once
	// the loops served what their rings held (frames the old rules
	// steered to a queue an endpoint leaves).
	if err := sv.prime(append(slices.Clip(ch.first), ch.then...)); err != nil {
		return true, err
	}
	if err := sv.patch(added, ch.first); err != nil {
		return true, err
	}
	sv.liveMu.Lock()
	m := sv.maps
	sv.liveMu.Unlock()
	if m == nil {
		return true, fmt.Errorf("the run stopped serving")
	}
	res.RulesAdded, res.RulesChanged, res.RulesRemoved, err = m.applyGroupChanges(sv.stage.Groups, ch.groups)
	if err != nil {
		return true, fmt.Errorf("updating the eBPF stage's rules: %w", err)
	}
	if err := sv.sendUpdate(drained(func(h *helperState) (*dataplane.Update, func()) { return h.patch(nil, ch.then) })); err != nil {
		return true, err
	}
	res.Tables = ch.changed
	sv.commitFast(st, d, added, ch)
	sv.planSeq++
	if sv.state != nil {
		// status counts the reload now; its plan follows (settle).
		sv.state.Stack, sv.state.Reloads = st.Name, sv.reloads
		if err := sv.saveState(); err != nil {
			sv.out.note("note", "the state of the run cannot be written: %v", err)
		}
	}
	sv.behind++
	sv.settleLater()
	return true, nil
}

// commitFast makes the short path's change of Delta d, to stack st, the
// state served: the stack, the tables, the rules. The plan (sv.r)
// follows once the changes stop (settle).
func (sv *serving) commitFast(st *lpg.Stack, d *dembed.Delta, added map[string]*lpg.Endpoint, ch *fastChange) {
	code := *sv.code
	code.Tables = ch.tables
	sv.code = &code
	stage := *sv.stage
	stage.Groups = slices.Clone(stage.Groups)
	for i, g := range ch.groups {
		if g != nil {
			stage.Groups[i].Rules = g
		}
	}
	byName := sv.endpointsByName()
	sv.stage, sv.st, sv.name = &stage, st, st.Name
	for _, name := range d.Removed {
		delete(byName, name)
	}
	for name, e := range added {
		byName[name] = e
	}
}

// fastChange is what the short path changes: the tables as they are to
// be; the changes of the helper's tables before the rules change (new
// entries in, the removed endpoints' out: an endpoint that moves queue
// is in both queues' tables) and after (the moved endpoints' old
// entries out); and each group's rules as they are to be (nil:
// unchanged).
type fastChange struct {
	tables      []gofallback.Table
	first, then []tablePatch
	changed     int // tables
	groups      [][]Rule
}

// tablePatch is a change of some entries of a table the helper has.
type tablePatch struct {
	Name   string
	Set    []gofallback.TableEntry
	Delete [][2]uint64
}

// fastChanges works out the short path's changes for Delta d of the
// session (added: the endpoints it adds), or says why the full path must apply it.
func (sv *serving) fastChanges(d *dembed.Delta, added map[string]*lpg.Endpoint) (*fastChange, string) {
	ch := &fastChange{groups: make([][]Rule, len(sv.stage.Groups))}
	// The rules: an entry's group is its table's of the same mask; a
	// table of more than one group orders them, which the short path
	// leaves to the full one.
	m, _, err := nics.Load(Model)
	if err != nil || m == nil {
		return nil, "no model"
	}
	type groupEdit struct {
		set map[[16]byte]uint32
		del map[[16]byte]bool
	}
	edits := map[int]*groupEdit{}
	groupOf := func(e dembed.EntryChange) (int, [16]byte, string) {
		key, mask, _, err := entryKey(e.Entry)
		if err != nil {
			return -1, key, err.Error()
		}
		gi, n := -1, 0
		for i, g := range sv.stage.Groups {
			if g.Table == e.Node {
				n++
				if g.Mask == mask {
					gi = i
				}
			}
		}
		if gi < 0 || n > 1 {
			return -1, key, "a rule of another shape in " + e.Node
		}
		if edits[gi] == nil {
			edits[gi] = &groupEdit{set: map[[16]byte]uint32{}, del: map[[16]byte]bool{}}
		}
		return gi, key, ""
	}
	for _, e := range d.Insert {
		gi, key, why := groupOf(e)
		if why != "" {
			return nil, why
		}
		q := DropQueue
		if a := e.Entry.Action; a != "drop" && a != "" {
			x := m.QueueIndex(a)
			if x < 0 {
				return nil, "action " + a + " is not a queue"
			}
			q = uint32(x)
		}
		edits[gi].set[key] = q
	}
	for _, e := range d.Delete {
		gi, key, why := groupOf(e)
		if why != "" {
			return nil, why
		}
		if _, ok := edits[gi].set[key]; !ok {
			edits[gi].del[key] = true
		}
	}
	for gi, ed := range edits {
		g := sv.stage.Groups[gi]
		was := firstRules(g.Rules)
		var rules []Rule
		for _, r := range g.Rules {
			if !ed.del[r.Key] {
				if q, ok := ed.set[r.Key]; ok {
					r.Queue = q
					delete(ed.set, r.Key)
				}
				rules = append(rules, r)
			}
		}
		for k, q := range ed.set {
			if _, ok := was[k]; ok {
				return nil, "two rules of one key" // a key deleted and inserted again
			}
			rules = append(rules, Rule{Key: k, Queue: q})
		}
		if len(rules) > g.Capacity {
			return nil, "the rules would overflow " + g.Table
		}
		ch.groups[gi] = rules
	}
	// The tables: the removed endpoints' entries and those of queues an
	// endpoint leaves go; an endpoint gets an entry in the table of each
	// queue it comes to, packed like its kind's there.
	byName := sv.endpointsByName()
	lookup := func(name string) *lpg.Endpoint {
		if e := added[name]; e != nil {
			return e
		}
		return byName[name]
	}
	leave := map[string]map[int]bool{} // endpoint: queues it leaves (nil key: all)
	join := map[string][]int{}
	for _, qc := range d.Queues {
		gone := map[int]bool{}
		for _, q := range qc.From {
			if !slices.Contains(qc.To, q) {
				gone[q] = true
			}
		}
		leave[qc.Endpoint] = gone
		for _, q := range qc.To {
			if !slices.Contains(qc.From, q) {
				join[qc.Endpoint] = append(join[qc.Endpoint], q)
			}
		}
	}
	removed := map[string]bool{}
	for _, name := range d.Removed {
		removed[name] = true
	}
	for _, name := range d.Added {
		if !removed[name] {
			continue
		}
		// Declared otherwise: its entries go, and come again for the
		// new declaration on the queues it is on now.
		if _, ok := leave[name]; !ok {
			qs := map[int]bool{}
			for _, t := range sv.code.Tables {
				for _, e := range t.Entries {
					if e.Kind == dataplane.Deliver && e.Endpoint == name {
						qs[t.Queue] = true
					}
				}
			}
			join[name] = sortedInts(qs)
		} else {
			join[name] = nil
			for _, qc := range d.Queues {
				if qc.Endpoint == name {
					join[name] = qc.To
				}
			}
		}
	}
	tables := slices.Clone(sv.code.Tables)
	gone := make([][][2]uint64, len(tables))   // by table: the keys of removed endpoints
	moving := make([][][2]uint64, len(tables)) // and of endpoints that leave the table's queue
	sets := make([][]gofallback.TableEntry, len(tables))
	for ti, t := range tables {
		var keep []gofallback.TableEntry
		for i, e := range t.Entries {
			k := [2]uint64{e.K0, e.K1}
			switch {
			case e.Kind == dataplane.Deliver && removed[e.Endpoint]:
				gone[ti] = append(gone[ti], k)
			case e.Kind == dataplane.Deliver && leave[e.Endpoint][t.Queue]:
				moving[ti] = append(moving[ti], k)
			default:
				if keep != nil {
					keep = append(keep, e)
				}
				continue
			}
			if keep == nil {
				keep = append(make([]gofallback.TableEntry, 0, len(t.Entries)), t.Entries[:i]...)
			}
		}
		if keep != nil {
			tables[ti].Entries = keep
		}
	}
	for _, name := range sortedKeys(join) {
		e := lookup(name)
		if e == nil {
			return nil, "no endpoint " + name
		}
		for _, q := range join[name] {
			ti, why := sv.tableFor(sv.code.Tables, q, e, lookup)
			if why != "" {
				return nil, why
			}
			keys := gofallback.PackKey(tables[ti].Keys, fieldValues(lpg.EndpointPredicate(e)))
			if len(keys) == 0 {
				return nil, "endpoint " + name + "'s key does not pack"
			}
			for _, k := range keys {
				taken := slices.Contains(moving[ti], k) || slices.ContainsFunc(tables[ti].Entries, func(x gofallback.TableEntry) bool { return x.K0 == k[0] && x.K1 == k[1] })
				if taken {
					return nil, "endpoint " + name + "'s key is another's"
				}
				sets[ti] = append(sets[ti], gofallback.TableEntry{K0: k[0], K1: k[1], Kind: dataplane.Deliver, Endpoint: name})
			}
			tables[ti].Entries = append(slices.Clip(tables[ti].Entries), sets[ti][len(sets[ti])-len(keys):]...)
		}
	}
	for _, t := range tables {
		if len(t.Entries) == 0 {
			// A queue's code without the table's run is of another shape.
			return nil, "a table of queue " + fmt.Sprint(t.Queue) + " would be left empty"
		}
	}
	ch.tables = tables
	unset := func(ks [][2]uint64, set []gofallback.TableEntry) [][2]uint64 {
		var out [][2]uint64
		for _, k := range ks {
			if !slices.ContainsFunc(set, func(x gofallback.TableEntry) bool { return x.K0 == k[0] && x.K1 == k[1] }) {
				out = append(out, k)
			}
		}
		return out
	}
	for ti, t := range tables {
		if g := unset(gone[ti], sets[ti]); len(sets[ti])+len(g) > 0 {
			ch.first = append(ch.first, tablePatch{Name: t.Name, Set: sets[ti], Delete: g})
		}
		if m := unset(moving[ti], sets[ti]); len(m) > 0 {
			ch.then = append(ch.then, tablePatch{Name: t.Name, Delete: m})
		}
		if len(sets[ti])+len(gone[ti])+len(moving[ti]) > 0 {
			ch.changed++
		}
	}
	return ch, ""
}

// tableFor is the table of queue q among tables (the served ones: an
// endpoint that moves away still shows its table's kind) that holds
// endpoints of e's kind (a UDP listener on every address or one on
// some): the only such table, whose entries for one of them pack as
// PackKey packs that endpoint's predicate. Otherwise it says why not.
func (sv *serving) tableFor(tables []gofallback.Table, q int, e *lpg.Endpoint, lookup func(string) *lpg.Endpoint) (int, string) {
	found := -1
	var like *lpg.Endpoint
	for ti, t := range tables {
		if t.Queue != q {
			continue
		}
		for _, x := range t.Entries {
			if x.Kind != dataplane.Deliver {
				continue
			}
			o := lookup(x.Endpoint)
			if o == nil || o.Proto != e.Proto || o.Flow != e.Flow || o.AnyAddr != e.AnyAddr {
				break
			}
			if found >= 0 {
				return -1, fmt.Sprintf("queue %d has two tables of endpoints like %s", q, e.Name)
			}
			found, like = ti, o
			break
		}
	}
	if found < 0 {
		return -1, fmt.Sprintf("queue %d has no table of endpoints like %s", q, e.Name)
	}
	// The table packs its endpoints' keys as PackKey does.
	var got [][2]uint64
	for _, x := range tables[found].Entries {
		if x.Kind == dataplane.Deliver && x.Endpoint == like.Name {
			got = append(got, [2]uint64{x.K0, x.K1})
		}
	}
	want := gofallback.PackKey(tables[found].Keys, fieldValues(lpg.EndpointPredicate(like)))
	slices.SortFunc(got, func(a, b [2]uint64) int { return cmpKey(a[0], a[1], b[0], b[1]) })
	slices.SortFunc(want, func(a, b [2]uint64) int { return cmpKey(a[0], a[1], b[0], b[1]) })
	if !slices.Equal(got, want) {
		return -1, fmt.Sprintf("the table of queue %d does not key %s as its predicate says", q, like.Name)
	}
	return found, ""
}

// fieldValues is what the generated code's tables key on (gofallback's
// portShape): the values to which a predicate's conjuncts fix fields,
// by equality or a short set of single values.
func fieldValues(e pred.Expr) func(string) []uint64 {
	vals := map[string][]uint64{}
	var walk func(pred.Expr)
	walk = func(e pred.Expr) {
		switch x := e.(type) {
		case pred.And:
			for _, y := range x.X {
				walk(y)
			}
		case pred.Cmp:
			if x.Mask != 0 || vals[x.Field] != nil {
				return
			}
			switch {
			case x.Op == pred.Eq:
				vals[x.Field] = []uint64{x.Value}
			case x.Op == pred.In && len(x.Ranges) <= 16:
				var vs []uint64
				for _, r := range x.Ranges {
					if r.Lo != r.Hi {
						return
					}
					vs = append(vs, r.Lo)
				}
				vals[x.Field] = vs
			}
		}
	}
	walk(e)
	return func(f string) []uint64 { return vals[f] }
}

// applyGroupChanges makes the stage's maps hold the groups' new rules
// (next[i] nil: group i unchanged), new keys and changed queues first,
// then the removed keys, as applyRules does.
func (m *maps) applyGroupChanges(cur []Group, next [][]Rule) (added, changed, removed int, err error) {
	for i, rules := range next {
		if rules == nil {
			continue
		}
		g := cur[i]
		a, c, r, err := m.applyGroup(i, g, Group{Table: g.Table, Mask: g.Mask, Ports: g.Ports, Capacity: g.Capacity, Rules: rules})
		added, changed, removed = added+a, changed+c, removed+r
		if err != nil {
			return added, changed, removed, err
		}
	}
	return added, changed, removed, nil
}

// settleLater makes the plan follow the short path's changes once they
// stop for settleAfter.
func (sv *serving) settleLater() {
	if sv.settleTimer != nil {
		sv.settleTimer.Reset(settleAfter)
		return
	}
	sv.settleTimer = time.AfterFunc(settleAfter, sv.settleInBackground)
}

// settleInBackground is settle with the plan made outside reloadMu, so
// that a reload meanwhile does not wait for it: the session's state is
// copied under the lock (ResultLater), the plan, its code and its stage
// made without it, and served under it again unless the plan served
// changed meanwhile (that change's own settle follows).
func (sv *serving) settleInBackground() {
	if sv.ctx.Err() != nil {
		return // the run ended
	}
	sv.reloadMu.Lock()
	if sv.behind == 0 || sv.sess == nil {
		sv.reloadMu.Unlock()
		return
	}
	later, seq, st := sv.sess.ResultLater(), sv.planSeq, sv.st
	sv.reloadMu.Unlock()
	p, err := planOf(later, st, sv.handled)
	sv.reloadMu.Lock()
	defer sv.reloadMu.Unlock()
	if sv.planSeq != seq {
		return
	}
	if err == nil {
		err = sv.serveSettled(p)
	}
	if err != nil {
		sv.out.note("note", "the plan after the last reloads: %v", err)
	}
}

// settle makes sv.r the plan the short path's changes served (under
// reloadMu, before the full path plans from it).
func (sv *serving) settle() error {
	if sv.behind == 0 || sv.sess == nil {
		return nil
	}
	p, err := planOf(sv.sess.ResultLater(), sv.st, sv.handled)
	if err != nil {
		return err
	}
	return sv.serveSettled(p)
}

// planOf makes the plan a session's ResultLater copied, of stack st,
// with its code and stage.
func planOf(later func() (*dembed.Result, error), st *lpg.Stack, handled map[string]bool) (*planState, error) {
	r, err := later()
	if err != nil {
		return nil, err
	}
	code, err := servedCode(r, st)
	if err != nil {
		return nil, err
	}
	stage, err := stageOfLPG(r.Plan, st, handled, r.Embedding.LPG)
	if err != nil {
		return nil, err
	}
	return &planState{r: r, st: st, stage: stage, code: code}, nil
}

// serveSettled makes p, the session's plan of the stack served, sv.r:
// its generated code must be of the served code's shape with the served
// tables, and its stage must have the served rules; one that does not
// is served by the full path (said). Under reloadMu.
func (sv *serving) serveSettled(p *planState) error {
	sv.behind = 0
	why := sameTables(sv.code, p.code)
	if why == "" {
		why = sameRules(sv.stage, p.stage)
	}
	if why != "" {
		sv.out.note("note", "the tables or rules the last reloads served differ from the plan's (%s): serving the plan's", why)
		res := &ReloadResult{Seq: sv.reloads, Stack: sv.st.Name}
		return sv.applyPlanned(p.r, sv.st, res)
	}
	sess := sv.sess
	sv.usePlan(planState{r: p.r, st: sv.st, stage: sv.stage, chains: sv.chains, via: sv.via, code: p.code, bin: sv.bin})
	sv.sess = sess // the session is that plan's
	return nil
}

// sameRules says how two stages' rules differ ("" when they do not).
func sameRules(a, b *Stage) string {
	if len(a.Groups) != len(b.Groups) {
		return "the number of groups of rules"
	}
	for i := range a.Groups {
		x, y := firstRules(a.Groups[i].Rules), firstRules(b.Groups[i].Rules)
		if a.Groups[i].Mask != b.Groups[i].Mask || len(x) != len(y) {
			return "the rules of " + b.Groups[i].Table
		}
		for k, q := range y {
			if p, ok := x[k]; !ok || p != q {
				return "the rules of " + b.Groups[i].Table
			}
		}
	}
	return ""
}

// sameTables says how two plans' code differs in shape or in its tables'
// entries ("" when it does not).
func sameTables(a, b *gofallback.Swappable) string {
	if a.Shape != b.Shape {
		return "the code's shape"
	}
	if len(a.Tables) != len(b.Tables) {
		return "the number of tables"
	}
	for i := range a.Tables {
		x, y := a.Tables[i], b.Tables[i]
		if x.Name != y.Name || len(x.Entries) != len(y.Entries) {
			return "table " + y.Name
		}
		m := make(map[[2]uint64]string, len(x.Entries))
		for _, e := range x.Entries {
			m[[2]uint64{e.K0, e.K1}] = fmt.Sprint(e.Kind, e.Endpoint)
		}
		for _, e := range y.Entries {
			if m[[2]uint64{e.K0, e.K1}] != fmt.Sprint(e.Kind, e.Endpoint) {
				return "table " + y.Name
			}
		}
	}
	return ""
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sortedInts are the members of a set in order.
func sortedInts(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// patch sends the helper the endpoints of added it does not serve as
// declared and the changes of its tables, and waits for it to say they
// serve (push, for the short path's changes).
func (sv *serving) patch(added map[string]*lpg.Endpoint, tables []tablePatch) error {
	return sv.sendUpdate(func(h *helperState) (*dataplane.Update, func()) { return h.patch(added, tables) })
}

// patch is the Update of the helper's endpoints (those of added it does
// not serve as declared) and tables (changed as tables say), and what
// records it here once the helper applied it.
func (h *helperState) patch(added map[string]*lpg.Endpoint, tables []tablePatch) (*dataplane.Update, func()) {
	u := &dataplane.Update{}
	number := map[string]uint32{}
	n := uint32(len(h.names))
	for _, name := range sortedKeys(added) {
		e := added[name]
		ue := dataplane.UpdateEndpoint{Name: e.Name, App: appNames[builtinHandler(e)], OpenMX: e.Proto == lpg.OpenMX}
		k, ok := h.index[e.Name]
		switch {
		case !ok:
			k = n
			n++
		case h.app[k] == ue.App && h.omx[k] == ue.OpenMX:
			number[name] = k
			continue
		}
		number[name] = k
		u.Endpoints = append(u.Endpoints, ue)
	}
	index := func(name string) uint32 {
		if k, ok := number[name]; ok {
			return k
		}
		return h.index[name]
	}
	for _, t := range tables {
		ut := dataplane.UpdateTable{Name: t.Name}
		for _, e := range t.Set {
			i := e.Index
			if e.Kind == dataplane.Deliver {
				i = index(e.Endpoint)
			}
			ut.Set = append(ut.Set, dataplane.TableEntry{K0: e.K0, K1: e.K1, Kind: e.Kind, Index: i})
		}
		for _, k := range t.Delete {
			ut.Delete = append(ut.Delete, dataplane.TableKey{K0: k[0], K1: k[1]})
		}
		u.Tables = append(u.Tables, ut)
	}
	return u, func() {
		h.served(u.Endpoints)
		for _, t := range u.Tables {
			m := h.tables[t.Name]
			if m == nil {
				m = map[dataplane.TableKey]dataplane.TableEntry{}
				h.tables[t.Name] = m
			}
			for _, k := range t.Delete {
				delete(m, k)
			}
			for _, e := range t.Set {
				m[dataplane.TableKey{K0: e.K0, K1: e.K1}] = e
			}
		}
	}
}

// prime gives the helper, whole, the tables of patches it was never
// given (it has them as generated, which this process does not know
// it serves): a patch changes what the helper has.
func (sv *serving) prime(patches []tablePatch) error {
	sv.liveMu.Lock()
	hs := sv.hs
	sv.liveMu.Unlock()
	if hs == nil {
		return fmt.Errorf("the generated stack stopped")
	}
	var full []gofallback.Table
	for _, p := range patches {
		if _, ok := hs.tables[p.Name]; ok || slices.ContainsFunc(full, func(t gofallback.Table) bool { return t.Name == p.Name }) {
			continue
		}
		for _, t := range sv.code.Tables {
			if t.Name == p.Name {
				full = append(full, t)
			}
		}
	}
	if len(full) == 0 {
		return nil
	}
	return sv.push(sv.st, full)
}
