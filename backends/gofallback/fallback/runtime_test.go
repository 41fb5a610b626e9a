package fallback

import (
	"math/rand"
	"testing"
	"unsafe"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/internal/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/sim"
)

// slotOf maps each vocabulary field to its slot in zz_all.go, which
// declares every field (the generator orders slots by field name).
func slotOf(name string) int { return pred.Fields[name].ID }

// frames are every example stack's generated frames, each also cut at
// every length, and random bytes.
func frames(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	_, stacks := embedtest.Stacks(t, "../../../examples/*.lpg")
	for _, st := range stacks {
		g := sim.NewGen(st, 7)
		for i := 0; i < 300; i++ {
			f := g.Next().Data
			out = append(out, f)
			if i%10 == 0 {
				for n := 0; n < len(f); n++ {
					out = append(out, f[:n])
				}
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		b := make([]byte, rng.Intn(100))
		rng.Read(b)
		if len(b) > 14 && i%2 == 0 {
			b[12], b[13] = 0x08, 0x00 // IPv4, so the deeper decoders run
			b[14] = 0x45
		}
		out = append(out, b)
	}
	return out
}

// bits are the presence bits by the names the generator writes.
var bits = map[string]uint64{"hasFrame": hasFrame, "hasMeta": hasMeta, "hasEth": hasEth, "hasVlan": hasVlan,
	"hasEthType": hasEthType, "hasArp": hasArp, "hasOmx": hasOmx, "hasIp": hasIp, "hasIcmp": hasIcmp,
	"hasUdp": hasUdp, "hasTcp": hasTcp, "hasL4": hasL4}

// The shipped decoder must read every field exactly as dragonc's own
// decoder (internal/packet) does, on good, truncated and random frames.
func TestDecodeAgreesWithPacket(t *testing.T) {
	n := 0
	for _, b := range frames(t) {
		for _, crc := range []bool{true, false} {
			var want packet.Frame
			want.Decode(b)
			want.SetMeta(crc, 0x1234, true)
			var got fields
			got.decode(b, &Meta{CRCOK: crc, RSSHash: 0x1234, HasRSSHash: true})
			for _, name := range pred.FieldNames() {
				wv, wok := want.Field(name)
				s := slotOf(name)
				gok := got.has&bits[gofallback.PresenceBit(name)] != 0
				gv := got.v[s]
				if wok != gok || wok && wv != gv {
					t.Fatalf("frame %x: %s: shipped decoder (%d, %v), internal/packet (%d, %v)", b, name, gv, gok, wv, wok)
				}
			}
			n++
		}
	}
	t.Logf("%d frames decoded alike, every field", n)
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	b := frames(t)[0]
	if n := testing.AllocsPerRun(100, func() {
		var f fields
		f.decode(b, &Meta{})
	}); n != 0 {
		t.Errorf("decode allocates %v times per frame", n)
	}
}

// Tables: every key finds the verdict of its first entry, and keys that
// are not in the table find nothing.
func TestTables(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, size := range []int{1, 2, 3, 8, 100, 5000} {
		var entries []entry
		want := map[[2]uint64]Verdict{}
		miss := Verdict{Kind: missing}
		for i := 0; i < size; i++ {
			k := [2]uint64{uint64(rng.Intn(4 * size)), uint64(rng.Intn(3))}
			v := Verdict{Kind: Kind(i % 4), Index: uint32(i)} // drops too
			entries = append(entries, entry{k[0], k[1], v})
			if _, ok := want[k]; !ok {
				want[k] = v
			}
		}
		h := newHashed(entries)
		for k := uint64(0); k < uint64(5*size); k++ {
			for k1 := uint64(0); k1 < 4; k1++ {
				w, ok := want[[2]uint64{k, k1}]
				if !ok {
					w = miss
				}
				if got := h.find(k, k1); got != w {
					t.Fatalf("size %d: hashed.find(%d, %d) = %v, want %v", size, k, k1, got, w)
				}
			}
		}
		// Dense tables take one-word keys.
		var one []entry
		wantOne := map[uint64]Verdict{}
		lo, hi := uint64(1<<40), uint64(0)
		for _, e := range entries {
			e.k0 += 1000
			one = append(one, entry{e.k0, 0, e.v})
			if _, ok := wantOne[e.k0]; !ok {
				wantOne[e.k0] = e.v
			}
			lo, hi = min(lo, e.k0), max(hi, e.k0)
		}
		d := newDense(lo, hi, one)
		for k := uint64(0); k < uint64(5*size+2000); k++ {
			w, ok := wantOne[k]
			if !ok {
				w = miss
			}
			if got := d.find(k); got != w {
				t.Fatalf("size %d: dense.find(%d) = %v, want %v", size, k, got, w)
			}
		}
	}
}

func TestVerdictString(t *testing.T) {
	for _, c := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Deliver, 1}, "deliver dns"},
		{Verdict{Reply, 0}, "reply arp"},
		{Verdict{Sink, 0}, "sink RxL3IPv4Fragment"},
		{Verdict{Drop, 0}, "drop"},
		{Verdict{Drop, 1}, "drop RxL2EtherValidDest.false"},
		{Verdict{Deliver, 9}, "(invalid verdict)"},
		{Verdict{Kind(7), 0}, "(invalid verdict)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.v, got, c.want)
		}
	}
	if n := unsafe.Sizeof(Verdict{}); n != 8 {
		t.Errorf("a Verdict takes %d bytes, want 8", n)
	}
}
