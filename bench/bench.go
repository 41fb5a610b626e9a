// Package bench measures the generated software fallback: it builds the
// generated code with a harness (the real generated code runs, compiled by
// the go command), times it on frames aimed at the stack's endpoints next
// to the all-software pipeline (the whole LPG on one queue, also
// generated), and times a baseline written with gopacket in the same run.
package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/costmodel"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/packet"
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

// Report is what bench measured.
type Report struct {
	Frames       int
	FallbackNs   float64
	SoftwareNs   float64
	GopacketNs   float64
	Allocs       float64
	Sizes        string
	SavedPercent float64
}

// Line is the last line of `dragonc bench` (docs/cli.md).
func (r Report) Line() string {
	return fmt.Sprintf("fallback %.1f ns/frame, software-only %.1f ns/frame, gopacket baseline %.1f ns/frame, %g allocs/frame",
		r.FallbackNs, r.SoftwareNs, r.GopacketNs, r.Allocs)
}

// Frames makes frames aimed at every endpoint: minimum-size frames and
// frames with typical payloads (64 and 512 bytes of data).
func Frames(st *lpg.Stack, n int) [][]byte {
	g := sim.NewGen(st, 1)
	var out [][]byte
	var aimed [][]byte
	for i := 0; i < 4*len(st.Endpoints)+64 && len(aimed) < n; i++ {
		f := g.Next()
		if strings.HasPrefix(f.Label, "at ") && f.CRCOK {
			aimed = append(aimed, f.Data)
		}
	}
	if len(aimed) == 0 {
		return nil
	}
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
	s := packet.Spec{DstMAC: b[0:6], SrcMAC: b[6:12], Src: ipBytes(src), Dst: ipBytes(dst), Proto: uint8(get("ip.proto")),
		SrcPort: uint16(get("l4.sport")), DstPort: uint16(get("l4.dport")), TCPFlags: uint8(get("tcp.flags")), Payload: make([]byte, n)}
	out, err := packet.Build(s)
	if err != nil {
		return b
	}
	return out
}

func ipBytes(a uint32) []byte { return []byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)} }

// Run measures the fallback of r on frames. The go command builds the
// harness; work is a scratch directory.
func Run(r *embed.Result, st *lpg.Stack, frames [][]byte, work string) (Report, error) {
	return RunProgress(r, st, frames, work, nil)
}

// Stages of a bench run, for progress reports.
var Stages = []string{"generating code", "simulating the NIC", "building the harness", "timing the generated code", "timing the gopacket baseline"}

// RunProgress is Run, calling progress (when not nil) as each stage of
// Stages begins.
func RunProgress(r *embed.Result, st *lpg.Stack, frames [][]byte, work string, progress func(stage int)) (Report, error) {
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
	// The two generated packages in one harness module.
	files := map[string][]byte{"go.mod": []byte("module dragoncbench\n\ngo 1.21\n")}
	for dir, res := range map[string]*embed.Result{"emb": r, "sw": soft} {
		fb, err := gofallback.Generate(res, st, gofallback.Options{Source: "bench", Module: "dragoncbench/" + dir, TestFrames: 1})
		if err != nil {
			return rep, err
		}
		for name, data := range fb {
			if name == "go.mod" || name == "fallback_test.go" {
				continue
			}
			files[filepath.Join(dir, name)] = data
		}
	}
	files["main.go"] = []byte(harness)
	for name, data := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return rep, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return rep, err
		}
	}
	// Where the NIC puts each frame, and what it reports.
	progress(1)
	s, err := sim.New(r.Embedding)
	if err != nil {
		return rep, err
	}
	var in bytes.Buffer
	kept := 0
	for _, f := range frames {
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
		binary.Write(&in, binary.LittleEndian, uint32(len(f)))
		binary.Write(&in, binary.LittleEndian, int32(res.Queue))
		binary.Write(&in, binary.LittleEndian, flags)
		in.Write(f)
		kept++
	}
	rep.Frames = kept
	progress(2)
	bin := filepath.Join(work, "harness")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = work
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return rep, fmt.Errorf("building the harness: %v\n%s", err, out)
	}
	progress(3)
	run := exec.Command(bin)
	run.Stdin = &in
	out, err := run.Output()
	if err != nil {
		return rep, fmt.Errorf("running the harness: %v", err)
	}
	var res struct{ Emb, Sw, Allocs float64 }
	if err := json.Unmarshal(out, &res); err != nil {
		return rep, fmt.Errorf("harness output: %v: %s", err, out)
	}
	rep.FallbackNs, rep.SoftwareNs, rep.Allocs = res.Emb, res.Sw, res.Allocs
	progress(4)
	rep.GopacketNs = Gopacket(st, frames)
	if rep.SoftwareNs > 0 {
		rep.SavedPercent = 100 * (1 - rep.FallbackNs/rep.SoftwareNs)
	}
	return rep, nil
}

