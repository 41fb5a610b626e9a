package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/sovia"
)

func init() {
	soviaBuilders = append(soviaBuilders, newSoviaBenchCmd)
}

// soviaBenchFlags are dragonc sovia bench's flags.
type soviaBenchFlags struct {
	sizes             []int
	tcp               string
	rounds, exchanges int
	streamBytes       int
	stream            streamFlags
	stall             time.Duration
	spin              time.Duration
	asJSON            bool
}

func newSoviaBenchCmd(e *env) *cobra.Command {
	var f soviaBenchFlags
	c := &cobra.Command{
		Use:   "bench [flags] IFACE HOST:PORT",
		Short: "measure a live SOVIA echo stream's latency and bandwidth (and kernel TCP's beside it)",
		Long: `Connects over the software VI on IFACE to a SOVIA stream that echoes
(dragonc run mvia with an endpoint of app "echo" on PORT) and measures,
for each --size, the one-way latency (half the round trip of a
ping-pong: a message written, its echo read) at the 50th and 99th
percentiles, and the bandwidth of a stream of such messages that the
peer echoes back while more are written. With --tcp HOST:PORT it
measures a kernel TCP echo server (socat, or a kernel-socket endpoint)
beside it in the same run: the two take turns size by size, their order
rotating every round, like with like: SOVIA sends without combining
(nodelay) and TCP with TCP_NODELAY.

--spin D makes both clients look for the echo for up to D before they
sleep, like with like: the VI's host busy-polls its ring (opened with
sovia's HostOptions.BusyPoll, as dragonc run's VIs are) and TCP's reads
poll the socket. The default, 0, is each library's own: both sleep at
once. A spinning client takes a core.

The window, acknowledgement threshold and chunk size must be the
stream's (its sovia.conf); the listener refuses other settings.
The run stops with an error when nothing completes for --stall (a peer
that acknowledges but no longer echoes; a lost frame is sent again, and
a VI whose frames all go unacknowledged for about 7 s breaks with an
error of its own); a slow run is never cut short. The load average is
printed with the figures: a shared host makes them vary, compare ratios
within a run.

Exit: 0 measured, 1 the peer could not be reached or a measurement
failed, 2 usage.`,
		Example: `  dragonc sovia bench vB 10.9.0.1:5000
  dragonc sovia bench --size 4,64,1024,32768 --tcp 10.9.0.1:7 vB '[02:00:00:00:00:01]:5000'
  dragonc sovia bench --json vB 10.9.0.1:5000 | jq '.sizes[].targets[0].p50_us'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want IFACE and HOST:PORT, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runSoviaBench(e, &f, args[0], args[1]))
		},
	}
	fs := c.Flags()
	fs.IntSliceVar(&f.sizes, "size", []int{4, 64, 1024, 8192, 32768}, "message sizes in bytes, comma-separated")
	fs.StringVar(&f.tcp, "tcp", "", "HOST:PORT of a kernel TCP echo server to measure beside the stream")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds; every target is measured at every size in each")
	fs.IntVar(&f.exchanges, "exchanges", 200, "ping-pongs per target, size and round")
	fs.IntVar(&f.streamBytes, "stream-bytes", 1<<20, "bytes a bandwidth measurement writes per target, size and round, in 512 to 4096 messages (0: no bandwidth)")
	f.stream.add(fs)
	fs.DurationVar(&f.stall, "stall", 10*time.Second, "give up when nothing completes for this long")
	fs.DurationVar(&f.spin, "spin", 0, "how long both clients look for the echo before they sleep (the VI's host busy-polls, TCP's reads poll); 0: they sleep at once")
	fs.BoolVar(&f.asJSON, "json", false, "one JSON document on standard output")
	return c
}

// soviaBenchReport is sovia bench's --json document.
type soviaBenchReport struct {
	Iface       string     `json:"iface"`
	Peer        string     `json:"peer"`
	PeerMAC     string     `json:"peer_mac"`
	TCP         string     `json:"tcp,omitempty"`
	SpinUs      float64    `json:"spin_us,omitempty"`
	LoadAverage [3]float64 `json:"load_average"`
	*sovialat.Result
}

func runSoviaBench(e *env, f *soviaBenchFlags, iface, peer string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "dragonc: "+format+"\n", args...)
		return exitInput
	}
	host, port, ok := soviaPeer(peer)
	if !ok {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", badPeer(peer))
		return exitUsage
	}
	if f.streamBytes == 0 {
		f.streamBytes = -1 // sovialat: no bandwidth
	}
	if f.rounds < 1 || f.exchanges < 1 || f.streamBytes < -1 || f.spin < 0 {
		fmt.Fprintln(e.stderr, "dragonc: --rounds and --exchanges must be at least 1, --stream-bytes and --spin at least 0")
		return exitUsage
	}
	p := f.stream.params()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	mac, err := sovialat.PeerMAC(ctx, iface, host)
	if err != nil {
		return fail("%v", err)
	}
	if _, err := net.InterfaceByName(iface); err != nil {
		return fail("no interface %s", iface)
	}
	h, err := sovia.OpenHostWith(iface, nil, sovia.HostOptions{BusyPoll: f.spin})
	if err != nil {
		return fail("%v", err)
	}
	defer h.Close()
	sc, err := h.Dial(mac, uint16(port), p)
	if err != nil {
		return fail("%v", err)
	}
	defer sc.Close()
	targets := []sovialat.Target{{Name: "sovia", Conn: sc, Abort: func() { h.Close() }}}
	if f.tcp != "" {
		d := net.Dialer{Timeout: 2 * time.Second}
		tc, err := d.DialContext(ctx, "tcp4", f.tcp)
		if err != nil {
			return fail("--tcp: %v", err)
		}
		defer tc.Close()
		tc.(*net.TCPConn).SetNoDelay(true) // Go's default, said here: the pairing depends on it
		conn, err := sovialat.SpinReads(tc.(*net.TCPConn), f.spin)
		if err != nil {
			return fail("--tcp: %v", err)
		}
		targets = append(targets, sovialat.Target{Name: "tcp", Conn: conn, Abort: func() { tc.Close() }})
	}
	go func() {
		<-ctx.Done()
		for _, t := range targets {
			t.Abort()
		}
	}()
	rep := soviaBenchReport{Iface: iface, Peer: peer, PeerMAC: mac.String(), TCP: f.tcp, SpinUs: float64(f.spin.Nanoseconds()) / 1e3, LoadAverage: sovialat.LoadAverage()}
	rep.Result, err = sovialat.Run(targets, sovialat.Options{Sizes: f.sizes, Rounds: f.rounds, Exchanges: f.exchanges, StreamBytes: f.streamBytes, Stall: f.stall})
	if ctx.Err() != nil {
		return fail("interrupted")
	}
	if err != nil {
		return fail("%v", err)
	}
	if f.asJSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fail("%v", err)
		}
		e.stdout.Write(append(b, '\n'))
		return exitOK
	}
	with := ""
	if f.tcp != "" {
		with = fmt.Sprintf(", and kernel TCP (TCP_NODELAY) to %s", f.tcp)
	}
	fmt.Fprintf(e.stdout, "SOVIA (nodelay, window %d, acks after %d, %d B chunks) over the software VI on %s to %s port %d%s:\n", p.Window, p.AckThreshold, p.ChunkSize, iface, mac, port, with)
	wait := "the clients sleep at once while the echo has not come"
	if f.spin > 0 {
		wait = fmt.Sprintf("the clients look for the echo for up to %v before they sleep", f.spin)
	}
	fmt.Fprintf(e.stdout, "%d rounds of %d ping-pongs per size, one-way latency = half the round trip; %s; load average %.2f %.2f %.2f\n", rep.Rounds, rep.Exchanges, wait, rep.LoadAverage[0], rep.LoadAverage[1], rep.LoadAverage[2])
	rep.Result.WriteTable(e.stdout)
	return exitOK
}
