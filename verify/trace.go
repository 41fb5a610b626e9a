package verify

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/sim"
)

// Step is one node a frame passed through, with the port it took and,
// when the port has one, the condition that sent the frame there. Its
// JSON field names are a contract (docs: `dragonc trace --json`).
type Step struct {
	Node string `json:"node"`
	Port string `json:"port"`
	When string `json:"when,omitempty"`
}

// FrameTrace is what happened to one frame: the NIC's decision, the
// software nodes of its queue, and the outcome, with the generated code's
// verdict and the LPG's beside it. Its JSON field names are a contract.
type FrameTrace struct {
	Frame  int    `json:"frame"`  // 1-based, in input order
	Source string `json:"source"` // "capture.pcap #3" or "--frame 2"
	Length int    `json:"length"`
	Queue  int    `json:"queue"` // -1: the NIC dropped it
	// Stage names the NIC's programmable stage that decided the frame
	// (dropped or answered it; the eBPF stage's XDP program on
	// linux-xdp), "" when none did.
	Stage    string `json:"stage,omitempty"`
	RSSHash  string `json:"rss_hash,omitempty"`
	Hardware []Step `json:"hardware"`
	// Flags are the checks the NIC reports in the receive descriptor
	// ("RxL4UDPValidChecksum=true").
	Flags    []string `json:"flags"`
	Software []Step   `json:"software"`
	Outcome  string   `json:"outcome"` // deliver, reply or drop
	Endpoint string   `json:"endpoint"`
	Reason   string   `json:"reason"` // the drop (NODE.PORT or a sink) or the reply kind
	// Embedded, Generated and Reference give the verdicts of the embedded
	// software graph, the generated Go code ("" when not run, or when the
	// NIC dropped the frame) and the LPG alone, in verify's notation.
	Embedded  string `json:"embedded"`
	Generated string `json:"generated"`
	Reference string `json:"reference"`
	Match     bool   `json:"match"`
}

// TraceInput is one frame to trace.
type TraceInput struct {
	Data   []byte
	Source string
}

// TraceOptions says where frames come from and whether the generated code
// runs.
type TraceOptions struct {
	Pcaps    []string // capture files; "-" reads Stdin
	Stdin    io.Reader
	Frames   []TraceInput
	Fallback bool
	Work     string // scratch directory for the fallback build
}

// Trace runs every frame through the embedded stack and reports each step.
func Trace(r *embed.Result, st *lpg.Stack, opt TraceOptions) ([]FrameTrace, []string, error) {
	var out []FrameTrace
	notes, err := TraceEach(r, st, opt, func(t FrameTrace) error {
		out = append(out, t)
		return nil
	})
	return out, notes, err
}

