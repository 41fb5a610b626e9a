// Package live is dragonc's live benchmark (`dragonc bench --live`, and
// `go test ./bench/live -bench UDPEcho`): UDP echo over a veth pair, in two
// network namespaces the benchmark makes and always removes, served in
// turn by the Go kernel server, a C server with recvmmsg and sendmmsg,
// `dragonc run` on AF_XDP and on AF_PACKET sockets, and an XDP_TX
// reflector (the most the veth carries), in interleaved rounds, all
// under the same load generator: a C program (a Go one where there is no
// C compiler) in a process of its own in the peer namespace, so that the
// CPU the server spends can be told from the generator's.
//
// What is measured, for each server in each round: transactions per
// second with Options.InFlight requests outstanding; the 50th and 99th
// percentile round trip with one outstanding; and the CPU time per
// transaction of the server, at both loads. That CPU time is the busy
// time of every CPU over the measured window (/proc/stat: user, nice,
// system, irq, softirq and steal) minus the load generator's own user
// and system time (getrusage) minus the host's background (the busy
// rate measured with nothing running, for half a second before each
// round, times the window), divided by the answered transactions. So it
// counts the server's threads and everything the kernel does for the
// traffic that is not charged to the generator's process: both
// directions' softirq work on the veth (the peer side's receive of the
// answers too, when it runs in softirq), interrupts, and the benchmark's
// own idle process, but not the kernel work done within the generator's
// own system calls: on a veth a sender's call usually carries the frame
// through the receiving side's softirq, and with tick-based accounting
// (no CONFIG_IRQ_TIME_ACCOUNTING) the kernel charges that time to the
// calling process as well as to the softirq column
// (kernel/sched/cputime.c, account_system_time). It is comparable
// between the rows of one run, not an absolute figure for the server
// alone. Load.ProcessCPUus, the server's own process and this one, is
// the figure other work on the host does not disturb.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run"
)

// Options control Run.
type Options struct {
	// Rounds is how many times every server is measured, in an order
	// rotated each round; 3 when zero.
	Rounds int
	// Duration is the length of each measurement (one per load, two per
	// server and round); 2s when zero.
	Duration time.Duration
	// Transactions, when positive, ends a measurement at that many
	// answers (Duration still bounds it).
	Transactions int
	// InFlight is the outstanding requests of the throughput load; 64
	// when zero. The latency load has one.
	InFlight int
	// Sockets is how many sockets (flows, each its own source port)
	// carry the throughput load; 16 when zero (at most InFlight).
	Sockets int
	// Timeout is how long a request may go unanswered before it counts
	// as lost; 200ms when zero.
	Timeout time.Duration
	// Warmup runs each load unmeasured first; 200ms when zero.
	Warmup time.Duration
	// Servers names the servers to measure (ServerNames, or
	// PingServerNames with Ping), in that order; all when empty.
	Servers []string
	// Ping measures ICMP echo (ping, RFC 792) instead of UDP echo: the
	// kernel's own answers, dragonc run's and the reflector's. It needs
	// the C load generator.
	Ping bool
	// Memcached measures Dragonet's priority experiment instead of UDP
	// echo (RunMemcached): two memcached instances, gold and
	// best-effort, behind dragonc's plan and behind the kernel's default.
	// It needs the C load generator and the memcached program.
	Memcached bool
	// GoldRate is the gold client's requests per second with Memcached
	// (open loop); 2,000 when zero. The best-effort flood and the
	// saturation loads keep InFlight requests outstanding over Sockets
	// sockets.
	GoldRate int
	// Progress receives a line at each step (standard error in the
	// command); nil: none.
	Progress io.Writer
	// BusyPoll and Spin are the dragonc rows' wait mode, as in
	// run.Options: the receive loops busy-poll the device, or spin for
	// Spin on empty rings (0: run's default; negative: not at all)
	// before they sleep.
	BusyPoll bool
	Spin     time.Duration
	// XDPMode is the hook of the dragonc rows' XDP programs, as
	// run.Options.XDPMode; when empty, run's own choice (generic on the
	// veth), except with Ping: driver mode, the reflector's hook, so that
	// the XDP stage's answers and the reflector's go out the same way
	// (a driver-mode XDP_TX frame goes to the peer's NAPI ring as it is,
	// a generic one as an skb).
	XDPMode string
	// Self is how to start this program as the Go load generator (Child
	// must be called first thing in its main or TestMain); the running
	// executable with no arguments when nil.
	Self []string
}

