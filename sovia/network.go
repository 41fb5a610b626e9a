package sovia

import (
	"fmt"
	"net"
	"sync"
)

// Network connects SOVIA endpoints in memory by name: Listen, Dial,
// Accept, as VIA's connection setup (VipConnectWait, VipConnectRequest,
// VipConnectAccept) does for VIs. Each connection gets a VI pair whose
// receive descriptors are both posted before Dial returns, so no message
// can find an empty queue.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{listeners: map[string]*Listener{}} }

// backlog is a listener's queue of connections not yet accepted.
type backlog struct {
	queue  chan *Conn
	done   chan struct{}
	closed sync.Once
}

func newBacklog() backlog { return newBacklogOf(64) }

// newBacklogOf holds up to n connections not yet accepted.
func newBacklogOf(n int) backlog {
	return backlog{queue: make(chan *Conn, n), done: make(chan struct{})}
}

// AcceptConn returns the next connection; on a closed listener,
// ErrClosed, also for an AcceptConn that was waiting when it closed.
func (b *backlog) AcceptConn() (*Conn, error) {
	select {
	case c := <-b.queue:
		return c, nil
	case <-b.done:
		return nil, ErrClosed
	}
}

// Accept is net.Listener's: AcceptConn's connection as a net.Conn.
func (b *backlog) Accept() (net.Conn, error) {
	c, err := b.AcceptConn()
	if err != nil {
		return nil, err // not a nil *Conn in a non-nil net.Conn
	}
	return c, nil
}

// shut runs forget once and ends the backlog.
func (b *backlog) shut(forget func()) {
	b.closed.Do(func() {
		forget()
		close(b.done)
	})
}

// Listener accepts connections for one name.
type Listener struct {
	backlog
	n    *Network
	name string
	p    Params
}

// ErrClosed is what Accept returns on a closed listener; it wraps
// net.ErrClosed, as Go's own listeners' errors do.
var ErrClosed = fmt.Errorf("sovia: the listener is closed: %w", net.ErrClosed)

// Listen takes connections for name with settings p.
func (n *Network) Listen(name string, p Params) (*Listener, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[name]; ok {
		return nil, fmt.Errorf("sovia: %q is already listened on", name)
	}
	l := &Listener{backlog: newBacklog(), n: n, name: name, p: p}
	n.listeners[name] = l
	return l, nil
}

// Close stops listening.
func (l *Listener) Close() error {
	l.shut(func() {
		l.n.mu.Lock()
		delete(l.n.listeners, l.name)
		l.n.mu.Unlock()
	})
	return nil
}

// Dial connects to the listener of name. The protocol settings (window,
// threshold, chunk size) are the listener's, since each end posts
// descriptors for what the other may send; the sending policy (copy
// threshold, combining) is the dialer's own.
func (n *Network) Dial(name string, p Params) (*Conn, error) {
	n.mu.Lock()
	l := n.listeners[name]
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("sovia: no one listens on %q", name)
	}
	p.Window, p.AckThreshold, p.ChunkSize = l.p.Window, l.p.AckThreshold, l.p.ChunkSize
	p.CombineMax = min(p.CombineMax, p.ChunkSize)
	va, vb := NewMemPair()
	client, err := newConn(va, p)
	if err != nil {
		return nil, err
	}
	server, err := newConn(vb, l.p)
	if err != nil {
		return nil, err
	}
	select {
	case l.queue <- server:
		return client, nil
	case <-l.done:
		return nil, ErrClosed
	}
}
