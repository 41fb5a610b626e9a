// Package linux writes linux.sh: a POSIX shell script that applies a
// plan's hardware part on Linux with ethtool and /proc (queue count,
// offloads, RSS spreading, ntuple rules, interrupt affinity, and the
// per-queue RPS and XPS masks that keep the kernel's own processing of a
// queue on its core) and prints process-binding commands. The interface is the script's argument;
// --dry-run prints every command instead of running it. Every value that
// comes from a user file is single-quoted.
package linux

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// Quote makes any string one safe shell word.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// comment makes a string safe inside a shell comment (one line).
func comment(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return s
}

// visible shows control characters of a user string (an application
// name) as Go escapes, so that printing it cannot drive the terminal.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// step is one change linux.sh makes: the commands, how it checks the
// result by reading the interface back, and what restores the old state.
type step struct {
	Step   // what dragonc run needs to know of it
	desc   string
	before []string // shell lines run first (recording the old state)
	run    []string // the change; each line a command
	check  string   // a shell condition that holds when the change took
	undo   string   // a shell line (may use variables set in before)
	why    string   // what a failed check means
	// A step of a table is not a function of its own: it is one row
	// (args) of a table that one loop feeds to the shell function fn,
	// which begins, applies, checks and records it (see tables).
	table *table
	args  []string
}

// A table is a shell function that applies, checks and records one step
// from a row of words, so that steps of one kind are data (one row each)
// and one loop, not a function each.
type table struct {
	name   string // the shell function
	fields string // the names of a row's words after the step number; the last takes the rest of the line
	doc    string // what the rows are, for the comment above the loop
	fn     string // the function's definition
}

// row checks that a table row is words the loop reads back as written:
// no quoting, no spaces but in the last word, nothing a here-document
// would end on. Rows are made here, never from a user's string.
func (t *table) row(args ...string) []string {
	if len(args) != len(strings.Fields(t.fields)) {
		panic(fmt.Sprintf("dragonc: internal error: %s row %q has %d words, want %d", t.name, args, len(args), len(strings.Fields(t.fields))))
	}
	for i, a := range args {
		ok := a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.,:/-", r) || r == ' ' && i == len(args)-1)
		}) < 0
		if !ok {
			panic(fmt.Sprintf("dragonc: internal error: %s row word %q is not a plain word", t.name, a))
		}
	}
	return args
}

// tablesOf lists the tables the steps use, in order.
func tablesOf(steps []step) []*table {
	var out []*table
	for _, st := range steps {
		if st.table != nil && !slices.Contains(out, st.table) {
			out = append(out, st.table)
		}
	}
	return out
}

// A Step is one change linux.sh makes, as dragonc run needs to know it
// to take over what a driver refuses: linux.sh --keep-going prints
// "refused N: why" for the N-th step of Steps.
type Step struct {
	Desc    string // what the step does, as the script says it
	Kind    string // one of the Step* kinds
	Feature string // StepFeature: the ethtool -K feature (rx, tx, ntuple)
	Node    string // StepRule: the table the rule is an entry of
	Entry   plan.Entry
	Queue   int // StepIRQ, StepRPS, StepXPS: the queue
	Core    int // StepRPS, StepXPS: the core the queue's mask names
}

// Kinds of steps.
const (
	StepChannels = "channels" // the queue count
	StepFeature  = "feature"  // an ethtool -K feature
	StepRSS      = "rss"      // the indirection table
	StepRSSPorts = "rss-ports"
	StepRule     = "rule" // one ntuple rule
	StepIRQ      = "irq"  // one interrupt's affinity
	StepRPS      = "rps"  // one receive queue's rps_cpus
	StepXPS      = "xps"  // one transmit queue's xps_cpus
)

// Steps lists the changes of linux.sh for a plan, in the script's order.
func Steps(r *embed.Result) []Step {
	if r.SoftwareStage() {
		return nil
	}
	steps, _, _ := stepsOf(r)
	out := make([]Step, len(steps))
	for i, st := range steps {
		out[i] = st.Step
		out[i].Desc = st.desc
	}
	return out
}

