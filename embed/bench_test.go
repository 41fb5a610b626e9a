package embed_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/lpg"
)

// udpStack declares n UDP listeners on consecutive ports of one address.
func udpStack(b testing.TB, n int) (*lpg.Stack, []byte) {
	src := fmt.Sprintf(`stack udp%d {
    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/24 }
    cores 0..15
    endpoint kv udp listen 10.3.0.1:10000..%d { rate 10kpps }
    service arp
}`, n, 10000+n-1)
	st, diags := lpg.LoadStack("bench.lpg", []byte(src))
	if st == nil {
		b.Fatal(diags)
	}
	return st, []byte(src)
}

func benchInput(b testing.TB, nic string, n int, strategy embed.Strategy) *embed.Input {
	m := embedtest.Model(b, nic)
	st, _ := udpStack(b, n)
	// The whole NIC, as before NewInput: the benchmark's figures are of
	// the 82599's silicon.
	in, _, err := embed.NewInput(nic, m, st, nil, embed.Options{Strategy: strategy, Target: embed.TargetSilicon})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkEmbed82599 embeds 100, 1,000 and 10,000 UDP endpoints on the
// 82599 with the default strategy, and 100 with dragonet-greedy, which
// stops, as Dragonet does, once its 128 five-tuple filters are full:
// Dragonet's oracle gives a listener no Flow Director entry (mkFDirFromFl).
func BenchmarkEmbed82599(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		for _, strategy := range []embed.Strategy{embed.StrategyDefault, embed.StrategyDragonetGreedy} {
			if strategy == embed.StrategyDragonetGreedy && n > 100 {
				continue
			}
			b.Run(fmt.Sprintf("%d/%s", n, strategy), func(b *testing.B) {
				in := benchInput(b, "82599", n, strategy)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := embed.Run(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSessionChange is one change on a Session of 10,000 UDP
// listeners on the 82599 (16 queues; its filter tables hold 8,318 of
// them, the rest are left to RSS, and Dragonet's search would stop: the
// session has no shadow) and on linux-xdp (dragonc run's eBPF stage,
// whose tables hold them all; the session runs Dragonet's search beside
// it, its shadow, started by a first change before the timer): an
// endpoint removed and added back, two searches and their Deltas.
// BenchmarkSessionReplan is the search of a full re-plan of the same
// stack, for comparison; BenchmarkSessionFirstChange what a session's
// first change costs with its shadow's start.
func BenchmarkSessionChange(b *testing.B) {
	for _, c := range []struct {
		name, nic string
		n         int
	}{{"10000", "82599", 10000}, {"linux-xdp-10000", "linux-xdp", 10000}} {
		n := c.n
		b.Run(c.name, func(b *testing.B) {
			r, err := embed.Run(benchInput(b, c.nic, n, embed.StrategyDefault))
			if err != nil {
				b.Fatal(err)
			}
			ss, err := embed.NewSession(r)
			if err != nil {
				b.Fatal(err)
			}
			eps := r.Stack().Endpoints
			churnOne(b, ss, eps[len(eps)-1]) // the shadow starts
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e := eps[(i*7919)%len(eps)]
				if _, err := ss.Remove(e.Name); err != nil {
					b.Fatal(err)
				}
				if _, err := ss.Add(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSessionChangeOverlaps is BenchmarkSessionChange next to a
// listener: 2,000 connected TCP flows on the port of a listener, on
// linux-xdp; each change moves flows the listener's packets overlap.
func BenchmarkSessionChangeOverlaps(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("stack web {\n    interface eth0 { mac 00:1b:21:00:00:05 ip 10.3.0.1/16 }\n    cores 0..15\n    endpoint www tcp listen 10.3.0.1:80 { rate 10kpps }\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&sb, "    endpoint c%d tcp flow 10.3.0.1:80 -> 10.4.%d.%d:%d { rate 1kpps }\n", i, i/250, 1+i%250, 20000+i)
	}
	sb.WriteString("}\n")
	st, diags := lpg.LoadStack("web.lpg", []byte(sb.String()))
	if st == nil {
		b.Fatal(diags)
	}
	b.Run("2000", func(b *testing.B) {
		in, _, err := embed.NewInput("linux-xdp", embedtest.Model(b, "linux-xdp"), st, nil, embed.Options{Target: embed.TargetSilicon})
		if err != nil {
			b.Fatal(err)
		}
		r, err := embed.Run(in)
		if err != nil {
			b.Fatal(err)
		}
		ss, err := embed.NewSession(r)
		if err != nil {
			b.Fatal(err)
		}
		flows := st.Endpoints[1:]
		churnOne(b, ss, flows[len(flows)-1]) // the shadow starts
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := flows[(i*7919)%len(flows)]
			if _, err := ss.Remove(e.Name); err != nil {
				b.Fatal(err)
			}
			if _, err := ss.Add(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// churnOne removes e and adds it back.
func churnOne(b *testing.B, ss *embed.Session, e *lpg.Endpoint) {
	b.Helper()
	if _, err := ss.Remove(e.Name); err != nil {
		b.Fatal(err)
	}
	if _, err := ss.Add(e); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSessionFirstChange is a session's first change on linux-xdp's
// 10,000 UDP listeners: the session made from the plan, and an endpoint
// removed, which starts the session's shadow (a search of Dragonet's
// over every endpoint).
func BenchmarkSessionFirstChange(b *testing.B) {
	r, err := embed.Run(benchInput(b, "linux-xdp", 10000, embed.StrategyDefault))
	if err != nil {
		b.Fatal(err)
	}
	e := r.Stack().Endpoints[0]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ss, err := embed.NewSession(r)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ss.Remove(e.Name); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSessionReplan(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			in := benchInput(b, "82599", n, embed.StrategyDefault)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := embed.SearchCost(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
