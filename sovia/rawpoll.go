//go:build linux

package sovia

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The single-threaded data path (the SOVIA paper's SOVIA_SINGLE, §4.1):
// on a host with a socket of its own, no goroutine is set aside to
// receive. The goroutine that waits for a completion of any of the host's
// VIs (a Read, a Write waiting for a window slot, a close exchange)
// receives the socket's frames itself from its receive ring (rxRing), a
// batch at a time, and hands each to the VI it names; it sleeps in Go's
// network poller only when the socket is empty, after an optional
// busy-poll. One goroutine receives at a time (poller.mu). Others wait on their VI's event
// channel, which the receiving goroutine closes when it completes one of
// their messages; when it stops receiving and someone waits, it hands the
// socket on (turn). So whoever waits drives the input, two goroutines
// waiting both progress, and none sleeps while a frame waits.
//
// When no one waits for a while (idleSweep), a goroutine of the host
// takes the socket until the next waiter comes, so that connection
// requests, acknowledgements and retransmissions of idle VIs are
// answered (the paper's connection and close threads). A waiter that
// finds it receiving makes it stop (preempt) and receives itself.

// pollLink is a Link whose frames the host's goroutines receive
// themselves.
type pollLink interface {
	Link
	// receive hands every frame queued now, up to a batch, to in without
	// waiting; it returns how many there were.
	receive(in func([]byte)) (int, error)
	// sleep waits until a frame is queued or wake is called; it
	// returns at once when one is queued already.
	sleep() error
	wake()
}

// idleSweep is how long the host's own goroutine leaves the socket to
// the application's goroutines before it receives in their place. It is
// not a protocol timer: it bounds how late a frame for a VI no one waits
// on is taken from the socket.
const idleSweep = 2 * time.Millisecond

// poller is the state of a host whose link is a pollLink.
type poller struct {
	link     pollLink
	mu       sync.Mutex    // held by the goroutine receiving
	waiters  atomic.Int32  // goroutines waiting for the socket
	turn     chan struct{} // the socket is free and someone waits
	sleeping atomic.Bool   // the receiver sleeps
	bg       atomic.Bool   // the receiver is the host's own goroutine
	preempt  atomic.Bool   // a waiter wants the socket from it
	polls    atomic.Uint64 // receive passes by the application's goroutines
	stop     atomic.Bool
	done     chan struct{} // the host's goroutine ended

	// busyPoll is how long a receiver spins on the empty socket before
	// it sleeps (0: not at all), in nanoseconds.
	busyPoll atomic.Int64
}

// SetBusyPoll makes a goroutine that finds the socket empty try again for
// up to d before it sleeps: lower latency for a core spent
// spinning (0, the default, never spins). It may be called while the
// host serves, and takes effect at a goroutine's next wait. It has no
// effect on a host whose frames come through Input. It changes only how
// long a goroutine spins, not how the host waits, which
// HostOptions.BusyPoll chooses at open: a host that will spin is better
// opened to spin.
func (h *RawHost) SetBusyPoll(d time.Duration) {
	if h.poll != nil {
		h.poll.busyPoll.Store(int64(max(d, 0)))
	}
}

// block waits for ev or stop, receiving the host's frames meanwhile when
// no other goroutine does.
func (v *RawVI) block(ev, stop <-chan struct{}) {
	p := v.host.poll
	if p == nil {
		v.queues.block(ev, stop) // frames come through Input
		return
	}
	done := func() bool {
		select {
		case <-ev:
			return true
		case <-stop:
			return true
		default:
			return false
		}
	}
	for {
		p.waiters.Add(1)
		if p.mu.TryLock() {
			p.waiters.Add(-1)
			v.host.drive(done, false)
			p.release()
			return
		}
		if p.bg.Load() {
			p.preempt.Store(true)
			p.wakeSleeper()
		}
		select {
		case <-ev:
		case <-stop:
		case <-p.turn:
			p.waiters.Add(-1)
			continue // the socket is free: take it
		}
		p.waiters.Add(-1)
		return
	}
}

// wake makes the goroutine sleeping look at its stop channel again.
func (v *RawVI) wake() {
	if p := v.host.poll; p != nil {
		p.wakeSleeper()
	}
}

func (p *poller) wakeSleeper() {
	if p.sleeping.Load() {
		p.link.wake()
	}
}

// release gives the socket up, to a waiter if there is one.
func (p *poller) release() {
	p.mu.Unlock()
	if p.waiters.Load() > 0 {
		select {
		case p.turn <- struct{}{}:
		default:
		}
	}
}

// drive receives frames until done (p.mu held). A receiver that is not
// busy-polling goes to sleep first: the link's sleep looks at the socket
// before it waits, so a wait costs two receive calls (the empty one and
// the one that takes the frame), as a TCP socket's read does, and not a
// third one before it.
func (h *RawHost) drive(done func() bool, bg bool) {
	p := h.poll
	busyPoll := time.Duration(p.busyPoll.Load())
	var spun time.Time           // when the socket was first found empty, while spinning
	empty := bg || busyPoll == 0 // sleep before receiving
	for !p.stop.Load() {
		if empty && busyPoll > 0 && !bg {
			if spun.IsZero() {
				spun = time.Now()
				h.flushAcks() // nothing more is coming now, as before a sleep
			}
			empty = time.Since(spun) >= busyPoll
		}
		if empty {
			spun = time.Time{}
			h.flushAcks() // what no frame carried: nothing more is coming now
			p.sleeping.Store(true)
			if done() || p.stop.Load() {
				p.sleeping.Store(false)
				return
			}
			err := p.link.sleep()
			p.sleeping.Store(false)
			if err != nil {
				h.failAll(fmt.Errorf("sovia: waiting for frames: %w", err))
				return
			}
		}
		if !bg {
			p.polls.Add(1)
		}
		n, err := p.link.receive(h.input)
		if err != nil {
			h.failAll(fmt.Errorf("sovia: receiving: %w", err))
			return
		}
		if done() {
			return
		}
		if empty = n == 0; !empty {
			spun = time.Time{}
		}
	}
}

// background is the host's own goroutine: it receives while no
// application goroutine has for idleSweep. While they receive, it looks
// less and less often, every AckDelay at most, and sends the
// acknowledgements owed (owes): a timer that fires every 2 ms in a
// process makes its goroutines' wake-ups slower (a ping-pong's one-way
// latency went from 10 to 14 us here).
func (h *RawHost) background() {
	p := h.poll
	defer close(p.done)
	period := idleSweep
	for !p.stop.Load() {
		seen := p.polls.Load()
		time.Sleep(period)
		h.flushAcks()
		if p.polls.Load() != seen || !p.mu.TryLock() {
			period = min(2*period, max(idleSweep, h.rel.AckDelay))
			continue
		}
		period = idleSweep
		p.bg.Store(true)
		h.drive(func() bool { return p.preempt.Swap(false) }, true)
		p.bg.Store(false)
		p.release()
	}
}

// packetLink is a raw packet socket of the host's own, bound to the VI
// EtherType on one interface, non-blocking, waited on in Go's network
// poller (directly, or through an epoll instance of the host's: openOn),
// that receives; and a second one, which receives nothing, that sends.
type packetLink struct {
	fd, mtu  int
	txfd     int      // the socket frames are sent on (sendSocket)
	epfd     int      // a host that spins: an epoll instance watching fd while a goroutine sleeps (watch); -1 otherwise
	file     *os.File // fd, or epfd, in Go's network poller, for sleep
	rc       syscall.RawConn
	woken    atomic.Bool // wake was called since the last sleep
	deadline atomic.Bool // wake set the file's deadline: sleep clears it
	closed   atomic.Bool

	ring *rxRing // the receive ring the kernel copies frames into

	to     syscall.RawSockaddrLinklayer // where frames are sent: the interface
	txIov  []syscall.Iovec
	txMsgs []mmsghdr

	bulkfd    int                          // the socket bulk datagrams are sent on (PACKET_VNET_HDR); -1: none
	bulkTo    syscall.RawSockaddrLinklayer // where they are sent: the interface, as IPv4
	bulkHeads []byte
	bulkIov   []syscall.Iovec
	bulkMsgs  []mmsghdr

	counts struct {
		in, sent, sendErrors  atomic.Uint64
		bulkSent, bulkRefused atomic.Uint64
		mu                    sync.Mutex // held to read the kernel's drops, and by closeFDs
		dropped               uint64     // the kernel's drops (PACKET_STATISTICS) read so far
		fdClosed              bool
	}
}

// LinkCounts are the counters of a host's own socket (OpenHost): what
// `dragonc run` reports of its VIs.
type LinkCounts struct {
	Received   uint64 // frames the socket took (every VI's, and setup's)
	Sent       uint64 // frames sent
	SendErrors uint64 // frames the socket refused (the VI reports the error)
	Dropped    uint64 // frames the kernel dropped for want of room in the socket's receive ring (PACKET_STATISTICS' tp_drops)
	Oversize   uint64 // frames longer than a slot of the ring (the MTU, a VLAN tag allowed) that a socket not taking bulk datagrams cut, or that could not be read whole: dropped
	// NoRoom is the frames longer than a slot (bulk datagrams) that the
	// socket had no room to queue whole, its buffer (wholeBuffer) full
	// of others not yet read: dropped, as a lost frame is.
	NoRoom uint64
	// BulkSent is the bulk datagrams sent (bulk.go), each counted in
	// Sent as the frames the link cuts it into; BulkReceived those that
	// arrived whole, each counted in Received as one.
	BulkSent, BulkReceived uint64
	// BulkRefused is the bulk datagrams the kernel refused (their
	// messages and the host's next went as frames).
	BulkRefused uint64
	// BulkAbandoned is the VIs that gave bulk datagrams up, none of
	// theirs acknowledged (something on the way drops them), and send
	// frames.
	BulkAbandoned uint64
}

// LinkCounts reads the counters of the host's own socket; they stay
// readable after Close. A host on a Link of the caller's (NewHost) has
// none: they are zero.
func (h *RawHost) LinkCounts() LinkCounts {
	l, ok := h.link.(*packetLink)
	if !ok {
		return LinkCounts{BulkAbandoned: h.bulkAbandoned.Load()}
	}
	return LinkCounts{Received: l.counts.in.Load(), Sent: l.counts.sent.Load(), SendErrors: l.counts.sendErrors.Load(), Dropped: l.kernelDrops(), Oversize: l.ring.cut.Load(), NoRoom: l.ring.noRoom.Load(),
		BulkSent: l.counts.bulkSent.Load(), BulkReceived: l.ring.whole.Load(), BulkRefused: l.counts.bulkRefused.Load(), BulkAbandoned: h.bulkAbandoned.Load()}
}

// kernelDrops adds the kernel's drops since the last reading (reading
// PACKET_STATISTICS resets them, af_packet.c packet_getsockopt) to those
// read before.
func (l *packetLink) kernelDrops() uint64 {
	l.counts.mu.Lock()
	defer l.counts.mu.Unlock()
	if !l.counts.fdClosed {
		var st struct{ packets, drops uint32 } // struct tpacket_stats (linux/if_packet.h)
		size := uint32(unsafe.Sizeof(st))
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(l.fd), syscall.SOL_PACKET, syscall.PACKET_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0)
		if e == 0 {
			l.counts.dropped += uint64(st.drops)
		}
	}
	return l.counts.dropped
}

