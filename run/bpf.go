package run

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The linux-xdp model's steering stage in eBPF. Its tables are hash maps
// with the model's capacities; its queues are the user-space receive loops.
// One classifier is written once and ends four ways: as the XDP program of
// the AF_XDP path, and as the fanout program, the per-socket filter and the
// tc ingress program of the AF_PACKET path.
//
// A frame is the stack's ("ours") when the LPG consumes it: an ARP request
// for one of the stack's addresses, an IPv4 datagram to one of its
// addresses carrying UDP (any port: the LPG answers a closed one) or an
// ICMP echo request, or any Open-MX frame. Everything else (TCP, other
// ICMP types, IPv6, VLAN-tagged frames, other hosts' traffic) belongs to
// the kernel and is passed up untouched, so the host keeps working.

// Program kinds.
const (
	progXDP    = iota // AF_XDP: redirect ours to the rx queue's socket, queue in metadata
	progFanout        // AF_PACKET: the fanout group's choice of socket
	progFilter        // AF_PACKET: a socket keeps ours only
	progTC            // tc ingress: the kernel does not see ours
)

// Stage is what the classifier needs to know of a stack and a plan.
type Stage struct {
	Addrs   []netip.Addr // the stack's unicast addresses
	Bcasts  []netip.Addr // its broadcast addresses (UDP to them is its; ARP for them is not)
	ARP     bool         // the stack answers ARP
	ICMP    bool         // the stack answers echo requests
	OpenMX  bool         // the stack has Open-MX endpoints
	Flows   []FlowRule   // the RxCFlow table
	Ports   []PortRule   // the RxCPort table
	FlowCap int          // capacities of the two tables (the model's)
	PortCap int
}

// FlowRule steers one 5-tuple to a queue.
type FlowRule struct {
	Proto    uint8
	Src, Dst netip.Addr
	SPort    uint16
	DPort    uint16
	Queue    uint32
}

// PortRule steers a protocol and destination port to a queue.
type PortRule struct {
	Proto uint8
	DPort uint16
	Queue uint32
}

// Key layouts, in the frame's byte order so that the programs copy header
// bytes into them unchanged: a flow is source and destination address,
// source and destination port, protocol and three zero bytes; a port is
// protocol, a zero byte and the destination port.
func flowKey(r FlowRule) [16]byte {
	var k [16]byte
	s, d := r.Src.As4(), r.Dst.As4()
	copy(k[0:4], s[:])
	copy(k[4:8], d[:])
	binary.BigEndian.PutUint16(k[8:], r.SPort)
	binary.BigEndian.PutUint16(k[10:], r.DPort)
	k[12] = r.Proto
	return k
}

func portKey(r PortRule) [4]byte {
	var k [4]byte
	k[0] = r.Proto
	binary.BigEndian.PutUint16(k[2:], r.DPort)
	return k
}

// maps are the stage's tables, filled from the plan.
type maps struct {
	addrs, flows, ports *ebpf.Map
	xsks                *ebpf.Map // AF_XDP only
}

func (m *maps) Close() {
	for _, x := range []*ebpf.Map{m.addrs, m.flows, m.ports, m.xsks} {
		if x != nil {
			x.Close()
		}
	}
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
	if m.flows, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_flows", Type: ebpf.Hash, KeySize: 16, ValueSize: 4, MaxEntries: uint32(max(s.FlowCap, 1))}); err != nil {
		return fail("flow", err)
	}
	if m.ports, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_ports", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: uint32(max(s.PortCap, 1))}); err != nil {
		return fail("port", err)
	}
	if xskQueues > 0 {
		if m.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(xskQueues)}); err != nil {
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
	if len(s.Flows) > s.FlowCap || len(s.Ports) > s.PortCap {
		m.Close()
		return nil, fmt.Errorf("the plan has %d flow and %d port rules; the tables hold %d and %d", len(s.Flows), len(s.Ports), s.FlowCap, s.PortCap)
	}
	for _, r := range s.Flows {
		k := flowKey(r)
		if err := m.flows.Put(k[:], r.Queue); err != nil {
			return fail("flow", err)
		}
	}
	for _, r := range s.Ports {
		k := portKey(r)
		if err := m.ports.Put(k[:], r.Queue); err != nil {
			return fail("port", err)
		}
	}
	return m, nil
}

