package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/dragonc/dragonc/verify"
)

func init() {
	register(&command{name: "trace", summary: "show what happens to each frame, step by step", run: runTrace, usage: `Usage: dragonc trace [flags] NIC STACK.lpg

Embeds the stack, then follows each frame: the NIC's decision (the
filter or table entry that matched, the RSS hash and queue, what the
receive descriptor reports, or where the NIC dropped it), each software
node of that queue with the port taken, and the outcome: deliver to an
endpoint, reply (arp, icmp-echo, icmp-port-unreachable, tcp-reset) or
drop with its reason. The generated Go code's verdict and the LPG's are
shown beside it.

Flags:
    --pcap FILE       frames from a pcap or pcapng capture (repeatable)
    --frame HEX       one frame in hexadecimal, Ethernet header first (repeatable)
    --json            one JSON object per frame, one per line
    --fallback        also run the generated Go code (default true; needs go)
    --cost, --strategy, --previous   as for embed

Exit: 0 when every frame is treated as the LPG alone treats it, 1 on a
disagreement or an error, 2 usage.

Examples:
    dragonc trace --pcap capture.pcap 82599 examples/dns_ntp.lpg
    dragonc trace --json --frame 001b2100000102000000000108004500... 82599 examples/dns_ntp.lpg
`})
}

func runTrace(e *env, args []string) int {
	fs := newFlags(e, "trace", lookup("trace").usage)
	var f embedFlags
	f.register(fs)
	var pcaps, hexes multi
	fs.Var(&pcaps, "pcap", "capture file")
	fs.Var(&hexes, "frame", "frame in hexadecimal")
	fallback := fs.Bool("fallback", true, "run the generated Go fallback too")
	if ok, code := parseFlags(fs, interleave(args)); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprint(e.stderr, lookup("trace").usage)
		return exitUsage
	}
	if len(pcaps) == 0 && len(hexes) == 0 {
		fmt.Fprintln(e.stderr, "dragonc trace: no frames: give --pcap FILE or --frame HEX (see 'dragonc help trace')")
		return exitUsage
	}
	opt := verify.TraceOptions{Pcaps: pcaps, Fallback: *fallback}
	for i, h := range hexes {
		b, err := verify.ParseHexFrame(h)
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		opt.Frames = append(opt.Frames, verify.TraceInput{Data: b, Source: fmt.Sprintf("--frame %d", i+1)})
	}
	for _, p := range pcaps {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %s\n", describeIOError(err))
			return exitInput
		}
	}
	r, st, ok := f.plan(e, fs.Arg(0), fs.Arg(1))
	if !ok {
		return exitInput
	}
	if opt.Fallback {
		if _, err := exec.LookPath("go"); err != nil {
			fmt.Fprintln(e.stderr, "dragonc: note: the go command is not installed; the generated code's verdict is not shown")
			opt.Fallback = false
		}
	}
	if opt.Fallback {
		work, err := os.MkdirTemp("", "dragonc-trace")
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		defer os.RemoveAll(work)
		opt.Work = work
	}
	ts, notes, err := verify.Trace(r, st, opt)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	for _, n := range notes {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", n)
	}
	if f.asJSON {
		err = verify.WriteJSON(e.stdout, ts)
	} else {
		err = verify.WriteText(e.stdout, ts)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	for _, t := range ts {
		if !t.Match {
			return exitInput
		}
	}
	return exitOK
}
