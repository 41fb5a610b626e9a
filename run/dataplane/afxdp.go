package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Linux constants of AF_XDP (include/uapi/linux/if_xdp.h, socket.h) and of
// the bpf(2) call that puts a socket in the XSKMAP (include/uapi/linux/
// bpf.h).
const (
	afXDP                 = 44
	solXDP                = 283
	xdpMmapOffsets        = 1
	xdpRxRing             = 2
	xdpTxRing             = 3
	xdpUmemReg            = 4
	xdpUmemFillRing       = 5
	xdpUmemCompletionRing = 6
	xdpOptions            = 8
	xdpOptionsZerocopy    = 1
	xdpSharedUmem         = 1 << 0
	xdpCopy               = 1 << 1
	xdpZerocopy           = 1 << 2
	xdpUseNeedWakeup      = 1 << 3
	xdpRingNeedWakeup     = 1 << 0 // in a ring's flags word
	pgoffRxRing           = 0
	pgoffTxRing           = 0x80000000
	pgoffFillRing         = 0x100000000
	pgoffCompletionRing   = 0x180000000
	bpfMapUpdateElem      = 2
	msgDontwait           = 0x40
	mfdCloexec            = 1 // MFD_CLOEXEC, include/uapi/linux/memfd.h
)

// An XSK (AF_XDP socket) owns a UMEM of chunks: the first half is lent
// to the kernel through the fill ring for received frames, the second
// half holds frames to transmit. Each ring is a power of two long
// (ringSize).
const (
	xskChunk = 2048
	// minRing is the shortest ring: libxdp's default
	// (XSK_RING_PROD__DEFAULT_NUM_DESCS, xsk.h), which xdpsock uses.
	minRing = 2048
	maxRing = 16384
	// xdpHeadroom is the room the kernel keeps before a received frame in
	// its chunk (XDP_PACKET_HEADROOM, include/linux/bpf.h); the XDP
	// program's metadata sits at its end, just before the frame.
	xdpHeadroom = 256
	// ETHTOOL_GRINGPARAM (include/uapi/linux/ethtool.h).
	ethtoolGRingParam = 0x10
	siocEthtool       = 0x8946
)

// ringSize chooses the rings' length for the device's receive queue
// depth: twice the descriptors the driver keeps posted (ethtool -g's "RX",
// read with ETHTOOL_GRINGPARAM), so that the fill ring can refill a whole
// device ring while the loop still holds the previous one's frames; never
// less than minRing (a veth reports 256) nor more than maxRing. The ioctl
// is spelled out here, not taken from package discover: this package
// ships into generated modules with the standard library only.
func ringSize(ifindex int) uint32 {
	size := uint32(minRing)
	ifc, err := net.InterfaceByIndex(ifindex)
	if err != nil {
		return size
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return size
	}
	defer syscall.Close(fd)
	// struct ethtool_ringparam: cmd, then eight __u32, rx_pending fifth.
	var rp [9]uint32
	rp[0] = ethtoolGRingParam
	var ifr [40]byte // struct ifreq: the name, then a pointer
	copy(ifr[:15], ifc.Name)
	*(*uintptr)(unsafe.Pointer(&ifr[16])) = uintptr(unsafe.Pointer(&rp))
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), siocEthtool, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return size
	}
	for size < 2*rp[5] && size < maxRing {
		size *= 2
	}
	return size
}

// ringOffsets is struct xdp_ring_offset; mmapOffsets is struct
// xdp_mmap_offsets.
type ringOffsets struct{ producer, consumer, desc, flags uint64 }
type mmapOffsets struct{ rx, tx, fr, cr ringOffsets }

// umemReg is struct xdp_umem_reg.
type umemReg struct {
	addr, len            uint64
	chunkSize, headroom  uint32
	flags, txMetadataLen uint32
}

// sockaddrXDP is struct sockaddr_xdp.
type sockaddrXDP struct {
	family, flags            uint16
	ifindex, queueID, shared uint32
}

// ring is one mapped ring: producer and consumer indexes the two sides
// hand each other, and an array of descriptors (xdp_desc for rx and tx,
// a u64 address for fill and completion).
type ring struct {
	mem        []byte
	prod, cons *uint32
	flags      *uint32 // XDP_RING_NEED_WAKEUP, set by the kernel
	desc       unsafe.Pointer
	mask       uint32
	cached     uint32 // our own side's index
}

