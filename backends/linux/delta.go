package linux

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// A reload of dragonc run changes a hardware plan's ntuple rules while the
// plan serves: only the rules that differ are written or deleted, by a
// small script in linux.sh's style (RuleChange.Script) that works on
// linux.sh's undo record, so that linux.sh --undo (and dragonc stop)
// still restores the interface completely after any number of reloads.

// A Rule is one ntuple rule of linux.sh: a plan's table entry at a
// location of the NIC's filter table (ethtool -N ... loc).
type Rule struct {
	Loc   int
	Node  string // the table the rule is an entry of
	Entry plan.Entry
	Queue int
	Match []string // ethtool -N's words after flow-type
}

// String is the rule as ethtool -N writes it.
func (r Rule) String() string {
	return fmt.Sprintf("rule %d (flow-type %s action %d)", r.Loc, strings.Join(r.Match, " "), r.Queue)
}

// key is what a rule steers, wherever it is: two rules of the same key
// send the same frames to the same queue.
func (r Rule) key() string {
	return r.Node + "\x00" + strings.Join(r.Match, " ") + "\x00" + strconv.Itoa(r.Queue)
}

// Rules lists linux.sh's ntuple rules for a plan, in its order, at the
// locations it writes them.
func Rules(r *embed.Result) []Rule {
	if r.SoftwareStage() {
		return nil
	}
	steps, _ := stepsOf(r)
	var out []Rule
	for _, st := range steps {
		if st.Kind != StepRule {
			continue
		}
		loc, _ := strconv.Atoi(st.args[0])
		q, _ := strconv.Atoi(st.args[1])
		out = append(out, Rule{Loc: loc, Node: st.Node, Entry: st.Entry, Queue: q, Match: slices.Clone(st.args[2:])})
	}
	return out
}

// Settings lists what linux.sh sets on the interface for a plan besides
// its ntuple rules (and the ntuple switch that they need), as the steps'
// descriptions: two plans with the same settings differ only in rules,
// which a RuleChange changes.
func Settings(r *embed.Result) []string {
	var out []string
	for _, st := range Steps(r) {
		if st.Kind != StepRule && !(st.Kind == StepFeature && st.Feature == "ntuple") {
			out = append(out, st.Desc)
		}
	}
	return out
}

// RuleChange changes the rules a NIC holds into a plan's.
type RuleChange struct {
	// Ntuple turns the interface's ntuple filters on before the inserts
	// (the running plan had no rule that needed them).
	Ntuple bool
	// Insert are the rules to write, each at its location; Delete those
	// to delete from theirs. The inserts run first (RuleChange.Script's
	// phase insert), the deletes after (phase delete), so that a rule
	// that steers the same frames elsewhere is written before the old
	// one goes.
	Insert, Delete []Rule
	// Kept are the plan's rules the NIC holds already, at their
	// locations; Refused the plan's rules the driver refused before: the
	// driver is not asked again (dragonc run's eBPF stage keeps them).
	Kept, Refused []Rule
}

// ChangeRules is the change from the rules a NIC holds (held: written,
// at their locations; refused: rules the driver did not take) to want (a
// plan's Rules, whose locations are ignored). A rule in both keeps its
// location; a rule of want alone is inserted at the lowest location no
// held rule takes (a deleted rule's location is still taken while the
// inserts run, so it is free for the next change); a held rule that want
// has not is deleted.
func ChangeRules(held, refused, want []Rule) RuleChange {
	var c RuleChange
	have := map[string][]Rule{}
	for _, r := range held {
		have[r.key()] = append(have[r.key()], r)
	}
	was := map[string]int{}
	for _, r := range refused {
		was[r.key()]++
	}
	taken := map[int]bool{}
	for _, r := range held {
		taken[r.Loc] = true
	}
	next := 0
	for _, r := range want {
		k := r.key()
		switch {
		case len(have[k]) > 0:
			r.Loc = have[k][0].Loc
			have[k] = have[k][1:]
			c.Kept = append(c.Kept, r)
		case was[k] > 0:
			was[k]--
			r.Loc = -1
			c.Refused = append(c.Refused, r)
		default:
			for taken[next] {
				next++
			}
			r.Loc = next
			taken[next] = true
			c.Insert = append(c.Insert, r)
		}
	}
	for _, r := range held {
		if rest := have[r.key()]; len(rest) > 0 && rest[0].Loc == r.Loc {
			c.Delete = append(c.Delete, r)
			have[r.key()] = rest[1:]
		}
	}
	return c
}

