package live

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/internal/netns"
	"github.com/dragonc/dragonc/run"
)

// Dragonet's priority experiment, live (`dragonc bench --live
// --memcached`): two unmodified memcached servers, gold and best-effort,
// each pinned to the core the plan gives its endpoint, behind a stack
// like examples/memcached_gold.lpg embedded with the priority cost. The
// gold client sends at a modest fixed rate, alone and then beside a
// best-effort flood that saturates the best-effort server, and then both
// servers are saturated; each under dragonc's plan (`dragonc run` serving
// the stack: the kernel-socket endpoints' frames steered to their
// planned cores) and under the kernel's default (no dragonc), in
// interleaved rounds.

// MemcachedServerNames are the rows of the memcached mode: the kernel's
// default, dragonc's plan, and the kernel's default behind an XDP
// program that passes every frame, which tells the cost of a veth's XDP
// path from that of dragonc's steering: with a program on it, a veth
// takes its frames through NAPI and copies one whose head lacks XDP's
// headroom (drivers/net/veth.c, veth_xdp_rcv_skb), which the kernel's
// default path does not.
func MemcachedServerNames() []string { return []string{"kernel", "dragonc", "xdp-pass"} }

var memcachedTitles = map[string]string{
	"kernel":   "no dragonc: the kernel's default steering on the veth (RSS and RPS as Linux sets them)",
	"dragonc":  "dragonc run --socket xdp serving the stack: each kernel-socket endpoint's frames processed on its planned core",
	"xdp-pass": "no dragonc, but an XDP program that passes every frame on the servers' veth: the kernel's default on the veth's XDP path",
}

// The memcached instances: name, port, class.
const (
	goldPort = 11211
	bePort   = 11212
	// mcKeys values of mcValueBytes bytes are stored in each instance
	// before the measurements; the clients get them in turn.
	mcKeys       = 100
	mcValueBytes = 32
)

// memcachedStack is the stack of the memcached mode: examples/
// memcached_gold.lpg on the benchmark's veth, the best-effort endpoint on
// core 0, whose queue 0 is the default one the priority cost leaves to
// best-effort traffic, and the gold endpoint on core 1, on a queue of
// its own (both on the one core of a 1-core host). So declared, the
// plan honours both endpoints' cores; declared the other way round, the
// priority cost still gives gold queue 1 and says the cores are not
// honoured.
func memcachedStack(cores int) string {
	gold, be := "cores 0..0", "cores 0..0"
	if cores > 1 {
		gold = "cores 1..1"
	}
	return fmt.Sprintf(`stack memcached_live {
    interface eth0 { mac %s ip %s/24 }
    cores 0..%d
    endpoint gold udp listen %s:%d { app "memcached" class gold %s }
    endpoint be udp listen %s:%d { app "memcached-batch" %s }
    service arp
    service icmp-echo
}
`, serverMAC, serverAddr, max(1, cores)-1, serverAddr, goldPort, gold, serverAddr, bePort, be)
}

// mcLoad is one memcached load generator's load (mcgen.c's usage line).
type mcLoad struct {
	port     int
	rate     int // requests per second (open loop), or
	inFlight int // requests outstanding (closed loop)
	sockets  int
	threads  int
	duration time.Duration
	timeout  time.Duration
	warmup   time.Duration
	server   int // the memcached's process, whose CPU time mcgen reads; 0: none
	core     int // its core, whose busy time mcgen reads; -1: none
}

func (l mcLoad) args(netnsPath string) []string {
	mode, n := "inflight", l.inFlight
	if l.rate > 0 {
		mode, n = "rate", l.rate
	}
	return []string{netnsPath, serverAddr.String(), strconv.Itoa(l.port), mode, strconv.Itoa(n), strconv.Itoa(l.sockets),
		ms(l.duration), ms(l.timeout), ms(l.warmup), strconv.Itoa(max(1, l.threads)), strconv.Itoa(mcKeys), strconv.Itoa(l.server), strconv.Itoa(l.core)}
}

// mcResult is what mcgen prints.
type mcResult struct {
	genCounts
	Hits     uint64 `json:"hits"`
	Misses   uint64 `json:"misses"`
	Errors   uint64 `json:"errors"`
	Sent     uint64 `json:"sent"`
	Skipped  uint64 `json:"skipped"`
	ServerNs uint64 `json:"server_ns"`
	CoreNs   uint64 `json:"core_ns"`
}

