//go:build linux

package sovia

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"
)

// Connection setup travels on VI 0, one frame a message, as VIA's
// VipConnectRequest and VipConnectAccept, with a confirmation so that a
// request from a peer that cannot hear the answer (a forged source
// address) costs the listener a small, bounded and expiring record and
// never a connection:
//
//  1. The dialer opens a VI, posts its receive descriptors and sends
//     CONNECT: the port, its VI number, its protocol settings and a
//     random nonce that names this attempt.
//  2. The listener reserves a VI number (a half-open connection, no
//     descriptors, no buffers) and answers ACCEPT with it and the nonce.
//  3. The dialer, on an ACCEPT from the peer it dialed with its nonce,
//     sends CONFIRM.
//  4. The listener, on a CONFIRM that matches a half-open connection
//     (peer address, VI numbers, nonce), posts its descriptors, queues
//     the connection for Accept and answers ESTABLISHED. Only then may
//     the dialer send, and every message finds a descriptor.
//
// A lost frame is recovered by the dialer asking again (CONNECT until
// ACCEPT, CONFIRM until ESTABLISHED); the listener repeats its answers. A
// request that repeats a (peer address, VI) pair with another nonce is a
// new connection: the peer's VI of that number is not the one the old
// connection knew, so the old one is ended.
const (
	setupConnect     = 1
	setupAccept      = 2
	setupRefuse      = 3 // the listener VI field carries a refuseReason
	setupConfirm     = 4
	setupEstablished = 5
	// kind, port, dialer VI, listener VI, window, threshold, chunk size,
	// nonce
	setupLen = 19
)

// Why a listener refused, in a REFUSE frame's listener VI field.
const (
	refuseNoListener = 1
	refuseSettings   = 2
	refuseBacklog    = 3
	refuseNoVI       = 4
)

var refuseText = map[uint16]string{
	refuseNoListener: "no listener on the port",
	refuseSettings:   "the listener uses other protocol settings (window, acknowledgement threshold, chunk size)",
	refuseBacklog:    "the listener's queue of connections not yet accepted is full",
	refuseNoVI:       "the listener has no VI number free",
}

// SettingsError is a listener's refusal of a dialer whose protocol
// settings differ from its own; Listener has the listener's window,
// acknowledgement threshold and chunk size, which a dialer may adopt.
type SettingsError struct {
	Peer     net.HardwareAddr
	Port     uint16
	Listener Params
}

func (e *SettingsError) Error() string {
	return fmt.Sprintf("sovia: %s refused port %d: the listener uses other protocol settings (window %d, acknowledgement threshold %d, chunk size %d)",
		e.Peer, e.Port, e.Listener.Window, e.Listener.AckThreshold, e.Listener.ChunkSize)
}

// setupMsg is a setup frame's fields.
type setupMsg struct {
	kind             byte
	port             uint16
	dialer, listener uint16
	p                Params
	nonce            uint32
}

func (m setupMsg) frame() []byte {
	b := make([]byte, setupLen)
	b[0] = m.kind
	binary.BigEndian.PutUint16(b[1:], m.port)
	binary.BigEndian.PutUint16(b[3:], m.dialer)
	binary.BigEndian.PutUint16(b[5:], m.listener)
	binary.BigEndian.PutUint16(b[7:], uint16(m.p.Window))
	binary.BigEndian.PutUint16(b[9:], uint16(m.p.AckThreshold))
	binary.BigEndian.PutUint32(b[11:], uint32(m.p.ChunkSize))
	binary.BigEndian.PutUint32(b[15:], m.nonce)
	return b
}

func parseSetup(b []byte) (setupMsg, bool) {
	if len(b) < setupLen {
		return setupMsg{}, false
	}
	return setupMsg{
		kind: b[0], port: binary.BigEndian.Uint16(b[1:]),
		dialer: binary.BigEndian.Uint16(b[3:]), listener: binary.BigEndian.Uint16(b[5:]),
		p: Params{Window: int(binary.BigEndian.Uint16(b[7:])), AckThreshold: int(binary.BigEndian.Uint16(b[9:])),
			ChunkSize: int(binary.BigEndian.Uint32(b[11:]))},
		nonce: binary.BigEndian.Uint32(b[15:]),
	}, true
}

