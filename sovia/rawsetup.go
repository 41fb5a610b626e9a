//go:build linux

package sovia

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// Connection setup travels on VI 0, one frame a message, as VIA's
// VipConnectRequest and VipConnectAccept: the dialer opens a VI and posts
// its receive descriptors, then asks for a port with its VI number and
// protocol settings; the listener opens a VI of its own, posts its
// descriptors and answers with its VI number. Either end can send the
// moment it knows the other's VI, and every message finds a descriptor.
const (
	setupConnect = 1
	setupAccept  = 2
	setupRefuse  = 3
	setupLen     = 15 // kind, port, dialer VI, listener VI, window, threshold, chunk size
)

type setup struct {
	kind byte
	vi   uint16
}

func setupFrame(kind byte, port, dialer, listener uint16, p Params) []byte {
	b := make([]byte, setupLen)
	b[0] = kind
	binary.BigEndian.PutUint16(b[1:], port)
	binary.BigEndian.PutUint16(b[3:], dialer)
	binary.BigEndian.PutUint16(b[5:], listener)
	binary.BigEndian.PutUint16(b[7:], uint16(p.Window))
	binary.BigEndian.PutUint16(b[9:], uint16(p.AckThreshold))
	binary.BigEndian.PutUint32(b[11:], uint32(p.ChunkSize))
	return b
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
	if h.listeners[port] != nil {
		return nil, fmt.Errorf("sovia: port %d is listened on", port)
	}
	l := &RawListener{backlog: newBacklogOf(n), h: h, port: port, p: p}
	h.listeners[port] = l
	return l, nil
}

// Close stops listening.
func (l *RawListener) Close() error {
	l.shut(func() {
		l.h.mu.Lock()
		delete(l.h.listeners, l.port)
		l.h.mu.Unlock()
	})
	return nil
}

// Dial connects to port on the host whose MAC is peer, asking again every
// 200 ms for up to 2 s.
func (h *RawHost) Dial(peer net.HardwareAddr, port uint16, p Params) (*Conn, error) {
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
	answer := make(chan setup, 1)
	h.mu.Lock()
	h.dials[v.lvi] = answer
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.dials, v.lvi)
		h.mu.Unlock()
	}()
	req := setupFrame(setupConnect, port, v.lvi, 0, p)
	for range 10 {
		h.sendMu.Lock()
		err := h.send(v.remote, 0, v.lvi, 0, len(req), 0, 0, req)
		h.sendMu.Unlock()
		if err != nil {
			v.Close()
			return nil, err
		}
		tick := make(chan struct{})
		t := h.clock.AfterFunc(200*time.Millisecond, func() { close(tick) })
		select {
		case a := <-answer:
			t.Stop()
			if a.kind == setupRefuse {
				v.Close()
				return nil, fmt.Errorf("sovia: %s refused port %d (no listener, or other protocol settings)", peer, port)
			}
			return c, nil
		case <-tick:
		}
	}
	v.Close()
	return nil, errors.New("sovia: no answer to the connection request")
}

// setupFrame handles a message on VI 0 (in the receive loop).
func (h *RawHost) setupFrame(from [6]byte, svi uint16, b []byte) {
	if len(b) < setupLen {
		return
	}
	kind, port := b[0], binary.BigEndian.Uint16(b[1:])
	dialer, listener := binary.BigEndian.Uint16(b[3:]), binary.BigEndian.Uint16(b[5:])
	switch kind {
	case setupAccept, setupRefuse:
		h.mu.Lock()
		answer := h.dials[dialer]
		if v := h.vis[dialer]; answer != nil && v != nil && kind == setupAccept {
			// Known before the loop reads the listener's first DATA.
			v.rvi = listener
		}
		h.mu.Unlock()
		if answer != nil {
			select {
			case answer <- setup{kind, listener}:
			default:
			}
		}
	case setupConnect:
		want := Params{Window: int(binary.BigEndian.Uint16(b[7:])), AckThreshold: int(binary.BigEndian.Uint16(b[9:])), ChunkSize: int(binary.BigEndian.Uint32(b[11:]))}
		var key [8]byte
		copy(key[:], from[:])
		binary.BigEndian.PutUint16(key[6:], svi)
		h.mu.Lock()
		l := h.listeners[port]
		ours, again := h.accepted[key]
		h.mu.Unlock()
		reply := func(kind byte, vi uint16, p Params) {
			f := setupFrame(kind, port, dialer, vi, p)
			h.sendMu.Lock()
			h.send(from, 0, vi, 0, len(f), 0, 0, f)
			h.sendMu.Unlock()
		}
		switch {
		case again:
			reply(setupAccept, ours, l.paramsOr(want)) // our answer was lost
		case l == nil || l.p.Window != want.Window || l.p.AckThreshold != want.AckThreshold || l.p.ChunkSize != want.ChunkSize:
			reply(setupRefuse, 0, want)
		default:
			v, err := h.VI(0, net.HardwareAddr(from[:]), dialer)
			if err != nil {
				reply(setupRefuse, 0, want)
				return
			}
			c, err := newConn(v, l.p)
			if err != nil {
				v.Close()
				reply(setupRefuse, 0, want)
				return
			}
			c.ownVI = true
			select {
			case l.queue <- c:
			default:
				v.Close()
				reply(setupRefuse, 0, want) // the accept queue is full
				return
			}
			h.mu.Lock()
			h.accepted[key] = v.lvi
			h.mu.Unlock()
			reply(setupAccept, v.lvi, l.p)
		}
	}
}

func (l *RawListener) paramsOr(p Params) Params {
	if l == nil {
		return p
	}
	return l.p
}
