// Package dataplane serves a compiled stack on a Linux interface: one
// receive loop per plan queue, pinned to the queue's core, runs the
// generated code on every frame and acts on its verdict — delivering to an
// endpoint's handler, answering through the transmit chains the LPG
// spawns, counting drops by the LPG node that decided them.
//
// It uses only the standard library so that `dragonc run` can ship it,
// unchanged, into the module it builds around the generated fallback; Go
// programs import it through package run.
package dataplane

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Verdict kinds, as the generated code numbers them.
const (
	Drop    = 0
	Deliver = 1
	Reply   = 2
	Sink    = 3
)

// Verdict is the generated code's answer for one frame.
type Verdict struct {
	Kind  uint8
	Index uint32
}

// Datagram is a UDP datagram delivered to an endpoint.
type Datagram struct {
	Endpoint     int    // index into Stack.Endpoints
	Queue        int    // the plan queue that received it
	Payload      []byte // valid only during the call
	Src, Dst     [4]byte
	SPort, DPort uint16 // UDP ports; Open-MX: the source and destination endpoints
	// Broadcast is set for a datagram sent to a broadcast address or as a
	// link-layer broadcast. An answer to it goes out from the host's own
	// address, never from the broadcast (RFC 1122 §3.2.1.3).
	Broadcast bool
	OpenMX    bool // an Open-MX message, not a UDP datagram
}

// A Handler serves an endpoint. It returns the payload of a datagram to
// send back to the sender (from the address and port it was sent to), or
// nil. It runs on the queue's receive loop and must not keep Payload.
type Handler func(d *Datagram) []byte

// Echo returns every datagram to its sender (RFC 862 over UDP), except a
// broadcast one, which would make the stack an amplifier for whoever
// forged its source (the "fraggle" attack; Linux's icmp_echo_ignore_
// broadcasts is the same rule for ping), and one from a port that itself
// answers everything (loopPorts).
func Echo(d *Datagram) []byte {
	if d.Broadcast || !d.OpenMX && loopPort(d.SPort) {
		return nil
	}
	return d.Payload
}

// Discard takes every datagram and answers none (RFC 863).
func Discard(*Datagram) []byte { return nil }

// Apps are the built-in applications a stack file can name (app "echo").
var Apps = map[string]Handler{"echo": Echo, "discard": Discard}

// Stack is the compiled stack: the generated code and what its verdicts'
// indexes mean, the transmit chains and the endpoints' handlers.
type Stack struct {
	Process     func(queue int, frame []byte) Verdict
	Endpoints   []string
	UDP         []bool // per endpoint: a UDP endpoint (its handler runs)
	OMX         []bool // per endpoint: an Open-MX endpoint (its handler runs)
	Handlers    []Handler
	Replies     []string
	ReplyChains [][]TxFunc // per reply
	Sinks       []string
	SinkChains  [][]TxFunc // per sink; nil: a sink that sends nothing
	DropSites   []string   // "NODE.PORT", or "" for a drop with no site
	SendChain   []TxFunc   // what a UDP handler's answer goes through
	SendOMX     []TxFunc   // what an Open-MX handler's answer goes through
	// ReplyErr and SinkErr mark the replies and sinks whose answer is an
	// ICMP error (Host.ICMPErrors limits them).
	ReplyErr, SinkErr []bool
	Host
	// OpenVIs, if set, opens the software VIs of the stack on the
	// interface it names (VIs), a goroutine waiting on a VI looking at
	// their socket for up to spin before it sleeps (sovia's
	// HostOptions.BusyPoll; openVIs gives the loops' wait,
	// Config.VISpin): Start calls it once the sockets are open and Stop
	// closes what it returned. The eBPF stage leaves the VIs' frames
	// (EtherType 0x88B5) to the kernel, which hands them to the VIs' own
	// socket.
	OpenVIs func(ifname string, spin time.Duration) (VIs, error)
	// Tables, if set, replaces the generated code's swapped tables: a
	// reload's Update on the helper's standard input is applied with it
	// (Main).
	Tables SetTable
	// Patch, if set, changes some entries of a swapped table: an
	// Update's change of a table given before is applied with it, in
	// time linear in the table's slots rather than in building it.
	Patch PatchTable
	// eps are the endpoints the loops serve, from Endpoints, UDP, OMX
	// and Handlers when the server starts, then from each Update.
	eps atomic.Pointer[endpointSet]
}