// Script renders linux.sh for a plan. source names the stack file.
func Script(r *embed.Result, source string) string {
	pl := r.Plan
	if r.SoftwareStage() {
		return stageScript(pl, source)
	}
	d := r.Driver()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	steps, rules, unsupported := stepsOf(r)
	nq := queueCount(pl)

	w("#!/bin/sh\n")
	w("# Code generated by dragonc from %s. DO NOT EDIT.\n", comment(source))
	w("# Values from the stack file are single-quoted on purpose, so that\n# nothing in them expands:\n# shellcheck disable=SC2016\n")
	if d != nil {
		w("# Applies the hardware part of plan.json for stack %s on NIC %s\n# through the Linux driver %s, using only what that driver exposes.\n", comment(pl.Stack), comment(pl.NIC), comment(d.Name))
	} else {
		w("# Applies the hardware part of plan.json for stack %s on NIC %s.\n", comment(pl.Stack), comment(pl.NIC))
		w("# The plan was made for the whole silicon (--target silicon): a Linux\n# driver may refuse some of it, so the script runs only with --force.\n")
	}
	w("#\n# Every step is read back from the interface after it runs (ethtool's exit\n")
	w("# status is not trusted: it reports success for refused rules). A failed\n")
	w("# step is named, everything this run applied is undone in reverse order,\n")
	w("# and the script exits 1. What a run applied is recorded so that\n# --undo restores the previous settings.\n\n")
	w("set -u\n\n")
	w("usage() {\n    cat <<'EOF'\n")
	w("usage: linux.sh [--dry-run] [--force] [--keep-going] INTERFACE\n")
	w("       linux.sh --undo INTERFACE\n\n")
	w("  --dry-run  print every command, quoted, as it would run; change nothing\n")
	w("  --force    go on when the interface's driver is not the plan's\n")
	w("  --keep-going\n             apply what the interface takes; print \"refused N: why\" for each\n             step it refuses and go on (dragonc run does the rest in software)\n")
	w("  --undo     restore what the last run on INTERFACE changed\n")
	w("  -h, --help print this help\n\n")
	w("The record of a run is kept in $DRAGONC_STATE (default /var/tmp/dragonc-linux-INTERFACE.undo).\n")
	w("EOF\n}\n\n")
	w("dry=0\nforce=0\nundo=0\nkeep=0\nrefused=0\nskipped=0\ntotal=%d\n", len(steps))
	w("while [ \"$#\" -gt 0 ]; do\n    case \"$1\" in\n")
	w("    --dry-run) dry=1 ;;\n    --force) force=1 ;;\n    --keep-going) keep=1 ;;\n    --undo) undo=1 ;;\n    -h|--help) usage; exit 0 ;;\n")
	w("    --) shift; break ;;\n    -*) echo \"linux.sh: unknown option $1\" >&2; usage >&2; exit 2 ;;\n    *) break ;;\n    esac\n    shift\ndone\n")
	w("if [ \"$#\" -ne 1 ]; then\n    usage >&2\n    exit 2\nfi\n")
	w("ifc=$1\n")
	w("case \"$ifc\" in\n'' | . | .. | */* | *' '*) echo \"linux.sh: $ifc is not an interface name\" >&2; exit 2 ;;\nesac\n")
	w("state=${DRAGONC_STATE:-/var/tmp/dragonc-linux-$ifc.undo}\n")
	w("proc=${DRAGONC_PROC:-/proc}\nsys=${DRAGONC_SYS:-/sys}\n\n")

	w("# q quotes a value as one shell word.\n")
	w("q() {\n    case \"$1\" in\n    '' | *[!A-Za-z0-9_./:=,@%%+-]*) printf \"'%%s'\" \"$(printf '%%s' \"$1\" | sed \"s/'/'\\\\\\\\''/g\")\" ;;\n    *) printf '%%s' \"$1\" ;;\n    esac\n}\n\n")
	w("# run prints a command under --dry-run, else runs it with its errors kept.\n")
	w("run() {\n    if [ \"$dry\" = 1 ]; then\n        line=''\n        for a in \"$@\"; do line=\"$line${line:+ }$(q \"$a\")\"; done\n        printf '%%s\\n' \"$line\"\n        return 0\n    fi\n")
	w("    \"$@\" 2>\"$state.err\" >/dev/null\n    rc=$?\n    if grep -q 'Operation not supported' \"$state.err\" 2>/dev/null; then\n        reason='the interface has no such feature (Operation not supported)'\n    elif [ -s \"$state.err\" ]; then\n        reason=$(head -n 1 \"$state.err\")\n    fi\n    return \"$rc\"\n}\n\n")
	w("# record appends a command that reverts a step to the run's record.\n")
	w("record() {\n    [ \"$dry\" = 1 ] || printf '%%s\\n' \"$1\" >>\"$state\"\n}\n\n")
	w("# revert runs a record backwards and removes it.\n")
	w("revert() {\n    [ -f \"$state\" ] || return 0\n    awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }' \"$state\" >\"$state.rev\"\n")
	w("    while IFS= read -r line; do\n        printf 'linux.sh: undo: %%s\\n' \"$line\" >&2\n        sh -c \"$line\" >/dev/null 2>&1 || echo \"linux.sh: undo failed: $line\" >&2\n    done <\"$state.rev\"\n    rm -f \"$state\" \"$state.rev\" \"$state.err\"\n}\n\n")
	w("# fail names the failed step, undoes this run and exits 1; with\n# --keep-going it reports the step as refused and the step returns.\n")
	w("fail() {\n    if [ \"$keep\" = 1 ]; then\n        refused=$((refused + 1))\n        printf 'refused %%s: %%s\\n' \"$num\" \"$1\"\n        echo \"linux.sh: step $cur refused: $1\" >&2\n        return 0\n    fi\n")
	w("    echo \"linux.sh: step $cur failed: $1\" >&2\n    if [ \"$dry\" = 0 ]; then\n        echo \"linux.sh: undoing what this run applied\" >&2\n        revert\n    fi\n    exit 1\n}\n\n")
	w("# skip ends a step this kernel has nothing to set for (it was built\n# without the setting): a note, not a failure.\n")
	w("skip() {\n    skipped=$((skipped + 1))\n    [ \"$keep\" = 1 ] && printf 'skipped %%s: %%s\\n' \"$num\" \"$1\"\n    echo \"linux.sh: step $cur skipped: $1\" >&2\n    return 0\n}\n\n")
	w("# begin starts step number $1, which does $2.\n")
	w("begin() {\n    num=$1\n    cur=\"$1/$total: $2\"\n    reason=''\n    [ \"$dry\" = 1 ] && printf '# step %%s\\n' \"$cur\"\n    return 0\n}\n\n")
	w("# Read-back helpers.\n")
	w("channels() {\n    ethtool -l \"$ifc\" 2>/dev/null | awk '/^Current hardware settings/ { c = 1 } c && /^Combined:/ { print $2; exit }'\n}\n")
	w("feature() {\n    ethtool -k \"$ifc\" 2>/dev/null | awk -v f=\"$1:\" '$1 == f { print $2; exit }'\n}\n")
	w("rss_queues() {\n    ethtool -x \"$ifc\" 2>/dev/null | awk '/^ *[0-9]+: / { for (i = 2; i <= NF; i++) print $i }' | sort -n -u | tr '\\n' ' '\n}\n")
	w("flow_hash_ports() {\n    out=$(ethtool -n \"$ifc\" rx-flow-hash \"$1\" 2>/dev/null)\n    case \"$out\" in *'L4 bytes 0 & 1'*'L4 bytes 2 & 3'*) return 0 ;; esac\n    return 1\n}\n")
	w("rule_action() {\n    ethtool -n \"$ifc\" rule \"$1\" 2>/dev/null | sed -n 's/^[[:space:]]*Action: //p'\n}\n")
	w("rx_queues() {\n    n=0\n    for d in \"$sys/class/net/$ifc/queues\"/rx-*; do\n        [ -e \"$d\" ] && n=$((n + 1))\n    done\n    echo \"$n\"\n}\n")
	w("# norm writes a CPU mask as hex without commas and leading zeros (the\n# kernel reads it back zero-padded to its CPU count, a comma every 32 bits).\n")
	w("norm() {\n    sed 's/,//g; s/^0*//; s/^$/0/'\n}\n")
	w("%s\n", irqOf(d, nq))
	for _, t := range tablesOf(steps) {
		w("%s\n", t.fn)
	}

	w("if [ \"$undo\" = 1 ]; then\n    if [ ! -f \"$state\" ]; then\n        echo \"linux.sh: nothing to undo for $ifc ($state does not exist)\" >&2\n        exit 1\n    fi\n    revert\n    echo \"linux.sh: restored the settings recorded for $ifc\"\n    exit 0\nfi\n\n")

	w("if [ \"$dry\" = 0 ]; then\n")
	w("    if ! command -v ethtool >/dev/null 2>&1; then\n        echo 'linux.sh: ethtool is not installed' >&2\n        exit 1\n    fi\n")
	w("    if [ -f \"$state\" ]; then\n        echo \"linux.sh: $state records an earlier run; run linux.sh --undo $ifc first\" >&2\n        exit 1\n    fi\n")
	if d != nil {
		w("    drv=$(ethtool -i \"$ifc\" 2>/dev/null | awk '/^driver:/ { print $2 }')\n")
		w("    if [ \"$drv\" != %s ] && [ \"$force\" = 0 ]; then\n        echo \"linux.sh: $ifc is driven by '${drv:-nothing}', this plan is for %s (use --force to apply it anyway)\" >&2\n        exit 1\n    fi\n", Quote(d.Name), comment(d.Name))
	} else {
		w("    if [ \"$force\" = 0 ]; then\n        echo 'linux.sh: this plan was made for the silicon, not for a Linux driver (embed --target linux); use --force to try it' >&2\n        exit 1\n    fi\n")
	}
	w("    if grep -qx irqbalance \"$proc\"/[0-9]*/comm 2>/dev/null; then\n        echo 'linux.sh: warning: irqbalance is running and will move the interrupts this script binds' >&2\n    fi\n")
	w("    : >\"$state\" || exit 1\nfi\n\n")

	// Each step is a function, so that a refused step (--keep-going)
	// returns before its check and its record; a step of a table is a
	// row that one loop feeds to the table's function.
	for i := 0; i < len(steps); i++ {
		st := steps[i]
		if t := st.table; t != nil {
			w("# %s: one row a step.\n", t.doc)
			w("while read -r step %s <&3; do\n    %s \"$step\"", t.fields, t.name)
			for _, f := range strings.Fields(t.fields) {
				w(" \"$%s\"", f)
			}
			w("\ndone 3<<'EOF'\n")
			for ; i < len(steps) && steps[i].table == t; i++ {
				w("%d %s\n", i+1, strings.Join(steps[i].args, " "))
			}
			w("EOF\n\n")
			i--
			continue
		}
		w("# %s\n", comment(st.desc))
		w("step_%d() {\n", i+1)
		w("    begin %d %s\n", i+1, Quote(st.desc))
		if len(st.before) > 0 {
			w("    if [ \"$dry\" = 0 ]; then\n")
			for _, l := range st.before {
				w("        %s\n", l)
			}
			w("    fi\n")
		}
		for _, l := range st.run {
			w("    %s || { fail \"${reason:-the command failed}\"; return; }\n", l)
		}
		if st.check != "" {
			w("    if [ \"$dry\" = 0 ] && ! { %s; }; then\n        fail %s\n        return\n    fi\n", st.check, Quote(st.why))
		}
		if st.undo != "" {
			w("    [ \"$dry\" = 1 ] || record %s\n", st.undo)
		}
		w("}\nstep_%d\n\n", i+1)
	}
	if len(rules) > 0 {
		w("# Filters written: %d (ethtool -n \"$ifc\" lists them).\n", len(rules))
	}
	for _, u := range unsupported {
		w("# Not applied, the plan needs it from the silicon: %s\n", comment(u))
	}
	if len(unsupported) > 0 {
		w("echo %s >&2\n\n", Quote(fmt.Sprintf("linux.sh: warning: %d filter entries cannot be expressed with ethtool; see the comments in this script", len(unsupported))))
	}

	w("# Process binding: run each process where its queue is served.\n")
	for _, b := range bindings(pl) {
		w("printf 'bind %%s to cores %%s (taskset -acp %%s PID)\\n' %s %s %s\n", Quote(visible(b.who)), Quote(b.cores), Quote(b.cores))
	}
	w("if [ \"$dry\" = 0 ]; then\n    rm -f \"$state.err\"\n    echo \"linux.sh: applied $((total - refused - skipped)) of $total steps to $ifc ($skipped skipped: not in this kernel); linux.sh --undo $ifc restores the previous settings\"\nfi\n")
	return b.String()
}

