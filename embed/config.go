package embed

import (
	"slices"

	"github.com/dragonc/dragonc/prg"
)

// config turns a solution into a NIC configuration: one entry per steered
// endpoint (in declaration order, with its priority; with Dragonet's one
// priority, in the order Dragonet inserts them), RSS spread evenly
// over the queues of the solution's mode, checksum offloads on, and the Open-MX
// endpoint hashing switched on when it steers an endpoint.
func (p *problem) config(cs []choice, mode int, dragonetPrio bool) *prg.Config {
	c := prg.NewConfig()
	m := p.in.Model
	identityUsed := map[string]bool{} // by node: spaces may be driver-narrowed copies
	order := p.dorder
	if !dragonetPrio {
		order = p.declared()
	}
	for _, i := range order {
		ch := cs[i]
		if ch.t == nil {
			continue
		}
		e := p.eps[i]
		node, _ := ch.t.sp.ActionFor(p.queues[ch.q].id)
		if ch.t.identity {
			v := c.Values[ch.t.sp.Node]
			if v == nil {
				v = &prg.Value{Kind: prg.Hash, Indirection: make([]string, ch.t.sp.Buckets)}
				c.Values[ch.t.sp.Node] = v
			}
			v.Indirection[e.ep.OMXID] = node
			identityUsed[ch.t.sp.Node] = true
			continue
		}
		tv := c.Table(ch.t.sp.Node)
		tv.Entries = append(tv.Entries, prg.Entry{Match: slices.Clone(e.match[ch.t.idx]), Priority: entryPriority(ch.t, e, dragonetPrio), Action: node})
	}
	// Buckets no endpoint uses go to the default queue.
	for node := range identityUsed {
		sp := m.Space(node)
		v := c.Values[node]
		def, ok := sp.ActionFor(p.queues[0].id)
		if !ok {
			def = sp.Actions[0]
		}
		for b := range v.Indirection {
			if v.Indirection[b] == "" {
				v.Indirection[b] = def
			}
		}
	}
	if p.hash != nil && len(p.queues) > 1 && slices.Contains(p.hash.Actions, p.rssTargets(mode)[0]) {
		c.Values[p.hash.Node] = &prg.Value{Kind: prg.Hash, Indirection: prg.SpreadEvenly(p.hash, p.rssTargets(mode))}
	}
	for _, sp := range m.Spaces {
		if sp.Kind != prg.Enum {
			continue
		}
		if ch, ok := p.in.Fixed[sp.Node]; ok {
			c.Values[sp.Node] = &prg.Value{Kind: prg.Enum, Choice: ch}
			continue
		}
		if p.in.Driver != nil {
			if ok, _ := p.in.Driver.Exposes(sp); !ok {
				continue // the driver leaves it as it is
			}
		}
		switch {
		case slices.Contains(sp.Choices, "on") && !p.leadsToUnused(sp, identityUsed):
			c.Values[sp.Node] = &prg.Value{Kind: prg.Enum, Choice: "on"}
		}
	}
	return c
}

// leadsToUnused reports whether an enum's "on" port leads to an identity
// hash that steers nothing (then the switch stays off).
func (p *problem) leadsToUnused(sp *prg.Space, used map[string]bool) bool {
	g := p.in.Model.G
	on := g.Nodes[sp.ID].Port("on")
	for _, s := range on.Succ {
		if tsp := p.in.Model.Space(g.Nodes[s].Name); tsp != nil && tsp.Kind == prg.Hash && tsp.Identity {
			return !used[tsp.Node]
		}
	}
	return false
}

// entryPriority is the priority of endpoint e's entry in table t: its
// class's (flows above listeners on one address above those on every
// address) within the table's range, or with Dragonet's one priority, 1.
func entryPriority(t *table, e *endpoint, dragonetPrio bool) int {
	if t.sp.PrioHi <= t.sp.PrioLo {
		return t.sp.PrioLo
	}
	want := e.prio
	if dragonetPrio {
		want = 1 // Dragonet's five-tuple filters are all priority 1 (E10k.hs, mk5TupleFromFl)
	}
	return min(max(want, t.sp.PrioLo), t.sp.PrioHi)
}
