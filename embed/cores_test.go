package embed

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/plan"
)

// endpointOf returns the plan's endpoint of that name.
func endpointOf(t *testing.T, pl *plan.Plan, name string) plan.Endpoint {
	t.Helper()
	i := slices.IndexFunc(pl.Endpoints, func(e plan.Endpoint) bool { return e.Name == name })
	if i < 0 {
		t.Fatalf("no endpoint %s in the plan", name)
	}
	return pl.Endpoints[i]
}

// TestCoresHonouredByRule: on linux-xdp, an address-specific listener has
// a port rule to a queue on its application's core (before, RxCPort
// could not hold its address and RSS sent gold and be both to queue 1),
// and the plan says the cores are honoured.
func TestCoresHonouredByRule(t *testing.T) {
	const src = `stack mc {
    interface eth0 { mac 00:1b:21:00:00:02 ip 10.1.0.5/16 }
    cores 0..1
    endpoint gold udp listen 10.1.0.5:11211 { app "memcached" class gold rate 100kpps cores 1..1 }
    endpoint be udp listen 10.1.0.5:11212 { app "memcached" rate 100kpps cores 0..0 }
    service arp
}`
	for _, cost := range []string{"priority", "balance", "cycles"} {
		r, err := Run(stackInput(t, "linux-xdp", src, cost, StrategyDefault))
		if err != nil {
			t.Fatal(err)
		}
		for name, core := range map[string]int{"gold": 1, "be": 0} {
			e := endpointOf(t, r.Plan, name)
			if e.Steering != "RxCPort" || !slices.Equal(e.IRQCores, []int{core}) || e.Cores != coresHonoured ||
				e.CoresWhy != fmt.Sprintf("served on its core %d (steering RxCPort)", core) {
				t.Errorf("%s: %s: steering %s, cores %v, %s: %s", cost, name, e.Steering, e.IRQCores, e.Cores, e.CoresWhy)
			}
		}
		for _, w := range r.Plan.Warnings {
			if strings.Contains(w, "runs on cores") {
				t.Errorf("%s: warning %q", cost, w)
			}
		}
	}
}

// TestCoresNotHonoured: when the plan serves an endpoint off its cores,
// plan.json and the warning say why.
func TestCoresNotHonoured(t *testing.T) {
	for _, tc := range []struct {
		name, nic, cost, stack, endpoint, why string
	}{
		{"no queue on its cores", "mvia", "balance", `stack s {
    interface eth0 { mac 00:1b:21:00:00:02 ip 10.1.0.5/16 }
    cores 0..1
    endpoint a udp listen 10.1.0.5:7 { core 1 }
}`, "a", "served on core 0, not its own: none of its cores serves a receive queue (the plan's one queue is on core 0: one for each of the stack's cores, at most as many as mvia has)"},
		{"no rule matches", "82599", "balance", `stack s {
    interface eth0 { mac 00:1b:21:00:00:02 ip 10.1.0.5/16 }
    cores 0..3
    endpoint rank openmx 3 { core 3 }
}`, "rank", "served on core 0, not its own: no rule of 82599 matches its packets; without a rule it goes to the default queue 0 on core 0 (RSS hashes IP packets only)"},
		// Gold needs a queue of its own that is not the default one:
		// on two queues, queue 1, on core 1.
		{"the cost prefers otherwise", "linux-xdp", "priority", `stack s {
    interface eth0 { mac 00:1b:21:00:00:02 ip 10.1.0.5/16 }
    cores 0..1
    endpoint gold udp listen 10.1.0.5:11211 { class gold rate 100kpps core 0 }
    endpoint be udp listen 10.1.0.5:11212 { rate 100kpps core 1 }
}`, "gold", "served on core 1, not its own: the priority cost prefers this plan (734900) to the cheapest found that serves it on its cores, a rule in RxCPort to queue 0 (core 0) (reject(368400))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(stackInput(t, tc.nic, tc.stack, tc.cost, StrategyDefault))
			if err != nil {
				t.Fatal(err)
			}
			e := endpointOf(t, r.Plan, tc.endpoint)
			if e.Cores != coresNotHonoured || e.CoresWhy != tc.why {
				t.Errorf("cores %q, reason:\n%s\nwant:\n%s", e.Cores, e.CoresWhy, tc.why)
			}
			if !slices.ContainsFunc(r.Plan.Warnings, func(w string) bool { return strings.HasSuffix(w, "but is "+tc.why) }) {
				t.Errorf("no warning with the reason: %q", r.Plan.Warnings)
			}
		})
	}
}

