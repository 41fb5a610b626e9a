// Package sovia is a sockets layer over the Virtual Interface Architecture,
// after the SOVIA paper (J.-S. Kim, K. Kim, S.-I. Jung, "Building a High
// Performance Communication Layer Over Virtual Interface Architecture on
// Linux Clusters"): byte-stream connections whose messages travel as VIA
// descriptors, with two-way handshaking, a window of w messages, delayed
// acknowledgements piggybacked in the descriptor's immediate data, the
// combining of small messages, 32 KB chunks, and copy-or-register by
// message size.
//
// A VI is the provider's: this package has an in-memory one (NewMemPair)
// that enforces VIA's pre-posting constraint, so tests see every
// message that would have been lost.
package sovia

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// VI is a Virtual Interface with VIA's semantics: memory must be
// registered before a descriptor names it; a receive descriptor must be
// posted before a message arrives for it (a message that finds none is an
// error the provider reports); completions of both queues arrive on one
// completion queue.
type VI interface {
	// Register pins b for the NIC (VipRegisterMem).
	Register(b []byte) (*Region, error)
	// Deregister releases a region (VipDeregisterMem).
	Deregister(r *Region) error
	// PostRecv posts a receive descriptor: the next message lands in r.
	PostRecv(r *Region) error
	// PostSend posts a send descriptor for r's bytes [off, off+n) with
	// 32-bit immediate data.
	PostSend(r *Region, off, n int, imm uint32) error
	// Wait returns the next completion, waiting at most d; ok is false
	// when none came.
	Wait(d time.Duration) (c Completion, ok bool, err error)
	// CQWait waits at most d for a completion, an error or the VI's
	// close, and takes nothing off the completion queue (VipCQWait); it
	// reports whether one of them is there.
	CQWait(d time.Duration) bool
}

// Region is registered memory.
type Region struct {
	Buf     []byte
	vi      VI
	live    bool
	sending sendKind // what the connection that sent it does when the send completes (under its lock)
}

// Completion is a finished descriptor.
type Completion struct {
	Recv   bool    // a receive descriptor (else a send)
	Region *Region // its region
	N      int     // bytes received
	Imm    uint32  // immediate data received
}

// ErrNoDescriptor is what a VI reports when a message arrived and no
// receive descriptor was posted for it: VIA drops the message (the
// pre-posting constraint, SOVIA paper §2).
var ErrNoDescriptor = errors.New("sovia: a message arrived with no receive descriptor posted")

// queues are a VI's receive queue and completion queue, and the rules
// both providers share: registration, posting, waiting.
//
// Waiting has no handler thread and no condition variable: a goroutine
// that needs a completion takes the channel the next event closes (arm),
// and then waits on it (block) — on the software VI it receives the
// link's frames itself meanwhile. Only receive completions, errors and
// the close are events; a send completes inside PostSend, in the
// goroutine that posted it, which finds it queued.
type queues struct {
	mu     sync.Mutex
	self   VI // the provider these queues belong to (regions name it)
	clock  Clock
	posted []*Region
	cq     []Completion
	ev     chan struct{} // closed at the next event; nil while no one waits
	lost   int           // messages that found no descriptor
	err    error
	closed bool
}

func (q *queues) init(self VI, clock Clock) {
	q.self = self
	q.clock = orReal(clock)
}

// Lost returns how many messages arrived with no descriptor.
func (q *queues) Lost() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lost
}

// Posted returns how many receive descriptors are posted.
func (q *queues) Posted() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.posted)
}

func (q *queues) Register(b []byte) (*Region, error) {
	return &Region{Buf: b, vi: q.self, live: true}, nil
}

func (q *queues) Deregister(r *Region) error {
	if r.vi != q.self || !r.live {
		return fmt.Errorf("sovia: deregistering a region this VI does not hold")
	}
	r.live = false
	return nil
}

// registered checks that a descriptor names this VI's registered memory.
func (q *queues) registered(r *Region) error {
	if r == nil || r.vi != q.self || !r.live {
		return fmt.Errorf("sovia: a descriptor names memory this VI has not registered")
	}
	return nil
}

func (q *queues) PostRecv(r *Region) error {
	if err := q.registered(r); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.posted = append(q.posted, r)
	return nil
}

// event wakes whoever waits for this VI (q.mu held).
func (q *queues) event() {
	if q.ev != nil {
		close(q.ev)
		q.ev = nil
	}
}

// complete queues a completion (q.mu held); a receive is an event.
func (q *queues) complete(c Completion) {
	q.cq = append(q.cq, c)
	if c.Recv {
		q.event()
	}
}

// lose records a message that found no descriptor, or no room in it (q.mu
// held).
func (q *queues) lose(err error) {
	q.lost++
	q.err = err
	q.event()
}