// Queue is one receive loop.
type Queue struct {
	ID   int // the plan's queue number, passed to Process
	Core int // the core it is pinned to; -1: not pinned
}

// Socket kinds.
const (
	AFPacket = "packet" // AF_PACKET sockets in an eBPF fanout group
	AFXDP    = "xdp"    // AF_XDP sockets fed by an XDP program
)

// Config says where to serve.
type Config struct {
	Ifindex int
	Queues  []Queue
	Socket  string // AFPacket or AFXDP
	// AF_PACKET: the fanout program (-1 with a single queue) and the
	// per-socket filter program (-1 for none).
	FanoutFD int
	FilterFD int
	// AF_XDP: the XSKMAP the XDP program redirects through, the device's
	// receive queues (one socket each) and whether to insist on copy mode.
	XSKMapFD  int
	DevQueues int
	CopyMode  bool
	// How the loops wait for frames (wait.go): BusyPoll makes them poll
	// the device and never sleep; otherwise they spin for Spin (0:
	// DefaultSpin; negative: not at all) before they sleep.
	BusyPoll bool
	Spin     time.Duration
	// Adopt, if set, are sockets (AF_XDP or AF_PACKET, as Socket) another
	// data plane served and handed over (Server.Handover), with
	// descriptors of this process: they are served instead of new ones.
	Adopt *Handover
}

// Handover is what a data plane that stopped at a frame boundary hands
// the next one of its sockets. AF_PACKET: each loop's socket, still in
// the fanout group, and the receive ring's slot its loop reads next (the
// kernel's own position in the ring is in the socket; TPACKET_V2 has no
// shared index, the reader walks the slots' status words). AF_XDP: each
// socket's descriptor, the
// descriptor of its queue's UMEM (a memfd) and the transmit chunks the
// queue's owner held free. Every other chunk is on a ring whose indexes
// the next program reads: lent to the kernel (fill ring, or taken by the
// device), received and not yet read (rx ring), sent and not yet
// completed (tx and completion rings).
type Handover struct {
	Ring    uint32           `json:"ring"`  // each ring's length
	Loops   int              `json:"loops"` // sockets per device queue
	Sockets []HandoverSocket `json:"sockets"`
}

// HandoverSocket is one socket of a Handover, in the order the sockets
// were opened: by device queue, the UMEM's owner first.
type HandoverSocket struct {
	FD     int  `json:"fd"`
	Queue  int  `json:"queue"` // the device's queue
	Owner  bool `json:"owner,omitempty"`
	UMEMFD int  `json:"umem_fd"` // the owner's; -1 for the others
	// Free are the owner's transmit chunks not in flight, as runs of
	// chunk numbers: [first, count].
	Free [][2]uint64 `json:"free,omitempty"`
	// Next is an AF_PACKET socket's receive ring slot to read next.
	Next int `json:"next,omitempty"`
	// Dropped is what the kernel had dropped of the socket's frames when
	// its loop stopped (XDP_STATISTICS: rx_dropped, no chunk to receive
	// into or a frame too long, and rx_ring_full): what it drops from
	// then on until the next program reads the socket is what the
	// handover lost. AF_PACKET's PACKET_STATISTICS are cleared on each
	// read, so there the count starts from 0 at the handover.
	Dropped uint64 `json:"dropped"`
}

