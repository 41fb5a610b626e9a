package live

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is the result of Run: each server's measurements in every round,
// their spread and the ratios computed within each round.
type Report struct {
	// Generator is the load generator that ran: "c" (built with the C
	// compiler Compiler) or "go".
	Generator string `json:"generator"`
	// Load is what was echoed: "udp" or "icmp" (ping); Base the server
	// the others are compared with besides the reflector ("c" for UDP,
	// "kernel" for ping).
	Load         string  `json:"load"`
	Base         string  `json:"base"`
	Compiler     string  `json:"compiler,omitempty"`
	Cores        int     `json:"cores"`
	Rounds       int     `json:"rounds"`
	InFlight     int     `json:"in_flight"`
	Sockets      int     `json:"sockets"`
	Seconds      float64 `json:"seconds_per_load"`
	Transactions int     `json:"transactions_per_load,omitempty"`
	TimeoutMs    float64 `json:"timeout_ms"`
	// BusyPoll and SpinUs are the dragonc rows' wait mode (Options);
	// SpinUs 0 is run's default spin, negative none.
	BusyPoll bool    `json:"busy_poll"`
	SpinUs   float64 `json:"spin_us"`
	// XDPMode is the hook the dragonc rows' XDP programs asked for:
	// auto, driver or generic (run --xdp-mode).
	XDPMode string `json:"xdp_mode"`
	// Stack is the stack the dragonc rows serve.
	Stack string `json:"stack,omitempty"`
	// Background is the host's busy rate before each round, in CPUs,
	// which the CPU figures have subtracted.
	Background []float64 `json:"background_cpus"`
	// Skipped names each server not measured, with the reason.
	Skipped map[string]string `json:"skipped"`
	Servers []*ServerReport   `json:"servers"`

	// cpuSkipped counts the CPU ratios not taken (addCPURatio).
	cpuSkipped int
}

// ServerReport is one server's figures.
type ServerReport struct {
	Name   string        `json:"name"`
	Title  string        `json:"title"`
	Rounds []Measurement `json:"rounds"`
	// Spread is the minimum and maximum of each figure over the rounds
	// that measured it.
	Spread Spread `json:"spread"`
	// Ratios are this server's figures divided by the base server's
	// (Report.Base) and the reflector's ("reflector") of the same round,
	// their minimum and maximum over the rounds.
	Ratios map[string]Spread `json:"ratios"`
}

// Spread is the minimum and maximum of each figure.
type Spread struct {
	PerSecond Range `json:"per_second"`  // at InFlight
	CPUMany   Range `json:"cpu_us_many"` // CPU µs per transaction at InFlight
	P50       Range `json:"p50_us"`      // at 1 in flight
	P99       Range `json:"p99_us"`      // at 1 in flight
	CPUOne    Range `json:"cpu_us_one"`  // CPU µs per transaction at 1 in flight
	ProcMany  Range `json:"process_cpu_us_many"`
	ProcOne   Range `json:"process_cpu_us_one"`
	Lost      int64 `json:"lost,omitempty"` // over every round and load (ratios: none)
}

// busyHost is the background, in CPUs, above which the CPU figures are
// flagged: other work then shares the cores with the measurement.
const busyHost = 0.25

// Range is a minimum and a maximum; both 0 when nothing was measured.
type Range struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	N   int     `json:"n"` // how many values
}

func (r *Range) add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if r.N == 0 || v < r.Min {
		r.Min = v
	}
	if r.N == 0 || v > r.Max {
		r.Max = v
	}
	r.N++
}

// Measurement is one server in one round: both loads, or the error that
// stopped it.
type Measurement struct {
	Round int    `json:"round"`
	Many  *Load  `json:"many,omitempty"` // InFlight outstanding
	One   *Load  `json:"one,omitempty"`  // one outstanding
	Error string `json:"error,omitempty"`
}

