package embed

import (
	"errors"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/diag"
	"github.com/dragonc/dragonc/prg"
)

// model loads a NIC model written in the test.
func model(t *testing.T, src string) *prg.Model {
	t.Helper()
	m, diags := prg.Load("nic.unicorn", []byte(src))
	if m == nil {
		t.Fatal(diags)
	}
	return m
}

// A model in Dragonet's conventions (prgE10kImpl-offload.unicorn's shape):
// after the queue, nodes that report the checksum verdicts of the LPG's
// nodes by naming them, and an L2 filter naming LPG nodes dragonc's LPG
// does not have (prgE10kImpl-minimal.unicorn's PrgL2Filter).
const foreignNIC = `graph e10kPRG {
    cluster Rx {
        boolean L2EtherValidCRC {
            attr "source"
            port true[L2Filter]
            port false[] }
        node L2Filter {
            port out[Queues]
            predicate out "%s"
        }
        config Queues {
            attr "software"
            port out[IPv4Csum]
            port drop[]
            port init[] }
        node IPv4Csum {
            attr "software"
            port valid[Valid]
            port invalid[Invalid]
            predicate valid "pred(RxL3IPv4ValidChecksum,true)"
            predicate invalid "pred(RxL3IPv4ValidChecksum,false)"
        }
        node Valid { attr "software" port out[] }
        node Invalid { attr "software" port out[] }
    }
}
`

const udpStack = `stack s {
    interface eth0 { mac 00:1b:21:00:00:07 ip 10.0.0.1/24 }
    cores 0..1
    endpoint dns udp listen *:53
    endpoint ntp udp flow 10.0.0.1:123 -> 10.0.0.9:123
}
`

// TestForeignAtomsResolved: atoms naming LPG nodes mean what those nodes
// decide on those ports, as Dragonet embeds by label: the model embeds,
// its predicates are the LPG's, and the self-check passes.
func TestForeignAtomsResolved(t *testing.T) {
	in := stackInput(t, "82599", udpStack, "balance", StrategyDefault)
	in.Model = model(t, strings.Replace(foreignNIC, "%s", "true", 1))
	if len(in.Model.Foreign) != 2 {
		t.Fatalf("foreign atoms %v, want pred(RxL3IPv4ValidChecksum,true) and false", in.Model.Foreign)
	}
	r, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := r.Model().G.Lookup("RxIPv4Csum__RxQ1")
	if n == nil {
		n, _ = r.Model().G.Lookup("RxIPv4Csum")
	}
	if n == nil {
		t.Fatal("no RxIPv4Csum node")
	}
	check, _ := in.LPG.Lookup("RxL3IPv4ValidChecksum")
	want := check.Port("true").Pred.String()
	if got := n.Port("valid").Pred.String(); got != want {
		t.Errorf("valid port means %s, want the LPG's %s", got, want)
	}
	if got := n.Port("invalid").Pred.String(); got != "!("+want+")" && got != "!"+want {
		t.Errorf("invalid port means %s, want the LPG's false port, not %s", got, want)
	}
	if err := r.SelfCheck(); err != nil {
		t.Error(err)
	}
}

// TestForeignAtomsRefused: an atom naming no node of the model nor of the
// LPG is an error at its place in the file, not an opaque atom that drops
// every frame (dragonc embed of prgE10kImpl-minimal.unicorn exited 0, and
// verify then found 898-965 mismatches per 1,000 frames).
func TestForeignAtomsRefused(t *testing.T) {
	in := stackInput(t, "82599", udpStack, "balance", StrategyDefault)
	in.Model = model(t, strings.Replace(foreignNIC, "%s", "and(pred(RxL2EtherValidUnicast,true),pred(RxL2EtherValidLocalMAC,true))", 1))
	_, err := Run(in)
	var dl diag.List
	if !errors.As(err, &dl) || len(dl) != 2 {
		t.Fatalf("want two diagnostics, got %v", err)
	}
	for i, want := range []string{"nic.unicorn:9:32: error: pred(RxL2EtherValidUnicast,true) names no node of NIC model e10kPRG, nor of the LPG s", "nic.unicorn:9:65: error: pred(RxL2EtherValidLocalMAC,true)"} {
		if got := dl[i].String(); !strings.HasPrefix(got, want) || dl[i].Code != diag.CodeForeignAtom {
			t.Errorf("diagnostic %d: %s\nwant %s... [%s]", i, got, want, diag.CodeForeignAtom)
		}
	}
}

// TestSelfCheckCatches: a NIC that drops what the LPG accepts (a MAC that
// takes unicast frames only, so no ARP broadcast reaches the host) embeds,
// but its plan treats frames otherwise than the LPG: the self-check says
// so and names the frames. The built-in models pass it (examples_test and
// sim's tests verify them frame by frame).
func TestSelfCheckCatches(t *testing.T) {
	in := stackInput(t, "82599", udpStack, "balance", StrategyDefault)
	in.Model = model(t, strings.Replace(foreignNIC, "%s", "eth.dst & 0x010000000000 == 0", 1))
	r, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	err = r.SelfCheck()
	if err == nil || !strings.Contains(err.Error(), "otherwise than the LPG alone") || !strings.Contains(err.Error(), "broadcast") {
		t.Fatalf("self-check: %v", err)
	}
	ok, err := Run(stackInput(t, "82599", udpStack, "balance", StrategyDefault))
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.SelfCheck(); err != nil {
		t.Errorf("82599: %v", err)
	}
}
