package sovia

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// flowParams: no combining, so each Write is one DATA message.
func flowParams(w, t int) Params {
	return Params{Window: w, AckThreshold: t, ChunkSize: 64, CopyMax: 64, NoDelay: true}
}

// state reads a connection's flow-control state after handling what has
// arrived.
func state(c *Conn) (credits, pending, windowWaits int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain()
	return c.credits, c.pending, c.windowWaits
}

// until waits for cond, letting other goroutines run; it fails after a
// minute (a bound on a hang, not a measurement).
func until(t *testing.T, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); runtime.Gosched() {
		if time.Since(start) > time.Minute {
			t.Fatal("the state waited for never came")
		}
	}
}

// result takes what a goroutine sends on ch; a test whose code under test
// never answers fails after a minute instead of hanging (a bound on a
// hang, not a measurement).
func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Minute):
		t.Fatal("no answer in a minute")
		return nil
	}
}

func mustWrite(t *testing.T, c *Conn, s string) {
	t.Helper()
	if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("write %q: %d, %v", s, n, err)
	}
}

func mustRead(t *testing.T, c *Conn, want string) {
	t.Helper()
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != want {
		t.Fatalf("read %q, %v; want %q", buf, err, want)
	}
}

// TestAcksCounted: the receiver sends no acknowledgement after t-1 DATA
// messages and exactly one after t (the paper's delayed
// acknowledgements, §4.2), and that one gives the sender its credits
// back.
func TestAcksCounted(t *testing.T) {
	const w, th = 8, 3
	a, b, _, _, err := newPairClock(flowParams(w, th), NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	for i := range th - 1 {
		mustWrite(t, a, string(rune('a'+i)))
	}
	mustRead(t, b, "ab")
	if s := b.Stats(); s.Acks != 0 {
		t.Fatalf("after %d DATA the receiver sent %d ACKs, want none", th-1, s.Acks)
	}
	if credits, _, _ := state(a); credits != w-(th-1) {
		t.Fatalf("sender credits %d after %d unacknowledged DATA, want %d", credits, th-1, w-(th-1))
	}
	mustWrite(t, a, "c")
	mustRead(t, b, "c")
	if s := b.Stats(); s.Acks != 1 {
		t.Fatalf("after %d DATA the receiver sent %d ACKs, want 1", th, s.Acks)
	}
	if credits, _, _ := state(a); credits != w {
		t.Fatalf("sender credits %d after the ACK, want the whole window %d", credits, w)
	}
	// t more: one more ACK, not t.
	for range th {
		mustWrite(t, a, "x")
	}
	mustRead(t, b, "xxx")
	if s := b.Stats(); s.Acks != 2 || s.Piggybacked != 0 {
		t.Fatalf("after %d DATA: %+v, want 2 ACKs and nothing piggybacked", 2*th, s)
	}
}

// TestWindowBlocksTheNextMessage: with w DATA unacknowledged the (w+1)th
// write waits, sending nothing, until an acknowledgement comes; while it
// waits, Stats and a Read on another goroutine go on.
func TestWindowBlocksTheNextMessage(t *testing.T) {
	const w = 4
	a, b, _, vb, err := newPairClock(flowParams(w, w), NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	for range w {
		mustWrite(t, a, "d")
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := a.Write([]byte("e"))
		wrote <- err
	}()
	until(t, func() bool { _, _, waits := state(a); return waits == 1 })
	if s := a.Stats(); s.Data != w || s.MaxInFlight != w {
		t.Fatalf("with the (w+1)th write waiting: %+v, want %d DATA sent, %d in flight", s, w, w)
	}
	vb.mu.Lock()
	arrived := len(vb.cq)
	vb.mu.Unlock()
	if arrived != w {
		t.Fatalf("the receiver got %d messages, want %d", arrived, w)
	}
	// The peer's VI sends DATA that acknowledges nothing (as its
	// connection would with nothing pending); the blocked writer does not
	// keep a Read from taking it.
	b.mu.Lock()
	b.credits-- // the message takes a slot of b's window
	b.mu.Unlock()
	r, _ := vb.Register([]byte("hi"))
	if err := vb.PostSend(r, 0, 2, immediate(typeData, 0)); err != nil {
		t.Fatal(err)
	}
	mustRead(t, a, "hi")
	select {
	case err := <-wrote:
		t.Fatalf("the (w+1)th write returned (%v) with no acknowledgement", err)
	default:
	}
	if _, _, waits := state(a); waits != 1 || a.Stats().Data != w {
		t.Fatalf("the write stopped waiting (%d) or sent (%d DATA)", waits, a.Stats().Data)
	}
	// The receiver reads: w pending, one ACK, and the write goes out,
	// piggybacking a's acknowledgement of "hi".
	mustRead(t, b, "dddd")
	if err := result(t, wrote); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Data != w+1 || s.MaxInFlight != w || s.Piggybacked != 1 {
		t.Fatalf("after the ACK: %+v, want %d DATA, at most %d in flight, 1 acknowledgement piggybacked", s, w+1, w)
	}
	mustRead(t, b, "e")
}

// TestPiggybacking: acknowledgements ride on DATA going back instead of
// an ACK of their own, and give the sender its credits.
func TestPiggybacking(t *testing.T) {
	const w, th = 8, 4
	a, b, _, _, err := newPairClock(flowParams(w, th), NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, a, "p")
	mustWrite(t, a, "q")
	mustRead(t, b, "pq")
	if _, pending, _ := state(b); pending != 2 {
		t.Fatalf("receiver pending %d, want 2", pending)
	}
	mustWrite(t, b, "r")
	if s := b.Stats(); s.Piggybacked != 2 || s.Acks != 0 {
		t.Fatalf("receiver %+v: want 2 acknowledgements piggybacked, no ACK", s)
	}
	mustRead(t, a, "r")
	if credits, _, _ := state(a); credits != w {
		t.Fatalf("sender credits %d after the piggybacked acknowledgement, want %d", credits, w)
	}
}

// TestCombineTimer: small writes wait in one message until CombineDelay
// passes on the connection's clock, and not a moment less.
func TestCombineTimer(t *testing.T) {
	clock := NewFakeClock()
	p := PaperParams()
	p.CombineDelay = 20 * time.Millisecond
	a, b, _, vb, err := newPairClock(p, clock)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		mustWrite(t, a, "ab")
	}
	clock.Advance(p.CombineDelay - 1)
	if a.Stats().Data != 0 || vb.Posted() != p.Descriptors() {
		t.Fatalf("before the delay: %d DATA sent", a.Stats().Data)
	}
	clock.Advance(1)
	if s := a.Stats(); s.Data != 1 || s.Combined != 2 {
		t.Fatalf("after the delay: %+v, want one message of 3 writes", s)
	}
	mustRead(t, b, "ababab")
}

// TestDeadlines: a Read or a window-blocked Write waiting when its
// deadline passes returns os.ErrDeadlineExceeded, and so does every call
// until the deadline moves; a deadline already past fails at once; the
// zero time removes it. The deadlines run on the connection's clock.
func TestDeadlines(t *testing.T) {
	clock := NewFakeClock()
	a, b, _, _, err := newPairClock(flowParams(1, 1), clock)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	a.SetReadDeadline(clock.Now().Add(time.Second))
	go func() {
		_, err := a.Read(make([]byte, 8))
		read <- err
	}()
	until(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.kick != nil })
	clock.Advance(time.Second - 1)
	select {
	case err := <-read:
		t.Fatalf("Read returned %v before its deadline", err)
	default:
	}
	clock.Advance(1)
	if err := result(t, read); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	if _, err := a.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the deadline passed: %v", err)
	}
	mustWrite(t, b, "late")
	a.SetReadDeadline(time.Time{})
	mustRead(t, a, "late")

	// Write: the window (1) is full until b reads.
	mustWrite(t, a, "1")
	a.SetWriteDeadline(clock.Now().Add(time.Second))
	wrote := make(chan error, 1)
	go func() {
		n, err := a.Write([]byte("2"))
		if n != 0 {
			err = errors.New("a timed-out write reported bytes written")
		}
		wrote <- err
	}()
	until(t, func() bool { _, _, waits := state(a); return waits == 1 })
	clock.Advance(time.Second)
	if err := result(t, wrote); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past its deadline: %v", err)
	}
	a.SetWriteDeadline(clock.Now().Add(-time.Second))
	if _, err := a.Write([]byte("3")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write with a deadline in the past: %v", err)
	}
	a.SetDeadline(time.Time{})
	mustRead(t, b, "1")
	mustWrite(t, a, "4")
	mustRead(t, b, "4")
}

