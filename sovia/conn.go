package sovia

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Params are a connection's protocol settings: what plan.json and
// sovia.conf decide for an endpoint.
type Params struct {
	Window       int           // w: DATA messages in flight without acknowledgement
	AckThreshold int           // t: delayed acknowledgements go out once t are pending (1 <= t <= w)
	ChunkSize    int           // a longer write is cut into chunks of this size
	CopyMax      int           // chunks up to this size are copied into registered buffers; longer ones are registered in place
	CombineMax   int           // writes shorter than this are combined into one message (0: never)
	CombineDelay time.Duration // how long a combined message may wait
	NoDelay      bool          // no combining, as TCP_NODELAY turns Nagle off
}

// PaperParams are the SOVIA paper's settings: w = 32, t = 16 (§4.2),
// 32 KB chunks (§4.4), SOVIA_HYBRID's 2 KB copy threshold (§4.1), and
// messages under 2 KB combined for up to 100 ms (§4.3).
func PaperParams() Params {
	return Params{Window: 32, AckThreshold: 16, ChunkSize: 32 << 10, CopyMax: 2 << 10, CombineMax: 2 << 10, CombineDelay: 100 * time.Millisecond}
}

// Descriptors is how many receive descriptors each side pre-posts: w for
// DATA (and the FIN, which takes a window slot), w/t rounded up for
// acknowledgements in flight (the paper's w + w/t, §4.2), and one for the
// FINACK of the close exchange.
func (p Params) Descriptors() int {
	return p.Window + (p.Window+p.AckThreshold-1)/p.AckThreshold + 1
}

func (p Params) check() error {
	switch {
	case p.Window < 1:
		return fmt.Errorf("sovia: window %d; it must be at least 1", p.Window)
	case p.AckThreshold < 1 || p.AckThreshold > p.Window:
		// With t > w the receiver could hold every acknowledgement the
		// sender waits for.
		return fmt.Errorf("sovia: acknowledgement threshold %d; it must lie in 1..w (w = %d)", p.AckThreshold, p.Window)
	case p.ChunkSize < 1:
		return fmt.Errorf("sovia: chunk size %d", p.ChunkSize)
	case p.CombineMax > p.ChunkSize:
		return fmt.Errorf("sovia: combining writes up to %d bytes into %d-byte chunks", p.CombineMax, p.ChunkSize)
	}
	return nil
}

// Packet types, in the low byte of the 32-bit immediate data; the upper
// 24 bits carry the acknowledgements piggybacked on the packet (paper
// §4.2). WAKEUP, which the paper uses for blocking receives, is not
// needed: connections poll.
const (
	typeData   = 1
	typeAck    = 2
	typeFin    = 3
	typeFinAck = 4
)

func immediate(typ uint8, acks int) uint32 { return uint32(typ) | uint32(acks)<<8 }

// Stats count what a connection did.
type Stats struct {
	Data        int // DATA messages sent
	Copied      int // of them, copied into a registered buffer
	Registered  int // of them, sent from the caller's memory, registered for the send
	Combined    int // writes combined into another write's message
	Acks        int // ACK messages sent
	Piggybacked int // acknowledgements carried by DATA instead of an ACK
	MaxInFlight int // the most DATA ever unacknowledged (at most w)
}

