package baseline

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/dragonc/dragonc/internal/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sim"
)

// Both baselines must deliver exactly the frames the LPG alone delivers,
// to the same endpoints, on every example stack: frames aimed at the
// endpoints, near misses, malformed and truncated frames, random bytes.
func TestBaselinesAgreeWithLPG(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	paths, stacks := embedtest.Stacks(t, "../../examples/*.lpg")
	for k, p := range paths {
		st := stacks[k]
		g, err := lpg.Derive(st)
		if err != nil {
			t.Fatal(err)
		}
		in, err := lpg.NewInterp(g)
		if err != nil {
			t.Fatal(err)
		}
		c := FromStack(st)
		hand, gp := NewHand(c), NewGopacket(c)
		gen := sim.NewGen(st, 11)
		delivered, n := 0, 0
		for i := 0; i < 20000; i++ {
			f := gen.Next()
			frames := [][]byte{f.Data}
			if i%50 == 0 {
				cut := f.Data[:rng.Intn(len(f.Data)+1)]
				frames = append(frames, cut)
			}
			for _, b := range frames {
				ref := in.Run(b, f.CRCOK)
				want := int32(-1)
				if ref.Kind == lpg.Deliver {
					for k, e := range st.Endpoints {
						if e.Name == ref.Endpoint {
							want = int32(k)
						}
					}
					delivered++
				}
				ipOK, l4OK := Checksums(b)
				if got := hand.Process(b, f.CRCOK, ipOK, l4OK); got != want {
					t.Fatalf("%s: %s: hand-written baseline delivers to %d, the LPG: %s (frame %x)", p, f.Label, got, ref, b)
				}
				if got := gp.Process(b, f.CRCOK, ipOK, l4OK); got != want {
					t.Fatalf("%s: %s: gopacket baseline delivers to %d, the LPG: %s (frame %x)", p, f.Label, got, ref, b)
				}
				n++
			}
		}
		t.Logf("%s: %d frames, %d delivered, both baselines agree with the LPG", filepath.Base(p), n, delivered)
	}
}

func TestBaselinesDoNotAllocate(t *testing.T) {
	src, _ := os.ReadFile("../../examples/web_and_dns.lpg")
	st, _ := lpg.LoadStack("web_and_dns.lpg", src)
	c := FromStack(st)
	hand, gp := NewHand(c), NewGopacket(c)
	gen := sim.NewGen(st, 1)
	var frames [][]byte
	for i := 0; i < 100; i++ {
		frames = append(frames, gen.Next().Data)
	}
	i := 0
	if n := testing.AllocsPerRun(200, func() { hand.Process(frames[i%len(frames)], true, true, true); i++ }); n != 0 {
		t.Errorf("hand-written baseline: %v allocations per frame", n)
	}
	if n := testing.AllocsPerRun(200, func() { gp.Process(frames[i%len(frames)], true, true, true); i++ }); n != 0 {
		t.Errorf("gopacket baseline: %v allocations per frame", n)
	}
}

// aimed are frames aimed at web_and_dns's endpoints, with good checksums.
func aimed(b *testing.B) (Config, [][]byte) {
	src, err := os.ReadFile("../../examples/web_and_dns.lpg")
	if err != nil {
		b.Fatal(err)
	}
	st, _ := lpg.LoadStack("web_and_dns.lpg", src)
	gen := sim.NewGen(st, 1)
	var frames [][]byte
	for i := 0; i < 2000 && len(frames) < 500; i++ {
		if f := gen.Next(); f.CRCOK && len(f.Label) > 3 && f.Label[:3] == "at " {
			frames = append(frames, f.Data)
		}
	}
	return FromStack(st), frames
}

// The baselines on the frames BenchmarkFallback (package verify) uses;
// `dragonc bench` times all variants in one process.
func BenchmarkHand(b *testing.B) {
	c, frames := aimed(b)
	h := NewHand(c)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.Process(frames[i%len(frames)], true, true, true)
	}
}

// BenchmarkGopacket repeats BenchmarkHand's loop rather than sharing it
// through a function value, which would add an indirect call to each
// frame of both baselines.
func BenchmarkGopacket(b *testing.B) {
	c, frames := aimed(b)
	g := NewGopacket(c)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.Process(frames[i%len(frames)], true, true, true)
	}
}