// xdpMode is the hook the dragonc rows ask for (Options.XDPMode).
func (o *Options) xdpMode() string {
	switch {
	case o.XDPMode != "":
		return o.XDPMode
	case o.Ping:
		return "driver"
	}
	return "auto"
}

// ServerNames are the servers Run measures, in the order of the report.
func ServerNames() []string { return []string{"go", "c", "xdp", "packet", "reflector"} }

// PingServerNames are the servers Run measures with Options.Ping.
func PingServerNames() []string { return []string{"kernel", "xdp", "packet", "reflector"} }

// names are the servers of the options' load.
func (o *Options) names() []string {
	switch {
	case o.Memcached:
		return MemcachedServerNames()
	case o.Ping:
		return PingServerNames()
	}
	return ServerNames()
}

// base is the server the others are compared with besides the
// reflector: the C server for UDP, the kernel for ping and memcached.
func (o *Options) base() string {
	if o.Ping || o.Memcached {
		return "kernel"
	}
	return "c"
}

// titles say what each server is.
var titles = map[string]string{
	"go":        "Go kernel server: net.ListenUDP, SO_REUSEPORT, a socket and goroutine per core",
	"c":         "C kernel server: recvmmsg/sendmmsg, SO_REUSEPORT, a pinned thread per core",
	"kernel":    "the kernel's own echo replies (icmp_echo), the address on vA",
	"xdp":       "dragonc run --socket xdp",
	"packet":    "dragonc run --socket packet",
	"reflector": "XDP_TX reflector: swaps the addresses (and UDP ports, or makes the echo request a reply) in XDP, the veth's limit",
}

// ErrNotRoot is returned where the benchmark cannot make namespaces.
var ErrNotRoot = errors.New("the live benchmark needs root: it makes network namespaces and a veth pair, and loads XDP programs (run it with sudo)")

