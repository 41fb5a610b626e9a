package dataplane

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Report is one reading of a server's counters: what `dragonc run`
// prints every interval, `dragonc status` shows and the metrics export.
// It is JSON as the helper program hands it to its parent and as
// `run --json` prints it (docs/cli.md).
type Report struct {
	Final bool `json:"final"` // the last reading, after the loops stopped
	// At is when the counters were read: rates are the differences of
	// two reports over the difference of their times (run's Load).
	At     time.Time     `json:"at,omitzero"`
	Queues []QueueCounts `json:"queues"`
	// Stage counts what the XDP program's checks decided before any
	// receive loop saw the frames, named as verify names outcomes ("drop
	// RxL3IPv4ValidChecksum.false", "reply arp"); run fills it in.
	Stage []Outcome `json:"stage,omitempty"`
	// KernelSockets count, per kernel-socket endpoint, the frames the
	// XDP program left to the kernel's stack on the endpoint's planned
	// core; run fills it in.
	KernelSockets []KernelSocket `json:"kernel_sockets,omitempty"`
	// Cpumap counts, per CPU the kernel-socket endpoints' frames are
	// redirected to, what the kernel did with them at that CPU's queue
	// in the cpumap: queued, or dropped with the queue full. run fills
	// it in where the kernel's tracing lets it count them.
	Cpumap []CpumapCPU `json:"cpumap,omitempty"`
	// CpumapMissed counts the cpumap's flushes the counting program did
	// not see because another eBPF tracing program ran on that CPU at
	// the time (the kernel runs one at a time on a CPU): their frames are
	// in neither Queued nor Dropped.
	CpumapMissed uint64 `json:"cpumap_missed,omitempty"`
	// VI counts the software VIs' frames and what their connection
	// setup dropped, when the stack serves streams on VIs
	// (Stack.OpenVIs).
	VI *VICounts `json:"vi,omitempty"`
}

// VICounts are the software VIs' counters: their socket's, and what
// connection setup dropped, by reason ("half-open connection evicted
// (host's limit)"; docs/sovia.md).
type VICounts struct {
	VILink
	SetupDrops []Outcome `json:"setup_drops"`
}

// KernelSocket is what the XDP program did with a kernel-socket
// endpoint's frames: Redirected to the CPU of its planned queue through
// the cpumap, or passed up where they arrived because that already was
// the CPU (OnCore), or passed up where they arrived because the cpumap
// has no entry for the CPU (NoCPUEntry: a core not online, an entry the
// kernel refused), or dropped by a rule of the plan (RuleDropped).
type KernelSocket struct {
	Endpoint    string `json:"endpoint"`
	Redirected  uint64 `json:"redirected"`
	OnCore      uint64 `json:"on_core"`
	NoCPUEntry  uint64 `json:"no_cpumap_entry"`
	RuleDropped uint64 `json:"rule_dropped"`
}

// CpumapCPU is what the kernel did with the frames redirected to one
// CPU's queue in the cpumap (the xdp:xdp_cpumap_enqueue tracepoint):
// Queued for the CPU's kernel thread, or Dropped because the queue was
// full. Endpoints are the kernel-socket endpoints whose planned queues
// have that CPU.
type CpumapCPU struct {
	CPU       int      `json:"cpu"`
	Endpoints []string `json:"endpoints"`
	Queued    uint64   `json:"queued"`
	Dropped   uint64   `json:"dropped"`
}

// QueueCounts are one receive loop's counters.
type QueueCounts struct {
	Queue int    `json:"queue"`
	In    uint64 `json:"in"`
	// Outcomes count the frames by the outcome the generated code gave
	// them, named as verify names them ("deliver echo", "reply arp",
	// "sink RxL4UDPPortUnreachable", "drop RxL2EtherValidSource.false").
	Outcomes []Outcome `json:"outcomes"`
	// ICMPRateLimited are ICMP errors the limits held back;
	// AnswersRefused answers the data plane would not send (no source
	// address, a sender's port 0).
	ICMPRateLimited uint64 `json:"icmp_rate_limited,omitempty"`
	AnswersRefused  uint64 `json:"answers_refused,omitempty"`
	Sent            uint64 `json:"sent"`
	SendErrors      uint64 `json:"send_errors,omitempty"`
	// SocketErrors are the errors the loop's sockets reported, such as
	// ENETDOWN when the interface went down; LastSocketError is the last
	// one's text.
	SocketErrors    uint64 `json:"socket_errors,omitempty"`
	LastSocketError string `json:"last_socket_error,omitempty"`
	// Kernel are the kernel's own counters of the loop's sockets: frames
	// it dropped before the loop could see them.
	Kernel KernelCounts `json:"kernel"`
}

