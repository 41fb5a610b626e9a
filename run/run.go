// Package run serves a compiled stack on a Linux interface: the plan's
// steering becomes the linux-xdp model's eBPF stage (hash maps filled from
// the plan's tables), the generated code runs on one receive loop per plan
// queue (package dataplane), replies and endpoint sends go out through the
// LPG's transmit chains, and on return everything attached is detached.
//
// `dragonc run` builds the generated code and the data plane into a
// helper program and starts it with the eBPF programs as inherited file
// descriptors; the programs and the tc attachment stay with this process
// (bpf links die with it, so nothing is left attached even after a kill).
package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	gomaps "maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/backends/nicconf"
	"github.com/dragonc/dragonc/discover"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/run/dataplane"
	"github.com/dragonc/dragonc/sovia"
)

// DefaultSpin is how long a receive loop spins on empty rings before it
// sleeps (Options.Spin).
const DefaultSpin = dataplane.DefaultSpin

// Model is the built-in model whose tables this package fills.
const Model = "linux-xdp"

// Options controls Serve.
type Options struct {
	Iface  string
	Every  time.Duration // counter report interval; 0: only on SIGUSR1 and at the end
	Stdout io.Writer     // where the counters go (text, or with JSON events)
	Stderr io.Writer     // notes and the helper's errors
	// JSON makes Stdout NDJSON: an Event per note and per report.
	JSON bool
	// OnReport, if set, receives every reading of the counters.
	OnReport func(dataplane.Report)
	// MetricsAddr, if set, is where the counters are served to Prometheus
	// (HOST:PORT; http://HOST:PORT/metrics), from the first report on.
	MetricsAddr string
	// Pin pins the eBPF programs, maps and links under BPFDir, so that
	// they outlive the process until `dragonc stop` (run --detach).
	Pin bool
	// FinalOnly writes only the final counters to Stdout (a detached
	// run's log, which would otherwise grow by a report each interval;
	// status reads the latest report from the state directory).
	FinalOnly bool
	// Ready, if set, is called once every queue is receiving.
	Ready func()
	// Signal, if set, receives the helper's process so that a caller can
	// send it SIGUSR1 (Serve only: ServeCode has no helper).
	Signal func(p *os.Process)
	// Force serves on an interface that carries the default route.
	Force bool
	// Socket is the socket kind: "xdp", "packet", or "auto" (or empty):
	// AF_XDP, and AF_PACKET when AF_XDP cannot be set up.
	Socket string
	// BusyPoll makes the receive loops busy-poll the device (never
	// sleeping; SO_PREFER_BUSY_POLL, Linux 5.11); otherwise they spin
	// for Spin on empty rings (0: dataplane.DefaultSpin; negative: not at
	// all) and then sleep.
	BusyPoll bool
	Spin     time.Duration
	// XDPTX says whether the eBPF stage answers (ARP, ping) with XDP_TX
	// on AF_XDP: "on", "off", or "auto" (or empty): on, except on a veth
	// in driver mode, which delivers XDP_TX frames only when its peer
	// runs XDP or GRO (dragonc cannot see the peer; say "on" when it
	// does). In generic mode an XDP_TX frame is sent as an skb
	// (generic_xdp_tx, net/core/dev.c), which a veth's peer takes as any.
	XDPTX string
	// XDPMode is the hook the XDP programs run on: "driver" (the
	// driver's own XDP), "generic" (the core's, on the skb), or "auto"
	// (or empty): generic on a veth, driver mode elsewhere, and generic
	// where the driver has no XDP of its own (xdpHook).
	XDPMode string
	// stageEdit, if set, changes the eBPF stage before it is loaded (a
	// test's way to point a kernel-socket endpoint at the wrong core).
	stageEdit func(*Stage)
	// adoptEdit, if set, changes what a helper is told of the sockets
	// handed over to it (a test's way to make it refuse them).
	adoptEdit func(*dataplane.Handover)
	// Replan plans a new stack for a reload from the running plan; nil:
	// Replan (linux-xdp's defaults and the incremental search).
	Replan func(st *lpg.Stack, running *dembed.Result) (*dembed.Result, error)
	// Restack reads the stack again for a reload that dragonc reload or
	// SIGHUP asks for (Live.ReloadSource); its error says why the stack
	// cannot be read (a stack file's diagnostics). Nil: such reloads are
	// refused.
	Restack func() (*lpg.Stack, error)
	// Source is what the state records of where the stack came from.
	Source *Source
	// Live, if set, receives the run's handle once it serves: Reload
	// changes its stack while it serves (Serve only).
	Live func(*Live)
	// Streams serve, by endpoint name, the stream endpoints the plan puts
	// on VIs (a NIC model with Virtual Interfaces): a stream's
	// connections are served one at a time, on a goroutine of the
	// stream's own, each closed when the function returns (ServeCode
	// only; without one, the endpoint's app: echo or discard).
	Streams map[string]func(c *sovia.Conn)
	// OnLoad, if set, receives the load measured between each report and
	// the one before it, beside the plan's prediction (Load).
	OnLoad func(Load)
	// Rebalance re-plans from the measured rates when the plan at those
	// rates would cost less by more than RebalanceThreshold (a fraction;
	// 0 is DefaultRebalanceThreshold), with no endpoint moving queues
	// twice within RebalanceHold (Rebalancer).
	Rebalance          bool
	RebalanceThreshold float64
}

// Sockets are the socket kinds Options.Socket takes: auto (AF_XDP, and
// AF_PACKET when AF_XDP cannot be set up), xdp and packet.
func Sockets() []string { return []string{"auto", dataplane.AFXDP, dataplane.AFPacket} }

// UsageError is an error in what the user asked for (a missing or down
// interface, a plan for another NIC), as opposed to a failure while
// running.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{fmt.Sprintf(format, args...)} }

