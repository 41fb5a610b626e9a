package dataplane

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Linux constants of the packet socket interface (include/uapi/linux/
// if_packet.h, socket.h): only the standard library is used here, so that
// this package can be shipped into a generated module as it is.
const (
	solPacket            = 263
	packetRxRing         = 5
	packetVersion        = 10
	tpacketV2            = 1
	packetFanout         = 18
	packetFanoutEBPF     = 7
	packetFanoutData     = 22
	packetQdiscBypass    = 20
	packetIgnoreOutgoing = 23
	soAttachBPF          = 50
	tpStatusUser         = 1
	tpStatusVLANValid    = 0x10 // tp_vlan_tci holds the tag the kernel took off
	tpStatusVLANTPID     = 0x40 // tp_vlan_tpid holds its TPID
	ethPAll              = 0x0003
)

// packetSocket is one AF_PACKET socket with a TPACKET_V2 receive ring
// (Documentation/networking/packet_mmap.rst): a ring of fixed-size frame
// slots, each with a status word the kernel and user space hand back and
// forth. TPACKET_V3's blocks were tried first: the kernel hands a block
// over only when it is full or its retire timer (1 ms at least) fires, so
// with few frames in flight every frame waits up to a millisecond (64
// outstanding UDP echoes made 62,700 transactions/s, 64 per millisecond).
type packetSocket struct {
	fd     int
	ring   []byte
	frames int
	next   int
	to     syscall.SockaddrLinklayer
	tagged []byte // a frame with its 802.1Q tag put back (see receive)
	// kernel adds up PACKET_STATISTICS, which the kernel clears on each
	// read.
	statsMu sync.Mutex
	kernel  KernelCounts
	// handedOver: another program reads the socket now (quiesce), and
	// its PACKET_STATISTICS are that program's to read.
	handedOver bool
}

// tpacketReq is struct tpacket_req.
type tpacketReq struct {
	blockSize, blockNr, frameSize, frameNr uint32
}

const (
	frameSize  = 2048    // a slot: header and a 1500-byte frame fit
	ringBlock  = 1 << 16 // 32 slots a block
	ringBlocks = 128     // 4,096 slots, 8 MiB
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacket opens one queue's socket on ifindex: outgoing frames
// ignored, the filter program attached, the ring mapped, and the socket
// joined to fanout group group (in queue order: the fanout program's
// answer is the index of the socket in join order).
func openPacket(ifindex, filterFD, group int) (*packetSocket, error) {
	// Protocol 0: the socket takes no frame until it is bound to the
	// interface (with ETH_P_ALL), so none of another interface's frames
	// reach its ring before (packet(7)).
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening an AF_PACKET socket: %w", err)
	}
	s := &packetSocket{fd: fd, frames: ringBlock / frameSize * ringBlocks}
	fail := func(what string, err error) (*packetSocket, error) {
		s.close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := syscall.SetsockoptInt(fd, solPacket, packetVersion, tpacketV2); err != nil {
		return fail("PACKET_VERSION TPACKET_V2", err)
	}
	if err := syscall.SetsockoptInt(fd, solPacket, packetIgnoreOutgoing, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	// Answers go straight to the device's transmit queue, as AF_XDP's
	// do, without the qdisc layer (packet(7), PACKET_QDISC_BYPASS); the
	// socket is one of the host's, not a bridge's.
	if err := syscall.SetsockoptInt(fd, solPacket, packetQdiscBypass, 1); err != nil {
		return fail("PACKET_QDISC_BYPASS", err)
	}
	if filterFD >= 0 {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soAttachBPF, filterFD); err != nil {
			return fail("SO_ATTACH_BPF", err)
		}
	}
	req := tpacketReq{blockSize: ringBlock, blockNr: ringBlocks, frameSize: frameSize, frameNr: uint32(s.frames)}
	if _, _, e := syscall.Syscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), solPacket, packetRxRing, uintptr(unsafe.Pointer(&req)), unsafe.Sizeof(req), 0); e != 0 {
		return fail("PACKET_RX_RING", e)
	}
	if s.ring, err = syscall.Mmap(fd, 0, ringBlock*ringBlocks, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_LOCKED); err != nil {
		if s.ring, err = syscall.Mmap(fd, 0, ringBlock*ringBlocks, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err != nil {
			return fail("mapping the receive ring", err)
		}
	}
	s.to = syscall.SockaddrLinklayer{Protocol: htons(ethPAll), Ifindex: ifindex}
	if err := syscall.Bind(fd, &s.to); err != nil {
		return fail("binding to the interface", err)
	}
	if group >= 0 {
		if err := syscall.SetsockoptInt(fd, solPacket, packetFanout, group|packetFanoutEBPF<<16); err != nil {
			return fail("joining the fanout group", err)
		}
	}
	return s, nil
}

// adoptPacket maps the receive ring of socket h.FD, which another program
// opened, bound, joined to its fanout group and served (HandoverSocket),
// and goes on at the slot it would have read next: the frames that
// arrived meanwhile wait in the slots after it. PACKET_RX_RING is not set
// again (the ring exists; packet_set_ring refuses a mapped one), and a
// second mmap of the socket maps the same ring pages (packet_mmap). The
// socket gets the filter filterFD (SO_ATTACH_BPF replaces the one
// attached: sk_attach_bpf swaps the pointer under RCU, so every frame
// meets one filter or the other).
func adoptPacket(h HandoverSocket, frames, ifindex, filterFD int) (*packetSocket, error) {
	want := ringBlock / frameSize * ringBlocks
	if frames != want {
		return nil, fmt.Errorf("AF_PACKET: the ring handed over has %d slots, not %d", frames, want)
	}
	if h.Next < 0 || h.Next >= frames {
		return nil, fmt.Errorf("AF_PACKET: slot %d handed over is not in a ring of %d", h.Next, frames)
	}
	if v, err := syscall.GetsockoptInt(h.FD, solPacket, packetVersion); err != nil || v != tpacketV2 {
		return nil, fmt.Errorf("AF_PACKET: descriptor %d handed over is no TPACKET_V2 packet socket (version %d, %v)", h.FD, v, err)
	}
	s := &packetSocket{fd: h.FD, frames: frames, next: h.Next}
	s.to = syscall.SockaddrLinklayer{Protocol: htons(ethPAll), Ifindex: ifindex}
	var err error
	if s.ring, err = syscall.Mmap(s.fd, 0, ringBlock*ringBlocks, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err != nil {
		s.fd = -1 // the caller's to close
		return nil, fmt.Errorf("AF_PACKET: mapping the receive ring handed over: %w", err)
	}
	if filterFD >= 0 {
		if err := syscall.SetsockoptInt(s.fd, syscall.SOL_SOCKET, soAttachBPF, filterFD); err != nil {
			s.close()
			return nil, fmt.Errorf("AF_PACKET: SO_ATTACH_BPF on the socket handed over: %w", err)
		}
	}
	return s, nil
}

// quiesce reports the socket as the program that takes it over needs it;
// the loops have stopped. The drops counted so far are this program's;
// what the kernel drops from now on is the handover's.
func (s *packetSocket) quiesce() HandoverSocket {
	s.stats()
	s.statsMu.Lock()
	s.handedOver = true
	s.statsMu.Unlock()
	return HandoverSocket{FD: s.fd, Next: s.next, UMEMFD: -1}
}

// setFanoutProgram gives the fanout group its eBPF program.
func (s *packetSocket) setFanoutProgram(progFD int) error {
	if err := syscall.SetsockoptInt(s.fd, solPacket, packetFanoutData, progFD); err != nil {
		return fmt.Errorf("PACKET_FANOUT_DATA: %w", err)
	}
	return nil
}

func (s *packetSocket) close() {
	s.statsMu.Lock() // stats reads fd
	defer s.statsMu.Unlock()
	if s.ring != nil {
		syscall.Munmap(s.ring)
		s.ring = nil
	}
	if s.fd >= 0 {
		syscall.Close(s.fd)
		s.fd = -1
	}
}

// status is a slot's status word, written by the kernel.
func (s *packetSocket) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.ring[i*frameSize]))
}

