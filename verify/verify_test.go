package verify

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/stackgen"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/lpg"
)

func planFor(t testing.TB, nic, stackPath string) (*embed.Result, *lpg.Stack) {
	t.Helper()
	return embedtest.PlanFile(t, nic, stackPath, costmodel.Balance{})
}

// TestEveryNICAndExample verifies every built-in NIC and example on 100,000
// frames each, the generated Go fallback included.
func TestEveryNICAndExample(t *testing.T) {
	n := 100000
	if testing.Short() {
		n = 5000
	}
	_, haveGo := exec.LookPath("go")
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, nic := range []string{"82576", "82599", "myri10g", "tigon", "dragonet-e10k", "dragonet-sf", "clan1000", "mvia"} {
		for _, ex := range examples {
			name := nic + "/" + strings.TrimSuffix(filepath.Base(ex), ".lpg")
			t.Run(name, func(t *testing.T) {
				t.Parallel() // independent: both cores when the package runs alone
				r, st := planFor(t, nic, ex)
				rep, err := Run(r, st, Options{Packets: n, Seed: 7, Fallback: haveGo == nil, Work: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Total != n {
					t.Errorf("%d packets, want %d", rep.Total, n)
				}
				noMismatches(t, rep)
			})
		}
	}
	if haveGo != nil {
		t.Log("the go command is not installed: the generated fallback was not run")
	}
}

// TestLinuxTargets verifies the plans made for the Linux drivers (the
// default of dragonc embed): fewer filters, fewer queues, the same
// treatment of every frame.
func TestLinuxTargets(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, nic := range []string{"82576", "82599", "myri10g", "tigon"} {
		for _, ex := range examples {
			t.Run(nic+"/"+strings.TrimSuffix(filepath.Base(ex), ".lpg"), func(t *testing.T) {
				t.Parallel()
				r, st := embedtest.PlanTarget(t, nic, ex, costmodel.Balance{}, embed.TargetLinux)
				rep, err := Run(r, st, Options{Packets: n, Seed: 11})
				if err != nil {
					t.Fatal(err)
				}
				noMismatches(t, rep)
			})
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestBrokenEmbeddingsAreCaught breaks embeddings on purpose: a filter
// entry steering to the wrong queue, and a check removed that the path did
// not imply. Verify must report mismatches and show the frames.
func TestBrokenEmbeddingsAreCaught(t *testing.T) {
	// Under cycles both endpoints get five-tuple entries (exact steering
	// saves the demultiplexing).
	r, st := embedtest.PlanFile(t, "82599", "../examples/dns_ntp.lpg", costmodel.Cycles{})
	// A wrong queue: the dns entry now steers to queue 2, whose software
	// was built without the dns endpoint.
	tv := r.Embedding.Config.Values["RxC5TupleFilter"]
	if tv == nil || len(tv.Entries) == 0 {
		t.Fatal("expected filter entries")
	}
	orig := tv.Entries[0].Action
	tv.Entries[0].Action = "RxQueue2"
	rep, err := Run(r, st, Options{Packets: 3000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkCaught(t, rep, "wrong queue")
	tv.Entries[0].Action = orig

	// A removed check: queue 1 no longer discards martian sources
	// (RFC 1122 §3.2.1.3).
	r, st = planFor(t, "82599", "../examples/dns_ntp.lpg")
	sw := r.Embedding.Queue(1).SW()
	src, ok := sw.Lookup("RxL3IPv4ValidSource")
	if !ok {
		t.Fatal("queue 1 does not check the source address")
	}
	bypass(sw, src)
	rep, err = Run(r, st, Options{Packets: 3000, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkCaught(t, rep, "removed check")
}

// bypass makes a boolean always take its true port.
func bypass(g *graph.Graph, n *graph.Node) {
	for _, p := range n.Ports {
		if p.Name == "true" {
			p.Pred = nil
			n.Ports = []*graph.Port{p}
			return
		}
	}
}

func checkCaught(t *testing.T, rep *Report, what string) {
	t.Helper()
	if rep.Mismatched == 0 {
		t.Fatalf("%s: no mismatch reported", what)
	}
	var out bytes.Buffer
	rep.Write(&out, 2)
	s := out.String()
	if !strings.Contains(s, "MISMATCH") || !strings.Contains(s, "frame: ") || !strings.HasSuffix(strings.TrimSpace(s), " mismatches") || strings.HasSuffix(strings.TrimSpace(s), " 0 mismatches") {
		t.Errorf("%s: report does not show the frames:\n%s", what, tail(s, 20))
	}
}

// TestCaptures: real captures verify; damaged and non-Ethernet ones are
// reported, not crashed on.
func TestCaptures(t *testing.T) {
	dir := "/usr/share/gocode/src/github.com/gopacket/gopacket/pcap"
	dns := filepath.Join(dir, "test_dns.pcap")
	if _, err := os.Stat(dns); err != nil {
		t.Skip("gopacket's captures are not installed (apt-get install golang-github-gopacket-gopacket-dev)")
	}
	r, st := planFor(t, "82599", "../testdata/captures/dns_server.lpg")
	rep, err := Run(r, st, Options{Pcaps: []string{dns}, Packets: 0})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 10 || rep.Mismatched != 0 || rep.Outcomes["deliver dns"] != 10 {
		t.Errorf("test_dns.pcap: %d packets, %d mismatches, %v", rep.Total, rep.Mismatched, rep.Outcomes)
	}
	// Loopback link type: an error naming the file.
	if _, err := Run(r, st, Options{Pcaps: []string{filepath.Join(dir, "test_loopback.pcap")}}); err == nil || !strings.Contains(err.Error(), "not Ethernet") {
		t.Errorf("loopback capture: %v", err)
	}
	// A capture cut short in its last record: the frames before are kept.
	b, _ := os.ReadFile(dns)
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	os.WriteFile(cut, b[:len(b)-20], 0o644)
	rep, err = Run(r, st, Options{Pcaps: []string{cut}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 9 || !strings.Contains(strings.Join(rep.Notes, "\n"), "damaged") {
		t.Errorf("cut capture: %d packets, notes %v", rep.Total, rep.Notes)
	}
	// Not a capture at all.
	junk := filepath.Join(t.TempDir(), "junk.pcap")
	os.WriteFile(junk, []byte("this is not a capture file at all"), 0o644)
	if _, err := Run(r, st, Options{Pcaps: []string{junk}}); err == nil {
		t.Error("junk accepted as a capture")
	}
}

// TestMixedStacks verifies realistic stacks with hundreds of endpoints:
// flows from many peers, listeners on two addresses and on every address
// sharing ports, TCP listeners whose non-SYN segments are dropped, in both
// declaration orders. Their demultiplexers are large enough for the
// generated code to use lookup tables, and the embedding to index ports.
func TestMixedStacks(t *testing.T) {
	n := 30000
	if testing.Short() {
		n = 3000
	}
	tables := map[string]bool{}
	for _, flowsFirst := range []bool{false, true} {
		src := stackgen.Mixed(300, flowsFirst)
		for _, nic := range []string{"82576", "82599", "myri10g", "tigon"} {
			for _, target := range []string{embed.TargetLinux, embed.TargetSilicon} {
				name := fmt.Sprintf("%s/%s/flows-first=%v", nic, target, flowsFirst)
				t.Run(name, func(t *testing.T) {
					r, st := embedtest.PlanSourceTarget(t, nic, "mixed.lpg", src, costmodel.Balance{}, target)
					files, err := gofallback.Generate(r, st, gofallback.Options{Source: "mixed.lpg", TestFrames: 1})
					if err != nil {
						t.Fatal(err)
					}
					for _, kind := range []string{"newDense(", "newHashed("} {
						if bytes.Contains(files["tables.go"], []byte(kind)) {
							tables[kind] = true
						}
					}
					rep, err := Run(r, st, Options{Packets: n, Seed: 5})
					if err != nil {
						t.Fatal(err)
					}
					noMismatches(t, rep)
				})
			}
		}
	}
	if !tables["newDense("] || !tables["newHashed("] {
		t.Errorf("the generated code used tables %v; the test means to run both kinds", tables)
	}
}

// noMismatches stops the test with the last mismatches of a report.
func noMismatches(t *testing.T, rep *Report) {
	t.Helper()
	if rep.Mismatched > 0 {
		var out bytes.Buffer
		rep.Write(&out, 3)
		t.Fatalf("%d mismatches:\n%s", rep.Mismatched, tail(out.String(), 40))
	}
}

// TestStreamsCaptures: a capture far larger than the frames in flight is
// verified, through the generated code, without holding its frames: the
// heap stays under a bound that holding them would exceed, and every
// frame gets its own verdict in order (every fourth is sent to another
// port and must come back "drop", the others "deliver dns").
func TestStreamsCaptures(t *testing.T) {
	const n = 200_000
	path := filepath.Join(t.TempDir(), "many.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	mac := net.HardwareAddr{0x00, 0x22, 0x19, 0xb6, 0x7e, 0x22}
	for i := range n {
		port := uint16(53)
		if i%4 == 3 {
			port = 54
		}
		frame := packet.MustBuild(packet.Spec{DstMAC: mac, Src: net.IPv4(10, 0, byte(i>>8), byte(i)), Dst: net.IPv4(95, 211, 92, 14),
			Proto: packet.ProtoUDP, SrcPort: uint16(1024 + i%50000), DstPort: port, Payload: make([]byte, 200)})
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, st := planFor(t, "82599", "../testdata/captures/dns_server.lpg")
	_, haveGo := exec.LookPath("go")
	var peak uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	opt := Options{Pcaps: []string{path}, Fallback: haveGo == nil, Work: t.TempDir(), Progress: func(_ string, _ float64) {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}}
	rep, err := Run(r, st, opt)
	if err != nil {
		t.Fatal(err)
	}
	noMismatches(t, rep)
	if rep.Total != n || rep.Outcomes["deliver dns"] != n*3/4 {
		t.Errorf("%d frames, outcomes %v", rep.Total, rep.Outcomes)
	}
	// Holding the frames would take n × 242 bytes of frame data alone
	// (48 MB); streaming holds at most inFlight of them.
	if grown := int64(peak) - int64(base); grown > 24<<20 {
		t.Errorf("the heap grew by %d MB while %d frames were verified; frames are held", grown>>20, n)
	}
	t.Logf("heap grew by at most %.1f MB for %d frames (fallback run: %v)", float64(int64(peak)-int64(base))/(1<<20), n, haveGo == nil)
}

// TestDragonetOtherModels: Dragonet's Null and Tap models and the
// "simple" E10k and Solarflare variants, read as they are, embed every
// example with no mismatch.
func TestDragonetOtherModels(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	models, _ := filepath.Glob("../testdata/unicorn/dragonet/*.unicorn")
	if len(models) != 4 {
		t.Fatalf("%d Dragonet models in testdata, want 4", len(models))
	}
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, m := range models {
		for _, ex := range examples {
			t.Run(filepath.Base(m)+"/"+filepath.Base(ex), func(t *testing.T) {
				r, st := planFor(t, m, ex)
				if len(r.Embedding.Queues) == 0 {
					t.Fatal("no queue")
				}
				rep, err := Run(r, st, Options{Packets: n, Seed: 3, Work: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				noMismatches(t, rep)
			})
		}
	}
}
