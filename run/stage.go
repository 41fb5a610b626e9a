package run

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/dragonc/dragonc/backends/linux"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// baseStage is what every stage knows of the stack: its addresses, which
// frames are its, and which are the kernel-socket endpoints' (handled
// names the endpoints a Go handler serves: ServeCode).
func baseStage(pl *plan.Plan, st *lpg.Stack, handled map[string]bool) (*Stage, error) {
	s := &Stage{ARP: st.ARP, ICMP: st.ICMPEcho}
	for _, a := range st.Unicast() {
		s.Addrs = append(s.Addrs, pred.Addr(a))
	}
	for _, a := range st.Broadcasts() {
		s.Bcasts = append(s.Bcasts, pred.Addr(a))
	}
	for _, e := range st.Endpoints {
		if e.Proto == lpg.OpenMX {
			s.OpenMX = true
		}
	}
	for _, q := range pl.Queues {
		s.Queues = append(s.Queues, uint32(q.ID))
	}
	kern, err := kernelSockets(pl, st, handled)
	if err != nil {
		return nil, err
	}
	s.setKernel(pl, st, kern)
	return s, nil
}

// StageOf reads the eBPF stage's tables off a linux-xdp plan: the flow
// table, then the port table, then the hash that spreads what no rule
// claims (RSS over the plan's indirection table) or, without it, queue 0
// (the model's order).
func StageOf(pl *plan.Plan, st *lpg.Stack) (*Stage, error) { return stageOf(pl, st, nil) }

// stageOf is StageOf with the endpoints a Go handler serves (ServeCode).
func stageOf(pl *plan.Plan, st *lpg.Stack, handled map[string]bool) (*Stage, error) {
	return stageOfLPG(pl, st, handled, nil)
}

// stageOfLPG is stageOf with the stack's LPG, if the caller has it (nil:
// derived where the stage's checks need it).
func stageOfLPG(pl *plan.Plan, st *lpg.Stack, handled map[string]bool, g *graph.Graph) (*Stage, error) {
	m, _, err := nics.Load(Model)
	if err != nil {
		return nil, err
	}
	s, err := baseStage(pl, st, handled)
	if err != nil {
		return nil, err
	}
	queue := func(a string) (uint32, error) {
		q := m.QueueIndex(a)
		if q < 0 {
			return 0, fmt.Errorf("action %s is not a queue", a)
		}
		return uint32(q), nil
	}
	for _, c := range pl.Config {
		if c.Kind == "hash" && len(c.Indirection) > 0 {
			rss, err := rssOf(m, c, queue, 0)
			if err != nil {
				return nil, err
			}
			s.Miss, s.RSS = MissRSS, rss
			continue
		}
		if c.Kind == string(prg.Program) {
			if err := stageChecks(s, m, c, st, g); err != nil {
				return nil, err
			}
			continue
		}
		if c.Kind != "table" {
			continue
		}
		// The max_entries of the table's hash map: the model's capacity.
		sp := m.Space(c.Node)
		if sp == nil || sp.Capacity == 0 {
			return nil, fmt.Errorf("the eBPF stage has no table %s", c.Node)
		}
		gs, err := groups(c, nil, func(a string) (uint32, error) {
			q, err := queue(a)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", c.Node, err)
			}
			return q, nil
		})
		if err != nil {
			return nil, err
		}
		for i := range gs {
			gs[i].Capacity = sp.Capacity
		}
		s.Groups = append(s.Groups, gs...)
	}
	return s, nil
}

// stageChecks places the plan's checks on the stage: the LPG nodes the
// plan says the embedder placed there, with the stack's predicates (the
// model and the stack give them again; a plan that lists others is of
// another model or stack).
func stageChecks(s *Stage, m *prg.Model, c plan.Config, st *lpg.Stack, g *graph.Graph) error {
	sp := m.Space(c.Node)
	if sp == nil || sp.Kind != prg.Program {
		return fmt.Errorf("the eBPF stage has no program stage %s", c.Node)
	}
	if g == nil {
		var err error
		if g, err = lpg.Derive(st); err != nil {
			return err
		}
	}
	v := prg.PlaceProgram(sp, g)
	runs, drops := v.StageNodes()
	if !slices.Equal(runs, c.Runs) || !slices.Equal(drops, c.Drops) {
		return fmt.Errorf("%s: the plan places %d checks on the eBPF stage, the model and the stack %d: the plan is not of this stack", c.Node, len(c.Runs), len(runs))
	}
	sites, answers, err := checkProgram(v.Program)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Node, err)
	}
	s.Program, s.DropSites, s.Answers = v.Program, sites, answers
	if len(st.Interfaces) > 0 {
		mac := st.Interfaces[0].MAC
		for i := range s.MAC {
			s.MAC[i] = byte(mac >> (40 - 8*i))
		}
	}
	return nil
}

