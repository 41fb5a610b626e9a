package run

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/dragonc/dragonc/backends/linux"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/stackgen"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/sim"
)

// spaceStack is a stack file of the space the stage is tested over.
type spaceStack struct {
	name string
	src  []byte
}

// spaceStacks are the shipped examples, every shape internal/stackgen
// makes from the kinds of endpoints (none, each, all), the services
// (none, each, both) and a size (one endpoint, 40, thousands for a few),
// and the first 20 valid stacks among random ones of the stack fuzz
// target (one in 14 is valid).
func spaceStacks(t *testing.T) []spaceStack {
	var out []spaceStack
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.lpg"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, spaceStack{filepath.Base(p), src})
	}
	kindNames := map[stackgen.Kinds]string{stackgen.UDP: "udp", stackgen.TCP: "tcp", stackgen.OpenMX: "openmx"}
	shape := func(s stackgen.Shape) {
		var kinds []string
		for _, k := range []stackgen.Kinds{stackgen.UDP, stackgen.TCP, stackgen.OpenMX} {
			if s.Kinds&k != 0 {
				kinds = append(kinds, kindNames[k])
			}
		}
		name := fmt.Sprintf("shape %d %s arp=%v echo=%v", s.Endpoints, strings.Join(kinds, "+"), s.ARP, s.ICMPEcho)
		out = append(out, spaceStack{name, stackgen.Shaped(s)})
	}
	for kinds := stackgen.Kinds(0); kinds <= stackgen.UDP|stackgen.TCP|stackgen.OpenMX; kinds++ {
		for services := 0; services < 4; services++ {
			sizes := []int{1, 40}
			if kinds == 0 {
				sizes = []int{0}
			}
			for _, n := range sizes {
				shape(stackgen.Shape{Endpoints: n, Kinds: kinds, ARP: services&1 != 0, ICMPEcho: services&2 != 0})
			}
		}
	}
	shape(stackgen.Shape{Endpoints: 256, Kinds: stackgen.OpenMX})
	shape(stackgen.Shape{Endpoints: 3000, Kinds: stackgen.UDP | stackgen.TCP | stackgen.OpenMX, ARP: true, ICMPEcho: true})
	shape(stackgen.Shape{Endpoints: 3000, Kinds: stackgen.UDP})
	rng := rand.New(rand.NewPCG(37, 1))
	for i, valid := 0, 0; valid < 20 && i < 2000; i++ {
		b := make([]byte, 16+rng.IntN(48))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		src := stackgen.Random(b)
		if st, diags := lpg.LoadStack("f.lpg", src); st != nil && !diags.HasErrors() {
			out = append(out, spaceStack{fmt.Sprintf("random %d", i), src})
			valid++
		}
	}
	return out
}

// spaceTarget is a model the stage is generated for and how.
type spaceTarget struct {
	nic    string // a built-in name or a model file
	target string // embed.TargetSilicon for linux-xdp, TargetLinux for a NIC
}

