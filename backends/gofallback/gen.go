// Package gofallback generates the software remainder of an embedding as a
// standalone Go module: per-queue entry points of decision code over the
// frame bytes (not an interpreter), a dispatcher Process(queue, frame,
// meta) Verdict, the endpoint names, and a test that runs frames through
// it. Demultiplexers with many ports become lookup tables, and queues whose
// software graphs are the same share one function, so the module stays
// small at any number of endpoints. The module needs nothing but the
// standard library; its output is gofmt-clean and allocation-free per
// frame. The decoder, the tables and the verdict type are real Go files
// of this repository (internal/fallback, whose decoder dragonc's own tools
// use too), compiled and tested there and shipped into every generated
// module unchanged.
package gofallback

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/format"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embedding"
	"github.com/dragonc/dragonc/internal/fallback"
	"github.com/dragonc/dragonc/internal/graph"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sim"
)

// Options controls generation.
type Options struct {
	Source     string // the stack file, named in the header
	Module     string // module path; default derived from the stack name
	TestFrames int    // frames in the generated test (default 200)
	Seed       int64
	// Swappable generates the module dragonc run builds around a plan
	// whose endpoints change while it serves: every run of ports that
	// deliver to an endpoint is a table, however short, keyed on all
	// the fields its ports fix, and each such table is replaced whole
	// by SetTable (swap.go) while frames are looked up in it. The
	// endpoints' constants go into endpoints.go. Nothing else changes;
	// `dragonc embed` never sets it.
	Swappable bool
	// NoTest leaves the generated test out (and the frames it needs,
	// which take the NIC and the LPG through every test frame).
	NoTest bool
}

// A Table is a swappable table (Options.Swappable) as data: a reload
// hands its entries to the running program's SetTable.
type Table struct {
	Name    string
	Entries []TableEntry
	// Queue is the ID of the queue whose code looks the table up, Node
	// the demultiplexer whose ports it holds, Keys the fields its key
	// packs (PackKey), in order: what a reload needs to add an entry
	// without generating the code again.
	Queue int      `json:",omitempty"`
	Node  string   `json:",omitempty"`
	Keys  []string `json:",omitempty"`
}

// PackKey is the key of a table keyed on fields (Table.Keys) for the
// values vals gives each field (a port that fixes a field to a set of
// values has an entry for each combination), as the generated code packs
// it: nil when the fields do not fit two words or a field has no value.
func PackKey(fields []string, vals func(field string) []uint64) [][2]uint64 {
	slots := packKey(fields)
	if slots == nil && len(fields) > 0 {
		return nil
	}
	combos := [][2]uint64{{}}
	for _, ks := range slots {
		vs := vals(ks.field)
		if len(vs) == 0 {
			return nil
		}
		var nc [][2]uint64
		for _, c := range combos {
			for _, x := range vs {
				c2 := c
				c2[ks.word] |= x << uint(ks.shift)
				nc = append(nc, c2)
			}
		}
		combos = nc
	}
	return combos
}

// TableEntry is one key of a table and its verdict: Kind is a
// fallback.Kind; a Deliver names its endpoint (Index is the endpoint's
// position in the stack), the others' Index is that of their Replies,
// Sinks or DropSites entry.
type TableEntry struct {
	K0, K1   uint64
	Kind     uint8
	Index    uint32
	Endpoint string `json:",omitempty"`
}

// Swappable is the module of a plan generated with Options.Swappable:
// its files, its swappable tables, and its shape, a digest of the code
// with the swappable tables' entries and the endpoints' names left out.
// Two plans of the same shape run on the same compiled program: the
// second's tables can replace the first's.
type Swappable struct {
	Files  map[string][]byte
	Tables []Table
	Shape  string
}

// GenerateSwappable generates the module of r with Options.Swappable set.
func GenerateSwappable(r *dembed.Result, st *lpg.Stack, opt Options) (*Swappable, error) {
	opt.Swappable = true
	g, files, err := generate(r, st, opt)
	if err != nil {
		return nil, err
	}
	return &Swappable{Files: files, Tables: g.swapTables, Shape: shapeOf(files)}, nil
}