// groups turns a plan table's entries into groups of rules that compare
// the same key bytes, in the NIC's order (higher priority first, then the
// order of the entries). keep, if set, chooses the entries. Within the
// table a group is tried after the ones before it, so two rules of
// different groups that both match a frame must already be in that order.
func groups(c plan.Config, keep func(i int) bool, queue func(action string) (uint32, error)) ([]Group, error) {
	type rule struct {
		prio      int
		mask, key [16]byte
		queue     uint32
		ports     bool
	}
	var rules []rule
	for i, e := range c.Entries {
		if keep != nil && !keep(i) {
			continue
		}
		key, mask, ports, err := entryKey(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Node, err)
		}
		r := rule{prio: e.Priority, key: key, mask: mask, ports: ports}
		if e.Action == "drop" || e.Action == "" {
			r.queue = DropQueue
		} else {
			q, err := queue(e.Action)
			if err != nil {
				return nil, err
			}
			r.queue = q
		}
		rules = append(rules, r)
	}
	slices.SortStableFunc(rules, func(a, b rule) int { return cmp.Compare(b.prio, a.prio) })
	var out []Group
	index := map[[16]byte]int{}
	for _, r := range rules {
		gi, ok := index[r.mask]
		if !ok {
			gi = len(out)
			index[r.mask] = gi
			out = append(out, Group{Table: c.Node, Mask: r.mask, Ports: r.ports})
		}
		out[gi].Rules = append(out[gi].Rules, Rule{Key: r.key, Queue: r.queue})
		out[gi].Capacity = len(out[gi].Rules)
	}
	// With groups tried one after another, a rule of an earlier group
	// that matches a frame a rule before it (of a later group) also
	// matches would win against the NIC's order.
	if len(out) > 1 {
		for k, r := range rules {
			for _, o := range rules[:k] {
				if index[o.mask] > index[r.mask] && overlap(o.key, o.mask, r.key, r.mask) {
					return nil, fmt.Errorf("%s: rules of different shapes overlap out of order; dragonc run cannot keep the NIC's precedence in hash maps", c.Node)
				}
			}
		}
	}
	return out, nil
}

// overlap reports whether a frame can match both rules.
func overlap(ak, am, bk, bm [16]byte) bool {
	for i := range ak {
		if ak[i]&bm[i] != bk[i]&am[i] {
			return false
		}
	}
	return true
}

// HardwareStage is the eBPF stage that takes over what the driver refused
// of a hardware plan: refused lists linux.sh's steps (linux.Steps) that
// the driver refused. With the queue count or RSS refused, the NIC's
// steering says nothing and the stage does all of it: every table's rules
// and RSS. Otherwise the frames go where the NIC put them, except those a
// refused rule would have steered (with the accepted rules that come
// before and overlap them, to keep the NIC's precedence). The notes say
// what was taken over.
func HardwareStage(r *dembed.Result, st *lpg.Stack, refused []linux.Step) (*Stage, []string, error) {
	return hardwareStage(r, st, refused, nil)
}

// hardwareStage is HardwareStage with the endpoints a Go handler serves
// (ServeCode).
func hardwareStage(r *dembed.Result, st *lpg.Stack, refused []linux.Step, handled map[string]bool) (*Stage, []string, error) {
	pl := r.Plan
	m := r.Model()
	s, err := baseStage(pl, st, handled)
	if err != nil {
		return nil, nil, err
	}
	all := false
	refusedRule := map[string]map[int]bool{} // table -> entry index
	var notes []string
	for _, step := range refused {
		switch step.Kind {
		case linux.StepChannels, linux.StepRSS, linux.StepRSSPorts:
			all = true
		case linux.StepRule:
			if refusedRule[step.Node] == nil {
				refusedRule[step.Node] = map[int]bool{}
			}
			i := slices.IndexFunc(configOf(pl, step.Node).Entries, func(e plan.Entry) bool { return e.Match == step.Entry.Match && e.Action == step.Entry.Action })
			if i < 0 {
				return nil, nil, fmt.Errorf("%s: a refused rule (%s) is not in the plan", step.Node, step.Entry.Match)
			}
			refusedRule[step.Node][i] = true
		}
	}
	queue := func(action string) (uint32, error) {
		q := m.QueueIndex(action)
		if q < 0 {
			return 0, fmt.Errorf("action %s is not a receive queue of %s", action, pl.NIC)
		}
		return uint32(q), nil
	}
	def := uint32(0)
	if len(pl.Queues) > 0 {
		def = uint32(pl.Queues[0].ID)
	}
	s.Miss = MissDevice
	taken := 0
	for _, c := range pl.Config {
		if c.Kind != "table" || len(c.Entries) == 0 {
			continue
		}
		if sp := m.Space(c.Node); sp != nil && sp.When != nil && (all || len(refusedRule[c.Node]) > 0) {
			return nil, nil, fmt.Errorf("%s: dragonc run cannot take over a table that steers a class of packets (when %s)", c.Node, sp.When)
		}
		var keep func(int) bool
		if !all {
			ref := refusedRule[c.Node]
			if len(ref) == 0 {
				continue
			}
			// The refused rules, and the accepted ones that take
			// precedence over one of them.
			type masked struct {
				i         int
				key, mask [16]byte
			}
			var refs []masked
			for j := range ref {
				k, m, _, err := entryKey(c.Entries[j])
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", c.Node, err)
				}
				refs = append(refs, masked{j, k, m})
			}
			keep = func(i int) bool {
				if ref[i] {
					return true
				}
				k, m, _, err := entryKey(c.Entries[i])
				for _, r := range refs {
					if entryBefore(c.Entries, i, r.i) && (err != nil || overlap(k, m, r.key, r.mask)) {
						return true
					}
				}
				return false
			}
		}
		gs, err := groups(c, keep, queue)
		if err != nil {
			return nil, nil, err
		}
		for i, g := range gs {
			taken += len(g.Rules)
			// The map holds as many rules as the NIC's table, so that
			// a reload's rules fit the running stage (reloadhw.go).
			if sp := m.Space(c.Node); sp != nil {
				gs[i].Capacity = max(g.Capacity, sp.Capacity)
			}
		}
		s.Groups = append(s.Groups, gs...)
	}
	if taken > 0 {
		notes = append(notes, fmt.Sprintf("the eBPF stage steers %d filter rule(s) the driver did not take", taken))
	}
	if all {
		s.Miss, s.MissQueue = MissQueue, def
		var portSum error
		for _, c := range pl.Config {
			if c.Kind != "hash" || len(c.Indirection) == 0 {
				continue
			}
			if m.Space(c.Node) == nil {
				continue
			}
			rss, err := rssOf(m, c, queue, def)
			if errors.Is(err, errPortSum) {
				// An endpoint hash later in the plan is named first: it is
				// the one the stage could never place.
				if portSum == nil {
					portSum = err
				}
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			s.Miss, s.RSS = MissRSS, rss
			notes = append(notes, fmt.Sprintf("the eBPF stage spreads by RSS (%s: Toeplitz over %d buckets, as the plan's indirection table)", c.Node, len(rss.Indirection)))
		}
		if portSum != nil {
			return nil, nil, portSum
		}
	}
	return s, notes, nil
}

