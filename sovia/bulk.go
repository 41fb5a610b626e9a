//go:build linux

package sovia

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// Bulk datagrams. A message longer than one frame costs the sender a
// frame through the kernel's transmit path for every MTU of it, and on a
// veth the receiver's softirq work too (23 frames for 32 KiB at MTU
// 1500), where kernel TCP hands the link one 64 KB segment and lets the
// device, or the kernel's generic segmentation offload (GSO) just before
// it, cut it. A packet socket can hand the kernel such a segment as well
// (PACKET_VNET_HDR, packet(7): a struct virtio_net_hdr before the frame
// asks for segmentation and a checksum), but the kernel segments only
// IPv4 and IPv6 (virtio_net_hdr_to_skb, skb_mac_gso_segment). So a host
// sends a message of several frames as bulk datagrams: IPv4/UDP
// datagrams whose payload is a run of blocks, each a VI header (with the
// block's length) and the bytes of the message it carries, every block
// but the last exactly one segment long. The kernel's UDP segmentation
// (__udp_gso_segment) cuts the payload at segment boundaries and copies
// the Ethernet, IPv4 and UDP headers to each piece, so each segment on
// the wire is a whole block behind headers of its own: a receiver takes
// the datagram whole (a veth passes the segment along unsegmented) or
// its segments one by one (a NIC without receive offloads), the same way.
//
// The datagrams go to 224.0.0.0, the base address of the Local Network
// Control Block, whose traffic is not forwarded off the link (RFC 5771
// §4), and an address never assigned to a group (RFC 1112 §4), with a
// time to live of 1 (RFC 1112 §6.1): no host joins that group and no
// router forwards it, so a host's IP stack drops the datagram unread,
// without an ICMP answer (ip_route_input_rcu, net/ipv4/route.c, refuses
// a group the interface has not joined), while the VIs' packet socket,
// which sees frames before the IP stack, takes it. The source is an IPv4
// link-local address (RFC 3927 §2.1: 169.254.1.0 to 169.254.254.255)
// made from the sender's Ethernet address: the VI is addressed by its
// Ethernet address, and no one answers or routes to the source, but
// 0.0.0.0 is a source only a host learning its own address may send
// from (RFC 1122 §3.2.1.3), which an XDP program that checks sources
// would drop.
//
// A host offers to take bulk datagrams in every header it sends
// (flagBulk); a VI sends them only once its peer offered, so a peer that
// does not take them (an older one, or a host opened with
// HostOptions.NoBulkReceive) is sent frames. A host cannot know that
// every bulk datagram sent to it is dropped on the way (an XDP program in
// front of its socket that takes the interface's IPv4 frames for a stack
// of its own): a VI none of whose bulk datagrams was acknowledged gives
// them up for good after bulkTries timeouts in a row and sends its
// messages as frames (abandonBulk).

const (
	etherTypeIPv4 = 0x0800
	ipHeader      = 20 // IPv4 header without options (RFC 791 §3.1)
	udpHeader     = 8  // RFC 768
	// bulkHead is what precedes a bulk datagram's first block.
	bulkHead = 14 + ipHeader + udpHeader
	// BulkPort is a bulk datagram's UDP source and destination port:
	// the VI EtherType's number.
	BulkPort = EtherType
	// vnetHeader is struct virtio_net_hdr's size (linux/virtio_net.h).
	vnetHeader = 10
	// maxBulk bounds the bytes of one bulk datagram's UDP payload: an
	// IPv4 datagram's length is 16 bits (RFC 791 §3.1).
	maxBulk = 1<<16 - 1 - ipHeader - udpHeader
)

// A VI's knowledge of its peer's bulk datagrams (RawVI.bulk).
const (
	bulkUnknown   = iota // no header said the peer takes them
	bulkOffered          // one said so
	bulkAbandoned        // none was acknowledged: frames for good
)

