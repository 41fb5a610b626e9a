package sovia

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

// TestMemVIPrePosting: a message that finds no receive descriptor is lost
// and the receiving VI reports it (VIA's pre-posting constraint).
func TestMemVIPrePosting(t *testing.T) {
	a, b := NewMemPair()
	r, _ := a.Register([]byte("hello"))
	if err := a.PostSend(r, 0, 5, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Wait(time.Millisecond); !errors.Is(err, ErrNoDescriptor) || b.Lost() != 1 {
		t.Fatalf("wait: %v, lost %d; want ErrNoDescriptor and 1", err, b.Lost())
	}
	other, _ := b.Register(make([]byte, 8))
	if err := a.PostSend(other, 0, 1, 0); err == nil {
		t.Error("a send from memory the VI did not register was accepted")
	}
	rb, _ := b.Register(make([]byte, 8))
	b.PostRecv(rb)
	a.PostSend(r, 0, 5, 7)
	b.err = nil
	c, ok, err := b.Wait(time.Millisecond)
	if !ok || err != nil || !c.Recv || c.N != 5 || c.Imm != 7 || string(rb.Buf[:5]) != "hello" {
		t.Fatalf("completion %+v %v %v", c, ok, err)
	}
}

// TestStreams is the property test: on random settings and random
// sequences of writes and reads in both directions, every byte arrives
// intact and in order, no message ever finds its receive queue empty, at
// most w DATA messages are ever unacknowledged, and the close exchange
// completes on both ends. Acknowledgements ride on data flowing back.
func TestStreams(t *testing.T) {
	rounds := 150
	if testing.Short() {
		rounds = 30
	}
	rng := rand.New(rand.NewPCG(1, 2))
	piggybacked, combined, registered := 0, 0, 0
	for round := range rounds {
		p := randomParams(rng)
		scripts := [2][]int{randomScript(rng, p), randomScript(rng, p)}
		seeds := [2]uint64{rng.Uint64(), rng.Uint64()}
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			a, b, va, vb, err := NewPair(p)
			if err != nil {
				t.Fatal(err)
			}
			conns, vis := [2]*Conn{a, b}, [2]*MemVI{va, vb}
			sent := [2][]byte{}
			for i := range 2 {
				sent[i] = payload(seeds[i], total(scripts[i]))
			}
			got := [2][]byte{}
			var wrote [2]atomic.Bool
			errs := make(chan error, 2)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- run(conns[i], scripts[i], sent[i], len(sent[1-i]), &got[i], &wrote[i], &wrote[1-i], rand.New(rand.NewPCG(seeds[i], 9)))
				}()
			}
			wait := make(chan struct{})
			go func() { wg.Wait(); close(wait) }()
			select {
			case <-wait:
			case <-time.After(20 * time.Second):
				for i, c := range conns {
					t.Logf("end %d: credits %d pending %d rx %d closed %v peerFin %v finAck %v err %v in flight %d free %d posted %d comb %v got %d/%d",
						i, c.credits, c.pending, c.rx.Len(), c.closed, c.peerFin, c.finAck, c.err, c.inFlight, len(c.free), vis[i].Posted(), c.comb != nil, len(got[i]), len(sent[1-i]))
				}
				t.Fatalf("deadlock: settings %+v, scripts %v", p, scripts)
			}
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("%v (settings %+v)", err, p)
				}
			}
			for i := range 2 {
				if !bytes.Equal(got[i], sent[1-i]) {
					t.Fatalf("end %d read %d bytes, the peer wrote %d; first difference at %d", i, len(got[i]), len(sent[1-i]), firstDiff(got[i], sent[1-i]))
				}
				if n := vis[i].Lost(); n > 0 {
					t.Fatalf("end %d: %d messages found no receive descriptor", i, n)
				}
				s := conns[i].Stats()
				if s.MaxInFlight > p.Window {
					t.Fatalf("end %d had %d DATA unacknowledged; the window is %d", i, s.MaxInFlight, p.Window)
				}
				piggybacked += s.Piggybacked
				combined += s.Combined
				registered += s.Registered
			}
			for deadline := time.Now().Add(5 * time.Second); !a.Finished() || !b.Finished(); {
				if time.Now().After(deadline) {
					t.Fatalf("the close exchange did not finish (a %v, b %v)", a.Finished(), b.Finished())
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	if piggybacked == 0 || combined == 0 || registered == 0 {
		t.Errorf("the rounds never piggybacked (%d), combined (%d) or registered (%d): the test checks too little", piggybacked, combined, registered)
	}
}

// run writes script (sizes, cut from out) with reads in between, reads
// until want bytes came, and closes. A read between writes waits for the
// peer's data, so it comes only once the peer wrote everything (two ends
// both waiting to read would wait for ever, over TCP too).
func run(c *Conn, script []int, out []byte, want int, got *[]byte, done, peerDone *atomic.Bool, rng *rand.Rand) error {
	buf := make([]byte, 1+rng.IntN(70000))
	read := func() error {
		n, err := c.Read(buf[:1+rng.IntN(len(buf))])
		*got = append(*got, buf[:n]...)
		if err == io.EOF && len(*got) < want {
			return fmt.Errorf("EOF after %d of %d bytes", len(*got), want)
		}
		if err != nil && err != io.EOF {
			return err
		}
		return nil
	}
	off := 0
	for _, n := range script {
		if _, err := c.Write(out[off : off+n]); err != nil {
			return err
		}
		off += n
		if rng.IntN(3) == 0 && len(*got) < want && peerDone.Load() {
			if err := read(); err != nil {
				return err
			}
		}
	}
	done.Store(true)
	for len(*got) < want {
		if err := read(); err != nil {
			return err
		}
	}
	return c.Close()
}

func randomParams(rng *rand.Rand) Params {
	w := []int{1, 2, 3, 8, 32}[rng.IntN(5)]
	t := 1 + rng.IntN(w)
	chunk := []int{64, 1000, 4096, 32 << 10}[rng.IntN(4)]
	return Params{
		Window: w, AckThreshold: t, ChunkSize: chunk,
		CopyMax:      rng.IntN(chunk + 1),
		CombineMax:   rng.IntN(chunk + 1),
		CombineDelay: time.Duration(1+rng.IntN(3)) * time.Millisecond,
		NoDelay:      rng.IntN(4) == 0,
	}
}

func randomScript(rng *rand.Rand, p Params) []int {
	var out []int
	for range rng.IntN(60) {
		switch rng.IntN(4) {
		case 0:
			out = append(out, rng.IntN(3*p.ChunkSize+2))
		default:
			out = append(out, rng.IntN(max(1, p.CombineMax+1)))
		}
	}
	return out
}

func total(s []int) int {
	n := 0
	for _, x := range s {
		n += x
	}
	return n
}

func payload(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 3))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestWithoutFlowControlMessagesAreLost: a sender whose window exceeds
// what its peer pre-posted loses messages, and the VI says so; the
// property above can fail.
func TestWithoutFlowControlMessagesAreLost(t *testing.T) {
	va, vb := NewMemPair()
	p := PaperParams()
	a, err := newConn(va, p)
	if err != nil {
		t.Fatal(err)
	}
	small := p
	small.Window, small.AckThreshold = 2, 1
	if _, err := newConn(vb, small); err != nil {
		t.Fatal(err)
	}
	a.p.NoDelay = true
	for range 10 {
		a.Write([]byte("x"))
	}
	if vb.Lost() == 0 {
		t.Error("10 messages into 2+2+1 descriptors lost nothing")
	}
}

