package run

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dragonc/dragonc/backends/gofallback"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/run/dataplane"
)

// fastStack is a stack of UDP echo listeners of several rates on cores,
// plus lines.
func fastStack(cores string, lines ...string) string {
	var b strings.Builder
	b.WriteString("stack fast {\n    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }\n    cores " + cores + "\n")
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
	testFastChanges(t, func(l ...string) string { return fastStack("0..3", l...) }, []fastCase{
		{"add", []string{`endpoint x1 udp listen *:7100 { app "echo" }`}, true},
		{"add a busy one", []string{`endpoint x1 udp listen *:7100 { app "echo" }`, `endpoint x2 udp listen *:7101 { app "echo" rate 500kpps }`}, true},
		{"remove", []string{`endpoint x2 udp listen *:7101 { app "echo" rate 500kpps }`}, true},
		{"app changes", []string{`endpoint x2 udp listen *:7101 { app "discard" rate 500kpps }`}, true},
		{"a port shared", []string{`endpoint x2 udp listen *:7101 { app "discard" rate 500kpps }`, `endpoint x3 udp listen 10.9.0.1:7101 { app "echo" }`}, false},
		{"tcp", []string{`endpoint x2 udp listen *:7101 { app "discard" rate 500kpps }`, `endpoint t tcp listen *:80 { app "echo" }`}, false},
	})
	// Listeners on an address key their tables on more fields: an added
	// one packs as those there do. A connected flow can change the code's
	// shape: the full path applies it.
	base := []string{`endpoint a1 udp listen 10.9.0.1:8001 { app "echo" }`, `endpoint a2 udp listen 10.9.0.1:8002 { app "echo" }`,
		`endpoint f1 udp flow 10.9.0.1:9001 -> 10.9.0.2:5001 { app "echo" }`, `endpoint f2 udp flow 10.9.0.1:9002 -> 10.9.0.3:5002 { app "echo" }`}
	testFastChanges(t, func(l ...string) string { return fastStack("0..1", append(slices.Clone(base), l...)...) }, []fastCase{
		{"add on an address", []string{`endpoint a3 udp listen 10.9.0.1:8003 { app "echo" }`}, true},
		{"add a flow", []string{`endpoint a3 udp listen 10.9.0.1:8003 { app "echo" }`, `endpoint f3 udp flow 10.9.0.1:9003 -> 10.9.0.4:5003 { app "echo" }`}, false},
		{"remove a flow", []string{`endpoint a3 udp listen 10.9.0.1:8003 { app "echo" }`}, false},
		{"remove on an address", nil, true},
	})
}

// servedOffline is what a serving of plan r of stack st knows of it,
// without serving it: its stage and code.
func servedOffline(t *testing.T, r *dembed.Result, st *lpg.Stack) *serving {
	t.Helper()
	stage, err := stageOfLPG(r.Plan, st, nil, r.Embedding.LPG)
	if err != nil {
		t.Fatal(err)
	}
	code, err := servedCode(r, st)
	if err != nil {
		t.Fatal(err)
	}
	return &serving{r: r, st: st, stage: stage, code: code}
}

// fastCase is a stack's extra lines and whether the short path applies
// the change to it.
type fastCase struct {
	name  string
	lines []string
	fast  bool
}

func testFastChanges(t *testing.T, src func(lines ...string) string, cases []fastCase) {
	r, st := embedTest(t, src())
	sv := servedOffline(t, r, st)
	ss, err := dembed.NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	fast := 0
	for _, c := range cases {
		next := loadStack(t, src(c.lines...))
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
		r2, code2, stage2 := sessionPlan(t, ss, next)
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
		if diff := sameRules(sv.stage, stage2); diff != "" {
			t.Errorf("%s: the short path's rules differ from the plan's in %s", c.name, diff)
		}
		if len(d.Queues) > 0 {
			t.Logf("%s: %+v", c.name, d.Queues)
		}
	}
	if fast == 0 {
		t.Error("no change took the short path")
	}
}

