// Package discover writes a PRG for a live Linux interface from what its
// driver reports through the ethtool ioctls (SIOCETHTOOL; structures of
// include/uapi/linux/ethtool.h): the driver (ETHTOOL_GDRVINFO), the
// channels (ETHTOOL_GCHANNELS) and the receive queues in use
// (/sys/class/net/IF/queues), the offload features and whether they can
// change (ETHTOOL_GFEATURES), the RSS indirection size and key
// (ETHTOOL_GRSSH) and the hashed fields (ETHTOOL_GRXFH). For drivers
// whose facts dragonc knows (igb, ixgbe) the filter tables they expose are
// added with their limits; any other driver gets a conservative model:
// RSS and checksums only. Nothing is read from ethtool's printed text.
package discover

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dragonc/dragonc/prg"
)

// Ethtool answers the ethtool commands discover asks, in the kernel's
// terms. Ioctl is the real one; tests replay recorded answers.
type Ethtool interface {
	Driver() (string, error)                             // ETHTOOL_GDRVINFO: driver name
	Channels() (Channels, error)                         // ETHTOOL_GCHANNELS
	Features() ([]KernelFeature, error)                  // ETH_SS_FEATURES names and ETHTOOL_GFEATURES
	RSS() (indirSize int, key []byte, err error)         // ETHTOOL_GRSSH
	FlowHash(flowType uint32) (fields uint64, err error) // ETHTOOL_GRXFH: RXH_* bits
}

// Channels is struct ethtool_channels: the maximums and the counts in use.
type Channels struct {
	MaxRX, MaxTX, MaxOther, MaxCombined uint32
	RX, TX, Other, Combined             uint32
}

// KernelFeature is one netdev feature as ETHTOOL_GFEATURES reports it, by
// its kernel name (net/ethtool/common.c netdev_features_strings:
// "rx-checksum" is NETIF_F_RXCSUM, "tx-checksum-ipv4" NETIF_F_IP_CSUM).
type KernelFeature struct {
	Name                                       string
	Available, Requested, Active, NeverChanged bool
}

// Flow types and hashed-field bits of ETHTOOL_GRXFH
// (include/uapi/linux/ethtool.h).
const (
	TCPv4Flow = 0x01   // TCP_V4_FLOW
	UDPv4Flow = 0x02   // UDP_V4_FLOW
	RXHL4B01  = 1 << 6 // RXH_L4_B_0_1: source port
	RXHL4B23  = 1 << 7 // RXH_L4_B_2_3: destination port
	rxhPorts  = RXHL4B01 | RXHL4B23
)

// Facts is what Linux reports about an interface.
type Facts struct {
	Iface       string
	Driver      string
	Channels    Channels
	HasChannels bool // the driver answers ETHTOOL_GCHANNELS
	RxQueues    int  // /sys/class/net/IF/queues/rx-* (0: unknown)
	// The offloads, by what they mean for the model.
	RxChecksum Feature // NETIF_F_RXCSUM ("rx-checksum")
	TxChecksum Feature // NETIF_F_IP_CSUM or NETIF_F_HW_CSUM
	NTuple     Feature // NETIF_F_NTUPLE ("rx-ntuple-filter")
	IndirSize  int     // entries of the RSS indirection table (0: none)
	Key        []byte  // RSS hash key
	UDPPorts   bool    // UDP over IPv4 hashes its ports
	TCPPorts   bool
	Notes      []string
}

// Feature is a feature's state and whether it can change.
type Feature struct {
	Known bool // the driver reports it
	On    bool
	Fixed bool
}

// Probe asks an interface's driver. queues is the number of rx-*
// directories under /sys/class/net/IF/queues (0 if unknown).
func Probe(iface string, et Ethtool, queues int) (*Facts, error) {
	f := &Facts{Iface: iface, RxQueues: queues}
	drv, err := et.Driver()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", iface, err)
	}
	if drv == "" {
		return nil, fmt.Errorf("%s: the driver reports no name (ETHTOOL_GDRVINFO)", iface)
	}
	f.Driver = drv
	if fs, err := et.Features(); err == nil {
		f.RxChecksum = feature(fs, "rx-checksum")
		f.TxChecksum = feature(fs, "tx-checksum-ipv4", "tx-checksum-ip-generic")
		f.NTuple = feature(fs, "rx-ntuple-filter")
	} else {
		f.Notes = append(f.Notes, fmt.Sprintf("offloads unknown (%v): modelled off", err))
	}
	if ch, err := et.Channels(); err == nil {
		f.Channels, f.HasChannels = ch, true
	} else {
		f.Notes = append(f.Notes, fmt.Sprintf("no channel count (%v): the queue count cannot be changed", err))
	}
	if n, key, err := et.RSS(); err == nil && n > 0 {
		f.IndirSize, f.Key = n, key
	} else {
		f.Notes = append(f.Notes, "no RSS indirection table (ETHTOOL_GRSSH)")
	}
	if h, err := et.FlowHash(UDPv4Flow); err == nil {
		f.UDPPorts = h&rxhPorts == rxhPorts
	}
	if h, err := et.FlowHash(TCPv4Flow); err == nil {
		f.TCPPorts = h&rxhPorts == rxhPorts
	}
	if q, why := f.queueCount(); why != "" {
		f.Notes = append(f.Notes, fmt.Sprintf("%d receive queue(s): %s", q, why))
	}
	return f, nil
}

