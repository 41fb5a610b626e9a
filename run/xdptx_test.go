package run

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run/dataplane"
)

// TestStageAnswersOnVeth serves in driver mode on a veth whose peer runs
// an XDP program (so that XDP_TX frames reach it): with XDPTX "on" the
// XDP stage itself answers the peer's ARP request, which the peer's
// neighbour table then holds (the echo that needed it is answered); with
// the default, on a veth in driver mode, the stage leaves the answer to
// the receive loops and says so.
func TestStageAnswersOnVeth(t *testing.T) {
	a, b := pair(t)
	if err := inNS(b, func() error { return attachPass(t, "vB") }); err != nil {
		t.Fatal(err)
	}
	r, st := embedTest(t, testStack)
	for _, c := range []struct {
		xdptx      string
		stageReply bool
	}{{"on", true}, {"", false}, {"off", false}} {
		t.Run("xdp-tx="+c.xdptx, func(t *testing.T) {
			ip(t, "-n", b, "neigh", "flush", "dev", "vB")
			sv, final := arpThroughRun(t, a, b, r, st, func(o *Options) { o.XDPTX, o.XDPMode = c.xdptx, "driver" })
			checkARPAnswer(t, sv, final, c.stageReply)
		})
	}
}

// TestStageAnswersOnVethGeneric: by default a veth is served in generic
// mode, whose XDP_TX frames go out as skbs that the peer takes without
// an XDP program of its own: the stage answers the peer's ARP request.
func TestStageAnswersOnVethGeneric(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	sv, final := arpThroughRun(t, a, b, r, st, func(*Options) {})
	if !strings.Contains(sv.log.String(), "fed by an XDP program in generic mode") {
		t.Errorf("a veth is not served in generic mode:\n%s", sv.log.String())
	}
	checkARPAnswer(t, sv, final, true)
}

// arpThroughRun serves r and st on AF_XDP in namespace a with the
// options edit sets, sends an echo from namespace b that needs an ARP
// answer first, stops the run and returns it with its final counters.
func arpThroughRun(t *testing.T, a, b string, r *dembed.Result, st *lpg.Stack, edit func(*Options)) (*liveRun, dataplane.Report) {
	t.Helper()
	var mu sync.Mutex
	var final dataplane.Report
	sv := serveIn(t, a, r, st, "xdp", func(o *Options) {
		edit(o)
		o.OnReport = func(r dataplane.Report) {
			mu.Lock()
			defer mu.Unlock()
			if r.Final {
				final = r
			}
		}
	})
	if err := inNS(b, func() error {
		_, err := udpExchange(7, []byte("needs an ARP answer first"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return sv, final
}

// checkARPAnswer fails the test unless the peer's ARP request was
// answered by the XDP stage (byStage) or else by the receive loops, and
// the run said that the loops answer exactly when they do.
func checkARPAnswer(t *testing.T, sv *liveRun, final dataplane.Report, byStage bool) {
	t.Helper()
	stage := false
	for _, o := range final.Stage {
		stage = stage || o.Name == "reply arp" && o.Count > 0
	}
	loops := false
	for _, q := range final.Queues {
		for _, o := range q.Outcomes {
			loops = loops || o.Name == "reply arp" && o.Count > 0
		}
	}
	if stage != byStage || loops == byStage {
		t.Errorf("ARP answered by the stage: %v, by the loops: %v; want the stage %v\n%s", stage, loops, byStage, sv.final())
	}
	if says := strings.Contains(sv.log.String(), "leaves its answers to the receive loops"); says == byStage {
		t.Errorf("the note about the stage's answers: %v, want %v:\n%s", says, !byStage, sv.log.String())
	}
}

// attachPass attaches an XDP program that passes every frame to ifname
// (on the calling thread's namespace) until the test ends.
func attachPass(t *testing.T, ifname string) error {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}}) // XDP_PASS
	if err != nil {
		return err
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
	if err != nil {
		prog.Close()
		return errors.Join(errors.New("attaching XDP_PASS to the peer"), err)
	}
	t.Cleanup(func() { l.Close(); prog.Close() })
	return nil
}