// Serve serves the stack of r on opt.Iface until ctx ends. It builds the
// generated code and the data plane into a helper program (with the go
// command) and runs it; UDP and Open-MX endpoints run the built-in
// application their app attribute names.
func Serve(ctx context.Context, r *dembed.Result, st *lpg.Stack, opt Options) (err error) {
	sv, err := prepare(ctx, r, st, &opt, nil)
	if err != nil {
		return err
	}
	defer func() { sv.stopped(err) }()
	handlers := builtinHandlers(st)
	work, err := os.MkdirTemp("", "dragonc-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	files, code, err := helperFiles(r, st, sv.chains, handlers, sv.via)
	if err != nil {
		return err
	}
	sv.code = code
	bin, err := sv.helperBinary(work, files)
	if err != nil {
		return err
	}
	sv.work, sv.bin = work, bin
	sv.run = func(kind, how string, cfg dataplane.Config) error { return sv.runHelper(sv.bin, kind, how, cfg) }
	return sv.serveAll()
}

// prepare checks what Serve and ServeCode are asked to do and reads the
// eBPF stage and the transmit chains off the plan; handled names the
// endpoints a Go handler serves (ServeCode).
func prepare(ctx context.Context, r *dembed.Result, st *lpg.Stack, opt *Options, handled map[string]bool) (*serving, error) {
	if opt.Stdout == nil {
		opt.Stdout = io.Discard
	}
	if opt.Stderr == nil {
		opt.Stderr = io.Discard
	}
	out := newOutput(opt)
	pl := r.Plan
	hw := !r.SoftwareStage()
	if hw {
		d := r.Driver()
		if d == nil {
			return nil, usage("this plan for %s was made for the whole silicon (--target silicon); dragonc run applies a plan through the NIC's Linux driver (--target linux)", pl.NIC)
		}
		if len(d.Enums) > 0 {
			return nil, usage("this plan for %s trusts the NIC's checksum verdicts, which no socket dragonc run reads; make it with run.Adapt", pl.NIC)
		}
	}
	if opt.XDPTX != "" && !slices.Contains(XDPTXChoices(), opt.XDPTX) {
		return nil, usage("--xdp-tx %q: want %s", opt.XDPTX, strings.Join(XDPTXChoices(), ", "))
	}
	if opt.XDPMode != "" && !slices.Contains(XDPModes(), opt.XDPMode) {
		return nil, usage("--xdp-mode %q: want %s", opt.XDPMode, strings.Join(XDPModes(), ", "))
	}
	if opt.Socket != "" && !slices.Contains(Sockets(), opt.Socket) {
		return nil, usage("no socket kind %q (%s)", opt.Socket, strings.Join(Sockets(), ", "))
	}
	if missing := missingCaps(); len(missing) > 0 {
		return nil, usage("dragonc run needs %s (it opens AF_XDP and packet sockets and loads eBPF programs); run it as root", strings.Join(missing, ", "))
	}
	ifc, err := net.InterfaceByName(opt.Iface)
	if err != nil {
		return nil, usage("no interface %s: %v", opt.Iface, err)
	}
	if ifc.Flags&net.FlagUp == 0 {
		return nil, usage("interface %s is down (ip link set dev %s up)", opt.Iface, opt.Iface)
	}
	if dev, ok := defaultRoute(); ok && dev == opt.Iface && !opt.Force {
		return nil, usage("interface %s carries this host's default route; serving a stack on it takes its ARP, ping and UDP from the kernel (--force to do it anyway)", opt.Iface)
	}
	if len(st.Interfaces) != 1 {
		return nil, usage("stack %s declares %d interfaces; dragonc run serves a stack with one", st.Name, len(st.Interfaces))
	}
	mac := st.Interfaces[0].MAC
	if got := macValue(ifc.HardwareAddr); got != mac {
		return nil, usage("interface %s has address %s but stack %s declares %s (ip link set dev %s address %s)", opt.Iface, ifc.HardwareAddr, st.Name, macString(mac), opt.Iface, macString(mac))
	}
	kern, err := kernelSockets(pl, st, handled)
	if err != nil {
		return nil, err
	}
	if len(kern) > 0 {
		if err := kernelAddrMissing(ifc, st); err != nil {
			return nil, err
		}
	}
	var stage *Stage
	if !hw {
		var err error
		if stage, err = stageOf(pl, st, handled); err != nil {
			return nil, err
		}
		if opt.stageEdit != nil {
			opt.stageEdit(stage)
		}
	}
	g, err := lpg.Derive(st)
	if err != nil {
		return nil, err
	}
	chains, err := TxChains(g, pl, st)
	if err != nil {
		return nil, err
	}
	vs, err := viaOf(pl, st)
	if err != nil {
		return nil, err
	}
	for _, e := range st.Endpoints {
		if s, ok := vs.stream(e.Name); ok && e.Proto == lpg.TCP {
			app := vs.apps[e.Name]
			if app != e.App {
				app = fmt.Sprintf("%s: app %q is not built in (echo, discard)", app, e.App)
			}
			out.note("note", "endpoint %s: over VI %d with SOVIA on a packet socket of its own (port %d, %s); TCP frames for it pass up", e.Name, s.VI, s.Local.Port(), app)
		}
	}
	for _, n := range kernelNotes(kern, pl) {
		out.note("note", "%s", n)
	}
	var nic []string
	for _, n := range slices.Sorted(gomaps.Keys(pl.Placement)) {
		if p := pl.Placement[n]; p.Where == "hardware" && graph.Transmit(n) {
			nic = append(nic, n)
		}
	}
	if len(nic) > 0 {
		out.note("note", "the plan leaves %s to the NIC; AF_XDP and AF_PACKET cannot put the request in a transmit descriptor, so the data plane fills them last, as the NIC would", strings.Join(nic, ", "))
	}
	sv := &serving{ctx: ctx, opt: *opt, out: out, ifc: ifc, stage: stage, chains: chains, name: st.Name, queues: pl.Queues, r: r, st: st, hw: hw, via: vs, handled: handled}
	sv.out.opt = &sv.opt // the serving's options, which the metrics extend
	if err := sv.startRebalance(); err != nil {
		return nil, err
	}
	if opt.MetricsAddr != "" && opt.Every <= 0 {
		return nil, usage("--metrics-addr needs counters to serve: --every must be above 0")
	}
	if opt.MetricsAddr != "" {
		m := NewMetrics(st.Name, pl.NIC, opt.Iface)
		addr, stop, err := serveMetrics(opt.MetricsAddr, m)
		if err != nil {
			return nil, usage("--metrics-addr %s: %v", opt.MetricsAddr, err)
		}
		sv.cleanup = append(sv.cleanup, stop)
		sv.onReport(m.Update)
		sv.load.onLoad = append(sv.load.onLoad, m.UpdateLoad)
		sv.metrics = "http://" + addr + "/metrics"
		out.note("metrics", "metrics at %s", sv.metrics)
	}
	// From here on, the run's context also ends when the interface goes
	// away (watchLink); nothing that reads it has started before.
	ctx, end := context.WithCancelCause(sv.ctx)
	sv.ctx = ctx
	stopWatch, err := sv.watchLink(end)
	if err != nil {
		end(nil)
		sv.stopped(err)
		return nil, err
	}
	sv.cleanup = append(sv.cleanup, stopWatch, func() { end(nil) })
	if err := sv.claimState(); err != nil {
		sv.stopped(err)
		return nil, err
	}
	sv.state.Metrics, sv.state.Source = sv.metrics, opt.Source
	path, closeControl, err := sv.listenControl()
	if err != nil {
		sv.stopped(err)
		return nil, err
	}
	sv.cleanup = append(sv.cleanup, closeControl)
	sv.state.Control = path
	sv.onReport(sv.saveReport)
	sv.onReport(sv.checksumHint())
	return sv, nil
}

// viaStreams are the stream endpoints a plan puts on VIs, which the data
// plane serves with package sovia's software VI.
type viaStreams struct {
	streams []sovia.Stream    // transport vi, in the plan's order
	conf    []byte            // sovia.conf of these streams (sovia.WriteConf)
	apps    map[string]string // endpoint → a name of sovia.Apps
}

// viaOf reads the VI streams off a plan; nil when there are none.
func viaOf(pl *plan.Plan, st *lpg.Stack) (*viaStreams, error) {
	if pl.VIA == nil || pl.VIA.VIsUsed == 0 {
		return nil, nil
	}
	vs := &viaStreams{apps: map[string]string{}}
	for _, s := range nicconf.Streams(pl.VIA) {
		if s.Transport == "vi" {
			vs.streams = append(vs.streams, s)
		}
	}
	var b strings.Builder
	if err := sovia.WriteConf(&b, vs.streams); err != nil {
		return nil, err
	}
	vs.conf = []byte(b.String())
	for _, s := range vs.streams {
		app := "discard"
		for _, e := range st.Endpoints {
			if e.Name == s.Name && sovia.Apps[e.App] != nil {
				app = e.App
			}
		}
		vs.apps[s.Name] = app
	}
	return vs, nil
}

// stream is the VI stream of endpoint name.
func (vs *viaStreams) stream(name string) (sovia.Stream, bool) {
	if vs != nil {
		for _, s := range vs.streams {
			if s.Name == name {
				return s, true
			}
		}
	}
	return sovia.Stream{}, false
}

// serveAll serves on the socket kind asked for, or on AF_XDP and then on
// AF_PACKET when AF_XDP cannot be set up.
func (sv *serving) serveAll() (err error) {
	// Sockets a handover left that no serve took (handover.go).
	defer sv.dropCarry()
	// A run whose interface went away ends with that (watchLink).
	defer func() {
		if c := context.Cause(sv.ctx); err == nil && errors.Is(c, errLinkGone) {
			err = c
		}
	}()
	if sv.hw {
		// Hardware first: the plan's linux.sh, step by step; what the
		// driver refuses, the eBPF stage does.
		h, err := applyHardware(sv.r, sv.opt.Iface, sv.opt.Force, filepath.Join(stateDir(sv.state.name), "hardware"))
		if err != nil {
			return err
		}
		sv.state.Hardware, sv.hwrun = h.dir, h
		if err := sv.saveState(); err != nil {
			h.undo()
			return err
		}
		defer func() {
			// The hardware plan applied last (a reload may apply
			// another: rehardware).
			if sv.hwrun == nil {
				return
			}
			if uerr := sv.hwrun.undo(); uerr != nil && err == nil {
				err = uerr
			}
		}()
		for _, l := range h.report() {
			kind := "note"
			if strings.HasPrefix(l, "refused: ") {
				kind = "refused"
			}
			sv.out.note(kind, "%s", l)
		}
		stage, notes, err := hardwareStage(sv.r, sv.st, h.refused, sv.handled)
		if err != nil {
			return err
		}
		for _, l := range notes {
			sv.out.note("note", "%s", l)
		}
		if sv.opt.stageEdit != nil {
			sv.opt.stageEdit(stage)
		}
		sv.stage = stage
	}
	kinds := []string{dataplane.AFXDP, dataplane.AFPacket}
	if k := sv.opt.Socket; k == dataplane.AFXDP || k == dataplane.AFPacket {
		kinds = []string{k}
	}
	for {
		var cancel context.CancelFunc
		sv.liveMu.Lock()
		sv.serveCtx, cancel = context.WithCancel(sv.ctx)
		sv.serveCancel = cancel
		sv.liveMu.Unlock()
		err := sv.serveKinds(kinds)
		cancel()
		// A reload whose plan needs new code or another eBPF program
		// ends the serve to hand over (reload.go: restart).
		sv.liveMu.Lock()
		failed, h := sv.handingOver, sv.pending
		sv.handingOver, sv.pending = nil, nil
		sv.serveCancel = nil
		sv.liveMu.Unlock()
		if failed != nil {
			// The new plan stopped before it served.
			if err == nil {
				err = errors.New("it stopped before it served")
			}
			if sv.ctx.Err() != nil {
				failed.done <- err
				return nil
			}
			sv.out.note("note", "the new plan could not be served (%v); serving the previous plan again", err)
			// The previous plan is back in place before the reload
			// waiting for this one (under reloadMu) hears of it, so
			// that the next reload plans from it.
			rerr := sv.rehardware(&failed.old)
			if rerr == nil {
				sv.usePlan(failed.old)
			}
			failed.done <- err
			if rerr != nil {
				return rerr
			}
			continue
		}
		if h == nil {
			return err
		}
		if err != nil || sv.ctx.Err() != nil {
			h.done <- fmt.Errorf("the run stopped")
			return err
		}
		if kind := sv.state.Socket; kind != "" {
			kinds = []string{kind}
		}
		if rerr := sv.rehardware(&h.next); rerr != nil {
			// The NIC's settings of the new plan could not be applied:
			// the old plan's again.
			h.done <- rerr
			if err := sv.rehardware(&h.old); err != nil {
				return err
			}
			sv.usePlan(h.old)
			continue
		}
		sv.liveMu.Lock()
		sv.handingOver = h
		sv.liveMu.Unlock()
		sv.usePlan(h.next)
	}
}

// serveKinds serves on the first socket kind of kinds that can be set up.
func (sv *serving) serveKinds(kinds []string) error {
	for i, kind := range kinds {
		err := sv.serve(kind)
		var se *startError
		if errors.As(err, &se) && i+1 < len(kinds) {
			sv.out.note("fallback", "AF_XDP could not be used on %s (%v); falling back to AF_PACKET", sv.opt.Iface, se.err)
			continue
		}
		return err
	}
	return nil
}

// ready says the stack is served, and how, and tells opt.Ready.
func (sv *serving) ready(kind, how string) {
	sv.measureFrom(time.Now())
	msg := fmt.Sprintf("serving %s on %s: %d queue(s), %s", sv.name, sv.opt.Iface, len(sv.queues), how)
	sv.out.mu.Lock()
	fmt.Fprintf(sv.opt.Stderr, "dragonc run: %s\n", msg)
	sv.out.mu.Unlock()
	sv.out.emit(Event{Event: "serving", Message: msg, Stack: sv.name, Iface: sv.opt.Iface, Socket: kind, PlanQueues: len(sv.queues)})
	// The state first: a reload waiting for this plan (handedOver)
	// answers once status shows it.
	if sv.state != nil {
		sv.state.Serving, sv.state.Socket, sv.state.HelperPID = true, kind, sv.helper
		if err := sv.saveState(); err != nil {
			sv.out.note("note", "the state of the run cannot be written: %v", err)
		}
	}
	sv.handedOver()
	go sv.prepareSession()
	// Ready and Live are for the run's first serving, not for the
	// restarts of a reload.
	sv.live.Do(func() {
		if sv.opt.Ready != nil {
			sv.opt.Ready()
		}
		if sv.opt.Live != nil {
			sv.opt.Live(&Live{sv})
		}
	})
}

// stopped says the run is over (an event; the error is the caller's to
// print).
func (sv *serving) stopped(err error) {
	for i := len(sv.cleanup) - 1; i >= 0; i-- {
		sv.cleanup[i]()
	}
	sv.cleanup = nil
	e := Event{Event: "stopped", Stack: sv.name, Iface: sv.opt.Iface}
	if err != nil {
		e.Error = err.Error()
	}
	sv.out.emit(e)
}

// startError is a socket kind that could not be set up: the next kind is
// tried.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }

// serving is one Serve call: what every attempt needs.
type serving struct {
	ctx     context.Context
	opt     Options
	out     *output
	cleanup []func() // run when the serving stops, last first
	state   *State
	metrics string // the Prometheus endpoint, if any
	helper  int    // the helper's pid
	ifc     *net.Interface
	stage   *Stage
	chains  *Chains
	name    string
	queues  []plan.Queue
	r       *dembed.Result
	st      *lpg.Stack
	hw      bool      // a hardware plan: linux.sh first, then the stage
	hwrun   *hardware // the hardware plan applied, which a reload changes
	via     *viaStreams
	handled map[string]bool // the endpoints a Go handler serves (ServeCode)
	// stageCounts reads the XDP stage's counters (nil without checks);
	// kernelCounts the kernel-socket endpoints' (nil without them);
	// cpumapCounts the cpumap's queues' and the events its counting
	// missed (nil without the tracepoint).
	stageCounts  func() []dataplane.Outcome
	kernelCounts func() []dataplane.KernelSocket
	cpumapCounts func() ([]dataplane.CpumapCPU, uint64)
	load         measuring    // the measured load (load.go)
	rebalance    *rebalancing // with Options.Rebalance (rebalance.go)
	// run serves with the data plane configured by cfg (its descriptors
	// are this process's) until the context ends.
	run func(kind, how string, cfg dataplane.Config) error
	// What a reload changes (reload.go), under reloadMu: the helper's
	// generated code (nil for ServeCode's linked code) and program.
	reloadMu sync.Mutex
	reloads  int // reloads asked for
	pushSeq  int // updates sent to the helper
	code     *gofallback.Swappable
	// The short path of a reload (fastreload.go): the session of the plan
	// served (nil: made when needed), the served endpoints by name, and
	// how many short-path changes the plan (r) is behind; settleTimer
	// makes it follow once they stop.
	sess        *dembed.Session
	byName      map[string]*lpg.Endpoint
	behind      int
	planSeq     int // changes of the plan served, by either path
	settleTimer *time.Timer
	work        string    // Serve's directory, where a reload builds new code
	bin         string    // the helper program
	live        sync.Once // Options.Ready and Live are told once
	// Under liveMu: the stage's maps and the helper's control channel
	// while they serve, the serve's context (ended to hand over), and the
	// handover under way.
	liveMu      sync.Mutex
	maps        *maps
	send        func(*dataplane.Update) error
	hs          *helperState
	serveCtx    context.Context
	serveCancel context.CancelFunc
	pending     *handover // asked for: the serve is ending
	handingOver *handover // the new plan starts serving
	// carry is what a serve that handed its sockets over leaves the
	// next (handover.go), until a helper serves with them; swap, set by
	// such a serve, swaps the eBPF programs once its helper is ready.
	carry *carried
	swap  func() error
}

// serve attaches the eBPF stage for socket kind kind, runs the helper on
// it until the context ends, and detaches. It returns a *startError when
// the kind cannot be set up (before any frame was served).
func (sv *serving) serve(kind string) error {
	opt := sv.opt
	drv, drvErr := deviceDriver(sv.ifc.Name)
	hook := xdpHook(opt.XDPMode, drv)
	devq := 0
	if kind == dataplane.AFXDP {
		var err error
		if devq, err = deviceQueues(sv.ifc.Name); err != nil {
			return &startError{err}
		}
	}
	m, err := newMaps(sv.stage, devq)
	if err != nil {
		return err
	}
	defer m.Close()
	sv.liveMu.Lock()
	sv.maps = m
	sv.liveMu.Unlock()
	defer func() {
		sv.liveMu.Lock()
		sv.maps = nil
		sv.liveMu.Unlock()
	}()
	for _, n := range m.notes {
		sv.out.note("note", "%s", n)
	}
	if m.cpumap != nil && len(m.cpus) > 0 {
		restore, note, err := clearQueue0RPS(sv.ifc.Name)
		if err != nil {
			return err
		}
		defer func() {
			if rerr := restore(); rerr != nil {
				sv.out.note("note", "%v", rerr)
			}
		}()
		if note != "" {
			sv.out.note("note", "%s", note)
		}
	}
	// The frames the cpumap drops with a CPU's queue full, counted per
	// CPU (cpumaptrace.go).
	var trace *cpumapTrace
	if m.cpumap != nil && len(m.cpus) > 0 {
		var note string
		if trace, note = traceCpumap(m); note != "" {
			sv.out.note("note", "%s", note)
		}
		defer trace.Close()
	}
	// With kernel-socket endpoints the kernel answers ARP and ping
	// (newMaps leaves the stage's answers off).
	if kind == dataplane.AFXDP && !sv.stage.KernelAddr && len(sv.stage.Answers) > 0 && opt.XDPTX != "on" {
		// A veth delivers what XDP_TX sends only when its peer runs
		// XDP or GRO (drivers/net/veth.c, veth_xdp_xmit: no NAPI on
		// the peer's queue, the frame is dropped), which dragonc cannot
		// see from here: on a veth the software answers, unless the
		// user says the peer takes them (--xdp-tx on).
		if opt.XDPTX == "off" || drvErr != nil || drv == "veth" && hook == xdpDriver {
			if err := m.setAnswers(false); err != nil {
				return err
			}
			why := "a veth in driver mode delivers XDP_TX frames only when its peer runs XDP or GRO (--xdp-tx on if it does)"
			if opt.XDPTX == "off" {
				why = "--xdp-tx off"
			}
			sv.out.note("note", "the eBPF stage leaves its answers to the receive loops on %s: %s", sv.ifc.Name, why)
		}
	}
	if kind == dataplane.AFXDP && m.drops != nil {
		// The stage as it is now: a reload changes the rules, never the
		// drop sites or endpoints these count (reload.go).
		stage := sv.stage
		sv.stageCounts = func() []dataplane.Outcome { return stageCounts(stage, m.drops) }
		defer func() { sv.stageCounts = nil }()
	}
	if m.kcounts != nil {
		stage := sv.stage
		sv.kernelCounts = func() []dataplane.KernelSocket { return kernelCounts(stage, m.kcounts) }
		defer func() { sv.kernelCounts = nil }()
	}
	if trace != nil {
		stage, pl := sv.stage, sv.r.Plan
		sv.cpumapCounts = func() ([]dataplane.CpumapCPU, uint64) { return trace.read(stage, m, pl), trace.missed() }
		defer func() { sv.cpumapCounts = nil }()
	}
	var progs []*ebpf.Program
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	kinds := []int{progFanout, progFilter, progTC}
	if len(sv.stage.Demux) > 0 {
		kinds = append(kinds, progCPU)
	}
	if kind == dataplane.AFXDP {
		kinds = []int{progXDP}
	}
	for _, k := range kinds {
		p, err := loadProgram(k, sv.stage, m)
		if err != nil {
			if kind == dataplane.AFXDP {
				return &startError{err}
			}
			return err
		}
		progs = append(progs, p)
	}
	cfg := dataplane.Config{Ifindex: sv.ifc.Index, Socket: kind, FanoutFD: -1, FilterFD: -1, XSKMapFD: -1, BusyPoll: opt.BusyPoll, Spin: opt.Spin}
	for _, q := range sv.queues {
		cfg.Queues = append(cfg.Queues, dataplane.Queue{ID: q.ID, Core: q.Core})
	}
	var how string
	var links []link.Link
	switch kind {
	case dataplane.AFXDP:
		// A handover's link stays attached, running the old program,
		// until the helper that takes the sockets over serves
		// (handover.go).
		sv.liveMu.Lock()
		c := sv.carry
		sv.liveMu.Unlock()
		var l link.Link
		var mode string
		if c != nil {
			l, mode = c.link, c.mode
			cfg.Adopt = &c.state
			sv.swap = func() error {
				return sv.swapPrograms(c, func() error {
					if err := c.link.Update(progs[0]); err != nil {
						return fmt.Errorf("swapping the XDP program on its link: %w", err)
					}
					return nil
				})
			}
			defer func() { sv.swap = nil }()
		} else if l, mode, err = attachXDP(progs[0], sv.ifc, hook); err != nil {
			return &startError{err}
		}
		defer func() {
			// Kept for the next serve if this one handed its sockets
			// over, or if it never took over the sockets it was given.
			sv.liveMu.Lock()
			keep := sv.carry
			sv.liveMu.Unlock()
			if keep == nil {
				l.Close()
				return
			}
			keep.link, keep.mode = l, mode
		}()
		links = append(links, l)
		cfg.XSKMapFD, cfg.DevQueues = m.xsks.FD(), devq
		how = fmt.Sprintf("AF_XDP sockets on %d device queue(s), fed by an XDP program in %s mode", devq, mode)
	default:
		// The kernel's taps (packet sockets) see a frame before tc
		// ingress, so the tc program hides the stack's frames from the
		// kernel's own stack (which would answer ARP and ping a second
		// time) after the sockets have them.
		//
		// A handover's links stay attached, running the old programs,
		// until the helper that takes the sockets over serves with the
		// new socket filter and fanout program; then they are updated to
		// the new ones (handover.go).
		sv.liveMu.Lock()
		c := sv.carry
		sv.liveMu.Unlock()
		var tc, xl link.Link
		var mode string
		if c != nil {
			tc = c.tc
			cfg.Adopt = &c.state
			if len(progs) > 3 {
				xl, mode = c.link, c.mode
			}
			sv.swap = func() error { return sv.swapPrograms(c, func() error { return c.updatePacket(progs) }) }
			defer func() { sv.swap = nil }()
		} else if tc, err = link.AttachTCX(link.TCXOptions{Interface: sv.ifc.Index, Program: progs[2], Attach: ebpf.AttachTCXIngress}); err != nil {
			return fmt.Errorf("attaching the tc ingress program to %s: %w", opt.Iface, err)
		}
		if len(progs) > 3 && xl == nil {
			// The kernel-socket endpoints' frames go to their CPUs
			// before any skb exists: an XDP program in front of the
			// taps (which then leave those frames to the kernel).
			if xl, mode, err = attachXDP(progs[3], sv.ifc, hook); err != nil {
				if c == nil {
					tc.Close()
				}
				return err
			}
		}
		defer func() {
			sv.liveMu.Lock()
			keep := sv.carry
			sv.liveMu.Unlock()
			switch {
			case keep == nil:
				tc.Close()
				if xl != nil {
					xl.Close()
				}
			case keep == c:
				// Never taken over: the links as they were, and none
				// of this serve's.
				if xl != nil && xl != c.link {
					xl.Close()
				}
			default:
				// This serve handed its sockets over.
				keep.tc, keep.link, keep.mode = tc, xl, mode
			}
		}()
		links = append(links, tc)
		cfg.FanoutFD, cfg.FilterFD = progs[0].FD(), progs[1].FD()
		how = "AF_PACKET sockets (TPACKET_V2 rings) in an eBPF fanout group, with a tc ingress program"
		if xl != nil {
			links = append(links, xl)
			how += fmt.Sprintf(", and an XDP program in %s mode that sends the kernel-socket endpoints' frames to their cores", mode)
		}
	}
	how += "; the loops wait by " + cfg.Mode()
	if sv.via != nil {
		how += "; a goroutine waiting on a VI: " + cfg.VIMode()
	}
	shown, pinMaps := progs, append(append([]*ebpf.Map{m.addrs, m.rss, m.xsks, m.cpumap, m.kcounts}, m.groups...), m.demux...)
	if trace != nil {
		// The tracepoint's link is not pinned: it goes when run does.
		shown, pinMaps = append(slices.Clone(progs), trace.prog), append(pinMaps, trace.counts)
	}
	sv.state.Programs = programStates(shown)
	sv.state.SocketsPerQueue = max(devq, 1)
	if sv.opt.Pin {
		unpin, err := sv.pin(links, shown, pinMaps)
		if err != nil {
			return err
		}
		// Unpinned before the links close, which detaches them.
		defer unpin()
		how += fmt.Sprintf("; programs, maps and links pinned in %s", sv.state.Pinned)
	}
	return sv.run(kind, how, cfg)
}

// runHelper starts the helper bin with the programs' descriptors and
// serves until the context ends or the helper stops.
func (sv *serving) runHelper(bin, kind, how string, cfg dataplane.Config) (err error) {
	opt := sv.opt
	// The descriptors cfg names become the helper's 3, 4, ...
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	pass := func(fd int, name string) (string, error) {
		if fd < 0 {
			return "-1", nil
		}
		f, err := dupFile(fd, name)
		if err != nil {
			return "", err
		}
		files = append(files, f)
		return strconv.Itoa(2 + len(files)), nil
	}
	var queues []string
	for _, q := range cfg.Queues {
		queues = append(queues, fmt.Sprintf("%d:%d", q.ID, q.Core))
	}
	args := []string{"-socket", kind, "-ifindex", strconv.Itoa(cfg.Ifindex), "-queues", strings.Join(queues, ","),
		"-devqueues", strconv.Itoa(cfg.DevQueues), "-every", opt.Every.String(), "-spin", cfg.Spin.String()}
	if cfg.BusyPoll {
		args = append(args, "-busy-poll")
	}
	for _, f := range []struct {
		flag string
		fd   int
	}{{"-fanout-fd", cfg.FanoutFD}, {"-filter-fd", cfg.FilterFD}, {"-xskmap-fd", cfg.XSKMapFD}} {
		v, err := pass(f.fd, f.flag[1:])
		if err != nil {
			return err
		}
		args = append(args, f.flag, v)
	}
	if a := cfg.Adopt; a != nil {
		// The sockets handed over, renumbered as the helper's.
		b := *a
		b.Sockets = append([]dataplane.HandoverSocket(nil), a.Sockets...)
		for i := range b.Sockets {
			s := &b.Sockets[i]
			fd, err := pass(s.FD, kind+" socket")
			if err != nil {
				return err
			}
			umem, err := pass(s.UMEMFD, "UMEM")
			if err != nil {
				return err
			}
			s.FD, _ = strconv.Atoi(fd)
			s.UMEMFD, _ = strconv.Atoi(umem)
		}
		if sv.opt.adoptEdit != nil {
			sv.opt.adoptEdit(&b)
		}
		j, err := json.Marshal(&b)
		if err != nil {
			return err
		}
		args = append(args, "-adopt", string(j))
	}
	swap := sv.swap
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the generated stack: %w", err)
	}
	sv.helper = cmd.Process.Pid
	if opt.Signal != nil {
		opt.Signal(cmd.Process)
	}
	ctl := &helperControl{w: stdin, waiting: map[int]chan controlAnswer{}}
	defer func() {
		sv.liveMu.Lock()
		sv.send, sv.hs = nil, nil
		sv.liveMu.Unlock()
	}()
	var ready atomic.Bool
	var swapErr atomic.Pointer[error]
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := helperLines(out, func(line string) {
			switch {
			case strings.HasPrefix(line, "ready: "):
				if swap != nil {
					if err := swap(); err != nil {
						swapErr.Store(&err)
						cmd.Process.Kill()
						return
					}
				}
				ready.Store(true)
				sv.liveMu.Lock()
				sv.send, sv.hs = ctl.send, newHelperState(sv.st)
				sv.liveMu.Unlock()
				sv.ready(kind, how)
			case strings.HasPrefix(line, "control ") && ctl.answer(line[len("control "):]):
			case strings.HasPrefix(line, "note: "):
				sv.out.note("note", "%s", strings.TrimPrefix(line, "note: "))
			case strings.HasPrefix(line, "report "):
				var r dataplane.Report
				if err := json.Unmarshal([]byte(line[len("report "):]), &r); err != nil {
					sv.out.note("note", "the generated stack's report does not read: %v", err)
					return
				}
				sv.report(r)
			default:
				sv.out.note("note", "the generated stack says: %s", line)
			}
		})
		if err != nil {
			sv.out.note("note", "reading the generated stack's output: %v", err)
		}
	}()
	done := make(chan error, 1)
	go func() {
		wg.Wait()
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-sv.serveCtx.Done():
		sv.liveMu.Lock()
		h := sv.pending
		sv.liveMu.Unlock()
		if h != nil && h.live && ready.Load() {
			// A reload hands the sockets over (handover.go); where it
			// cannot, the new plan's serve opens its own.
			c, herr := takeSockets(ctl, cmd.Process.Pid, h.seq, kind)
			sv.liveMu.Lock()
			if herr == nil {
				sv.carry, h.handedOver = c, true
			}
			sv.liveMu.Unlock()
			if herr != nil {
				sv.out.note("note", "the sockets could not be handed over (%v); the new plan opens its own", herr)
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			err = <-done
		}
		if err == nil || sv.serveCtx.Err() != nil && isSignal(err) {
			err = nil
		}
	}
	if e := swapErr.Load(); e != nil {
		return *e
	}
	if err != nil {
		said := strings.TrimSpace(stderr.String())
		err = fmt.Errorf("the generated stack stopped: %w", err)
		if said != "" {
			err = fmt.Errorf("%w: %s", err, said)
		}
		if !ready.Load() && kind == dataplane.AFXDP {
			return &startError{errors.New(said)}
		}
		return err
	}
	return nil
}