// bulkTries is how many timeouts in a row of a message sent as bulk
// datagrams, none of which was ever acknowledged, make a VI give them
// up: with 1% of frames lost, a 23-segment datagram is lost about one
// time in five, three times in a row about one in a hundred; the
// timeouts (10, 20, 40 ms) cost 70 ms once. After bulkTriesAcked in a
// row a VI gives them up even though some were acknowledged once (the
// path changed: an XDP program attached in front of the peer's socket),
// rather than break when its Retries run out; six losses in a row of
// one message are about one in 10,000 at 1% frame loss.
const (
	bulkTries      = 3
	bulkTriesAcked = 2 * bulkTries
)

// maxBlocks bounds the blocks of one bulk datagram: each takes two of a
// message's I/O vectors, of which the kernel takes at most UIO_MAXIOV,
// 1,024 (include/uapi/linux/uio.h); on an MTU below about 160 bytes a
// datagram of maxBulk would need more.
const maxBlocks = 500

// abandonBulk makes the VI send frames from now on (v.tx.mu held): its
// messages waiting for acknowledgement are cut anew when next sent
// (RawVI.cut), and the receiver takes a message cut two ways
// (reasm.cover).
func (v *RawVI) abandonBulk() {
	if v.bulk.Swap(bulkAbandoned) != bulkAbandoned {
		v.host.bulkAbandoned.Add(1)
	}
}

// bulkGroup is a bulk datagram's IPv4 destination (above), 224.0.0.0, as
// a big-endian word.
const bulkGroup = 224 << 24

// The virtio_net_hdr fields the sender sets (linux/virtio_net.h).
const (
	vnetNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetGSOUDPL4  = 5 // VIRTIO_NET_HDR_GSO_UDP_L4
	// packetVnetHdr is PACKET_VNET_HDR (linux/if_packet.h).
	packetVnetHdr = 15
	// packetCopyThresh is PACKET_COPY_THRESH: a frame longer than a
	// slot of the socket's receive ring is queued whole on the socket
	// as well, its slot marked TP_STATUS_COPY (af_packet.c, tpacket_rcv).
	packetCopyThresh = 7
)

// errBulkRefused wraps the kernel's refusal of a bulk datagram (a
// kernel without UDP segmentation for packet sockets): the message goes
// as frames, and so do the host's next ones.
var errBulkRefused = errors.New("sovia: the kernel refused a bulk datagram")

// bulkLink is a Link that sends bulk datagrams: hdrs[i] is block i's
// header and parts[i] its bytes; every block but the last of a datagram
// is seg bytes long.
type bulkLink interface {
	sendBulk(to, from [6]byte, hdrs, parts [][]byte, seg int) error
}

// bulkBlock is how many bytes of a message a block of a bulk datagram
// carries on a link of MTU mtu: a segment is an MTU's IPv4 datagram. It
// is 0 where no block fits (an MTU too small for the headers, or one so
// large that a block would not fit a datagram).
func bulkBlock(mtu int) int {
	if per := mtu - ipHeader - udpHeader - rawHeader; per > 0 && rawHeader+per <= maxBulk {
		return per
	}
	return 0
}

// transmitBulk sends a message's bytes as bulk datagrams of blocks of
// per bytes (h.sendMu held), x its first header. It reports false,
// having sent nothing, when the kernel refuses them; the host then sends
// frames from then on.
func (h *RawHost) transmitBulk(v *RawVI, x header, data []byte, per int) (bool, error) {
	b := h.link.(bulkLink)
	n := (len(data) + per - 1) / per
	if cap(h.blocks) < n*rawHeader {
		h.blocks = make([]byte, n*rawHeader)
	}
	hdrs, parts := h.frames[:0], h.parts[:0]
	for at := 0; at < len(data); at += per {
		part := data[at:min(at+per, len(data))]
		x.at = uint32(at)
		hd := h.blocks[len(hdrs)*rawHeader:][:rawHeader]
		h.putHeader(hd, x, len(part))
		hdrs, parts = append(hdrs, hd), append(parts, part)
	}
	h.frames, h.parts = hdrs, parts
	err := b.sendBulk(v.remote, h.local, hdrs, parts, rawHeader+per)
	if errors.Is(err, errBulkRefused) {
		h.bulkOut = false
		return false, nil
	}
	return true, err
}

