package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	drun "github.com/dragonc/dragonc/run"
)

func init() {
	builders = append(builders, newRunCmd)
}

func newRunCmd(e *env) *cobra.Command {
	var f embedFlags
	var sf serveFlags
	var detached bool
	// This program may be an artefact of dragonc build, which serves its
	// own stack: `FILE run IFACE` (read when run is what was asked for).
	var art *drun.Artefact
	c := &cobra.Command{
		Use:   "run [flags] NIC STACK.lpg IFACE",
		Short: "serve the compiled stack on a Linux interface",
		Long: `Embeds the stack as embed does, builds the generated code into a program
(with the go command) and serves the stack on IFACE until interrupted:
one receive loop per plan queue, pinned to the queue's core. With
--socket xdp the loops read AF_XDP sockets (one per device queue, copy
mode where the driver has no zero-copy) fed by an XDP program that does
the plan's steering; with --socket packet, AF_PACKET sockets in a
fanout group whose eBPF program steers. The default, auto, tries AF_XDP
and falls back to AF_PACKET, saying why.
ARP requests, echo requests and UDP datagrams to the stack's addresses
are the stack's; everything else (TCP, IPv6, other hosts' frames) passes
to the kernel. UDP endpoints run the application named by their app
attribute: "echo" or "discard". Any other app, and a TCP endpoint not
on a VI, is an ordinary program's on a kernel socket: its frames go to
the kernel on the core of the endpoint's planned queue (an XDP program
redirects them through a cpumap), and the kernel owns the stack's
address, which must be on IFACE (ip addr add), and answers ARP and ping.
A note per such endpoint names its cores and how to start its program
on them (taskset -c N PROGRAM).

A receive loop takes a batch of frames from its rings, answers them
with one send, and looks again; with nothing there it spins (by default
up to 50µs, and not at all for a second after the kernel preempts the
loop's thread: then another thread wants the core), then sleeps in
poll(2) until the kernel has frames. --spin sets a fixed spin (0: none). With --busy-poll it never sleeps: its sockets busy-poll the device
(SO_PREFER_BUSY_POLL), the lowest latency at the cost of a core each.
A goroutine waiting on a software VI waits alike: up to 50µs by
default, once a wait, --spin's time, or never sleeping with
--busy-poll. The serving line says which.

Every --every, on SIGUSR1 and at exit, one line per queue counts the
frames in, each outcome by the names verify uses, the frames sent and
the kernel's drops on the sockets, after a table of the load measured
since the report before (or since serving began) beside the
plan's prediction: each endpoint's frame rate against its declared
rate, each queue's share of the endpoints' frames against the share
the cost model predicts. With --json, standard output is NDJSON: one
object per event (note, refused, fallback, serving, rebalance, link,
stopped) and per report of the counters, with the load; the notes still
go to standard error as text.
When IFACE goes down or loses its carrier, run says so and its loops
wait until it is up again (said too); when IFACE goes away (deleted, or
moved to another namespace), run stops with an error.
With --rebalance, run plans again from the measured rates (each
endpoint's declared rate replaced by its measured one) after each
report with enough traffic, and serves the new plan (as a reload does) when the
served one costs, at those rates, more than 1+--rebalance-threshold
times it, unless that moves an endpoint that changed queues within the
last 10s. Run says which endpoints it moves, and why.
SIGINT or SIGTERM stops it and detaches every program and socket.
SIGHUP, or dragonc reload IFACE, makes it read STACK.lpg again and serve
what it now says: endpoints added and removed without a restart while
every other endpoint's frames keep flowing; a change the running code
cannot take (a new protocol) restarts the data plane once the new
program is built, and says how long nothing was served; a stack that
does not check is refused with its diagnostics (the running plan serves
on).
With --detach it serves in the background (its own session, its output
in /run/dragonc/IFACE.log) with its eBPF programs, maps and links pinned
under /sys/fs/bpf/dragonc/IFACE, and returns once it serves; dragonc
status shows it and dragonc stop IFACE stops it, also after a crash or
SIGKILL. Without --detach it runs in the foreground, as a supervisor
(systemd) wants it, and still shows in dragonc status.

The NIC is linux-xdp, the software steering model, or a hardware
model (82599, 82576, ...) whose plan is applied first through the NIC's
Linux driver: the plan's linux.sh runs step by step, every step the
driver refuses (a filter rule, RSS, the queue count) is done by the
eBPF stage instead and reported, each queue's RPS and XPS masks name
its core (the kernel's own processing of the queue stays there), and
everything, the masks included, is restored at exit.
The stack checks and fills checksums itself (the sockets carry no
checksum verdicts), so the interface's offload switches are left alone.
On a model with Virtual Interfaces (mvia, clan1000), the TCP endpoints
the plan puts on VIs are served with SOVIA over the software VI on the
same sockets (EtherType 0x88B5), each on its local port with its
sovia.conf settings and its app (echo or discard). Since the software VI
carries them, the plan puts a stream on a VI only where a calibration of
the software VI (--calibration, builtin by default; dragonc calibrate
measures yours) measured it faster than kernel TCP.
IFACE's hardware address must be the stack interface's. IFACE must not
carry the host's default route, and a hardware plan's driver must be
IFACE's (--force overrides both). Needs CAP_NET_ADMIN, CAP_NET_RAW and
CAP_BPF (root has them); the error names the missing ones.
Exit: 0 stopped by a signal, 1 errors, 2 usage.`,
		Example: `  ip link set dev veth0 address 00:1b:21:00:00:01
  dragonc run linux-xdp examples/dns_ntp.lpg veth0
  dragonc run 82599 examples/dns_ntp.lpg eth1      # an ixgbe port: hardware first
  dragonc run mvia examples/cluster_db.lpg veth0   # streams over software VIs where the calibration says so
  dragonc run --json --metrics-addr 127.0.0.1:9477 linux-xdp examples/dns_ntp.lpg veth0
  dragonc run --busy-poll --socket xdp linux-xdp examples/dns_ntp.lpg veth0`,
		Args: func(cmd *cobra.Command, args []string) error {
			var err error
			if art, err = drun.Self(); err != nil {
				return err
			}
			if art != nil && len(args) == 1 {
				return nil // an artefact of dragonc build: IFACE alone
			}
			if len(args) != 3 {
				return usagef("want NIC, STACK.lpg and IFACE, got %d argument(s)", len(args))
			}
			return nicAndStack(cmd, args[:2])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if art != nil && len(args) == 1 {
				if err := fromArtefact(art, cmd.Flags(), &f); err != nil {
					return err
				}
				args = []string{art.NIC, art.Stack, args[0]}
			}
			if err := f.validate(); err != nil {
				return err
			}
			f.calibrationImplicit = !cmd.Flags().Changed("calibration")
			if sf.every < 0 {
				return usagef("--every %v is negative", sf.every)
			}
			if !slices.Contains(drun.Sockets(), sf.socket) {
				return usagef("--socket %q: want %s", sf.socket, strings.Join(drun.Sockets(), ", "))
			}
			if sf.spin < 0 {
				return usagef("--spin %v is negative", sf.spin)
			}
			if !slices.Contains(drun.XDPModes(), sf.xdpMode) {
				return usagef("--xdp-mode %q: want %s", sf.xdpMode, strings.Join(drun.XDPModes(), ", "))
			}
			if !slices.Contains(drun.XDPTXChoices(), sf.xdpTX) {
				return usagef("--xdp-tx %q: want %s", sf.xdpTX, strings.Join(drun.XDPTXChoices(), ", "))
			}
			sf.spinSet = cmd.Flags().Changed("spin")
			if sf.threshold <= 0 || math.IsNaN(sf.threshold) || math.IsInf(sf.threshold, 0) {
				return usagef("--rebalance-threshold %v: want a fraction above 0 (0.2 is 20%%)", sf.threshold)
			}
			if sf.rebalance && sf.every <= 0 {
				return usagef("--rebalance needs rates to measure: --every must be above 0")
			}
			if sf.busyPoll && sf.spinSet {
				return usagef("--busy-poll and --spin: a busy-polling loop never sleeps, so it has no spin to set")
			}
			if detached {
				dargs := args
				if art != nil && art.Stack == args[1] && f.source != nil {
					dargs = args[2:] // the artefact's own stack again
				}
				return exitStatus(detach(e, cmd, dargs, args[2], f.asJSON))
			}
			if art == nil {
				sf.source = runSource(cmd, args[0], args[1])
			}
			return exitStatus(runRun(e, &f, &sf, args[0], args[1], args[2]))
		},
	}
	f.register(c.Flags())
	f.servesOnSoftwareVI(c.Flags())
	c.Flags().DurationVar(&sf.every, "every", time.Second, "counter report interval (0: only on SIGUSR1 and at exit)")
	c.Flags().StringVar(&sf.socket, "socket", "auto", "socket kind: auto, xdp (AF_XDP) or packet (AF_PACKET)")
	c.Flags().BoolVar(&detached, "detach", false, "serve in the background, with the eBPF objects pinned in /sys/fs/bpf/dragonc/IFACE; return once it serves (dragonc status, dragonc stop)")
	c.Flags().StringVar(&sf.metricsAddr, "metrics-addr", "", "serve the counters to Prometheus at http://ADDR/metrics (HOST:PORT, e.g. 127.0.0.1:9477)")
	c.Flags().BoolVar(&sf.force, "force", false, "serve on the interface of the default route, or apply a hardware plan to another driver's interface")
	c.Flags().StringVar(&sf.xdpTX, "xdp-tx", "auto", "whether the XDP stage answers ARP (and ping) itself with XDP_TX: auto (yes, except on a veth in driver mode, whose peer must then run XDP or GRO to receive them), on or off")
	c.Flags().StringVar(&sf.xdpMode, "xdp-mode", "auto", "the hook the XDP programs run on: driver (the driver's own XDP), generic (the kernel's, on the skb), or auto (generic on a veth, where it is cheaper; driver mode elsewhere, generic where the driver has none)")
	c.Flags().BoolVar(&sf.busyPoll, "busy-poll", false, "the receive loops busy-poll the device and never sleep (SO_PREFER_BUSY_POLL; Linux 5.11): the lowest latency, a core each")
	c.Flags().BoolVar(&sf.rebalance, "rebalance", false, "re-plan from the measured rates when that gains more than --rebalance-threshold, no endpoint changing queues twice within 10s; the new plan is served as dragonc reload serves one")
	c.Flags().Float64Var(&sf.threshold, "rebalance-threshold", drun.DefaultRebalanceThreshold, "the least gain of a re-plan: the served plan must cost, at the measured rates, more than 1+THRESHOLD times the new one")
	c.Flags().DurationVar(&sf.spin, "spin", drun.DefaultSpin, "a fixed time a receive loop keeps looking at empty rings before it sleeps (0: never spins; unset: up to 50µs, none while other threads want the core)")
	return c
}

