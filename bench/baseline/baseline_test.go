package baseline

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/dragonc/dragonc/embed/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sim"
)

// Every baseline must deliver exactly the frames the LPG alone delivers,
// to the same endpoints, on every example stack and on testdata's, which
// has the corners the examples lack: frames aimed at the endpoints, near
// misses, malformed and truncated frames, random bytes. The careful
// baseline also runs with maps in place of its port arrays and short
// lists, the tables it takes for wide spans of ports and for ports with
// many flows or addresses.
func TestBaselinesAgreeWithLPG(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	paths, stacks := allStacks(t)
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
		careful, carefulMaps := NewCareful(c), newCareful(c, 0, 0)
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
				if got := careful.Process(b, f.CRCOK, ipOK, l4OK); got != want {
					t.Fatalf("%s: %s: careful baseline delivers to %d, the LPG: %s (frame %x)", p, f.Label, got, ref, b)
				}
				if got := carefulMaps.Process(b, f.CRCOK, ipOK, l4OK); got != want {
					t.Fatalf("%s: %s: careful baseline with maps delivers to %d, the LPG: %s (frame %x)", p, f.Label, got, ref, b)
				}
				n++
			}
		}
		t.Logf("%s: %d frames, %d delivered, every baseline agrees with the LPG", filepath.Base(p), n, delivered)
	}
}

// The careful baseline makes Hand's checks: on the same frames it must
// deliver as Hand does whatever the NIC's verdicts, which lets through
// the frames whose defects a bad checksum would otherwise hide (lengths,
// fragments). Each frame is also tried with another source port (flows
// are keyed on it), with a priority tag, which sends the frames of the
// common layout through the general decoder, and padded to 1,515 bytes,
// one more than an untagged frame of MTU 1500, to us and to broadcast.
func TestCarefulAgreesWithHand(t *testing.T) {
	paths, stacks := allStacks(t)
	for k, p := range paths {
		c := FromStack(stacks[k])
		hand := NewHand(c)
		careful, carefulMaps := NewCareful(c), newCareful(c, 0, 0)
		gen := sim.NewGen(stacks[k], 5)
		for i := 0; i < 20000; i++ {
			f := gen.Next()
			frames := [][]byte{f.Data}
			if len(f.Data) > 35 {
				b := append([]byte(nil), f.Data...)
				b[35]++ // the source port's low byte, untagged
				frames = append(frames, b)
			}
			if len(f.Data) >= 12 {
				b := append(append(append([]byte(nil), f.Data[:12]...), 0x81, 0x00, 0x00, 0x00), f.Data[12:]...)
				long := append(append([]byte(nil), f.Data...), make([]byte, max(0, 1515-len(f.Data)))...)
				bcast := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, long[6:]...)
				frames = append(frames, b, long, bcast)
			}
			for _, b := range frames {
				for v := 0; v < 8; v++ {
					crcOK, ipOK, l4OK := v&1 != 0, v&2 != 0, v&4 != 0
					want := hand.Process(b, crcOK, ipOK, l4OK)
					if got := careful.Process(b, crcOK, ipOK, l4OK); got != want {
						t.Fatalf("%s: %s: careful baseline delivers to %d, Hand to %d (verdicts %v %v %v, frame %x)", p, f.Label, got, want, crcOK, ipOK, l4OK, b)
					}
					if got := carefulMaps.Process(b, crcOK, ipOK, l4OK); got != want {
						t.Fatalf("%s: %s: careful baseline with maps delivers to %d, Hand to %d (verdicts %v %v %v, frame %x)", p, f.Label, got, want, crcOK, ipOK, l4OK, b)
					}
				}
			}
		}
	}
}

// allStacks are the example stacks and those of testdata.
func allStacks(t *testing.T) ([]string, []*lpg.Stack) {
	paths, stacks := embedtest.Stacks(t, "../../examples/*.lpg")
	more, moreStacks := embedtest.Stacks(t, "testdata/*.lpg")
	return append(paths, more...), append(stacks, moreStacks...)
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
	careful := NewCareful(c)
	if n := testing.AllocsPerRun(200, func() { careful.Process(frames[i%len(frames)], true, true, true); i++ }); n != 0 {
		t.Errorf("careful baseline: %v allocations per frame", n)
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

// BenchmarkCareful repeats BenchmarkHand's loop (see BenchmarkGopacket).
func BenchmarkCareful(b *testing.B) {
	c, frames := aimed(b)
	h := NewCareful(c)
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
