package main

import (
	"io"
	"net"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/load"
	"github.com/dragonc/dragonc/nics"
	drun "github.com/dragonc/dragonc/run"
)

// Shell completion (dragonc completion SHELL): what each argument and
// flag completes to. Enumerations complete to the lists their flags are
// checked against, so the two cannot drift apart.

// File extensions of each kind of input, without the dot.
var (
	modelExts = dsl.Extensions(func(k dsl.FileKind) bool { return k.Model })
	stackExts = dsl.Extensions(func(k dsl.FileKind) bool { return k.Stack })
	graphExts = dsl.Extensions(func(dsl.FileKind) bool { return true })
)

// argCompletions completes positional arguments, by command name: the
// completer of each position; the last one repeats when the command takes
// any number.
var argCompletions = map[string]struct {
	args   []cobra.CompletionFunc
	repeat bool
}{
	"embed":    {args: []cobra.CompletionFunc{completeNIC, completeFiles(stackExts...)}},
	"verify":   {args: []cobra.CompletionFunc{completeNIC, completeFiles(stackExts...)}},
	"trace":    {args: []cobra.CompletionFunc{completeNIC, completeFiles(stackExts...)}},
	"bench":    {args: []cobra.CompletionFunc{completeNIC, completeFiles(stackExts...)}},
	"run":      {args: []cobra.CompletionFunc{completeNIC, completeFiles(stackExts...), completeIface}},
	"lpg":      {args: []cobra.CompletionFunc{completeFiles(stackExts...)}},
	"dot":      {args: []cobra.CompletionFunc{completeGraphOrNIC}},
	"check":    {args: []cobra.CompletionFunc{completeFiles(graphExts...)}, repeat: true},
	"fmt":      {args: []cobra.CompletionFunc{completeFiles(graphExts...)}, repeat: true},
	"discover": {args: []cobra.CompletionFunc{completeIface}},
	"status":   {args: []cobra.CompletionFunc{completeIface}},
	"stop":     {args: []cobra.CompletionFunc{completeIface}},
	"nics":     {},
	"version":  {},
}

// flagCompletions completes flag values, by flag name, or by "COMMAND
// FLAG" where a flag means something else on one command.
var flagCompletions = map[string]cobra.CompletionFunc{
	"cost":            values(costmodel.Names),
	"strategy":        values(embed.Strategies),
	"target":          values(embed.Targets),
	"socket":          values(drun.Sockets),
	"copy-engine":     completeCopyEngine,
	"previous":        completeFiles("json"),
	"pcap":            completeFiles("pcap", "pcapng"),
	"explain":         completeExplain,
	"embed output":    completeDirs,
	"discover output": completeFiles(modelExts...),
}

// addCompletions registers the completers above on every command of the
// tree that has no completer of its own, and turns off file completion for
// the flags that take no file (numbers, durations, switches).
func addCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if a, ok := argCompletions[c.Name()]; ok && c.ValidArgsFunction == nil && c.Parent() == root {
			c.ValidArgsFunction = positional(a.args, a.repeat)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if _, ok := c.GetFlagCompletionFunc(f.Name); ok {
				return
			}
			fn, ok := flagCompletions[c.Name()+" "+f.Name]
			if !ok {
				fn, ok = flagCompletions[f.Name]
			}
			if !ok && f.Value.Type() != "string" && f.Value.Type() != "stringArray" {
				fn, ok = cobra.NoFileCompletions, true
			}
			if ok {
				c.RegisterFlagCompletionFunc(f.Name, fn)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// positional completes the argument at the position being typed.
func positional(args []cobra.CompletionFunc, repeat bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, done []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		i := len(done)
		if i >= len(args) {
			if !repeat || len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			i = len(args) - 1
		}
		return args[i](cmd, done, toComplete)
	}
}

// values completes to a fixed list.
func values(list func() []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return withPrefix(list(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func withPrefix(list []string, prefix string) []string {
	var out []string
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// completeFiles completes to files with one of the extensions (and to
// directories on the way to them).
func completeFiles(exts ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return exts, cobra.ShellCompDirectiveFilterFileExt
	}
}

func completeDirs(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// completeNIC completes to the built-in models whose names start with
// what is typed, and to model files when none does (a path).
func completeNIC(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if names := withPrefix(nics.Names(), toComplete); len(names) > 0 {
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	return completeFiles(modelExts...)(cmd, args, toComplete)
}

// completeGraphOrNIC is completeNIC that also offers stack and LPG files.
func completeGraphOrNIC(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if names := withPrefix(nics.Names(), toComplete); len(names) > 0 {
		return names, cobra.ShellCompDirectiveNoFileComp
	}
	return completeFiles(graphExts...)(cmd, args, toComplete)
}

// completeIface completes to the host's network interfaces.
func completeIface(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeCopyEngine completes to the built-in models --copy-engine
// takes (those with one copy engine) and none.
func completeCopyEngine(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	names := []string{embed.NoCopyEngine}
	for _, name := range nics.Names() {
		if m, _, err := nics.Load(name); err == nil && m != nil {
			if _, ok := embed.CopyEngineOf(m); ok {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeExplain completes --explain to the endpoints and LPG nodes of
// the stack given as the second argument.
func completeExplain(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) < 2 || args[1] == "-" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	src, ok := readFile(&env{stderr: io.Discard}, args[1])
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	l := load.Parse(args[1], src)
	var names []string
	if l.Stack != nil {
		for _, e := range l.Stack.Endpoints {
			names = append(names, e.Name)
		}
	}
	if l.Graph != nil {
		for _, n := range l.Graph.Nodes {
			names = append(names, n.Name)
		}
	}
	return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}
