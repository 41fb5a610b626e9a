package live

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/internal/netns"
	"github.com/dragonc/dragonc/internal/netnstest"
)

// TestMain lets the test binary stand in for the Go load generator, and
// keeps dragonc run's state apart from the host's.
func TestMain(m *testing.M) {
	Child()
	netnstest.Main(m)
}

func TestOptionsCheck(t *testing.T) {
	for _, c := range []struct {
		opt  Options
		want string
	}{
		{Options{Rounds: -1}, "rounds -1"},
		{Options{Rounds: 101}, "rounds 101"},
		{Options{Duration: time.Millisecond}, "duration 1ms"},
		{Options{Transactions: -5}, "transactions -5"},
		{Options{InFlight: 5000}, "in-flight 5000"},
		{Options{Servers: []string{"nginx"}}, `no server "nginx"`},
		{Options{Servers: []string{"c", "c"}}, `server "c" named twice`},
		{Options{}, ""},
		{Options{Servers: []string{"reflector", "go"}, Rounds: 1, Transactions: 100}, ""},
		{Options{Memcached: true, Ping: true}, "choose one"},
		{Options{Memcached: true, GoldRate: -1}, "gold rate -1"},
		{Options{Memcached: true, InFlight: 4096, Sockets: 2}, "more than 256 per socket"},
		{Options{Memcached: true, Servers: []string{"c"}}, `no server "c"`},
		{Options{Memcached: true, Servers: []string{"dragonc", "kernel"}}, ""},
	} {
		err := c.opt.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.opt, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want an error with %q", c.opt, err, c.want)
		}
	}
}

// TestReportCPURatios: a CPU ratio is taken only of and against figures
// above the noise (the reflector's is about 0 on a veth), and the table
// shows no CPU figure below zero.
func TestReportCPURatios(t *testing.T) {
	round := func(perSecond, cpu float64) Measurement {
		return Measurement{Round: 1,
			Many: &Load{Answered: 1000, PerSecond: perSecond, CPUus: cpu, P50us: 10, P99us: 20},
			One:  &Load{Answered: 100, PerSecond: 1e4, CPUus: cpu * 2, P50us: 10, P99us: 20}}
	}
	rep := &Report{Load: "udp", Base: "c", Rounds: 1, InFlight: 64, Background: []float64{0.01}, Servers: []*ServerReport{
		{Name: "c", Rounds: []Measurement{round(2e5, 5)}},
		{Name: "xdp", Rounds: []Measurement{round(2.2e5, 4)}},
		{Name: "reflector", Rounds: []Measurement{round(4e5, -0.3)}},
	}}
	rep.finish()
	xdp, refl := rep.Servers[1], rep.Servers[2]
	if r := xdp.Ratios["c"].CPUMany; r.N != 1 || r.Min != 0.8 {
		t.Errorf("xdp's CPU ratio to the C server: %+v, want 0.8", r)
	}
	if r := xdp.Ratios["reflector"]; r.CPUMany.N != 0 || r.CPUOne.N != 0 || r.PerSecond.N != 1 {
		t.Errorf("xdp's ratios to the reflector: %+v; want no CPU ratio, a throughput ratio", r)
	}
	if r := refl.Ratios["c"]; r.CPUMany.N != 0 || r.CPUOne.N != 0 || r.PerSecond.N != 1 {
		t.Errorf("the reflector's ratios to the C server: %+v; want no CPU ratio (its figure is not its work), a throughput ratio", r)
	}
	table := rep.Table()
	if regexp.MustCompile(`(^|[\s–])-\d`).MatchString(table) {
		t.Errorf("the table shows a figure below zero:\n%s", table)
	}
	if !strings.Contains(table, "no CPU ratio is taken of or to a CPU µs/tx under 0.5 (") {
		t.Errorf("the table does not say why the CPU ratios to the reflector are missing:\n%s", table)
	}
	// Where every CPU ratio was taken, the table does not say otherwise.
	rep = &Report{Load: "udp", Base: "c", Rounds: 1, InFlight: 64, Background: []float64{0.01}, Servers: []*ServerReport{
		{Name: "c", Rounds: []Measurement{round(2e5, 5)}},
		{Name: "xdp", Rounds: []Measurement{round(2.2e5, 4)}},
	}}
	rep.finish()
	if table := rep.Table(); strings.Contains(table, "no CPU ratio is taken") {
		t.Errorf("the table says CPU ratios are missing where none is:\n%s", table)
	}
}