// mmsghdr is struct mmsghdr (sendmmsg(2)).
type mmsghdr struct {
	hdr syscall.Msghdr
	len uint32
	_   [4]byte
}

// rxBatch is how many frames receive hands on in one pass, between two
// looks at whether the goroutine receiving has what it waits for.
const rxBatch = 32

// The packet socket interface's ring (include/uapi/linux/if_packet.h).
const (
	packetVersion = 10 // PACKET_VERSION
	packetRxRing  = 5  // PACKET_RX_RING
	tpacketV2     = 1
	tpStatusUser  = 1 << 0 // TP_STATUS_USER: the slot holds a frame for user space
	tpStatusCopy  = 1 << 1 // TP_STATUS_COPY: the frame was cut to the slot
	// tpacket2Mac is where the kernel puts a frame's Ethernet header in
	// a slot of a SOCK_RAW socket without tp_reserve: TPACKET_ALIGN(
	// TPACKET2_HDRLEN (32-byte header and a 20-byte sockaddr_ll) + 16)
	// less the 14-byte header (af_packet.c, tpacket_rcv: netoff, macoff).
	tpacket2Mac = 80 - 14
	// ringBytes is about how much memory a host's ring takes (the
	// kernel allocates it at once, packet_set_ring): at MTU 1500, 5,248
	// frames, seven windows of 32 chunks of 32 KiB (23 frames each) in
	// flight, for the host's VIs together; at MTU 9000, 896 frames. The
	// socket's buffer it replaces, 32 MiB, held about 14,000 such frames
	// (each charged with its socket buffer's overhead).
	ringBytes = 8 << 20
)

