package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/backends/nicconf"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
)

func init() {
	register(&command{name: "embed", summary: "configure a NIC for a stack and embed its LPG", run: runEmbed, usage: `Usage: dragonc embed [flags] NIC STACK.lpg

The main job: searches a configuration of the NIC under a cost model,
embeds the stack's Logical Protocol Graph (hardware where the NIC can do
the work, software on each queue for the rest), and reports the plan.
NIC is a built-in model (dragonc nics) or a path to a .prg/.unicorn file.

Flags:
    -o DIR            write the outputs into DIR and print a summary: plan.json,
                      linux.sh, NIC-specific files, fallback/ (a Go module for
                      the software part) and embedding.dot
    --cost NAME       balance (default), priority or cycles
    --strategy NAME   default, dragonet-greedy or incremental
    --previous FILE   the previous plan.json, for --strategy incremental
    --copy-engine M   host copy engine model for bulk copies (default ioat; none)
    --json            print plan.json on stdout instead of the report
    --explain NODE    say, queue by queue, why an LPG node is where it is
    --svg, --png      render the embedding picture with Graphviz (into DIR with
                      -o, else on stdout)

Exit: 0 done (warnings allowed), 1 input errors or no valid embedding, 2 usage.

Examples:
    dragonc embed 82599 examples/web_and_dns.lpg
    dragonc embed --cost priority 82599 examples/memcached_gold.lpg -o out/
    dragonc embed --explain RxL4UDPDemux 82599 examples/dns_ntp.lpg
`})
}

// embedFlags are the flags shared by embed and verify.
type embedFlags struct {
	cost, strategy, previous, copyEngine string
	asJSON                               bool
}

func (f *embedFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&f.cost, "cost", "balance", "cost function: balance, priority or cycles")
	fs.StringVar(&f.strategy, "strategy", "default", "search strategy: default, dragonet-greedy or incremental")
	fs.StringVar(&f.previous, "previous", "", "previous plan.json for the incremental strategy")
	fs.BoolVar(&f.asJSON, "json", false, "machine-readable output")
	fs.StringVar(&f.copyEngine, "copy-engine", "ioat", "host copy engine for bulk copies (a built-in model), or none")
}

// plan loads the NIC and the stack and runs the embedder.
func (f *embedFlags) plan(e *env, nicArg, stackPath string) (*embed.Result, *lpg.Stack, bool) {
	fn, err := costmodel.ByName(f.cost)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return nil, nil, false
	}
	m, _, ok := loadNIC(e, nicArg)
	if !ok {
		return nil, nil, false
	}
	src, ok := readFile(e, stackPath)
	if !ok {
		return nil, nil, false
	}
	l := load(stackPath, src)
	printDiags(e, l.diags, false)
	if l.diags.HasErrors() {
		return nil, nil, false
	}
	st := l.stack
	if st == nil {
		if l.graph == nil {
			fmt.Fprintf(e.stderr, "dragonc: %s holds neither a stack nor an LPG\n", stackPath)
			return nil, nil, false
		}
		st = &lpg.Stack{Name: l.graph.Name} // an explicit LPG: no endpoints to steer
	}
	in := &embed.Input{NIC: nicArg, Model: m, Stack: st, LPG: l.graph, Cost: fn, Strategy: f.strategy}
	if f.copyEngine != "" && f.copyEngine != "none" {
		cm, _, ok := loadNIC(e, f.copyEngine)
		if !ok {
			return nil, nil, false
		}
		for _, eng := range cm.Engine {
			if eng.Kind == "copy" {
				in.CopyEngine = eng
			}
		}
		if in.CopyEngine == nil {
			fmt.Fprintf(e.stderr, "dragonc: %s has no copy engine\n", f.copyEngine)
			return nil, nil, false
		}
	}
	if f.previous != "" {
		b, ok := readFile(e, f.previous)
		if !ok {
			return nil, nil, false
		}
		prev, err := embed.ReadPlan(bytes.NewReader(b))
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %s: %v\n", f.previous, err)
			return nil, nil, false
		}
		in.Previous = prev
	}
	r, err := embed.Run(in)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return nil, nil, false
	}
	return r, st, true
}