func mapRing(fd int, off ringOffsets, pgoff int64, n uint32, descSize uintptr) (*ring, error) {
	size := int(off.desc) + int(n)*int(descSize)
	mem, err := syscall.Mmap(fd, pgoff, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	r := &ring{mem: mem, mask: n - 1,
		prod:  (*uint32)(unsafe.Pointer(&mem[off.producer])),
		cons:  (*uint32)(unsafe.Pointer(&mem[off.consumer])),
		flags: (*uint32)(unsafe.Pointer(&mem[off.flags])),
		desc:  unsafe.Pointer(&mem[off.desc])}
	return r, nil
}

func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

// xdpDesc is struct xdp_desc.
type xdpDesc struct {
	addr    uint64
	len     uint32
	options uint32
}

func (r *ring) xdesc(i uint32) *xdpDesc {
	return (*xdpDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(xdpDesc{})))
}

// xsk is one AF_XDP socket bound to one receive queue of the device.
// The first socket of a queue owns the UMEM, its fill and completion
// rings and a transmit ring; the others (one per further receive loop)
// share them (XDP_SHARED_UMEM) and have a receive ring of their own, so
// the XDP program can give each frame straight to its loop's socket.
type xsk struct {
	fd               int
	queue            int    // the device's queue
	n                uint32 // each ring's length; the UMEM holds 2n chunks
	umem             []byte
	rx, tx, fill, cr *ring
	zeroCopy         bool
	needWakeup       bool // bound with XDP_USE_NEED_WAKEUP
	owner            bool // owns umem, fill and cr (unmaps them)
	umemFD           int  // the owner's: the memfd the UMEM lies in (-1: none)
	// fillMu guards the fill ring when sockets share it (nil when one
	// socket reads the queue).
	fillMu *sync.Mutex
	ret    []uint64 // chunks of one receive batch, to lend back
	// The transmit side is shared by the loops that send through this
	// socket; mu guards tx, cr and free.
	mu   sync.Mutex
	free []uint64 // transmit chunks not in flight
}