// rxRing is a TPACKET_V2 receive ring (Documentation/networking/
// packet_mmap.rst): the kernel copies each frame into the next free slot
// as it arrives (tpacket_rcv, in the softirq that received it) and marks
// it TP_STATUS_USER; the receiver hands it on and gives the slot back
// with TP_STATUS_KERNEL. No system call is made per frame or per batch:
// a look at the socket is a look at the next slot's status word. With
// recvmmsg(2), each frame cost a struct msghdr copied in and its length
// and address copied out, and 2.5 calls a 23-frame message (measured
// here: 17% of both processes' time in an echoed stream of 32 KiB
// messages).
//
// A bulk datagram longer than a slot (bulk.go) is also queued whole on
// the socket when the ring's socket has PACKET_COPY_THRESH set, its slot
// marked TP_STATUS_COPY (tpacket_rcv), and is read from there with
// recvfrom(2), in the ring's order.
type rxRing struct {
	mem                   []byte
	frameSize, blockSize  int
	perBlock, frames, pos int
	cut                   atomic.Uint64 // frames longer than a slot, dropped
	whole                 atomic.Uint64 // frames longer than a slot, read whole from the socket
	noRoom                atomic.Uint64 // frames longer than a slot the socket had no room to queue whole, dropped

	fd  int    // the socket, for the frames queued whole; -1: none
	big []byte // where they are read to

	// raw: the host spins, and its system calls that cannot block, on
	// every socket of the host, are raw (call).
	raw bool
}

