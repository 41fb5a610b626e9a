//go:build linux

package sovia

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// EtherType of the software VI's frames: IEEE 802's "local experimental"
// EtherType 1 (0x88B5), free for protocols that never leave a site.
const EtherType = 0x88B5

// rawHeader is a VI frame's header after the Ethernet header (the wire
// format is in docs/sovia.md):
//
//	0  destination VI   2 bytes
//	2  source VI        2
//	4  message number   4  (from 1 on each VI)
//	8  acknowledgement  4  (cumulative: every message up to it arrived)
//	12 message length   4
//	16 fragment offset  4
//	20 immediate data   4
//	24 flags            1  (flagAckOnly, flagNak, flagBulk)
//	25 reserved         1  (zero)
//	26 block length     2  (in a bulk datagram, the bytes after this
//	                        header that are the block's; zero in a frame)
const rawHeader = 28

const (
	flagAckOnly = 1 << 0 // no message: the frame carries the acknowledgement alone
	flagNak     = 1 << 1 // messages after the acknowledged one came first: send the next again
	flagBulk    = 1 << 2 // the sender takes bulk datagrams (bulk.go): its peer may send them
)

// RawVI is a VI in software over Ethernet, as M-VIA runs VIA over Fast
// Ethernet, at VIA's Reliable Delivery level: a message goes out as
// frames of its own EtherType, cut to the interface's MTU, and is put
// together again in the receive descriptor posted first. Messages are
// numbered; each frame carries the cumulative acknowledgement of what its
// sender received; a message not acknowledged in time is sent again, and
// after Retries times in a row the VI breaks with an error. Duplicates
// are dropped and messages that overtook a lost one wait in the
// descriptors after it. A message that finds no descriptor breaks the VI
// (ErrNoDescriptor), as VIA's reliable levels do.
type RawVI struct {
	queues
	host     *RawHost
	remote   [6]byte
	lvi, rvi uint16
	rel      Reliability

	tx txState // under tx.mu
	rx rxState // under queues.mu

	heard atomic.Uint64 // frames received: connection setup's idle timeout reads it
	bulk  atomic.Int32  // bulkUnknown, bulkOffered (the peer's flagBulk), or bulkAbandoned (bulk.go)
}

// RawHost is one interface's end of the software VIs: a link that
// carries its frames (a raw socket of its own, or the data plane of
// `dragonc run`), whose frames go to the VI their header names. VI 0
// carries connection setup (Listen, Dial).
type RawHost struct {
	link  Link
	local [6]byte
	clock Clock
	poll  *poller      // the link's frames are received by whoever waits (nil: they come through Input)
	input func([]byte) // Input, made a func value once (one made at each receive is an allocation)
	rel   Reliability
	offer uint8 // flagBulk when the host takes bulk datagrams: every header it sends says so

	sendMu   sync.Mutex
	sendBufs [][]byte // frames (or headers) being built
	frames   [][]byte
	parts    [][]byte // the message's bytes after each header (gatherLink)
	bulkOut  bool     // the link sends bulk datagrams (bulkLink), until it refuses one
	// bulkAbandoned counts the VIs that gave bulk datagrams up
	// (abandonBulk).
	bulkAbandoned atomic.Uint64
	blocks        []byte // the block headers of a bulk datagram being built

	// owe lists the VIs that may owe an acknowledgement (owes).
	owe struct {
		mu         sync.Mutex
		vis, spare []*RawVI
		n          atomic.Int32 // len(vis)
	}

	mu     sync.Mutex
	vis    map[uint16]*RawVI
	next   uint16
	setup  setupState // listeners, dials, half-open connections (rawsetup.go)
	closed bool
}

// Link carries a host's VI frames: whole Ethernet frames of EtherType
// EtherType, sent as given. Whoever receives the link's frames hands
// them to the host's Input.
type Link interface {
	// SendFrame sends one frame; it may wait while the link's queue is
	// full, and must not keep the frame.
	SendFrame(frame []byte) error
	// MTU is the largest frame the link sends, without the Ethernet
	// header.
	MTU() int
	// Close stops the link; the host closes it.
	Close() error
}

// NewHost makes the software VIs of a host whose Ethernet address is mac
// on link. Frames the link receives go to Input.
func NewHost(link Link, mac net.HardwareAddr) (*RawHost, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("sovia: a host needs an Ethernet address, not %q", mac)
	}
	h := &RawHost{link: link, vis: map[uint16]*RawVI{}, next: firstVI(), setup: newSetupState()}
	copy(h.local[:], mac)
	h.input = h.Input
	h.clock = RealClock{}
	h.rel = DefaultReliability()
	return h, nil
}

