//go:build linux

package sovia

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Reliability is how the software VI delivers reliably (VIA's Reliable
// Delivery level): when it acknowledges and when it sends again.
type Reliability struct {
	// AckDelay is how long a receiver may hold an acknowledgement back,
	// hoping for a frame going the other way to carry it. On a host with
	// a socket of its own it is a bound: the acknowledgement goes alone
	// as soon as the goroutine receiving finds the socket empty (owes).
	AckDelay time.Duration
	// AckEvery: a receiver acknowledges at once when this many messages
	// wait for an acknowledgement.
	AckEvery int
	// RTO is the first retransmission timeout; each timeout in a row
	// doubles it, up to MaxRTO.
	RTO, MaxRTO time.Duration
	// Retries is how many timeouts in a row a VI takes before it breaks.
	Retries int
	// KeepAlive: a VI that sent nothing for this long sends an
	// acknowledgement alone, so that a quiet connection outlives the
	// peer's idle timeout (SetupLimits.Idle) as a TCP keep-alive does
	// (RFC 1122 §4.2.3.6); 0 sends none.
	KeepAlive time.Duration
}

// DefaultReliability: acknowledgements within 5 ms (half the first
// timeout, so that the peer's timer does not fire first) or every 8
// messages;
// a first timeout of 10 ms (a hundred round trips of a veth, where the
// scheduler of a loaded host can hold a goroutine back for milliseconds),
// doubled up to 1 s, and 12 in a row (about 7 s without an
// acknowledgement) break the VI; a keep-alive after 20 s of silence, a
// third of the default idle timeout, so two may be lost.
func DefaultReliability() Reliability {
	return Reliability{AckDelay: 5 * time.Millisecond, AckEvery: 8, RTO: 10 * time.Millisecond, MaxRTO: time.Second, Retries: 12,
		KeepAlive: DefaultSetupLimits().Idle / 3}
}

// SetReliability sets the retransmission and acknowledgement timing of
// the VIs the host opens from now on.
func (h *RawHost) SetReliability(r Reliability) error {
	if r.AckDelay <= 0 || r.AckEvery < 1 || r.RTO <= 0 || r.MaxRTO < r.RTO || r.Retries < 1 || r.KeepAlive < 0 {
		return fmt.Errorf("sovia: reliability %+v: every setting but KeepAlive (0: none) must be positive and MaxRTO at least RTO", r)
	}
	h.rel = r
	return nil
}

// ErrRetransmit is the error of a VI whose peer stopped acknowledging.
var ErrRetransmit = errors.New("sovia: the peer acknowledged nothing through the retransmissions")

// maxUnacked bounds a VI's messages awaiting acknowledgement: SOVIA's
// window keeps far fewer in flight; a sender without one gets an error.
const maxUnacked = 4096

// nakAfter is how many frames of later messages must arrive before the
// awaited one for a receiver to ask for it (TCP's duplicate-ACK
// threshold, RFC 5681 §3.2): fewer would answer every reordering.
const nakAfter = 3

// outMsg is a message sent and not acknowledged.
type outMsg struct {
	seq, imm uint32
	data     []byte // a copy: the send descriptor completes at once
	sentAt   time.Time
	busy     bool // its frames are going out without t.mu (PostSend)
	settled  bool // acknowledged while busy: recycled once sent
	// per is the bytes of the message a frame or block carries, and
	// bulk whether it goes as bulk datagrams: both chosen when it is
	// first sent (RawVI.cut), and kept unless the VI gives bulk
	// datagrams up.
	per  int
	bulk bool
}

// maxSpare is how many acknowledged messages' records a VI keeps for
// others: more than SOVIA's window.
const maxSpare = 64

// recycle keeps an acknowledged message's record for another (t.mu
// held); a busy one is kept once its frames are out. With maxSpare kept
// already, it takes the place of the one with the smallest buffer, if
// its own is larger: after a run of small messages, larger ones would
// otherwise each need a buffer of their own (a 32 KiB stream after small
// ones was a fifth slower, its buffers garbage).
func (t *txState) recycle(m *outMsg) {
	if m.busy {
		m.settled = true
		return
	}
	if len(t.spare) < maxSpare {
		t.spare = append(t.spare, m)
		return
	}
	small := 0
	for i, s := range t.spare {
		if cap(s.data) < cap(t.spare[small].data) {
			small = i
		}
	}
	if cap(m.data) > cap(t.spare[small].data) {
		t.spare[small] = m
	}
}

// txState is a VI's sending side.
type txState struct {
	mu       sync.Mutex
	next     uint32 // the next message's number
	unacked  []*outMsg
	spare    []*outMsg // acknowledged messages, their buffers to use again
	timer    Timer     // the retransmission timer, while armed
	rto      time.Duration
	tries    int       // timeouts since the acknowledgement last moved
	progress time.Time // when it last moved
	lastNak  uint32    // the message a NAK last had sent again
	recover  uint32    // after a timeout: the last message sent before it
	inRecov  bool      // a timeout's recovery runs until recover is acknowledged
	refilled uint32    // in recovery: the message last sent again
	resent   int       // messages sent again (for tests and reports)
	unsent   int       // acknowledgements of messages not yet sent, ignored
	alive    Timer     // the keep-alive timer
	spoke    bool      // a frame went to the peer since the keep-alive timer was set
	bulkOK   bool      // an acknowledgement covered a message sent as bulk datagrams
}

// rxState is a VI's receiving side (under queues.mu).
type rxState struct {
	expect   uint32   // the next message in order
	slots    []*reasm // slots[k]: message expect+k, filling posted[k]
	owed     int      // messages taken and not acknowledged
	ackTimer Timer    // the delayed acknowledgement, on a host without a poller
	listed   bool     // on the host's list of VIs that may owe an acknowledgement (h.owe)
	ooo      int      // frames of later messages since expect moved
	nakFor   uint32   // the message a NAK was sent for (0: none)
	dups     int      // duplicate frames dropped
	spare    []*reasm // delivered messages' records to use again
}

// reasm is a message being put together.
type reasm struct {
	r          *Region
	total, imm uint32
	got        uint32
	spans      [][2]uint32 // the byte ranges taken, disjoint
}

// maxSpans bounds the byte ranges a message being put together keeps
// apart (reasm.spans). A peer's fragments make one range more only
// where they leave a hole: one lost fragment in a hundred leaves 1024
// holes in a message of about 150 MB. Forged fragments a byte long a
// byte apart would make one range for every two bytes of the message,
// each range looked at for every fragment after it; past the bound, a
// fragment that touches no range taken is dropped, counted
// (dropPieces). The message still completes: it is sent again whole and
// in order, and each fragment of it that touches a range taken extends
// that range, closing the holes behind it.
const maxSpans = 1024

// cover takes bytes [at, end) of the message and returns how many of
// them were not taken before. A message is whole when it has taken
// total bytes, however its fragments were cut: a message sent again may
// be cut otherwise than the first time (bulk datagrams given up for
// frames, bulk.go), and a forged fragment that overlaps others cannot
// make a message whole with a hole in it. It reports false, having
// taken nothing, when the bytes would be a range of their own beyond
// maxSpans.
func (m *reasm) cover(at, end uint32) (uint32, bool) {
	lo, hi := at, end
	var old uint32
	merged := false
	kept := m.spans[:0]
	for _, s := range m.spans {
		if s[1] < lo || s[0] > hi {
			kept = append(kept, s)
			continue
		}
		merged = true
		old += s[1] - s[0]
		lo, hi = min(lo, s[0]), max(hi, s[1])
	}
	if !merged && len(kept) >= maxSpans {
		return 0, false // every range was kept where it was: m.spans is unchanged
	}
	m.spans = append(kept, [2]uint32{lo, hi})
	return hi - lo - old, true
}

// serial compares message numbers across the wrap (RFC 1982).
func diff(a, b uint32) int32 { return int32(a - b) }

// PostSend sends r's bytes [off, off+n): the message is copied for
// retransmission and the descriptor completes at once.
func (v *RawVI) PostSend(r *Region, off, n int, imm uint32) error {
	if err := v.registered(r); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(r.Buf) {
		return fmt.Errorf("sovia: a send descriptor outside its region")
	}
	v.mu.Lock()
	err := v.err
	if v.closed {
		err = errors.New("sovia: the VI is closed")
	}
	v.mu.Unlock()
	if err != nil {
		return err
	}
	t := &v.tx
	t.mu.Lock()
	if len(t.unacked) >= maxUnacked {
		t.mu.Unlock()
		return fmt.Errorf("sovia: %d messages await acknowledgement on VI %d", maxUnacked, v.lvi)
	}
	m := t.message(n)
	m.seq, m.imm, m.sentAt = t.next, imm, v.clock.Now()
	t.next++
	copy(m.data, r.Buf[off:off+n])
	t.unacked = append(t.unacked, m)
	if t.timer == nil {
		if len(t.unacked) == 1 {
			t.progress = m.sentAt
		}
		v.armRetransmit()
	}
	// The frames go out without t.mu, so that the frames arriving
	// meanwhile (their acknowledgements, acked) are taken by another
	// goroutine rather than waiting for the system call. The host's
	// send lock is taken first, so messages leave in the order of their
	// numbers; m is busy, so that an acknowledgement (even a forged one)
	// cannot give its buffer to another message while it goes out.
	h := v.host
	h.sendMu.Lock()
	v.cut(m)
	m.busy = true
	t.spoke = true
	t.mu.Unlock()
	err = v.transmitLocked(m)
	h.sendMu.Unlock()
	t.mu.Lock()
	m.busy = false
	if m.settled {
		m.settled = false
		t.recycle(m)
	}
	t.mu.Unlock()
	v.mu.Lock()
	if err != nil && v.err == nil {
		v.err = err
		v.event()
	}
	v.complete(Completion{Region: r})
	v.mu.Unlock()
	return err
}

// message returns a record for a message of n bytes, an acknowledged
// one whose buffer is long enough if there is one (t.mu held).
func (t *txState) message(n int) *outMsg {
	for i := len(t.spare) - 1; i >= 0; i-- {
		if m := t.spare[i]; cap(m.data) >= n {
			t.spare[i] = t.spare[len(t.spare)-1]
			t.spare[len(t.spare)-1] = nil
			t.spare = t.spare[:len(t.spare)-1]
			m.data, m.per, m.bulk = m.data[:n], 0, false
			return m
		}
	}
	return &outMsg{data: make([]byte, n, max(n, 64))}
}

// transmit sends a message's frames, all together, carrying the
// acknowledgement of what has arrived (v.tx.mu held: the lock order is
// tx.mu, then the host's sendMu, then queues.mu).
func (v *RawVI) transmit(m *outMsg) error {
	h := v.host
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	v.tx.spoke = true // t.mu is held
	v.cut(m)
	return v.transmitLocked(m)
}

// cut chooses how message m goes, when it is first sent: as bulk
// datagrams once the peer offered them, else as frames; and it cuts a
// message sent as bulk datagrams anew into frames once the VI gave them
// up (abandonBulk), even one that was going out when it did. Both
// v.tx.mu and the host's sendMu are held: the sender reads m.per and
// m.bulk under sendMu alone (transmitLocked), acked under tx.mu alone.
func (v *RawVI) cut(m *outMsg) {
	h := v.host
	if m.bulk && v.bulk.Load() == bulkAbandoned {
		m.per, m.bulk = 0, false
	}
	if m.per == 0 {
		// h.bulkOut: the link is a bulkLink that has not refused one.
		m.per = h.link.MTU() - rawHeader
		if per := bulkBlock(h.link.MTU()); h.bulkOut && per > 0 && v.bulk.Load() == bulkOffered && len(m.data) > m.per {
			m.per, m.bulk = per, true
		}
	}
}

// transmitLocked sends a message's frames, cut as cut chose (h.sendMu
// held; m is not given to another message meanwhile: t.mu is held, or m
// is busy).
func (v *RawVI) transmitLocked(m *outMsg) error {
	h := v.host
	x := header{dvi: v.rvi, svi: v.lvi, seq: m.seq, ack: v.takeAck(), total: uint32(len(m.data)), imm: m.imm}
	per := m.per
	if per < 1 {
		return fmt.Errorf("sovia: an MTU of %d bytes leaves no room after the %d-byte header", h.link.MTU(), rawHeader)
	}
	if m.bulk && h.bulkOut {
		if sent, err := h.transmitBulk(v, x, m.data, per); sent {
			return err
		}
		// Refused: as frames, cut as the blocks were.
	}
	if g, ok := h.link.(gatherLink); ok {
		// Every frame of the message with one system call, each a
		// header built here and the message's bytes where they lie.
		hdrs, parts := h.frames[:0], h.parts[:0]
		for at := 0; at < len(m.data) || at == 0; at += per {
			x.at = uint32(at)
			hdrs = append(hdrs, h.frame(len(hdrs), v.remote, x, nil))
			parts = append(parts, m.data[at:min(at+per, len(m.data))])
		}
		h.frames, h.parts = hdrs, parts
		return g.sendGather(hdrs, parts)
	}
	for at := 0; at < len(m.data) || at == 0; {
		k := min(per, len(m.data)-at)
		x.at = uint32(at)
		if err := h.sendFrame(v.remote, x, m.data[at:at+k]); err != nil {
			return err
		}
		if len(m.data) == 0 {
			break
		}
		at += k
	}
	return nil
}

// gatherLink is a Link that sends many frames with one system call,
// each gathered from a header and a part of a message (no frame is built
// by copying the message's bytes).
type gatherLink interface {
	sendGather(hdrs, parts [][]byte) error
}

// takeAck returns the cumulative acknowledgement to send; a frame
// carrying it settles what was owed.
func (v *RawVI) takeAck() uint32 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rx.owed = 0
	return v.rx.expect - 1
}

