package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/verify"
)

func init() {
	builders = append(builders, newTraceCmd)
}

func newTraceCmd(e *env) *cobra.Command {
	f := embedFlags{noSelfCheck: true} // it checks every frame itself
	var pcaps, hexes []string
	var fallback bool
	c := &cobra.Command{
		Use:   "trace [flags] NIC STACK.lpg",
		Short: "show what happens to each frame, step by step",
		Long: `Embeds the stack, then follows each frame: the NIC's decision (the
filter or table entry that matched, the RSS hash and queue, what the
receive descriptor reports, or where the NIC dropped it), each software
node of that queue with the port taken, and the outcome: deliver to an
endpoint, reply (arp, icmp-echo, icmp-port-unreachable, tcp-reset) or
drop with its reason. The generated Go code's verdict and the LPG's are
shown beside it. --json prints one JSON object per frame, one per line
(fields in docs/trace.md).

Exit: 0 when every frame is treated as the LPG alone treats it, 1 on a
disagreement or an error, 2 usage.`,
		Example: `  dragonc trace --pcap capture.pcap 82599 examples/dns_ntp.lpg
  dragonc trace --json --frame 001b2100000102000000000108004500... 82599 examples/dns_ntp.lpg`,
		Args: nicAndStack,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if len(pcaps) == 0 && len(hexes) == 0 {
				return usagef("no frames: give --pcap FILE or --frame HEX")
			}
			return exitStatus(runTrace(e, &f, pcaps, hexes, fallback, args[0], args[1]))
		},
	}
	f.register(c.Flags())
	c.Flags().StringArrayVar(&pcaps, "pcap", nil, "frames from a pcap or pcapng capture (repeatable; - for standard input)")
	c.Flags().StringArrayVar(&hexes, "frame", nil, "one frame in hexadecimal, Ethernet header first (repeatable)")
	c.Flags().BoolVar(&fallback, "fallback", true, "also run the generated Go code (needs the go command)")
	return c
}

func runTrace(e *env, f *embedFlags, pcaps, hexes []string, fallback bool, nicArg, stackPath string) int {
	if !capturePaths(e, pcaps, stackPath) {
		return exitInput
	}
	opt := verify.TraceOptions{Pcaps: pcaps, Stdin: e.stdin, Fallback: fallback}
	for i, h := range hexes {
		b, err := verify.ParseHexFrame(h)
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		opt.Frames = append(opt.Frames, verify.TraceInput{Data: b, Source: fmt.Sprintf("--frame %d", i+1)})
	}
	r, st, ok := f.plan(e, nicArg, stackPath)
	if !ok {
		return exitInput
	}
	work, ok := fallbackWork(e, &opt.Fallback, "the generated code's verdict is not shown", "dragonc-trace")
	if !ok {
		return exitInput
	}
	defer os.RemoveAll(work)
	opt.Work = work
	// Each frame's trace is printed as soon as it is known.
	bw := bufio.NewWriter(e.stdout)
	n, differ := 0, 0
	notes, err := verify.TraceEach(r, st, opt, func(t verify.FrameTrace) error {
		if !t.Match {
			differ++
		}
		n++
		if f.asJSON {
			return verify.WriteJSON(bw, []verify.FrameTrace{t})
		}
		if n > 1 {
			bw.WriteString("\n")
		}
		return verify.WriteText(bw, []verify.FrameTrace{t})
	})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	for _, n := range notes {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if differ > 0 {
		fmt.Fprintf(e.stderr, "dragonc: %d of %d frames are treated otherwise than by the LPG alone\n", differ, n)
		return exitInput
	}
	return exitOK
}