// Conn is one end of a SOVIA connection. It has no handler thread, as in
// the paper's SOVIA_SINGLE: the protocol makes progress inside Read,
// Write and Close, in the caller's goroutine, which takes the VI's
// completions itself (and, on the software VI, receives the link's
// frames itself). A timer flushes combined writes, and after Close the
// library finishes the FIN exchange.
//
// One goroutine may read while another writes: the connection's lock is
// held only while its state changes, never while a call waits, so a Write
// waiting for window space blocks neither Read nor Stats. Writes are
// serialised with each other, so that two writers' chunks do not mix.
type Conn struct {
	wmu sync.Mutex // one Write at a time
	mu  sync.Mutex
	// smu is taken under mu when a message is decided and let go once
	// the VI has it, so that messages take their numbers in the order
	// they were decided although a DATA goes out without mu (sendData):
	// a combined write flushed by a Read or the timer, a Write's chunk and
	// the FIN stay in the order of the bytes. The lock order is mu, then
	// smu; smu is let go before mu is taken again.
	smu   sync.Mutex
	vi    VI
	w     waitable
	clock Clock
	p     Params
	ctl   *Region   // for messages without payload
	free  []*Region // registered copy buffers not in flight
	recvs []*Region

	credits  int          // DATA the peer can still take
	pending  int          // d: DATA received and not yet acknowledged
	inFlight int          // sends not completed (each region says what it is: Region.sending)
	rx       bytes.Buffer // received bytes not yet read
	direct   []byte       // a waiting Read's buffer, which DATA arriving while rx is empty fills
	directN  int          // bytes in direct

	comb    *Region // the message small writes are combined into
	combN   int
	timer   Timer
	kick    chan struct{} // closed when a waiter must look again (deadline, close); nil while none waits
	rdl     deadline
	wdl     deadline
	closed  bool // Close was called
	ownVI   bool // the connection's setup opened its VI: closed after the close exchange
	finAck  bool // our FIN was acknowledged
	peerFin bool // the peer closed
	err     error
	stats   Stats

	// A window-blocked write, for tests: set while a Write waits for a
	// credit.
	windowWaits int

	addrs connAddrs // LocalAddr, RemoteAddr (netconn.go)
}

// deadline is one direction's deadline (net.Conn's SetReadDeadline,
// SetWriteDeadline), under Conn.mu.
type deadline struct {
	timer   Timer
	gen     int
	expired bool
}

// sendKind says what to do with a region when its send completes.
type sendKind int

const (
	none       sendKind = iota
	copyBuffer          // back to the pool of registered copy buffers
	userChunk           // the caller's memory: deregister it
)

// errClosed is what calls on a connection after its Close return.
var errClosed = fmt.Errorf("sovia: %w", net.ErrClosed)

func newConn(vi VI, p Params) (*Conn, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	w, ok := vi.(waitable)
	if !ok {
		w = pollingVI{vi}
	}
	c := &Conn{vi: vi, w: w, clock: w.clockOf(), p: p, credits: p.Window}
	var err error
	if c.ctl, err = vi.Register(make([]byte, 1)); err != nil {
		return nil, err
	}
	for range p.Descriptors() {
		r, err := vi.Register(make([]byte, p.ChunkSize))
		if err != nil {
			return nil, err
		}
		c.recvs = append(c.recvs, r)
		if err := vi.PostRecv(r); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// pollingVI waits on a VI of another provider through its public
// interface: CQWait in short steps.
type pollingVI struct{ VI }

func (p pollingVI) arm() (<-chan struct{}, bool) { return nil, p.CQWait(0) }
func (p pollingVI) block(_, stop <-chan struct{}) {
	for !p.CQWait(time.Millisecond) {
		select {
		case <-stop:
			return
		default:
		}
	}
}
func (p pollingVI) wake()                           {}
func (p pollingVI) take() (Completion, bool, error) { return p.Wait(0) }
func (p pollingVI) clockOf() Clock                  { return RealClock{} }

// NewPair connects two SOVIA endpoints over an in-memory VI pair, each
// with its receive descriptors posted before either can send.
func NewPair(p Params) (a, b *Conn, va, vb *MemVI, err error) {
	return newPairClock(p, nil)
}

func newPairClock(p Params, clock Clock) (a, b *Conn, va, vb *MemVI, err error) {
	va, vb = NewMemPairClock(clock)
	if a, err = newConn(va, p); err != nil {
		return
	}
	b, err = newConn(vb, p)
	return
}

// Stats returns the connection's counters. It never waits for the
// network.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// kickAll makes every waiter of the connection look at its state again
// (c.mu held).
func (c *Conn) kickAll() {
	if c.kick != nil {
		close(c.kick)
		c.kick = nil
	}
}

// await waits, without the connection's lock, for the VI's next event or
// a kick, then handles every completion queued (c.mu held on entry and
// return). The caller checks what it waits for again.
func (c *Conn) await() {
	ev, ready := c.w.arm()
	if !ready {
		if c.kick == nil {
			c.kick = make(chan struct{})
		}
		k := c.kick
		c.mu.Unlock()
		c.w.block(ev, k)
		c.mu.Lock()
	}
	c.drain()
}

// drain handles every completion queued, without waiting.
func (c *Conn) drain() {
	for {
		comp, ok, err := c.w.take()
		if err != nil {
			if c.err == nil {
				c.err = err
				c.kickAll()
			}
			return
		}
		if !ok {
			return
		}
		c.handle(comp)
	}
}

// SetDeadline sets the read and write deadlines (net.Conn's: a call
// waiting when it passes returns os.ErrDeadlineExceeded, and so does every
// call until it is moved; the zero time means none).
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setDeadline(&c.rdl, t)
	c.setDeadline(&c.wdl, t)
	return nil
}

// SetReadDeadline sets the deadline of Read.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setDeadline(&c.rdl, t)
	return nil
}

