package run

import (
	"encoding/json"
	"fmt"
	"io"
	gomaps "maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/run/dataplane"
)

// Load is the traffic measured between two reports beside what the plan
// predicts: each endpoint's frame rate against its declared rate, and
// each queue's share of the endpoints' frames against the share the cost
// model gives it (embed.Result.PredictedLoad). `dragonc run` prints it
// after each report, `dragonc status` shows the latest and the metrics
// export it as gauges (docs/cli.md).
type Load struct {
	At      time.Time `json:"at"`      // the later report's time
	Seconds float64   `json:"seconds"` // between the two reports
	// Basis is what the prediction weighs: "rate", the declared rates
	// (every endpoint declares one), or "flows", one per endpoint, as the
	// cost functions count when some endpoint declares none.
	Basis     string         `json:"basis"`
	Endpoints []EndpointLoad `json:"endpoints"`
	Queues    []QueueLoad    `json:"queues"`
}

// EndpointLoad is one endpoint's measured rate and its declared one.
type EndpointLoad struct {
	Endpoint string  `json:"endpoint"`
	Frames   uint64  `json:"frames"`       // delivered in the interval
	Measured float64 `json:"measured_fps"` // Frames over the interval
	// Predicted is the declared rate; 0 when the endpoint declares none.
	Predicted float64 `json:"predicted_fps"`
	// Queues are the queues its frames were counted on in the interval,
	// and PlanQueues the plan's.
	Queues     []int `json:"queues"`
	PlanQueues []int `json:"plan_queues"`
	// KernelSocket: a kernel-socket endpoint, whose frames the XDP
	// program counts per endpoint (Report.KernelSockets); they are set on
	// its planned queues as the plan shares them out.
	KernelSocket bool `json:"kernel_socket,omitempty"`
	// Unmeasured: a stream the plan puts on a VI, whose frames the VIs'
	// own socket counts for every VI together (a report's vi), not per
	// endpoint: its rate is not measured, and rebalancing keeps its
	// declared one.
	Unmeasured bool `json:"unmeasured,omitempty"`
}

// QueueLoad is one queue's share of the endpoints' frames, measured and
// predicted.
type QueueLoad struct {
	Queue         int     `json:"queue"`
	Measured      float64 `json:"measured_fps"`
	MeasuredShare float64 `json:"measured_share"`
	// Predicted is the queue's load at the declared rates (basis
	// "rate"; 0 otherwise), PredictedShare its share of all.
	Predicted      float64 `json:"predicted_fps"`
	PredictedShare float64 `json:"predicted_share"`
}

// LoadMeter measures the load of a served plan from consecutive reports
// (Report.At is their clock, so a test's reports can carry any times).
type LoadMeter struct {
	pred  dembed.PredictedLoad
	loops []int           // the plan's queues
	onVI  map[string]bool // the streams on VIs (EndpointLoad.Unmeasured)
	prev  *counted
}

// counted are a report's frames: per endpoint, per queue.
type counted struct {
	at     time.Time
	frames map[string]map[int]float64
	total  map[string]uint64
	kernel map[string]bool
}

// NewLoadMeter starts measuring the load of r's plan.
func NewLoadMeter(r *dembed.Result) *LoadMeter {
	m := &LoadMeter{pred: r.PredictedLoad(), onVI: map[string]bool{}}
	for _, q := range r.Plan.Queues {
		m.loops = append(m.loops, q.ID)
	}
	if v := r.Plan.VIA; v != nil {
		for _, s := range v.Streams {
			m.onVI[s.Endpoint] = s.Transport == "vi"
		}
	}
	return m
}

// Follow makes r's plan the one the meter compares with, from the next
// report on (the counters go on: a plan changed while serving).
func (m *LoadMeter) Follow(r *dembed.Result) {
	n := NewLoadMeter(r)
	n.prev = m.prev
	*m = *n
}

