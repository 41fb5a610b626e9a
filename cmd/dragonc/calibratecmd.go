package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/bench/live"
	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/internal/outdir"
	"github.com/dragonc/dragonc/streams"
)

func init() {
	builders = append(builders, newCalibrateCmd)
}

type calibrateFlags struct {
	sizes                          []int
	rounds, exchanges, streamBytes int
	stall, clientSpin              time.Duration
	out, note, server, selfCheck   string
}

func newCalibrateCmd(e *env) *cobra.Command {
	var f calibrateFlags
	c := &cobra.Command{
		Use:   "calibrate [flags] [-o FILE]",
		Short: "measure the software VI beside kernel TCP and write the calibration embed decides streams by",
		Long: `As root: makes two network namespaces joined by a veth pair (named
` + live.CalibratePrefix + `PID-N-a and -b; removed on every way out, and a later
calibrate removes those of a run that was killed), serves an echo over
SOVIA on the software VI (EtherType 0x88B5) and echoes over kernel TCP
in one, and measures them all from the other in interleaved rounds, as
dragonc sovia bench does. Kernel TCP is taken at its best: under
--server run it has two echoes, one whose reads sleep in Go's poller at
once and one whose reads poll the socket first for as long as dragonc
run's VIs spin on their ring, and for each figure (p50, p99, bandwidth)
the calibration and its table take TCP's from the echo better at it
over all the sizes (geometric mean; the notes show both); under
--server sovia, whose VI echo does not spin, it has the sleeping one
alone. The VI's echo is served by dragonc run on the
mvia model (--server run, the default: what carries the streams of a
served plan; it builds its helper with the go command the first time),
or by package sovia on a packet socket of its own (--server sovia).
Every echo is served by a process other than the clients' (dragonc run's
helper, or a child of calibrate for TCP's and package sovia's): Go wakes
a goroutine of its own process sooner than another process's, which
would favour whichever echo shares the clients' process. For each
--size, one-way latency at the 50th and 99th percentiles (half a
ping-pong's round trip) and the bandwidth of an echoed stream; SOVIA
without combining against TCP with TCP_NODELAY.

It writes a calibration file (-o FILE, or standard output): JSON of
format "dragonc-calibration 1" that names the provider, the machine
(host, kernel, CPUs, load average before and after), the time, the link
and the method, the SOVIA settings measured, and per size each
provider's p50, p99 and bandwidth. dragonc embed --calibration FILE
decides each stream endpoint by it (a VI only where the software VI
measured faster than kernel TCP at the endpoint's message size, at the
median and the 99th percentile), and dragonc run uses it the same way;
without one, dragonc run uses the calibration checked in with dragonc
(--calibration builtin). The table of the measurements goes to standard
error (standard output with -o).

The clients sleep at once when the echo has not come, as package sovia
and Go's net do; with --client-spin D both look for it for up to D first
(the VI's host busy-polls its ring, as dragonc run's VIs do; TCP's
reads poll the socket): the two data paths without a sleeping thread's
wake-up, which on a virtual machine costs more than either.

With --self-check vi or tcp it measures that provider against itself
(its one connection in both columns, taking turns as the providers
otherwise do; tcp is the echo whose reads sleep): how far its ratios
stray from 1 is how much a ratio of one run on this host means. It
writes no calibration (no -o or --note): standard output gets JSON
({"self_check", "server", "rounds", "exchanges", "sizes": [{"size",
"targets": [{"target", "p50_us", "p99_us", "round_p50_us", "samples",
"mbps"}]}]}), standard error the table.

Exit: 0 written (with --self-check: measured), 1 a measurement failed
or the file could not be written, 2 usage.`,
		Example: `  sudo dragonc calibrate -o softvi.json
  sudo dragonc calibrate --size 4,64,1024,8192,32768 --rounds 3 -o softvi.json
  dragonc embed --calibration softvi.json mvia examples/cluster_db.lpg
  dragonc embed --calibration builtin mvia examples/cluster_db.lpg
  sudo dragonc calibrate --self-check tcp --size 4,1024,32768 --rounds 10
  sudo dragonc calibrate --client-spin 50us --size 4,64,1024,32768`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runCalibrate(e, &f))
		},
	}
	fs := c.Flags()
	fs.IntSliceVar(&f.sizes, "size", live.CalibrateSizes(), "message sizes in bytes, comma-separated")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds; every echo is measured at every size in each")
	fs.IntVar(&f.exchanges, "exchanges", 200, "ping-pongs per echo, size and round")
	fs.IntVar(&f.streamBytes, "stream-bytes", 1<<20, "bytes a bandwidth measurement writes per echo, size and round, in 512 to 4096 messages (0: no bandwidth)")
	fs.DurationVar(&f.stall, "stall", 10*time.Second, "give up when nothing completes for this long")
	fs.StringVarP(&f.out, "output", "o", "", "write the calibration to this file instead of standard output")
	fs.StringVar(&f.note, "note", "", "a note the calibration file carries (its note field)")
	fs.StringVar(&f.server, "server", live.CalibrateRun, "what serves the VI's echo: run (dragonc run on the mvia model, which carries a served plan's streams; it builds its helper with the go command) or sovia (package sovia on a packet socket of its own)")
	fs.DurationVar(&f.clientSpin, "client-spin", 0, "how long both clients look for the echo before they sleep (the VI's host busy-polls, TCP's reads spin); 0: they sleep at once, as package sovia and Go's net do")
	fs.StringVar(&f.selfCheck, "self-check", "", "measure one provider against itself, vi or tcp, to see how noisy a ratio is on this host (prints the table, writes no calibration)")
	return c
}

