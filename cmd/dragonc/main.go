// Command dragonc compiles host network stacks onto NICs. This package only
// parses flags, reads and writes files and chooses exit codes; every
// decision lives in a package with tests.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/bench/live"
)

// Exit codes are a contract (docs/cli.md).
const (
	exitOK    = 0
	exitInput = 1
	exitUsage = 2
)

// env is what a command may touch: its streams and the file system.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	// quiet drops warnings and notes (--quiet): standard error then holds
	// errors only.
	quiet bool
}

// warnf prints a warning on standard error, unless --quiet.
func (e *env) warnf(format string, args ...any) {
	if !e.quiet {
		fmt.Fprintf(e.stderr, "dragonc: warning: "+format+"\n", args...)
	}
}

// notef prints a note on standard error, unless --quiet.
func (e *env) notef(format string, args ...any) {
	if !e.quiet {
		fmt.Fprintf(e.stderr, "dragonc: note: "+format+"\n", args...)
	}
}

// exitStatus is returned by a command that has already said what went
// wrong; it carries the exit code.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit %d", int(s)) }

// usageError is a mistake in how dragonc was called: exit 2, one line.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// builders make the subcommands; each file adds its own.
var builders []func(e *env) *cobra.Command

func main() {
	// bench --live starts this program again as its Go load generator
	// where there is no C compiler.
	live.Child()
	// DRAGONC_CPUPROFILE=FILE writes a CPU profile of the run, for
	// dragonc's developers (go tool pprof FILE).
	if path := os.Getenv("DRAGONC_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit code. Tests call it
// in-process with their own streams.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	e := &env{stdout: stdout, stderr: stderr, stdin: stdin}
	defer func() {
		// Nothing a user types may crash dragonc; an internal error is still
		// reported as one, without a stack trace.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "dragonc: internal error: %v\n", r)
			code = exitInput
		}
	}()
	root := newRoot(e)
	if len(args) == 0 {
		root.SetOut(stderr)
		root.Usage()
		return exitUsage
	}
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := root.ExecuteC()
	var st exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &st):
		return int(st)
	}
	// Everything else is a usage error: one line naming the problem, and
	// where to read more.
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 && strings.HasPrefix(msg, "unknown command") {
		// cobra's own suggestion block, kept on one line.
		msg = msg[:i] + "; " + strings.Join(strings.Fields(strings.ReplaceAll(msg[i:], "\n\t", " ")), " ")
	}
	name := "dragonc"
	if cmd != nil && cmd != root {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, strings.TrimSpace(msg))
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	return exitUsage
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "dragonc",
		Short: "dragonc compiles a host network stack onto a NIC",
		Long: `dragonc compiles a host network stack onto a NIC: it configures the NIC's
filters, queues and offloads under a cost model, embeds as much of the
stack's protocol graph as the hardware can do, and generates Go code for
the rest.`,
		Example: `  dragonc embed 82599 examples/web_and_dns.lpg -o out/
  dragonc verify 82599 examples/web_and_dns.lpg
  dragonc help embed`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(e.stderr)
			cmd.Usage()
			return exitStatus(exitUsage)
		},
	}
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetVersionTemplate("dragonc {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		msg := err.Error()
		if strings.HasPrefix(msg, "unknown shorthand flag") {
			if i := strings.LastIndex(msg, " in "); i >= 0 {
				msg = "unknown flag " + msg[i+4:]
			}
		}
		return usageError{msg}
	})
	root.SuggestionsMinimumDistance = 2
	for _, b := range builders {
		c := b(e)
		c.SilenceUsage, c.SilenceErrors = true, true
		root.AddCommand(c)
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "print dragonc's version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, args []string) { fmt.Fprintf(e.stdout, "dragonc %s\n", version()) },
	})
	root.SetHelpCommand(helpCommand(root, e))
	// cobra's completion command prints its help and exits 0 when the
	// shell is missing or unknown; for a script that is an error.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.RunE = func(*cobra.Command, []string) error {
				return usagef("want a shell: bash, zsh, fish or powershell")
			}
		}
	}
	addCompletions(root)
	return root
}

// helpCommand is cobra's help with a suggestion for a misspelt topic.
func helpCommand(root *cobra.Command, e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				topic := strings.Join(args, " ")
				if s := root.SuggestionsFor(args[0]); len(s) > 0 {
					return usagef("no help topic %q; did you mean %q?", topic, s[0])
				}
				return usagef("no help topic %q", topic)
			}
			cmd.SetOut(e.stdout)
			return cmd.Help()
		},
	}
}

// version is the module version and VCS revision the binary was built
// from, as the go command recorded them.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev + dirty
	}
	return v
}

// normalizeArgs keeps the single-dash spelling of long flags working
// (`-json`, `-long`, as Go's flag package took them): a single-dash
// argument that names a long flag of any command becomes double-dash.
func normalizeArgs(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if long[name] && len(name) > 1 {
				out[i] = "-" + a
			}
		}
	}
	return out
}

// nArgs checks the number of positional arguments and names them in the
// message when it is wrong.
func nArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}

// minArgs is nArgs for "at least one".
func minArgs(names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usagef("want %s", names)
		}
		return nil
	}
}
