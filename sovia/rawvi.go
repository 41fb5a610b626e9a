//go:build linux

package sovia

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
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
	fd            int
	ifindex       int
	mtu           int
	local, remote [6]byte
	lvi, rvi      uint16

	sendMu  sync.Mutex
	sendBuf []byte
	seq     uint32

	// The message being received (under queues.mu).
	cur     *Region // the descriptor being filled
	curSeq  uint32
	curLen  int
	curGot  int
	curImm  uint32
	skipSeq uint32 // a message that found no descriptor: its fragments go
	skip    bool
}

// OpenRaw opens a software VI on interface ifname between local VI number
// lvi and the VI rvi of the host whose MAC is peer. It needs CAP_NET_RAW.
func OpenRaw(ifname string, lvi uint16, peer net.HardwareAddr, rvi uint16) (*RawVI, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	if len(peer) != 6 || len(ifc.HardwareAddr) != 6 {
		return nil, fmt.Errorf("sovia: %s and the peer need Ethernet addresses", ifname)
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
	v := &RawVI{fd: fd, ifindex: ifc.Index, mtu: ifc.MTU, lvi: lvi, rvi: rvi}
	copy(v.local[:], ifc.HardwareAddr)
	copy(v.remote[:], peer)
	v.init(v)
	v.sendBuf = make([]byte, 14+v.mtu)
	go v.receive()
	return v, nil
}

func htons(x uint16) uint16 { return x<<8 | x>>8 }

// Close closes the VI's socket.
func (v *RawVI) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	v.cond.Broadcast()
	v.mu.Unlock()
	return nil // the receiver closes the socket when it notices
}

func (v *RawVI) PostSend(r *Region, off, n int, imm uint32) error {
	if err := v.registered(r); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(r.Buf) {
		return fmt.Errorf("sovia: a send descriptor outside its region")
	}
	v.sendMu.Lock()
	v.seq++
	seq := v.seq
	per := v.mtu - rawHeader
	to := &syscall.SockaddrLinklayer{Protocol: htons(EtherType), Ifindex: v.ifindex, Halen: 6}
	copy(to.Addr[:], v.remote[:])
	var err error
	for at := 0; at < n || at == 0; {
		k := min(per, n-at)
		f := v.sendBuf[:14+rawHeader+k]
		copy(f[0:6], v.remote[:])
		copy(f[6:12], v.local[:])
		binary.BigEndian.PutUint16(f[12:], EtherType)
		h := f[14:]
		binary.BigEndian.PutUint16(h[0:], v.rvi)
		binary.BigEndian.PutUint16(h[2:], v.lvi)
		binary.BigEndian.PutUint32(h[4:], seq)
		binary.BigEndian.PutUint32(h[8:], uint32(n))
		binary.BigEndian.PutUint32(h[12:], uint32(at))
		binary.BigEndian.PutUint32(h[16:], imm)
		copy(h[rawHeader:], r.Buf[off+at:off+at+k])
		for {
			err = syscall.Sendto(v.fd, f, 0, to)
			if !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.EAGAIN) {
				break
			}
			time.Sleep(10 * time.Microsecond) // the queue is full: wait for room
		}
		if err != nil {
			break
		}
		at += k
		if n == 0 {
			break
		}
	}
	v.sendMu.Unlock()
	v.mu.Lock()
	if err != nil && v.err == nil {
		v.err = err
	}
	v.complete(Completion{Region: r})
	v.mu.Unlock()
	return err
}

func (v *RawVI) receive() {
	buf := make([]byte, 65536)
	defer syscall.Close(v.fd)
	for {
		v.mu.Lock()
		closed := v.closed
		v.mu.Unlock()
		if closed {
			return
		}
		n, _, err := syscall.Recvfrom(v.fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			v.fail(err)
			return
		}
		f := buf[:n]
		if n < 14+rawHeader || binary.BigEndian.Uint16(f[12:]) != EtherType {
			continue
		}
		h := f[14:]
		if binary.BigEndian.Uint16(h[0:]) != v.lvi || binary.BigEndian.Uint16(h[2:]) != v.rvi {
			continue // another VI's
		}
		v.fragment(binary.BigEndian.Uint32(h[4:]), int(binary.BigEndian.Uint32(h[8:])), int(binary.BigEndian.Uint32(h[12:])), binary.BigEndian.Uint32(h[16:]), h[rawHeader:])
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
