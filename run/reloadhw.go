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
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
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
// interrupts, queue masks, offloads) restarts the data plane: between
// the old plan's serve and the new one's, linux.sh is undone and the new
// plan's applied (rehardware).

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
	settings := settingsDiff(h.settings, linux.Settings(r))
	if settings != "" {
		needs = append(needs, "the NIC's settings change ("+settings+"): linux.sh is undone and the new plan's applied")
	}
	t := time.Now()
	chains, vs, code, needs, err := sv.newCode(r, st, needs)
	if err != nil {
		return err
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

	if settings != "" {
		// The serve ends, linux.sh is undone and the new plan's
		// applied, and the stage made from what its driver refuses
		// (rehardware), before the new plan serves.
		return sv.restart(planState{r: r, st: st, chains: chains, via: vs}, strings.Join(needs, "; "), res)
	}
	c, err := h.insert(r, res.Seq, st.Name)
	if err != nil {
		// The script stopped before any step (no ethtool, no record,
		// another driver): the helper serves the old plan's tables again.
		if swap {
			if perr := sv.push(sv.st, sv.code.Tables); perr != nil {
				return perr
			}
		}
		return refuse("changing the NIC's filter rules: %v", err)
	}
	res.NIC = c.nic
	if c.nic.Refused > 0 {
		sv.out.note("refused", "reload %d: the driver of %s refused %d of %d new filter rule(s), the first: %s", res.Seq, h.iface, c.nic.Refused, len(c.change.Insert), c.why)
	}
	// takeBack: the new plan does not serve, so the NIC's rules are the
	// old plan's again.
	takeBack := func() {
		if err := c.takeBack(); err != nil {
			sv.out.note("note", "reload %d: the rules it wrote stay on %s: %v", res.Seq, h.iface, err)
		}
	}
	stage, _, err := hardwareStage(r, st, c.refusedSteps(), sv.handled)
	if err != nil {
		takeBack()
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
			takeBack()
			return err
		}
	} else if err := sv.applyStageRules(stage, res); err != nil {
		return err
	}
	// The old rules last: what they steered is steered by a new rule or
	// the stage, or belongs to an endpoint the new plan has not.
	stay, err := c.finish()
	if err != nil {
		return err
	}
	for _, l := range stay {
		sv.out.note("refused", "reload %d: %s", res.Seq, l)
	}
	sv.out.note("note", "reload %d: %s", res.Seq, c.nic)
	if !swap {
		return nil // the restart made the new plan the one served
	}
	if !reflect.DeepEqual(union, exact) {
		if err := sv.pushFinal(st, exact); err != nil {
			return err
		}
	}
	sv.usePlan(planState{r: r, st: st, stage: stage, chains: chains, via: vs, code: code, bin: sv.bin})
	return nil
}