// selfCheckReport is what --self-check prints: the provider, its echo's
// server, and sovialat's result with the provider in both columns.
type selfCheckReport struct {
	SelfCheck string `json:"self_check"`
	Server    string `json:"server"`
	*sovialat.Result
}

func runCalibrate(e *env, f *calibrateFlags) int {
	if f.server != live.CalibrateRun && f.server != live.CalibrateSovia {
		fmt.Fprintf(e.stderr, "dragonc: --server %q: want %s or %s\n", f.server, live.CalibrateRun, live.CalibrateSovia)
		return exitUsage
	}
	if f.clientSpin < 0 {
		fmt.Fprintf(e.stderr, "dragonc: --client-spin %v: it must be at least 0\n", f.clientSpin)
		return exitUsage
	}
	if f.rounds < 1 || f.exchanges < 1 || f.streamBytes < 0 {
		fmt.Fprintln(e.stderr, "dragonc: --rounds and --exchanges must be at least 1, --stream-bytes at least 0")
		return exitUsage
	}
	if err := live.CheckSelfCheck(f.selfCheck); err != nil {
		fmt.Fprintf(e.stderr, "dragonc: --self-check: %v\n", err)
		return exitUsage
	}
	if f.selfCheck != "" && (f.out != "" || f.note != "") {
		fmt.Fprintln(e.stderr, "dragonc: --self-check writes no calibration: it takes no -o or --note")
		return exitUsage
	}
	if f.streamBytes == 0 {
		f.streamBytes = -1 // sovialat: no bandwidth
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	say := func(format string, args ...any) { e.notef("calibrate: "+format, args...) }
	cal, res, err := live.Calibrate(ctx, live.CalibrateOptions{Server: f.server, Sizes: f.sizes, Rounds: f.rounds, Exchanges: f.exchanges, StreamBytes: f.streamBytes, Stall: f.stall, Say: say, SelfCheck: f.selfCheck, ClientSpin: f.clientSpin})
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: calibrate: %v\n", err)
		return exitInput
	}
	if f.selfCheck != "" {
		// JSON on standard output as a calibration is, the table on
		// standard error.
		b, err := json.MarshalIndent(selfCheckReport{SelfCheck: f.selfCheck, Server: f.server, Result: res}, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: calibrate: %v\n", err)
			return exitInput
		}
		e.stdout.Write(append(b, '\n'))
		if !e.quiet {
			fmt.Fprintf(e.stderr, "%s against itself (served by %s): each ratio compares one connection with itself, taking turns\n", f.selfCheck, f.server)
			res.WriteTable(e.stderr)
		}
		return exitOK
	}
	cal.Note = f.note
	var b bytes.Buffer
	if err := streams.WriteCalibration(&b, cal); err != nil {
		fmt.Fprintf(e.stderr, "dragonc: calibrate: %v\n", err)
		return exitInput
	}
	table := e.stderr
	if f.out == "" {
		e.stdout.Write(b.Bytes())
	} else {
		if err := outdir.Replace(f.out, b.Bytes(), func(tmp *os.File) error { return tmp.Chmod(0o644) }); err != nil {
			fmt.Fprintf(e.stderr, "dragonc: writing %s: %v\n", f.out, err)
			return exitInput
		}
		table = e.stdout
		fmt.Fprintf(table, "dragonc: wrote %s: %s\n", f.out, cal.Source())
	}
	if !e.quiet || table == e.stdout {
		res.WriteTable(table)
	}
	return exitOK
}
