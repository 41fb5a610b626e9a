package embed_test

import (
	"fmt"
	"testing"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
)

// TestSessionSlotsAreLinuxLocations: a session's slots for the entries of
// the plan it starts from are the locations linux.sh writes them at
// (ethtool -N ... loc), across the 82599's tables, so that a Delta's
// Insert and Delete name the rules ethtool knows; and a location a
// removal frees is the next one given out.
func TestSessionSlotsAreLinuxLocations(t *testing.T) {
	for _, c := range []struct {
		target string
		ports  int
		tables int
	}{
		{embed.TargetLinux, 10, 1},    // ixgbe's ntuple rules are Flow Director entries
		{embed.TargetSilicon, 140, 2}, // 128 five-tuple entries, then Flow Director
	} {
		t.Run(c.target, func(t *testing.T) { testSlots(t, c.target, c.ports, c.tables) })
	}
}

func testSlots(t *testing.T, target string, ports, tables int) {
	src := []byte(fmt.Sprintf(`stack slots {
    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/24 }
    cores 0..3
    endpoint kv udp listen 10.3.0.1:30000..%d
    endpoint f1 udp flow 10.3.0.1:5000 -> 10.3.0.9:6000
    endpoint f2 tcp flow 10.3.0.1:5001 -> 10.3.0.9:6001
    service arp
}`, 30000+ports-1))
	r, st := embedtest.PlanSourceTarget(t, "82599", "slots.lpg", src, costmodel.DragonetBalance{}, target)
	ss, err := embed.NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	loc := map[string]int{}
	for _, s := range linux.Steps(r) {
		if s.Kind == linux.StepRule {
			loc[s.Entry.Endpoint] = len(loc)
		}
	}
	entries := ss.Entries()
	nodes := map[string]bool{}
	for _, e := range entries {
		nodes[e.Node] = true
	}
	if len(entries) == 0 || len(entries) != len(loc) || len(nodes) != tables {
		t.Fatalf("the session has %d entries in %d tables, linux.sh %d rules", len(entries), len(nodes), len(loc))
	}
	for _, e := range entries {
		if want, ok := loc[e.Entry.Endpoint]; !ok || e.Slot != want {
			t.Errorf("%s: %s slot %d, linux.sh's location %d (%v)", e.Entry.Endpoint, e.Node, e.Slot, want, ok)
		}
	}
	victim := entries[1]
	if _, err := ss.Remove(victim.Entry.Endpoint); err != nil {
		t.Fatal(err)
	}
	e := *st.Endpoints[0]
	e.Name, e.Ident, e.Port = "late", "late", 31000
	d, err := ss.Add(&e)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Insert) != 1 || d.Insert[0].Slot != victim.Slot {
		t.Fatalf("adding %s after removing %s: %v, want the entry at location %d", e.Name, victim.Entry.Endpoint, fmt.Sprint(d.Insert), victim.Slot)
	}
}
