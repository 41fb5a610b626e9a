package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/streams"
)

// TestCalibrate runs dragonc calibrate briefly: it writes a calibration
// embed reads, and leaves no namespace behind.
func TestCalibrate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("calibrate needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("calibrate needs ip")
	}
	out := filepath.Join(t.TempDir(), "cal.json")
	code, stdout, errs := dragonc(t, "calibrate", "--size", "4,1024", "--rounds", "2", "--exchanges", "10", "--stream-bytes", "65536", "--note", "a test", "--client-spin", "50us", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := streams.ReadCalibration(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sizes) != 2 || c.Sizes[1].Size != 1024 || c.Note != "a test" || !strings.Contains(c.Method, "2 rounds") || !strings.Contains(c.Method, "dragonc run serving") ||
		!strings.Contains(c.Method, "reads look at the socket for up to 50µs first") || !strings.Contains(c.Method, "here p50 the ") ||
		!strings.Contains(c.Method, "both clients look for the echo for up to 50µs") || !strings.Contains(stdout, "vi/tcp p50") {
		t.Errorf("calibration %+v\nstdout:\n%s", c, stdout)
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		// This process's: another test binary may calibrate meanwhile.
		if strings.HasPrefix(e.Name(), fmt.Sprintf("ca-dragonc-calibrate-%d-", os.Getpid())) {
			t.Errorf("namespace %s is left behind", e.Name())
		}
	}
	if code, _, errs := dragonc(t, "embed", "--calibration", out, "mvia", "examples/cluster_db.lpg"); code != 0 {
		t.Errorf("embed with the calibration: exit %d: %s", code, errs)
	}
}

// TestCalibrateSelfCheck: --self-check measures one provider against
// itself and prints the table alone; it refuses what would write a
// calibration, and a provider it does not know.
func TestCalibrateSelfCheck(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--self-check", "udp"}, `--self-check: no provider "udp" to check against itself (vi or tcp)`},
		{[]string{"--self-check", "vi", "-o", filepath.Join(t.TempDir(), "x.json")}, "writes no calibration"},
		{[]string{"--self-check", "tcp", "--note", "n"}, "writes no calibration"},
		{[]string{"--client-spin", "-1s"}, "--client-spin -1s: it must be at least 0"},
	} {
		code, out, errs := dragonc(t, append([]string{"calibrate"}, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("calibrate %v: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, errs, exitUsage, c.want)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("calibrate needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("calibrate needs ip")
	}
	code, stdout, errs := dragonc(t, "calibrate", "--self-check", "vi", "--server", "sovia", "--size", "4", "--rounds", "2", "--exchanges", "10", "--stream-bytes", "8192")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		SelfCheck string `json:"self_check"`
		Server    string
		sovialat.Result
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
	}
	if rep.SelfCheck != "vi" || rep.Server != "sovia" || len(rep.Sizes) != 1 || rep.Sizes[0].Size != 4 || len(rep.Sizes[0].Of) != 2 ||
		rep.Sizes[0].Of[0].Target != "vi" || rep.Sizes[0].Of[1].Target != "vi-again" {
		t.Errorf("stdout:\n%s", stdout)
	}
	if !strings.Contains(errs, "vi against itself") || !strings.Contains(errs, "vi/vi-again p50") {
		t.Errorf("stderr has no table:\n%s", errs)
	}
}
