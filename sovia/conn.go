package sovia

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

// pollWait bounds one wait for a completion, so a timer or a peer's
// close is noticed.
const pollWait = 5 * time.Millisecond

// Conn is one end of a SOVIA connection. It has no handler thread, as in
// the paper: the protocol makes progress inside Read, Write and Close,
// which poll the VI's completion queue. A timer flushes combined writes,
// and after Close the library finishes the FIN exchange. One goroutine
// may read while another writes.
type Conn struct {
	mu    sync.Mutex
	vi    VI
	p     Params
	ctl   *Region   // for messages without payload
	free  []*Region // registered copy buffers not in flight
	recvs []*Region

	credits int                  // DATA the peer can still take
	pending int                  // d: DATA received and not yet acknowledged
	done    map[*Region]sendKind // in-flight sends
	rx      bytes.Buffer         // received bytes not yet read

	comb    *Region // the message small writes are combined into
	combN   int
	timer   *time.Timer
	closed  bool
	ownVI   bool // the connection's setup opened its VI: closed after the close exchange
	finAck  bool // our FIN was acknowledged
	peerFin bool // the peer closed
	err     error
	stats   Stats

	addrs connAddrs // LocalAddr, RemoteAddr (netconn.go)
}

// sendKind says what to do with a region when its send completes.
type sendKind int

const (
	none       sendKind = iota
	copyBuffer          // back to the pool of registered copy buffers
	userChunk           // the caller's memory: deregister it
)

func newConn(vi VI, p Params) (*Conn, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	c := &Conn{vi: vi, p: p, credits: p.Window, done: map[*Region]sendKind{}}
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

// NewPair connects two SOVIA endpoints over an in-memory VI pair, each
// with its receive descriptors posted before either can send.
func NewPair(p Params) (a, b *Conn, va, vb *MemVI, err error) {
	va, vb = NewMemPair()
	if a, err = newConn(va, p); err != nil {
		return
	}
	b, err = newConn(vb, p)
	return
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Write sends b. Writes shorter than CombineMax wait in one message for
// up to CombineDelay (unless NoDelay); longer ones flush it and go out in
// chunks, copied or registered by size.
func (c *Conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, errors.New("sovia: write on a closed connection")
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(b) == 0 {
		return 0, nil
	}
	if !c.p.NoDelay && len(b) < c.p.CombineMax {
		if c.comb != nil && c.combN+len(b) > len(c.comb.Buf) {
			c.flush()
		}
		if c.comb == nil {
			c.comb, c.combN = c.takeBuffer(), 0
			if c.comb == nil {
				return 0, c.err
			}
			c.timer = time.AfterFunc(c.p.CombineDelay, func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.flush()
			})
		} else {
			c.stats.Combined++
		}
		c.combN += copy(c.comb.Buf[c.combN:], b)
		return len(b), nil
	}
	c.flush()
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
		r := c.takeBuffer()
		if r == nil {
			return c.err
		}
		n := copy(r.Buf, chunk)
		c.stats.Copied++
		return c.sendData(r, n, copyBuffer)
	}
	r, err := c.vi.Register(chunk)
	if err != nil {
		return err
	}
	c.stats.Registered++
	if err := c.sendData(r, len(chunk), userChunk); err != nil {
		return err
	}
	for c.done[r] != none && c.err == nil {
		c.poll(pollWait)
	}
	return c.err
}

// takeBuffer returns a registered copy buffer, waiting for a send to
// complete when all are in flight.
func (c *Conn) takeBuffer() *Region {
	for len(c.free) == 0 && len(c.done) >= c.p.Window+1 && c.err == nil {
		c.poll(pollWait)
	}
	if c.err != nil {
		return nil
	}
	if n := len(c.free); n > 0 {
		r := c.free[n-1]
		c.free = c.free[:n-1]
		return r
	}
	r, err := c.vi.Register(make([]byte, c.p.ChunkSize))
	if err != nil {
		c.err = err
		return nil
	}
	return r
}

