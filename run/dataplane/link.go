package dataplane

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EtherTypeVIA is the EtherType of the software VI's frames (package
// sovia): frames of it go to Stack.VIA, beside the generated code, which
// has no node for them (a VIA provider sits beside the IP stack, as
// M-VIA's kernel module does).
const EtherTypeVIA = 0x88B5

// Link is the data plane's end of the software VIs: the eBPF stage steers
// their frames to the loops (EtherType 0x88B5), each loop hands them to
// Input, and SendFrame sends through the first loop's socket. It
// satisfies package sovia's Link, so a sovia host runs on the data
// plane's sockets: sovia.NewHost(link, mac), then link.Input = host.Input.
type Link struct {
	// Input takes each frame of the VIs' EtherType on the loop that
	// received it; it must not keep the frame. Set it before Start.
	Input func(frame []byte)
	// Drops, if set, calls its argument with each reason the VIs'
	// connection setup dropped frames or connections for and how many
	// (sovia's RawHost.EachSetupCount); reports show them (Report's
	// VIADrops).
	Drops  func(each func(reason string, count uint64))
	srv    atomic.Pointer[Server]
	mtu    atomic.Int64
	closed atomic.Bool
}

var (
	errNotServing = errors.New("dataplane: the link is not served (Start has not run, or Stop has)")
	errLinkClosed = errors.New("dataplane: the link is closed")
)

// maxLinkMTU keeps a VI frame within a ring slot and an AF_XDP chunk
// (2,048 bytes with their headers).
const maxLinkMTU = 1500

// MTU is the interface's MTU once served (at most 1,500: what a ring slot
// holds), 1,500 before.
func (l *Link) MTU() int {
	if m := l.mtu.Load(); m > 0 {
		return int(m)
	}
	return maxLinkMTU
}

// Close stops sending; frames still arrive at Input until Stop.
func (l *Link) Close() error {
	l.closed.Store(true)
	return nil
}

// SendFrame sends one whole Ethernet frame, waiting up to a second while
// the socket's queue is full. It does not keep the frame.
func (l *Link) SendFrame(f []byte) error {
	if l.closed.Load() {
		return errLinkClosed
	}
	s := l.srv.Load()
	if s == nil {
		return errNotServing
	}
	return s.sendFrame(f)
}

// attach serves l with s: called by Start once every loop runs.
func (l *Link) attach(s *Server, ifindex int) {
	if ifc, err := net.InterfaceByIndex(ifindex); err == nil && ifc.MTU > 0 {
		l.mtu.Store(int64(min(ifc.MTU, maxLinkMTU)))
	}
	l.srv.Store(s)
}

// linkTx is what SendFrame needs of a server: one frame at a time onto
// the first loop's socket.
type linkTx struct {
	mu      sync.Mutex // held by each send, and by Stop before it closes the sockets
	stopped bool
	batch   *txBatch
	sent    atomic.Uint64
	fail    atomic.Uint64
}

// stop waits for a send in progress and refuses the next: the sockets
// are about to close.
func (t *linkTx) stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// sendFrame sends f through the first queue's socket: a packet socket
// takes concurrent sends; an AF_XDP socket's transmit ring is guarded by
// its lock, which the loop's own sends take too.
func (s *Server) sendFrame(f []byte) error {
	if len(f) > frameSize {
		s.link.fail.Add(1)
		return syscall.EMSGSIZE
	}
	deadline := time.Now().Add(time.Second)
	for {
		err := s.sendOnce(f)
		if err == nil {
			s.link.sent.Add(1)
			return nil
		}
		if !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			s.link.fail.Add(1)
			return err
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// sendOnce tries to send f once, under the link's lock.
func (s *Server) sendOnce(f []byte) error {
	s.link.mu.Lock()
	defer s.link.mu.Unlock()
	if s.link.stopped {
		return errNotServing
	}
	switch sock := s.queues[0].sock.(type) {
	case *packetSocket:
		return sock.send(f)
	case *xdpPort:
		if s.link.batch == nil {
			s.link.batch = newTxBatch()
		}
		s.link.batch.add(f)
		n, err := sock.tx.send(s.link.batch)
		if err == nil && n == 0 {
			err = syscall.ENOBUFS // no free chunk: the ring is full
		}
		return err
	}
	return errNotServing
}