// port is where a loop's frames come from and its replies go.
type port interface {
	// receive hands the frames on the port's rings to fn, without
	// waiting, and says how many there were.
	receive(fn func(frame []byte)) int
	// ready reports whether frames wait on the rings.
	ready() bool
	// fds are the sockets to wait on; kick makes a non-blocking system
	// call on each that polls the device when busy polling is on.
	fds() []int
	kick()
	setBusyPoll(budget int) error
	flushBatch(b *txBatch) (int, error)
	// stats reads the kernel's counters of the port's sockets.
	stats() KernelCounts
	close()
}

// Server is a running data plane.
type Server struct {
	st     *Stack
	queues []*queueLoop
	stop   atomic.Bool
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
	xsks   []*xsk
	vis    *VIs // Stack.OpenVIs's; nil without VIs
	limit  *limiter

	// reloadMu serialises Apply; tables are the swapped tables' entries
	// as the updates gave them.
	reloadMu sync.Mutex
	tables   map[string]map[TableKey]TableEntry

	stopFD  int             // an eventfd Stop writes to, in every loop's poll set
	spinner func() *spinner // each loop's own
	// Notes say how the server runs (pinning refused, and so on).
	Notes []string
}

type queueLoop struct {
	q     Queue
	sock  port
	wait  *waiter // nil when busy polling
	c     counters
	final atomic.Pointer[KernelCounts] // the kernel's counters when the sockets closed
	// empty counts the loop's looks that found its rings empty; asleep
	// is set while it sleeps in poll(2) (Server.drain).
	empty  atomic.Uint64
	asleep atomic.Bool
}

// counters of one queue; written by its loop, read by the reporter.
type counters struct {
	in, sent, txErr atomic.Uint64
	sockErr         atomic.Uint64 // errors the sockets reported (sockError), such as the interface going down
	lastSockErr     atomic.Uint32 // the last of them, an errno
	limited         atomic.Uint64 // ICMP errors held back by Host.ICMPErrors
	refused         atomic.Uint64 // answers the data plane would not send (see send)
	deliver         deliverCounters
	reply, sink     []atomic.Uint64
	drop            []atomic.Uint64
}

// Start opens the sockets of every queue and starts their loops.
func Start(st *Stack, cfg Config) (*Server, error) {
	if len(cfg.Queues) == 0 {
		return nil, fmt.Errorf("no queue to serve")
	}
	s := &Server{st: st, stopFD: -1}
	now := st.Now
	if now == nil {
		start := time.Now()
		now = func() time.Duration { return time.Since(start) }
	}
	s.limit = newLimiter(st.ICMPErrors, now)
	if st.eps.Load() == nil {
		st.eps.Store(newEndpointSet(st.Endpoints, st.UDP, st.OMX, st.Handlers))
	}
	for _, q := range cfg.Queues {
		l := &queueLoop{q: q}
		l.c.deliver.grow(len(st.eps.Load().names))
		l.c.reply = make([]atomic.Uint64, len(st.Replies))
		l.c.sink = make([]atomic.Uint64, len(st.Sinks))
		l.c.drop = make([]atomic.Uint64, len(st.DropSites)+1)
		s.queues = append(s.queues, l)
	}
	var err error
	switch cfg.Socket {
	case AFPacket, "":
		err = s.openPacket(cfg)
	case AFXDP:
		err = s.openXDP(cfg)
	default:
		err = fmt.Errorf("no socket kind %q", cfg.Socket)
	}
	if err == nil {
		err = s.prepareWaits(cfg)
	}
	if err == nil {
		s.vis, err = openVIs(st, cfg)
	}
	if err != nil {
		s.closeAll()
		return nil, err
	}
	s.spinner = cfg.spinner
	if note := reserveP(cfg); note != "" {
		s.Notes = append(s.Notes, note)
	}
	ready := make(chan string, len(s.queues))
	for _, l := range s.queues {
		s.wg.Add(1)
		go s.loop(l, ready)
	}
	for range s.queues {
		if n := <-ready; n != "" {
			s.Notes = append(s.Notes, n)
		}
	}
	sort.Strings(s.Notes)
	return s, nil
}