// SetWriteDeadline sets the deadline of Write (a write whose bytes all
// went out, or into a combined message, succeeds).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setDeadline(&c.wdl, t)
	return nil
}

// setDeadline (c.mu held) arms dl's timer on the connection's clock.
func (c *Conn) setDeadline(dl *deadline, t time.Time) {
	if dl.timer != nil {
		dl.timer.Stop()
		dl.timer = nil
	}
	dl.gen++
	dl.expired = false
	if t.IsZero() {
		return
	}
	d := t.Sub(c.clock.Now())
	if d <= 0 {
		dl.expired = true
		c.kickAll()
		return
	}
	gen := dl.gen
	dl.timer = c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		if dl.gen == gen {
			dl.expired = true
			c.kickAll()
		}
		c.mu.Unlock()
		c.w.wake()
	})
}

// writable says why a user's send cannot go on: the connection broke or
// closed, or the write deadline passed (c.mu held). The library's own
// sends after Close (user false) go on.
func (c *Conn) writable(user bool) error {
	switch {
	case c.err != nil:
		return c.err
	case user && c.closed:
		return errClosed
	case user && c.wdl.expired:
		return os.ErrDeadlineExceeded
	}
	return nil
}

// Write sends b. Writes shorter than CombineMax wait in one message for
// up to CombineDelay (unless NoDelay); longer ones flush it and go out in
// chunks, copied or registered by size.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain() // acknowledgements that came: piggyback what is pending
	if err := c.writable(true); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return 0, nil
	}
	if !c.p.NoDelay && len(b) < c.p.CombineMax {
		if c.comb != nil && c.combN+len(b) > len(c.comb.Buf) {
			if err := c.flush(true); err != nil {
				return 0, err
			}
		}
		if c.comb == nil {
			r, err := c.takeBuffer(true)
			if err != nil {
				return 0, err
			}
			c.comb, c.combN = r, 0
			c.armFlush(c.comb)
		} else {
			c.stats.Combined++
		}
		c.combN += copy(c.comb.Buf[c.combN:], b)
		return len(b), nil
	}
	if err := c.flush(true); err != nil {
		return 0, err
	}
	for off := 0; off < len(b); {
		chunk := b[off:min(off+c.p.ChunkSize, len(b))]
		if err := c.sendChunk(chunk); err != nil {
			return off, err
		}
		off += len(chunk)
	}
	return len(b), nil
}

// sendChunk sends one chunk: copied into a registered buffer when short,
// from the caller's memory, registered for the send, when long (the
// caller's buffer is released when the send completes).
func (c *Conn) sendChunk(chunk []byte) error {
	if len(chunk) <= c.p.CopyMax {
		r, err := c.takeBuffer(true)
		if err != nil {
			return err
		}
		n := copy(r.Buf, chunk)
		c.stats.Copied++
		return c.sendData(r, n, copyBuffer, true)
	}
	if err := c.waitCredit(true); err != nil {
		return err
	}
	r, err := c.vi.Register(chunk)
	if err != nil {
		return err
	}
	c.stats.Registered++
	if err := c.sendData(r, len(chunk), userChunk, true); err != nil {
		return err
	}
	// The caller may reuse chunk once Write returns: wait for the send
	// (the providers here complete it inside PostSend).
	for r.sending != none && c.err == nil {
		c.await()
	}
	return c.err
}

