package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/backends"
	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/internal/outdir"
	"github.com/dragonc/dragonc/load"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/streams"
)

func init() {
	builders = append(builders, newEmbedCmd)
}

func newEmbedCmd(e *env) *cobra.Command {
	var f embedFlags
	var o embedOpts
	var quiet bool
	c := &cobra.Command{
		Use:   "embed [flags] NIC STACK.lpg",
		Short: "configure a NIC for a stack and embed its LPG",
		Long: `The main job: searches a configuration of the NIC under a cost model,
embeds the stack's Logical Protocol Graph (hardware where the NIC can do
the work, software on each queue for the rest), and reports the plan.
NIC is a built-in model (dragonc nics) or a path to a .prg/.unicorn file.

With -o DIR it writes plan.json, linux.sh, NIC-specific files, fallback/
(a Go module for the software part) and embedding.dot into DIR and prints
a one-line summary. Warnings go to standard error, each once (plan.json
lists them too); --quiet leaves them out.

Exit: 0 done (warnings allowed), 1 input errors or no valid embedding, 2 usage.`,
		Example: `  dragonc embed 82599 examples/web_and_dns.lpg
  dragonc embed --cost priority 82599 examples/memcached_gold.lpg -o out/
  dragonc embed --explain RxL4UDPDemux 82599 examples/dns_ntp.lpg
  dragonc embed --explain dns 82599 examples/dns_ntp.lpg
  dragonc embed --svg tigon examples/web_ssh.lpg > plan.svg`,
		Args: nicAndStack,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if strings.HasPrefix(o.out, "-") {
				return usagef("-o needs a directory, got %q", o.out)
			}
			e.quiet = quiet
			return exitStatus(runEmbed(e, &f, &o, args[0], args[1]))
		},
	}
	f.register(c.Flags())
	c.Flags().StringVarP(&o.out, "output", "o", "", "write every output into this directory")
	c.Flags().StringVar(&o.explain, "explain", "", "say, queue by queue, why an LPG node is where it is; for an endpoint, its steering, delivery node and every decision on the way")
	c.Flags().BoolVar(&o.svg, "svg", false, "render the embedding picture as SVG with Graphviz (into DIR with -o)")
	c.Flags().BoolVar(&o.png, "png", false, "render the embedding picture as PNG with Graphviz (into DIR with -o)")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no warnings or notes: only the result and errors")
	c.MarkFlagsMutuallyExclusive("svg", "png")
	c.MarkFlagsMutuallyExclusive("explain", "output")
	c.MarkFlagsMutuallyExclusive("explain", "json")
	c.MarkFlagsMutuallyExclusive("json", "output")
	c.MarkFlagsMutuallyExclusive("json", "svg")
	c.MarkFlagsMutuallyExclusive("json", "png")
	c.MarkFlagsMutuallyExclusive("explain", "svg")
	c.MarkFlagsMutuallyExclusive("explain", "png")
	return c
}

type embedOpts struct {
	out, explain string
	svg, png     bool
}

// nicAndStack checks the two arguments of embed, verify, trace and bench,
// and catches them given the wrong way round.
func nicAndStack(cmd *cobra.Command, args []string) error {
	if len(args) != 2 {
		return usagef("want NIC and STACK.lpg, got %d argument(s)", len(args))
	}
	if looksLikeStack(args[0]) && !looksLikeStack(args[1]) {
		return usagef("the NIC comes first: dragonc %s %s %s", cmd.Name(), args[1], args[0])
	}
	if looksLikeStack(args[0]) {
		return usagef("%s is a stack file, not a NIC: give a built-in model (dragonc nics) or a .prg/.unicorn file first", args[0])
	}
	return nil
}

func looksLikeStack(arg string) bool {
	return slices.ContainsFunc(stackExts, func(ext string) bool { return strings.HasSuffix(arg, "."+ext) })
}

// embedFlags are the flags shared by embed and verify.
type embedFlags struct {
	cost, strategy, previous, copyEngine string
	target                               string
	asJSON                               bool
	goldPerQueue                         int
	// adapt, if set, adjusts the input before the search (dragonc run's
	// run.Adapt) and returns notes for stderr.
	adapt func(*embed.Input) []string
	// source, if set, is the stack file's text (an artefact's), read
	// instead of the file.
	source []byte
	// noSelfCheck skips embed's self-check (embed.Result.SelfCheck):
	// verify and trace check every frame themselves, and show them.
	noSelfCheck bool
	// calibration is --calibration: a calibration file, builtin (the
	// software VI's checked-in one) or "" (the model's table decides);
	// calibrationImplicit says it is the command's default (run and
	// build serve on the software VI), which a model without Virtual
	// Interfaces ignores.
	calibration         string
	calibrationImplicit bool
	// running, if set, is the plan a reload of dragonc run starts from
	// (the incremental search's previous plan, instead of --previous).
	running *plan.Plan
	// stack, if set, is the stack to plan, read already (a reload's).
	stack *lpg.Stack
}

// calibrationBuiltin names the checked-in calibration of the software VI.
const calibrationBuiltin = "builtin"