// SetupLimits bound the connection state that peers can make a host
// keep, and for how long (RUNTIME's hostile-peer rules: bounded per peer
// and in total, and expiring).
type SetupLimits struct {
	// HalfOpenPerPeer and HalfOpen bound the connections requested and
	// not yet confirmed, from one Ethernet address and in total; a
	// request beyond either evicts the oldest such connection (of the
	// peer, or of all), so a flood of forged requests cannot keep a
	// real peer out for longer than it floods.
	HalfOpenPerPeer, HalfOpen int
	// Handshake is how long a half-open connection waits for its
	// confirmation.
	Handshake time.Duration
	// Idle ends an accepted connection that has received nothing for
	// this long (0: never), so a peer that connects and goes silent
	// cannot hold a stream served one connection at a time.
	Idle time.Duration
	// Quarantine keeps a closed VI's number from being handed to a new
	// connection for this long, so frames of the old one still on the
	// way never reach the new one.
	Quarantine time.Duration
	// AnswerRate and AnswerBurst bound the answers (ACCEPT, REFUSE) to
	// connection requests, which anyone can send, per second and in a
	// burst: the host never floods in return.
	AnswerRate, AnswerBurst int
}

// DefaultSetupLimits are a host's limits until SetLimits: 4 half-open
// connections per peer and 64 in all, 2 s for the handshake (the
// dialer's default patience), 60 s of silence, 10 s of quarantine (twice
// the close exchange's linger), and 10,000 answers a second in bursts of
// 1,000. An answer is no larger than the request, so the limit bounds
// the work a flood costs rather than an amplification; it is ten times
// Linux's ICMP limit (icmp_msgs_per_sec 1000) because a limit every
// request shares is also what a flood takes from real peers, while the
// eviction of the oldest half-open connection keeps the table a flood
// can fill from ever shutting them out.
func DefaultSetupLimits() SetupLimits {
	return SetupLimits{HalfOpenPerPeer: 4, HalfOpen: 64, Handshake: 2 * time.Second, Idle: 60 * time.Second,
		Quarantine: 2 * linger, AnswerRate: 10000, AnswerBurst: 1000}
}

func (l SetupLimits) check() error {
	switch {
	case l.HalfOpenPerPeer < 1 || l.HalfOpen < l.HalfOpenPerPeer:
		return fmt.Errorf("sovia: half-open limits %d per peer, %d in all: need 1 <= per peer <= all", l.HalfOpenPerPeer, l.HalfOpen)
	case l.Handshake <= 0 || l.Idle < 0 || l.Quarantine < 0:
		return fmt.Errorf("sovia: handshake timeout %v, idle timeout %v, quarantine %v: need a positive handshake, the others not negative", l.Handshake, l.Idle, l.Quarantine)
	case l.AnswerRate < 1 || l.AnswerBurst < 1:
		return fmt.Errorf("sovia: answer rate %d/s, burst %d: both must be at least 1", l.AnswerRate, l.AnswerBurst)
	}
	return nil
}

// What setup counts: frames and connections dropped, each with its
// reason (RawHost.SetupCounts).
const (
	dropShort = iota
	dropSource
	dropBadVI
	dropUnknownKind
	dropAnswerLimited
	dropEvictedPeer
	dropEvictedTotal
	dropHandshakeTimeout
	dropIdle
	dropReplaced
	dropConfirmUnknown
	dropAnswerUnawaited
	dropRefused
	dropStray
	dropForeign
	dropTruncated
	dropBadLength
	dropBulkLength
	dropPieces
	numDrops
)

