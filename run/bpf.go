package run

import (
	"encoding/binary"
	"errors"
	"fmt"
	gomaps "maps"
	"math"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/prg"
)

// The steering stage in eBPF. Its tables are hash maps with the model's
// capacities; its queues are the user-space receive loops. One classifier
// is written once and ends four ways: as the XDP program of the AF_XDP
// path, and as the fanout program, the per-socket filter and the tc
// ingress program of the AF_PACKET path.
//
// A frame is the stack's ("ours") when the LPG consumes it: an ARP request
// for one of the stack's addresses, an IPv4 datagram to one of its
// addresses carrying UDP (any port: the LPG answers a closed one) or an
// ICMP echo request, or any Open-MX frame. Everything else (TCP, other
// ICMP types, IPv6, frames of a VLAN, other hosts' traffic) belongs to
// the kernel and is passed up untouched, so the host keeps working. A
// priority tag (802.1Q with VID 0) is no tag, as in the LPG.
//
// The queue of one of ours is found as a NIC's steering finds it: the
// groups of rules in order (the first hit decides; a rule may drop), then
// the stage's miss rule: a fixed queue (linux-xdp's default), the queue
// the NIC chose (a hardware plan whose steering the driver took), or RSS
// computed here (a hardware plan whose RSS the driver refused). Fields
// mean what the PRG interpreter's decoder (internal/packet) says: ports
// exist only for a whole, well-formed UDP or TCP datagram.

// Program kinds.
const (
	progXDP    = iota // AF_XDP: redirect ours to the rx queue's socket, queue in metadata
	progFanout        // AF_PACKET: the fanout group's choice of socket
	progFilter        // AF_PACKET: a socket keeps ours only
	progTC            // tc ingress: the kernel does not see ours
	progCPU           // AF_PACKET's XDP program: kernel-socket endpoints' frames to their CPU, all else up
)

// Miss rules: what decides the queue of a frame no rule matches.
const (
	MissQueue  = iota // a fixed queue, Stage.MissQueue
	MissDevice        // the device queue it arrived on (the NIC steered it)
	MissRSS           // Stage.RSS, computed in the program
)

// DropQueue is the queue of a rule that drops (a NIC's drop action).
const DropQueue = ^uint32(0)

// Stage is what the classifier needs to know of a stack and a plan.
type Stage struct {
	Addrs     []netip.Addr // the stack's unicast addresses
	Bcasts    []netip.Addr // its broadcast addresses (UDP to them is its; ARP for them is not)
	ARP       bool         // the stack answers ARP
	ICMP      bool         // the stack answers echo requests
	OpenMX    bool         // the stack has Open-MX endpoints
	Groups    []Group      // rules, tried in order
	Miss      int          // MissQueue, MissDevice or MissRSS
	MissQueue uint32
	RSS       *RSS
	// Queues are the plan's queues in the order of the receive loops
	// (a fanout program answers with an index into them).
	Queues []uint32
	// Program is the LPG nodes the embedder placed on the stage (the
	// XDP program runs them first; run/stagegen.go), DropSites where
	// they drop, in the order of the drop counters.
	Program   []prg.StageNode
	DropSites []StageDrop
	Answers   []string // the nodes that answer (XDP_TX), counted after the drop sites
	MAC       [6]byte  // the stack's (first interface's) address, of the answers
	// The kernel-socket endpoints (run/kernel.go). With any, the stage
	// tells the stack's UDP and TCP endpoints apart: Demux are groups of
	// rules, tried in order, whose Queue is an index into Endpoints (with
	// demuxKernel set for a kernel-socket endpoint). A kernel-socket
	// endpoint's frame is steered as one of ours, and then redirected
	// to the CPU of its queue (CPUs: queue → CPU) instead of a receive
	// loop. KernelAddr: the kernel owns the stack's addresses, so ARP,
	// echo requests, UDP to no endpoint's port and fragments are its.
	Endpoints  []StageEndpoint
	Demux      []Group
	CPUs       map[uint32]int
	KernelAddr bool
	// qsize is the length of each CPU's queue in the cpumap (0:
	// cpumapQsize); a test makes it short.
	qsize int
}

// A Group is rules that compare the same key bytes: one hash map.
type Group struct {
	Table    string   // the plan table they come from
	Mask     [16]byte // the key bytes compared (key layout: see Key)
	Ports    bool     // the rules compare a port: frames without ports miss
	Capacity int      // the map's size
	Rules    []Rule
}

// A Rule steers the frames whose masked key is Key to Queue.
type Rule struct {
	Key   [16]byte
	Queue uint32 // DropQueue: drop
}

// RSS is receive-side scaling done by the program: the Toeplitz hash of
// the addresses (and ports, where enabled) picks a bucket of Indirection.
type RSS struct {
	Key                []byte
	Indirection        []uint32 // queue of each bucket; a power of two of them
	TCPPorts, UDPPorts bool
	Miss               uint32 // the queue of frames it does not hash (not IPv4)
}

// Key is the 16-byte key of a frame, in the frame's byte order so that
// the programs copy header bytes into it unchanged: source and destination
// address, source and destination port (zero without ports), protocol,
// three zero bytes.
func Key(proto uint8, src, dst netip.Addr, sport, dport uint16) [16]byte {
	var k [16]byte
	s, d := src.As4(), dst.As4()
	copy(k[0:4], s[:])
	copy(k[4:8], d[:])
	binary.BigEndian.PutUint16(k[8:], sport)
	binary.BigEndian.PutUint16(k[10:], dport)
	k[12] = proto
	return k
}

