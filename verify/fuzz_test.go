package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/sim"
	"github.com/dragonc/dragonc/verify/internal/fuzzfallback"
)

// The fuzz target runs a committed copy of the fallback generated for the
// 82599 and examples/web_and_dns.lpg. TestFuzzFallbackUpToDate keeps the
// copy equal to what the generator writes today (refresh with -update).
const fuzzNIC, fuzzStack = "82599", "../examples/web_and_dns.lpg"

func TestFuzzFallbackUpToDate(t *testing.T) {
	r, st := planFor(t, fuzzNIC, fuzzStack)
	files, err := gofallback.Generate(r, st, gofallback.Options{Source: "examples/web_and_dns.lpg", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fallback.go", "tables.go", "fields.go", "decode.go", "fast.go", "table.go", "verdict.go"} {
		src := append([]byte(nil), files[name]...)
		// The committed copy is a package of this module, named after its
		// directory.
		src = []byte(replaceOnce(string(src), "package fallback", "package fuzzfallback"))
		golden.Check(t, filepath.Join("internal/fuzzfallback", name), src)
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// FuzzFallback: arbitrary bytes through the configured NIC, then through
// the generated fallback and through the reference interpreter; the two
// must agree, and so must the embedded software graph.
func FuzzFallback(f *testing.F) {
	r, st := planFor(f, fuzzNIC, fuzzStack)
	s, err := sim.New(r.Embedding)
	if err != nil {
		f.Fatal(err)
	}
	bits := map[string]fuzzfallback.Flags{}
	for i, name := range gofallback.FlagOrder(r) {
		bits[name] = 1 << uint(i)
	}
	g := sim.NewGen(st, 1)
	for i := 0; i < 200; i++ {
		f.Add(g.Next().Data)
	}
	if b, err := os.ReadFile("/usr/share/gocode/src/github.com/gopacket/gopacket/pcap/test_dns.pcap"); err == nil && len(b) > 100 {
		f.Add(b[40:120])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res := s.Run(data, true)
		if !res.Match() {
			t.Fatalf("software graph %s, LPG %s on queue %d", res.Embedded, res.Ref, res.Queue)
		}
		if res.Queue < 0 {
			return
		}
		var flags fuzzfallback.Flags
		for _, rp := range s.Reported(data, true) {
			if rp[1] == "true" {
				flags |= bits[rp[0]]
			}
		}
		got := fuzzfallback.Process(res.Queue, data, fuzzfallback.Meta{CRCOK: true, Flags: flags}).String()
		if got != res.Ref.String() {
			t.Fatalf("generated code %s, LPG %s on queue %d", got, res.Ref, res.Queue)
		}
	})
}

// BenchmarkFallback times the committed generated code (82599,
// web_and_dns) on frames aimed at the endpoints, where the NIC put them;
// bench/baseline has the baselines on the same frames.
func BenchmarkFallback(b *testing.B) {
	r, st := planFor(b, fuzzNIC, fuzzStack)
	s, err := sim.New(r.Embedding)
	if err != nil {
		b.Fatal(err)
	}
	bits := map[string]fuzzfallback.Flags{}
	for i, name := range gofallback.FlagOrder(r) {
		bits[name] = 1 << uint(i)
	}
	type in struct {
		q     int
		data  []byte
		flags fuzzfallback.Flags
	}
	var frames []in
	g := sim.NewGen(st, 1)
	for i := 0; i < 2000 && len(frames) < 500; i++ {
		f := g.Next()
		if !f.CRCOK || len(f.Label) < 3 || f.Label[:3] != "at " {
			continue
		}
		res := s.Run(f.Data, true)
		if res.Queue < 0 {
			continue
		}
		var flags fuzzfallback.Flags
		for _, rp := range s.Reported(f.Data, true) {
			if rp[1] == "true" {
				flags |= bits[rp[0]]
			}
		}
		frames = append(frames, in{res.Queue, f.Data, flags})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := &frames[i%len(frames)]
		fuzzfallback.Process(f.q, f.data, fuzzfallback.Meta{CRCOK: true, Flags: f.flags})
	}
}
