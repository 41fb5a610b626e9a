//go:build linux

package sovia

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EtherType of the software VI's frames: IEEE 802's "local experimental"
// EtherType 1 (0x88B5), free for protocols that never leave a site.
const EtherType = 0x88B5

// rawHeader is a VI frame's header after the Ethernet header:
// destination VI (2 bytes), source VI (2), message number (4), message
// length (4), this fragment's offset (4), immediate data (4).
const rawHeader = 20

// RawVI is a VI in software over Ethernet, as M-VIA runs VIA over Fast
// Ethernet: a message goes out as frames of its own EtherType, cut to the
// interface's MTU, and is put together again in the receive descriptor
// posted first. A message that finds no descriptor is lost and reported
// (ErrNoDescriptor), as VIA's unreliable delivery does; a frame missing
// from a message breaks the VI.
type RawVI struct {
	queues
	host     *RawHost
	remote   [6]byte
	lvi, rvi uint16
	seq      uint32 // messages sent (under host.sendMu)

	// The message being received (under queues.mu).
	cur     *Region // the descriptor being filled
	curSeq  uint32
	curLen  int
	curGot  int
	curImm  uint32
	skipSeq uint32 // a message that found no descriptor: its fragments go
	skip    bool
	lastSeq uint32 // the last message that began

	heard atomic.Uint64 // frames received: connection setup's idle timeout reads it
}

// RawHost is one interface's end of the software VIs: a link that
// carries its frames (a raw socket of its own, or the data plane of
// `dragonc run`), whose frames go to the VI their header names. VI 0
// carries connection setup (Listen, Dial).
type RawHost struct {
	link  Link
	local [6]byte

	sendMu  sync.Mutex
	sendBuf []byte

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
	return h, nil
}

// packetLink is a raw packet socket of the host's own, bound to the VI
// EtherType on one interface.
type packetLink struct {
	fd, ifindex, mtu int
	closed           atomic.Bool
}

// OpenHost opens the software VIs of interface ifname on a raw socket of
// their own. It needs CAP_NET_RAW.
func OpenHost(ifname string) (*RawHost, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	if len(ifc.HardwareAddr) != 6 {
		return nil, fmt.Errorf("sovia: %s has no Ethernet address", ifname)
	}
	proto := htons(EtherType)
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("sovia: a raw socket on %s: %w", ifname, err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: proto, Ifindex: ifc.Index}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// A window of messages in flight must fit the socket's buffer: a
	// dropped fragment breaks the VI.
	const buffer = 32 << 20
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, buffer); err != nil {
		syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, buffer)
	}
	tv := syscall.NsecToTimeval(int64(50 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	l := &packetLink{fd: fd, ifindex: ifc.Index, mtu: ifc.MTU}
	h, err := NewHost(l, ifc.HardwareAddr)
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	go l.receive(h)
	return h, nil
}

func (l *packetLink) MTU() int { return l.mtu }

// Close stops the receiver, which closes the socket when it notices.
func (l *packetLink) Close() error {
	l.closed.Store(true)
	return nil
}

func (l *packetLink) SendFrame(f []byte) error {
	sa := &syscall.SockaddrLinklayer{Protocol: htons(EtherType), Ifindex: l.ifindex, Halen: 6}
	copy(sa.Addr[:], f[0:6])
	for {
		err := syscall.Sendto(l.fd, f, 0, sa)
		if !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.EAGAIN) {
			return err
		}
		time.Sleep(10 * time.Microsecond) // the queue is full: wait for room
	}
}

func (l *packetLink) receive(h *RawHost) {
	buf := make([]byte, 65536)
	defer syscall.Close(l.fd)
	for !l.closed.Load() {
		n, _, err := syscall.Recvfrom(l.fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			h.failAll(err)
			return
		}
		h.Input(buf[:n])
	}
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
	return h.link.Close()
}

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
	v := &RawVI{host: h, lvi: lvi, rvi: rvi, remote: peer}
	v.init(v)
	h.vis[lvi] = v
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
	v.mu.Lock()
	v.closed = true
	v.cond.Broadcast()
	v.mu.Unlock()
	return nil
}

func (v *RawVI) PostSend(r *Region, off, n int, imm uint32) error {
	if err := v.registered(r); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(r.Buf) {
		return fmt.Errorf("sovia: a send descriptor outside its region")
	}
	h := v.host
	h.sendMu.Lock()
	v.seq++
	var err error
	for at := 0; at < n || at == 0; {
		k := min(h.link.MTU()-rawHeader, n-at)
		err = h.send(v.remote, v.rvi, v.lvi, v.seq, n, at, imm, r.Buf[off+at:off+at+k])
		if err != nil || n == 0 {
			break
		}
		at += k
	}
	h.sendMu.Unlock()
	v.mu.Lock()
	if err != nil && v.err == nil {
		v.err = err
	}
	v.complete(Completion{Region: r})
	v.mu.Unlock()
	return err
}

