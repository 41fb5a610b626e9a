package live

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/dragonc/dragonc/plan"
)

type planEndpoint = plan.Endpoint

// MemcachedReport is the result of RunMemcached.
type MemcachedReport struct {
	Compiler  string  `json:"compiler"`
	Memcached string  `json:"memcached"` // memcached -V
	Cores     int     `json:"cores"`
	Rounds    int     `json:"rounds"`
	Seconds   float64 `json:"seconds_per_load"`
	TimeoutMs float64 `json:"timeout_ms"`
	// GoldRate is the gold client's requests per second; InFlight and
	// Sockets the flood's and the saturation's (per instance).
	GoldRate   int `json:"gold_rate"`
	InFlight   int `json:"in_flight"`
	Sockets    int `json:"sockets"`
	Keys       int `json:"keys"`
	ValueBytes int `json:"value_bytes"`
	// Cost and Stack are the plan's cost function and stack; Endpoints
	// what the plan gives each endpoint, and the core its memcached is
	// pinned to.
	Cost      string              `json:"cost"`
	Stack     string              `json:"stack"`
	Endpoints []MemcachedEndpoint `json:"endpoints"`
	// P99Goal is the most gold's p99 with the flood may be, as a multiple
	// of its p99 without, with dragonc; ThroughputGoal the least
	// dragonc's saturated get/s may be, as a multiple of the kernel's.
	P99Goal        float64            `json:"p99_goal"`
	ThroughputGoal float64            `json:"throughput_goal"`
	Background     []float64          `json:"background_cpus"`
	Servers        []*MemcachedServer `json:"servers"`
	// Throughput is dragonc's saturated get/s (both instances) divided by
	// the kernel's of the same round, min–max over the rounds;
	// PassThroughput the same of the xdp-pass row.
	Throughput     Range `json:"throughput_ratio"`
	PassThroughput Range `json:"xdp_pass_throughput_ratio"`
}

// MemcachedEndpoint is an endpoint's place in the plan.
type MemcachedEndpoint struct {
	Name     string `json:"name"`
	Class    string `json:"class"`
	Port     int    `json:"port"`
	Queues   []int  `json:"queues"`
	IRQCores []int  `json:"irq_cores"`
	AppCores []int  `json:"app_cores"`
	// Core is the core of its planned queue, where memcached runs;
	// Cores says whether the plan honours the cores the stack declares
	// (plan.json's "cores").
	Core  int    `json:"core"`
	Cores string `json:"cores,omitempty"`
}

// MemcachedServer is one row: the kernel's default or dragonc's plan.
type MemcachedServer struct {
	Name   string           `json:"name"`
	Title  string           `json:"title"`
	Rounds []MemcachedRound `json:"rounds"`
	Spread MemcachedSpread  `json:"spread"`
}

// MemcachedRound is one row in one round: the three steps' loads, or the
// error that stopped it.
type MemcachedRound struct {
	Round int `json:"round"`
	// Quiet is the gold client alone, at GoldRate.
	Quiet *MemcachedLoad `json:"quiet,omitempty"`
	// FloodGold is the gold client at GoldRate beside FloodBE, the
	// best-effort flood (InFlight outstanding).
	FloodGold *MemcachedLoad `json:"flood_gold,omitempty"`
	FloodBE   *MemcachedLoad `json:"flood_best_effort,omitempty"`
	// SatGold and SatBE are both instances with InFlight outstanding
	// each, at once.
	SatGold *MemcachedLoad `json:"saturated_gold,omitempty"`
	SatBE   *MemcachedLoad `json:"saturated_best_effort,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// MemcachedLoad is one client's figures.
type MemcachedLoad struct {
	// Answered gets were hits (VALUE ... END) or misses (END).
	Answered  uint64  `json:"answered"`
	Hits      uint64  `json:"hits"`
	Misses    uint64  `json:"misses"`
	Sent      uint64  `json:"sent"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	// Lost requests had no answer within the timeout; Late answers came
	// after it; Stray datagrams answered nothing outstanding; Errors are
	// memcached's error replies; Skipped the gold timer's ticks that found
	// every slot outstanding; Drained answers came after the window.
	Lost    uint64 `json:"lost"`
	Late    uint64 `json:"late,omitempty"`
	Stray   uint64 `json:"stray,omitempty"`
	Errors  uint64 `json:"errors,omitempty"`
	Skipped uint64 `json:"skipped,omitempty"`
	Drained uint64 `json:"drained,omitempty"`
	// ServerCPUs is the CPU time of the memcached this load went to
	// (every thread; /proc/PID/stat) over the window, per second: about
	// 1 when its core was saturated. Kernel work charged elsewhere
	// (softirq in the sender's system calls, the cpumap's kthread) is not
	// in it.
	ServerCPUs float64 `json:"server_cpus"`
	// CoreBusy is the busy share of that memcached's core over the
	// window (its /proc/stat line: user, nice, system, irq, softirq,
	// steal): the server's work and the kernel's there, whoever it is
	// charged to; 1 when the core was saturated.
	CoreBusy float64 `json:"core_busy"`
}

