package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/backends/linux/linuxtest"
	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/dragonc/dragonc/lpg"
)

// hwReloadStack is the stack the hardware reload tests start from: on
// the 82599 under the priority cost (embedHardware), the gold endpoint
// e1 has the RSS queue 1 to itself and e2 a Flow Director rule to queue
// 0.
const hwReloadStack = `stack hwreload {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint e1 udp listen 10.9.0.1:7001 { app "echo" class gold rate 1Mpps cores 1 }
    endpoint e2 udp listen *:7002 { app "echo" rate 10kpps }
    service icmp-echo
    service arp
}
`

// hwWith is hwReloadStack with lines added before its services and its
// cores declared otherwise.
func hwWith(add, cores string) string {
	s := strings.Replace(hwReloadStack, "    service icmp-echo", add+"    service icmp-echo", 1)
	return strings.Replace(s, "cores 0..1", cores, 1)
}

// e5gold is a gold endpoint on a third core: a plan with a third queue.
const e5gold = "    endpoint e5 udp listen 10.9.0.1:7005 { app \"echo\" class gold rate 1Mpps cores 2 }\n"

// omx3 is an Open-MX endpoint: a protocol the plan's code has not.
const omx3 = "    endpoint mx openmx 3 { app \"echo\" }\n"

// e4 is an endpoint of e2's kind: the running plan's incremental search
// gives it a Flow Director rule to e2's queue.
const e4 = "    endpoint e4 udp listen *:7004 { app \"echo\" rate 10kpps }\n"

// TestReloadHardwarePlan: the plans a hardware run's reload makes (Replan
// for a plan of a NIC's driver) differ from the running plan in one rule
// when an endpoint of a kind the stack has is added, and in the NIC's
// settings when a new endpoint needs a queue of its own.
func TestReloadHardwarePlan(t *testing.T) {
	r, _ := embedHardware(t, "82599", hwReloadStack)
	r2, err := Replan(loadStack(t, hwWith(e4, "cores 0..1")), r)
	if err != nil {
		t.Fatal(err)
	}
	if r2.SoftwareStage() || r2.Plan.NIC != "82599" || r2.Driver() == nil {
		t.Fatalf("the reload's plan is for %s (driver %v)", r2.Plan.NIC, r2.Driver())
	}
	if why := settingsDiff(linux.Settings(r), linux.Settings(r2)); why != "" {
		t.Errorf("adding e4 changes the NIC's settings: %s", why)
	}
	c := linux.ChangeRules(linux.Rules(r), nil, linux.Rules(r2))
	if len(c.Insert) != 1 || c.Insert[0].Entry.Endpoint != "e4" || len(c.Delete) != 0 || len(c.Kept) != len(linux.Rules(r)) {
		t.Errorf("adding e4: %+v, want e4's rule inserted and the others kept", c)
	}
	r3, err := Replan(loadStack(t, hwWith(e5gold, "cores 0..2")), r)
	if err != nil {
		t.Fatal(err)
	}
	if why := settingsDiff(linux.Settings(r), linux.Settings(r3)); !strings.Contains(why, "3 combined channels") {
		t.Errorf("a gold endpoint on a third core: the settings differ by %q, want the channel count", why)
	}
}