// openXSK opens an AF_XDP socket on queue of ifindex, in zero-copy mode
// where the driver supports it and copy mode otherwise (or always, with
// copyMode).
func openXSK(ifindex, queue int, copyMode bool, n uint32) (*xsk, error) {
	fd, err := syscall.Socket(afXDP, syscall.SOCK_RAW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening an AF_XDP socket: %w", err)
	}
	x := &xsk{fd: fd, queue: queue, owner: true, n: n, umemFD: -1}
	fail := func(what string, err error) (*xsk, error) {
		x.close()
		return nil, fmt.Errorf("AF_XDP queue %d: %s: %w", queue, what, err)
	}
	// The UMEM lies in a memfd, shared, so that the program that takes
	// over the socket (a reload's handover) can map the same frames.
	if x.umemFD, err = memfd("dragonc-umem", 2*int64(n)*xskChunk); err != nil {
		return fail("allocating the UMEM", err)
	}
	if x.umem, err = syscall.Mmap(x.umemFD, 0, 2*int(n)*xskChunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		return fail("mapping the UMEM", err)
	}
	reg := umemReg{addr: uint64(uintptr(unsafe.Pointer(&x.umem[0]))), len: uint64(len(x.umem)), chunkSize: xskChunk}
	if err := setsockopt(fd, xdpUmemReg, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fail("XDP_UMEM_REG", err)
	}
	for _, o := range []int{xdpUmemFillRing, xdpUmemCompletionRing, xdpRxRing, xdpTxRing} {
		if err := syscall.SetsockoptInt(fd, solXDP, o, int(n)); err != nil {
			return fail("setting the ring sizes", err)
		}
	}
	off, err := mmapOffsetsOf(fd)
	if err != nil {
		return fail("XDP_MMAP_OFFSETS", err)
	}
	if x.rx, err = mapRing(fd, off.rx, pgoffRxRing, n, unsafe.Sizeof(xdpDesc{})); err != nil {
		return fail("mapping the rx ring", err)
	}
	if x.tx, err = mapRing(fd, off.tx, pgoffTxRing, n, unsafe.Sizeof(xdpDesc{})); err != nil {
		return fail("mapping the tx ring", err)
	}
	if x.fill, err = mapRing(fd, off.fr, pgoffFillRing, n, 8); err != nil {
		return fail("mapping the fill ring", err)
	}
	if x.cr, err = mapRing(fd, off.cr, pgoffCompletionRing, n, 8); err != nil {
		return fail("mapping the completion ring", err)
	}
	// Lend the first half of the chunks to the kernel.
	for i := uint32(0); i < n; i++ {
		*x.fill.addr(i) = uint64(i) * xskChunk
	}
	atomic.StoreUint32(x.fill.prod, n)
	x.fill.cached = n
	for i := n; i < 2*n; i++ {
		x.free = append(x.free, uint64(i)*xskChunk)
	}
	// Zero-copy first, with XDP_USE_NEED_WAKEUP (Linux 5.4): the kernel
	// says in the fill and transmit rings' flags when the driver needs a
	// system call to go on, so a busy loop makes none it does not need
	// (Documentation/networking/af_xdp.rst). Where the driver has no
	// zero-copy mode, copy mode without the flag: there every send needs
	// its system call anyway, and with the flag set every poll(2) of a
	// socket with a transmit ring would also try to transmit on it
	// (xsk_poll drives copy-mode transmission when need-wakeup is on),
	// taking the socket's mutex from under the loop that sends through
	// it: 12% of the helper's time in mutex_spin_on_owner.
	bind := func(flags uint16) syscall.Errno {
		sa := sockaddrXDP{family: afXDP, flags: flags, ifindex: uint32(ifindex), queueID: uint32(queue)}
		_, _, e := syscall.Syscall(syscall.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
		return e
	}
	e := syscall.Errno(syscall.EOPNOTSUPP)
	if !copyMode {
		if e = bind(xdpZerocopy | xdpUseNeedWakeup); e == 0 {
			x.needWakeup = true
		}
	}
	if e != 0 {
		e = bind(xdpCopy)
	}
	if e != 0 {
		return fail("binding", e)
	}
	var opt uint32
	optLen := uint32(4)
	if _, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), solXDP, xdpOptions, uintptr(unsafe.Pointer(&opt)), uintptr(unsafe.Pointer(&optLen)), 0); e == 0 {
		x.zeroCopy = opt&xdpOptionsZerocopy != 0
	}
	return x, nil
}

// openSharedXSK opens a further socket on the queue of p, sharing p's
// UMEM and its fill and completion rings: XDP_SHARED_UMEM on the same
// device and queue, where the kernel shares p's buffer pool and refuses
// rings of the socket's own and mode flags such as XDP_COPY (xsk_bind,
// net/xdp/xsk.c: "Cannot specify flags for shared sockets"); the mode is
// p's. It has a receive ring only. From then on the sockets lend chunks
// back to the one fill ring under a lock.
func openSharedXSK(ifindex int, p *xsk) (*xsk, error) {
	fd, err := syscall.Socket(afXDP, syscall.SOCK_RAW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening an AF_XDP socket: %w", err)
	}
	x := &xsk{fd: fd, queue: p.queue, umem: p.umem, fill: p.fill, zeroCopy: p.zeroCopy, needWakeup: p.needWakeup, n: p.n, umemFD: -1}
	fail := func(what string, err error) (*xsk, error) {
		x.close()
		return nil, fmt.Errorf("AF_XDP queue %d, shared socket: %s: %w", p.queue, what, err)
	}
	if err := syscall.SetsockoptInt(fd, solXDP, xdpRxRing, int(x.n)); err != nil {
		return fail("setting the ring size", err)
	}
	off, err := mmapOffsetsOf(fd)
	if err != nil {
		return fail("XDP_MMAP_OFFSETS", err)
	}
	if x.rx, err = mapRing(fd, off.rx, pgoffRxRing, x.n, unsafe.Sizeof(xdpDesc{})); err != nil {
		return fail("mapping the rx ring", err)
	}
	sa := sockaddrXDP{family: afXDP, flags: xdpSharedUmem, ifindex: uint32(ifindex), queueID: uint32(p.queue), shared: uint32(p.fd)}
	if _, _, e := syscall.Syscall(syscall.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa)); e != 0 {
		return fail("binding", e)
	}
	if p.fillMu == nil {
		p.fillMu = new(sync.Mutex)
	}
	x.fillMu = p.fillMu
	return x, nil
}