// errPortSum: the stage cannot take over a port_sum hash.
var errPortSum = errors.New("dragonc run cannot take over the NIC's port hash (algorithm port_sum); its eBPF stage hashes by Toeplitz only")

// rssOf is the stage's RSS for a plan's hash node c of model m: its key,
// the ports it hashes, the queue of each bucket, and the queue of frames
// it does not hash (its miss port's queue, else def).
func rssOf(m *prg.Model, c plan.Config, queue func(action string) (uint32, error), def uint32) (*RSS, error) {
	sp := m.Space(c.Node)
	if sp == nil {
		return nil, fmt.Errorf("%s has no hash %s", m.G.Name, c.Node)
	}
	if sp.Identity {
		// The stage places every frame, these too; it has no endpoint
		// hash to place them as the NIC would.
		return nil, fmt.Errorf("%s: dragonc run cannot take over the NIC's endpoint hash on %s", c.Node, sp.Fields[0])
	}
	if sp.PortSum {
		// The stage's RSS is Toeplitz (bpf.go); it has no program for the
		// Myri-10G port hash.
		return nil, fmt.Errorf("%s: %w", c.Node, errPortSum)
	}
	rss := &RSS{Key: sp.Key, TCPPorts: sp.TCPPorts, UDPPorts: sp.UDPPorts, Miss: def}
	if miss := m.G.Nodes[sp.ID].Port(sp.MissPort); miss != nil && len(miss.Succ) == 1 {
		if q := m.QueueIndex(m.G.Nodes[miss.Succ[0]].Name); q >= 0 {
			rss.Miss = uint32(q)
		}
	}
	for _, t := range c.Indirection {
		q, err := queue(t)
		if err != nil {
			return nil, err
		}
		rss.Indirection = append(rss.Indirection, q)
	}
	return rss, nil
}

func configOf(pl *plan.Plan, node string) plan.Config {
	for _, c := range pl.Config {
		if c.Node == node {
			return c
		}
	}
	return plan.Config{Node: node}
}

// entryBefore reports whether the NIC tries entry i of a table before j.
func entryBefore(es []plan.Entry, i, j int) bool {
	if es[i].Priority != es[j].Priority {
		return es[i].Priority > es[j].Priority
	}
	return i < j
}

// entryKey is a table entry as a masked key: the key bytes it compares,
// their values, and whether it compares a port.
func entryKey(e plan.Entry) (key, mask [16]byte, ports bool, err error) {
	for _, f := range e.Fields {
		kb, ok := keyBytes[f.Field]
		if !ok {
			return key, mask, false, fmt.Errorf("dragonc run cannot take over a rule on %s (it steers by addresses, ports and protocol)", f.Field)
		}
		m := f.Mask
		if m == 0 {
			m = ^uint64(0)
		}
		var v, mm [8]byte
		binary.BigEndian.PutUint64(v[:], f.Value&m)
		binary.BigEndian.PutUint64(mm[:], m)
		copy(key[kb.off:kb.off+kb.n], v[8-kb.n:])
		copy(mask[kb.off:kb.off+kb.n], mm[8-kb.n:])
		ports = ports || kb.off == 8 || kb.off == 10
	}
	return key, mask, ports, nil
}
