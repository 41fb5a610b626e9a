package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/bench"
	"github.com/dragonc/dragonc/bench/live"
	drun "github.com/dragonc/dragonc/run"
)

func init() {
	builders = append(builders, newBenchCmd)
}

func newBenchCmd(e *env) *cobra.Command {
	var f embedFlags
	var n int
	var quiet bool
	var lv liveFlags
	c := &cobra.Command{
		Use:   "bench [flags] NIC STACK.lpg | bench --live [flags]",
		Short: "measure the generated software fallback, or dragonc run live (--live)",
		Long: `Embeds the stack, builds the generated software fallback with a harness
(the go command must be installed), and times it on frames aimed at the
stack's endpoints, in one process and in interleaved rounds, next to four
baselines doing the same work: the all-software pipeline (the whole LPG
on one queue, also generated), a careful hand-written Go program (fields
of the common layout read at their offsets, endpoints found in an array
indexed by port), a plain hand-written decoder with packed-key maps, and
the same with gopacket's DecodingLayerParser. Every variant must deliver
every frame to the same endpoint before anything is timed.
Figures are given for minimum-size frames and for a mix of minimum-size
and typical frames (64 and 512 bytes of data), with ratios to the
generated code; the last line, on the mixed frames, is:

    fallback X ns/frame, software-only Y ns/frame, gopacket baseline Z ns/frame, N allocs/frame

With --live (as root; no NIC or stack) it measures UDP echo over a veth
pair instead, in two network namespaces it makes and removes however it
ends (a signal included), served in turn by five servers in interleaved
rounds, all under the same load generator in the peer namespace:
  go         the Go kernel server (net.ListenUDP, SO_REUSEPORT, a socket
             and goroutine per core)
  c          a C server (recvmmsg/sendmmsg, SO_REUSEPORT, a thread per
             core pinned to it), built with cc; skipped, saying so, where
             there is no C compiler
  xdp        dragonc run --socket xdp, serving
             endpoint echo udp listen *:7 { app "echo" cores 0..N-1 }
  packet     the same with --socket packet
             (--busy-poll and --spin set their loops' wait mode, and
             --xdp-mode their XDP programs' hook, as for dragonc run)
  reflector  an XDP program that answers with XDP_TX (addresses and
             ports swapped): the most the veth carries
With --ping the requests are ICMP echo requests (the generator's ping
sockets) and the servers are kernel (the Linux stack's own replies),
xdp, packet and reflector (an echo request made a reply in XDP); the
ratios are to the kernel and to the reflector; the dragonc rows' XDP
programs run in driver mode, the reflector's hook, unless --xdp-mode
says otherwise. It needs the C generator.
The load generator is a C program (a thread per core, epoll,
recvmmsg/sendmmsg, the monotonic clock) in a process of its own, or a
Go one (this program re-executed, one thread) where there is no C
compiler; the report says which. It keeps --in-flight requests
outstanding over 16 sockets, then one, for
--duration each (or until --transactions answers); a request unanswered
after 200ms is counted lost, never waited for.
For each server: transactions/s at --in-flight, p50 and p99 round trip
at 1 in flight, CPU µs per transaction at both, lost requests; min–max
over the rounds, and ratios to the C server and to the reflector
computed within each round. CPU µs per transaction is the busy time of
every CPU over the measured window (/proc/stat: user, nice, system, irq,
softirq, steal) less the load generator's own user and system time and
less the host's background (its busy rate with nothing running, measured
before each round), per answered transaction: the server's threads and
the kernel's work for the traffic, softirq included, except what ran in
the generator's own system calls (on a veth the sender's call often
carries a frame through the receiver's softirq, and this kernel charges
a tick there to the calling process). "own µs/tx" is the CPU time of
the server's own process and of dragonc's per transaction: immune to
other work on the host, blind to kernel work charged elsewhere (all of
the reflector's). A table goes to standard output,
progress to standard error; --json prints one JSON document instead.
The numbers mean little while other work shares the cores: when the
background was above a quarter of a CPU, the table shows "busy" for
the host-wide CPU figures (--json keeps them) and says why.

With --memcached it runs Dragonet's priority experiment instead: two
memcached servers (the installed program, unmodified, UDP enabled),
gold on port 11211 and best-effort on 11212, behind a stack like
examples/memcached_gold.lpg embedded with --cost priority, each pinned
to the core of its endpoint's planned queue. A C load generator speaks
memcached's UDP protocol (the 8-byte frame header, then "get KEY") for
values stored over TCP first. In each round, for each row, kernel (no
dragonc: the kernel's default steering on the veth), dragonc (dragonc
run --socket xdp serving the stack, each endpoint's frames steered to
its planned core) and xdp-pass (the kernel's default behind an XDP
program that passes everything: the veth's XDP path alone): gold alone at --gold-rate gets/s, gold
beside a best-effort flood of --in-flight outstanding gets, then both
saturated. Reported: gold p50 and p99 alone and flooded, their p99
ratio (goal with dragonc: at most 2x), best-effort get/s in the flood,
saturated get/s and dragonc's over the kernel's within a round (goal:
at least 0.95x), lost requests.

Exit: 0, 1 on errors (and --live without root), 2 usage.`,
		Example: `  dragonc bench 82599 examples/udp_1000.lpg
  dragonc bench --json 82599 examples/udp_1000.lpg | jq .fallback_ns
  sudo dragonc bench --live
  sudo dragonc bench --live --rounds 5 --duration 5s
  sudo dragonc bench --live --busy-poll --servers c,xdp
  sudo dragonc bench --live --ping
  sudo dragonc bench --live --memcached --rounds 3 --duration 2s --gold-rate 2000
  sudo dragonc bench --live --servers c,xdp,reflector --transactions 100000 --json | jq '.servers[].spread.per_second'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if lv.on {
				if len(args) > 0 {
					return usagef("--live takes no NIC or stack (it serves its own echo stack), got %d argument(s)", len(args))
				}
				return nil
			}
			return nicAndStack(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if lv.on {
				for _, name := range []string{"cost", "gold-per-queue", "strategy", "previous", "copy-engine", "target", "frames"} {
					if cmd.Flags().Changed(name) {
						return usagef("--%s has no meaning with --live", name)
					}
				}
				lv.spinSet = cmd.Flags().Changed("spin")
				lv.goldRateSet = cmd.Flags().Changed("gold-rate")
				if lv.busyPoll && lv.spinSet {
					return usagef("--busy-poll and --spin: a busy-polling loop never sleeps, so it has no spin to set")
				}
				opt, err := lv.options()
				if err != nil {
					return err
				}
				e.quiet = quiet
				return exitStatus(runLive(e, opt, f.asJSON, quiet))
			}
			for _, name := range []string{"rounds", "duration", "transactions", "in-flight", "servers", "busy-poll", "spin", "xdp-mode", "ping", "memcached", "gold-rate"} {
				if cmd.Flags().Changed(name) {
					return usagef("--%s goes with --live", name)
				}
			}
			if err := f.validate(); err != nil {
				return err
			}
			if n < 1 || n > 1_000_000 {
				return usagef("--frames %d is not in 1..1000000", n)
			}
			e.quiet = quiet
			return exitStatus(runBench(e, &f, n, quiet, args[0], args[1]))
		},
	}
	f.register(c.Flags())
	c.Flags().IntVar(&n, "frames", 1000, "frames in the rotation")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar, warnings or notes: only the result and errors")
	lv.register(c.Flags())
	return c
}

// liveFlags are bench --live's flags.
type liveFlags struct {
	on           bool
	rounds       int
	duration     time.Duration
	transactions int
	inFlight     int
	servers      []string
	ping         bool
	memcached    bool
	goldRate     int
	busyPoll     bool
	spin         time.Duration
	xdpMode      string
	spinSet      bool // --spin given; otherwise run chooses
	goldRateSet  bool // --gold-rate given
}

func (l *liveFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&l.on, "live", false, "measure UDP echo over a veth against the kernel, a C server and an XDP_TX reflector (root)")
	fs.IntVar(&l.rounds, "rounds", 3, "--live: rounds, every server measured once in each")
	fs.DurationVar(&l.duration, "duration", 2*time.Second, "--live: length of each measurement (two per server and round)")
	fs.IntVar(&l.transactions, "transactions", 0, "--live: end each measurement at this many answers (0: --duration alone)")
	fs.IntVar(&l.inFlight, "in-flight", 64, "--live: requests outstanding in the throughput measurement")
	fs.StringSliceVar(&l.servers, "servers", nil, "--live: the servers to measure: "+strings.Join(live.ServerNames(), ", ")+"; with --ping "+strings.Join(live.PingServerNames(), ", ")+"; with --memcached "+strings.Join(live.MemcachedServerNames(), ", ")+" (default all)")
	fs.BoolVar(&l.ping, "ping", false, "--live: ICMP echo (ping) instead of UDP echo")
	fs.BoolVar(&l.memcached, "memcached", false, "--live: Dragonet's priority experiment: gold and best-effort memcached behind dragonc's plan and the kernel's default")
	fs.IntVar(&l.goldRate, "gold-rate", 2000, "--live --memcached: the gold client's gets per second")
	fs.BoolVar(&l.busyPoll, "busy-poll", false, "--live: dragonc run's loops busy-poll, as run --busy-poll")
	fs.DurationVar(&l.spin, "spin", drun.DefaultSpin, "--live: dragonc run's spin on empty rings, as run --spin (0: never spins; unset: run's choice)")
	fs.StringVar(&l.xdpMode, "xdp-mode", "", "--live: the hook of dragonc run's XDP programs, as run --xdp-mode: auto, driver or generic (default auto; with --ping driver, the reflector's hook)")
}

func (l *liveFlags) options() (live.Options, error) {
	// Zero means "the default" in live.Options, not on the command line.
	switch {
	case l.rounds < 1:
		return live.Options{}, usagef("--live: rounds %d is not in 1..100", l.rounds)
	case l.duration <= 0:
		return live.Options{}, usagef("--live: duration %v is not in 100ms..10m", l.duration)
	case l.inFlight < 1:
		return live.Options{}, usagef("--live: in-flight %d is not in 1..4096", l.inFlight)
	case l.spin < 0:
		return live.Options{}, usagef("--live: --spin %v is negative", l.spin)
	case l.goldRate < 1:
		return live.Options{}, usagef("--live: gold rate %d is not in 1..1000000 requests/s", l.goldRate)
	case l.goldRateSet && !l.memcached:
		return live.Options{}, usagef("--gold-rate goes with --memcached")
	case l.memcached && l.transactions != 0:
		return live.Options{}, usagef("--transactions has no meaning with --memcached: its loads run for --duration")
	}
	spin := time.Duration(0) // Options: 0 is run's choice
	if l.spinSet {
		spin = l.spin
		if spin == 0 {
			spin = -1 // Options: negative is "never spins"
		}
	}
	opt := live.Options{Rounds: l.rounds, Duration: l.duration, Transactions: l.transactions, InFlight: l.inFlight, Servers: l.servers,
		BusyPoll: l.busyPoll, Spin: spin, XDPMode: l.xdpMode, Ping: l.ping, Memcached: l.memcached, GoldRate: l.goldRate}
	if err := opt.Check(); err != nil {
		return opt, usagef("--live: %v", err)
	}
	return opt, nil
}

// runLive runs bench --live until it ends or a signal stops it; the
// benchmark removes what it made either way.
func runLive(e *env, opt live.Options, asJSON, quiet bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if !quiet {
		opt.Progress = e.stderr
	}
	var rep interface{ Table() string }
	var err error
	if opt.Memcached {
		rep, err = live.RunMemcached(ctx, opt)
	} else {
		rep, err = live.Run(ctx, opt)
	}
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(e.stderr, "dragonc: bench --live stopped by a signal; its namespaces are removed")
		return exitInput
	case err != nil:
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if asJSON {
		writeJSON(e, rep)
		return exitOK
	}
	fmt.Fprint(e.stdout, rep.Table())
	return exitOK
}

// benchJSON is `bench --json`.
type benchJSON struct {
	NIC          string       `json:"nic"`
	Stack        string       `json:"stack"`
	Frames       int          `json:"frames"`
	Endpoints    int          `json:"endpoints"`
	FallbackNs   float64      `json:"fallback_ns"`
	SoftwareNs   float64      `json:"software_only_ns"`
	GopacketNs   float64      `json:"gopacket_ns"`
	HandNs       float64      `json:"hand_written_ns"`
	HandMapsNs   float64      `json:"hand_written_maps_ns"`
	Small        benchFigures `json:"min_size"`
	Allocs       float64      `json:"allocs_per_frame"`
	SavedPercent float64      `json:"saved_percent"`
}

// benchFigures are the figures on minimum-size frames.
type benchFigures struct {
	FallbackNs float64 `json:"fallback_ns"`
	SoftwareNs float64 `json:"software_only_ns"`
	HandNs     float64 `json:"hand_written_ns"`
	HandMapsNs float64 `json:"hand_written_maps_ns"`
	GopacketNs float64 `json:"gopacket_ns"`
}

func runBench(e *env, f *embedFlags, n int, quiet bool, nicArg, stackPath string) int {
	r, st, ok := f.plan(e, nicArg, stackPath)
	if !ok {
		return exitInput
	}
	work, err := os.MkdirTemp("", "dragonc-bench")
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	defer os.RemoveAll(work)
	frames := bench.Frames(st, n)
	bar := newProgress(e, quiet, len(bench.Stages), bench.Stages[0])
	rep, err := bench.RunProgress(r, st, frames, work, func(stage int) {
		bar.set(stage)
		bar.describe(bench.Stages[stage])
	})
	bar.done()
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if f.asJSON {
		m, sm := rep.Mixed, rep.Small
		writeJSON(e, benchJSON{NIC: nicArg, Stack: st.Name, Frames: rep.Frames, Endpoints: len(st.Endpoints), FallbackNs: m.Fallback,
			SoftwareNs: m.Software, GopacketNs: m.Gopacket, HandNs: m.Hand, HandMapsNs: m.HandMaps, Allocs: rep.Allocs, SavedPercent: rep.SavedPercent,
			Small: benchFigures{FallbackNs: sm.Fallback, SoftwareNs: sm.Software, HandNs: sm.Hand, HandMapsNs: sm.HandMaps, GopacketNs: sm.Gopacket}})
		return exitOK
	}
	fmt.Fprintf(e.stdout, "%d frames aimed at %d endpoints of %s on %s\n", rep.Frames, len(st.Endpoints), st.Name, nicArg)
	fmt.Fprint(e.stdout, rep.Table())
	fmt.Fprintf(e.stdout, "the embedding saves %.0f%% of the software pipeline's time on the mixed frames\n", rep.SavedPercent)
	fmt.Fprintln(e.stdout, rep.Line())
	return exitOK
}