// mmapOffsetsOf asks where the socket's rings lie in their mappings.
func mmapOffsetsOf(fd int) (mmapOffsets, error) {
	var off mmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if _, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), solXDP, xdpMmapOffsets, uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return off, e
	}
	return off, nil
}

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := syscall.Syscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), solXDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

func (x *xsk) close() {
	if !x.owner {
		x.fill, x.umem = nil, nil // the owner's
	}
	for _, r := range []*ring{x.rx, x.tx, x.fill, x.cr} {
		if r != nil {
			syscall.Munmap(r.mem)
		}
	}
	x.rx, x.tx, x.fill, x.cr = nil, nil, nil, nil
	if x.fd >= 0 {
		syscall.Close(x.fd)
		x.fd = -1
	}
	if x.umem != nil {
		syscall.Munmap(x.umem)
		x.umem = nil
	}
	if x.umemFD >= 0 {
		syscall.Close(x.umemFD)
		x.umemFD = -1
	}
}

// memfd makes an anonymous file of size bytes (memfd_create(2), close on
// exec).
func memfd(name string, size int64) (int, error) {
	b := append([]byte(name), 0)
	fd, _, e := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&b[0])), mfdCloexec, 0)
	if e != 0 {
		return -1, e
	}
	if err := syscall.Ftruncate(int(fd), size); err != nil {
		syscall.Close(int(fd))
		return -1, err
	}
	return int(fd), nil
}

// adoptXSK maps the rings of socket fd, which another program opened,
// bound and served (HandoverSocket), and goes on from their indexes:
// what arrived meanwhile waits on the receive ring. The owner of the
// queue's UMEM (p nil) also maps the UMEM from its memfd and its fill,
// completion and transmit rings, and takes the transmit chunks that were
// free; a shared socket (p its owner) maps its receive ring only.
func adoptXSK(h HandoverSocket, n uint32, p *xsk) (*xsk, error) {
	x := &xsk{fd: h.FD, queue: h.Queue, n: n, owner: p == nil, umemFD: -1}
	fail := func(what string, err error) (*xsk, error) {
		x.close()
		return nil, fmt.Errorf("AF_XDP queue %d, the socket handed over: %s: %w", h.Queue, what, err)
	}
	var opt uint32
	optLen := uint32(4)
	if _, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(x.fd), solXDP, xdpOptions, uintptr(unsafe.Pointer(&opt)), uintptr(unsafe.Pointer(&optLen)), 0); e != 0 {
		return fail("XDP_OPTIONS", e)
	}
	// openXSK binds with XDP_USE_NEED_WAKEUP exactly in zero-copy mode.
	x.zeroCopy = opt&xdpOptionsZerocopy != 0
	x.needWakeup = x.zeroCopy
	off, err := mmapOffsetsOf(x.fd)
	if err != nil {
		return fail("XDP_MMAP_OFFSETS", err)
	}
	if x.rx, err = mapRing(x.fd, off.rx, pgoffRxRing, n, unsafe.Sizeof(xdpDesc{})); err != nil {
		return fail("mapping the rx ring", err)
	}
	x.rx.cached = atomic.LoadUint32(x.rx.cons)
	if p != nil {
		x.umem, x.fill = p.umem, p.fill
		if p.fillMu == nil {
			p.fillMu = new(sync.Mutex)
		}
		x.fillMu = p.fillMu
		return x, nil
	}
	x.umemFD = h.UMEMFD
	if x.umem, err = syscall.Mmap(x.umemFD, 0, 2*int(n)*xskChunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		return fail("mapping the UMEM", err)
	}
	if x.tx, err = mapRing(x.fd, off.tx, pgoffTxRing, n, unsafe.Sizeof(xdpDesc{})); err != nil {
		return fail("mapping the tx ring", err)
	}
	if x.fill, err = mapRing(x.fd, off.fr, pgoffFillRing, n, 8); err != nil {
		return fail("mapping the fill ring", err)
	}
	if x.cr, err = mapRing(x.fd, off.cr, pgoffCompletionRing, n, 8); err != nil {
		return fail("mapping the completion ring", err)
	}
	x.tx.cached = atomic.LoadUint32(x.tx.prod)
	x.fill.cached = atomic.LoadUint32(x.fill.prod)
	x.cr.cached = atomic.LoadUint32(x.cr.cons)
	for _, r := range h.Free {
		if r[0] < uint64(n) || r[1] > 2*uint64(n)-r[0] {
			return fail("its free chunks", fmt.Errorf("chunks %d to %d are no transmit chunks of %d", r[0], r[0]+r[1], 2*n))
		}
		for c := r[0]; c < r[0]+r[1]; c++ {
			x.free = append(x.free, c*xskChunk)
		}
	}
	if len(x.free) > int(n) {
		return fail("its free chunks", fmt.Errorf("%d of %d transmit chunks", len(x.free), n))
	}
	return x, nil
}

