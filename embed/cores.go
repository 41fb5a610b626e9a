package embed

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
)

// The cores an endpoint's application names (`cores` in the stack) are
// where its packets should be processed: the Open-MX paper (Goglin,
// "NIC-assisted Cache-Efficient Receive Stack for Message Passing over
// Ethernet", Table 1) measures 0.44 us more a message when the interrupt
// is not on the application's core (costmodel.BouncePenalty). The search
// prefers such plans (the cycles cost charges the bouncing; balance and
// priority break ties by the load served off its cores, and try RSS over
// each spread endpoint's own cores); a plan says, per endpoint, whether it
// honours them and, when it does not, why.

// Values of plan.Endpoint.Cores.
const (
	coresHonoured    = "honoured"
	coresNotHonoured = "not honoured"
)

// coresInto sets pe's cores verdict for endpoint i and returns a warning
// when the plan serves some of its packets on a core its application
// does not run on.
func (r *Result) coresInto(pe *plan.Endpoint, i int) string {
	p := r.p
	e := p.eps[i].ep
	if e.Cores == nil || len(pe.Queues) == 0 {
		return "" // no cores named, or no packet (shadowed)
	}
	var off []int
	for _, c := range pe.IRQCores {
		if !slices.Contains(e.Cores, c) {
			off = append(off, c)
		}
	}
	if len(off) == 0 {
		pe.Cores = coresHonoured
		pe.CoresWhy = fmt.Sprintf("served on its %s (steering %s)", coreList(pe.IRQCores), pe.Steering)
		return ""
	}
	pe.Cores = coresNotHonoured
	pe.CoresWhy = fmt.Sprintf("served on %s, not its own: %s", coreList(off), r.whyOffCores(i))
	return fmt.Sprintf("endpoint %s runs on cores %s but is %s", e.Name, lpg.FormatCores(e.Cores), pe.CoresWhy)
}

// coreList is "core 3" or "cores 0,1".
func coreList(cs []int) string {
	if len(cs) == 1 {
		return fmt.Sprintf("core %d", cs[0])
	}
	return "cores " + joinInts(cs)
}

// alternative is a plan the search saw that serves an endpoint on its
// own cores.
type alternative struct {
	cost costmodel.Cost
	what string
}

// whyOffCores says why the plan does not serve endpoint i on its own
// cores: no queue is on them; or the cost function prefers this plan to
// the cheapest one found that does (a rule to one of their queues, or RSS
// over them); or nothing the NIC can do puts it there (no rule matches
// it, the tables are full or bound to another mask, the rules cannot
// reach those queues, RSS spreads elsewhere).
func (r *Result) whyOffCores(i int) string {
	p, s := r.p, r.state
	e := p.eps[i]
	mine := func(q int) bool { return slices.Contains(e.ep.Cores, p.queues[q].core) }
	if !slices.ContainsFunc(p.queues, func(q qinfo) bool { return slices.Contains(e.ep.Cores, q.core) }) {
		var cs []int
		for _, q := range p.queues {
			cs = append(cs, q.core)
		}
		slices.Sort(cs)
		n := fmt.Sprintf("%d queues are", len(p.queues))
		if len(p.queues) == 1 {
			n = "one queue is"
		}
		return fmt.Sprintf("none of its cores serves a receive queue (the plan's %s on %s: one for each of the stack's cores, at most as many as %s has)", n, coreList(slices.Compact(cs)), r.nicName())
	}
	onMine := func(shares []costmodel.Share) bool {
		return len(shares) > 0 && !slices.ContainsFunc(shares, func(sh costmodel.Share) bool { return !mine(sh.Queue) })
	}
	var alts []alternative
	var blocked []string
	// This plan with endpoint i alone moved: to a rule to a queue on its
	// cores, or to RSS (or the default queue).
	old := s.choice[i]
	try := func(c choice, what string) {
		s.set(i, c)
		if onMine(s.shares(i)) {
			alts = append(alts, alternative{s.ev.Cost(), what})
		}
	}
	if old.t != nil {
		try(choice{}, "leaving it to "+r.fallbackOf(i, s.mode))
	}
	for _, t := range p.tables {
		if e.match[t.idx] == nil {
			continue
		}
		var qs []int
		for _, q := range t.targets {
			if mine(q) {
				qs = append(qs, q)
			}
		}
		if len(qs) == 0 {
			blocked = append(blocked, fmt.Sprintf("%s steers to no queue on its cores%s", t.sp.Node, r.targetsNote(t)))
			continue
		}
		if !s.canUse(t, i) {
			if t.sp.Capacity > 0 && s.used[t.idx] >= t.sp.Capacity {
				blocked = append(blocked, fmt.Sprintf("%s is full (%d entries)", t.sp.Node, t.sp.Capacity))
			} else {
				blocked = append(blocked, fmt.Sprintf("%s's entries share one mask, which other endpoints' entries (%s) set", t.sp.Node, s.shape[t.idx]))
			}
			continue
		}
		for _, q := range qs {
			if (choice{t, q}) != old {
				try(choice{t, q}, fmt.Sprintf("a rule in %s to queue %d (core %d)", t.sp.Node, p.queues[q].id, p.queues[q].core))
			}
		}
	}
	s.set(i, old)
	// The best plans of the other RSS modes.
	for _, ms := range p.modeStates {
		if ms == s || ms.mode == s.mode {
			continue
		}
		if onMine(ms.shares(i)) {
			alts = append(alts, alternative{ms.ev.Cost(), "with " + r.fallbackName(ms.mode)})
		}
	}
	if len(alts) > 0 {
		best := alts[0]
		for _, a := range alts[1:] {
			if a.cost.Less(best.cost) {
				best = a
			}
		}
		why := fmt.Sprintf("the %s cost prefers this plan (%s) to the cheapest found that serves it on its cores, %s (%s)", p.in.Cost.Name(), r.Cost, best.what, best.cost)
		return strings.Join(append([]string{why}, blocked...), "; ")
	}
	if !e.steerable() {
		blocked = append(blocked, fmt.Sprintf("no rule of %s matches its packets", r.nicName()))
	}
	blocked = append(blocked, "without a rule it goes to "+r.fallbackOf(i, s.mode))
	return strings.Join(blocked, "; ")
}

