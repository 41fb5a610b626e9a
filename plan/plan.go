// Package plan is the schema of plan.json, the machine-readable result of
// `dragonc embed`, with its writer and reader. docs/cli.md documents the
// schema; package embed fills a Plan in.
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"

	"github.com/dragonc/dragonc/costmodel"
)

// Plan is the machine-readable result of `dragonc embed` (plan.json). The
// fields of docs/cli.md's minimum schema come first; the rest help tools and the
// incremental strategy.
type Plan struct {
	GeneratedBy string `json:"generated_by"`
	// SchemaVersion is the package's SchemaVersion when written;
	// readers refuse a plan from a newer schema.
	SchemaVersion int `json:"schema_version"`
	// DragoncVersion is the version of the dragonc that wrote the plan
	// (set by the command line; empty in library use).
	DragoncVersion string `json:"dragonc_version,omitempty"`
	NIC            string `json:"nic"`
	Stack          string `json:"stack"`
	Strategy       string `json:"strategy"`
	// Target is "linux" when the search used only what the Linux driver
	// exposes (Driver names it), "silicon" when it used the whole PRG.
	Target    string           `json:"target"`
	Driver    string           `json:"driver,omitempty"`
	Cost      Cost             `json:"cost"`
	Queues    []Queue          `json:"queues"`
	Config    []Config         `json:"config"`
	Endpoints []Endpoint       `json:"endpoints"`
	Placement map[string]Place `json:"placement"`
	Engines   []Engine         `json:"engines,omitempty"`
	// VIA is set on a NIC with Virtual Interfaces: how each stream
	// endpoint travels and how SOVIA sends (docs/sovia.md).
	VIA      *VIA     `json:"via,omitempty"`
	Changes  *Changes `json:"changes,omitempty"`
	Warnings []string `json:"warnings"`
}

// Cost is the predicted cost next to its references.
type Cost struct {
	Function string         `json:"function"`
	Value    float64        `json:"value"`
	Kind     costmodel.Kind `json:"kind"`
	Tie      float64        `json:"tie,omitempty"`
	// References: everything in software on one queue, and Linux's default
	// of RSS over every queue with no filters.
	SoftwareOnly Ref `json:"software_only"`
	RSSOnly      Ref `json:"rss_only"`
}

// Predicted is the plan's cost as its cost function gave it.
func (c Cost) Predicted() costmodel.Cost {
	return costmodel.Cost{Kind: c.Kind, V: c.Value, Tie: c.Tie}
}

// Ref is a reference cost.
type Ref struct {
	Value float64        `json:"value"`
	Kind  costmodel.Kind `json:"kind"`
}

// Cost is the reference's cost.
func (r Ref) Cost() costmodel.Cost { return costmodel.Cost{Kind: r.Kind, V: r.Value} }

// Reference is one of the costs a plan is compared with, named for
// people.
type Reference struct {
	Name string // short: embed -o's summary line
	Long string // the report's
	Cost costmodel.Cost
}

// References are the plan's references, in the order people are shown
// them: the one table the report and embed -o's summary print.
func (c Cost) References() []Reference {
	return []Reference{
		{"software only", "everything in software", c.SoftwareOnly.Cost()},
		{"RSS only", "Linux default (RSS only)", c.RSSOnly.Cost()},
	}
}

// Queue is one receive queue in use.
type Queue struct {
	ID        int      `json:"id"`
	Core      int      `json:"core"`
	Endpoints []string `json:"endpoints"`
	Software  []string `json:"software"`
}

// Config is the value of one configuration node.
type Config struct {
	Node        string            `json:"node"`
	Kind        string            `json:"kind"`
	Entries     []Entry           `json:"entries,omitempty"`
	Choice      string            `json:"choice,omitempty"`
	Indirection []string          `json:"indirection,omitempty"`
	Placement   map[string]string `json:"placement,omitempty"`
	// A programmable stage: the LPG nodes placed there, in LPG order, and
	// those at which it drops the frames that fail them.
	Runs  []string `json:"runs,omitempty"`
	Drops []string `json:"drops,omitempty"`
}

// Entry is one table entry.
type Entry struct {
	Match    string  `json:"match"`
	Action   string  `json:"action"`
	Priority int     `json:"priority"`
	Endpoint string  `json:"endpoint,omitempty"`
	Fields   []Field `json:"fields"`
}

// Field is one field an entry matches.
type Field struct {
	Field string `json:"field"`
	Value uint64 `json:"value"`
	Mask  uint64 `json:"mask,omitempty"`
}