// TestHistogram: the Go generator's percentiles are within the
// histogram's resolution (1/128) of the exact ones.
func TestHistogram(t *testing.T) {
	var h histogram
	var vals []uint64
	for i := range uint64(10000) {
		v := 1000 + i*i%977*131 // spread over 1 µs..129 µs
		vals = append(vals, v)
		h.add(v)
	}
	sorted := append([]uint64(nil), vals...)
	slices.Sort(sorted)
	for _, q := range []float64{0.5, 0.99} {
		exact := sorted[int(q*float64(len(sorted)))-1]
		got := h.percentile(q)
		if d := float64(got) - float64(exact); d > float64(exact)/64 || -d > float64(exact)/64 {
			t.Errorf("p%.0f: %d, exact %d", q*100, got, exact)
		}
	}
	if (&histogram{}).percentile(0.5) != 0 {
		t.Error("an empty histogram has a percentile")
	}
}

// leftNamespaces lists the namespaces this process's benchmarks made.
func leftNamespaces(t *testing.T) []string {
	ents, _ := os.ReadDir(netns.Dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("%s%d-", nsPrefix, os.Getpid())) {
			out = append(out, e.Name())
		}
	}
	return out
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the live benchmark needs root")
	}
}

// TestLive runs the whole benchmark briefly, every server once, for UDP
// echo and for ping: each row is measured at both loads with answers,
// the report reads back as JSON, the table names every server, and
// nothing is left behind. It asserts nothing about speed.
func TestLive(t *testing.T) {
	needRoot(t)
	for _, ping := range []bool{false, true} {
		opt := Options{Rounds: 1, Transactions: 300, Duration: 5 * time.Second, Ping: ping}
		t.Run(map[bool]string{false: "udp", true: "ping"}[ping], func(t *testing.T) {
			var progress syncBuffer
			opt.Progress = &progress
			rep, err := Run(context.Background(), opt)
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			checkLive(t, rep, opt.names(), &progress)
		})
	}
}

func checkLive(t *testing.T, rep *Report, names []string, progress *syncBuffer) {
	if left := leftNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if len(rep.Servers)+len(rep.Skipped) != len(names) {
		t.Errorf("%d servers measured and %d skipped, want %d in all", len(rep.Servers), len(rep.Skipped), len(names))
	}
	for _, s := range rep.Servers {
		if len(s.Rounds) != 1 {
			t.Errorf("%s: %d rounds", s.Name, len(s.Rounds))
			continue
		}
		m := s.Rounds[0]
		if m.Error != "" || m.Many == nil || m.One == nil || m.Many.Answered == 0 || m.One.Answered == 0 {
			t.Errorf("%s: not measured: %+v", s.Name, m)
			continue
		}
		if m.Many.P50us <= 0 || m.One.P99us < m.One.P50us {
			t.Errorf("%s: percentiles %+v", s.Name, m.One)
		}
		if m.Many.Stray+m.One.Stray > 0 {
			t.Errorf("%s: %d answers that matched no request", s.Name, m.Many.Stray+m.One.Stray)
		}
	}
	var measured []string
	for _, s := range rep.Servers {
		measured = append(measured, s.Name)
	}
	table := checkReadable(t, rep, measured)
	if !strings.Contains(progress.String(), "removed the namespaces") {
		t.Errorf("no progress about the clean-up:\n%s", progress.String())
	}
	t.Logf("\n%s", table)
}

