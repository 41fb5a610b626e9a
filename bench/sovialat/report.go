package sovialat

import (
	"fmt"
	"io"
	"math"
	"strings"
	"syscall"
	"text/tabwriter"
)

// WriteTable prints a result as a table, a row per size: each target's
// one-way p50 and p99 (µs) and bandwidth (Mb/s), and with two targets the
// first's figures over the second's (a latency ratio below 1 and a
// bandwidth ratio above 1 favour the first).
func (r *Result) WriteTable(w io.Writer) error {
	if len(r.Sizes) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	names := make([]string, len(r.Sizes[0].Of))
	for i, m := range r.Sizes[0].Of {
		names[i] = m.Target
	}
	head := []string{"size B"}
	for _, n := range names {
		head = append(head, n+" p50 µs", "p99 µs", "Mb/s")
	}
	pair := len(names) == 2
	if pair {
		head = append(head, fmt.Sprintf("%s/%s p50", names[0], names[1]), "p99", "Mb/s")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, s := range r.Sizes {
		row := []string{fmt.Sprint(s.Size)}
		for _, m := range s.Of {
			row = append(row, fmt.Sprintf("%.1f", m.P50us), fmt.Sprintf("%.1f", m.P99us), mbps(m.Mbps))
		}
		if pair {
			a, b := s.Of[0], s.Of[1]
			row = append(row, ratio(a.P50us, b.P50us), ratio(a.P99us, b.P99us), ratio(a.Mbps, b.Mbps))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

func mbps(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", x)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// LoadAverage is the host's load average over 1, 5 and 15 minutes
// (sysinfo(2), whose loads are fixed point with 16 fractional bits).
func LoadAverage() [3]float64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return [3]float64{}
	}
	var out [3]float64
	for i, l := range si.Loads {
		out[i] = math.Round(float64(l)/65536*100) / 100
	}
	return out
}