// putBulkHead writes the virtio_net_hdr, Ethernet, IPv4 and UDP headers
// of a bulk datagram from one host to another with a payload of n bytes
// cut into segments of seg (none when n fits one).
func putBulkHead(b []byte, to, from [6]byte, n, seg int) {
	v := b[:vnetHeader]
	clear(v)
	v[0] = vnetNeedsCsum
	binary.LittleEndian.PutUint16(v[6:], 14+ipHeader) // csum_start: the UDP header
	binary.LittleEndian.PutUint16(v[8:], 6)           // csum_offset: its checksum field
	if n > seg {
		v[1] = vnetGSOUDPL4
		binary.LittleEndian.PutUint16(v[2:], bulkHead) // hdr_len
		binary.LittleEndian.PutUint16(v[4:], uint16(seg))
	}
	f := b[vnetHeader:]
	copy(f[0:6], to[:])
	copy(f[6:12], from[:])
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv4)
	ip := f[14:]
	ip[0], ip[1] = 0x45, 0 // version 4, 5 words; no TOS
	binary.BigEndian.PutUint16(ip[2:], uint16(ipHeader+udpHeader+n))
	binary.BigEndian.PutUint16(ip[4:], 0)      // identification: the segmenter numbers them
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
	ip[8], ip[9] = 1, syscall.IPPROTO_UDP      // time to live 1 (RFC 1112 §6.1)
	binary.BigEndian.PutUint16(ip[10:], 0)
	ip[12], ip[13], ip[14], ip[15] = 169, 254, 1+from[4]%254, from[5] // link-local (above)
	binary.BigEndian.PutUint32(ip[16:], bulkGroup)
	binary.BigEndian.PutUint16(ip[10:], ^sum16(ip[:ipHeader], 0))
	u := ip[ipHeader:]
	binary.BigEndian.PutUint16(u[0:], BulkPort)
	binary.BigEndian.PutUint16(u[2:], BulkPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpHeader+n))
	// NEEDS_CSUM: the field holds the pseudo-header's sum (RFC 768),
	// which whoever finishes the checksum adds the datagram's to
	// (skb_checksum_help; __udp_gso_segment adjusts it per segment).
	pseudo := sum16(ip[12:20], uint32(syscall.IPPROTO_UDP)+uint32(udpHeader+n))
	binary.BigEndian.PutUint16(u[6:], pseudo)
}

// sum16 is the ones'-complement sum of b's 16-bit words, plus acc
// (RFC 1071 §4.1), folded to 16 bits.
func sum16(b []byte, acc uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}

// bulkHeadLen is what the socket is given before a bulk datagram's
// first block.
const bulkHeadLen = vnetHeader + bulkHead