// openPacket gives every loop an AF_PACKET socket, all in one fanout
// group whose program picks the loop.
func (s *Server) openPacket(cfg Config) error {
	if cfg.Adopt != nil {
		return s.adoptPacket(cfg)
	}
	group := -1
	if len(cfg.Queues) > 1 {
		// A fanout group id unique to this process (16 bits).
		group = (syscall.Getpid() ^ cfg.Ifindex<<8) & 0xffff
	}
	var first *packetSocket
	for _, l := range s.queues {
		sock, err := openPacket(cfg.Ifindex, cfg.FilterFD, group)
		if err != nil {
			return fmt.Errorf("queue %d: %w", l.q.ID, err)
		}
		l.sock = sock
		if first == nil {
			first = sock
		}
	}
	if group >= 0 {
		return first.setFanoutProgram(cfg.FanoutFD)
	}
	return nil
}

// adoptPacket serves the AF_PACKET sockets of a handover, one a loop in
// the order they joined the fanout group (the order the fanout program's
// answer counts), and gives them this plan's socket filter and the group
// this plan's fanout program. The sockets never leave the group, so
// frames go on landing in their rings while the programs change.
func (s *Server) adoptPacket(cfg Config) error {
	a := cfg.Adopt
	if a.Loops != len(s.queues) || len(a.Sockets) != len(s.queues) {
		return fmt.Errorf("AF_PACKET: the sockets handed over are %d for %d loop(s), not %d", len(a.Sockets), a.Loops, len(s.queues))
	}
	for i, l := range s.queues {
		sock, err := adoptPacket(a.Sockets[i], int(a.Ring), cfg.Ifindex, cfg.FilterFD)
		if err != nil {
			return fmt.Errorf("queue %d: %w", l.q.ID, err)
		}
		l.sock = sock
	}
	// fanout_set_data (net/packet/af_packet.c) lets any member of an
	// eBPF group replace the group's program (__fanout_set_data_bpf,
	// under the group's lock, RCU for the readers).
	if len(s.queues) > 1 {
		return s.queues[0].sock.(*packetSocket).setFanoutProgram(cfg.FanoutFD)
	}
	return nil
}

// openXDP opens, on every receive queue of the device, one AF_XDP socket
// per loop, one of them owning the queue's UMEM and the others sharing
// it, and puts socket (device queue d, loop i) in the XSKMAP under key
// d × loops + i: the XDP program redirects each frame to the socket of
// its plan queue's loop on the queue it arrived on, so no frame passes
// from loop to loop. Loop i transmits through the owner of device queue
// i mod the device's queues, and the owner of queue d is loop d mod
// loops's socket (xskOwner): with as many loops as device queues, no
// loop waits on a socket another loop transmits through. That matters
// in copy mode, where a poll(2) of a socket with a transmit ring sends
// what waits on it (xsk_poll, net/xdp/xsk.c: a copy-mode buffer pool
// always asks for a transmit wake-up, xp_assign_dev) under the socket's
// mutex: a loop sleeping on another's transmit socket took that mutex
// from under the loop sending through it (2 % of the helper's time in
// mutex_spin_on_owner at 64 requests in flight, before).
func (s *Server) openXDP(cfg Config) error {
	if cfg.DevQueues < 1 {
		return fmt.Errorf("AF_XDP: the device has no receive queue")
	}
	loops := len(s.queues)
	socks := make([][]*xsk, cfg.DevQueues) // by device queue, then loop
	n := ringSize(cfg.Ifindex)
	if a := cfg.Adopt; a != nil {
		if err := s.adoptXDP(a, socks); err != nil {
			return err
		}
		n = a.Ring
	}
	for d := range socks {
		if len(socks[d]) > 0 {
			continue // handed over
		}
		socks[d] = make([]*xsk, loops)
		for k, i := range xskOrder(d, loops) {
			var x *xsk
			var err error
			if k == 0 {
				x, err = openXSK(cfg.Ifindex, d, cfg.CopyMode, n)
			} else {
				x, err = openSharedXSK(cfg.Ifindex, socks[d][xskOwner(d, loops)])
			}
			if err != nil {
				return err
			}
			s.xsks = append(s.xsks, x)
			socks[d][i] = x
		}
	}
	for i, l := range s.queues {
		d := i % len(socks)
		p := &xdpPort{tx: socks[d][xskOwner(d, loops)]}
		for d := range socks {
			p.socks = append(p.socks, socks[d][i])
		}
		l.sock = p
	}
	// Last, so that no frame is redirected to a socket before every loop
	// can take it (until then the program passes them to the kernel).
	for d := range socks {
		for i, x := range socks[d] {
			if err := x.putInMap(cfg.XSKMapFD, uint32(d*loops+i)); err != nil {
				return err
			}
		}
	}
	mode := "copy mode"
	if socks[0][0].zeroCopy {
		mode = "zero-copy mode"
	}
	s.Notes = append(s.Notes, fmt.Sprintf("AF_XDP in %s, %d device queue(s) for %d loop(s), a socket for each pair; rings of %d descriptors", mode, cfg.DevQueues, loops, n))
	return nil
}