// receive hands the frames of the ready slots, up to a ring's worth, to
// fn and returns each slot to the kernel. It reports how many frames it
// handed over; it never waits.
func (s *packetSocket) receive(fn func(frame []byte)) int {
	n := 0
	for ; n < s.frames; n++ {
		st := s.status(s.next)
		if atomic.LoadUint32(st)&tpStatusUser == 0 {
			break
		}
		h := s.ring[s.next*frameSize : (s.next+1)*frameSize]
		snap := int(le32(h[8:]))
		mac := int(uint16(h[12]) | uint16(h[13])<<8)
		if mac+snap <= len(h) {
			fn(s.retag(h, h[mac:mac+snap]))
		}
		atomic.StoreUint32(st, 0) // TP_STATUS_KERNEL
		s.next = (s.next + 1) % s.frames
	}
	return n
}

// ready reports whether the next slot holds a frame.
func (s *packetSocket) ready() bool {
	return atomic.LoadUint32(s.status(s.next))&tpStatusUser != 0
}

func (s *packetSocket) fds() []int { return []int{s.fd} }

// kick polls the device once when busy polling is on (a non-blocking
// receive runs sk_busy_loop; the frames themselves arrive on the ring).
func (s *packetSocket) kick() {
	syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(s.fd), 0, 0, msgDontwait, 0, 0)
}