var dropNames = [numDrops]string{
	dropShort:            "setup frame too short",
	dropSource:           "setup from a group or zero address",
	dropBadVI:            "setup naming VI 0 or another VI than its sender",
	dropUnknownKind:      "setup of an unknown kind",
	dropAnswerLimited:    "setup answer held back by the rate limit",
	dropEvictedPeer:      "half-open connection evicted (peer's limit)",
	dropEvictedTotal:     "half-open connection evicted (host's limit)",
	dropHandshakeTimeout: "half-open connection timed out",
	dropIdle:             "connection idle too long",
	dropReplaced:         "connection replaced by the peer's new request",
	dropConfirmUnknown:   "confirmation of no half-open connection",
	dropAnswerUnawaited:  "setup answer nobody awaits",
	dropRefused:          "connection request refused",
	dropStray:            "frame for a VI that is not open",
	dropForeign:          "frame for a VI from another peer",
	dropTruncated:        "VI frame shorter than its header",
	dropBadLength:        "VI frame whose offset is past its message's length, or a length above 1 GiB",
	dropBulkLength:       "bulk datagram whose lengths disagree with its frame, or whose blocks overrun it",
	dropPieces:           fmt.Sprintf("VI frame that would leave its message in more than %d pieces", maxSpans),
}

// SetupCount is one of a host's setup counters: a reason, and how many
// frames or connections it dropped.
type SetupCount struct {
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

// peerKey names a dialer's VI: its Ethernet address and VI number.
type peerKey struct {
	mac [6]byte
	vi  uint16
}

// peerConn is a connection a listener took a request for: half-open
// until confirmed, then accepted.
type peerConn struct {
	key    peerKey
	nonce  uint32
	l      *RawListener
	v      *RawVI
	since  time.Time // when requested (half-open), when last heard (open)
	open   bool      // confirmed: in the backlog or accepted
	heard  uint64    // v.heard when last looked at (open)
	reject uint16    // a confirmed request the listener refused: the reason
}

// dialing is a Dial waiting for its answers.
type dialing struct {
	peer   [6]byte
	nonce  uint32
	answer chan setupMsg
}

// setupState is a host's connection setup (under RawHost.mu).
type setupState struct {
	limits    SetupLimits
	listeners map[uint16]*RawListener
	dials     map[uint16]*dialing   // by the dialing VI
	byKey     map[peerKey]*peerConn // the listener's connections by the dialer's VI
	byVI      map[uint16]*peerConn  // and by our VI
	halfOpen  []*peerConn           // oldest first
	closedAt  map[uint16]time.Time  // quarantined VI numbers: when they closed
	counts    [numDrops]uint64
	tokens    float64 // answers the rate limit allows now
	refilled  time.Time
	sweeper   Timer
	owner     uint16 // the VI whose close closes the host (package Dial's), or 0
}

func newSetupState() setupState {
	return setupState{limits: DefaultSetupLimits(), listeners: map[uint16]*RawListener{},
		dials: map[uint16]*dialing{}, byKey: map[peerKey]*peerConn{}, byVI: map[uint16]*peerConn{},
		closedAt: map[uint16]time.Time{}, tokens: float64(DefaultSetupLimits().AnswerBurst)}
}

// firstVI is where a host starts numbering its VIs: a random number, so
// that hosts of successive processes on one interface (clients that dial
// one after another) do not reuse each other's VI numbers.
func firstVI() uint16 { return uint16(1 + rand.IntN(1<<16-1)) }

// SetLimits replaces the host's setup limits (DefaultSetupLimits).
func (h *RawHost) SetLimits(l SetupLimits) error {
	if err := l.check(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setup.limits = l
	h.setup.tokens = float64(l.AnswerBurst)
	return nil
}

// MAC is the host's Ethernet address.
func (h *RawHost) MAC() net.HardwareAddr { return append(net.HardwareAddr(nil), h.local[:]...) }

// SetupCounts returns the frames and connections setup dropped, by
// reason, in one fixed order, leaving out the reasons that never
// happened.
func (h *RawHost) SetupCounts() []SetupCount {
	var out []SetupCount
	h.EachSetupCount(func(reason string, n uint64) { out = append(out, SetupCount{reason, n}) })
	return out
}

// EachSetupCount calls f with each reason setup dropped something for,
// and how many, in SetupCounts' order (what `dragonc run` reports).
func (h *RawHost) EachSetupCount(f func(reason string, count uint64)) {
	h.mu.Lock()
	counts := h.setup.counts
	h.mu.Unlock()
	for i, n := range counts {
		if n > 0 {
			f(dropNames[i], n)
		}
	}
}

// count counts a drop (h.mu held).
func (h *RawHost) count(reason int) { h.setup.counts[reason]++ }

// countDrop counts a frame Input drops for reason (h.mu not held).
func (h *RawHost) countDrop(reason int) {
	h.mu.Lock()
	h.count(reason)
	h.mu.Unlock()
}

// stray counts a frame Input found no VI for (v nil) or that came from
// another peer than v's (h.mu held).
func (h *RawHost) stray(v *RawVI) {
	if v == nil {
		h.count(dropStray)
	} else {
		h.count(dropForeign)
	}
}

// quarantined reports whether VI number lvi closed too recently to be
// handed out again (h.mu held).
func (h *RawHost) quarantined(lvi uint16) bool {
	at, ok := h.setup.closedAt[lvi]
	if !ok {
		return false
	}
	if h.clock.Now().Sub(at) < h.setup.limits.Quarantine {
		return true
	}
	delete(h.setup.closedAt, lvi)
	return false
}

// forget drops a closing VI from setup's records and quarantines its
// number (h.mu held).
func (h *RawHost) forget(v *RawVI) {
	if e := h.setup.byVI[v.lvi]; e != nil && e.v == v {
		h.drop(e)
	}
	// A VI never joined to a peer's (a half-open connection, a dial
	// that got no ACCEPT) could receive nothing: its number is free at
	// once, so a flood of requests, whose half-open connections are
	// evicted by the thousand, cannot quarantine every number.
	if h.setup.limits.Quarantine > 0 && v.rvi != 0 {
		h.setup.closedAt[v.lvi] = h.clock.Now()
	}
	if h.setup.owner != 0 && h.setup.owner == v.lvi {
		go h.Close() // the host was the connection's own (package Dial)
	}
}

// drop removes a listener's connection from the records (h.mu held).
func (h *RawHost) drop(e *peerConn) {
	if h.setup.byKey[e.key] == e {
		delete(h.setup.byKey, e.key)
	}
	if h.setup.byVI[e.v.lvi] == e {
		delete(h.setup.byVI, e.v.lvi)
	}
	if !e.open {
		for i, x := range h.setup.halfOpen {
			if x == e {
				h.setup.halfOpen = append(h.setup.halfOpen[:i], h.setup.halfOpen[i+1:]...)
				break
			}
		}
	}
}

// RawListener accepts software-VI connections on one port of a host.
type RawListener struct {
	backlog
	h    *RawHost
	port uint16
	p    Params
}

// Listen takes connections for port with settings p; a dialer must use
// the same window, threshold and chunk size.
func (h *RawHost) Listen(port uint16, p Params) (*RawListener, error) {
	return h.listen(port, p, 64)
}

// listen is Listen with a backlog of n connections not yet accepted.
func (h *RawHost) listen(port uint16, p Params, n int) (*RawListener, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("sovia: the host is closed")
	}
	if h.setup.listeners[port] != nil {
		return nil, fmt.Errorf("sovia: port %d is listened on", port)
	}
	l := &RawListener{backlog: newBacklogOf(n), h: h, port: port, p: p}
	h.setup.listeners[port] = l
	h.armSweep()
	return l, nil
}

// Close stops listening. Connections requested and not yet accepted are
// ended.
func (l *RawListener) Close() error {
	l.shut(func() {
		h := l.h
		h.mu.Lock()
		if h.setup.listeners[l.port] == l {
			delete(h.setup.listeners, l.port)
		}
		var end []*RawVI
		for _, e := range h.setup.byVI {
			if e.l == l && !e.open {
				end = append(end, e.v)
			}
		}
		h.mu.Unlock()
		for _, v := range end {
			v.Close()
		}
	})
	for {
		select {
		case c := <-l.queue:
			c.Close()
		default:
			return nil
		}
	}
}

// listenersOf lists the host's listeners, for its Close.
func (h *RawHost) listenersOf() []*RawListener {
	h.mu.Lock()
	defer h.mu.Unlock()
	ls := make([]*RawListener, 0, len(h.setup.listeners))
	for _, l := range h.setup.listeners {
		ls = append(ls, l)
	}
	return ls
}

// Dial connects to port on the host whose MAC is peer, waiting up to 2 s
// for the answers (DialContext).
func (h *RawHost) Dial(peer net.HardwareAddr, port uint16, p Params) (*Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return h.DialContext(ctx, peer, port, p)
}

// Dial's retransmission: the first request is asked again after
// dialRetry, and the wait doubles up to dialRetryMax.
const (
	dialRetry    = 20 * time.Millisecond
	dialRetryMax = 200 * time.Millisecond
)

// DialContext connects to port on the host whose MAC is peer, asking
// again while no answer comes, until ctx is done.
func (h *RawHost) DialContext(ctx context.Context, peer net.HardwareAddr, port uint16, p Params) (*Conn, error) {
	if len(peer) != 6 || peer[0]&1 != 0 || [6]byte(peer) == [6]byte{} {
		return nil, fmt.Errorf("sovia: dialing %q: the peer needs a unicast Ethernet address", peer)
	}
	v, err := h.VI(0, peer, 0)
	if err != nil {
		return nil, err
	}
	c, err := newConn(v, p)
	if err != nil {
		v.Close()
		return nil, err
	}
	c.ownVI = true
	d := &dialing{peer: v.remote, nonce: rand.Uint32(), answer: make(chan setupMsg, 4)}
	h.mu.Lock()
	h.setup.dials[v.lvi] = d
	clk := h.clock
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.setup.dials, v.lvi)
		h.mu.Unlock()
	}()
	fail := func(err error) (*Conn, error) {
		v.Close()
		return nil, err
	}
	msg := setupMsg{kind: setupConnect, port: port, dialer: v.lvi, p: p, nonce: d.nonce}
	wait := dialRetry
	for {
		if err := h.sendSetup(v.remote, v.lvi, msg); err != nil {
			return fail(err)
		}
		tick := make(chan struct{})
		t := clk.AfterFunc(wait, func() { close(tick) })
		wait = min(2*wait, dialRetryMax)
		a, err := d.next(ctx, tick, msg)
		t.Stop()
		switch {
		case err != nil && msg.kind == setupConnect:
			return fail(fmt.Errorf("sovia: no answer from %s to a connection request for port %d: %w", peer, port, err))
		case err != nil:
			return fail(fmt.Errorf("sovia: %s accepted a connection to port %d but did not confirm it: %w", peer, port, err))
		case a.kind == setupRefuse && a.listener == refuseSettings:
			return fail(&SettingsError{Peer: append(net.HardwareAddr(nil), peer...), Port: port, Listener: a.p})
		case a.kind == setupRefuse:
			why := refuseText[a.listener]
			if why == "" {
				why = fmt.Sprintf("reason %d", a.listener)
			}
			return fail(fmt.Errorf("sovia: %s refused port %d: %s", peer, port, why))
		case a.kind == setupAccept:
			h.mu.Lock()
			v.rvi = a.listener // before the listener's first DATA can arrive
			h.mu.Unlock()
			msg = setupMsg{kind: setupConfirm, port: port, dialer: v.lvi, listener: a.listener, p: p, nonce: d.nonce}
			wait = dialRetry
		case a.kind == setupEstablished:
			c.addrs = connAddrs{local: Addr{MAC: h.MAC()}, remote: Addr{MAC: append(net.HardwareAddr(nil), peer...), Port: port}}
			return c, nil
		case msg.kind == setupConfirm:
			// No answer to the confirmation: the listener may have
			// evicted the half-open connection, or the answer was
			// lost. Asking from the start works in both cases (the
			// listener repeats its ACCEPT for this nonce).
			msg = setupMsg{kind: setupConnect, port: port, dialer: v.lvi, p: p, nonce: d.nonce}
		}
		// else the timer ran out: ask again
	}
}

