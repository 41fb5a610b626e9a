package run

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends/gofallback"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
)

// fastStack is a stack of UDP echo listeners spread over two queues by
// their rates, plus lines.
func fastStack(lines ...string) string {
	var b strings.Builder
	b.WriteString("stack fast {\n    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }\n    cores 0..1\n")
	for i := range 12 {
		fmt.Fprintf(&b, "    endpoint e%d udp listen *:%d { app \"echo\" rate %dkpps }\n", i, 7000+i, 10+10*i)
	}
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("    service icmp-echo\n    service arp\n}\n")
	return b.String()
}

// The short path's tables and rules are those the session's plan
// generates, change after change; a change it cannot vouch for is left
// to the full path.
func TestFastChanges(t *testing.T) {
	r, st := embedTest(t, fastStack())
	stage, err := stageOfLPG(r.Plan, st, nil, r.Embedding.LPG)
	if err != nil {
		t.Fatal(err)
	}
	code, err := gofallback.GenerateSwappable(r, st, gofallback.Options{Source: "run", Module: "dragoncrun/fallback", NoTest: true})
	if err != nil {
		t.Fatal(err)
	}
	sv := &serving{r: r, st: st, stage: stage, code: code}
	ss, err := dembed.NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	fast := 0
	for _, c := range []struct {
		name  string
		lines []string
		fast  bool
	}{
		{"add", []string{`endpoint x1 udp listen *:7100 { app "echo" }`}, true},
		{"add a busy one", []string{`endpoint x1 udp listen *:7100 { app "echo" }`, `endpoint x2 udp listen *:7101 { app "echo" rate 500kpps }`}, true},
		{"remove", []string{`endpoint x2 udp listen *:7101 { app "echo" rate 500kpps }`}, true},
		{"app changes", []string{`endpoint x2 udp listen *:7101 { app "discard" rate 500kpps }`}, true},
		{"a port shared", []string{`endpoint x2 udp listen *:7101 { app "discard" rate 500kpps }`, `endpoint x3 udp listen 10.9.0.1:7101 { app "echo" }`}, false},
		{"tcp", []string{`endpoint x2 udp listen *:7101 { app "discard" rate 500kpps }`, `endpoint t tcp listen *:80 { app "echo" }`}, false},
	} {
		next := loadStack(t, fastStack(c.lines...))
		d, err := ss.Apply(next)
		if err != nil {
			if c.fast {
				t.Fatalf("%s: %v", c.name, err)
			}
			continue // refused by the session, which is unchanged: the full path plans it
		}
		added := map[string]*lpg.Endpoint{}
		for _, e := range next.Endpoints {
			for _, a := range d.Added {
				if a == e.Name {
					added[a] = e
				}
			}
		}
		why := sv.fastRefused(added, d.Removed)
		var ch *fastChange
		if why == "" {
			ch, why = sv.fastChanges(d, added)
		}
		if (why == "") != c.fast {
			t.Fatalf("%s: short path %v (%s), want %v", c.name, why == "", why, c.fast)
		}
		r2, err := ss.Result()
		if err != nil {
			t.Fatal(err)
		}
		code2, err := gofallback.GenerateSwappable(r2, next, gofallback.Options{Source: "run", Module: "dragoncrun/fallback", NoTest: true})
		if err != nil {
			t.Fatal(err)
		}
		stage2, err := stageOfLPG(r2.Plan, next, nil, r2.Embedding.LPG)
		if err != nil {
			t.Fatal(err)
		}
		if why != "" {
			// The full path: what it serves is the session's plan.
			sv = &serving{r: r2, st: next, stage: stage2, code: code2}
			ss, _ = dembed.NewSession(r2)
			continue
		}
		fast++
		sv.commitFast(next, d, added, ch)
		if diff := sameTables(sv.code, code2); diff != "" {
			t.Errorf("%s: the short path's tables differ from the plan's code in %s", c.name, diff)
		}
		if len(sv.stage.Groups) != len(stage2.Groups) {
			t.Fatalf("%s: %d groups, the plan's %d", c.name, len(sv.stage.Groups), len(stage2.Groups))
		}
		for i := range stage2.Groups {
			if a, b := firstRules(sv.stage.Groups[i].Rules), firstRules(stage2.Groups[i].Rules); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("%s: group %d's rules %v, the plan's %v", c.name, i, a, b)
			}
		}
		if len(d.Queues) > 0 {
			t.Logf("%s: %+v", c.name, d.Queues)
		}
	}
	if fast == 0 {
		t.Error("no change took the short path")
	}
}