// StepDeleteRule is a step of a RuleChange that deletes a rule.
const StepDeleteRule = "delete-rule"

// deleteRule deletes one ntuple rule that linux.sh or an earlier change
// wrote, and takes its undo out of the record (so that --undo does not
// delete what a later rule writes at that location).
var deleteRule = &kind{
	name:   "delete_rule",
	fields: []string{"loc", "queue", "match..."},
	desc:   "delete filter rule $loc (ethtool -N flow-type $match action $queue)",
	doc:    "deletes the ntuple rule at location LOC, which sends MATCH to QUEUE, and takes its undo out of the record.",
	body: `    if [ "$dry" = 0 ]; then
        case "$(rule_action "$loc")" in
        '') unrecord "ethtool -N $(q "$ifc") delete $loc"; return ;;
        "Direct to queue $queue") ;;
        *) fail "rule location $loc holds another rule than the one written there (ethtool -n rule $loc); left as it is"; return ;;
        esac
    fi
    run ethtool -N "$ifc" delete "$loc" || { run_failed; return; }
    [ "$dry" = 1 ] && return
    [ -z "$(rule_action "$loc")" ] || { fail "rule $loc is still in the NIC's table afterwards (ethtool -n rule $loc)"; return; }
    unrecord "ethtool -N $(q "$ifc") delete $loc"
`,
}

// The phases of a RuleChange's script.
const (
	PhaseInsert = "insert"
	PhaseDelete = "delete"
)

// phased is a step of a RuleChange and its phase.
type phased struct {
	step
	phase string
}

// steps are the change's steps in its script's order: the ntuple switch
// and the inserts (phase insert), then the deletes (phase delete).
func (c RuleChange) steps() []phased {
	var out []phased
	if c.Ntuple && len(c.Insert) > 0 {
		out = append(out, phased{newStep(Step{Kind: StepFeature, Feature: "ntuple"}, setFeature, "ntuple", "ntuple-filters", "on"), PhaseInsert})
	}
	for _, r := range c.Insert {
		out = append(out, phased{newStep(Step{Kind: StepRule, Node: r.Node, Entry: r.Entry}, addRule, ruleArgs(r)...), PhaseInsert})
	}
	for _, r := range c.Delete {
		out = append(out, phased{newStep(Step{Kind: StepDeleteRule, Node: r.Node, Entry: r.Entry}, deleteRule, ruleArgs(r)...), PhaseDelete})
	}
	return out
}

func ruleArgs(r Rule) []string {
	return append([]string{strconv.Itoa(r.Loc), strconv.Itoa(r.Queue)}, r.Match...)
}

// Steps lists the change's steps in its script's order: its "refused N:
// why" lines number them so.
func (c RuleChange) Steps() []Step {
	var out []Step
	for _, st := range c.steps() {
		out = append(out, st.Step)
	}
	return out
}

