package run

import (
	"errors"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dragonc/dragonc/run/dataplane"
)

// Metrics exports a running stack's counters to Prometheus: the latest
// report of the data plane (Options.OnReport) rendered as counters at each
// scrape, the way exporters of another program's counters do
// (prometheus.Collector with constant metrics), so that nothing is counted
// twice.
type Metrics struct {
	mu     sync.Mutex
	last   dataplane.Report
	have   bool
	load   *Load             // the latest measured load, if any
	labels prometheus.Labels // the build-info metric's
	reg    *prometheus.Registry
}

var (
	descIn      = prometheus.NewDesc("dragonc_frames_received_total", "Frames a receive loop took from its sockets.", []string{"queue"}, nil)
	descOutcome = prometheus.NewDesc("dragonc_frames_total", "Frames by the outcome the generated code gave them (kind deliver, reply, sink or drop; name the endpoint, reply, sink or NODE.PORT, as dragonc verify names them).", []string{"queue", "kind", "name"}, nil)
	descSent    = prometheus.NewDesc("dragonc_frames_sent_total", "Frames the data plane sent.", []string{"queue"}, nil)
	descSendErr = prometheus.NewDesc("dragonc_send_errors_total", "Frames the data plane could not send.", []string{"queue"}, nil)
	descSockErr = prometheus.NewDesc("dragonc_socket_errors_total", "Errors a loop's sockets reported, such as the interface going down.", []string{"queue"}, nil)
	descLimited = prometheus.NewDesc("dragonc_icmp_errors_rate_limited_total", "ICMP errors held back by the stack's limits.", []string{"queue"}, nil)
	descRefused = prometheus.NewDesc("dragonc_answers_refused_total", "Answers the data plane would not send (no source address, a sender's port 0).", []string{"queue"}, nil)
	descKernel  = prometheus.NewDesc("dragonc_socket_kernel_total", "The kernel's counters of a loop's sockets: XDP_STATISTICS for AF_XDP, PACKET_STATISTICS drops (rx_dropped) for AF_PACKET.", []string{"queue", "counter"}, nil)
	descKSocket = prometheus.NewDesc("dragonc_kernel_socket_frames_total", "Frames of a kernel-socket endpoint by what the XDP program did with them (how: redirected to the endpoint's planned core through the cpumap; on_core: passed up on the CPU that already was it; no_cpumap_entry: passed up where they arrived, the cpumap having no entry for the core; rule_dropped: dropped by a rule of the plan).", []string{"endpoint", "how"}, nil)
	descCMissed = prometheus.NewDesc("dragonc_cpumap_flushes_uncounted_total", "Flushes of frames to the cpumap's queues whose frames dragonc_cpumap_frames_total misses: the kernel skipped the counting program while another eBPF tracing program ran on the CPU.", nil, nil)
	descCpumap  = prometheus.NewDesc("dragonc_cpumap_frames_total", "Frames the kernel-socket endpoints' redirects put in a CPU's queue of the cpumap (how: queued, or dropped because the queue was full), as the kernel's xdp:xdp_cpumap_enqueue tracepoint reports them.", []string{"cpu", "how"}, nil)
	descVIADrop = prometheus.NewDesc("dragonc_via_setup_drops_total", "Frames and connections the software VIs' connection setup dropped, by reason (docs/sovia.md).", []string{"reason"}, nil)
	descVIFrame = prometheus.NewDesc("dragonc_vi_frames_total", "Frames of the software VIs' own packet socket (what: received, sent, send_errors, dropped by the kernel for want of room, oversize: longer than the MTU, dropped, or no_room: bulk datagrams the socket had no room to queue whole, dropped).", []string{"what"}, nil)
	descVIBulk  = prometheus.NewDesc("dragonc_vi_bulk_datagrams_total", "Bulk datagrams of the software VIs' own packet socket (what: sent, each cut into frames by the kernel; received whole; refused by the kernel, the messages going as frames since; abandoned_vis: VIs none of whose bulk datagrams was acknowledged, which send frames since).", []string{"what"}, nil)
	descEPRate  = prometheus.NewDesc("dragonc_endpoint_rate_fps", "An endpoint's frame rate: measured between the last two reports, or predicted (its declared rate; absent when it declares none).", []string{"endpoint", "source"}, nil)
	descQShare  = prometheus.NewDesc("dragonc_queue_share", "A queue's share of the endpoints' frames (0 to 1): measured between the last two reports, or predicted by the plan's cost model.", []string{"queue", "source"}, nil)
	descUp      = prometheus.NewDesc("dragonc_serving", "1 once the data plane has reported its counters.", nil, nil)
)

