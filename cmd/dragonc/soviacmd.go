package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/sovia"
)

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

// streamFlags are the stream settings both dragonc sovia commands take:
// they must be the listener's (its sovia.conf).
type streamFlags struct{ window, threshold, chunk int }

// add declares the flags, with the SOVIA paper's settings as defaults.
func (f *streamFlags) add(fs *pflag.FlagSet) {
	p := sovia.PaperParams()
	fs.IntVar(&f.window, "window", p.Window, "the stream's window w (sovia.conf)")
	fs.IntVar(&f.threshold, "ack-threshold", p.AckThreshold, "the stream's acknowledgement threshold t (sovia.conf)")
	fs.IntVar(&f.chunk, "chunk", p.ChunkSize, "the stream's chunk size in bytes (sovia.conf)")
}

// given reports whether the command line set any of them.
func (f *streamFlags) given(fs *pflag.FlagSet) bool {
	return fs.Changed("window") || fs.Changed("ack-threshold") || fs.Changed("chunk")
}

// params are the stream's protocol settings: the flags', every write a
// message of its own (nodelay, as TCP_NODELAY).
func (f *streamFlags) params() sovia.Params {
	p := sovia.PaperParams()
	p.Window, p.AckThreshold, p.ChunkSize = f.window, f.threshold, f.chunk
	p.NoDelay, p.CombineMax, p.CombineDelay = true, 0, 0
	p.CopyMax = min(p.CopyMax, p.ChunkSize)
	return p
}

// badPeer says why soviaPeer cannot read a peer.
func badPeer(peer string) string {
	return fmt.Sprintf("%q is not HOST:PORT with a port in 1..65535 (an Ethernet address goes in brackets: [02:00:00:00:00:01]:5000)", peer)
}

// soviaPeer splits HOST:PORT: HOST an Ethernet address in brackets, or
// written out before the port (02:00:00:00:00:01:5000), or an IPv4
// address or name; PORT in 1..65535.
func soviaPeer(peer string) (host string, port uint16, ok bool) {
	h, portText, err := net.SplitHostPort(peer)
	if err != nil {
		a, aerr := sovia.ParseAddr(peer)
		if aerr != nil || a.Port == 0 {
			return "", 0, false
		}
		return a.MAC.String(), a.Port, true
	}
	n, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || n == 0 || h == "" {
		return "", 0, false
	}
	return h, uint16(n), true
}