// sendAck sends an acknowledgement alone (a NAK with nak).
func (v *RawVI) sendAck(nak bool) {
	h := v.host
	h.sendMu.Lock()
	defer h.sendMu.Unlock()
	x := header{dvi: v.rvi, svi: v.lvi, ack: v.takeAck(), flags: flagAckOnly}
	if nak {
		x.flags |= flagNak
	}
	h.sendFrame(v.remote, x, nil) // a lost acknowledgement is made good by the next, or the sender's timeout
}

// armRetransmit sets the retransmission timer (t.mu held).
func (v *RawVI) armRetransmit() {
	t := &v.tx
	if t.rto == 0 {
		t.rto = v.rel.RTO
	}
	t.timer = v.clock.AfterFunc(t.rto, v.retransmit)
}

// retransmit runs when the timer fires: once the oldest message waited a
// whole timeout since the acknowledgement last moved, it goes again and
// the timeout doubles; after Retries timeouts in a row the VI breaks.
// Only the oldest goes, as TCP sends only the first unacknowledged
// segment at a timeout (RFC 6298 §5.4): a timeout on a loaded host is
// mostly a late acknowledgement, not a loss, and sending every waiting
// message again (up to a window of 32 KiB chunks) would double the load
// that made it late. Until everything sent before the timeout is
// acknowledged (recovery), an acknowledgement of exactly the message sent
// again says that it filled a hole and the next is missing too: the next
// goes at once (acked), as NewReno answers a partial acknowledgement
// (RFC 6582 §3.2, step 5). So messages lost together are sent again one
// a round trip, and a late acknowledgement, which covers more, costs one
// message sent twice.
func (v *RawVI) retransmit() {
	t := &v.tx
	t.mu.Lock()
	t.timer = nil
	v.mu.Lock()
	gone := v.closed || v.err != nil
	v.mu.Unlock()
	if len(t.unacked) == 0 || gone {
		t.mu.Unlock()
		return
	}
	since := t.progress
	if first := t.unacked[0].sentAt; first.After(since) {
		since = first
	}
	if wait := t.rto - v.clock.Now().Sub(since); wait > 0 {
		t.timer = v.clock.AfterFunc(wait, v.retransmit) // not yet
		t.mu.Unlock()
		return
	}
	t.tries++
	if t.tries > v.rel.Retries {
		seq := t.unacked[0].seq
		t.mu.Unlock()
		v.fail(fmt.Errorf("%w: message %d of VI %d unacknowledged after %d retransmissions", ErrRetransmit, seq, v.lvi, v.rel.Retries))
		v.wake()
		return
	}
	t.rto = min(2*t.rto, v.rel.MaxRTO)
	t.progress = v.clock.Now()
	t.recover, t.inRecov, t.refilled = t.next-1, true, t.unacked[0].seq
	t.resent++
	if t.unacked[0].bulk && (t.tries >= bulkTries && !t.bulkOK || t.tries >= bulkTriesAcked) {
		v.abandonBulk()
	}
	v.armRetransmit()
	v.transmit(t.unacked[0])
	t.mu.Unlock()
}