// mcgenerate runs the memcached load generator in namespace netnsPath.
func (p *programs) mcgenerate(ctx context.Context, netnsPath string, l mcLoad) (*mcResult, error) {
	var r mcResult
	cmd := exec.Command(p.mcgen, l.args(netnsPath)...)
	if err := runGenerator(ctx, cmd, l.warmup+l.duration+2*l.timeout, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// mcServer is a memcached instance the benchmark started.
type mcServer struct {
	name string // the endpoint's
	port int
	core int // the core it is pinned to
	cmd  *exec.Cmd
	done chan error
}

// startMemcached starts the Debian package's memcached, unmodified, in
// namespace A on addr:port (UDP and TCP), one worker thread, every
// thread of it on core: the CPU set is the one the starting thread has
// when it forks (sched_setaffinity(2): a child inherits its parent's
// mask), so no thread of memcached's ever runs elsewhere. That thread
// lives as long as memcached does, waiting for it: the kernel sends the
// parent-death signal (SIGKILL, should the benchmark be killed) when the
// thread that forked exits (prctl(2), PR_SET_PDEATHSIG), not only the
// process.
func (b *bench) startMemcached(path, name string, port, core int) (*mcServer, error) {
	m := &mcServer{name: name, port: port, core: core, done: make(chan error, 1)}
	p := strconv.Itoa(port)
	m.cmd = exec.Command(path, "-U", p, "-p", p, "-l", serverAddr.String(), "-t", "1", "-u", "nobody")
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	m.cmd.Stdout, m.cmd.Stderr = &stderr, &stderr
	started := make(chan error, 1)
	go func() {
		err := netns.In(b.pair.a, func() error {
			// netns.In's thread ends with it: its mask goes too.
			var set unix.CPUSet
			set.Set(core)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("pinning memcached %s to core %d: %w", name, core, err)
			}
			if err := m.cmd.Start(); err != nil {
				return err
			}
			started <- nil
			m.done <- m.cmd.Wait()
			return nil
		})
		if err != nil {
			started <- err // it did not start
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting memcached %s: %w", name, err)
	}
	// It is ready when it takes a TCP connection, from the peer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := b.dialPeer(port)
		if err == nil {
			c.Close()
			return m, nil
		}
		select {
		case werr := <-m.done:
			m.done <- werr
			return nil, fmt.Errorf("memcached %s exited at start (%v): %s", name, werr, strings.TrimSpace(stderr.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("memcached %s took no TCP connection within 10s: %v", name, err)
		}
	}
}

// alive says why the instance is no longer running, or nil.
func (m *mcServer) alive() error {
	select {
	case err := <-m.done:
		m.done <- err
		return fmt.Errorf("memcached %s exited: %v", m.name, err)
	default:
		return nil
	}
}

func (m *mcServer) stop() {
	m.cmd.Process.Kill()
	err := <-m.done
	m.done <- err
}

// dialPeer opens a TCP connection from the peer's namespace to the
// server's port.
func (b *bench) dialPeer(port int) (net.Conn, error) {
	var c net.Conn
	err := netns.In(b.pair.b, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(serverAddr.String(), strconv.Itoa(port)), time.Second)
		return err
	})
	return c, err
}

// fill stores the benchmark's values in the instance over TCP (memcached's
// protocol.txt, "Storage commands": set KEY FLAGS EXPTIME BYTES, the data,
// answered STORED).
func (b *bench) fill(m *mcServer) error {
	c, err := b.dialPeer(m.port)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	w := bufio.NewWriter(c)
	value := strings.Repeat("v", mcValueBytes)
	for k := range mcKeys {
		fmt.Fprintf(w, "set k%d 0 0 %d\r\n%s\r\n", k, len(value), value)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("memcached %s: %w", m.name, err)
	}
	r := bufio.NewReader(c)
	for k := range mcKeys {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("memcached %s: the answer to set k%d: %w", m.name, k, err)
		}
		if line != "STORED\r\n" {
			return fmt.Errorf("memcached %s: set k%d answered %q", m.name, k, line)
		}
	}
	return nil
}