// xskOwner is the loop whose socket on device queue d owns the queue's
// UMEM, its fill and completion rings and its transmit ring.
func xskOwner(d, loops int) int { return d % loops }

// xskOrder lists the loops of device queue d's sockets in the order they
// are opened, kept in Server.xsks and handed over: the owner's first
// (the others share what it opened), then the rest in turn.
func xskOrder(d, loops int) []int {
	o := xskOwner(d, loops)
	order := []int{o}
	for i := range loops {
		if i != o {
			order = append(order, i)
		}
	}
	return order
}

// adoptXDP serves the sockets of a handover: the same device queues and
// loops as the program that handed them over, in the order xskOrder
// says.
func (s *Server) adoptXDP(a *Handover, socks [][]*xsk) error {
	loops := len(s.queues)
	if a.Loops != loops || len(a.Sockets) != len(socks)*loops {
		return fmt.Errorf("AF_XDP: the sockets handed over are %d for %d loop(s), not %d device queue(s) for %d", len(a.Sockets), a.Loops, len(socks), loops)
	}
	if a.Ring == 0 || a.Ring&(a.Ring-1) != 0 {
		return fmt.Errorf("AF_XDP: the rings handed over are %d descriptors long", a.Ring)
	}
	for i, h := range a.Sockets {
		d, k := i/loops, i%loops // the k-th socket of queue d
		if h.Queue != d || h.Owner != (k == 0) {
			return fmt.Errorf("AF_XDP: socket %d handed over is for device queue %d (owner %v), not %d", i, h.Queue, h.Owner, d)
		}
		if k == 0 {
			socks[d] = make([]*xsk, loops)
		}
		var p *xsk
		if k > 0 {
			p = socks[d][xskOwner(d, loops)]
		}
		x, err := adoptXSK(h, a.Ring, p)
		if err != nil {
			return err
		}
		s.xsks = append(s.xsks, x)
		socks[d][xskOrder(d, loops)[k]] = x
	}
	return nil
}

// Handover stops the loops at a frame boundary (each finishes the frames
// it took and sends its answers), lets the transmit rings go and takes
// the completed chunks back, and says what the program that takes the
// AF_XDP sockets over needs. The sockets stay open until Stop; from now
// on nothing reads them.
func (s *Server) Handover() (*Handover, error) {
	if len(s.xsks) == 0 {
		return s.handOverPackets()
	}
	s.halt()
	h := &Handover{Ring: s.xsks[0].n, Loops: len(s.queues)}
	for _, x := range s.xsks {
		h.Sockets = append(h.Sockets, x.quiesce())
	}
	return h, nil
}

