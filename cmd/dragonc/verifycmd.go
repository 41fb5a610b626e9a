package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/dragonc/dragonc/verify"
)

func init() {
	register(&command{name: "verify", summary: "prove on frames that the embedding preserves meaning", run: runVerify, usage: `Usage: dragonc verify [flags] NIC STACK.lpg

Embeds the stack, then runs frames through the configured NIC and each
queue's software (the software graph and the generated Go fallback, built
with the go command) and compares every outcome with the LPG run alone.
Frames come from --pcap captures and from a seeded generator aimed at
every endpoint, filter boundary and validity check.

Flags:
    --pcap FILE       a pcap or pcapng capture (repeatable)
    --packets N       generated frames (default 10000)
    --seed S          generator seed (default 1)
    --fallback        also run the generated Go code (default true)
    --show N          mismatches shown in full (default 5)
    --cost, --strategy, --previous   as for embed
    --json            the report as JSON

The last line is "N packets, M mismatches".
Exit: 0 no mismatch, 1 mismatches or errors, 2 usage.

Examples:
    dragonc verify 82599 examples/web_and_dns.lpg
    dragonc verify --pcap capture.pcap --packets 100000 82576 examples/dns_ntp.lpg
`})
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func runVerify(e *env, args []string) int {
	fs := newFlags(e, "verify", lookup("verify").usage)
	var f embedFlags
	f.register(fs)
	var pcaps multi
	fs.Var(&pcaps, "pcap", "capture file")
	packets := fs.Int("packets", 10000, "generated frames")
	seed := fs.Int64("seed", 1, "generator seed")
	fallback := fs.Bool("fallback", true, "run the generated Go fallback too")
	show := fs.Int("show", 5, "mismatches shown in full")
	if ok, code := parseFlags(fs, interleave(args)); !ok {
		return code
	}
	if fs.NArg() != 2 || *packets < 0 {
		fmt.Fprint(e.stderr, lookup("verify").usage)
		return exitUsage
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
	opt := verify.Options{Packets: *packets, Seed: *seed, Pcaps: pcaps, Fallback: *fallback, Show: *show}
	if opt.Fallback {
		if _, err := exec.LookPath("go"); err != nil {
			fmt.Fprintln(e.stderr, "dragonc: note: the go command is not installed; only the software graphs are verified, not the generated code")
			opt.Fallback = false
		}
	}
	if opt.Fallback {
		work, err := os.MkdirTemp("", "dragonc-verify")
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		defer os.RemoveAll(work)
		opt.Work = work
	}
	rep, err := verify.Run(r, st, opt)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if f.asJSON {
		out, _ := json.MarshalIndent(map[string]any{"packets": rep.Total, "mismatches": len(rep.Mismatches), "outcomes": rep.Outcomes, "notes": rep.Notes}, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		fmt.Fprintf(e.stdout, "%d packets, %d mismatches\n", rep.Total, len(rep.Mismatches))
	} else {
		rep.Write(e.stdout, *show)
	}
	if len(rep.Mismatches) > 0 {
		return exitInput
	}
	return exitOK
}