// serveFlags are run's flags about serving (embedFlags are the plan's).
type serveFlags struct {
	every       time.Duration
	socket      string
	force       bool
	metricsAddr string
	busyPoll    bool
	spin        time.Duration
	spinSet     bool // --spin given; otherwise run chooses
	xdpTX       string
	xdpMode     string
	rebalance   bool
	threshold   float64 // --rebalance-threshold
	// source is what a reload reads again (nil: an artefact's own
	// stack, or standard input: no reload).
	source *drun.Source
}

// runSource is what the state records for a reload: the stack file as an
// absolute path, the NIC and the embed flags the command line gave.
func runSource(cmd *cobra.Command, nicArg, stackPath string) *drun.Source {
	if stackPath == "-" {
		return nil
	}
	abs, err := filepath.Abs(stackPath)
	if err != nil {
		return nil
	}
	src := &drun.Source{Stack: abs, NIC: nicArg}
	embedFlagSet := map[string]bool{"cost": true, "gold-per-queue": true, "strategy": true, "previous": true, "copy-engine": true, "target": true, "calibration": true}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if embedFlagSet[fl.Name] {
			src.Flags = append(src.Flags, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return src
}

// restack reads the stack file of a run again, for a reload: its
// diagnostics, as dragonc check prints them, are the error. An
// lpg.Loader reads it, which parses and checks again only the endpoint
// statements that changed since the last file that loaded cleanly (the
// file as the run starts, read here first).
func restack(path string) func() (*lpg.Stack, error) {
	var ld lpg.Loader
	ld.ReadFile(path) // the file as the run starts
	return func() (*lpg.Stack, error) {
		// Parsed and checked; its LPG is derived by what needs it (a
		// reload's short path does not: issue 39's 10,000 endpoints).
		st, diags, err := ld.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if diags.HasErrors() || st == nil {
			var lines []string
			for _, d := range diags.Shown() {
				lines = append(lines, d.String())
			}
			if len(lines) == 0 {
				lines = append(lines, path+" holds no stack")
			}
			return nil, fmt.Errorf("%s", strings.Join(lines, "\n"))
		}
		return st, nil
	}
}

// replan plans a reloaded stack from the running plan as run planned the
// first: the same NIC and embed flags, the incremental search (a reload
// of dragonc run calls only this to plan, so that another search can
// take its place). What embed would print goes into the error.
func replan(f *embedFlags, nicArg, stackPath string) func(*lpg.Stack, *embed.Result) (*embed.Result, error) {
	return func(st *lpg.Stack, running *embed.Result) (*embed.Result, error) {
		var msgs bytes.Buffer
		e := &env{stdout: io.Discard, stderr: &msgs, stdin: strings.NewReader(""), quiet: true}
		g := *f
		g.running, g.stack = running.Plan, st
		r, _, ok := g.plan(e, nicArg, stackPath)
		if !ok {
			return nil, fmt.Errorf("%s", strings.TrimSpace(strings.ReplaceAll(msgs.String(), "dragonc: ", "")))
		}
		return r, nil
	}
}

func runRun(e *env, f *embedFlags, sf *serveFlags, nicArg, stackPath, iface string) int {
	f.adapt = drun.Adapt
	r, st, ok := f.plan(e, nicArg, stackPath)
	if !ok {
		return exitInput
	}
	if n := calibrationNote(r.Plan.VIA); n != "" {
		e.notef("%s", n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	spin := time.Duration(0) // Options: 0 is run's choice
	if sf.spinSet {
		spin = sf.spin
		if spin == 0 {
			spin = -1 // Options: negative is "never spins"
		}
	}
	opt := drun.Options{Iface: iface, Every: sf.every, Socket: sf.socket, Force: sf.force, Stdout: e.stdout, Stderr: e.stderr, JSON: f.asJSON, MetricsAddr: sf.metricsAddr,
		BusyPoll: sf.busyPoll, Spin: spin, XDPTX: sf.xdpTX, XDPMode: sf.xdpMode, Rebalance: sf.rebalance, RebalanceThreshold: sf.threshold,
		Signal: func(p *os.Process) {
			go func() {
				for range usr1 {
					p.Signal(syscall.SIGUSR1)
				}
			}()
		}}
	// SIGHUP reloads the stack file, as dragonc reload does.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	opt.Source = sf.source
	if sf.source != nil {
		opt.Restack, opt.Replan = restack(sf.source.Stack), replan(f, nicArg, stackPath)
	}
	opt.Live = func(l *drun.Live) {
		go func() {
			for range hup {
				l.ReloadSource()
			}
		}()
	}
	if ready, ok := drun.DetachedReady(); ok {
		// Started by run --detach: pin, and tell the parent once serving.
		opt.Pin, opt.Ready, opt.FinalOnly = true, ready, true
	}
	if err := drun.Serve(ctx, r, st, opt); err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	return exitOK
}

// calibrationNote names the streams a calibration left on kernel TCP
// (their reasons, streams.Decide's, say "measured"), which a model's
// table alone might have put on VIs: the software VI that would carry
// them measured slower, or was not measured at their size. "" when there
// are none.
func calibrationNote(v *plan.VIA) string {
	if v == nil || v.Basis != "calibration" {
		return ""
	}
	var kept []string
	for _, s := range v.Streams {
		if s.Transport == "tcp" && strings.Contains(s.Reason, "measured") {
			kept = append(kept, s.Endpoint)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return fmt.Sprintf("%s stay on kernel TCP by the calibration of %s (dragonc embed --calibration shows the numbers)", strings.Join(kept, ", "), v.Calibration)
}