// TraceEach is Trace with each frame's trace handed to emit, in input
// order, as soon as it is known: frames are streamed, so a capture of any
// size is traced in constant memory. An error from emit stops the run.
func TraceEach(r *embed.Result, st *lpg.Stack, opt TraceOptions, emit func(FrameTrace) error) ([]string, error) {
	s, err := sim.New(r.Embedding)
	if err != nil {
		return nil, err
	}
	var fb *fallback
	if opt.Fallback {
		if fb, err = startFallback(r, st, opt.Work); err != nil {
			return nil, err
		}
	}
	rss := rssNodes(r)
	var emitErr error
	o := newInOrder(fb, func(t *FrameTrace, generated string) {
		if generated != "" {
			t.Generated = generated
			t.Match = t.Match && generated == t.Reference
		}
		if emitErr == nil {
			emitErr = emit(*t)
		}
	})
	defer o.stop()
	n := 0
	notes, err := frames(opt.Pcaps, opt.Stdin, len(opt.Frames), func(i int) item {
		return item{opt.Frames[i].Data, true, opt.Frames[i].Source}
	}, nil, func(it item) error {
		n++
		res := s.Run(it.frame, it.crc)
		hw, sw := s.Paths()
		t := &FrameTrace{Frame: n, Source: it.source, Length: len(it.frame), Queue: res.Queue,
			Hardware: steps(hw), Software: steps(sw), Flags: []string{},
			Embedded: res.Embedded.String(), Reference: res.Ref.String()}
		if h, ok := s.Hash(); ok && (res.Queue >= 0 || passes(hw, rss)) {
			t.RSSHash = fmt.Sprintf("0x%08x", h)
		}
		var reported [][2]string
		if res.Queue >= 0 {
			reported = s.LastReported()
			for _, rp := range reported {
				t.Flags = append(t.Flags, rp[0]+"="+rp[1])
			}
		}
		t.Outcome, t.Endpoint, t.Reason = res.Embedded.Class()
		if res.Queue < 0 && len(hw) > 0 {
			for _, a := range hw[len(hw)-1].Node.Attrs {
				if stage, ok := strings.CutPrefix(a, prg.AttrStage); ok {
					t.Stage = stage
				}
			}
		}
		t.Match = res.Match()
		if err := o.add(t, it, fb != nil && res.Queue >= 0, res.Queue, reported); err != nil {
			return err
		}
		if fb == nil {
			return emitErr
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := o.close(); err != nil {
		return nil, err
	}
	return notes, emitErr
}

// rssNodes are the names of the model's RSS nodes: its configuration
// nodes of kind hash that hash the frame (an identity hash, such as the
// Open-MX endpoint hashing, indexes by a field and computes nothing).
func rssNodes(r *embed.Result) map[string]bool {
	out := map[string]bool{}
	if m := r.Model(); m != nil {
		for _, sp := range m.Spaces {
			if sp.Kind == "hash" && !sp.Identity {
				out[sp.Node] = true
			}
		}
	}
	return out
}

// passes reports whether a hardware path went through one of nodes. The
// simulated NIC hashes every frame as it enters, but a frame it drops
// before its RSS node was never hashed by the NIC: its trace has no hash.
// A frame that reaches a queue keeps the hash even when a filter steered
// it, as the descriptor of a NIC that hashes beside its filters reports.
func passes(path []graph.Step, nodes map[string]bool) bool {
	for _, st := range path {
		if nodes[st.Node.Name] {
			return true
		}
	}
	return false
}

func steps(path []graph.Step) []Step {
	out := []Step{}
	for _, st := range path {
		s := Step{Node: st.Node.Name}
		if st.Port != nil {
			s.Port = st.Port.Name
			if st.Port.Pred != nil {
				s.When = st.Port.Pred.String()
			}
		}
		out = append(out, s)
	}
	return out
}

// WriteJSON prints one JSON object per frame, one per line.
func WriteJSON(w io.Writer, ts []FrameTrace) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, t := range ts {
		if err := enc.Encode(t); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteText prints each frame's trace for people.
func WriteText(w io.Writer, ts []FrameTrace) error {
	bw := bufio.NewWriter(w)
	for i, t := range ts {
		if i > 0 {
			bw.WriteString("\n")
		}
		fmt.Fprintf(bw, "frame %d: %s, %d bytes\n", t.Frame, t.Source, t.Length)
		bw.WriteString("  NIC:\n")
		for _, s := range t.Hardware {
			writeStep(bw, s)
		}
		switch {
		case t.Queue < 0 && t.Stage != "" && t.Outcome == "reply":
			fmt.Fprintf(bw, "  answered by the NIC's stage %s: %s\n", t.Stage, t.Reason)
		case t.Queue < 0 && t.Stage != "":
			fmt.Fprintf(bw, "  dropped by the NIC's stage %s: %s\n", t.Stage, t.Reason)
		case t.Queue < 0:
			fmt.Fprintf(bw, "  dropped by the NIC: %s\n", t.Reason)
		default:
			fmt.Fprintf(bw, "  -> queue %d", t.Queue)
			if t.RSSHash != "" {
				fmt.Fprintf(bw, " (RSS hash %s)", t.RSSHash)
			}
			bw.WriteString("\n")
			if len(t.Flags) > 0 {
				fmt.Fprintf(bw, "  descriptor: %s\n", strings.Join(t.Flags, " "))
			}
			fmt.Fprintf(bw, "  software on queue %d:\n", t.Queue)
			for _, s := range t.Software {
				writeStep(bw, s)
			}
		}
		fmt.Fprintf(bw, "  outcome: %s", t.Outcome)
		switch {
		case t.Endpoint != "":
			fmt.Fprintf(bw, " to %s", t.Endpoint)
		case t.Reason != "":
			fmt.Fprintf(bw, " (%s)", t.Reason)
		}
		bw.WriteString("\n")
		if t.Generated != "" {
			fmt.Fprintf(bw, "  generated code: %s\n", t.Generated)
		}
		fmt.Fprintf(bw, "  LPG alone:      %s\n", t.Reference)
		if !t.Match {
			bw.WriteString("  MISMATCH: the embedded stack and the LPG disagree\n")
		}
	}
	return bw.Flush()
}

func writeStep(w *bufio.Writer, s Step) {
	switch {
	case s.Port == "":
		fmt.Fprintf(w, "    %s\n", s.Node)
	case s.When != "":
		fmt.Fprintf(w, "    %s.%s  [%s]\n", s.Node, s.Port, s.When)
	default:
		fmt.Fprintf(w, "    %s.%s\n", s.Node, s.Port)
	}
}

// ParseHexFrame reads a frame written in hexadecimal (spaces, colons and a
// leading 0x allowed).
func ParseHexFrame(s string) ([]byte, error) {
	clean := strings.NewReplacer(" ", "", ":", "", "\n", "", "\t", "").Replace(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	b, err := hex.DecodeString(clean)
	if err != nil {
		return nil, fmt.Errorf("--frame %q is not hexadecimal bytes: %w", shorten(s), err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("--frame is empty")
	}
	return b, nil
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
