package plan_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/plan"
)

func TestSchemaVersion(t *testing.T) {
	if _, err := plan.Read(strings.NewReader(`{"generated_by": "dragonc", "schema_version": 2}`)); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("a newer schema was read: %v", err)
	}
	p, err := plan.Read(strings.NewReader(`{"generated_by": "dragonc", "schema_version": 1}`))
	if err != nil || p.SchemaVersion != plan.SchemaVersion {
		t.Errorf("schema 1: %v, %v", p, err)
	}
	for _, bad := range []string{``, `[]`, `{"generated_by": "other"}`, `{"generated_by": "dragonc", "schema_version": "1"}`} {
		if _, err := plan.Read(strings.NewReader(bad)); err == nil {
			t.Errorf("%q was read as a plan", bad)
		}
	}
}

// TestWriteJSONIsMarshalIndent: the plan written one element at a time is
// byte for byte json.MarshalIndent's, for every NIC (whole silicon and
// through its Linux driver) and example, and for plans with empty, nil and
// hostile fields.
func TestWriteJSONIsMarshalIndent(t *testing.T) {
	if n := reflect.TypeFor[plan.Plan]().NumField(); n != 17 {
		t.Fatalf("Plan has %d fields; WriteJSON lists 17: add the new one there", n)
	}
	var plans []*plan.Plan
	examples, _ := filepath.Glob("../examples/*.lpg")
	for _, nic := range nics.Names() {
		if m := embedtest.Model(t, nic); len(m.Queues) == 0 {
			continue // a host engine: nothing to embed on
		}
		for _, target := range []string{embed.TargetSilicon, embed.TargetLinux} {
			if d, _ := nics.DriverFor(embedtest.Model(t, nic)); target == embed.TargetLinux && d == nil {
				continue
			}
			for _, ex := range examples {
				r, _ := embedtest.PlanTarget(t, nic, ex, costmodel.Balance{}, target)
				plans = append(plans, r.Plan)
			}
		}
	}
	hostile := &plan.Plan{GeneratedBy: "dragonc", DragoncVersion: "v<1>&\u2028", Driver: "ixgbe", Changes: &plan.Changes{},
		Queues:    []plan.Queue{{ID: -1, Core: 7, Software: []string{}}, {ID: 3, Endpoints: []string{"a\"b", "c\\d", "é", "\xff"}, Software: []string{"x\u2029y", "\t"}}},
		Endpoints: []plan.Endpoint{{}, {Name: "e<&>", Queues: []int{}, IRQCores: []int{1, 2}, AppCores: []int{0}, App: "$(rm -rf /)", Copy: "ioat", Why: "large"}},
		Placement: map[string]plan.Place{"b\"<": {}, "a": {Where: "hardware", Queues: []int{0, 15}, Engine: "tigon0", Descriptor: true}, "": {Queues: []int{}}},
		Config: []plan.Config{{}, {Node: "n<1>", Kind: "table", Entries: []plan.Entry{
			{Match: "a & b", Action: "q\"1", Priority: -2, Endpoint: "é", Fields: []plan.Field{{Field: "ip.dst", Value: 1 << 40, Mask: 0xff}, {Field: "", Value: 0}}},
			{Fields: []plan.Field{}}, {}}, Choice: "c\u2028", Indirection: []string{"0", "<1>"},
			Placement: map[string]string{"b": "x", "a\"": "\xff", "": ""}}, {Kind: "rss", Entries: []plan.Entry{}, Indirection: []string{}, Placement: map[string]string{}}},
		Engines: []plan.Engine{{}}, Warnings: []string{"</script>", "\x00\x1b"},
		VIA: &plan.VIA{Streams: []plan.Stream{{Endpoint: "<s>", Reason: "\u2028", CombineDelayMS: 0.5}}}}
	plans = append(plans, &plan.Plan{}, hostile)
	for i, p := range plans {
		want, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := p.WriteJSON(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), append(want, '\n')) {
			t.Errorf("plan %d (%s on %s):\n%s", i, p.Stack, p.NIC, cmp.Diff(string(want)+"\n", got.String()))
		}
		back, err := plan.Read(&got)
		if p.GeneratedBy != "" && (err != nil || !reflect.DeepEqual(back, p)) && i < len(plans)-1 {
			t.Errorf("plan %d (%s on %s) does not read back: %v", i, p.Stack, p.NIC, err)
		}
	}
	t.Logf("%d plans", len(plans))
}