// fail breaks the VI with err unless it is broken or closed already.
func (q *queues) fail(err error) {
	q.mu.Lock()
	if q.err == nil && !q.closed {
		q.err = err
	}
	q.event()
	q.mu.Unlock()
}

// shut marks the VI closed and wakes its waiters.
func (q *queues) shut() {
	q.mu.Lock()
	q.closed = true
	q.event()
	q.mu.Unlock()
}

// ready reports whether a waiter has something to look at (q.mu held).
func (q *queues) ready() bool { return len(q.cq) > 0 || q.err != nil || q.closed }

// arm returns the channel the VI's next event closes, or ready when a
// completion, an error or the close is there already.
func (q *queues) arm() (ev <-chan struct{}, ready bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ready() {
		return nil, true
	}
	if q.ev == nil {
		q.ev = make(chan struct{})
	}
	return q.ev, false
}

// block waits until ev or stop is closed. A provider that receives its
// frames itself does so meanwhile (RawVI).
func (q *queues) block(ev, stop <-chan struct{}) {
	select {
	case <-ev:
	case <-stop:
	}
}

// wake makes a goroutine in block look at stop again (the in-memory VI
// needs nothing: block waits on the channels alone).
func (q *queues) wake() {}

// popFront takes a queue's first element: the rest move down, so that
// the queue keeps its array and appending to it allocates nothing once it
// has grown (a queue that slides along its array needs a new one every
// few messages). The queues here hold a window of elements at most.
func popFront[T any](s []T) (T, []T) {
	first := s[0]
	copy(s, s[1:])
	var zero T
	s[len(s)-1] = zero
	return first, s[:len(s)-1]
}

// take returns the next completion, or the VI's error or close.
func (q *queues) take() (Completion, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.cq) > 0 {
		var c Completion
		c, q.cq = popFront(q.cq)
		return c, true, nil
	}
	if q.err != nil {
		return Completion{}, false, q.err
	}
	if q.closed {
		return Completion{}, false, errors.New("sovia: the VI is closed")
	}
	return Completion{}, false, nil
}

// waitable is what Conn uses of a provider to wait without a handler
// thread; both providers have it (through queues).
type waitable interface {
	arm() (ev <-chan struct{}, ready bool)
	block(ev, stop <-chan struct{})
	wake()
	take() (Completion, bool, error)
	clockOf() Clock
}

func (q *queues) clockOf() Clock { return q.clock }

func (q *queues) Wait(d time.Duration) (Completion, bool, error) {
	if c, ok, err := q.take(); ok || err != nil || d <= 0 {
		return c, ok, err
	}
	q.await(d)
	return q.take()
}

func (q *queues) CQWait(d time.Duration) bool {
	q.await(d)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready()
}

// await waits at most d (on the VI's clock) for an event.
func (q *queues) await(d time.Duration) {
	ev, ready := q.arm()
	if ready || d <= 0 {
		return
	}
	stop := make(chan struct{})
	t := q.clock.AfterFunc(d, func() { close(stop); q.wake() })
	defer t.Stop()
	q.self.(waitable).block(ev, stop)
}

// MemVI is an in-memory VI, one end of a pair made by NewMemPair. A send
// is delivered at once into the peer's oldest posted receive descriptor.
type MemVI struct {
	queues
	peer *MemVI
}

// NewMemPair connects two in-memory VIs.
func NewMemPair() (*MemVI, *MemVI) { return NewMemPairClock(nil) }

// NewMemPairClock connects two in-memory VIs whose connections take their
// timers from clock (nil: the real clock).
func NewMemPairClock(clock Clock) (*MemVI, *MemVI) {
	a, b := &MemVI{}, &MemVI{}
	a.init(a, clock)
	b.init(b, clock)
	a.peer, b.peer = b, a
	return a, b
}

// Close breaks the VI: waits on either end return an error.
func (v *MemVI) Close() {
	v.shut()
	v.peer.shut()
}

func (v *MemVI) PostSend(r *Region, off, n int, imm uint32) error {
	if err := v.registered(r); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(r.Buf) {
		return fmt.Errorf("sovia: a send descriptor outside its region")
	}
	p := v.peer
	p.mu.Lock()
	switch {
	case p.closed:
	case len(p.posted) == 0:
		p.lose(ErrNoDescriptor)
	case len(p.posted[0].Buf) < n:
		p.lose(fmt.Errorf("sovia: a %d-byte message for a %d-byte receive descriptor", n, len(p.posted[0].Buf)))
	default:
		var d *Region
		d, p.posted = popFront(p.posted)
		copy(d.Buf, r.Buf[off:off+n])
		p.complete(Completion{Recv: true, Region: d, N: n, Imm: imm})
	}
	p.mu.Unlock()
	v.mu.Lock()
	v.complete(Completion{Region: r})
	v.mu.Unlock()
	return nil
}
