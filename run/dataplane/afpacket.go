package dataplane

import (
	"fmt"
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
	tpacketV3            = 2
	packetFanout         = 18
	packetFanoutEBPF     = 7
	packetFanoutData     = 22
	packetIgnoreOutgoing = 23
	soAttachBPF          = 50
	tpStatusUser         = 1
	ethPAll              = 0x0003
)

// packetSocket is one AF_PACKET socket with a TPACKET_V3 receive ring
// (Documentation/networking/packet_mmap.rst): the kernel fills blocks of
// frames; user space walks a block and hands it back.
type packetSocket struct {
	fd        int
	ring      []byte
	blockSize int
	blocks    int
	next      int
	to        syscall.SockaddrLinklayer
}

// tpacketReq3 is struct tpacket_req3.
type tpacketReq3 struct {
	blockSize, blockNr, frameSize, frameNr uint32
	retireBlkTov, sizeofPriv, featureReq   uint32
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacket opens one queue's socket on ifindex: outgoing frames
// ignored, the filter program attached, the ring mapped, and the socket
// joined to fanout group group (in queue order: the fanout program's
// answer is the index of the socket in join order).
func openPacket(ifindex, filterFD, group int) (*packetSocket, error) {
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(ethPAll)))
	if err != nil {
		return nil, fmt.Errorf("opening an AF_PACKET socket: %w", err)
	}
	s := &packetSocket{fd: fd, blockSize: 1 << 20, blocks: 8}
	fail := func(what string, err error) (*packetSocket, error) {
		s.close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := syscall.SetsockoptInt(fd, solPacket, packetVersion, tpacketV3); err != nil {
		return fail("PACKET_VERSION TPACKET_V3", err)
	}
	if err := syscall.SetsockoptInt(fd, solPacket, packetIgnoreOutgoing, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	if filterFD >= 0 {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soAttachBPF, filterFD); err != nil {
			return fail("SO_ATTACH_BPF", err)
		}
	}
	req := tpacketReq3{blockSize: uint32(s.blockSize), blockNr: uint32(s.blocks), frameSize: 2048,
		frameNr: uint32(s.blockSize / 2048 * s.blocks), retireBlkTov: 1} // retire a partly filled block after 1 ms
	if _, _, e := syscall.Syscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), solPacket, packetRxRing, uintptr(unsafe.Pointer(&req)), unsafe.Sizeof(req), 0); e != 0 {
		return fail("PACKET_RX_RING", e)
	}
	if s.ring, err = syscall.Mmap(fd, 0, s.blockSize*s.blocks, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_LOCKED); err != nil {
		if s.ring, err = syscall.Mmap(fd, 0, s.blockSize*s.blocks, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err != nil {
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

// setFanoutProgram gives the fanout group its eBPF program.
func (s *packetSocket) setFanoutProgram(progFD int) error {
	if err := syscall.SetsockoptInt(s.fd, solPacket, packetFanoutData, progFD); err != nil {
		return fmt.Errorf("PACKET_FANOUT_DATA: %w", err)
	}
	return nil
}

func (s *packetSocket) close() {
	if s.ring != nil {
		syscall.Munmap(s.ring)
		s.ring = nil
	}
	if s.fd >= 0 {
		syscall.Close(s.fd)
		s.fd = -1
	}
}

// status is the block's status word, written by the kernel.
func (s *packetSocket) status(b int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.ring[b*s.blockSize+8]))
}

// receive hands every frame of the next ready block to fn and returns the
// block to the kernel; it waits up to timeoutMs for one. It reports how
// many frames it handed over.
func (s *packetSocket) receive(timeoutMs int, fn func(frame []byte)) (int, error) {
	st := s.status(s.next)
	if atomic.LoadUint32(st)&tpStatusUser == 0 {
		fds := []pollFd{{fd: int32(s.fd), events: pollIn}}
		if err := poll(fds, timeoutMs); err != nil {
			return 0, err
		}
		if atomic.LoadUint32(st)&tpStatusUser == 0 {
			return 0, nil
		}
	}
	base := s.next * s.blockSize
	blk := s.ring[base : base+s.blockSize]
	n := int(le32(blk[12:]))
	off := int(le32(blk[16:]))
	for i := 0; i < n && off > 0 && off+32 <= len(blk); i++ {
		h := blk[off:]
		snap := int(le32(h[12:]))
		mac := int(uint16(h[24]) | uint16(h[25])<<8)
		if mac+snap <= len(h) {
			fn(h[mac : mac+snap])
		}
		next := int(le32(h[0:]))
		if next == 0 {
			break
		}
		off += next
	}
	atomic.StoreUint32(st, 0) // TP_STATUS_KERNEL
	s.next = (s.next + 1) % s.blocks
	return n, nil
}

// send transmits one frame on the interface.
func (s *packetSocket) send(frame []byte) error {
	return syscall.Sendto(s.fd, frame, 0, &s.to)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1

func poll(fds []pollFd, timeoutMs int) error {
	_, _, e := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(timeoutMs))
	if e != 0 && e != syscall.EINTR {
		return fmt.Errorf("poll: %w", e)
	}
	return nil
}
