package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dragonc/dragonc/discover"
	"github.com/dragonc/dragonc/internal/outdir"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

func init() {
	builders = append(builders, newDiscoverCmd)
}

func newDiscoverCmd(e *env) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "discover [flags] IFACE",
		Short: "write a NIC model for a live Linux interface",
		Long: `Asks an interface's driver through the ethtool ioctls (SIOCETHTOOL:
driver info, channels, features, RSS table and key, hashed fields) and
/sys/class/net/IFACE/queues, and writes a PRG of what the driver exposes:
queues, RSS (indirection size, key, hashed fields), checksum offloads, and
for drivers dragonc knows (igb, ixgbe) the filter tables they expose with
their capacities. Any other driver gets a conservative model: RSS and
checksums only. The model embeds like a built-in one:
dragonc embed FILE.prg STACK.lpg.

Exit: 0 written, 1 the interface cannot be read, 2 usage.`,
		Example: `  dragonc discover eth0 -o eth0.prg
  dragonc discover eth0 | dragonc check -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want one interface, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitStatus(runDiscover(e, args[0], out))
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write the model to this file instead of standard output")
	return c
}

func runDiscover(e *env, iface, out string) int {
	if strings.ContainsAny(iface, "/ \n") || iface == "" || iface == "." || iface == ".." {
		fmt.Fprintf(e.stderr, "dragonc: %q is not an interface name\n", iface)
		return exitInput
	}
	et, err := discover.OpenIoctl(iface)
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	defer et.Close()
	rx, _ := filepath.Glob(filepath.Join("/sys/class/net", iface, "queues", "rx-*"))
	f, err := discover.Probe(iface, et, len(rx))
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: %v\n", err)
		return exitInput
	}
	d, known := nics.Driver(f.Driver)
	var tables []discover.Table
	if known {
		tables = discover.TablesOf(d)
	} else {
		fmt.Fprintf(e.stderr, "dragonc: dragonc knows no filter tables of driver %s (it knows %s): the model has RSS and checksums only\n", f.Driver, strings.Join(nics.Drivers(), ", "))
	}
	if ft := f.NTuple; !ft.Known || !ft.On && ft.Fixed {
		fmt.Fprintf(e.stderr, "dragonc: %s has no ntuple filters: endpoints are steered by RSS or in software\n", iface)
	}
	text := discover.PRG(f, known, tables)
	if _, diags := prg.Load(iface+".prg", []byte(text)); diags.HasErrors() {
		fmt.Fprintf(e.stderr, "dragonc: internal error: the discovered model does not load: %v\n", diags.Error())
		return exitInput
	}
	if out == "" || out == "-" {
		fmt.Fprint(e.stdout, text)
		return 0
	}
	err = outdir.Replace(out, []byte(text), func(tmp *os.File) error { return tmp.Chmod(0o644) })
	if err != nil {
		fmt.Fprintf(e.stderr, "dragonc: writing %s: %v\n", out, err)
		return exitInput
	}
	fmt.Fprintf(e.stdout, "dragonc: wrote %s: %d queues, driver %s\n", out, f.Queues(), f.Driver)
	return 0
}