// keyBytes says where a plan field sits in the key.
var keyBytes = map[string]struct{ off, n int }{
	"ip.src": {0, 4}, "ip.dst": {4, 4},
	"l4.sport": {8, 2}, "udp.sport": {8, 2}, "tcp.sport": {8, 2},
	"l4.dport": {10, 2}, "udp.dport": {10, 2}, "tcp.dport": {10, 2},
	"ip.proto": {12, 1},
}

// maps are the stage's tables, filled from the plan.
type maps struct {
	addrs  *ebpf.Map
	groups []*ebpf.Map
	rss    *ebpf.Map // one value: the Toeplitz table, then the indirection
	xsks   *ebpf.Map // AF_XDP only
	drops  *ebpf.Map // per drop site of the stage's checks, then per answer, per CPU: frames
	// cfg is one word: 1 when the stage answers with XDP_TX (SetAnswers).
	cfg *ebpf.Map
	// The kernel-socket endpoints: the demultiplexer's groups, the
	// cpumap (nil when the kernel refused it), its CPUs by queue, and
	// the per-CPU counters of each endpoint (kernelCounters).
	demux   []*ebpf.Map
	cpumap  *ebpf.Map
	cpus    map[uint32]int
	kcounts *ebpf.Map
	// notes say what the maps could not do (a CPU not online, a kernel
	// without cpumaps): those frames pass to the kernel where they came.
	notes []string
}

// setAnswers turns the stage's answers (XDP_TX) on or off; off, the
// frames they would answer go to the receive loops, whose software
// answers them the same way.
func (m *maps) setAnswers(on bool) error {
	if m.cfg == nil {
		return nil
	}
	v := uint32(0)
	if on {
		v = 1
	}
	return m.cfg.Put(uint32(0), v)
}

func (m *maps) Close() {
	for _, x := range append(append([]*ebpf.Map{m.addrs, m.rss, m.xsks, m.drops, m.cfg, m.cpumap, m.kcounts}, m.groups...), m.demux...) {
		if x != nil {
			x.Close()
		}
	}
}

// The RSS map's value: for each of the 12 input bytes (addresses, ports)
// and each byte value, the 32 bits that byte XORs into the hash (Toeplitz
// is linear in its input), then the indirection table.
const (
	rssInput = 12
	rssTable = rssInput * 256 * 4
)

// toeplitzTable is the per-byte table of the hash under key.
func toeplitzTable(key []byte) []uint32 {
	t := make([]uint32, rssInput*256)
	var in [rssInput]byte
	for i := range rssInput {
		for b := range 256 {
			in[i] = byte(b)
			t[i*256+b] = packet.Toeplitz(key, in[:])
		}
		in[i] = 0
	}
	return t
}

func newMaps(s *Stage, xskQueues int) (*maps, error) {
	m := &maps{}
	var err error
	fail := func(what string, e error) (*maps, error) {
		m.Close()
		return nil, fmt.Errorf("creating the %s map: %w", what, e)
	}
	if m.addrs, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_addrs", Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: uint32(max(len(s.Addrs)+len(s.Bcasts), 1))}); err != nil {
		return fail("address", err)
	}
	for _, g := range s.Groups {
		if len(g.Rules) > g.Capacity {
			m.Close()
			return nil, fmt.Errorf("%s: %d rules; the stage's table holds %d", g.Table, len(g.Rules), g.Capacity)
		}
		mp, err := ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_rules", Type: ebpf.Hash, KeySize: 16, ValueSize: 4, MaxEntries: uint32(max(g.Capacity, 1))})
		if err != nil {
			return fail(g.Table, err)
		}
		m.groups = append(m.groups, mp)
		for _, r := range g.Rules {
			// The first rule of a key wins, as in the NIC's order.
			if err := mp.Update(r.Key[:], r.Queue, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
				return fail(g.Table, err)
			}
		}
	}
	if s.Miss == MissRSS {
		if s.RSS == nil || len(s.RSS.Indirection) == 0 || len(s.RSS.Indirection)&(len(s.RSS.Indirection)-1) != 0 {
			m.Close()
			return nil, errors.New("software RSS needs an indirection table of a power of two buckets")
		}
		val := make([]byte, rssTable+4*len(s.RSS.Indirection))
		for i, w := range toeplitzTable(s.RSS.Key) {
			binary.NativeEndian.PutUint32(val[4*i:], w)
		}
		for i, q := range s.RSS.Indirection {
			binary.NativeEndian.PutUint32(val[rssTable+4*i:], q)
		}
		if m.rss, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_rss", Type: ebpf.Array, KeySize: 4, ValueSize: uint32(len(val)), MaxEntries: 1}); err != nil {
			return fail("RSS", err)
		}
		if err := m.rss.Put(uint32(0), val); err != nil {
			return fail("RSS", err)
		}
	}
	if len(s.Program) > 0 {
		if m.drops, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_stage", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(max(len(s.DropSites)+len(s.Answers), 1))}); err != nil {
			return fail("drop counter", err)
		}
	}
	if len(s.Answers) > 0 {
		if m.cfg, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_stagecfg", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
			return fail("stage configuration", err)
		}
		// When the kernel owns the address (kernel-socket endpoints), it
		// answers ARP and ping: the stage's answers start off.
		if err := m.setAnswers(!s.KernelAddr); err != nil {
			return fail("stage configuration", err)
		}
	}
	if err := m.kernelMaps(s); err != nil {
		return fail("kernel-socket", err)
	}
	if xskQueues > 0 {
		// A socket per device queue and loop: key queue × loops + loop.
		n := xskQueues * max(len(s.Queues), 1)
		if m.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(n)}); err != nil {
			return fail("XSK", err)
		}
	}
	// The address map's value: 1 for a unicast address, 2 for a
	// broadcast one.
	for i, list := range [][]netip.Addr{s.Addrs, s.Bcasts} {
		for _, a := range list {
			k := a.As4()
			if err := m.addrs.Put(k[:], []byte{byte(i + 1)}); err != nil {
				return fail("address", err)
			}
		}
	}
	return m, nil
}

