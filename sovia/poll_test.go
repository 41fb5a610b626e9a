//go:build linux

package sovia

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
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
	alone   chan uint32 // if set, told the acknowledgement of each frame sent with it alone
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
	if l.alone != nil && len(f) >= 14+rawHeader && f[14+24]&flagAckOnly != 0 {
		l.alone <- binary.BigEndian.Uint32(f[22:])
	}
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
	l.mu.Lock()
	queued := len(l.queue) > 0
	l.mu.Unlock()
	if !queued {
		<-l.signal
	}
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

// TestLossyLink: over a link that loses 1% of the frames and holds 1%
// back behind the next (a seeded generator), 16 MiB written in 1 MiB
// writes come back from an echo byte for byte: the software VI sends
// lost messages again, drops duplicates and puts overtaken messages in
// order. Retransmissions run on the real clock here; nothing checks how
// long they take.
func TestLossyLink(t *testing.T) {
	la, lb := newMemLinks(7, 0.01, 0.01)
	a, b := memHosts(t, la, lb, nil, true)
	p := PaperParams()
	p.CombineDelay = time.Millisecond
	as, bs := conns(t, a, b, p, 1)
	ca, cb := as[0], bs[0]
	go echo(cb)
	total := 16 << 20
	if testing.Short() {
		total = 4 << 20
	}
	if err := bulkEcho(ca, total, 8); err != nil {
		t.Fatal(err)
	}
	va, vb := ca.vi.(*RawVI), cb.vi.(*RawVI)
	la.mu.Lock()
	sent, dropped, swapped := la.sent, la.dropped, la.swapped
	la.mu.Unlock()
	if dropped == 0 || swapped == 0 || va.Resent() == 0 {
		t.Fatalf("dropped %d, reordered %d, resent %d: the test exercised nothing", dropped, swapped, va.Resent())
	}
	t.Logf("a→b: %d frames, %d dropped, %d reordered; a resent %d messages, b %d", sent, dropped, swapped, va.Resent(), vb.Resent())
}

// TestRetransmitBreaks: a VI whose peer never acknowledges sends its
// message again at each timeout, doubling it, and breaks after Retries
// with ErrRetransmit, which Read reports. The timeouts run on a fake
// clock.
func TestRetransmitBreaks(t *testing.T) {
	clock := NewFakeClock()
	la, lb := newMemLinks(3, 1, 0) // every frame lost
	a, b := memHosts(t, la, lb, clock, false)
	rel := Reliability{AckDelay: time.Millisecond, AckEvery: 8, RTO: 10 * time.Millisecond, MaxRTO: 40 * time.Millisecond, Retries: 3}
	if err := a.SetReliability(rel); err != nil {
		t.Fatal(err)
	}
	as, _ := conns(t, a, b, flowParams(4, 2), 1)
	mustWrite(t, as[0], "lost")
	v := as[0].vi.(*RawVI)
	for i, step := range []time.Duration{10, 20, 40} {
		clock.Advance(step*time.Millisecond - 1)
		if v.Resent() != i {
			t.Fatalf("before timeout %d: resent %d", i+1, v.Resent())
		}
		clock.Advance(1)
		if v.Resent() != i+1 {
			t.Fatalf("after timeout %d (%v): resent %d", i+1, step*time.Millisecond, v.Resent())
		}
	}
	clock.Advance(40 * time.Millisecond)
	if _, err := as[0].Read(make([]byte, 1)); !errors.Is(err, ErrRetransmit) {
		t.Fatalf("Read on a VI whose peer never answered: %v", err)
	}
}