func newMemcachedLoad(r *mcResult) *MemcachedLoad {
	l := &MemcachedLoad{Answered: r.Answered, Hits: r.Hits, Misses: r.Misses, Sent: r.Sent, Seconds: float64(r.WindowNs) / 1e9,
		P50us: float64(r.P50Ns) / 1e3, P99us: float64(r.P99Ns) / 1e3, Lost: r.Lost, Late: r.Late, Stray: r.Stray,
		Errors: r.Errors, Skipped: r.Skipped, Drained: r.Drained}
	if l.Seconds > 0 {
		l.PerSecond = float64(r.Answered) / l.Seconds
		l.ServerCPUs = float64(r.ServerNs) / float64(r.WindowNs)
		l.CoreBusy = float64(r.CoreNs) / float64(r.WindowNs)
	}
	return l
}

// MemcachedSpread is the minimum and maximum of each figure over the
// rounds.
type MemcachedSpread struct {
	QuietP50 Range `json:"quiet_p50_us"`
	QuietP99 Range `json:"quiet_p99_us"`
	FloodP50 Range `json:"flood_p50_us"`
	FloodP99 Range `json:"flood_p99_us"`
	// P99Ratio is gold's p99 with the flood over its p99 without, of the
	// same round.
	P99Ratio Range `json:"p99_flood_over_quiet"`
	// FloodBE is the best-effort get/s during the flood; Saturated the
	// get/s of both instances saturated at once.
	FloodBE   Range `json:"flood_best_effort_per_second"`
	Saturated Range `json:"saturated_per_second"`
	// FloodBECPUs is the best-effort memcached's CPUs during the flood
	// (MemcachedLoad.ServerCPUs).
	FloodBECPUs Range `json:"flood_best_effort_server_cpus"`
	// FloodBECore is the best-effort core's busy share during the flood
	// (MemcachedLoad.CoreBusy).
	FloodBECore Range `json:"flood_best_effort_core_busy"`
	// Lost sums the lost requests of every step and round.
	Lost uint64 `json:"lost"`
}

// saturated is both instances' get/s in the saturation step; 0 when it
// was not measured.
func (m *MemcachedRound) saturated() float64 {
	if m.SatGold == nil || m.SatBE == nil {
		return 0
	}
	return m.SatGold.PerSecond + m.SatBE.PerSecond
}

func (rep *MemcachedReport) finish() {
	var kernel *MemcachedServer
	for _, s := range rep.Servers {
		if s.Name == "kernel" {
			kernel = s
		}
	}
	for _, s := range rep.Servers {
		sp := &s.Spread
		for i, m := range s.Rounds {
			for _, l := range []*MemcachedLoad{m.Quiet, m.FloodGold, m.FloodBE, m.SatGold, m.SatBE} {
				if l != nil {
					sp.Lost += l.Lost
				}
			}
			if m.Quiet != nil && m.Quiet.Answered > 0 {
				sp.QuietP50.add(m.Quiet.P50us)
				sp.QuietP99.add(m.Quiet.P99us)
			}
			if m.FloodGold != nil && m.FloodGold.Answered > 0 {
				sp.FloodP50.add(m.FloodGold.P50us)
				sp.FloodP99.add(m.FloodGold.P99us)
				if m.Quiet != nil && m.Quiet.Answered > 0 {
					sp.P99Ratio.add(m.FloodGold.P99us / m.Quiet.P99us)
				}
			}
			if m.FloodBE != nil {
				sp.FloodBE.add(m.FloodBE.PerSecond)
				sp.FloodBECPUs.add(m.FloodBE.ServerCPUs)
				sp.FloodBECore.add(m.FloodBE.CoreBusy)
			}
			if sat := m.saturated(); sat > 0 {
				sp.Saturated.add(sat)
				to := map[string]*Range{"dragonc": &rep.Throughput, "xdp-pass": &rep.PassThroughput}[s.Name]
				if to != nil && kernel != nil && i < len(kernel.Rounds) {
					if k := kernel.Rounds[i].saturated(); k > 0 {
						to.add(sat / k)
					}
				}
			}
		}
	}
}