// handOverPackets stops the loops at a frame boundary and says which
// AF_PACKET socket each loop read and where in its ring it stopped.
func (s *Server) handOverPackets() (*Handover, error) {
	var socks []*packetSocket
	for _, l := range s.queues {
		p, ok := l.sock.(*packetSocket)
		if !ok {
			return nil, fmt.Errorf("loop %d has no socket to hand over", l.q.ID)
		}
		socks = append(socks, p)
	}
	if len(socks) == 0 {
		return nil, fmt.Errorf("no socket to hand over")
	}
	s.halt()
	h := &Handover{Ring: uint32(socks[0].frames), Loops: len(s.queues)}
	for _, p := range socks {
		h.Sockets = append(h.Sockets, p.quiesce())
	}
	return h, nil
}

// halt ends every loop and waits for them.
func (s *Server) halt() {
	s.stop.Store(true)
	if s.stopFD >= 0 {
		one := [8]byte{1}
		syscall.Write(s.stopFD, one[:])
	}
	s.wg.Wait()
}

// prepareWaits sets the loops' sockets up for the way they wait.
func (s *Server) prepareWaits(cfg Config) error {
	if !cfg.BusyPoll {
		fd, err := newStopFD()
		if err != nil {
			return err
		}
		s.stopFD = fd
	}
	for _, l := range s.queues {
		if cfg.BusyPoll {
			if err := l.sock.setBusyPoll(busyPollBudget); err != nil {
				return fmt.Errorf("queue %d: %w", l.q.ID, err)
			}
			continue
		}
		l.wait = newWaiter(l.sock, s.stopFD)
	}
	return nil
}

func (s *Server) closeAll() {
	for _, l := range s.queues {
		if l.sock != nil {
			l.sock.close()
		}
	}
	// The sockets that share a queue's UMEM close before its owner.
	for i := len(s.xsks) - 1; i >= 0; i-- {
		s.xsks[i].close()
	}
	if s.stopFD >= 0 {
		syscall.Close(s.stopFD)
		s.stopFD = -1
	}
}

// Stop ends every loop, closes the sockets and reports the first error a
// loop met.
func (s *Server) Stop() error {
	var viErr error
	if s.vis != nil {
		viErr = s.vis.Close()
	}
	s.halt()
	// The kernel's counters, read once more before the sockets go, for
	// the final report.
	for _, l := range s.queues {
		if l.sock != nil {
			k := l.sock.stats()
			l.final.Store(&k)
		}
	}
	s.closeAll()
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil && viErr != nil {
		return fmt.Errorf("closing the software VIs: %w", viErr)
	}
	return s.err
}

// pin binds the calling thread to core.
func pin(core int) error {
	if core < 0 {
		return nil
	}
	var mask [16]uint64 // 1024 CPUs, as glibc's cpu_set_t
	if core >= len(mask)*64 {
		return fmt.Errorf("core %d is beyond the affinity mask", core)
	}
	mask[core/64] |= 1 << (core % 64)
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask)))
	if e != 0 {
		return e
	}
	return nil
}