// TestDefaultRetransmitBreaksAfter7s: with DefaultReliability a VI
// whose peer never acknowledges breaks about 7 s after it sent (the
// figure DefaultReliability's comment, docs/sovia.md, docs/cli.md and
// sovia bench's help give): RTO doubled up to MaxRTO, Retries+1
// timeouts, the last of which breaks it.
func TestDefaultRetransmitBreaksAfter7s(t *testing.T) {
	rel := DefaultReliability()
	var total time.Duration
	for i, rto := 0, rel.RTO; i <= rel.Retries; i, rto = i+1, min(2*rto, rel.MaxRTO) {
		total += rto
	}
	if total.Round(time.Second) != 7*time.Second {
		t.Fatalf("the default timeouts add up to %v: the docs say about 7 s", total)
	}
	clock := NewFakeClock()
	la, lb := newMemLinks(3, 1, 0) // every frame lost
	a, b := memHosts(t, la, lb, clock, false)
	as, _ := conns(t, a, b, flowParams(4, 2), 1)
	mustWrite(t, as[0], "lost")
	v := as[0].vi.(*RawVI)
	broken := func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.err
	}
	clock.Advance(total - 1)
	if err := broken(); err != nil || v.Resent() != rel.Retries {
		t.Fatalf("%v after the send: resent %d, want %d; error %v", total-1, v.Resent(), rel.Retries, err)
	}
	clock.Advance(1)
	if err := broken(); !errors.Is(err, ErrRetransmit) {
		t.Fatalf("%v after the send: %v, want ErrRetransmit", total, err)
	}
}