func (o *Options) defaults() error {
	if o.XDPMode != "" && !slices.Contains(run.XDPModes(), o.XDPMode) {
		return fmt.Errorf("XDP mode %q: want %s", o.XDPMode, strings.Join(run.XDPModes(), ", "))
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	if o.InFlight == 0 {
		o.InFlight = 64
	}
	if o.Sockets == 0 {
		o.Sockets = 16
	}
	o.Sockets = min(o.Sockets, o.InFlight)
	if o.Timeout == 0 {
		o.Timeout = 200 * time.Millisecond
	}
	if o.Warmup == 0 {
		o.Warmup = 200 * time.Millisecond
	}
	if len(o.Servers) == 0 {
		o.Servers = o.names()
	}
	if o.GoldRate == 0 {
		o.GoldRate = 2000
	}
	switch {
	case o.Memcached && o.Ping:
		return errors.New("ping and memcached are two different loads; choose one")
	case o.GoldRate < 1 || o.GoldRate > 1_000_000:
		return fmt.Errorf("gold rate %d is not in 1..1000000 requests/s", o.GoldRate)
	case o.Memcached && o.InFlight > 256*o.Sockets:
		return fmt.Errorf("in-flight %d is more than 256 per socket over %d sockets", o.InFlight, o.Sockets)
	case o.Rounds < 1 || o.Rounds > 100:
		return fmt.Errorf("rounds %d is not in 1..100", o.Rounds)
	case o.Duration < 100*time.Millisecond || o.Duration > 10*time.Minute:
		return fmt.Errorf("duration %v is not in 100ms..10m", o.Duration)
	case o.Transactions < 0:
		return fmt.Errorf("transactions %d is negative", o.Transactions)
	case o.InFlight < 1 || o.InFlight > 4096:
		return fmt.Errorf("in-flight %d is not in 1..4096", o.InFlight)
	case o.Sockets < 1:
		return fmt.Errorf("sockets %d is not positive", o.Sockets)
	case o.Timeout < time.Millisecond || o.Timeout > time.Minute:
		return fmt.Errorf("timeout %v is not in 1ms..1m", o.Timeout)
	}
	seen := map[string]bool{}
	for _, s := range o.Servers {
		if !slices.Contains(o.names(), s) {
			return fmt.Errorf("no server %q (%s)", s, strings.Join(o.names(), ", "))
		}
		if seen[s] {
			return fmt.Errorf("server %q named twice", s)
		}
		seen[s] = true
	}
	return nil
}

// Check reports what is wrong with the options, without running anything.
func (o Options) Check() error { return o.defaults() }

// Run runs the benchmark. Whatever happens (an error, ctx cancelled by a
// signal, a panic on this goroutine), the namespaces, servers, programs
// and temporary files it made are gone when it returns; namespaces left
// by a benchmark process that was killed outright are removed at the
// start of the next.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	b, err := prepare(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer b.close()
	if b.progs.noCC != "" && opt.Ping {
		return nil, fmt.Errorf("ping needs the C load generator: %s", b.progs.noCC)
	}
	if b.progs.noCC != "" {
		b.say("%s: the load generator is the Go one and the C server's row is skipped", b.progs.noCC)
	}
	rep := &Report{Generator: b.progs.generator, Compiler: b.progs.cc, Cores: b.cores, Rounds: opt.Rounds,
		InFlight: opt.InFlight, Sockets: opt.Sockets, Seconds: opt.Duration.Seconds(), Transactions: opt.Transactions,
		TimeoutMs: float64(opt.Timeout) / 1e6, Skipped: map[string]string{}, BusyPoll: opt.BusyPoll, SpinUs: float64(opt.Spin) / 1e3, XDPMode: opt.xdpMode(),
		Load: "udp", Base: opt.base()}
	if opt.Ping {
		rep.Load = "icmp"
	}
	servers := slices.Clone(opt.Servers)
	if b.progs.server == "" && slices.Contains(servers, "c") {
		rep.Skipped["c"] = b.progs.noCC
		servers = slices.DeleteFunc(servers, func(s string) bool { return s == "c" })
	}
	if slices.Contains(servers, "xdp") || slices.Contains(servers, "packet") {
		if rep.Stack, b.plan, b.stack, err = planStack(b.cores); err != nil {
			return nil, err
		}
	}
	if err := b.makePair(); err != nil {
		return nil, err
	}
	for _, s := range servers {
		rep.Servers = append(rep.Servers, &ServerReport{Name: s, Title: titles[s]})
	}
	rep.Background, err = b.rounds(len(servers), func(r, i int, bg float64) {
		sr := rep.Servers[i]
		sr.Rounds = append(sr.Rounds, b.measure(sr.Name, r, bg))
	})
	if err != nil {
		return nil, err
	}
	rep.finish()
	return rep, nil
}

// bench is one run of the benchmark.
type bench struct {
	ctx      context.Context
	opt      Options
	cores    int
	progress io.Writer
	work     string // the temporary directory of the programs
	progs    *programs
	pair     *pair
	plan     *embed.Result // the dragonc rows' plan and stack
	stack    *lpg.Stack
	undo     []func() // what close undoes, last first
}

