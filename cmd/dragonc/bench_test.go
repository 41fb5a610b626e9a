package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/stackgen"
)

// BenchmarkCLI times the compiler as a user meets it: `dragonc check` and
// `dragonc embed --json` run in-process on realistic mixed stacks
// (stackgen: listeners on two interfaces and wildcard addresses, UDP and
// TCP flows, a gold class and rates) of 1,000 to 100,000 endpoints, with
// the listeners declared first and with the flows first (the order that
// fills the 82599's Flow Director with flows). Everything the command does
// is in the figure: reading the file, parsing, lowering, deriving the LPG,
// the search, the embedding and writing the plan.
//
//	go test ./cmd/dragonc -run XXX -bench CLI -benchmem
//	go test ./cmd/dragonc -run XXX -bench 'CLI/.*/10000/' -benchmem
func BenchmarkCLI(b *testing.B) {
	dir := b.TempDir()
	for _, n := range []int{1000, 10000, 100000} {
		for _, order := range []string{"listeners-first", "flows-first"} {
			path := filepath.Join(dir, fmt.Sprintf("mixed%d-%s.lpg", n, order))
			if err := os.WriteFile(path, stackgen.Mixed(n, order == "flows-first"), 0o644); err != nil {
				b.Fatal(err)
			}
			for _, cmd := range [][]string{{"check", path}, {"embed", "--json", "82599", path}} {
				b.Run(fmt.Sprintf("%s/%d/%s", cmd[0], n, order), func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						var errs strings.Builder
						if code := run(cmd, strings.NewReader(""), io.Discard, &errs); code != 0 {
							b.Fatalf("dragonc %s: exit %d\n%s", strings.Join(cmd, " "), code, errs.String())
						}
					}
				})
			}
		}
	}
}
