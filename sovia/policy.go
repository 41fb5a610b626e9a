package sovia

// Latency is one row of the SOVIA paper's latency tables: one-way latency
// in microseconds of a message of Size bytes over native VIA, over SOVIA
// registering every user buffer (REG), copying every message into a
// pre-registered buffer (COPY), and the paper's hybrid (copy up to 2 KB,
// register above).
type Latency struct {
	Size                      int
	Native, Reg, Copy, Hybrid float64
}

// MVIA is Table 2 of the SOVIA paper: M-VIA 1.0, VIA in software over
// Fast Ethernet.
var MVIA = []Latency{
	{4, 43.3, 57.6, 45.1, 45.0},
	{8, 43.4, 57.9, 45.4, 45.4},
	{16, 43.4, 58.0, 45.4, 45.4},
	{32, 44.2, 58.8, 46.0, 45.9},
	{64, 49.1, 63.9, 51.2, 51.2},
	{128, 60.3, 75.5, 62.9, 62.9},
	{256, 81.5, 97.5, 84.7, 84.7},
	{512, 123.1, 140.7, 127.7, 127.8},
	{1 << 10, 206.3, 227.9, 213.5, 213.9},
	{2 << 10, 330.3, 354.5, 339.3, 339.6},
	{4 << 10, 506.8, 539.3, 526.3, 539.4},
	{8 << 10, 859.0, 912.7, 915.0, 912.4},
	{16 << 10, 1545.3, 1632.5, 1660.7, 1632.2},
	{32 << 10, 2910.2, 3053.7, 3135.6, 3053.4},
}

// CLAN is Table 3 of the SOVIA paper: Giganet cLAN1000, VIA in hardware.
var CLAN = []Latency{
	{4, 8.3, 12.3, 10.5, 10.5},
	{8, 8.3, 12.6, 10.6, 10.7},
	{16, 8.4, 12.6, 10.8, 10.8},
	{32, 10.1, 14.3, 12.5, 12.5},
	{64, 10.1, 14.5, 12.8, 12.8},
	{128, 10.5, 15.5, 14.0, 14.0},
	{256, 11.9, 17.3, 16.0, 16.0},
	{512, 14.9, 20.5, 19.7, 19.7},
	{1 << 10, 20.2, 26.4, 26.5, 26.5},
	{2 << 10, 30.4, 39.5, 40.7, 40.8},
	{4 << 10, 50.5, 65.3, 74.2, 65.0},
	{8 << 10, 90.6, 123.4, 160.1, 123.0},
	{16 << 10, 169.9, 240.7, 307.7, 240.3},
	{32 << 10, 329.0, 461.1, 603.2, 460.6},
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

// ParamsFor is the paper's settings with the copy threshold chosen from a
// provider's latency table (CopyThreshold) instead of the fixed 2 KB.
func ParamsFor(rows []Latency) Params {
	p := PaperParams()
	p.CopyMax = CopyThreshold(rows)
	return p
}