// NewMetrics makes the exporter of a stack served on iface from plan
// queues on socket kind socket (a build-info metric carries them).
func NewMetrics(stack, nic, iface string) *Metrics {
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	m := &Metrics{labels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "stack": stack, "nic": nic, "iface": iface}, reg: prometheus.NewRegistry()}
	m.reg.MustRegister(m)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dragonc_build_info", Help: "dragonc's version and what it serves.", ConstLabels: m.labels}, func() float64 { return 1 }))
	return m
}

// Update takes a new reading of the counters (an Options.OnReport).
func (m *Metrics) Update(r dataplane.Report) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last, m.have = r, true
}

// UpdateLoad takes a new measurement of the load (Options.OnLoad).
func (m *Metrics) UpdateLoad(l *Load) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.load = l
}

// Describe is prometheus.Collector's.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIn, descOutcome, descSent, descSendErr, descSockErr, descLimited, descRefused, descKernel, descKSocket, descCpumap, descCMissed, descVIADrop, descVIFrame, descVIBulk, descEPRate, descQShare, descUp} {
		ch <- d
	}
}

// Collect is prometheus.Collector's: the latest report as counters.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	r, have, load := m.last, m.have, m.load
	m.mu.Unlock()
	up := 0.0
	if have {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, q := range r.Queues {
		id := strconv.Itoa(q.Queue)
		counter(descIn, q.In, id)
		for _, o := range q.Outcomes {
			kind, name, _ := strings.Cut(o.Name, " ")
			counter(descOutcome, o.Count, id, kind, name)
		}
		counter(descSent, q.Sent, id)
		counter(descSendErr, q.SendErrors, id)
		counter(descSockErr, q.SocketErrors, id)
		counter(descLimited, q.ICMPRateLimited, id)
		counter(descRefused, q.AnswersRefused, id)
		k := q.Kernel
		k.Each(func(name string, v *uint64) { counter(descKernel, *v, id, name) })
	}
	for _, k := range r.KernelSockets {
		counter(descKSocket, k.Redirected, k.Endpoint, "redirected")
		counter(descKSocket, k.OnCore, k.Endpoint, "on_core")
		counter(descKSocket, k.NoCPUEntry, k.Endpoint, "no_cpumap_entry")
		counter(descKSocket, k.RuleDropped, k.Endpoint, "rule_dropped")
	}
	for _, c := range r.Cpumap {
		cpu := strconv.Itoa(c.CPU)
		counter(descCpumap, c.Queued, cpu, "queued")
		counter(descCpumap, c.Dropped, cpu, "dropped")
	}
	if len(r.Cpumap) > 0 {
		counter(descCMissed, r.CpumapMissed)
	}
	if v := r.VI; v != nil {
		counter(descVIFrame, v.Received, "received")
		counter(descVIFrame, v.Sent, "sent")
		counter(descVIFrame, v.SendErrors, "send_errors")
		counter(descVIFrame, v.Dropped, "dropped")
		counter(descVIFrame, v.Oversize, "oversize")
		counter(descVIFrame, v.NoRoom, "no_room")
		counter(descVIBulk, v.BulkSent, "sent")
		counter(descVIBulk, v.BulkReceived, "received")
		counter(descVIBulk, v.BulkRefused, "refused")
		counter(descVIBulk, v.BulkAbandoned, "abandoned_vis")
		for _, o := range v.SetupDrops {
			counter(descVIADrop, o.Count, o.Name)
		}
	}
	if load != nil {
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		for _, e := range load.Endpoints {
			gauge(descEPRate, e.Measured, e.Endpoint, "measured")
			if e.Predicted > 0 {
				gauge(descEPRate, e.Predicted, e.Endpoint, "predicted")
			}
		}
		for _, q := range load.Queues {
			id := strconv.Itoa(q.Queue)
			gauge(descQShare, q.MeasuredShare, id, "measured")
			gauge(descQShare, q.PredictedShare, id, "predicted")
		}
	}
}

// Handler serves the metrics in Prometheus's exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// serveMetrics listens on addr and serves m at /metrics until stop is
// called; it returns the address it listens on (addr may name port 0).
func serveMetrics(addr string, m *Metrics) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return ln.Addr().String(), func() { srv.Close() }, nil
}