// next waits for the answer to msg that moves the dial on: REFUSE, or
// ACCEPT to a CONNECT, or ESTABLISHED to a CONFIRM; repeated answers are
// skipped. It returns a zero message when tick closes first.
func (d *dialing) next(ctx context.Context, tick <-chan struct{}, msg setupMsg) (setupMsg, error) {
	for {
		select {
		case a := <-d.answer:
			switch {
			case a.kind == setupRefuse,
				a.kind == setupAccept && msg.kind == setupConnect,
				a.kind == setupEstablished && msg.kind == setupConfirm && a.listener == msg.listener:
				return a, nil
			}
		case <-tick:
			return setupMsg{}, nil
		case <-ctx.Done():
			return setupMsg{}, ctx.Err()
		}
	}
}

// sendSetup sends a setup message on VI 0 from VI svi.
func (h *RawHost) sendSetup(to [6]byte, svi uint16, m setupMsg) error {
	f := m.frame()
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	return h.send(to, 0, svi, 0, len(f), 0, 0, f)
}

// answer sends an answer to a connection request if the rate limit
// allows (h.mu held); it reports whether it may.
func (h *RawHost) answerAllowed() bool {
	s := &h.setup
	now := h.clock.Now()
	if !s.refilled.IsZero() {
		s.tokens = min(float64(s.limits.AnswerBurst), s.tokens+now.Sub(s.refilled).Seconds()*float64(s.limits.AnswerRate))
	}
	s.refilled = now
	if s.tokens < 1 {
		h.count(dropAnswerLimited)
		return false
	}
	s.tokens--
	return true
}

