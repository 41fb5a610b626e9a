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
}

// Region is registered memory.
type Region struct {
	Buf  []byte
	vi   VI
	live bool
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

// MemVI is an in-memory VI, one end of a pair made by NewMemPair. A send
// is delivered at once into the peer's oldest posted receive descriptor.
type MemVI struct {
	mu     sync.Mutex
	cond   *sync.Cond
	peer   *MemVI
	posted []*Region
	cq     []Completion
	lost   int // messages that found no descriptor
	err    error
	closed bool
}

// NewMemPair connects two in-memory VIs.
func NewMemPair() (*MemVI, *MemVI) {
	a, b := &MemVI{}, &MemVI{}
	a.cond, b.cond = sync.NewCond(&a.mu), sync.NewCond(&b.mu)
	a.peer, b.peer = b, a
	return a, b
}

// Lost returns how many messages arrived at this VI with no descriptor.
func (v *MemVI) Lost() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lost
}

// Posted returns how many receive descriptors are posted.
func (v *MemVI) Posted() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.posted)
}

// Close breaks the VI: waits on either end return an error.
func (v *MemVI) Close() {
	for _, x := range []*MemVI{v, v.peer} {
		x.mu.Lock()
		x.closed = true
		x.cond.Broadcast()
		x.mu.Unlock()
	}
}

func (v *MemVI) Register(b []byte) (*Region, error) {
	return &Region{Buf: b, vi: v, live: true}, nil
}

func (v *MemVI) Deregister(r *Region) error {
	if r.vi != v || !r.live {
		return fmt.Errorf("sovia: deregistering a region this VI does not hold")
	}
	r.live = false
	return nil
}

func (v *MemVI) check(r *Region) error {
	if r == nil || r.vi != v || !r.live {
		return fmt.Errorf("sovia: a descriptor names memory this VI has not registered")
	}
	return nil
}

func (v *MemVI) PostRecv(r *Region) error {
	if err := v.check(r); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.posted = append(v.posted, r)
	return nil
}

func (v *MemVI) PostSend(r *Region, off, n int, imm uint32) error {
	if err := v.check(r); err != nil {
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
		p.lost++
		p.err = ErrNoDescriptor
	case len(p.posted[0].Buf) < n:
		p.lost++
		p.err = fmt.Errorf("sovia: a %d-byte message for a %d-byte receive descriptor", n, len(p.posted[0].Buf))
	default:
		d := p.posted[0]
		p.posted = p.posted[1:]
		copy(d.Buf, r.Buf[off:off+n])
		p.cq = append(p.cq, Completion{Recv: true, Region: d, N: n, Imm: imm})
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	v.mu.Lock()
	v.cq = append(v.cq, Completion{Region: r})
	v.cond.Broadcast()
	v.mu.Unlock()
	return nil
}

func (v *MemVI) Wait(d time.Duration) (Completion, bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cq) == 0 && d > 0 && v.err == nil && !v.closed {
		t := time.AfterFunc(d, func() {
			v.mu.Lock()
			v.cond.Broadcast()
			v.mu.Unlock()
		})
		deadline := time.Now().Add(d)
		for len(v.cq) == 0 && v.err == nil && !v.closed && time.Now().Before(deadline) {
			v.cond.Wait()
		}
		t.Stop()
	}
	if len(v.cq) > 0 {
		c := v.cq[0]
		v.cq = v.cq[1:]
		return c, true, nil
	}
	if v.err != nil {
		return Completion{}, false, v.err
	}
	if v.closed {
		return Completion{}, false, errors.New("sovia: the VI is closed")
	}
	return Completion{}, false, nil
}
