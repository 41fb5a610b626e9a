package prg_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

const programStack = `stack s {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    endpoint echo udp listen *:7 { app "echo" }
    service arp
}
`

// TestProgramStage: linux-xdp's program stage places the LPG's receive
// path from its first node as far as the stage runs it, copies the nodes
// with the LPG's predicates in front of its out port, and refuses a value
// that places what the stage does not run or drops where it may not.
func TestProgramStage(t *testing.T) {
	m := model(t, "linux-xdp")
	sp := m.Space("RxStage")
	if sp == nil || sp.Kind != prg.Program {
		t.Fatalf("linux-xdp has no program stage RxStage: %+v", sp)
	}
	st, diags := lpg.LoadStack("s.lpg", []byte(programStack))
	if st == nil || diags.HasErrors() {
		t.Fatal(diags)
	}
	g, err := lpg.Derive(st)
	if err != nil {
		t.Fatal(err)
	}
	v := prg.PlaceProgram(sp, g)
	runs, drops := v.StageNodes()
	if len(runs) == 0 || runs[0] != "RxL2EtherValidCRC" {
		t.Fatalf("placed %v; want the LPG's first node first", runs)
	}
	for _, n := range []string{"RxL3IPv4ValidChecksum", "RxL3ARPNeedsResponse", "RxL4UDPValidLength"} {
		if !slices.Contains(runs, n) {
			t.Errorf("%s is not placed: %v", n, runs)
		}
	}
	for _, n := range []string{"RxL4UDPValidChecksum", "RxL4UDPDemux", "RxL3ICMPValidHeaderLength"} {
		// A limit, what comes after it, and a node of a service the
		// stack does not have.
		if slices.Contains(runs, n) {
			t.Errorf("%s is placed", n)
		}
	}
	for _, d := range drops {
		if !slices.Contains(sp.Drops, d) {
			t.Errorf("drops at %s, which the model does not let it", d)
		}
	}
	if slices.Contains(drops, "RxL3IPv4ValidLocalIP") || !slices.Contains(drops, "RxL3IPv4ValidChecksum") {
		t.Errorf("drops %v: want the checksum, not the destination (other addresses are the kernel's)", drops)
	}

	// Applied: the copies carry the LPG's predicates; the stage leads
	// to the first, and a guard's failing port to the tables.
	c := prg.NewConfig()
	c.Values["RxStage"] = v
	hw, err := m.Apply(c)
	if err != nil {
		t.Fatal(err)
	}
	stage, _ := hw.Lookup("RxStage")
	first, _ := hw.Lookup("RxL2EtherValidCRC")
	if len(stage.Ports) != 1 || !slices.Equal(stage.Ports[0].Succ, []int{first.ID}) {
		t.Fatalf("RxStage does not lead to the first placed node: %+v", stage.Ports)
	}
	for _, name := range runs {
		cp, _ := hw.Lookup(name)
		orig, _ := g.Lookup(name)
		if len(cp.Ports) != len(orig.Ports) {
			t.Fatalf("%s: %d ports, the LPG's %d", name, len(cp.Ports), len(orig.Ports))
		}
		for i, p := range cp.Ports {
			if p.Name != orig.Ports[i].Name || fmt.Sprint(p.Pred) != fmt.Sprint(orig.Ports[i].Pred) {
				t.Errorf("%s port %d: %s [%v], the LPG's %s [%v]", name, i, p.Name, p.Pred, orig.Ports[i].Name, orig.Ports[i].Pred)
			}
		}
	}
	guard, _ := hw.Lookup("RxL3IPv4ValidLocalIP")
	flow, _ := hw.Lookup("RxCFlow")
	if f := guard.Port("false"); f == nil || !slices.Equal(f.Succ, []int{flow.ID}) {
		t.Errorf("RxL3IPv4ValidLocalIP's false port does not go on to RxCFlow: %+v", f)
	}

	// Values the stage cannot run.
	bad := *v
	bad.Program = slices.Clone(v.Program)
	for i, n := range bad.Program {
		if n.Name == "RxL3IPv4ValidLocalIP" {
			n.Ports = slices.Clone(n.Ports)
			n.Ports[1].Next = "" // drop the kernel's frames
			bad.Program[i] = n
		}
	}
	bad.Program = append(bad.Program, prg.StageNode{Name: "RxL4UDPDemux", Kind: graph.FNode, Ports: []prg.StagePort{{Name: "unmatched", Next: prg.ProgramOut}}})
	c.Values["RxStage"] = &bad
	var msgs []string
	for _, e := range m.Validate(c) {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	if !strings.Contains(all, "may not drop at RxL3IPv4ValidLocalIP") || !strings.Contains(all, "places RxL4UDPDemux, which the stage does not run") {
		t.Errorf("Validate says:\n%s", all)
	}
}

// TestProgramStageGuard: with an echo service, linux-xdp's stage runs
// the ICMP checks and answers echo requests; its checksum copy first
// hands on the datagrams longer than the stage sums (the model's guard),
// and the echo checks that guard the answer hand frames on, not drop
// them (other ICMP types and broadcasts are the kernel's).
func TestProgramStageGuard(t *testing.T) {
	m := model(t, "linux-xdp")
	sp := m.Space("RxStage")
	st, diags := lpg.LoadStack("s.lpg", []byte(strings.Replace(programStack, "service arp", "service arp\n    service icmp-echo", 1)))
	if st == nil || diags.HasErrors() {
		t.Fatal(diags)
	}
	g, err := lpg.Derive(st)
	if err != nil {
		t.Fatal(err)
	}
	v := prg.PlaceProgram(sp, g)
	runs, drops := v.StageNodes()
	for _, n := range []string{"RxL3ICMPValidChecksum", "RxL3ICMPIsTypeRequest", "RxL3ICMPValidUnicastDest", "RxL3ICMPNeedsResponse"} {
		if !slices.Contains(runs, n) {
			t.Errorf("%s is not placed: %v", n, runs)
		}
	}
	if !slices.Contains(drops, "RxL3ICMPValidChecksum") || slices.Contains(drops, "RxL3ICMPIsTypeRequest") || slices.Contains(drops, "RxL3ICMPValidUnicastDest") {
		t.Errorf("drops %v: want the ICMP checksum, not the echo's checks", drops)
	}
	i := slices.IndexFunc(v.Program, func(n prg.StageNode) bool { return n.Name == "RxL3ICMPValidChecksum" })
	if p := v.Program[i].Ports[0]; p.Name != prg.GuardPort || p.Next != prg.ProgramOut || p.Pred.String() != "!(ip.len <= 1500)" {
		t.Errorf("the checksum's first port is %s [%v] to %q; want the guard, to out", p.Name, p.Pred, p.Next)
	}
	c := prg.NewConfig()
	c.Values["RxStage"] = v
	hw, err := m.Apply(c)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := hw.Lookup("RxL3ICMPValidChecksum")
	flow, _ := hw.Lookup("RxCFlow")
	if p := cp.Port(prg.GuardPort); p == nil || !slices.Equal(p.Succ, []int{flow.ID}) {
		t.Errorf("the guard does not go on to RxCFlow: %+v", p)
	}
}

// TestProgramGuardRefused: a guard must name a node the stage runs and
// hold a predicate.
func TestProgramGuardRefused(t *testing.T) {
	_, src, err := nics.Resolve("linux-xdp")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ guard, want string }{
		{`"RxL4UDPDemux: ip.len <= 1500"`, "guards RxL4UDPDemux, which the stage does not run"},
		{`"RxL3ICMPValidChecksum: ip.len <=="`, "guard of RxL3ICMPValidChecksum"},
	} {
		text := strings.Replace(string(src), `guards ["RxL3ICMPValidChecksum: ip.len <= 1500"]`, "guards ["+c.guard+"]", 1)
		if text == string(src) {
			t.Fatal("linux-xdp has no guard to replace")
		}
		_, diags := prg.Load("linux-xdp.prg", []byte(text))
		if !strings.Contains(fmt.Sprint(diags), c.want) {
			t.Errorf("guard %s: got %v, want %q", c.guard, diags, c.want)
		}
	}
}