// TestPolicy: short writes are copied and long ones registered by the
// copy threshold; small writes are combined until the timer, a long write
// or a read flushes them, and not at all with NoDelay.
func TestPolicy(t *testing.T) {
	p := PaperParams()
	p.CombineDelay = 20 * time.Millisecond
	a, b, _, _, err := NewPair(p)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		a.Write([]byte("small"))
	}
	if s := a.Stats(); s.Data != 0 || s.Combined != 9 {
		t.Fatalf("before the timer: %+v; want nothing sent and 9 writes combined", s)
	}
	buf := make([]byte, 100)
	n, _ := b.Read(buf) // waits for the timer's flush
	if string(buf[:n]) != "smallsmallsmallsmallsmallsmallsmallsmallsmallsmall" || a.Stats().Data != 1 {
		t.Fatalf("read %q, %d messages", buf[:n], a.Stats().Data)
	}
	a.Write(make([]byte, 2<<10))  // at the copy threshold: copied
	a.Write(make([]byte, 40<<10)) // registered, in two chunks
	if s := a.Stats(); s.Copied != 2 || s.Registered != 2 {
		t.Errorf("%+v: want 2 copied (the combined message and 2 KiB) and 2 registered chunks", s)
	}
	p.NoDelay = true
	c, _, _, _, _ := NewPair(p)
	for range 5 {
		c.Write([]byte("x"))
	}
	if s := c.Stats(); s.Data != 5 || s.Combined != 0 {
		t.Errorf("NoDelay: %+v; want 5 messages, none combined", s)
	}
}

func TestParams(t *testing.T) {
	p := PaperParams()
	if p.Descriptors() != 32+2+1 {
		t.Errorf("the paper's w = 32, t = 16 pre-posts %d descriptors, want w + w/t + 1 = 35", p.Descriptors())
	}
	bad := p
	bad.AckThreshold = 33
	if bad.check() == nil {
		t.Error("t > w accepted")
	}
}

// TestNetwork: Listen, Dial and Accept; the dialer takes the listener's
// window, threshold and chunk size; a name no one listens on and a closed
// listener are errors.
func TestNetwork(t *testing.T) {
	n := NewNetwork()
	l, err := n.Listen("db", PaperParams())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("db", PaperParams()); err == nil {
		t.Error("two listeners on one name")
	}
	if _, err := n.Dial("nobody", PaperParams()); err == nil {
		t.Error("a dial to no listener succeeded")
	}
	mine := PaperParams()
	mine.Window, mine.NoDelay = 4, true
	go func() {
		c, err := l.AcceptConn()
		if err != nil {
			return
		}
		buf := make([]byte, 100)
		k, _ := c.Read(buf)
		c.Write(buf[:k])
		c.Close()
	}()
	c, err := n.Dial("db", mine)
	if err != nil {
		t.Fatal(err)
	}
	if c.p.Window != 32 || !c.p.NoDelay {
		t.Errorf("dialer's settings %+v: want the listener's window and its own NoDelay", c.p)
	}
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("%q %v", buf, err)
	}
	l.Close()
	if _, err := l.AcceptConn(); !errors.Is(err, ErrClosed) {
		t.Errorf("accept on a closed listener: %v", err)
	}
	if _, err := n.Dial("db", mine); err == nil {
		t.Error("a dial to a closed listener succeeded")
	}
}
