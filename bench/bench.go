// Package bench measures the generated software fallback: it builds the
// generated code with a harness (the real generated code runs, compiled by
// the go command), times it on frames aimed at the stack's endpoints next
// to the all-software pipeline (the whole LPG on one queue, also
// generated), and times the baselines of package baseline (hand-written,
// and written with gopacket) in the same run.
package bench

import (
	"bytes"
	"embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/bench/baseline"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/internal/pred"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/sim"
)

// softwareNIC is a NIC that does nothing: every frame to one queue, so
// the whole LPG runs in software.
const softwareNIC = `graph software {
    cluster Rx {
        node Queue0 {
            attr "source"
            port out[]
        }
    }
}`

// Figures are the nanoseconds per frame of each variant on one set of
// frames, each the median of interleaved rounds in one process.
type Figures struct {
	Fallback float64 // the generated code of the embedding, NIC verdicts in
	Software float64 // the whole LPG generated for one queue, no NIC help
	Hand     float64 // hand-written: same checks, fixed offsets, port array
	HandMaps float64 // hand-written decoder, same checks, packed-key maps
	Gopacket float64 // gopacket DecodingLayerParser, same checks and maps
}

// Report is what bench measured.
type Report struct {
	Frames int     // frames in each set
	Small  Figures // minimum-size frames (60 bytes for UDP)
	Mixed  Figures // minimum-size and typical frames (64 and 512 bytes of data)
	Allocs float64 // allocations per frame of the generated code
	// SavedPercent is how much of the all-software pipeline's time the
	// embedding saves on the mixed frames.
	SavedPercent float64
}

// Line is the last line of `dragonc bench` (docs/cli.md), on the mixed
// frames.
func (r Report) Line() string {
	return fmt.Sprintf("fallback %.1f ns/frame, software-only %.1f ns/frame, gopacket baseline %.1f ns/frame, %g allocs/frame",
		r.Mixed.Fallback, r.Mixed.Software, r.Mixed.Gopacket, r.Allocs)
}

// Table writes every figure and the ratios to the generated code.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %12s %12s\n", "ns/frame (ratio to the fallback)", "64-byte", "mixed")
	row := func(name string, small, mixed float64) {
		fmt.Fprintf(&b, "%-34s %5.1f (%4.2fx) %5.1f (%4.2fx)\n", name, small, small/r.Small.Fallback, mixed, mixed/r.Mixed.Fallback)
	}
	row("generated fallback (this plan)", r.Small.Fallback, r.Mixed.Fallback)
	row("all-software LPG (generated)", r.Small.Software, r.Mixed.Software)
	row("hand-written, port array", r.Small.Hand, r.Mixed.Hand)
	row("hand-written, decoder + maps", r.Small.HandMaps, r.Mixed.HandMaps)
	row("gopacket DecodingLayerParser", r.Small.Gopacket, r.Mixed.Gopacket)
	return b.String()
}

// Frames makes frames aimed at every endpoint: minimum-size frames and
// frames with typical payloads (64 and 512 bytes of data).
func Frames(st *lpg.Stack, n int) [][]byte {
	aimed := Aimed(st, n)
	if len(aimed) == 0 {
		return nil
	}
	var out [][]byte
	for i := 0; len(out) < n; i++ {
		b := aimed[i%len(aimed)]
		switch i % 4 {
		case 1: // typical: 64 bytes of data
			b = grow(b, 64)
		case 3: // typical: 512 bytes of data
			b = grow(b, 512)
		}
		out = append(out, b)
	}
	return out
}

// Aimed makes up to n minimum-size frames aimed at the endpoints, each
// with a good CRC.
func Aimed(st *lpg.Stack, n int) [][]byte {
	g := sim.NewGen(st, 1)
	var aimed [][]byte
	for i := 0; i < 4*len(st.Endpoints)+64 && len(aimed) < n; i++ {
		f := g.Next()
		if strings.HasPrefix(f.Label, "at ") && f.CRCOK {
			aimed = append(aimed, f.Data)
		}
	}
	return aimed
}