// TestLiveAddRemove serves reloadStack and changes it through Live.Add
// and Live.Remove: an added endpoint answers its first datagram, a
// removed one is refused, both by the short path, and a name served
// already or not served is refused while the plan serves on.
func TestLiveAddRemove(t *testing.T) {
	a, b := pair(t)
	_, _, live := reloadRun(t, a, "xdp")
	st := loadStack(t, withEndpoints("    endpoint e5 udp listen *:7005 { app \"echo\" }\n"))
	e5 := *st.Endpoints[len(st.Endpoints)-1]
	e5.Ident = "" // derived from the name
	res, err := live.Add(e5)
	if err != nil || !res.Applied || !res.Short || len(res.Added) != 1 || res.Added[0] != "e5" {
		t.Fatalf("Add e5: %+v, %v; want applied by the short path", res, err)
	}
	if err := inNS(b, func() error {
		if got, err := udpFirst(7005, []byte("added")); err != nil || string(got) != "added" {
			return fmt.Errorf("e5's first datagram: %q, %v", got, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := live.Add(e5); err != nil || res.Applied || !strings.Contains(res.Error, "served already") {
		t.Errorf("Add e5 again: %+v, %v; want refused", res, err)
	}
	if res, err := live.Remove("nosuch"); err != nil || res.Applied || !strings.Contains(res.Error, "no endpoint nosuch") {
		t.Errorf("Remove nosuch: %+v, %v; want refused", res, err)
	}
	res, err = live.Remove("e5")
	if err != nil || !res.Applied || !res.Short || len(res.Removed) != 1 {
		t.Fatalf("Remove e5: %+v, %v; want applied by the short path", res, err)
	}
	if err := inNS(b, func() error {
		if _, err := udpFirst(7005, []byte("gone")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("e5 removed: %v, want port unreachable", err)
		}
		if got, err := udpFirst(7001, []byte("kept")); err != nil || string(got) != "kept" {
			return fmt.Errorf("e1 after the changes: %q, %v", got, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The rules of a Delta go to their group: an inserted entry's key with
// its queue, a deleted one's key out, an entry of another shape or an
// unknown table left to the full path.
func TestFastRules(t *testing.T) {
	r, st := embedTest(t, bigStack(6, false))
	sv := servedOffline(t, r, st)
	var e0 plan.Entry
	for _, c := range r.Plan.Config {
		for _, e := range c.Entries {
			if c.Node == "RxCPort" && e.Endpoint == "e0" {
				e0 = e
			}
		}
	}
	if e0.Endpoint == "" || len(sv.stage.Groups) != 1 {
		t.Fatalf("bigStack's plan has no rule for e0 or %d groups", len(sv.stage.Groups))
	}
	next := loadStack(t, strings.Replace(bigStack(6, false), "    service icmp-errors", "    endpoint r1 udp listen *:30001 { app \"echo\" }\n    service icmp-errors", 1))
	r1 := e0
	r1.Endpoint, r1.Action = "r1", "RxQueue0"
	r1.Fields = slices.Clone(e0.Fields)
	for i := range r1.Fields {
		if r1.Fields[i].Field == "l4.dport" {
			r1.Fields[i].Value = 30001
		}
	}
	d := &dembed.Delta{Added: []string{"r1"}, Insert: []dembed.EntryChange{{Node: "RxCPort", Entry: r1}},
		Delete: []dembed.EntryChange{{Node: "RxCPort", Entry: e0}}, Queues: []dembed.QueueChange{{Endpoint: "r1", To: []int{1}}}}
	added := map[string]*lpg.Endpoint{"r1": next.Endpoints[len(next.Endpoints)-1]}
	ch, why := sv.fastChanges(d, added)
	if why != "" {
		t.Fatalf("short path refused: %s", why)
	}
	k1, _, _, _ := entryKey(r1)
	k0, _, _, _ := entryKey(e0)
	got := firstRules(ch.groups[0])
	if q, ok := got[k1]; !ok || q != 0 {
		t.Errorf("r1's rule: queue %d (%v), want 0", q, ok)
	}
	if _, ok := got[k0]; ok || len(got) != 6 {
		t.Errorf("after the change %d rules, e0's still there: %v", len(got), ok)
	}
	// An entry of another shape has no group to go to.
	odd := r1
	odd.Fields = append(slices.Clone(r1.Fields), plan.Field{Field: "ip.dst", Value: 0x0a090001})
	d.Insert = []dembed.EntryChange{{Node: "RxCPort", Entry: odd}}
	if _, why := sv.fastChanges(d, added); !strings.Contains(why, "another shape") {
		t.Errorf("a rule of another shape: %q", why)
	}
}

// settle's comparisons see an entry that delivers elsewhere, a key
// missing, and a rule to another queue.
func TestSettleCompares(t *testing.T) {
	tab := func(es ...gofallback.TableEntry) *gofallback.Swappable {
		return &gofallback.Swappable{Shape: "s", Tables: []gofallback.Table{{Name: "table0", Entries: es}}}
	}
	e := func(k uint64, ep string) gofallback.TableEntry {
		return gofallback.TableEntry{K0: k, Kind: dataplane.Deliver, Endpoint: ep}
	}
	a := tab(e(1, "x"), e(2, "y"))
	for _, c := range []struct {
		b    *gofallback.Swappable
		same bool
	}{
		{tab(e(2, "y"), e(1, "x")), true},
		{tab(e(1, "x"), e(2, "z")), false},
		{tab(e(1, "x"), e(3, "y")), false},
		{tab(e(1, "x")), false},
		{&gofallback.Swappable{Shape: "t", Tables: a.Tables}, false},
	} {
		if got := sameTables(a, c.b) == ""; got != c.same {
			t.Errorf("sameTables(%v, %v) same %v, want %v", a.Tables, c.b.Tables, got, c.same)
		}
	}
	g := func(q uint32) *Stage {
		return &Stage{Groups: []Group{{Table: "RxCPort", Rules: []Rule{{Key: [16]byte{1}, Queue: 1}, {Key: [16]byte{2}, Queue: q}}}}}
	}
	if sameRules(g(1), g(1)) != "" || sameRules(g(1), g(2)) == "" {
		t.Error("sameRules does not tell a rule to another queue")
	}
}

// The short path's update carries only what changes: a new endpoint
// numbered after the helper's, an entry set and one deleted; one that
// changes nothing carries nothing.
func TestHelperPatch(t *testing.T) {
	st := loadStack(t, reloadStack)
	h := newHelperState(st)
	h.tables["table0"] = map[dataplane.TableKey]dataplane.TableEntry{{K0: 7001}: {K0: 7001, Kind: dataplane.Deliver, Index: 0}}
	e4 := &lpg.Endpoint{Name: "e4", Proto: lpg.UDP, Port: 7004, App: "echo", AnyAddr: true}
	u, commit := h.patch(map[string]*lpg.Endpoint{"e4": e4}, []tablePatch{{Name: "table0",
		Set: []gofallback.TableEntry{{K0: 7004, Kind: dataplane.Deliver, Endpoint: "e4"}}, Delete: [][2]uint64{{7001, 0}}}})
	want := &dataplane.Update{Endpoints: []dataplane.UpdateEndpoint{{Name: "e4", App: "echo"}},
		Tables: []dataplane.UpdateTable{{Name: "table0", Set: []dataplane.TableEntry{{K0: 7004, Kind: dataplane.Deliver, Index: 3}}, Delete: []dataplane.TableKey{{K0: 7001}}}}}
	if fmt.Sprint(u) != fmt.Sprint(want) {
		t.Fatalf("patch: %+v, want %+v", u, want)
	}
	commit()
	if m := h.tables["table0"]; len(m) != 1 || m[dataplane.TableKey{K0: 7004}].Index != 3 || h.index["e4"] != 3 {
		t.Errorf("after the patch the helper's table is %v, e4 numbered %d", m, h.index["e4"])
	}
	if u, _ := h.patch(map[string]*lpg.Endpoint{"e4": e4}, nil); len(u.Endpoints)+len(u.Tables) > 0 {
		t.Errorf("nothing changed, yet the update is %+v", u)
	}
}

// A rebalance's moves (Session.SetRates) through the short path leave
// the tables and rules the session's plan has: e0 made busy, then e2
// instead, on evenStack's plan.
func TestFastRates(t *testing.T) {
	r, st := embedTest(t, evenStack)
	sv := servedOffline(t, r, st)
	ss, err := dembed.NewSession(r)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, hot := range []string{"e0", "e2"} {
		rates := map[string]float64{"e0": 200, "e1": 200, "e2": 200, "e3": 200, "e4": 200}
		rates[hot] = 2000
		d, err := ss.SetRates(rates)
		if err != nil {
			t.Fatal(err)
		}
		moved += len(d.Queues)
		ch, why := sv.fastChanges(d, nil)
		if why != "" {
			t.Fatalf("%s busy: the short path refused: %s", hot, why)
		}
		next := ss.Stack()
		sv.commitFast(next, d, nil, ch)
		_, code2, stage2 := sessionPlan(t, ss, next)
		if diff := sameTables(sv.code, code2); diff != "" {
			t.Errorf("%s busy: the short path's tables differ from the plan's code in %s", hot, diff)
		}
		if diff := sameRules(sv.stage, stage2); diff != "" {
			t.Errorf("%s busy: the short path's rules differ from the plan's in %s", hot, diff)
		}
		t.Logf("%s busy: %+v", hot, d.Queues)
	}
	if moved == 0 {
		t.Error("no endpoint moved")
	}
}

// sessionPlan is the session's plan of stack next as run would serve it
// after the full path: the plan, its generated code and its stage.
func sessionPlan(t *testing.T, ss *dembed.Session, next *lpg.Stack) (*dembed.Result, *gofallback.Swappable, *Stage) {
	t.Helper()
	r, err := ss.Result()
	if err != nil {
		t.Fatal(err)
	}
	code, err := servedCode(r, next)
	if err != nil {
		t.Fatal(err)
	}
	stage, err := stageOfLPG(r.Plan, next, nil, r.Embedding.LPG)
	if err != nil {
		t.Fatal(err)
	}
	return r, code, stage
}
