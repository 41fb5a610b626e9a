package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/load"
	"github.com/dragonc/dragonc/lpg"
)

func init() {
	builders = append(builders, newLPGCmd)
}

func newLPGCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "lpg [--json] STACK.lpg",
		Short: "derive the Logical Protocol Graph of a stack",
		Long: `Derives the Logical Protocol Graph of a stack file and prints a summary:
node and edge counts, interfaces, services, and every endpoint with what
it receives. Draw the graph itself with 'dragonc dot STACK.lpg'. "-" reads
standard input.

Exit: 0, 1 on errors in the input, 2 usage.`,
		Example: `  dragonc lpg examples/web_and_dns.lpg
  dragonc lpg --json examples/web_and_dns.lpg | jq '.endpoints[].name'
  dragonc dot examples/web_and_dns.lpg | dot -Tsvg > lpg.svg`,
		Args: nArgs(1, "one stack file"),
		RunE: func(cmd *cobra.Command, args []string) error { return exitStatus(runLPG(e, args[0], asJSON)) },
	}
	c.Flags().BoolVar(&asJSON, "json", false, "the summary as JSON")
	return c
}

func runLPG(e *env, path string, asJSON bool) int {
	src, ok := readFile(e, path)
	if !ok {
		return exitInput
	}
	l := load.Parse(displayName(path), src)
	printDiags(e, l.Diags, false)
	if l.Diags.HasErrors() {
		return exitInput
	}
	if l.Stack == nil {
		fmt.Fprintf(e.stderr, "dragonc: %s is a graph, not a stack of endpoints; use 'dragonc check -v' for its counts\n", displayName(path))
		return exitInput
	}
	if asJSON {
		writeJSON(e, lpg.SummaryOf(l.Stack, l.Graph))
		return exitOK
	}
	fmt.Fprint(e.stdout, lpg.Summary(l.Stack, l.Graph))
	return exitOK
}