// servesOnSoftwareVI makes --calibration default to the software VI's
// checked-in calibration, for the commands that serve streams on it.
func (f *embedFlags) servesOnSoftwareVI(fs *pflag.FlagSet) {
	f.calibration = calibrationBuiltin
	fl := fs.Lookup("calibration")
	fl.DefValue = calibrationBuiltin
	fl.Usage = "the calibration that decides which streams go over a VI: a file of dragonc calibrate, or builtin, the software VI's checked-in one; dragonc run serves every VI on the software VI"
}

func (f *embedFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cost, "cost", embed.DefaultCost, "cost function: "+strings.Join(costmodel.Names(), ", "))
	fs.IntVar(&f.goldPerQueue, "gold-per-queue", costmodel.DefaultGoldPerQueue, "gold flows a queue may hold, for --cost dragonet-priority (Dragonet's goldFlowsPerQ)")
	fs.StringVar(&f.strategy, "strategy", string(embed.StrategyDefault), "search strategy: "+strings.Join(embed.Strategies(), ", "))
	fs.StringVar(&f.previous, "previous", "", "previous plan.json, for --strategy incremental")
	fs.BoolVar(&f.asJSON, "json", false, "machine-readable output")
	fs.StringVar(&f.copyEngine, "copy-engine", embed.DefaultCopyEngine, "host copy engine for bulk copies (a built-in model), or "+embed.NoCopyEngine)
	fs.StringVar(&f.target, "target", embed.DefaultTarget, "linux: use only what the NIC's Linux driver exposes; silicon: the whole NIC (a custom driver, DPDK, a research stack)")
	fs.StringVar(&f.calibration, "calibration", "", "on a model with Virtual Interfaces, decide which streams go over a VI by a calibration (a file of dragonc calibrate, or builtin: the software VI's checked-in one) instead of the model's latency table")
}

// loadCalibration reads --calibration; nil when it is unset, or is the
// command's default and the model has no Virtual Interfaces.
func (f *embedFlags) loadCalibration(e *env, m *prg.Model) (*streams.Calibration, bool) {
	if f.calibration == "" || f.calibrationImplicit && len(m.Engines(prg.EngineVIA)) == 0 {
		return nil, true
	}
	if f.calibration == calibrationBuiltin {
		c, err := streams.SoftwareVI()
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return nil, false
		}
		return c, true
	}
	b, ok := readFile(e, f.calibration)
	if !ok {
		return nil, false
	}
	c, err := streams.ReadCalibration(bytes.NewReader(b))
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %s: %v\n", displayName(f.calibration), err)
		return nil, false
	}
	return c, true
}

// validate rejects flag values that name nothing, before any work.
func (f *embedFlags) validate() error {
	if !slices.Contains(costmodel.Names(), f.cost) {
		return usagef("unknown cost function %q; choose %s", f.cost, strings.Join(costmodel.Names(), ", "))
	}
	if !slices.Contains(embed.Strategies(), f.strategy) {
		return usagef("unknown strategy %q; choose %s", f.strategy, strings.Join(embed.Strategies(), ", "))
	}
	if !slices.Contains(embed.Targets(), f.target) {
		return usagef("unknown target %q; choose %s", f.target, strings.Join(embed.Targets(), ", "))
	}
	if f.goldPerQueue < 1 {
		return usagef("--gold-per-queue must be at least 1, not %d", f.goldPerQueue)
	}
	if embed.Strategy(f.strategy) == embed.StrategyIncremental && f.previous == "" {
		return usagef("--strategy incremental needs --previous plan.json")
	}
	return nil
}