func (s *packetSocket) setBusyPoll(budget int) error { return setBusyPoll(s.fd, budget) }

// send transmits one frame on the interface.
func (s *packetSocket) send(frame []byte) error {
	return syscall.Sendto(s.fd, frame, 0, &s.to)
}

// txBatch gathers the frames one pass over the ring answers and sends
// them with one sendmmsg(2) (the socket is bound, so no address is
// needed: packet_snd uses the bound device).
type txBatch struct {
	buf  []byte
	used int
	iov  []syscall.Iovec
	msgs []mmsghdr
}

// mmsghdr is struct mmsghdr.
type mmsghdr struct {
	hdr syscall.Msghdr
	len uint32
	_   [4]byte
}

const batchMax = 64

func newTxBatch() *txBatch {
	return &txBatch{buf: make([]byte, batchMax*frameSize), iov: make([]syscall.Iovec, batchMax), msgs: make([]mmsghdr, batchMax)}
}

// add copies a frame into the batch; false when the batch is full.
func (b *txBatch) add(frame []byte) bool {
	i := b.count()
	if i == batchMax || len(frame) > frameSize {
		return false
	}
	at := i * frameSize
	copy(b.buf[at:], frame)
	b.iov[i] = syscall.Iovec{Base: &b.buf[at], Len: uint64(len(frame))}
	b.msgs[i] = mmsghdr{hdr: syscall.Msghdr{Iov: &b.iov[i], Iovlen: 1}}
	b.used++
	return true
}

func (b *txBatch) count() int { return b.used }

// frame is the batch's i'th frame.
func (b *txBatch) frame(i int) []byte {
	return b.buf[i*frameSize : i*frameSize+int(b.iov[i].Len)]
}

// flush sends the batch; it returns the frames sent and the first error.
// It tries without blocking and without telling the scheduler first
// (RawSyscall: a blocking call on a loop's locked thread wakes Go's
// sysmon), and waits for room in the socket's send buffer only when the
// kernel has none.
func (b *txBatch) flush(fd int) (int, error) {
	sent := 0
	for sent < b.used {
		p, n := uintptr(unsafe.Pointer(&b.msgs[sent])), uintptr(b.used-sent)
		r, _, e := syscall.RawSyscall6(sysSendmmsg, uintptr(fd), p, n, msgDontwait, 0, 0)
		if e == syscall.EAGAIN || e == syscall.ENOBUFS {
			r, _, e = syscall.Syscall6(sysSendmmsg, uintptr(fd), p, n, 0, 0, 0)
		}
		if e != 0 {
			if e == syscall.EINTR {
				continue
			}
			n := sent
			b.used = 0
			return n, e
		}
		sent += int(r)
	}
	b.used = 0
	return sent, nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (s *packetSocket) flushBatch(b *txBatch) (int, error) { return b.flush(s.fd) }

// retag returns the frame as it was on the wire. The kernel takes an
// 802.1Q tag off before a packet socket sees the frame
// (__netif_receive_skb_core, skb_vlan_untag) and reports it in the
// TPACKET_V2 header (tp_vlan_tci, tp_vlan_tpid at bytes 24 and 26); the
// generated code must see the tag to decide as the LPG does (a frame of
// another VLAN is not ours; a priority tag is). AF_XDP sees frames before
// that and needs no such step.
func (s *packetSocket) retag(h, frame []byte) []byte {
	status := le32(h[0:])
	if status&tpStatusVLANValid == 0 || len(frame) < 12 {
		return frame
	}
	tpid := uint16(0x8100)
	if status&tpStatusVLANTPID != 0 {
		tpid = uint16(h[26]) | uint16(h[27])<<8
	}
	if s.tagged == nil {
		s.tagged = make([]byte, frameSize+4)
	}
	n := len(frame) + 4
	if n > len(s.tagged) {
		return frame[:0] // cannot happen: a slot holds at most frameSize bytes
	}
	b := s.tagged[:n]
	copy(b, frame[:12])
	b[12], b[13] = byte(tpid>>8), byte(tpid)
	b[14], b[15] = h[25], h[24] // tp_vlan_tci, little-endian in the header
	copy(b[16:], frame[12:])
	return b
}
