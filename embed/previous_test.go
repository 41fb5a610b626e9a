package embed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/plan"
)

func readPlan(t *testing.T, path string) *plan.Plan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := plan.Read(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// TestCheckPreviousOwnModel: every kept plan names only what its own
// model has.
func TestCheckPreviousOwnModel(t *testing.T) {
	for _, nic := range nicNames {
		m := loadModel(t, nic)
		paths, _ := filepath.Glob(filepath.Join("../testdata/embed", nic, "*.plan.json"))
		if len(paths) == 0 {
			t.Fatalf("no plans of %s", nic)
		}
		for _, path := range paths {
			if probs := CheckPrevious(readPlan(t, path), m); len(probs) > 0 {
				t.Errorf("%s: %q", path, probs)
			}
		}
	}
}

// planOn82599 is a small plan of the 82599: a switch, a filter entry, an
// RSS table, a queue and an endpoint.
func planOn82599() *plan.Plan {
	return &plan.Plan{GeneratedBy: "dragonc", SchemaVersion: plan.SchemaVersion, NIC: "82599", Stack: "s",
		Queues: []plan.Queue{{ID: 1, Core: 1, Endpoints: []string{"dns"}}},
		Config: []plan.Config{
			{Node: "RxCsumOffload", Kind: "enum", Choice: "on"},
			{Node: "RxC5TupleFilter", Kind: "table", Entries: []plan.Entry{{Match: "ip.proto == 17 && udp.dport == 53", Action: "RxQueue1", Priority: 1, Endpoint: "dns",
				Fields: []plan.Field{{Field: "ip.proto", Value: 17}, {Field: "l4.dport", Value: 53}}}}},
			{Node: "RxCRSS", Kind: "hash", Indirection: []string{"RxQueue1", "RxQueue2", "RxQueue1", "RxQueue2"}},
		},
		Endpoints: []plan.Endpoint{{Name: "dns", Queues: []int{1}, Steering: "RxC5TupleFilter", IRQCores: []int{1}}},
		Placement: map[string]plan.Place{"RxL4UDPSocket_dns": {Where: "software", Queues: []int{1}}},
	}
}

// TestCheckPreviousOtherModel: a plan that names configuration nodes,
// targets, fields, choices, tasks, engines or queues the model lacks was
// made for another model and is reported; endpoints the stack lost are
// not.
func TestCheckPreviousOtherModel(t *testing.T) {
	m := loadModel(t, "82599")
	if probs := CheckPrevious(planOn82599(), m); len(probs) != 0 {
		t.Fatalf("the plan of the 82599: %q", probs)
	}
	for _, c := range []struct {
		name   string
		change func(p *plan.Plan)
		want   string
	}{
		{"node", func(p *plan.Plan) { p.Config[1].Node = "RxC5TupleFiltr" },
			`config[1] names configuration node "RxC5TupleFiltr", which NIC model i82599 does not have (did you mean "RxC5TupleFilter"?)`},
		{"kind", func(p *plan.Plan) { p.Config[1].Kind = "hash" },
			"config[1]: RxC5TupleFilter is a hash node in the plan but a table node in NIC model i82599"},
		{"action", func(p *plan.Plan) { p.Config[1].Entries[0].Action = "RxQueue200" },
			"config[1]: an entry of RxC5TupleFilter leads to RxQueue200, which is not one of its targets in NIC model i82599"},
		{"field", func(p *plan.Plan) { p.Config[1].Entries[0].Fields[0].Field = "ip.ttl" },
			"config[1]: an entry of RxC5TupleFilter matches field ip.ttl, which RxC5TupleFilter does not match in NIC model i82599"},
		{"choice", func(p *plan.Plan) { p.Config[0].Choice = "maybe" },
			`config[0]: RxCsumOffload has no choice "maybe" in NIC model i82599`},
		{"indirection", func(p *plan.Plan) { p.Config[2].Indirection[3] = "RxQueue64" },
			"config[2]: the indirection table of RxCRSS leads to RxQueue64, which is not one of its targets in NIC model i82599"},
		{"placement", func(p *plan.Plan) { p.Config[0].Placement = map[string]string{"Mailbox": "CpuA"} },
			"config[0]: RxCsumOffload places task Mailbox, which NIC model i82599 does not have\n" +
				"config[0]: RxCsumOffload places a task on engine CpuA, which NIC model i82599 does not have"},
		{"queue", func(p *plan.Plan) { p.Queues[0].ID = 500 },
			"queues[0] names receive queue 500, which NIC model i82599 does not have (it has 128)"},
		{"endpoint queue", func(p *plan.Plan) { p.Endpoints[0].Queues = []int{-1, -1} },
			"endpoint dns names receive queue -1, which NIC model i82599 does not have (it has 128)"},
	} {
		p := planOn82599()
		c.change(p)
		probs := CheckPrevious(p, m)
		if got := strings.Join(probs, "\n"); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, probs, c.want)
		}
	}
	// Endpoints and LPG nodes the stack has since lost are what the
	// incremental strategy is for.
	p := planOn82599()
	p.Endpoints = append(p.Endpoints, plan.Endpoint{Name: "gone", Queues: []int{1}})
	p.Config[1].Entries[0].Endpoint = "gone"
	p.Placement["RxL4UDPSocket_gone"] = plan.Place{Where: "software", Queues: []int{1}}
	if probs := CheckPrevious(p, m); len(probs) != 0 {
		t.Errorf("a removed endpoint: %q", probs)
	}
	// The plan of another NIC.
	tigon := readPlan(t, "../testdata/embed/tigon/web_and_dns.plan.json")
	if probs := CheckPrevious(tigon, m); len(probs) == 0 {
		t.Error("Tigon's plan passes on the 82599")
	}
}

// TestIncrementalRefusesOtherModel: the incremental search itself refuses
// a previous plan made for another model, for callers of the library as
// for the command.
func TestIncrementalRefusesOtherModel(t *testing.T) {
	in := stackInput(t, "tigon", `stack s {
    interface eth0 { mac 00:1b:21:00:00:09 ip 10.9.0.1/24 }
    endpoint dns udp listen *:53
}`, "balance", StrategyIncremental)
	in.Previous = planOn82599()
	if _, err := Run(in); err == nil || !strings.Contains(err.Error(), "not made for this NIC model") {
		t.Fatalf("a previous plan of the 82599 on the Tigon: %v", err)
	}
	in = stackInput(t, "82599", `stack s {
    interface eth0 { mac 00:1b:21:00:00:09 ip 10.9.0.1/24 }
    endpoint dns udp listen *:53
}`, "balance", StrategyIncremental)
	in.Previous = planOn82599()
	if _, err := Run(in); err != nil {
		t.Fatalf("a previous plan of the 82599 on the 82599: %v", err)
	}
}