// newRxRing sets up and maps the receive ring of packet socket fd, which
// must not be bound yet (or the frames that came before would wait in the
// socket's queue, which no one reads), for frames of up to mtu bytes
// after the Ethernet header (and a VLAN tag).
func newRxRing(fd, mtu int) (*rxRing, error) {
	r := &rxRing{fd: -1}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_PACKET, packetVersion, tpacketV2); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION TPACKET_V2: %w", err)
	}
	r.frameSize = (tpacket2Mac + 14 + mtu + 4 + 15) &^ 15 // TPACKET_ALIGNMENT
	page := syscall.Getpagesize()
	r.blockSize = max(1<<16, (r.frameSize+page-1)/page*page)
	r.perBlock = r.blockSize / r.frameSize
	blocks := max(4, ringBytes/r.blockSize)
	r.frames = r.perBlock * blocks
	req := struct{ blockSize, blockNr, frameSize, frameNr uint32 }{uint32(r.blockSize), uint32(blocks), uint32(r.frameSize), uint32(r.frames)} // struct tpacket_req
	if _, _, e := syscall.Syscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), syscall.SOL_PACKET, packetRxRing, uintptr(unsafe.Pointer(&req)), unsafe.Sizeof(req), 0); e != 0 {
		return nil, fmt.Errorf("PACKET_RX_RING (%d slots of %d bytes): %w", r.frames, r.frameSize, e)
	}
	mem, err := syscall.Mmap(fd, 0, r.blockSize*blocks, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mapping the receive ring: %w", err)
	}
	r.mem = mem
	return r, nil
}

// call makes a system call on one of the host's sockets that cannot
// block (MSG_DONTWAIT, or a non-blocking socket). A host that spins
// makes it raw, as run's data plane makes its own: entering the
// scheduler's system-call state for each send kept Go's sysmon thread in
// its 20 µs polling (retake, runtime/proc.go), and in 100,000 ping-pongs
// with both ends spinning here the raw calls took sysmon's sleeps from
// 7,832 to 1,632 and the context switches from 22,354 to 8,306, each a
// thread on a core the spinners need. A host that sleeps at once makes
// ordinary calls (HostOptions.BusyPoll says why).
//
// The pointers its callers convert to uintptr in its argument list are
// kept alive, and on the heap, until the call returns (go:uintptrescapes,
// as package syscall's own functions have them): a plain Go function that
// passes its arguments on to syscall.Syscall6 has no such guarantee
// (unsafe.Pointer's rule 4).
//
//go:uintptrescapes
func (r *rxRing) call(trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, uintptr, syscall.Errno) {
	if r.raw {
		return syscall.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
	}
	return syscall.Syscall6(trap, a1, a2, a3, a4, a5, a6)
}

// slot is slot i of the ring; a slot never straddles two blocks.
func (r *rxRing) slot(i int) []byte {
	at := i/r.perBlock*r.blockSize + i%r.perBlock*r.frameSize
	return r.mem[at : at+r.frameSize]
}

// status is slot i's status word (tp_status, the first of struct
// tpacket2_hdr), which the kernel and the receiver hand back and forth.
func (r *rxRing) status(i int) *uint32 { return (*uint32)(unsafe.Pointer(&r.slot(i)[0])) }

