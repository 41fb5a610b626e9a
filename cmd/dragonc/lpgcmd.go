package main

import (
	"fmt"

	"github.com/dragonc/dragonc/lpg"
)

func init() {
	register(&command{name: "lpg", summary: "derive the Logical Protocol Graph of a stack", run: runLPG, usage: `Usage: dragonc lpg STACK.lpg

Derives the Logical Protocol Graph of a stack file and prints a summary:
node and edge counts, interfaces, services, and every endpoint with what
it receives. Draw the graph itself with 'dragonc dot STACK.lpg'.

Exit: 0, 1 on errors in the input.

Examples:
    dragonc lpg examples/web_and_dns.lpg
    dragonc dot examples/web_and_dns.lpg | dot -Tsvg > lpg.svg
`})
}

func runLPG(e *env, args []string) int {
	fs := newFlags(e, "lpg", lookup("lpg").usage)
	if ok, code := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(e.stderr, lookup("lpg").usage)
		return exitUsage
	}
	path := fs.Arg(0)
	src, ok := readFile(e, path)
	if !ok {
		return exitInput
	}
	l := load(path, src)
	printDiags(e, l.diags, false)
	if l.diags.HasErrors() {
		return exitInput
	}
	if l.stack == nil {
		fmt.Fprintf(e.stderr, "dragonc: %s is a graph, not a stack of endpoints; use 'dragonc check -v' for its counts\n", path)
		return exitInput
	}
	fmt.Fprint(e.stdout, lpg.Summary(l.stack, l.graph))
	return exitOK
}