// Stack layout of the classifier (offsets from the frame pointer R10).
const (
	stEth   = -50 // 14 bytes of Ethernet header, then the IPv4 header or ARP body (4-aligned)
	stIP    = stEth + 14
	stKey   = -72    // the frame's 16-byte key
	stTmp   = -88    // a masked key
	stAddr  = -92    // a 4-byte address key
	stICMP  = -96    // the ICMP type byte
	stLen   = -104   // the bytes from the IPv4 header on
	stHdr   = -112   // 1 when the IPv4 header fits the frame (ip.hdr_ok)
	stL3    = -120   // where the IPv4 header or ARP body starts: 14, or 18 after a priority tag
	stKern  = -124   // a kernel-socket endpoint's index in Stage.Endpoints plus one; 0: not one
	ethARP  = 0x0608 // 0x0806 read as a little-endian half word
	ethIPv4 = 0x0008
	ethOMX  = 0xdf86 // Open-MX's EtherType 0x86DF, read little-endian
	ethVLAN = 0x0081 // 802.1Q's 0x8100, read little-endian
)

// hasDrops reports whether a rule of s drops.
func (s *Stage) hasDrops() bool {
	for _, g := range s.Groups {
		for _, r := range g.Rules {
			if r.Queue == DropQueue {
				return true
			}
		}
	}
	return false
}

// takesL2 reports whether a frame other than IPv4 can be one of ours
// (ARP, Open-MX). The software VI's frames (EtherType 0x88B5) never are:
// every program passes them to the kernel, which hands them to the VIs'
// own packet socket (dataplane.VIs); the tc program's TCX_NEXT keeps them
// visible to it, a socket bound to one EtherType seeing frames after tc
// ingress (__netif_receive_skb_core).
func (s *Stage) takesL2() bool { return s.ARP || s.OpenMX }