// acked takes the peer's cumulative acknowledgement: messages up to ack
// are settled; with nak, the one after it is sent again at once.
func (v *RawVI) acked(ack uint32, nak bool) {
	t := &v.tx
	t.mu.Lock()
	if diff(ack, t.next-1) > 0 {
		// An acknowledgement of a message not yet sent is forged or
		// broken: taken, it would drop messages the peer never had.
		// It is ignored and counted, as TCP ignores an ACK beyond
		// SND.NXT (RFC 793 §3.9, SEGMENT ARRIVES, fifth check).
		t.unsent++
		t.mu.Unlock()
		return
	}
	n := 0
	for n < len(t.unacked) && diff(t.unacked[n].seq, ack) <= 0 {
		n++
	}
	if n > 0 {
		for _, m := range t.unacked[:n] {
			t.bulkOK = t.bulkOK || m.bulk
			t.recycle(m)
		}
		k := copy(t.unacked, t.unacked[n:])
		clear(t.unacked[k:])
		t.unacked = t.unacked[:k]
		t.tries = 0
		t.rto = v.rel.RTO
		if len(t.unacked) > 0 {
			// The clock is read only for messages still waiting: a
			// message sent to an empty queue has its own time (sentAt).
			t.progress = v.clock.Now()
		}
		// The timer stays set: when it fires with nothing unacknowledged
		// it ends, which costs less than stopping and setting one a
		// round trip.
		if t.inRecov {
			switch {
			case diff(ack, t.recover) >= 0 || len(t.unacked) == 0:
				t.inRecov = false
			case ack == t.refilled:
				// The message sent again filled a hole and the next
				// is missing (a NAK for it sends it below).
				t.refilled = t.unacked[0].seq
				if !nak || t.lastNak == ack+1 {
					t.resent++
					v.transmit(t.unacked[0])
				}
			}
		}
	}
	if nak && len(t.unacked) > 0 && t.unacked[0].seq == ack+1 && t.lastNak != ack+1 {
		t.lastNak = ack + 1
		t.resent++
		v.transmit(t.unacked[0])
	}
	t.mu.Unlock()
}