// ready reports whether the next slot holds a frame.
func (r *rxRing) ready() bool { return atomic.LoadUint32(r.status(r.pos))&tpStatusUser != 0 }

// take hands the frames of up to max ready slots to in, each slot given
// back to the kernel once in returns (Input keeps nothing of a frame);
// it returns how many slots it took.
func (r *rxRing) take(in func([]byte), max int) int {
	n := 0
	for ; n < max; n++ {
		st := r.status(r.pos)
		v := atomic.LoadUint32(st)
		if v&tpStatusUser == 0 {
			break
		}
		h := r.slot(r.pos)
		// struct tpacket2_hdr: tp_status, tp_len, tp_snaplen (bytes 0, 4,
		// 8), tp_mac (12).
		length, snap := int(binary.NativeEndian.Uint32(h[4:])), int(binary.NativeEndian.Uint32(h[8:]))
		mac := int(binary.NativeEndian.Uint16(h[12:]))
		switch {
		case v&tpStatusCopy != 0 && r.fd >= 0:
			r.takeWhole(in)
		case snap != length && r.fd >= 0:
			// Cut to the slot and not queued whole: the socket's
			// buffer was full (tpacket_rcv queues a copy only
			// while sk_rmem_alloc is below sk_rcvbuf).
			r.noRoom.Add(1)
		case v&tpStatusCopy != 0 || snap != length || mac+snap > len(h):
			// Cut to the slot: longer than the interface's MTU, so
			// no VI sent it as a frame. Its bytes cannot all be
			// placed (a message would never complete), so it is
			// dropped.
			r.cut.Add(1)
		default:
			in(h[mac : mac+snap])
		}
		atomic.StoreUint32(st, 0) // TP_STATUS_KERNEL
		r.pos = (r.pos + 1) % r.frames
	}
	return n
}

// takeWhole reads the frame the kernel queued whole on the socket for
// the slot at hand (TP_STATUS_COPY) and hands it to in; one longer than
// the largest bulk datagram, or a read that fails, is counted as cut.
// (Where the socket's buffer has no room for a frame, the kernel queues
// nothing and leaves the slot without TP_STATUS_COPY: take counts it.)
func (r *rxRing) takeWhole(in func([]byte)) {
	if r.big == nil {
		r.big = make([]byte, 14+4+1<<16) // an IPv4 datagram, behind a VLAN tag
	}
	n, _, e := r.call(syscall.SYS_RECVFROM, uintptr(r.fd), uintptr(unsafe.Pointer(&r.big[0])), uintptr(len(r.big)), syscall.MSG_DONTWAIT|syscall.MSG_TRUNC, 0, 0)
	if e != 0 || int(n) > len(r.big) {
		r.cut.Add(1)
		return
	}
	r.whole.Add(1)
	in(r.big[:n])
}

// packetIgnoreOutgoing is PACKET_IGNORE_OUTGOING (linux/if_packet.h,
// Linux 4.20): the socket does not see the frames the host sends.
const packetIgnoreOutgoing = 23

// OpenHost opens the software VIs of interface ifname on a raw socket of
// their own, as the host whose Ethernet address is the interface's. It
// needs CAP_NET_RAW.
func OpenHost(ifname string) (*RawHost, error) {
	return OpenHostWith(ifname, nil, HostOptions{})
}

// OpenHostAs is OpenHost for a host whose Ethernet address is mac, which
// need not be the interface's: `dragonc run` serves the VIs of a stack
// whose interface declares its own MAC. The socket sees the frames sent
// to mac when the interface delivers them (a veth does; a NIC's filter
// may need promiscuous mode). It needs CAP_NET_RAW.
func OpenHostAs(ifname string, mac net.HardwareAddr) (*RawHost, error) {
	return OpenHostWith(ifname, mac, HostOptions{})
}

// HostOptions change how OpenHostWith opens a host.
type HostOptions struct {
	// BusyPoll is how long the host's receivers try the empty socket
	// before they sleep, as SetBusyPoll sets it (0: they sleep at once).
	// It also chooses how the host waits, for the host's life. A host
	// that spins has an epoll instance of its own that watches the
	// socket only while a receiver sleeps, so that frames a spinning
	// receiver takes wake no idle thread of Go's poller, and it makes its
	// system calls that cannot block raw (rxRing.call). A host that
	// sleeps at once keeps its socket in the poller and makes ordinary
	// calls: with either change, two such hosts answering each other
	// took 15-25 µs one way here against 10-13. Our reading, not
	// measured: with fewer wake-ups the idle cores of this virtual
	// machine halt for longer (its cpuidle driver, haltpoll, polls
	// longer after frequent wake-ups), and a halted core wakes slowly.
	BusyPoll time.Duration
	// NoBulkReceive: the host does not take bulk datagrams (bulk.go),
	// and does not offer to: its socket is bound to the VI EtherType
	// alone, and its peers send it frames (for an interface where
	// something before the socket takes IPv4 frames to 224.0.0.0).
	NoBulkReceive bool
	// NoBulkSend: the host sends a message as frames even to a peer
	// that takes bulk datagrams (to compare the two).
	NoBulkSend bool
}