// setupFrame handles a message on VI 0 from VI svi of the host whose
// address is from (in the receive loop).
func (h *RawHost) setupFrame(from [6]byte, svi uint16, b []byte) {
	m, ok := parseSetup(b)
	h.mu.Lock()
	switch {
	case !ok:
		h.count(dropShort)
	case from[0]&1 != 0 || from == [6]byte{}:
		// Never answer a group or zero source (RFC 1122 §3.2.1.3's
		// rule for IP, kept for Ethernet: IEEE 802's group bit).
		h.count(dropSource)
	case m.kind == setupConnect || m.kind == setupConfirm:
		h.listenerSide(from, svi, m) // unlocks
		return
	case m.kind == setupAccept || m.kind == setupRefuse || m.kind == setupEstablished:
		d := h.setup.dials[m.dialer]
		switch {
		case d == nil || d.peer != from || d.nonce != m.nonce:
			h.count(dropAnswerUnawaited)
		case m.kind != setupRefuse && (m.listener == 0 || m.listener != svi):
			h.count(dropBadVI)
		default:
			select {
			case d.answer <- m:
			default: // Dial has answers enough to read
			}
		}
	default:
		h.count(dropUnknownKind)
	}
	h.mu.Unlock()
}

// listenerSide handles CONNECT and CONFIRM (h.mu held; it unlocks).
func (h *RawHost) listenerSide(from [6]byte, svi uint16, m setupMsg) {
	s := &h.setup
	key := peerKey{from, m.dialer}
	var todo unlocked
	var reply *setupMsg
	var replyFrom uint16
	answer := func(kind byte, lvi uint16) {
		reply = &setupMsg{kind: kind, port: m.port, dialer: m.dialer, listener: lvi, p: m.p, nonce: m.nonce}
		replyFrom = lvi
		if kind == setupRefuse {
			// A refusal for other settings carries the listener's,
			// so the dialer can say which (or adopt them).
			reply.p, replyFrom = Params{}, 0
			if l := s.listeners[m.port]; l != nil && lvi == refuseSettings {
				reply.p = l.p
			}
		}
	}
	now := h.clock.Now()
	h.expire(now, &todo)
	switch {
	case m.dialer == 0 || m.dialer != svi:
		h.count(dropBadVI)
	case m.kind == setupConnect:
		e := s.byKey[key]
		if e != nil && e.nonce != m.nonce {
			// The peer's VI of this number is a new one: the old
			// connection's peer is gone.
			h.count(dropReplaced)
			h.drop(e)
			if e.open {
				todo.failVI(e.v, fmt.Errorf("sovia: the peer opened a new connection from VI %d, which this one used", m.dialer))
			} else {
				todo.close = append(todo.close, e.v)
			}
			e = nil
		}
		l := s.listeners[m.port]
		switch {
		case e != nil && e.reject != 0:
			if h.answerAllowed() {
				answer(setupRefuse, e.reject)
			}
		case e != nil:
			if h.answerAllowed() { // our answer was lost: repeat it
				answer(setupAccept, e.v.lvi)
			}
		case !h.answerAllowed():
		case l == nil:
			h.count(dropRefused)
			answer(setupRefuse, refuseNoListener)
		case l.p.Window != m.p.Window || l.p.AckThreshold != m.p.AckThreshold || l.p.ChunkSize != m.p.ChunkSize:
			h.count(dropRefused)
			answer(setupRefuse, refuseSettings)
		default:
			h.makeRoom(from, &todo)
			v, err := h.newVI(from)
			if err != nil {
				h.count(dropRefused)
				answer(setupRefuse, refuseNoVI)
				break
			}
			e := &peerConn{key: key, nonce: m.nonce, l: l, v: v, since: now}
			s.byKey[key], s.byVI[v.lvi] = e, e
			s.halfOpen = append(s.halfOpen, e)
			answer(setupAccept, v.lvi)
		}
	case m.kind == setupConfirm:
		e := s.byVI[m.listener]
		switch {
		case e == nil || e.key != key || e.nonce != m.nonce:
			h.count(dropConfirmUnknown)
		case e.reject != 0:
			answer(setupRefuse, e.reject)
		case e.open:
			answer(setupEstablished, e.v.lvi) // our answer was lost
		default:
			h.drop(e) // from the half-open list
			s.byKey[key], s.byVI[e.v.lvi] = e, e
			e.open, e.since, e.heard = true, now, e.v.heard.Load()
			// Descriptors are posted (newConn) before the answer
			// lets the dialer send.
			c, err := newConn(e.v, e.l.p)
			queued := false
			if err == nil {
				c.ownVI = true
				c.addrs = connAddrs{local: Addr{MAC: h.MAC(), Port: m.port}, remote: Addr{MAC: append(net.HardwareAddr(nil), from[:]...)}}
				select {
				case e.l.queue <- c:
					queued = true
				default:
				}
			}
			if !queued {
				// The record stays, without a connection, so a
				// repeated CONFIRM or CONNECT gets the same
				// answer, until the handshake timeout ends it.
				h.count(dropRefused)
				e.open, e.reject = false, refuseBacklog
				answer(setupRefuse, refuseBacklog)
				break
			}
			e.v.rvi = m.dialer
			answer(setupEstablished, e.v.lvi)
		}
	}
	h.mu.Unlock()
	if reply != nil {
		h.sendSetup(from, replyFrom, *reply)
	}
	todo.run()
}