// classifier returns the program of the given kind for stage s over m.
// The kernel's verifier refuses a program with an instruction no jump
// reaches ("unreachable insn"), so a block is emitted only when a jump
// leads to it.
func classifier(kind int, s *Stage, m *maps) asm.Instructions {
	var in asm.Instructions
	var next string // the label of the next instruction
	add := func(x ...asm.Instruction) {
		if next != "" && len(x) > 0 {
			x[0], next = x[0].WithSymbol(next), ""
		}
		in = append(in, x...)
	}
	// load copies n bytes at offset off (register or constant) of the frame
	// to the stack at dst, or jumps to fail when the frame is too short.
	xdp := kind == progXDP || kind == progCPU
	load := func(offReg asm.Register, off int32, dst int16, n int32, fail string) {
		add(asm.Mov.Reg(asm.R1, asm.R6))
		if offReg != asm.R0 {
			add(asm.Mov.Reg(asm.R2, offReg))
			if off != 0 {
				add(asm.Add.Imm(asm.R2, off))
			}
		} else {
			add(asm.Mov.Imm(asm.R2, off))
		}
		add(asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, int32(dst)), asm.Mov.Imm(asm.R4, n))
		if xdp {
			add(asm.FnXdpLoadBytes.Call())
		} else {
			add(asm.Mov.Imm(asm.R5, 0), asm.FnSkbLoadBytesRelative.Call()) // BPF_HDR_START_MAC
		}
		add(asm.JNE.Imm(asm.R0, 0, fail))
	}
	lookup := func(fd int, key int16) {
		add(asm.LoadMapPtr(asm.R1, fd), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, int32(key)), asm.FnMapLookupElem.Call())
	}
	// Only the programs that pick a socket, and a filter that must drop,
	// need the queue; the others stop at "ours".
	steer := xdp || kind == progFanout || kind == progFilter && s.hasDrops()
	l2, ip := "ours", "ours"
	if steer {
		l2, ip = "l2ours", "ipours"
	}

	if kind == progXDP && len(s.Program) > 0 {
		// The placed checks first; a frame they do not decide goes on
		// to the steering.
		add(asm.Mov.Reg(asm.R6, asm.R1))
		cfg := -1
		if m.cfg != nil {
			cfg = m.cfg.FD()
		}
		add(stageProgram(s.Program, s.MAC, m.drops.FD(), cfg, "classify")...)
		next = "classify"
	} else {
		add(asm.Mov.Reg(asm.R6, asm.R1))
	}
	add(asm.Mov.Imm(asm.R7, 0))
	if xdp && len(s.Demux) > 0 {
		add(asm.StoreImm(asm.R10, stKern, 0, asm.Word))
	}
	if !xdp {
		// A socket program sees a frame after the kernel took its
		// 802.1Q tag off into the skb (__netif_receive_skb_core,
		// skb_vlan_untag). A frame of a VLAN is the kernel's (the LPG
		// drops it: no interface declares a VLAN); a priority tag (VID
		// 0) is no tag (IEEE 802.1Q).
		add(asm.LoadMem(asm.R0, asm.R6, 20, asm.Word), // __sk_buff.vlan_present
			asm.JEq.Imm(asm.R0, 0, "eth"),
			asm.LoadMem(asm.R0, asm.R6, 24, asm.Word), // __sk_buff.vlan_tci
			asm.And.Imm(asm.R0, 0x0fff),
			asm.JNE.Imm(asm.R0, 0, "pass"))
		next = "eth"
	}
	load(asm.R0, 0, stEth, 14, "pass")
	add(asm.StoreImm(asm.R10, stL3, 14, asm.Word),
		asm.LoadMem(asm.R0, asm.R10, stEth+12, asm.Half),
		asm.JEq.Imm(asm.R0, ethVLAN, "tagged"))
	next = "ethtype"
	if s.ARP {
		add(asm.JEq.Imm(asm.R0, ethARP, "arp"))
	}
	if s.OpenMX {
		add(asm.JEq.Imm(asm.R0, ethOMX, l2))
	}
	add(asm.JNE.Imm(asm.R0, ethIPv4, "pass"))

	// IPv4 (RFC 791 §3.1): version and IHL, then the destination.
	add(asm.LoadMem(asm.R8, asm.R10, stL3, asm.Word))
	load(asm.R8, 0, stIP, 20, "pass")
	add(
		asm.LoadMem(asm.R0, asm.R10, stIP, asm.Byte),
		asm.Mov.Reg(asm.R1, asm.R0), asm.RSh.Imm(asm.R1, 4),
		asm.JNE.Imm(asm.R1, 4, "pass"),
		asm.And.Imm(asm.R0, 0xf),
		asm.JLT.Imm(asm.R0, 5, "pass"),
		asm.LSh.Imm(asm.R0, 2), asm.Add.Reg(asm.R0, asm.R8), asm.Mov.Reg(asm.R8, asm.R0), // the L4 offset
		asm.LoadMem(asm.R0, asm.R10, stIP+16, asm.Word), asm.StoreMem(asm.R10, stAddr, asm.R0, asm.Word),
	)
	lookup(m.addrs.FD(), stAddr)
	add(
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R9, asm.R10, stIP+9, asm.Byte), // protocol
		// Flags and fragment offset, read little-endian: MF and the
		// offset are the mask 0x3fff of the big-endian half word.
		asm.LoadMem(asm.R0, asm.R10, stIP+6, asm.Half), asm.And.Imm(asm.R0, 0xff3f),
		asm.JEq.Imm(asm.R0, 0, "whole"))
	if !s.KernelAddr {
		// A fragment of a UDP datagram is the LPG's (it sinks
		// fragments); others go to the kernel, which reassembles. When
		// the kernel owns the address, every fragment is its own.
		add(asm.JEq.Imm(asm.R9, 17, ip))
	}
	add(asm.Ja.Label("pass"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("whole"))
	if len(s.Demux) > 0 {
		add(asm.JEq.Imm(asm.R9, 17, "demux"), asm.JEq.Imm(asm.R9, 6, "demux"))
	} else {
		add(asm.JEq.Imm(asm.R9, 17, ip))
	}
	if s.ICMP {
		add(asm.JNE.Imm(asm.R9, 1, "pass"))
		load(asm.R8, 0, stICMP, 1, "pass")
		add(asm.LoadMem(asm.R0, asm.R10, stICMP, asm.Byte), asm.JNE.Imm(asm.R0, 8, "pass"), asm.Ja.Label(ip))
	} else {
		add(asm.Ja.Label("pass"))
	}

	if s.ARP {
		// ARP (RFC 826): a request (opcode 1) for one of our addresses.
		add(asm.LoadMem(asm.R8, asm.R10, stL3, asm.Word).WithSymbol("arp"))
		load(asm.R8, 0, stIP, 28, "pass")
		add(asm.LoadMem(asm.R0, asm.R10, stIP+6, asm.Half), asm.JNE.Imm(asm.R0, 0x0100, "pass"),
			asm.LoadMem(asm.R0, asm.R10, stIP+24, asm.Word), asm.StoreMem(asm.R10, stAddr, asm.R0, asm.Word))
		lookup(m.addrs.FD(), stAddr)
		// A request for a broadcast address is not answered (RFC 1122
		// §3.3.6: a host does not take a broadcast address as its own).
		add(asm.JEq.Imm(asm.R0, 0, "pass"), asm.LoadMem(asm.R0, asm.R0, 0, asm.Byte), asm.JNE.Imm(asm.R0, 1, "pass"), asm.Ja.Label(l2))
	}

	// An 802.1Q tag in the frame (XDP sees it before the kernel takes
	// it off): a priority tag is no tag, the EtherType after it decides;
	// a frame of a VLAN is the kernel's. One tag: a second one is not an
	// EtherType of ours.
	add(asm.Mov.Imm(asm.R0, 0).WithSymbol("tagged"))
	load(asm.R0, 14, stTmp, 4, "pass")
	add(asm.LoadMem(asm.R0, asm.R10, stTmp, asm.Half), asm.And.Imm(asm.R0, 0xff0f), // the VID, read little-endian
		asm.JNE.Imm(asm.R0, 0, "pass"),
		asm.StoreImm(asm.R10, stL3, 18, asm.Word),
		asm.LoadMem(asm.R0, asm.R10, stTmp+2, asm.Half),
		asm.Ja.Label("ethtype"))

	if len(s.Demux) > 0 {
		// The stack's UDP and TCP endpoints, told apart by the key of a
		// whole datagram (addresses, ports, protocol); one that is not
		// an endpoint's, or too short for its ports, is the kernel's
		// (which owns the address: run/kernel.go).
		next = "demux"
		load(asm.R8, 0, stKey+8, 4, "pass")
		add(asm.LoadMem(asm.R0, asm.R10, stIP+12, asm.Word), asm.StoreMem(asm.R10, stKey, asm.R0, asm.Word),
			asm.LoadMem(asm.R0, asm.R10, stIP+16, asm.Word), asm.StoreMem(asm.R10, stKey+4, asm.R0, asm.Word),
			asm.StoreMem(asm.R10, stKey+12, asm.R9, asm.Word))
		for gi, g := range s.Demux {
			miss := fmt.Sprintf("demux%d", gi+1)
			matchGroup(add, g, m.demux[gi].FD(), miss)
			add(asm.LoadMem(asm.R1, asm.R0, 0, asm.Word), asm.Ja.Label("endpoint"),
				asm.Mov.Imm(asm.R0, 0).WithSymbol(miss))
		}
		add(asm.Ja.Label("pass"))
		// A kernel-socket endpoint's value has bit 31 (demuxKernel) set:
		// the immediate, sign-extended, tests it in the zero-extended
		// word. An endpoint dragonc serves: UDP is ours; a stream over a
		// VI travels in the VI's frames, its TCP frames pass up.
		add(asm.JSet.Imm(asm.R1, math.MinInt32, "kernelend").WithSymbol("endpoint"),
			asm.JEq.Imm(asm.R9, 17, ip),
			asm.Ja.Label("pass"))
		if xdp {
			// A kernel-socket endpoint's frame is steered as one of ours
			// (its queue: the plan's); "ours" then sends it to the
			// queue's CPU. stKern: its index in s.Endpoints, plus one.
			add(asm.And.Imm(asm.R1, demuxKernel-1).WithSymbol("kernelend"), asm.Add.Imm(asm.R1, 1),
				asm.StoreMem(asm.R10, stKern, asm.R1, asm.Word), asm.Ja.Label(ip))
		} else {
			// The socket programs leave it to the kernel (the XDP
			// program in front of them moved it to its CPU).
			add(asm.Ja.Label("pass").WithSymbol("kernelend"))
		}
	}

	if steer {
		steering(kind, s, m, add, load)
	}

	switch kind {
	case progXDP:
		// The queue goes in four bytes of metadata before the frame; the
		// frame to the AF_XDP socket of its queue's loop on the device
		// queue it arrived on (key: device queue × loops + the loop's
		// index in s.Queues; a queue no loop serves goes to the first),
		// or to the kernel when there is none (the low bits of the
		// flags).
		loops := int32(max(len(s.Queues), 1))
		add(asm.JEq.Imm32(asm.R7, -1, "drop").WithSymbol("ours"))
		if len(s.Demux) > 0 {
			add(asm.LoadMem(asm.R1, asm.R10, stKern, asm.Word), asm.JNE.Imm(asm.R1, 0, "kernel"))
		}
		add(asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, -4), asm.FnXdpAdjustMeta.Call(),
			asm.JNE.Imm(asm.R0, 0, "pass"),
			asm.LoadMem(asm.R2, asm.R6, 8, asm.Word), // data_meta
			asm.LoadMem(asm.R3, asm.R6, 0, asm.Word), // data
			asm.Mov.Reg(asm.R1, asm.R2), asm.Add.Imm(asm.R1, 4),
			asm.JGT.Reg(asm.R1, asm.R3, "pass"),
			asm.StoreMem(asm.R2, 0, asm.R7, asm.Word),
			asm.Mov.Imm(asm.R4, 0)) // the loop's index
		identity := true
		for i, q := range s.Queues {
			identity = identity && q == uint32(i)
		}
		if identity {
			add(asm.JGE.Imm(asm.R7, loops, "key"), asm.Mov.Reg(asm.R4, asm.R7))
		} else {
			for i, q := range s.Queues {
				add(asm.JNE.Imm32(asm.R7, int32(q), fmt.Sprintf("notloop%d", i)), asm.Mov.Imm(asm.R4, int32(i)), asm.Ja.Label("key"),
					asm.Mov.Imm(asm.R0, 0).WithSymbol(fmt.Sprintf("notloop%d", i)))
			}
		}
		add(asm.LoadMem(asm.R2, asm.R6, 16, asm.Word).WithSymbol("key"), // rx_queue_index
			asm.Mul.Imm(asm.R2, loops), asm.Add.Reg(asm.R2, asm.R4),
			asm.LoadMapPtr(asm.R1, m.xsks.FD()), asm.Mov.Imm(asm.R3, 2), asm.FnRedirectMap.Call(),
			asm.Return())
		if len(s.Demux) > 0 {
			// A rule's drop of a kernel-socket endpoint's frame is
			// counted for the endpoint (toCPU).
			add(asm.LoadMem(asm.R1, asm.R10, stKern, asm.Word).WithSymbol("drop"), asm.JNE.Imm(asm.R1, 0, "kdrop"),
				asm.Mov.Imm(asm.R0, 1).WithSymbol("xdrop"), asm.Return()) // XDP_DROP
		} else {
			add(asm.Mov.Imm(asm.R0, 1).WithSymbol("drop"), asm.Return()) // XDP_DROP
		}
		add(asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), asm.Return()) // XDP_PASS
		if len(s.Demux) > 0 {
			toCPU(s, m, add)
		}
	case progCPU:
		// Only a kernel-socket endpoint's frames are this program's; the
		// socket programs take ours after it.
		add(asm.LoadMem(asm.R1, asm.R10, stKern, asm.Word).WithSymbol("ours"),
			asm.JEq.Imm(asm.R1, 0, "pass"),
			asm.JEq.Imm32(asm.R7, -1, "kdrop"),
			asm.Ja.Label("kernel"),
			asm.Mov.Imm(asm.R0, 1).WithSymbol("xdrop"), asm.Return(), // XDP_DROP
			asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), asm.Return()) // XDP_PASS
		toCPU(s, m, add)
	case progFanout:
		// The answer is the index of a socket in the group, in the order
		// of s.Queues; a queue no loop serves goes to the first.
		add(asm.Mov.Imm(asm.R0, 0).WithSymbol("ours"))
		identity := true
		for i, q := range s.Queues {
			identity = identity && q == uint32(i)
		}
		if identity {
			add(asm.JEq.Imm32(asm.R7, -1, "drop"), asm.JGE.Imm(asm.R7, int32(max(len(s.Queues), 1)), "drop"), asm.Mov.Reg(asm.R0, asm.R7))
		} else {
			for i, q := range s.Queues {
				add(asm.JNE.Imm32(asm.R7, int32(q), fmt.Sprintf("notq%d", i)), asm.Mov.Imm(asm.R0, int32(i)), asm.Return(),
					asm.Mov.Imm(asm.R0, 0).WithSymbol(fmt.Sprintf("notq%d", i)))
			}
		}
		add(asm.Return().WithSymbol("drop"), // a dropped frame: the filter drops it
			asm.Mov.Imm(asm.R0, 0).WithSymbol("pass"), asm.Return())
	case progFilter:
		if steer {
			add(asm.JEq.Imm32(asm.R7, -1, "pass").WithSymbol("ours"))
			add(asm.Mov.Imm(asm.R0, 0x40000), asm.Return()) // keep up to 256 KiB
		} else {
			add(asm.Mov.Imm(asm.R0, 0x40000).WithSymbol("ours"), asm.Return())
		}
		add(asm.Mov.Imm(asm.R0, 0).WithSymbol("pass"), asm.Return())
	case progTC:
		add(asm.Mov.Imm(asm.R0, 2).WithSymbol("ours"), asm.Return(), // TCX_DROP: the taps already have it
			asm.Mov.Imm(asm.R0, -1).WithSymbol("pass"), asm.Return()) // TCX_NEXT
	}
	return in
}

