package run

import (
	"testing"
	"time"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
)

// BenchmarkReloadFileOffline is the part of a file reload that needs no
// namespace (BenchmarkReloadEndpoint with DRAGONC_RELOAD_FILE=1): the
// 10,000-endpoint stack file, with one endpoint more or less each time,
// parsed and checked (lpg.Loader, as dragonc run's reload reads it) and
// applied to the plan's session (the short path's search). It reports
// the p50 and p99 of each.
func BenchmarkReloadFileOffline(b *testing.B) {
	r, _ := embedTest(b, bigStack(10000, false))
	ss, err := dembed.NewSession(r)
	if err != nil {
		b.Fatal(err)
	}
	srcs := [][]byte{[]byte(bigStack(10000, true)), []byte(bigStack(10000, false))}
	var ld lpg.Loader
	ld.Load("big.lpg", srcs[1])
	var loading, applying []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t := time.Now()
		st, diags := ld.Load("big.lpg", srcs[i%2])
		if st == nil {
			b.Fatal(diags)
		}
		loading = append(loading, time.Since(t))
		t = time.Now()
		if _, err := ss.Apply(st); err != nil {
			b.Fatal(err)
		}
		applying = append(applying, time.Since(t))
	}
	b.StopTimer()
	pct := percentileMS
	b.ReportMetric(pct(loading, 0.5), "load-p50-ms")
	b.ReportMetric(pct(loading, 0.99), "load-p99-ms")
	b.ReportMetric(pct(applying, 0.5), "apply-p50-ms")
	b.ReportMetric(pct(applying, 0.99), "apply-p99-ms")
}
