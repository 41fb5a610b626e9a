package embed

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

// CheckPrevious lists what a previous plan names that NIC model m does not
// have: configuration nodes and their kinds, the choices, fields and
// targets of their values, tasks, engines and receive queues. Such a plan
// was made for another model, or another version of this one, and the
// incremental strategy cannot start from it. Endpoints and LPG nodes the
// stack no longer has are not listed: a stack that changed since the
// previous plan is what the incremental strategy is for. Each problem is
// reported once, in the plan's order.
func CheckPrevious(prev *plan.Plan, m *prg.Model) []string {
	var out []string
	seen := map[string]bool{}
	report := func(format string, args ...any) {
		if s := fmt.Sprintf(format, args...); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var spaces []string
	for _, sp := range m.Spaces {
		spaces = append(spaces, sp.Node)
	}
	for i, pc := range prev.Config {
		sp := m.Space(pc.Node)
		if sp == nil {
			msg := fmt.Sprintf("config[%d] names configuration node %q, which NIC model %s does not have", i, pc.Node, m.Name)
			if near := diag.Closest(pc.Node, spaces); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			report("%s", msg)
			continue
		}
		if pc.Kind != string(sp.Kind) {
			report("config[%d]: %s is a %s node in the plan but a %s node in NIC model %s", i, pc.Node, pc.Kind, sp.Kind, m.Name)
			continue
		}
		if pc.Choice != "" && !slices.Contains(sp.Choices, pc.Choice) {
			report("config[%d]: %s has no choice %q in NIC model %s", i, pc.Node, pc.Choice, m.Name)
		}
		for _, e := range pc.Entries {
			if !slices.Contains(sp.Actions, e.Action) {
				report("config[%d]: an entry of %s leads to %s, which is not one of its targets in NIC model %s", i, pc.Node, e.Action, m.Name)
			}
			for _, f := range e.Fields {
				if !slices.Contains(sp.Fields, f.Field) {
					report("config[%d]: an entry of %s matches field %s, which %s does not match in NIC model %s", i, pc.Node, f.Field, pc.Node, m.Name)
				}
			}
		}
		for _, target := range pc.Indirection {
			if !slices.Contains(sp.Actions, target) {
				report("config[%d]: the indirection table of %s leads to %s, which is not one of its targets in NIC model %s", i, pc.Node, target, m.Name)
			}
		}
		for _, task := range slices.Sorted(maps.Keys(pc.Placement)) {
			engine := pc.Placement[task]
			if !slices.ContainsFunc(m.Tasks, func(t *prg.Task) bool { return t.Name == task }) {
				report("config[%d]: %s places task %s, which NIC model %s does not have", i, pc.Node, task, m.Name)
			}
			if !slices.ContainsFunc(m.Engine, func(e *prg.Engine) bool { return e.Name == engine }) {
				report("config[%d]: %s places a task on engine %s, which NIC model %s does not have", i, pc.Node, engine, m.Name)
			}
		}
	}
	queue := func(where string, id int) {
		if !slices.ContainsFunc(m.Queues, func(q prg.Queue) bool { return q.ID == id }) {
			report("%s names receive queue %d, which NIC model %s does not have (it has %d)", where, id, m.Name, len(m.Queues))
		}
	}
	for i, q := range prev.Queues {
		queue(fmt.Sprintf("queues[%d]", i), q.ID)
	}
	for _, e := range prev.Endpoints {
		for _, id := range e.Queues {
			queue(fmt.Sprintf("endpoint %s", e.Name), id)
		}
	}
	return out
}
