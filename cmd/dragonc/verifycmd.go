package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/verify"
)

// maxPackets bounds --packets. Frames are streamed, so memory does not
// grow with it; time does (about 2 µs a frame with the generated code).
const maxPackets = 10_000_000

func init() {
	builders = append(builders, newVerifyCmd)
}

func newVerifyCmd(e *env) *cobra.Command {
	f := embedFlags{noSelfCheck: true} // it checks every frame itself
	var opt verify.Options
	var quiet bool
	c := &cobra.Command{
		Use:   "verify [flags] NIC STACK.lpg",
		Short: "prove on frames that the embedding preserves meaning",
		Long: `Embeds the stack, then runs frames through the configured NIC and each
queue's software (the software graph and the generated Go fallback, built
with the go command) and compares every outcome with the LPG run alone.
Frames come from --pcap captures ("-" reads one from standard input) and
from a seeded generator aimed at every endpoint, filter boundary and
validity check.

The last line is "N packets, M mismatches"; with --json, standard output
holds one JSON document and that line goes to standard error.
Exit: 0 no mismatch, 1 mismatches or errors, 2 usage.`,
		Example: `  dragonc verify 82599 examples/web_and_dns.lpg
  dragonc verify --pcap capture.pcap --packets 100000 82576 examples/dns_ntp.lpg`,
		Args: nicAndStack,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if opt.Packets < 0 || opt.Packets > maxPackets {
				return usagef("--packets %d is not in 0..%d", opt.Packets, maxPackets)
			}
			e.quiet = quiet
			return exitStatus(runVerify(e, &f, opt, quiet, args[0], args[1]))
		},
	}
	f.register(c.Flags())
	c.Flags().StringArrayVar(&opt.Pcaps, "pcap", nil, "a pcap or pcapng capture (repeatable; - for standard input)")
	c.Flags().IntVar(&opt.Packets, "packets", 10000, "generated frames")
	c.Flags().Int64Var(&opt.Seed, "seed", 1, "generator seed")
	c.Flags().BoolVar(&opt.Fallback, "fallback", true, "also run the generated Go code (needs the go command)")
	c.Flags().IntVar(&opt.Show, "show", 5, "mismatches shown in full")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar, warnings or notes: only the result and errors")
	return c
}

func runVerify(e *env, f *embedFlags, opt verify.Options, quiet bool, nicArg, stackPath string) int {
	if !capturePaths(e, opt.Pcaps, stackPath) {
		return exitInput
	}
	opt.Stdin = e.stdin
	r, st, ok := f.plan(e, nicArg, stackPath)
	if !ok {
		return exitInput
	}
	work, ok := fallbackWork(e, &opt.Fallback, "only the software graphs are verified, not the generated code", "dragonc-verify")
	if !ok {
		return exitInput
	}
	defer os.RemoveAll(work)
	opt.Work = work
	bar := newProgress(e, quiet, 100, "verifying")
	stage := ""
	opt.Progress = func(what string, done float64) {
		if what != stage {
			bar.describe(what)
			stage = what
		}
		bar.set(int(done * 100))
	}
	rep, err := verify.Run(r, st, opt)
	bar.done()
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if f.asJSON {
		// Standard output holds the one JSON document; the summary line
		// is for people.
		writeJSON(e, map[string]any{"packets": rep.Total, "mismatches": rep.Mismatched, "outcomes": rep.Outcomes, "notes": rep.Notes})
		fmt.Fprintf(e.stderr, "%d packets, %d mismatches\n", rep.Total, rep.Mismatched)
	} else {
		rep.Write(e.stdout, opt.Show)
	}
	if rep.Mismatched > 0 {
		fmt.Fprintf(e.stderr, "dragonc: %d of %d frames are treated otherwise than by the LPG alone\n", rep.Mismatched, rep.Total)
		return exitInput
	}
	return exitOK
}

// capturePaths checks that every capture is a regular file; "-" is
// standard input, read as it streams, so it may appear once and not when
// the stack comes from standard input too. Captures are streamed, so their
// size is not bounded.
func capturePaths(e *env, paths []string, stackPath string) bool {
	stdin := stackPath == "-"
	for _, p := range paths {
		if p == "-" {
			if stdin {
				fmt.Fprintln(e.stderr, "dragonc: standard input can be read once: give the stack or one capture as -, not both")
				return false
			}
			stdin = true
			continue
		}
		if err := checkRegular(p, math.MaxInt64); err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return false
		}
	}
	return true
}

// fallbackWork makes the directory the generated code is built in when
// *fallback asks for it. Without the go command it turns *fallback off
// and says what is left out (skipped). The directory is "" when there is
// none; ok is false when it could not be made (said on stderr).
func fallbackWork(e *env, fallback *bool, skipped, prefix string) (dir string, ok bool) {
	if !*fallback {
		return "", true
	}
	if _, err := exec.LookPath("go"); err != nil {
		e.notef("the go command is not installed; %s", skipped)
		*fallback = false
		return "", true
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return "", false
	}
	return dir, true
}
