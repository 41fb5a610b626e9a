package nics

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dragonc/dragonc/prg"
)

// ipv4HeaderChecksum is why a Linux driver never has the NIC fill the
// IPv4 header checksum of a frame it sends.
const ipv4HeaderChecksum = "Linux fills the IPv4 header checksum itself (ip_send_check, net/ipv4/ip_output.c); the driver's transmit checksum path (ixgbe_tx_csum, igb_tx_csum) acts only on CHECKSUM_PARTIAL, the transport checksum, and sets the IPv4 insertion bit only for TSO"

// The Linux drivers of the built-in NICs: what each exposes of the
// silicon, read from the driver sources in the Linux tree (paths relative
// to drivers/net/ethernet/). A model names its driver with the resource
// property `driver` (resources Device { driver "ixgbe" }).
var drivers = map[string]*prg.Driver{
	// Intel 82599: ixgbe.
	"ixgbe": {
		Name:   "ixgbe",
		Source: "intel/ixgbe/ixgbe_ethtool.c, ixgbe.h, ixgbe_main.c",
		// ixgbe_max_channels(): 64 queues while ATR sampling is on
		// (atr_sample_rate = 20 by default, ixgbe_sw_init), capped by
		// IXGBE_MAX_FDIR_INDICES = 63 (ixgbe.h, "based on q_vector limit").
		MaxChannels: 63,
		Channels:    "ethtool -L",
		// ixgbe_set_features(): NETIF_F_RXCSUM and the transmit checksum
		// features are user-changeable (ethtool -K rx / tx).
		Enums: map[string]string{"RxCsumOffload": "rx", "TxCsumInsert": "tx"},
		Tables: map[string]prg.DriverTable{
			// ixgbe_add_ethtool_fdir_entry(): every ethtool -N rule is a
			// Flow Director perfect filter; needs ntuple on
			// (IXGBE_FLAG_FDIR_PERFECT_CAPABLE, else -EOPNOTSUPP);
			// location < (1024 << fdir_pballoc) - 2 with fdir_pballoc =
			// IXGBE_FDIR_PBALLOC_64K (= 1) by default: 2046 rules; flow
			// types tcp4, udp4, sctp4 and ip4 (ixgbe_flowspec_to_flow_type);
			// "Only one mask supported per port": the first rule's mask
			// (addresses, ports, flow-type mask) binds every later one;
			// RX_CLS_FLOW_DISC drops.
			"RxCFDir": {
				Capacity:  2046,
				FlowTypes: []string{"tcp4", "udp4", "sctp4", "ip4"},
				Fields:    []string{"ip.proto", "ip.src", "ip.dst", "l4.sport", "l4.dport"},
				OneMask:   true,
				Drop:      true,
			},
		},
		RSS: &prg.DriverRSS{
			Node:     "RxCRSS",
			SetTable: true,
			// ixgbe_set_rxfh(): table entries must be below
			// min(num_rx_queues, ixgbe_rss_indir_tbl_max()) = 16 before
			// the X550 (IXGBE_MAX_RSS_INDICES = 16).
			MaxTarget: 16,
			// ixgbe_set_rss_hash_opt(): UDP_V4_FLOW takes sd or sdfn.
			UDPPorts: true,
		},
		Hidden: map[string]string{
			"RxC5TupleFilter":    "ixgbe programs every ethtool -N rule into Flow Director; its 128 five-tuple filters are not reachable through ethtool (ixgbe_set_rxnfc)",
			"RxCEtherTypeFilter": "ixgbe keeps the EtherType filters for its own use (FCoE, LLDP); ethtool -N cannot reach them",
			"RxCSynFilter":       "ixgbe has no ethtool interface to the SYN filter",
		},
		TxSoftware: map[string]string{"TxL3IPv4FillChecksum": ipv4HeaderChecksum},
		// ixgbe_request_msix_irqs(): "%s-TxRx-%u" (netdev name, vector) for
		// a vector with both rings, "%s-rx-%u" for receive only.
		IRQNames: []string{"IF-TxRx-N", "IF-rx-N"},
	},
	// Intel 82576: igb.
	"igb": {
		Name:   "igb",
		Source: "intel/igb/igb_main.c, igb_ethtool.c, igb.h",
		// igb_get_max_rss_queues(): the 82576 without VFs falls through to
		// IGB_MAX_RX_QUEUES = 8; igb_set_channels() refuses more.
		MaxChannels: 8,
		Channels:    "ethtool -L",
		Enums:       map[string]string{"RxCsumOffload": "rx", "TxCsumInsert": "tx"},
		// igb_probe() sets NETIF_F_NTUPLE in hw_features only for
		// e1000_i350 and later; igb_add_ethtool_nfc_entry() returns
		// -EOPNOTSUPP without it. So on an 82576 ethtool -N inserts no
		// rule at all (on an I350/I210 it accepts EtherType and VLAN
		// priority rules only: ETHER_FLOW).
		Tables: map[string]prg.DriverTable{},
		RSS: &prg.DriverRSS{
			Node:     "RxCRSS",
			SetTable: true,
			// igb_set_rxfh(): entries below num_rx_queues (at most 8).
			MaxTarget: 8,
			// igb_set_rss_hash_opt(): UDP_V4_FLOW takes sd or sdfn.
			UDPPorts: true,
		},
		Hidden: map[string]string{
			"RxCEtherTypeFilter": "igb exposes ethtool -N (EtherType rules) only on the I350 and later, not on the 82576 (igb_probe: NETIF_F_NTUPLE for mac.type >= e1000_i350)",
			"RxCSynFilter":       "igb has no ethtool interface to the SYN filter",
			"RxC5TupleFilter":    "igb has no ethtool interface to the five-tuple filters (ethtool -N takes only ETHER_FLOW, and not at all on the 82576)",
		},
		TxSoftware: map[string]string{"TxL3IPv4FillChecksum": ipv4HeaderChecksum},
		// igb_request_msix(): "%s-TxRx-%u" with the receive ring's
		// queue_index, "%s-rx-%u" for a receive-only vector.
		IRQNames: []string{"IF-TxRx-N", "IF-rx-N"},
	},
	// Myricom Myri-10G: myri10ge.
	"myri10ge": {
		Name:   "myri10ge",
		Source: "myricom/myri10ge/myri10ge.c, myri10ge_mcp.h",
		// myri10ge_ethtool_ops has no get/set_channels, get/set_rxnfc or
		// get/set_rxfh: ethtool -l/-L, -n/-N (rx-flow-hash, rules) and
		// -x/-X all fail with "Operation not supported". The slice count
		// is fixed when the module loads: myri10ge_probe_slices() takes
		// the firmware's count (MXGEFW_CMD_GET_MAX_RSS_QUEUES), caps it by
		// the module parameter myri10ge_max_slices (0444; default 1, -1 =
		// one per CPU) and rounds it down to a power of two; the driver
		// allocates at most MYRI10GE_MAX_SLICES = 32.
		MaxChannels: 32,
		Channels:    "module myri10ge_max_slices",
		RSS: &prg.DriverRSS{
			Node: "RxCIPHash",
			// myri10ge_open(): MXGEFW_CMD_SET_RSS_TABLE_SIZE = num_slices
			// and the table is written i -> slice i: the driver fills it.
			SetTable: false,
			// No set_rxnfc: ethtool -N rx-flow-hash is refused. The hash
			// is the module parameter myri10ge_rss_hash (0444), sent to
			// the firmware by myri10ge_open() (MXGEFW_CMD_SET_RSS_ENABLE);
			// its default MXGEFW_RSS_HASH_TYPE_SRC_DST_PORT = 5
			// (myri10ge_mcp.h) is the port hash the model describes.
			UDPPorts:   false,
			Param:      "myri10ge_rss_hash",
			ParamValue: "5",
		},
		Hidden: map[string]string{
			"RxOMXHashMode": "the Open-MX endpoint hashing is not in the upstream myri10ge firmware interface (myri10ge_mcp.h hash types: IPV4, TCP_IPV4, SRC_PORT, SRC_DST_PORT)",
			"RxCOMXHash":    "the Open-MX endpoint hashing is not in the upstream myri10ge firmware interface (myri10ge_mcp.h hash types: IPV4, TCP_IPV4, SRC_PORT, SRC_DST_PORT)",
		},
		// myri10ge_request_irq(): with MSI-X (more than one slice) each
		// slice's vector is named "%s:slice-%d" (netdev name, slice);
		// otherwise the one interrupt is named after the interface
		// (mgp->dev->name).
		IRQNames:  []string{"IF:slice-N"},
		IRQSingle: "IF",
	},
	// Alteon Tigon: acenic.
	// Intel EtherExpress 10/100 (the M-VIA model): e100.
	"e100": {
		Name:   "e100",
		Source: "intel/e100.c",
		// e100_ethtool_ops: link, ring sizes, EEPROM, self test and
		// statistics; no set_channels, set_rxnfc or set_rxfh. One receive
		// ring (nic->rxs); hw_features adds only NETIF_F_RXFCS and
		// NETIF_F_RXALL, so no checksum offload either.
		MaxChannels: 1,
		Channels:    "fixed",
		// e100_up(): request_irq(pdev->irq, e100_intr, IRQF_SHARED,
		// netdev->name, ...): one interrupt named after the interface.
		IRQSingle: "IF",
	},
	// Giganet cLAN1000 (the clan1000 model): Giganet's own driver, not in
	// the Linux tree. IP runs through its LANE driver, which emulates one
	// Ethernet interface over VIA (SOVIA paper, section 2.4); VIs are
	// reached through the VI Provider Library, not ethtool.
	"clan": {
		Name:        "clan",
		Source:      "the SOVIA paper, sections 2.4 and 3.1 (Giganet's driver is out of tree)",
		MaxChannels: 1,
		Channels:    "fixed",
	},
	"acenic": {
		Name:   "acenic",
		Source: "alteon/acenic.c",
		// ace_ethtool_ops: get_drvinfo and the link settings only (no
		// channels, rxnfc, rxfh); one receive ring to the host; the
		// firmware is Alteon's image (tg2.bin).
		MaxChannels: 1,
		Channels:    "fixed",
		// ace_init(): request_irq(pdev->irq, ace_interrupt, IRQF_SHARED,
		// DRV_NAME, dev): one interrupt named "acenic", whatever the
		// interface is called.
		IRQSingle: "acenic",
		Hidden: map[string]string{
			"RxFirmwareSteer": "acenic loads Alteon's firmware, which has no steering table; the firmware demultiplexer needs custom firmware (--target silicon)",
			"RxFirmware":      "acenic loads Alteon's firmware; placing handlers on the two cores needs custom firmware (--target silicon)",
		},
	},
}