// phase runs one phase of a reload's rule script of the given number of
// steps (none: nothing to do) and returns the steps it did not apply by
// number.
func (h *hardware) phase(script string, steps int, phase string) (map[int]notApplied, error) {
	if script == "" {
		return nil, nil
	}
	var args []string
	if h.force {
		args = append(args, "--force")
	}
	return h.run(script, steps, append(args, phase, h.iface)...)
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

// ruleReload is a reload's change of the NIC's rules, under way: the
// inserts are done, the deletes not yet.
type ruleReload struct {
	h       *hardware
	driver  *prg.Driver
	change  linux.RuleChange
	script  string       // "" when no rule changes
	taken   []linux.Rule // the inserted rules the driver took
	refused []linux.Rule // the new plan's rules the driver refused, now or before
	ntuple  bool         // ntuple filters are on
	why     string       // why the driver refused the first new rule it refused
	nic     *NICRules
}

// insert starts changing the NIC's rules into plan r's (reload seq of
// stack name): it writes the change's script and runs its phase insert.
func (h *hardware) insert(r *dembed.Result, seq int, name string) (*ruleReload, error) {
	change := linux.ChangeRules(h.held, h.refusedRules, linux.Rules(r))
	change.Ntuple = !h.ntuple
	c := &ruleReload{h: h, driver: r.Driver(), change: change, refused: slices.Clone(change.Refused), ntuple: h.ntuple, nic: &NICRules{Kept: len(change.Kept) + len(change.Refused)}}
	if len(change.Insert)+len(change.Delete) == 0 {
		return c, nil
	}
	h.changes++
	file := fmt.Sprintf("reload-%d.sh", h.changes)
	c.script = filepath.Join(h.dir, file)
	src := change.Script(r.Driver(), file, fmt.Sprintf("Reload %d of dragonc run on %s: stack %s", seq, h.iface, name))
	if err := os.WriteFile(c.script, []byte(src), 0o700); err != nil {
		return nil, err
	}
	c.nic.Script = c.script
	notApplied, err := h.phase(c.script, len(change.Steps()), linux.PhaseInsert)
	if err != nil {
		return nil, err
	}
	first := 1 // the number of the first insert's step
	if change.Ntuple && len(change.Insert) > 0 {
		first = 2 // after turning ntuple filters on
		if _, ok := notApplied[1]; !ok {
			c.ntuple = true
		}
	}
	for i, rule := range change.Insert {
		if n, ok := notApplied[first+i]; ok {
			c.refused = append(c.refused, rule)
			if c.why == "" {
				c.why = n.why
			}
			continue
		}
		c.taken = append(c.taken, rule)
	}
	c.nic.Inserted, c.nic.Refused = len(c.taken), len(change.Insert)-len(c.taken)
	return c, nil
}

// refusedSteps are the steps the eBPF stage takes over once the change
// is made: the first application's refused settings and the refused
// rules (hardwareStage's).
func (c *ruleReload) refusedSteps() []linux.Step {
	out := slices.Clone(c.h.other)
	for _, r := range c.refused {
		out = append(out, linux.Step{Kind: linux.StepRule, Node: r.Node, Entry: r.Entry})
	}
	return out
}

// takeBack deletes the rules insert wrote, by a script of its own: the
// NIC holds the rules it held before.
func (c *ruleReload) takeBack() error {
	c.h.ntuple = c.ntuple // recorded, as turned on
	if len(c.taken) == 0 {
		return nil
	}
	back := linux.RuleChange{Delete: c.taken}
	file := strings.TrimSuffix(filepath.Base(c.script), ".sh") + "-back.sh"
	path := filepath.Join(c.h.dir, file)
	if err := os.WriteFile(path, []byte(back.Script(c.driver, file, "Takes back "+filepath.Base(c.script)+"'s rules")), 0o700); err != nil {
		return err
	}
	steps := back.Steps()
	notApplied, err := c.h.phase(path, len(steps), linux.PhaseDelete)
	if err != nil {
		return err
	}
	for i, r := range c.taken {
		if _, ok := notApplied[i+1]; ok {
			// Still there, and recorded: the next reload deletes it.
			c.h.held = append(c.h.held, r)
		}
	}
	return nil
}

// finish runs the change's phase delete and makes the change the NIC's
// state; it returns a line for each old rule that stays in the NIC's
// table (the driver would not delete it; the next reload tries again).
func (c *ruleReload) finish() ([]string, error) {
	h := c.h
	notApplied, err := h.phase(c.script, len(c.change.Steps()), linux.PhaseDelete)
	if err != nil {
		return nil, err
	}
	var stay []string
	held := append(slices.Clone(c.change.Kept), c.taken...)
	first := len(c.change.Steps()) - len(c.change.Delete) + 1
	for i, r := range c.change.Delete {
		if n, ok := notApplied[first+i]; ok {
			held = append(held, r)
			stay = append(stay, fmt.Sprintf("%s stays in the NIC's table of %s: %s", r, h.iface, n.why))
			continue
		}
		c.nic.Deleted++
	}
	h.held, h.refusedRules, h.ntuple = held, c.refused, c.ntuple
	return stay, nil
}

// sameHardware says whether serving p keeps the NIC as it is: not a
// hardware run, or p's linux.sh settings (linux.Settings) are those
// applied.
func (sv *serving) sameHardware(p planState) bool {
	return !sv.hw || sv.hwrun != nil && settingsDiff(sv.hwrun.settings, linux.Settings(p.r)) == ""
}

// rehardware makes the NIC's settings plan p's before p serves, in a
// restart of a hardware run (the serve ended): when p's settings are not
// those applied (linux.Settings), the applied plan's linux.sh is undone
// and p's applied, and p's stage is made from what its driver refused.
// When p's cannot be applied, nothing of it stays, and the error says
// why.
func (sv *serving) rehardware(p *planState) error {
	if sv.sameHardware(*p) {
		return nil
	}
	var dir string
	if sv.hwrun != nil {
		dir = sv.hwrun.dir
		if err := sv.hwrun.undo(); err != nil {
			return err
		}
		sv.hwrun = nil
	} else {
		dir = filepath.Join(stateDir(sv.state.name), "hardware") // as serveAll's
	}
	h, err := applyHardware(p.r, sv.opt.Iface, sv.opt.Force, dir)
	if err != nil {
		return err
	}
	sv.hwrun = h
	stage, _, err := hardwareStage(p.r, p.st, h.refused, sv.handled)
	if err != nil {
		return err
	}
	if sv.opt.stageEdit != nil {
		sv.opt.stageEdit(stage)
	}
	p.stage = stage
	for _, l := range h.report() {
		sv.out.note("note", "%s", l)
	}
	return nil
}