// spaceTargets are linux-xdp and every built-in model with a Linux
// driver (its eBPF stage takes over what the driver refuses), and the
// 82576 with an RSS that hashes addresses only (a model dragonc discover
// writes for a driver that hashes no ports).
func spaceTargets(t *testing.T) []spaceTarget {
	out := []spaceTarget{{Model, dembed.TargetSilicon}}
	for _, b := range nics.List() {
		m, _, err := nics.Load(b.Name)
		if err != nil || m == nil {
			t.Fatalf("model %s: %v", b.Name, err)
		}
		if d, _ := nics.DriverFor(m); d != nil && m.Props["stage"].Str != "ebpf" {
			out = append(out, spaceTarget{b.Name, dembed.TargetLinux})
		}
	}
	src, ok := nics.Source("82576")
	if !ok || !strings.Contains(string(src), "ports [tcp udp]") {
		t.Fatal("the 82576 model has no `ports [tcp udp]` line to take out for an RSS over addresses only")
	}
	file := filepath.Join(t.TempDir(), "82576-addresses.prg")
	if err := os.WriteFile(file, []byte(strings.Replace(string(src), "ports [tcp udp]", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(out, spaceTarget{file, dembed.TargetLinux})
}

// spaceFrames are about n of verify's frames for a stack: the first half
// aimed at its first endpoints and checks in turn, the rest picked across
// the endpoints that follow and the damaged and random frames after them.
// Frames shorter than an Ethernet header or longer than 1514 bytes are
// left out (the kernel's test runs refuse them).
func spaceFrames(st *lpg.Stack, n int) [][]byte {
	g := sim.NewGen(st, 1)
	var out [][]byte
	for i := 0; len(out) < n && i < n/2+40*n; i++ {
		f := g.Next()
		if (i < n/2 || i%40 == 0) && len(f.Data) >= 14 && len(f.Data) <= 1514 {
			out = append(out, f.Data)
		}
	}
	return out
}

// decision is what a stage's programs did with a frame.
type decision struct {
	ours, dropped bool // XDP: redirected (with its queue) or dropped, or passed up
	queue         int  // the XDP program's queue, in the metadata
	skb           bool // the socket programs ran (the kernel's test run takes the frame)
	fanout        int  // the fanout program's socket
	filter, tc    bool // the filter kept it; the tc program took it from the kernel
	answered      bool // the XDP program answered it (XDP_TX)
}

// runStage loads the four programs of s and runs them on every frame.
func runStage(s *Stage, frames [][]byte) ([]decision, error) {
	m, err := newMaps(s, 1)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var progs [4]*ebpf.Program
	for i, kind := range []int{progXDP, progFanout, progFilter, progTC} {
		if progs[i], err = loadProgram(kind, s, m); err != nil {
			return nil, err
		}
		defer progs[i].Close()
	}
	xdp, fan, filt, tc := progs[0], progs[1], progs[2], progs[3]
	out := make([]decision, len(frames))
	for i, f := range frames {
		d := &out[i]
		ro := &ebpf.RunOptions{Data: f, DataOut: make([]byte, len(f)+64)}
		act, err := xdp.Run(ro)
		if err != nil {
			return nil, fmt.Errorf("frame %d: XDP test run: %w", i, err)
		}
		switch {
		case act == 1:
			d.ours, d.dropped = true, true
		case act == 3:
			d.ours, d.answered = true, true
		case len(ro.DataOut)-len(f) == 4:
			d.ours, d.queue = true, int(binary.NativeEndian.Uint32(ro.DataOut))
		}
		q, _, err := fan.Test(f)
		if errors.Is(err, syscall.EINVAL) && len(f) < 14+40 {
			// The kernel's test run of an skb program pulls a whole IP
			// header first (bpf_prog_test_run_skb).
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("frame %d: fanout test run: %w", i, err)
		}
		keep, _, err := filt.Test(f)
		if err != nil {
			return nil, fmt.Errorf("frame %d: filter test run: %w", i, err)
		}
		v, _, err := tc.Test(f)
		if err != nil {
			return nil, fmt.Errorf("frame %d: tc test run: %w", i, err)
		}
		d.skb, d.fanout, d.filter, d.tc = true, int(q), keep != 0, v == 2
	}
	return out, nil
}

// kernels reports whether the stage leaves a frame to the kernel whatever
// the LPG does with it: TCP (dragonc has no TCP of its own) and fragments
// of anything but UDP (the kernel reassembles them). The fields are read
// as the LPG reads them.
func kernels(f []byte) bool {
	var fr packet.Frame
	fr.Decode(f)
	proto, ok := fr.Field("ip.proto")
	if !ok {
		return false
	}
	frag, _ := fr.Field("ip.frag")
	return proto == 6 || frag == 1 && proto != 17
}

// TestStageOverStacks: for every stack of the space (spaceStacks) and
// every model the stage is built for (spaceTargets), the four programs
// load in the kernel and, on verify's frames for the stack under
// BPF_PROG_TEST_RUN, agree with the LPG and the plan. A frame the LPG
// answers, delivers or sinks is the stage's, unless it is one the stage
// leaves to the kernel by design (TCP, other fragments); the stage puts
// each of its frames on the queue the configured model does (linux-xdp's
// PRG, or the NIC when the driver refused all of the plan), on the queue
// the NIC chose (nothing refused: the test run's queue 0), or on the
// queue of the refused rule that steers it (half the rules refused); and
// the AF_PACKET programs agree with the XDP program on each.
func TestStageOverStacks(t *testing.T) {
	needBPF(t)
	start := time.Now()
	stacks, targets := spaceStacks(t), spaceTargets(t)
	const perStack = 200
	// The stacks are checked two at a time (both cores), each with its own
	// counts, which are added up at the end.
	var total [11]int
	var mu sync.Mutex
	work := make(chan spaceStack)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := range work {
				n := checkSpaceStack(t, sc, targets, perStack)
				mu.Lock()
				for i := range total {
					total[i] += n[i]
				}
				mu.Unlock()
			}
		}()
	}
	for _, sc := range stacks {
		work <- sc
	}
	close(work)
	wg.Wait()
	nStages, nLoads, nFrames, nChecked, nRefused, nKernel, nTaken, nQueued, nSites, nAnswered, nKernelSocket :=
		total[0], total[1], total[2], total[3], total[4], total[5], total[6], total[7], total[8], total[9], total[10]
	t.Logf("%d stacks × %d models: %d stages (%d distinct, loaded; %d declined with a reason) on %d frames: %d checks, "+
		"%d the LPG takes, %d the kernel's, %d queues compared, %d dropped by the XDP program's checks, %d ARP and echo requests it answered, "+
		"%d the kernel's with kernel-socket endpoints; %v",
		len(stacks), len(targets), nStages, nLoads, nRefused, nFrames, nChecked, nTaken, nKernel, nQueued, nSites, nAnswered, nKernelSocket, time.Since(start).Round(time.Millisecond))
	if nTaken < nChecked/10 || nKernel < nChecked/50 || nQueued < nChecked/10 || nKernelSocket < nChecked/50 {
		t.Errorf("too few frames of each kind: the frames do not exercise the stage")
	}
}

// checkSpaceStack is TestStageOverStacks on one stack: its counts, in the
// order the test adds them up.
func checkSpaceStack(t *testing.T, sc spaceStack, targets []spaceTarget, perStack int) [11]int {
	var nStages, nLoads, nFrames, nChecked, nRefused, nKernel, nTaken, nQueued, nSites, nAnswered, nKernelSocket int
	counts := func() [11]int {
		return [11]int{nStages, nLoads, nFrames, nChecked, nRefused, nKernel, nTaken, nQueued, nSites, nAnswered, nKernelSocket}
	}
	{
		st, diags := lpg.LoadStack(sc.name, sc.src)
		if st == nil || diags.HasErrors() {
			t.Errorf("%s: %v\n%s", sc.name, diags, sc.src)
			return counts()
		}
		frames := spaceFrames(st, perStack)
		nFrames += len(frames)
		loaded := map[string][]decision{} // a stage's programs, by the stage
		for _, tg := range targets {
			r, err := planSpace(tg.nic, tg.target, sc.name, sc.src)
			if err != nil {
				t.Errorf("%s on %s: %v", sc.name, tg.nic, err)
				continue
			}
			sm, err := sim.New(r.Embedding)
			if err != nil {
				t.Error(err)
				return counts()
			}
			modes, refused, err := spaceModes(r, st)
			nRefused += refused
			if err != nil {
				t.Errorf("%s on %s: %v", sc.name, tg.nic, err)
			}
			for _, md := range modes {
				s := md.stage
				nStages++
				c := *s
				c.RSS = nil
				key := fmt.Sprintf("%+v %+v", c, s.RSS)
				ds, ok := loaded[key]
				if !ok {
					if ds, err = runStage(s, frames); err != nil {
						t.Errorf("%s on %s (%s): %v", sc.name, tg.nic, md.name, err)
						continue
					}
					loaded[key] = ds
					nLoads++
				}
				errs := 0
				fail := func(i int, format string, args ...any) {
					if errs++; errs <= 5 {
						t.Errorf("%s on %s (%s), frame %d: %s\n% x", sc.name, tg.nic, md.name, i, fmt.Sprintf(format, args...), frames[i])
					}
				}
				loop := func(q int) int {
					if i := slices.Index(s.Queues, uint32(q)); i >= 0 {
						return i
					}
					return 0
				}
				for i, d := range ds {
					nChecked++
					queue, ref := sm.RunNIC(frames[i], true)
					// The XDP program's checks (Stage.Program) drop what
					// the LPG drops at their sites, and nothing else; the
					// AF_PACKET programs run no checks.
					site := ref.Kind == lpg.Drop && slices.Contains(s.DropSites, StageDrop{ref.Node, ref.Port})
					if site != d.dropped && len(s.Program) > 0 && (site || queue >= 0) {
						fail(i, "the LPG says %s; the XDP program dropped it: %v", ref, d.dropped)
						continue
					}
					if site {
						nSites++
						continue
					}
					if md.kernel != nil {
						// The kernel owns the address: it answers ARP and
						// ping, refuses closed ports, reassembles, and
						// serves the kernel-socket endpoints.
						var fr packet.Frame
						fr.Decode(frames[i])
						frag, _ := fr.Field("ip.frag")
						et, _ := fr.Field("eth.type")
						sink := ref.Kind == lpg.Sink && et != packet.EtherTypeOpenMX // Open-MX's are the stack's
						if ref.Kind == lpg.Reply || sink || ref.Kind == lpg.Deliver && md.kernel[ref.Endpoint] || frag == 1 {
							nKernelSocket++
							if d.ours || d.skb && (d.filter || d.tc) {
								fail(i, "the LPG says %s, which the kernel-socket stage leaves to the kernel; XDP: ours %v (answered %v), filter %v, tc %v", ref, d.ours, d.answered, d.filter, d.tc)
							}
							continue
						}
					}
					if answers := stageAnswers(s, ref, frames[i]) && md.kernel == nil; d.answered != answers {
						fail(i, "the LPG says %s; the XDP program answered it: %v", ref, d.answered)
						continue
					} else if d.answered {
						nAnswered++
						continue
					}
					if d.skb {
						if d.tc != d.ours || d.filter != (d.ours && !d.dropped) {
							fail(i, "XDP: ours %v (dropped %v); the filter kept it: %v, tc took it: %v", d.ours, d.dropped, d.filter, d.tc)
						}
					}
					switch {
					case kernels(frames[i]):
						nKernel++
						if d.ours {
							fail(i, "the stage took a frame it leaves to the kernel (LPG: %s)", ref)
						}
						continue
					case ref.Kind != lpg.Drop:
						nTaken++
						if !d.ours {
							fail(i, "the LPG says %s; the stage passed it to the kernel", ref)
							continue
						}
					case !d.ours:
						continue
					}
					want := queue
					if md.device {
						// The NIC's choice, unless a refused rule steers it.
						want = 0
						hw, _ := sm.Paths()
						for _, step := range hw {
							if e, ok := strings.CutPrefix(portName(step), "entry"); ok {
								if k, err := strconv.Atoi(e); err == nil && md.refused[step.Node.Name][k] {
									want = queue
								}
							}
						}
					}
					if want < 0 {
						continue // the NIC drops it (its own checks, or a rule)
					}
					nQueued++
					if d.dropped || d.queue != want || d.skb && d.fanout != loop(want) {
						fail(i, "want queue %d (LPG: %s); XDP chose %d (dropped %v), fanout socket %d of %v", want, ref, d.queue, d.dropped, d.fanout, s.Queues)
					}
				}
			}
		}
	}
	return counts()
}

// spaceMode is a stage made of a plan, and what decides its queues.
type spaceMode struct {
	name    string
	stage   *Stage
	device  bool                    // the NIC chose the queue (0 in a test run) ...
	refused map[string]map[int]bool // ... unless a refused rule (table, entry) steers the frame
	// kernel are the kernel-socket endpoints when the stage treats them
	// as dragonc run does; nil: every endpoint is served by dragonc.
	kernel map[string]bool
}

// spaceModes are the stages of a plan: linux-xdp's, or for a NIC the
// stage that takes over all of the plan, none of it, and every other
// filter rule of it. It counts the stages HardwareStage declines with a
// reason (a table that steers a class of packets, an endpoint hash).
func spaceModes(r *dembed.Result, st *lpg.Stack) ([]spaceMode, int, error) {
	kern, err := kernelSockets(r.Plan, st, nil)
	if err != nil {
		return nil, 0, err
	}
	if r.SoftwareStage() {
		modes := []spaceMode{}
		for _, handled := range []map[string]bool{dragoncServes(st), nil} {
			s, err := stageOf(r.Plan, st, handled)
			if err != nil {
				return nil, 0, err
			}
			m := spaceMode{name: "linux-xdp", stage: s}
			if handled == nil {
				if len(kern) == 0 {
					continue
				}
				m.name, m.kernel = "linux-xdp, kernel sockets", kern
			}
			modes = append(modes, m)
		}
		return modes, 0, nil
	}
	all := linux.Steps(r)
	var half []linux.Step
	refused := map[string]map[int]bool{}
	seen := map[string]int{}
	for _, step := range all {
		if step.Kind != linux.StepRule {
			continue
		}
		if seen[step.Node]++; seen[step.Node]%2 == 0 {
			continue
		}
		if refused[step.Node] == nil {
			refused[step.Node] = map[int]bool{}
		}
		i := slices.IndexFunc(configOf(r.Plan, step.Node).Entries, func(e plan.Entry) bool {
			return e.Match == step.Entry.Match && e.Action == step.Entry.Action
		})
		refused[step.Node][i] = true
		half = append(half, step)
	}
	var modes []spaceMode
	declined := 0
	for _, m := range []spaceMode{{name: "all refused"}, {name: "none refused", device: true}, {name: "half the rules refused", device: true, refused: refused}} {
		steps := all
		switch {
		case m.refused != nil:
			steps = half
		case m.device:
			steps = nil
		}
		s, _, err := hardwareStage(r, st, steps, dragoncServes(st))
		if err != nil && strings.Contains(err.Error(), "dragonc run cannot") {
			declined++
			continue
		}
		if err != nil {
			return modes, declined, fmt.Errorf("%s: %w", m.name, err)
		}
		m.stage = s
		modes = append(modes, m)
		if m.name == "all refused" && len(kern) > 0 {
			// And as dragonc run serves it.
			ks, _, err := hardwareStage(r, st, steps, nil)
			if err != nil {
				return modes, declined, fmt.Errorf("%s, kernel sockets: %w", m.name, err)
			}
			modes = append(modes, spaceMode{name: "all refused, kernel sockets", stage: ks, kernel: kern})
		}
	}
	return modes, declined, nil
}

// planSpace embeds a stack on a model for a target with the default
// strategy, as embedtest does, but returns the embedder's error.
func planSpace(nic, target, name string, src []byte) (*dembed.Result, error) {
	st, diags := lpg.LoadStack(name, src)
	if st == nil {
		return nil, diags
	}
	m, diags, err := nics.Load(nic)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, diags
	}
	in, warnings, err := dembed.NewInput(nic, m, st, nil, dembed.Options{Target: target})
	if err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return nil, errors.New(strings.Join(warnings, "; "))
	}
	return dembed.Run(in)
}

