package embed

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/dragonc/dragonc/sim"
)

// The self-check's frames: a sample of the generator's frames aimed at
// endpoints and filter boundaries (all of them for a small stack; the
// sample is fixed by the seed), every frame it aims at no endpoint (ARP,
// ICMP, closed ports, other EtherTypes), then damaged and random ones
// (bad checksums, fragments, VLAN tags, host-requirements cases). The
// interpreters try a demultiplexer's ports one after another, so a frame
// costs in proportion to the stack's endpoints: the sample is bounded by
// selfCheckWork endpoint-frames, between the floors and caps below, so
// that embed stays fast on a stack of 100,000 endpoints. dragonc verify
// sends them all and more. Compiling a queue's software graph costs in
// proportion to the endpoints too: at most selfCheckCompile
// endpoint-compiles are spent, on the lowest-numbered queues the frames
// reach (at least two; ten at 10,000 endpoints, every queue of a stack of 1,000).
const (
	selfCheckCompile = 100000
	selfCheckWork    = 200000
	selfCheckAimed   = 384 // at most
	selfCheckExtra   = 128 // at most
	selfCheckFloor   = 16  // at least, of each
	selfCheckSeed    = 1   // the same check on every run
	selfCheckShown   = 3   // mismatching frames named
)

// SelfCheck is a small verify: it runs the frames above through the
// configured NIC and each queue's software graph, and through the LPG
// alone, and returns an error naming the first frames treated
// differently. The generated Go fallback is not built (dragonc verify
// does that). Queues are checked one at a time, each queue's software
// graph built and let go, so the check holds one queue's graph at a time.
// An embedding that fails it is wrong: the NIC model says something the
// embedder could not honour.
func (r *Result) SelfCheck() error {
	// The check keeps little (a few MB at 10,000 endpoints: the
	// interpreters and one queue's software graph) but makes garbage
	// (frames, compiled graphs): collected often, it does not grow the
	// heap much past the plan's.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	s, err := sim.New(r.Embedding)
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	s.Transient = true
	g := sim.NewGen(r.Stack(), selfCheckSeed)
	per := selfCheckWork / (len(r.Stack().Endpoints) + 1)
	nAimed := min(max(per, selfCheckFloor), selfCheckAimed)
	nExtra := min(max(per/3, selfCheckFloor), selfCheckExtra)
	aimed := g.Targeted() - g.Unaimed()
	var pick []int // targeted frames to send, in order
	if aimed <= nAimed {
		for i := range aimed {
			pick = append(pick, i)
		}
	} else {
		pick = rand.New(rand.NewSource(selfCheckSeed)).Perm(aimed)[:nAimed]
		slices.Sort(pick)
	}
	for i := aimed; i < g.Targeted(); i++ {
		pick = append(pick, i)
	}
	type frame struct {
		i int
		sim.Frame
	}
	byQueue := map[int][]frame{}
	add := func(i int, f sim.Frame) {
		q := s.Queue(f.Data, f.CRCOK)
		byQueue[q] = append(byQueue[q], frame{i, f})
	}
	for _, i := range pick {
		add(i, g.Target(i))
	}
	g.SkipTargeted()
	for k := range nExtra {
		add(g.Targeted()+k, g.Next())
	}
	queues := slices.Sorted(maps.Keys(byQueue))
	compiled := 0
	maxQueues := max(2, selfCheckCompile/(len(r.Stack().Endpoints)+1))
	for k, q := range queues {
		if q >= 0 {
			compiled++
		}
		if compiled > maxQueues {
			queues = queues[:k]
			break
		}
	}
	bad, sent := 0, 0
	var shown []string
	for _, q := range queues {
		for _, f := range byQueue[q] {
			sent++
			res := s.Run(f.Data, f.CRCOK)
			if res.Match() {
				continue
			}
			bad++
			if len(shown) < selfCheckShown {
				shown = append(shown, fmt.Sprintf("frame %d (%s) on queue %d: embedded %s, LPG alone %s; frame %s", f.i, f.Label, res.Queue, res.Embedded, res.Ref, hex.EncodeToString(f.Data)))
			}
		}
		s.Release(q)
	}
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("self-check: the plan treats %d of %d generated frames otherwise than the LPG alone, so nothing is written:\n  %s\n(dragonc verify shows every frame)", bad, sent, strings.Join(shown, "\n  "))
}