// quiesce makes the transmit ring's frames go (a bounded number of tries)
// and takes back the chunks the kernel has completed; it reports the
// socket as the program that takes it over needs it. The loops have
// stopped.
func (x *xsk) quiesce() HandoverSocket {
	h := HandoverSocket{FD: x.fd, Queue: x.queue, Owner: x.owner, UMEMFD: -1}
	if k, err := xdpStatistics(x.fd); err == nil {
		h.Dropped = k.RxDropped + k.RxRingFull
	}
	if !x.owner {
		return h
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for try := 0; try < 64 && atomic.LoadUint32(x.tx.cons) != x.tx.cached; try++ {
		syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(x.fd), 0, 0, msgDontwait, 0, 0)
	}
	x.reclaim()
	h.UMEMFD, h.Free = x.umemFD, chunkRanges(x.free)
	return h
}

// chunkRanges writes a set of chunks (their addresses) as runs of chunk
// numbers, [first, count]: few, when few chunks are in flight, so that a
// handover fits a command line whatever the rings' length.
func chunkRanges(addrs []uint64) [][2]uint64 {
	nums := make([]uint64, len(addrs))
	for i, a := range addrs {
		nums[i] = a / xskChunk
	}
	slices.Sort(nums)
	var out [][2]uint64
	for _, c := range nums {
		if k := len(out) - 1; k >= 0 && out[k][0]+out[k][1] == c {
			out[k][1]++
			continue
		}
		out = append(out, [2]uint64{c, 1})
	}
	return out
}

// putInMap makes the socket the XSKMAP's entry key, where the XDP
// program redirects the frames arriving on its queue for its loop
// (key: device queue × loops + the loop's index).
func (x *xsk) putInMap(mapFD int, key uint32) error {
	val := uint32(x.fd)
	// union bpf_attr for BPF_MAP_*_ELEM: map_fd, pad, key, value, flags.
	var attr [32]byte
	binary.NativeEndian.PutUint32(attr[0:], uint32(mapFD))
	binary.NativeEndian.PutUint64(attr[8:], uint64(uintptr(unsafe.Pointer(&key))))
	binary.NativeEndian.PutUint64(attr[16:], uint64(uintptr(unsafe.Pointer(&val))))
	if _, _, e := syscall.Syscall(sysBPF, bpfMapUpdateElem, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr)); e != 0 {
		return fmt.Errorf("AF_XDP queue %d: putting the socket in the XSKMAP: %w", x.queue, e)
	}
	return nil
}

// receive hands each received frame to fn and lends the chunks back to
// the kernel. The XDP program sent every frame here because its plan
// queue (the metadata before it) is this socket's loop's. It reports how
// many frames it handed over; it never waits.
func (x *xsk) receive(fn func(frame []byte)) int {
	prod := atomic.LoadUint32(x.rx.prod)
	cons := x.rx.cached
	if cons == prod {
		return 0
	}
	if x.ret == nil {
		x.ret = make([]uint64, 0, x.n)
	}
	ret := x.ret[:0]
	for ; cons != prod; cons++ {
		d := x.rx.xdesc(cons)
		a, l := d.addr, uint64(d.len)
		if a+l <= uint64(len(x.umem)) {
			fn(x.umem[a : a+l])
		}
		ret = append(ret, a&^(xskChunk-1))
	}
	atomic.StoreUint32(x.rx.cons, cons)
	x.rx.cached = cons
	// The fill ring is as long as the chunks the queue's sockets lend,
	// so there is always room to lend these back.
	if x.fillMu != nil {
		x.fillMu.Lock()
	}
	for _, a := range ret {
		*x.fill.addr(x.fill.cached) = a
		x.fill.cached++
	}
	atomic.StoreUint32(x.fill.prod, x.fill.cached)
	if x.fillMu != nil {
		x.fillMu.Unlock()
	}
	x.ret = ret
	// A zero-copy driver that ran out of chunks stops until it is told
	// there are new ones (the fill ring's need-wakeup flag).
	if x.needWakeup && atomic.LoadUint32(x.fill.flags)&xdpRingNeedWakeup != 0 {
		x.kick()
	}
	return len(ret)
}