// armKeepAlive sets the keep-alive timer, if the VI sends keep-alives.
func (v *RawVI) armKeepAlive() {
	if v.rel.KeepAlive <= 0 {
		return
	}
	v.tx.mu.Lock()
	defer v.tx.mu.Unlock()
	if v.tx.alive == nil {
		v.tx.alive = v.clock.AfterFunc(v.rel.KeepAlive, v.keepAlive)
	}
}

// keepAlive runs when the keep-alive timer fires: a VI that sent no
// message since it was set, and is connected (its peer's VI number is
// known), sends an acknowledgement alone. An acknowledgement repeats
// what the peer already has, so it costs the peer nothing but a frame
// heard.
func (v *RawVI) keepAlive() {
	t := &v.tx
	t.mu.Lock()
	spoke := t.spoke
	t.spoke, t.alive = false, nil
	t.mu.Unlock()
	v.mu.Lock()
	gone := v.closed || v.err != nil
	v.mu.Unlock()
	if gone {
		return
	}
	h := v.host
	h.mu.Lock()
	connected := h.vis[v.lvi] == v && v.rvi != 0
	h.mu.Unlock()
	if connected && !spoke {
		v.sendAck(false)
	}
	v.armKeepAlive()
}

// stopTimers stops the VI's timers (it closed).
func (v *RawVI) stopTimers() {
	v.tx.mu.Lock()
	if v.tx.timer != nil {
		v.tx.timer.Stop()
		v.tx.timer = nil
	}
	if v.tx.alive != nil {
		v.tx.alive.Stop()
		v.tx.alive = nil
	}
	v.tx.mu.Unlock()
	v.mu.Lock()
	if v.rx.ackTimer != nil {
		v.rx.ackTimer.Stop()
		v.rx.ackTimer = nil
	}
	v.mu.Unlock()
}