// Prediction is the plan's prediction the meter compares with.
func (m *LoadMeter) Prediction() dembed.PredictedLoad { return m.pred }

// count reads a report's endpoint frames: the loops' deliveries
// ("deliver NAME") on their queues, and the kernel-socket endpoints'
// frames on their planned queues, shared as the plan shares them.
func (m *LoadMeter) count(r dataplane.Report) *counted {
	c := &counted{at: r.At, frames: map[string]map[int]float64{}, total: map[string]uint64{}, kernel: map[string]bool{}}
	add := func(name string, q int, n float64) {
		if c.frames[name] == nil {
			c.frames[name] = map[int]float64{}
		}
		c.frames[name][q] += n
	}
	for _, q := range r.Queues {
		for _, o := range q.Outcomes {
			if name, ok := strings.CutPrefix(o.Name, "deliver "); ok {
				add(name, q.Queue, float64(o.Count))
				c.total[name] += o.Count
			}
		}
	}
	for _, k := range r.KernelSockets {
		// The endpoint's frames that reached the kernel's stack, on its
		// core or not (a rule's drops are no load, as a loop's are not).
		n := k.Redirected + k.OnCore + k.NoCPUEntry
		c.kernel[k.Endpoint] = true
		c.total[k.Endpoint] += n
		for _, pe := range m.pred.Endpoints {
			if pe.Name == k.Endpoint {
				for _, s := range pe.Shares {
					add(k.Endpoint, s.Queue, float64(n)*s.Frac)
				}
			}
		}
	}
	return c
}

// Observe takes a report and returns the load since the previous one;
// false for the first, for one no later than the previous, and when the
// counters went back (a data plane started again): measuring starts
// afresh from it.
func (m *LoadMeter) Observe(r dataplane.Report) (*Load, bool) {
	cur := m.count(r)
	prev := m.prev
	m.prev = cur
	if prev == nil || r.At.IsZero() || !r.At.After(prev.at) {
		return nil, false
	}
	for name, n := range prev.total {
		if cur.total[name] < n {
			return nil, false
		}
	}
	secs := r.At.Sub(prev.at).Seconds()
	l := &Load{At: r.At, Seconds: secs, Basis: "flows"}
	if m.pred.ByRate {
		l.Basis = "rate"
	}
	perQueue := map[int]float64{}
	var all float64
	for _, pe := range m.pred.Endpoints {
		el := EndpointLoad{Endpoint: pe.Name, Frames: cur.total[pe.Name] - prev.total[pe.Name], Predicted: pe.Rate, Queues: []int{}, PlanQueues: []int{},
			KernelSocket: cur.kernel[pe.Name], Unmeasured: m.onVI[pe.Name]}
		el.Measured = float64(el.Frames) / secs
		for _, s := range pe.Shares {
			el.PlanQueues = append(el.PlanQueues, s.Queue)
		}
		for _, q := range slices.Sorted(gomaps.Keys(cur.frames[pe.Name])) {
			if d := cur.frames[pe.Name][q] - prev.frames[pe.Name][q]; d > 0 {
				perQueue[q] += d
				all += d
				if !el.KernelSocket {
					el.Queues = append(el.Queues, q)
				}
			}
		}
		if el.KernelSocket && el.Frames > 0 {
			el.Queues = append(el.Queues, el.PlanQueues...)
		}
		slices.Sort(el.Queues)
		l.Endpoints = append(l.Endpoints, el)
	}
	ids := slices.Clone(m.loops)
	predicted := map[int]dembed.PredictedQueue{}
	for _, q := range m.pred.Queues {
		predicted[q.Queue] = q
		if q.Load > 0 {
			ids = append(ids, q.Queue)
		}
	}
	for q := range perQueue {
		ids = append(ids, q)
	}
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		ql := QueueLoad{Queue: id, Measured: perQueue[id] / secs, PredictedShare: predicted[id].Share}
		if all > 0 {
			ql.MeasuredShare = perQueue[id] / all
		}
		if m.pred.ByRate {
			ql.Predicted = predicted[id].Load
		}
		l.Queues = append(l.Queues, ql)
	}
	return l, true
}

