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
// AF_XDP data plane over between two frames instead of restarting it
// (issue 39):
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
// after a restart. AF_PACKET, pinned runs and hardware plans restart as
// before.

// carried is what one serve hands the next: the XDP link, kept attached,
// and the sockets (descriptors of this process).
type carried struct {
	link  link.Link
	mode  string
	files []*os.File
	state dataplane.Handover // FDs: this process's, in files
}

// close ends what was carried: the link detaches.
func (c *carried) close() {
	if c.link != nil {
		c.link.Close()
	}
	for _, f := range c.files {
		f.Close()
	}
}

// canHandOver says whether a restart to next can hand the sockets over:
// an AF_XDP serve of a helper, not pinned (a pinned link is for others
// to find, and would be updated under them), not of a hardware plan
// (whose restart may change the device's channels, and so its queues'
// sockets), with as many loops as now. Under liveMu.
func (sv *serving) canHandOver(next planState) bool {
	return sv.state != nil && sv.state.Socket == dataplane.AFXDP && sv.send != nil && !sv.opt.Pin && !sv.hw &&
		sv.helper > 0 && len(next.r.Plan.Queues) == len(sv.queues)
}

// takeSockets asks the helper pid to stop at a frame boundary and hand
// its AF_XDP sockets over, and takes them out of it.
func takeSockets(ctl *helperControl, pid, seq int) (*carried, error) {
	payload, err := ctl.ask(&dataplane.Update{Seq: seq, Handover: true})
	if err != nil {
		return nil, err
	}
	c := &carried{}
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
		if s.FD, err = take(s.FD, fmt.Sprintf("AF_XDP socket %d", i)); err == nil {
			s.UMEMFD, err = take(s.UMEMFD, fmt.Sprintf("UMEM of device queue %d", s.Queue))
		}
		if err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// swapProgram makes the carried link run p, once the helper that took the
// sockets over has put them in p's XSKMAP, and lets the carried sockets
// go (the helper has its own descriptors of them).
func (sv *serving) swapProgram(c *carried, p *ebpf.Program) error {
	if err := c.link.Update(p); err != nil {
		return fmt.Errorf("swapping the XDP program on its link: %w", err)
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

// lost is how many frames the kernel dropped on the carried sockets since
// the old helper stopped reading them (HandoverSocket.Dropped): none
// unless a receive ring filled up, or a fill ring emptied, meanwhile.
func (c *carried) lost() uint64 {
	var n uint64
	for _, s := range c.state.Sockets {
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
