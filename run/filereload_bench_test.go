package run

import (
	"testing"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
)

// BenchmarkReloadFileOffline is the part of a file reload that needs no
// namespace (BenchmarkReloadEndpoint with DRAGONC_RELOAD_FILE=1): the
// 10,000-endpoint stack file, with one endpoint more or less each time,
// parsed and checked (lpg.Loader, as dragonc run's reload reads it) and
// applied to the plan's session (the short path's search).
func BenchmarkReloadFileOffline(b *testing.B) {
	r, _ := embedTest(b, bigStack(10000, false))
	ss, err := dembed.NewSession(r)
	if err != nil {
		b.Fatal(err)
	}
	srcs := [][]byte{[]byte(bigStack(10000, true)), []byte(bigStack(10000, false))}
	var ld lpg.Loader
	ld.Load("big.lpg", srcs[1])
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		st, diags := ld.Load("big.lpg", srcs[i%2])
		if st == nil {
			b.Fatal(diags)
		}
		if _, err := ss.Apply(st); err != nil {
			b.Fatal(err)
		}
	}
}
