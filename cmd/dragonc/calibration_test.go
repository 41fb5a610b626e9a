package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/dragonc/dragonc/plan"
)

// TestEmbedCalibration: embed --calibration decides the streams by the
// file (the test calibration's VI wins only below 256 B: locks alone on a
// VI), or by the checked-in one (builtin); a damaged file or a model
// without VIs is an error that says so.
func TestEmbedCalibration(t *testing.T) {
	code, out, errs := dragonc(t, "embed", "--json", "--calibration", "testdata/embed/calibrated/fastsmall.json", "mvia", "examples/cluster_db.lpg")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var pl struct {
		VIA struct {
			Basis, Calibration string
			VIsUsed            int `json:"vis_used"`
			Streams            []struct{ Endpoint, Transport, Carrier string }
		}
	}
	if err := json.Unmarshal([]byte(out), &pl); err != nil {
		t.Fatal(err)
	}
	if pl.VIA.Basis != "calibration" || pl.VIA.VIsUsed != 1 || !strings.HasPrefix(pl.VIA.Calibration, "test VI, measured") {
		t.Errorf("via: %+v", pl.VIA)
	}
	code, out, _ = dragonc(t, "embed", "--calibration", "builtin", "mvia", "examples/cluster_db.lpg")
	if code != 0 || !strings.Contains(out, "decided by the calibration of software VI") {
		t.Errorf("--calibration builtin: exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"format": "dragonc-calibration 9"}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"embed", "--calibration", bad, "mvia", "examples/cluster_db.lpg"}, `this dragonc reads "dragonc-calibration 1"`},
		{[]string{"embed", "--calibration", filepath.Join(dir, "none.json"), "mvia", "examples/cluster_db.lpg"}, "none.json"},
		{[]string{"embed", "--calibration", "builtin", "82599", "examples/cluster_db.lpg"}, "82599 has none"},
	} {
		if code, _, errs := dragonc(t, c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 1 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestServingPlansUseSoftwareVI: run and build plan with the software
// VI's checked-in calibration unless told otherwise (dragonc run serves
// every VI on the software VI), and a model without VIs ignores that
// default.
func TestServingPlansUseSoftwareVI(t *testing.T) {
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var errs bytes.Buffer
	e := &env{stdout: &bytes.Buffer{}, stderr: &errs}
	plan := func(nic string) (basis string, ok bool) {
		var f embedFlags
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		f.register(fs)
		f.servesOnSoftwareVI(fs)
		f.calibrationImplicit = true
		r, _, ok := f.plan(e, nic, "examples/cluster_db.lpg")
		if !ok || r.Plan.VIA == nil {
			return "", ok
		}
		return r.Plan.VIA.Basis, ok
	}
	if basis, ok := plan("mvia"); !ok || basis != "calibration" {
		t.Errorf("run's plan on mvia: basis %q, ok %v: %s", basis, ok, errs.String())
	}
	if basis, ok := plan("linux-xdp"); !ok || basis != "" {
		t.Errorf("run's plan on linux-xdp: basis %q, ok %v: %s", basis, ok, errs.String())
	}
}

// TestCalibrationNote: run names the streams the calibration kept off
// VIs (the test calibration keeps repl and bulk, and locks goes over a
// VI), and says nothing for a plan the model's table decided.
func TestCalibrationNote(t *testing.T) {
	planOf := func(args ...string) *plan.Plan {
		code, out, errs := dragonc(t, append([]string{"embed", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		p, err := plan.Read(strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	n := calibrationNote(planOf("--calibration", "testdata/embed/calibrated/fastsmall.json", "mvia", "examples/cluster_db.lpg").VIA)
	if !strings.HasPrefix(n, "repl, bulk stay on kernel TCP by the calibration of test VI, measured") {
		t.Errorf("note %q", n)
	}
	if n := calibrationNote(planOf("mvia", "examples/cluster_db.lpg").VIA); n != "" {
		t.Errorf("a plan of the model's table: note %q", n)
	}
}