// outputs renders every file of embed -o.
func outputs(r *embed.Result, st *lpg.Stack, source string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var b bytes.Buffer
	if err := r.Plan.WriteJSON(&b); err != nil {
		return nil, err
	}
	files["plan.json"] = b.Bytes()
	files["linux.sh"] = []byte(linux.Script(r, source))
	for name, data := range nicconf.Files(r, source) {
		files[name] = data
	}
	fb, err := gofallback.Generate(r, st, gofallback.Options{Source: source, Seed: 1})
	if err != nil {
		return nil, err
	}
	for name, data := range fb {
		files["fallback/"+name] = data
	}
	files["embedding.dot"] = []byte(dot.Plan(r))
	return files, nil
}

func runEmbed(e *env, args []string) int {
	fs := newFlags(e, "embed", lookup("embed").usage)
	var f embedFlags
	f.register(fs)
	out := fs.String("o", "", "output directory")
	explain := fs.String("explain", "", "explain where an LPG node is placed")
	svg := fs.Bool("svg", false, "render the embedding picture as SVG with Graphviz")
	png := fs.Bool("png", false, "render the embedding picture as PNG with Graphviz")
	if ok, code := parseFlags(fs, interleave(args)); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprint(e.stderr, lookup("embed").usage)
		return exitUsage
	}
	r, st, ok := f.plan(e, fs.Arg(0), fs.Arg(1))
	if !ok {
		return exitInput
	}
	for _, w := range r.Plan.Warnings {
		fmt.Fprintf(e.stderr, "dragonc: warning: %s\n", w)
	}
	format := ""
	switch {
	case *svg && *png:
		fmt.Fprintln(e.stderr, "dragonc: choose one of --svg and --png")
		return exitUsage
	case *svg:
		format = "svg"
	case *png:
		format = "png"
	}
	switch {
	case format != "" && *out == "":
		return emitDot(e, dot.Plan(r), format)
	case *explain != "":
		text, err := r.Explain(*explain)
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		fmt.Fprint(e.stdout, text)
	case *out != "":
		files, err := outputs(r, st, fs.Arg(1))
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
		if err := writeDir(*out, files); err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
			return exitInput
		}
		entries := 0
		for _, c := range r.Plan.Config {
			entries += len(c.Entries)
		}
		fmt.Fprintf(e.stdout, "dragonc: wrote %s: %d queues, %d filter entries, cost %s %s (software only %s, RSS only %s)\n",
			*out, len(r.Plan.Queues), entries, r.Plan.Cost.Function, fmtCost(r.Plan.Cost.Kind, r.Plan.Cost.Value),
			fmtCost(r.Plan.Cost.SoftwareOnly.Kind, r.Plan.Cost.SoftwareOnly.Value), fmtCost(r.Plan.Cost.RSSOnly.Kind, r.Plan.Cost.RSSOnly.Value))
	case f.asJSON:
		r.Plan.WriteJSON(e.stdout)
	default:
		r.WriteReport(e.stdout)
	}
	return exitOK
}

func fmtCost(kind string, v float64) string {
	if kind == "reject" {
		return fmt.Sprintf("reject(%.4g)", v)
	}
	if kind == "ok" {
		return "ok"
	}
	return fmt.Sprintf("%.4g", v)
}

// interleave lets flags follow positional arguments (dragonc embed 82599
// stack.lpg -o out/), as the CLI contract shows them.
func interleave(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && takesValue(a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func takesValue(flag string) bool {
	switch strings.TrimLeft(flag, "-") {
	case "json", "v", "w", "l", "svg", "png", "long", "h", "help":
		return false
	}
	return true
}

// writeDir writes files into dir through a temporary directory beside it,
// renamed into place at the end: a failure never leaves a half-written
// output directory. An existing dir is replaced only if it holds nothing
// but dragonc outputs.
func writeDir(dir string, files map[string][]byte) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, data := range files {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "plan.json")); err != nil {
			entries, _ := os.ReadDir(dir)
			if len(entries) > 0 {
				return fmt.Errorf("%s exists and does not look like a dragonc output directory (no plan.json); not replacing it", dir)
			}
		}
		old := dir + ".old"
		os.RemoveAll(old)
		if err := os.Rename(dir, old); err != nil {
			return err
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.Rename(old, dir)
			return err
		}
		return os.RemoveAll(old)
	}
	return os.Rename(tmp, dir)
}
