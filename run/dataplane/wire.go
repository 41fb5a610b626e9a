package dataplane

import (
	"fmt"
	"slices"
	"time"
)

// Code is a generated fallback package as the data plane sees it: its
// Process, with the verdict spelled as Verdict, and the names its
// verdicts' indexes stand for.
type Code struct {
	Process   func(queue int, frame []byte) Verdict
	Endpoints []string // the package's EndpointNames
	Replies   []string // its Replies
	Sinks     []string // its Sinks
	DropSites []string // its DropSites as "NODE.PORT" ("" for a drop with no site)
}

// Chains name the transmit nodes each reply, each sink and a UDP
// endpoint's answer pass, in order (read off the LPG by package run).
type Chains struct {
	Replies map[string][]string
	Sinks   map[string][]string
	Send    []string
	SendOMX []string // what an Open-MX endpoint's answer passes
	OMX     []string // the Open-MX endpoints
}

// Wire makes the Stack a data plane serves: code, the transmit chains
// bound to the functions of TxNodes, and handlers (one per endpoint in
// the order of code.Endpoints; nil for a TCP endpoint, which is the kernel's).
func Wire(code Code, ch Chains, handlers []Handler, host Host) (*Stack, error) {
	if len(handlers) != len(code.Endpoints) {
		return nil, fmt.Errorf("%d handlers for %d endpoints", len(handlers), len(code.Endpoints))
	}
	st := &Stack{Process: code.Process, Endpoints: code.Endpoints, Handlers: handlers,
		Replies: code.Replies, Sinks: code.Sinks, DropSites: code.DropSites, Host: host}
	for i, h := range handlers {
		omx := slices.Contains(ch.OMX, code.Endpoints[i])
		st.UDP = append(st.UDP, h != nil && !omx)
		st.OMX = append(st.OMX, h != nil && omx)
	}
	var err error
	if st.SendChain, err = Bind(ch.Send); err != nil {
		return nil, err
	}
	if st.SendOMX, err = Bind(ch.SendOMX); err != nil {
		return nil, err
	}
	for _, r := range code.Replies {
		c, err := Bind(ch.Replies[r])
		if err != nil {
			return nil, err
		}
		st.ReplyChains = append(st.ReplyChains, c)
		st.ReplyErr = append(st.ReplyErr, icmpError(ch.Replies[r]))
	}
	for _, s := range code.Sinks {
		c, err := Bind(ch.Sinks[s])
		if err != nil {
			return nil, err
		}
		st.SinkChains = append(st.SinkChains, c)
		st.SinkErr = append(st.SinkErr, icmpError(ch.Sinks[s]))
	}
	return st, nil
}

// Watch hands the counters to emit every interval (0: never) and on
// each poke, until done closes; then it stops the server and hands over
// the final counters. It returns Stop's error.
func (s *Server) Watch(emit func(Report), every time.Duration, poke <-chan struct{}, done <-chan struct{}) error {
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-poke:
			emit(s.Snapshot(false))
			continue
		case <-tick:
			emit(s.Snapshot(false))
			continue
		case <-done:
		}
		break
	}
	err := s.Stop()
	emit(s.Snapshot(true))
	return err
}

// Bind looks a chain's nodes up: software nodes in TxNodes; a node
// marked NICPrefix sets its transmit descriptor flag where the chain
// has it, and its stand-in from NICTxNodes runs after the others, on a
// frame whose flags ask for it, as the NIC would.
func Bind(names []string) ([]TxFunc, error) {
	var out, nic []TxFunc
	for _, n := range names {
		name, byNIC := nicNode(n)
		if byNIC {
			f, ok := NICTxNodes[name]
			if !ok {
				return nil, fmt.Errorf("transmit node %s has no stand-in for the NIC in the data plane", name)
			}
			flag := nicFlags[name]
			out = append(out, func(t *Tx) bool { t.Flags |= flag; return true })
			nic = append(nic, func(t *Tx) bool { return t.Flags&flag == 0 || f(t) })
			continue
		}
		f, ok := TxNodes[name]
		if !ok {
			return nil, fmt.Errorf("transmit node %s has no implementation in the data plane", n)
		}
		out = append(out, f)
	}
	// What the NIC does it does last, to the finished frame.
	return append(out, nic...), nil
}

// icmpError reports whether a transmit chain builds an ICMP error: one
// whose first node is an ICMPErrorNodes entry.
func icmpError(chain []string) bool {
	return len(chain) > 0 && ICMPErrorNodes[chain[0]]
}