// takeBuffer returns a registered copy buffer, waiting for a send to
// complete when all are in flight.
func (c *Conn) takeBuffer(user bool) (*Region, error) {
	for len(c.free) == 0 && c.inFlight >= c.p.Window+1 {
		if err := c.writable(user); err != nil {
			return nil, err
		}
		c.await()
	}
	if err := c.writable(user); err != nil {
		return nil, err
	}
	if n := len(c.free); n > 0 {
		r := c.free[n-1]
		c.free = c.free[:n-1]
		return r, nil
	}
	r, err := c.vi.Register(make([]byte, c.p.ChunkSize))
	if err != nil {
		c.err = err
		return nil, err
	}
	return r, nil
}

// waitCredit waits for a window slot: an acknowledgement of DATA the peer
// took. Only this goroutine waits here; Read and Stats go on meanwhile.
func (c *Conn) waitCredit(user bool) error {
	for c.credits == 0 {
		if err := c.writable(user); err != nil {
			return err
		}
		c.windowWaits++
		c.await()
		c.windowWaits--
	}
	return c.writable(user)
}

// sendData sends a DATA message once the window allows, piggybacking the
// pending acknowledgements.
func (c *Conn) sendData(r *Region, n int, kind sendKind, user bool) error {
	if err := c.waitCredit(user); err != nil {
		if kind == copyBuffer {
			c.free = append(c.free, r)
		}
		return err
	}
	c.credits--
	c.stats.MaxInFlight = max(c.stats.MaxInFlight, c.p.Window-c.credits)
	if c.pending > 0 {
		c.stats.Piggybacked += c.pending
	}
	r.sending = kind
	c.inFlight++
	imm := immediate(typeData, c.pending)
	c.pending = 0
	c.stats.Data++
	// The send goes out without the connection's lock: on the software
	// VI it is a system call for every frame of the chunk, during which
	// a Read on another goroutine takes what arrives (and its
	// acknowledgements give this writer its credits back). The state is
	// the send's already: credit taken, region in flight, acknowledgements
	// counted as carried; Writes are serialised by wmu.
	c.smu.Lock()
	c.mu.Unlock()
	err := c.vi.PostSend(r, 0, n, imm)
	c.smu.Unlock()
	c.mu.Lock()
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		c.kickAll()
		return err
	}
	return nil
}

// armFlush sets the timer that sends the combined message r after
// CombineDelay. The timer never waits for a window slot (a later write
// could overtake its message meanwhile): with none free it looks again
// after another CombineDelay; a Read or Write flushes sooner.
func (c *Conn) armFlush(r *Region) {
	c.timer = c.clock.AfterFunc(c.p.CombineDelay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.comb != r {
			return // flushed already
		}
		c.drain()
		if c.credits > 0 || c.err != nil {
			c.flush(false)
			return
		}
		c.armFlush(r)
	})
}

// flush sends the combined message, if any.
func (c *Conn) flush(user bool) error {
	if c.comb == nil {
		return nil
	}
	r, n := c.comb, c.combN
	c.comb, c.combN = nil, 0
	c.timer.Stop()
	c.stats.Copied++
	return c.sendData(r, n, copyBuffer, user)
}

// sendControl sends an ACK, FIN or FINACK carrying the pending
// acknowledgements. ACKs and the FINACK land in the descriptors posted
// beyond the window; the FIN takes a window slot.
func (c *Conn) sendControl(typ uint8) {
	if typ == typeFin {
		if c.waitCredit(false) != nil {
			return
		}
		c.credits--
	}
	if c.err != nil {
		return
	}
	if typ == typeAck {
		c.stats.Acks++
	}
	c.smu.Lock() // after a DATA going out
	err := c.vi.PostSend(c.ctl, 0, 0, immediate(typ, c.pending))
	c.smu.Unlock()
	if err != nil {
		c.err = err
		c.kickAll()
	}
	c.pending = 0
}

