package bench_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/bench"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

var line = regexp.MustCompile(`^fallback [0-9.]+ ns/frame, software-only [0-9.]+ ns/frame, gopacket baseline [0-9.]+ ns/frame, 0 allocs/frame$`)

// TestBench builds the harness around the generated code and checks the
// report's shape (not its speed: tests do not assert on time).
func TestBench(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	r, st := embedtest.Plan(t, "82599", "b.lpg", []byte(`stack b {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    cores 0..3
    endpoint dns udp listen *:53
    endpoint web tcp listen 10.0.0.1:80
}`), costmodel.Balance{})
	rep, err := bench.Run(r, st, bench.Frames(st, 50), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !line.MatchString(rep.Line()) {
		t.Errorf("last line %q", rep.Line())
	}
	for _, f := range []bench.Figures{rep.Small, rep.Mixed} {
		if rep.Frames == 0 || f.Fallback <= 0 || f.Software <= 0 || f.Gopacket <= 0 || f.Hand <= 0 || f.HandMaps <= 0 {
			t.Errorf("report %+v", rep)
		}
	}
	t.Logf("\n%s", rep.Table())
}

// The harness is built with dragonc's own gopacket.
func TestGopacketVersion(t *testing.T) {
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/gopacket/gopacket " + bench.GopacketVersion + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("go.mod does not require %q", want)
	}
}
