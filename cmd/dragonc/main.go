// Command dragonc compiles host network stacks onto NICs. This package only
// parses flags, reads and writes files and chooses exit codes; every
// decision lives in a package with tests.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit codes are a contract (CLI.md).
const (
	exitOK    = 0
	exitInput = 1
	exitUsage = 2
)

type command struct {
	name    string
	summary string
	usage   string
	run     func(env *env, args []string) int
}

// env is what a command may touch: its streams and the file system.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
}

var commands []*command

func register(c *command) { commands = append(commands, c) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

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
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				fmt.Fprint(stdout, c.usage)
				return exitOK
			}
		}
		usage(stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "dragonc (development build)")
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "dragonc: unknown command %q\n", args[0])
		if s := suggestCommand(args[0]); s != "" {
			fmt.Fprintf(stderr, "did you mean %q?\n", s)
		}
		fmt.Fprintln(stderr, "run 'dragonc help' for the list of commands")
		return exitUsage
	}
	return c.run(e, args[1:])
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func suggestCommand(name string) string {
	for _, c := range commands {
		if strings.HasPrefix(c.name, name) || strings.HasPrefix(name, c.name) {
			return c.name
		}
	}
	return ""
}

func usage(w io.Writer) {
	fmt.Fprint(w, `dragonc compiles a host network stack onto a NIC.

Usage:
    dragonc COMMAND [flags] ARGS...

Commands:
`)
	cs := append([]*command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "    %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'dragonc help COMMAND' for a command's flags and examples.
`)
}