// Outcome is a count of one outcome.
type Outcome struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// KernelCounts are the socket statistics the kernel keeps, summed over a
// loop's sockets: for AF_XDP sockets XDP_STATISTICS (struct
// xdp_statistics, include/uapi/linux/if_xdp.h), for AF_PACKET sockets
// PACKET_STATISTICS (struct tpacket_stats), whose drops are RxDropped.
type KernelCounts struct {
	RxDropped      uint64 `json:"rx_dropped"`       // frames the kernel had no room for
	RxInvalidDescs uint64 `json:"rx_invalid_descs"` // AF_XDP
	TxInvalidDescs uint64 `json:"tx_invalid_descs"` // AF_XDP
	RxRingFull     uint64 `json:"rx_ring_full"`     // AF_XDP
	// RxFillRingEmpty belongs to a device queue's shared fill ring: it is
	// counted once, on the loop whose socket owns the ring.
	RxFillRingEmpty  uint64 `json:"rx_fill_ring_empty"`
	TxRingEmptyDescs uint64 `json:"tx_ring_empty_descs"` // AF_XDP: wake-ups with nothing to send, no loss
}

// Each calls f with each counter's name (as in JSON) and value, in one
// order: the one list of them that the text and the metrics read.
func (k *KernelCounts) Each(f func(name string, v *uint64)) {
	for _, c := range []struct {
		name string
		v    *uint64
	}{{"rx_dropped", &k.RxDropped}, {"rx_invalid_descs", &k.RxInvalidDescs}, {"tx_invalid_descs", &k.TxInvalidDescs},
		{"rx_ring_full", &k.RxRingFull}, {"rx_fill_ring_empty", &k.RxFillRingEmpty}, {"tx_ring_empty_descs", &k.TxRingEmptyDescs}} {
		f(c.name, c.v)
	}
}

func (k *KernelCounts) add(o KernelCounts) {
	var vs [8]uint64 // o's counters in Each's order
	i := 0
	o.Each(func(_ string, v *uint64) { vs[i] = *v; i++ })
	i = 0
	k.Each(func(_ string, v *uint64) { *v += vs[i]; i++ })
}

// dropped reports whether the kernel dropped or refused anything
// (tx_ring_empty_descs is no loss).
func (k KernelCounts) dropped() bool {
	k.TxRingEmptyDescs = 0
	return k != KernelCounts{}
}

// xdpStatistics reads XDP_STATISTICS of an AF_XDP socket (Linux 4.18;
// the last three fields since 5.9, zero before).
func xdpStatistics(fd int) (KernelCounts, error) {
	var st [6]uint64
	n := uint32(unsafe.Sizeof(st))
	if _, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), solXDP, xdpStatisticsOpt, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return KernelCounts{}, e
	}
	return KernelCounts{RxDropped: st[0], RxInvalidDescs: st[1], TxInvalidDescs: st[2], RxRingFull: st[3], RxFillRingEmpty: st[4], TxRingEmptyDescs: st[5]}, nil
}

// packetStatistics reads PACKET_STATISTICS of a packet socket. The
// kernel clears them on each read (packet_getsockopt), so the caller adds
// them up.
func packetStatistics(fd int) (KernelCounts, error) {
	var st struct{ packets, drops uint32 }
	n := uint32(unsafe.Sizeof(st))
	if _, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), solPacket, packetStatisticsOpt, uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return KernelCounts{}, e
	}
	return KernelCounts{RxDropped: uint64(st.drops)}, nil
}

const (
	xdpStatisticsOpt    = 7 // XDP_STATISTICS
	packetStatisticsOpt = 6 // PACKET_STATISTICS
)

// outcomes writes a line of counts after a label, if there are any.
func outcomes(b *strings.Builder, label string, os []Outcome) {
	if len(os) == 0 {
		return
	}
	b.WriteString(label + ":")
	for i, o := range os {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(b, " %s %d", o.Name, o.Count)
	}
	b.WriteString("\n")
}

