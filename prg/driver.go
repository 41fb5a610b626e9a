package prg

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// Driver is what one Linux driver exposes of a NIC's silicon. A PRG
// describes the hardware; a driver reaches only part of it, through fixed
// interfaces (ethtool -L, -K, -X, -N, module parameters), with limits of
// its own. Embedding for Linux searches only over what the driver exposes;
// everything else is steered in software.
type Driver struct {
	Name   string // the driver, as `ethtool -i` reports it
	Source string // where the facts come from (driver source files)
	// MaxChannels is the most combined channels the driver accepts; 0
	// means no limit beyond the silicon's.
	MaxChannels int
	// Channels is how the queue count is set: "ethtool -L", or a module
	// parameter the script can only check ("module myri10ge_max_slices").
	Channels string
	// Enums maps exposed on/off configuration nodes to their ethtool -K
	// feature ("rx", "tx").
	Enums map[string]string
	// Tables maps exposed filter tables to what the driver accepts.
	Tables map[string]DriverTable
	// RSS is the exposed RSS hash, if any.
	RSS *DriverRSS
	// Hidden says, per configuration node of the silicon the driver does
	// not expose, why not (shown in warnings).
	Hidden map[string]string
	// IRQNames are the names the driver gives a queue's own interrupt in
	// /proc/interrupts, IF standing for the interface and N for the queue
	// (ixgbe, igb: "IF-TxRx-N"). Empty: "IF-TxRx-N" and "IF-rx-N".
	IRQNames []string
	// IRQSingle is the name of the one interrupt that serves every queue
	// when the driver requests only one (acenic: "acenic"; myri10ge with
	// one slice: "IF"); "" when it has one per queue.
	IRQSingle string
	// TxSoftware names the transmit nodes of the silicon the driver never
	// asks the NIC to run, with why: Linux computes them before the
	// driver sees the frame.
	TxSoftware map[string]string
}

// DriverTable is a filter table reachable through ethtool -N.
type DriverTable struct {
	// Capacity is the number of rule locations the driver allows (0: the
	// silicon's).
	Capacity int
	// FlowTypes lists the ethtool flow types the driver accepts.
	FlowTypes []string
	// Fields lists the fields a rule may match.
	Fields []string
	// OneMask: the driver programs one field mask for the whole device;
	// every rule must match the same fields with the same masks.
	OneMask bool
	// Drop: a rule may drop (action -1).
	Drop bool
}

// DriverRSS is an RSS hash as the driver exposes it.
type DriverRSS struct {
	Node string
	// SetTable: `ethtool -X` sets the indirection table. When false the
	// driver fills it itself, one bucket per queue in order, and every
	// queue (the default queue included) receives hashed traffic.
	SetTable bool
	// MaxTarget bounds the queue numbers the table may name (ixgbe: 16 on
	// the 82599); 0: the silicon's bound.
	MaxTarget int
	// UDPPorts: `ethtool -N IF rx-flow-hash udp4 sdfn` is accepted.
	UDPPorts bool
	// Param names the module parameter that fixes the hash when the
	// driver has no ethtool interface to it (myri10ge: myri10ge_rss_hash),
	// and ParamValue the value under which the firmware hashes as the
	// model's hash node says. The model's ports are then what the NIC
	// hashes; linux.sh checks the parameter instead of setting anything.
	Param, ParamValue string
}

// Exposes reports whether the driver reaches a configuration node, and
// why not when it does not.
func (d *Driver) Exposes(sp *Space) (bool, string) {
	switch sp.Kind {
	case Enum:
		if _, ok := d.Enums[sp.Node]; ok {
			return true, ""
		}
	case Table:
		if _, ok := d.Tables[sp.Node]; ok {
			return true, ""
		}
	case Hash:
		if sp.Identity {
			if _, ok := d.Tables[sp.Node]; ok {
				return true, ""
			}
		} else if d.RSS != nil && d.RSS.Node == sp.Node {
			return true, ""
		}
	case Place:
		// Placement on engines is firmware the driver loads; nothing a
		// driver interface sets.
	}
	why := d.Hidden[sp.Node]
	if why == "" {
		why = fmt.Sprintf("the %s driver has no interface to it", d.Name)
	}
	return false, why
}

// Check reports facts that name nodes the model does not have (a driver
// table written for another model).
func (d *Driver) Check(m *Model) error {
	var names []string
	for n := range d.Enums {
		names = append(names, n)
	}
	for n := range d.Tables {
		names = append(names, n)
	}
	if d.RSS != nil {
		names = append(names, d.RSS.Node)
	}
	sort.Strings(names)
	for _, n := range names {
		if m.Space(n) == nil {
			return fmt.Errorf("driver %s: model %s has no configuration node %s", d.Name, m.Name, n)
		}
	}
	return nil
}

// Restrict returns the part of an exposed configuration space the driver
// reaches: a table with the driver's capacity, fields and mask rule; an
// RSS hash whose table names only the queues the driver allows. A space
// the driver does not narrow is returned as it is.
func (d *Driver) Restrict(sp *Space) *Space {
	switch {
	case sp.Kind == Table || sp.Kind == Hash && sp.Identity:
		t, ok := d.Tables[sp.Node]
		if !ok || sp.Kind == Hash {
			return sp
		}
		c := *sp
		if t.Capacity > 0 && (c.Capacity == 0 || t.Capacity < c.Capacity) {
			c.Capacity = t.Capacity
		}
		c.CanDrop = c.CanDrop && t.Drop
		c.GlobalMask = c.GlobalMask || t.OneMask
		if t.Fields != nil {
			keep := func(fs []string) []string {
				var out []string
				for _, f := range fs {
					if slices.Contains(t.Fields, f) {
						out = append(out, f)
					}
				}
				return out
			}
			c.Fields, c.Wildcard, c.Masked = keep(c.Fields), keep(c.Wildcard), keep(c.Masked)
		}
		return &c
	case sp.Kind == Hash && d.RSS != nil && d.RSS.Node == sp.Node:
		c := *sp
		c.UDPPorts = c.UDPPorts && (d.RSS.UDPPorts || d.RSS.Param != "")
		if d.RSS.MaxTarget > 0 {
			c.Actions = nil
			for _, a := range sp.Actions {
				if m := queueName.FindStringSubmatch(a); m != nil {
					if n, err := strconv.Atoi(m[1]); err == nil && n < d.RSS.MaxTarget {
						c.Actions = append(c.Actions, a)
					}
				}
			}
			c.MaxTargets = min(c.MaxTargets, d.RSS.MaxTarget)
		}
		return &c
	}
	return sp
}