// Endpoint says where an endpoint's packets go and who serves them.
type Endpoint struct {
	Name     string `json:"name"`
	Queues   []int  `json:"queues"`
	Steering string `json:"steering"`
	IRQCores []int  `json:"irq_cores"`
	AppCores []int  `json:"app_cores,omitempty"`
	App      string `json:"app,omitempty"`
	Copy     string `json:"copy,omitempty"` // cpu or the copy engine
	Why      string `json:"copy_reason,omitempty"`
	// Spread says how the endpoint is spread over cores (the steering
	// and the queues and cores it reaches) when the spread rule spreads it
	// (docs/costs.md), and SpreadWhy why the rule does.
	Spread    string `json:"spread,omitempty"`
	SpreadWhy string `json:"spread_reason,omitempty"`
	// Cores says, for an endpoint whose application names cores, whether
	// the plan serves its packets on them ("honoured") or not ("not
	// honoured"), and CoresWhy how, or why not.
	Cores    string `json:"cores,omitempty"`
	CoresWhy string `json:"cores_reason,omitempty"`
}

// Place is where an LPG node runs.
type Place struct {
	Where      string `json:"where"`
	Queues     []int  `json:"queues,omitempty"`
	Engine     string `json:"engine,omitempty"`
	Descriptor bool   `json:"descriptor,omitempty"`
}

// Engine reports an engine's load.
type Engine struct {
	Name    string   `json:"name"`
	Tasks   []string `json:"tasks"`
	Percent float64  `json:"percent"`
	Memory  float64  `json:"memory_bytes,omitempty"`
}

// VIA is the VI decision of a plan: the provider, the copy threshold
// chosen from its latency table with the predicted latency per size beside
// the paper's SOVIA_HYBRID, and each stream endpoint's transport.
type VIA struct {
	Engine   string `json:"engine"`
	Provider string `json:"provider,omitempty"`
	// Basis is what decided the streams: "model", the NIC model's latency
	// table, or "calibration", the provider measured beside kernel TCP
	// (Calibration cites the measurement: provider, time, machine).
	Basis       string    `json:"basis"`
	Calibration string    `json:"calibration,omitempty"`
	VIs         int       `json:"vis"`
	VIsUsed     int       `json:"vis_used"`
	CopyMax     int       `json:"copy_max"`
	Sizes       []VIASize `json:"sizes"`
	Streams     []Stream  `json:"streams"`
}

// VIASize is one message size of the provider's table, in µs: from the
// model, predicted beside the paper's measured HYBRID and native VIA and
// TCP estimated; from a calibration, measured one way at the median
// (predicted_us, tcp_us) and the 99th percentile, with bandwidths.
type VIASize struct {
	Size      int     `json:"size"`
	Policy    string  `json:"policy"` // copy or register
	Predicted float64 `json:"predicted_us"`
	Hybrid    float64 `json:"hybrid_us,omitempty"` // measured, the paper's fixed 2 KB threshold
	Native    float64 `json:"native_us,omitempty"`
	TCP       float64 `json:"tcp_us"` // estimated from the model, or measured
	SOVIAp99  float64 `json:"sovia_p99_us,omitempty"`
	TCPp99    float64 `json:"tcp_p99_us,omitempty"`
	SOVIAMbps float64 `json:"sovia_mbps,omitempty"`
	TCPMbps   float64 `json:"tcp_mbps,omitempty"`
}

// Stream is how one TCP endpoint travels: over a VI with SOVIA's
// settings, or kernel TCP.
type Stream struct {
	Endpoint       string  `json:"endpoint"`
	Transport      string  `json:"transport"` // vi or tcp
	Carrier        string  `json:"carrier"`   // the VIA provider, or kernel TCP
	Reason         string  `json:"reason"`
	Local          string  `json:"local"`
	Remote         string  `json:"remote,omitempty"`
	Message        int     `json:"message_bytes"`
	SOVIA          float64 `json:"sovia_latency_us"`
	TCP            float64 `json:"tcp_latency_us"`
	SOVIAp99       float64 `json:"sovia_p99_us,omitempty"` // from a calibration
	TCPp99         float64 `json:"tcp_p99_us,omitempty"`
	VI             int     `json:"vi,omitempty"`
	Window         int     `json:"window,omitempty"`
	AckThreshold   int     `json:"ack_threshold,omitempty"`
	Descriptors    int     `json:"descriptors,omitempty"`
	Chunk          int     `json:"chunk_bytes,omitempty"`
	CopyMax        int     `json:"copy_max,omitempty"`
	CombineMax     int     `json:"combine_max,omitempty"`
	CombineDelayMS float64 `json:"combine_delay_ms,omitempty"`
	NoDelay        bool    `json:"nodelay,omitempty"`
}

// Changes is what the incremental strategy changed against the previous
// plan: rules to remove and to add.
type Changes struct {
	Remove []Rule   `json:"remove"`
	Add    []Rule   `json:"add"`
	Moved  []string `json:"moved"`
}

