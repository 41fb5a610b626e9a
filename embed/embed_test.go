package embed

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
)

var nicNames = []string{"82576", "82599", "myri10g", "tigon", "dragonet-e10k", "dragonet-sf", "clan1000", "mvia"}

func loadModel(t testing.TB, nic string) *prg.Model {
	t.Helper()
	m, diags, err := nics.Load(nic)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		t.Fatal(diags)
	}
	return m
}

// stackInput is the input of a plan of src on the whole NIC.
func stackInput(t testing.TB, nic, src, cost string, strategy Strategy) *Input {
	t.Helper()
	return stackInputTarget(t, nic, src, cost, strategy, TargetSilicon)
}

// stackInputTarget is stackInput for a target; the Linux target must find
// the model's driver facts.
func stackInputTarget(t testing.TB, nic, src, cost string, strategy Strategy, target string) *Input {
	t.Helper()
	st, diags := lpg.LoadStack("s.lpg", []byte(src))
	if st == nil {
		t.Fatalf("%v\n%s", diags, src)
	}
	return stackInputOf(t, nic, st, cost, strategy, target)
}

// stackInputOf is stackInputTarget for a stack already loaded.
func stackInputOf(t testing.TB, nic string, st *lpg.Stack, cost string, strategy Strategy, target string) *Input {
	t.Helper()
	fn, err := costmodel.ByName(cost)
	if err != nil {
		t.Fatal(err)
	}
	in, warnings, err := NewInput(nic, loadModel(t, nic), st, nil, Options{Cost: fn, Strategy: strategy, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	return in
}

// TestGoldenEmbeddings keeps the report of every built-in NIC and example,
// and the plan of every example small enough to read.
func TestGoldenEmbeddings(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, nic := range nicNames {
		for _, ex := range examples {
			name := strings.TrimSuffix(filepath.Base(ex), ".lpg")
			t.Run(nic+"/"+name, func(t *testing.T) {
				src, _ := os.ReadFile(ex)
				r, err := Run(stackInput(t, nic, string(src), "balance", StrategyDefault))
				if err != nil {
					t.Fatal(err)
				}
				var rep bytes.Buffer
				r.WriteReport(&rep)
				golden.Check(t, filepath.Join("../testdata/embed", nic, name+".report.golden"), rep.Bytes())
				if len(r.Plan.Endpoints) <= 200 {
					var pj bytes.Buffer
					r.Plan.WriteJSON(&pj)
					golden.Check(t, filepath.Join("../testdata/embed", nic, name+".plan.json"), pj.Bytes())
				}
				// Same input, byte-identical output.
				r2, _ := Run(stackInput(t, nic, string(src), "balance", StrategyDefault))
				var a, b bytes.Buffer
				r.Plan.WriteJSON(&a)
				r2.Plan.WriteJSON(&b)
				if !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Error("two runs on the same input give different plans")
				}
			})
		}
	}
}

// TestHostEngineIsNotANIC: the I/OAT model has no receive queue to embed on.
func TestHostEngineIsNotANIC(t *testing.T) {
	src, _ := os.ReadFile("../examples/dns_ntp.lpg")
	_, err := Run(stackInput(t, "ioat", string(src), "balance", StrategyDefault))
	if err == nil || !strings.Contains(err.Error(), "no receive queue") {
		t.Errorf("got %v", err)
	}
}

// randomStack writes a random stack file: listeners and flows over UDP and
// TCP, Open-MX endpoints, rates, gold classes and pinned cores.
func randomStack(rng *rand.Rand, maxEndpoints, cores int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack r {\n    interface eth0 { mac 00:1b:21:00:00:09 ip 10.9.0.1/24 ip 10.9.0.2/24 }\n    cores 0..%d\n", cores-1)
	n := 1 + rng.Intn(maxEndpoints)
	used := map[string]bool{}
	for i := 0; i < n; i++ {
		proto := []string{"udp", "tcp"}[rng.Intn(2)]
		addr := []string{"*", "10.9.0.1", "10.9.0.2"}[rng.Intn(3)]
		port := 1000 + rng.Intn(20)
		var kind string
		switch rng.Intn(6) {
		case 0:
			if addr == "*" {
				addr = "10.9.0.1"
			}
			kind = fmt.Sprintf("%s flow %s:%d -> 10.9.0.%d:%d", proto, addr, port, 100+rng.Intn(50), 30000+rng.Intn(1000))
		case 1:
			kind = fmt.Sprintf("openmx %d", rng.Intn(16))
		default:
			kind = fmt.Sprintf("%s listen %s:%d", proto, addr, port)
		}
		key := kind
		if strings.HasPrefix(kind, proto+" listen") {
			key = fmt.Sprintf("%s %d %s", proto, port, addr)
		}
		if used[key] {
			continue
		}
		used[key] = true
		var attrs []string
		if rng.Intn(3) == 0 {
			attrs = append(attrs, "class gold")
		}
		if rng.Intn(2) == 0 {
			attrs = append(attrs, fmt.Sprintf("rate %dkpps", 1+rng.Intn(500)))
		}
		if rng.Intn(4) == 0 {
			attrs = append(attrs, fmt.Sprintf("core %d", rng.Intn(cores)))
		}
		fmt.Fprintf(&b, "    endpoint e%d %s", i, kind)
		if len(attrs) > 0 {
			fmt.Fprintf(&b, " { %s }", strings.Join(attrs, " "))
		}
		b.WriteString("\n")
	}
	b.WriteString("    service arp\n}\n")
	return b.String()
}

// TestDefaultNeverWorseThanGreedy runs both strategies on random stacks
// per NIC and cost function. Where dragonet-greedy stops (a table full, as
// Dragonet's search does) there is nothing to compare.
func TestDefaultNeverWorseThanGreedy(t *testing.T) {
	stacks := 120
	if testing.Short() {
		stacks = 30
	}
	for _, nic := range []string{"82576", "82599", "myri10g"} {
		for _, cost := range costmodel.Names() {
			t.Run(nic+"/"+cost, func(t *testing.T) {
				t.Parallel() // independent searches: both cores
				rng := rand.New(rand.NewSource(int64(len(nic)*7 + len(cost))))
				better, stopped := 0, 0
				for k := 0; k < stacks; k++ {
					src := randomStack(rng, 12, 2+rng.Intn(6))
					d, err := SearchCost(stackInput(t, nic, src, cost, StrategyDefault))
					if err != nil {
						t.Fatal(err)
					}
					g, err := SearchCost(stackInput(t, nic, src, cost, StrategyDragonetGreedy))
					if err != nil {
						if !strings.Contains(err.Error(), "oracle offers nothing") {
							t.Fatal(err)
						}
						stopped++
						continue
					}
					if g.Less(d) {
						t.Fatalf("%s/%s: default %v is worse than dragonet-greedy %v on\n%s", nic, cost, d, g, src)
					}
					if d.Less(g) {
						better++
					}
				}
				t.Logf("%s/%s: default strictly better than dragonet-greedy on %d of %d stacks (%.0f%%); dragonet-greedy stopped on %d", nic, cost, better, stacks-stopped, 100*float64(better)/float64(max(1, stacks-stopped)), stopped)
			})
		}
	}
}

// ownCosts are dragonc's own cost functions (not Dragonet's), which the
// random tests take in turn.
var ownCosts = []costmodel.Function{costmodel.Balance{}, costmodel.Priority{}, costmodel.Cycles{}}

// TestOptimalOnSmallInputs compares the default strategy with an
// exhaustive search written apart from it, on random small inputs (at most
// 6 endpoints and 4 queues).
func TestOptimalOnSmallInputs(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for k := 0; k < 60; k++ {
		nic := []string{"82576", "82599"}[k%2]
		cost := ownCosts[k%len(ownCosts)].Name()
		src := randomStack(rng, 6, 1+rng.Intn(4))
		in := stackInput(t, nic, src, cost, StrategyDefault)
		p, err := newProblem(in)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := p.search(StrategyDefault)
		got := s.ev.Cost()
		best := bruteForce(p)
		if best.Less(got) {
			t.Fatalf("%s/%s: default %v, optimum %v on\n%s", nic, cost, got, best, src)
		}
	}
}

// bruteForce enumerates every configuration in every RSS mode: for each
// endpoint, no entry, or an entry in any table that holds it to any queue
// the table's action reaches. It shares nothing with the search but the
// NIC's own rules (capacity, global masks) and the cost evaluation.
func bruteForce(p *problem) costmodel.Cost {
	best := costmodel.Cost{Kind: costmodel.Reject, V: 1e300}
	for m := range p.modes {
		s := p.newState(m)
		var rec func(i int)
		rec = func(i int) {
			if i == len(p.eps) {
				if c := s.ev.Cost(); c.Less(best) {
					best = c
				}
				return
			}
			opts := []choice{{}}
			for _, t := range p.tables {
				if !s.canUse(t, i) {
					continue
				}
				for q := range p.queues {
					if t.queues[q] {
						opts = append(opts, choice{t, q})
					}
				}
			}
			for _, c := range opts {
				s.set(i, c)
				rec(i + 1)
			}
			s.set(i, choice{})
		}
		rec(0)
	}
	return best
}

// TestCapacityAndReach: on random stacks no table exceeds its capacity, and
// every endpoint's packets reach exactly the queues the plan says.
func TestCapacityAndReach(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for k := 0; k < 30; k++ {
		nic := nicNames[k%len(nicNames)]
		src := randomStack(rng, 10, 2+rng.Intn(5))
		in := stackInput(t, nic, src, ownCosts[k%len(ownCosts)].Name(), StrategyDefault)
		r, err := Run(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range in.Model.Spaces {
			if v := r.Embedding.Config.Values[sp.Node]; v != nil && sp.Capacity > 0 && len(v.Entries) > sp.Capacity {
				t.Fatalf("%s holds %d entries, capacity %d", sp.Node, len(v.Entries), sp.Capacity)
			}
		}
		if errs := in.Model.Validate(r.Embedding.Config); len(errs) > 0 {
			t.Fatal(errs[0])
		}
		checkReach(t, r, in, rng)
	}
}

// checkReach sends frames at every endpoint (many source ports, so RSS
// spreads them) through the configured NIC and compares the queues they
// land on with the plan.
func checkReach(t *testing.T, r *Result, in *Input, rng *rand.Rand) {
	t.Helper()
	hw, err := prg.NewInterp(in.Model, r.Embedding.Config)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := lpg.NewInterp(in.LPG)
	mac := in.Stack.Interfaces[0].MAC
	dst := []byte{byte(mac >> 40), byte(mac >> 32), byte(mac >> 24), byte(mac >> 16), byte(mac >> 8), byte(mac)}
	for _, pe := range r.Plan.Endpoints {
		var e *lpg.Endpoint
		for _, x := range in.Stack.Endpoints {
			if x.Name == pe.Name {
				e = x
			}
		}
		seen := map[int]bool{}
		for k := 0; k < 300; k++ {
			s := packet.Spec{DstMAC: dst}
			switch e.Proto {
			case lpg.OpenMX:
				s.EtherType, s.OMXDstEP, s.OMXType = packet.EtherTypeOpenMX, e.OMXID, 0x11
			default:
				s.Proto = packet.ProtoUDP
				if e.Proto == lpg.TCP {
					s.Proto, s.TCPFlags = packet.ProtoTCP, 0x02
				}
				// Every destination the endpoint accepts: its address and,
				// for a UDP listener, the broadcasts (RFC 1122 §3.3.6).
				dsts := e.Dsts()
				if e.AnyAddr {
					dsts = in.Stack.Unicast()
					if e.Proto == lpg.UDP {
						dsts = append(dsts, in.Stack.Broadcasts()...)
					}
				}
				s.Dst = ipOf(dsts[rng.Intn(len(dsts))])
				s.Src, s.SrcPort, s.DstPort = []byte{10, 8, byte(rng.Intn(256)), byte(rng.Intn(256))}, uint16(1024+rng.Intn(60000)), e.Port
				if e.Flow {
					s.Src, s.SrcPort = ipOf(e.Remote), e.RPort
					s.TCPFlags = 0x10
				}
			}
			frame := packet.MustBuild(s)
			if o := ref.Run(frame, true); o.Kind != lpg.Deliver || o.Endpoint != e.Name {
				continue // another endpoint (a flow) takes these packets
			}
			res := hw.Run(frame, true)
			if res.Queue < 0 {
				t.Fatalf("%s: frame dropped by the NIC at %s", e.Name, res.DropNode)
			}
			seen[res.Queue] = true
			if !slices.Contains(pe.Queues, res.Queue) {
				t.Fatalf("%s: a packet reached queue %d; the plan says %v", e.Name, res.Queue, pe.Queues)
			}
		}
		if len(seen) > 0 {
			for _, q := range pe.Queues {
				if !seen[q] {
					t.Errorf("%s: the plan says queue %d, but 300 packets never reached it (saw %v)", e.Name, q, seen)
				}
			}
		}
	}
}

// TestIncremental: adding one endpoint to a planned stack changes only that
// endpoint's rules, unless the cost function demands a move, which the plan
// then reports.
func TestIncremental(t *testing.T) {
	base := `stack inc {
    interface eth0 { mac 00:1b:21:00:00:09 ip 10.9.0.1/24 }
    cores 0..3
    endpoint a udp listen *:1000 { core 1 }
    endpoint b udp listen *:1001 { core 2 }
    endpoint c tcp listen *:80 { core 3 }
`
	in := stackInput(t, "82599", base+"}\n", "balance", StrategyDefault)
	r, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var prev bytes.Buffer
	r.Plan.WriteJSON(&prev)
	plan, err := plan.Read(&prev)
	if err != nil {
		t.Fatal(err)
	}
	in2 := stackInput(t, "82599", base+"    endpoint d udp listen *:2000 { core 1 }\n}\n", "balance", StrategyIncremental)
	in2.Previous = plan
	r2, err := Run(in2)
	if err != nil {
		t.Fatal(err)
	}
	ch := r2.Plan.Changes
	if ch == nil {
		t.Fatal("no changes reported")
	}
	for _, x := range ch.Remove {
		if !slices.Contains(ch.Moved, x.Endpoint) {
			t.Errorf("rule of %s removed without a reported move", x.Endpoint)
		}
	}
	added := map[string]bool{}
	for _, x := range ch.Add {
		added[x.Endpoint] = true
		if x.Endpoint != "d" && !slices.Contains(ch.Moved, x.Endpoint) {
			t.Errorf("rule of %s added without a reported move", x.Endpoint)
		}
	}
	if !added["d"] {
		t.Errorf("the new endpoint got no rule: %+v", ch)
	}
	// Removing an endpoint removes exactly its rule.
	in3 := stackInput(t, "82599", strings.Replace(base, "    endpoint b udp listen *:1001 { core 2 }\n", "", 1)+"}\n", "balance", StrategyIncremental)
	in3.Previous = plan
	r3, err := Run(in3)
	if err != nil {
		t.Fatal(err)
	}
	if ch := r3.Plan.Changes; len(ch.Remove) != 1 || ch.Remove[0].Endpoint != "b" || len(ch.Add) != 0 {
		t.Errorf("removing b: %+v", ch)
	}
	// Without a previous plan the strategy says what it needs.
	if _, err := Run(stackInput(t, "82599", base+"}\n", "balance", StrategyIncremental)); err == nil || !strings.Contains(err.Error(), "--previous") {
		t.Errorf("incremental without a plan: %v", err)
	}
}

// TestHostBinding: an endpoint that names its cores is served by one of
// them when a filter can steer it there.
func TestHostBinding(t *testing.T) {
	src, _ := os.ReadFile("../examples/mpi_openmx.lpg")
	r, err := Run(stackInput(t, "myri10g", string(src), "cycles", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Plan.Endpoints {
		if len(e.IRQCores) != 1 || !slices.Contains(e.AppCores, e.IRQCores[0]) {
			t.Errorf("%s: interrupts on %v, application on %v", e.Name, e.IRQCores, e.AppCores)
		}
	}
}

func TestExplain(t *testing.T) {
	src, _ := os.ReadFile("../examples/dns_ntp.lpg")
	r, err := Run(stackInput(t, "82599", string(src), "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	text, err := r.Explain("RxL2EtherValidCRC")
	if err != nil || !strings.Contains(text, "RxL2EtherValidCRC: hardware") {
		t.Errorf("%v\n%s", err, text)
	}
	if _, err := r.Explain("RxL2EtherValidCRc"); err == nil || !strings.Contains(err.Error(), `did you mean "RxL2EtherValidCRC"?`) {
		t.Errorf("%v", err)
	}
	// An endpoint: its delivery node, then each decision on the way with
	// the port that leads there, on its queues only (dns is spread over
	// its cores' queues, 0 and 1; ntp has queue 3).
	text, err = r.Explain("dns")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"endpoint dns (udp listen *:53): delivered by LPG node RxL4UDPSocket_dns\n",
		"\nRxL4UDPSocket_dns: software\n  queues 0,1: software: runs in software\n",
		"\nRxL4UDPDemux [dns]: software\n  queues 0,1: software: frames on each queue may leave by dns, unmatched\n",
		"\nRxL3IPv4Classify [udp]: software\n",
		"\nRxL2EtherValidCRC [true]: hardware\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explain dns lacks %q:\n%s", want, text)
		}
	}
	if regexp.MustCompile(`queues? [\d,]*[23]`).MatchString(text) || strings.Contains(text, "RxL4UDPSocket_ntp") || strings.Contains(text, "TCP") {
		t.Errorf("explain dns strays from the endpoint's queues and path:\n%s", text)
	}
	// On the silicon a filter entry steers it, and the explanation shows it.
	sr, err := Run(stackInput(t, "82599", string(src), "cycles", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	if text, err := sr.Explain("ntp"); err != nil || !regexp.MustCompile(`\n  Rx\w+ entry: .*udp.dport == 123.* -> RxQueue\d+ \(priority \d+\)\n`).MatchString(text) {
		t.Errorf("explain ntp on the silicon: %v\n%s", err, text)
	}
	// Unknown names: close matches among endpoints and nodes.
	for name, want := range map[string]string{
		"dsn":         `"dsn" is not an LPG node or an endpoint of stack dns_ntp; did you mean "dns"?`,
		"Demux":       `did you mean "RxL4TCPDemux", "RxL4UDPDemux"?`,
		"RxL4UDPDemx": `did you mean "RxL4UDPDemux"?`,
		"zzzzzzzz":    `"zzzzzzzz" is not an LPG node or an endpoint of stack dns_ntp`,
	} {
		if _, err := r.Explain(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("explain %s: %v, want %q", name, err, want)
		}
	}
}

// TestExplicitLPG: an explicit LPG embeds; where the NIC drops frames at a
// check the LPG lacks, the plan warns; a graph with configuration nodes is
// not an LPG.
func TestExplicitLPG(t *testing.T) {
	src := `graph tiny {
    node RxQueue { attr "source" port out[RxL2EtherValidCRC] }
    boolean RxL2EtherValidCRC {
        port true[RxDeliver]
        port false[]
        predicate true "frame.crc_ok"
    }
    node RxDeliver { attr "endpoint=all" }
}`
	g, _, diags := dsl.Load("tiny.lpg", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	in, _, err := NewInput("82599", loadModel(t, "82599"), &lpg.Stack{Name: "tiny"}, g, Options{Target: TargetSilicon})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, w := range r.Plan.Warnings {
		if strings.Contains(w, "RxL2EtherValidLength.false, a check the LPG does not make") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning about the NIC's length check: %v", r.Plan.Warnings)
	}
	cfg, _, _ := dsl.Load("c.lpg", []byte(`graph c { node RxQueue { attr "source" port out[C] } config C { port a b[] } }`))
	in, _, err = NewInput("82599", loadModel(t, "82599"), &lpg.Stack{Name: "c"}, cfg, Options{Target: TargetSilicon})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(in); err == nil || !strings.Contains(err.Error(), "is not an LPG") {
		t.Errorf("configuration node in an LPG: %v", err)
	}
}

// TestShadowedListener: a wildcard listener whose every address is taken
// by an address-specific one gets no filter entry and no queue, and the
// embedding still treats every frame as the LPG does.
func TestShadowedListener(t *testing.T) {
	src := `stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    cores 0..3
    endpoint a udp listen 10.0.0.1:53
    endpoint b udp listen *:53 { class gold rate 1Mpps }
    endpoint c tcp listen 10.0.0.1:80
    endpoint d tcp listen *:80 { class gold }
}`
	for _, nic := range []string{"82576", "82599"} {
		in := stackInput(t, nic, src, "priority", StrategyDefault)
		r, err := Run(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, pe := range r.Plan.Endpoints {
			// b still takes the broadcasts to port 53 (a takes unicast
			// to 10.0.0.1 only), so only d is shadowed.
			shadowed := pe.Name == "d"
			if shadowed != (len(pe.Queues) == 0) {
				t.Errorf("%s/%s: queues %v", nic, pe.Name, pe.Queues)
			}
		}
		for _, v := range r.Embedding.Config.Values {
			for _, e := range v.Entries {
				for _, m := range e.Match {
					if m.Field == "l4.dport" && m.Value == 80 && !hasDst(e.Match) {
						t.Errorf("%s: a filter entry for a shadowed listener: %v", nic, e.Match)
					}
				}
			}
		}
	}
}

func hasDst(ms []prg.FieldMatch) bool {
	for _, m := range ms {
		if m.Field == "ip.dst" {
			return true
		}
	}
	return false
}

// TestTablesFullWarning: when more endpoints than the tables that could
// hold them have room for are left to RSS, the plan says so (the
// EtherType and SYN tables, which hold no endpoint, do not count).
func TestTablesFullWarning(t *testing.T) {
	var b strings.Builder
	b.WriteString("stack full {\n    interface eth0 { mac 00:1b:21:00:00:09 ip 10.9.0.1/24 }\n    cores 0..3\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "    endpoint e%d udp listen 10.9.0.1:%d\n", i, 1000+i)
	}
	b.WriteString("}\n")
	for _, nic := range []string{"82576", "82599"} {
		r, err := Run(stackInput(t, nic, b.String(), "balance", StrategyDefault))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, w := range r.Plan.Warnings {
			found = found || strings.HasPrefix(w, "the filter tables are full:")
		}
		if found != (nic == "82576") {
			t.Errorf("%s: full warning %v; warnings %q", nic, found, r.Plan.Warnings)
		}
	}
}

func ipOf(a uint32) []byte { return pred.Addr(a).AsSlice() }

// TestNeverWorseThanReferences: on every built-in NIC (whole silicon and
// through its Linux driver), example and cost function, the default
// strategy's plan costs no more than everything in software, than Linux's
// default (RSS over every queue, no filter) and than dragonet-greedy on
// the same input. Dragonet's costs are compared with dragonet-greedy
// only: the references lie outside Dragonet's search space (flows left
// on queue 0, which its costs do not see), where they cost 0.
func TestNeverWorseThanReferences(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, nic := range nicNames {
		for _, target := range []string{TargetSilicon, TargetLinux} {
			if strings.HasPrefix(nic, "dragonet-") && target == TargetLinux {
				continue // Dragonet's models name no Linux driver
			}
			for _, ex := range examples {
				src, _ := os.ReadFile(ex)
				for _, cost := range costmodel.Names() {
					name := fmt.Sprintf("%s/%s/%s/%s", nic, target, strings.TrimSuffix(filepath.Base(ex), ".lpg"), cost)
					in := stackInputTarget(t, nic, string(src), cost, StrategyDefault, target)
					r, err := Run(in)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					soft, rss := r.p.references()
					if costmodel.DragonetSpace(in.Cost) {
						soft, rss = r.Cost, r.Cost
					}
					if soft.Less(r.Cost) {
						t.Errorf("%s: plan %v (tie %g) costs more than software only %v", name, r.Cost, r.Cost.Tie, soft)
					}
					if rss.Less(r.Cost) {
						t.Errorf("%s: plan %v (tie %g) costs more than Linux's default %v (tie %g)", name, r.Cost, r.Cost.Tie, rss, rss.Tie)
					}
					if g, err := r.Greedy(); err == nil && g.Less(r.Cost) {
						t.Errorf("%s: plan %v costs more than dragonet-greedy %v", name, r.Cost, g)
					}
				}
			}
		}
	}
}
