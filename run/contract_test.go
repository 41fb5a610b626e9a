package run

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dragonc/dragonc/verify"
)

// contractCorpus is the oracle-style corpus of TestRunAgreesWithVerify:
// what a hostile peer sends (junk), the hostile frames of
// TestHostilePeers, and ordinary requests, each made with gopacket.
func contractCorpus() [][]byte {
	frames := junk(400)
	for i, h := range []hostile{
		{dstMAC: bcastMAC, dst: net.IP{255, 255, 255, 255}, dport: 7},
		{dstMAC: bcastMAC, dst: net.IP{10, 9, 0, 255}, dport: 7007},
		{dport: 7, cut: 14},
		{dport: 7, cut: 14, payload: "hostile, 17 bytes", nocsum: true},
		{dport: 7, payload: "a"}, // a 43-byte frame: short, and whole
		{srcMAC: bcastMAC, dport: 7},
		{src: net.IP{240, 0, 0, 1}, dport: 4444},
		{vlan: 0, dport: 7},
		{vlan: 5, dport: 7},
		{vlan: 0, dport: 4444},
		{icmp: true},
		{icmp: true, vlan: 0},
		{dport: 7007},
		{dport: 9},
		{dport: 4444},
	} {
		if h.vlan == 0 && i < 7 {
			h.vlan = -1
		}
		if h.sport == 0 {
			h.sport = uint16(42000 + i)
		}
		if h.payload == "" && !h.icmp {
			h.payload = fmt.Sprintf("contract %d", i)
		}
		frames = append(frames, build(h))
	}
	spoof := net.HardwareAddr{2, 0, 0, 0, 0, 0x66}
	frames = append(frames,
		arpRequest(spoof, spoof, peerAddr, stackIP),
		arpRequest(spoof, spoof, net.IP{0, 0, 0, 0}, stackIP),
		arpRequest(spoof, spoof, stackIP, stackIP),
		arpRequest(spoof, spoof, net.IP{224, 0, 0, 1}, stackIP))
	return frames
}

var counterRe = regexp.MustCompile(`(deliver|reply|sink|drop) (?:(\S+) )?(\d+)`)

// outcomes adds up the final counters of a run by outcome ("deliver
// echo", "drop RxL2EtherValidSource.false", ...).
func outcomes(final string) map[string]int {
	out := map[string]int{}
	for _, m := range counterRe.FindAllStringSubmatch(final, -1) {
		n, _ := strconv.Atoi(m[3])
		name := m[1]
		if m[2] != "" {
			name += " " + m[2]
		}
		out[name] += n
	}
	return out
}

// TestRunAgreesWithVerify: run and verify are one contract. Each frame of
// a corpus of hostile and ordinary frames is traced offline through the
// embedding (dragonc trace), and sent once to dragonc run on each socket
// kind; the outcomes the run counts are the outcomes the trace gives the
// frames that reach a queue, frame for frame in number.
func TestRunAgreesWithVerify(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	corpus := contractCorpus()
	var in []verify.TraceInput
	for i, f := range corpus {
		in = append(in, verify.TraceInput{Data: f, Source: fmt.Sprintf("corpus #%d", i)})
	}
	ts, _, err := verify.Trace(r, st, verify.TraceOptions{Frames: in})
	if err != nil {
		t.Fatal(err)
	}
	// A frame the NIC's programmable stage decides (the XDP program on
	// AF_XDP) has the LPG's outcome too: counted on the run's "xdp
	// stage" line where the stage ran, by the loops where it did not
	// (AF_PACKET; and its answers, which it leaves to the loops on a
	// veth).
	want := map[string]int{}
	nicDrops := 0
	for _, tr := range ts {
		if tr.Queue >= 0 || tr.Stage != "" {
			want[tr.Embedded]++
		} else {
			nicDrops++
		}
	}
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) {
			sv := serveIn(t, a, r, st, socket)
			err := inNS(b, func() error {
				w, err := openWire("vB")
				if err != nil {
					return err
				}
				defer w.close()
				for i, f := range corpus {
					if err := w.send(f); err != nil {
						return fmt.Errorf("frame %d: %w", i, err)
					}
					if i%20 == 19 {
						time.Sleep(2 * time.Millisecond) // no ring overflows
					}
				}
				return nil
			})
			// The last frames are served before the counters are read.
			time.Sleep(500 * time.Millisecond)
			if serr := sv.stop(); serr != nil && err == nil {
				err = serr
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, sv.log.String())
			}
			final := sv.final()
			got := outcomes(final)
			var diffs []string
			kernel := 0
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				seen := map[string]bool{}
				for k := range want {
					seen[k] = true
				}
				for k := range got {
					seen[k] = true
				}
				for k := range seen {
					if !yield(k) {
						return
					}
				}
			}) {
				// A frame the LPG drops at the link layer may never reach
				// the stack's sockets: the eBPF stage passes what is not
				// the stack's (another EtherType, a VLAN) to the kernel.
				// Every other outcome is the same, frame for frame.
				l2 := strings.HasPrefix(k, "drop RxL2")
				if got[k] != want[k] && !(l2 && got[k] < want[k]) {
					diffs = append(diffs, fmt.Sprintf("%s: run %d, trace %d", k, got[k], want[k]))
				}
				if l2 {
					kernel += want[k] - got[k]
				}
			}
			// Every frame is accounted for: taken by a loop, left to
			// the kernel, or dropped by the model's NIC.
			in := 0
			for _, m := range regexp.MustCompile(`queue \d+: in (\d+)`).FindAllStringSubmatch(final, -1) {
				n, _ := strconv.Atoi(m[1])
				in += n
			}
			staged := 0
			if m := regexp.MustCompile(`(?m)^xdp stage: (.*)$`).FindStringSubmatch(final); m != nil {
				for _, n := range outcomes(m[1]) {
					staged += n
				}
			}
			if in+staged+kernel+nicDrops != len(corpus) {
				t.Errorf("%d frames taken by the loops, %d decided by the XDP stage, %d left to the kernel, %d dropped by the NIC: %d, not the %d sent", in, staged, kernel, nicDrops, in+staged+kernel+nicDrops, len(corpus))
			}
			t.Logf("%d frames: %d served by the loops and %d decided by the XDP stage with the trace's outcomes, %d link-layer drops left to the kernel by the eBPF stage, %d dropped by the model's NIC", len(corpus), in, staged, kernel, nicDrops)
			if len(diffs) > 0 {
				t.Errorf("run and trace disagree on %d outcomes of %d frames:\n%s\n%s", len(diffs), len(corpus), strings.Join(diffs, "\n"), final)
			}
		})
	}
}
