package embed_test

import (
	"fmt"
	"testing"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
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

// A session serving six UDP flows on an 82599 with four queues: one flow
// leaves, its entry is deleted, and the next flow's entry takes its
// location.
func ExampleSession() {
	src := []byte(`stack example {
    interface eth0 { mac 00:1b:21:00:00:05 ip 10.0.0.1/24 }
    cores 0..3
    endpoint f1 udp flow 10.0.0.1:7001 -> 10.0.0.9:8001
    endpoint f2 udp flow 10.0.0.1:7002 -> 10.0.0.9:8002
    endpoint f3 udp flow 10.0.0.1:7003 -> 10.0.0.9:8003
    endpoint f4 udp flow 10.0.0.1:7004 -> 10.0.0.9:8004
    endpoint f5 udp flow 10.0.0.1:7005 -> 10.0.0.9:8005
    endpoint f6 udp flow 10.0.0.1:7006 -> 10.0.0.9:8006
}`)
	st, diags := lpg.LoadStack("example.lpg", src)
	if st == nil {
		fmt.Println(diags)
		return
	}
	m, _, err := nics.Load("82599")
	if err != nil {
		fmt.Println(err)
		return
	}
	in, _, err := embed.NewInput("82599", m, st, nil, embed.Options{Cost: costmodel.DragonetBalance{}, Target: embed.TargetSilicon})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := embed.Run(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	ss, err := embed.NewSession(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func(d *embed.Delta) {
		for _, e := range d.Insert {
			fmt.Printf("  insert %s loc %d: %s -> %s\n", e.Node, e.Slot, e.Entry.Endpoint, e.Entry.Action)
		}
		for _, e := range d.Delete {
			fmt.Printf("  delete %s loc %d: %s\n", e.Node, e.Slot, e.Entry.Endpoint)
		}
	}
	d, err := ss.Remove("f2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("remove f2:")
	show(d)
	f7 := *st.Endpoints[0]
	f7.Name, f7.Ident, f7.Port, f7.RPort = "f7", "f7", 7007, 8007
	if d, err = ss.Add(&f7); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("add f7:")
	show(d)
	// Output:
	// remove f2:
	//   delete RxC5TupleFilter loc 1: f2
	// add f7:
	//   insert RxC5TupleFilter loc 1: f7 -> RxQueue2
}
