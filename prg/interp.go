package prg

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
)

// Interp runs a configured PRG on raw frames. It is not safe for
// concurrent use; make one per goroutine.
type Interp struct {
	Model *Model
	G     *graph.Graph // the configured PRG
	prog  *graph.Program
	hash  *Space
	on    bool // hashing configured
	frame packet.Frame
	trace *graph.Trace
	// software lists the nodes whose outcome the hardware reports in the
	// receive descriptor (Model.Reported).
	software []int
	answers  []int // the answering nodes of programmable stages
}

// Result is what the hardware did with one frame.
type Result struct {
	Queue    int    // receive queue, -1 when the NIC dropped the frame
	DropNode string // the node that dropped it
	DropPort string
	// Answer is the attributes of the node of a programmable stage that
	// answered the frame (the reply, lpg.AttrReply), when one did.
	Answer  []string
	Hash    uint32 // RSS hash, when HasHash
	HasHash bool
	in      *Interp
}

// NewInterp applies a configuration and prepares the configured PRG.
func NewInterp(m *Model, c *Config) (*Interp, error) {
	g, err := m.Apply(c)
	if err != nil {
		return nil, err
	}
	if len(g.Nodes) == 0 {
		return nil, fmt.Errorf("%s has no nodes", m.Name)
	}
	prog, err := graph.Compile(g, 0)
	if err != nil {
		return nil, err
	}
	in := &Interp{Model: m, G: g, prog: prog, trace: prog.NewTrace()}
	for _, sp := range m.Spaces {
		if sp.Kind == Hash && !sp.Identity {
			in.hash = sp
			if v := c.Values[sp.Node]; v != nil && v.Indirection != nil {
				in.on = true
			}
		}
	}
	for _, n := range g.Nodes {
		if m.Reported(n.ID) {
			in.software = append(in.software, n.ID)
		}
		if len(n.Ports) == 0 && slices.ContainsFunc(n.Attrs, func(a string) bool { return strings.HasPrefix(a, AttrStage) }) {
			in.answers = append(in.answers, n.ID)
		}
	}
	return in, nil
}

// Frame returns the decoded frame of the last Run.
func (in *Interp) Frame() *packet.Frame { return &in.frame }

// Run sends one frame through the NIC. crcOK says whether the frame's
// Ethernet CRC was good (captures carry no FCS, so callers pass true).
func (in *Interp) Run(b []byte, crcOK bool) Result {
	f := &in.frame
	f.Decode(b)
	r := Result{Queue: -1, in: in}
	if in.hash != nil && in.on {
		r.Hash, r.HasHash = in.hash.FrameHash(f)
	}
	f.SetMeta(crcOK, r.Hash, r.HasHash)
	in.prog.Run(f, in.trace)
	for _, q := range in.Model.Queues {
		if in.trace.Fired(q.Node) {
			r.Queue = q.ID
			break
		}
	}
	for _, id := range in.answers {
		if r.Queue < 0 && in.trace.Fired(id) {
			r.Answer = in.G.Nodes[id].Attrs[1:]
		}
	}
	if r.Queue < 0 && r.Answer == nil {
		r.DropNode, r.DropPort = in.dropper()
	}
	return r
}

// dropper finds the first node, in execution order, that fired and
// enabled a port leading nowhere; side branches whose outcome is reported
// in the descriptor do not count.
func (in *Interp) dropper() (string, string) {
	g := in.G
	for _, n := range g.Nodes {
		if !in.trace.Fired(n.ID) || in.Model.Reported(n.ID) {
			continue
		}
		p := in.trace.Enabled(g, n.ID)
		if p == nil {
			if len(n.Ports) > 0 {
				return n.Name, "(no port)"
			}
			continue
		}
		if len(p.Succ) == 0 {
			return n.Name, p.Name
		}
	}
	return "", ""
}

// Atom answers pred(NODE,PORT) for the nodes whose outcome the NIC reports
// in the receive descriptor: true when NODE fired and enabled PORT.
func (r Result) Atom(a pred.Atom) bool {
	in := r.in
	n, ok := in.G.Lookup(a.Name)
	if !ok || !in.Model.Reported(n.ID) {
		return false
	}
	p := in.trace.Enabled(in.G, n.ID)
	return p != nil && p.Name == a.Value
}

// Reported returns, for every descriptor-reported node that fired, its
// node and port, in node order.
func (r Result) Reported() [][2]string {
	var out [][2]string
	for _, id := range r.in.software {
		if p := r.in.trace.Enabled(r.in.G, id); p != nil {
			out = append(out, [2]string{r.in.G.Nodes[id].Name, p.Name})
		}
	}
	return out
}

// Path returns the nodes the last frame passed through, in execution
// order, with the port each enabled (table entries are ports "entryN").
func (in *Interp) Path() []graph.Step { return in.prog.Path(in.trace) }