// stepsOf works out the steps of linux.sh: queue count, offloads, RSS,
// filters and interrupt affinity, only as far as the driver exposes them.
func stepsOf(r *embed.Result) (steps []step, rules []string, unsupported []string) {
	pl := r.Plan
	d := r.Driver()
	nq := queueCount(pl)
	channels := "ethtool -L"
	if d != nil && d.Channels != "" {
		channels = d.Channels
	}
	switch {
	case channels == "ethtool -L":
		steps = append(steps, step{
			Step:   Step{Kind: StepChannels},
			desc:   fmt.Sprintf("%d combined channels (ethtool -L)", nq),
			before: []string{"old_channels=$(channels)"},
			run:    []string{fmt.Sprintf("run ethtool -L \"$ifc\" combined %s", Quote(fmt.Sprint(nq)))},
			check:  fmt.Sprintf("[ \"$(channels)\" = %s ]", Quote(fmt.Sprint(nq))),
			undo:   "\"ethtool -L $(q \"$ifc\") combined $(q \"${old_channels:-1}\")\"",
			why:    fmt.Sprintf("the interface does not report %d combined channels (ethtool -l)", nq),
		})
	case strings.HasPrefix(channels, "module "):
		// The driver takes its queue count from a module parameter when it
		// loads (myri10ge: myri10ge_max_slices, read-only): the script
		// can only check the count in use, which the kernel lists as
		// /sys/class/net/IF/queues/rx-N (netif_set_real_num_rx_queues).
		param := strings.TrimPrefix(channels, "module ")
		mod := d.Name
		why := fmt.Sprintf("the interface runs another number of receive queues than the plan's %d (/sys/class/net/IF/queues); %s takes it from the module parameter %s when it loads: modprobe -r %s && modprobe %s %s=%d", nq, mod, param, mod, mod, param, nq)
		if mod == "myri10ge" && nq&(nq-1) != 0 {
			why += fmt.Sprintf(" (myri10ge rounds the count down to a power of two, myri10ge_probe_slices: it cannot run %d slices)", nq)
		}
		steps = append(steps, step{
			Step:  Step{Kind: StepChannels},
			desc:  fmt.Sprintf("%d receive queues (module parameter %s)", nq, param),
			check: fmt.Sprintf("[ \"$(rx_queues)\" = %s ]", Quote(fmt.Sprint(nq))),
			why:   why,
		})
	}

	m := r.Model()
	// identity: whether a hash is the Open-MX endpoint hash rather than
	// RSS, which ethtool -X sets.
	identity := func(node string) bool {
		sp := m.Space(node)
		return sp != nil && sp.Identity
	}
	rxcsum, txcsum := false, false
	var ruleOf []struct {
		node  string
		entry plan.Entry
	}
	var rss []string
	rssNode := ""
	for _, c := range pl.Config {
		switch {
		case c.Kind == "enum" && m.Feature(c.Node) == prg.FeatureRxChecksum:
			rxcsum = c.Choice == "on"
		case c.Kind == "enum" && m.Feature(c.Node) == prg.FeatureTxChecksum:
			txcsum = c.Choice == "on"
		case c.Kind == "table" && len(c.Entries) > 0:
			if d != nil {
				if _, ok := d.Tables[c.Node]; !ok {
					for _, e := range c.Entries {
						unsupported = append(unsupported, fmt.Sprintf("%s: %s -> %s", c.Node, e.Match, e.Action))
					}
					continue
				}
			}
			for _, e := range c.Entries {
				rule, ok := ntupleRule(e, r)
				if !ok {
					unsupported = append(unsupported, fmt.Sprintf("%s: %s -> %s", c.Node, e.Match, e.Action))
					continue
				}
				rules = append(rules, rule)
				ruleOf = append(ruleOf, struct {
					node  string
					entry plan.Entry
				}{c.Node, e})
			}
		case c.Kind == "hash" && len(c.Indirection) > 0 && (d == nil && !identity(c.Node) || d != nil && d.RSS != nil && d.RSS.Node == c.Node):
			rss, rssNode = c.Indirection, c.Node
		}
	}
	feature := func(name, ethtoolName string, on bool) {
		v := onOff(on)
		steps = append(steps, step{
			Step:   Step{Kind: StepFeature, Feature: ethtoolName},
			desc:   fmt.Sprintf("%s %s (ethtool -K)", ethtoolName, v),
			before: []string{fmt.Sprintf("old_%s=$(feature %s)", strings.ReplaceAll(ethtoolName, "-", "_"), name)},
			run:    []string{fmt.Sprintf("run ethtool -K \"$ifc\" %s %s", ethtoolName, v)},
			check:  fmt.Sprintf("[ \"$(feature %s)\" = %s ]", name, v),
			undo:   fmt.Sprintf("\"ethtool -K $(q \"$ifc\") %s $(q \"${old_%s:-%s}\")\"", ethtoolName, strings.ReplaceAll(ethtoolName, "-", "_"), onOff(!on)),
			why:    fmt.Sprintf("%s is not %s afterwards (ethtool -k); the driver cannot change it", name, v),
		})
	}
	if d == nil || hasEnum(d, "rx") {
		feature("rx-checksumming", "rx", rxcsum)
	}
	if d == nil || hasEnum(d, "tx") {
		feature("tx-checksumming", "tx", txcsum)
	}
	if len(rules) > 0 {
		feature("ntuple-filters", "ntuple", true)
	}
	if len(rss) > 0 && (d == nil || d.RSS == nil || d.RSS.SetTable) {
		weights := make([]int, nq)
		for _, target := range rss {
			if q := queueOf(r, target); q >= 0 && q < len(weights) {
				weights[q]++
			}
		}
		var ws, want []string
		for q, x := range weights {
			ws = append(ws, Quote(fmt.Sprint(x)))
			if x > 0 {
				want = append(want, fmt.Sprint(q))
			}
		}
		steps = append(steps, step{
			Step:  Step{Kind: StepRSS, Node: rssNode},
			desc:  fmt.Sprintf("RSS over queues %s (ethtool -X, %s)", strings.Join(want, " "), rssNode),
			run:   []string{"run ethtool -X \"$ifc\" weight " + strings.Join(ws, " ")},
			check: fmt.Sprintf("[ \"$(rss_queues)\" = %s ]", Quote(strings.Join(want, " ")+" ")),
			undo:  "\"ethtool -X $(q \"$ifc\") default\"",
			why:   "the indirection table (ethtool -x) does not name exactly the planned queues",
		})
	}
	if len(rss) > 0 && d != nil && d.RSS != nil && d.RSS.Param != "" {
		// The hash is a module parameter (myri10ge_rss_hash, read-only
		// once loaded; sysfs shows it): check it is the one the model
		// describes.
		file := fmt.Sprintf("$sys/module/%s/parameters/%s", d.Name, d.RSS.Param)
		steps = append(steps, step{
			Step:  Step{Kind: StepRSSPorts, Node: rssNode},
			desc:  fmt.Sprintf("the NIC hashes as the model says (module parameter %s = %s)", d.RSS.Param, d.RSS.ParamValue),
			check: fmt.Sprintf("[ \"$(cat \"%s\" 2>/dev/null)\" = %s ]", file, Quote(d.RSS.ParamValue)),
			why:   fmt.Sprintf("the driver was loaded with another %s than %s (/sys/module/%s/parameters/%s), so the NIC does not hash as planned; reload it: modprobe -r %s && modprobe %s %s=%s", d.RSS.Param, d.RSS.ParamValue, d.Name, d.RSS.Param, d.Name, d.Name, d.RSS.Param, d.RSS.ParamValue),
		})
	}
	if len(rss) > 0 && (d == nil || d.RSS != nil && d.RSS.UDPPorts) {
		steps = append(steps, step{
			Step:   Step{Kind: StepRSSPorts, Node: rssNode},
			desc:   "hash UDP ports as TCP's (ethtool -N rx-flow-hash udp4 sdfn)",
			before: []string{"if flow_hash_ports udp4; then old_udp=sdfn; else old_udp=sd; fi"},
			run:    []string{"run ethtool -N \"$ifc\" rx-flow-hash udp4 sdfn"},
			check:  "flow_hash_ports udp4",
			undo:   "\"ethtool -N $(q \"$ifc\") rx-flow-hash udp4 $old_udp\"",
			why:    "UDP over IPv4 is not hashed on its ports afterwards (ethtool -n rx-flow-hash udp4)",
		})
	}
	for i, rule := range rules {
		loc := Quote(fmt.Sprint(i))
		action := "Drop"
		if k := strings.LastIndex(rule, " action "); k >= 0 {
			if q := strings.Trim(rule[k+len(" action "):], "'"); q != "-1" {
				action = "Direct to queue " + q
			}
		}
		steps = append(steps, step{
			Step: Step{Kind: StepRule, Node: ruleOf[i].node, Entry: ruleOf[i].entry},
			desc: fmt.Sprintf("filter rule %d (ethtool -N %s)", i, rule),
			before: []string{
				fmt.Sprintf("if [ -n \"$(rule_action %s)\" ] && [ \"$force\" = 0 ]; then fail 'rule location %d holds a rule this script did not write (ethtool -n); delete it or use --force'; return; fi", loc, i),
			},
			run:   []string{fmt.Sprintf("run ethtool -N \"$ifc\" %s loc %s", rule, loc)},
			check: fmt.Sprintf("[ \"$(rule_action %s)\" = %s ]", loc, Quote(action)),
			undo:  fmt.Sprintf("\"ethtool -N $(q \"$ifc\") delete %s\"", loc),
			why:   fmt.Sprintf("rule %d is not in the NIC's table afterwards (ethtool -n rule %d): the driver refused it", i, i),
		})
	}
	for _, q := range pl.Queues {
		core := Quote(fmt.Sprint(q.Core))
		steps = append(steps, step{
			Step: Step{Kind: StepIRQ, Queue: q.ID},
			desc: fmt.Sprintf("interrupt of queue %d on core %d", q.ID, q.Core),
			before: []string{
				fmt.Sprintf("irq=$(irq_of %s)", Quote(fmt.Sprint(q.ID))),
				fmt.Sprintf("[ -n \"$irq\" ] || { fail \"%s\"; return; }", noIRQ(d, nq, q.ID)),
				"old_affinity=$(cat \"$proc/irq/$irq/smp_affinity_list\")",
			},
			run:   []string{fmt.Sprintf("if [ \"$dry\" = 1 ]; then echo \"echo %s > /proc/irq/IRQ/smp_affinity_list\"; else printf '%%s\\n' %s >\"$proc/irq/$irq/smp_affinity_list\"; fi", strings.Trim(core, "'"), core)},
			check: fmt.Sprintf("[ \"$(cat \"$proc/irq/$irq/smp_affinity_list\")\" = %s ]", core),
			undo:  "\"printf '%s\\\\n' $(q \"$old_affinity\") >$(q \"$proc/irq/$irq/smp_affinity_list\")\"",
			why:   fmt.Sprintf("the interrupt is not on core %d afterwards", q.Core),
		})
	}
	for _, q := range pl.Queues {
		for _, m := range queueMasks {
			steps = append(steps, m.step(q.ID, q.Core))
		}
	}
	return steps, rules, unsupported
}