// grow appends data to a UDP/TCP frame and fixes lengths and checksums by
// rebuilding it from its fields.
func grow(b []byte, n int) []byte {
	var f packet.Frame
	f.Decode(b)
	get := func(name string) uint64 { v, _ := f.Field(name); return v }
	if _, ok := f.Field("l4.dport"); !ok {
		return b
	}
	src, dst := uint32(get("ip.src")), uint32(get("ip.dst"))
	s := packet.Spec{DstMAC: b[0:6], SrcMAC: b[6:12], Src: pred.Addr(src).AsSlice(), Dst: pred.Addr(dst).AsSlice(), Proto: uint8(get("ip.proto")),
		SrcPort: uint16(get("l4.sport")), DstPort: uint16(get("l4.dport")), TCPFlags: uint8(get("tcp.flags")), Payload: make([]byte, n)}
	out, err := packet.Build(s)
	if err != nil {
		return b
	}
	return out
}

// Run measures the fallback of r on frames. The go command builds the
// harness; work is a scratch directory.
func Run(r *dembed.Result, st *lpg.Stack, frames [][]byte, work string) (Report, error) {
	return RunProgress(r, st, frames, work, nil)
}

// Stages of a bench run, for progress reports.
var Stages = []string{"generating code", "simulating the NIC", "building the harness", "timing every variant, interleaved"}

// baselineFiles are the baselines' sources, copied into the harness.
//
//go:embed baseline/config.go baseline/hand.go baseline/careful.go baseline/gopacket.go
var baselineFiles embed.FS

// GopacketVersion is the gopacket the harness is built with: dragonc's
// own (a test keeps the two equal).
const GopacketVersion = "v1.7.7"

// RunProgress is Run, calling progress (when not nil) as each stage of
// Stages begins. frames are the mixed set; the minimum-size set is made
// from the stack.
func RunProgress(r *dembed.Result, st *lpg.Stack, frames [][]byte, work string, progress func(stage int)) (Report, error) {
	if progress == nil {
		progress = func(int) {}
	}
	progress(0)
	rep := Report{Frames: len(frames)}
	if len(frames) == 0 {
		return rep, fmt.Errorf("the stack declares no endpoint to aim frames at")
	}
	soft, err := softwareOnly(r, st)
	if err != nil {
		return rep, err
	}
	// The two generated packages and the baselines in one harness module.
	files := map[string][]byte{"go.mod": []byte("module dragoncbench\n\ngo 1.25\n\nrequire github.com/gopacket/gopacket " + GopacketVersion + "\n")}
	for dir, res := range map[string]*dembed.Result{"emb": r, "sw": soft} {
		if err := gofallback.AddTo(files, "dragoncbench", dir, "bench", res, st); err != nil {
			return rep, err
		}
	}
	for _, name := range []string{"config.go", "hand.go", "careful.go", "gopacket.go"} {
		b, err := baselineFiles.ReadFile("baseline/" + name)
		if err != nil {
			return rep, err
		}
		files[filepath.Join("baseline", name)] = b
	}
	files["main.go"] = []byte(harness)
	files["config.go"] = []byte(fmt.Sprintf("// Code generated by dragonc bench. DO NOT EDIT.\n\npackage main\n\nimport \"dragoncbench/baseline\"\n\nvar config = %#v\n", baseline.FromStack(st)))
	if err := gofallback.WriteTree(work, files); err != nil {
		return rep, err
	}
	// Where the NIC puts each frame, and what it reports.
	progress(1)
	s, err := sim.New(r.Embedding)
	if err != nil {
		return rep, err
	}
	var in bytes.Buffer
	small := Aimed(st, len(frames))
	for set, fs := range [][][]byte{small, frames} {
		for _, f := range fs {
			res := s.Run(f, true)
			if res.Queue < 0 {
				continue
			}
			var flags uint64
			for _, rp := range s.LastReported() {
				if rp[1] == "true" {
					flags |= 1 << uint(flagIndex(r, rp[0]))
				}
			}
			ipOK, l4OK := baseline.Checksums(f)
			binary.Write(&in, binary.LittleEndian, uint32(len(f)))
			binary.Write(&in, binary.LittleEndian, int32(res.Queue))
			binary.Write(&in, binary.LittleEndian, flags)
			in.Write([]byte{byte(set), b2u(ipOK), b2u(l4OK)})
			in.Write(f)
		}
	}
	// Kept beside the harness, so that a run can be repeated by hand
	// (./harness < frames.bin) when the work directory is kept.
	if err := os.WriteFile(filepath.Join(work, "frames.bin"), in.Bytes(), 0o644); err != nil {
		return rep, err
	}
	progress(2)
	bin := filepath.Join(work, "harness")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = work
	// The harness needs gopacket: from the module cache (or the proxy),
	// recording its checksums in the harness's own go.sum.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off")
	if out, err := build.CombinedOutput(); err != nil {
		return rep, fmt.Errorf("building the harness: %w\n%s", err, out)
	}
	progress(3)
	run := exec.Command(bin)
	run.Stdin = &in
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		return rep, fmt.Errorf("running the harness: %w\n%s", err, stderr.String())
	}
	var res struct {
		Frames       [2]int
		Small, Mixed Figures
		Allocs       float64
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return rep, fmt.Errorf("harness output: %w: %s", err, out)
	}
	rep.Frames = res.Frames[1]
	rep.Small, rep.Mixed, rep.Allocs = res.Small, res.Mixed, res.Allocs
	if rep.Mixed.Software > 0 {
		rep.SavedPercent = 100 * (1 - rep.Mixed.Fallback/rep.Mixed.Software)
	}
	return rep, nil
}

