package embed

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/internal/graph"
)

// dragonetAssignment runs --strategy dragonet-greedy and returns each
// endpoint's queue (-1: no entry) and the final cost.
func dragonetAssignment(t *testing.T, nic, src, cost string) (map[string]int, costmodel.Cost, error) {
	t.Helper()
	p, err := newProblem(stackInput(t, nic, src, cost, "dragonet-greedy"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.search("dragonet-greedy")
	if err != nil {
		return nil, costmodel.Cost{}, err
	}
	out := map[string]int{}
	for i, e := range p.eps {
		out[e.ep.Name] = -1
		if s.choice[i].t != nil {
			out[e.ep.Name] = p.queues[s.choice[i].q].id
		}
	}
	return out, s.ev.Cost(), nil
}

func flowStack(cores int, flows []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack dg {\n    interface eth0 { mac 00:1b:21:00:00:07 ip 10.0.0.1/24 }\n    cores 0..%d\n", cores-1)
	for _, f := range flows {
		b.WriteString("    " + f + "\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// TestDragonetGreedyBalance: 18 UDP flows on an 82599 with 4 queues under
// Dragonet's balance, worked out by hand from Search.hs.
//
// Dragonet's greedy search takes the flows in declaration order (the
// balance function sorts nothing), offers a five-tuple entry to each of
// queues 1..3 (allQueues 4 = [1,2,3]; queue 0 is the catch-all), and costs
// each offer as the standard deviation of the flow counts on queues 1..3
// over the flows placed so far:
//
//	flow 1: (1,0,0) (0,1,0) (0,0,1) all sd 0.471, the first minimum: queue 1
//	flow 2: (2,0,0) sd 0.943, (1,1,0) and (1,0,1) sd 0.471: queue 2
//	flow 3: (2,1,0)... only (1,1,1) has sd 0: queue 3
//	flow 4 starts the round again at queue 1, and so on.
//
// So flow k goes to queue 1 + (k-1) mod 3, six flows a queue, cost 0.
func TestDragonetGreedyBalance(t *testing.T) {
	var flows []string
	want := map[string]int{}
	for k := 1; k <= 18; k++ {
		name := fmt.Sprintf("f%02d", k)
		flows = append(flows, fmt.Sprintf("endpoint %s udp flow 10.0.0.1:%d -> 10.0.0.%d:%d", name, 5000+k, 100+k, 40000+k))
		want[name] = 1 + (k-1)%3
	}
	got, cost, err := dragonetAssignment(t, "82599", flowStack(4, flows), "dragonet-balance")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("assignment (-Dragonet +dragonc):\n%s", d)
	}
	if cost.Kind != costmodel.Value || cost.V != 0 {
		t.Errorf("cost %v, want 0", cost)
	}
}

// TestDragonetGreedyPriority: two gold and four best-effort flows on 5
// queues under Dragonet's priority cost with one gold flow per queue,
// worked out by hand from Search.hs (priorityCost, prioritySort).
//
// prioritySort puts the gold flows first: g1 g2 b1 b2 b3 b4. Queues 1..4
// are the targets (nq = 5).
//
//	g1: no best-effort flow placed yet, so the cost is the balance of gold
//	    over 1..4 plus the extra gold queues; every queue gives sd 0.433:
//	    queue 1.
//	g2: goldNQs = 2. On queue 1, (2,0,0,0) sd 0.866; elsewhere (1,1,0,0)
//	    sd 0.5: queue 2.
//	b1: on queue 1 or 2 a gold queue stops being exclusive: goldNeeded 1,
//	    reject(100). On 3 or 4: balance of gold over {1,2} is 0, of
//	    best-effort over {3,4} is 0.5; beNQs = min(5-2, 1) = 1 is met:
//	    0.5 both, the first: queue 3.
//	b2: beNQs = 2. Queue 3: one exclusive best-effort queue, 100 + sd of
//	    (2,0) = 101; queue 4: 0 + sd of (1,1) = 0: queue 4.
//	b3: beNQs = min(3, 3) = 3, but filters never target queue 0, so at
//	    most {3,4} are best-effort's: 100 + 0.5 on 3 or 4: queue 3.
//	b4: queue 3 gives (3,1), 100 + 1; queue 4 gives (2,2), 100 + 0:
//	    queue 4.
//
// Final cost: 100 (Search.hs's penalty for the best-effort queue its own
// count of nq - goldNQs promises, queue 0 included, but never fills).
func TestDragonetGreedyPriority(t *testing.T) {
	flows := []string{
		"endpoint b1 udp flow 10.0.0.1:6001 -> 10.0.0.201:41001",
		"endpoint g1 udp flow 10.0.0.1:5001 -> 10.0.0.101:40001 { class gold }",
		"endpoint b2 udp flow 10.0.0.1:6002 -> 10.0.0.202:41002",
		"endpoint g2 udp flow 10.0.0.1:5002 -> 10.0.0.102:40002 { class gold }",
		"endpoint b3 udp flow 10.0.0.1:6003 -> 10.0.0.203:41003",
		"endpoint b4 udp flow 10.0.0.1:6004 -> 10.0.0.204:41004",
	}
	got, cost, err := dragonetAssignment(t, "82599", flowStack(5, flows), "dragonet-priority")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"g1": 1, "g2": 2, "b1": 3, "b2": 4, "b3": 3, "b4": 4}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("assignment (-Dragonet +dragonc):\n%s", d)
	}
	if cost.Kind != costmodel.Value || math.Abs(cost.V-100) > 1e-9 {
		t.Errorf("cost %v, want 100", cost)
	}
}

// TestDragonetGreedyStopsWhenFull: Dragonet's oracle offers nothing once
// its tables are full and its search stops ("Oracle did not return any
// confs, bailing out"). The 82576 model holds a UDP flow in its 8 flex
// filters, then its 8 five-tuple filters (nics/82576.prg): the 17th flow
// finds no room.
func TestDragonetGreedyStopsWhenFull(t *testing.T) {
	var flows []string
	for k := 1; k <= 20; k++ {
		flows = append(flows, fmt.Sprintf("endpoint f%02d udp flow 10.0.0.1:%d -> 10.0.0.%d:%d", k, 5000+k, 100+k, 40000+k))
	}
	_, _, err := dragonetAssignment(t, "82576", flowStack(4, flows), "dragonet-balance")
	if err == nil || !strings.Contains(err.Error(), "offers nothing for endpoint f17 (after 16 placed") {
		t.Fatalf("want a stop at f17, got %v", err)
	}
	// The default strategy leaves the flows that do not fit to RSS.
	if _, err := Run(stackInput(t, "82576", flowStack(4, flows), "dragonet-balance", "default")); err != nil {
		t.Fatal(err)
	}
}

// TestDragonetGreedyFlatPriority: every entry of a dragonet-greedy plan
// has Dragonet's one priority, so a flow and the listener on its port are
// ordered by insertion alone, as on Dragonet's NIC.
func TestDragonetGreedyFlatPriority(t *testing.T) {
	src := flowStack(4, []string{
		"endpoint any udp listen *:5000",
		"endpoint one udp flow 10.0.0.1:5000 -> 10.0.0.9:40000",
	})
	r, err := Run(stackInput(t, "82599", src, "dragonet-balance", "dragonet-greedy"))
	if err != nil {
		t.Fatal(err)
	}
	prios := map[int]bool{}
	for _, pc := range r.Plan.Config {
		for _, e := range pc.Entries {
			prios[e.Priority] = true
		}
	}
	if len(prios) != 1 {
		t.Errorf("entries at priorities %v, want one", prios)
	}
}

// TestDragonetLabelsAgreeWithLPG: Dragonet embeds by label, so a node of
// Dragonet's models that carries the label of an LPG node must mean what
// that node means (prg/dragonet.go dragonetLabels gives the meaning).
func TestDragonetLabelsAgreeWithLPG(t *testing.T) {
	src, _ := os.ReadFile("../examples/web_and_dns.lpg")
	for _, nic := range []string{"dragonet-e10k", "dragonet-sf"} {
		in := stackInput(t, nic, string(src), "balance", "default")
		shared := 0
		for _, n := range in.Model.G.Nodes {
			ln, ok := in.LPG.Lookup(n.Name)
			if !ok || n.Kind.IsGate() || n.Kind == graph.Config {
				continue
			}
			shared++
			for _, p := range n.Ports {
				lp := ln.Port(p.Name)
				if lp == nil {
					t.Errorf("%s: %s has port %s, the LPG's node has not", nic, n.Name, p.Name)
					continue
				}
				if fmt.Sprint(p.Pred) != fmt.Sprint(lp.Pred) {
					t.Errorf("%s: %s.%s means %v, the LPG's %v", nic, n.Name, p.Name, p.Pred, lp.Pred)
				}
			}
		}
		if shared != 3 { // RxL2EtherValidLength, RxL2EtherValidCRC, RxL3IPv4ValidChecksum
			t.Errorf("%s: %d nodes share a label with the LPG, want 3", nic, shared)
		}
	}
}
