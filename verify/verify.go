// Package verify checks that an embedded stack treats frames exactly as
// the LPG alone does. Every frame goes through the configured NIC (queue
// and descriptor flags), then through that queue's software: both the
// software graph the embedder left and the generated Go fallback, built by
// the go command and run as a helper process. Both outcomes are compared
// with the reference interpreter's.
package verify

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"sort"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sim"
)

// Options says what to run.
type Options struct {
	Packets  int      // generated frames (after any captures)
	Seed     int64    // generator seed
	Pcaps    []string // capture files; "-" reads Stdin
	Stdin    io.Reader
	Fallback bool   // also run the generated Go fallback (needs the go command)
	Work     string // scratch directory for the fallback build
	Show     int    // mismatches shown in full
	// Progress, when not nil, is told what stage the run is in ("building
	// the generated code", "verifying") and the fraction of frames done.
	Progress func(stage string, done float64)
}

// Mismatch is a frame treated differently.
type Mismatch struct {
	Source   string // "generated 17 (at dns, bad CRC)" or "file.pcap #3"
	Frame    []byte
	CRCOK    bool
	Queue    int
	Graph    string // the software graph's outcome
	Fallback string // the generated code's outcome ("" when not run)
	Ref      string // the LPG alone
}

// MaxKept bounds the mismatches a report keeps with their frames; the
// rest are counted.
const MaxKept = 1000

// Report is what verify found.
type Report struct {
	Total      int
	Mismatched int            // frames treated differently
	Mismatches []Mismatch     // the first MaxKept of them
	Outcomes   map[string]int // reference outcome -> count
	Queues     map[int]int    // queue -> frames (-1: dropped by the NIC)
	Notes      []string       // captures read, frames skipped
}

// Run verifies an embedding. Frames are streamed (captures first, then
// generated frames): memory does not grow with their number.
func Run(r *embed.Result, st *lpg.Stack, opt Options) (*Report, error) {
	s, err := sim.New(r.Embedding)
	if err != nil {
		return nil, err
	}
	progress := func(stage string) func(float64) {
		if opt.Progress == nil {
			return nil
		}
		return func(done float64) { opt.Progress(stage, done) }
	}
	var fb *fallback
	if opt.Fallback {
		if p := progress("building the generated code"); p != nil {
			p(0)
		}
		if fb, err = startFallback(r, st, opt.Work); err != nil {
			return nil, err
		}
	}
	rep := &Report{Outcomes: map[string]int{}, Queues: map[int]int{}}
	type result struct {
		it  item
		res sim.Result
	}
	ran := 0
	o := newInOrder(fb, func(p result, generated string) {
		res := p.res
		rep.Total++
		rep.Outcomes[res.Ref.String()]++
		rep.Queues[res.Queue]++
		if generated != "" {
			ran++
		}
		if !res.Match() || fb != nil && res.Queue >= 0 && generated != res.Ref.String() {
			rep.Mismatched++
			if len(rep.Mismatches) < MaxKept {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Source: p.it.source, Frame: p.it.frame, CRCOK: p.it.crc, Queue: res.Queue,
					Graph: res.Embedded.String(), Fallback: generated, Ref: res.Ref.String()})
			}
		}
	})
	defer o.stop()
	g := sim.NewGen(st, opt.Seed)
	gen := func(i int) item {
		f := g.Next()
		return item{f.Data, f.CRCOK, fmt.Sprintf("generated %d (%s)", i, f.Label)}
	}
	notes, err := frames(opt.Pcaps, opt.Stdin, opt.Packets, gen, progress("verifying"), func(it item) error {
		res := s.Run(it.frame, it.crc)
		send := fb != nil && res.Queue >= 0
		var reported [][2]string
		if send {
			reported = s.LastReported()
		}
		return o.add(result{it, res}, it, send, res.Queue, reported)
	})
	if err != nil {
		return nil, err
	}
	if err := o.close(); err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, notes...)
	if fb != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the generated Go fallback ran on the %d frames the NIC delivered", ran))
	}
	return rep, nil
}

// Write prints the report: counts per outcome and per queue, every
// mismatch (the first few in full, with the frame in hex), and the last
// line "N packets, M mismatches".
func (rep *Report) Write(w io.Writer, show int) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintf(bw, "%s\n", n)
	}
	fmt.Fprintln(bw, "outcomes (the LPG alone):")
	keys := make([]string, 0, len(rep.Outcomes))
	for k := range rep.Outcomes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if rep.Outcomes[keys[i]] != rep.Outcomes[keys[j]] {
			return rep.Outcomes[keys[i]] > rep.Outcomes[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 25 {
			fmt.Fprintf(bw, "  ... %d more outcomes\n", len(keys)-25)
			break
		}
		fmt.Fprintf(bw, "  %8d  %s\n", rep.Outcomes[k], k)
	}
	var qs []int
	for q := range rep.Queues {
		qs = append(qs, q)
	}
	sort.Ints(qs)
	fmt.Fprint(bw, "queues:")
	for _, q := range qs {
		if q < 0 {
			fmt.Fprintf(bw, " dropped by the NIC %d", rep.Queues[q])
		} else {
			fmt.Fprintf(bw, " %d:%d", q, rep.Queues[q])
		}
	}
	fmt.Fprintln(bw)
	for i, m := range rep.Mismatches {
		if i < show {
			fmt.Fprintf(bw, "MISMATCH %s, queue %d, crc ok %v\n  embedded graph: %s\n", m.Source, m.Queue, m.CRCOK, m.Graph)
			if m.Fallback != "" {
				fmt.Fprintf(bw, "  generated code: %s\n", m.Fallback)
			}
			fmt.Fprintf(bw, "  LPG alone:      %s\n  frame: %s\n", m.Ref, hex.EncodeToString(m.Frame))
		} else {
			fmt.Fprintf(bw, "mismatch %s: embedded %s, generated %q, LPG %s\n", m.Source, m.Graph, m.Fallback, m.Ref)
		}
	}
	if more := rep.Mismatched - len(rep.Mismatches); more > 0 {
		fmt.Fprintf(bw, "... %d more mismatches not listed\n", more)
	}
	fmt.Fprintf(bw, "%d packets, %d mismatches\n", rep.Total, rep.Mismatched)
}
