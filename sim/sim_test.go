package sim_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sim"
)

func run(t testing.TB, nic, stackPath, cost string) *embed.Result {
	t.Helper()
	fn, err := costmodel.ByName(cost)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := embedtest.PlanFile(t, nic, stackPath, fn)
	return r
}

// TestEmbeddingsPreserveMeaning runs generated frames through every
// built-in NIC and example under every cost function.
func TestEmbeddingsPreserveMeaning(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.lpg")
	n := 3000
	if testing.Short() {
		n = 500
	}
	for _, nic := range []string{"82576", "82599", "myri10g", "tigon", "dragonet-e10k", "dragonet-sf", "clan1000", "mvia"} {
		for _, ex := range examples {
			for _, cost := range costmodel.Names() {
				name := nic + "/" + strings.TrimSuffix(filepath.Base(ex), ".lpg") + "/" + cost
				t.Run(name, func(t *testing.T) {
					r := run(t, nic, ex, cost)
					s, err := sim.New(r.Embedding)
					if err != nil {
						t.Fatal(err)
					}
					g := sim.NewGen(stackOf(t, ex), 1)
					bad := 0
					for i := 0; i < n; i++ {
						f := g.Next()
						res := s.Run(f.Data, f.CRCOK)
						if !res.Match() {
							bad++
							if bad <= 3 {
								t.Errorf("frame %d (%s) on queue %d: embedded %s, LPG %s\n%s", i, f.Label, res.Queue, res.Embedded, res.Ref, hex.EncodeToString(f.Data))
							}
						}
					}
					if bad > 0 {
						t.Errorf("%d of %d frames treated differently", bad, n)
					}
				})
			}
		}
	}
}

func stackOf(t testing.TB, path string) *lpg.Stack {
	b, _ := os.ReadFile(path)
	st, _ := lpg.LoadStack(path, b)
	return st
}