// Close closes the host, its listeners and its link; its VIs fail.
func (h *RawHost) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.stopSweep()
	h.mu.Unlock()
	for _, l := range h.listenersOf() {
		l.Close() // Accept returns ErrClosed
	}
	h.failAll(errors.New("sovia: the host is closed"))
	return h.closeLink()
}

// SetClock makes the host's VIs and connections take their timers from
// clock; call it before the first VI opens.
func (h *RawHost) SetClock(clock Clock) { h.clock = orReal(clock) }

// VI opens VI lvi of this host, joined to VI rvi of the host whose MAC
// is peer (0 for lvi: the next free number).
func (h *RawHost) VI(lvi uint16, peer net.HardwareAddr, rvi uint16) (*RawVI, error) {
	if len(peer) != 6 {
		return nil, fmt.Errorf("sovia: the peer needs an Ethernet address")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if lvi == 0 {
		var err error
		if lvi, err = h.freeVI(); err != nil {
			return nil, err
		}
	}
	if h.vis[lvi] != nil {
		return nil, fmt.Errorf("sovia: VI %d is open", lvi)
	}
	return h.openVI(lvi, [6]byte(peer), rvi), nil
}

// freeVI is the next free VI number, one not closed too recently
// (h.mu held). At most every number is tried once, so a host whose
// 65,535 VIs are all open says so instead of spinning.
func (h *RawHost) freeVI() (uint16, error) {
	for range 1 << 16 {
		if n := h.next; n != 0 && h.vis[n] == nil && !h.quarantined(n) {
			h.next++
			return n, nil
		}
		h.next++
	}
	return 0, errors.New("sovia: every VI number of the host is in use or closed too recently to be used again")
}

// openVI opens VI lvi, a free number (h.mu held).
func (h *RawHost) openVI(lvi uint16, peer [6]byte, rvi uint16) *RawVI {
	v := &RawVI{host: h, lvi: lvi, rvi: rvi, remote: peer, rel: h.rel}
	v.init(v, h.clock)
	v.tx.next, v.rx.expect = 1, 1
	h.vis[lvi] = v
	v.armKeepAlive()
	return v
}

// OpenRaw opens a software VI on interface ifname, on a host of its own,
// between local VI number lvi and the VI rvi of the host whose MAC is
// peer. It needs CAP_NET_RAW.
func OpenRaw(ifname string, lvi uint16, peer net.HardwareAddr, rvi uint16) (*RawVI, error) {
	h, err := OpenHost(ifname)
	if err != nil {
		return nil, err
	}
	v, err := h.VI(lvi, peer, rvi)
	if err != nil {
		h.Close()
	}
	return v, err
}

func htons(x uint16) uint16 { return x<<8 | x>>8 }

// Close closes the VI.
func (v *RawVI) Close() error {
	h := v.host
	h.mu.Lock()
	if h.vis[v.lvi] == v {
		delete(h.vis, v.lvi)
		h.forget(v) // connection setup's records (rawsetup.go)
	}
	h.mu.Unlock()
	v.shut()
	v.stopTimers()
	v.wake()
	return nil
}

// send writes one frame with no acknowledgement: connection setup on VI
// 0 (h.sendMu held).
func (h *RawHost) send(to [6]byte, dvi, svi uint16, seq uint32, total, at int, imm uint32, data []byte) error {
	return h.sendFrame(to, header{dvi: dvi, svi: svi, seq: seq, total: uint32(total), at: uint32(at), imm: imm}, data)
}

// header is a VI frame's header.
type header struct {
	dvi, svi       uint16
	seq, ack       uint32
	total, at, imm uint32
	flags          uint8
}

// sendFrame writes one frame (h.sendMu held).
func (h *RawHost) sendFrame(to [6]byte, x header, data []byte) error {
	return h.link.SendFrame(h.frame(0, to, x, data))
}

// frame builds a frame in send buffer i (h.sendMu held).
func (h *RawHost) frame(i int, to [6]byte, x header, data []byte) []byte {
	n := 14 + rawHeader + len(data)
	for len(h.sendBufs) <= i {
		h.sendBufs = append(h.sendBufs, nil)
	}
	if cap(h.sendBufs[i]) < n {
		h.sendBufs[i] = make([]byte, n, max(n, 14+rawHeader+h.link.MTU()))
	}
	f := h.sendBufs[i][:n]
	copy(f[0:6], to[:])
	copy(f[6:12], h.local[:])
	binary.BigEndian.PutUint16(f[12:], EtherType)
	h.putHeader(f[14:], x, 0)
	copy(f[14+rawHeader:], data)
	return f
}

// putHeader writes x as the rawHeader bytes of hd, with the block length
// n (0 in a frame) and the host's offer of bulk datagrams.
func (h *RawHost) putHeader(hd []byte, x header, n int) {
	binary.BigEndian.PutUint16(hd[0:], x.dvi)
	binary.BigEndian.PutUint16(hd[2:], x.svi)
	binary.BigEndian.PutUint32(hd[4:], x.seq)
	binary.BigEndian.PutUint32(hd[8:], x.ack)
	binary.BigEndian.PutUint32(hd[12:], x.total)
	binary.BigEndian.PutUint32(hd[16:], x.at)
	binary.BigEndian.PutUint32(hd[20:], x.imm)
	hd[24], hd[25] = x.flags|h.offer, 0
	binary.BigEndian.PutUint16(hd[26:], uint16(n))
}

// Input takes one frame the link received: a fragment of a message for
// one of the host's VIs, connection setup, or a bulk datagram of
// fragments (bulk.go). Other frames, short ones, ones to another
// Ethernet address and ones for VIs that are not open are ignored. Input
// does not keep f.
func (h *RawHost) Input(f []byte) {
	if len(f) < 14 || [6]byte(f[0:6]) != h.local {
		return // not for this host (a promiscuous link shows others')
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case EtherType:
		h.inputVI([6]byte(f[6:12]), f[14:])
	case etherTypeIPv4:
		h.inputBulk(f)
	}
}

// inputVI takes one VI header and the bytes after it, from a frame or a
// bulk datagram's block, sent by from.
func (h *RawHost) inputVI(from [6]byte, hd []byte) {
	if len(hd) < rawHeader {
		h.countDrop(dropTruncated)
		return
	}
	dvi, svi := binary.BigEndian.Uint16(hd[0:]), binary.BigEndian.Uint16(hd[2:])
	if dvi == 0 {
		h.setupFrame(from, svi, hd[rawHeader:])
		return
	}
	h.mu.Lock()
	v := h.vis[dvi]
	ours := v != nil && svi != 0 && svi == v.rvi && from == v.remote // VI 0 sends setup only
	if !ours {
		h.stray(v) // counted (rawsetup.go)
	}
	h.mu.Unlock()
	if !ours {
		return // no such VI, or another VI's or peer's
	}
	v.heard.Add(1)
	x := header{dvi: dvi, svi: svi, seq: binary.BigEndian.Uint32(hd[4:]), ack: binary.BigEndian.Uint32(hd[8:]),
		total: binary.BigEndian.Uint32(hd[12:]), at: binary.BigEndian.Uint32(hd[16:]), imm: binary.BigEndian.Uint32(hd[20:]), flags: hd[24]}
	if x.flags&flagBulk != 0 && v.bulk.Load() == bulkUnknown {
		v.bulk.CompareAndSwap(bulkUnknown, bulkOffered)
	}
	v.acked(x.ack, x.flags&flagNak != 0)
	if x.flags&flagAckOnly != 0 {
		return
	}
	if x.total > 1<<30 || x.at > x.total {
		h.countDrop(dropBadLength) // no descriptor is this long
		return
	}
	data := hd[rawHeader:]
	if rest := int(x.total - x.at); len(data) > rest {
		// Padding: a frame shorter than Ethernet's 60 bytes (an
		// acknowledgement: 42) arrives padded from a wire (IEEE 802.3
		// §4.2.8); the header says where the message ends.
		data = data[:rest]
	}
	v.fragment(x, data)
}

func (h *RawHost) failAll(err error) {
	h.mu.Lock()
	vis := make([]*RawVI, 0, len(h.vis))
	for _, v := range h.vis {
		vis = append(vis, v)
	}
	h.mu.Unlock()
	for _, v := range vis {
		v.fail(err)
	}
	if h.poll != nil {
		h.poll.wakeSleeper()
	}
}

// NewConn makes a SOVIA connection over a VI, posting its receive
// descriptors. Both ends must be made, with the same protocol settings,
// before either writes.
func NewConn(vi VI, p Params) (*Conn, error) { return newConn(vi, p) }
