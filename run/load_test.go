package run

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/run/dataplane"
)

// skewStack has five connected flows echoed on two queues, e0 declared
// ten times busier than each of the others: its plan gives e0 queue 1
// alone and the other four queue 2 (predicted shares 2000/2800 and
// 800/2800). TestMeasuredSkew sends exactly that mix.
const skewStack = `stack skew {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..2
    endpoint e0 udp flow 10.9.0.1:7000 -> 10.9.0.2:5000 { app "echo" rate 2kpps }
    endpoint e1 udp flow 10.9.0.1:7001 -> 10.9.0.2:5001 { app "echo" rate 200pps }
    endpoint e2 udp flow 10.9.0.1:7002 -> 10.9.0.2:5002 { app "echo" rate 200pps }
    endpoint e3 udp flow 10.9.0.1:7003 -> 10.9.0.2:5003 { app "echo" rate 200pps }
    endpoint e4 udp flow 10.9.0.1:7004 -> 10.9.0.2:5004 { app "echo" rate 200pps }
    service icmp-echo
    service arp
}
`

// evenStack is skewStack with every endpoint declared at 200 pps.
var evenStack = strings.Replace(skewStack, "rate 2kpps", "rate 200pps", 1)

// t0 is the tests' fake clock's start.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// countsAt is a report at t of each endpoint's deliveries on a queue.
func countsAt(t time.Time, byQueue map[int]map[string]uint64) dataplane.Report {
	r := dataplane.Report{At: t}
	for q := range 3 {
		qc := dataplane.QueueCounts{Queue: q}
		for _, name := range []string{"e0", "e1", "e2", "e3", "e4"} {
			if n := byQueue[q][name]; n > 0 {
				qc.Outcomes = append(qc.Outcomes, dataplane.Outcome{Name: "deliver " + name, Count: n})
				qc.In += n
			}
		}
		qc.Outcomes = append(qc.Outcomes, dataplane.Outcome{Name: "reply arp", Count: 1})
		r.Queues = append(r.Queues, qc)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*max(1, math.Abs(b)) }

// TestLoadMeasured: rates are the differences of two reports over their
// times; each queue's share is its part of the endpoints' frames (ARP
// replies do not count); the prediction is the plan's. The first report
// measures nothing, and counters that went back start afresh.
func TestLoadMeasured(t *testing.T) {
	r, _ := embedtest.Plan(t, Model, "skew.lpg", []byte(skewStack), costmodel.Balance{})
	m := NewLoadMeter(r)
	if _, ok := m.Observe(countsAt(t0, map[int]map[string]uint64{1: {"e0": 100}, 2: {"e1": 10}})); ok {
		t.Fatal("the first report measured a load")
	}
	l, ok := m.Observe(countsAt(t0.Add(2*time.Second), map[int]map[string]uint64{1: {"e0": 4100}, 2: {"e1": 410, "e2": 400, "e3": 400, "e4": 400}}))
	if !ok {
		t.Fatal("no load from the second report")
	}
	if l.Seconds != 2 || l.Basis != "rate" || !l.At.Equal(t0.Add(2*time.Second)) {
		t.Errorf("load over %v s at %v basis %s", l.Seconds, l.At, l.Basis)
	}
	want := map[string][2]float64{"e0": {2000, 2000}, "e1": {200, 200}, "e2": {200, 200}, "e3": {200, 200}, "e4": {200, 200}}
	for _, e := range l.Endpoints {
		if w := want[e.Endpoint]; !near(e.Measured, w[0]) || e.Predicted != w[1] {
			t.Errorf("%s: measured %v predicted %v, want %v", e.Endpoint, e.Measured, e.Predicted, w)
		}
	}
	shares := map[int][2]float64{}
	for _, q := range l.Queues {
		shares[q.Queue] = [2]float64{q.MeasuredShare, q.PredictedShare}
	}
	if s := shares[1]; !near(s[0], 2000.0/2800) || !near(s[1], 2000.0/2800) {
		t.Errorf("queue 1: measured, predicted share %v; want 5/7 both", s)
	}
	if s := shares[2]; !near(s[0], 800.0/2800) || !near(s[1], 800.0/2800) {
		t.Errorf("queue 2: measured, predicted share %v; want 2/7 both", s)
	}
	if s, ok := shares[0]; !ok || s != [2]float64{} {
		t.Errorf("queue 0 (a loop of the plan with no endpoint): %v, %v", s, ok)
	}
	// e1 now arrives on queue 1 too: measured there, planned on 2.
	l, ok = m.Observe(countsAt(t0.Add(3*time.Second), map[int]map[string]uint64{1: {"e0": 6100, "e1": 200}, 2: {"e1": 410, "e2": 400, "e3": 400, "e4": 400}}))
	if !ok || l.Endpoints[1].Measured != 200 || len(l.Endpoints[1].Queues) != 1 || l.Endpoints[1].Queues[0] != 1 || l.Endpoints[1].PlanQueues[0] != 2 {
		t.Errorf("e1 moved: %+v", l.Endpoints[1])
	}
	if _, ok := m.Observe(countsAt(t0.Add(4*time.Second), map[int]map[string]uint64{1: {"e0": 5}})); ok {
		t.Error("counters that went back measured a load")
	}
	if _, ok := m.Observe(countsAt(t0.Add(4*time.Second), map[int]map[string]uint64{1: {"e0": 50}})); ok {
		t.Error("a report at the same time as the one before measured a load")
	}
	if l, ok := m.Observe(countsAt(t0.Add(5*time.Second), map[int]map[string]uint64{1: {"e0": 150}})); !ok || l.Endpoints[0].Measured != 100 {
		t.Errorf("after a restart: %+v, %v", l, ok)
	}
}

// TestLoadFollow: a meter that follows another plan compares with its
// prediction from the next report on, the counters going on.
func TestLoadFollow(t *testing.T) {
	skew, _ := embedtest.Plan(t, Model, "skew.lpg", []byte(skewStack), costmodel.Balance{})
	even, _ := embedtest.Plan(t, Model, "even.lpg", []byte(evenStack), costmodel.Balance{})
	m := NewLoadMeter(even)
	m.Observe(countsAt(t0, map[int]map[string]uint64{1: {"e0": 100}}))
	m.Follow(skew)
	l, ok := m.Observe(countsAt(t0.Add(time.Second), map[int]map[string]uint64{1: {"e0": 300}}))
	if !ok || l.Endpoints[0].Measured != 200 || l.Endpoints[0].Predicted != 2000 {
		t.Errorf("after Follow: %+v, %v; want e0 measured at 200 against skew's 2000", l, ok)
	}
}

// TestLoadKernelSockets: a kernel-socket endpoint's frames, counted by
// the XDP program per endpoint, are its planned queue's.
func TestLoadKernelSockets(t *testing.T) {
	r, _ := embedtest.Plan(t, Model, "skew.lpg", []byte(skewStack), costmodel.Balance{})
	m := NewLoadMeter(r)
	rep := func(at time.Duration, e0, k uint64) dataplane.Report {
		rp := countsAt(t0.Add(at), map[int]map[string]uint64{1: {"e0": e0}})
		rp.KernelSockets = []dataplane.KernelSocket{{Endpoint: "e3", Redirected: k, OnCore: k}}
		return rp
	}
	m.Observe(rep(0, 0, 0))
	l, ok := m.Observe(rep(time.Second, 300, 50))
	if !ok {
		t.Fatal("no load")
	}
	e3 := l.Endpoints[3]
	if e3.Measured != 100 || !e3.KernelSocket || len(e3.Queues) != 1 || e3.Queues[0] != 2 {
		t.Errorf("e3: %+v", e3)
	}
	for _, q := range l.Queues {
		if q.Queue == 2 && !near(q.MeasuredShare, 0.25) {
			t.Errorf("queue 2's share %v, want 0.25 (e3's 100 of 400 frames)", q.MeasuredShare)
		}
	}
}

// TestLoadText: the tables run prints after a report and status shows.
func TestLoadText(t *testing.T) {
	l := &Load{Seconds: 1, Basis: "rate",
		Endpoints: []EndpointLoad{{Endpoint: "e0", Measured: 1990.4, Predicted: 2000, Queues: []int{1}, PlanQueues: []int{1}}, {Endpoint: "quiet", Queues: []int{}, PlanQueues: []int{2}}},
		Queues:    []QueueLoad{{Queue: 1, Measured: 1990.4, MeasuredShare: 1, PredictedShare: 0.714}, {Queue: 2, PredictedShare: 0.286}}}
	var b strings.Builder
	l.WriteText(&b)
	want := `load over 1.00 s, measured beside the plan's prediction from the declared rates:
    endpoint  measured fps  predicted fps  queues  plan queues
          e0          1990           2000       1            1
       quiet             0              -       -            2
    queue  measured fps  measured share  predicted share
        1          1990          100.0%            71.4%
        2             0            0.0%            28.6%
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestMetricsLoad: the measured and predicted rates and shares are
// gauges; an endpoint with no declared rate has no predicted one.
func TestMetricsLoad(t *testing.T) {
	m := NewMetrics("skew", Model, "vA")
	m.UpdateLoad(&Load{Endpoints: []EndpointLoad{{Endpoint: "e0", Measured: 1990, Predicted: 2000}, {Endpoint: "e1", Measured: 3}},
		Queues: []QueueLoad{{Queue: 1, MeasuredShare: 0.7, PredictedShare: 0.75}}})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, x := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range x.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "dragonc_endpoint_rate_fps":
				got[labels["endpoint"]+" "+labels["source"]] = x.GetGauge().GetValue()
			case "dragonc_queue_share":
				got["queue "+labels["queue"]+" "+labels["source"]] = x.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{"e0 measured": 1990, "e0 predicted": 2000, "e1 measured": 3, "queue 1 measured": 0.7, "queue 1 predicted": 0.75}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// TestLoadStreamsOnVIs: a stream the mvia plan puts on a VI is not
// measured (the VIs' frames are counted together, not per endpoint) and
// has no measured rate to re-plan from; a stream on kernel TCP and a UDP
// endpoint are.
func TestLoadStreamsOnVIs(t *testing.T) {
	r, _ := embedDriver(t, "mvia", viaStack, false)
	m := NewLoadMeter(r)
	m.Observe(dataplane.Report{At: t0})
	l, ok := m.Observe(dataplane.Report{At: t0.Add(time.Second), VI: &dataplane.VICounts{VILink: dataplane.VILink{Received: 50}},
		Queues: []dataplane.QueueCounts{{Queue: 0, Outcomes: []dataplane.Outcome{{Name: "deliver echo", Count: 5}}}}})
	if !ok {
		t.Fatal("no load")
	}
	unmeasured := map[string]bool{}
	for _, e := range l.Endpoints {
		unmeasured[e.Endpoint] = e.Unmeasured
	}
	if !unmeasured["repl"] || !unmeasured["drain"] || unmeasured["far"] || unmeasured["echo"] {
		t.Errorf("unmeasured: %v; want repl and drain (on VIs)", unmeasured)
	}
	rates := l.Rates()
	if _, ok := rates["repl"]; ok || rates["echo"] != 5 {
		t.Errorf("rates %v: want echo's, none of repl", rates)
	}
	var b strings.Builder
	l.WriteText(&b)
	if !strings.Contains(b.String(), "on a VI") {
		t.Errorf("the table does not say which are on VIs:\n%s", b.String())
	}
}
