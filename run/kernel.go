package run

import (
	"cmp"
	"errors"
	"fmt"
	gomaps "maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/run/dataplane"
)

// Kernel-socket endpoints: the UDP and TCP endpoints dragonc does not
// serve itself belong to ordinary programs on the kernel's sockets
// (memcached, nginx, a resolver). dragonc run leaves their frames to the
// kernel's stack, but on the core of the queue the plan gives them: the
// XDP program redirects them to that CPU through a BPF_MAP_TYPE_CPUMAP
// (kernel/bpf/cpumap.c, Linux 4.15), whose kthread builds the skb and
// runs the kernel's IP, UDP and TCP there. The kernel then owns the
// interface's address: it answers ARP and ping and keeps its own
// neighbour table, and UDP to a port of no endpoint is its to refuse.

// builtinApps are the applications the data plane serves itself (a UDP
// endpoint's app; over a VI, a stream's, package sovia).
var builtinApps = []string{"echo", "discard"}

// kernelSocket is the rule, written once: endpoint e is a kernel-socket
// endpoint when dragonc does not serve it itself, that is, a UDP or TCP
// endpoint whose app is not built in (echo, discard), that is not a SOVIA
// stream over a VI (onVI), and that has no Go handler (handled: under
// ServeCode). TCP has no built-in app outside a VI: dragonc has no TCP
// of its own, so a TCP endpoint not on a VI is always the kernel's.
func kernelSocket(e *lpg.Endpoint, onVI, handled bool) bool {
	switch {
	case onVI || handled:
		return false
	case e.Proto == lpg.TCP:
		return true
	case e.Proto == lpg.UDP:
		return !slices.Contains(builtinApps, e.App)
	}
	return false
}

// kernelSockets names the kernel-socket endpoints of st under plan pl;
// handled names the endpoints a Go handler serves (ServeCode).
func kernelSockets(pl *plan.Plan, st *lpg.Stack, handled map[string]bool) (map[string]bool, error) {
	vs, err := viaOf(pl, st)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range st.Endpoints {
		_, onVI := vs.stream(e.Name)
		if kernelSocket(e, onVI, handled[e.Name]) {
			out[e.Name] = true
		}
	}
	return out, nil
}

// StageEndpoint is a UDP or TCP endpoint the stage tells apart (Stage.Demux).
type StageEndpoint struct {
	Name   string
	Kernel bool // a kernel-socket endpoint: its frames go to the kernel's stack
}

// The value of a demultiplexing rule: the endpoint's index in
// Stage.Endpoints, with demuxKernel set for a kernel-socket endpoint.
const demuxKernel = 1 << 31

