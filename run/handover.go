package run

import (
	"encoding/json"
	"fmt"
	"os"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/run/dataplane"
)

// A reload whose plan needs new code or another eBPF program hands the
// data plane over between two frames instead of restarting it (issue
// 39). AF_XDP:
//
//  1. the old helper stops at a frame boundary (dataplane.Server.Handover:
//     its loops finish the frames they took and send the answers, its
//     transmit rings go, the completed chunks come back) and says which
//     descriptors are its sockets and their UMEMs (memfds);
//  2. run takes those descriptors out of the helper (pidfd_getfd(2),
//     Linux 5.6) and keeps the XDP link attached: the old program goes
//     on redirecting frames to the same sockets, whose receive rings hold
//     them (and the fill ring lends the kernel what the old helper gave
//     back);
//  3. the old helper ends; the new plan's serve loads its program and
//     maps and starts the new helper with the sockets, which maps the
//     same rings and UMEM, puts the sockets in the new program's XSKMAP
//     and goes on from the rings' indexes;
//  4. once it serves, the link is updated to the new program
//     (BPF_LINK_UPDATE), which redirects to the same sockets.
//
// No socket is closed or bound again, so nothing that arrives is lost
// unless a receive ring fills up meanwhile (the kernel counts that in
// the socket's rx_ring_full). The new helper's counters start from 0, as
// after a restart.
//
// AF_PACKET goes the same way with its own sockets: the old helper stops
// at a frame boundary and says, per loop, its socket and the receive
// ring slot it would read next (TPACKET_V2 has no shared index); run
// takes the sockets, which stay in their fanout group (frames go on
// landing in their rings, steered by the old fanout program) and keeps
// the tc link (and the kernel-socket endpoints' XDP link) attached; the
// new helper maps the same rings, goes on at those slots, attaches the
// new socket filter to each socket (SO_ATTACH_BPF replaces it) and gives
// the group the new fanout program (PACKET_FANOUT_DATA, which any member
// may set); once it serves, the links are updated to the new tc and XDP
// programs. What the kernel drops meanwhile (a ring full) is counted by
// PACKET_STATISTICS, which the old helper read last as it stopped, and
// which run reads as the new helper serves (before the new helper's
// first report, which reads and so clears them too).
//
// A pinned run (run --detach) hands over the same way: its pins are
// those of the serve that runs, so the link (the same one, carried) is
// pinned again with the new plan's programs and maps. A hardware plan
// hands over when the new plan keeps linux.sh's settings (the queue
// count among them, so each device queue keeps its sockets); one that
// changes them restarts, since undoing linux.sh and applying the new
// plan's (ethtool -L, -X) resets the device's rings, which drops what
// they hold whatever the sockets do.

// carried is what one serve hands the next: the links, kept attached
// (the XDP link; AF_PACKET's tc link and, with kernel-socket endpoints,
// its XDP link), and the sockets (descriptors of this process) of socket
// kind kind.
type carried struct {
	kind  string
	link  link.Link
	tc    link.Link
	mode  string
	files []*os.File
	state dataplane.Handover // FDs: this process's, in files
}

// close ends what was carried: the link detaches.
func (c *carried) close() {
	if c.link != nil {
		c.link.Close()
	}
	if c.tc != nil {
		c.tc.Close()
	}
	for _, f := range c.files {
		f.Close()
	}
}

// canHandOver says whether a restart to next can hand the sockets over:
// a serve of a helper, with as many loops as now, and on a hardware plan
// with linux.sh's settings unchanged (sameHardware: the device's queues
// and so their sockets stay). Under liveMu.
func (sv *serving) canHandOver(next planState) bool {
	return sv.state != nil && (sv.state.Socket == dataplane.AFXDP || sv.state.Socket == dataplane.AFPacket) && sv.send != nil &&
		sv.sameHardware(next) && sv.helper > 0 && len(next.r.Plan.Queues) == len(sv.queues)
}