// A queueMask is a CPU mask the kernel keeps for each queue of an
// interface in /sys/class/net/IF/queues/DIR-N/FILE
// (Documentation/networking/scaling.rst). linux.sh sets it, for each
// queue of the plan, to the queue's planned core alone, so that the
// kernel's own processing of the queue's packets (what an ordinary
// program on a kernel socket gets) happens on that core even where the
// interrupt lands elsewhere (irqbalance, a refused affinity), and is
// restored by --undo. dragonc run applies the same steps, as it runs
// linux.sh.
type queueMask struct {
	kind   string // StepRPS or StepXPS
	dir    string // rx or tx
	file   string
	config string // the kernel option without which the file is absent
	what   string
}

// queueMasks are the masks linux.sh sets, in order.
var queueMasks = []queueMask{
	// RPS (scaling.rst, "RPS Configuration"): after the interrupt, the
	// packets of receive queue N go to the backlog of a CPU of rps_cpus
	// (get_rps_cpu), where the IP and transport layers run and the socket
	// is woken. With the planned core alone the protocol work stays
	// there; when the interrupt is on that core too, RPS costs one pass
	// through that core's backlog. net/core/net-sysfs.c, store_rps_map:
	// bitmap_parse reads hex with a comma every 32 bits, and a mask of
	// only isolated CPUs is EINVAL (rps_cpumask_housekeeping).
	{StepRPS, "rx", "rps_cpus", "CONFIG_RPS", "receive packet steering"},
	// XPS (scaling.rst, "XPS Configuration"): a CPU in xps_cpus of
	// transmit queue N sends on queue N (netdev_pick_tx through
	// get_xps_queue), so the queue's core answers on its own queue and
	// takes no other core's transmit lock. xps_cpus_store parses the same
	// format; xps_cpus_show and xps_cpus_store answer ENOENT on a device
	// with one transmit queue (netif_is_multiqueue).
	{StepXPS, "tx", "xps_cpus", "CONFIG_XPS", "transmit packet steering"},
}

