package plan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
	"github.com/dragonc/dragonc/internal/stackgen"
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

// TestReadRefuses: a plan.json that dragonc did not write as it is, of
// another schema version, with data after it or not JSON at all, is
// refused, and a JSON error says where.
func TestReadRefuses(t *testing.T) {
	const ok = `{"generated_by": "dragonc", "schema_version": 1}`
	for _, c := range []struct {
		in, want string
		syntax   bool // a *plan.SyntaxError
	}{
		{`{"generated_by": "dragonc", "schema_version": -1}`, "plan schema version -1 is not one dragonc writes; this dragonc reads schema version 1", false},
		{`{"generated_by": "dragonc", "schema_version": 0}`, "plan schema version 0 is not one dragonc writes; this dragonc reads schema version 1", false},
		{`{"generated_by": "dragonc", "schema_version": 2}`, "plan schema version 2 is newer than this dragonc reads (1)", false},
		{`{"generated_by": "dragonc"}`, "no schema_version; this dragonc reads schema version 1", false},
		{ok + "\n{}", "2:1: data after the plan's JSON object", true},
		{ok + " garbage", "1:50: data after the plan's JSON object", true},
		{ok + "\n]", "2:1: data after", true},
		{"", "1:1: not a dragonc plan: no JSON in it", true},
		{"{\n  \"generated_by\": \"dragonc\",\n  \"schema_version\": 1,\n}", "4:1: not a dragonc plan: invalid character '}'", true},
		{`{"generated_by": "dragonc", "schema_version": 1`, "1:48: not a dragonc plan: the JSON text ends early", true},
		{"{\n\"schema_version\": \"1\"}", "2:19: not a dragonc plan: schema_version is a JSON string, want an integer", true},
		{`{"queues": [{"id": "x\\\"y"}]}`, "1:20: not a dragonc plan: queues.id is a JSON string, want an integer", true},
		{`{"cost": {"value": true}}`, "1:20: not a dragonc plan: cost.value is a JSON bool, want a number", true},
		{`{"queues": [{"endpoints": {}}]}`, "1:27: not a dragonc plan: queues.endpoints is a JSON object, want an array", true},
		{`[]`, "1:1: not a dragonc plan: the plan is a JSON array, want an object", true},
		{`{"cost": {"kind": "cheap"}}`, `not a dragonc plan: unknown cost kind "cheap"; a cost is ok, value, reject`, false},
	} {
		_, err := plan.Read(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.in, err, c.want)
			continue
		}
		var se *plan.SyntaxError
		if errors.As(err, &se) != c.syntax {
			t.Errorf("%q: %T, a *plan.SyntaxError is %v", c.in, err, c.syntax)
		}
	}
	// White space after the object is fine, and so are fields this dragonc
	// does not know: a newer dragonc of the same schema version adds them.
	for _, in := range []string{ok + "\n\n \t", `{"generated_by": "dragonc", "schema_version": 1, "future": {"x": [1]}}`} {
		if _, err := plan.Read(strings.NewReader(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestWriteJSONIsMarshalIndent: the plan written one element at a time is
// byte for byte json.MarshalIndent's, for every NIC (whole silicon and
// through its Linux driver) and example, and for plans with empty, nil and
// hostile fields.
func TestWriteJSONIsMarshalIndent(t *testing.T) {
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
		Endpoints: []plan.Endpoint{{}, {Name: "e<&>", Queues: []int{}, IRQCores: []int{1, 2}, AppCores: []int{0}, App: "$(rm -rf /)", Copy: "ioat", Why: "large", Spread: "rss over queues 0,1 (cores 0,1)", SpreadWhy: "its application runs on cores 0,1"}},
		Placement: map[string]plan.Place{"b\"<": {}, "a": {Where: "hardware", Queues: []int{0, 15}, Engine: "tigon0", Descriptor: true}, "": {Queues: []int{}}},
		Config: []plan.Config{{}, {Node: "n<1>", Kind: "table", Entries: []plan.Entry{
			{Match: "a & b", Action: "q\"1", Priority: -2, Endpoint: "é", Fields: []plan.Field{{Field: "ip.dst", Value: 1 << 40, Mask: 0xff}, {Field: "", Value: 0}}},
			{Fields: []plan.Field{}}, {}}, Choice: "c\u2028", Indirection: []string{"0", "<1>"},
			Placement: map[string]string{"b": "x", "a\"": "\xff", "": ""}}, {Kind: "rss", Entries: []plan.Entry{}, Indirection: []string{}, Placement: map[string]string{}}},
		Engines:  []plan.Engine{{}, {Name: "e", Tasks: []string{}, Percent: 1e-7, Memory: 1e21}, {Percent: -0.5, Memory: 123456789.25}, {Percent: 1e-6, Memory: 9.99e20}},
		Cost:     plan.Cost{Function: "f", Value: 2.5e-9, Kind: costmodel.Reject, Tie: -3e22, SoftwareOnly: plan.Ref{Value: 1e300, Kind: costmodel.OK}},
		Warnings: []string{"</script>", "\x00\x1b"},
		VIA:      &plan.VIA{Streams: []plan.Stream{{Endpoint: "<s>", Reason: "\u2028", CombineDelayMS: 0.5}}}}
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
	// What MarshalIndent refuses, WriteJSON refuses.
	for _, p := range []*plan.Plan{{Engines: []plan.Engine{{Percent: math.NaN()}}}, {Cost: plan.Cost{Value: math.Inf(1)}}, {Cost: plan.Cost{Kind: 7}}} {
		_, want := json.MarshalIndent(p, "", "  ")
		if got := p.WriteJSON(io.Discard); got == nil || want == nil || got.Error() != want.Error() {
			t.Errorf("WriteJSON: %v; MarshalIndent: %v", got, want)
		}
	}
}

// BenchmarkWriteJSON writes the plan of 10,000 mixed endpoints on the
// 82599 (about 10 MB of plan.json), with WriteJSON and, for scale, with
// json.MarshalIndent.
func BenchmarkWriteJSON(b *testing.B) {
	r, _ := embedtest.PlanSourceTarget(b, "82599", "bench.lpg", stackgen.Mixed(10000, true), costmodel.Balance{}, embed.TargetLinux)
	var out bytes.Buffer
	if err := r.Plan.WriteJSON(&out); err != nil {
		b.Fatal(err)
	}
	size := int64(out.Len())
	b.Run("WriteJSON", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Plan.WriteJSON(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("MarshalIndent", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.MarshalIndent(r.Plan, "", "  "); err != nil {
				b.Fatal(err)
			}
		}
	})
}