// IgnoredAcks counts the acknowledgements of messages the VI had not
// sent, which it ignored.
func (v *RawVI) IgnoredAcks() int {
	v.tx.mu.Lock()
	defer v.tx.mu.Unlock()
	return v.tx.unsent
}

// Resent returns how many messages the VI sent again.
func (v *RawVI) Resent() int {
	v.tx.mu.Lock()
	defer v.tx.mu.Unlock()
	return v.tx.resent
}

// fragment takes one frame of a message: in order, or of a later message
// that waits in its descriptor for the ones before it; duplicates and
// messages beyond the posted descriptors are dropped (the sender sends
// them again).
func (v *RawVI) fragment(x header, data []byte) {
	ack, nak, pieces := false, false, false
	defer func() {
		if pieces {
			v.host.countDrop(dropPieces) // h.mu is taken without v.mu held
		}
		if ack || nak {
			v.sendAck(nak)
		}
	}()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || v.err != nil {
		return
	}
	rx := &v.rx
	k := int(diff(x.seq, rx.expect))
	if k < 0 {
		// Arrived already: the sender missed our acknowledgement. One
		// answer a message (its first frame), not one a frame.
		rx.dups++
		ack = x.at == 0
		return
	}
	if k > 0 {
		rx.ooo++
		if rx.ooo >= nakAfter && rx.nakFor != rx.expect {
			rx.nakFor = rx.expect
			nak = true
		}
	}
	if k >= len(v.posted) {
		if k == 0 {
			v.lose(ErrNoDescriptor) // the VI breaks: reliable delivery loses nothing silently
		}
		return // beyond the descriptors posted: it comes again
	}
	for len(rx.slots) <= k {
		rx.slots = append(rx.slots, nil)
	}
	m := rx.slots[k]
	if m == nil {
		if int(x.total) > len(v.posted[k].Buf) {
			v.lose(fmt.Errorf("sovia: a %d-byte message for a %d-byte receive descriptor", x.total, len(v.posted[k].Buf)))
			return
		}
		m = rx.record()
		m.r, m.total, m.imm = v.posted[k], x.total, x.imm
		rx.slots[k] = m
	}
	if x.total != m.total || x.imm != m.imm || x.at+uint32(len(data)) > m.total {
		return // not the message this number began as: a forged or broken frame
	}
	if len(data) == 0 && m.total > 0 {
		return
	}
	fresh, ok := m.cover(x.at, x.at+uint32(len(data)))
	if !ok {
		pieces = true
		return
	}
	if fresh == 0 && m.total > 0 {
		rx.dups++ // every byte taken already
		return
	}
	copy(m.r.Buf[x.at:], data)
	m.got += fresh
	// Deliver what is whole, in order.
	for len(rx.slots) > 0 && rx.slots[0] != nil && rx.slots[0].got == rx.slots[0].total {
		var m *reasm
		m, rx.slots = popFront(rx.slots)
		_, v.posted = popFront(v.posted)
		v.complete(Completion{Recv: true, Region: m.r, N: int(m.total), Imm: m.imm})
		if len(rx.spare) < maxSpare {
			*m = reasm{spans: m.spans[:0]}
			rx.spare = append(rx.spare, m)
		}
		rx.expect++
		rx.owed++
		rx.ooo = 0
	}
	switch {
	case rx.owed >= v.rel.AckEvery:
		ack = true
	case rx.owed == 0:
	case v.host.poll != nil:
		if !rx.listed {
			rx.listed = true
			v.host.owes(v)
		}
	case rx.ackTimer == nil:
		rx.ackTimer = v.clock.AfterFunc(v.rel.AckDelay, v.delayedAck)
	}
}