// queueMaskTable applies one queueMask row.
var queueMaskTable = &table{
	name:   "queue_mask",
	fields: "kind queue file mask core config what",
	doc:    "Each queue's RPS and XPS masks name its planned core (queue_mask)",
	fn: `# queue_mask sets one queue's CPU mask: step number, queue kind (rx or
# tx), queue, file, mask, core, the kernel option the file comes with, and
# what the mask does.
queue_mask() {
    f="$sys/class/net/$ifc/queues/$2-$3/$4"
    begin "$1" "$8 of queue $3 on core $6 ($2-$3/$4)"
    if [ "$dry" = 1 ]; then
        printf 'echo %s > %s\n' "$5" "$(q "$f")"
        return 0
    fi
    # sysfs shows the interfaces of the network namespace that mounted it.
    [ -d "$sys/class/net/$ifc" ] || { fail "$sys/class/net/$ifc does not exist: this sysfs belongs to another network namespace (ip netns exec mounts the namespace's own)"; return; }
    [ -d "${f%/*}" ] || { fail "$ifc has no queue $2-$3 ($sys/class/net/$ifc/queues)"; return; }
    [ -e "$f" ] || { skip "the kernel has no $4 (it was built without $7)"; return; }
    old_mask=$(cat "$f" 2>/dev/null) || { skip "$4 of $2-$3 cannot be read (the kernel has it only on a device with several transmit queues)"; return; }
    { printf '%s\n' "$5" >"$f"; } 2>/dev/null || { fail "the kernel refused mask $5 in $2-$3/$4: core $6 is not one of this machine's, or is isolated from the kernel's work (isolcpus, nohz_full)"; return; }
    if [ "$(norm <"$f")" != "$(printf '%s\n' "$5" | norm)" ]; then
        fail "$2-$3/$4 reads $(cat "$f") afterwards, not core $6's mask $5 (is core $6 online?)"
        return
    fi
    record "printf '%s\\n' $(q "$old_mask") >$(q "$f")"
}
`,
}