// RunMemcached runs the memcached mode (Options.Memcached). As Run does,
// it removes whatever it made however it ends.
func RunMemcached(ctx context.Context, opt Options) (*MemcachedReport, error) {
	opt.Memcached = true
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	mcPath, err := exec.LookPath("memcached")
	if err != nil {
		return nil, fmt.Errorf("the memcached mode runs memcached, which is not installed (Debian: apt-get install memcached): %w", err)
	}
	b, err := prepare(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer b.close()
	if b.progs.mcgen == "" {
		return nil, fmt.Errorf("the memcached mode needs its C load generator: %s", b.progs.noCC)
	}
	rep := &MemcachedReport{Compiler: b.progs.cc, Cores: b.cores, Rounds: opt.Rounds, Seconds: opt.Duration.Seconds(),
		TimeoutMs: float64(opt.Timeout) / 1e6, GoldRate: opt.GoldRate, InFlight: opt.InFlight, Sockets: opt.Sockets,
		Keys: mcKeys, ValueBytes: mcValueBytes, Cost: "priority", Stack: memcachedStack(b.cores),
		P99Goal: 2, ThroughputGoal: 0.95}
	if out, err := exec.Command(mcPath, "-V").Output(); err == nil {
		rep.Memcached = strings.TrimSpace(string(out))
	}
	if b.plan, b.stack, err = run.PlanCost("memcached_live.lpg", []byte(rep.Stack), "priority"); err != nil {
		return nil, fmt.Errorf("internal error: the memcached stack: %w", err)
	}
	for _, name := range []string{"gold", "be"} {
		e, err := planned(b.plan.Plan.Endpoints, name)
		if err != nil {
			return nil, err
		}
		rep.Endpoints = append(rep.Endpoints, e)
	}
	if err := b.makePair(); err != nil {
		return nil, err
	}
	// The kernel answers for the server's address: it needs the peer's
	// MAC, and no ARP is to run during the measurements (the peer has the
	// server's already).
	if err := b.pinPeerNeighbour(); err != nil {
		return nil, err
	}
	var gold, be *mcServer
	for _, e := range rep.Endpoints {
		b.say("starting memcached %s on port %d, pinned to core %d", e.Name, e.Port, e.Core)
		m, err := b.startMemcached(mcPath, e.Name, e.Port, e.Core)
		if err != nil {
			return nil, err
		}
		b.undo = append(b.undo, m.stop)
		if err := b.fill(m); err != nil {
			return nil, err
		}
		if e.Name == "gold" {
			gold = m
		} else {
			be = m
		}
	}
	for _, s := range opt.Servers {
		rep.Servers = append(rep.Servers, &MemcachedServer{Name: s, Title: memcachedTitles[s]})
	}
	rep.Background, err = b.rounds(len(rep.Servers), func(r, i int, _ float64) {
		sr := rep.Servers[i]
		sr.Rounds = append(sr.Rounds, b.measureMemcached(sr.Name, r, gold, be))
	})
	if err != nil {
		return nil, err
	}
	rep.finish()
	return rep, nil
}

// pinPeerNeighbour gives vB a fixed MAC and namespace A a permanent
// neighbour entry for it.
func (b *bench) pinPeerNeighbour() error {
	for _, s := range [][]string{
		{"-n", b.pair.b, "link", "set", peerIf, "address", peerMAC},
		{"-n", b.pair.a, "neigh", "replace", peerAddr.String(), "lladdr", peerMAC, "dev", serverIf, "nud", "permanent"},
	} {
		if err := ipCmd(s...); err != nil {
			return err
		}
	}
	return nil
}

// measureMemcached serves the instances as server name says, runs the
// three loads and stops serving.
func (b *bench) measureMemcached(name string, round int, gold, be *mcServer) (m MemcachedRound) {
	m.Round = round + 1
	var srv *running
	switch name {
	case "kernel":
		// Nothing between the veth and the kernel.
	case "dragonc":
		b.say("  dragonc: starting")
		stop, pid, err := b.startDragonc("xdp")
		if err != nil {
			m.Error = err.Error()
			b.say("  dragonc: %v", err)
			return m
		}
		srv = &running{stop: stop, pid: pid}
	case "xdp-pass":
		var detach func()
		err := netns.In(b.pair.a, func() error {
			var err error
			detach, err = attachXDP("live_pass", passInsns(), serverIf)
			return err
		})
		if err != nil {
			m.Error = err.Error()
			return m
		}
		srv = &running{stop: func() error { detach(); return nil }, pid: func() int { return 0 }}
	default:
		m.Error = fmt.Sprintf("internal error: no server %q", name)
		return m
	}
	if srv != nil {
		defer func() {
			if err := srv.stop(); err != nil && m.Error == "" {
				m.Error = err.Error()
				b.say("  %s: stopping: %v", name, err)
			}
		}()
	}
	o := b.opt
	base := mcLoad{sockets: o.Sockets, threads: b.cores, duration: o.Duration, timeout: o.Timeout, warmup: o.Warmup}
	goldRate := base
	goldRate.port, goldRate.rate, goldRate.sockets, goldRate.threads, goldRate.server, goldRate.core = goldPort, o.GoldRate, 1, 1, gold.cmd.Process.Pid, gold.core
	flood := base
	flood.port, flood.inFlight, flood.server, flood.core = bePort, o.InFlight, be.cmd.Process.Pid, be.core
	satGold := flood
	satGold.port, satGold.server, satGold.core = goldPort, gold.cmd.Process.Pid, gold.core
	for _, step := range []struct {
		tag   string
		loads []mcLoad
		to    []**MemcachedLoad
	}{
		{"gold alone", []mcLoad{goldRate}, []**MemcachedLoad{&m.Quiet}},
		{"gold beside a best-effort flood", []mcLoad{goldRate, flood}, []**MemcachedLoad{&m.FloodGold, &m.FloodBE}},
		{"both saturated", []mcLoad{satGold, flood}, []**MemcachedLoad{&m.SatGold, &m.SatBE}},
	} {
		if b.ctx.Err() != nil {
			return m
		}
		for _, s := range []*mcServer{gold, be} {
			if err := s.alive(); err != nil {
				m.Error = err.Error()
				return m
			}
		}
		// The loads of a step run at once, each generator in a process
		// of its own.
		res := make([]*mcResult, len(step.loads))
		errs := make([]error, len(step.loads))
		done := make(chan struct{})
		for i, l := range step.loads {
			go func() {
				res[i], errs[i] = b.progs.mcgenerate(b.ctx, b.pair.path(b.pair.b), l)
				done <- struct{}{}
			}()
		}
		for range step.loads {
			<-done
		}
		if err := errors.Join(errs...); err != nil {
			m.Error = err.Error()
			b.say("  %s: %s: %v", name, step.tag, err)
			return m
		}
		var line []string
		for i, r := range res {
			l := newMemcachedLoad(r)
			port := step.loads[i].port
			*step.to[i] = l
			line = append(line, fmt.Sprintf("port %d %.0f get/s, p50 %.1f µs, p99 %.1f µs, %d lost, memcached %.2f CPUs, its core %.2f busy", port, l.PerSecond, l.P50us, l.P99us, l.Lost, l.ServerCPUs, l.CoreBusy))
		}
		b.say("  %s: %s: %s", name, step.tag, strings.Join(line, "; "))
	}
	return m
}

// planned is the report's view of endpoint name in the plan: its queues
// and cores, and the core its memcached runs on, its first queue's.
func planned(eps []planEndpoint, name string) (MemcachedEndpoint, error) {
	e := MemcachedEndpoint{Name: name, Port: map[string]int{"gold": goldPort, "be": bePort}[name], Class: map[string]string{"gold": "gold", "be": "best-effort"}[name]}
	i := slices.IndexFunc(eps, func(p planEndpoint) bool { return p.Name == name })
	if i < 0 || len(eps[i].IRQCores) == 0 {
		return e, fmt.Errorf("internal error: the plan gives endpoint %s no queue's core", name)
	}
	p := eps[i]
	e.Queues, e.IRQCores, e.AppCores, e.Core, e.Cores = p.Queues, p.IRQCores, p.AppCores, p.IRQCores[0], p.Cores
	return e, nil
}
