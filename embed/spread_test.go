package embed

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/nics"
)

// spreadStack is the hot endpoint: an echo server whose
// application runs on both cores of a two-core stack, beside a cool
// listener bound to one core. hot is the same echo naming no core, at a
// rate above what one core serves.
const spreadStack = `stack spread {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint echo udp listen *:7 { app "echo" cores 0..1 rate 1000kpps }
    endpoint cool udp listen *:9 { app "discard" core 1 rate 10kpps }
    service icmp-echo
    service arp
}
`

// TestSpreadHotEndpoint: on linux-xdp (the eBPF stage's hash) and on the
// 82599 (RSS, on the silicon and through ixgbe), under balance, priority
// and cycles, the endpoint that names both cores reaches both cores'
// queues by the hash and the plan says so and why; the cool endpoint,
// bound to one core, stays on one queue; the cost functions see the spread
// (balance and priority charge the endpoint on one core half its load).
// An endpoint naming no core whose rate exceeds a core's is spread too.
func TestSpreadHotEndpoint(t *testing.T) {
	for _, nic := range []string{"linux-xdp", "82599"} {
		for _, target := range []string{TargetSilicon, TargetLinux} {
			if nic == "linux-xdp" && target == TargetLinux {
				continue // a stage dragonc run builds: no driver
			}
			for _, cost := range []string{"balance", "priority", "cycles"} {
				name := fmt.Sprintf("%s/%s/%s", nic, target, cost)
				in := stackInput(t, nic, spreadStack, cost, StrategyDefault)
				if target == TargetLinux {
					in.Driver, _ = nics.DriverFor(in.Model)
				}
				r, err := Run(in)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				pl := r.Plan
				echo, cool := pl.Endpoints[0], pl.Endpoints[1]
				if !slices.Equal(echo.IRQCores, []int{0, 1}) || len(echo.Queues) != 2 || echo.Steering != "rss" {
					t.Errorf("%s: echo on queues %v (cores %v) by %s, want both cores' queues by rss", name, echo.Queues, echo.IRQCores, echo.Steering)
				}
				if !strings.Contains(echo.Spread, "on cores 0,1") || !strings.Contains(echo.SpreadWhy, "cores 0,1") {
					t.Errorf("%s: echo's plan says spread %q because %q", name, echo.Spread, echo.SpreadWhy)
				}
				// Every queue it reaches delivers it in software (the
				// generated fallback of each).
				if got := pl.Placement["RxL4UDPSocket_echo"]; got.Where != "software" || !slices.Equal(got.Queues, echo.Queues) {
					t.Errorf("%s: echo's socket is placed %+v; its queues are %v", name, got, echo.Queues)
				}
				if len(cool.Queues) != 1 || cool.Spread != "" {
					t.Errorf("%s: cool on queues %v (spread %q), want one queue", name, cool.Queues, cool.Spread)
				}
				if strings.HasPrefix(cost, "balance") || cost == "priority" {
					if r.Cost.V != 0 {
						t.Errorf("%s: the spread plan costs %v, want 0", name, r.Cost)
					}
				}
				// The same endpoint on one queue costs more: the cost
				// function sees its load per core.
				one := r.state.snapshot()
				s := r.p.newState(r.state.mode)
				s.restore(one)
				spread := s.ev.Cost()
				for _, t0 := range r.p.tables {
					if s.canUse(t0, 0) && t0.queues[1] {
						s.set(0, choice{t0, 1})
						break
					}
				}
				if s.choice[0].t == nil {
					t.Fatalf("%s: no table can hold echo", name)
				}
				if c := s.ev.Cost(); !spread.Less(c) {
					t.Errorf("%s: echo on queue 1 alone costs %v, spread %v", name, c, spread)
				}
				if err := s.ev.Check(); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
	// Hot by its rate alone: twice what one core serves of a UDP path.
	in := stackInput(t, "linux-xdp", spreadStack, "balance", StrategyDefault)
	rate := 2 * costmodel.CoreHz / in.costCycles(t)
	hot := strings.Replace(spreadStack, `{ app "echo" cores 0..1 rate 1000kpps }`, fmt.Sprintf(`{ app "echo" rate %dpps }`, int(rate)), 1)
	r, err := Run(stackInput(t, "linux-xdp", hot, "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	if e := r.Plan.Endpoints[0]; len(e.IRQCores) != 2 || !strings.Contains(e.SpreadWhy, "exceeds") {
		t.Errorf("a listener at %.0f packets/s: cores %v, spread %q because %q", rate, e.IRQCores, e.Spread, e.SpreadWhy)
	}
}

// costCycles is the software cycles a packet of a UDP listener costs on a
// shared queue, as the cost model sees it.
func (in *Input) costCycles(t *testing.T) float64 {
	p, err := newProblem(in)
	if err != nil {
		t.Fatal(err)
	}
	return p.cp.Endpoints[0].Cycles
}

// TestSpreadWithoutHash: a NIC without a hash cannot spread the endpoint;
// the plan says it is not spread and warns why.
func TestSpreadWithoutHash(t *testing.T) {
	r, err := Run(stackInput(t, "tigon", spreadStack, "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	e := r.Plan.Endpoints[0]
	if !strings.HasPrefix(e.Spread, "not spread") || !slices.ContainsFunc(r.Plan.Warnings, func(w string) bool {
		return strings.Contains(w, "endpoint echo should be spread over cores 0,1") && strings.Contains(w, "no hash")
	}) {
		t.Errorf("echo on tigon: spread %q, warnings %q", e.Spread, r.Plan.Warnings)
	}
}
