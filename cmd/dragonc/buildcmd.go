package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/nics"
	drun "github.com/dragonc/dragonc/run"
)

func init() {
	builders = append(builders, newBuildCmd)
}

// artefactFlags are the embed flags an artefact keeps: what its plan was
// made with.
// A --calibration file is read again when the program serves.
var artefactFlags = []string{"cost", "gold-per-queue", "strategy", "copy-engine", "target", "calibration"}

func newBuildCmd(e *env) *cobra.Command {
	var f embedFlags
	var out string
	c := &cobra.Command{
		Use:   "build [flags] NIC STACK.lpg -o FILE",
		Short: "the stack's server as one program, to serve without the go command",
		Long: `Plans the stack as dragonc run does, builds the generated code into the
program run serves it with, and writes FILE: this dragonc with the stack,
its plan's flags and that program appended. On the serving host,
FILE run IFACE serves the stack as dragonc run NIC STACK.lpg IFACE does,
with the same flags and output, and needs no go command; FILE is dragonc
in every other way. FILE is statically linked when this dragonc is
(build it with CGO_ENABLED=0 go install ./cmd/dragonc); build says which.
NIC is a built-in model.
Exit: 0 written, 1 errors, 2 usage.`,
		Example: `  dragonc build linux-xdp examples/dns_ntp.lpg -o dns-server
  scp dns-server host:
  ssh host ./dns-server run --detach eth1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want NIC and STACK.lpg, got %d argument(s)", len(args))
			}
			return nicAndStack(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			f.calibrationImplicit = !cmd.Flags().Changed("calibration")
			if out == "" {
				return usagef("build needs -o FILE")
			}
			if f.previous != "" {
				return usagef("build plans afresh: --previous and --strategy incremental name a file the serving host would need")
			}
			return exitStatus(runBuild(e, cmd.Flags(), &f, args[0], args[1], out))
		},
	}
	f.register(c.Flags())
	f.servesOnSoftwareVI(c.Flags())
	c.Flags().StringVarP(&out, "output", "o", "", "the program to write")
	return c
}

func runBuild(e *env, fs *pflag.FlagSet, f *embedFlags, nicArg, stackPath, out string) int {
	if !slices.Contains(nics.Names(), nicArg) {
		fmt.Fprintf(e.stderr, "dragonc: build takes a built-in NIC model (dragonc nics), not %s\n", nicArg)
		return exitUsage
	}
	src, ok := readFile(e, stackPath)
	if !ok {
		return exitInput
	}
	f.adapt = drun.Adapt
	f.source = src
	r, st, ok := f.plan(e, nicArg, stackPath)
	if !ok {
		return exitInput
	}
	work, err := os.MkdirTemp("", "dragonc-build-")
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	defer os.RemoveAll(work)
	progress := func(format string, args ...any) { fmt.Fprintf(e.stderr, "dragonc build: "+format+"\n", args...) }
	helper, key, err := drun.HelperFor(r, st, work, progress)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	a := drun.Artefact{NIC: nicArg, Stack: filepath.Base(stackPath), Src: src, Embed: map[string]string{}, HelperKey: key, GoVersion: runtime.Version()}
	for _, name := range artefactFlags {
		a.Embed[name] = fs.Lookup(name).Value.String()
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	static, err := drun.BuildArtefact(out, exe, a, helper)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: writing %s: %v\n", out, err)
		return exitInput
	}
	fi, _ := os.Stat(out)
	link := "statically linked"
	if !static {
		link = "linked against the C library as this dragonc is (CGO_ENABLED=0 go install ./cmd/dragonc makes both static)"
	}
	fmt.Fprintf(e.stderr, "dragonc build: wrote %s (%.1f MiB, %s): stack %s on %s; serve it with %s run IFACE, no go command needed\n", out, float64(fi.Size())/(1<<20), link, st.Name, nicArg, out)
	if f.asJSON {
		json.NewEncoder(e.stdout).Encode(map[string]any{"file": out, "bytes": fi.Size(), "static": static, "stack": st.Name, "nic": nicArg, "embed": a.Embed, "helper_key": key})
	}
	return exitOK
}

// fromArtefact makes a run of this program's artefact: its NIC and stack,
// and the embed flags it was built with (a different value given on the
// command line is an error).
func fromArtefact(a *drun.Artefact, fs *pflag.FlagSet, f *embedFlags) error {
	for _, name := range artefactFlags {
		fl := fs.Lookup(name)
		want, ok := a.Embed[name]
		if !ok || fl == nil {
			continue
		}
		if fl.Changed && fl.Value.String() != want {
			return usagef("--%s %s: this program serves the plan it was built with (--%s %s)", name, fl.Value.String(), name, want)
		}
		if err := fl.Value.Set(want); err != nil {
			return err
		}
	}
	f.source = a.Src
	return nil
}