// portName is the port a step of a path took; "" for none.
func portName(s graph.Step) string {
	if s.Port == nil {
		return ""
	}
	return s.Port.Name
}

// TestClassifierEveryShape loads the four programs of every shape of
// stage the generator branches on, whether or not a plan makes it yet:
// the frames that can be ours (ARP, echo, Open-MX, the software VI's),
// the miss rule (a queue, the device's, RSS over addresses, with TCP
// ports, UDP ports or both), rules (none, or two groups, one that
// drops), and queues that are or are not the loops' indices. The kernel
// refuses a program with code no jump reaches.
func TestClassifierEveryShape(t *testing.T) {
	needBPF(t)
	us := netip.MustParseAddr("10.9.0.1")
	full, port := [16]byte{}, [16]byte{}
	for i := 0; i < 13; i++ {
		full[i] = 0xff
	}
	port[10], port[11], port[12] = 0xff, 0xff, 0xff
	rules := []Group{
		{Table: "flows", Mask: full, Ports: true, Capacity: 4, Rules: []Rule{{Key: Key(17, us, us, 1, 2), Queue: DropQueue}}},
		{Table: "ports", Mask: port, Ports: true, Capacity: 4, Rules: []Rule{{Key: Key(17, netip.IPv4Unspecified(), netip.IPv4Unspecified(), 0, 7), Queue: 2}}},
	}
	misses := []struct {
		miss     int
		tcp, udp bool // RSS hashes the ports of TCP, of UDP
	}{{MissQueue, false, false}, {MissDevice, false, false}, {MissRSS, false, false}, {MissRSS, true, false}, {MissRSS, false, true}, {MissRSS, true, true}}
	loaded := 0
	for flags := 0; flags < 8; flags++ {
		for _, miss := range misses {
			for _, groups := range [][]Group{nil, rules} {
				for _, queues := range [][]uint32{{0}, {2, 5}} {
					s := &Stage{Addrs: []netip.Addr{us}, ARP: flags&1 != 0, ICMP: flags&2 != 0, OpenMX: flags&4 != 0,
						Groups: groups, Queues: queues, Miss: miss.miss, MissQueue: queues[0]}
					if miss.miss == MissRSS {
						s.RSS = &RSS{Key: make([]byte, 40), Indirection: []uint32{0, 2}, TCPPorts: miss.tcp, UDPPorts: miss.udp}
					}
					m, err := newMaps(s, 1)
					if err != nil {
						t.Fatal(err)
					}
					for _, kind := range []int{progXDP, progFanout, progFilter, progTC} {
						p, err := loadProgram(kind, s, m)
						if err != nil {
							t.Errorf("ARP %v, echo %v, Open-MX %v, miss %+v, %d groups, queues %v: %v", s.ARP, s.ICMP, s.OpenMX, miss, len(groups), queues, err)
							continue
						}
						p.Close()
						loaded++
					}
					m.Close()
				}
			}
		}
	}
	t.Logf("%d programs loaded", loaded)
}
