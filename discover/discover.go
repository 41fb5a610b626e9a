// Package discover writes a PRG for a live Linux interface from what Linux
// reports about it: the driver (ethtool -i), offloads (ethtool -k), queue
// counts (ethtool -l, /sys/class/net/IF/queues), the RSS indirection table
// and key (ethtool -x), the hashed fields (ethtool -n rx-flow-hash) and
// whether ntuple rules are accepted. For drivers whose facts dragonc knows
// (igb, ixgbe) the filter tables they expose are added with their limits;
// any other driver gets a conservative model: RSS and checksums only.
//
// The text formats parsed here are those ethtool prints (ethtool.c:
// dump_drvinfo, dump_channels, print_indir_table, dump_features; rxclass.c
// for rule counts).
package discover

import (
	"bufio"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dragonc/dragonc/prg"
)

// Facts is what Linux reports about an interface.
type Facts struct {
	Iface       string
	Driver      string
	MaxCombined int // ethtool -l: Pre-set maximums, Combined (or RX)
	Combined    int // Current hardware settings
	RxQueues    int // /sys/class/net/IF/queues/rx-*
	Features    map[string]Feature
	IndirSize   int    // entries of the RSS indirection table (0: none)
	Key         string // RSS hash key, colon-separated hex
	UDPPorts    bool   // UDP over IPv4 hashes its ports
	TCPPorts    bool
	Notes       []string
}

// Feature is one line of ethtool -k: its state and whether it can change.
type Feature struct {
	On    bool
	Fixed bool
}

// Runner runs ethtool with arguments and returns its standard output.
type Runner func(args ...string) (string, error)

// Probe asks ethtool about an interface. queues is the number of rx-*
// directories under /sys/class/net/IF/queues (0 if unknown).
func Probe(iface string, run Runner, queues int) (*Facts, error) {
	f := &Facts{Iface: iface, RxQueues: queues, Features: map[string]Feature{}}
	out, err := run("-i", iface)
	if err != nil {
		return nil, fmt.Errorf("ethtool -i %s: %w", iface, err)
	}
	f.Driver = field(out, "driver")
	if f.Driver == "" {
		return nil, fmt.Errorf("ethtool -i %s names no driver", iface)
	}
	if out, err := run("-k", iface); err == nil {
		f.Features = ParseFeatures(out)
	} else {
		f.Notes = append(f.Notes, "ethtool -k failed: offloads unknown, modelled off")
	}
	if out, err := run("-l", iface); err == nil {
		f.MaxCombined, f.Combined = ParseChannels(out)
	} else {
		f.Notes = append(f.Notes, "ethtool -l is not supported: the queue count cannot be changed")
	}
	if out, err := run("-x", iface); err == nil {
		f.IndirSize, f.Key = ParseIndirection(out)
	} else {
		f.Notes = append(f.Notes, "ethtool -x is not supported: no RSS table")
	}
	if out, err := run("-n", iface, "rx-flow-hash", "udp4"); err == nil {
		f.UDPPorts = HashesPorts(out)
	}
	if out, err := run("-n", iface, "rx-flow-hash", "tcp4"); err == nil {
		f.TCPPorts = HashesPorts(out)
	}
	return f, nil
}

func field(out, key string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// ParseFeatures reads ethtool -k ("rx-checksumming: on [fixed]").
func ParseFeatures(out string) map[string]Feature {
	fs := map[string]Feature{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		if !ok || strings.HasPrefix(sc.Text(), "Features for") {
			continue
		}
		fs[k] = Feature{On: strings.HasPrefix(v, "on"), Fixed: strings.Contains(v, "[fixed]")}
	}
	return fs
}

// ParseChannels reads ethtool -l: the maximum and current combined
// channels (RX channels where a driver has separate ones).
func ParseChannels(out string) (max, cur int) {
	section := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	vals := map[string]int{}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Pre-set maximums"):
			section = "max"
		case strings.HasPrefix(line, "Current hardware settings"):
			section = "cur"
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok || section == "" {
				continue
			}
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				continue // n/a
			}
			vals[section+strings.TrimSpace(k)] = n
		}
	}
	max, cur = vals["maxCombined"], vals["curCombined"]
	if max == 0 {
		max, cur = vals["maxRX"], vals["curRX"]
	}
	return max, cur
}

var indirRow = regexp.MustCompile(`^\s*\d+:\s+((?:\d+\s*)+)$`)

// ParseIndirection reads ethtool -x: the size of the indirection table and
// the hash key.
func ParseIndirection(out string) (size int, key string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	inKey := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case indirRow.MatchString(line):
			size += len(strings.Fields(indirRow.FindStringSubmatch(line)[1]))
		case strings.HasPrefix(line, "RSS hash key"):
			inKey = true
		case inKey:
			if s := strings.TrimSpace(line); s != "" && s != "Operation not supported" {
				key = s
			}
			inKey = false
		}
	}
	return size, key
}

// HashesPorts reports whether ethtool -n rx-flow-hash lists both port
// halves ("L4 bytes 0 & 1", "L4 bytes 2 & 3").
func HashesPorts(out string) bool {
	return strings.Contains(out, "L4 bytes 0 & 1") && strings.Contains(out, "L4 bytes 2 & 3")
}

var notIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// PRG writes the model. known says whether dragonc has facts about the
// driver (then tables holds the filter tables it exposes, from them).
func PRG(f *Facts, known bool, tables []Table) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	name := "discovered_" + notIdent.ReplaceAllString(f.Iface, "_")
	queues := max(f.MaxCombined, f.Combined, f.RxQueues, 1)
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
	rx := f.Features["rx-checksumming"]
	first := next
	if !rx.Fixed || rx.On {
		first = "CsumOffload"
	}
	w("        boolean L2EtherValidLength {\n            port true[%s]\n            port false[]\n            predicate true \"eth.len_ok\"\n        }\n\n", first)
	if first == "CsumOffload" {
		if rx.Fixed {
			w("        // rx-checksumming is fixed on.\n")
			w("        config CsumOffload {\n            enum { feature rx_checksum }\n            port on[L3IPv4ValidChecksum L4UDPValidChecksum L4TCPValidChecksum %s]\n        }\n\n", next)
		} else {
			w("        config CsumOffload {\n            enum { feature rx_checksum }\n            port on[L3IPv4ValidChecksum L4UDPValidChecksum L4TCPValidChecksum %s]\n            port off[%s]\n        }\n\n", next, next)
		}
		for _, c := range []struct{ n, p string }{{"L3IPv4ValidChecksum", "ip.csum_ok"}, {"L4UDPValidChecksum", "udp.csum_ok"}, {"L4TCPValidChecksum", "tcp.csum_ok"}} {
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
	tx := f.Features["tx-checksumming"]
	w("    cluster Tx {\n        node Queue0..%d {\n            attr \"source\"\n            port out[CsumInsert]\n        }\n\n", queues-1)
	if tx.Fixed && !tx.On {
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

// keyBytes turns ethtool's "6d:5a:..." into the hex string of a model's
// key property, when it is a key dragonc accepts.
func keyBytes(k string) string {
	parts := strings.Split(k, ":")
	if len(parts) < 16 || len(parts) > 256 {
		return ""
	}
	for _, p := range parts {
		if len(p) != 2 {
			return ""
		}
		if _, err := strconv.ParseUint(p, 16, 8); err != nil {
			return ""
		}
	}
	return strings.Join(parts, "")
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
