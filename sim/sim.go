// Package sim runs frames through an embedded stack and through the LPG
// alone and compares what happens to them: the configured PRG decides the
// queue (or drops the frame) and what the descriptor reports, then that
// queue's software graph decides the outcome. An embedding is correct when
// the outcomes are equal for every frame.
package sim

import (
	"fmt"

	"github.com/dragonc/dragonc/embedding"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
)

// Sim holds the interpreters of one embedding. Not safe for concurrent use.
type Sim struct {
	Em    *embedding.Embedding
	hw    *prg.Interp
	ref   *lpg.Interp
	queue map[int]*lpg.Interp // compiled on a queue's first frame
	bad   map[int]error       // queues whose software graph does not compile
	env   env
	last  prg.Result
	// Transient: a queue's software graph is built for its interpreter
	// and not kept in the embedding (QueueEmbedding.BuildSW), so that a
	// caller that Releases each queue when done holds one queue's graph
	// at a time.
	Transient bool
}

// New prepares the interpreters of the NIC and of the LPG; a queue's
// software graph is compiled when the first frame reaches it.
func New(em *embedding.Embedding) (*Sim, error) {
	hw, err := prg.NewInterp(em.Model, em.Config)
	if err != nil {
		return nil, err
	}
	ref, err := lpg.NewInterp(em.LPG)
	if err != nil {
		return nil, err
	}
	return &Sim{Em: em, hw: hw, ref: ref, queue: map[int]*lpg.Interp{}, bad: map[int]error{}}, nil
}

// queueInterp returns the interpreter of a queue's software graph, nil
// when the queue has none.
func (s *Sim) queueInterp(q int) (*lpg.Interp, error) {
	if in, ok := s.queue[q]; ok {
		return in, nil
	}
	if err, ok := s.bad[q]; ok {
		return nil, err
	}
	qe := s.Em.Queue(q)
	if qe == nil {
		s.queue[q] = nil
		return nil, nil
	}
	sw := qe.SW
	if s.Transient {
		sw = qe.BuildSW
	}
	in, err := lpg.NewInterp(sw())
	if err != nil {
		s.bad[q] = fmt.Errorf("queue %d: %w", q, err)
		return nil, s.bad[q]
	}
	s.queue[q] = in
	return in, nil
}

// Result is what happened to one frame.
type Result struct {
	Queue    int         // -1 when the NIC dropped it
	Embedded lpg.Outcome // the embedded stack's outcome
	Ref      lpg.Outcome // the LPG alone
}

// Match reports whether the embedded stack treated the frame as the LPG.
func (r Result) Match() bool { return r.Embedded == r.Ref }

// env answers field lookups from the decoded frame and atoms from what the
// NIC reported in the descriptor.
type env struct {
	frame *packet.Frame
	hw    prg.Result
}

func (e *env) Value(id int) (uint64, bool) { return e.frame.Get(id) }
func (e *env) Atom(a pred.Atom) bool       { return e.hw.Atom(a) }

// Run sends one frame through both.
func (s *Sim) Run(frame []byte, crcOK bool) Result {
	ref := s.ref.Run(frame, crcOK)
	hw := s.hw.Run(frame, crcOK)
	s.last = hw
	r := Result{Queue: hw.Queue, Ref: ref}
	if hw.Queue < 0 {
		r.Embedded = lpg.Outcome{Kind: lpg.Drop, Node: hw.DropNode, Port: hw.DropPort}
		if hw.Answer != nil {
			// A programmable stage answered it (the eBPF stage's XDP_TX).
			if o, ok := lpg.Terminal(&graph.Node{Attrs: hw.Answer}); ok {
				r.Embedded = o
			}
		}
		return r
	}
	q, err := s.queueInterp(hw.Queue)
	if err != nil {
		r.Embedded = lpg.Outcome{Kind: lpg.Drop, Node: fmt.Sprintf("(%v)", err)}
		return r
	}
	if q == nil {
		r.Embedded = lpg.Outcome{Kind: lpg.Drop, Node: fmt.Sprintf("(queue %d has no software graph)", hw.Queue)}
		return r
	}
	s.env = env{frame: s.hw.Frame(), hw: hw}
	r.Embedded = q.RunEnv(&s.env)
	return r
}

// Queue is the queue the configured NIC delivers a frame to, -1 when it
// drops it, without running the LPG or any software.
func (s *Sim) Queue(frame []byte, crcOK bool) int {
	return s.hw.Run(frame, crcOK).Queue
}

// Release lets go of queue q's interpreter (and, Transient, its software
// graph); a later frame to q compiles it again.
func (s *Sim) Release(q int) {
	delete(s.queue, q)
	delete(s.bad, q)
}

// RunNIC sends one frame through the configured NIC and the LPG alone,
// not through the queue's software: the queue it reaches (-1 when the NIC
// dropped it) and the LPG's outcome. LastReported and Hash then describe
// this frame.
func (s *Sim) RunNIC(frame []byte, crcOK bool) (int, lpg.Outcome) {
	ref := s.ref.Run(frame, crcOK)
	s.last = s.hw.Run(frame, crcOK)
	return s.last.Queue, ref
}

// Reported returns what the NIC reports in the descriptor for a frame:
// node and port of every descriptor-reported check that ran.
func (s *Sim) Reported(frame []byte, crcOK bool) [][2]string {
	return s.hw.Run(frame, crcOK).Reported()
}

// LastReported is Reported for the frame of the last Run, without running
// the NIC again.
func (s *Sim) LastReported() [][2]string { return s.last.Reported() }

// Paths returns, for the last Run, the nodes the frame passed through in
// the configured NIC and in its queue's software graph (nil when the NIC
// dropped it).
func (s *Sim) Paths() (hw, sw []graph.Step) {
	hw = s.hw.Path()
	if s.last.Queue >= 0 {
		if q := s.queue[s.last.Queue]; q != nil {
			sw = q.Path()
		}
	}
	return hw, sw
}

// Hash returns the RSS hash of the last Run, when the NIC computed one.
func (s *Sim) Hash() (uint32, bool) { return s.last.Hash, s.last.HasHash }
