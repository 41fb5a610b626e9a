// Package prg gives Physical Resource Graphs their meaning: the
// configuration space of every configuration node (the generic kinds enum,
// table, hash and place of docs/language.md section 2), validation of a
// configuration against it, Apply that turns a PRG and a configuration into
// a configured PRG of F- and O-nodes only, and an interpreter that runs a
// configured PRG on a raw frame.
package prg

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
)

// Kind is a generic configuration kind.
type Kind string

// The configuration kinds.
const (
	Enum  Kind = "enum"
	Table Kind = "table"
	Hash  Kind = "hash"
	Place Kind = "place"
	// Program is a programmable stage (the eBPF stage of linux-xdp): its
	// value is the LPG nodes the embedder placed there (prg/program.go).
	Program Kind = "program"
)

// Model is a PRG with the meaning of its configuration nodes worked out.
type Model struct {
	G      *graph.Graph
	Name   string
	Queues []Queue                // receive queues in ID order
	Spaces []*Space               // one per configuration node, in declaration order
	Engine []*Engine              // engines declared with `engine`
	Tasks  []*Task                // tasks declared with `task`
	Props  map[string]graph.Value // graph-level `resources` properties by key
	// Dragonet is set when the model follows Dragonet's conventions
	// (prg/dragonet.go) rather than dragonc's.
	Dragonet bool
	// Foreign lists the pred(NODE,PORT) atoms of its port predicates that
	// name no node of the model: Dragonet's models name LPG nodes so
	// (prg/foreign.go); an embedding resolves them against its LPG.
	Foreign  []ForeignAtom
	byNode   map[string]*Space
	queueOf  []int // by node ID: the receive queue it is, or -1
	reported []bool
	// actionQueue maps the nodes a filter action may name to the queue
	// they lead to: queues, and the OR gates in front of them.
	actionQueue map[string]int
	txQueues    []int // transmit queue nodes
}

// Queue is a receive queue: in dragonc's models a node marked "source"
// whose name ends in its number (RxQueue3), in Dragonet's a node whose
// label is RxQueue and its number. Transmit queues, whose names start
// with Tx, are sources of the transmit path and not receive queues.
type Queue struct {
	ID   int
	Node int
	Name string
}

// Bounds of an RSS key.
const (
	MinRSSKey = 16
	MaxRSSKey = 256
)

// Space is the configuration space of one configuration node.
type Space struct {
	Node     string
	ID       int
	Kind     Kind
	Function string // the Unicorn configuration function, if any
	// Table and hash: the port whose successors are the actions, and the
	// port taken on a miss (or by frames a hash does not cover).
	ActionPort string
	MissPort   string
	Actions    []string // successor node names of the action port
	// ActionQueue maps action nodes to the receive queue they lead to
	// (shared with the model; read only).
	ActionQueue map[string]int
	// Enum: the ports to choose from.
	Choices []string
	// Table.
	Fields     []string // fields an entry may match
	Wildcard   []string // fields an entry may leave out
	Masked     []string // fields that take an arbitrary bit mask
	GlobalMask bool     // every entry must use the same masks
	Capacity   int      // 0: unbounded
	PrioLo     int
	PrioHi     int
	CanDrop    bool
	When       pred.Expr // a condition every entry implies (e.g. TCP SYN)
	// Hash.
	Buckets    int
	MaxTargets int
	Key        []byte
	TCPPorts   bool
	UDPPorts   bool
	// Identity hashing uses the one field in Fields as the bucket index
	// (the Open-MX firmware mode hashes the destination endpoint byte);
	// the default is the Toeplitz hash of RSS.
	Identity bool
	// PortSum: the hash is the Myri-10G firmware's port hash
	// (packet.PortSum) over the TCP and UDP ports, not Toeplitz
	// (algorithm port_sum).
	PortSum bool
	// Enum: the NIC feature the switch's "on" port turns on, if it is one
	// a driver exposes (property feature; FeatureRxChecksum, ...).
	Feature string
	// Place.
	TaskKind string
	// Program: the LPG nodes the stage can run (Runs), those of them
	// whose failing frames it may drop (Drops; the others hand such
	// frames on through the out port), and the limits that keep a node
	// off the stage (Limits: node -> why).
	Runs    []string
	Drops   []string
	Answers []string // terminal LPG nodes it answers for (the answer built in place and sent back)
	Limits  map[string]string
	// Guards: node -> the frames the stage runs it on; the others it
	// hands on through the out port before the node (a check the stage
	// can do for frames up to some length).
	Guards map[string]pred.Expr
}