// TestReorderedAndDuplicateFrames: frames of a later message before an
// earlier one's, and frames twice, put the messages together once and in
// order; a receiver that saw nakAfter frames of later messages asks for
// the missing one (a NAK) once.
func TestReorderedAndDuplicateFrames(t *testing.T) {
	link := &recordLink{}
	h, err := NewHost(link, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	h.SetClock(NewFakeClock())
	v, err := h.VI(1, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		r, _ := v.Register(make([]byte, 4000))
		v.PostRecv(r)
	}
	two := bytes.Repeat([]byte("b"), 3000)
	h.Input(viFrame(1, 7, 2, 3000, 1472, 0, two[1472:])) // message 2's second frame first
	h.Input(viFrame(1, 7, 3, 1, 0, 0, []byte("c")))
	h.Input(viFrame(1, 7, 2, 3000, 0, 0, two[:1472]))
	h.Input(viFrame(1, 7, 2, 3000, 0, 0, two[:1472])) // again
	if _, ok, _ := v.Wait(0); ok {
		t.Fatal("a message completed before message 1 came")
	}
	naks := 0
	for _, f := range link.sent {
		if f[14+24]&flagNak != 0 {
			naks++
			if ack := binary.BigEndian.Uint32(f[22:]); ack != 0 {
				t.Errorf("NAK acknowledges %d, want 0 (message 1 missing)", ack)
			}
		}
	}
	if naks != 1 {
		t.Fatalf("%d NAKs after frames of messages 2 and 3 came before 1, want 1", naks)
	}
	h.Input(viFrame(1, 7, 1, 1, 0, 0, []byte("a")))
	h.Input(viFrame(1, 7, 1, 1, 0, 0, []byte("a"))) // a duplicate of a delivered message
	for _, want := range []string{"a", string(two), "c"} {
		c, ok, err := v.Wait(0)
		if !ok || err != nil || string(c.Region.Buf[:c.N]) != want {
			t.Fatalf("got %q (%v, %v), want %d bytes of %q", c.Region.Buf[:min(c.N, 8)], ok, err, len(want), want[:1])
		}
	}
	if _, ok, _ := v.Wait(0); ok {
		t.Fatal("a duplicate completed a receive")
	}
	if v.rx.expect != 4 || v.rx.dups != 2 {
		t.Fatalf("expect %d, %d duplicates; want 4 and 2", v.rx.expect, v.rx.dups)
	}
}

// ackedVI is VI 1 of a host on a recordLink, joined to VI 7 of the peer,
// on a fake clock, and a function that hands the host the peer's
// acknowledgement of every message up to seq, alone.
func ackedVI(t *testing.T) (*FakeClock, *recordLink, *RawVI, func(seq uint32)) {
	t.Helper()
	clock := NewFakeClock()
	link := &recordLink{}
	h, err := NewHost(link, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	h.SetClock(clock)
	v, err := h.VI(1, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	ack := func(seq uint32) {
		f := viFrame(1, 7, 0, 0, 0, 0, nil)
		binary.BigEndian.PutUint32(f[22:], seq)
		f[14+24] = flagAckOnly
		h.Input(f)
	}
	return clock, link, v, ack
}

// TestRetransmitTimesFromSend: once an acknowledgement settles every
// message, the next message's timeout counts from when it was sent, not
// from the acknowledgement nor from when the timer (left set) was armed.
func TestRetransmitTimesFromSend(t *testing.T) {
	clock, _, v, ackAll := ackedVI(t)
	r, _ := v.Register([]byte("m"))
	if err := v.PostSend(r, 0, 1, 0); err != nil { // message 1 at 0: the timer is set for 10 ms
		t.Fatal(err)
	}
	clock.Advance(5 * time.Millisecond)
	ackAll(1) // at 5 ms: nothing waits
	clock.Advance(3 * time.Millisecond)
	if err := v.PostSend(r, 0, 1, 0); err != nil { // message 2 at 8 ms
		t.Fatal(err)
	}
	clock.Advance(10*time.Millisecond - 1) // the timer fired at 10 ms and looked again
	if v.Resent() != 0 {
		t.Fatalf("message 2 resent %d times before it waited 10 ms", v.Resent())
	}
	clock.Advance(1) // 18 ms: message 2 waited a whole timeout
	if v.Resent() != 1 {
		t.Fatalf("message 2 resent %d times after it waited 10 ms, want 1", v.Resent())
	}
}

// TestAckOfUnsentIgnored: an acknowledgement of a message the VI never
// sent (forged, or from a confused peer) is ignored and counted, as TCP
// ignores an ACK beyond SND.NXT (RFC 793 §3.9): the messages waiting are
// still resent at their timeout, and a true acknowledgement settles them.
func TestAckOfUnsentIgnored(t *testing.T) {
	clock, _, v, ack := ackedVI(t)
	r, _ := v.Register([]byte("m"))
	for range 2 {
		if err := v.PostSend(r, 0, 1, 0); err != nil { // messages 1 and 2
			t.Fatal(err)
		}
	}
	ack(1000)
	ack(3)
	if n := v.IgnoredAcks(); n != 2 {
		t.Fatalf("%d acknowledgements ignored, want 2 (of messages 3 and 1000, never sent)", n)
	}
	clock.Advance(10 * time.Millisecond)
	resent := v.Resent()
	if resent == 0 {
		t.Fatal("nothing resent at the timeout: the forged acknowledgement settled the messages")
	}
	ack(2)
	clock.Advance(time.Second)
	if v.Resent() != resent || v.IgnoredAcks() != 2 {
		t.Fatalf("after a true acknowledgement of both: resent %d (was %d), ignored %d; want no more and 2", v.Resent(), resent, v.IgnoredAcks())
	}
}

// TestTimeoutSendsOldestOnly: a timeout sends the oldest message waiting
// again, not every one; while the messages sent before the timeout are
// not all acknowledged, an acknowledgement of exactly the message sent
// again sends the next one (a hole after a hole), one that covers more
// (the originals arrived late) sends nothing, and once everything sent
// before the timeout is acknowledged, acknowledgements send nothing.
func TestTimeoutSendsOldestOnly(t *testing.T) {
	clock, link, v, ack := ackedVI(t)
	r, _ := v.Register([]byte("m"))
	// sentSince lists the message numbers of the frames sent since the
	// n-th.
	sentSince := func(n int) []uint32 {
		var seqs []uint32
		for _, f := range link.sent[n:] {
			seqs = append(seqs, binary.BigEndian.Uint32(f[18:]))
		}
		return seqs
	}
	for range 6 {
		if err := v.PostSend(r, 0, 1, 0); err != nil { // messages 1 to 6
			t.Fatal(err)
		}
	}
	n := len(link.sent)
	clock.Advance(10 * time.Millisecond)
	if got := sentSince(n); !slices.Equal(got, []uint32{1}) || v.Resent() != 1 {
		t.Fatalf("at the timeout: sent again %v (resent %d), want message 1 alone", got, v.Resent())
	}
	n = len(link.sent)
	ack(1) // message 1 filled a hole; 2 is missing too
	if got := sentSince(n); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("after the acknowledgement of message 1, sent again: %v, want message 2", got)
	}
	n = len(link.sent)
	ack(4) // more than the message sent again: 3 and 4 were only late
	if got := sentSince(n); len(got) != 0 {
		t.Fatalf("after an acknowledgement past the message sent again, sent: %v, want nothing", got)
	}
	ack(6)                                         // everything sent before the timeout: the recovery ends
	if err := v.PostSend(r, 0, 1, 0); err != nil { // message 7
		t.Fatal(err)
	}
	if err := v.PostSend(r, 0, 1, 0); err != nil { // message 8
		t.Fatal(err)
	}
	n = len(link.sent)
	ack(7)
	if got := sentSince(n); len(got) != 0 || v.Resent() != 2 {
		t.Fatalf("after the recovery, an acknowledgement sent %v (resent %d), want nothing and 2", got, v.Resent())
	}
}

// TestAckOwedSentWhenReceiverSleeps: on a host whose goroutines receive
// themselves, an acknowledgement rides on the reply (none goes alone in a
// ping-pong), and one that no reply carried goes alone when the goroutine
// receiving finds nothing more and sleeps, with no timer set for it and
// the clock standing still.
func TestAckOwedSentWhenReceiverSleeps(t *testing.T) {
	clock := NewFakeClock()
	la, lb := newMemLinks(1, 0, 0)
	la.alone, lb.alone = make(chan uint32, 64), make(chan uint32, 64)
	a, b := memHosts(t, la, lb, clock, false)
	as, bs := conns(t, a, b, flowParams(4, 2), 1)
	ca, cb := as[0], bs[0]
	const rounds = 10
	echoed := make(chan error, 1)
	go func() {
		buf := make([]byte, 1)
		for range rounds {
			if _, err := io.ReadFull(cb, buf); err != nil {
				echoed <- err
				return
			}
			if _, err := cb.Write(buf); err != nil {
				echoed <- err
				return
			}
		}
		echoed <- nil
	}()
	for i := range rounds {
		msg := string(rune('a' + i))
		mustWrite(t, ca, msg)
		mustRead(t, ca, msg)
	}
	if err := result(t, echoed); err != nil {
		t.Fatal(err)
	}
	select {
	case ack := <-la.alone:
		t.Fatalf("a sent an acknowledgement (%d) alone in a ping-pong", ack)
	case ack := <-lb.alone:
		t.Fatalf("b sent an acknowledgement (%d) alone in a ping-pong", ack)
	default:
	}

	// a's message, which b reads and does not answer: b owes its
	// acknowledgement until its next Read finds nothing and sleeps.
	mustWrite(t, ca, "q")
	mustRead(t, cb, "q")
	select {
	case ack := <-lb.alone:
		t.Fatalf("b sent an acknowledgement (%d) alone while its reader had not yet waited", ack)
	default:
	}
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 1)
		_, err := io.ReadFull(cb, buf)
		read <- err
	}()
	select {
	case ack := <-lb.alone:
		if ack != rounds+1 {
			t.Fatalf("b acknowledged %d alone, want %d (every message of a)", ack, rounds+1)
		}
	case <-time.After(time.Minute):
		t.Fatal("b's reader waits and b has not acknowledged a's last message")
	}
	vb := cb.vi.(*RawVI)
	vb.mu.Lock()
	timer := vb.rx.ackTimer
	vb.mu.Unlock()
	if timer != nil {
		t.Fatal("a timer was set for the acknowledgement")
	}
	mustWrite(t, ca, "z") // the waiting Read's
	if err := result(t, read); err != nil {
		t.Fatal(err)
	}
}
