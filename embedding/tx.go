package embedding

import (
	"slices"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/prg"
)

// txLate are the LPG's transmit nodes the NIC may run in place of the
// software: checksum fills, each over bytes that no transmit node after
// it in the LPG changes (the IPv4 header written after a transport
// checksum carries the same addresses, protocol and length its
// pseudo-header summed), so filling them last, on the way out, gives the
// same frame. TestTxOffload (package run) builds every reply both ways
// and checks the checksums with gopacket.
var txLate = []string{"TxL3IPv4FillChecksum", "TxL4UDPFillChecksum", "TxL4TCPFillChecksum"}

// TxOffloaded returns the LPG's transmit nodes the NIC runs: a node of
// the configured PRG's transmit path (hw) carrying the LPG node's name,
// as Dragonet embeds by label (lib/Dragonet/Embedding/Offload.hs), that
// the driver asks the NIC for (d nil: the whole silicon), and whose work
// can move to the end of the path (txLate).
func TxOffloaded(m *prg.Model, hw, lpg *graph.Graph, d *prg.Driver) map[string]bool {
	out := map[string]bool{}
	for _, name := range m.TxPath(hw) {
		if !slices.Contains(txLate, name) {
			continue
		}
		if _, ok := lpg.Lookup(name); !ok {
			continue
		}
		if d != nil {
			if _, sw := d.TxSoftware[name]; sw {
				continue
			}
		}
		out[name] = true
	}
	return out
}
