package main

import "github.com/spf13/cobra"

func init() {
	builders = append(builders, newSoviaCmd)
}

// soviaBuilders make the subcommands of dragonc sovia; each file adds its
// own.
var soviaBuilders []func(e *env) *cobra.Command

func newSoviaCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "sovia",
		Short: "talk to SOVIA streams over the software VI",
		Long: `Commands for the SOVIA streams that dragonc run serves over the software
VI (Ethernet frames of EtherType 0x88B5, docs/sovia.md): they run on a
host of their own on IFACE, an interface on the same Ethernet as the
peer, and need CAP_NET_RAW.

A peer is HOST:PORT: HOST is the peer's Ethernet address in brackets
([02:00:00:00:00:01]:5000), or an IPv4 address or name whose neighbour
entry on IFACE gives it (asked for with ARP when there is none).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("no sovia command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(e.stderr)
			cmd.Usage()
			return exitStatus(exitUsage)
		},
	}
	for _, b := range soviaBuilders {
		s := b(e)
		s.SilenceUsage, s.SilenceErrors = true, true
		c.AddCommand(s)
	}
	return c
}
