package prg

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
)

// Config assigns a value to configuration nodes; nodes it leaves out take
// their default (first enum port, empty table, hashing off, nothing
// placed).
type Config struct {
	Values map[string]*Value
}

// NewConfig returns an empty configuration.
func NewConfig() *Config { return &Config{Values: map[string]*Value{}} }

// Value is the configuration of one node.
type Value struct {
	Kind        Kind
	Choice      string            // enum: the port kept
	Entries     []Entry           // table, in insertion order
	Indirection []string          // hash: bucket -> action node; nil turns hashing off
	Placement   map[string]string // place: task -> engine
	Program     []StageNode       // program: the LPG nodes placed on the stage (PlaceProgram)
}

// Entry is one table entry.
type Entry struct {
	Match    []FieldMatch
	Priority int
	Action   string // successor node of the action port; "" when Drop
	Drop     bool
}

// FieldMatch matches one field: (field & Mask) == Value. A zero Mask means
// the whole field.
type FieldMatch struct {
	Field string
	Value uint64
	Mask  uint64
}

// Clone returns a deep copy.
func (c *Config) Clone() *Config {
	out := NewConfig()
	for k, v := range c.Values {
		nv := *v
		nv.Entries = append([]Entry(nil), v.Entries...)
		for i := range nv.Entries {
			nv.Entries[i].Match = append([]FieldMatch(nil), v.Entries[i].Match...)
		}
		nv.Indirection = append([]string(nil), v.Indirection...)
		nv.Program = slices.Clone(v.Program)
		if v.Placement != nil {
			nv.Placement = map[string]string{}
			for t, e := range v.Placement {
				nv.Placement[t] = e
			}
		}
		out.Values[k] = &nv
	}
	return out
}

// Table returns the table value of a node, creating it.
func (c *Config) Table(node string) *Value {
	v, ok := c.Values[node]
	if !ok {
		v = &Value{Kind: Table}
		c.Values[node] = v
	}
	return v
}

// full returns the all-ones mask of a field.
func full(field string) uint64 {
	b := pred.Fields[field].Bits
	if b >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(b) - 1
}

// Predicate is the condition under which a table entry matches, within
// space sp (which adds its `when` condition).
func (e Entry) Predicate(sp *Space) pred.Expr {
	var xs []pred.Expr
	if sp != nil && sp.When != nil {
		xs = append(xs, sp.When)
	}
	// With the protocol fixed, l4.* is exactly udp.* or tcp.*: name the
	// protocol's own fields so that reasoning about the entry needs no
	// knowledge of how the fields relate.
	l4 := ""
	for _, m := range e.Match {
		if m.Field == "ip.proto" && (m.Mask == 0 || m.Mask == full(m.Field)) {
			switch m.Value {
			case 17:
				l4 = "udp"
			case 6:
				l4 = "tcp"
			}
		}
	}
	for _, m := range e.Match {
		field := m.Field
		if l4 != "" && (field == "l4.sport" || field == "l4.dport") {
			field = l4 + field[2:]
		}
		c := pred.Cmp{Field: field, ID: pred.Fields[field].ID, Op: pred.Eq, Value: m.Value}
		if m.Mask != 0 && m.Mask != full(field) {
			c.Mask = m.Mask
		}
		xs = append(xs, c)
	}
	switch len(xs) {
	case 0:
		return pred.Const(true)
	case 1:
		return xs[0]
	}
	return pred.And{X: xs}
}

// Order returns the entries of a table in the order the hardware tries
// them: higher priority first, then insertion order.
func (v *Value) Order() []int {
	idx := make([]int, len(v.Entries))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v.Entries[idx[a]].Priority > v.Entries[idx[b]].Priority })
	return idx
}

// ConfigError is a configuration that breaks a rule of its space. It
// names the node and the limit.
type ConfigError struct {
	Node string
	Msg  string
}

func (e *ConfigError) Error() string { return e.Node + ": " + e.Msg }

