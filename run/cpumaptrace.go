package run

import (
	"errors"
	"fmt"
	gomaps "maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/run/dataplane"
)

// The cpumap's own drops. A frame the XDP program redirects waits in a
// per-CPU bulk queue and is then put in the target CPU's ring of qsize
// frames; when that ring is full the kernel frees the frame and counts
// it only in the xdp:xdp_cpumap_enqueue tracepoint (kernel/bpf/cpumap.c,
// bq_flush_to_queue: drops++ when __ptr_ring_produce fails; the generic
// XDP path's cpu_map_generic_redirect reports each skb alike). Under a
// flood that is the drop a user needs to see, so run attaches a small
// program to that tracepoint which adds, for its own cpumap only (the
// tracepoint's map_id), each CPU's queued and dropped frames to a per-CPU
// array the reports read. The record's layout is read from the kernel's
// format file at load time, not assumed.

// cpumapEventGroup and cpumapEventName name the tracepoint.
const (
	cpumapEventGroup = "xdp"
	cpumapEventName  = "xdp_cpumap_enqueue"
)

// tracefsDirs are where tracefs is looked for, in order
// (Documentation/trace/ftrace.rst: /sys/kernel/tracing since Linux 4.1,
// under debugfs before).
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// tracefs returns the directory of a mounted tracefs. When none is
// mounted and /sys/kernel/tracing is an empty mount point (as in the
// /sys that `ip netns exec` mounts afresh), it mounts one there, in this
// process's mount namespace, and undo unmounts it: the tracepoint, once
// attached, needs it no longer, and run leaves no mount behind.
func tracefs() (dir string, undo func(), err error) {
	for _, d := range tracefsDirs {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err == nil && st.Type == unix.TRACEFS_MAGIC {
			return d, func() {}, nil
		}
	}
	d := tracefsDirs[0]
	if err := unix.Mount("tracefs", d, "tracefs", 0, ""); err != nil {
		return "", nil, fmt.Errorf("no tracefs is mounted, and mounting one at %s failed (mount -t tracefs tracefs %s): %w", d, d, err)
	}
	return d, func() { unix.Unmount(d, 0) }, nil
}

// tpField is a field of a tracepoint's record: its offset and size in
// bytes.
type tpField struct{ off, size int }

// tracepointFormat reads the fields of a tracepoint's record from its
// format file (a line a field: "field:TYPE NAME;	offset:N;	size:N;
// signed:N;", kernel/trace/trace_events.c, f_show).
func tracepointFormat(text string) (map[string]tpField, error) {
	out := map[string]tpField{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		var name string
		f := tpField{off: -1, size: -1}
		for _, part := range strings.Split(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok {
				continue
			}
			switch k {
			case "field":
				// The name is the declaration's last word, less any
				// array bounds.
				words := strings.Fields(v)
				if len(words) == 0 {
					return nil, fmt.Errorf("a field without a name: %q", line)
				}
				name, _, _ = strings.Cut(words[len(words)-1], "[")
			case "offset", "size":
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("%s of %q: %w", k, line, err)
				}
				if k == "offset" {
					f.off = n
				} else {
					f.size = n
				}
			}
		}
		if name == "" || f.off < 0 || f.size < 0 {
			return nil, fmt.Errorf("a field line without a name, offset or size: %q", line)
		}
		out[name] = f
	}
	return out, nil
}

// cpumapFields are the fields of xdp_cpumap_enqueue the program reads,
// each a 4-byte integer (include/trace/events/xdp.h).
var cpumapFields = []string{"map_id", "to_cpu", "processed", "drops"}

// cpumapFormat reads the format of xdp_cpumap_enqueue: the fields the
// program reads, each 4 bytes and 4-aligned as a tracepoint program's
// loads must be (kernel/trace/bpf_trace.c, tp_prog_is_valid_access).
func cpumapFormat(text string) (map[string]tpField, error) {
	fields, err := tracepointFormat(text)
	if err != nil {
		return nil, err
	}
	for _, name := range cpumapFields {
		f, ok := fields[name]
		if !ok || f.size != 4 || f.off%4 != 0 || f.off > math.MaxInt16 {
			return nil, fmt.Errorf("no 4-byte, 4-aligned field %s", name)
		}
	}
	return fields, nil
}

// cpumapQueue is the value of the counting map for a CPU.
type cpumapQueue struct{ Queued, Dropped uint64 }

// cpumapQueueCounts is its size in bytes.
const cpumapQueueCounts = 16

