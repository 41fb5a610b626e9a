package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/bench"
)

func init() {
	builders = append(builders, newBenchCmd)
}

func newBenchCmd(e *env) *cobra.Command {
	var f embedFlags
	var n int
	var quiet bool
	c := &cobra.Command{
		Use:   "bench [flags] NIC STACK.lpg",
		Short: "measure the generated software fallback",
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

Exit: 0, 1 on errors, 2 usage.`,
		Example: `  dragonc bench 82599 examples/udp_1000.lpg
  dragonc bench --json 82599 examples/udp_1000.lpg | jq .fallback_ns`,
		Args: nicAndStack,
		RunE: func(cmd *cobra.Command, args []string) error {
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
	return c
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