// Script renders the change as a POSIX shell script in linux.sh's style,
// named name (its messages say it) and titled title (a comment), for an
// interface whose driver is d (nil: any, with --force). It runs after
// linux.sh on linux.sh's record ($DRAGONC_STATE): each rule it writes is
// recorded as linux.sh records it, each rule it deletes is taken out of
// the record. It always goes on past a refused step, printing "refused N:
// why", as linux.sh --keep-going does.
func (c RuleChange) Script(d *prg.Driver, name, title string) string {
	steps := c.steps()
	name = plainWord(name)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("#!/bin/sh\n# Code generated by dragonc. DO NOT EDIT.\n# %s\n", comment(title))
	through := ""
	if d != nil {
		through = " through the Linux driver " + comment(d.Name)
	}
	b.WriteString(wrap("Changes the ntuple rules that linux.sh wrote" + through + " into another plan's: phase insert writes the new rules, phase delete deletes the old ones (dragonc run updates its eBPF stage in between, so that no rule is missing meanwhile). Every step is read back from the interface. It works on linux.sh's record: a rule written is recorded, a rule deleted is taken out of it, so that linux.sh --undo still restores the interface. A step the interface refuses prints \"refused N: why\" and the steps after it go on."))
	w(`
set -u

usage() {
    cat <<'EOF'
usage: %[1]s [--dry-run] [--force] insert|delete INTERFACE

  --dry-run  print every command, quoted, as it would run; change nothing
  --force    go on when the interface's driver is not the plan's, or a
             new rule's location holds a rule linux.sh did not write
  -h, --help print this help

The record of linux.sh's run is $DRAGONC_STATE (default /var/tmp/dragonc-linux-INTERFACE.undo).
EOF
}

dry=0
force=0
refused=0
total=%[2]d
while [ "$#" -gt 0 ]; do
    case "$1" in
    --dry-run) dry=1 ;;
    --force) force=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "%[1]s: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
if [ "$#" -ne 2 ]; then
    usage >&2
    exit 2
fi
phase=$1
ifc=$2
case "$phase" in
insert | delete) ;;
*) echo "%[1]s: no phase $phase (insert, delete)" >&2; exit 2 ;;
esac
case "$ifc" in
'' | . | .. | */* | *' '*) echo "%[1]s: $ifc is not an interface name" >&2; exit 2 ;;
esac
state=${DRAGONC_STATE:-/var/tmp/dragonc-linux-$ifc.undo}

`, name, len(steps))
	b.WriteString(shQ + shRun + shRecord)
	w(`# unrecord takes a command out of the record: the step it reverts was
# undone here.
unrecord() {
    [ "$dry" = 1 ] && return 0
    if grep -vxF -e "$1" "$state" >"$state.new"; [ "$?" -le 1 ]; then
        mv "$state.new" "$state"
    else
        rm -f "$state.new"
        fail "cannot take the rule out of the record $state"
    fi
}

# fail reports the step as refused; the steps after it go on.
fail() {
    refused=$((refused + 1))
    printf 'refused %%s: %%s\n' "$num" "$1"
    echo "%s: step $cur refused: $1" >&2
    return 0
}

`, name)
	b.WriteString(shBegin + "# Read-back helpers.\n" + shFeature + shRuleAction + "\n")
	var kinds []*kind
	for _, st := range steps {
		if !slices.Contains(kinds, st.kind) {
			kinds = append(kinds, st.kind)
			w("%s\n", st.kind.function())
		}
	}
	w("if [ \"$dry\" = 0 ]; then\n")
	w("    if ! command -v ethtool >/dev/null 2>&1; then\n        echo '%s: ethtool is not installed' >&2\n        exit 1\n    fi\n", name)
	w("    if [ ! -f \"$state\" ]; then\n        echo \"%s: $state does not exist: linux.sh has not run on $ifc, there are no rules to change\" >&2\n        exit 1\n    fi\n", name)
	b.WriteString(driverCheck(d, name))
	w("fi\n\n")
	w(`# The steps, one row each: its number, its phase, its kind (one of the
# functions above, which applies the step, reads it back and records or
# unrecords its undo) and its words, plain (letters, digits, _.,:/-).
n=0
while read -r step when kind words <&3; do
    [ "$when" = "$phase" ] || continue
    n=$((n + 1))
    # shellcheck disable=SC2086 # the words of a row are plain, see above
    "$kind" "$step" $words
done 3<<'EOF'
`)
	width := 0
	for _, st := range steps {
		width = max(width, len(st.kind.name))
	}
	num := len(fmt.Sprint(len(steps)))
	for i, st := range steps {
		w("%s\n", strings.TrimRight(fmt.Sprintf("%*d %-6s %-*s %s", num, i+1, st.phase, width, st.kind.name, strings.Join(st.args, " ")), " "))
	}
	w("EOF\n\n")
	w("if [ \"$dry\" = 0 ]; then\n    rm -f \"$state.err\"\n    echo \"%s: $phase: applied $((n - refused)) of $n steps to $ifc; linux.sh --undo $ifc restores the previous settings\"\nfi\n", name)
	return b.String()
}
