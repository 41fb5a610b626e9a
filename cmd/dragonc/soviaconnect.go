package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/sovia"
)

func init() {
	soviaBuilders = append(soviaBuilders, newSoviaConnectCmd)
}

// soviaConnectFlags are dragonc sovia connect's flags.
type soviaConnectFlags struct {
	stream        streamFlags
	timeout, quit time.Duration
	verbose       bool
}

func newSoviaConnectCmd(e *env) *cobra.Command {
	var f soviaConnectFlags
	c := &cobra.Command{
		Use:   "connect [flags] IFACE HOST:PORT",
		Short: "connect standard input and output to a SOVIA stream, like nc",
		Long: `Connects over the software VI on IFACE to the SOVIA stream on PORT of
HOST (a stream dragonc run serves on a VI, or any sovia listener), then
copies standard input to the stream and the stream to standard output,
as nc does for TCP. Writes go out as they are read (no combining, as
TCP_NODELAY).

The window, acknowledgement threshold and chunk size must be the
listener's (its sovia.conf). Unless given, they are the paper's, and
when the listener refuses them for its own, the connection is made again
with the listener's.

SOVIA has no half-close: when standard input ends, the stream stays open
for what the peer still sends, until the peer closes it, -q passes or
the command is interrupted.

Exit: 0 the session ended (the peer closed, -q passed after the end of
standard input, or SIGINT/SIGTERM), 1 the peer could not be found or
reached, refused, or the stream failed, 2 usage.`,
		Example: `  dragonc sovia connect vB '[02:00:00:00:00:01]:5000'
  dragonc sovia connect vB 10.9.0.1:5000
  printf 'ping\n' | dragonc sovia connect -q 1s vB 10.9.0.1:5000`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want IFACE and HOST:PORT, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			return exitStatus(runSoviaConnect(e, &f, f.stream.given(fs), args[0], args[1]))
		},
	}
	fs := c.Flags()
	f.stream.add(fs)
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "give up finding and connecting to the peer after this long")
	fs.DurationVarP(&f.quit, "quit-after", "q", -1, "after standard input ends, close the stream after this long (negative: wait for the peer to close it)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "say on standard error when connected, with the settings, and when the session ends")
	return c
}

func runSoviaConnect(e *env, f *soviaConnectFlags, given bool, iface, peer string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "dragonc: "+format+"\n", args...)
		return exitInput
	}
	host, port, ok := soviaPeer(peer)
	if !ok {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", badPeer(peer))
		return exitUsage
	}
	if f.timeout <= 0 {
		fmt.Fprintln(e.stderr, "dragonc: --timeout must be positive")
		return exitUsage
	}
	p := f.stream.params()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	dctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if _, err := net.InterfaceByName(iface); err != nil {
		return fail("no interface %s", iface)
	}
	mac, err := sovialat.PeerMAC(dctx, iface, host)
	if err != nil {
		return fail("%v", err)
	}
	addr := sovia.Addr{MAC: mac, Port: port}
	c, err := sovia.Dial(dctx, iface, addr, p)
	var se *sovia.SettingsError
	if errors.As(err, &se) && !given {
		p.Window, p.AckThreshold, p.ChunkSize = se.Listener.Window, se.Listener.AckThreshold, se.Listener.ChunkSize
		p.CopyMax = min(p.CopyMax, p.ChunkSize)
		c, err = sovia.Dial(dctx, iface, addr, p)
	}
	switch {
	case ctx.Err() != nil:
		return fail("interrupted while connecting to %s", addr)
	case err != nil:
		return fail("%v", err)
	}
	if f.verbose {
		fmt.Fprintf(e.stderr, "dragonc: connected to %s from %s over %s (window %d, acknowledgements after %d, %d B chunks)\n", c.RemoteAddr(), c.LocalAddr(), iface, p.Window, p.AckThreshold, p.ChunkSize)
	}
	// The close exchange is given a moment to end, so that the peer
	// need not wait out its linger; the host goes with it.
	defer func() {
		c.Close()
		for deadline := time.Now().Add(time.Second); !c.Finished() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}()

	in, out := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := io.Copy(c, e.stdin)
		in <- err
	}()
	go func() {
		_, err := io.Copy(e.stdout, c)
		out <- err
	}()
	var quit <-chan time.Time
	for {
		select {
		case err := <-out:
			if err != nil {
				return fail("the stream from %s: %v", addr, err)
			}
			if f.verbose {
				fmt.Fprintf(e.stderr, "dragonc: %s closed the stream\n", addr)
			}
			return exitOK
		case err := <-in:
			in = nil
			if err != nil {
				return fail("copying standard input to %s: %v", addr, err)
			}
			if f.quit >= 0 {
				quit = time.After(f.quit)
			}
		case <-quit:
			return exitOK
		case <-ctx.Done():
			return exitOK
		}
	}
}