// nicName is the NIC, with the driver whose interfaces the search used.
func (r *Result) nicName() string {
	if d := r.p.in.Driver; d != nil {
		return r.p.in.NIC + " (as " + d.Name + " exposes it)"
	}
	return r.p.in.NIC
}

// targetsNote says why a table steers to no queue it reaches: Dragonet's
// cost functions never steer to queue 0.
func (r *Result) targetsNote(t *table) string {
	if r.p.dragonetSpace && t.queues[0] {
		return " (Dragonet's search never steers to queue 0, its catch-all: Search.hs lines 118-121)"
	}
	return ""
}

// rssNote says when the driver fills the RSS table itself.
func (r *Result) rssNote() string {
	if d := r.p.in.Driver; d != nil && d.RSS != nil && !d.RSS.SetTable {
		return " (" + d.Name + " fills the RSS table itself, over every queue)"
	}
	return ""
}

// fallbackOf names where endpoint i's packets go without a rule in an
// RSS mode (state.fallback): RSS, the queue RSS hashes its connected
// flow to, or the default queue (no RSS, or an Open-MX frame, which RSS
// does not hash).
func (r *Result) fallbackOf(i, mode int) string {
	p := r.p
	e := p.eps[i]
	switch {
	case len(p.modes[mode].queues) > 0 && e.ep.Proto == lpg.OpenMX:
		return fmt.Sprintf("the default queue %d on core %d (RSS hashes IP packets only)", p.queues[0].id, p.queues[0].core)
	case len(p.modes[mode].queues) > 0 && e.rssQueue[mode] >= 0:
		q := p.queues[e.rssQueue[mode]]
		return fmt.Sprintf("queue %d on core %d, where %s hashes its flow", q.id, q.core, r.fallbackName(mode))
	}
	return r.fallbackName(mode)
}

// fallbackName names where an RSS mode sends what no rule claims.
func (r *Result) fallbackName(mode int) string {
	qs := r.p.modes[mode].queues
	if len(qs) == 0 {
		return fmt.Sprintf("the default queue %d on core %d", r.p.queues[0].id, r.p.queues[0].core)
	}
	ids, cores := make([]int, len(qs)), []int{}
	for k, q := range qs {
		ids[k] = r.p.queues[q].id
		cores = append(cores, r.p.queues[q].core)
	}
	slices.Sort(cores)
	over := "queues " + joinInts(ids)
	if len(ids) == 1 {
		over = fmt.Sprintf("queue %d", ids[0])
	}
	return fmt.Sprintf("RSS over %s on %s%s", over, coreList(slices.Compact(cores)), r.rssNote())
}

// whyNotSpread says why the plan does not spread endpoint i as the spread
// rule asks: the NIC has no hash, or the cost function prefers this plan
// to the cheapest the search found in an RSS mode that spreads it (the
// NIC has one RSS table, and a rule steers to one queue).
func (r *Result) whyNotSpread(i int, sp costmodel.Spread) string {
	p := r.p
	if p.hash == nil {
		return r.nicName() + " has no hash to spread a listener's flows with"
	}
	spreads := func(shares []costmodel.Share) bool {
		var cs []int
		for _, sh := range shares {
			if c := p.queues[sh.Queue].core; sp.Cores == nil || slices.Contains(sp.Cores, c) {
				cs = append(cs, c)
			}
		}
		slices.Sort(cs)
		return len(slices.Compact(cs)) >= 2
	}
	var best *state
	for _, ms := range p.modeStates {
		if ms.mode != r.state.mode && spreads(ms.shares(i)) && (best == nil || ms.ev.Cost().Less(best.ev.Cost())) {
			best = ms
		}
	}
	if best == nil {
		if _, ok := p.in.Cost.(costmodel.Priority); ok && p.eps[i].ep.Class == lpg.Gold {
			return "the priority cost gives a gold endpoint one queue of its own, and rejects a plan that spreads it over several"
		}
		return fmt.Sprintf("the %s cost preferred it, and no plan the search found spreads it", p.in.Cost.Name())
	}
	return fmt.Sprintf("the %s cost prefers this plan (%s, %s) to the cheapest found that spreads it, with %s (%s)", p.in.Cost.Name(), r.Cost, r.fallbackName(r.state.mode), r.fallbackName(best.mode), best.ev.Cost())
}