func (s *Server) loop(l *queueLoop, ready chan<- string) {
	defer s.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	note := ""
	if err := pin(l.q.Core); err != nil {
		note = fmt.Sprintf("queue %d is not pinned to core %d: %v", l.q.ID, l.q.Core, err)
	}
	ready <- note
	t := &Tx{Buf: make([]byte, ethLen+maxIPv4), MAC: s.st.MAC}
	dg := &Datagram{Queue: l.q.ID}
	batch := newTxBatch()
	flush := func() {
		if batch.count() == 0 {
			return
		}
		want := batch.count()
		n, _ := l.sock.flushBatch(batch)
		l.c.sent.Add(uint64(n))
		l.c.txErr.Add(uint64(want - n))
	}
	handle := func(frame []byte) {
		l.c.in.Add(1)
		// The frame goes to the generated code as it arrived: nothing is
		// padded or stripped, so that what verify checks is what runs.
		v := s.st.Process(l.q.ID, frame)
		t.Req, t.Flags = frame, 0
		var chain []TxFunc
		switch v.Kind {
		case Deliver:
			eps := s.st.eps.Load()
			n := l.c.deliver.at(v.Index)
			if n == nil || int(v.Index) >= len(eps.names) {
				return
			}
			n.Add(1)
			if eps.omx[v.Index] && eps.handlers[v.Index] != nil {
				// Open-MX frames carry no length: the message is the rest
				// of the frame, padding included.
				at, _, ok := l2(frame)
				if !ok || len(frame) < at+omxHeader {
					return
				}
				*dg = Datagram{Endpoint: int(v.Index), Queue: l.q.ID, Payload: frame[at+omxHeader:], OpenMX: true}
				dg.SPort, dg.DPort = uint16(frame[at+4]), uint16(frame[at+3])
				dg.Broadcast = isBroadcastMAC(frame)
				if t.Payload = eps.handlers[v.Index](dg); t.Payload == nil {
					return
				}
				copy(t.DstMAC[:], frame[6:12])
				chain = s.st.SendOMX
				break
			}
			if !eps.udp[v.Index] || eps.handlers[v.Index] == nil {
				return
			}
			l3, l4, end, ok := ipv4(frame)
			if !ok || end-l4 < 8 {
				return
			}
			*dg = Datagram{Endpoint: int(v.Index), Queue: l.q.ID}
			copy(dg.Src[:], frame[l3+12:l3+16])
			copy(dg.Dst[:], frame[l3+16:l3+20])
			dg.SPort = binary.BigEndian.Uint16(frame[l4:])
			dg.DPort = binary.BigEndian.Uint16(frame[l4+2:])
			// The datagram is as long as its header says (RFC 768); the
			// LPG checked that the frame holds it.
			ulen := int(binary.BigEndian.Uint16(frame[l4+4:]))
			if ulen < 8 || l4+ulen > end {
				return
			}
			dg.Payload = frame[l4+8 : l4+ulen]
			dg.Broadcast = isBroadcastMAC(frame) || !s.st.local(dg.Dst)
			out := eps.handlers[v.Index](dg)
			if out == nil {
				return
			}
			src, ok := s.st.source(dg.Dst, dg.Src)
			if !ok || dg.SPort == 0 {
				// No address to answer from or to (a sender of 0.0.0.0), or a sender that expects
				// no answer (RFC 768: source port 0 is "not used").
				l.c.refused.Add(1)
				return
			}
			t.Payload, t.Src, t.Dst, t.SPort, t.DPort = out, src, dg.Src, dg.DPort, dg.SPort
			copy(t.DstMAC[:], frame[6:12])
			chain = s.st.SendChain
		case Reply:
			if int(v.Index) >= len(l.c.reply) {
				return
			}
			l.c.reply[v.Index].Add(1)
			chain = s.st.ReplyChains[v.Index]
			if s.st.ReplyErr[v.Index] && !s.allowError(frame) {
				l.c.limited.Add(1)
				return
			}
		case Sink:
			if int(v.Index) >= len(l.c.sink) {
				return
			}
			l.c.sink[v.Index].Add(1)
			chain = s.st.SinkChains[v.Index]
			if s.st.SinkErr[v.Index] && !s.allowError(frame) {
				l.c.limited.Add(1)
				return
			}
		default:
			l.c.drop[min(int(v.Index), len(l.c.drop)-1)].Add(1)
			return
		}
		if len(chain) == 0 {
			return
		}
		for _, f := range chain {
			if !f(t) {
				return
			}
		}
		if !batch.add(t.Buf[:t.N]) {
			flush()
			batch.add(t.Buf[:t.N])
		}
	}
	// The loop takes what the rings hold, answers it with one send, and
	// looks again; with nothing there it spins until s.spin has passed
	// since the last frame, then sleeps (or, busy polling, asks the
	// kernel to poll the device and looks again).
	// The clock is read once every spinCheck empty looks: reading it
	// each time took a quarter of a spinning loop's time on a VM whose
	// clock_gettime is slow.
	const spinCheck = 64
	last, idle := time.Now(), 0
	spin, budget := s.spinner(), time.Duration(0)
	for !s.stop.Load() {
		if l.sock.receive(handle) > 0 {
			flush()
			if idle > 0 && budget > 0 {
				spin.caught()
			}
			idle = 0
			continue
		}
		l.empty.Add(1)
		if l.wait == nil {
			l.sock.kick()
			continue
		}
		if idle++; idle == 1 {
			last = time.Now()
			budget = spin.budget(last)
		}
		if idle%spinCheck != 0 || time.Since(last) < budget {
			continue
		}
		if budget > 0 {
			spin.missed(time.Now())
		}
		l.asleep.Store(true)
		sockErr, err := l.wait.wait(waitSlice)
		l.asleep.Store(false)
		if sockErr != 0 {
			l.c.sockErr.Add(1)
			l.c.lastSockErr.Store(uint32(sockErr))
		}
		if err != nil {
			s.errMu.Lock()
			if s.err == nil {
				s.err = fmt.Errorf("queue %d: waiting for frames: %w", l.q.ID, err)
			}
			s.errMu.Unlock()
			return
		}
		idle = 0
	}
}

