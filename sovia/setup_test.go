//go:build linux

package sovia

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// clocked makes a host on a recording link whose setup runs on a fake
// clock, with limits l.
func clocked(t *testing.T, mac net.HardwareAddr, l SetupLimits) (*RawHost, *recordLink, *FakeClock) {
	t.Helper()
	link := &recordLink{}
	h, err := NewHost(link, mac)
	if err != nil {
		t.Fatal(err)
	}
	clk := NewFakeClock()
	h.SetClock(clk)
	if err := h.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, link, clk
}

var hostMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}

// setupFrom is a setup frame to hostMAC from VI svi of the host whose
// address is mac.
func setupFrom(mac [6]byte, svi uint16, m setupMsg) []byte {
	f := viFrame(0, svi, 0, setupLen, 0, 0, m.frame())
	copy(f[6:12], mac[:])
	return f
}

// counts reads a host's setup counters by reason.
func counts(h *RawHost) map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range h.SetupCounts() {
		out[c.Reason] = c.Count
	}
	return out
}

// answers are the setup frames a host sent, decoded, with their
// destination.
func answers(link *recordLink) (out []struct {
	to [6]byte
	m  setupMsg
}) {
	for _, f := range link.sent {
		if binary.BigEndian.Uint16(f[14:]) != 0 {
			continue
		}
		m, ok := parseSetup(f[14+rawHeader:])
		if !ok {
			continue
		}
		out = append(out, struct {
			to [6]byte
			m  setupMsg
		}{[6]byte(f[0:6]), m})
	}
	return out
}

func (h *RawHost) halfOpenCount() (total int, byPeer map[[6]byte]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	byPeer = map[[6]byte]int{}
	for _, e := range h.setup.halfOpen {
		byPeer[e.key.mac]++
	}
	return len(h.setup.halfOpen), byPeer
}

func (h *RawHost) openVIs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.vis)
}

// TestSetupHalfOpenBounded: requests that are never confirmed keep at
// most HalfOpenPerPeer half-open connections per peer and HalfOpen in
// all; beyond, the oldest (of the peer, then of all) is evicted, counted,
// and its VI closed.
func TestSetupHalfOpenBounded(t *testing.T) {
	lim := DefaultSetupLimits()
	lim.HalfOpenPerPeer, lim.HalfOpen, lim.AnswerBurst = 2, 8, 1000
	h, link, _ := clocked(t, hostMAC, lim)
	p := PaperParams()
	if _, err := h.Listen(80, p); err != nil {
		t.Fatal(err)
	}
	x := [6]byte{2, 0, 0, 0, 0, 0x77}
	for vi := uint16(1); vi <= 3; vi++ { // one peer, three requests
		h.Input(setupFrom(x, vi, setupMsg{kind: setupConnect, port: 80, dialer: vi, p: p, nonce: 9}))
	}
	if n, by := h.halfOpenCount(); n != 2 || by[x] != 2 {
		t.Fatalf("after 3 requests from one peer: %d half-open, %d of the peer; want 2 and 2", n, by[x])
	}
	for i := range 20 { // twenty more peers
		mac := [6]byte{2, 1, 0, 0, 0, byte(i)}
		h.Input(setupFrom(mac, 5, setupMsg{kind: setupConnect, port: 80, dialer: 5, p: p, nonce: 1}))
	}
	n, by := h.halfOpenCount()
	if n != 8 {
		t.Errorf("%d half-open connections, want the limit 8", n)
	}
	for mac, k := range by {
		if k > 2 {
			t.Errorf("%x holds %d half-open connections, over the limit of 2", mac, k)
		}
	}
	if v := h.openVIs(); v != 8 {
		t.Errorf("%d VIs open, want 8 (the evicted ones' closed)", v)
	}
	c := counts(h)
	if c[dropNames[dropEvictedPeer]] != 1 || c[dropNames[dropEvictedTotal]] != 14 {
		t.Errorf("evictions counted %v; want 1 for the peer's limit and 14 (2+20-8) for the host's", c)
	}
	accepts := 0
	for _, a := range answers(link) {
		if a.m.kind == setupAccept {
			accepts++
		}
	}
	if accepts != 23 {
		t.Errorf("%d ACCEPTs sent, want one a request (23)", accepts)
	}
	// The evicted connections' VIs were never joined to a peer's:
	// their numbers are not quarantined.
	h.mu.Lock()
	q := len(h.setup.closedAt)
	h.mu.Unlock()
	if q != 0 {
		t.Errorf("%d VI numbers quarantined after evicting half-open connections, want none", q)
	}
}