// report hands a reading of the loops' counters on with the XDP
// program's own: its checks' and the kernel-socket endpoints'.
func (sv *serving) report(r dataplane.Report) {
	if f := sv.stageCounts; f != nil {
		r.Stage = f()
	}
	if f := sv.kernelCounts; f != nil {
		r.KernelSockets = f()
	}
	if f := sv.cpumapCounts; f != nil {
		r.Cpumap, r.CpumapMissed = f()
	}
	sv.out.report(r, sv.measure(r))
}

// XDPModes are the values of Options.XDPMode (besides "", auto).
func XDPModes() []string { return []string{xdpAuto, xdpDriver, xdpGeneric} }

// XDPTXChoices are the values of Options.XDPTX (besides "", auto).
func XDPTXChoices() []string { return []string{"auto", "on", "off"} }

// The hooks an XDP program runs on (xdpHook).
const (
	xdpDriver  = "driver"
	xdpGeneric = "generic"
	xdpAuto    = "auto" // driver mode, or generic where the driver has none
)

// xdpHook is the hook Options.XDPMode asks for on an interface of
// driver drv ("" where it could not be read). Auto is generic
// on a veth: its driver-mode XDP first copies each frame whose head lacks
// XDP's headroom into a page of its own and passes it through a NAPI
// ring (drivers/net/veth.c, veth_xdp_rcv_skb), and a cpumap redirect
// then makes an xdp_frame and, on the far CPU, an skb again; generic XDP
// runs on the skb the veth hands the core, which an AF_XDP socket copies
// once and a cpumap queues as it is. Measured with bench --live on this
// project's 2-core host, two interleaved pairs of runs, 3 rounds each:
// UDP echo at 64 in flight 207,657 transactions/s (median) in generic
// mode against 185,948 in driver mode, 4.45 against 5.08 µs of host CPU
// a transaction; --memcached's saturated throughput 0.80-1.17 of the
// kernel's default in generic mode against 0.69-1.01 in driver mode.
func xdpHook(mode, drv string) string {
	switch {
	case mode == xdpDriver || mode == xdpGeneric:
		return mode
	case drv == "veth":
		return xdpGeneric
	}
	return xdpAuto
}