// checkReadable checks that report rep (a *Report or *MemcachedReport)
// reads back from its JSON into its own type with every server, and
// that its table has a row for each of names; it returns the table.
func checkReadable[R interface{ Table() string }](t *testing.T, rep R, names []string) string {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	back := reflect.New(reflect.TypeOf(rep).Elem()).Interface()
	var servers struct {
		Servers []json.RawMessage `json:"servers"`
	}
	if err := json.Unmarshal(b, back); err != nil {
		t.Errorf("the JSON report does not read back: %v", err)
	}
	if err := json.Unmarshal(b, &servers); err != nil || len(servers.Servers) != len(names) {
		t.Errorf("the JSON report has %d servers, want %d: %v", len(servers.Servers), len(names), err)
	}
	table := rep.Table()
	for _, n := range names {
		if !regexp.MustCompile(`(?m)^\s*` + n + `\s+\d`).MatchString(table) {
			t.Errorf("the table has no row for %s:\n%s", n, table)
		}
	}
	return table
}

// TestLiveGoGenerator: without a C compiler the Go load generator runs,
// the C server's row is skipped with the reason, and a lost datagram is
// counted: the servers here answer, so none is lost, but nothing panics.
func TestLiveGoGenerator(t *testing.T) {
	needRoot(t)
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-such-cc"))
	rep, err := Run(context.Background(), Options{Rounds: 1, Transactions: 200, Duration: 5 * time.Second, Servers: []string{"go", "c", "reflector"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Generator != "go" || !strings.Contains(rep.Skipped["c"], "no C compiler") {
		t.Errorf("generator %q, skipped %v", rep.Generator, rep.Skipped)
	}
	for _, s := range rep.Servers {
		if m := s.Rounds[0]; m.Error != "" || m.Many == nil || m.Many.Answered == 0 || m.One == nil || m.One.Answered == 0 {
			t.Errorf("%s: %+v", s.Name, m)
		}
	}
	if !strings.Contains(rep.Table(), "c: skipped: no C compiler") {
		t.Errorf("the table does not say the C row was skipped:\n%s", rep.Table())
	}
}

// TestLiveCancel: a benchmark stopped half-way (a signal, in the command)
// returns the context's error and leaves no namespace behind.
func TestLiveCancel(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOn{cancel: cancel, text: "go: 1 in flight"}
	_, err := Run(ctx, Options{Rounds: 2, Duration: 3 * time.Second, Servers: []string{"go", "reflector"}, Progress: w})
	if err != context.Canceled {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if left := leftNamespaces(t); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
}

// TestLiveLost: a server that answers nothing costs every request, and
// each is counted lost, without an error or a hang; so for the memcached
// generator, in both of its modes.
func TestLiveLost(t *testing.T) {
	needRoot(t)
	p, err := newPair(1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	progs, err := buildPrograms(t.TempDir(), []string{os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	// No server listens on port 7: every request times out.
	g, err := progs.generate(context.Background(), p.path(p.b), load{inFlight: 4, sockets: 2, duration: 300 * time.Millisecond, timeout: 50 * time.Millisecond, warmup: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Answered != 0 || g.Lost == 0 {
		t.Errorf("no server: %+v", g)
	}
	if progs.mcgen == "" {
		t.Skip(progs.noCC)
	}
	for _, l := range []mcLoad{
		{port: goldPort, rate: 500, sockets: 1, duration: 300 * time.Millisecond, timeout: 50 * time.Millisecond, warmup: 10 * time.Millisecond},
		{port: bePort, inFlight: 8, sockets: 2, threads: 2, duration: 300 * time.Millisecond, timeout: 50 * time.Millisecond, warmup: 10 * time.Millisecond},
	} {
		r, err := progs.mcgenerate(context.Background(), p.path(p.b), l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Answered != 0 || r.Lost == 0 || r.Sent == 0 {
			t.Errorf("no memcached, %+v: %+v", l, r)
		}
	}
}

// cancelOn cancels when a progress line contains text.
type cancelOn struct {
	mu     sync.Mutex
	cancel func()
	text   string
}

func (c *cancelOn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Contains(string(b), c.text) {
		c.cancel()
	}
	return len(b), nil
}

// syncBuffer collects what a server prints.
type syncBuffer = netnstest.SyncBuffer

// BenchmarkUDPEcho is the live benchmark as a Go benchmark: the five
// servers (or those the LIVE_SERVERS variable lists, comma separated) in
// three interleaved rounds, b.N transactions per load (each load ends
// after a minute at most). Each
// server's figures are reported as metrics: the median over the rounds
// of transactions/s at 64 in flight, p50 and p99 at 1 in flight and CPU
// µs per transaction at both, and the ratios to the C server and to the
// reflector of the same round. The table goes to the log (-v).
//
//	go test ./bench/live -run XXX -bench UDPEcho -benchtime 100000x -benchmem
func BenchmarkUDPEcho(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the live benchmark needs root")
	}
	opt := Options{Rounds: 3, Progress: os.Stderr, Transactions: b.N, Duration: time.Minute}
	if b.N == 1 {
		// The framework always runs b.N = 1 first.
		opt.Rounds, opt.Transactions = 1, 1000
		b.Log("b.N = 1: one round of 1,000 transactions per load; -benchtime Nx measures N per load in three rounds")
	}
	if s := os.Getenv("LIVE_SERVERS"); s != "" {
		opt.Servers = strings.Split(s, ",")
	}
	b.ReportAllocs()
	rep, err := Run(context.Background(), opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("\n%s", rep.Table())
	med := func(s *ServerReport, f func(Measurement) (float64, bool)) float64 {
		var v []float64
		for _, m := range s.Rounds {
			if x, ok := f(m); ok {
				v = append(v, x)
			}
		}
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	many := func(f func(*Load) float64) func(Measurement) (float64, bool) {
		return func(m Measurement) (float64, bool) {
			if m.Many == nil || m.Many.Answered == 0 {
				return 0, false
			}
			return f(m.Many), true
		}
	}
	one := func(f func(*Load) float64) func(Measurement) (float64, bool) {
		return func(m Measurement) (float64, bool) {
			if m.One == nil || m.One.Answered == 0 {
				return 0, false
			}
			return f(m.One), true
		}
	}
	for _, s := range rep.Servers {
		b.ReportMetric(med(s, many(func(l *Load) float64 { return l.PerSecond })), s.Name+"-tx/s")
		b.ReportMetric(med(s, many(func(l *Load) float64 { return l.CPUus })), s.Name+"-cpu-µs/tx@64")
		b.ReportMetric(med(s, one(func(l *Load) float64 { return l.P50us })), s.Name+"-p50-µs")
		b.ReportMetric(med(s, one(func(l *Load) float64 { return l.P99us })), s.Name+"-p99-µs")
		b.ReportMetric(med(s, one(func(l *Load) float64 { return l.CPUus })), s.Name+"-cpu-µs/tx@1")
		for _, ref := range rep.Servers {
			if ref == s || ref.Name != "c" && ref.Name != "reflector" {
				continue
			}
			// The ratio of each round, then their median.
			rs := &ServerReport{}
			for i, m := range s.Rounds {
				if o := ref.Rounds[i]; m.Many != nil && o.Many != nil && o.Many.PerSecond > 0 {
					rs.Rounds = append(rs.Rounds, Measurement{Many: &Load{Answered: 1, PerSecond: m.Many.PerSecond / o.Many.PerSecond}})
				}
			}
			b.ReportMetric(med(rs, many(func(l *Load) float64 { return l.PerSecond })), s.Name+"-tx/s-vs-"+ref.Name)
		}
	}
	b.ReportMetric(0, "ns/op")
}
