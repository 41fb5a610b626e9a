package netnstest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The kernel here has no netem, so loss and reordering between two
// namespaces are made with what it has: an XDP program that drops a share
// of the frames arriving at a veth (Drop), and a relay in a namespace
// between the two that holds a share of the frames back behind the next
// one (Relay).

// Frames selects the frames Drop may drop: those of one of EtherTypes,
// and IPv4 UDP datagrams (a 20-byte header) to port UDPPort (when not
// 0). The zero Frames is every frame.
type Frames struct {
	EtherTypes []uint16
	UDPPort    uint16
}

// dropProgram is an XDP program that drops a frame of sel when
// bpf_get_prandom_u32 falls below threshold, and passes every other
// frame.
func dropProgram(sel Frames, threshold uint32) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, 0, asm.Word), // xdp_md.data
		asm.LoadMem(asm.R3, asm.R6, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 14),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"), // shorter than an Ethernet header
	}
	// The EtherType and port are big-endian on the wire; the loads are
	// the host's (little-endian) order.
	swap := func(x uint16) int32 { return int32(x>>8 | x<<8&0xff00) }
	if len(sel.EtherTypes) > 0 || sel.UDPPort != 0 {
		insns = append(insns, asm.LoadMem(asm.R5, asm.R2, 12, asm.Half))
		for _, e := range sel.EtherTypes {
			insns = append(insns, asm.JEq.Imm(asm.R5, swap(e), "maybe"))
		}
		if sel.UDPPort == 0 {
			insns = append(insns, asm.Ja.Label("pass"))
		} else {
			insns = append(insns,
				asm.JNE.Imm(asm.R5, swap(0x0800), "pass"),
				asm.Mov.Reg(asm.R4, asm.R2),
				asm.Add.Imm(asm.R4, 14+20+8),
				asm.JGT.Reg(asm.R4, asm.R3, "pass"), // no room for IPv4 and UDP headers
				asm.LoadMem(asm.R5, asm.R2, 14+9, asm.Byte),
				asm.JNE.Imm(asm.R5, 17, "pass"), // not UDP
				asm.LoadMem(asm.R5, asm.R2, 14+20+2, asm.Half),
				asm.JNE.Imm(asm.R5, swap(sel.UDPPort), "pass"),
			)
		}
	}
	return append(insns,
		asm.FnGetPrandomU32.Call().WithSymbol("maybe"),
		asm.LoadImm(asm.R1, int64(threshold), asm.DWord),
		asm.JLT.Reg(asm.R0, asm.R1, "drop"),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("pass"), // XDP_PASS
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("drop"), // XDP_DROP
		asm.Return(),
	)
}

// Drop attaches to interface ifc in namespace ns an XDP program that
// drops share (0..1) of the frames of sel arriving there, chosen by
// bpf_get_prandom_u32; it is detached when the test ends. Driver mode is
// tried first (veth has it), then generic.
func Drop(t testing.TB, ns, ifc string, sel Frames, share float64) {
	t.Helper()
	if share < 0 || share > 1 {
		t.Fatalf("netnstest: a drop share of %v", share)
	}
	threshold := uint32(min(share*(1<<32), 1<<32-1))
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "netnstest_drop", Type: ebpf.XDP, License: "GPL", Instructions: dropProgram(sel, threshold)})
	if err != nil {
		t.Fatalf("netnstest: the drop program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	var l link.Link
	if err := In(ns, func() error {
		i, err := net.InterfaceByName(ifc)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: i.Index, Flags: link.XDPDriverMode})
		if err != nil {
			l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: i.Index, Flags: link.XDPGenericMode})
		}
		return err
	}); err != nil {
		t.Fatalf("netnstest: attaching the drop program to %s in %s: %v", ifc, ns, err)
	}
	t.Cleanup(func() { l.Close() })
}

// RelayStats count what a relay did.
type RelayStats struct {
	Frames, Reordered atomic.Uint64
}

// Relay forwards every frame between interfaces a and b of namespace ns
// (a bridge in user space, one raw socket each) and holds reorder (0..1)
// of the frames of each direction back until the next frame of that
// direction has gone, chosen by a generator seeded with seed; a frame
// held while nothing follows for a millisecond goes on its own. It stops
// when the test ends.
func Relay(t testing.TB, ns, a, b string, reorder float64, seed uint64) *RelayStats {
	t.Helper()
	st := &RelayStats{}
	var fa, fb, ia, ib int
	if err := In(ns, func() (err error) {
		if fa, ia, err = rawSocket(a); err != nil {
			return err
		}
		fb, ib, err = rawSocket(b)
		return err
	}); err != nil {
		t.Fatalf("netnstest: relay sockets in %s: %v", ns, err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, d := range [][4]int{{fa, fb, ib, 1}, {fb, fa, ia, 2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			relay(d[0], d[1], d[2], reorder, rand.New(rand.NewPCG(seed, uint64(i))), st, &stop)
		}()
	}
	t.Cleanup(func() {
		stop.Store(true)
		wg.Wait()
		syscall.Close(fa)
		syscall.Close(fb)
	})
	return st
}

// rawSocket is a packet socket for every EtherType on interface name,
// blind to what it sends itself, with a receive timeout of 1 ms, whose
// frames carry a struct virtio_net_hdr.
func rawSocket(name string) (fd, index int, err error) {
	i, err := net.InterfaceByName(name)
	if err != nil {
		return -1, 0, err
	}
	const ethPAll = 0x0300 // htons(ETH_P_ALL)
	fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, ethPAll)
	if err != nil {
		return -1, 0, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: ethPAll, Ifindex: i.Index}); err != nil {
		syscall.Close(fd)
		return -1, 0, err
	}
	const packetIgnoreOutgoing = 23 // linux/if_packet.h
	if err := syscall.SetsockoptInt(fd, syscall.SOL_PACKET, packetIgnoreOutgoing, 1); err != nil {
		syscall.Close(fd)
		return -1, 0, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	// The frames come and go with a struct virtio_net_hdr before them
	// (packet(7)), so that a segment larger than the MTU (GSO, from a
	// sender that lets the kernel cut it) goes on as one, to be cut
	// where the next link needs it, as a bridge forwards it.
	if err := syscall.SetsockoptInt(fd, syscall.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		syscall.Close(fd)
		return -1, 0, fmt.Errorf("PACKET_VNET_HDR: %w", err)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20)
	tv := syscall.NsecToTimeval(int64(time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	return fd, i.Index, nil
}

func relay(in, out, outIndex int, reorder float64, rng *rand.Rand, st *RelayStats, stop *atomic.Bool) {
	buf := make([]byte, 10+14+1<<16) // a virtio_net_hdr and a 64 KiB segment
	var held []byte
	to := &syscall.SockaddrLinklayer{Ifindex: outIndex}
	send := func(f []byte) {
		for {
			err := syscall.Sendto(out, f, 0, to)
			if !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.EAGAIN) {
				return
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	for !stop.Load() {
		n, _, err := syscall.Recvfrom(in, buf, 0)
		if err != nil {
			if held != nil { // nothing followed it
				send(held)
				held = nil
			}
			continue
		}
		st.Frames.Add(1)
		f := buf[:n]
		if held == nil && rng.Float64() < reorder {
			held = append([]byte(nil), f...)
			st.Reordered.Add(1)
			continue
		}
		send(f)
		if held != nil {
			send(held)
			held = nil
		}
	}
}

// Another makes one more namespace beside those Two made (named after
// like), removed when the test ends: the middle of a chain through a
// Relay.
func Another(t testing.TB, like string) string {
	t.Helper()
	name := like + "-r"
	IP(t, "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return name
}