// Validate checks a configuration against the model: capacities, which
// fields may be matched, wildcarded or masked, priority ranges, the global
// mask rule, actions and hash targets. It returns every violation.
func (m *Model) Validate(c *Config) []*ConfigError {
	var errs []*ConfigError
	bad := func(node, format string, args ...any) {
		errs = append(errs, &ConfigError{Node: node, Msg: fmt.Sprintf(format, args...)})
	}
	for _, node := range slices.Sorted(maps.Keys(c.Values)) {
		v := c.Values[node]
		sp := m.Space(node)
		if sp == nil {
			bad(node, "is not a configuration node of %s", m.Name)
			continue
		}
		if v.Kind != sp.Kind {
			bad(node, "is configured as %s, but it is a %s", v.Kind, sp.Kind)
			continue
		}
		switch sp.Kind {
		case Enum:
			if !slices.Contains(sp.Choices, v.Choice) {
				bad(node, "has no port %q to choose (ports: %v)", v.Choice, sp.Choices)
			}
		case Table:
			m.validateTable(sp, v, bad)
		case Hash:
			if v.Indirection == nil {
				continue
			}
			if len(v.Indirection) != sp.Buckets {
				bad(node, "the indirection table has %d buckets, the hardware has %d", len(v.Indirection), sp.Buckets)
			}
			targets := map[string]bool{}
			for _, t := range v.Indirection {
				if !slices.Contains(sp.Actions, t) {
					bad(node, "bucket target %q is not a successor of port %s", t, sp.ActionPort)
					break
				}
				targets[t] = true
			}
			if len(targets) > sp.MaxTargets {
				bad(node, "spreads over %d targets; the hardware spreads over at most %d", len(targets), sp.MaxTargets)
			}
		case Place:
			for task, eng := range v.Placement {
				if !slices.ContainsFunc(m.Tasks, func(t *Task) bool { return t.Name == task }) {
					bad(node, "places unknown task %q", task)
				}
				if !slices.ContainsFunc(m.Engine, func(e *Engine) bool { return e.Name == eng }) {
					bad(node, "places task %q on unknown engine %q", task, eng)
				}
			}
		case Program:
			validateProgram(sp, v, bad)
		}
	}
	return errs
}

func (m *Model) validateTable(sp *Space, v *Value, bad func(string, string, ...any)) {
	node := sp.Node
	if sp.Capacity > 0 && len(v.Entries) > sp.Capacity {
		bad(node, "table holds at most %d entries; the configuration has %d", sp.Capacity, len(v.Entries))
	}
	var globalMask map[string]uint64
	for i, e := range v.Entries {
		where := fmt.Sprintf("entry %d", i)
		if e.Drop && !sp.CanDrop {
			bad(node, "%s drops, but this table's entries can only steer", where)
		}
		if !e.Drop && !slices.Contains(sp.Actions, e.Action) {
			bad(node, "%s steers to %q, which is not a successor of port %s", where, e.Action, sp.ActionPort)
		}
		if sp.PrioHi > sp.PrioLo && (e.Priority < sp.PrioLo || e.Priority > sp.PrioHi) {
			bad(node, "%s has priority %d outside %d..%d", where, e.Priority, sp.PrioLo, sp.PrioHi)
		}
		if sp.PrioHi == sp.PrioLo && e.Priority != sp.PrioLo {
			bad(node, "%s has priority %d; this table has no priorities", where, e.Priority)
		}
		masks := map[string]uint64{}
		seen := map[string]bool{}
		for _, fm := range e.Match {
			if !slices.Contains(sp.Fields, fm.Field) {
				bad(node, "%s matches %s; the table matches only %v", where, fm.Field, sp.Fields)
				continue
			}
			if seen[fm.Field] {
				bad(node, "%s matches %s twice", where, fm.Field)
			}
			seen[fm.Field] = true
			mask := fm.Mask
			if mask == 0 {
				mask = full(fm.Field)
			}
			if mask&^full(fm.Field) != 0 {
				bad(node, "%s: mask %#x is wider than %s", where, fm.Mask, fm.Field)
			}
			if mask != full(fm.Field) && !slices.Contains(sp.Masked, fm.Field) {
				bad(node, "%s masks %s, which this table matches only exactly", where, fm.Field)
			}
			if fm.Value&^mask != 0 {
				bad(node, "%s: value %#x has bits outside its mask %#x", where, fm.Value, mask)
			}
			masks[fm.Field] = mask
		}
		for _, f := range sp.Fields {
			if !seen[f] {
				masks[f] = 0
				if !slices.Contains(sp.Wildcard, f) && !slices.Contains(sp.Masked, f) {
					bad(node, "%s leaves out %s, which every entry must match", where, f)
				}
			}
		}
		if sp.GlobalMask {
			if globalMask == nil {
				globalMask = masks
			} else {
				for _, f := range sp.Fields {
					if globalMask[f] != masks[f] {
						bad(node, "%s masks %s with %#x, entry 0 with %#x: every entry of this table must use one mask set", where, f, masks[f], globalMask[f])
						break
					}
				}
			}
		}
	}
}

