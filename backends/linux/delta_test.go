package linux_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/lpg"
)

// flowStack is a stack of UDP flows on an 82599, one ntuple rule each,
// with the flows named in add and without those in drop.
func flowStack(add []int, drop ...int) []byte {
	var b strings.Builder
	b.WriteString("stack flows {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/24 }\n    cores 0..3\n")
	for i := 1; i <= 6; i++ {
		if !slices.Contains(drop, i) {
			fmt.Fprintf(&b, "    endpoint f%d udp flow 10.3.0.1:%d -> 10.3.0.9:%d\n", i, 7000+i, 8000+i)
		}
	}
	for _, i := range add {
		fmt.Fprintf(&b, "    endpoint f%d udp flow 10.3.0.1:%d -> 10.3.0.9:%d\n", i, 7000+i, 8000+i)
	}
	b.WriteString("    service arp\n}\n")
	return []byte(b.String())
}

func flowPlan(t *testing.T, src []byte) *embed.Result {
	t.Helper()
	r, _ := embedtest.PlanSourceTarget(t, "82599", "flows.lpg", src, costmodel.DragonetBalance{}, embed.TargetLinux)
	return r
}

// replan is the plan of src from the running plan r by the incremental
// search, as dragonc run's reload plans.
func replan(t *testing.T, r *embed.Result, src []byte) *embed.Result {
	t.Helper()
	st, diags := lpg.LoadStack("flows.lpg", src)
	if st == nil {
		t.Fatal(diags)
	}
	in, _, err := embed.NewInput("82599", embedtest.Model(t, "82599"), st, nil, embed.Options{Cost: costmodel.DragonetBalance{}, Target: embed.TargetLinux, Strategy: embed.StrategyIncremental, Previous: r.Plan})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := embed.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r2
}

// ruleOf is the rule of endpoint name among rules.
func ruleOf(t *testing.T, rules []linux.Rule, name string) linux.Rule {
	t.Helper()
	i := slices.IndexFunc(rules, func(r linux.Rule) bool { return r.Entry.Endpoint == name })
	if i < 0 {
		t.Fatalf("no rule of %s among %v", name, rules)
	}
	return rules[i]
}

// TestChangeRules: rules both plans have keep their locations, refused
// ones stay refused, a new rule takes the lowest location no held rule
// takes (not one deleted in the same change), and a held rule the new
// plan has not is deleted.
func TestChangeRules(t *testing.T) {
	r1 := flowPlan(t, flowStack(nil))
	old := linux.Rules(r1)
	if len(old) != 6 {
		t.Fatalf("%d rules, want one a flow: %v", len(old), old)
	}
	for i, r := range old {
		if r.Loc != i {
			t.Fatalf("rule %d at location %d: Rules does not number as linux.sh", i, r.Loc)
		}
	}
	want := linux.Rules(replan(t, r1, flowStack([]int{7}, 2)))
	refused := []linux.Rule{ruleOf(t, old, "f4")}
	var held []linux.Rule
	for _, r := range old {
		if r.Entry.Endpoint != "f4" {
			held = append(held, r)
		}
	}
	c := linux.ChangeRules(held, refused, want)
	if len(c.Insert) != 1 || c.Insert[0].Entry.Endpoint != "f7" || c.Insert[0].Loc != 3 {
		t.Errorf("insert %v, want f7 at location 3 (f4's, which the driver refused)", c.Insert)
	}
	if len(c.Delete) != 1 || c.Delete[0].Entry.Endpoint != "f2" || c.Delete[0].Loc != 1 {
		t.Errorf("delete %v, want f2 at location 1", c.Delete)
	}
	if len(c.Refused) != 1 || c.Refused[0].Entry.Endpoint != "f4" {
		t.Errorf("refused %v, want f4's", c.Refused)
	}
	if len(c.Kept) != 4 {
		t.Errorf("kept %v, want 4", c.Kept)
	}
	for _, r := range c.Kept {
		if r.Loc != ruleOf(t, old, r.Entry.Endpoint).Loc {
			t.Errorf("%s moved from location %d to %d", r.Entry.Endpoint, ruleOf(t, old, r.Entry.Endpoint).Loc, r.Loc)
		}
	}
	// Nothing changes: nothing to do.
	if c := linux.ChangeRules(old, nil, old); len(c.Insert)+len(c.Delete) > 0 || len(c.Kept) != len(old) {
		t.Errorf("the same rules: %+v", c)
	}
	// A rule whose queue changes is a new rule at a free location, and
	// the old one is deleted after it.
	moved := slices.Clone(old)
	moved[0].Queue++
	if c := linux.ChangeRules(old, nil, moved); len(c.Insert) != 1 || c.Insert[0].Loc != 6 || len(c.Delete) != 1 || c.Delete[0].Loc != 0 {
		t.Errorf("a rule to another queue: insert %v, delete %v", c.Insert, c.Delete)
	}
}