// shapeOf digests a swappable module without what a reload replaces: the
// endpoints (endpoints.go) and the entries of the swappable tables.
func shapeOf(files map[string][]byte) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if name == "endpoints.go" || strings.HasSuffix(name, "/endpoints.go") {
			continue
		}
		b := files[name]
		if name == "tables.go" || strings.HasSuffix(name, "/tables.go") {
			b = stripSwapped(b)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// stripSwapped leaves the entry lines of the swappable tables out of
// tables.go.
func stripSwapped(b []byte) []byte {
	var out []byte
	in := false
	for _, l := range strings.SplitAfter(string(b), "\n") {
		switch {
		case strings.Contains(l, "= newSwapped("):
			in = true
		case in && strings.HasPrefix(l, "})"):
			in = false
		case in:
			continue
		}
		out = append(out, l...)
	}
	return out
}

// Generate returns the files of the fallback module, by name.
func Generate(r *dembed.Result, st *lpg.Stack, opt Options) (map[string][]byte, error) {
	_, files, err := generate(r, st, opt)
	return files, err
}

func generate(r *dembed.Result, st *lpg.Stack, opt Options) (*gen, map[string][]byte, error) {
	if opt.TestFrames == 0 {
		opt.TestFrames = 200
	}
	g := &gen{r: r, st: st, opt: opt, flags: map[string]int{}, epIdent: map[string]string{}, epIndex: map[string]int{},
		tableNames: map[string]string{}, addrs: map[string]uint64{},
		used: map[string]bool{}, swap: opt.Swappable}
	if opt.Module == "" {
		opt.Module = "dragonc.generated/" + shortName(strings.ToLower(lpg.Sanitize(r.Plan.Stack)))
		g.opt.Module = opt.Module
	}
	// The test's frames go through the NIC and the LPG while the code is
	// generated.
	var cases []testCase
	var casesErr error
	casesDone := make(chan struct{})
	go func() {
		defer close(casesDone)
		if opt.NoTest {
			return
		}
		defer func() {
			if p := recover(); p != nil {
				casesErr = fmt.Errorf("dragonc: internal error: %v", p)
			}
		}()
		cases, casesErr = testCases(r, st, g.opt)
	}()
	main, err := g.mainFile()
	<-casesDone
	if err != nil {
		return nil, nil, err
	}
	if casesErr != nil {
		return nil, nil, casesErr
	}
	files := map[string][]byte{
		"go.mod":      []byte(fmt.Sprintf("module %s\n\ngo 1.21\n", opt.Module)),
		"fallback.go": main,
		"fields.go":   g.format(g.header() + "\npackage fallback\n\n" + FieldDecls(g.used)),
	}
	if g.tables.Len() > 0 {
		// The tables are written in gofmt's layout (one entry per line,
		// no alignment) and skip the formatter, which would spend seconds
		// on a hundred thousand entries; a test checks the layout.
		files["tables.go"] = []byte(g.header() + "\npackage fallback\n\n" + strings.TrimSuffix(g.tables.String(), "\n"))
	}
	runtime, err := fs.ReadDir(fallback.Source, ".")
	if err != nil {
		return nil, nil, err
	}
	for _, e := range runtime {
		b, err := fallback.Source.ReadFile(e.Name())
		if err != nil {
			return nil, nil, err
		}
		files[e.Name()] = append([]byte(g.header()+"\n"), b...)
	}
	if g.swap {
		files["swap.go"] = append([]byte(g.header()+"\n"), fallback.SwapSource...)
		// Written in gofmt's layout, one declaration a line, and not
		// formatted: a reload generates it for every change, and the
		// formatter would spend most of that time on 10,000 endpoints.
		files["endpoints.go"] = []byte(g.header() + "\npackage fallback\n\n" + g.endpointLines())
	}
	if !opt.NoTest {
		test, err := g.testFile(cases)
		if err != nil {
			return nil, nil, err
		}
		files["fallback_test.go"] = test
	}
	if g.err != nil {
		return nil, nil, g.err
	}
	return g, files, nil
}

// AddTo generates the fallback as package dir of a harness module named
// module, the program verify, bench and run build around the generated
// code: its files go into files under dir/, without its go.mod and its
// test.
func AddTo(files map[string][]byte, module, dir, source string, r *dembed.Result, st *lpg.Stack) error {
	fb, err := Generate(r, st, Options{Source: source, Module: module + "/" + dir, TestFrames: 1})
	if err != nil {
		return err
	}
	for name, data := range fb {
		if name != "go.mod" && name != "fallback_test.go" {
			files[dir+"/"+name] = data
		}
	}
	return nil
}

// AddSwappableTo is AddTo with Options.Swappable, without the generated
// test: the module dragonc run builds, whose endpoint tables a reload
// replaces. It returns the tables and the shape (GenerateSwappable).
func AddSwappableTo(files map[string][]byte, module, dir, source string, r *dembed.Result, st *lpg.Stack) (*Swappable, error) {
	sw, err := GenerateSwappable(r, st, Options{Source: source, Module: module + "/" + dir, NoTest: true})
	if err != nil {
		return nil, err
	}
	for name, data := range sw.Files {
		if name != "go.mod" {
			files[dir+"/"+name] = data
		}
	}
	return sw, nil
}

// WriteTree writes files, named by slash-separated paths, under dir,
// making the directories they need: a generated module, or one with a
// harness around it (verify, bench).
func WriteTree(dir string, files map[string][]byte) error {
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

type gen struct {
	r       *dembed.Result
	st      *lpg.Stack
	opt     Options
	flags   map[string]int // descriptor-reported node -> bit
	flagOrd []string
	epIdent map[string]string // endpoint name -> Go identifier
	epIndex map[string]int
	// The names behind verdict indexes, in order of first use.
	replies, sinks numbering[string]
	drops          numbering[[2]string]
	// lookup tables of all queues, declared once each
	tables     strings.Builder
	tableNames map[string]string // entries -> table
	curSW      *graph.Graph
	curQueue   int // the ID of the queue whose code is generated
	// Per queue, for both copies of its checks: each node's runs and
	// each table run's declared table (by node and first port).
	runs    map[int][]run
	tableOf map[[2]int]tableDecl
	used    map[string]bool // the fields the queues' software reads
	// The current queue's predecessors and the sizes of its nodes' code
	// (emitAlts).
	preds [][]int
	sizes map[int]int
	// helperKnown are the headers known present where a helper of one
	// caller is called, by node.
	helperKnown map[int]map[string]bool
	addrs       map[string]uint64 // the address constants the code names
	// fast: the code being written is a queue's fixed-layout copy, which
	// reads fields with the methods of fast (internal/fallback/fast.go)
	// instead of from the decoded fields f.
	fast     bool
	fastUsed bool // the fixed-layout code read x
	// swap: Options.Swappable; swapTables are the swappable tables
	// declared, in order.
	swap       bool
	swapTables []Table
	err        error
}

// appendRead appends the read of a field's value.
func (g *gen) appendRead(buf []byte, field string) []byte {
	if g.fast {
		g.fastUsed = true
		buf = append(buf, "x."...)
		buf = append(buf, fieldSuffix(field)...)
		return append(buf, "()"...)
	}
	buf = append(buf, "f.v["...)
	buf = append(buf, fieldConst(field)...)
	return append(buf, ']')
}

// appendHas appends the test of a field's presence.
func (g *gen) appendHas(buf []byte, field string) []byte {
	if g.fast {
		g.fastUsed = true
		buf = append(buf, "x."...)
		buf = append(buf, PresenceBit(field)...)
		return append(buf, "()"...)
	}
	buf = append(buf, "f.has&"...)
	buf = append(buf, PresenceBit(field)...)
	return append(buf, " != 0"...)
}

func (g *gen) header() string {
	return fmt.Sprintf("// Code generated by dragonc from %s. DO NOT EDIT.\n", oneLine(g.opt.Source))
}

func (g *gen) format(src string) []byte {
	b, err := format.Source([]byte(src))
	if err != nil {
		if g.err == nil {
			g.err = fmt.Errorf("dragonc: internal error: generated Go does not format: %w", err)
		}
		return []byte(src)
	}
	return b
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

// maxName bounds the module's last path element, which the go command
// turns into file names (the test binary): a long stack name is cut and
// given a hash of the whole so that names stay distinct.
const maxName = 64

func shortName(s string) string {
	if len(s) <= maxName {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return s[:maxName-9] + "_" + hex.EncodeToString(sum[:4])
}

// goIdent turns a name into an exported Go identifier fragment.
func goIdent(s string) string {
	id := lpg.Sanitize(s)
	if id == "" {
		return "X"
	}
	return strings.ToUpper(id[:1]) + id[1:]
}

// fieldConst is the generated constant naming a field's slot.
func fieldConst(name string) string {
	if c, ok := fieldConsts[name]; ok {
		return c
	}
	return "f" + fieldSuffix(name)
}

// presenceBits names the decoder's presence bit of each vocabulary field that has
// a presence group.
var presenceBits = func() map[string]string {
	m := map[string]string{}
	for f := range pred.Fields {
		switch g := group(f); g {
		case "ethtype":
			m[f] = "hasEthType"
		case "l4", "ip", "icmp", "udp", "tcp", "arp", "omx", "eth", "vlan", "frame", "meta":
			m[f] = "has" + strings.ToUpper(g[:1]) + g[1:]
		}
	}
	return m
}()

// fieldConsts caches fieldConst for the vocabulary.
var fieldConsts = func() map[string]string {
	m := map[string]string{}
	for f := range pred.Fields {
		m[f] = "f" + fieldSuffix(f)
	}
	return m
}()

func fieldSuffix(name string) string {
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '_' })
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

// layerNeeds are the switches of the decoder that skip whole headers, and
// the layers (pred.Layers) whose fields each one serves.
var layerNeeds = []struct {
	name   string
	serves func(layer string) bool
}{
	{"Arp", sharing("arp")},
	{"Omx", sharing("omx")},
	{"Ip", func(l string) bool { return pred.Within(l, "ip") }},
	{"L4", func(l string) bool { return l != "ip" && pred.Within(l, "ip") }}, // a transport header
	{"Icmp", sharing("icmp")},
	{"Udp", sharing("udp")},
	{"Tcp", sharing("tcp")},
}

// sharing returns whether a layer is decoded from the same bytes as
// layer x: x itself or a sibling whose conditions x's can meet (l4 is
// decoded from the UDP and from the TCP header).
func sharing(x string) func(string) bool {
	lx, _ := pred.Layer(x)
	return func(l string) bool {
		ll, _ := pred.Layer(l)
		if l == x {
			return true
		}
		if ll.Parent != lx.Parent || len(ll.When) == 0 {
			return false
		}
		for _, a := range ll.When {
			for _, b := range lx.When {
				if a.Field == b.Field && !slices.ContainsFunc(a.Vals, func(v uint64) bool { return slices.Contains(b.Vals, v) }) {
					return false
				}
			}
		}
		return true
	}
}

// FieldDecls declares, for the shipped decoder, the slot of each field the
// checks read, a need constant per field and per header, and the fields
// type with one slot per read field. Fields no check reads get slot 0 and
// are never stored.
func FieldDecls(used map[string]bool) string {
	var b strings.Builder
	slot := 0
	b.WriteString("// Slots of the decoded fields in fields.v.\nconst (\n")
	for _, name := range pred.FieldNames() {
		if used[name] {
			fmt.Fprintf(&b, "\t%s = %d // %s\n", fieldConst(name), slot, name)
			slot++
		} else {
			fmt.Fprintf(&b, "\t%s = 0 // %s: not read\n", fieldConst(name), name)
		}
	}
	b.WriteString(")\n\n// Which fields and headers the checks read; the compiler drops the\n// decoding of the others.\nconst (\n")
	for _, name := range pred.FieldNames() {
		fmt.Fprintf(&b, "\tneed%s = %v\n", fieldSuffix(name), used[name])
	}
	for _, l := range layerNeeds {
		need := false
		for name := range used {
			if used[name] && l.serves(pred.Fields[name].Layer) {
				need = true
			}
		}
		fmt.Fprintf(&b, "\tneed%s = %v\n", l.name, need)
	}
	if slot == 0 {
		slot = 1
	}
	fmt.Fprintf(&b, ")\n\n// fields holds the decoded fields of one frame; a field is present when\n// the bit of its slot is set in has.\ntype fields struct {\n\thas uint64\n\tv   [%d]uint64\n}\n", slot)
	return b.String()
}

// qPrefix stands for a queue's function name while its code is generated,
// so that queues whose code comes out the same can share one function.
const qPrefix = "qQQ"

// hole marks, in a queue's code as it is generated, a place that may be
// all that tells it from another queue's: an endpoint it delivers to
// (the ranks of an MPI job, each on a queue of its own), and the
// parameters and arguments that carry such differences. share fills the
// holes in. (A queue's tables stay its own: reading them through a
// pointer cost the fixed-layout path of web_and_dns on the 82599 5-10%.)
func hole(kind, value string) string {
	return "\x01" + kind + "\x02" + value + "\x03"
}

// holes splits code into its text and holes: text[i] precedes hole i,
// and text has one more element than kinds and values.
func holes(code string) (text, kinds, values []string) {
	for {
		i := strings.IndexByte(code, '\x01')
		if i < 0 {
			return append(text, code), kinds, values
		}
		j := strings.IndexByte(code[i:], '\x02') + i
		k := strings.IndexByte(code[i:], '\x03') + i
		text = append(text, code[:i])
		kinds = append(kinds, code[i+1:j])
		values = append(values, code[j+1:k])
		code = code[k+1:]
	}
}

// share writes the queues' functions: queues whose code is the same but
// for its holes share one function, and what fills the holes differently
// from queue to queue (endpoints) becomes data, one struct per queue that
// the shared function reads. It returns the code and the
// cases of Process: the queues and the call that serves them.
func (g *gen) share(qids []int, bodies []string) (string, [][2]string) {
	type member struct {
		q      int
		values []string
	}
	type group struct {
		text, kinds []string
		members     []member
	}
	var groups []*group
	byShape := map[string]*group{}
	for i, body := range bodies {
		text, kinds, values := holes(body)
		shape := strings.Join(text, "\x01") + "\x02" + strings.Join(kinds, "\x02")
		gr, ok := byShape[shape]
		if !ok {
			gr = &group{text: text, kinds: kinds}
			byShape[shape] = gr
			groups = append(groups, gr)
		}
		gr.members = append(gr.members, member{qids[i], values})
	}
	var code strings.Builder
	var cases [][2]string
	for _, gr := range groups {
		name := fmt.Sprintf("queue%d", gr.members[0].q)
		// The holes whose filling differs between the members become
		// fields; holes filled alike in every member share a field.
		field := make([]string, len(gr.kinds))
		var fields []string // in order
		var fieldHole []int // a hole of each field
		byFill := map[string]string{}
		for k, kind := range gr.kinds {
			if kind == "params" || kind == "args" {
				continue
			}
			var fill []string
			for _, m := range gr.members {
				fill = append(fill, m.values[k])
			}
			if slices.Equal(fill, slices.Repeat(fill[:1], len(fill))) {
				continue
			}
			key := kind + "\x00" + strings.Join(fill, "\x00")
			if f, ok := byFill[key]; ok {
				field[k] = f
				continue
			}
			field[k] = fmt.Sprintf("endpoint%d", len(fields))
			byFill[key] = field[k]
			fields = append(fields, field[k])
			fieldHole = append(fieldHole, k)
		}
		data := name + "Data"
		params, args := "", ""
		if len(fields) > 0 {
			params, args = ", d *"+data, ", d"
			fmt.Fprintf(&code, "// %s is what the code of %s reads that differs between the\n// queues it serves, one value per queue.\ntype %s struct {\n", data, name, data)
			for i, f := range fields {
				fmt.Fprintf(&code, "\t%s Verdict // %s\n", f, strings.Split(gr.members[0].values[fieldHole[i]], "\x00")[2])
			}
			code.WriteString("}\n\n")
			fmt.Fprintf(&code, "// The data of each queue %s serves.\nvar (\n", name)
			for _, m := range gr.members {
				fmt.Fprintf(&code, "\tdataQueue%d = %s{", m.q, data)
				for i, f := range fields {
					if i > 0 {
						code.WriteString(", ")
					}
					fmt.Fprintf(&code, "%s: %s", f, fillValue(gr.kinds[fieldHole[i]], m.values[fieldHole[i]]))
				}
				code.WriteString("}\n")
			}
			code.WriteString(")\n\n")
		}
		var body strings.Builder
		first := gr.members[0].values
		for k, t := range gr.text {
			body.WriteString(t)
			if k == len(gr.kinds) {
				break
			}
			switch kind := gr.kinds[k]; {
			case kind == "params":
				body.WriteString(params)
			case kind == "args":
				body.WriteString(args)
			case field[k] != "":
				ind, _, _ := strings.Cut(first[k], "\x00")
				fmt.Fprintf(&body, "%s// the queue's endpoint\n%sreturn d.%s", ind, ind, field[k])
			default:
				body.WriteString(fill(kind, first[k]))
			}
		}
		code.WriteString(strings.ReplaceAll(body.String(), qPrefix, name))
		if len(fields) > 0 {
			for _, m := range gr.members {
				cases = append(cases, [2]string{strconv.Itoa(m.q), fmt.Sprintf("%s(frame, &meta, &dataQueue%d)", name, m.q)})
			}
			continue
		}
		// One case for the queues of a function: consecutive queues
		// compile to one range check, so the dispatch does not depend
		// on which of them a frame came from.
		var qs []string
		for _, m := range gr.members {
			qs = append(qs, strconv.Itoa(m.q))
		}
		cases = append(cases, [2]string{strings.Join(qs, ", "), name + "(frame, &meta)"})
	}
	return code.String(), cases
}

// fill is the code a hole stands for where it is filled in place.
func fill(kind, value string) string {
	if kind != "deliver" {
		return value
	}
	parts := strings.Split(value, "\x00") // indent, verdict, node, outcome
	return fmt.Sprintf("%s// %s\n%sreturn %s // %s", parts[0], parts[2], parts[0], parts[1], parts[3])
}

// fillValue is the value of a field that fills a hole, for a queue's data.
func fillValue(kind, value string) string {
	if kind != "deliver" {
		return value
	}
	return strings.Split(value, "\x00")[1]
}

func (g *gen) mainFile() ([]byte, error) {
	pl := g.r.Plan
	for i, e := range g.st.Endpoints {
		g.epIndex[e.Name] = i
	}
	// The descriptor flags are numbered as the queues' graphs are visited
	// (queueFunc), in FlagOrder's order.
	g.endpointIdents()
	// Queue code first: it decides which names the verdicts refer to.
	g.dropSite("", "")
	var qids []int
	var bodies []string
	for _, q := range g.r.Embedding.Queues {
		qids = append(qids, q.ID)
		body, err := g.queueFunc(q)
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
	}
	code, cases := g.share(qids, bodies)

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\n", g.header())
	w("// Package fallback is the software part of stack %s embedded on %s:\n", oneLine(pl.Stack), oneLine(pl.NIC))
	w("// the work of the Logical Protocol Graph that the NIC does not do, one\n// entry point per receive queue. Call Process for every received frame.\npackage fallback\n\n")
	if !g.swap {
		w("%s", g.endpointDecls())
	}
	w("// Replies name the answers a Reply verdict asks for.\nvar Replies = [...]string{")
	for i, r := range g.replies.list {
		if i > 0 {
			w(", ")
		}
		w("%s", strconv.Quote(r))
	}
	w("}\n\n// Sinks name the LPG nodes a Sink verdict means.\nvar Sinks = [...]string{")
	for i, s := range g.sinks.list {
		if i > 0 {
			w(", ")
		}
		w("%s", strconv.Quote(s))
	}
	w("}\n\n// DropSites are where Drop verdicts were decided.\nvar DropSites = [...]DropSite{\n")
	for _, d := range g.drops.list {
		w("\t{%s, %s},\n", strconv.Quote(d[0]), strconv.Quote(d[1]))
	}
	w("}\n\n")
	if len(g.flagOrd) > 0 {
		w("// Descriptor flags: set when the NIC's check of that name passed.\nconst (\n")
		seen := map[string]bool{}
		for i, f := range g.flagOrd {
			id := "Flag" + goIdent(f)
			for n := 2; seen[id]; n++ {
				id = fmt.Sprintf("Flag%s%d", goIdent(f), n)
			}
			seen[id] = true
			w("\t%s Flags = 1 << %d\n", id, i)
		}
		w(")\n\n")
	}
	w("%s", g.addrConsts())
	w("// Queues lists the receive queues this stack serves.\nvar Queues = [...]int{")
	for i, q := range qids {
		if i > 0 {
			w(", ")
		}
		w("%d", q)
	}
	w("}\n\n")
	w("// Process runs the software part of queue's pipeline on one frame.\n// It does not allocate and accepts any bytes.\n")
	w("func Process(queue int, frame []byte, meta Meta) Verdict {\n\tswitch queue {\n")
	for _, c := range cases {
		w("\tcase %s:\n\t\treturn %s\n", c[0], c[1])
	}
	w("\t}\n\treturn Verdict{Kind: Drop, Index: %d} // no such queue\n}\n\n", g.dropSite("(no such queue)", ""))
	b.WriteString(code)
	return g.format(b.String()), nil
}

// endpointDecls declares the endpoints: their type, constants and names.
func (g *gen) endpointDecls() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("// Endpoint identifies a declared endpoint.\ntype Endpoint uint32\n\n")
	if len(g.st.Endpoints) > 0 {
		w("// The stack's endpoints.\nconst (\n")
		for i, e := range g.st.Endpoints {
			w("\t%s Endpoint = %d // %s\n", g.epIdent[e.Name], i, strconv.Quote(e.Name))
		}
		w(")\n\n")
	}
	w("// EndpointNames are the endpoints' names as declared.\nvar EndpointNames = [...]string{\n")
	for _, e := range g.st.Endpoints {
		w("\t%s,\n", strconv.Quote(e.Name))
	}
	w("}\n\n")
	return b.String()
}

// endpointLines declares the endpoints as endpointDecls does, in
// gofmt's layout without alignment: a constant per declaration.
func (g *gen) endpointLines() string {
	var b strings.Builder
	b.WriteString("// Endpoint identifies a declared endpoint.\ntype Endpoint uint32\n\n// The stack's endpoints.\n")
	for i, e := range g.st.Endpoints {
		fmt.Fprintf(&b, "const %s Endpoint = %d\n", g.epIdent[e.Name], i)
	}
	b.WriteString("\n// EndpointNames are the endpoints' names as declared.\nvar EndpointNames = [...]string{\n")
	for _, e := range g.st.Endpoints {
		fmt.Fprintf(&b, "\t%s,\n", strconv.Quote(e.Name))
	}
	b.WriteString("}\n")
	return b.String()
}

// endpointIdents names the endpoint constants, none of which can spell
// another generated name.
func (g *gen) endpointIdents() {
	used := map[string]bool{"EndpointNames": true, "Endpoint": true}
	for _, e := range g.st.Endpoints {
		id := "Endpoint" + goIdent(e.Ident)
		for n := 2; used[id]; n++ {
			id = fmt.Sprintf("Endpoint%s%d", goIdent(e.Ident), n)
		}
		used[id] = true
		g.epIdent[e.Name] = id
	}
}

// numbering gives each distinct key a number, in order of first use.
type numbering[K comparable] struct {
	list []K
	num  map[K]int
}

func (n *numbering[K]) of(k K) int {
	if i, ok := n.num[k]; ok {
		return i
	}
	if n.num == nil {
		n.num = map[K]int{}
	}
	n.num[k] = len(n.list)
	n.list = append(n.list, k)
	return len(n.list) - 1
}

func (g *gen) reply(name string) int { return g.replies.of(name) }

func (g *gen) sink(name string) int { return g.sinks.of(name) }

func (g *gen) dropSite(node, port string) int { return g.drops.of([2]string{node, port}) }

// dropCode is the statement that drops a frame at node.port.
func (g *gen) dropCode(node, port string) string {
	return fmt.Sprintf("return Verdict{Kind: Drop, Index: %d} // %s", g.dropSite(node, port), oneLine(node+"."+port))
}

// queueFunc returns one queue's entry point, its helpers and its tables,
// with qPrefix standing for its name.
func (g *gen) queueFunc(q *embedding.QueueEmbedding) (string, error) {
	sw := q.BuildSW() // one queue's graph at a time: at 100,000 endpoints each is tens of MB
	g.readFields(sw)
	g.flagOrd = appendFlags(g.flagOrd, g.flags, sw)
	g.curSW, g.curQueue = sw, q.ID
	g.runs, g.tableOf = map[int][]run{}, map[[2]int]tableDecl{}
	var b strings.Builder
	if g.swap {
		// Its endpoints come and go: the count would change the code.
		fmt.Fprintf(&b, "// %s runs the software graph of a queue.\n", qPrefix)
	} else {
		fmt.Fprintf(&b, "// %s runs the software graph of a queue (%d nodes).\n", qPrefix, len(sw.Nodes))
	}
	fmt.Fprintf(&b, "func %s(frame []byte, m *Meta%s) Verdict {\n", qPrefix, hole("params", ""))
	if len(sw.Nodes) == 0 {
		b.WriteString("\treturn Verdict{Kind: Drop}\n}\n\n")
		return b.String(), nil
	}
	// The checks twice: for frames of the fixed layout, reading fields
	// where that layout puts them, then for any frame, from the decoder.
	// The decoded copy is written first, so that verdict indexes are
	// numbered as the whole graph meets them.
	preds := sw.Preds()
	g.preds, g.sizes = preds, map[int]int{}
	var helpers [2]strings.Builder
	var decoded, fast strings.Builder
	if err := g.emitQueue(&decoded, &helpers[0], sw, preds); err != nil {
		return "", err
	}
	g.fast, g.fastUsed = true, false
	err := g.emitQueue(&fast, &helpers[1], sw, preds)
	used := g.fastUsed
	g.fast = false
	if err != nil {
		return "", err
	}
	// A frame of another layout is decoded first; the fixed layout is
	// read where it is. Both copies are in the entry point, so that
	// neither costs a call.
	b.WriteString("\tif !isFast(frame) {\n\t\tvar f fields\n\t\tf.decode(frame, m)\n")
	b.WriteString(decoded.String())
	b.WriteString("\t}\n\tx := fast{frame, m}\n")
	if !used {
		b.WriteString("\t_ = x\n")
	}
	b.WriteString(fast.String())
	b.WriteString("}\n\n")
	b.WriteString(helpers[0].String())
	b.WriteString(helpers[1].String())
	return b.String(), nil
}

// helperName is the function name of a node with several predecessors,
// before its number.
func (g *gen) helperName() string {
	if g.fast {
		return qPrefix + "FastNode"
	}
	return qPrefix + "Node"
}

// emitQueue writes the checks of a queue's software graph from its
// source node into b, and the functions of the nodes that several
// predecessors reach into helpers.
func (g *gen) emitQueue(b, helpers *strings.Builder, sw *graph.Graph, preds [][]int) error {
	var todo []int
	g.helperKnown = map[int]map[string]bool{}
	depth := 1
	if !g.fast {
		depth = 2 // inside if !isFast(frame)
	}
	// The decoder always sets the frame's own fields.
	if err := g.emitAt(b, sw, 0, preds, &todo, depth, false, map[string]bool{"frame": true}); err != nil {
		return err
	}
	done := map[int]bool{}
	for len(todo) > 0 {
		id := todo[0]
		todo = todo[1:]
		if done[id] {
			continue
		}
		done[id] = true
		if g.fast {
			fmt.Fprintf(helpers, "func %s%d(x fast, m *Meta%s) Verdict {\n\t_ = m\n", g.helperName(), id, hole("params", ""))
		} else {
			fmt.Fprintf(helpers, "func %s%d(f *fields, m *Meta%s) Verdict {\n\t_ = m\n", g.helperName(), id, hole("params", ""))
		}
		known := map[string]bool{"frame": true}
		if k, ok := g.helperKnown[id]; ok {
			known = k
		}
		if err := g.emitAt(helpers, sw, id, preds, &todo, 1, true, known); err != nil {
			return err
		}
		helpers.WriteString("}\n\n")
	}
	return nil
}

// group is the presence group of a field: the decoder stores a header's
// fields together and sets one presence bit for them (hasIp, ...). The
// EtherType is a group of its own, because a cut VLAN tag leaves it
// unset while the addresses are there.
func group(field string) string {
	if field == "eth.type" {
		return "ethtype"
	}
	return pred.Fields[field].Layer
}

// PresenceBit names the decoder's presence bit of a field's group.
func PresenceBit(field string) string {
	bit, ok := presenceBits[field]
	if !ok {
		panic("dragonc: internal error: field " + field + " has no presence group")
	}
	return bit
}

// present adds the groups a true condition proves present: those of its
// top-level, positive comparisons.
func present(known map[string]bool, e pred.Expr) map[string]bool {
	out := map[string]bool{}
	for k := range known {
		out[k] = true
	}
	for _, c := range conjuncts(e) {
		if cmp, ok := c.(pred.Cmp); ok {
			out[group(cmp.Field)] = true
		}
	}
	return out
}

// maxDepth bounds how deep a generated statement may be: a function's
// body is at depth 1, a statement inside six blocks at 7. A node whose
// code could reach deeper starts a helper function of its own instead;
// the guard clauses of emitAlts keep that rare.
const maxDepth = 7

// need is how many blocks a node's own code may open around what follows
// it (depth counts blocks, not tabs: gofmt indents the code): a switch
// on a key (emitSwitch) opens four (if, switch, case, if), a table lookup
// two, a switch of exclusive conditions three (if, switch, case), guard
// clauses one each, nested at most to maxDepth (emitAlts).
func need(n *graph.Node) int {
	if _, ok := lpg.Terminal(n); ok {
		return 0
	}
	k := 0
	for _, p := range n.Ports {
		if p.Pred != nil {
			k++
		}
	}
	switch {
	case k >= 8:
		return 4
	case k >= 2:
		return max(k, 3)
	}
	return k
}

// need is need(sw.Nodes[id]), except that with Options.Swappable a node
// with ports to endpoints needs what a table needs, however many
// endpoints it has now.
func (g *gen) need(sw *graph.Graph, id int) int {
	if g.swap && g.delivers(sw, id) {
		return 4
	}
	return need(sw.Nodes[id])
}

// delivers reports whether a port of node id leads straight to an
// endpoint.
func (g *gen) delivers(sw *graph.Graph, id int) bool {
	for _, p := range sw.Nodes[id].Ports {
		if len(p.Succ) == 1 {
			if o, ok := lpg.Terminal(sw.Nodes[p.Succ[0]]); ok && o.Kind == lpg.Deliver {
				return true
			}
		}
	}
	return false
}

// emitAt writes the code of node id and what follows it. Nodes with
// several predecessors, and nodes that would nest too deep, become helper
// functions.
func (g *gen) emitAt(b *strings.Builder, sw *graph.Graph, id int, preds [][]int, helpers *[]int, depth int, inHelper bool, known map[string]bool) error {
	n := sw.Nodes[id]
	ind := strings.Repeat("\t", depth)
	if v, ok := lpg.Terminal(n); ok && v.Kind == lpg.Deliver {
		// Which endpoint a queue delivers to may be all that tells its
		// code from another queue's: a hole (see share).
		fmt.Fprintf(b, "%s\n", hole("deliver", ind+"\x00"+g.verdict(v)+"\x00"+oneLine(n.Name)+"\x00"+oneLine(v.String())))
		return nil
	}
	fmt.Fprintf(b, "%s// %s\n", ind, oneLine(n.Name))
	if v, ok := lpg.Terminal(n); ok {
		fmt.Fprintf(b, "%sreturn %s // %s\n", ind, g.verdict(v), oneLine(v.String()))
		return nil
	}
	if n.Kind.IsGate() {
		return fmt.Errorf("the Go fallback cannot express gate %s; use an LPG without gates", n.Name)
	}
	if len(n.Ports) == 0 {
		fmt.Fprintf(b, "%sreturn Verdict{Kind: Drop}\n", ind)
		return nil
	}
	// Every predicated port in order, then the first default port.
	next := func(bb *strings.Builder, p *graph.Port, d int, known map[string]bool) error {
		ind := strings.Repeat("\t", d)
		switch len(p.Succ) {
		case 0:
			fmt.Fprintf(bb, "%s%s\n", ind, g.dropCode(n.Name, p.Name))
			return nil
		case 1:
			s := p.Succ[0]
			if len(preds[s]) > 1 || d+g.need(sw, s) > maxDepth {
				*helpers = append(*helpers, s)
				if len(preds[s]) == 1 {
					// Its one caller knows which headers are there.
					g.helperKnown[s] = known
				}
				arg := "&f"
				switch {
				case g.fast:
					arg = "x"
					g.fastUsed = true
				case inHelper:
					arg = "f"
				}
				fmt.Fprintf(bb, "%sreturn %s%d(%s, m%s)\n", ind, g.helperName(), s, arg, hole("args", ""))
				return nil
			}
			return g.emitAt(bb, sw, s, preds, helpers, d, inHelper, known)
		}
		return fmt.Errorf("the Go fallback cannot express fan-out at %s.%s", n.Name, p.Name)
	}
	var predicated []int
	def := -1
	for i, p := range n.Ports {
		if p.Pred != nil {
			predicated = append(predicated, i)
		} else if def < 0 {
			def = i
		}
	}
	// Both copies of a queue's checks meet a node with the same known
	// headers, so its runs (and their tables) are worked out once.
	runs, ok := g.runs[id]
	if !ok {
		runs = g.tableRuns(sw, n, predicated, known)
		g.runs[id] = runs
	}
	if runs != nil {
		for _, run := range runs {
			if run.table {
				g.emitTable(b, n, id, run, depth, known)
				continue
			}
			for _, i := range run.ports {
				if done, err := g.emitPort(b, n.Ports[i], depth, known, next); done || err != nil {
					return err
				}
			}
		}
	} else if key, ok := switchKey(n, predicated); ok {
		if err := g.emitSwitch(b, n, predicated, key, depth, next, known); err != nil {
			return err
		}
	} else {
		return g.emitAlts(b, n.Name, g.alts(n, predicated, def), depth, known, next)
	}
	if def >= 0 {
		return next(b, n.Ports[def], depth, known)
	}
	fmt.Fprintf(b, "%s%s\n", ind, g.dropCode(n.Name, "(none)"))
	return nil
}

// emitPort writes the test of a predicated port and what follows it. In
// the fixed-layout copy the predicate is folded first (foldFast): when
// the layout settles it true, what follows is written without a test
// and done reports that the ports after it are never reached; a port it
// settles false is left out.
func (g *gen) emitPort(b *strings.Builder, p *graph.Port, depth int, known map[string]bool, next func(*strings.Builder, *graph.Port, int, map[string]bool) error) (done bool, err error) {
	e := p.Pred
	if g.fast {
		e = foldFast(e)
		if c, ok := e.(pred.Const); ok {
			if !c {
				return false, nil
			}
			return true, next(b, p, depth, present(known, p.Pred))
		}
	}
	ind := strings.Repeat("\t", depth)
	fmt.Fprintf(b, "%sif %s {\n", ind, g.appendCond(nil, e, known))
	if err := next(b, p, depth+1, present(known, p.Pred)); err != nil {
		return false, err
	}
	fmt.Fprintf(b, "%s}\n", ind)
	return false, nil
}

// An alt is one way out of a node: a port, taken when cond holds (nil:
// always), or, with port nil, the drop of a frame no port takes.
type alt struct {
	port *graph.Port
	cond pred.Expr
}

// alts lists a node's ways out in the order they are tried: its
// predicated ports, then its default port or the drop. In the
// fixed-layout copy the conditions are folded first (foldFast): a port
// the layout rules out is left out, and one it settles is the last.
func (g *gen) alts(n *graph.Node, predicated []int, def int) []alt {
	var out []alt
	for _, i := range predicated {
		p := n.Ports[i]
		e := p.Pred
		if g.fast {
			e = foldFast(e)
			if c, ok := e.(pred.Const); ok {
				if !c {
					continue
				}
				return append(out, alt{p, nil})
			}
		}
		out = append(out, alt{p, e})
	}
	if def >= 0 {
		return append(out, alt{n.Ports[def], nil})
	}
	return append(out, alt{})
}

// emitAlts writes a node's ways out, tried in order, as guard clauses:
// the largest continues at the node's own depth. The ones before it get
// an if each; the ones after it, which run when its condition fails, go
// inside an if of the negated condition. Every way out returns, so
// nothing falls through.
func (g *gen) emitAlts(b *strings.Builder, node string, alts []alt, depth int, known map[string]bool, next func(*strings.Builder, *graph.Port, int, map[string]bool) error) error {
	ind := strings.Repeat("\t", depth)
	main := len(alts) - 1
	for i := range alts[:main] {
		if g.altSize(alts[i]) > g.altSize(alts[main]) && depth < maxDepth-1 {
			main = i
		}
	}
	// Conditions that fix one field to different values (a protocol,
	// an EtherType) are a switch on it, in the ports' order, and what
	// none of them takes follows it.
	if last := len(alts) - 1; last >= 2 && exclusive(alts[:last]) {
		return g.emitCases(b, node, alts, depth, known, next)
	}
	take := func(a alt, d int) error {
		if a.port == nil {
			fmt.Fprintf(b, "%s%s\n", strings.Repeat("\t", d), g.dropCode(node, "(none)"))
			return nil
		}
		return next(b, a.port, d, present(known, a.port.Pred))
	}
	for _, a := range alts[:main] {
		fmt.Fprintf(b, "%sif %s {\n", ind, g.appendCond(nil, a.cond, known))
		if err := take(a, depth+1); err != nil {
			return err
		}
		fmt.Fprintf(b, "%s}\n", ind)
	}
	if main < len(alts)-1 {
		fmt.Fprintf(b, "%sif %s {\n", ind, g.negCond(alts[main].cond, known))
		if err := g.emitAlts(b, node, alts[main+1:], depth+1, known, next); err != nil {
			return err
		}
		fmt.Fprintf(b, "%s}\n", ind)
	}
	return take(alts[main], depth)
}

// emitCases writes ways out whose conditions exclude each other as a
// switch on their field (see exclusive), then the last way out.
func (g *gen) emitCases(b *strings.Builder, node string, alts []alt, depth int, known map[string]bool, next func(*strings.Builder, *graph.Port, int, map[string]bool) error) error {
	ind := strings.Repeat("\t", depth)
	last := len(alts) - 1
	field := alts[0].cond.(pred.Cmp).Field
	inner := depth
	if !known[group(field)] && !(g.fast && fallback.FastHas[PresenceBit(field)]) {
		// A field of a header the frame lacks takes no case.
		fmt.Fprintf(b, "%sif %s {\n", ind, g.appendHas(nil, field))
		inner++
	}
	fmt.Fprintf(b, "%sswitch %s {\n", strings.Repeat("\t", inner), g.appendRead(nil, field))
	inCase := present(known, pred.Cmp{Field: field})
	for _, a := range alts[:last] {
		cmp := a.cond.(pred.Cmp)
		vals := []uint64{cmp.Value}
		if cmp.Op == pred.In {
			vals = vals[:0]
			for _, r := range cmp.Ranges {
				vals = append(vals, r.Lo)
			}
		}
		var cs []string
		for _, v := range vals {
			cs = append(cs, string(g.appendValue(nil, field, v)))
		}
		fmt.Fprintf(b, "%scase %s:\n", strings.Repeat("\t", inner), strings.Join(cs, ", "))
		if err := next(b, a.port, inner+2, present(inCase, a.port.Pred)); err != nil {
			return err
		}
	}
	fmt.Fprintf(b, "%s}\n", strings.Repeat("\t", inner))
	if inner > depth {
		fmt.Fprintf(b, "%s}\n", ind)
	}
	if a := alts[last]; a.port != nil {
		return next(b, a.port, depth, present(known, a.port.Pred))
	}
	fmt.Fprintf(b, "%s%s\n", ind, g.dropCode(node, "(none)"))
	return nil
}

// altSize is how many nodes the code of a way out writes inline: its
// successor and theirs, up to the nodes that get a helper of their own.
func (g *gen) altSize(a alt) int {
	if a.port == nil || len(a.port.Succ) != 1 {
		return 0
	}
	return g.size(a.port.Succ[0])
}

func (g *gen) size(id int) int {
	if n, ok := g.sizes[id]; ok {
		return n
	}
	g.sizes[id] = 1 // a cycle counts once
	n := 1
	if o, ok := lpg.Terminal(g.curSW.Nodes[id]); ok && o.Kind == lpg.Deliver && g.swap {
		n = 0 // endpoints come and go (Options.Swappable): they take no room
	}
	for _, p := range g.curSW.Nodes[id].Ports {
		for _, s := range p.Succ {
			if len(g.preds[s]) <= 1 {
				n += g.size(s)
			}
		}
	}
	g.sizes[id] = n
	return n
}

// negCond renders the negation of a condition, as a reader writes it
// where that is plain: the opposite of a lone comparison, ! before a
// lone call.
func (g *gen) negCond(e pred.Expr, known map[string]bool) string {
	if n, ok := e.(pred.Not); ok {
		return string(g.appendCond(nil, n.X, known))
	}
	c := string(g.appendCond(nil, e, known))
	for strings.HasPrefix(c, "(") && strings.HasSuffix(c, ")") && strings.Count(c, "(") == 1+strings.Count(c[1:len(c)-1], "(") && balanced(c[1:len(c)-1]) {
		c = c[1 : len(c)-1]
	}
	if strings.Contains(c, "&&") || strings.Contains(c, "||") {
		return "!(" + c + ")"
	}
	opposite := map[string]string{" == ": " != ", " != ": " == ", " <= ": " > ", " >= ": " < ", " < ": " >= ", " > ": " <= "}
	found, at, op := 0, 0, ""
	for o := range opposite {
		if n := strings.Count(c, o); n > 0 {
			found += n
			at, op = strings.Index(c, o), o
		}
	}
	switch {
	case found == 1:
		return c[:at] + opposite[op] + c[at+len(op):]
	case found == 0 && !strings.Contains(c, " "):
		return "!" + c
	}
	return "!(" + c + ")"
}

// balanced reports whether the parentheses of s pair up.
func balanced(s string) bool {
	n := 0
	for _, r := range s {
		switch r {
		case '(':
			n++
		case ')':
			n--
			if n < 0 {
				return false
			}
		}
	}
	return n == 0
}

// exclusive reports whether at most one of the conditions can hold: each
// fixes the same field, unmasked, to values none of the others names.
// Their order then does not matter.
func exclusive(alts []alt) bool {
	field := ""
	seen := map[uint64]bool{}
	for _, a := range alts {
		cmp, ok := a.cond.(pred.Cmp)
		if !ok || cmp.Mask != 0 || field != "" && cmp.Field != field {
			return false
		}
		field = cmp.Field
		var vals []uint64
		switch {
		case cmp.Op == pred.Eq:
			vals = []uint64{cmp.Value}
		case cmp.Op == pred.In && singletons(cmp.Ranges):
			for _, r := range cmp.Ranges {
				vals = append(vals, r.Lo)
			}
		default:
			return false
		}
		for _, v := range vals {
			if seen[v] {
				return false
			}
			seen[v] = true
		}
	}
	return true
}

// Table demultiplexing. A run is a stretch of consecutive predicated
// ports, in port order, whose predicates have the same shape: equality
// (or small set-membership) tests of the same fields against constants,
// and the same remaining conditions; every port of a table run leads
// straight to an outcome (or drops). A long run is looked up in a table keyed on the
// fields whose constants differ from port to port; the tests the ports
// share are made once. First-match order is kept: runs are tried in port
// order, and within a run the first port with a key wins.
const (
	minTableRun  = 8   // shorter runs stay straight-line code
	maxKeyValues = 256 // set members a port may expand into
)

type run struct {
	ports  []int
	shapes []portShape // of the ports, for a table run
	table  bool
	common []pred.Expr // the tests every port of the run makes
	keys   []string    // fields whose values differ, packed into the key
	rest   pred.Expr   // the conditions besides the keys, shared
	// swap: a swappable table (Options.Swappable), whose key is every
	// field its ports fix, so that another plan's ports of the same
	// shape fit it whatever their values.
	swap bool
}

// portShape splits a port's predicate into equality fields and the rest.
type portShape struct {
	fields []shapeField // sorted by field
	rest   []pred.Expr
	sig    string
}

// shapeField is a field a port's predicate fixes to one of a few values,
// and the conjunct that does.
type shapeField struct {
	field string
	vals  []uint64
	conj  pred.Expr
}

// vals returns the values a port fixes field to (nil: it does not).
func (s *portShape) vals(field string) []uint64 {
	for i := range s.fields {
		if s.fields[i].field == field {
			return s.fields[i].vals
		}
	}
	return nil
}

func (g *gen) shapeOf(e pred.Expr, known map[string]bool) portShape {
	var s portShape
	eachConjunct(e, func(c pred.Expr) {
		cmp, ok := c.(pred.Cmp)
		if ok && cmp.Mask == 0 && s.vals(cmp.Field) == nil {
			switch {
			case cmp.Op == pred.Eq:
				s.fields = append(s.fields, shapeField{cmp.Field, []uint64{cmp.Value}, c})
				return
			case cmp.Op == pred.In && singletons(cmp.Ranges):
				vals := make([]uint64, len(cmp.Ranges))
				for i, r := range cmp.Ranges {
					vals[i] = r.Lo
				}
				s.fields = append(s.fields, shapeField{cmp.Field, vals, c})
				return
			}
		}
		s.rest = append(s.rest, c)
	})
	slices.SortFunc(s.fields, func(a, b shapeField) int { return strings.Compare(a.field, b.field) })
	var sig strings.Builder
	for i, f := range s.fields {
		if i > 0 {
			sig.WriteByte(',')
		}
		sig.WriteString(f.field)
	}
	sig.WriteByte('|')
	if len(s.rest) == 0 {
		sig.WriteString(g.condKnown(nil, known))
	} else {
		inKeys, copied := known, false
		for _, f := range s.fields {
			if !inKeys[group(f.field)] {
				if !copied {
					inKeys, copied = maps.Clone(known), true
				}
				inKeys[group(f.field)] = true
			}
		}
		sig.WriteString(g.condKnown(and(s.rest), inKeys))
	}
	s.sig = sig.String()
	return s
}

func singletons(rs []pred.Range) bool {
	if len(rs) == 0 || len(rs) > 16 {
		return false
	}
	for _, r := range rs {
		if r.Lo != r.Hi {
			return false
		}
	}
	return true
}

func and(xs []pred.Expr) pred.Expr {
	switch len(xs) {
	case 0:
		return nil
	case 1:
		return xs[0]
	}
	return pred.And{X: xs}
}

// tableRuns splits a node's predicated ports into runs, or returns nil
// when no run is long enough for a table.
func (g *gen) tableRuns(sw *graph.Graph, n *graph.Node, ports []int, known map[string]bool) []run {
	delivers := make([]bool, len(ports))
	anyDeliver := false
	for k, i := range ports {
		if p := n.Ports[i]; len(p.Succ) == 1 {
			if o, ok := lpg.Terminal(sw.Nodes[p.Succ[0]]); ok && o.Kind == lpg.Deliver {
				delivers[k], anyDeliver = true, g.swap
			}
		}
	}
	if len(ports) < minTableRun && !anyDeliver {
		return nil
	}
	errBefore := g.err
	shapes := make([]portShape, len(ports))
	direct := make([]bool, len(ports))
	for k, i := range ports {
		p := n.Ports[i]
		shapes[k] = g.shapeOf(p.Pred, known)
		switch len(p.Succ) {
		case 0: // the port drops its frames
			direct[k] = true
		case 1:
			_, direct[k] = lpg.Terminal(sw.Nodes[p.Succ[0]])
		}
	}
	g.err = errBefore // any error is reported when the ports are emitted
	var runs []run
	any := false
	for k := 0; k < len(ports); {
		end := k + 1
		if direct[k] {
			for end < len(ports) && direct[end] && shapes[end].sig == shapes[k].sig {
				end++
			}
		}
		r := run{ports: ports[k:end], swap: anyDeliver && slices.Contains(delivers[k:end], true)}
		if (end-k >= minTableRun || r.swap) && g.planTable(&r, shapes[k:end]) {
			r.table, r.shapes = true, shapes[k:end]
			any = true
		}
		if len(runs) > 0 && !r.table && !runs[len(runs)-1].table {
			runs[len(runs)-1].ports = append(runs[len(runs)-1].ports, r.ports...)
		} else {
			runs = append(runs, r)
		}
		k = end
	}
	if !any {
		return nil
	}
	return runs
}

// planTable decides the key of a run: the fields whose values are not the
// same for every port. It fails when the key is empty, too wide, or the
// ports expand into too many entries.
func (g *gen) planTable(r *run, shapes []portShape) bool {
	first := shapes[0]
	for _, f := range first.fields {
		same := true
		for _, s := range shapes[1:] {
			if !slices.Equal(s.vals(f.field), f.vals) {
				same = false
				break
			}
		}
		if same && !r.swap {
			r.common = append(r.common, f.conj)
			continue
		}
		r.keys = append(r.keys, f.field)
	}
	if len(r.keys) == 0 || len(packKey(r.keys)) == 0 {
		return false
	}
	for _, s := range shapes {
		n := 1
		for _, f := range r.keys {
			n *= len(s.vals(f))
		}
		if n > maxKeyValues {
			return false
		}
	}
	r.rest = and(first.rest)
	return true
}

// packKey places key fields in at most two 64-bit words: for each field,
// its word and shift. It returns nil when the fields do not fit.
func packKey(keys []string) []keySlot {
	var out []keySlot
	word, used := 0, 0
	for _, f := range keys {
		bits := pred.Fields[f].Bits
		if used+bits > 64 {
			word, used = word+1, 0
		}
		if word > 1 {
			return nil
		}
		out = append(out, keySlot{f, word, used})
		used += bits
	}
	return out
}

type keySlot struct {
	field       string
	word, shift int
}

// emitTable writes the lookup of a table run and declares its table.
func (g *gen) emitTable(b *strings.Builder, n *graph.Node, id int, r run, depth int, known map[string]bool) {
	key := [2]int{id, r.ports[0]}
	t, ok := g.tableOf[key]
	if !ok {
		t = g.declareTable(n, r)
		g.tableOf[key] = t
	}
	g.emitLookup(b, n, r, t, depth, known)
}

// tableDecl is a declared table: its name, its kind and how its key is
// packed.
type tableDecl struct {
	name  string
	dense bool
	words int
	slots []keySlot
}

// declareTable writes the table of a run to g.tables, unless a table
// with the same entries is declared already, and returns it.
func (g *gen) declareTable(n *graph.Node, r run) tableDecl {
	slots := packKey(r.keys)
	words := 1
	for _, s := range slots {
		if s.word == 1 {
			words = 2
		}
	}
	// The entries: every combination of each port's key values.
	type ent struct {
		k    [2]uint64
		v    string
		data TableEntry // the entry as data, for a swappable table
	}
	var ents []ent
	seen := map[[2]uint64]bool{}
	for k, i := range r.ports {
		p := n.Ports[i]
		s := r.shapes[k]
		out := lpg.Outcome{Kind: lpg.Drop, Node: n.Name, Port: p.Name}
		if len(p.Succ) == 1 {
			out, _ = lpg.Terminal(g.curSW.Nodes[p.Succ[0]])
		}
		v := g.compactVerdict(out)
		var data TableEntry
		if r.swap {
			data = g.entryData(out)
		}
		for _, c := range PackKey(r.keys, s.vals) {
			if !seen[c] {
				seen[c] = true
				d := data
				d.K0, d.K1 = c[0], c[1]
				ents = append(ents, ent{c, v, d})
			}
		}
	}
	// Tables with the same entries (the listeners every queue serves)
	// are declared once for all queues.
	body := make([]byte, 0, len(ents)*64)
	for _, e := range ents {
		body = append(body, "\t{"...)
		body = g.appendKey(body, slots, 0, e.k[0])
		body = append(body, ", "...)
		body = g.appendKey(body, slots, 1, e.k[1])
		body = append(body, ", "...)
		body = append(body, e.v...)
		body = append(body, "},\n"...)
	}
	content := strconv.Itoa(words) + "|" + string(body)
	if r.swap {
		// A swappable table is its run's own: another plan may give the
		// runs that share its entries now different ones.
		content = fmt.Sprintf("swap %d", len(g.tableNames))
	}
	name, declared := g.tableNames[content]
	if !declared {
		name = fmt.Sprintf("table%d", len(g.tableNames))
		g.tableNames[content] = name
	}
	if r.swap {
		t := Table{Name: name, Queue: g.curQueue, Node: n.Name, Keys: slices.Clone(r.keys)}
		for _, e := range ents {
			t.Entries = append(t.Entries, e.data)
		}
		g.swapTables = append(g.swapTables, t)
		fmt.Fprintf(&g.tables, "// %s holds the ports of %s by (%s); a reload replaces its\n// entries (SetTable).\n", name, oneLine(n.Name), strings.Join(r.keys, ", "))
		fmt.Fprintf(&g.tables, "var %s = newSwapped(%q, []entry{\n", name, name)
		g.tables.Write(body)
		g.tables.WriteString("})\n\n")
		return tableDecl{name: name, words: words, slots: slots}
	}
	lo, hi := ents[0].k[0], ents[0].k[0]
	for _, e := range ents {
		lo, hi = min(lo, e.k[0]), max(hi, e.k[0])
	}
	denseOK := words == 1 && hi-lo < uint64(4*len(ents)+64)
	if !declared {
		fmt.Fprintf(&g.tables, "// %s holds %d ports of %s by (%s).\n", name, len(r.ports), oneLine(n.Name), strings.Join(r.keys, ", "))
		if denseOK {
			fmt.Fprintf(&g.tables, "var %s = newDense(%s, %s, []entry{\n", name, g.appendKey(nil, slots, 0, lo), g.appendKey(nil, slots, 0, hi))
		} else {
			fmt.Fprintf(&g.tables, "var %s = newHashed([]entry{\n", name)
		}
		g.tables.Write(body)
		g.tables.WriteString("})\n\n")
	}
	return tableDecl{name: name, dense: denseOK, words: words, slots: slots}
}

// appendKey appends word w of a packed key as the lookup builds it:
// each field's value, as appendValue writes it, shifted into place.
func (g *gen) appendKey(buf []byte, slots []keySlot, w int, k uint64) []byte {
	n := 0
	for _, s := range slots {
		if s.word != w {
			continue
		}
		if n > 0 {
			buf = append(buf, " | "...)
		}
		n++
		x := k >> uint(s.shift)
		if bits := pred.Fields[s.field].Bits; bits < 64 {
			x &= 1<<uint(bits) - 1
		}
		buf = g.appendValue(buf, s.field, x)
		if s.shift > 0 {
			buf = append(buf, "<<"...)
			buf = strconv.AppendInt(buf, int64(s.shift), 10)
		}
	}
	if n == 0 {
		buf = append(buf, '0')
	}
	return buf
}

// emitLookup writes the lookup of a run in its table.
func (g *gen) emitLookup(b *strings.Builder, n *graph.Node, r run, t tableDecl, depth int, known map[string]bool) {
	ind := strings.Repeat("\t", depth)
	var guard []string
	inKeys := known
	for _, k := range r.keys {
		if !known[group(k)] {
			guard = append(guard, string(g.appendHas(nil, k)))
		}
		inKeys = present(inKeys, pred.Cmp{Field: k})
	}
	for _, c := range r.common {
		guard = append(guard, "("+g.condKnown(c, known)+")")
		inKeys = present(inKeys, c)
	}
	word := [2][]string{}
	for _, s := range t.slots {
		x := string(g.appendRead(nil, s.field))
		if s.shift > 0 {
			x = fmt.Sprintf("%s<<%d", x, s.shift)
		}
		word[s.word] = append(word[s.word], x)
	}
	name := t.name
	fmt.Fprintf(b, "%s// the ports by table %s\n", ind, name)
	if len(guard) > 0 {
		fmt.Fprintf(b, "%sif %s {\n", ind, strings.Join(guard, " && "))
	} else {
		fmt.Fprintf(b, "%s{\n", ind)
	}
	var lookup string
	switch {
	case t.dense:
		lookup = fmt.Sprintf("%s.find(%s)", name, strings.Join(word[0], " | "))
	case t.words == 1:
		lookup = fmt.Sprintf("%s.find(%s, 0)", name, strings.Join(word[0], " | "))
	default:
		lookup = fmt.Sprintf("%s.find(%s, %s)", name, strings.Join(word[0], " | "), strings.Join(word[1], " | "))
	}
	cond := "v.Kind != missing"
	if r.rest != nil {
		cond += " && (" + g.condKnown(r.rest, inKeys) + ")"
	}
	fmt.Fprintf(b, "%s\tif v := %s; %s {\n%s\t\treturn v\n%s\t}\n%s}\n", ind, lookup, cond, ind, ind, ind)
}

// switchKey finds a field that many predicated ports fix with an equality
// conjunct, so the ports can be found with a switch.
func switchKey(n *graph.Node, ports []int) (string, bool) {
	if len(ports) < 8 {
		return "", false
	}
	count := map[string]map[uint64]bool{}
	for _, i := range ports {
		for _, c := range conjuncts(n.Ports[i].Pred) {
			if cmp, ok := c.(pred.Cmp); ok && cmp.Op == pred.Eq && cmp.Mask == 0 {
				if count[cmp.Field] == nil {
					count[cmp.Field] = map[uint64]bool{}
				}
				count[cmp.Field][cmp.Value] = true
			}
		}
	}
	best, bestN := "", 0
	for f, vs := range count {
		if len(vs) > bestN || len(vs) == bestN && f < best {
			best, bestN = f, len(vs)
		}
	}
	return best, bestN >= 4
}

// eachConjunct calls f with each conjunct of e, flattening nested Ands.
func eachConjunct(e pred.Expr, f func(pred.Expr)) {
	if a, ok := e.(pred.And); ok {
		for _, x := range a.X {
			eachConjunct(x, f)
		}
		return
	}
	f(e)
}

func conjuncts(e pred.Expr) []pred.Expr {
	if a, ok := e.(pred.And); ok {
		var out []pred.Expr
		for _, x := range a.X {
			out = append(out, conjuncts(x)...)
		}
		return out
	}
	return []pred.Expr{e}
}

// keyOf returns the value a port's predicate fixes the key to.
func keyOf(e pred.Expr, key string) (uint64, bool) {
	for _, c := range conjuncts(e) {
		if cmp, ok := c.(pred.Cmp); ok && cmp.Field == key && cmp.Op == pred.Eq && cmp.Mask == 0 {
			return cmp.Value, true
		}
	}
	return 0, false
}

// emitSwitch writes a first-match search over many ports as a switch on
// the key: each case tries, in the original order, the ports with that key
// value and the ports that fix no key.
func (g *gen) emitSwitch(b *strings.Builder, n *graph.Node, ports []int, key string, depth int, next func(*strings.Builder, *graph.Port, int, map[string]bool) error, known map[string]bool) error {
	ind := strings.Repeat("\t", depth)
	byVal := map[uint64][]int{}
	var vals []uint64
	for _, i := range ports {
		if v, ok := keyOf(n.Ports[i].Pred, key); ok {
			if byVal[v] == nil {
				vals = append(vals, v)
			}
			byVal[v] = append(byVal[v], i)
		}
	}
	sort.Slice(vals, func(a, c int) bool { return vals[a] < vals[c] })
	var free []int
	for _, i := range ports {
		if _, ok := keyOf(n.Ports[i].Pred, key); !ok {
			free = append(free, i)
		}
	}
	fmt.Fprintf(b, "%sif %s {\n%s\tswitch %s {\n", ind, g.appendHas(nil, key), ind, g.appendRead(nil, key))
	for _, v := range vals {
		fmt.Fprintf(b, "%s\tcase %s:\n", ind, g.appendValue(nil, key, v))
		cand := append(append([]int(nil), byVal[v]...), free...)
		sort.Ints(cand)
		inCase := present(known, pred.Cmp{Field: key})
		for _, i := range cand {
			fmt.Fprintf(b, "%s\t\tif %s {\n", ind, g.condKnown(n.Ports[i].Pred, inCase))
			// depth counts blocks (gofmt indents): if, switch, case, if.
			if err := next(b, n.Ports[i], depth+4, present(inCase, n.Ports[i].Pred)); err != nil {
				return err
			}
			fmt.Fprintf(b, "%s\t\t}\n", ind)
		}
	}
	fmt.Fprintf(b, "%s\t}\n%s}\n", ind, ind)
	for _, i := range free {
		fmt.Fprintf(b, "%sif %s {\n", ind, g.condKnown(n.Ports[i].Pred, known))
		if err := next(b, n.Ports[i], depth+1, present(known, n.Ports[i].Pred)); err != nil {
			return err
		}
		fmt.Fprintf(b, "%s}\n", ind)
	}
	return nil
}

func (g *gen) verdict(o lpg.Outcome) string {
	kind, index := g.verdictParts(o)
	if o.Kind == lpg.Deliver {
		index = fmt.Sprintf("uint32(%s)", g.epIdent[o.Endpoint])
	}
	return fmt.Sprintf("Verdict{Kind: %s, Index: %s}", kind, index)
}

// compactVerdict is a verdict as a table entry writes it, an endpoint
// by its constant.
func (g *gen) compactVerdict(o lpg.Outcome) string {
	kind, index := g.verdictParts(o)
	if o.Kind == lpg.Deliver {
		index = "uint32(" + g.epIdent[o.Endpoint] + ")"
	}
	return "Verdict{" + kind + ", " + index + "}"
}

// entryData is the verdict of a swappable table's entry as data.
func (g *gen) entryData(o lpg.Outcome) TableEntry {
	switch o.Kind {
	case lpg.Deliver:
		return TableEntry{Kind: uint8(fallback.Deliver), Index: uint32(g.epIndex[o.Endpoint]), Endpoint: o.Endpoint}
	case lpg.Reply:
		return TableEntry{Kind: uint8(fallback.Reply), Index: uint32(g.reply(o.Reply))}
	case lpg.Sink:
		return TableEntry{Kind: uint8(fallback.Sink), Index: uint32(g.sink(o.Node))}
	}
	return TableEntry{Kind: uint8(fallback.Drop), Index: uint32(g.dropSite(o.Node, o.Port))}
}

// verdictParts is a verdict's kind and the number of its endpoint, reply,
// sink or drop site.
func (g *gen) verdictParts(o lpg.Outcome) (string, string) {
	switch o.Kind {
	case lpg.Deliver:
		return "Deliver", strconv.Itoa(g.epIndex[o.Endpoint])
	case lpg.Reply:
		return "Reply", strconv.Itoa(g.reply(o.Reply))
	case lpg.Sink:
		return "Sink", strconv.Itoa(g.sink(o.Node))
	}
	return "Drop", strconv.Itoa(g.dropSite(o.Node, o.Port))
}

// condKnown renders a predicate as a Go boolean expression over the
// decoded fields f and the metadata m; the presence tests of the groups
// in known (already proven present) are left out.
func (g *gen) condKnown(e pred.Expr, known map[string]bool) string {
	if g.fast {
		e = foldFast(e)
	}
	return string(g.appendCond(nil, e, known))
}

// foldFast settles what the fixed layout decides in a predicate (the
// presence of the headers it always or never has, the fields it fixes:
// fallback.FastHas and FastValues) and simplifies the rest. A comparison
// of a field of a missing header is false, as the decoded code's
// presence test makes it.
func foldFast(e pred.Expr) pred.Expr {
	switch e := e.(type) {
	case pred.Cmp:
		has, settled := fallback.FastHas[PresenceBit(e.Field)]
		switch {
		case settled && !has:
			return pred.Const(false)
		case settled:
			if v, ok := fallback.FastValues[e.Field]; ok {
				return pred.Const(e.Holds(v))
			}
		}
		return e
	case pred.Not:
		x := foldFast(e.X)
		if c, ok := x.(pred.Const); ok {
			return !c
		}
		return pred.Not{X: x}
	case pred.And, pred.Or:
		xs, and := []pred.Expr(nil), true
		if a, ok := e.(pred.And); ok {
			xs = a.X
		} else {
			xs, and = e.(pred.Or).X, false
		}
		// In an And, true conjuncts drop out and a false one decides;
		// in an Or the other way round.
		var out []pred.Expr
		for _, x := range xs {
			x = foldFast(x)
			if c, ok := x.(pred.Const); ok {
				if bool(c) != and {
					return c
				}
				continue
			}
			out = append(out, x)
		}
		switch {
		case len(out) == 0:
			return pred.Const(and)
		case len(out) == 1:
			return out[0]
		case and:
			return pred.And{X: out}
		}
		return pred.Or{X: out}
	}
	return e
}

// appendValue appends a constant of field as people write it: an IPv4
// address or a MAC as a named constant that spells it (declared in
// fallback.go, see addrConsts), an EtherType or TCP flags in hex, any
// other value (ports, lengths, protocol numbers) in decimal.
func (g *gen) appendValue(buf []byte, field string, x uint64) []byte {
	switch addrKind(field) {
	case "ip4":
		if x <= 0xffffffff {
			name := fmt.Sprintf("ip%d_%d_%d_%d", x>>24, x>>16&0xff, x>>8&0xff, x&0xff)
			g.addrs[name] = x
			return append(buf, name...)
		}
	case "mac":
		if x <= 0xffffffffffff {
			name := fmt.Sprintf("mac%02x_%02x_%02x_%02x_%02x_%02x", x>>40, x>>32&0xff, x>>24&0xff, x>>16&0xff, x>>8&0xff, x&0xff)
			g.addrs[name] = x
			return append(buf, name...)
		}
	case "hex":
		return appendHex(buf, x)
	}
	return strconv.AppendUint(buf, x, 10)
}

// addrKind says how the constants of a field are written (appendValue),
// as pred.FormatValue prints them.
func addrKind(field string) string {
	switch field {
	case "ip.src", "ip.dst", "arp.tpa", "arp.spa":
		return "ip4"
	case "eth.dst", "eth.src", "arp.sha":
		return "mac"
	case "eth.type", "tcp.flags":
		return "hex"
	}
	return "dec"
}

// addrConsts declares the address constants the code names, by name.
func (g *gen) addrConsts() string {
	if len(g.addrs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("// The addresses the checks compare with, named as written.\nconst (\n")
	for _, name := range slices.Sorted(maps.Keys(g.addrs)) {
		x := g.addrs[name]
		dotted := pred.FormatValue("ip.dst", x)
		if strings.HasPrefix(name, "mac") {
			dotted = pred.FormatValue("eth.dst", x)
		}
		fmt.Fprintf(&b, "\t%s = %#x // %s\n", name, x, dotted)
	}
	b.WriteString(")\n\n")
	return b.String()
}

// appendHex appends x as %#x does.
func appendHex(buf []byte, x uint64) []byte {
	return strconv.AppendUint(append(buf, "0x"...), x, 16)
}

// appendCond appends condKnown's rendering of e to buf.
func (g *gen) appendCond(buf []byte, e pred.Expr, known map[string]bool) []byte {
	switch e := e.(type) {
	case nil:
		return append(buf, "true"...)
	case pred.Const:
		if e {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case pred.Not:
		buf = append(buf, "!("...)
		return append(g.appendCond(buf, e.X, known), ')')
	case pred.And, pred.Or:
		xs, sep := []pred.Expr(nil), " && "
		if a, ok := e.(pred.And); ok {
			xs = a.X
		} else {
			xs, sep = e.(pred.Or).X, " || "
		}
		for i, x := range xs {
			if i > 0 {
				buf = append(buf, sep...)
			}
			buf = append(buf, '(')
			buf = append(g.appendCond(buf, x, known), ')')
		}
		return buf
	case pred.Atom:
		bit, ok := g.flags[e.Name]
		if !ok || e.Value != "true" {
			if g.err == nil {
				g.err = fmt.Errorf("the Go fallback cannot express the opaque predicate %s", e)
			}
			return append(buf, "false"...)
		}
		buf = append(buf, "m.Flags&Flag"...)
		buf = append(buf, goIdent(g.flagOrd[bit])...)
		return append(buf, " != 0"...)
	case pred.Cmp:
		isKnown := known[group(e.Field)] || g.fast && fallback.FastHas[PresenceBit(e.Field)]
		if e.Op == pred.In && e.Mask == 0 && len(e.Ranges) == 1 && e.Ranges[0].Lo == 0 && e.Ranges[0].Hi >= 1<<uint(pred.Fields[e.Field].Bits)-1 {
			// Every value of the field: only its presence is tested.
			if isKnown {
				return append(buf, "true"...)
			}
			return g.appendHas(buf, e.Field)
		}
		if e.Op == pred.In && len(e.Ranges) == 0 {
			return append(buf, "false"...)
		}
		if !isKnown {
			buf = append(g.appendHas(buf, e.Field), " && "...)
		}
		v := func(buf []byte) []byte {
			if e.Mask != 0 {
				buf = append(buf, '(')
			}
			buf = g.appendRead(buf, e.Field)
			if e.Mask != 0 {
				buf = append(buf, " & "...)
				buf = append(appendHex(buf, e.Mask), ')')
			}
			return buf
		}
		// A masked field is compared in hex, as its mask is written.
		val := func(buf []byte, x uint64) []byte {
			if e.Mask != 0 && x == 0 {
				return append(buf, '0')
			}
			if e.Mask != 0 {
				return appendHex(buf, x)
			}
			return g.appendValue(buf, e.Field, x)
		}
		if e.Op != pred.In {
			buf = append(v(buf), ' ')
			buf = append(buf, e.Op.String()...)
			return val(append(buf, ' '), e.Value)
		}
		buf = append(buf, '(')
		for i, r := range e.Ranges {
			if i > 0 {
				buf = append(buf, " || "...)
			}
			switch {
			case r.Lo == r.Hi:
				buf = val(append(v(buf), " == "...), r.Lo)
			case r.Lo == 0:
				buf = val(append(v(buf), " <= "...), r.Hi)
			default:
				buf = val(append(v(buf), " >= "...), r.Lo)
				buf = val(append(v(append(buf, " && "...)), " <= "...), r.Hi)
			}
		}
		return append(buf, ')')
	}
	if g.err == nil {
		g.err = fmt.Errorf("dragonc: internal error: predicate %T", e)
	}
	return append(buf, "false"...)
}

// readFields adds the fields a software graph reads to g.used.
func (g *gen) readFields(sw *graph.Graph) {
	for _, n := range sw.Nodes {
		for _, p := range n.Ports {
			pred.Inspect(p.Pred, func(e pred.Expr) bool {
				if c, ok := e.(pred.Cmp); ok {
					g.used[c.Field] = true
				}
				return true
			})
		}
	}
}

// FlagOrder lists the descriptor-reported checks the software reads, in
// the order of their bits in the generated Flags type. Its callers (verify,
// bench) simulate the queues too, so it keeps the graphs it builds.
func FlagOrder(r *dembed.Result) []string {
	var out []string
	seen := map[string]int{}
	for _, q := range r.Embedding.Queues {
		out = appendFlags(out, seen, q.SW())
	}
	return out
}

// appendFlags appends to order the checks a software graph reads that it
// does not hold yet, numbering them in seen.
func appendFlags(order []string, seen map[string]int, sw *graph.Graph) []string {
	for _, n := range sw.Nodes {
		for _, p := range n.Ports {
			if a, ok := p.Pred.(pred.Atom); ok && a.Value == "true" {
				if _, dup := seen[a.Name]; !dup {
					seen[a.Name] = len(order)
					order = append(order, a.Name)
				}
			}
		}
	}
	return order
}

// testCase is a frame of the generated test: where the NIC put it, what
// it reported, and the LPG's verdict on it.
type testCase struct {
	queue    int
	frame    sim.Frame
	reported [][2]string
	want     lpg.Outcome
}

// testCases runs frames aimed at the stack through the NIC and the LPG
// alone. It reads the result only, so it runs while the code is generated.
func testCases(r *dembed.Result, st *lpg.Stack, opt Options) ([]testCase, error) {
	s, err := sim.New(r.Embedding)
	if err != nil {
		return nil, err
	}
	gen := sim.NewGen(st, opt.Seed)
	var out []testCase
	for i := 0; i < opt.TestFrames*4 && len(out) < opt.TestFrames; i++ {
		// The want is the LPG's verdict, not the embedded software
		// graph's: the generated code must agree with the LPG.
		f := gen.Next()
		queue, ref := s.RunNIC(f.Data, f.CRCOK)
		if queue < 0 {
			continue
		}
		out = append(out, testCase{queue, f, s.LastReported(), ref})
	}
	return out, nil
}

// testFile writes a test that runs frames aimed at the stack through
// Process and checks each verdict against the reference interpreter's,
// checks that Process does not allocate, and benchmarks it.
func (g *gen) testFile(cases []testCase) ([]byte, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("%s\npackage fallback\n\nimport (\n\t\"encoding/hex\"\n\t\"testing\"\n)\n\n", g.header())
	w("// cases are frames aimed at the stack, where the NIC put them, what it\n// reported, and the verdict of the LPG run alone on the same frame.\n")
	w("var cases = []struct {\n\tqueue int\n\tframe string\n\tmeta  Meta\n\twant  Verdict\n}{\n")
	for _, c := range cases {
		f := c.frame
		w("\t{%d, %s, Meta{CRCOK: %v, Flags: %s}, %s}, // %s\n", c.queue, strconv.Quote(hex.EncodeToString(f.Data)), f.CRCOK, g.flagsOf(c.reported), g.verdict(c.want), oneLine(f.Label))
	}
	w("}\n\n")
	w("func TestProcess(t *testing.T) {\n\tfor i, c := range cases {\n\t\tframe, err := hex.DecodeString(c.frame)\n\t\tif err != nil {\n\t\t\tt.Fatal(err)\n\t\t}\n")
	w("\t\tif got := Process(c.queue, frame, c.meta); got != c.want {\n\t\t\tt.Errorf(\"case %%d (queue %%d): got %%v, want %%v\", i, c.queue, got, c.want)\n\t\t}\n\t}\n}\n\n")
	w("func TestNoAllocations(t *testing.T) {\n\tif len(cases) == 0 {\n\t\tt.Skip(\"no frames\")\n\t}\n\tframe, _ := hex.DecodeString(cases[0].frame)\n")
	w("\tif n := testing.AllocsPerRun(100, func() { Process(cases[0].queue, frame, cases[0].meta) }); n != 0 {\n\t\tt.Errorf(\"Process allocates %%v times per frame\", n)\n\t}\n}\n\n")
	w("func TestHostileFrames(t *testing.T) {\n\tfor _, q := range Queues {\n\t\tfor n := 0; n < 80; n++ {\n\t\t\tframe := make([]byte, n)\n\t\t\tfor i := range frame {\n\t\t\t\tframe[i] = byte(i*7 + n)\n\t\t\t}\n\t\t\tProcess(q, frame, Meta{CRCOK: true})\n\t\t}\n\t}\n\tProcess(-1, nil, Meta{})\n}\n\n")
	w("func BenchmarkProcess(b *testing.B) {\n\tif len(cases) == 0 {\n\t\tb.Skip(\"no frames\")\n\t}\n\tframes := make([][]byte, len(cases))\n\tfor i, c := range cases {\n\t\tframes[i], _ = hex.DecodeString(c.frame)\n\t}\n\tb.ReportAllocs()\n\tb.ResetTimer()\n")
	w("\tfor i := 0; i < b.N; i++ {\n\t\tc := &cases[i%%len(cases)]\n\t\tProcess(c.queue, frames[i%%len(cases)], c.meta)\n\t}\n}\n")
	return g.format(b.String()), nil
}

// flagsOf renders the descriptor flags the NIC reported for a frame.
func (g *gen) flagsOf(reported [][2]string) string {
	var parts []string
	for _, rep := range reported {
		if _, ok := g.flags[rep[0]]; ok && rep[1] == "true" {
			parts = append(parts, "Flag"+goIdent(rep[0]))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " | ")
}
