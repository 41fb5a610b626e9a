package live

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dragonc/dragonc/run"
)

// TestMemcachedStack: the mode's stack plans with the priority cost and
// names both endpoints with a queue and a core.
func TestMemcachedStack(t *testing.T) {
	for _, cores := range []int{1, 2, 4} {
		src := memcachedStack(cores)
		r, _, err := run.PlanCost("memcached_live.lpg", []byte(src), "priority")
		if err != nil {
			t.Fatalf("%d cores: %v\n%s", cores, err, src)
		}
		for _, name := range []string{"gold", "be"} {
			e, err := planned(r.Plan.Endpoints, name)
			if err != nil || len(e.Queues) == 0 || e.Core < 0 || e.Core >= cores {
				t.Errorf("%d cores: endpoint %s: %+v", cores, name, e)
			}
			if cores > 1 && (e.Cores != "honoured" || !slices.Equal(e.AppCores, []int{e.Core})) {
				t.Errorf("%d cores: endpoint %s is not served on the core it declares: %+v", cores, name, e)
			}
		}
	}
	if _, err := planned(nil, "gold"); err == nil {
		t.Error("an endpoint the plan does not have has a core")
	}
}

// TestMemcachedReport: the spreads and ratios are computed within each
// round, rows with an error or without answers add nothing, and the
// table says both p99 ratios and the throughput ratio beside its goal.
func TestMemcachedReport(t *testing.T) {
	ld := func(perSecond, p50, p99 float64, lost uint64) *MemcachedLoad {
		return &MemcachedLoad{Answered: 100, Hits: 100, PerSecond: perSecond, P50us: p50, P99us: p99, Lost: lost}
	}
	rep := &MemcachedReport{Rounds: 2, P99Goal: 2, ThroughputGoal: 0.95, Background: []float64{0.1, 0.9}, Servers: []*MemcachedServer{
		{Name: "kernel", Rounds: []MemcachedRound{
			{Round: 1, Quiet: ld(1000, 20, 40, 0), FloodGold: ld(1000, 50, 400, 3), FloodBE: ld(50000, 0, 0, 0), SatGold: ld(40000, 0, 0, 0), SatBE: ld(60000, 0, 0, 1)},
			{Round: 2, Quiet: ld(1000, 20, 50, 0), FloodGold: ld(1000, 50, 100, 0), FloodBE: ld(40000, 0, 0, 0), SatGold: ld(50000, 0, 0, 0), SatBE: ld(50000, 0, 0, 0)},
		}},
		{Name: "dragonc", Rounds: []MemcachedRound{
			{Round: 1, Quiet: ld(1000, 20, 40, 0), FloodGold: ld(1000, 25, 60, 0), FloodBE: ld(45000, 0, 0, 0), SatGold: ld(48000, 0, 0, 0), SatBE: ld(48000, 0, 0, 0)},
			{Round: 2, Error: "dragonc run did not serve"},
		}},
	}}
	rep.finish()
	k, d := rep.Servers[0].Spread, rep.Servers[1].Spread
	if k.P99Ratio != (Range{Min: 2, Max: 10, N: 2}) || k.Saturated != (Range{Min: 100000, Max: 100000, N: 2}) || k.Lost != 4 {
		t.Errorf("kernel spread %+v", k)
	}
	if d.P99Ratio != (Range{Min: 1.5, Max: 1.5, N: 1}) || d.FloodBE.N != 1 || d.QuietP99.N != 1 {
		t.Errorf("dragonc spread %+v", d)
	}
	if rep.Throughput != (Range{Min: 0.96, Max: 0.96, N: 1}) {
		t.Errorf("throughput ratio %+v, want 96000/100000 of round 1 only", rep.Throughput)
	}
	table := rep.Table()
	for _, want := range []string{"with dragonc: 1.50× (goal ≤ 2×); kernel: 2.00–10.00×", "within each round: 0.96× (goal ≥ 0.95×)", "round 2: dragonc run did not serve", "background before the rounds: 0.10–0.90 CPUs", "warning: the host was busy"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// TestLiveMemcached runs the memcached mode briefly: every step of every
// row sent requests and accounted for them (answered or lost), every row
// has answers, the answers are hits (the values were set over TCP
// first) with percentiles, the CPU shares are in range, the report reads
// back as JSON and the table has a row per server. It asserts nothing
// about speed.
func TestLiveMemcached(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Skip("no memcached (Debian package memcached)")
	}
	var progress syncBuffer
	opt := Options{Rounds: 1, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, GoldRate: 1000, Progress: &progress}
	rep, err := RunMemcached(context.Background(), opt)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if left := leftNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if len(rep.Endpoints) != 2 {
		t.Errorf("endpoints %+v", rep.Endpoints)
	}
	for _, s := range rep.Servers {
		if len(s.Rounds) != 1 {
			t.Fatalf("%s: %d rounds", s.Name, len(s.Rounds))
		}
		m := s.Rounds[0]
		if m.Error != "" {
			t.Errorf("%s: %s\n%s", s.Name, m.Error, progress.String())
			continue
		}
		// A host busy with other work may starve a server for a whole
		// (short) step: each load must be accounted for, and each row
		// must have answers, but not every step.
		var answered uint64
		for tag, l := range map[string]*MemcachedLoad{"quiet": m.Quiet, "flood gold": m.FloodGold, "flood best-effort": m.FloodBE, "saturated gold": m.SatGold, "saturated best-effort": m.SatBE} {
			switch {
			case l == nil || l.Sent == 0 || l.Answered+l.Lost == 0:
				t.Errorf("%s, %s: requests not sent or not accounted for: %+v", s.Name, tag, l)
				continue
			case l.Hits != l.Answered || l.Stray+l.Errors > 0:
				t.Errorf("%s, %s: every get is of a stored key and should hit: %+v", s.Name, tag, l)
			case l.Answered > 0 && (l.P50us <= 0 || l.P99us < l.P50us):
				t.Errorf("%s, %s: percentiles %+v", s.Name, tag, l)
			case l.Answered > l.Sent+256:
				// At most a socket's 256 slots were outstanding when
				// the window opened.
				t.Errorf("%s, %s: more answers than requests: %+v", s.Name, tag, l)
			case l.ServerCPUs < 0 || l.ServerCPUs > 1.5 || l.CoreBusy < 0 || l.CoreBusy > 1.5:
				// Pinned to one core (the slack: USER_HZ ticks).
				t.Errorf("%s, %s: a server's or core's CPU share is not in 0..1: %+v", s.Name, tag, l)
			}
			answered += l.Answered
		}
		if answered == 0 {
			t.Errorf("%s: no answers in any step", s.Name)
		}
		if m.Quiet != nil && m.FloodGold != nil && m.Quiet.Answered > 0 && m.FloodGold.Answered > 0 && s.Spread.P99Ratio.N != 1 {
			t.Errorf("%s: no p99 ratio: %+v", s.Name, s.Spread)
		}
		if m.saturated() > 0 && s.Spread.Saturated.N != 1 {
			t.Errorf("%s: no saturated get/s: %+v", s.Name, s.Spread)
		}
	}
	if rep.Throughput.N+rep.PassThroughput.N == 0 {
		t.Errorf("no throughput ratios: %+v, %+v", rep.Throughput, rep.PassThroughput)
	}
	table := checkReadable(t, rep, MemcachedServerNames())
	t.Logf("\n%s", table)
}

// BenchmarkMemcached is the memcached mode as a Go benchmark: both rows
// (or those LIVE_SERVERS lists, comma separated) in three interleaved
// rounds of 2s per load, whatever b.N (the loads run for a time, not a
// count; the run takes well over the default -benchtime, so the
// framework stops at b.N = 1). Each row's medians over the rounds are
// metrics: gold p50 and p99 alone and flooded, the p99 ratio,
// best-effort get/s in the flood and saturated get/s, and the other
// rows' saturated get/s over the kernel's of the same round. The table
// goes to the log (-v).
//
//	go test ./bench/live -run XXX -bench Memcached -benchmem -v
func BenchmarkMemcached(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the live benchmark needs root")
	}
	if _, err := exec.LookPath("memcached"); err != nil {
		b.Skip("no memcached (Debian package memcached)")
	}
	opt := Options{Rounds: 3, Duration: 2 * time.Second, Progress: os.Stderr}
	if s := os.Getenv("LIVE_SERVERS"); s != "" {
		opt.Servers = strings.Split(s, ",")
	}
	b.ReportAllocs()
	var rep *MemcachedReport
	for range b.N {
		var err error
		if rep, err = RunMemcached(context.Background(), opt); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("\n%s", rep.Table())
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, s := range rep.Servers {
		figs := map[string][]float64{}
		for i, m := range s.Rounds {
			if m.Quiet == nil || m.FloodGold == nil || m.FloodBE == nil || m.Quiet.Answered == 0 || m.FloodGold.Answered == 0 {
				continue
			}
			figs["p50-µs"] = append(figs["p50-µs"], m.Quiet.P50us)
			figs["p99-µs"] = append(figs["p99-µs"], m.Quiet.P99us)
			figs["flooded-p50-µs"] = append(figs["flooded-p50-µs"], m.FloodGold.P50us)
			figs["flooded-p99-µs"] = append(figs["flooded-p99-µs"], m.FloodGold.P99us)
			figs["p99-flooded/alone"] = append(figs["p99-flooded/alone"], m.FloodGold.P99us/m.Quiet.P99us)
			figs["best-effort-get/s"] = append(figs["best-effort-get/s"], m.FloodBE.PerSecond)
			if sat := m.saturated(); sat > 0 {
				figs["saturated-get/s"] = append(figs["saturated-get/s"], sat)
				for _, k := range rep.Servers {
					if k != s && k.Name == "kernel" && i < len(k.Rounds) && k.Rounds[i].saturated() > 0 {
						figs["saturated/kernel"] = append(figs["saturated/kernel"], sat/k.Rounds[i].saturated())
					}
				}
			}
		}
		for name, v := range figs {
			b.ReportMetric(med(v), s.Name+"-"+name)
		}
	}
	b.ReportMetric(0, "ns/op")
}