// Stack layout of the classifier (offsets from the frame pointer R10).
const (
	stEth   = -50 // 14 bytes of Ethernet header, then the IPv4 header or ARP body (4-aligned)
	stIP    = stEth + 14
	stFlow  = -80    // the 16-byte flow key
	stPort  = -88    // the 4-byte port key
	stAddr  = -92    // a 4-byte address key
	stICMP  = -96    // the ICMP type byte
	ethARP  = 0x0608 // 0x0806 read as a little-endian half word
	ethIPv4 = 0x0008
	ethOMX  = 0xdf86 // Open-MX's EtherType 0x86DF, read little-endian
)

// classifier returns the program of the given kind for stage s over m.
func classifier(kind int, s *Stage, m *maps) asm.Instructions {
	var in asm.Instructions
	add := func(x ...asm.Instruction) { in = append(in, x...) }
	// load copies n bytes at offset off (register or constant) of the frame
	// to the stack at dst, or passes the frame when it is too short.
	load := func(offReg asm.Register, off int32, dst int16, n int32) {
		add(asm.Mov.Reg(asm.R1, asm.R6))
		if offReg != asm.R0 {
			add(asm.Mov.Reg(asm.R2, offReg))
		} else {
			add(asm.Mov.Imm(asm.R2, off))
		}
		add(asm.Mov.Reg(asm.R3, asm.R10), asm.Add.Imm(asm.R3, int32(dst)), asm.Mov.Imm(asm.R4, n))
		if kind == progXDP {
			add(asm.FnXdpLoadBytes.Call())
		} else {
			add(asm.Mov.Imm(asm.R5, 0), asm.FnSkbLoadBytesRelative.Call()) // BPF_HDR_START_MAC
		}
		add(asm.JNE.Imm(asm.R0, 0, "pass"))
	}
	lookup := func(mp *ebpf.Map, key int16) {
		add(asm.LoadMapPtr(asm.R1, mp.FD()), asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, int32(key)), asm.FnMapLookupElem.Call())
	}

	add(asm.Mov.Reg(asm.R6, asm.R1), asm.Mov.Imm(asm.R7, 0))
	load(asm.R0, 0, stEth, 14)
	add(asm.LoadMem(asm.R0, asm.R10, stEth+12, asm.Half))
	if s.ARP {
		add(asm.JEq.Imm(asm.R0, ethARP, "arp"))
	}
	if s.OpenMX {
		add(asm.JEq.Imm(asm.R0, ethOMX, "ours"))
	}
	add(asm.JNE.Imm(asm.R0, ethIPv4, "pass"))

	// IPv4 (RFC 791 §3.1): version and IHL, then the destination.
	load(asm.R0, 14, stIP, 20)
	add(
		asm.LoadMem(asm.R0, asm.R10, stIP, asm.Byte),
		asm.Mov.Reg(asm.R1, asm.R0), asm.RSh.Imm(asm.R1, 4),
		asm.JNE.Imm(asm.R1, 4, "pass"),
		asm.And.Imm(asm.R0, 0xf),
		asm.JLT.Imm(asm.R0, 5, "pass"),
		asm.LSh.Imm(asm.R0, 2), asm.Add.Imm(asm.R0, 14), asm.Mov.Reg(asm.R8, asm.R0), // the L4 offset
		asm.LoadMem(asm.R0, asm.R10, stIP+16, asm.Word), asm.StoreMem(asm.R10, stAddr, asm.R0, asm.Word),
	)
	lookup(m.addrs, stAddr)
	add(
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R9, asm.R10, stIP+9, asm.Byte), // protocol
		// Flags and fragment offset, read little-endian: MF and the
		// offset are the mask 0x3fff of the big-endian half word.
		asm.LoadMem(asm.R0, asm.R10, stIP+6, asm.Half), asm.And.Imm(asm.R0, 0xff3f),
		asm.JEq.Imm(asm.R0, 0, "whole"),
		// A fragment of a UDP datagram is the LPG's (it sinks
		// fragments); others go to the kernel, which reassembles.
		asm.JEq.Imm(asm.R9, 17, "ours"),
		asm.Ja.Label("pass"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("whole"),
		asm.JEq.Imm(asm.R9, 17, "udp"),
	)
	if s.ICMP {
		add(asm.JNE.Imm(asm.R9, 1, "pass"))
		load(asm.R8, 0, stICMP, 1)
		add(asm.LoadMem(asm.R0, asm.R10, stICMP, asm.Byte), asm.JNE.Imm(asm.R0, 8, "pass"), asm.Ja.Label("ours"))
	} else {
		add(asm.Ja.Label("pass"))
	}

	// UDP: the flow table, then the port table, then queue 0.
	add(
		asm.LoadMem(asm.R0, asm.R10, stIP+12, asm.Word).WithSymbol("udp"), asm.StoreMem(asm.R10, stFlow, asm.R0, asm.Word),
		asm.LoadMem(asm.R0, asm.R10, stIP+16, asm.Word), asm.StoreMem(asm.R10, stFlow+4, asm.R0, asm.Word),
		asm.StoreMem(asm.R10, stFlow+12, asm.R9, asm.Word),
	)
	load(asm.R8, 0, stFlow+8, 4)
	lookup(m.flows, stFlow)
	add(
		asm.JEq.Imm(asm.R0, 0, "noflow"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word), asm.Ja.Label("ours"),
		asm.LoadMem(asm.R0, asm.R10, stFlow+10, asm.Half).WithSymbol("noflow"),
		asm.LSh.Imm(asm.R0, 16), asm.Or.Reg(asm.R0, asm.R9), asm.StoreMem(asm.R10, stPort, asm.R0, asm.Word),
	)
	lookup(m.ports, stPort)
	add(
		asm.JEq.Imm(asm.R0, 0, "ours"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word), asm.Ja.Label("ours"),
	)

	if s.ARP {
		// ARP (RFC 826): a request (opcode 1) for one of our addresses.
		add(asm.Mov.Imm(asm.R0, 0).WithSymbol("arp"))
		load(asm.R0, 14, stIP, 28)
		add(asm.LoadMem(asm.R0, asm.R10, stIP+6, asm.Half), asm.JNE.Imm(asm.R0, 0x0100, "pass"),
			asm.LoadMem(asm.R0, asm.R10, stIP+24, asm.Word), asm.StoreMem(asm.R10, stAddr, asm.R0, asm.Word))
		lookup(m.addrs, stAddr)
		// A request for a broadcast address is not answered (RFC 1122
		// §3.3.6: a host does not take a broadcast address as its own).
		add(asm.JEq.Imm(asm.R0, 0, "pass"), asm.LoadMem(asm.R0, asm.R0, 0, asm.Byte), asm.JNE.Imm(asm.R0, 1, "pass"), asm.Ja.Label("ours"))
	}

	switch kind {
	case progXDP:
		// The queue goes in four bytes of metadata before the frame; the
		// frame to the AF_XDP socket of the queue it arrived on, or to the
		// kernel when there is none (the low bits of the flags).
		add(asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("ours"), asm.Mov.Imm(asm.R2, -4), asm.FnXdpAdjustMeta.Call(),
			asm.JNE.Imm(asm.R0, 0, "pass"),
			asm.LoadMem(asm.R2, asm.R6, 8, asm.Word), // data_meta
			asm.LoadMem(asm.R3, asm.R6, 0, asm.Word), // data
			asm.Mov.Reg(asm.R1, asm.R2), asm.Add.Imm(asm.R1, 4),
			asm.JGT.Reg(asm.R1, asm.R3, "pass"),
			asm.StoreMem(asm.R2, 0, asm.R7, asm.Word),
			asm.LoadMem(asm.R2, asm.R6, 16, asm.Word), // rx_queue_index
			asm.LoadMapPtr(asm.R1, m.xsks.FD()), asm.Mov.Imm(asm.R3, 2), asm.FnRedirectMap.Call(),
			asm.Return(),
			asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), asm.Return()) // XDP_PASS
	case progFanout:
		add(asm.Mov.Reg(asm.R0, asm.R7).WithSymbol("ours"), asm.Return(),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("pass"), asm.Return())
	case progFilter:
		add(asm.Mov.Imm(asm.R0, 0x40000).WithSymbol("ours"), asm.Return(), // keep up to 256 KiB
			asm.Mov.Imm(asm.R0, 0).WithSymbol("pass"), asm.Return())
	case progTC:
		add(asm.Mov.Imm(asm.R0, 2).WithSymbol("ours"), asm.Return(), // TCX_DROP: the taps already have it
			asm.Mov.Imm(asm.R0, -1).WithSymbol("pass"), asm.Return()) // TCX_NEXT
	}
	return in
}

var progTypes = map[int]ebpf.ProgramType{progXDP: ebpf.XDP, progFanout: ebpf.SocketFilter, progFilter: ebpf.SocketFilter, progTC: ebpf.SchedCLS}

func loadProgram(kind int, s *Stage, m *maps) (*ebpf.Program, error) {
	spec := &ebpf.ProgramSpec{
		Name:         [...]string{"dragonc_xdp", "dragonc_fanout", "dragonc_filter", "dragonc_tc"}[kind],
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