// sendBulk sends the blocks as bulk datagrams of up to maxBulk bytes,
// all with one sendmmsg(2) on the socket with PACKET_VNET_HDR. A refusal
// of the first datagram (EINVAL, EOPNOTSUPP, EPROTONOSUPPORT: a kernel
// that does not segment UDP for packet sockets, or a device that takes no
// IPv4) is errBulkRefused, and nothing was sent.
func (l *packetLink) sendBulk(to, from [6]byte, hdrs, parts [][]byte, seg int) error {
	perDatagram := min(maxBulk/seg, maxBlocks)
	datagrams := (len(hdrs) + perDatagram - 1) / perDatagram
	if need := datagrams * bulkHeadLen; cap(l.bulkHeads) < need {
		l.bulkHeads = make([]byte, need)
	}
	iovs, msgs := l.bulkIov[:0], l.bulkMsgs[:0]
	for d := 0; d < datagrams; d++ {
		first, last := d*perDatagram, min((d+1)*perDatagram, len(hdrs))
		n := 0
		for i := first; i < last; i++ {
			n += len(hdrs[i]) + len(parts[i])
		}
		head := l.bulkHeads[d*bulkHeadLen:][:bulkHeadLen]
		putBulkHead(head, to, from, n, seg)
		at := len(iovs)
		iovs = append(iovs, syscall.Iovec{Base: &head[0], Len: bulkHeadLen})
		for i := first; i < last; i++ {
			iovs = append(iovs, syscall.Iovec{Base: &hdrs[i][0], Len: uint64(len(hdrs[i]))})
			if len(parts[i]) > 0 {
				iovs = append(iovs, syscall.Iovec{Base: &parts[i][0], Len: uint64(len(parts[i]))})
			}
		}
		msgs = append(msgs, mmsghdr{hdr: syscall.Msghdr{Name: (*byte)(unsafe.Pointer(&l.bulkTo)), Namelen: uint32(unsafe.Sizeof(l.bulkTo)), Iovlen: uint64(len(iovs) - at)}})
	}
	// iovs no longer grows (and moves): point each message at its
	// vectors.
	at := 0
	for i := range msgs {
		msgs[i].hdr.Iov = &iovs[at]
		at += int(msgs[i].hdr.Iovlen)
	}
	l.bulkIov, l.bulkMsgs = iovs, msgs
	blocksOf := func(d int) int { return min((d+1)*perDatagram, len(hdrs)) - d*perDatagram }
	for sent := 0; sent < len(msgs); {
		if l.closed.Load() {
			return errors.New("sovia: the link is closed")
		}
		r, _, e := l.ring.call(sysSendmmsg, uintptr(l.bulkfd), uintptr(unsafe.Pointer(&msgs[sent])), uintptr(len(msgs)-sent), 0, 0, 0)
		switch e {
		case 0:
			for d := sent; d < sent+int(r); d++ {
				l.counts.sent.Add(uint64(blocksOf(d)))
			}
			l.counts.bulkSent.Add(uint64(r))
			sent += int(r)
		case syscall.ENOBUFS, syscall.EAGAIN, syscall.EINTR:
			waitRoom()
		case syscall.EINVAL, syscall.EOPNOTSUPP, syscall.EPROTONOSUPPORT:
			if sent == 0 {
				l.counts.bulkRefused.Add(1)
				return fmt.Errorf("%w: %v", errBulkRefused, e)
			}
			fallthrough
		default:
			for d := sent; d < len(msgs); d++ {
				l.counts.sendErrors.Add(uint64(blocksOf(d)))
			}
			return e
		}
	}
	return nil
}

// bulkFilter is the classic BPF program (filter.txt in the kernel's
// networking documentation) of a socket that takes both the VI's frames
// and bulk datagrams (the socket is bound to every protocol,
// ETH_P_ALL): EtherType 0x88B5, or IPv4 without options or fragments,
// UDP, to bulkGroup and BulkPort. The rest of the interface's frames
// never reach the socket. (Written out here: the package uses the
// standard library alone, see source.go.)
func bulkFilter() []syscall.SockFilter {
	const (
		ldh    = syscall.BPF_LD | syscall.BPF_H | syscall.BPF_ABS
		ldb    = syscall.BPF_LD | syscall.BPF_B | syscall.BPF_ABS
		ldw    = syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS
		jeq    = syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K
		jset   = syscall.BPF_JMP | syscall.BPF_JSET | syscall.BPF_K
		ret    = syscall.BPF_RET | syscall.BPF_K
		accept = 0xFFFF_FFFF // the whole frame
	)
	// Each jump goes on to the next instruction or to the end: accept
	// (the next to last) or reject (the last), counted from the jump's
	// successor.
	return []syscall.SockFilter{
		{Code: ldh, K: 12},                         // 0: the EtherType
		{Code: jeq, K: EtherType, Jt: 11},          // 1: a VI frame: accept
		{Code: jeq, K: etherTypeIPv4, Jf: 11},      // 2: not IPv4: reject
		{Code: ldb, K: 14},                         // 3: version and header length
		{Code: jeq, K: 0x45, Jf: 9},                // 4: options: reject
		{Code: ldh, K: 14 + 6},                     // 5: flags and fragment offset
		{Code: jset, K: 0x3fff, Jt: 7},             // 6: a fragment: reject
		{Code: ldb, K: 14 + 9},                     // 7: the protocol
		{Code: jeq, K: syscall.IPPROTO_UDP, Jf: 5}, // 8: not UDP: reject
		{Code: ldw, K: 14 + 16},                    // 9: the destination
		{Code: jeq, K: bulkGroup, Jf: 3},           // 10: another: reject
		{Code: ldh, K: 14 + ipHeader + 2},          // 11: the UDP destination port
		{Code: jeq, K: BulkPort, Jf: 1},            // 12: another: reject
		{Code: ret, K: accept},                     // 13
		{Code: ret, K: 0},                          // 14: reject
	}
}

