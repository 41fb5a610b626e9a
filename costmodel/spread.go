package costmodel

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// CoreHz is the clock, in cycles per second, of the core the model's cycle
// figures are counted on: the 2.33 GHz Xeon E5345 of the Open-MX paper
// (Goglin, Section 4, "Experimentation platform"), the machine
// BouncePenalty was measured on, so that cycles per packet and a core's
// budget are of one machine.
const CoreHz = 2.33e9

// CoreRate is the packets per second one core serves of endpoint e: a
// core's cycles (CoreHz) over the software cycles of its receive path on a
// shared queue. It is 0 when those cycles are not known.
func (e Endpoint) CoreRate() float64 {
	if e.Cycles <= 0 {
		return 0
	}
	return CoreHz / e.Cycles
}

// Spread is how the spread rule wants an endpoint served: on N cores,
// evenly, the named Cores or (Cores nil) any N of the queues' cores. N <= 1
// is not spread.
type Spread struct {
	Cores []int
	N     int
	Why   string
}

// Spread is the spread rule, the one place it is written: a listener
// (its packets come from many flows, which RSS or the eBPF stage's hash
// can send to different queues) whose application names two or more of
// the cores that serve the problem's queues is spread evenly over those;
// one that names no such core and whose declared rate exceeds what one
// core serves (CoreRate) is spread over as many cores as its rate needs,
// at most every queue's. A connected flow is one flow: it stays on one
// queue (RSS keeps a flow's packets in order on one queue), and so does a
// listener whose application names a single core.
func (p *Problem) Spread(i int) Spread {
	e := p.Endpoints[i]
	if !e.Listener {
		return Spread{N: 1}
	}
	var cores, named []int
	for _, q := range p.Queues {
		cores = append(cores, q.Core)
	}
	slices.Sort(cores)
	cores = slices.Compact(cores)
	for _, c := range e.Cores {
		if slices.Contains(cores, c) && !slices.Contains(named, c) {
			named = append(named, c)
		}
	}
	slices.Sort(named)
	switch {
	case len(named) >= 2:
		return Spread{Cores: named, N: len(named), Why: "its application runs on cores " + joinInts(named)}
	case len(named) == 1:
		return Spread{N: 1}
	}
	if r := e.CoreRate(); r > 0 && e.Rate > r {
		if n := min(int(math.Ceil(e.Rate/r)), len(cores)); n >= 2 {
			return Spread{N: n, Why: fmt.Sprintf("its rate of %s packets/s exceeds the %s one core serves (%s cycles a packet at %s GHz)",
				FormatNumber(e.Rate), FormatNumber(r), FormatNumber(e.Cycles), FormatNumber(CoreHz/1e9))}
		}
	}
	return Spread{N: 1}
}

// spreads is the rule's answer for every endpoint.
func (p *Problem) spreads() []Spread {
	out := make([]Spread, len(p.Endpoints))
	for i := range p.Endpoints {
		out[i] = p.Spread(i)
	}
	return out
}

// spreadTerms are what a spread endpoint adds to the balance of the
// queues, in the load unit w: excess is the load it puts on a core above
// its even share there (w/N on each of its cores, nothing on another), so
// one hot endpoint on one of its two cores costs half its load; exempt is
// its load on the default queue up to its even share, when that queue's
// core is one of its own (the default queue carries no load a filter or
// RSS could place elsewhere, except a spread endpoint's share of its own
// core). For an endpoint that is not spread, exempt is its load on the
// default queue when its declared cores include that queue's.
func (p *Problem) spreadTerms(sp Spread, cores []int, shares []Share, w float64) (excess, exempt float64) {
	if sp.N <= 1 {
		// An endpoint bound to cores that include the default queue's is
		// where its application asked to be when it is served there (the
		// Open-MX paper's rank 0 on core 0): that load is not a miss the
		// default queue carries.
		for _, s := range shares {
			if q := p.Queues[s.Queue]; q.Default && cores != nil && slices.Contains(cores, q.Core) {
				exempt += w * s.Frac
			}
		}
		return 0, exempt
	}
	if len(shares) == 0 {
		return 0, 0
	}
	even := w / float64(sp.N)
	mine := func(core int) bool { return sp.Cores == nil || slices.Contains(sp.Cores, core) }
	var buf [8]coreLoad
	per := buf[:0]
	for _, s := range shares {
		q := p.Queues[s.Queue]
		l := w * s.Frac
		if q.Default && mine(q.Core) {
			exempt += min(l, even)
		}
		k := slices.IndexFunc(per, func(x coreLoad) bool { return x.core == q.Core })
		if k < 0 {
			per = append(per, coreLoad{q.Core, 0})
			k = len(per) - 1
		}
		per[k].load += l
	}
	for _, x := range per {
		share := 0.0
		if mine(x.core) {
			share = even
		}
		excess += max(0, x.load-share)
	}
	return excess, min(exempt, even)
}

type coreLoad struct {
	core int
	load float64
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