// owes puts v on the list of VIs that may owe an acknowledgement
// (v.queues.mu held; the lock order is queues.mu, then owe.mu).
//
// On a host whose goroutines receive themselves (a poller), an
// acknowledgement waits for a frame going the other way, which carries
// it, until the goroutine receiving is about to sleep (the socket is
// empty: the application had its chance to answer) or the host's own
// goroutine looks, every AckDelay at most while the application's
// goroutines receive (background): no timer is set for it. A timer per
// message received (a goroutine of the runtime's timers, a thread woken)
// made a ping-pong's one-way latency 15 us here against 10 without it.
func (h *RawHost) owes(v *RawVI) {
	h.owe.mu.Lock()
	h.owe.vis = append(h.owe.vis, v)
	h.owe.n.Store(int32(len(h.owe.vis)))
	h.owe.mu.Unlock()
}

// flushAcks sends the acknowledgements the listed VIs owe, each alone.
func (h *RawHost) flushAcks() {
	if h.owe.n.Load() == 0 {
		return
	}
	h.owe.mu.Lock()
	vis := h.owe.vis
	h.owe.vis, h.owe.spare = h.owe.spare[:0], nil
	h.owe.n.Store(0)
	h.owe.mu.Unlock()
	for _, v := range vis {
		v.mu.Lock()
		v.rx.listed = false
		owed := v.rx.owed > 0 && !v.closed && v.err == nil
		v.mu.Unlock()
		if owed {
			v.sendAck(false)
		}
	}
	clear(vis)
	h.owe.mu.Lock()
	if h.owe.spare == nil {
		h.owe.spare = vis[:0]
	}
	h.owe.mu.Unlock()
}

// record returns a record for a message to put together, a delivered
// one's if there is one (queues.mu held).
func (rx *rxState) record() *reasm {
	if n := len(rx.spare); n > 0 {
		m := rx.spare[n-1]
		rx.spare[n-1] = nil
		rx.spare = rx.spare[:n-1]
		return m
	}
	return &reasm{}
}

// delayedAck sends the acknowledgement no frame carried meanwhile.
func (v *RawVI) delayedAck() {
	v.mu.Lock()
	v.rx.ackTimer = nil
	owed := v.rx.owed > 0 && !v.closed && v.err == nil
	v.mu.Unlock()
	if owed {
		v.sendAck(false)
	}
}