// step is the step that sets the mask of queue q to core.
func (m queueMask) step(q, core int) step {
	return step{
		Step:  Step{Kind: m.kind, Queue: q, Core: core},
		desc:  fmt.Sprintf("%s of queue %d on core %d (%s-%d/%s)", m.what, q, core, m.dir, q, m.file),
		table: queueMaskTable,
		args:  queueMaskTable.row(m.dir, fmt.Sprint(q), m.file, CPUMask(core), fmt.Sprint(core), m.config, m.what),
	}
}

// CPUMask is the mask of one core as the kernel's bitmap_parse reads a
// cpumask from sysfs: hex, with a comma between 32-bit groups (core 1 is
// 2, core 35 is 8,00000000).
func CPUMask(core int) string {
	groups := []string{fmt.Sprintf("%x", uint32(1)<<(core%32))}
	for range core / 32 {
		groups = append(groups, "00000000")
	}
	return strings.Join(groups, ",")
}

// binding is one process-binding line of linux.sh.
type binding struct {
	who   string // the process: an application, or one endpoint's process
	cores string // comma-separated cores
}

// bindings says where each process should run: on the cores whose
// queues serve it. An application whose endpoints each declare a core of
// their own (core N in the stack file: one process per endpoint, as the
// ranks of an MPI job) gets one line per endpoint, so that each process
// runs near its own receive queue, as the Open-MX paper binds each
// endpoint's process (Goglin, section 3.2); a process whose queue serves
// others of them too stays on its declared core. Any other application
// gets one line for all its endpoints.
func bindings(pl *plan.Plan) []binding {
	byApp := map[string][]plan.Endpoint{}
	for _, e := range pl.Endpoints {
		if e.App != "" && len(e.IRQCores) > 0 {
			byApp[e.App] = append(byApp[e.App], e)
		}
	}
	names := make([]string, 0, len(byApp))
	for a := range byApp {
		names = append(names, a)
	}
	sort.Strings(names)
	join := func(cores []int) string {
		cores = slices.Clone(cores)
		sort.Ints(cores)
		cores = slices.Compact(cores)
		cs := make([]string, len(cores))
		for i, c := range cores {
			cs[i] = fmt.Sprint(c)
		}
		return strings.Join(cs, ",")
	}
	var out []binding
	for _, a := range names {
		eps := byApp[a]
		perProcess := len(eps) > 1
		seen := map[int]bool{}
		for _, e := range eps {
			if len(e.AppCores) != 1 || seen[e.AppCores[0]] {
				perProcess = false
				break
			}
			seen[e.AppCores[0]] = true
		}
		if perProcess {
			// A queue that serves several of these processes would pile
			// them on one core, which the paper rules out (an overloaded
			// core, section 2.3): such a process keeps its own core.
			served := map[int]int{}
			for _, e := range eps {
				for _, c := range slices.Compact(slices.Sorted(slices.Values(e.IRQCores))) {
					served[c]++
				}
			}
			for _, e := range eps {
				cores := e.IRQCores
				for _, c := range e.IRQCores {
					if served[c] > 1 {
						cores = e.AppCores
						break
					}
				}
				out = append(out, binding{who: fmt.Sprintf("%s (the process of endpoint %s)", a, e.Name), cores: join(cores)})
			}
			continue
		}
		var all []int
		for _, e := range eps {
			all = append(all, e.IRQCores...)
		}
		out = append(out, binding{who: a, cores: join(all)})
	}
	return out
}