// WriteText writes the report as `dragonc run` prints it: one line per
// queue, frames in, then every outcome seen with its count, then frames
// sent, and the kernel's drops where there are any.
func (r Report) WriteText(w io.Writer) {
	var b strings.Builder
	if r.Final {
		b.WriteString("final:\n")
	}
	outcomes(&b, "xdp stage", r.Stage)
	if v := r.VI; v != nil {
		fmt.Fprintf(&b, "vi: received %d, sent %d", v.Received, v.Sent)
		if v.SendErrors > 0 {
			fmt.Fprintf(&b, ", send errors %d", v.SendErrors)
		}
		if v.Dropped > 0 {
			fmt.Fprintf(&b, ", kernel dropped %d", v.Dropped)
		}
		if v.Oversize > 0 {
			fmt.Fprintf(&b, ", dropped %d longer than the MTU", v.Oversize)
		}
		if v.NoRoom > 0 {
			fmt.Fprintf(&b, ", dropped %d bulk datagrams with the socket's buffer full", v.NoRoom)
		}
		if v.BulkSent > 0 || v.BulkReceived > 0 {
			fmt.Fprintf(&b, "; bulk datagrams sent %d, received whole %d", v.BulkSent, v.BulkReceived)
		}
		if v.BulkRefused > 0 {
			fmt.Fprintf(&b, "; bulk datagrams refused by the kernel %d (frames since)", v.BulkRefused)
		}
		if v.BulkAbandoned > 0 {
			fmt.Fprintf(&b, "; %d VIs gave bulk datagrams up, none acknowledged (frames since)", v.BulkAbandoned)
		}
		b.WriteString("\n")
		outcomes(&b, "vi setup drops", v.SetupDrops)
	}
	if len(r.KernelSockets) > 0 {
		b.WriteString("kernel sockets:")
		for i, k := range r.KernelSockets {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %s %d redirected to its core, %d arrived there", k.Endpoint, k.Redirected, k.OnCore)
			if k.NoCPUEntry > 0 {
				fmt.Fprintf(&b, ", %d passed up where they arrived (no cpumap entry)", k.NoCPUEntry)
			}
			if k.RuleDropped > 0 {
				fmt.Fprintf(&b, ", %d dropped by a plan rule", k.RuleDropped)
			}
		}
		b.WriteString("\n")
	}
	if len(r.Cpumap) > 0 {
		b.WriteString("cpumap:")
		for i, c := range r.Cpumap {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " cpu %d (%s) queued %d, dropped %d with its queue full", c.CPU, strings.Join(c.Endpoints, ", "), c.Queued, c.Dropped)
		}
		if r.CpumapMissed > 0 {
			fmt.Fprintf(&b, "; %d flushes not counted (another eBPF tracing program was running)", r.CpumapMissed)
		}
		b.WriteString("\n")
	}
	for _, q := range r.Queues {
		fmt.Fprintf(&b, "queue %d: in %d", q.Queue, q.In)
		for _, o := range q.Outcomes {
			fmt.Fprintf(&b, ", %s %d", o.Name, o.Count)
		}
		for _, c := range []struct {
			name string
			n    uint64
		}{{"icmp errors rate-limited", q.ICMPRateLimited}, {"answers refused", q.AnswersRefused}} {
			if c.n > 0 {
				fmt.Fprintf(&b, ", %s %d", c.name, c.n)
			}
		}
		fmt.Fprintf(&b, ", sent %d", q.Sent)
		if q.SendErrors > 0 {
			fmt.Fprintf(&b, ", send errors %d", q.SendErrors)
		}
		if q.SocketErrors > 0 {
			fmt.Fprintf(&b, ", socket errors %d (last: %s)", q.SocketErrors, q.LastSocketError)
		}
		if k := q.Kernel; k.dropped() {
			b.WriteString("; kernel:")
			sep := " "
			k.Each(func(name string, v *uint64) {
				if *v > 0 && name != "tx_ring_empty_descs" {
					fmt.Fprintf(&b, "%s%s %d", sep, strings.ReplaceAll(name, "_", " "), *v)
					sep = ", "
				}
			})
		}
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// stats adds up the socket's drops since the last reading.
func (s *packetSocket) stats() KernelCounts {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.fd >= 0 && !s.handedOver {
		if k, err := packetStatistics(s.fd); err == nil {
			s.kernel.add(k)
		}
	}
	return s.kernel
}

func (p *xdpPort) stats() KernelCounts {
	var sum KernelCounts
	for _, x := range p.socks {
		if x.fd < 0 {
			continue
		}
		if k, err := xdpStatistics(x.fd); err == nil {
			if !x.owner {
				k.RxFillRingEmpty = 0 // the owner's loop counts the shared ring
			}
			sum.add(k)
		}
	}
	return sum
}
