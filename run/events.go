package run

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dragonc/dragonc/run/dataplane"
)

// Event is one line of `dragonc run --json` (Options.JSON): NDJSON on
// Stdout, an object per event and per counter report (docs/cli.md).
type Event struct {
	// Event is the kind: "note" (what run found or decided), "refused"
	// (a step of a hardware plan the driver refused, done by the eBPF
	// stage instead), "fallback" (AF_XDP could not be used), "metrics"
	// (where the Prometheus endpoint is), "serving" (every queue
	// receives), "report" (the counters), "reloaded", "reload-refused"
	// and "reload-failed" (a reload applied, refused, or failed while
	// applied), "link" (the interface changed state), "stopped".
	Event      string `json:"event"`
	Message    string `json:"message,omitempty"`
	Stack      string `json:"stack,omitempty"`
	Iface      string `json:"iface,omitempty"`
	Socket     string `json:"socket,omitempty"`      // "xdp" or "packet"
	PlanQueues int    `json:"plan_queues,omitempty"` // serving: the receive loops, one per plan queue
	Error      string `json:"error,omitempty"`       // stopped: why, if not by a signal
	Link       string `json:"link,omitempty"`        // link: "up", "down", "no-carrier" or "gone"
	*dataplane.Report
	// Load is, in a report, the load measured since the previous report
	// (or since the data plane began serving) beside the plan's
	// prediction.
	Load *Load `json:"load,omitempty"`
}

// output is where a run says what it does: notes on Stderr as
// "dragonc run: ..." lines, counters on Stdout as text; or, with
// Options.JSON, every note and report also an Event on Stdout.
type output struct {
	mu  sync.Mutex
	opt *Options
	enc *json.Encoder
}

func newOutput(opt *Options) *output {
	o := &output{opt: opt}
	if opt.JSON {
		o.enc = json.NewEncoder(opt.Stdout)
	}
	return o
}

// emit writes one event (JSON mode only).
func (o *output) emit(e Event) {
	if o.enc == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.enc.Encode(e)
}

// note says something of kind ("note", "refused", "fallback") on
// Stderr, and as an event.
func (o *output) note(kind, format string, args ...any) {
	o.say(Event{Event: kind, Message: fmt.Sprintf(format, args...)})
}

// linkNote says that the interface changed state: a note on Stderr and
// a link event.
func (o *output) linkNote(iface string, s linkState, msg string) {
	o.say(Event{Event: "link", Iface: iface, Link: string(s), Message: msg})
}

// say writes e's message on Stderr as a note and emits e.
func (o *output) say(e Event) {
	o.mu.Lock()
	fmt.Fprintf(o.opt.Stderr, "dragonc run: %s\n", e.Message)
	o.mu.Unlock()
	o.emit(e)
}

// report hands a reading of the counters on, with the load measured
// since the previous one (nil if none was measured): text or an event on
// Stdout, and to Options.OnReport.
func (o *output) report(r dataplane.Report, l *Load) {
	if o.opt.OnReport != nil {
		o.opt.OnReport(r)
	}
	if o.opt.FinalOnly && !r.Final {
		return
	}
	if o.enc != nil {
		o.emit(Event{Event: "report", Report: &r, Load: l})
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The load first: what follows "final:" stays the counters alone.
	if l != nil {
		l.WriteText(o.opt.Stdout)
	}
	r.WriteText(o.opt.Stdout)
}