// feature reads the first of names the driver reports. A feature is
// fixed when it is not in the driver's changeable set (available) or the
// kernel says it can never change (never_changed; ethtool -k prints
// "[fixed]" for the same two cases).
func feature(fs []KernelFeature, names ...string) Feature {
	var out Feature
	for _, n := range names {
		i := slices.IndexFunc(fs, func(k KernelFeature) bool { return k.Name == n })
		if i < 0 {
			continue
		}
		k := fs[i]
		f := Feature{Known: true, On: k.Active, Fixed: !k.Available || k.NeverChanged}
		switch {
		case !out.Known:
			out = f
		case f.On && !out.On || f.On == out.On && !f.Fixed:
			// Either transmit checksum feature does the transport
			// checksum; the model takes the one that is on, or can be.
			out = f
		}
	}
	return out
}

// Queues is the number of receive queues the model gets.
func (f *Facts) Queues() int {
	q, _ := f.queueCount()
	return q
}

// queueCount is the receive queue count for the model and, when it is not
// simply what the driver reports as its combined maximum, why.
//
// A driver with combined channels takes up to its maximum through
// ethtool -L combined, which linux.sh sets: the model gets the maximum.
// A driver that counts RX channels apart (veth: veth_get_channels reports
// rx_count = real_num_rx_queues, max_rx = the queues allocated) is
// modelled with the RX channels in use, because linux.sh sets combined
// channels, which such a driver refuses; the sysfs count is the fallback.
func (f *Facts) queueCount() (int, string) {
	ch := f.Channels
	switch {
	case f.HasChannels && ch.MaxCombined > 0:
		return int(ch.MaxCombined), ""
	case f.HasChannels && ch.RX > 0:
		why := fmt.Sprintf("the RX channels in use (ETHTOOL_GCHANNELS rx_count; at most %d)", ch.MaxRX)
		return int(ch.RX), why
	case f.RxQueues > 0:
		return f.RxQueues, "the rx-* queues in /sys/class/net/IF/queues"
	}
	return 1, "nothing reports a count: one queue"
}

var notIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// PRG writes the model. known says whether dragonc has facts about the
// driver (then tables holds the filter tables it exposes, from them).
func PRG(f *Facts, known bool, tables []Table) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	name := "discovered_" + notIdent.ReplaceAllString(f.Iface, "_")
	queues := f.Queues()
	w("// Discovered by dragonc from interface %s (driver %s): what Linux\n", strings.ReplaceAll(f.Iface, "\n", " "), strings.ReplaceAll(f.Driver, "\n", " "))
	w("// reports about it, not the silicon. Edit freely.\n")
	for _, n := range f.Notes {
		w("// %s\n", n)
	}
	w("graph %s {\n", name)
	w("    resources Device {\n        driver %q\n", f.Driver)
	if !known {
		w("        driver_facts \"generic\" // dragonc knows no filter tables of this driver: RSS and checksums only\n")
	}
	w("        rx_queues %d\n    }\n\n", queues)
	w("    cluster Rx {\n")
	w("        boolean L2EtherValidCRC {\n            port true[L2EtherValidLength]\n            port false[]\n            predicate true \"frame.crc_ok\"\n        }\n\n")
	next := "CRSS"
	if f.IndirSize == 0 {
		next = "Queue0"
	}
	if len(tables) > 0 {
		next = tables[0].Node
	}
	rx := f.RxChecksum
	first := next
	if rx.Known && (!rx.Fixed || rx.On) {
		first = "CsumOffload"
	}
	w("        boolean L2EtherValidLength {\n            port true[%s]\n            port false[]\n            predicate true \"eth.len_ok\"\n        }\n\n", first)
	if first == "CsumOffload" {
		// NETIF_F_RXCSUM lets the driver mark TCP and UDP (also GRE, SCTP,
		// FCoE) checksums verified, CHECKSUM_UNNECESSARY
		// (include/linux/skbuff.h, "Checksumming of received packets by
		// device"); the IPv4 header checksum is not among them: the stack
		// checks it on every datagram (ip_rcv_core, ip_fast_csum in
		// net/ipv4/ip_input.c), so the model leaves it to software.
		if rx.Fixed {
			w("        // rx-checksum (NETIF_F_RXCSUM) is fixed on: TCP and UDP checksums.\n")
			w("        config CsumOffload {\n            enum { feature rx_checksum }\n            port on[L4UDPValidChecksum L4TCPValidChecksum %s]\n        }\n\n", next)
		} else {
			w("        // rx-checksum (NETIF_F_RXCSUM): TCP and UDP checksums.\n")
			w("        config CsumOffload {\n            enum { feature rx_checksum }\n            port on[L4UDPValidChecksum L4TCPValidChecksum %s]\n            port off[%s]\n        }\n\n", next, next)
		}
		for _, c := range []struct{ n, p string }{{"L4UDPValidChecksum", "udp.csum_ok"}, {"L4TCPValidChecksum", "tcp.csum_ok"}} {
			w("        boolean %s {\n            attr \"software\"\n            port true false[]\n            predicate true %q\n        }\n\n", c.n, c.p)
		}
	}
	for i, t := range tables {
		miss := "CRSS"
		if f.IndirSize == 0 {
			miss = "Queue0"
		}
		if i+1 < len(tables) {
			miss = tables[i+1].Node
		}
		w("        // %s\n        config %s {\n            table {\n", t.Comment, t.Node)
		w("                fields [%s]\n", strings.Join(t.Fields, " "))
		if len(t.Masks) > 0 {
			w("                masks [%s]\n                global_mask true\n", strings.Join(t.Masks, " "))
		}
		w("                capacity %d\n", t.Capacity)
		if t.Drop {
			w("                drop true\n")
		}
		w("            }\n            port queues[Queue0..%d]\n            port default[%s]\n        }\n\n", queues-1, miss)
	}
	if f.IndirSize > 0 {
		var ports []string
		if f.TCPPorts {
			ports = append(ports, "tcp")
		}
		if f.UDPPorts {
			ports = append(ports, "udp")
		}
		w("        // RSS: %d-entry indirection table (ethtool -x).\n", f.IndirSize)
		w("        config CRSS {\n            hash {\n                fields [ip.src ip.dst l4.sport l4.dport]\n")
		w("                buckets %d\n                max_targets %d\n", pow2floor(f.IndirSize), queues)
		if len(ports) > 0 {
			w("                ports [%s]\n", strings.Join(ports, " "))
		}
		if k := keyBytes(f.Key); k != "" {
			w("                key %q\n", k)
		}
		w("            }\n            port queues[Queue0..%d]\n            port default[Queue0]\n        }\n\n", queues-1)
	}
	w("        node Queue0..%d {\n            attr \"source\"\n            port out[]\n        }\n    }\n\n", queues-1)
	tx := f.TxChecksum
	w("    cluster Tx {\n        node Queue0..%d {\n            attr \"source\"\n            port out[CsumInsert]\n        }\n\n", queues-1)
	if !tx.Known || tx.Fixed && !tx.On {
		w("        // tx-checksumming is fixed off.\n        config CsumInsert {\n            enum { feature tx_checksum }\n            port off[Wire]\n        }\n\n")
	} else {
		w("        config CsumInsert {\n            enum { feature tx_checksum }\n            port on[L4UDPFillChecksum]\n            port off[Wire]\n        }\n\n")
	}
	// tx-checksumming is the transport checksum (NETIF_F_IP_CSUM,
	// NETIF_F_HW_CSUM): Linux fills the IPv4 header checksum itself
	// (ip_send_check, net/ipv4/ip_output.c).
	w("        node L4UDPFillChecksum {\n            port out[L4TCPFillChecksum]\n        }\n\n        node L4TCPFillChecksum {\n            port out[Wire]\n        }\n\n        node Wire {\n            port out[]\n        }\n    }\n}\n")
	return b.String()
}

// Table is a filter table a known driver exposes.
type Table struct {
	Node     string // node name inside cluster Rx (CFDir)
	Comment  string
	Fields   []string
	Masks    []string
	Capacity int
	Drop     bool
}

func pow2floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// keyBytes is the hex string of a model's key property for an RSS key,
// when it is a key dragonc accepts (prg.MinRSSKey..prg.MaxRSSKey bytes).
func keyBytes(k []byte) string {
	if len(k) < prg.MinRSSKey || len(k) > prg.MaxRSSKey {
		return ""
	}
	return hex.EncodeToString(k)
}

// TablesOf turns the filter tables a known driver exposes into nodes of a
// discovered model (named as in the built-in models, without the Rx
// cluster prefix, so that the driver facts find them).
func TablesOf(d *prg.Driver) []Table {
	var names []string
	for n := range d.Tables {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Table
	for _, n := range names {
		t := d.Tables[n]
		tb := Table{Node: strings.TrimPrefix(n, "Rx"), Fields: t.Fields, Capacity: t.Capacity, Drop: t.Drop,
			Comment: fmt.Sprintf("Filters through ethtool -N (%s): flow types %s.", d.Source, strings.Join(t.FlowTypes, ", "))}
		if t.OneMask {
			for _, f := range t.Fields {
				if f != "ip.proto" {
					tb.Masks = append(tb.Masks, f)
				}
			}
		}
		out = append(out, tb)
	}
	return out
}
