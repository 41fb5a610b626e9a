// Package verify checks that an embedded stack treats frames exactly as
// the LPG alone does. Every frame goes through the configured NIC (queue
// and descriptor flags), then through that queue's software: both the
// software graph the embedder left and the generated Go fallback, built by
// the go command and run as a helper process. Both outcomes are compared
// with the reference interpreter's.
package verify

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/sim"
)

// Options says what to run.
type Options struct {
	Packets  int      // generated frames (after any captures)
	Seed     int64    // generator seed
	Pcaps    []string // capture files
	Fallback bool     // also run the generated Go fallback (needs the go command)
	Work     string   // scratch directory for the fallback build
	Show     int      // mismatches shown in full
	// Progress, when not nil, is called as frames go through the
	// simulator (done of total) and once more before the generated code
	// is built and run (done == total).
	Progress func(done, total int)
}

// Mismatch is a frame treated differently.
type Mismatch struct {
	Source   string // "generated 17 (at dns, bad CRC)" or "file.pcap #3"
	Frame    []byte
	CRCOK    bool
	Queue    int
	Graph    string // the software graph's outcome
	Fallback string // the generated code's outcome ("" when not run)
	Ref      string // the LPG alone
}

// Report is what verify found.
type Report struct {
	Total      int
	Mismatches []Mismatch
	Outcomes   map[string]int // reference outcome -> count
	Queues     map[int]int    // queue -> frames (-1: dropped by the NIC)
	Notes      []string       // captures read, frames skipped
}

type item struct {
	frame  []byte
	crc    bool
	source string
}

// Run verifies an embedding.
func Run(r *embed.Result, st *lpg.Stack, opt Options) (*Report, error) {
	s, err := sim.New(r.Embedding)
	if err != nil {
		return nil, err
	}
	rep := &Report{Outcomes: map[string]int{}, Queues: map[int]int{}}
	items, notes, err := readCaptures(opt.Pcaps)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, notes...)
	g := sim.NewGen(st, opt.Seed)
	for i := 0; i < opt.Packets; i++ {
		f := g.Next()
		items = append(items, item{f.Data, f.CRCOK, fmt.Sprintf("generated %d (%s)", i, f.Label)})
	}
	// Run every frame once through the NIC, its queue's software graph and
	// the LPG, keeping where it went and what the NIC reported.
	results := make([]sim.Result, len(items))
	reported := make([][][2]string, len(items))
	for i, it := range items {
		results[i] = s.Run(it.frame, it.crc)
		if opt.Fallback && results[i].Queue >= 0 {
			reported[i] = s.LastReported()
		}
		if opt.Progress != nil && (i%4096 == 0 || i == len(items)-1) {
			opt.Progress(i+1, len(items))
		}
	}
	var fb []string
	if opt.Fallback {
		fb, err = runFallback(r, st, results, reported, items, opt.Work)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, v := range fb {
			if v != "" {
				n++
			}
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("the generated Go fallback ran on the %d frames the NIC delivered", n))
	}
	for i, it := range items {
		res := results[i]
		rep.Total++
		rep.Outcomes[res.Ref.String()]++
		rep.Queues[res.Queue]++
		fallback := ""
		if fb != nil && res.Queue >= 0 {
			fallback = fb[i]
		}
		bad := !res.Match() || fb != nil && res.Queue >= 0 && fallback != res.Ref.String()
		if bad {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Source: it.source, Frame: it.frame, CRCOK: it.crc, Queue: res.Queue,
				Graph: res.Embedded.String(), Fallback: fallback, Ref: res.Ref.String()})
		}
	}
	return rep, nil
}

// readCaptures reads every frame of the captures, with notes on what was
// read and on damaged files (whose earlier frames are kept).
func readCaptures(paths []string) ([]item, []string, error) {
	var items []item
	var notes []string
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", path, err)
		}
		frames, more, err := packet.ReadCapture(path, f)
		f.Close()
		notes = append(notes, more...)
		if err != nil && len(frames) == 0 {
			return nil, nil, err
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("%v (the %d frames before it are verified)", err, len(frames)))
		}
		trunc := 0
		for _, c := range frames {
			if c.Truncated {
				trunc++
			}
			items = append(items, item{c.Data, true, fmt.Sprintf("%s #%d", path, c.Index)})
		}
		notes = append(notes, fmt.Sprintf("%s: %d frames (%d cut by the capture's snap length)", path, len(frames), trunc))
	}
	return items, notes, nil
}