// steering computes the queue of one of ours into R7 and falls through
// to "ours": labels l2ours (not IPv4) and ipours (IPv4, R8 the L4 offset,
// R9 the protocol).
func steering(kind int, s *Stage, m *maps, add func(...asm.Instruction), load func(asm.Register, int32, int16, int32, string)) {
	devs := 0
	device := func() {
		devs++
		label := fmt.Sprintf("devq%d", devs)
		switch kind {
		case progXDP, progCPU:
			add(asm.LoadMem(asm.R7, asm.R6, 16, asm.Word)) // rx_queue_index
		case progFanout:
			// __sk_buff.queue_mapping: the receive queue plus one, 0
			// when the driver recorded none (skb_get_rx_queue).
			add(asm.LoadMem(asm.R7, asm.R6, 12, asm.Word), asm.JEq.Imm(asm.R7, 0, label), asm.Sub.Imm(asm.R7, 1),
				asm.Mov.Imm(asm.R0, 0).WithSymbol(label))
		default:
			add(asm.Mov.Imm(asm.R7, 0))
		}
	}
	constant := func(q uint32) { add(asm.Mov.Imm32(asm.R7, int32(q))) }

	// Not IPv4: no rule matches; the miss rule's queue for such frames.
	if s.takesL2() {
		add(asm.Mov.Imm(asm.R7, 0).WithSymbol("l2ours"))
		switch s.Miss {
		case MissDevice:
			device()
		case MissRSS:
			constant(s.RSS.Miss)
		default:
			constant(s.MissQueue)
		}
		add(asm.Ja.Label("ours"))
	}

	// IPv4: the length from the IPv4 header on (internal/packet's
	// len(ip)): XDP's whole buffer, or the skb's, which starts at the
	// network header when a fanout program runs (after a tag the kernel
	// left in the frame, as a test run does). Nothing is padded: the
	// generated code sees a frame as it came, and a software link's may
	// be shorter than Ethernet's 60 bytes.
	add(asm.Mov.Imm(asm.R7, 0).WithSymbol("ipours"))
	if kind == progXDP || kind == progCPU {
		add(asm.Mov.Reg(asm.R1, asm.R6), asm.FnXdpGetBuffLen.Call(),
			asm.LoadMem(asm.R1, asm.R10, stL3, asm.Word), asm.Sub.Reg(asm.R0, asm.R1))
	} else {
		add(asm.LoadMem(asm.R0, asm.R6, 0, asm.Word), // __sk_buff.len
			asm.LoadMem(asm.R1, asm.R10, stL3, asm.Word), asm.Sub.Imm(asm.R1, 14), asm.Sub.Reg(asm.R0, asm.R1))
	}
	add(
		asm.StoreMem(asm.R10, stLen, asm.R0, asm.DWord),
		// The key without ports.
		asm.LoadMem(asm.R0, asm.R10, stIP+12, asm.Word), asm.StoreMem(asm.R10, stKey, asm.R0, asm.Word),
		asm.LoadMem(asm.R0, asm.R10, stIP+16, asm.Word), asm.StoreMem(asm.R10, stKey+4, asm.R0, asm.Word),
		asm.StoreImm(asm.R10, stKey+8, 0, asm.Word),
		asm.StoreMem(asm.R10, stKey+12, asm.R9, asm.Word),
		// ip.hdr_ok: the header (IHL words) fits.
		asm.LoadMem(asm.R2, asm.R10, stL3, asm.Word), asm.Mov.Reg(asm.R1, asm.R8), asm.Sub.Reg(asm.R1, asm.R2),
		asm.LoadMem(asm.R2, asm.R10, stLen, asm.DWord),
		asm.Mov.Imm(asm.R3, 0),
		asm.JGT.Reg(asm.R1, asm.R2, "nohdr"),
		asm.Mov.Imm(asm.R3, 1),
		asm.StoreMem(asm.R10, stHdr, asm.R3, asm.DWord).WithSymbol("nohdr"),
		// Ports (internal/packet: a whole datagram whose total length
		// fits the frame and holds a UDP or TCP header).
		asm.LoadMem(asm.R0, asm.R10, stIP+6, asm.Half), asm.And.Imm(asm.R0, 0xff3f),
		asm.JNE.Imm(asm.R0, 0, "noports"),
		asm.LoadMem(asm.R0, asm.R10, stIP+2, asm.Byte), asm.LSh.Imm(asm.R0, 8),
		asm.LoadMem(asm.R3, asm.R10, stIP+3, asm.Byte), asm.Or.Reg(asm.R0, asm.R3), // total length
		asm.JLT.Reg(asm.R0, asm.R1, "noports"),
		asm.JGT.Reg(asm.R0, asm.R2, "noports"),
		asm.Sub.Reg(asm.R0, asm.R1), // the transport bytes
		asm.JEq.Imm(asm.R9, 17, "udpports"),
		asm.JNE.Imm(asm.R9, 6, "noports"),
		asm.JLT.Imm(asm.R0, 20, "noports"),
		asm.Ja.Label("getports"),
		asm.JLT.Imm(asm.R0, 8, "noports").WithSymbol("udpports"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("getports"),
	)
	// The datagram fits the frame, so its ports do; were the load to
	// fail, the frame would have none.
	load(asm.R8, 0, stKey+8, 4, "noports")
	add(
		asm.Mov.Imm(asm.R8, 1), asm.Ja.Label("keyed"),
		asm.StoreImm(asm.R10, stKey+8, 0, asm.Word).WithSymbol("noports"),
		asm.Mov.Imm(asm.R8, 0),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("keyed"),
	)

	// The groups, in order.
	for gi, g := range s.Groups {
		next := fmt.Sprintf("group%d", gi+1)
		if g.Ports {
			add(asm.JEq.Imm(asm.R8, 0, next))
		}
		matchGroup(add, g, m.groups[gi].FD(), next)
		add(asm.LoadMem(asm.R7, asm.R0, 0, asm.Word), asm.Ja.Label("ours"),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(next))
	}

	// No rule matched.
	switch s.Miss {
	case MissDevice:
		device()
	case MissRSS:
		r := s.RSS
		constant(r.Miss)
		add(asm.LoadMem(asm.R0, asm.R10, stHdr, asm.DWord), asm.JEq.Imm(asm.R0, 0, "ours"))
		add(asm.LoadMapValue(asm.R2, m.rss.FD(), 0), asm.Mov.Imm(asm.R3, 0))
		hashByte := func(i int) {
			add(asm.LoadMem(asm.R1, asm.R10, int16(stKey+i), asm.Byte), asm.LSh.Imm(asm.R1, 2), asm.Add.Reg(asm.R1, asm.R2),
				asm.LoadMem(asm.R1, asm.R1, int16(i*1024), asm.Word), asm.Xor.Reg(asm.R3, asm.R1))
		}
		for i := 0; i < 8; i++ {
			hashByte(i)
		}
		// The ports where they exist and RSS hashes them for the
		// protocol (internal/packet.RSSHash); none for an RSS that
		// hashes addresses only.
		if r.TCPPorts || r.UDPPorts {
			add(asm.JEq.Imm(asm.R8, 0, "hashed"))
			switch {
			case !r.UDPPorts:
				add(asm.JNE.Imm(asm.R9, 6, "hashed"))
			case !r.TCPPorts:
				add(asm.JNE.Imm(asm.R9, 17, "hashed"))
			}
			for i := 8; i < 12; i++ {
				hashByte(i)
			}
		}
		add(asm.And.Imm(asm.R3, int32(len(r.Indirection)-1)).WithSymbol("hashed"), asm.LSh.Imm(asm.R3, 2), asm.Add.Reg(asm.R3, asm.R2),
			asm.LoadMem(asm.R7, asm.R3, rssTable, asm.Word))
	default:
		constant(s.MissQueue)
	}
	add(asm.Ja.Label("ours"))
}

// matchGroup looks the frame's key (stKey), masked to group g, up in the
// group's map fd: R0 is the value, or nothing matched and it jumps to
// miss.
func matchGroup(add func(...asm.Instruction), g Group, fd int, miss string) {
	for w := 0; w < 4; w++ {
		mask := binary.NativeEndian.Uint32(g.Mask[4*w:])
		if mask == 0 {
			add(asm.StoreImm(asm.R10, int16(stTmp+4*w), 0, asm.Word))
			continue
		}
		add(asm.LoadMem(asm.R0, asm.R10, int16(stKey+4*w), asm.Word))
		if mask != ^uint32(0) {
			add(asm.And.Imm(asm.R0, int32(mask)))
		}
		add(asm.StoreMem(asm.R10, int16(stTmp+4*w), asm.R0, asm.Word))
	}
	add(asm.LoadMapPtr(asm.R1, fd), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, stTmp), asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss))
}