// handle takes one completion.
func (c *Conn) handle(comp Completion) {
	if !comp.Recv {
		r := comp.Region
		switch r.sending {
		case copyBuffer:
			c.free = append(c.free, r)
		case userChunk:
			c.vi.Deregister(r)
		}
		if r.sending != none {
			r.sending = none
			c.inFlight--
		}
		return
	}
	typ, acks := uint8(comp.Imm), int(comp.Imm>>8)
	c.credits += acks
	if c.credits > c.p.Window {
		c.err = fmt.Errorf("sovia: the peer acknowledged more than it was sent (window %d, credits %d)", c.p.Window, c.credits)
	}
	switch typ {
	case typeData:
		data := comp.Region.Buf[:comp.N]
		switch {
		case c.closed:
		case c.rx.Len() == 0 && len(data) <= len(c.direct)-c.directN:
			c.directN += copy(c.direct[c.directN:], data) // one copy, not two through rx
		default:
			c.rx.Write(data)
		}
		c.pending++
	case typeFin:
		c.peerFin = true
		c.pending++ // the FIN took a window slot
	case typeFinAck:
		c.finAck = true
	}
	if err := c.vi.PostRecv(comp.Region); err != nil {
		c.err = err
	}
	switch {
	case typ == typeFin:
		c.sendControl(typeFinAck)
	case c.pending >= c.p.AckThreshold:
		// The paper's "more than t" read as "t or more": it emulates
		// one ACK per DATA with t = 1 (SOVIA_BASE, SOVIA_FLOWCNTL), and
		// w + w/t descriptors then cover the ACKs in flight.
		c.sendControl(typeAck)
	}
}

// Read reads what has arrived, waiting for something when nothing has;
// io.EOF once the peer closed and everything it sent was read. A Read
// waiting while another goroutine writes does not hold that writer up.
func (c *Conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mine := c.direct == nil && c.rx.Len() == 0 && len(b) > 0
	if mine {
		// Nothing to read: what comes while this Read waits goes
		// straight into b (one Read at a time does this).
		c.direct, c.directN = b, 0
		defer func() { c.direct, c.directN = nil, 0 }()
	}
	c.drain()
	for {
		if c.comb != nil && c.credits > 0 {
			c.flush(true) // the paper flushes combined writes on recv()
		}
		switch {
		case c.closed:
			return 0, errClosed
		case mine && c.directN > 0:
			n := c.directN
			m, _ := c.rx.Read(b[n:]) // what came after, when it did not fit
			return n + m, nil
		case c.rx.Len() > 0:
			return c.rx.Read(b)
		case c.peerFin:
			return 0, io.EOF
		case c.err != nil:
			return 0, c.err
		case c.rdl.expired:
			return 0, os.ErrDeadlineExceeded
		case len(b) == 0:
			return 0, nil
		}
		c.await()
	}
}

// Close flushes, sends a FIN and returns; the library then answers the
// peer until both FINs are acknowledged (the paper's close exchange), for
// at most linger. A Read or Write waiting in another goroutine returns
// net.ErrClosed. A FIN that finds no window slot goes out once one comes.
// A connection made by a host's Dial or a listener's Accept then closes
// its VI; one made by NewConn leaves the VI to the caller.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.kickAll()
	c.rx.Reset()
	err := c.err
	if c.credits > 0 && (c.comb == nil || c.credits > 1) {
		c.flush(false)
		c.sendControl(typeFin)
		go c.linger(false)
	} else {
		go c.linger(true)
	}
	c.w.wake()
	return err
}

const linger = 5 * time.Second

// linger finishes the close exchange: the flush and FIN first when Close
// could not send them without waiting.
func (c *Conn) linger(fin bool) {
	defer func() {
		if v, ok := c.vi.(io.Closer); ok && c.ownVI {
			v.Close()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	over := false
	t := c.clock.AfterFunc(linger, func() {
		c.mu.Lock()
		over = true
		c.kickAll()
		c.mu.Unlock()
		c.w.wake()
	})
	defer t.Stop()
	if fin {
		c.flush(false)
		c.sendControl(typeFin)
	}
	for !(c.finAck && c.peerFin) && c.err == nil && !over {
		c.await()
	}
}

// Finished reports whether the close exchange completed on this end: our
// FIN acknowledged and the peer's FIN received.
func (c *Conn) Finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finAck && c.peerFin
}