// attachXDP attaches an XDP program to ifc on hook (xdpHook), and names
// the mode it runs in.
func attachXDP(p *ebpf.Program, ifc *net.Interface, hook string) (link.Link, string, error) {
	attach := func(mode string) (link.Link, error) {
		flags := link.XDPDriverMode
		if mode == xdpGeneric {
			flags = link.XDPGenericMode
		}
		return link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: flags})
	}
	busy := func(err error) bool { return errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.EBUSY) }
	mode := hook
	if hook == xdpAuto {
		mode = xdpDriver
	}
	l, err := attach(mode)
	if err != nil && !busy(err) && hook == xdpAuto {
		mode = xdpGeneric
		l, err = attach(mode)
	}
	switch {
	case busy(err):
		return nil, "", fmt.Errorf("another XDP program is attached to %s; dragonc leaves it alone", ifc.Name)
	case err != nil:
		return nil, "", fmt.Errorf("attaching the XDP program in %s mode: %w", mode, err)
	}
	return l, mode, nil
}

// deviceQueues is how many receive queues the device has, which is how
// many AF_XDP sockets serve it (ETHTOOL_GCHANNELS: a veth reports its
// receive queues, a multi-queue NIC its combined channels).
func deviceQueues(name string) (int, error) {
	x, err := discover.OpenIoctl(name)
	if err != nil {
		return 0, err
	}
	defer x.Close()
	ch, err := x.Channels()
	if err != nil {
		return 0, fmt.Errorf("reading the channels of %s: %w", name, err)
	}
	n := int(max(ch.RX, ch.Combined))
	if n < 1 {
		return 0, fmt.Errorf("%s reports no receive queue", name)
	}
	return n, nil
}