// newVI opens a listener's VI for a half-open connection: a number, no
// descriptors, and no peer VI yet, so no frame reaches it before the
// confirmation (h.mu held).
func (h *RawHost) newVI(peer [6]byte) (*RawVI, error) {
	lvi, err := h.freeVI()
	if err != nil {
		return nil, err
	}
	return h.openVI(lvi, peer, 0), nil
}

// makeRoom evicts the oldest half-open connection of the peer, or of all,
// when a new one would exceed the limits (h.mu held).
func (h *RawHost) makeRoom(peer [6]byte, todo *unlocked) {
	s := &h.setup
	mine := 0
	for _, e := range s.halfOpen {
		if e.key.mac == peer {
			mine++
		}
	}
	if mine >= s.limits.HalfOpenPerPeer {
		for _, e := range s.halfOpen {
			if e.key.mac == peer {
				h.count(dropEvictedPeer)
				h.drop(e)
				todo.close = append(todo.close, e.v)
				break
			}
		}
	}
	for len(s.halfOpen) >= s.limits.HalfOpen {
		e := s.halfOpen[0]
		h.count(dropEvictedTotal)
		h.drop(e)
		todo.close = append(todo.close, e.v)
	}
}

// expire ends the half-open connections past the handshake timeout,
// the refused ones whose record has served as long, and the open ones
// silent past the idle timeout (h.mu held).
func (h *RawHost) expire(now time.Time, todo *unlocked) {
	s := &h.setup
	for len(s.halfOpen) > 0 && now.Sub(s.halfOpen[0].since) >= s.limits.Handshake {
		e := s.halfOpen[0]
		h.count(dropHandshakeTimeout)
		h.drop(e)
		todo.close = append(todo.close, e.v)
	}
	for _, e := range s.byVI {
		switch {
		case e.reject != 0:
			if now.Sub(e.since) >= s.limits.Handshake {
				h.drop(e)
				todo.close = append(todo.close, e.v)
			}
		case !e.open || s.limits.Idle == 0:
		case e.v.heard.Load() != e.heard:
			e.heard, e.since = e.v.heard.Load(), now
		case now.Sub(e.since) >= s.limits.Idle:
			h.count(dropIdle)
			h.drop(e)
			todo.failVI(e.v, fmt.Errorf("sovia: the peer sent nothing for %v (the host's idle timeout)", s.limits.Idle))
		}
	}
}