// send writes one frame (h.sendMu held).
func (h *RawHost) send(to [6]byte, dvi, svi uint16, seq uint32, total, at int, imm uint32, data []byte) error {
	n := 14 + rawHeader + len(data)
	if cap(h.sendBuf) < n {
		h.sendBuf = make([]byte, n)
	}
	f := h.sendBuf[:n]
	copy(f[0:6], to[:])
	copy(f[6:12], h.local[:])
	binary.BigEndian.PutUint16(f[12:], EtherType)
	hd := f[14:]
	binary.BigEndian.PutUint16(hd[0:], dvi)
	binary.BigEndian.PutUint16(hd[2:], svi)
	binary.BigEndian.PutUint32(hd[4:], seq)
	binary.BigEndian.PutUint32(hd[8:], uint32(total))
	binary.BigEndian.PutUint32(hd[12:], uint32(at))
	binary.BigEndian.PutUint32(hd[16:], imm)
	copy(hd[rawHeader:], data)
	return h.link.SendFrame(f)
}

// Input takes one frame the link received: a fragment of a message for
// one of the host's VIs, or connection setup. Other frames, short ones,
// ones to another Ethernet address and ones for VIs that are not open are
// ignored. Input does not keep f.
func (h *RawHost) Input(f []byte) {
	if len(f) < 14+rawHeader || binary.BigEndian.Uint16(f[12:]) != EtherType || [6]byte(f[0:6]) != h.local {
		return // not a VI frame for this host (a promiscuous link shows others')
	}
	hd := f[14:]
	dvi, svi := binary.BigEndian.Uint16(hd[0:]), binary.BigEndian.Uint16(hd[2:])
	if dvi == 0 {
		var from [6]byte
		copy(from[:], f[6:12])
		h.setupFrame(from, svi, hd[rawHeader:])
		return
	}
	h.mu.Lock()
	v := h.vis[dvi]
	ours := v != nil && svi != 0 && svi == v.rvi && [6]byte(f[6:12]) == v.remote // VI 0 sends setup only
	if !ours {
		h.stray(v) // counted (rawsetup.go)
	}
	h.mu.Unlock()
	if !ours {
		return // no such VI, or another VI's or peer's
	}
	v.heard.Add(1)
	total, at := binary.BigEndian.Uint32(hd[8:]), binary.BigEndian.Uint32(hd[12:])
	if total > 1<<30 || at > total {
		return // no descriptor is this long
	}
	data := hd[rawHeader:]
	if rest := int(total - at); len(data) > rest {
		// Padding: a frame shorter than Ethernet's 60 bytes (an
		// acknowledgement: 34) arrives padded from a wire (IEEE 802.3
		// §4.2.8); the header says where the message ends.
		data = data[:rest]
	}
	v.fragment(binary.BigEndian.Uint32(hd[4:]), int(total), int(at), binary.BigEndian.Uint32(hd[16:]), data)
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
}

// fragment puts one frame's piece into the message being received.
func (v *RawVI) fragment(seq uint32, total, at int, imm uint32, data []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.skip && seq == v.skipSeq {
		return
	}
	if at == 0 {
		// Messages are numbered from 1 on each VI: a gap is a message
		// the link lost whole, which would otherwise leave both ends
		// waiting for a window credit that never comes.
		if seq != v.lastSeq+1 && v.err == nil {
			v.err = fmt.Errorf("sovia: message %d arrived after message %d: %d message(s) lost on the link", seq, v.lastSeq, seq-v.lastSeq-1)
			v.cond.Broadcast()
			return
		}
		v.lastSeq = seq
		if v.cur != nil {
			v.err = fmt.Errorf("sovia: message %d began before message %d ended: a frame was lost", seq, v.curSeq)
			v.cond.Broadcast()
			return
		}
		if len(v.posted) == 0 || len(v.posted[0].Buf) < total {
			v.lose(ErrNoDescriptor)
			v.skip, v.skipSeq = true, seq
			return
		}
		v.skip = false
		v.cur, v.posted = v.posted[0], v.posted[1:]
		v.curSeq, v.curLen, v.curGot, v.curImm = seq, total, 0, imm
	}
	if v.cur == nil || seq != v.curSeq || at != v.curGot || at+len(data) > v.curLen {
		if v.err == nil {
			v.err = fmt.Errorf("sovia: a frame of message %d is missing", seq)
		}
		v.cond.Broadcast()
		return
	}
	copy(v.cur.Buf[at:], data)
	v.curGot += len(data)
	if v.curGot == v.curLen {
		v.complete(Completion{Recv: true, Region: v.cur, N: v.curLen, Imm: v.curImm})
		v.cur = nil
	}
}

func (v *RawVI) fail(err error) {
	v.mu.Lock()
	if v.err == nil && !v.closed {
		v.err = err
	}
	v.cond.Broadcast()
	v.mu.Unlock()
}

// NewConn makes a SOVIA connection over a VI, posting its receive
// descriptors. Both ends must be made, with the same protocol settings,
// before either writes.
func NewConn(vi VI, p Params) (*Conn, error) { return newConn(vi, p) }