// Load is one measurement's figures.
type Load struct {
	Answered  uint64  `json:"answered"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	// CPUus is the server's CPU per transaction (see the package
	// documentation for what it counts); BusyCPUs and GeneratorCPUs are
	// the whole host's busy rate and the generator's, in CPUs.
	CPUus float64 `json:"cpu_us"`
	// TotalCPUus is the whole host's busy time per transaction, the load
	// generator's included, less the background.
	TotalCPUus float64 `json:"total_cpu_us"`
	// ProcessCPUus is the CPU time of the server's own process (the C
	// server's, dragonc run's helper) and of the benchmark's process
	// (where the Go server and dragonc run's supervisor run) per
	// transaction: immune to other work on the host, but blind to
	// kernel work charged elsewhere (all of the reflector's).
	ProcessCPUus  float64 `json:"process_cpu_us"`
	BusyCPUs      float64 `json:"busy_cpus"`
	GeneratorCPUs float64 `json:"generator_cpus"`
	// Lost requests had no answer within the timeout; Late answers came
	// after it; Stray datagrams were not answers to the generator's
	// requests; Refused counts ICMP port unreachable errors.
	Lost    int64 `json:"lost"`
	Late    int64 `json:"late,omitempty"`
	Stray   int64 `json:"stray,omitempty"`
	Refused int64 `json:"refused,omitempty"`
}

// newLoad computes a load's figures from the generator's report and the
// host's background rate.
func newLoad(g *genResult, bg float64) *Load {
	l := &Load{Answered: g.Answered, Seconds: float64(g.WindowNs) / 1e9, P50us: float64(g.P50Ns) / 1e3, P99us: float64(g.P99Ns) / 1e3,
		Lost: int64(g.Lost), Late: int64(g.Late), Stray: int64(g.Stray), Refused: int64(g.Refused)}
	if l.Seconds > 0 {
		l.PerSecond = float64(g.Answered) / l.Seconds
		l.BusyCPUs = float64(g.BusyNs) / float64(g.WindowNs)
		l.GeneratorCPUs = float64(g.SelfNs) / float64(g.WindowNs)
	}
	if g.Answered > 0 {
		total := float64(g.BusyNs) - bg*float64(g.WindowNs)
		l.TotalCPUus = total / float64(g.Answered) / 1e3
		l.CPUus = (total - float64(g.SelfNs)) / float64(g.Answered) / 1e3
	}
	return l
}

// finish computes the spreads and the ratios.
func (rep *Report) finish() {
	byName := map[string]*ServerReport{}
	for _, s := range rep.Servers {
		byName[s.Name] = s
	}
	for _, s := range rep.Servers {
		sp := &s.Spread
		for _, m := range s.Rounds {
			if m.Many != nil {
				sp.Lost += m.Many.Lost
				if m.Many.Answered > 0 {
					sp.PerSecond.add(m.Many.PerSecond)
					sp.CPUMany.add(m.Many.CPUus)
					sp.ProcMany.add(m.Many.ProcessCPUus)
				}
			}
			if m.One != nil {
				sp.Lost += m.One.Lost
				if m.One.Answered > 0 {
					sp.P50.add(m.One.P50us)
					sp.P99.add(m.One.P99us)
					sp.CPUOne.add(m.One.CPUus)
					sp.ProcOne.add(m.One.ProcessCPUus)
				}
			}
		}
		s.Ratios = map[string]Spread{}
		for _, refName := range []string{rep.Base, "reflector"} {
			ref := byName[refName]
			if ref == nil {
				continue
			}
			var r Spread
			for i, m := range s.Rounds {
				if i >= len(ref.Rounds) {
					break
				}
				o := ref.Rounds[i]
				if m.Many != nil && o.Many != nil && m.Many.Answered > 0 && o.Many.Answered > 0 {
					r.PerSecond.add(m.Many.PerSecond / o.Many.PerSecond)
					rep.addCPURatio(&r.CPUMany, m.Many.CPUus, o.Many.CPUus)
				}
				if m.One != nil && o.One != nil && m.One.Answered > 0 && o.One.Answered > 0 {
					r.P50.add(m.One.P50us / o.One.P50us)
					r.P99.add(m.One.P99us / o.One.P99us)
					rep.addCPURatio(&r.CPUOne, m.One.CPUus, o.One.CPUus)
				}
			}
			s.Ratios[refName] = r
		}
	}
}

// cpuFloor is the least CPU per transaction, in µs, that a CPU ratio is
// taken of or against. The host-wide figure leaves out the load
// generator's system calls, and on a veth all of the reflector's work
// runs in them (its XDP_TX answers inside the sender's call), so the
// reflector's figure is the background's noise around 0: a ratio to it
// would be noise too (it read -358× to 600× before this floor), and one
// of it (0×) would show work that was not counted as none.
const cpuFloor = 0.5

// addCPURatio adds x/ref to r when both are figures to compare.
func (rep *Report) addCPURatio(r *Range, x, ref float64) {
	if x < cpuFloor || ref < cpuFloor {
		rep.cpuSkipped++
		return
	}
	r.add(x / ref)
}

// Table is the report for people.
func (rep *Report) Table() string {
	var b strings.Builder
	gen := "C load generator (epoll, recvmmsg/sendmmsg), built with " + rep.Compiler
	if rep.Generator == "go" {
		gen = "Go load generator (no C compiler: epoll, a system call per datagram)"
	}
	length := fmt.Sprintf("%gs per load", rep.Seconds)
	if rep.Transactions > 0 {
		length = fmt.Sprintf("%d transactions per load (at most %gs)", rep.Transactions, rep.Seconds)
	}
	what := "UDP echo"
	if rep.Load == "icmp" {
		what = "ICMP echo (ping)"
	}
	fmt.Fprintf(&b, "%s over a veth pair, %d cores, %d round(s), interleaved; %s\n", what, rep.Cores, rep.Rounds, gen)
	mode := "dragonc run's loops spin on empty rings for its default time, then sleep"
	switch {
	case rep.BusyPoll:
		mode = "dragonc run's loops busy-poll (--busy-poll)"
	case rep.SpinUs < 0:
		mode = "dragonc run's loops sleep at once on empty rings (--spin 0)"
	case rep.SpinUs > 0:
		mode = fmt.Sprintf("dragonc run's loops spin %gµs on empty rings, then sleep", rep.SpinUs)
	}
	fmt.Fprintf(&b, "%d requests in flight over %d sockets, then 1 on one socket; %s; min–max over the rounds; %s; its XDP programs with --xdp-mode %s\n\n", rep.InFlight, rep.Sockets, length, mode, rep.XDPMode)
	bg := Range{}
	for _, v := range rep.Background {
		bg.add(v)
	}
	// On a busy host the host-wide CPU figures are noise (often below
	// zero): the table leaves them out, the JSON report keeps them.
	cpu := func(r Range, format string) string {
		if bg.Max > busyHost {
			return "busy"
		}
		if r.N > 0 { // below zero is the background's noise
			r.Min, r.Max = max(r.Min, 0), max(r.Max, 0)
		}
		return rng(r, format)
	}
	w := len("server")
	for _, s := range rep.Servers {
		w = max(w, len(s.Name))
	}
	name := func(s string) string { return fmt.Sprintf("%-*s", w, s) }
	tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ttx/s @%d\tCPU µs/tx @%d\tp50 µs @1\tp99 µs @1\tCPU µs/tx @1\tlost\town µs/tx @%d\town µs/tx @1\t\n", name("server"), rep.InFlight, rep.InFlight, rep.InFlight)
	for _, s := range rep.Servers {
		sp := s.Spread
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", name(s.Name), rng(sp.PerSecond, "%.0f"), cpu(sp.CPUMany, "%.1f"),
			rng(sp.P50, "%.1f"), rng(sp.P99, "%.1f"), cpu(sp.CPUOne, "%.1f"), sp.Lost, rng(sp.ProcMany, "%.1f"), rng(sp.ProcOne, "%.1f"))
	}
	tw.Flush()
	baseTitle := map[string]string{"c": "the C server", "kernel": "the kernel"}[rep.Base]
	for _, ref := range []struct{ name, title string }{{rep.Base, baseTitle}, {"reflector", "the XDP_TX reflector"}} {
		if !rep.has(ref.name) {
			continue
		}
		fmt.Fprintf(&b, "\nratios to %s, within each round\n", ref.title)
		tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\ttx/s @%d\tCPU @%d\tp50 @1\tp99 @1\tCPU @1\t\n", name("server"), rep.InFlight, rep.InFlight)
		for _, s := range rep.Servers {
			if s.Name == ref.name {
				continue
			}
			r := s.Ratios[ref.name]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", name(s.Name), rng(r.PerSecond, "%.2f×"), cpu(r.CPUMany, "%.2f×"),
				rng(r.P50, "%.2f×"), rng(r.P99, "%.2f×"), cpu(r.CPUOne, "%.2f×"))
		}
		tw.Flush()
	}
	b.WriteString("\n")
	for _, s := range rep.Servers {
		fmt.Fprintf(&b, "%s: %s\n", s.Name, s.Title)
		for _, m := range s.Rounds {
			if m.Error != "" {
				fmt.Fprintf(&b, "  round %d: %s\n", m.Round, m.Error)
			}
			for i, l := range []*Load{m.Many, m.One} {
				if l != nil && l.Late+l.Stray+l.Refused > 0 {
					fmt.Fprintf(&b, "  round %d, %d in flight: %d answers came after the timeout, %d stray datagrams, %d ICMP refusals\n",
						m.Round, []int{rep.InFlight, 1}[i], l.Late, l.Stray, l.Refused)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Skipped)) {
		fmt.Fprintf(&b, "%s: skipped: %s\n", name, rep.Skipped[name])
	}
	fmt.Fprintf(&b, "CPU µs/tx: the host's busy CPU time over the window (/proc/stat, softirq included) less the load generator's own and the host's background (%s CPUs), per answered transaction\n", rng(bg, "%.2f"))
	if rep.cpuSkipped > 0 {
		fmt.Fprintf(&b, "no CPU ratio is taken of or to a CPU µs/tx under %.1f (%d left out: \"-\", or a narrower range): on a veth the reflector's XDP_TX answers run inside the load generator's system calls, which the figure leaves out, so its figure is about 0 (below zero shown as 0)\n", cpuFloor, rep.cpuSkipped)
	}
	b.WriteString("own µs/tx: the CPU time of the server's own process and of this one (the Go server's, dragonc run's supervisor) per transaction; other work does not disturb it, but kernel work charged elsewhere (all of the reflector's) is not in it\n")
	if bg.Max > busyHost {
		fmt.Fprintf(&b, "warning: the host was busy with other work (up to %.2f CPUs before a round): the CPU µs/tx columns say \"busy\" (their figures, unreliable, are in --json); own µs/tx still holds\n", bg.Max)
	}
	return b.String()
}

func (rep *Report) has(name string) bool {
	for _, s := range rep.Servers {
		if s.Name == name {
			return true
		}
	}
	return false
}

// rng prints a range as "min–max", one value when they are equal to the
// shown precision, and "-" when nothing was measured.
func rng(r Range, format string) string {
	if r.N == 0 {
		return "-"
	}
	lo, hi := fmt.Sprintf(format, r.Min), fmt.Sprintf(format, r.Max)
	if lo == hi {
		return lo
	}
	return strings.TrimSuffix(lo, "×") + "–" + hi
}
