package run

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/run/dataplane"
)

// enqueueFormat is xdp_cpumap_enqueue's format file as Linux 6.18 has it.
const enqueueFormat = `name: xdp_cpumap_enqueue
ID: 579
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:int map_id;	offset:8;	size:4;	signed:1;
	field:u32 act;	offset:12;	size:4;	signed:0;
	field:int cpu;	offset:16;	size:4;	signed:1;
	field:unsigned int drops;	offset:20;	size:4;	signed:0;
	field:unsigned int processed;	offset:24;	size:4;	signed:0;
	field:int to_cpu;	offset:28;	size:4;	signed:1;

print fmt: "enqueue cpu=%d map_id=%d action=%s processed=%u drops=%u to_cpu=%d", REC->cpu, REC->map_id, __print_symbolic(REC->act, { 0, "ABORTED" }, { 1, "DROP" }, { 2, "PASS" }, { 3, "TX" }, { 4, "REDIRECT" }, { -1, ((void *)0) }), REC->processed, REC->drops, REC->to_cpu
`

// TestCpumapFormat: the fields are read from the format file, and one
// that lacks a field the program reads, or has it of another size or
// misaligned, or a field line that does not read, is refused.
func TestCpumapFormat(t *testing.T) {
	f, err := cpumapFormat(enqueueFormat)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tpField{"map_id": {8, 4}, "to_cpu": {28, 4}, "processed": {24, 4}, "drops": {20, 4}, "common_type": {0, 2}, "cpu": {16, 4}}
	for name, w := range want {
		if f[name] != w {
			t.Errorf("%s: %+v, want %+v", name, f[name], w)
		}
	}
	// The same fields elsewhere (a kernel that adds one before them).
	moved := strings.NewReplacer("offset:8;", "offset:32;", "offset:20;", "offset:36;").Replace(enqueueFormat)
	if f, err := cpumapFormat(moved); err != nil || f["map_id"].off != 32 || f["drops"].off != 36 {
		t.Errorf("moved fields: %+v, %v", f, err)
	}
	for name, text := range map[string]string{
		"no drops":            strings.Replace(enqueueFormat, "field:unsigned int drops;", "field:unsigned int dropped;", 1),
		"an 8-byte map_id":    strings.Replace(enqueueFormat, "field:int map_id;	offset:8;	size:4;", "field:long map_id;	offset:8;	size:8;", 1),
		"to_cpu misaligned":   strings.Replace(enqueueFormat, "offset:28;", "offset:30;", 1),
		"an offset unread":    strings.Replace(enqueueFormat, "offset:24;", "offset:x;", 1),
		"a field no offset":   strings.Replace(enqueueFormat, "	offset:12;", "", 1),
		"nothing in the file": "",
	} {
		if _, err := cpumapFormat(text); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// needCpumapTrace skips a test that floods one CPU's cpumap queue from
// the other and counts it with the tracepoint program, where eBPF, a
// second CPU or tracing is missing.
func needCpumapTrace(t *testing.T) {
	t.Helper()
	needBPF(t)
	if runtime.NumCPU() < 2 {
		t.Skip("this test needs two CPUs")
	}
	if _, undo, err := tracefs(); err != nil {
		t.Skipf("no tracing here: %v", err)
	} else {
		undo()
	}
}

// TestCpumapDrops: a cpumap queue of one frame, and 64 frames of kudp1
// redirected by the XDP program to its CPU in one batch
// (BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, Linux 5.18, from
// the other CPU): the kernel queues what fits before the CPU's kernel
// thread runs and drops the rest, and the tracepoint's counters say so
// for that CPU, queued and dropped adding up to the frames redirected.
// Frames another cpumap (another program's on the host) drops are not
// counted. The frames run in a namespace of their own, whose kernel
// drops them after the cpumap.
func TestCpumapDrops(t *testing.T) {
	needCpumapTrace(t)
	s, core, pl := queueOfOne(t)
	other := 1 - core
	ns, _ := netnstest.Two(t)

	m, p := xdpStage(t, s)
	trace := tracing(t, m)
	// Another cpumap with a program of its own, on the same CPUs.
	_, p2 := xdpStage(t, s)

	const frames = 64
	f := udp(t, ourIP, 5000, 7101, false)
	f = append(f, make([]byte, 60-len(f))...)
	flood := func(p *ebpf.Program) {
		t.Helper()
		err := inNS(ns, func() error {
			return onCPU(other, func() error {
				_, err := p.Run(&ebpf.RunOptions{Data: f, Repeat: frames, BatchSize: frames, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES})
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	flood(p2)
	if got := trace.read(s, m, pl); slices.ContainsFunc(got, func(c dataplane.CpumapCPU) bool { return c.Queued+c.Dropped > 0 }) {
		t.Errorf("another cpumap's frames were counted: %+v", got)
	}
	flood(p)
	var kudp1 dataplane.KernelSocket
	for _, k := range kernelCounts(s, m.kcounts) {
		if k.Endpoint == "kudp1" {
			kudp1 = k
		}
	}
	if kudp1.Redirected != frames {
		t.Fatalf("kudp1: %+v; want %d redirected", kudp1, frames)
	}
	got := trace.read(s, m, pl)
	i := slices.IndexFunc(got, func(c dataplane.CpumapCPU) bool { return c.CPU == core })
	if i < 0 {
		t.Fatalf("no counts for CPU %d: %+v", core, got)
	}
	c := got[i]
	if c.Dropped == 0 || c.Queued == 0 || c.Queued+c.Dropped != frames || !slices.Contains(c.Endpoints, "kudp1") {
		t.Errorf("CPU %d: %+v; want frames both queued and dropped, %d in all, kudp1 among the endpoints", core, c, frames)
	}
	for _, o := range got {
		if o.CPU != core && o.Queued+o.Dropped > 0 {
			t.Errorf("CPU %d counted frames: %+v", o.CPU, o)
		}
	}
	t.Logf("CPU %d's queue of one: %d queued, %d dropped", core, c.Queued, c.Dropped)
}

// TestServeCpumapDrops serves the mixed stack on a veth with a cpumap
// queue of one frame and floods kudp1 from the CPU other than its
// planned one: run's report has a cpumap line, and for kudp1's CPU the
// frames queued and dropped there add up to the frames its endpoints
// had redirected, and some were dropped. (Each frame is flushed to the
// queue on its own here, so a drop needs the CPU's kernel thread not to
// have taken the previous one yet: 8180 and 8762 of 19995 in two runs;
// TestCpumapDrops makes them happen without a race.)
func TestServeCpumapDrops(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("this test needs two CPUs")
	}
	a, b := pair(t)
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	r, st := embedTest(t, kernelStack)
	core := plannedCores(r.Plan.Endpoints, r.Plan.Queues, "kudp1")[0]
	bg := serveInBackground(t, a, r, st, Options{Iface: "vA", Socket: "xdp", stageEdit: func(s *Stage) { s.qsize = 1 }})
	const datagrams = 20000
	flood(t, b, 1-core, "10.9.0.1:7101", datagrams)
	bg.stop(t)
	rep, out, log := bg.report(), &bg.out, &bg.log
	if strings.Contains(log.String(), "not counted here") {
		t.Fatalf("run could not count the cpumap's drops:\n%s", log.String())
	}
	i := slices.IndexFunc(rep.Cpumap, func(c dataplane.CpumapCPU) bool { return c.CPU == core })
	if i < 0 {
		t.Fatalf("the report has no cpumap counts for CPU %d: %+v\n%s", core, rep.Cpumap, out.String())
	}
	c := rep.Cpumap[i]
	var redirected uint64
	for _, k := range rep.KernelSockets {
		if slices.Contains(c.Endpoints, k.Endpoint) {
			if cores := plannedCores(r.Plan.Endpoints, r.Plan.Queues, k.Endpoint); len(cores) != 1 {
				t.Fatalf("%s has cores %v; the sum wants one each", k.Endpoint, cores)
			}
			redirected += k.Redirected
		}
	}
	if redirected < datagrams/2 || c.Queued+c.Dropped != redirected {
		t.Errorf("CPU %d: %+v; its endpoints had %d redirected (of %d sent)", core, c, redirected, datagrams)
	}
	if c.Dropped == 0 {
		t.Errorf("CPU %d: %+v; a queue of one frame under %d datagrams dropped none", core, c, datagrams)
	}
	if want := fmt.Sprintf(" cpu %d (kudp1, ", core); !strings.Contains(out.String(), "\ncpumap: ") || !strings.Contains(out.String(), want) {
		t.Errorf("the counters have no cpumap line with %q:\n%s", want, out.String())
	}
	t.Logf("CPU %d's queue of one: %d redirected, %d queued, %d dropped", core, redirected, c.Queued, c.Dropped)
}

// TestCpumapNoTracing: where no tracefs can be found or mounted, the
// counting is left out with a note that says where the kernel counts
// those drops, and nothing else fails.
func TestCpumapNoTracing(t *testing.T) {
	needBPF(t)
	was := tracefsDirs
	tracefsDirs = []string{t.TempDir() + "/none"}
	defer func() { tracefsDirs = was }()
	r, st := embedTest(t, kernelStack)
	s, err := StageOf(r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	trace, note := traceCpumap(m)
	if trace != nil || !strings.Contains(note, "not counted here") || !strings.Contains(note, "xdp:xdp_cpumap_enqueue") || !strings.Contains(note, "mount -t tracefs") {
		t.Errorf("without tracefs: %v, note %q", trace, note)
	}
}

// flood sends n datagrams of 32 bytes to addr from namespace ns, on CPU
// cpu, as fast as it can.
func flood(t *testing.T, ns string, cpu int, addr string, n int) {
	t.Helper()
	err := inNS(ns, func() error {
		return onCPU(cpu, func() error {
			c, err := net.Dial("udp4", addr)
			if err != nil {
				return err
			}
			defer c.Close()
			msg := make([]byte, 32)
			for range n {
				c.Write(msg) // the kernel's port unreachable may refuse one: no matter
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCpumapDropsGeneric: the same counting where the XDP program runs
// on the generic hook (a driver without XDP of its own), whose cpumap
// path reports each frame to the tracepoint on its own, processed 1 when
// queued and drops 1 when not (kernel/bpf/cpumap.c,
// cpu_map_generic_redirect): kudp1 flooded from the other CPU through a
// veth with the program attached in generic mode and a queue of one
// frame, the frames queued and dropped at its CPU add up to those
// redirected, and some were dropped.
func TestCpumapDropsGeneric(t *testing.T) {
	needCpumapTrace(t)
	a, b := pair(t)
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	s, core, pl := queueOfOne(t)
	m, p := xdpStage(t, s)
	trace := tracing(t, m)
	err := inNS(a, func() error {
		ifc, err := net.InterfaceByName("vA")
		if err != nil {
			return err
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPGenericMode})
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const datagrams = 20000
	flood(t, b, 1-core, "10.9.0.1:7101", datagrams)
	var kudp1 dataplane.KernelSocket
	for _, k := range kernelCounts(s, m.kcounts) {
		if k.Endpoint == "kudp1" {
			kudp1 = k
		}
	}
	got := trace.read(s, m, pl)
	i := slices.IndexFunc(got, func(c dataplane.CpumapCPU) bool { return c.CPU == core })
	if i < 0 || kudp1.Redirected < datagrams/2 {
		t.Fatalf("kudp1 %+v, cpumap %+v", kudp1, got)
	}
	c := got[i]
	if c.Queued+c.Dropped != kudp1.Redirected || c.Dropped == 0 {
		t.Errorf("CPU %d: %+v; kudp1 had %d redirected; want them all queued or dropped, some dropped", core, c, kudp1.Redirected)
	}
	t.Logf("generic XDP, CPU %d's queue of one: %d redirected, %d queued, %d dropped", core, kudp1.Redirected, c.Queued, c.Dropped)
}

// queueOfOne is kernelStack's stage with cpumap queues of one frame, the
// CPU planned for its endpoint kudp1, and the plan.
func queueOfOne(t *testing.T) (*Stage, int, *plan.Plan) {
	t.Helper()
	r, st := embedTest(t, kernelStack)
	s, err := StageOf(r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	s.qsize = 1
	return s, plannedCores(r.Plan.Endpoints, r.Plan.Queues, "kudp1")[0], r.Plan
}

// tracing attaches the cpumap tracepoint program for m's cpumap until the
// test ends.
func tracing(t *testing.T, m *maps) *cpumapTrace {
	t.Helper()
	trace, err := attachCpumapTrace(m)
	t.Cleanup(trace.Close) // Close takes nil and a half-attached trace
	if err != nil {
		t.Fatal(err)
	}
	return trace
}