// flagIndex is the bit of a descriptor-reported node in the generated Flags.
func flagIndex(r *embed.Result, node string) int {
	for i, f := range gofallback.FlagOrder(r) {
		if f == node {
			return i
		}
	}
	return 63
}

// softwareOnly embeds the stack on a NIC that does nothing.
func softwareOnly(r *embed.Result, st *lpg.Stack) (*embed.Result, error) {
	m, diags := prg.Load("software.prg", []byte(softwareNIC))
	if m == nil {
		return nil, fmt.Errorf("dragonc: internal error: %v", diags)
	}
	return embed.Run(&embed.Input{NIC: "software", Model: m, Stack: st, LPG: r.Embedding.LPG, Cost: costmodel.Balance{}, Strategy: "dragonet-greedy"})
}

// Gopacket times the baseline: gopacket's DecodingLayerParser over
// Ethernet, IPv4, UDP and TCP, then a Go map from the 5-tuple (and the
// listening port) to the endpoint.
func Gopacket(st *lpg.Stack, frames [][]byte) float64 {
	type key struct {
		proto      uint8
		src, dst   [4]byte
		sport, dpt uint16
	}
	table := map[key]int{}
	for i, e := range st.Endpoints {
		proto := uint8(packet.ProtoUDP)
		if e.Proto == lpg.TCP {
			proto = packet.ProtoTCP
		}
		k := key{proto: proto, dpt: e.Port}
		if e.Flow {
			copy(k.src[:], ipBytes(e.Remote))
			k.sport = e.RPort
		}
		if !e.AnyAddr {
			copy(k.dst[:], ipBytes(e.Addr))
		}
		table[k] = i
	}
	var eth layers.Ethernet
	var ip4 layers.IPv4
	var udp layers.UDP
	var tcp layers.TCP
	var payload gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &tcp, &payload)
	parser.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 8)
	sink := 0
	res := testing.Benchmark(func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			data := frames[i%len(frames)]
			if err := parser.DecodeLayers(data, &decoded); err != nil && len(decoded) == 0 {
				continue
			}
			var k key
			for _, lt := range decoded {
				switch lt {
				case layers.LayerTypeIPv4:
					copy(k.src[:], ip4.SrcIP.To4())
					copy(k.dst[:], ip4.DstIP.To4())
					k.proto = uint8(ip4.Protocol)
				case layers.LayerTypeUDP:
					k.sport, k.dpt = uint16(udp.SrcPort), uint16(udp.DstPort)
				case layers.LayerTypeTCP:
					k.sport, k.dpt = uint16(tcp.SrcPort), uint16(tcp.DstPort)
				}
			}
			if ep, ok := table[k]; ok {
				sink += ep
				continue
			}
			k.src, k.sport = [4]byte{}, 0
			if ep, ok := table[k]; ok {
				sink += ep
				continue
			}
			k.dst = [4]byte{}
			sink += table[k]
		}
	})
	_ = sink
	return float64(res.T.Nanoseconds()) / float64(res.N)
}

// harness reads frames from stdin (length, queue, flags, bytes) and times
// both generated packages with testing.Benchmark.
const harness = `// Code generated by dragonc bench. DO NOT EDIT.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"testing"

	emb "dragoncbench/emb"
	sw "dragoncbench/sw"
)

type frame struct {
	data  []byte
	queue int
	flags uint64
}

func main() {
	r := bufio.NewReader(os.Stdin)
	var frames []frame
	for {
		var n uint32
		var q int32
		var flags uint64
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			break
		}
		binary.Read(r, binary.LittleEndian, &q)
		binary.Read(r, binary.LittleEndian, &flags)
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			break
		}
		frames = append(frames, frame{b, int(q), flags})
	}
	if len(frames) == 0 {
		os.Exit(1)
	}
	sink := 0
	e := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			f := &frames[i%len(frames)]
			v := emb.Process(f.queue, f.data, emb.Meta{CRCOK: true, Flags: emb.Flags(f.flags)})
			sink += int(v.Kind)
		}
	})
	s := testing.Benchmark(func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f := &frames[i%len(frames)]
			v := sw.Process(0, f.data, sw.Meta{CRCOK: true})
			sink += int(v.Kind)
		}
	})
	_ = sink
	json.NewEncoder(os.Stdout).Encode(map[string]float64{
		"Emb":    float64(e.T.Nanoseconds()) / float64(e.N),
		"Sw":     float64(s.T.Nanoseconds()) / float64(s.N),
		"Allocs": float64(e.AllocsPerOp()),
	})
}
`