// Rates are the measured rates by endpoint (of the measured ones).
func (l *Load) Rates() map[string]float64 {
	out := make(map[string]float64, len(l.Endpoints))
	for _, e := range l.Endpoints {
		if !e.Unmeasured {
			out[e.Endpoint] = e.Measured
		}
	}
	return out
}

// Frames are the endpoints' frames in the interval.
func (l *Load) Frames() uint64 {
	var n uint64
	for _, e := range l.Endpoints {
		n += e.Frames
	}
	return n
}

// WriteText writes the load as two tables, the endpoints' rates and the
// queues' shares, measured beside predicted: what `dragonc run` prints
// after a report and `dragonc status` shows.
func (l *Load) WriteText(w io.Writer) {
	basis := "the declared rates"
	if l.Basis != "rate" {
		basis = "one flow per endpoint (not every endpoint declares a rate)"
	}
	fmt.Fprintf(w, "load over %.2f s, measured beside the plan's prediction from %s:\n", l.Seconds, basis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  endpoint\tmeasured fps\tpredicted fps\tqueues\tplan queues\t")
	for _, e := range l.Endpoints {
		pred := "-"
		if e.Predicted > 0 {
			pred = fps(e.Predicted)
		}
		measured := fps(e.Measured)
		if e.Unmeasured {
			measured = "on a VI"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", e.Endpoint, measured, pred, ints(e.Queues), ints(e.PlanQueues))
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  queue\tmeasured fps\tmeasured share\tpredicted share\t")
	for _, q := range l.Queues {
		fmt.Fprintf(tw, "  %d\t%s\t%.1f%%\t%.1f%%\t\n", q.Queue, fps(q.Measured), 100*q.MeasuredShare, 100*q.PredictedShare)
	}
	tw.Flush()
}

func fps(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func ints(xs []int) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// LatestLoad reads the last load the run on iface measured (load.json
// in its state directory, written with each report).
func LatestLoad(iface string) (*Load, error) {
	name, err := nameOf(iface)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(stateDir(name), "load.json"))
	if err != nil {
		return nil, err
	}
	var l Load
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// measuring is a serving's measurement of its load, and what receives
// each Load.
type measuring struct {
	mu     sync.Mutex
	meter  *LoadMeter
	onLoad []func(*Load)
}

// meterOf is the serving's LoadMeter, made on first use.
func (sv *serving) meterOf() *LoadMeter {
	if sv.load.meter == nil {
		sv.load.meter = NewLoadMeter(sv.r)
		sv.load.onLoad = append(sv.load.onLoad, sv.saveLoad)
		if f := sv.opt.OnLoad; f != nil {
			sv.load.onLoad = append(sv.load.onLoad, func(l *Load) { f(*l) })
		}
	}
	return sv.load.meter
}

// measureFrom starts measuring at the time the data plane serves from:
// its counters are all 0 then, so the first report measures a load too.
func (sv *serving) measureFrom(at time.Time) {
	sv.load.mu.Lock()
	defer sv.load.mu.Unlock()
	sv.meterOf().Observe(dataplane.Report{At: at})
}

// measure takes a report's load (nil when Observe measures none) and
// hands it on.
func (sv *serving) measure(r dataplane.Report) *Load {
	sv.load.mu.Lock()
	defer sv.load.mu.Unlock()
	l, ok := sv.meterOf().Observe(r)
	if !ok {
		return nil
	}
	for _, f := range sv.load.onLoad {
		f(l)
	}
	return l
}

// saveLoad keeps the latest load for `dragonc status`.
func (sv *serving) saveLoad(l *Load) {
	if sv.state != nil {
		writeJSON(filepath.Join(stateDir(sv.state.name), "load.json"), l)
	}
}