// setKernel fills the stage's kernel-socket part: when st has
// kernel-socket endpoints (kern), the stage tells every UDP and TCP
// endpoint apart (Demux), the kernel owns the stack's addresses
// (KernelAddr), and each plan queue's core is a CPU of the cpumap.
func (s *Stage) setKernel(pl *plan.Plan, st *lpg.Stack, kern map[string]bool) {
	if len(kern) == 0 {
		return
	}
	// The kernel owns the address: it answers ARP and ping.
	s.KernelAddr, s.ARP, s.ICMP = true, false, false
	// The LPG's demultiplexers try a connected flow before a listener,
	// and a listener on an address before one on any (the most specific
	// first): the groups in that order, a rule's key masked to its shape.
	type rule struct {
		rank      int
		key, mask [16]byte
		value     uint32
	}
	var rules []rule
	for _, e := range st.Endpoints {
		if e.Proto != lpg.UDP && e.Proto != lpg.TCP || e.Shadowed {
			continue
		}
		proto := uint8(17)
		if e.Proto == lpg.TCP {
			proto = 6
		}
		value := uint32(len(s.Endpoints))
		s.Endpoints = append(s.Endpoints, StageEndpoint{Name: e.Name, Kernel: kern[e.Name]})
		if kern[e.Name] {
			value |= demuxKernel
		}
		var src, dst netip.Addr = netip.IPv4Unspecified(), netip.IPv4Unspecified()
		var sport uint16
		r := rule{rank: 2, value: value}
		if !e.AnyAddr {
			dst, r.rank = pred.Addr(e.Addr), 1
		}
		if e.Flow {
			src, sport, r.rank = pred.Addr(e.Remote), e.RPort, 0
		}
		r.key = Key(proto, src, dst, sport, e.Port)
		r.mask = Key(0xff, netip.IPv4Unspecified(), netip.IPv4Unspecified(), 0, 0xffff)
		if !e.AnyAddr {
			copy(r.mask[4:8], []byte{0xff, 0xff, 0xff, 0xff})
		}
		if e.Flow {
			copy(r.mask[0:4], []byte{0xff, 0xff, 0xff, 0xff})
			r.mask[8], r.mask[9] = 0xff, 0xff
		}
		rules = append(rules, r)
	}
	slices.SortStableFunc(rules, func(a, b rule) int { return cmp.Compare(a.rank, b.rank) })
	index := map[[16]byte]int{}
	for _, r := range rules {
		gi, ok := index[r.mask]
		if !ok {
			gi = len(s.Demux)
			index[r.mask] = gi
			s.Demux = append(s.Demux, Group{Table: "endpoints", Mask: r.mask, Ports: true})
		}
		s.Demux[gi].Rules = append(s.Demux[gi].Rules, Rule{Key: r.key, Queue: r.value})
		s.Demux[gi].Capacity = len(s.Demux[gi].Rules)
	}
	// The CPU of each queue's core: a plan's cores are the host's CPU
	// numbers, as the receive loops pin themselves (run/dataplane).
	s.CPUs = map[uint32]int{}
	for _, q := range pl.Queues {
		s.CPUs[uint32(q.ID)] = q.Core
	}
}

// kernelNotes says what the kernel-socket endpoints kern become under
// plan pl: one note for the kernel's address, one per endpoint.
func kernelNotes(kern map[string]bool, pl *plan.Plan) []string {
	if len(kern) == 0 {
		return nil
	}
	var names []string
	for _, e := range pl.Endpoints {
		if kern[e.Name] {
			names = append(names, e.Name)
		}
	}
	notes := []string{fmt.Sprintf("kernel-socket endpoints (%s): their frames go to the kernel's stack on the cores of their planned queues (an XDP program redirects them through a cpumap); the kernel owns the stack's address, and answers ARP, ping and UDP to ports of no endpoint itself", strings.Join(names, ", "))}
	for _, name := range names {
		for _, e := range pl.Endpoints {
			if e.Name != name {
				continue
			}
			var queues, cores []string
			var cpus []int
			for _, q := range e.Queues {
				queues = append(queues, strconv.Itoa(q))
				for _, pq := range pl.Queues {
					if pq.ID == q {
						cores = append(cores, strconv.Itoa(pq.Core))
						cpus = append(cpus, pq.Core)
					}
				}
			}
			slices.Sort(cpus)
			var pin []string
			for _, c := range slices.Compact(cpus) {
				pin = append(pin, strconv.Itoa(c))
			}
			// The program's threads belong beside the kernel's processing
			// of its frames: the note gives the taskset(1) CPU list.
			app := fmt.Sprintf("app %q", e.App)
			if e.App == "" {
				app = "a program (no app named)"
			}
			notes = append(notes, fmt.Sprintf("endpoint %s: %s on a kernel socket; its frames are processed by the kernel on queue(s) %s, core(s) %s: start the program pinned there (taskset -c %s PROGRAM)", name, app, strings.Join(queues, ", "), strings.Join(cores, ", "), strings.Join(pin, ",")))
		}
	}
	return notes
}