// flagIndex is the bit of a descriptor-reported node in the generated Flags.
func flagIndex(r *dembed.Result, node string) int {
	for i, f := range gofallback.FlagOrder(r) {
		if f == node {
			return i
		}
	}
	return 63
}

// softwareOnly embeds the stack on a NIC that does nothing.
func softwareOnly(r *dembed.Result, st *lpg.Stack) (*dembed.Result, error) {
	m, diags := prg.Load("software.prg", []byte(softwareNIC))
	if m == nil {
		return nil, fmt.Errorf("dragonc: internal error: %v", diags)
	}
	// The whole (empty) NIC: it has no driver, and nothing to copy with.
	in, _, err := dembed.NewInput("software", m, st, r.Embedding.LPG, dembed.Options{Strategy: dembed.StrategyDragonetGreedy, Target: dembed.TargetSilicon, CopyEngine: dembed.NoCopyEngine})
	if err != nil {
		return nil, err
	}
	return dembed.Run(in)
}

// harness reads the frames of both sets from stdin (length, queue, flags,
// set, checksum verdicts, bytes), checks that every variant delivers each
// frame to the same endpoint, and times the variants in interleaved
// rounds, each round in a different order; a figure is the median of its
// rounds.
const harness = `// Code generated by dragonc bench. DO NOT EDIT.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	"dragoncbench/baseline"
	emb "dragoncbench/emb"
	sw "dragoncbench/sw"
)

type frame struct {
	data       []byte
	queue      int
	flags      uint64
	ipOK, l4OK bool
}

var (
	careful = baseline.NewCareful(config)
	hand    = baseline.NewHand(config)
	gp      = baseline.NewGopacket(config)
	sink    int
)

func fallback(fs []frame) {
	for i := range fs {
		f := &fs[i]
		v := emb.Process(f.queue, f.data, emb.Meta{CRCOK: true, Flags: emb.Flags(f.flags)})
		sink += int(v.Index)
	}
}

func software(fs []frame) {
	for i := range fs {
		v := sw.Process(0, fs[i].data, sw.Meta{CRCOK: true})
		sink += int(v.Index)
	}
}

func handWritten(fs []frame) {
	for i := range fs {
		f := &fs[i]
		sink += int(careful.Process(f.data, true, f.ipOK, f.l4OK))
	}
}

func handMaps(fs []frame) {
	for i := range fs {
		f := &fs[i]
		sink += int(hand.Process(f.data, true, f.ipOK, f.l4OK))
	}
}

func gopacket(fs []frame) {
	for i := range fs {
		f := &fs[i]
		sink += int(gp.Process(f.data, true, f.ipOK, f.l4OK))
	}
}

var variants = [...]func([]frame){fallback, software, handWritten, handMaps, gopacket}

const nv = len(variants)

// measure times the variants on one set: 15 rounds, each running every
// variant over the set reps times, in a rotating order.
func measure(fs []frame) [nv]float64 {
	reps := 1
	for {
		start := time.Now()
		for r := 0; r < reps; r++ {
			fallback(fs)
		}
		if time.Since(start) > 2*time.Millisecond || reps > 1<<20 {
			break
		}
		reps *= 2
	}
	const rounds = 15
	var ns [nv][]float64
	for round := 0; round < rounds; round++ {
		for k := 0; k < nv; k++ {
			v := (round + k) % nv
			start := time.Now()
			for r := 0; r < reps; r++ {
				variants[v](fs)
			}
			ns[v] = append(ns[v], float64(time.Since(start).Nanoseconds())/float64(reps*len(fs)))
		}
	}
	var out [nv]float64
	for v := range ns {
		sort.Float64s(ns[v])
		out[v] = ns[v][rounds/2]
	}
	return out
}

func endpointOf(v emb.Verdict) int32 {
	if v.Kind == emb.Deliver {
		return int32(v.Index)
	}
	return -1
}

func main() {
	r := bufio.NewReader(os.Stdin)
	var sets [2][]frame
	for {
		var n uint32
		var q int32
		var flags uint64
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			break
		}
		binary.Read(r, binary.LittleEndian, &q)
		binary.Read(r, binary.LittleEndian, &flags)
		var hdr [3]byte
		io.ReadFull(r, hdr[:])
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			break
		}
		set := int(hdr[0] & 1)
		sets[set] = append(sets[set], frame{b, int(q), flags, hdr[1] == 1, hdr[2] == 1})
	}
	if len(sets[0]) == 0 || len(sets[1]) == 0 {
		fmt.Fprintln(os.Stderr, "no frames")
		os.Exit(1)
	}
	// The same work: every variant delivers every frame to the same endpoint.
	for _, fs := range sets {
		for _, f := range fs {
			want := endpointOf(emb.Process(f.queue, f.data, emb.Meta{CRCOK: true, Flags: emb.Flags(f.flags)}))
			s := sw.Process(0, f.data, sw.Meta{CRCOK: true})
			got := [4]int32{-1, careful.Process(f.data, true, f.ipOK, f.l4OK), hand.Process(f.data, true, f.ipOK, f.l4OK), gp.Process(f.data, true, f.ipOK, f.l4OK)}
			if s.Kind == sw.Deliver {
				got[0] = int32(s.Index)
			}
			for k, g := range got {
				if g != want {
					fmt.Fprintf(os.Stderr, "%s delivers frame %x to endpoint %d, the generated code to %d\n", []string{"the all-software LPG", "the hand-written baseline", "the hand-written baseline with maps", "the gopacket baseline"}[k], f.data, g, want)
					os.Exit(1)
				}
			}
		}
	}
	f0 := sets[0][0]
	allocs := testing.AllocsPerRun(100, func() {
		emb.Process(f0.queue, f0.data, emb.Meta{CRCOK: true, Flags: emb.Flags(f0.flags)})
	})
	small, mixed := measure(sets[0]), measure(sets[1])
	fig := func(x [nv]float64) map[string]float64 {
		return map[string]float64{"Fallback": x[0], "Software": x[1], "Hand": x[2], "HandMaps": x[3], "Gopacket": x[4]}
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"Frames": [2]int{len(sets[0]), len(sets[1])},
		"Small":  fig(small),
		"Mixed":  fig(mixed),
		"Allocs": allocs,
	})
	_ = sink
}
`

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}