// queueCount is the number of receive queues a plan uses: one more than
// the highest queue it names, at least one.
func queueCount(pl *plan.Plan) int {
	nq := 0
	for _, q := range pl.Queues {
		nq = max(nq, q.ID+1)
	}
	return max(nq, 1)
}

// irqNaming is how linux.sh finds a queue's interrupt: by the names the
// driver gives its per-queue interrupts, or, when the driver requests
// one interrupt for the device, by the device's IRQ number and that
// interrupt's name.
type irqNaming struct {
	perQueue []string // patterns: IF the interface, N the queue
	single   string   // the one interrupt's name (IF: the interface's)
}

// naming is the driver's interrupt naming for a plan with nq queues.
func naming(d *prg.Driver, nq int) irqNaming {
	if d == nil {
		return irqNaming{perQueue: []string{"IF-TxRx-N", "IF-rx-N"}}
	}
	if d.IRQSingle != "" && (nq == 1 || len(d.IRQNames) == 0) {
		return irqNaming{single: d.IRQSingle}
	}
	if len(d.IRQNames) == 0 {
		return irqNaming{perQueue: []string{"IF-TxRx-N", "IF-rx-N"}}
	}
	return irqNaming{perQueue: d.IRQNames}
}

// awkName renders a name pattern as an awk string expression over the
// variables ifc and q.
func awkName(pattern string) string {
	var parts []string
	lit := ""
	flush := func() {
		if lit != "" {
			parts = append(parts, strconv.Quote(lit))
			lit = ""
		}
	}
	for i := 0; i < len(pattern); i++ {
		switch {
		case strings.HasPrefix(pattern[i:], "IF"):
			flush()
			parts = append(parts, "ifc")
			i++
		case pattern[i] == 'N':
			flush()
			parts = append(parts, "q")
		default:
			lit += pattern[i : i+1]
		}
	}
	flush()
	return strings.Join(parts, " ")
}

