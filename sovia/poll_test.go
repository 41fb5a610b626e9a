//go:build linux

package sovia

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// memLink is an in-memory wire between two hosts whose goroutines receive
// the frames themselves (a pollLink, as a host's own packet socket). It
// may lose and reorder frames, by a seeded generator: lossy links for
// reliable delivery.
type memLink struct {
	mu      sync.Mutex
	peer    *memLink
	queue   [][]byte
	signal  chan struct{} // a frame came, or wake
	rng     *rand.Rand
	loss    float64 // share of frames dropped
	reorder float64 // share of frames held back behind the next one
	held    []byte
	sent    int
	dropped int
	swapped int
	mtu     int
}

func newMemLinks(seed uint64, loss, reorder float64) (*memLink, *memLink) {
	a := &memLink{signal: make(chan struct{}, 1), mtu: 1500, loss: loss, reorder: reorder, rng: rand.New(rand.NewPCG(seed, 1))}
	b := &memLink{signal: make(chan struct{}, 1), mtu: 1500, loss: loss, reorder: reorder, rng: rand.New(rand.NewPCG(seed, 2))}
	a.peer, b.peer = b, a
	return a, b
}

func (l *memLink) MTU() int     { return l.mtu }
func (l *memLink) Close() error { l.wake(); return nil }

func (l *memLink) SendFrame(f []byte) error {
	f = append([]byte(nil), f...)
	l.mu.Lock()
	l.sent++
	var out [][]byte
	switch r := l.rng.Float64(); {
	case r < l.loss:
		l.dropped++
	case r < l.loss+l.reorder && l.held == nil:
		l.held = f // goes out after the next frame
		l.swapped++
	default:
		out = append(out, f)
		if l.held != nil {
			out = append(out, l.held)
			l.held = nil
		}
	}
	l.mu.Unlock()
	if len(out) > 0 {
		p := l.peer
		p.mu.Lock()
		p.queue = append(p.queue, out...)
		p.mu.Unlock()
		p.wake()
	}
	return nil
}

func (l *memLink) receive(in func([]byte)) (int, error) {
	l.mu.Lock()
	batch := l.queue[:min(len(l.queue), rxBatch)]
	l.queue = l.queue[len(batch):]
	l.mu.Unlock()
	for _, f := range batch {
		in(f)
	}
	return len(batch), nil
}

func (l *memLink) sleep() error {
	<-l.signal
	return nil
}

func (l *memLink) wake() {
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// memHosts are two hosts on a memLink pair, each receiving its frames in
// the goroutines that wait (no receive goroutine). Without bg, not even
// the host's own goroutine for idle times runs: only waiters receive.
func memHosts(t testing.TB, la, lb *memLink, clock Clock, bg bool) (a, b *RawHost) {
	host := func(l *memLink, mac net.HardwareAddr) *RawHost {
		h, err := NewHost(l, mac)
		if err != nil {
			t.Fatal(err)
		}
		h.SetClock(clock)
		h.poll = &poller{link: l, turn: make(chan struct{}, 1), done: make(chan struct{})}
		if bg {
			go h.background()
		} else {
			close(h.poll.done)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	return host(la, net.HardwareAddr{2, 0, 0, 0, 0, 0xa}), host(lb, net.HardwareAddr{2, 0, 0, 0, 0, 0xb})
}

// conns makes n connections between a and b on fixed VI numbers.
func conns(t testing.TB, a, b *RawHost, p Params, n int) (as, bs []*Conn) {
	for i := range n {
		va, err := a.VI(uint16(10+i), net.HardwareAddr{2, 0, 0, 0, 0, 0xb}, uint16(20+i))
		if err != nil {
			t.Fatal(err)
		}
		vb, err := b.VI(uint16(20+i), net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, uint16(10+i))
		if err != nil {
			t.Fatal(err)
		}
		ca, err := NewConn(va, p)
		if err != nil {
			t.Fatal(err)
		}
		cb, err := NewConn(vb, p)
		if err != nil {
			t.Fatal(err)
		}
		as, bs = append(as, ca), append(bs, cb)
	}
	return as, bs
}

// TestWaitersDriveInput: with no receive goroutine, two goroutines
// waiting on two connections of one host both get their messages, in
// either order, and so do a reader and a writer on one connection (the
// writer waiting for a window slot that the reader's receiving brings).
func TestWaitersDriveInput(t *testing.T) {
	la, lb := newMemLinks(1, 0, 0)
	a, b := memHosts(t, la, lb, nil, false)
	p := flowParams(2, 1)
	as, bs := conns(t, a, b, p, 2)
	for round := range 20 {
		got := make(chan error, 2)
		for i := range 2 {
			go func() {
				buf := make([]byte, 5)
				_, err := io.ReadFull(bs[i], buf)
				if err == nil && string(buf) != "hello" {
					err = io.ErrUnexpectedEOF
				}
				got <- err
			}()
		}
		first := round % 2 // the connection written to first
		for _, i := range []int{first, 1 - first} {
			mustWrite(t, as[i], "hello")
		}
		for range 2 {
			if err := result(t, got); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	// One connection, a reader and a writer on b's end: the writer sends
	// more than the window while the reader waits for a's answer.
	const n = 50
	wrote := make(chan error, 1)
	go func() {
		for range n {
			if _, err := bs[0].Write([]byte("w")); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 3)
		_, err := io.ReadFull(bs[0], buf)
		read <- err
	}()
	buf := make([]byte, n)
	if _, err := io.ReadFull(as[0], buf); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, as[0], "end")
	if err := result(t, wrote); err != nil {
		t.Fatal(err)
	}
	if err := result(t, read); err != nil {
		t.Fatal(err)
	}
}