// TestRuleScript applies a plan with linux.sh on the fake ethtool, then
// a change that adds one flow and removes another: phase insert writes
// the new rule at its location and records its undo, phase delete
// deletes the old rule and takes its undo out of the record, the other
// rules are never touched, and linux.sh --undo then restores the
// interface as it was before linux.sh. A second change reuses the freed
// location; a rule the driver refuses is reported by its step's number.
func TestRuleScript(t *testing.T) {
	t.Parallel()
	r1 := flowPlan(t, flowStack(nil))
	script := filepath.Join(t.TempDir(), "linux.sh")
	if err := os.WriteFile(script, []byte(linux.Script(r1, "flows.lpg")), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, "ixgbe", 4)
	before := f.Snapshot(t)
	if out, code := f.Run(t, script, nil, "--keep-going", "eth0"); code != 0 || strings.Contains(out, "refused") {
		t.Fatalf("linux.sh: exit %d:\n%s", code, out)
	}
	held := linux.Rules(r1)
	r2 := replan(t, r1, flowStack([]int{7}, 2))
	if !slices.Equal(linux.Settings(r1), linux.Settings(r2)) {
		t.Fatalf("the plans differ beyond their rules:\n%q\n%q", linux.Settings(r1), linux.Settings(r2))
	}
	c := linux.ChangeRules(held, nil, linux.Rules(r2))
	change := filepath.Join(t.TempDir(), "reload-1.sh")
	src := c.Script(r2.Driver(), "reload-1.sh", "reload 1 of stack flows")
	golden.Check(t, filepath.Join("testdata", "82599-flows.reload.sh.golden"), []byte(src))
	if err := os.WriteFile(change, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	record := func() string {
		b, err := os.ReadFile(f.State)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	rec0 := record()
	log0 := f.Read(t, "log")

	out, code := f.Run(t, change, nil, "--dry-run", "insert", "eth0")
	if code != 0 || !strings.Contains(out, "ethtool -N eth0 flow-type udp4") || strings.Contains(out, "delete") {
		t.Errorf("--dry-run insert: exit %d:\n%s", code, out)
	}
	if record() != rec0 || f.Read(t, "log") != log0 {
		t.Errorf("--dry-run changed something")
	}

	out, code = f.Run(t, change, nil, "insert", "eth0")
	if code != 0 || strings.Contains(out, "refused") {
		t.Fatalf("insert: exit %d:\n%s", code, out)
	}
	added, gone := c.Insert[0], c.Delete[0]
	if got := f.Read(t, fmt.Sprintf("rule.%d", added.Loc)); got != fmt.Sprint(added.Queue) {
		t.Errorf("rule %d sends to %q, want %d", added.Loc, got, added.Queue)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, fmt.Sprintf("rule.%d", gone.Loc))); err != nil {
		t.Errorf("phase insert deleted the old rule: %v", err)
	}
	undoAdded := fmt.Sprintf("ethtool -N eth0 delete %d", added.Loc)
	undoGone := fmt.Sprintf("ethtool -N eth0 delete %d", gone.Loc)
	if rec := record(); rec != rec0+undoAdded+"\n" {
		t.Errorf("the record after insert:\n%s\nwant linux.sh's and %q", rec, undoAdded)
	}
	out, code = f.Run(t, change, nil, "delete", "eth0")
	if code != 0 || strings.Contains(out, "refused") {
		t.Fatalf("delete: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, fmt.Sprintf("rule.%d", gone.Loc))); !os.IsNotExist(err) {
		t.Errorf("rule %d (%s) was not deleted: %v", gone.Loc, gone.Entry.Endpoint, err)
	}
	if rec := record(); strings.Contains(rec, undoGone+"\n") || !strings.Contains(rec, undoAdded+"\n") {
		t.Errorf("the record after delete keeps %q or lost %q:\n%s", undoGone, undoAdded, rec)
	}
	// Only the changed rules were written or deleted.
	var touched []string
	for _, l := range strings.Split(strings.TrimPrefix(f.Read(t, "log"), log0), "\n") {
		if strings.HasPrefix(l, "-N ") {
			touched = append(touched, l)
		}
	}
	if len(touched) != 2 || !strings.Contains(touched[0], fmt.Sprintf("loc %d", added.Loc)) || touched[1] != fmt.Sprintf("-N eth0 delete %d", gone.Loc) {
		t.Errorf("ethtool -N calls of the change: %q", touched)
	}

	// The next change: the freed location is the lowest free one.
	held = append(c.Kept, c.Insert...)
	c2 := linux.ChangeRules(held, nil, linux.Rules(replan(t, r2, flowStack([]int{7, 8}, 2))))
	if len(c2.Insert) != 1 || c2.Insert[0].Loc != gone.Loc || len(c2.Delete) != 0 {
		t.Fatalf("adding f8: %+v, want one insert at the freed location %d", c2, gone.Loc)
	}
	change2 := filepath.Join(t.TempDir(), "reload-2.sh")
	if err := os.WriteFile(change2, []byte(c2.Script(r2.Driver(), "reload-2.sh", "reload 2")), 0o755); err != nil {
		t.Fatal(err)
	}
	// The driver refuses it (the next rule the fake inserts): reported
	// as refused by its number in Steps, not recorded.
	next := 1
	fmt.Sscan(f.Read(t, "inserted"), &next)
	rec1 := record()
	out, code = f.Run(t, change2, []string{fmt.Sprintf("FAKE_REFUSE_RULE=%d", next+1)}, "insert", "eth0")
	m := regexp.MustCompile(`(?m)^refused (\d+): (.*)$`).FindAllStringSubmatch(out, -1)
	steps := c2.Steps()
	if code != 0 || len(m) != 1 || m[0][1] != "1" || steps[0].Kind != linux.StepRule || !strings.Contains(m[0][2], "the driver refused it") {
		t.Errorf("a refused insert: exit %d, refused %q (steps %v):\n%s", code, m, steps, out)
	}
	if record() != rec1 {
		t.Errorf("a refused rule was recorded:\n%s", record())
	}

	if out, code := f.Run(t, script, nil, "--undo", "eth0"); code != 0 {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("--undo after the changes did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
	// Without linux.sh's record there is nothing to change.
	if out, code := f.Run(t, change, nil, "insert", "eth0"); code != 1 || !strings.Contains(out, "linux.sh has not run on eth0") {
		t.Errorf("a change without a record: exit %d:\n%s", code, out)
	}
}

// TestRuleScriptTurnsNtupleOn: a plan without rules leaves ntuple filters
// off; a change that adds the first rule turns them on first and records
// that, so that --undo turns them off again.
func TestRuleScriptTurnsNtupleOn(t *testing.T) {
	t.Parallel()
	r1 := flowPlan(t, flowStack(nil))
	want := linux.Rules(r1)[:1]
	c := linux.ChangeRules(nil, nil, want)
	c.Ntuple = true
	change := filepath.Join(t.TempDir(), "reload-1.sh")
	if err := os.WriteFile(change, []byte(c.Script(r1.Driver(), "reload-1.sh", "reload 1")), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, "ixgbe", 4)
	before := f.Snapshot(t)
	if err := os.WriteFile(f.State, nil, 0o644); err != nil { // linux.sh's record, with nothing in it
		t.Fatal(err)
	}
	if out, code := f.Run(t, change, nil, "insert", "eth0"); code != 0 || strings.Contains(out, "refused") {
		t.Fatalf("insert: exit %d:\n%s", code, out)
	}
	if f.Read(t, "ntuple-filters") != "on" || f.Read(t, "rule.0") != fmt.Sprint(want[0].Queue) {
		t.Errorf("not applied:\n%s", f.Snapshot(t))
	}
	script := filepath.Join(t.TempDir(), "linux.sh")
	if err := os.WriteFile(script, []byte(linux.Script(r1, "flows.lpg")), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := f.Run(t, script, nil, "--undo", "eth0"); code != 0 {
		t.Fatalf("undo: exit %d:\n%s", code, out)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("--undo did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
}