// shellName renders a name pattern for a message inside double quotes,
// for queue q.
func shellName(pattern string, q int) string {
	return strings.NewReplacer("IF", "$ifc", "N", fmt.Sprint(q)).Replace(pattern)
}

// irqOf is the shell function irq_of QUEUE: the IRQ number of the queue's
// interrupt, read from /proc/interrupts (the action names follow the
// per-CPU counts and the chip fields; a shared line lists them with
// commas).
func irqOf(d *prg.Driver, nq int) string {
	n := naming(d, nq)
	const scan = `NR == 1 { ncpu = NF; next } %s{ for (i = ncpu + 2; i <= NF; i++) { f = $i; sub(/,$/, "", f); if (%s) { sub(":", "", $1); print $1; exit } } }`
	if n.single != "" {
		name := `"$ifc"`
		if n.single != "IF" {
			name = Quote(n.single)
		}
		return "# The driver requests one interrupt for the device: the PCI device's\n" +
			"# IRQ, named " + comment(n.single) + " in /proc/interrupts.\n" +
			"irq_of() {\n    dev_irq=$(cat \"$sys/class/net/$ifc/device/irq\" 2>/dev/null)\n" +
			"    [ -n \"$dev_irq\" ] || return 0\n" +
			"    awk -v irq=\"$dev_irq\" -v name=" + name + " '" + fmt.Sprintf(scan, `$1 == irq ":" `, "f == name") + "' \"$proc/interrupts\"\n}\n"
	}
	var conds []string
	for _, p := range n.perQueue {
		conds = append(conds, "f == "+awkName(p))
	}
	return "irq_of() {\n    awk -v ifc=\"$ifc\" -v q=\"$1\" '" + fmt.Sprintf(scan, "", strings.Join(conds, " || ")) + "' \"$proc/interrupts\"\n}\n"
}

// noIRQ says, inside double quotes, which interrupt of queue q was not
// found.
func noIRQ(d *prg.Driver, nq, q int) string {
	n := naming(d, nq)
	if n.single != "" {
		return fmt.Sprintf("no interrupt named %s at the IRQ of $ifc ($sys/class/net/$ifc/device/irq) in $proc/interrupts", shellName(n.single, q))
	}
	var names []string
	for _, p := range n.perQueue {
		names = append(names, shellName(p, q))
	}
	return fmt.Sprintf("no interrupt named %s in $proc/interrupts", strings.Join(names, " or "))
}

func hasEnum(d *prg.Driver, feature string) bool {
	for _, f := range d.Enums {
		if f == feature {
			return true
		}
	}
	return false
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// queueOf maps a queue node name to its number.
func queueOf(r *embed.Result, node string) int {
	return r.Embedding.Model.QueueIndex(node)
}

// ntupleRule renders a table entry as ethtool -N arguments, when ethtool
// can express it (IPv4 TCP/UDP matches).
func ntupleRule(e plan.Entry, r *embed.Result) (string, bool) {
	flow := ""
	var args []string
	for _, f := range e.Fields {
		if f.Field == "ip.proto" {
			switch f.Value {
			case 6:
				flow = "tcp4"
			case 17:
				flow = "udp4"
			}
		}
	}
	if flow == "" {
		return "", false
	}
	for _, f := range e.Fields {
		mask := ""
		if f.Mask != 0 {
			mask = " m " + Quote(pred.FormatValue(f.Field, ^f.Mask&fullMask(f.Field)))
		}
		switch f.Field {
		case "ip.proto":
		case "ip.src":
			args = append(args, "src-ip "+Quote(pred.FormatValue(f.Field, f.Value))+mask)
		case "ip.dst":
			args = append(args, "dst-ip "+Quote(pred.FormatValue(f.Field, f.Value))+mask)
		case "l4.sport":
			args = append(args, "src-port "+Quote(fmt.Sprint(f.Value))+mask)
		case "l4.dport":
			args = append(args, "dst-port "+Quote(fmt.Sprint(f.Value))+mask)
		default:
			return "", false
		}
	}
	q := queueOf(r, e.Action)
	if q < 0 {
		return "", false
	}
	return fmt.Sprintf("flow-type %s %s action %s", flow, strings.Join(args, " "), Quote(fmt.Sprint(q))), true
}

func fullMask(field string) uint64 {
	b := pred.Fields[field].Bits
	if b >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(b) - 1
}

// stageScript is linux.sh for a model that dragonc run builds in software
// (linux-xdp): its tables are eBPF maps, so ethtool has nothing to do.
func stageScript(pl *plan.Plan, source string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("#!/bin/sh\n")
	w("# Code generated by dragonc from %s. DO NOT EDIT.\n", comment(source))
	w("# Stack %s on %s: the steering is an eBPF stage whose tables are maps,\n", comment(pl.Stack), comment(pl.NIC))
	w("# loaded and removed by `dragonc run`; no driver setting is changed.\n\n")
	w("case \"${1:-}\" in\n-h|--help) echo 'usage: linux.sh [--dry-run|--undo] INTERFACE'; exit 0 ;;\nesac\n")
	w("echo 'linux.sh: nothing to apply: %s is served by dragonc run, which loads its eBPF stage itself'\n", strings.ReplaceAll(visible(pl.Stack), "'", ""))
	return b.String()
}