// deviceDriver names the device's driver (ETHTOOL_GDRVINFO).
func deviceDriver(name string) (string, error) {
	x, err := discover.OpenIoctl(name)
	if err != nil {
		return "", err
	}
	defer x.Close()
	drv, err := x.Driver()
	if err != nil {
		return "", fmt.Errorf("reading the driver of %s: %w", name, err)
	}
	return drv, nil
}

// Capabilities dragonc run needs (include/uapi/linux/capability.h):
// CAP_NET_ADMIN to attach programs to an interface, CAP_NET_RAW for
// packet and AF_XDP sockets, CAP_BPF to load programs and create maps.
var neededCaps = []struct {
	bit  uint
	name string
}{{12, "CAP_NET_ADMIN"}, {13, "CAP_NET_RAW"}, {39, "CAP_BPF"}}

// missingCaps lists the needed capabilities this thread lacks (CAP_BPF is
// also granted by CAP_SYS_ADMIN, bit 21).
func missingCaps() []string {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		if b, err = os.ReadFile("/proc/self/status"); err != nil {
			return nil // no /proc: let the kernel say no
		}
	}
	var eff uint64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return nil
			}
		}
	}
	var out []string
	for _, c := range neededCaps {
		if eff&(1<<c.bit) == 0 && !(c.bit == 39 && eff&(1<<21) != 0) {
			out = append(out, c.name)
		}
	}
	return out
}