// runFallback builds the generated fallback with a helper main program and
// streams every frame the NIC delivers to a queue through it.
func runFallback(r *embed.Result, st *lpg.Stack, results []sim.Result, reported [][][2]string, items []item, work string) ([]string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, fmt.Errorf("running the generated fallback needs the go command (or pass --fallback=false)")
	}
	fb, err := gofallback.Generate(r, st, gofallback.Options{Source: "verify", Module: "dragoncverify/fallback", TestFrames: 1})
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"go.mod": []byte("module dragoncverify\n\ngo 1.21\n"), "main.go": []byte(helper)}
	for name, data := range fb {
		if name != "go.mod" && name != "fallback_test.go" {
			files[filepath.Join("fallback", name)] = data
		}
	}
	for name, data := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
	}
	bin := filepath.Join(work, "helper")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = work
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the generated fallback: %v\n%s", err, out)
	}
	order := gofallback.FlagOrder(r)
	bit := map[string]uint64{}
	for i, f := range order {
		bit[f] = 1 << uint(i)
	}
	var in bytes.Buffer
	var sent []int
	for i, it := range items {
		res := results[i]
		if res.Queue < 0 {
			continue
		}
		var flags uint64
		for _, rp := range reported[i] {
			if rp[1] == "true" {
				flags |= bit[rp[0]]
			}
		}
		crc := uint8(0)
		if it.crc {
			crc = 1
		}
		binary.Write(&in, binary.LittleEndian, uint32(len(it.frame)))
		binary.Write(&in, binary.LittleEndian, int32(res.Queue))
		binary.Write(&in, binary.LittleEndian, flags)
		in.WriteByte(crc)
		in.Write(it.frame)
		sent = append(sent, i)
	}
	run := exec.Command(bin)
	run.Stdin = &in
	var out bytes.Buffer
	run.Stdout = &out
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Run(); err != nil {
		return nil, fmt.Errorf("the generated fallback failed: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(sent) == 0 {
		lines = nil
	}
	if len(lines) != len(sent) {
		return nil, fmt.Errorf("the generated fallback answered %d of %d frames", len(lines), len(sent))
	}
	verdicts := make([]string, len(items))
	for k, i := range sent {
		verdicts[i] = lines[k]
	}
	return verdicts, nil
}

// helper runs the generated fallback on frames from stdin and prints each
// verdict in the reference interpreter's notation.
const helper = `// Code generated by dragonc verify. DO NOT EDIT.
package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"

	"dragoncverify/fallback"
)

func main() {
	r := bufio.NewReader(os.Stdin)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for {
		var n uint32
		var q int32
		var flags uint64
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return
		}
		binary.Read(r, binary.LittleEndian, &q)
		binary.Read(r, binary.LittleEndian, &flags)
		crc, _ := r.ReadByte()
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			os.Exit(2)
		}
		v := fallback.Process(int(q), b, fallback.Meta{CRCOK: crc == 1, Flags: fallback.Flags(flags)})
		w.WriteString(v.String() + "\n")
	}
}
`

// Write prints the report: counts per outcome and per queue, every
// mismatch (the first few in full, with the frame in hex), and the last
// line "N packets, M mismatches".
func (rep *Report) Write(w io.Writer, show int) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintf(bw, "%s\n", n)
	}
	fmt.Fprintln(bw, "outcomes (the LPG alone):")
	keys := make([]string, 0, len(rep.Outcomes))
	for k := range rep.Outcomes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if rep.Outcomes[keys[i]] != rep.Outcomes[keys[j]] {
			return rep.Outcomes[keys[i]] > rep.Outcomes[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 25 {
			fmt.Fprintf(bw, "  ... %d more outcomes\n", len(keys)-25)
			break
		}
		fmt.Fprintf(bw, "  %8d  %s\n", rep.Outcomes[k], k)
	}
	var qs []int
	for q := range rep.Queues {
		qs = append(qs, q)
	}
	sort.Ints(qs)
	fmt.Fprint(bw, "queues:")
	for _, q := range qs {
		if q < 0 {
			fmt.Fprintf(bw, " dropped by the NIC %d", rep.Queues[q])
		} else {
			fmt.Fprintf(bw, " %d:%d", q, rep.Queues[q])
		}
	}
	fmt.Fprintln(bw)
	for i, m := range rep.Mismatches {
		if i < show {
			fmt.Fprintf(bw, "MISMATCH %s, queue %d, crc ok %v\n  embedded graph: %s\n", m.Source, m.Queue, m.CRCOK, m.Graph)
			if m.Fallback != "" {
				fmt.Fprintf(bw, "  generated code: %s\n", m.Fallback)
			}
			fmt.Fprintf(bw, "  LPG alone:      %s\n  frame: %s\n", m.Ref, hex.EncodeToString(m.Frame))
		} else {
			fmt.Fprintf(bw, "mismatch %s: embedded %s, generated %q, LPG %s\n", m.Source, m.Graph, m.Fallback, m.Ref)
		}
	}
	fmt.Fprintf(bw, "%d packets, %d mismatches\n", rep.Total, len(rep.Mismatches))
}
