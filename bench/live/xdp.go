package live

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// wire16 is a 16-bit field of a frame as a half-word load reads it on
// this machine: the value in network order, in native order.
func wire16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// reflectorInsns is the XDP_TX reflector: an IPv4 UDP datagram to port 7
// or an ICMP echo request (no IP options, not a fragment) goes back where
// it came from with XDP_TX, its Ethernet and IP addresses swapped, and
// the UDP ports swapped or the request made a reply (type 8 to 0, RFC
// 792); every other frame passes to the kernel. Swapping two 16-bit
// aligned fields of a one's-complement sum leaves the sum alone, so the
// IPv4 header checksum (RFC 791 §3.1) and the UDP checksum, whose
// pseudo-header holds both addresses (RFC 768), stay valid; the ICMP
// checksum is updated for the type as RFC 1624 §3 says (the word 0x0800
// becomes 0x0000: the checksum grows by 0x0800, the end-around carry
// added back). It is the least work a server on this interface can do
// per request: the limit of what the veth and the kernel's XDP path
// carry.
func reflectorInsns() asm.Instructions {
	const (
		ethLen = 14
		ipLen  = 20
		l4End  = ethLen + ipLen + 8 // a UDP header, an ICMP echo header
		l4     = ethLen + ipLen
	)
	swap := func(a, b int16, size asm.Size) asm.Instructions {
		return asm.Instructions{
			asm.LoadMem(asm.R4, asm.R2, a, size),
			asm.LoadMem(asm.R5, asm.R2, b, size),
			asm.StoreMem(asm.R2, a, asm.R5, size),
			asm.StoreMem(asm.R2, b, asm.R4, size),
		}
	}
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // xdp_md.data
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, l4End),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R4, asm.R2, 12, asm.Half), // EtherType
		asm.JNE.Imm(asm.R4, wire16(0x0800), "pass"),
		asm.LoadMem(asm.R4, asm.R2, ethLen, asm.Byte), // version and IHL
		asm.JNE.Imm(asm.R4, 0x45, "pass"),
		asm.LoadMem(asm.R4, asm.R2, ethLen+6, asm.Half), // flags and fragment offset
		asm.And.Imm(asm.R4, wire16(0x3fff)),             // MF or an offset: a fragment
		asm.JNE.Imm(asm.R4, 0, "pass"),
		asm.LoadMem(asm.R4, asm.R2, ethLen+9, asm.Byte), // protocol
		asm.JEq.Imm(asm.R4, 1, "icmp"),
		asm.JNE.Imm(asm.R4, 17, "pass"),
		asm.LoadMem(asm.R4, asm.R2, l4+2, asm.Half), // destination port
		asm.JNE.Imm(asm.R4, wire16(7), "pass"),
	}
	insns = append(insns, swap(l4, l4+2, asm.Half)...) // UDP ports
	insns = append(insns,
		asm.Ja.Label("addresses"),
		// ICMP: an echo request (type 8, code 0) becomes a reply. The
		// checksum, loaded in this machine's order, grows by the
		// type/code word's 0x0800 in that order (a one's-complement sum
		// is the same in either byte order, RFC 1071 §2(B)).
		asm.LoadMem(asm.R4, asm.R2, l4, asm.Half).WithSymbol("icmp"),
		asm.JNE.Imm(asm.R4, wire16(0x0800), "pass"),
		asm.StoreImm(asm.R2, l4, 0, asm.Half),
		asm.LoadMem(asm.R4, asm.R2, l4+2, asm.Half),
		asm.Add.Imm(asm.R4, wire16(0x0800)),
		asm.Mov.Reg(asm.R5, asm.R4),
		asm.RSh.Imm(asm.R5, 16),
		asm.And.Imm(asm.R4, 0xffff),
		asm.Add.Reg(asm.R4, asm.R5),
		asm.StoreMem(asm.R2, l4+2, asm.R4, asm.Half),
	)
	addrs := append(swap(0, 6, asm.Word), swap(4, 10, asm.Half)...) // MACs: four bytes, then two
	addrs[0] = addrs[0].WithSymbol("addresses")
	insns = append(insns, addrs...)
	insns = append(insns, swap(ethLen+12, ethLen+16, asm.Word)...) // IP addresses
	insns = append(insns,
		asm.Mov.Imm(asm.R0, 3), // XDP_TX
		asm.Return(),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), // XDP_PASS
		asm.Return(),
	)
	return insns
}

// passInsns is an XDP program that passes every frame.
func passInsns() asm.Instructions {
	return asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()} // XDP_PASS
}

// attachXDP loads an XDP program and attaches it to interface ifname in
// driver mode (a veth has native XDP); call it on a thread in the
// interface's namespace. Closing the link detaches it.
func attachXDP(name string, insns asm.Instructions, ifname string) (close func(), err error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.XDP, Instructions: insns, License: "GPL"})
	if err != nil {
		return nil, fmt.Errorf("loading the %s XDP program: %w", name, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
	if err != nil {
		prog.Close()
		return nil, fmt.Errorf("attaching the %s XDP program to %s: %w", name, ifname, err)
	}
	return func() { l.Close(); prog.Close() }, nil
}