// kernelAddrMissing checks that the kernel, which owns the address of an
// interface with kernel-socket endpoints, has the stack's addresses on
// ifc; otherwise it says how to add them.
func kernelAddrMissing(ifc *net.Interface, st *lpg.Stack) error {
	addrs, err := ifc.Addrs()
	if err != nil {
		return fmt.Errorf("reading the addresses of %s: %w", ifc.Name, err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok {
				have[x.Unmap()] = true
			}
		}
	}
	var cmds []string
	for _, in := range st.Interfaces {
		for _, p := range in.IPs {
			if !have[pred.Addr(p.Addr)] {
				cmds = append(cmds, fmt.Sprintf("ip addr add %s/%d dev %s", pred.Addr(p.Addr), p.Len, ifc.Name))
			}
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	return usage("stack %s has kernel-socket endpoints, whose programs use the kernel's sockets: the kernel must own the stack's address on %s (%s)", st.Name, ifc.Name, strings.Join(cmds, "; "))
}

// onlineCPUs reads the CPUs that are online
// (/sys/devices/system/cpu/online, a list such as 0-3,6).
func onlineCPUs() (map[int]bool, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("/sys/devices/system/cpu/online: %q", b)
		}
		z := a
		if ok {
			if z, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("/sys/devices/system/cpu/online: %q", b)
			}
		}
		for c := a; c <= z; c++ {
			out[c] = true
		}
	}
	return out, nil
}

// cpumapQsize is the length of each CPU's queue of frames in the cpumap
// (struct bpf_cpumap_val.qsize, include/uapi/linux/bpf.h), as the
// kernel's own sample uses (samples/bpf/xdp_redirect_cpu_user.c: 2048);
// kernel/bpf/cpumap.c refuses more than 16384.
//
// Measured with the memcached bench on a veth (2 cores, both instances
// saturated, 11 one-round runs): no ring ever filled (the
// xdp:xdp_cpumap_enqueue and xdp:xdp_cpumap_kthread tracepoints counted
// no drops; the veth flushes about one frame at a time and the kthread
// takes about two a batch), so a shorter ring would not bound the
// answers that come back late. Those came with the kthread waiting in
// its core's run queue behind memcached and the load generators (up to
// 2.2 s of schedstat run delay in a run). The kthreads stay at the
// kernel's SCHED_NORMAL all the same: at SCHED_FIFO 1 no answer was
// late in 8 runs, but saturated throughput fell in 7 of 8 interleaved
// pairs (by 0.12 of the kernel's on average), the kthread now
// preempting memcached for every frame or two.
const cpumapQsize = 2048

// The counters of a kernel-socket endpoint in the per-CPU array
// dragonc_kernel, kernelSlots of them from its index in Stage.Endpoints
// times kernelSlots: frames redirected to their core's CPU, passed up on
// the CPU that already was it, passed up where they arrived because the
// cpumap has no entry for the CPU (a core not online, an entry the
// kernel refused), dropped by a rule of the plan.
const (
	kRedirected = iota
	kOnCore
	kNoCPUEntry
	kRuleDropped
	kernelSlots
)

// kernelMaps makes the maps of the kernel-socket endpoints: the
// demultiplexer's groups, the per-CPU counters, and the cpumap with an
// entry for the CPU of each queue. A CPU that is not online, or a kernel
// that refuses the cpumap, leaves those frames to the kernel where they
// arrived, and a note says so.
func (m *maps) kernelMaps(s *Stage) error {
	if len(s.Endpoints) == 0 {
		return nil
	}
	for _, g := range s.Demux {
		mp, err := ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_demux", Type: ebpf.Hash, KeySize: 16, ValueSize: 4, MaxEntries: uint32(max(len(g.Rules), 1))})
		if err != nil {
			return err
		}
		m.demux = append(m.demux, mp)
		for _, r := range g.Rules {
			// The first endpoint of a key wins (a shadowed one has no rule).
			if err := mp.Update(r.Key[:], r.Queue, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
				return err
			}
		}
	}
	var err error
	// Per endpoint, kernelSlots counters.
	if m.kcounts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_kernel", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(kernelSlots * len(s.Endpoints))}); err != nil {
		return err
	}
	// The value is struct bpf_cpumap_val's first member, qsize: 4 bytes,
	// which every kernel since 4.15 takes (cpu_map_alloc: value_size 4,
	// or 8 with a program's fd). MaxEntries: cilium/ebpf makes it the
	// possible CPUs.
	if m.cpumap, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_cpus", Type: ebpf.CPUMap, KeySize: 4, ValueSize: 4}); err != nil {
		m.notes = append(m.notes, fmt.Sprintf("the kernel refused a cpumap (%v): the kernel-socket endpoints' frames go to the kernel on the CPU they arrived on", err))
		m.cpumap = nil
		return nil
	}
	online, err := onlineCPUs()
	if err != nil {
		m.notes = append(m.notes, fmt.Sprintf("the online CPUs do not read (%v): the kernel-socket endpoints' frames go to the kernel on the CPU they arrived on", err))
		return nil
	}
	m.cpus = map[uint32]int{}
	for _, q := range slices.Sorted(gomaps.Keys(s.CPUs)) {
		cpu := s.CPUs[q]
		if !online[cpu] {
			m.notes = append(m.notes, fmt.Sprintf("queue %d's core %d is not an online CPU: its kernel-socket frames go to the kernel on the CPU they arrived on", q, cpu))
			continue
		}
		if err := m.cpumap.Put(uint32(cpu), uint32(cmp.Or(s.qsize, cpumapQsize))); err != nil {
			m.notes = append(m.notes, fmt.Sprintf("the cpumap refused CPU %d (%v): queue %d's kernel-socket frames go to the kernel on the CPU they arrived on", cpu, err, q))
			continue
		}
		m.cpus[q] = cpu
	}
	return nil
}