// defaultRoute names the interface of the IPv4 or IPv6 default route of
// the calling thread's network namespace, if there is one.
func defaultRoute() (string, bool) {
	read := func(name string) []byte {
		b, err := os.ReadFile("/proc/thread-self/net/" + name)
		if err != nil {
			b, _ = os.ReadFile("/proc/self/net/" + name)
		}
		return b
	}
	// /proc/net/route: Iface Destination Gateway Flags RefCnt Use Metric
	// Mask ..., addresses in hex.
	for _, l := range strings.Split(string(read("route")), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return f[0], true
		}
	}
	// /proc/net/ipv6_route: destination, its prefix length, ..., device.
	for _, l := range strings.Split(string(read("ipv6_route")), "\n") {
		f := strings.Fields(l)
		if len(f) == 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			return f[9], true
		}
	}
	return "", false
}

func isSignal(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

func dupFile(fd int, name string) (*os.File, error) {
	d, err := syscall.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("duplicating the %s descriptor: %w", name, err)
	}
	return os.NewFile(uintptr(d), name), nil
}

func macValue(hw net.HardwareAddr) uint64 {
	var v uint64
	for _, b := range hw {
		v = v<<8 | uint64(b)
	}
	return v
}

// macBytes spells a stack's hardware address (as a number) in bytes.
func macBytes(v uint64) [6]byte {
	var hw [6]byte
	for i := range hw {
		hw[i] = byte(v >> (8 * (5 - i)))
	}
	return hw
}

