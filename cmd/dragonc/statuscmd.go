package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	drun "github.com/dragonc/dragonc/run"
)

func init() {
	builders = append(builders, newStatusCmd, newStopCmd)
}

// statusEntry is one running stack as `status --json` prints it.
type statusEntry struct {
	drun.State
	// Name is what status and stop take to name it: the interface, or
	// IFACE@NETNS for a run in another network namespace.
	Name  string `json:"name"`
	Alive bool   `json:"alive"`
	// UptimeSeconds is how long it has run; ReportAge how old the latest
	// counters are (they are written at each report, --every).
	UptimeSeconds float64      `json:"uptime_seconds"`
	ReportAge     float64      `json:"report_age_seconds,omitempty"`
	Report        *drun.Report `json:"report,omitempty"`
	// Load is the load measured between the latest two reports beside
	// the plan's prediction.
	Load *drun.Load `json:"load,omitempty"`
}

func newStatusCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [flags] [IFACE]",
		Short: "show the stacks dragonc run serves on this host",
		Long: `Lists every stack dragonc run serves (in the foreground or detached):
interface, pid, stack and NIC, socket kind, receive loops and their
cores, eBPF program ids, pinned objects, uptime, the latest counters
with the kernel's socket drops (written at each report, --every), and
the load measured between the latest two reports beside the plan's
prediction: each endpoint's frame rate against its declared rate, each
queue's share of the endpoints' frames against the cost model's. A run
that is gone but left state behind (killed with SIGKILL) is shown as not
alive; dragonc stop IFACE removes what it left.
The state lives in /run/dragonc ($DRAGONC_RUN_DIR).
Exit: 0, or 1 when IFACE is given and nothing serves it.`,
		Example: `  dragonc status
  dragonc status veth0 --json | jq '.[0].report.queues'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runStatus(e, args, asJSON))
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "an array of running stacks as JSON")
	return c
}

func runStatus(e *env, args []string, asJSON bool) int {
	ifaces, err := drun.Running()
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if len(args) == 1 {
		ifaces = []string{}
		if s, err := drun.ReadState(args[0]); err == nil {
			ifaces = append(ifaces, s.Name())
		}
	}
	entries := []statusEntry{}
	for _, name := range ifaces {
		s, err := drun.ReadState(name)
		if err != nil {
			fmt.Fprintf(e.stderr, "dragonc: %s: %v\n", name, err)
			continue
		}
		en := statusEntry{State: *s, Name: name, Alive: s.Alive(), UptimeSeconds: time.Since(s.Started).Round(time.Second).Seconds()}
		if r, at, err := drun.LatestReport(name); err == nil {
			en.Report, en.ReportAge = r, time.Since(at).Round(time.Millisecond).Seconds()
		}
		if l, err := drun.LatestLoad(name); err == nil {
			en.Load = l
		}
		entries = append(entries, en)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(entries)
	} else {
		for _, en := range entries {
			writeStatus(e, en)
		}
		if len(entries) == 0 && len(args) == 0 {
			fmt.Fprintln(e.stderr, "dragonc: no stack is served on this host")
		}
	}
	if len(args) == 1 && len(entries) == 0 {
		fmt.Fprintf(e.stderr, "dragonc: nothing serves %s\n", args[0])
		return exitInput
	}
	return exitOK
}

func writeStatus(e *env, en statusEntry) {
	w := e.stdout
	state := "serving"
	switch {
	case !en.Alive:
		state = "gone (dragonc stop " + en.Iface + " removes what it left)"
	case !en.Serving:
		state = "starting"
	}
	mode := "foreground"
	if en.Detached {
		mode = "detached"
	}
	where := en.Iface
	if en.Name != en.Iface {
		where += " (network namespace net:[" + en.Netns + "]; dragonc stop " + en.Name + ")"
	}
	fmt.Fprintf(w, "%s: stack %s (%s), pid %d, %s, %s, up %s\n", where, en.Stack, en.NIC, en.PID, mode, state, time.Duration(en.UptimeSeconds*float64(time.Second)))
	var loops []string
	for _, q := range en.Queues {
		loops = append(loops, fmt.Sprintf("%d on core %d", q.ID, q.Core))
	}
	fmt.Fprintf(w, "  socket %s (%d a queue), queues %s\n", orNone(en.Socket), en.SocketsPerQueue, strings.Join(loops, ", "))
	var progs []string
	for _, p := range en.Programs {
		progs = append(progs, fmt.Sprintf("%s id %d (%s)", p.Name, p.ID, p.Type))
	}
	if len(progs) > 0 {
		fmt.Fprintf(w, "  programs %s\n", strings.Join(progs, ", "))
	}
	if en.Pinned != "" {
		fmt.Fprintf(w, "  pinned in %s\n", en.Pinned)
	}
	if en.Metrics != "" {
		fmt.Fprintf(w, "  metrics at %s\n", en.Metrics)
	}
	if en.Report != nil {
		fmt.Fprintf(w, "  counters (%.1f s ago):\n", en.ReportAge)
		var b strings.Builder
		en.Report.WriteText(&b)
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	if en.Load != nil {
		var b strings.Builder
		en.Load.WriteText(&b)
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func newStopCmd(e *env) *cobra.Command {
	var wait time.Duration
	var asJSON bool
	c := &cobra.Command{
		Use:   "stop [flags] IFACE",
		Short: "stop the stack dragonc run serves on IFACE, and clean up",
		Long: `Stops the run serving IFACE (SIGTERM; SIGKILL after --wait), then removes
what it left: its pinned eBPF programs, maps and links (which detaches
them), the settings a hardware plan changed (the plan's linux.sh --undo),
and its state. It also cleans up after a run that was killed. Stopping
an interface nothing serves is not an error.
Exit: 0 stopped or nothing to stop, 1 errors.`,
		Example: `  dragonc stop veth0`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want IFACE, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			msgs, err := drun.Stop(args[0], wait)
			if asJSON {
				out := map[string]any{"iface": args[0], "done": msgs}
				if msgs == nil {
					out["done"] = []string{}
				}
				if err != nil {
					out["error"] = err.Error()
				}
				json.NewEncoder(e.stdout).Encode(out)
			} else {
				for _, m := range msgs {
					fmt.Fprintf(e.stderr, "dragonc stop: %s\n", m)
				}
			}
			if err != nil {
				fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
				return exitStatus(exitInput)
			}
			return nil
		},
	}
	c.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long the run has to stop after SIGTERM")
	c.Flags().BoolVar(&asJSON, "json", false, "what was done, as JSON")
	return c
}

// detachArgs rebuilds the command line of a detached run: the command
// and its flags as given, without --detach.
func detachArgs(cmd *cobra.Command, args []string) []string {
	out := []string{cmd.Name()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "detach" {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return append(out, args...)
}

// detach starts the run in the background (drun.Detach) and says how to
// watch and stop it.
func detach(e *env, cmd *cobra.Command, args []string, iface string, asJSON bool) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	pid, err := drun.Detach(exe, detachArgs(cmd, args), iface, e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	if asJSON {
		json.NewEncoder(e.stdout).Encode(map[string]any{"event": "detached", "iface": iface, "pid": pid})
	}
	fmt.Fprintf(e.stderr, "dragonc run: detached as pid %d; dragonc status %s shows it, dragonc stop %s stops it\n", pid, iface, iface)
	return exitOK
}
