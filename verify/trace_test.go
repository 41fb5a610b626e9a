package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/sim"
)

// TestTraceEveryNICAndExample traces generated frames on every built-in
// NIC and example: each trace agrees with the LPG, starts where a frame
// enters, and names why a dropped frame was dropped.
func TestTraceEveryNICAndExample(t *testing.T) {
	examples, _ := filepath.Glob("../examples/*.lpg")
	staged := 0
	defer func() {
		if staged == 0 {
			t.Errorf("no frame decided by linux-xdp's eBPF stage")
		}
	}()
	for _, nic := range []string{"82576", "82599", "myri10g", "tigon", "linux-xdp"} {
		for _, ex := range examples {
			name := nic + "/" + strings.TrimSuffix(filepath.Base(ex), ".lpg")
			t.Run(name, func(t *testing.T) {
				r, st := planFor(t, nic, ex)
				g := sim.NewGen(st, 11)
				var in []TraceInput
				for i := 0; i < 400; i++ {
					f := g.Next()
					if !f.CRCOK {
						continue // a frame given to trace has a good CRC
					}
					in = append(in, TraceInput{Data: f.Data, Source: f.Label})
				}
				ts, _, err := Trace(r, st, TraceOptions{Frames: in})
				if err != nil {
					t.Fatal(err)
				}
				if len(ts) != len(in) {
					t.Fatalf("%d traces for %d frames", len(ts), len(in))
				}
				for _, tr := range ts {
					checkTrace(t, tr)
					// What linux-xdp decides before a queue, its eBPF
					// stage decides (drops malformed frames, answers
					// ARP); no other model has a programmable stage.
					if nic == "linux-xdp" && (tr.Queue < 0) != (tr.Stage != "") || nic != "linux-xdp" && tr.Stage != "" {
						t.Errorf("frame %d (%s): queue %d, decided by stage %q of %s", tr.Frame, tr.Source, tr.Queue, tr.Stage, nic)
					}
					if tr.Stage != "" {
						staged++
					}
				}
			})
		}
	}
}

func checkTrace(t *testing.T, tr FrameTrace) {
	t.Helper()
	if !tr.Match {
		t.Fatalf("frame %d (%s): embedded %s, LPG %s", tr.Frame, tr.Source, tr.Embedded, tr.Reference)
	}
	if len(tr.Hardware) == 0 {
		t.Fatalf("frame %d: no hardware steps", tr.Frame)
	}
	want := strings.SplitN(tr.Reference, " ", 2)
	switch want[0] {
	case "deliver":
		if tr.Outcome != "deliver" || tr.Endpoint != want[1] {
			t.Fatalf("frame %d: %s %s, LPG %s", tr.Frame, tr.Outcome, tr.Endpoint, tr.Reference)
		}
	case "reply":
		if tr.Outcome != "reply" || tr.Reason != want[1] {
			t.Fatalf("frame %d: %s %s, LPG %s", tr.Frame, tr.Outcome, tr.Reason, tr.Reference)
		}
	default:
		if tr.Outcome == "deliver" || tr.Reason == "" && tr.Reference != "drop" {
			t.Fatalf("frame %d: %s %q, LPG %s", tr.Frame, tr.Outcome, tr.Reason, tr.Reference)
		}
	}
	if tr.Queue < 0 {
		if len(tr.Software) != 0 {
			t.Fatalf("frame %d: dropped by the NIC but ran software", tr.Frame)
		}
		if tr.Outcome == "reply" {
			if tr.Stage == "" {
				t.Fatalf("frame %d: the NIC answered it, but no stage of the NIC is named", tr.Frame)
			}
			return
		}
		node := strings.SplitN(tr.Reason, ".", 2)[0]
		found := false
		for _, s := range tr.Hardware {
			found = found || s.Node == node
		}
		if !found {
			t.Fatalf("frame %d: dropped at %s, which is not on its hardware path", tr.Frame, tr.Reason)
		}
		return
	}
	if len(tr.Software) == 0 || tr.Software[0].Node != "RxQueue" {
		t.Fatalf("frame %d: software path does not start at RxQueue: %v", tr.Frame, tr.Software)
	}
	last := tr.Hardware[len(tr.Hardware)-1]
	if last.Node != fmt.Sprintf("RxQueue%d", tr.Queue) && !strings.Contains(last.Node, "Queue") {
		t.Fatalf("frame %d: hardware path ends at %s, queue %d", tr.Frame, last.Node, tr.Queue)
	}
}

