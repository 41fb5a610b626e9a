package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

func init() {
	builders = append(builders, newNicsCmd)
}

func newNicsCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "nics [--json]",
		Short: "list the built-in NIC models",
		Long: `Lists the built-in models: name, receive queues, every configuration node
(table, hash, enum, place) with its capacity, and engines. A NIC argument
of any command is one of these names or a path to a .prg/.unicorn file.`,
		Example: `  dragonc nics
  dragonc nics --json | jq '.nics[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return exitStatus(runNics(e, asJSON)) },
	}
	c.Flags().BoolVar(&asJSON, "json", false, "the same facts, machine-readable")
	return c
}

// loadNIC resolves a NIC argument and builds its model, printing
// diagnostics.
func loadNIC(e *env, arg string) (*prg.Model, bool) {
	m, diags, err := nics.Load(arg)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return nil, false
	}
	printDiags(e, diags, false)
	if m == nil && !diags.HasErrors() {
		// A stack file, say, parses but holds no graph to model a NIC.
		fmt.Fprintf(e.stderr, "dragonc: %s holds no NIC model; a NIC is a built-in model (dragonc nics) or a .prg/.unicorn file\n", arg)
	}
	return m, m != nil
}

func runNics(e *env, asJSON bool) int {
	var all []prg.Summary
	for _, b := range nics.List() {
		m, ok := loadNIC(e, b.Name)
		if !ok {
			return exitInput
		}
		all = append(all, m.Summarize(b.Name, b.File))
	}
	if asJSON {
		out, _ := json.MarshalIndent(map[string]any{"nics": all}, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return exitOK
	}
	for _, s := range all {
		plural := "s"
		if s.Queues == 1 {
			plural = ""
		}
		fmt.Fprintf(e.stdout, "%s (%s): %d receive queue%s\n", s.Name, s.File, s.Queues, plural)
		for _, t := range s.Tables {
			fmt.Fprintf(e.stdout, "    %-18s %-5s", t.Node, t.Kind)
			if t.Capacity > 0 {
				unit := map[string]string{"table": "entries", "hash": "buckets", "enum": "choices"}[t.Kind]
				fmt.Fprintf(e.stdout, " %d %s", t.Capacity, unit)
			}
			fmt.Fprintln(e.stdout)
		}
		if len(s.Engines) > 0 {
			fmt.Fprintf(e.stdout, "    engines: %s\n", strings.Join(s.Engines, ", "))
		}
	}
	return exitOK
}