// TestSetupHandshakeTimeout: a half-open connection lives for the
// handshake timeout and not longer, and its VI number then stays out of
// use for the quarantine.
func TestSetupHandshakeTimeout(t *testing.T) {
	lim := DefaultSetupLimits()
	h, _, clk := clocked(t, hostMAC, lim)
	p := PaperParams()
	if _, err := h.Listen(80, p); err != nil {
		t.Fatal(err)
	}
	h.Input(setupFrom([6]byte{2, 0, 0, 0, 0, 2}, 5, setupMsg{kind: setupConnect, port: 80, dialer: 5, p: p, nonce: 3}))
	if n, _ := h.halfOpenCount(); n != 1 {
		t.Fatalf("%d half-open after a request, want 1", n)
	}
	clk.Advance(lim.Handshake - time.Millisecond)
	if n, _ := h.halfOpenCount(); n != 1 {
		t.Fatalf("%d half-open just before the handshake timeout, want 1", n)
	}
	clk.Advance(lim.Handshake / 2) // the sweep runs every Handshake/4
	if n, _ := h.halfOpenCount(); n != 0 || h.openVIs() != 0 {
		t.Fatalf("after the handshake timeout: %d half-open, %d VIs open; want none", n, h.openVIs())
	}
	if c := counts(h)[dropNames[dropHandshakeTimeout]]; c != 1 {
		t.Errorf("handshake timeouts counted %d, want 1", c)
	}
}