// cpumapProgram counts, for the cpumap whose id is mapID, each event's
// frames in counts (a per-CPU array by to_cpu, cpumapQueueCounts bytes:
// queued, dropped). The two paths of the kernel say processed
// differently: bq_flush_to_queue counts every frame of its bulk in
// processed, drops included; cpu_map_generic_redirect reports one skb as
// processed 1 when queued, drops 1 when not. Either way the frames
// queued are processed less drops where processed is not below drops,
// and processed (none) otherwise.
func cpumapProgram(f map[string]tpField, mapID uint32, counts *ebpf.Map) asm.Instructions {
	const key = -4
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R1, asm.R6, int16(f["map_id"].off), asm.Word),
		asm.JNE.Imm32(asm.R1, int32(mapID), "out"),
		asm.LoadMem(asm.R1, asm.R6, int16(f["to_cpu"].off), asm.Word),
		asm.StoreMem(asm.R10, key, asm.R1, asm.Word),
		asm.LoadMem(asm.R7, asm.R6, int16(f["processed"].off), asm.Word),
		asm.LoadMem(asm.R8, asm.R6, int16(f["drops"].off), asm.Word),
		asm.JLT.Reg(asm.R7, asm.R8, "count"), // the generic path's drop: processed (0) were queued
		asm.Sub.Reg(asm.R7, asm.R8),
		asm.LoadMapPtr(asm.R1, counts.FD()).WithSymbol("count"),
		asm.Mov.Reg(asm.R2, asm.R10), asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord), asm.Add.Reg(asm.R1, asm.R7), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord), asm.Add.Reg(asm.R1, asm.R8), asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"), asm.Return(),
	}
}

// cpumapTrace is the counting of the cpumap's queues while it serves.
type cpumapTrace struct {
	counts *ebpf.Map // per-CPU array by CPU: queued, dropped
	prog   *ebpf.Program
	link   link.Link
}

func (c *cpumapTrace) Close() {
	if c == nil {
		return
	}
	if c.link != nil {
		c.link.Close()
	}
	if c.prog != nil {
		c.prog.Close()
	}
	if c.counts != nil {
		c.counts.Close()
	}
}

// traceCpumap attaches the counting program to xdp:xdp_cpumap_enqueue
// for the cpumap of m. Where the kernel's tracing is not there or
// refuses, it returns nil and a note that says so: the frames are served
// all the same, their cpumap drops counted by the kernel's tracepoint
// only.
func traceCpumap(m *maps) (*cpumapTrace, string) {
	c, err := attachCpumapTrace(m)
	if err != nil {
		c.Close()
		return nil, fmt.Sprintf("the frames the cpumap drops with a CPU's queue full are not counted here (%v): the kernel counts them in the %s:%s tracepoint's drops", err, cpumapEventGroup, cpumapEventName)
	}
	return c, ""
}

func attachCpumapTrace(m *maps) (*cpumapTrace, error) {
	info, err := m.cpumap.Info()
	if err != nil {
		return nil, fmt.Errorf("reading the cpumap's id: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return nil, errors.New("the kernel gives no id of the cpumap")
	}
	dir, undo, err := tracefs()
	if err != nil {
		return nil, err
	}
	defer undo() // once attached (link.Tracepoint reads the event's id there)
	path := filepath.Join(dir, "events", cpumapEventGroup, cpumapEventName, "format")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fields, err := cpumapFormat(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := &cpumapTrace{}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return c, err
	}
	if c.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "dragonc_cpuq", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: cpumapQueueCounts, MaxEntries: uint32(cpus)}); err != nil {
		return c, err
	}
	c.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "dragonc_cpuq", Type: ebpf.TracePoint, License: "GPL",
		Instructions: cpumapProgram(fields, uint32(id), c.counts)})
	if err != nil {
		return c, fmt.Errorf("loading the counting program: %w", err)
	}
	if c.link, err = link.Tracepoint(cpumapEventGroup, cpumapEventName, c.prog, nil); err != nil {
		return c, fmt.Errorf("attaching to %s:%s: %w", cpumapEventGroup, cpumapEventName, err)
	}
	return c, nil
}

// missed is how many events the kernel did not run the counting
// program for: a tracepoint's program is skipped while another tracing
// program runs on the CPU (kernel/trace/bpf_trace.c, trace_call_bpf,
// which counts it in bpf_prog_info.recursion_misses since Linux 6.7;
// earlier kernels read 0).
func (c *cpumapTrace) missed() uint64 {
	st, err := c.prog.Stats()
	if err != nil {
		return 0
	}
	return st.RecursionMisses
}

// read sums the counters of each CPU of m's cpumap, naming the
// kernel-socket endpoints of s whose planned queues have it under plan
// pl.
func (c *cpumapTrace) read(s *Stage, m *maps, pl *plan.Plan) []dataplane.CpumapCPU {
	byCPU := map[int][]string{}
	for _, e := range pl.Endpoints {
		if !slices.ContainsFunc(s.Endpoints, func(se StageEndpoint) bool { return se.Name == e.Name && se.Kernel }) {
			continue
		}
		for _, q := range e.Queues {
			if cpu, ok := m.cpus[uint32(q)]; ok && !slices.Contains(byCPU[cpu], e.Name) {
				byCPU[cpu] = append(byCPU[cpu], e.Name)
			}
		}
	}
	var out []dataplane.CpumapCPU
	for _, cpu := range slices.Sorted(gomaps.Keys(byCPU)) {
		var per []cpumapQueue
		if err := c.counts.Lookup(uint32(cpu), &per); err != nil {
			continue
		}
		k := dataplane.CpumapCPU{CPU: cpu, Endpoints: byCPU[cpu]}
		for _, v := range per {
			k.Queued += v.Queued
			k.Dropped += v.Dropped
		}
		out = append(out, k)
	}
	return out
}