// ready reports whether frames wait on the receive ring.
func (x *xsk) ready() bool { return atomic.LoadUint32(x.rx.prod) != x.rx.cached }

// kick asks the kernel to go on receiving: in zero-copy mode it wakes the
// driver (xsk_recvmsg), and with busy polling it polls the device's NAPI
// context (sk_busy_loop). It never blocks.
func (x *xsk) kick() {
	syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(x.fd), 0, 0, msgDontwait, 0, 0)
}

// send puts the batch's frames on the transmit ring and wakes the kernel
// to send them when it asks for it (copy mode always does: it sends only
// in the system call). It returns the frames sent and the first error.
func (x *xsk) send(b *txBatch) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.reclaim()
	queued := 0
	for i := 0; i < b.used && len(x.free) > 0; i++ {
		f := b.frame(i)
		a := x.free[len(x.free)-1]
		x.free = x.free[:len(x.free)-1]
		copy(x.umem[a:a+xskChunk], f)
		*x.tx.xdesc(x.tx.cached) = xdpDesc{addr: a, len: uint32(len(f))}
		x.tx.cached++
		queued++
	}
	b.used = 0
	atomic.StoreUint32(x.tx.prod, x.tx.cached)
	var err error
	// The kernel sends at most TX_BATCH_SIZE (32) frames a call in copy
	// mode and answers EAGAIN for the rest (xsk_generic_xmit,
	// net/xdp/xsk.c); a zero-copy driver takes them all at once. The
	// call does not block (MSG_DONTWAIT), so it is made without telling
	// the scheduler (RawSyscall): that would wake Go's sysmon.
	for try := 0; try < 64 && atomic.LoadUint32(x.tx.cons) != x.tx.cached; try++ {
		if x.needWakeup && atomic.LoadUint32(x.tx.flags)&xdpRingNeedWakeup == 0 {
			break
		}
		_, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(x.fd), 0, 0, msgDontwait, 0, 0)
		if e != 0 && e != syscall.EAGAIN && e != syscall.EBUSY && e != syscall.EINTR && e != syscall.ENOBUFS {
			err = e
			break
		}
	}
	x.reclaim()
	return queued, err
}

// reclaim takes the chunks of sent frames back from the completion ring.
func (x *xsk) reclaim() {
	prod := atomic.LoadUint32(x.cr.prod)
	cons := x.cr.cached
	for ; cons != prod; cons++ {
		x.free = append(x.free, *x.cr.addr(cons)&^(xskChunk-1))
	}
	if cons != x.cr.cached {
		x.cr.cached = cons
		atomic.StoreUint32(x.cr.cons, cons)
	}
}

// xdpPort is one loop's view of the AF_XDP sockets: its socket on each
// device queue, and the socket it transmits through.
type xdpPort struct {
	socks []*xsk
	tx    *xsk
}

func (p *xdpPort) receive(fn func(frame []byte)) int {
	n := 0
	for _, x := range p.socks {
		n += x.receive(fn)
	}
	return n
}

func (p *xdpPort) ready() bool {
	for _, x := range p.socks {
		if x.ready() {
			return true
		}
	}
	return false
}

func (p *xdpPort) fds() []int {
	var fds []int
	for _, x := range p.socks {
		fds = append(fds, x.fd)
	}
	return fds
}

func (p *xdpPort) kick() {
	for _, x := range p.socks {
		x.kick()
	}
}

func (p *xdpPort) setBusyPoll(budget int) error {
	for _, x := range p.socks {
		if err := setBusyPoll(x.fd, budget); err != nil {
			return err
		}
	}
	return nil
}

func (p *xdpPort) flushBatch(b *txBatch) (int, error) { return p.tx.send(b) }

func (p *xdpPort) close() {}
