package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	drun "github.com/dragonc/dragonc/run"
)

// TestStatusLoad: status shows the load a run measured last (its
// load.json) as a table after the counters, and --json carries it.
func TestStatusLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DRAGONC_RUN_DIR", dir)
	os.Mkdir(filepath.Join(dir, "vM0"), 0o755)
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "vM0", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("state.json", drun.State{Iface: "vM0", Stack: "skew", NIC: "linux-xdp", PID: 1, Queues: []drun.QueueState{{ID: 1, Core: 1}}})
	write("report.json", drun.Report{Queues: nil})
	load := drun.Load{Seconds: 1, Basis: "rate",
		Endpoints: []drun.EndpointLoad{{Endpoint: "e0", Frames: 1990, Measured: 1990, Predicted: 2000, Queues: []int{1}, PlanQueues: []int{1}}},
		Queues:    []drun.QueueLoad{{Queue: 1, Measured: 1990, MeasuredShare: 0.72, PredictedShare: 0.714}}}
	write("load.json", load)
	code, out, errs := dragoncIn(t, "status", "vM0")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	for _, want := range []string{"load over 1.00 s, measured beside the plan's prediction from the declared rates:", "endpoint  measured fps  predicted fps", "e0          1990           2000", "1          1990           72.0%            71.4%"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	code, out, errs = dragoncIn(t, "status", "--json", "vM0")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errs)
	}
	var es []statusEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil || len(es) != 1 || es[0].Load == nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if q := es[0].Load.Queues[0]; q.MeasuredShare != 0.72 || q.PredictedShare != 0.714 {
		t.Errorf("status --json load %+v", q)
	}
}
