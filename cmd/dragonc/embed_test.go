package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	drun "github.com/dragonc/dragonc/run"
)

// TestRunPlanIsEmbeds: run.Plan, the Go API's plan, is the plan
// `dragonc embed linux-xdp` gives with its defaults, byte for byte in
// plan.json (web_and_dns's endpoints declare message sizes, so the
// default copy engine shows in their copies).
func TestRunPlanIsEmbeds(t *testing.T) {
	for _, ex := range []string{"examples/web_and_dns.lpg", "examples/cluster_db.lpg", "examples/dns_ntp.lpg"} {
		code, out, errs := dragonc(t, "embed", "--json", drun.Model, ex)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", ex, code, errs)
		}
		src, err := os.ReadFile("../../" + ex)
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := drun.Plan(ex, src)
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		r.Plan.DragoncVersion = version() // the CLI stamps its version
		var b bytes.Buffer
		r.Plan.WriteJSON(&b)
		if d := cmp.Diff(out, b.String()); d != "" {
			t.Errorf("%s: run.Plan's plan.json differs from dragonc embed %s's (-embed +run.Plan):\n%s", ex, drun.Model, d)
		}
		if ex == "examples/web_and_dns.lpg" && !strings.Contains(out, `"IOAT"`) {
			t.Errorf("%s: no copy on the I/OAT engine in the plan; the test no longer sees the copy engine default", ex)
		}
	}
}