// TestSetupValidates: requests and answers that name VI 0, or another VI
// than their sender, come from a group address, are cut short or of an
// unknown kind, or confirm a connection another peer asked for, are
// dropped and counted, and nothing is answered.
func TestSetupValidates(t *testing.T) {
	lim := DefaultSetupLimits()
	h, link, _ := clocked(t, hostMAC, lim)
	p := PaperParams()
	if _, err := h.Listen(80, p); err != nil {
		t.Fatal(err)
	}
	peer := [6]byte{2, 0, 0, 0, 0, 2}
	connect := setupMsg{kind: setupConnect, port: 80, dialer: 5, p: p, nonce: 3}
	zero := connect
	zero.dialer = 0
	h.Input(setupFrom(peer, 0, zero))                         // dialer VI 0
	h.Input(setupFrom(peer, 6, connect))                      // names VI 5, sent from VI 6
	h.Input(setupFrom([6]byte{3, 0, 0, 0, 0, 2}, 5, connect)) // a group source
	h.Input(setupFrom([6]byte{}, 5, connect))                 // the zero address
	short := setupFrom(peer, 5, connect)
	binary.BigEndian.PutUint32(short[22:], 10)
	h.Input(short[:14+rawHeader+10])
	odd := connect
	odd.kind = 9
	h.Input(setupFrom(peer, 5, odd))
	h.Input(setupFrom(peer, 5, setupMsg{kind: setupAccept, port: 80, dialer: 5, listener: 7, nonce: 3})) // no dial awaits it
	if len(link.sent) != 0 {
		t.Fatalf("the host answered %d malformed requests", len(link.sent))
	}
	want := map[string]uint64{dropNames[dropBadVI]: 2, dropNames[dropSource]: 2, dropNames[dropShort]: 1,
		dropNames[dropUnknownKind]: 1, dropNames[dropAnswerUnawaited]: 1}
	if got := counts(h); !mapsEqual(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}

	// A real request, then a confirmation of it from another address.
	h.Input(setupFrom(peer, 5, connect))
	as := answers(link)
	if len(as) != 1 || as[0].m.kind != setupAccept || as[0].to != peer || as[0].m.listener == 0 || as[0].m.nonce != 3 {
		t.Fatalf("answer to a request: %+v", as)
	}
	lvi := as[0].m.listener
	// A data frame from VI 0 reaches no VI, not even the half-open one
	// (whose peer VI is not known yet, 0).
	zeroData := viFrame(lvi, 0, 1, 3, 0, typeData, []byte("abc"))
	copy(zeroData[0:6], hostMAC)
	copy(zeroData[6:12], peer[:])
	h.Input(zeroData)
	h.mu.Lock()
	half := h.vis[lvi]
	h.mu.Unlock()
	if half.heard.Load() != 0 {
		t.Fatal("a data frame from VI 0 reached the half-open connection's VI")
	}
	confirm := setupMsg{kind: setupConfirm, port: 80, dialer: 5, listener: lvi, p: p, nonce: 3}
	h.Input(setupFrom([6]byte{2, 0, 0, 0, 0, 3}, 5, confirm))
	wrongNonce := confirm
	wrongNonce.nonce = 4
	h.Input(setupFrom(peer, 5, wrongNonce))
	if n, _ := h.halfOpenCount(); n != 1 || len(answers(link)) != 1 {
		t.Fatalf("confirmations from another peer or attempt: %d half-open (want 1), %d answers (want 1)", n, len(answers(link)))
	}
	if c := counts(h)[dropNames[dropConfirmUnknown]]; c != 2 {
		t.Errorf("foreign confirmations counted %d, want 2", c)
	}
	// The real confirmation establishes it; frames to its VI from
	// another address, or another VI, reach nothing.
	h.Input(setupFrom(peer, 5, confirm))
	if as := answers(link); len(as) != 2 || as[1].m.kind != setupEstablished || as[1].m.listener != lvi {
		t.Fatalf("answer to the confirmation: %+v", as)
	}
	data := viFrame(lvi, 5, 1, 3, 0, typeData, []byte("abc"))
	copy(data[0:6], hostMAC)
	forged := append([]byte(nil), data...)
	copy(forged[6:12], []byte{2, 0, 0, 0, 0, 3})
	h.Input(forged)
	h.mu.Lock()
	v := h.vis[lvi]
	h.mu.Unlock()
	if v.heard.Load() != 0 {
		t.Fatal("a frame from another address reached the connection's VI")
	}
	copy(data[6:12], peer[:])
	h.Input(data)
	if v.heard.Load() != 1 {
		t.Fatal("the peer's own frame did not reach its VI")
	}
	if c := counts(h)[dropNames[dropForeign]]; c != 2 {
		t.Errorf("frames from another peer or VI 0 counted %d, want 2", c)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSetupAnswerRate: answers to requests keep to the rate limit's
// burst, and the bucket fills again with time.
func TestSetupAnswerRate(t *testing.T) {
	lim := DefaultSetupLimits()
	lim.AnswerBurst, lim.AnswerRate = 5, 10
	h, link, clk := clocked(t, hostMAC, lim)
	for i := range 8 {
		h.Input(setupFrom([6]byte{2, 0, 0, 0, 1, byte(i)}, 5, setupMsg{kind: setupConnect, port: 99, dialer: 5, nonce: 1}))
	}
	if n := len(answers(link)); n != 5 {
		t.Fatalf("%d answers to 8 requests with a burst of 5", n)
	}
	clk.Advance(200 * time.Millisecond) // two tokens at 10/s
	for i := range 3 {
		h.Input(setupFrom([6]byte{2, 0, 0, 0, 2, byte(i)}, 5, setupMsg{kind: setupConnect, port: 99, dialer: 5, nonce: 1}))
	}
	if n := len(answers(link)); n != 7 {
		t.Fatalf("%d answers after 200 ms at 10/s, want 7", n)
	}
	if c := counts(h); c[dropNames[dropAnswerLimited]] != 4 || c[dropNames[dropRefused]] != 7 {
		t.Errorf("counted %v: want 4 held back by the limit and 7 refused (no listener)", c)
	}
}

// TestSetupQuarantine: a closed VI's number is not handed out again
// until the quarantine ends, even when it is the only one free.
func TestSetupQuarantine(t *testing.T) {
	lim := DefaultSetupLimits()
	h, _, clk := clocked(t, hostMAC, lim)
	peer := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	for n := 1; n < 1<<16; n++ {
		if _, err := h.VI(uint16(n), peer, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.VI(0, peer, 1); err == nil || !strings.Contains(err.Error(), "every VI number") {
		t.Fatalf("a VI on a full host: %v", err)
	}
	h.vis[77].Close()
	if v, err := h.VI(0, peer, 1); err == nil {
		t.Fatalf("VI %d handed out during 77's quarantine", v.lvi)
	}
	clk.Advance(lim.Quarantine)
	if v, err := h.VI(0, peer, 1); err != nil || v.lvi != 77 {
		t.Fatalf("after VI 77's quarantine: %v, %v", v, err)
	}
}

// connected dials from a to a listener of b's (port 80, no combining)
// and returns both ends; the dialer's closes when the test ends.
func connected(t *testing.T, a, b *RawHost) (c, s *Conn) {
	t.Helper()
	p := PaperParams()
	p.NoDelay, p.CombineMax = true, 0
	l, err := b.Listen(80, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err = a.Dial(b.MAC(), 80, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if s, err = l.AcceptConn(); err != nil {
		t.Fatal(err)
	}
	return c, s
}

// TestSetupIdleTimeout: an accepted connection that hears nothing for the
// idle timeout fails (its reader learns why), and one that hears from its
// peer does not.
func TestSetupIdleTimeout(t *testing.T) {
	a, b := pipeHosts(t)
	clk := NewFakeClock()
	b.SetClock(clk)
	lim := DefaultSetupLimits()
	if err := b.SetLimits(lim); err != nil {
		t.Fatal(err)
	}
	c, s := connected(t, a, b)
	read := make(chan error, 1)
	heard := make(chan bool, 1)
	go func() {
		buf := make([]byte, 8)
		for {
			if _, err := s.Read(buf); err != nil {
				read <- err
				return
			}
			heard <- true
		}
	}()
	clk.Advance(lim.Idle * 3 / 4)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	// The link delivers on a goroutine of its own: the listener has heard
	// the peer once the byte is read.
	select {
	case <-heard:
	case err := <-read:
		t.Fatalf("Read before the byte arrived: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the byte written has not arrived after 10 s")
	}
	clk.Advance(lim.Idle * 3 / 4) // 1.5 idle in all, 0.75 since the peer spoke
	select {
	case err := <-read:
		t.Fatalf("a connection that heard from its peer 0.75 idle ago failed: %v", err)
	default:
	}
	clk.Advance(lim.Idle / 2)
	select {
	case err := <-read:
		if err == nil || !strings.Contains(err.Error(), "idle") {
			t.Errorf("the idle connection's Read: %v, want the idle timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection's Read still waits 10 s after the idle timeout")
	}
	if n := counts(b)[dropNames[dropIdle]]; n != 1 {
		t.Errorf("idle timeouts counted %d, want 1", n)
	}
}

// TestSetupClientsInARow is the alternating-client failure in one
// process: clients that each open a host of their own with the same
// address, dial from the same VI number, echo, close and go away at once
// (a process that exits) are all served by one stream, one after
// another. Before requests carried a nonce, the listener took the second
// client's request for a repetition of the first's and handed it the
// first's closing VI.
func TestSetupClientsInARow(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}
	lb := newPipeLink(nil)
	b, err := NewHost(lb, net.HardwareAddr{2, 0, 0, 0, 0, 0xb})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := PaperParams()
	p.NoDelay, p.CombineMax = true, 0
	st := Stream{Name: "echo", Local: netip.MustParseAddrPort("10.0.0.2:7"), Transport: "vi", VI: 1, Params: p}
	if err := ServeStreams(b, []Stream{st}, func(string) func(*Conn) { return Apps["echo"] }); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		a, err := NewHost(newPipeLink(b), mac)
		if err != nil {
			t.Fatal(err)
		}
		a.next = 1 // every client dials from VI 1
		lb.setTo(a)
		c, err := a.Dial(b.MAC(), 7, p)
		if err != nil {
			t.Fatalf("client %d: %v (counts %v)", i, err, counts(b))
		}
		msg := []byte{'c', byte('0' + i)}
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		got := make([]byte, 2)
		if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
			t.Fatalf("client %d: echo %q, %v", i, got, err)
		}
		c.Close()
		a.Close() // the process exits: no close exchange
	}
}

// floodLink is a pipe link that holds its host's first answer to a
// request back until it has handed the host n forged requests from other
// addresses, as a flood between the answer and its confirmation would.
type floodLink struct {
	*pipeLink
	from    *RawHost
	n       int
	flooded bool
	done    chan struct{}
}

func (l *floodLink) SendFrame(f []byte) error {
	if m, ok := parseSetup(f[14+rawHeader:]); ok && binary.BigEndian.Uint16(f[14:]) == 0 && m.kind == setupAccept && !l.flooded {
		l.flooded = true
		held := append([]byte(nil), f...)
		go func() { // once the host's send is over: Input answers
			defer close(l.done)
			for i := range l.n {
				g := setupFrom([6]byte{2, 9, 0, 0, byte(i >> 8), byte(i)}, 5, setupMsg{kind: setupConnect, port: m.port, dialer: 5, p: m.p, nonce: 1})
				copy(g[0:6], held[6:12]) // to the host
				l.from.Input(g)
			}
			l.pipeLink.SendFrame(held)
		}()
		return nil
	}
	return l.pipeLink.SendFrame(f)
}

// TestSetupEvictedDialerStartsOver: a dialer whose half-open connection
// a flood evicted before its confirmation arrived asks again from the
// start and connects.
func TestSetupEvictedDialerStartsOver(t *testing.T) {
	la := newPipeLink(nil)
	a, err := NewHost(la, net.HardwareAddr{2, 0, 0, 0, 0, 0xa})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	lb := &floodLink{pipeLink: newPipeLink(nil), n: 64, done: make(chan struct{})}
	lb.setTo(a)
	b, err := NewHost(lb, net.HardwareAddr{2, 0, 0, 0, 0, 0xb})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lb.from = b
	la.setTo(b)
	p := PaperParams()
	if _, err := b.Listen(80, p); err != nil {
		t.Fatal(err)
	}
	c, err := a.Dial(b.MAC(), 80, p)
	if err != nil {
		t.Fatalf("dial after the flood evicted the half-open connection: %v (counts %v)", err, counts(b))
	}
	c.Close()
	<-lb.done
	got := counts(b)
	if got[dropNames[dropEvictedTotal]] < 1 || got[dropNames[dropConfirmUnknown]] != 1 {
		t.Errorf("counted %v: want the dialer's half-open connection evicted and its confirmation unknown once", got)
	}
}

// TestKeepAliveOutlivesIdle: a connection on which nothing is written
// for three idle timeouts stays open while the dialer sends keep-alives
// (an acknowledgement alone after KeepAlive of silence), and fails on the
// listener's idle timeout when it sends none.
func TestKeepAliveOutlivesIdle(t *testing.T) {
	lim := DefaultSetupLimits()
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		survives  bool
	}{
		{"keep-alive", DefaultReliability().KeepAlive, true},
		{"none", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pipeHosts(t)
			clk := NewFakeClock()
			a.SetClock(clk)
			b.SetClock(clk)
			if err := b.SetLimits(lim); err != nil {
				t.Fatal(err)
			}
			rel := DefaultReliability()
			rel.KeepAlive = tc.keepAlive
			if err := a.SetReliability(rel); err != nil {
				t.Fatal(err)
			}
			// The listener's side sends none: only the dialer's keep it.
			rel.KeepAlive = 0
			if err := b.SetReliability(rel); err != nil {
				t.Fatal(err)
			}
			_, s := connected(t, a, b)
			read := make(chan error, 1)
			go func() {
				_, err := s.Read(make([]byte, 8))
				read <- err
			}()
			heard := func() (n uint64) {
				b.mu.Lock()
				defer b.mu.Unlock()
				for _, v := range b.vis {
					n += v.heard.Load()
				}
				return n
			}
			// Step by a keep-alive interval (a third of the idle timeout)
			// and, when keep-alives are on, wait until the listener heard
			// one: the link delivers on a goroutine of its own.
			step := DefaultReliability().KeepAlive
			for k := 0; k < 9; k++ {
				before := heard()
				clk.Advance(step)
				deadline := time.Now().Add(10 * time.Second)
				for tc.survives && heard() == before && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if tc.survives && heard() == before {
					t.Fatalf("step %d: the listener heard no keep-alive within 10 s", k)
				}
			}
			wait := 10 * time.Second // for the failure
			if tc.survives {
				wait = 100 * time.Millisecond // a failure would be on its way
			}
			select {
			case err := <-read:
				if tc.survives {
					t.Fatalf("a quiet connection with keep-alives failed after %v: %v", 9*step, err)
				}
				if err == nil || !strings.Contains(err.Error(), "idle") {
					t.Errorf("Read: %v, want the idle timeout", err)
				}
			case <-time.After(wait):
				if !tc.survives {
					t.Fatalf("a connection without keep-alives outlived %v of silence (idle timeout %v)", 9*step, lim.Idle)
				}
			}
			want := uint64(1)
			if tc.survives {
				want = 0
			}
			if n := counts(b)[dropNames[dropIdle]]; n != want {
				t.Errorf("idle timeouts counted %d, want %d", n, want)
			}
		})
	}
}