// Apply turns a PRG and a configuration into a configured PRG: every
// configuration node becomes an F-node whose ports carry predicates, and
// node IDs are kept. The configuration must be valid.
func (m *Model) Apply(c *Config) (*graph.Graph, error) {
	if errs := m.Validate(c); len(errs) > 0 {
		return nil, errs[0]
	}
	g := m.G.Clone()
	for _, sp := range m.Spaces {
		n := g.Nodes[sp.ID]
		v := c.Values[sp.Node]
		orig := m.G.Nodes[sp.ID]
		n.Kind = graph.FNode
		n.ConfType, n.ConfSpec = nil, nil
		switch sp.Kind {
		case Enum:
			choice := sp.Choices[0]
			if v != nil {
				choice = v.Choice
			}
			p := orig.Port(choice)
			n.Ports = []*graph.Port{{Name: p.Name, Succ: slices.Clone(p.Succ)}}
		case Table:
			n.Ports = nil
			if v != nil {
				for _, i := range v.Order() {
					e := v.Entries[i]
					port := &graph.Port{Name: fmt.Sprintf("entry%d", i), Pred: e.Predicate(sp)}
					if !e.Drop {
						target, _ := g.Lookup(e.Action)
						port.Succ = []int{target.ID}
					}
					n.Ports = append(n.Ports, port)
				}
			}
			miss := orig.Port(sp.MissPort)
			n.Ports = append(n.Ports, &graph.Port{Name: sp.MissPort, Succ: slices.Clone(miss.Succ)})
		case Hash:
			n.Ports = nil
			if v != nil && v.Indirection != nil {
				for _, target := range sp.Actions {
					var buckets []pred.Range
					for b, t := range v.Indirection {
						if t == target {
							buckets = append(buckets, pred.Range{Lo: uint64(b), Hi: uint64(b)})
						}
					}
					if len(buckets) == 0 {
						continue
					}
					tn, _ := g.Lookup(target)
					field := "rss.hash"
					if sp.Identity {
						field = sp.Fields[0]
					}
					c := pred.Cmp{Field: field, ID: pred.Fields[field].ID, Mask: uint64(sp.Buckets - 1), Op: pred.In, Ranges: mergeRanges(buckets)}
					if c.Mask == full(field) {
						c.Mask = 0
					}
					var p pred.Expr = c
					if !sp.Identity {
						// RSS hashes IPv4 frames whose header it can read.
						p = pred.And{X: []pred.Expr{hashable, c}}
					}
					n.Ports = append(n.Ports, &graph.Port{Name: "to" + target, Succ: []int{tn.ID}, Pred: p})
				}
			}
			miss := orig.Port(sp.MissPort)
			mp := &graph.Port{Name: sp.MissPort, Succ: slices.Clone(miss.Succ)}
			if v != nil && v.Indirection != nil && !sp.Identity {
				// Every hashable frame has a bucket; the rest miss.
				mp.Pred = pred.Not{X: hashable}
			}
			n.Ports = append(n.Ports, mp)
		case Place:
			// Placement decides where tasks run, not where packets go.
		case Program:
			applyProgram(g, n, orig, v)
		}
	}
	return g, nil
}

// hashable holds for the frames an RSS engine hashes: IPv4 with a header
// it can read (internal/packet.RSSHash).
var hashable = pred.MustParse("ip.hdr_ok == 1")

// FrameHash is the hash a hash node computes for a decoded frame: the
// Toeplitz hash of RSS, or the Myri-10G port hash (packet.PortSumHash).
// ok is false for a frame the node does not hash (not IPv4 with a
// readable header: it takes the miss port). An identity hash computes
// nothing: ok is false.
func (sp *Space) FrameHash(f *packet.Frame) (uint32, bool) {
	switch {
	case sp.Identity:
		return 0, false
	case sp.PortSum:
		return packet.PortSumHash(f, sp.TCPPorts, sp.UDPPorts)
	}
	return packet.RSSHash(f, sp.Key, sp.TCPPorts, sp.UDPPorts)
}

// TupleHash is FrameHash for a flow known by its fields: an IPv4 flow of
// protocol proto between src:sport and dst:dport. ok is false for an
// identity hash.
func (sp *Space) TupleHash(src, dst uint32, proto uint8, sport, dport uint16) (uint32, bool) {
	withPorts := packet.PortsHashed(uint64(proto), sp.TCPPorts, sp.UDPPorts)
	switch {
	case sp.Identity:
		return 0, false
	case sp.PortSum:
		if !withPorts {
			return 0, true
		}
		return packet.PortSum(sport, dport), true
	}
	return packet.HashTuple(sp.Key, src, dst, sport, dport, withPorts), true
}

func mergeRanges(rs []pred.Range) []pred.Range {
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Hi+1 == r.Lo {
			out[n-1].Hi = r.Hi
			continue
		}
		out = append(out, r)
	}
	return out
}

// SpreadEvenly builds an indirection table that spreads buckets round-robin
// over targets, like `ethtool -X IF equal N`.
func SpreadEvenly(sp *Space, targets []string) []string {
	out := make([]string, sp.Buckets)
	for b := range out {
		out[b] = targets[SpreadIndex(b, len(targets))]
	}
	return out
}

// SpreadIndex is the target SpreadEvenly gives a bucket, of n targets.
func SpreadIndex(bucket, n int) int { return bucket % n }

// Bucket is the indirection-table bucket an RSS hash selects: its low
// bits (the port predicates of a configured hash node test the same mask).
func (sp *Space) Bucket(hash uint32) int { return int(hash & uint32(sp.Buckets-1)) }