// Features an enum switch may control (its feature property).
const (
	FeatureRxChecksum = "rx_checksum" // receive checksum verification (ethtool -K rx)
	FeatureTxChecksum = "tx_checksum" // transmit checksum insertion (ethtool -K tx)
	FeatureOpenMXHash = "openmx_hash" // Myri-10G firmware hashing of Open-MX endpoints
)

// Engine is a processing engine: a NIC core, a host core, a copy engine.
type Engine struct {
	Name  string
	Kind  string
	Props map[string]graph.Value
}

// Engine kinds dragonc acts on (docs/language.md).
const (
	EngineNICCore = "nic-core" // a programmable NIC's processor: tasks are placed on it
	EngineCopy    = "copy"     // a copy engine (I/OAT): payload copies may move to it
	EngineVIA     = "via"      // a Virtual Interface provider for stream endpoints
)

// Feature returns the driver feature the enum switch node turns on
// (Space.Feature), or "" when node is no such switch.
func (m *Model) Feature(node string) string {
	if sp := m.Space(node); sp != nil {
		return sp.Feature
	}
	return ""
}

// TaskTables returns the table nodes some task serves (Task.Tables), in
// the order of the tasks.
func (m *Model) TaskTables() []string {
	var out []string
	for _, t := range m.Tasks {
		for _, n := range t.Tables {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// Engines returns the model's engines of one kind, in declaration order.
func (m *Model) Engines(kind string) []*Engine {
	var out []*Engine
	for _, e := range m.Engine {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Task is a unit of work an engine can run (a firmware event handler).
type Task struct {
	Name  string
	Props map[string]graph.Value
	// Tables are the table nodes whose entries the task serves (its
	// `tables` property): a task with a cost per packet runs only while
	// one of them has entries, and the embedder may leave those tables
	// empty when the task would overload the engines.
	Tables []string
}

var queueName = regexp.MustCompile(`Queue(\d+)$`)

// unicornFields maps the tuple labels of Dragonet's filter types onto the
// field vocabulary.
var unicornFields = map[string]string{
	"sip": "ip.src", "dip": "ip.dst", "proto": "ip.proto", "sport": "l4.sport", "dport": "l4.dport",
	"sIP": "ip.src", "dIP": "ip.dst", "sPort": "l4.sport", "dPort": "l4.dport",
}

// NewModel works out the configuration spaces of a PRG. Problems with the
// model itself (an unknown property, a table without an action port) are
// diagnostics.
func NewModel(g *graph.Graph, file *diag.File) (*Model, diag.List) {
	var diags diag.List
	g, isDragonet := dragonet(g, file, &diags)
	m := &Model{G: g, Name: g.Name, Dragonet: isDragonet, byNode: map[string]*Space{}, Props: map[string]graph.Value{},
		queueOf: make([]int, len(g.Nodes)), reported: make([]bool, len(g.Nodes)), actionQueue: map[string]int{}}
	at := func(src graph.Source) diag.Range { return diag.Range{File: file, Start: src.Offset, End: src.Offset} }
	for _, n := range g.Nodes {
		m.queueOf[n.ID] = -1
		id := -1
		switch {
		case isDragonet:
			if mm := dragonetQueue.FindStringSubmatch(n.Name); mm != nil {
				id, _ = strconv.Atoi(mm[1]) // a bare RxQueue is queue 0
			}
		case dragoncQueue(n):
			id, _ = strconv.Atoi(queueName.FindStringSubmatch(n.Name)[1])
		}
		if isDragonet && strings.HasPrefix(n.Name, "TxQueue") || !isDragonet && n.HasAttr("source") && graph.Transmit(n.Name) && queueName.MatchString(n.Name) {
			m.txQueues = append(m.txQueues, n.ID)
		}
		if id >= 0 {
			m.queueOf[n.ID] = id
			m.Queues = append(m.Queues, Queue{ID: id, Node: n.ID, Name: n.Name})
			if _, dup := m.actionQueue[n.Name]; !dup {
				m.actionQueue[n.Name] = id
			}
		}
	}
	for _, n := range g.Nodes {
		m.reported[n.ID] = m.queueOf[n.ID] < 0 && n.HasAttr("software") && (!isDragonet || deadEnd(n))
		if n.Kind == graph.Or {
			if q, ok := m.gateQueue(n); ok {
				m.actionQueue[n.Name] = q
			}
		}
		if n.Kind != graph.Config {
			continue
		}
		sp, err := newSpace(n)
		if err != nil {
			diags.Errorf(at(n.Src), diag.CodeBadConfig, "configuration node %q: %v", n.Name, err)
			continue
		}
		sp.resolveActions(g)
		sp.ActionQueue = m.actionQueue
		m.Spaces = append(m.Spaces, sp)
		m.byNode[n.Name] = sp
	}
	sort.SliceStable(m.Queues, func(i, j int) bool { return m.Queues[i].ID < m.Queues[j].ID })
	for i := 1; i < len(m.Queues); i++ {
		if m.Queues[i].ID == m.Queues[i-1].ID {
			diags.Errorf(at(g.Nodes[m.Queues[i].Node].Src), diag.CodeDupQueue, "two receive queues are numbered %d", m.Queues[i].ID)
		}
	}
	for _, r := range g.Resources {
		props := map[string]graph.Value{}
		for _, p := range r.Props {
			props[p.Key] = p.Value
		}
		switch r.Kind {
		case "engine":
			kind := ""
			if v, ok := props["kind"]; ok {
				kind = v.Str
			}
			m.Engine = append(m.Engine, &Engine{Name: r.Name, Kind: kind, Props: props})
		case "task":
			t := &Task{Name: r.Name, Props: props}
			for _, v := range props["tables"].List {
				if sp := m.byNode[v.Str]; sp == nil || sp.Kind != Table {
					diags.Errorf(at(r.Src), diag.CodeNotATable, "task %s serves %q, which is not a table of the model", r.Name, v.Str)
					continue
				}
				t.Tables = append(t.Tables, v.Str)
			}
			m.Tasks = append(m.Tasks, t)
		case "resources":
			for k, v := range props {
				m.Props[k] = v
			}
		}
	}
	diags.Sort()
	m.Foreign = foreignAtoms(g, file)
	return m, diags
}

// Number returns a numeric graph-level resource property.
func (m *Model) Number(key string) (float64, bool) {
	v, ok := m.Props[key]
	if !ok || v.Kind != graph.NumValue {
		return 0, false
	}
	return v.Num, true
}

// Space returns the configuration space of a node.
func (m *Model) Space(node string) *Space { return m.byNode[node] }

// QueueByNode returns the queue whose node is id.
func (m *Model) QueueByNode(id int) (Queue, bool) {
	if id < 0 || id >= len(m.queueOf) || m.queueOf[id] < 0 {
		return Queue{}, false
	}
	return Queue{ID: m.queueOf[id], Node: id, Name: m.G.Nodes[id].Name}, true
}

// QueueIndex returns the number of the queue a node leads to, or -1: the
// queue itself, or the OR gate in front of it that a filter entry of a
// Dragonet model names as its action.
func (m *Model) QueueIndex(name string) int {
	if id, ok := m.actionQueue[name]; ok {
		return id
	}
	return -1
}

// TxPath returns the names of the nodes a frame handed to the first
// transmit queue passes in a configured PRG (Apply's graph), the queue
// itself left out, in the order they run: what the NIC does to every
// frame it sends (checksum insertion when it is switched on).
func (m *Model) TxPath(hw *graph.Graph) []string {
	if len(m.txQueues) == 0 {
		return nil
	}
	var out []string
	seen := map[int]bool{m.txQueues[0]: true}
	next := []int{m.txQueues[0]}
	for len(next) > 0 {
		id := next[0]
		next = next[1:]
		if id != m.txQueues[0] {
			out = append(out, hw.Nodes[id].Name)
		}
		for _, p := range hw.Nodes[id].Ports {
			for _, s := range p.Succ {
				if !seen[s] {
					seen[s] = true
					next = append(next, s)
				}
			}
		}
	}
	return out
}

// IsQueue reports whether node id is a receive queue.
func (m *Model) IsQueue(id int) bool { return id < len(m.queueOf) && m.queueOf[id] >= 0 }

// Reported reports whether node id is a check whose outcome the NIC
// writes into the receive descriptor instead of acting on it: software
// reads the result (attr "software"; in Dragonet's models, where the
// attribute is a drawing hint, only such a node that leads nowhere).
// Nodes a program value adds (Apply) are never reported.
func (m *Model) Reported(id int) bool { return id < len(m.reported) && m.reported[id] }

// ActionFor returns the action of sp that leads to queue id.
func (sp *Space) ActionFor(id int) (string, bool) {
	for _, a := range sp.Actions {
		if q, ok := sp.ActionQueue[a]; ok && q == id {
			return a, true
		}
	}
	return "", false
}

// gateQueue returns the queue an OR gate leads to when its true port
// leads to exactly that queue and its other ports nowhere.
func (m *Model) gateQueue(n *graph.Node) (int, bool) {
	q := -1
	for _, p := range n.Ports {
		switch {
		case p.Name == "true" && len(p.Succ) == 1 && m.queueOf[p.Succ[0]] >= 0:
			q = m.queueOf[p.Succ[0]]
		case len(p.Succ) > 0:
			return 0, false
		}
	}
	return q, q >= 0
}

// deadEnd reports whether no port of n leads anywhere.
func deadEnd(n *graph.Node) bool {
	for _, p := range n.Ports {
		if len(p.Succ) > 0 {
			return false
		}
	}
	return true
}

func newSpace(n *graph.Node) (*Space, error) {
	sp := &Space{Node: n.Name, ID: n.ID, Function: n.ConfFunc, ActionPort: "queues", MissPort: "default"}
	kind := Enum
	var props []graph.Prop
	switch {
	case n.ConfSpec != nil:
		kind = Kind(n.ConfSpec.Kind)
		props = n.ConfSpec.Props
	case n.ConfFunc == "config5tuple" || n.ConfFunc == "configFDir":
		kind = Table
	case n.ConfFunc == "configRxQueues" || n.ConfFunc == "configTxQueues" || n.ConfFunc == "queueConfig":
		kind = Enum
	}
	sp.Kind = kind
	// Unicorn filter types describe the entries: take fields, optional
	// (wildcard) fields, the priority range and the capacity from them.
	if kind == Table && n.ConfSpec == nil {
		if err := sp.fromUnicornType(n); err != nil {
			return nil, err
		}
		if n.ConfFunc == "configFDir" {
			sp.GlobalMask = true
		}
	}
	for _, p := range props {
		if err := sp.set(p); err != nil {
			return nil, fmt.Errorf("property %s: %w", p.Key, err)
		}
	}
	switch kind {
	case Enum:
		for _, p := range n.Ports {
			sp.Choices = append(sp.Choices, p.Name)
		}
		if len(sp.Choices) == 0 {
			return nil, fmt.Errorf("an enum configuration needs at least one port to choose")
		}
	case Table, Hash:
		ap := n.Port(sp.ActionPort)
		if ap == nil {
			return nil, fmt.Errorf("no action port %q", sp.ActionPort)
		}
		if n.Port(sp.MissPort) == nil {
			return nil, fmt.Errorf("no miss port %q", sp.MissPort)
		}
		for _, p := range n.Ports {
			if p.Name != sp.ActionPort && p.Name != sp.MissPort {
				return nil, fmt.Errorf("port %q is neither the action port %q nor the miss port %q", p.Name, sp.ActionPort, sp.MissPort)
			}
		}
		if kind == Hash {
			if sp.Buckets <= 0 || sp.Buckets&(sp.Buckets-1) != 0 {
				return nil, fmt.Errorf("buckets must be a power of two, not %d", sp.Buckets)
			}
			if sp.Key == nil {
				sp.Key = packet.DefaultRSSKey
			}
			if sp.Identity && len(sp.Fields) != 1 {
				return nil, fmt.Errorf("identity hashing takes exactly one field")
			}
			if sp.PortSum && (!slices.Equal(sp.Fields, []string{"l4.sport", "l4.dport"}) || !sp.TCPPorts && !sp.UDPPorts) {
				return nil, fmt.Errorf("port_sum hashing takes fields [l4.sport l4.dport] and ports [tcp udp] (or one of them)")
			}
			if sp.MaxTargets == 0 {
				sp.MaxTargets = len(ap.Succ)
			}
		}
	case Place:
	case Program:
		if n.Port(ProgramOut) == nil || len(n.Ports) != 1 {
			return nil, fmt.Errorf("a program stage has one port, %q: where frames it does not decide go on", ProgramOut)
		}
		for _, d := range sp.Drops {
			if !slices.Contains(sp.Runs, d) {
				return nil, fmt.Errorf("drops %s, which the stage does not run", d)
			}
		}
		for _, d := range slices.Sorted(maps.Keys(sp.Guards)) {
			if !slices.Contains(sp.Runs, d) {
				return nil, fmt.Errorf("guards %s, which the stage does not run", d)
			}
		}
	default:
		return nil, fmt.Errorf("unknown configuration kind %q", kind)
	}
	return sp, nil
}

// resolveActions resolves the successors of the action port; g is needed for names.
func (sp *Space) resolveActions(g *graph.Graph) {
	n := g.Nodes[sp.ID]
	if ap := n.Port(sp.ActionPort); ap != nil {
		sp.Actions = sp.Actions[:0]
		for _, s := range ap.Succ {
			sp.Actions = append(sp.Actions, g.Nodes[s].Name)
		}
	}
}

func (sp *Space) fromUnicornType(n *graph.Node) error {
	t := n.ConfType
	if t == nil || t.Kind != graph.ListType || t.Elem == nil || t.Elem.Kind != graph.TupleType {
		return fmt.Errorf("function %s needs a type that is a list of tuples", n.ConfFunc)
	}
	if t.LenMax > 0 {
		sp.Capacity = t.LenMax
	}
	for _, f := range t.Elem.Fields {
		ft := f.Type
		optional := ft.Kind == graph.MaybeType
		if optional {
			ft = ft.Elem
		}
		switch {
		case unicornFields[f.Label] != "":
			field := unicornFields[f.Label]
			sp.Fields = append(sp.Fields, field)
			if optional {
				sp.Wildcard = append(sp.Wildcard, field)
			}
		case f.Label == "prio" && ft.Kind == graph.IntType:
			sp.PrioLo, sp.PrioHi = int(ft.Min), int(ft.Max)
		}
	}
	return nil
}

func (sp *Space) set(p graph.Prop) error {
	v := p.Value
	names := func() ([]string, error) {
		if v.Kind != graph.ListValue {
			return nil, fmt.Errorf("want a list of names in [ ]")
		}
		var out []string
		for _, e := range v.List {
			if e.Kind != graph.NameValue {
				return nil, fmt.Errorf("want names, found %s", e)
			}
			out = append(out, e.Str)
		}
		return out, nil
	}
	fields := func() ([]string, error) {
		out, err := names()
		if err != nil {
			return nil, err
		}
		for _, f := range out {
			if _, ok := pred.Fields[f]; !ok {
				return nil, fmt.Errorf("unknown field %q", f)
			}
		}
		return out, nil
	}
	num := func() (int, error) {
		if v.Kind != graph.NumValue || v.Range || v.Num != float64(int(v.Num)) || v.Num < 0 {
			return 0, fmt.Errorf("want a whole number, 0 or more")
		}
		return int(v.Num), nil
	}
	boolean := func() (bool, error) {
		if v.Kind == graph.NameValue && (v.Str == "true" || v.Str == "false") {
			return v.Str == "true", nil
		}
		return false, fmt.Errorf("want true or false")
	}
	name := func() (string, error) {
		if v.Kind != graph.NameValue {
			return "", fmt.Errorf("want a name")
		}
		return v.Str, nil
	}
	var err error
	switch p.Key {
	case "fields":
		sp.Fields, err = fields()
	case "wildcard":
		sp.Wildcard, err = fields()
	case "masks":
		sp.Masked, err = fields()
	case "global_mask":
		sp.GlobalMask, err = boolean()
	case "capacity":
		sp.Capacity, err = num()
		if err == nil && sp.Capacity == 0 {
			// An absent capacity means no limit; 0 would read as the same.
			err = fmt.Errorf("capacity 0 holds no entry; leave capacity out for a table without a limit")
		}
	case "priority":
		if v.Kind != graph.NumValue || !v.Range {
			return fmt.Errorf("want a range LO..HI")
		}
		sp.PrioLo, sp.PrioHi = int(v.Num), int(v.Hi)
	case "drop":
		sp.CanDrop, err = boolean()
	case "action":
		sp.ActionPort, err = name()
	case "miss":
		sp.MissPort, err = name()
	case "when":
		if v.Kind != graph.StrValue {
			return fmt.Errorf("want a predicate in a string")
		}
		sp.When, err = pred.Parse(v.Str)
	case "buckets":
		sp.Buckets, err = num()
	case "max_targets":
		sp.MaxTargets, err = num()
	case "key":
		if v.Kind != graph.StrValue {
			return fmt.Errorf("want the key as a hexadecimal string")
		}
		sp.Key, err = parseHex(v.Str)
		if err == nil && (len(sp.Key) < MinRSSKey || len(sp.Key) > MaxRSSKey) {
			// Toeplitz slides a 32-bit window over the key, one bit per
			// input bit: an IPv4 input of addresses and ports (12 bytes)
			// needs 4 + 12 key bytes (Microsoft RSS specification).
			err = fmt.Errorf("an RSS key is %d..%d bytes (4 bytes more than the 12-byte IPv4 input); this one has %d", MinRSSKey, MaxRSSKey, len(sp.Key))
		}
	case "ports":
		var protos []string
		protos, err = names()
		for _, p := range protos {
			switch p {
			case "tcp":
				sp.TCPPorts = true
			case "udp":
				sp.UDPPorts = true
			default:
				return fmt.Errorf("ports are hashed for tcp and udp, not %q", p)
			}
		}
	case "tasks":
		sp.TaskKind, err = name()
	case "runs":
		sp.Runs, err = names()
	case "drops":
		sp.Drops, err = names()
	case "answers":
		sp.Answers, err = names()
	case "limits":
		// limits ["NODE: why the stage cannot run it" ...]
		if v.Kind != graph.ListValue {
			return fmt.Errorf("want a list of \"NODE: reason\" strings in [ ]")
		}
		sp.Limits = map[string]string{}
		for _, e := range v.List {
			node, why, ok := strings.Cut(e.Str, ":")
			if e.Kind != graph.StrValue || !ok || strings.TrimSpace(why) == "" {
				return fmt.Errorf("want \"NODE: reason\", not %s", e)
			}
			sp.Limits[strings.TrimSpace(node)] = strings.TrimSpace(why)
		}
	case "guards":
		// guards ["NODE: predicate" ...]
		if v.Kind != graph.ListValue {
			return fmt.Errorf("want a list of \"NODE: predicate\" strings in [ ]")
		}
		sp.Guards = map[string]pred.Expr{}
		for _, e := range v.List {
			node, cond, ok := strings.Cut(e.Str, ":")
			if e.Kind != graph.StrValue || !ok {
				return fmt.Errorf("want \"NODE: predicate\", not %s", e)
			}
			x, perr := pred.Parse(strings.TrimSpace(cond))
			if perr != nil {
				return fmt.Errorf("guard of %s: %w", strings.TrimSpace(node), perr)
			}
			sp.Guards[strings.TrimSpace(node)] = x
		}
	case "feature":
		sp.Feature, err = name()
		switch sp.Feature {
		case FeatureRxChecksum, FeatureTxChecksum, FeatureOpenMXHash:
		default:
			if err == nil {
				err = fmt.Errorf("features are %s, %s and %s, not %q", FeatureRxChecksum, FeatureTxChecksum, FeatureOpenMXHash, sp.Feature)
			}
		}
	case "algorithm":
		var alg string
		alg, err = name()
		switch alg {
		case "toeplitz":
		case "identity":
			sp.Identity = true
		case "port_sum":
			sp.PortSum = true
		default:
			return fmt.Errorf("hash algorithms are toeplitz, identity and port_sum, not %q", alg)
		}
	default:
		return fmt.Errorf("unknown property")
	}
	if err == nil {
		for _, f := range sp.Wildcard {
			if !slices.Contains(sp.Fields, f) {
				return fmt.Errorf("wildcard field %s is not among the fields", f)
			}
		}
		for _, f := range sp.Masked {
			if !slices.Contains(sp.Fields, f) {
				return fmt.Errorf("masked field %s is not among the fields", f)
			}
		}
	}
	return err
}

func parseHex(s string) ([]byte, error) {
	s = strings.NewReplacer(":", "", " ", "").Replace(s)
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("odd number of hex digits")
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		b, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("bad hex digit in %q", s[2*i:2*i+2])
		}
		out[i] = byte(b)
	}
	return out, nil
}
