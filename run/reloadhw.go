package run

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
)

// A reload of a run that applied a hardware plan (issue 39) changes only
// the NIC's ntuple rules that differ between the running plan and the
// new one (linux.ChangeRules): a rule both plans have stays at its
// location, untouched; a new rule is written at a free location and a
// rule the new plan has not is deleted, by a script in linux.sh's style
// in the run's hardware directory (reload-N.sh) that keeps linux.sh's
// undo record, so that dragonc stop restores the interface completely
// after any number of reloads. A rule the driver refuses is steered by
// the eBPF stage, as the first application's refused rules are; a rule
// the driver refused before is not offered to it again.
//
// The order keeps every endpoint that stays served: the helper's tables
// first (with an endpoint that moves queue in both), then the new rules
// (phase insert), then the stage's maps (insert before delete), then the
// old rules (phase delete), then the helper's exact tables. A new plan
// that changes anything else linux.sh sets (the queue count, RSS,
// interrupts, queue masks, offloads) is refused: linux.sh would have to
// be undone and applied again; the old plan serves on.

// NICRules is what a reload of a hardware plan did to the NIC's filter
// rules.
type NICRules struct {
	Inserted int `json:"inserted"` // new rules the driver took
	Refused  int `json:"refused"`  // new rules the driver refused: the eBPF stage steers them
	Deleted  int `json:"deleted"`  // rules of the old plan deleted
	Kept     int `json:"kept"`     // rules both plans have, untouched
	// Script is the reload's rule script, in the run's hardware
	// directory ("" when no rule changed).
	Script string `json:"script,omitempty"`
}

// String says it in a line.
func (n *NICRules) String() string {
	s := fmt.Sprintf("the NIC's filter rules: %d written, %d deleted, %d untouched", n.Inserted, n.Deleted, n.Kept)
	if n.Refused > 0 {
		s += fmt.Sprintf("; the driver refused %d new rule(s), which the eBPF stage steers", n.Refused)
	}
	if n.Script != "" {
		s += " (" + n.Script + ")"
	}
	return s
}

// replanHardware is Replan for a running plan made for a NIC's Linux
// driver: st embedded on the same NIC for its driver (run.Adapt's
// checksums), by the incremental search, with the running plan's cost
// function.
func replanHardware(st *lpg.Stack, running *dembed.Result) (*dembed.Result, error) {
	nic := running.Plan.NIC
	m, mdiags, err := nics.Load(nic)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, mdiags
	}
	fn, err := costmodel.ByName(running.Plan.Cost.Function)
	if err != nil {
		return nil, err
	}
	in, _, err := dembed.NewInput(nic, m, st, nil, dembed.Options{Cost: fn, Strategy: dembed.StrategyIncremental, Previous: running.Plan, Target: dembed.TargetLinux})
	if err != nil {
		return nil, err
	}
	Adapt(in)
	return dembed.Run(in)
}

