package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	drun "github.com/dragonc/dragonc/run"
)

func init() {
	builders = append(builders, newReloadCmd)
}

func newReloadCmd(e *env) *cobra.Command {
	var asJSON bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "reload [flags] IFACE",
		Short: "make the stack dragonc run serves on IFACE read its stack file again",
		Long: `Asks the dragonc run that serves IFACE (in the foreground or detached)
to read its stack file again and serve what it now says, without a
restart: the run plans the new stack from the running plan (the
incremental search keeps every unchanged endpoint where it was), swaps
the endpoint tables of its generated code and inserts the new eBPF
steering rules before it deletes the old ones, so that no frame of an
unchanged endpoint is lost. SIGHUP to the run does the same.
A change that needs other generated code (a new protocol, a queue whose
code changes shape) or another eBPF program restarts the data plane
with the new plan once its program is built: not lossless, the result
says for how long nothing was served. A stack file that does not parse
or check, or a plan that cannot be made, is refused: the running plan
serves on, and the reason is printed here and in the run's own output.
The run answers on its control socket
(/run/dragonc/IFACE/control.sock); reload waits --timeout for it.
Exit: 0 applied, 1 refused or no answer (the reason is printed),
2 usage (nothing runs on IFACE).`,
		Example: `  dragonc reload veth0
  dragonc reload --json veth0 | jq .added
  kill -HUP "$(dragonc status --json veth0 | jq .[0].pid)"   # the same by signal`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want IFACE, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usagef("--timeout %v must be above 0", timeout)
			}
			return exitStatus(runReload(e, args[0], timeout, asJSON))
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "the result as JSON")
	c.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the run's answer")
	return c
}

func runReload(e *env, iface string, timeout time.Duration, asJSON bool) int {
	res, err := drun.Reload(context.Background(), iface, timeout)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		var ue *drun.UsageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitInput
	}
	if asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else if res.Applied {
		fmt.Fprintf(e.stdout, "%s\n", res)
	} else {
		fmt.Fprintf(e.stderr, "dragonc: %s\n", res)
	}
	if !res.Applied {
		return exitInput
	}
	return exitOK
}
