package run

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/run/dataplane"
)

// TestHelperLinesLongReport: a report of 24 queues with 1,000 outcomes
// each (over a megabyte on one line) is read whole, and the lines after
// it too (bufio.Scanner's default 64 KiB limit stopped the reading, and
// with it the helper).
func TestHelperLinesLongReport(t *testing.T) {
	var r dataplane.Report
	for q := range 24 {
		qc := dataplane.QueueCounts{Queue: q}
		for i := range 1000 {
			qc.Outcomes = append(qc.Outcomes, dataplane.Outcome{Name: fmt.Sprintf("deliver endpoint-%04d", i), Count: uint64(i)})
		}
		r.Queues = append(r.Queues, qc)
	}
	b, _ := json.Marshal(r)
	if len(b) < 1<<20 {
		t.Fatalf("the report is only %d bytes", len(b))
	}
	in := "ready: 16 queues\nreport " + string(b) + "\nnote: after\n"
	var got []string
	if err := helperLines(strings.NewReader(in), func(l string) { got = append(got, l) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != "note: after" || len(got[1]) != len(b)+len("report ") {
		t.Fatalf("read %d lines", len(got))
	}
}