// TestReloadHardware serves the 82599 plan of hwReloadStack on a veth
// (whose driver refuses every step, so the eBPF stage does all the
// NIC's steering) and reloads it while it serves: an added endpoint's
// rule is offered to the driver, refused, and steered by the stage, so
// its first datagram is answered on the queue the plan gives it; a
// removed endpoint is port unreachable; a reload whose rule script finds
// no undo record is refused and the old plan serves on; a new protocol
// (new code, the NIC's settings as they are) is handed over without
// losing a datagram of a client echoing meanwhile; a plan that
// changes the NIC's channel count restarts the data plane with linux.sh
// applied again, and back; and after the run the veth's settings are as
// before.
func TestReloadHardware(t *testing.T) {
	a, b := pair(t)
	settings := func() string { return netnstest.Ethtool(a, "vA") }
	before := settings()
	r, st := embedHardware(t, "82599", hwReloadStack)
	path := filepath.Join(t.TempDir(), "hwreload.lpg")
	if err := os.WriteFile(path, []byte(hwReloadStack), 0o644); err != nil {
		t.Fatal(err)
	}
	lives := make(chan *Live, 1)
	sv := serveIn(t, a, r, st, "xdp", func(o *Options) {
		o.Force = true // the veth is not an ixgbe
		o.Restack = restackFile(path)
		o.Live = func(l *Live) { lives <- l }
	})
	live := <-lives
	inB := func(f func() error) {
		t.Helper()
		if err := inNS(b, f); err != nil {
			t.Fatalf("%v\nrun said:\n%s", err, sv.log.String())
		}
	}
	inB(func() error {
		if _, err := udpExchange(7004, []byte("nobody")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("port 7004 before it is added: %v, want port unreachable", err)
		}
		return nil
	})

	res := reloadFile(t, live, path, hwWith(e4, "cores 0..1"))
	if !res.Applied || !slices.Equal(res.Added, []string{"e4"}) || res.Restarted != "" {
		t.Fatalf("add e4: %+v\n%s", res, sv.log.String())
	}
	if res.NIC == nil || res.NIC.Refused != 1 || res.NIC.Inserted != 0 || res.NIC.Deleted != 0 || res.RulesAdded != 1 || res.RulesRemoved != 0 {
		t.Errorf("add e4: NIC %+v, stage rules +%d -%d; want one rule refused by the veth and added to the stage", res.NIC, res.RulesAdded, res.RulesRemoved)
	}
	if !strings.Contains(sv.log.String(), "refused 1 of 1 new filter rule(s), the first: ") || !strings.Contains(sv.log.String(), "reload 1: the NIC's filter rules: 0 written, 0 deleted, 1 untouched; the driver refused 1 new rule(s)") {
		t.Errorf("the run does not say the veth refused the rule:\n%s", sv.log.String())
	}
	t.Log(res)
	inB(func() error {
		if got, err := udpFirst(7004, []byte("first")); err != nil || string(got) != "first" {
			return fmt.Errorf("e4's first datagram: %q, %v", got, err)
		}
		if got, err := udpFirst(7001, []byte("kept")); err != nil || string(got) != "kept" {
			return fmt.Errorf("e1 after adding e4: %q, %v", got, err)
		}
		return nil
	})

	// Without linux.sh's undo record the rule script changes nothing:
	// refused, and the helper's tables are the old plan's again.
	var hwDir string
	if err := inNS(a, func() error {
		s, err := ReadState("vA")
		hwDir = s.Hardware
		return err
	}); err != nil || hwDir == "" {
		t.Fatalf("the run's hardware directory %q: %v", hwDir, err)
	}
	rec := filepath.Join(hwDir, "state")
	if err := os.Rename(rec, rec+".away"); err != nil {
		t.Fatal(err)
	}
	res = reloadFile(t, live, path, hwWith(e4+"    endpoint e5 udp listen *:7005 { app \"echo\" rate 10kpps }\n", "cores 0..1"))
	if res.Applied || !strings.Contains(res.Error, "linux.sh has not run on vA") {
		t.Fatalf("a reload without the record: %+v, want refused", res)
	}
	if err := os.Rename(rec+".away", rec); err != nil {
		t.Fatal(err)
	}
	inB(func() error {
		if _, err := udpFirst(7005, []byte("refused")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("e5 of the refused reload: %v, want port unreachable", err)
		}
		if got, err := udpFirst(7004, []byte("still")); err != nil || string(got) != "still" {
			return fmt.Errorf("e4 after the refused reload: %q, %v", got, err)
		}
		return nil
	})

	// A new protocol needs new code, but the NIC's settings stay: the
	// data plane is handed over between two frames, and a client echoing
	// on e1 meanwhile loses nothing.
	end := steadyEcho(b, 7001, 2*time.Second)
	res = reloadFile(t, live, path, hwWith(e4+omx3, "cores 0..1"))
	time.Sleep(100 * time.Millisecond)
	n, client := end()
	t.Logf("a new protocol: %v; e1's client: %d sent, %d answered, %d lost", res, n.sent, n.answered, n.lost)
	if !res.Applied || !res.HandedOver || res.Lost > 0 || !slices.Equal(res.Added, []string{"mx"}) || res.NIC == nil || res.NIC.Inserted+res.NIC.Deleted > 0 {
		t.Fatalf("a new protocol on the hardware plan: %+v, want handed over with the NIC's rules untouched\n%s", res, sv.log.String())
	}
	if client != nil || n.lost > 0 || n.answered != n.sent || n.sent == 0 {
		t.Errorf("e1's client across the handover: %+v, %v; want every datagram answered", n, client)
	}
	inB(func() error {
		if got, err := omxExchange("vB", 3, 9, []byte("omx")); err != nil || string(got) != "omx" {
			return fmt.Errorf("the Open-MX endpoint after the handover: %q, %v", got, err)
		}
		return nil
	})

	// A plan that needs a third queue changes linux.sh's settings: the
	// data plane restarts, linux.sh is undone and the new plan's applied
	// in between.
	res = reloadFile(t, live, path, hwWith(e4+e5gold, "cores 0..2"))
	if !res.Applied || !strings.Contains(res.Restarted, "the NIC's settings change (3 combined channels (ethtool -L) instead of 2") || !strings.Contains(res.Restarted, "linux.sh is undone") {
		t.Fatalf("a third queue: %+v\n%s", res, sv.log.String())
	}
	t.Log(res)
	inB(func() error {
		if got, err := udpFirst(7005, []byte("third")); err != nil || string(got) != "third" {
			return fmt.Errorf("e5 on the third queue: %q, %v", got, err)
		}
		if got, err := udpFirst(7004, []byte("after")); err != nil || string(got) != "after" {
			return fmt.Errorf("e4 after the restart: %q, %v", got, err)
		}
		return nil
	})
	// And back to two queues: the first plan's settings again.
	res = reloadFile(t, live, path, hwWith(e4, "cores 0..1"))
	if !res.Applied || res.Restarted == "" || !slices.Equal(res.Removed, []string{"e5"}) {
		t.Fatalf("back to two queues: %+v", res)
	}
	inB(func() error {
		if got, err := udpFirst(7004, []byte("two queues")); err != nil || string(got) != "two queues" {
			return fmt.Errorf("e4 after the second restart: %q, %v", got, err)
		}
		return nil
	})

	res = reloadFile(t, live, path, hwReloadStack)
	if !res.Applied || !slices.Equal(res.Removed, []string{"e4"}) || res.Restarted != "" || res.RulesRemoved != 1 {
		t.Fatalf("remove e4: %+v", res)
	}
	inB(func() error {
		if _, err := udpFirst(7004, []byte("gone")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("removed e4: %v, want port unreachable", err)
		}
		if got, err := udpFirst(7002, []byte("kept")); err != nil || string(got) != "kept" {
			return fmt.Errorf("e2 after the reloads: %q, %v", got, err)
		}
		return nil
	})
	if n := strings.Count(sv.log.String(), "serving hwreload"); n != 4 {
		t.Errorf("the data plane served %d times, want 4 (the start, the handover and the two restarts for the queue count):\n%s", n, sv.log.String())
	}
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	// Since the last restart (whose counters the final ones are), e4 was
	// delivered on the queue its plan gave it, where the stage's rule
	// steered it (the plan spreads the rest by RSS to queue 1): the
	// plans the run made, made again.
	served := r
	for _, src := range []string{hwWith(e4, "cores 0..1"), hwWith(e4+omx3, "cores 0..1"), hwWith(e4+e5gold, "cores 0..2"), hwWith(e4, "cores 0..1")} {
		var err error
		if served, err = Replan(loadStack(t, src), served); err != nil {
			t.Fatal(err)
		}
	}
	got := deliveries(t, sv.out.String())
	for _, ep := range served.Plan.Endpoints {
		if ep.Name != "e4" {
			continue
		}
		if len(got["e4"]) == 0 {
			t.Errorf("e4: no delivery counted\n%s", sv.final())
		}
		for q := range got["e4"] {
			if !slices.Contains(ep.Queues, q) {
				t.Errorf("e4 delivered on queue %d; the plan says %v\n%s", q, ep.Queues, sv.final())
			}
		}
	}
	if after := settings(); after != before {
		t.Errorf("vA's settings changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// flowsStack is a stack of UDP flows on four cores with the flows
// numbered in add, and without those in drop: on the 82599 each flow is
// an ntuple rule.
func flowsStack(add []int, drop ...int) string {
	var b strings.Builder
	b.WriteString("stack flows {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/24 }\n    cores 0..3\n")
	for _, i := range append([]int{1, 2, 3, 4, 5, 6}, add...) {
		if !slices.Contains(drop, i) {
			fmt.Fprintf(&b, "    endpoint f%d udp flow 10.3.0.1:%d -> 10.3.0.9:%d\n", i, 7000+i, 8000+i)
		}
	}
	b.WriteString("    service arp\n}\n")
	return b.String()
}

// TestHardwareRuleReloads applies an 82599 plan of UDP flows with
// linux.sh on the fake ethtool (an ixgbe that takes every rule) and
// changes its rules as three reloads do: a flow added and one removed
// (one rule written, one deleted, the rest untouched); a flow the driver
// refuses (steered by the stage, and not recorded); a change taken back
// (the new plan did not serve). Then the run's undo restores the fake
// interface as it was.
func TestHardwareRuleReloads(t *testing.T) {
	f := linuxtest.New(t, "ixgbe", 2) // the plans grow it to 4, then 2
	for _, e := range f.Env() {
		if k, v, _ := strings.Cut(e, "="); k != "DRAGONC_STATE" {
			t.Setenv(k, v) // the run's scripts find the fake ethtool, /proc and /sys
		}
	}
	before := f.Snapshot(t)
	// Dragonet's balance gives each flow a rule of its own.
	in, _, err := dembed.NewInput("82599", embedtest.Model(t, "82599"), loadStack(t, flowsStack(nil)), nil, dembed.Options{Cost: costmodel.DragonetBalance{}})
	if err != nil {
		t.Fatal(err)
	}
	Adapt(in)
	r1, err := dembed.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hardware")
	h, err := applyHardware(r1, "eth0", false, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.held) != 6 || len(h.refusedRules) != 0 || !h.ntuple || len(h.refused) != 0 {
		t.Fatalf("linux.sh: %d rules held, %d refused, ntuple %v, refused steps %v", len(h.held), len(h.refusedRules), h.ntuple, h.refused)
	}
	record := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	heldBy := func(name string) (linux.Rule, bool) {
		i := slices.IndexFunc(h.held, func(r linux.Rule) bool { return r.Entry.Endpoint == name })
		if i < 0 {
			return linux.Rule{}, false
		}
		return h.held[i], true
	}
	ruleFile := func(loc int) string { return filepath.Join(f.Dir, fmt.Sprintf("rule.%d", loc)) }
	replan := func(r *dembed.Result, src string) (*dembed.Result, *lpg.Stack) {
		t.Helper()
		st := loadStack(t, src)
		r2, err := Replan(st, r)
		if err != nil {
			t.Fatal(err)
		}
		return r2, st
	}

	// Reload 1: f7 added, f2 removed.
	f2, _ := heldBy("f2")
	log0 := f.Read(t, "log")
	r2, _ := replan(r1, flowsStack([]int{7}, 2))
	if why := settingsDiff(h.settings, linux.Settings(r2)); why != "" {
		t.Fatalf("the reload's plan changes the settings: %s", why)
	}
	c, err := h.insert(r2, 1, "flows")
	if err != nil {
		t.Fatal(err)
	}
	if c.nic.Inserted != 1 || c.nic.Refused != 0 || c.nic.Kept != 5 || len(c.refusedSteps()) != 0 {
		t.Fatalf("reload 1, insert: %+v, stage steps %v", c.nic, c.refusedSteps())
	}
	f7 := c.taken[0]
	if _, err := os.Stat(ruleFile(f7.Loc)); err != nil || f7.Entry.Endpoint != "f7" {
		t.Errorf("f7's rule (%s) is not in the NIC's table: %v", f7, err)
	}
	if _, err := os.Stat(ruleFile(f2.Loc)); err != nil {
		t.Errorf("phase insert deleted f2's rule: %v", err)
	}
	if _, err := c.finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ruleFile(f2.Loc)); !os.IsNotExist(err) || c.nic.Deleted != 1 {
		t.Errorf("f2's rule %d was not deleted (%+v): %v", f2.Loc, c.nic, err)
	}
	if _, ok := heldBy("f2"); ok {
		t.Errorf("f2's rule is still held: %v", h.held)
	}
	if _, ok := heldBy("f7"); !ok || len(h.held) != 6 {
		t.Errorf("held after reload 1: %v", h.held)
	}
	var written []string
	for _, l := range strings.Split(strings.TrimPrefix(f.Read(t, "log"), log0), "\n") {
		if strings.HasPrefix(l, "-N ") {
			written = append(written, l)
		}
	}
	if len(written) != 2 {
		t.Errorf("reload 1 ran ethtool -N %d times, want one insert and one delete: %q", len(written), written)
	}
	rec := record()
	if !strings.Contains(rec, fmt.Sprintf("ethtool -N eth0 delete %d\n", f7.Loc)) || f7.Loc != 6 {
		t.Errorf("f7 (location %d) is not recorded:\n%s", f7.Loc, rec)
	}

	// Reload 2: the driver refuses f8's rule; the stage steers it.
	next := 0
	fmt.Sscan(f.Read(t, "inserted"), &next)
	t.Setenv("FAKE_REFUSE_RULE", fmt.Sprint(next+1))
	r3, st3 := replan(r2, flowsStack([]int{7, 8}, 2))
	c, err = h.insert(r3, 2, "flows")
	if err != nil {
		t.Fatal(err)
	}
	if c.nic.Inserted != 0 || c.nic.Refused != 1 || !strings.Contains(c.why, "the driver refused it") {
		t.Fatalf("reload 2: %+v (%s)", c.nic, c.why)
	}
	stage, _, err := hardwareStage(r3, st3, c.refusedSteps(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stage.Groups) != 1 || len(stage.Groups[0].Rules) != 1 || stage.Groups[0].Capacity < 8 {
		t.Errorf("the stage for f8's refused rule: %+v", stage.Groups)
	}
	if _, err := c.finish(); err != nil {
		t.Fatal(err)
	}
	if record() != rec || len(h.refusedRules) != 1 || h.refusedRules[0].Entry.Endpoint != "f8" {
		t.Errorf("after a refused rule: refused %v, record\n%s", h.refusedRules, record())
	}
	t.Setenv("FAKE_REFUSE_RULE", "0")

	// Reload 3: f9 written, then taken back.
	r4, _ := replan(r3, flowsStack([]int{7, 8, 9}, 2))
	c, err = h.insert(r4, 3, "flows")
	if err != nil {
		t.Fatal(err)
	}
	if c.nic.Inserted != 1 || c.nic.Kept != 7 {
		t.Fatalf("reload 3: %+v", c.nic)
	}
	if err := c.takeBack(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ruleFile(c.taken[0].Loc)); !os.IsNotExist(err) || record() != rec {
		t.Errorf("f9's rule %d was not taken back (%v); record\n%s", c.taken[0].Loc, err, record())
	}

	// A plan on two cores changes the NIC's settings: a restart's
	// rehardware undoes linux.sh (with the reloads' rules) and applies
	// the new plan's (which linux.sh would refuse with the old record
	// still there).
	var log strings.Builder
	sv := &serving{hw: true, hwrun: h, opt: Options{Iface: "eth0", Stderr: &log}}
	sv.out = newOutput(&sv.opt)
	r5, st5 := replan(r4, strings.Replace(flowsStack([]int{7, 8}, 2), "cores 0..3", "cores 0..1", 1))
	p := planState{r: r5, st: st5}
	if err := sv.rehardware(&p); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	h = sv.hwrun
	if p.stage == nil || f.Read(t, "channels") != "2" || len(h.held) != len(linux.Rules(r5)) || len(h.refusedRules) != 0 || h.changes != 0 {
		t.Errorf("after rehardware: stage %v, channels %s, %d rules held of %d", p.stage, f.Read(t, "channels"), len(h.held), len(linux.Rules(r5)))
	}
	if err := h.undo(); err != nil {
		t.Fatal(err)
	}
	if after := f.Snapshot(t); after != before {
		t.Errorf("the run's undo after the reloads did not restore:\nbefore\n%s\nafter\n%s", before, after)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the hardware directory is left: %v", err)
	}
}