// unlocked is what to do to VIs once h.mu is released (their own locks
// are taken after the host's, never under it).
type unlocked struct {
	close []*RawVI
	fail  []func()
}

func (u *unlocked) failVI(v *RawVI, err error) {
	u.fail = append(u.fail, func() { v.fail(err) })
}

func (u *unlocked) run() {
	for _, f := range u.fail {
		f()
	}
	for _, v := range u.close {
		v.Close()
	}
}

// armSweep starts the timer that expires setup state, if it is not
// running (h.mu held). It runs while the host has listeners.
func (h *RawHost) armSweep() {
	s := &h.setup
	if s.sweeper != nil || h.closed {
		return
	}
	every := s.limits.Handshake / 4
	if s.limits.Idle > 0 {
		every = min(every, s.limits.Idle/4)
	}
	every = max(every, time.Millisecond)
	s.sweeper = h.clock.AfterFunc(every, h.sweep)
}

// sweep is the timer's work: expire, then run again while there is
// anything to expire.
func (h *RawHost) sweep() {
	var todo unlocked
	h.mu.Lock()
	h.setup.sweeper = nil
	h.expire(h.clock.Now(), &todo)
	if len(h.setup.listeners) > 0 || len(h.setup.byVI) > 0 {
		h.armSweep()
	}
	h.mu.Unlock()
	todo.run()
}

// stopSweep stops the timer, for the host's Close (h.mu held).
func (h *RawHost) stopSweep() {
	if t := h.setup.sweeper; t != nil {
		t.Stop()
		h.setup.sweeper = nil
	}
}