// allowError asks the ICMP error limiter whether the received frame's
// sender may have one more error now.
func (s *Server) allowError(frame []byte) bool {
	l3, _, _, ok := ipv4(frame)
	if !ok {
		return false
	}
	return s.limit.allow([4]byte(frame[l3+12 : l3+16]))
}

// isBroadcastMAC reports whether the frame was sent to a group address
// (broadcast or multicast: the I/G bit, IEEE 802 §8.2).
func isBroadcastMAC(frame []byte) bool { return len(frame) > 0 && frame[0]&1 != 0 }

// Snapshot reads the counters: one entry per queue, the outcomes in the
// names `dragonc verify` uses ("deliver NAME", "reply arp", "sink NODE",
// "drop NODE.PORT"), and the kernel's counters of the sockets.
func (s *Server) Snapshot(final bool) Report {
	r := Report{Final: final, At: time.Now()}
	if s.vis != nil {
		r.VI = s.vis.counts()
	}
	for _, l := range s.queues {
		q := QueueCounts{Queue: l.q.ID, In: l.c.in.Load(), Outcomes: []Outcome{}}
		add := func(name string, n uint64) {
			if n > 0 {
				q.Outcomes = append(q.Outcomes, Outcome{name, n})
			}
		}
		for i, name := range s.st.eps.Load().names {
			if n := l.c.deliver.at(uint32(i)); n != nil {
				add("deliver "+name, n.Load())
			}
		}
		for i := range l.c.reply {
			add("reply "+s.st.Replies[i], l.c.reply[i].Load())
		}
		for i := range l.c.sink {
			add("sink "+s.st.Sinks[i], l.c.sink[i].Load())
		}
		for i := range l.c.drop {
			site := "drop"
			if i < len(s.st.DropSites) && s.st.DropSites[i] != "" {
				site = "drop " + s.st.DropSites[i]
			}
			add(site, l.c.drop[i].Load())
		}
		q.ICMPRateLimited, q.AnswersRefused = l.c.limited.Load(), l.c.refused.Load()
		q.Sent, q.SendErrors = l.c.sent.Load(), l.c.txErr.Load()
		if q.SocketErrors = l.c.sockErr.Load(); q.SocketErrors > 0 {
			q.LastSocketError = syscall.Errno(l.c.lastSockErr.Load()).Error()
		}
		switch final := l.final.Load(); {
		case final != nil:
			q.Kernel = *final
		case l.sock != nil:
			q.Kernel = l.sock.stats()
		}
		r.Queues = append(r.Queues, q)
	}
	return r
}

// Report writes the counters as text (Report.WriteText).
func (s *Server) Report(w io.Writer) { s.Snapshot(false).WriteText(w) }