// takeSockets asks the helper pid to stop at a frame boundary and hand
// its sockets (of socket kind kind) over, and takes them out of it.
func takeSockets(ctl *helperControl, pid, seq int, kind string) (*carried, error) {
	payload, err := ctl.ask(&dataplane.Update{Seq: seq, Handover: true})
	if err != nil {
		return nil, err
	}
	c := &carried{kind: kind}
	if err := json.Unmarshal([]byte(payload), &c.state); err != nil {
		return nil, fmt.Errorf("the generated stack's handover does not read: %w", err)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open of the generated stack: %w", err)
	}
	defer unix.Close(pidfd)
	take := func(fd int, what string) (int, error) {
		if fd < 0 {
			return -1, nil
		}
		n, err := unix.PidfdGetfd(pidfd, fd, 0)
		if err != nil {
			return -1, fmt.Errorf("taking the generated stack's %s (descriptor %d): %w", what, fd, err)
		}
		c.files = append(c.files, os.NewFile(uintptr(n), what))
		return n, nil
	}
	for i := range c.state.Sockets {
		s := &c.state.Sockets[i]
		if s.FD, err = take(s.FD, fmt.Sprintf("%s socket %d", kind, i)); err == nil {
			s.UMEMFD, err = take(s.UMEMFD, fmt.Sprintf("UMEM of device queue %d", s.Queue))
		}
		if err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// swapPrograms makes the carried links run the new plan's programs
// (update), once the helper that took the sockets over serves (AF_XDP:
// has put them in the new XSKMAP; AF_PACKET: has given them the new
// filter and fanout program), and lets the carried sockets go (the
// helper has its own descriptors of them).
func (sv *serving) swapPrograms(c *carried, update func() error) error {
	if err := update(); err != nil {
		return err
	}
	lost := c.lost()
	sv.liveMu.Lock()
	if sv.carry == c {
		sv.carry = nil
	}
	if h := sv.handingOver; h != nil {
		h.lost = lost
	}
	sv.liveMu.Unlock()
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
	return nil
}

// updatePacket makes AF_PACKET's carried links run progs, as serve loads
// them (fanout, filter, tc and, with kernel-socket endpoints, XDP): the
// tc link's program is replaced (BPF_LINK_UPDATE), and so is the XDP
// link's; an XDP link the new plan has no program for detaches.
func (c *carried) updatePacket(progs []*ebpf.Program) error {
	if err := c.tc.Update(progs[2]); err != nil {
		return fmt.Errorf("swapping the tc ingress program on its link: %w", err)
	}
	switch {
	case c.link == nil:
	case len(progs) > 3:
		if err := c.link.Update(progs[3]); err != nil {
			return fmt.Errorf("swapping the XDP program on its link: %w", err)
		}
	default:
		c.link.Close()
		c.link = nil
	}
	return nil
}

// lost is how many frames the kernel dropped on the carried sockets since
// the old helper stopped reading them (HandoverSocket.Dropped): none
// unless a receive ring filled up, or a fill ring emptied, meanwhile.
func (c *carried) lost() uint64 {
	var n uint64
	for _, s := range c.state.Sockets {
		if c.kind == dataplane.AFPacket {
			// PACKET_STATISTICS (struct tpacket_stats): cleared on each
			// read, and the old helper read them last as it stopped.
			var st unix.TpacketStats
			size := uint32(unsafe.Sizeof(st))
			if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.FD), unix.SOL_PACKET, unix.PACKET_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); e == 0 {
				n += uint64(st.Drops)
			}
			continue
		}
		var st unix.XDPStatistics
		size := uint32(unsafe.Sizeof(st))
		// XDP_STATISTICS (include/uapi/linux/if_xdp.h); xsk_getsockopt,
		// net/xdp/xsk.c.
		if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.FD), unix.SOL_XDP, unix.XDP_STATISTICS, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
			continue
		}
		if d := st.Rx_dropped + st.Rx_ring_full; d > s.Dropped {
			n += d - s.Dropped
		}
	}
	return n
}

// dropCarry ends what a serve carried that no serve took.
func (sv *serving) dropCarry() {
	sv.liveMu.Lock()
	c := sv.carry
	sv.carry = nil
	sv.liveMu.Unlock()
	if c != nil {
		c.close()
	}
}