// plan loads the NIC and the stack and runs the embedder.
func (f *embedFlags) plan(e *env, nicArg, stackPath string) (*embed.Result, *lpg.Stack, bool) {
	fn, err := costmodel.ByName(f.cost)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return nil, nil, false
	}
	if _, ok := fn.(costmodel.DragonetPriority); ok {
		fn = costmodel.DragonetPriority{GoldPerQueue: f.goldPerQueue}
	}
	m, ok := loadNIC(e, nicArg)
	if !ok {
		return nil, nil, false
	}
	l := &load.File{Stack: f.stack}
	if f.stack == nil {
		src, ok := f.source, true
		if src == nil {
			src, ok = readFile(e, stackPath)
		}
		if !ok {
			return nil, nil, false
		}
		l = load.Parse(stackPath, src)
		printDiags(e, l.Diags, false)
		if l.Diags.HasErrors() {
			return nil, nil, false
		}
	}
	st := l.Stack
	if st == nil {
		if l.Graph == nil {
			fmt.Fprintf(e.stderr, "dragonc: %s holds neither a stack nor an LPG\n", stackPath)
			return nil, nil, false
		}
		st = &lpg.Stack{Name: l.Graph.Name} // an explicit LPG: no endpoints to steer
	}
	cal, ok := f.loadCalibration(e, m)
	if !ok {
		return nil, nil, false
	}
	opt := embed.Options{Cost: fn, Strategy: embed.Strategy(f.strategy), Target: f.target, CopyEngine: f.copyEngine, Calibration: cal}
	if f.running != nil {
		// A reload of dragonc run: the incremental search from the
		// running plan.
		opt.Strategy, opt.Previous = embed.StrategyIncremental, f.running
	}
	in, warnings, err := embed.NewInput(nicArg, m, st, l.Graph, opt)
	if err != nil {
		var dl diag.List
		if errors.As(err, &dl) {
			printDiags(e, dl, false)
		} else {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		}
		return nil, nil, false
	}
	for _, w := range warnings {
		e.warnf("%s", w)
	}
	if f.adapt != nil {
		for _, n := range f.adapt(in) {
			fmt.Fprintf(e.stderr, "dragonc run: %s\n", n)
		}
	}
	if f.previous != "" && f.running == nil {
		b, ok := readFile(e, f.previous)
		if !ok {
			return nil, nil, false
		}
		name := displayName(f.previous)
		prev, err := plan.Read(bytes.NewReader(b))
		if err != nil {
			sep := ": "
			var se *plan.SyntaxError
			if errors.As(err, &se) {
				sep = ":" // the error starts with LINE:COL
			}
			fmt.Fprintf(e.stderr, "dragonc: %s%s%v\n", name, sep, err)
			return nil, nil, false
		}
		if prev.NIC != nicArg || prev.Stack != st.Name {
			fmt.Fprintf(e.stderr, "dragonc: %s is the plan of stack %q on %s; this run embeds stack %q on %s\n", name, prev.Stack, prev.NIC, st.Name, nicArg)
			return nil, nil, false
		}
		if probs := embed.CheckPrevious(prev, m); len(probs) > 0 {
			const shown = 10 // a plan of another model can name thousands
			for _, p := range probs[:min(len(probs), shown)] {
				fmt.Fprintf(e.stderr, "dragonc: %s: %s\n", name, p)
			}
			if len(probs) > shown {
				fmt.Fprintf(e.stderr, "dragonc: %s: and %d more\n", name, len(probs)-shown)
			}
			fmt.Fprintf(e.stderr, "dragonc: %s was made for another model of %s; plan afresh without --strategy incremental\n", name, nicArg)
			return nil, nil, false
		}
		in.Previous = prev
	}
	r, err := embed.Run(in)
	if err != nil {
		var dl diag.List
		if errors.As(err, &dl) {
			printDiags(e, dl, false) // a model refused where it says what dragonc cannot honour
		} else {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		}
		return nil, nil, false
	}
	// Nothing is written or served from a plan its own check rejects.
	if !f.noSelfCheck {
		if err := r.SelfCheck(); err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return nil, nil, false
		}
	}
	r.Plan.DragoncVersion = version()
	return r, st, true
}

func runEmbed(e *env, f *embedFlags, o *embedOpts, nicArg, stackPath string) int {
	r, st, ok := f.plan(e, nicArg, stackPath)
	if !ok {
		return exitInput
	}
	// Warnings go to standard error, once, whatever is printed on
	// standard output (the report does not repeat them; plan.json keeps
	// them as data).
	for _, w := range r.Plan.Warnings {
		e.warnf("%s", w)
	}
	format := ""
	switch {
	case o.svg:
		format = "svg"
	case o.png:
		format = "png"
	}
	switch {
	case format != "" && o.out == "":
		return emitDot(e, dot.Plan(r), format)
	case o.explain != "":
		text, err := r.Explain(o.explain)
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		fmt.Fprint(e.stdout, text)
	case o.out != "":
		files, err := backends.Files(r, st, stackPath)
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		if format != "" {
			var pic bytes.Buffer
			sub := &env{stdout: &pic, stderr: e.stderr}
			if code := emitDot(sub, string(files["embedding.dot"]), format); code != exitOK {
				return code
			}
			files["embedding."+format] = pic.Bytes()
		}
		if err := writeDir(o.out, files); err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		entries := 0
		for _, c := range r.Plan.Config {
			entries += len(c.Entries)
		}
		refs := make([]string, 0, 2)
		for _, ref := range r.Plan.Cost.References() {
			refs = append(refs, ref.Name+" "+ref.Cost.String())
		}
		fmt.Fprintf(e.stdout, "dragonc: wrote %s: %d queues, %d filter entries, cost %s %s (%s)\n",
			o.out, len(r.Plan.Queues), entries, r.Plan.Cost.Function, r.Plan.Cost.Predicted(), strings.Join(refs, ", "))
	case f.asJSON:
		r.Plan.WriteJSON(e.stdout)
	default:
		r.WriteReport(e.stdout)
	}
	return exitOK
}

// writeDir writes the outputs into dir (internal/outdir: per-file atomic
// replacement, a manifest, a lock; nothing else in dir is touched). On
// SIGINT or SIGTERM the temporary files are removed before dragonc exits.
func writeDir(dir string, files map[string][]byte) error {
	var w outdir.Writer
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	defer func() {
		signal.Stop(sig)
		close(done)
	}()
	go func() {
		select {
		case s := <-sig:
			w.Cleanup()
			fmt.Fprintf(os.Stderr, "dragonc: %v: stopped; %s was left as it was before, but for the files already replaced\n", s, dir)
			os.Exit(exitInput)
		case <-done:
		}
	}()
	return w.Write(dir, files)
}