// OpenHostWith is OpenHostAs with options; a nil mac is the interface's
// address, as OpenHost has it.
func OpenHostWith(ifname string, mac net.HardwareAddr, o HostOptions) (*RawHost, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	if mac == nil {
		if len(ifc.HardwareAddr) != 6 {
			return nil, fmt.Errorf("sovia: %s has no Ethernet address", ifname)
		}
		mac = ifc.HardwareAddr
	}
	return openOn(ifc, mac, o)
}

// openOn opens the host of address mac on a raw socket on ifc (NewHost
// checks the address).
func openOn(ifc *net.Interface, mac net.HardwareAddr, o HostOptions) (*RawHost, error) {
	ifname := ifc.Name
	proto := htons(EtherType)
	// Protocol 0 until the ring is mapped: the socket takes no frame
	// before it is bound (packet(7)).
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("sovia: a raw socket on %s: %w", ifname, err)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_PACKET, packetIgnoreOutgoing, 1) // an optimisation: Input ignores them anyway
	fail := func(err error) (*RawHost, error) {
		syscall.Close(fd)
		return nil, err
	}
	bulkIn := !o.NoBulkReceive
	if bulkIn {
		// Every protocol (bulk datagrams are IPv4), behind a filter
		// that lets through the VI's frames and bulk datagrams alone,
		// attached before the bind so that no other frame gets in.
		if err := attachBulkFilter(fd); err != nil {
			return fail(fmt.Errorf("sovia: the socket filter on %s: %w", ifname, err))
		}
		proto = htons(syscall.ETH_P_ALL)
	}
	// A window of messages in flight fits the ring several times: a
	// dropped frame costs a retransmission.
	ring, err := newRxRing(fd, ifc.MTU)
	if err != nil {
		return fail(fmt.Errorf("sovia: the receive ring on %s: %w", ifname, err))
	}
	failRing := func(err error) (*RawHost, error) {
		syscall.Munmap(ring.mem)
		return fail(err)
	}
	if bulkIn {
		if err := wholeFrames(fd); err != nil {
			return failRing(fmt.Errorf("sovia: %s: %w", ifname, err))
		}
		ring.fd = fd
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: proto, Ifindex: ifc.Index}); err != nil {
		return failRing(err)
	}
	txfd, err := sendSocket(ifc.Index)
	if err != nil {
		return failRing(fmt.Errorf("sovia: a raw socket on %s to send: %w", ifname, err))
	}
	l := &packetLink{fd: fd, txfd: txfd, epfd: -1, bulkfd: -1, mtu: ifc.MTU, ring: ring}
	if !o.NoBulkSend {
		l.bulkfd = bulkSocket(ifc.Index) // -1 where the kernel has no PACKET_VNET_HDR: frames
	}
	l.bulkTo = syscall.RawSockaddrLinklayer{Family: syscall.AF_PACKET, Protocol: htons(etherTypeIPv4), Ifindex: int32(ifc.Index), Halen: 6}
	// The socket sleeps in Go's network poller, as a TCP socket does,
	// so that the goroutine waking from it finds a processor as a TCP
	// reader would; the fd stays non-blocking (os.NewFile sees it is).
	// A host that spins waits through an epoll instance of its own
	// instead (a file the poller waits on like any other), which
	// watches the socket only while a goroutine sleeps (watch).
	// Registered with the poller itself, the socket would wake the
	// poller's idle thread for frames that a spinning goroutine takes
	// anyway, each wake-up a thread on a core the spinners need. In
	// 100,000 ping-pongs with both ends spinning here, this and
	// RawSyscall sends (rxRing.call) took the epoll_pwait calls from
	// 39,089 to 2,748, the context switches from 53,324 to 6,122, and
	// that run's p99 from 37-67 µs to 15. (HostOptions.BusyPoll says why a
	// host that sleeps at once does without them.)
	ring.raw = o.BusyPoll > 0
	if o.BusyPoll <= 0 {
		l.file = os.NewFile(uintptr(fd), "sovia-"+ifname)
	} else if l.file, err = nestedPoll(l, ifname); err != nil {
		syscall.Close(txfd)
		if l.bulkfd >= 0 {
			syscall.Close(l.bulkfd)
		}
		return failRing(err)
	}
	if l.rc, err = l.file.SyscallConn(); err != nil {
		l.closeFDs()
		return nil, err
	}
	l.to = syscall.RawSockaddrLinklayer{Family: syscall.AF_PACKET, Protocol: proto, Ifindex: int32(ifc.Index), Halen: 6}
	h, err := NewHost(l, mac)
	if err != nil {
		l.closeFDs()
		return nil, err
	}
	h.bulkOut = l.bulkfd >= 0
	if bulkIn {
		h.offer = flagBulk
	}
	h.poll = &poller{link: l, turn: make(chan struct{}, 1), done: make(chan struct{})}
	h.SetBusyPoll(o.BusyPoll)
	go h.background()
	return h, nil
}

