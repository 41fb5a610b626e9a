package embed

import (
	"fmt"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/streams"
)

// The defaults of a plan's choices: what `dragonc embed NIC STACK` uses
// without flags, and what a zero field of Options means. The CLI's flags
// show these as their defaults.
const (
	// DefaultCost is the cost function's name (costmodel.ByName).
	DefaultCost = "balance"
	// DefaultTarget is what the search may configure: what the NIC's
	// Linux driver exposes.
	DefaultTarget = TargetLinux
	// DefaultCopyEngine is the host copy engine bulk copies may use, a
	// built-in model with one copy engine (Intel I/OAT).
	DefaultCopyEngine = "ioat"
	// NoCopyEngine names no copy engine: bulk copies stay on the CPU.
	NoCopyEngine = "none"
)

// Options are a plan's choices besides the NIC and the stack, as dragonc
// embed's flags give them. A zero field takes its default.
type Options struct {
	// Cost is the cost function; nil is DefaultCost's.
	Cost costmodel.Function
	// Strategy is the search strategy; "" is StrategyDefault.
	Strategy Strategy
	// Previous is the earlier plan, for StrategyIncremental.
	Previous *plan.Plan
	// Target is TargetLinux (only what the model's Linux driver exposes,
	// when dragonc knows the driver) or TargetSilicon (the whole NIC);
	// "" is DefaultTarget.
	Target string
	// CopyEngine is a model with one copy engine (a built-in name or a
	// file) that bulk copies may use, or NoCopyEngine; "" is
	// DefaultCopyEngine.
	CopyEngine string
	// Calibration, if set, decides the streams of a model with Virtual
	// Interfaces (Input.Calibration).
	Calibration *streams.Calibration
}

// NewInput builds the input of a plan of the stack st on the NIC model m
// (shown as nic): the stack's LPG is g, or, when g is nil, derived from
// st; every choice opt leaves zero takes its default. It is the one place
// the CLI, dragonc run's API, bench, verify and the tests assemble an
// Input. The warnings say what could not be honoured as asked (a Linux
// target on a model whose driver dragonc does not know embeds on the
// whole NIC; a copy-engine file's own warnings).
func NewInput(nic string, m *prg.Model, st *lpg.Stack, g *graph.Graph, opt Options) (*Input, []string, error) {
	if g == nil {
		var err error
		if g, err = lpg.Derive(st); err != nil {
			return nil, nil, err
		}
	}
	cost := opt.Cost
	if cost == nil {
		var err error
		if cost, err = costmodel.ByName(DefaultCost); err != nil {
			return nil, nil, err
		}
	}
	strategy := opt.Strategy
	if strategy == "" {
		strategy = StrategyDefault
	}
	in := &Input{NIC: nic, Model: m, Stack: st, LPG: g, Cost: cost, Strategy: strategy, Previous: opt.Previous, Calibration: opt.Calibration}
	var warnings []string
	target := opt.Target
	if target == "" {
		target = DefaultTarget
	}
	// A model whose stage is eBPF (linux-xdp) is what the kernel offers
	// any driver: no driver facts restrict it.
	if target == TargetLinux && m.Props["stage"].Str != "ebpf" {
		d, why := nics.DriverFor(m)
		if d == nil {
			warnings = append(warnings, why+"; embedding on the whole NIC as --target silicon does")
		}
		in.Driver = d
	}
	engine := opt.CopyEngine
	if engine == "" {
		engine = DefaultCopyEngine
	}
	if engine != NoCopyEngine {
		cm, diags, err := nics.Load(engine)
		if err != nil {
			return nil, nil, err
		}
		if diags.HasErrors() {
			return nil, nil, diags
		}
		if cm == nil {
			return nil, nil, fmt.Errorf("%s holds no NIC model; a copy engine is a built-in model (dragonc nics) or a .prg/.unicorn file", engine)
		}
		for _, d := range diags {
			if d.Severity != diag.Error {
				warnings = append(warnings, d.String())
			}
		}
		eng, ok := CopyEngineOf(cm)
		if !ok {
			return nil, nil, fmt.Errorf("%s has %d copy engines; --copy-engine takes a model with one", engine, len(cm.Engines(prg.EngineCopy)))
		}
		in.CopyEngine = eng
	}
	return in, warnings, nil
}

// CopyEngineOf returns a model's copy engine: a model serves as one when
// it has exactly one.
func CopyEngineOf(m *prg.Model) (*prg.Engine, bool) {
	engs := m.Engines(prg.EngineCopy)
	if len(engs) != 1 {
		return nil, false
	}
	return engs[0], true
}
