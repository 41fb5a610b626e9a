package embed

import (
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"

	"github.com/dragonc/dragonc/sim"
)

// The self-check's frames: at most SelfCheckTargeted of the generator's
// frames aimed at endpoints and filter boundaries (all of them for a
// stack small enough, else a sample the seed fixes, so every part of a
// large stack may be hit), every frame it aims at no endpoint (ARP, ICMP,
// closed ports, other EtherTypes), then SelfCheckExtra damaged and random
// ones (bad checksums, fragments, VLAN tags, host-requirements cases).
// Bounded so that embed stays fast on a stack of a thousand endpoints;
// dragonc verify sends them all and more.
const (
	SelfCheckTargeted = 384
	SelfCheckExtra    = 128
	SelfCheckSeed     = 1 // the same check on every run
)

// SelfCheck is a small verify: it runs the frames above through the
// configured NIC and each queue's software graph, and through the LPG
// alone, and returns an error naming the first frames treated
// differently. The generated Go fallback is not built (dragonc verify
// does that). An embedding that fails it is wrong: the NIC model says
// something the embedder could not honour.
func (r *Result) SelfCheck() error {
	s, err := sim.New(r.Embedding)
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	g := sim.NewGen(r.Stack(), SelfCheckSeed)
	aimed := g.Targeted() - g.Unaimed()
	run := make([]bool, g.Targeted()+SelfCheckExtra)
	for i := range run {
		run[i] = i >= aimed
	}
	if aimed <= SelfCheckTargeted {
		for i := range aimed {
			run[i] = true
		}
	} else {
		for _, i := range rand.New(rand.NewSource(SelfCheckSeed)).Perm(aimed)[:SelfCheckTargeted] {
			run[i] = true
		}
	}
	bad, sent := 0, 0
	var shown []string
	for i, want := range run {
		f := g.Next()
		if !want {
			continue
		}
		sent++
		res := s.Run(f.Data, f.CRCOK)
		if res.Match() {
			continue
		}
		bad++
		if len(shown) < 3 {
			shown = append(shown, fmt.Sprintf("frame %d (%s) on queue %d: embedded %s, LPG alone %s; frame %s", i, f.Label, res.Queue, res.Embedded, res.Ref, hex.EncodeToString(f.Data)))
		}
	}
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("self-check: the plan treats %d of %d generated frames otherwise than the LPG alone, so nothing is written:\n  %s\n(dragonc verify shows every frame)", bad, sent, strings.Join(shown, "\n  "))
}