// inputBulk takes a bulk datagram (Input has checked its Ethernet
// destination): its blocks, one after the other, each a VI header and
// the block's bytes. IPv4 frames that are not bulk datagrams are ignored
// (a link that shows the host every frame); a bulk datagram that is cut
// short or whose blocks overrun it is dropped, counted.
func (h *RawHost) inputBulk(f []byte) {
	if len(f) < bulkHead {
		return
	}
	ip := f[14:]
	if ip[0] != 0x45 || ip[9] != syscall.IPPROTO_UDP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 ||
		binary.BigEndian.Uint32(ip[16:]) != bulkGroup || binary.BigEndian.Uint16(ip[ipHeader+2:]) != BulkPort {
		return // another IPv4 datagram
	}
	n := int(binary.BigEndian.Uint16(ip[2:]))
	if n < ipHeader+udpHeader || n > len(ip) || int(binary.BigEndian.Uint16(ip[ipHeader+4:])) != n-ipHeader {
		h.countDrop(dropBulkLength) // its lengths disagree with the frame
		return
	}
	from := [6]byte(f[6:12])
	for p := ip[ipHeader+udpHeader : n]; len(p) > 0; {
		if len(p) < rawHeader {
			h.countDrop(dropTruncated)
			return
		}
		k := rawHeader + int(binary.BigEndian.Uint16(p[26:]))
		if k > len(p) {
			h.countDrop(dropBulkLength)
			return
		}
		h.inputVI(from, p[:k])
		p = p[k:]
	}
}

// attachBulkFilter attaches bulkFilter to socket fd.
func attachBulkFilter(fd int) error {
	f := bulkFilter()
	prog := syscall.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	_, _, e := syscall.Syscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), syscall.SOL_SOCKET, syscall.SO_ATTACH_FILTER, uintptr(unsafe.Pointer(&prog)), unsafe.Sizeof(prog), 0)
	if e != 0 {
		return e
	}
	return nil
}

// wholeBuffer is the socket buffer that holds the bulk datagrams queued
// whole (rxRing): a window of 32 KiB messages, each charged with its
// buffer's overhead, several times over.
const wholeBuffer = 8 << 20

// wholeFrames makes packet socket fd queue whole the frames longer than
// a slot of its ring (PACKET_COPY_THRESH), with room for them
// (SO_RCVBUFFORCE, which a process with CAP_NET_ADMIN may set above
// net.core.rmem_max, or SO_RCVBUF up to it: socket(7)).
func wholeFrames(fd int) error {
	if err := syscall.SetsockoptInt(fd, syscall.SOL_PACKET, packetCopyThresh, 1); err != nil {
		return fmt.Errorf("PACKET_COPY_THRESH: %w", err)
	}
	if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, wholeBuffer) != nil {
		syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, wholeBuffer)
	}
	return nil
}

// bulkSocket opens the packet socket bulk datagrams are sent on: bound
// to the interface with protocol 0, so that it receives nothing, with
// PACKET_VNET_HDR; -1 when the kernel refuses it.
func bulkSocket(ifindex int) int {
	fd, err := sendSocket(ifindex)
	if err != nil {
		return -1
	}
	if syscall.SetsockoptInt(fd, syscall.SOL_PACKET, packetVnetHdr, 1) != nil {
		syscall.Close(fd)
		return -1
	}
	return fd
}