// applyHardwarePlanned is applyPlanned for a run that applied a hardware
// plan, or a new plan for a NIC's hardware; needs says what already needs
// the data plane restarted.
func (sv *serving) applyHardwarePlanned(r *dembed.Result, st *lpg.Stack, res *ReloadResult, needs []string) error {
	h := sv.hwrun
	switch {
	case h == nil:
		return refuse("the new plan is for %s's hardware; this run serves a linux-xdp plan (restart dragonc run)", r.Plan.NIC)
	case r.SoftwareStage():
		return refuse("the new plan is for linux-xdp; this run applied a plan for %s through its driver (restart dragonc run)", sv.r.Plan.NIC)
	case r.Plan.NIC != sv.r.Plan.NIC || r.Driver() == nil:
		return refuse("the new plan is for %s, not for the driver of the running plan's %s (restart dragonc run)", r.Plan.NIC, sv.r.Plan.NIC)
	}
	if why := settingsDiff(h.settings, linux.Settings(r)); why != "" {
		return refuse("the new plan changes the NIC's settings besides its filter rules (%s); a reload changes a hardware plan's filter rules only, linux.sh would have to be undone and applied again (restart dragonc run)", why)
	}
	t := time.Now()
	chains, err := TxChains(r.Embedding.LPG, r.Plan, st)
	if err != nil {
		return refuse("%v", err)
	}
	vs, err := viaOf(r.Plan, st)
	if err != nil {
		return refuse("%v", err)
	}
	if !reflect.DeepEqual(chains, sv.chains) || !reflect.DeepEqual(vs, sv.via) {
		needs = append(needs, "the transmit paths or VI streams differ")
	}
	code, err := gofallback.GenerateSwappable(r, st, gofallback.Options{Source: "run", Module: "dragoncrun/fallback", NoTest: true})
	if err != nil {
		return refuse("generating the new plan's code: %v", err)
	}
	if code.Shape != sv.code.Shape {
		needs = append(needs, "the generated code changes: "+codeDiff(sv.code, code))
	}
	res.CodeMS = ms(time.Since(t))
	t = time.Now()
	defer func() { res.SwapMS = ms(time.Since(t)) }()
	res.Added, res.Removed, res.Changed = endpointDiff(sv.st, st)

	// The helper's tables first, as applyPlanned's (unless the data
	// plane restarts with new code anyway).
	var union, exact []gofallback.Table
	swap := len(needs) == 0
	if swap {
		keep := map[string]bool{}
		for _, e := range st.Endpoints {
			keep[e.Name] = true
		}
		union, exact = tableUpdates(sv.code.Tables, code.Tables, keep)
		if err := sv.push(st, union); err != nil {
			return err
		}
		res.Tables = len(exact)
	}

	change := linux.ChangeRules(h.held, h.refusedRules, linux.Rules(r))
	change.Ntuple = !h.ntuple
	nic := &NICRules{Kept: len(change.Kept) + len(change.Refused)}
	res.NIC = nic
	var script string
	if len(change.Insert)+len(change.Delete) > 0 {
		h.changes++
		name := fmt.Sprintf("reload-%d.sh", h.changes)
		script = filepath.Join(h.dir, name)
		src := change.Script(r.Driver(), name, fmt.Sprintf("Reload %d of dragonc run on %s: stack %s", res.Seq, h.iface, st.Name))
		if err := os.WriteFile(script, []byte(src), 0o700); err != nil {
			return err
		}
		nic.Script = script
	}
	steps := change.Steps()
	inserts, err := h.phase(script, steps, linux.PhaseInsert)
	if err != nil {
		return err
	}
	// What the driver refused of the new rules joins the rules it
	// refused before; the stage steers them all.
	refusedRules := slices.Clone(change.Refused)
	var taken []linux.Rule
	ntuple := h.ntuple
	var first string
	for i, r := range change.Insert {
		n := i + 1
		if change.Ntuple {
			n++ // the ntuple switch is step 1
		}
		if why, ok := inserts[n]; ok {
			refusedRules = append(refusedRules, r)
			if first == "" {
				first = why.why
			}
			continue
		}
		taken = append(taken, r)
	}
	if _, ok := inserts[1]; change.Ntuple && len(change.Insert) > 0 && !ok {
		ntuple = true
	}
	nic.Inserted, nic.Refused = len(taken), len(change.Insert)-len(taken)
	if nic.Refused > 0 {
		sv.out.note("refused", "reload %d: the driver of %s refused %d of %d new filter rule(s), the first: %s", res.Seq, h.iface, nic.Refused, len(change.Insert), first)
	}
	// undoInserts deletes the rules just written when the new plan does
	// not serve: the old plan's stage and the NIC agree again.
	undoInserts := func() {
		if len(taken) == 0 {
			return
		}
		back := linux.RuleChange{Delete: taken}
		name := fmt.Sprintf("reload-%d-back.sh", h.changes)
		path := filepath.Join(h.dir, name)
		src := back.Script(r.Driver(), name, fmt.Sprintf("Reload %d of dragonc run on %s, taken back", res.Seq, h.iface))
		if err := os.WriteFile(path, []byte(src), 0o700); err != nil {
			sv.out.note("note", "reload %d: the rules it wrote stay on %s: %v", res.Seq, h.iface, err)
			return
		}
		if _, err := h.phase(path, back.Steps(), linux.PhaseDelete); err != nil {
			sv.out.note("note", "reload %d: the rules it wrote stay on %s: %v", res.Seq, h.iface, err)
		}
	}
	var ruleSteps []linux.Step
	for _, r := range refusedRules {
		ruleSteps = append(ruleSteps, linux.Step{Kind: linux.StepRule, Node: r.Node, Entry: r.Entry})
	}
	stage, _, err := hardwareStage(r, st, append(slices.Clone(h.other), ruleSteps...), sv.handled)
	if err != nil {
		undoInserts()
		return refuse("the new plan's eBPF stage: %v", err)
	}
	if sv.opt.stageEdit != nil {
		sv.opt.stageEdit(stage)
	}
	if why := stageShapeDiff(sv.stage, stage); why != "" {
		needs = append(needs, "the eBPF program changes ("+why+")")
	}
	if len(needs) > 0 {
		if err := sv.restart(planState{r: r, st: st, stage: stage, chains: chains, via: vs}, strings.Join(needs, "; "), res); err != nil {
			undoInserts()
			return err
		}
	} else {
		sv.liveMu.Lock()
		m := sv.maps
		sv.liveMu.Unlock()
		if m == nil {
			return fmt.Errorf("the run stopped serving")
		}
		res.RulesAdded, res.RulesChanged, res.RulesRemoved, err = m.applyRules(sv.stage.Groups, stage.Groups)
		if err != nil {
			return fmt.Errorf("updating the eBPF stage's rules: %w", err)
		}
	}
	// The old rules last: what they steered is steered by a new rule or
	// the stage, or belongs to an endpoint the new plan has not.
	deletes, err := h.phase(script, steps, linux.PhaseDelete)
	if err != nil {
		return err
	}
	held := append(slices.Clone(change.Kept), taken...)
	for i, r := range change.Delete {
		if why, ok := deletes[len(steps)-len(change.Delete)+i+1]; ok {
			// Still in the NIC's table, and in the record: the next
			// reload deletes it again.
			held = append(held, r)
			sv.out.note("refused", "reload %d: %s of %s stays in the NIC's table: %s", res.Seq, r, h.iface, why.why)
			continue
		}
		nic.Deleted++
	}
	h.held, h.refusedRules, h.ntuple = held, refusedRules, ntuple
	sv.out.note("note", "reload %d: %s", res.Seq, nic)
	if !swap {
		return nil // the restart made the new plan the one served
	}
	if !reflect.DeepEqual(union, exact) {
		if err := sv.push(st, exact); err != nil {
			return err
		}
	}
	sv.usePlan(planState{r: r, st: st, stage: stage, chains: chains, via: vs, code: code, bin: sv.bin})
	return nil
}

// phase runs one phase of a reload's rule script (none: nothing to do)
// and returns the steps it did not apply by number.
func (h *hardware) phase(script string, steps []linux.Step, phase string) (map[int]notApplied, error) {
	if script == "" {
		return nil, nil
	}
	var args []string
	if h.force {
		args = append(args, "--force")
	}
	return h.run(script, len(steps), append(args, phase, h.iface)...)
}

// settingsDiff names the first setting of linux.sh that differs between
// two plans (linux.Settings); "" when none does.
func settingsDiff(a, b []string) string {
	for i := range max(len(a), len(b)) {
		switch {
		case i >= len(a):
			return "the new plan adds: " + b[i]
		case i >= len(b):
			return "the new plan has no: " + a[i]
		case a[i] != b[i]:
			return fmt.Sprintf("%s instead of %s", b[i], a[i])
		}
	}
	return ""
}