// toCPU is the block "kernel": a kernel-socket endpoint's frame (stKern
// its index plus one, R7 its queue) goes to the CPU of its queue, where
// the kernel builds the skb and runs IP and UDP or TCP
// (kernel/bpf/cpumap.c: cpu_map_kthread_run). Already on that CPU it
// passes up (XDP_PASS); to another through bpf_redirect_map on the
// cpumap, whose flags' low bits are the action when the CPU has no entry
// (include/uapi/linux/bpf.h: XDP_PASS). A queue with no CPU, or a CPU
// with no entry, passes up where the frame arrived (maps.notes say why).
// Each endpoint counts what became of its frames in the per-CPU array
// (kernelSlots a endpoint: redirected, on its core, no cpumap entry,
// dropped by a rule). A frame that has no ports by internal/packet's
// rule (steering left R8 0: a datagram cut short, or whose lengths do
// not hold its header) is no endpoint's, although the demultiplexer read
// a port in it: it passes up uncounted where it arrived, and the kernel
// drops it there (counted in its IP, UDP and TCP MIBs), as the plan's
// rules, which match ports only on such datagrams, would not have
// steered it either. The block "kdrop" is a rule's drop (R7 -1) of a
// kernel-socket endpoint's frame: counted for the endpoint when the frame
// has ports, then dropped ("xdrop").
func toCPU(s *Stage, m *maps, add func(...asm.Instruction)) {
	first := func() {
		add(asm.LoadMem(asm.R1, asm.R10, stKern, asm.Word),
			asm.Sub.Imm(asm.R1, 1), asm.Mul.Imm(asm.R1, kernelSlots), asm.StoreMem(asm.R10, stAddr, asm.R1, asm.Word))
	}
	add(asm.JEq.Imm(asm.R8, 0, "kpass").WithSymbol("kernel"))
	first()
	if m.cpumap != nil {
		// The CPU of each queue, a table in code.
		for i, q := range slices.Sorted(gomaps.Keys(m.cpus)) {
			other := fmt.Sprintf("cpuq%d", i)
			add(asm.JNE.Imm32(asm.R7, int32(q), other), asm.Mov.Imm(asm.R8, int32(m.cpus[q])), asm.Ja.Label("tocpu"),
				asm.Mov.Imm(asm.R0, 0).WithSymbol(other))
		}
	}
	// No CPU for the queue: up where it arrived, counted.
	add(asm.Mov.Imm(asm.R7, 2), asm.Mov.Imm(asm.R1, kNoCPUEntry), asm.Ja.Label("kslot"),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("kpass"), asm.Return()) // XDP_PASS: no ports
	if m.cpumap != nil && len(m.cpus) > 0 {
		add(asm.FnGetSmpProcessorId.Call().WithSymbol("tocpu"),
			asm.JNE.Reg(asm.R0, asm.R8, "redirect"),
			asm.Mov.Imm(asm.R7, 2), // XDP_PASS on its own CPU
			asm.Mov.Imm(asm.R1, kOnCore), asm.Ja.Label("kslot"),
			asm.LoadMapPtr(asm.R1, m.cpumap.FD()).WithSymbol("redirect"), asm.Mov.Reg(asm.R2, asm.R8), asm.Mov.Imm(asm.R3, 2), asm.FnRedirectMap.Call(),
			asm.Mov.Reg(asm.R7, asm.R0),
			asm.Mov.Imm(asm.R1, kRedirected),
			asm.JEq.Imm(asm.R7, 4, "kslot"), // XDP_REDIRECT: the CPU has an entry
			asm.Mov.Imm(asm.R1, kNoCPUEntry), asm.Ja.Label("kslot"))
	}
	add(asm.JEq.Imm(asm.R8, 0, "xdrop").WithSymbol("kdrop"))
	first()
	add(asm.Mov.Imm(asm.R7, 1), asm.Mov.Imm(asm.R1, kRuleDropped)) // XDP_DROP
	// The counter: the endpoint's first plus R1; the action R7.
	add(asm.LoadMem(asm.R2, asm.R10, stAddr, asm.Word).WithSymbol("kslot"), asm.Add.Reg(asm.R2, asm.R1), asm.StoreMem(asm.R10, stAddr, asm.R2, asm.Word),
		asm.LoadMapPtr(asm.R1, m.kcounts.FD()), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, stAddr), asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "kret"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord), asm.Add.Imm(asm.R1, 1), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R0, asm.R7).WithSymbol("kret"), asm.Return())
}

var progTypes = map[int]ebpf.ProgramType{progXDP: ebpf.XDP, progFanout: ebpf.SocketFilter, progFilter: ebpf.SocketFilter, progTC: ebpf.SchedCLS, progCPU: ebpf.XDP}

func loadProgram(kind int, s *Stage, m *maps) (*ebpf.Program, error) {
	spec := &ebpf.ProgramSpec{
		Name:         [...]string{"dragonc_xdp", "dragonc_fanout", "dragonc_filter", "dragonc_tc", "dragonc_cpu"}[kind],
		Type:         progTypes[kind],
		License:      "GPL", // the XDP and skb helpers used are GPL-only
		Instructions: classifier(kind, s, m),
	}
	if kind == progTC {
		spec.AttachType = ebpf.AttachTCXIngress
	}
	p, err := ebpf.NewProgram(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel's verifier refused %s: %+v", spec.Name, ve)
		}
		return nil, fmt.Errorf("loading %s: %w", spec.Name, err)
	}
	return p, nil
}
