package streams

// Latency is one row of a VIA provider's latency table (the SOVIA paper's
// Tables 2 and 3): one-way latency in microseconds of a message of Size
// bytes over native VIA, over SOVIA registering every user buffer (REG),
// copying every message into a pre-registered buffer (COPY), and the
// paper's hybrid (copy up to 2 KB, register above).
type Latency struct {
	Size                      int
	Native, Reg, Copy, Hybrid float64
}

// HybridCopyMax is the paper's fixed threshold: SOVIA_HYBRID copies
// messages up to 2 KB and registers larger ones (§4.1).
const HybridCopyMax = 2 << 10

// Predict is the latency a copy threshold gives at each row of a table:
// the COPY column up to copyMax, the REG column above.
func Predict(rows []Latency, copyMax int) []float64 {
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = r.Reg
		if r.Size <= copyMax {
			out[i] = r.Copy
		}
	}
	return out
}

// CopyThreshold chooses the copy threshold from a provider's measured
// costs instead of the paper's fixed 2 KB: of 0 and the table's sizes,
// the one whose predicted latencies exceed the cheaper of copying and
// registering least, summed as fractions over the sizes (the smaller
// threshold on a tie).
func CopyThreshold(rows []Latency) int {
	best, bestLoss := 0, -1.0
	for _, t := range append([]int{0}, sizes(rows)...) {
		loss := 0.0
		for i, p := range Predict(rows, t) {
			cheap := min(rows[i].Reg, rows[i].Copy)
			loss += (p - cheap) / cheap
		}
		if bestLoss < 0 || loss < bestLoss-1e-12 {
			best, bestLoss = t, loss
		}
	}
	return best
}

func sizes(rows []Latency) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = r.Size
	}
	return out
}