func macString(v uint64) string {
	hw := macBytes(v)
	return net.HardwareAddr(hw[:]).String()
}

// onReport adds f to what receives each reading of the counters.
func (sv *serving) onReport(f func(dataplane.Report)) {
	if prev := sv.opt.OnReport; prev != nil {
		sv.opt.OnReport = func(r dataplane.Report) { prev(r); f(r) }
	} else {
		sv.opt.OnReport = f
	}
}

// builtinHandlers names the data plane's handler of each endpoint: its
// built-in application, or Discard for a kernel-socket endpoint, whose
// datagrams the eBPF stage gives to the kernel (kernelSocket): one that
// reached a loop anyway is counted there and discarded.
func builtinHandlers(st *lpg.Stack) []string {
	handlers := make([]string, len(st.Endpoints))
	for i, e := range st.Endpoints {
		handlers[i] = builtinHandler(e)
	}
	return handlers
}

// builtinHandler is builtinHandlers' of one endpoint.
func builtinHandler(e *lpg.Endpoint) string {
	switch {
	case e.Proto == lpg.TCP:
		return ""
	case e.App == "echo":
		return "Echo"
	}
	return "Discard"
}

// checksumDrops are the outcomes of a bad transport checksum.
var checksumDrops = []string{"drop RxL4UDPValidChecksum.false", "drop RxL4TCPValidChecksum.false", "drop RxL3ICMPValidChecksum.false"}

