package run

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/backends/linux"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/prg"
)

// Adapt prepares the embedding of a hardware plan that dragonc run will
// serve. AF_XDP and packet rings carry neither the receive descriptor's
// checksum verdicts nor a request for the NIC to fill checksums on
// transmit, so the stack must check and fill checksums itself: the
// checksum switches the driver exposes are fixed off in the plan and left
// as they are on the interface (the kernel's own traffic keeps them).
// It returns a note saying what it fixed.
func Adapt(in *dembed.Input) []string {
	if in.Driver == nil || len(in.Driver.Enums) == 0 {
		return nil
	}
	d := *in.Driver
	if in.Fixed == nil {
		in.Fixed = map[string]string{}
	}
	var fixed []string
	for node, feature := range in.Driver.Enums {
		if sp := in.Model.Space(node); sp != nil && sp.Kind == prg.Enum {
			for _, c := range sp.Choices {
				if c == "off" {
					in.Fixed[node] = "off"
					fixed = append(fixed, feature)
				}
			}
		}
	}
	d.Enums = nil
	in.Driver = &d
	if len(fixed) == 0 {
		return nil
	}
	return []string{"the stack checks and fills checksums itself (AF_XDP and packet rings carry no checksum verdicts); the interface's checksum offloads are left as they are"}
}

// hardware is a hardware plan applied to an interface: what the driver
// refused, and how to undo the rest.
type hardware struct {
	dir, script, iface string
	force              bool
	refused            []linux.Step
	reasons            []string
	// skipped are the steps this kernel has nothing for (no rps_cpus
	// without CONFIG_RPS), with why.
	skipped        []string
	applied, steps int
	// What a reload changes (reloadhw.go): the ntuple rules the NIC
	// holds (held, at their locations) and those the driver refused,
	// which the eBPF stage steers; the refused steps that are not rules
	// (the stage takes over for them as long as the settings stay);
	// the plan's settings besides its rules (linux.Settings); whether
	// ntuple filters were turned on; and the scripts of reloads written.
	held, refusedRules []linux.Rule
	other              []linux.Step
	settings           []string
	ntuple             bool
	changes            int
}

// stepLine is linux.sh --keep-going's line for a step it did not apply:
// refused by the driver or the kernel, or skipped as not in this kernel.
var stepLine = regexp.MustCompile(`^(refused|skipped) (\d+): (.*)$`)

// applyHardware runs the plan's linux.sh on the interface with
// --keep-going: every step the driver takes stays applied until undo.
func applyHardware(r *dembed.Result, iface string, force bool, dir string) (*hardware, error) {
	// The script and its undo record stay in dir until undo, where
	// `dragonc stop` finds them after a crash.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	h := &hardware{dir: dir, script: filepath.Join(dir, "linux.sh"), iface: iface, force: force}
	if err := os.WriteFile(h.script, []byte(linux.Script(r, r.Plan.Stack+" (dragonc run)")), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	steps := linux.Steps(r)
	h.steps = len(steps)
	args := []string{"--keep-going"}
	if force {
		args = append(args, "--force")
	}
	notApplied, err := h.run(h.script, len(steps), append(args, iface)...)
	if errors.Is(err, errStepNumber) {
		// linux.sh ran, and said something that is not of its steps.
		h.undo()
		return nil, err
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	rules := linux.Rules(r)
	h.settings = linux.Settings(r)
	for i, st := range steps {
		n, ok := notApplied[i+1]
		switch {
		case ok && n.kind == "skipped":
			h.skipped = append(h.skipped, fmt.Sprintf("%s: %s", st.Desc, n.why))
		case ok:
			h.refused = append(h.refused, st)
			h.reasons = append(h.reasons, n.why)
		}
		switch {
		case st.Kind == linux.StepRule && ok:
			h.refusedRules = append(h.refusedRules, rules[0])
		case st.Kind == linux.StepRule:
			h.held = append(h.held, rules[0])
		case ok && n.kind == "refused":
			h.other = append(h.other, st)
		case st.Kind == linux.StepFeature && st.Feature == "ntuple":
			h.ntuple = true
		}
		if st.Kind == linux.StepRule {
			rules = rules[1:]
		}
	}
	h.applied = len(steps) - len(h.refused) - len(h.skipped)
	return h, nil
}

// errStepNumber: a script reported a step it does not have.
var errStepNumber = errors.New("no such step")

// notApplied is a step a script did not apply: "refused" or "skipped",
// and why.
type notApplied struct{ kind, why string }

// run runs a script of steps (linux.sh --keep-going, a reload's rule
// script) of the given number of steps on the run's record, and returns
// the steps it did not apply by their numbers.
func (h *hardware) run(script string, steps int, args ...string) (map[int]notApplied, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("sh", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "DRAGONC_STATE="+filepath.Join(h.dir, "state"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		name := filepath.Base(script)
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"+name+": "); i >= 0 {
			msg = msg[i+1:]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && msg != "" {
			return nil, usage("applying the plan to %s: %s", h.iface, strings.TrimPrefix(msg, name+": "))
		}
		return nil, fmt.Errorf("applying the plan to %s: %w: %s", h.iface, err, msg)
	}
	out := map[int]notApplied{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		m := stepLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if n < 1 || n > steps {
			return nil, fmt.Errorf("%s %s step %d of %d: %w", filepath.Base(script), m[1], n, steps, errStepNumber)
		}
		out[n] = notApplied{m[1], m[3]}
	}
	return out, nil
}

// report says what the driver took and what it refused, one line a kind.
func (h *hardware) report() []string {
	out := []string{fmt.Sprintf("the driver of %s took %d of the plan's %d linux.sh steps", h.iface, h.applied, h.steps)}
	rules, first := 0, ""
	masks, firstMask := 0, ""
	for i, s := range h.refused {
		switch s.Kind {
		case linux.StepRule:
			if rules == 0 {
				first = h.reasons[i]
			}
			rules++
		case linux.StepIRQ:
			out = append(out, fmt.Sprintf("refused: %s: %s (the receive loops are pinned to their cores all the same)", s.Desc, h.reasons[i]))
		case linux.StepRPS, linux.StepXPS:
			if masks == 0 {
				firstMask = s.Desc + ": " + h.reasons[i]
			}
			masks++
		default:
			out = append(out, fmt.Sprintf("refused: %s: %s", s.Desc, h.reasons[i]))
		}
	}
	if rules > 0 {
		out = append(out, fmt.Sprintf("refused: %d filter rule(s), the first: %s", rules, first))
	}
	if masks > 0 {
		out = append(out, fmt.Sprintf("refused: %d RPS/XPS mask(s), the first: %s (the kernel's own processing of those queues, for programs on kernel sockets, stays where their interrupts are)", masks, firstMask))
	}
	if len(h.skipped) > 0 {
		out = append(out, fmt.Sprintf("skipped: %d step(s) this kernel has nothing for, the first: %s", len(h.skipped), h.skipped[0]))
	}
	return out
}

// undo restores what applyHardware changed and removes its files.
func (h *hardware) undo() error {
	defer os.RemoveAll(h.dir)
	cmd := exec.Command("sh", h.script, "--undo", h.iface)
	cmd.Env = append(os.Environ(), "DRAGONC_STATE="+filepath.Join(h.dir, "state"))
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "nothing to undo") {
		return fmt.Errorf("restoring %s: %w: %s", h.iface, err, strings.TrimSpace(string(out)))
	}
	return nil
}