// TestCloseWakesWaiters: Close makes a Read waiting on another goroutine
// return net.ErrClosed, and later calls too.
func TestCloseWakesWaiters(t *testing.T) {
	a, _, _, _, err := newPairClock(flowParams(2, 1), NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 8))
		read <- err
	}()
	until(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.kick != nil })
	a.Close()
	if err := result(t, read); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a Read waiting when the connection closed: %v", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

// gateVI holds the first DATA message posted to it until released, as a
// software VI's send of many frames takes a while.
type gateVI struct {
	*MemVI
	gated         atomic.Bool
	held, release chan struct{}
}

func (g *gateVI) PostSend(r *Region, off, n int, imm uint32) error {
	if uint8(imm) == typeData && g.gated.CompareAndSwap(false, true) {
		close(g.held)
		<-g.release
	}
	return g.MemVI.PostSend(r, off, n, imm)
}

// TestSendsKeepTheirOrder: a DATA goes out without the connection's lock
// (sendData), yet messages reach the VI in the order they were decided.
// A Read flushes a combined write, whose send is held up in the VI; a
// Write of a chunk meanwhile must not overtake it, or the peer reads the
// chunk's bytes before the combined ones.
func TestSendsKeepTheirOrder(t *testing.T) {
	clock := NewFakeClock() // the combining timer never fires
	va, vb := NewMemPairClock(clock)
	g := &gateVI{MemVI: va, held: make(chan struct{}), release: make(chan struct{})}
	p := PaperParams()
	a, err := newConn(g, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newConn(vb, p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, a, "first") // combined: nothing sent yet
	read := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 1)) // flushes "first", then waits
		read <- err
	}()
	<-g.held // the flush is in PostSend, without a.mu
	chunk := strings.Repeat("c", 3*p.CombineMax)
	wrote := make(chan error, 1)
	go func() {
		_, err := a.Write([]byte(chunk))
		wrote <- err
	}()
	// Until the Write has gone out (the fault) or waits for the flush to
	// reach the VI, holding a.mu meanwhile (a lock held for a thousand
	// looks in a row: a Write that goes on holds it only for moments).
	for held := 0; held < 1000; runtime.Gosched() {
		select {
		case err := <-wrote:
			wrote <- err
			held = 1000
			continue
		default:
		}
		if a.mu.TryLock() {
			a.mu.Unlock()
			held = 0
		} else {
			held++
		}
	}
	close(g.release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("first")+len(chunk))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "first"+chunk {
		t.Errorf("the peer read %q... first: the chunk overtook the combined write flushed before it", got[:5])
	}
	a.Close()
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Errorf("the waiting Read returned %v after Close, want net.ErrClosed", err)
	}
}