// checksumHint says, the first time frames are dropped for their
// checksums, the likely reason on a software link: a veth peer (or a
// container's interface) that leaves its checksums to an offload no NIC
// performs sends them unfinished (CHECKSUM_PARTIAL), which the kernel's
// own stack accepts and a raw socket does not.
func (sv *serving) checksumHint() func(dataplane.Report) {
	said := false
	return func(r dataplane.Report) {
		if said {
			return
		}
		n := uint64(0)
		for _, q := range r.Queues {
			for _, o := range q.Outcomes {
				if slices.Contains(checksumDrops, o.Name) {
					n += o.Count
				}
			}
		}
		if n > 0 {
			said = true
			sv.out.note("note", "%d frame(s) dropped for a bad UDP, TCP or ICMP checksum; if the peer is a veth or another software interface, it may leave its checksums to an offload nothing performs: run ethtool -K PEER tx off on the peer's interface", n)
		}
	}
}

// helperLines hands each line the helper writes to f. A report of many
// queues and outcomes is one long line (256 MiB at most); whatever
// happens, the helper's output is read to its end, so that the helper
// never blocks on a full pipe.
func helperLines(r io.Reader, f func(line string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	err := sc.Err()
	if err != nil {
		io.Copy(io.Discard, r)
	}
	return err
}