// Table is the report for people.
func (rep *MemcachedReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dragonet's priority experiment: %s over UDP on a veth pair, %d cores, %d round(s), interleaved; C load generator built with %s\n",
		rep.Memcached, rep.Cores, rep.Rounds, rep.Compiler)
	fmt.Fprintf(&b, "gold at %d gets/s (open loop); best-effort flood and saturation %d in flight over %d sockets; %d keys of %d bytes; %gs per load; min–max over the rounds\n",
		rep.GoldRate, rep.InFlight, rep.Sockets, rep.Keys, rep.ValueBytes, rep.Seconds)
	fmt.Fprintf(&b, "plan (--cost %s):", rep.Cost)
	for _, e := range rep.Endpoints {
		fmt.Fprintf(&b, " %s (%s, port %d) queue %v core %d, declared cores %v", e.Name, e.Class, e.Port, e.Queues, e.Core, e.AppCores)
		if e.Cores != "" {
			fmt.Fprintf(&b, " (%s)", e.Cores)
		}
		b.WriteString(";")
	}
	b.WriteString(" each memcached pinned to its endpoint's core\n")
	bg := Range{}
	for _, v := range rep.Background {
		bg.add(v)
	}
	fmt.Fprintf(&b, "host background before the rounds: %s CPUs\n\n", rng(bg, "%.2f"))
	w := len("server")
	for _, s := range rep.Servers {
		w = max(w, len(s.Name))
	}
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tgold p50 µs\tgold p99 µs\tflooded p50\tflooded p99\tp99 flooded/alone\tbest-effort get/s\tits CPUs\tits core busy\tsaturated get/s\tlost\t\n", w, "server")
	for _, s := range rep.Servers {
		sp := s.Spread
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", w, s.Name, rng(sp.QuietP50, "%.1f"), rng(sp.QuietP99, "%.1f"),
			rng(sp.FloodP50, "%.1f"), rng(sp.FloodP99, "%.1f"), rng(sp.P99Ratio, "%.2f×"), rng(sp.FloodBE, "%.0f"), rng(sp.FloodBECPUs, "%.2f"),
			rng(sp.FloodBECore, "%.2f"), rng(sp.Saturated, "%.0f"), sp.Lost)
	}
	tw.Flush()
	b.WriteString("\n")
	for _, s := range rep.Servers {
		if s.Name == "dragonc" && s.Spread.P99Ratio.N > 0 {
			fmt.Fprintf(&b, "gold p99 flooded/alone with dragonc: %s (goal ≤ %g×)", rng(s.Spread.P99Ratio, "%.2f×"), rep.P99Goal)
			for _, k := range rep.Servers {
				if k.Name != "dragonc" && k.Spread.P99Ratio.N > 0 {
					fmt.Fprintf(&b, "; %s: %s", k.Name, rng(k.Spread.P99Ratio, "%.2f×"))
				}
			}
			b.WriteString("\n")
		}
	}
	if rep.Throughput.N > 0 {
		fmt.Fprintf(&b, "saturated get/s, dragonc / the kernel's default within each round: %s (goal ≥ %g×)", rng(rep.Throughput, "%.2f×"), rep.ThroughputGoal)
		if rep.PassThroughput.N > 0 {
			fmt.Fprintf(&b, "; xdp-pass / the kernel's default: %s", rng(rep.PassThroughput, "%.2f×"))
		}
		b.WriteString("\n")
	}
	for _, s := range rep.Servers {
		fmt.Fprintf(&b, "%s: %s\n", s.Name, s.Title)
		for _, m := range s.Rounds {
			if m.Error != "" {
				fmt.Fprintf(&b, "  round %d: %s\n", m.Round, m.Error)
			}
			for _, l := range []struct {
				tag string
				l   *MemcachedLoad
			}{{"gold alone", m.Quiet}, {"gold flooded", m.FloodGold}, {"best-effort flood", m.FloodBE}, {"gold saturated", m.SatGold}, {"best-effort saturated", m.SatBE}} {
				if x := l.l; x != nil && x.Late+x.Stray+x.Errors+x.Skipped+x.Misses > 0 {
					fmt.Fprintf(&b, "  round %d, %s: %d late, %d stray, %d server errors, %d misses, %d timer ticks skipped\n",
						m.Round, l.tag, x.Late, x.Stray, x.Errors, x.Misses, x.Skipped)
				}
			}
		}
	}
	if bg.Max > busyHost {
		fmt.Fprintf(&b, "warning: the host was busy with other work (up to %.2f CPUs before a round): the latencies, and so the ratios, measure that work as much as the rows\n", bg.Max)
	}
	b.WriteString("p99 flooded/alone: gold's p99 beside the best-effort flood over its p99 alone, within a round; its CPUs: the best-effort memcached's CPU time per second during the flood; its core busy: that core's busy share then, the kernel's work there included (1: saturated); saturated get/s: both instances flooded at once\n")
	return b.String()
}