// TestCoresTableFull: with more endpoints bound to cores than the 82576's
// eight tuple filters, the ones left to RSS are served off their cores,
// and the reason names the full table.
func TestCoresTableFull(t *testing.T) {
	var b strings.Builder
	b.WriteString("stack s {\n    interface eth0 { mac 00:1b:21:00:00:02 ip 10.1.0.5/16 }\n    cores 0..2\n")
	for i := range 10 {
		fmt.Fprintf(&b, "    endpoint e%d udp listen 10.1.0.5:%d { rate 10kpps core %d }\n", i, 7000+i, 1+i%2)
	}
	b.WriteString("}\n")
	r, err := Run(stackInput(t, "82576", b.String(), "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	honoured, full := 0, 0
	for _, e := range r.Plan.Endpoints {
		switch {
		case e.Cores == coresHonoured:
			honoured++
		case strings.Contains(e.CoresWhy, "RxC5TupleFilter is full (8 entries)"):
			full++
		default:
			t.Errorf("%s: %s: %s", e.Name, e.Cores, e.CoresWhy)
		}
	}
	if honoured != 8 || full != 2 {
		t.Errorf("%d honoured, %d off their cores for a full table; want 8 and 2", honoured, full)
	}
}

// TestSpreadReasons: memcached_gold under priority on the 82599 spreads
// batch over its own cores 4..7 by RSS (the RSS mode of batch's cores)
// and says why gold hot is not spread; under balance on linux-xdp hot is
// spread over its cores 0..3 and batch is kept on core 4 by a rule, with
// the cost of the cheapest plan found that spreads batch.
func TestSpreadReasons(t *testing.T) {
	src, err := os.ReadFile("../examples/memcached_gold.lpg")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(stackInput(t, "82599", string(src), "priority", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	if b := endpointOf(t, r.Plan, "batch"); !slices.Equal(b.IRQCores, []int{4, 5, 6, 7}) || b.Cores != coresHonoured {
		t.Errorf("priority: batch on cores %v, %s", b.IRQCores, b.Cores)
	}
	const gold = "endpoint hot should be spread over cores 0,1,2,3 (its application runs on cores 0,1,2,3) but is served on core 1: the priority cost gives a gold endpoint one queue of its own, and rejects a plan that spreads it over several"
	if !slices.Contains(r.Plan.Warnings, gold) {
		t.Errorf("priority: warnings %q", r.Plan.Warnings)
	}
	r, err = Run(stackInput(t, "linux-xdp", string(src), "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	if h := endpointOf(t, r.Plan, "hot"); !slices.Equal(h.IRQCores, []int{0, 1, 2, 3}) || h.Cores != coresHonoured {
		t.Errorf("balance: hot on cores %v, %s", h.IRQCores, h.Cores)
	}
	if b := endpointOf(t, r.Plan, "batch"); b.Steering != "RxCPort" || !slices.Equal(b.IRQCores, []int{4}) {
		t.Errorf("balance: batch steered by %s on cores %v", b.Steering, b.IRQCores)
	}
	if !slices.ContainsFunc(r.Plan.Warnings, func(w string) bool {
		return strings.HasPrefix(w, "endpoint batch should be spread") && strings.Contains(w, "to the cheapest found that spreads it, with RSS over queues 4,5,6,7 on cores 4,5,6,7 (")
	}) {
		t.Errorf("balance: warnings %q", r.Plan.Warnings)
	}
}