// TestTraceFrames traces hand-built frames on the 82599 with the
// generated code, and checks the JSON contract.
func TestTraceFrames(t *testing.T) {
	r, st := planFor(t, "82599", "../examples/dns_ntp.lpg")
	mac := net.HardwareAddr{0x00, 0x1b, 0x21, 0x00, 0x00, 0x01}
	us, peer := net.IP{192, 0, 2, 10}, net.IP{198, 51, 100, 7}
	udp := func(dport uint16, f func(*packet.Spec)) TraceInput {
		s := packet.Spec{DstMAC: mac, Src: peer, Dst: us, Proto: packet.ProtoUDP, SrcPort: 4000, DstPort: dport}
		if f != nil {
			f(&s)
		}
		return TraceInput{Data: packet.MustBuild(s), Source: "built"}
	}
	in := []TraceInput{
		udp(53, nil),
		udp(9, nil),
		udp(53, func(s *packet.Spec) { s.Src = net.IP{127, 0, 0, 1} }),
		udp(123, func(s *packet.Spec) { s.Dst = net.IP{192, 0, 2, 255} }),
		{Data: packet.MustBuild(packet.Spec{EtherType: packet.EtherTypeARP, Src: peer, ARPTarget: us}), Source: "arp"},
		{Data: []byte{1, 2, 3}, Source: "runt"},
	}
	_, haveGo := exec.LookPath("go")
	ts, _, err := Trace(r, st, TraceOptions{Frames: in, Fallback: haveGo == nil, Work: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ outcome, endpoint, reason string }{
		{"deliver", "dns", ""},
		{"reply", "", "icmp-port-unreachable"},
		{"drop", "", "RxL3IPv4ValidSource.false"},
		{"drop", "", "RxL4UDPValidUnicastDest.false"}, // ntp is bound to 192.0.2.10: no broadcasts
		{"reply", "", "arp"},
		{"drop", "", "RxL2EtherValidLength.false"},
	}
	for i, w := range want {
		tr := ts[i]
		checkTrace(t, tr)
		if tr.Outcome != w.outcome || tr.Endpoint != w.endpoint || tr.Reason != w.reason {
			t.Errorf("frame %d: %s %q %q, want %s %q %q", i+1, tr.Outcome, tr.Endpoint, tr.Reason, w.outcome, w.endpoint, w.reason)
		}
		if haveGo == nil && tr.Queue >= 0 && tr.Generated != tr.Reference {
			t.Errorf("frame %d: generated code %q, LPG %q", i+1, tr.Generated, tr.Reference)
		}
	}
	if haveGo == nil && ts[0].Generated == "" {
		t.Error("the generated code did not run")
	}
	if ts[5].Queue != -1 {
		t.Errorf("a 3-byte frame reached queue %d", ts[5].Queue)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, ts); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(ts) {
		t.Fatalf("%d JSON lines for %d frames", len(lines), len(ts))
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		for _, k := range []string{"frame", "queue", "hardware", "software", "outcome", "endpoint", "reason"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d has no %q: %s", i+1, k, l)
			}
		}
		if int(m["frame"].(float64)) != i+1 {
			t.Errorf("line %d: frame %v", i+1, m["frame"])
		}
	}
	buf.Reset()
	if err := WriteText(&buf, ts[:1]); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"frame 1: built", "RxL4UDPDemux.dns  [udp.dport == 53]", "outcome: deliver to dns", "LPG alone:      deliver dns"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("text trace lacks %q:\n%s", s, buf.String())
		}
	}
}

// rssAfterSource is a NIC that drops frames from a group source MAC
// before its RSS node.
const rssAfterSource = `graph rss_after_source {
    resources Device { rx_queues 4 }
    cluster Rx {
        boolean L2EtherValidSource {
            port true[CRSS]
            port false[]
            predicate true "eth.src & 01:00:00:00:00:00 == 00:00:00:00:00:00"
        }
        config CRSS {
            hash { fields [ip.src ip.dst l4.sport l4.dport] buckets 128 ports [tcp udp] }
            port queues[Queue0..3]
            port default[Queue0]
        }
        node Queue0..3 { attr "source" port out[] }
    }
}
`

// TestTraceNoHashBeforeRSS: a frame the NIC drops before its RSS node has
// no rss_hash (docs/trace.md), while the same datagram from a unicast
// source, which RSS steers, has one.
func TestTraceNoHashBeforeRSS(t *testing.T) {
	model := filepath.Join(t.TempDir(), "rss_after_source.prg")
	if err := os.WriteFile(model, []byte(rssAfterSource), 0o644); err != nil {
		t.Fatal(err)
	}
	r, st := planFor(t, model, "../examples/dns_ntp.lpg")
	udp := func(src net.HardwareAddr) TraceInput {
		return TraceInput{Data: packet.MustBuild(packet.Spec{SrcMAC: src, DstMAC: net.HardwareAddr{0x00, 0x1b, 0x21, 0x00, 0x00, 0x01},
			Src: net.IP{198, 51, 100, 7}, Dst: net.IP{192, 0, 2, 10}, Proto: packet.ProtoUDP, SrcPort: 4000, DstPort: 53}), Source: src.String()}
	}
	ts, _, err := Trace(r, st, TraceOptions{Frames: []TraceInput{
		udp(net.HardwareAddr{0x02, 0, 0, 0, 0, 0x07}),
		udp(net.HardwareAddr{0x03, 0, 0, 0, 0, 0x07}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		checkTrace(t, tr)
	}
	if ok := ts[0]; ok.Queue < 0 || ok.RSSHash == "" || !hasStep(ok.Hardware, "RxCRSS") {
		t.Errorf("a unicast source: queue %d, rss_hash %q, path %v; want a queue and a hash through RxCRSS", ok.Queue, ok.RSSHash, ok.Hardware)
	}
	if bad := ts[1]; bad.Queue != -1 || bad.Reason != "RxL2EtherValidSource.false" || bad.RSSHash != "" {
		t.Errorf("a group source: queue %d, reason %q, rss_hash %q; want a drop at RxL2EtherValidSource and no hash", bad.Queue, bad.Reason, bad.RSSHash)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, ts[1:]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "rss_hash") {
		t.Errorf("trace --json of a frame dropped before RSS: %s", buf.String())
	}
}

func hasStep(path []Step, node string) bool {
	for _, s := range path {
		if s.Node == node {
			return true
		}
	}
	return false
}

func TestParseHexFrame(t *testing.T) {
	b, err := ParseHexFrame("0x00:1b 21")
	if err != nil || !bytes.Equal(b, []byte{0, 0x1b, 0x21}) {
		t.Errorf("got %x, %v", b, err)
	}
	for _, bad := range []string{"", "0x", "zz", "abc"} {
		if _, err := ParseHexFrame(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
