package run

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/prg"
)

// spreadStack has the hot endpoint: an echo whose application runs
// on both cores of a two-core stack (the plan spreads it over both loops by
// the stage's hash), beside a listener bound to core 1 (one loop).
const spreadStack = `stack spread {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint echo udp listen *:7 { app "echo" cores 0..1 rate 1000kpps }
    endpoint cool udp listen *:9 { app "discard" core 1 rate 10kpps }
    service icmp-echo
    service arp
}
`

// spreadFlows is how many flows (source ports) the tests send to the
// spread endpoint.
const spreadFlows = 32

// udpTo is a UDP datagram from the peer's port sport to the stack's port
// dport.
func udpTo(t testing.TB, sport, dport uint16, payload string) []byte {
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	return frame(t, eth(layers.EthernetTypeIPv4), ip4(ourIP, layers.IPProtocolUDP), u, gopacket.Payload(payload))
}

// TestLinuxXDPStageSpreads runs the linux-xdp stage of spreadStack's plan
// (BPF_PROG_TEST_RUN): the echo endpoint has no rule, and the stage's
// Toeplitz hash sends its flows to both loops, each flow always to the
// same one and where the model's PRG puts it; the cool endpoint's flows
// all go to its one queue.
func TestLinuxXDPStageSpreads(t *testing.T) {
	needBPF(t)
	r, st := embedtest.PlanSourceTarget(t, Model, "spread.lpg", []byte(spreadStack), costmodel.Balance{}, dembed.TargetSilicon)
	s, err := stageOf(r.Plan, st, dragoncServes(st))
	if err != nil {
		t.Fatal(err)
	}
	if s.Miss != MissRSS || s.RSS == nil {
		t.Fatalf("the stage does not hash what no rule claims (miss %d); plan config %+v", s.Miss, r.Plan.Config)
	}
	interp, err := prg.NewInterp(r.Model(), r.Embedding.Config)
	if err != nil {
		t.Fatal(err)
	}
	sr := loadStage(t, s)
	for _, ep := range []struct {
		port   uint16
		queues int
	}{{7, 2}, {9, 1}} {
		seen := map[int]int{}
		for i := range spreadFlows {
			sport := uint16(40000 + 7*i)
			first := -1
			for k := range 3 { // one flow, three datagrams
				f := udpTo(t, sport, ep.port, strings.Repeat("x", 1+5*k))
				xq, ours, dropped, fq := sr.run(t, f)
				want := interp.Run(f, true).Queue
				if !ours || dropped || xq != want || int(fq) != want {
					t.Fatalf("port %d, flow from port %d: XDP queue %d (ours %v, dropped %v), fanout %d; the model's %d", ep.port, sport, xq, ours, dropped, fq, want)
				}
				if first < 0 {
					first = xq
				} else if xq != first {
					t.Errorf("port %d: the flow from port %d went to queue %d, then %d", ep.port, sport, first, xq)
				}
			}
			seen[first]++
		}
		if len(seen) != ep.queues {
			t.Errorf("port %d: %d flows over queues %v, want %d queues", ep.port, spreadFlows, seen, ep.queues)
		}
		t.Logf("port %d: %d flows over queues %v", ep.port, spreadFlows, seen)
	}
}

// TestServeSpreadsHotEndpoint serves spreadStack on a veth (AF_XDP) and
// sends one datagram from each of spreadFlows source ports to the echo
// endpoint: every one is echoed, and the final per-queue counters show
// the endpoint delivered on both loops, on each at least as many times as
// the model sends flows there.
func TestServeSpreadsHotEndpoint(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, spreadStack)
	if q := r.Plan.Endpoints[0].Queues; len(q) != 2 {
		t.Fatalf("the plan puts echo on queues %v", q)
	}
	interp, err := prg.NewInterp(r.Model(), r.Embedding.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int{}
	for i := range spreadFlows {
		want[interp.Run(udpTo(t, uint16(40000+i), 7, "x"), true).Queue]++
	}
	if len(want) != 2 {
		t.Fatalf("the model sends the %d flows to queues %v; the test wants both", spreadFlows, want)
	}

	var out, log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- inNS(a, func() error {
			return Serve(ctx, r, st, Options{Iface: "vA", Socket: "xdp", Stdout: &out, Stderr: &log, Ready: func() { close(ready) }})
		})
	}()
	waitReady(t, ready, served, &log)
	err = inNS(b, func() error {
		for i := range spreadFlows {
			msg := []byte(fmt.Sprintf("flow %d", i))
			got, err := udpFrom(40000+i, 7, msg)
			if err != nil {
				return fmt.Errorf("flow from port %d: %w", 40000+i, err)
			}
			if string(got) != string(msg) {
				return fmt.Errorf("flow from port %d: echoed %q, want %q", 40000+i, got, msg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nrun said:\n%s%s", err, log.String(), out.String())
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	final := out.String()
	got := deliveries(t, final)["echo"]
	for q, n := range want {
		if got[q] < n {
			t.Errorf("queue %d delivered echo %d times; the model sends %d flows there\n%s", q, got[q], n, final)
		}
	}
	if len(got) != 2 {
		t.Errorf("echo delivered on queues %v, want both\n%s", got, final)
	}
	t.Logf("echo delivered per queue %v; the model sends the flows %v", got, want)
}