func (l *packetLink) MTU() int { return l.mtu }

// sendSocket opens the packet socket a host sends on: bound to the
// interface with protocol 0, so that it receives nothing (packet(7)), and
// outside Go's network poller. Frames sent on the socket that receives
// would wake the poller once each: the kernel frees a frame's buffer
// when the peer took it (sock_wfree) and tells the socket's waiters that
// there is room to write (sock_def_write_space), and the poller waits
// for writing too (it registers a file for EPOLLOUT as for EPOLLIN). A
// socket nothing waits on is told to no one. Non-blocking: a full queue
// is waited out (sendGather).
func sendSocket(ifindex int) (int, error) {
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: 0, Ifindex: ifindex}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// waitRoom waits for room in a socket's full transmit queue.
func waitRoom() { time.Sleep(10 * time.Microsecond) }

// closeFDs closes the socket, its drops read a last time.
func (l *packetLink) closeFDs() {
	l.kernelDrops()
	l.counts.mu.Lock()
	defer l.counts.mu.Unlock()
	l.counts.fdClosed = true
	l.file.Close()
	if l.epfd >= 0 {
		syscall.Close(l.fd) // the file is the epoll instance
	}
	syscall.Close(l.txfd)
	if l.bulkfd >= 0 {
		syscall.Close(l.bulkfd)
	}
	if l.ring.mem != nil {
		syscall.Munmap(l.ring.mem)
		l.ring.mem = nil
	}
}

// Close marks the link closed; the host closes the sockets once no
// goroutine receives (closeLink).
func (l *packetLink) Close() error {
	l.closed.Store(true)
	return nil
}

// SendFrame sends one frame with sendto(2) to the interface's address,
// made once (the socket is bound to the interface, and a packet socket
// sends the frame as given, its Ethernet header naming the destination).
// It waits while the socket's queue is full.
func (l *packetLink) SendFrame(f []byte) error {
	for {
		if l.closed.Load() {
			return errors.New("sovia: the link is closed")
		}
		_, _, e := l.ring.call(syscall.SYS_SENDTO, uintptr(l.txfd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)), 0, uintptr(unsafe.Pointer(&l.to)), unsafe.Sizeof(l.to))
		switch e {
		case 0:
			l.counts.sent.Add(1)
			return nil
		case syscall.ENOBUFS, syscall.EAGAIN, syscall.EINTR:
			waitRoom()
		default:
			l.counts.sendErrors.Add(1)
			return e
		}
	}
}

// sendGather sends frames with one sendmmsg(2), frame i gathered from
// hdrs[i] and parts[i] (the socket is bound to the interface; each frame
// names its destination in its Ethernet header, and a packet socket sends
// what it is given). It waits while the socket's queue is full.
func (l *packetLink) sendGather(hdrs, parts [][]byte) error {
	for len(l.txMsgs) < len(hdrs) {
		l.txIov = append(l.txIov, syscall.Iovec{}, syscall.Iovec{})
		l.txMsgs = append(l.txMsgs, mmsghdr{})
	}
	for i, h := range hdrs {
		iov := l.txIov[2*i : 2*i+2]
		iov[0] = syscall.Iovec{Base: &h[0], Len: uint64(len(h))}
		n := 1
		if d := parts[i]; len(d) > 0 {
			iov[1] = syscall.Iovec{Base: &d[0], Len: uint64(len(d))}
			n = 2
		}
		l.txMsgs[i] = mmsghdr{hdr: syscall.Msghdr{Name: (*byte)(unsafe.Pointer(&l.to)), Namelen: uint32(unsafe.Sizeof(l.to)), Iov: &iov[0], Iovlen: uint64(n)}}
	}
	for sent := 0; sent < len(hdrs); {
		if l.closed.Load() {
			return errors.New("sovia: the link is closed")
		}
		r, _, e := l.ring.call(sysSendmmsg, uintptr(l.txfd), uintptr(unsafe.Pointer(&l.txMsgs[sent])), uintptr(len(hdrs)-sent), 0, 0, 0)
		switch e {
		case 0:
			sent += int(r)
			l.counts.sent.Add(uint64(r))
		case syscall.ENOBUFS, syscall.EAGAIN, syscall.EINTR:
			waitRoom()
		default:
			l.counts.sendErrors.Add(uint64(len(hdrs) - sent))
			return e
		}
	}
	return nil
}

