package embed

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/streams"
)

func readCalibration(t *testing.T, path string) *streams.Calibration {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := streams.ReadCalibration(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCalibrationDecides: with a calibration, the cluster node's streams
// follow the measurements, not the M-VIA table (which puts repl, locks
// and bulk on VIs): only locks (64 B, where the calibration's VI is
// faster at the median and the 99th percentile) goes over a VI; repl
// (32 KiB) and bulk (4 KiB), where it measured slower, stay on kernel
// TCP; the plan says the basis, cites the calibration, names each
// stream's carrier and the numbers compared. Golden report and plan.
func TestCalibrationDecides(t *testing.T) {
	src, err := os.ReadFile("../examples/cluster_db.lpg")
	if err != nil {
		t.Fatal(err)
	}
	model, err := Run(stackInput(t, "mvia", string(src), "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	in := stackInput(t, "mvia", string(src), "balance", StrategyDefault)
	in.Calibration = readCalibration(t, "../testdata/embed/calibrated/fastsmall.json")
	r, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	carried := func(r *Result) map[string]string {
		m := map[string]string{}
		for _, s := range r.Plan.VIA.Streams {
			m[s.Endpoint] = s.Transport + " " + s.Carrier
		}
		return m
	}
	if m := carried(model); m["repl"] != "vi M-VIA 1.0" || m["bulk"] != "vi M-VIA 1.0" || m["locks"] != "vi M-VIA 1.0" {
		t.Fatalf("the M-VIA model no longer puts repl, locks and bulk on VIs: %v; the test needs it", m)
	}
	want := map[string]string{"repl": "tcp kernel TCP", "locks": "vi test VI", "bulk": "tcp kernel TCP", "backup": "tcp kernel TCP", "sql": "tcp kernel TCP"}
	if m := carried(r); len(m) != len(want) {
		t.Errorf("streams %v", m)
	} else {
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s: %s, want %s", k, m[k], v)
			}
		}
	}
	v := r.Plan.VIA
	if v.Basis != "calibration" || !strings.Contains(v.Calibration, "test VI, measured 2026-11-26T00:00:00Z on a test machine") || v.VIsUsed != 1 || len(v.Sizes) != 3 || v.Sizes[2].TCPp99 != 110 {
		t.Errorf("plan.via: %+v", v)
	}
	for _, s := range v.Streams {
		if s.Endpoint == "repl" && !strings.Contains(s.Reason, "measured slower than kernel TCP (p50 200.0 us against TCP's 25.0 us, p99 900.0 us against 110.0 us)") {
			t.Errorf("repl's reason: %s", s.Reason)
		}
	}
	var rep, pj bytes.Buffer
	r.WriteReport(&rep)
	r.Plan.WriteJSON(&pj)
	golden.Check(t, filepath.Join("../testdata/embed/calibrated", "cluster_db.report.golden"), rep.Bytes())
	golden.Check(t, filepath.Join("../testdata/embed/calibrated", "cluster_db.plan.json"), pj.Bytes())

	// A calibration decides the streams of a model with VIs only.
	in = stackInput(t, "82599", string(src), "balance", StrategyDefault)
	in.Calibration = readCalibration(t, "../testdata/embed/calibrated/fastsmall.json")
	if _, err := Run(in); err == nil || !strings.Contains(err.Error(), "82599 has none") {
		t.Errorf("a calibration on the 82599: %v", err)
	}
}

// TestSoftwareVICalibration: with the checked-in calibration of the
// software VI, no stream of any example goes over a VI where that
// calibration measured the software VI slower than kernel TCP.
func TestSoftwareVICalibration(t *testing.T) {
	c, err := streams.SoftwareVI()
	if err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, nic := range []string{"mvia", "clan1000"} {
		for _, ex := range examples {
			src, _ := os.ReadFile(ex)
			in := stackInput(t, nic, string(src), "balance", StrategyDefault)
			in.Calibration = c
			r, err := Run(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range r.Plan.VIA.Streams {
				m, ok := c.At(s.Message)
				if s.Transport == "vi" && (!ok || m.VIP50 >= m.TCPP50 || m.VIP99 >= m.TCPP99) {
					t.Errorf("%s on %s: %s over a VI at %d B, where the software VI measured %+v", ex, nic, s.Endpoint, s.Message, m)
				}
			}
		}
	}
}