// kernelCounts reads the per-CPU counters of the kernel-socket endpoints.
func kernelCounts(s *Stage, m *ebpf.Map) []dataplane.KernelSocket {
	var out []dataplane.KernelSocket
	sum := func(k int) uint64 {
		var per []uint64
		if err := m.Lookup(uint32(k), &per); err != nil {
			return 0
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n
	}
	for i, e := range s.Endpoints {
		if e.Kernel {
			k := kernelSlots * i
			out = append(out, dataplane.KernelSocket{Endpoint: e.Name, Redirected: sum(k + kRedirected), OnCore: sum(k + kOnCore),
				NoCPUEntry: sum(k + kNoCPUEntry), RuleDropped: sum(k + kRuleDropped)})
		}
	}
	return out
}

// sysClassNet is where the interfaces' queues are read (a test's
// directory may stand in).
var sysClassNet = "/sys/class/net"

// clearQueue0RPS empties the RPS mask of ifname's receive queue 0 for as
// long as the cpumap redirects frames, and returns what puts it back. A
// redirected frame's skb is built by the cpumap's kthread without the
// receive queue it came from (net/core/xdp.c, __xdp_build_skb_from_frame:
// "RX ring dev queue index" is among the info it leaves out), so RPS
// reads queue 0's map for it (net/core/dev.c, get_rps_cpu: dev->_rx
// unless skb_rx_queue_recorded) and would move it to one of queue 0's
// CPUs, away from the core the program chose. A mask already empty, or
// not readable here (another network namespace's /sys), is left alone;
// the note says what was done.
func clearQueue0RPS(ifname string) (restore func() error, note string, err error) {
	path := filepath.Join(sysClassNet, ifname, "queues", "rx-0", "rps_cpus")
	b, err := os.ReadFile(path)
	if err != nil {
		return func() error { return nil }, "", nil
	}
	was := strings.TrimSpace(string(b))
	if strings.Trim(was, "0,") == "" {
		return func() error { return nil }, "", nil
	}
	if err := os.WriteFile(path, []byte("0\n"), 0); err != nil {
		return nil, "", fmt.Errorf("emptying %s (RPS would move the kernel-socket endpoints' redirected frames to its CPUs): %w", path, err)
	}
	note = fmt.Sprintf("the RPS mask of %s's receive queue 0 (%s) is emptied while serving: RPS would move the frames the cpumap redirects (which carry no receive queue) to its CPUs; restored at exit", ifname, was)
	return func() error {
		if err := os.WriteFile(path, []byte(was+"\n"), 0); err != nil {
			return fmt.Errorf("restoring %s to %s: %w", path, was, err)
		}
		return nil
	}, note, nil
}