// Driver returns the facts of a Linux driver by name.
func Driver(name string) (*prg.Driver, bool) {
	d, ok := drivers[name]
	return d, ok
}

// Drivers lists the drivers dragonc knows, by name.
func Drivers() []string {
	var out []string
	for n := range drivers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DriverFor returns the driver facts a model names with its resource
// property `driver`, or nil and a sentence saying why there are none.
func DriverFor(m *prg.Model) (*prg.Driver, string) {
	v, ok := m.Props["driver"]
	if !ok || v.Str == "" {
		return nil, fmt.Sprintf("model %s names no Linux driver (resources { driver \"NAME\" })", m.Name)
	}
	d, ok := drivers[v.Str]
	if !ok && m.Props["driver_facts"].Str == "generic" {
		return generic(m, v.Str), ""
	}
	if !ok {
		return nil, fmt.Sprintf("dragonc has no facts about the Linux driver %q of model %s (it knows %s)", v.Str, m.Name, strings.Join(Drivers(), ", "))
	}
	if err := d.Check(m); err != nil {
		return nil, err.Error()
	}
	return d, ""
}

// generic are the facts assumed for a driver dragonc does not know, in a
// model that `dragonc discover` wrote from what the driver reports: the
// queue count through ethtool -L, checksums through ethtool -K, RSS
// through ethtool -X when the model has a table, and no filters.
func generic(m *prg.Model, name string) *prg.Driver {
	d := &prg.Driver{Name: name, Channels: "ethtool -L", Enums: map[string]string{}, Tables: map[string]prg.DriverTable{}}
	if n, ok := m.Number("rx_queues"); ok {
		d.MaxChannels = int(n)
	}
	for _, sp := range m.Spaces {
		switch sp.Feature {
		case prg.FeatureRxChecksum:
			d.Enums[sp.Node] = "rx"
		case prg.FeatureTxChecksum:
			d.Enums[sp.Node] = "tx"
		}
	}
	if sp := m.Space("RxCRSS"); sp != nil {
		d.RSS = &prg.DriverRSS{Node: "RxCRSS", SetTable: true, UDPPorts: sp.UDPPorts}
	}
	return d
}