// sendData sends a DATA message once the window allows, piggybacking the
// pending acknowledgements.
func (c *Conn) sendData(r *Region, n int, kind sendKind) error {
	for c.credits == 0 && c.err == nil {
		c.poll(pollWait)
	}
	if c.err != nil {
		return c.err
	}
	c.credits--
	c.stats.MaxInFlight = max(c.stats.MaxInFlight, c.p.Window-c.credits)
	if c.pending > 0 {
		c.stats.Piggybacked += c.pending
	}
	c.done[r] = kind
	if err := c.vi.PostSend(r, 0, n, immediate(typeData, c.pending)); err != nil {
		c.err = err
		return err
	}
	c.pending = 0
	c.stats.Data++
	return nil
}

// flush sends the combined message, if any.
func (c *Conn) flush() {
	if c.comb == nil {
		return
	}
	r, n := c.comb, c.combN
	c.comb, c.combN = nil, 0
	c.timer.Stop()
	c.stats.Copied++
	c.sendData(r, n, copyBuffer)
}

// sendControl sends an ACK, FIN or FINACK carrying the pending
// acknowledgements. ACKs and the FINACK land in the descriptors posted
// beyond the window; the FIN takes a window slot.
func (c *Conn) sendControl(typ uint8) {
	if typ == typeFin {
		for c.credits == 0 && c.err == nil {
			c.poll(pollWait)
		}
		c.credits--
	}
	if c.err != nil {
		return
	}
	if typ == typeAck {
		c.stats.Acks++
	}
	if err := c.vi.PostSend(c.ctl, 0, 0, immediate(typ, c.pending)); err != nil {
		c.err = err
	}
	c.pending = 0
}

// poll handles the next completion, waiting at most d for it.
func (c *Conn) poll(d time.Duration) bool {
	comp, ok, err := c.vi.Wait(d)
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		return false
	}
	if !ok {
		return false
	}
	if !comp.Recv {
		switch c.done[comp.Region] {
		case copyBuffer:
			c.free = append(c.free, comp.Region)
		case userChunk:
			c.vi.Deregister(comp.Region)
		}
		delete(c.done, comp.Region)
		return true
	}
	typ, acks := uint8(comp.Imm), int(comp.Imm>>8)
	c.credits += acks
	if c.credits > c.p.Window {
		c.err = fmt.Errorf("sovia: the peer acknowledged more than it was sent (window %d, credits %d)", c.p.Window, c.credits)
	}
	switch typ {
	case typeData:
		if !c.closed {
			c.rx.Write(comp.Region.Buf[:comp.N])
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
	return true
}

// Read reads what has arrived, waiting for something when nothing has;
// io.EOF once the peer closed and everything it sent was read.
func (c *Conn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flush() // the paper flushes combined writes on recv()
	for c.poll(0) {
	}
	for c.rx.Len() == 0 && !c.peerFin && c.err == nil {
		if !c.poll(0) {
			// Nothing is queued: wait for a completion without the
			// connection's lock, so that a writer on another goroutine
			// goes on meanwhile (a reader and a writer may share a
			// connection, as net.Conn allows). Completions are taken
			// under the lock only, so they are handled in order.
			c.mu.Unlock()
			c.vi.CQWait(pollWait)
			c.mu.Lock()
		}
	}
	if c.rx.Len() > 0 {
		return c.rx.Read(b)
	}
	if c.peerFin {
		return 0, io.EOF
	}
	return 0, c.err
}

// Close flushes, sends a FIN (waiting for a window slot if the peer holds
// them all) and returns; the library then answers the peer until both
// FINs are acknowledged (the paper's close exchange), for at most linger.
// A connection made by a host's Dial or a listener's Accept then closes
// its VI; one made by NewConn leaves the VI to the caller.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.flush()
	c.sendControl(typeFin)
	c.closed = true
	c.rx.Reset()
	err := c.err
	go c.linger()
	return err
}

const linger = 5 * time.Second

func (c *Conn) linger() {
	defer func() {
		if v, ok := c.vi.(io.Closer); ok && c.ownVI {
			v.Close()
		}
	}()
	deadline := time.Now().Add(linger)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		c.poll(pollWait)
		done := c.finAck && c.peerFin || c.err != nil
		c.mu.Unlock()
		if done {
			return
		}
	}
}

// Finished reports whether the close exchange completed on this end: our
// FIN acknowledged and the peer's FIN received.
func (c *Conn) Finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finAck && c.peerFin
}
