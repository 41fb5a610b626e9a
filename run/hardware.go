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
	refused            []linux.Step
	reasons            []string
	// skipped are the steps this kernel has nothing for (no rps_cpus
	// without CONFIG_RPS), with why.
	skipped        []string
	applied, steps int
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
	h := &hardware{dir: dir, script: filepath.Join(dir, "linux.sh"), iface: iface}
	if err := os.WriteFile(h.script, []byte(linux.Script(r, r.Plan.Stack+" (dragonc run)")), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	steps := linux.Steps(r)
	h.steps = len(steps)
	args := []string{h.script, "--keep-going"}
	if force {
		args = append(args, "--force")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("sh", append(args, iface)...)
	cmd.Env = append(os.Environ(), "DRAGONC_STATE="+filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\nlinux.sh: "); i >= 0 {
			msg = msg[i+1:]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && msg != "" {
			return nil, usage("applying the plan to %s: %s", iface, strings.TrimPrefix(msg, "linux.sh: "))
		}
		return nil, fmt.Errorf("applying the plan to %s: %w: %s", iface, err, msg)
	}
	for _, l := range strings.Split(stdout.String(), "\n") {
		m := stepLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if n < 1 || n > len(steps) {
			h.undo()
			return nil, fmt.Errorf("linux.sh %s step %d of %d", m[1], n, len(steps))
		}
		if m[1] == "skipped" {
			h.skipped = append(h.skipped, fmt.Sprintf("%s: %s", steps[n-1].Desc, m[3]))
			continue
		}
		h.refused = append(h.refused, steps[n-1])
		h.reasons = append(h.reasons, m[3])
	}
	h.applied = len(steps) - len(h.refused) - len(h.skipped)
	return h, nil
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