// prepare starts a run of the benchmark: it removes the namespaces of
// runs that were killed, makes a temporary directory and builds the
// programs there. close removes everything the run made.
func prepare(ctx context.Context, opt Options) (*bench, error) {
	b := &bench{ctx: ctx, opt: opt, cores: runtime.NumCPU(), progress: opt.Progress}
	if b.progress == nil {
		b.progress = io.Discard
	}
	removeStale(b.say)
	var err error
	if b.work, err = os.MkdirTemp("", "dragonc-bench-live-"); err != nil {
		return nil, err
	}
	b.undo = append(b.undo, func() { os.RemoveAll(b.work) })
	self := opt.Self
	if self == nil {
		exe, err := os.Executable()
		if err != nil {
			b.close()
			return nil, err
		}
		self = []string{exe}
	}
	b.say("building the C load generators and server with cc")
	if b.progs, err = buildPrograms(b.work, self); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// makePair makes the namespaces and the veth pair, and attaches the
// peer's XDP program (attachPeerPass); close removes them.
func (b *bench) makePair() error {
	b.say("making namespaces and a veth pair")
	var err error
	if b.pair, err = newPair(b.cores); err != nil {
		return err
	}
	b.undo = append(b.undo, func() {
		b.pair.close()
		b.say("removed the namespaces")
	})
	detach, err := b.attachPeerPass()
	if err != nil {
		return err
	}
	b.undo = append(b.undo, detach)
	return nil
}

// rounds runs Options.Rounds rounds of n rows, measuring the host's
// background before each, the rows in an order rotated each round
// (row(r, i, bg) measures row i in round r); it returns the backgrounds,
// or the context's error once it ends.
func (b *bench) rounds(n int, row func(r, i int, bg float64)) ([]float64, error) {
	var bgs []float64
	for r := range b.opt.Rounds {
		if err := b.ctx.Err(); err != nil {
			return nil, err
		}
		bg := b.background()
		bgs = append(bgs, bg)
		b.say("round %d of %d (host background %.2f CPUs)", r+1, b.opt.Rounds, bg)
		for i := range n {
			row(r, (i+r)%n, bg)
			if err := b.ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return bgs, nil
}

// close undoes what the run made, last first.
func (b *bench) close() {
	for i := len(b.undo) - 1; i >= 0; i-- {
		b.undo[i]()
	}
	b.undo = nil
}

func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.progress, "bench --live: "+format+"\n", args...)
}

// background is the host's busy rate, in CPUs, over half a second with
// nothing of the benchmark's running.
func (b *bench) background() float64 {
	const span = 500 * time.Millisecond
	b0, s0 := busyNs(), selfNs()
	start := time.Now()
	select {
	case <-time.After(span):
	case <-b.ctx.Done():
	}
	el := time.Since(start)
	busy := float64(busyNs()-b0) - float64(selfNs()-s0)
	return max(0, busy/float64(el))
}

// measure starts server name, runs both loads against it and stops it.
func (b *bench) measure(name string, round int, bg float64) (m Measurement) {
	m.Round = round + 1
	b.say("  %s: starting", name)
	srv, err := b.start(name)
	if err != nil {
		m.Error = err.Error()
		b.say("  %s: %v", name, err)
		return m
	}
	defer func() {
		if err := srv.stop(); err != nil {
			m.Error = err.Error()
			b.say("  %s: stopping: %v", name, err)
		}
	}()
	for _, l := range []struct {
		to  **Load
		l   load
		tag string
	}{
		{&m.Many, load{inFlight: b.opt.InFlight, sockets: b.opt.Sockets, threads: b.cores}, fmt.Sprintf("%d in flight", b.opt.InFlight)},
		{&m.One, load{inFlight: 1, sockets: 1, threads: 1}, "1 in flight"},
	} {
		if b.ctx.Err() != nil {
			return m
		}
		l.l.duration, l.l.count, l.l.timeout, l.l.warmup = b.opt.Duration, b.opt.Transactions, b.opt.Timeout, b.opt.Warmup
		l.l.icmp = b.opt.Ping
		p0, t0 := processNs(srv.pid()), time.Now()
		g, err := b.progs.generate(b.ctx, b.pair.path(b.pair.b), l.l, func(el time.Duration) {
			b.say("  %s: %s, %.0fs", name, l.tag, el.Seconds())
		})
		if err != nil {
			m.Error = err.Error()
			b.say("  %s: %s: %v", name, l.tag, err)
			return m
		}
		ld := newLoad(g, bg)
		if p1 := processNs(srv.pid()); g.Answered > 0 && p1 >= p0 {
			// The processes' rate over the generator's whole life,
			// warm-up and drain included, times the window.
			rate := float64(p1-p0) / float64(time.Since(t0))
			ld.ProcessCPUus = rate * float64(g.WindowNs) / float64(g.Answered) / 1e3
		}
		*l.to = ld
		b.say("  %s: %s: %.0f transactions/s, p50 %.1f µs, p99 %.1f µs, %.1f µs CPU each, %d lost", name, l.tag, ld.PerSecond, ld.P50us, ld.P99us, ld.CPUus, ld.Lost)
	}
	return m
}
