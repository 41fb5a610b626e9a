package lpg

import (
	"fmt"
	"strings"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
)

// Kind is what happened to a packet.
type Kind int

// Outcome kinds.
const (
	Drop    Kind = iota // a check failed or nothing wanted the packet
	Deliver             // an endpoint received it
	Reply               // the stack answered it (ARP, ICMP echo)
	Sink                // a named sink took it (fragments, port unreachable, reset)
)

// Outcome is the fate of one packet. Two runs treat a packet the same way
// exactly when their outcomes are equal.
type Outcome struct {
	Kind     Kind
	Endpoint string // Deliver
	Reply    string // Reply: arp, icmp-echo
	Node     string // Drop and Sink: the node that decided
	Port     string // Drop: the port it took
}

func (o Outcome) String() string {
	switch o.Kind {
	case Deliver:
		return "deliver " + o.Endpoint
	case Reply:
		return "reply " + o.Reply
	case Sink:
		return "sink " + o.Node
	}
	if o.Node == "" {
		return "drop"
	}
	return "drop " + o.Node + "." + o.Port
}

// Interp is the reference interpreter: an LPG run in software on raw
// frames. It is not safe for concurrent use.
type Interp struct {
	G     *graph.Graph
	prog  *graph.Program
	trace *graph.Trace
	frame packet.Frame
	// term[id] is the outcome node id stands for when it fires (an
	// endpoint, a reply or a sink); isTerm[id] says whether it has one.
	term   []Outcome
	isTerm []bool
}

// NewInterp prepares an LPG for execution from its first node.
func NewInterp(g *graph.Graph) (*Interp, error) {
	if len(g.Nodes) == 0 {
		return nil, fmt.Errorf("graph %s has no nodes", g.Name)
	}
	prog, err := graph.Compile(g, 0)
	if err != nil {
		return nil, err
	}
	in := &Interp{G: g, prog: prog, trace: prog.NewTrace(), term: make([]Outcome, len(g.Nodes)), isTerm: make([]bool, len(g.Nodes))}
	for _, n := range g.Nodes {
		if graph.Transmit(n.Name) {
			continue // the transmit path is spawned, not run on receive
		}
		in.term[n.ID], in.isTerm[n.ID] = Terminal(n)
	}
	return in, nil
}

// Terminal reports the outcome a node stands for when it fires, if it is
// an endpoint, a reply or a sink (its attributes, set at derivation).
func Terminal(n *graph.Node) (Outcome, bool) {
	for _, a := range n.Attrs {
		switch {
		case strings.HasPrefix(a, AttrEndpoint):
			return Outcome{Kind: Deliver, Endpoint: a[len(AttrEndpoint):]}, true
		case strings.HasPrefix(a, AttrReply):
			return Outcome{Kind: Reply, Reply: a[len(AttrReply):]}, true
		case a == AttrSink:
			return Outcome{Kind: Sink, Node: n.Name}, true
		}
	}
	return Outcome{}, false
}

// Run decodes a frame and runs the LPG on it. crcOK is the NIC's CRC
// verdict (captures carry no FCS: pass true).
func (in *Interp) Run(b []byte, crcOK bool) Outcome {
	in.frame.Decode(b)
	in.frame.SetMeta(crcOK, 0, false)
	return in.RunEnv(&in.frame)
}

// RunEnv runs the LPG against any environment: frame fields plus, for an
// embedded stack, the outcomes the NIC reported.
func (in *Interp) RunEnv(env pred.Env) Outcome {
	in.prog.Run(env, in.trace)
	return in.outcome()
}

func (in *Interp) outcome() Outcome {
	// The terminal declared first decides, among those that fired.
	fired := in.trace.FiredOrder()
	first := -1
	for _, id := range fired {
		if in.isTerm[id] && (first < 0 || id < first) {
			first = id
		}
	}
	if first >= 0 {
		return in.term[first]
	}
	g := in.G
	for _, id := range fired {
		n := g.Nodes[id]
		p := in.trace.Enabled(g, id)
		if p == nil && len(n.Ports) > 0 {
			return Outcome{Kind: Drop, Node: n.Name, Port: "(none)"}
		}
		if p != nil && len(p.Succ) == 0 {
			return Outcome{Kind: Drop, Node: n.Name, Port: p.Name}
		}
	}
	return Outcome{Kind: Drop}
}

// Path returns the nodes the last run passed through, in execution order,
// with the port each enabled.
func (in *Interp) Path() []graph.Step { return in.prog.Path(in.trace) }

// Class names an outcome the way `dragonc trace` reports it: deliver (to
// an endpoint), reply (ARP, ICMP echo, and the answers the named sinks
// send: ICMP port unreachable, TCP reset), or drop, with the reason (the
// node and port that dropped it, or the sink that took it).
func (o Outcome) Class() (outcome, endpoint, reason string) {
	switch o.Kind {
	case Deliver:
		return "deliver", o.Endpoint, ""
	case Reply:
		return "reply", "", o.Reply
	case Sink:
		if k, ok := sinkReplies[o.Node]; ok {
			return "reply", "", k
		}
		return "drop", "", o.Node
	}
	if o.Node == "" {
		return "drop", "", ""
	}
	return "drop", "", o.Node + "." + o.Port
}

// sinkReplies are the named sinks that answer the sender.
var sinkReplies = map[string]string{
	"RxL4UDPPortUnreachable": "icmp-port-unreachable", // RFC 1122 §4.1.3.1
	"RxL4TCPReset":           "tcp-reset",             // RFC 9293 §3.10.7.1
}