// receive hands on up to a batch of the frames in the ring, without
// waiting.
func (l *packetLink) receive(in func([]byte)) (int, error) {
	n := l.ring.take(in, rxBatch)
	if n > 0 {
		l.counts.in.Add(uint64(n))
	}
	return n, nil
}

// sleep waits in Go's network poller until the ring has a frame or wake
// was called. The kernel tells the socket's waiters of every frame it
// puts in the ring (tpacket_rcv), and the poller's look at the socket is
// a look at the next slot. A host with an epoll instance of its own has
// the socket watched for the sleep alone (watch).
func (l *packetLink) sleep() error {
	if l.deadline.Swap(false) {
		l.file.SetReadDeadline(time.Time{})
	}
	if l.woken.Swap(false) {
		return nil
	}
	if err := l.watch(syscall.EPOLLIN); err != nil {
		return err
	}
	err := l.rc.Read(func(uintptr) bool { return l.woken.Load() || l.ring.ready() })
	l.woken.Store(false)
	if werr := l.watch(0); werr != nil && err == nil {
		err = werr
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return nil
}

// nestedPoll makes the epoll instance a host that spins waits through
// (openOn), the socket in it unwatched, and returns it as a file for Go's
// poller.
func nestedPoll(l *packetLink, ifname string) (*os.File, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sovia: an epoll instance for %s: %w", ifname, err)
	}
	err = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.fd, &syscall.EpollEvent{Fd: int32(l.fd)}) // no events: unwatched
	if err == nil {
		err = syscall.SetNonblock(epfd, true) // os.NewFile puts a non-blocking file in the poller
	}
	if err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("sovia: an epoll instance for %s: %w", ifname, err)
	}
	l.epfd = epfd
	return os.NewFile(uintptr(epfd), "sovia-"+ifname), nil
}

// watch sets what the host's epoll instance, if it has one, waits for on
// the socket: EPOLLIN while a goroutine sleeps, nothing otherwise. sleep
// arms it before it looks at the ring (rc.Read's look), so no frame is
// missed: one queued before the arm is in the ring when it looks (the
// kernel marks the slot before it tells the socket's waiters,
// tpacket_rcv), and one queued after it tells the instance's waiters, Go's
// poller, every time (ep_poll_callback in fs/eventpoll.c). The arm's own
// look at the socket (ep_modify) tells the poller of a frame queued
// already only when the socket is not still on the instance's ready list
// from an earlier sleep, so sleep does not count on it.
func (l *packetLink) watch(events uint32) error {
	if l.epfd < 0 {
		return nil
	}
	ev := syscall.EpollEvent{Events: events, Fd: int32(l.fd)}
	_, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_CTL, uintptr(l.epfd), syscall.EPOLL_CTL_MOD, uintptr(l.fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
	if e != 0 {
		return os.NewSyscallError("epoll_ctl", e)
	}
	return nil
}

// wake ends a sleep: a deadline in the past makes the poller return.
// The deadline is set before the flags that make sleep clear it, so a
// deadline is never left behind unnoticed.
func (l *packetLink) wake() {
	l.file.SetReadDeadline(time.Unix(1, 0))
	l.deadline.Store(true)
	l.woken.Store(true)
}

// closeLink stops the receivers and closes the socket once none uses it.
func (h *RawHost) closeLink() error {
	err := h.link.Close()
	p := h.poll
	if p == nil {
		return err
	}
	p.stop.Store(true)
	p.link.wake()
	<-p.done
	p.mu.Lock() // no goroutine receives now, nor will
	if l, ok := p.link.(*packetLink); ok {
		l.closeFDs()
	}
	return err
}