// Rule names one entry of one table.
type Rule struct {
	Node     string `json:"node"`
	Endpoint string `json:"endpoint"`
	Match    string `json:"match"`
	Action   string `json:"action"`
}

// WriteJSON writes the plan, indented, with a final newline: the bytes of
// json.MarshalIndent(p, "", "  "), by the encoder the types above declare
// (encode.go), flushed as they grow.
func (p *Plan) WriteJSON(w io.Writer) error {
	e := &encodeState{b: make([]byte, 0, 2*flushAt), w: w}
	planEncoder(e, reflect.ValueOf(p).Elem(), 0)
	e.b = append(e.b, '\n')
	e.flush()
	return e.err
}

// appendString appends s as encoding/json writes it: plain printable ASCII
// directly, anything else (quotes, backslashes, HTML characters, control
// bytes, non-ASCII) through json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// SchemaVersion is the version of plan.json's schema. It changes when
// a field changes meaning or goes away; new fields do not change it, so
// Read ignores fields it does not know (a newer dragonc's additions).
const SchemaVersion = 1

// SyntaxError is JSON text that is not a plan: malformed, a value of the
// wrong type, cut short, or followed by more data. Offset is where: the
// offending byte, the start of the value of the wrong type, or the end of
// the text; Line and Column (1-based, the column in bytes) are the same
// place.
type SyntaxError struct {
	Line, Column int
	Offset       int64
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

// noVersion is SchemaVersion before decoding, so a plan without the field
// is told apart from one that says 0.
const noVersion = math.MinInt

// Read reads a plan.json written by dragonc: one JSON object with nothing
// but white space after it, generated by dragonc, of exactly this
// SchemaVersion. Errors about the JSON text are *SyntaxError.
func Read(r io.Reader) (*Plan, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	p := Plan{SchemaVersion: noVersion}
	dec := json.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&p); err != nil {
		return nil, syntaxError(src, err)
	}
	if rest := bytes.TrimLeft(src[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, newSyntaxError(src, int64(len(src)-len(rest)), "data after the plan's JSON object; a plan.json holds one object")
	}
	if p.GeneratedBy != "dragonc" {
		return nil, fmt.Errorf("not a dragonc plan (generated_by is %q)", p.GeneratedBy)
	}
	switch v := p.SchemaVersion; {
	case v == noVersion:
		return nil, fmt.Errorf("the plan has no schema_version; this dragonc reads schema version %d", SchemaVersion)
	case v > SchemaVersion:
		return nil, fmt.Errorf("plan schema version %d is newer than this dragonc reads (%d); use a newer dragonc", v, SchemaVersion)
	case v != SchemaVersion:
		return nil, fmt.Errorf("plan schema version %d is not one dragonc writes; this dragonc reads schema version %d", v, SchemaVersion)
	}
	return &p, nil
}

// syntaxError locates an error of json.Decoder.Decode in src.
func syntaxError(src []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the offending byte.
		return newSyntaxError(src, se.Offset-1, "not a dragonc plan: "+se.Error())
	case errors.As(err, &te):
		what := "the plan"
		if te.Field != "" {
			what = te.Field
		}
		return newSyntaxError(src, valueStart(src, te.Offset), fmt.Sprintf("not a dragonc plan: %s is a JSON %s, want %s", what, te.Value, jsonKind(te.Type)))
	case errors.Is(err, io.EOF):
		return newSyntaxError(src, int64(len(src)), "not a dragonc plan: no JSON in it")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newSyntaxError(src, int64(len(src)), "not a dragonc plan: the JSON text ends early")
	}
	return fmt.Errorf("not a dragonc plan: %w", err)
}

// valueStart returns where the value whose UnmarshalTypeError has offset
// end starts: encoding/json gives the offset just past a string, number or
// literal, and just past the opening bracket of an array or object.
func valueStart(src []byte, end int64) int64 {
	i := int(min(max(end, 0), int64(len(src))))
	if i == 0 {
		return 0
	}
	switch c := src[i-1]; {
	case c == '[' || c == '{':
		return int64(i - 1)
	case c == '"':
		for j := i - 2; j >= 0; j-- {
			if src[j] == '"' && !escapedAt(src, j) {
				return int64(j)
			}
		}
	default:
		j := i
		for j > 0 && bytes.IndexByte([]byte("+-.0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"), src[j-1]) >= 0 {
			j--
		}
		return int64(j)
	}
	return int64(i)
}

// escapedAt reports whether the byte at i follows an odd number of
// backslashes.
func escapedAt(src []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && src[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// jsonKind names the JSON value a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

func newSyntaxError(src []byte, off int64, msg string) *SyntaxError {
	off = min(max(off, 0), int64(len(src)))
	before := src[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return &SyntaxError{Line: line, Column: col, Offset: off, Msg: msg}
}
