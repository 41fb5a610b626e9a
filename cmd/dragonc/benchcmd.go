package main

import (
	"fmt"
	"os"

	"github.com/dragonc/dragonc/bench"
)

func init() {
	register(&command{name: "bench", summary: "measure the generated software fallback", run: runBench, usage: `Usage: dragonc bench [flags] NIC STACK.lpg

Embeds the stack, builds the generated software fallback with a harness
(the go command must be installed), and times it on frames aimed at the
stack's endpoints (minimum-size and typical sizes), next to the
all-software pipeline (the whole LPG on one queue, also generated) and a
baseline written with gopacket (DecodingLayerParser and a Go map of
5-tuples). The last line is:

    fallback X ns/frame, software-only Y ns/frame, gopacket baseline Z ns/frame, N allocs/frame

Flags:
    --frames N    frames in the rotation (default 1000)
    --cost NAME   cost function for the embedding (default balance)

Exit: 0, 1 on errors.

Examples:
    dragonc bench 82599 examples/udp_1000.lpg
`})
}

func runBench(e *env, args []string) int {
	fs := newFlags(e, "bench", lookup("bench").usage)
	var f embedFlags
	f.register(fs)
	n := fs.Int("frames", 1000, "frames in the rotation")
	if ok, code := parseFlags(fs, interleave(args)); !ok {
		return code
	}
	if fs.NArg() != 2 || *n < 1 {
		fmt.Fprint(e.stderr, lookup("bench").usage)
		return exitUsage
	}
	r, st, ok := f.plan(e, fs.Arg(0), fs.Arg(1))
	if !ok {
		return exitInput
	}
	work, err := os.MkdirTemp("", "dragonc-bench")
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	defer os.RemoveAll(work)
	frames := bench.Frames(st, *n)
	rep, err := bench.Run(r, st, frames, work)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	fmt.Fprintf(e.stdout, "%d frames aimed at %d endpoints of %s on %s\n", rep.Frames, len(st.Endpoints), st.Name, fs.Arg(0))
	fmt.Fprintf(e.stdout, "the embedding saves %.0f%% of the software pipeline's time\n", rep.SavedPercent)
	fmt.Fprintln(e.stdout, rep.Line())
	return exitOK
}
