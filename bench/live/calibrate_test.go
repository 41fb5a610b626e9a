package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/sovia"
)

func calibrateNamespaces() []string {
	var out []string
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		// This process's: another test binary may calibrate meanwhile.
		if strings.HasPrefix(e.Name(), fmt.Sprintf("%s%d-", CalibratePrefix, os.Getpid())) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCalibrateCancelled: a calibration stopped half-way (SIGINT, as the
// command maps it to its context), with dragonc run serving the VI,
// returns the context's error and removes its namespaces; one that ran,
// with package sovia serving the VI, leaves none either.
func TestCalibrateCancelled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("calibrate needs root")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var made bool
	say := func(format string, args ...any) {
		if strings.HasPrefix(format, "namespaces") {
			made = len(calibrateNamespaces()) == 2
		}
		if strings.HasPrefix(format, "round") {
			cancel()
		}
	}
	_, _, err := Calibrate(ctx, CalibrateOptions{Sizes: []int{64}, Rounds: 3, Exchanges: 5, StreamBytes: -1, Say: say})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if !made {
		t.Error("the namespaces were not there while it measured")
	}
	if left := calibrateNamespaces(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	c, res, err := Calibrate(context.Background(), CalibrateOptions{Server: CalibrateSovia, Sizes: []int{4, 256}, Rounds: 1, Exchanges: 5, StreamBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sizes) != 2 || res.Sizes[0].Of[0].Samples != 5 || !(c.Sizes[1].VIMbps > 0) || !strings.Contains(c.Machine, "load average") || !strings.Contains(c.Method, "a sovia.OpenHost on each end") ||
		!strings.Contains(c.Method, "a Go echo server whose reads sleep in Go's poller at once, as the VI echo's receiver does") ||
		!strings.Contains(c.Method, "both clients sleep at once") {
		t.Errorf("calibration %+v", c)
	}
	if left := calibrateNamespaces(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestBestTCP: kernel TCP's figures are, figure by figure, those of the
// echo better at it over all the sizes (not the better one at each size,
// which would favour TCP by the noise), and the VI's are left as they
// are.
func TestBestTCP(t *testing.T) {
	res := &sovialat.Result{Rounds: 2, Exchanges: 3, Sizes: []sovialat.Size{{Size: 4, Of: []sovialat.Measure{
		{Target: "vi", P50us: 8, P99us: 30, Mbps: 5},
		// The spinning echo is better at p50 at this size alone.
		{Target: tcpSpinning, P50us: 7, P99us: 33, Mbps: 4, RoundP50us: [2]float64{6, 8}, Samples: 5},
		{Target: "tcp", P50us: 9, P99us: 35, Mbps: 3, RoundP50us: [2]float64{8, 10}, Samples: 6},
	}}, {Size: 64, Of: []sovialat.Measure{
		{Target: "vi", P50us: 9, P99us: 40, Mbps: 100},
		{Target: "tcp", P50us: 11, P99us: 60, Mbps: 80, RoundP50us: [2]float64{10, 12}, Samples: 6},
		{Target: tcpSpinning, P50us: 16, P99us: 50, Mbps: 90, RoundP50us: [2]float64{11, 17}, Samples: 6},
	}}}}
	got, from := bestTCP(res)
	if want := (tcpFrom{"tcp", tcpSpinning, tcpSpinning}); from != want {
		t.Errorf("bestTCP took the figures from %+v, want %+v", from, want)
	}
	// p50: the sleeping echo's (geometric means 9.95 against 10.58),
	// though the spinning one's is lower at 4 B; p99 and bandwidth: the
	// spinning echo's (40.6 against 45.8; 19.0 against 15.5).
	want := []sovialat.Size{{Size: 4, Of: []sovialat.Measure{
		{Target: "vi", P50us: 8, P99us: 30, Mbps: 5},
		{Target: "tcp", P50us: 9, P99us: 33, Mbps: 4, RoundP50us: [2]float64{8, 10}, Samples: 6},
	}}, {Size: 64, Of: []sovialat.Measure{
		{Target: "vi", P50us: 9, P99us: 40, Mbps: 100},
		{Target: "tcp", P50us: 11, P99us: 50, Mbps: 90, RoundP50us: [2]float64{10, 12}, Samples: 6},
	}}}
	if got.Rounds != 2 || got.Exchanges != 3 || !reflect.DeepEqual(got.Sizes, want) {
		t.Errorf("bestTCP:\n got %+v\nwant %+v", got.Sizes, want)
	}
	// Without the spinning echo (a self-check's result has none), TCP's
	// figures are the sleeping echo's.
	one := &sovialat.Result{Sizes: []sovialat.Size{{Size: 4, Of: []sovialat.Measure{{Target: "vi", P50us: 1}, {Target: "tcp", P50us: 2}}}}}
	if got, from := bestTCP(one); got.Sizes[0].Of[1].P50us != 2 || from != (tcpFrom{"tcp", "tcp", "tcp"}) {
		t.Errorf("bestTCP without a spinning echo: %+v", got.Sizes)
	}
}

// TestCalibrateRefused: options calibrate cannot measure are refused
// before it makes anything, as root or not.
func TestCalibrateRefused(t *testing.T) {
	for _, c := range []struct {
		opt  CalibrateOptions
		want string
	}{
		{CalibrateOptions{Server: "xdp"}, `no VI echo server "xdp"`},
		{CalibrateOptions{SelfCheck: "udp"}, `no provider "udp" to check against itself`},
		{CalibrateOptions{SelfCheck: tcpSpinning}, `no provider "tcp-spinning"`},
	} {
		if _, _, err := Calibrate(context.Background(), c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.opt, err, c.want)
		}
	}
	for _, p := range []string{"", "vi", "tcp"} {
		if err := CheckSelfCheck(p); err != nil {
			t.Errorf("CheckSelfCheck(%q): %v", p, err)
		}
	}
}

// TestChildArgs: a child takes the last of its arguments (a test
// binary's flags come first), and one started with too few says so
// rather than failing in a slice.
func TestChildArgs(t *testing.T) {
	args := []string{"-test.run=X", "ns", "a", "-", "50µs", "-"}
	if got := lastArgs(args, echoArgs); !reflect.DeepEqual(got, args[1:]) {
		t.Errorf("lastArgs: %q", got)
	}
	short := lastArgs([]string{"ns", "a"}, echoArgs)
	if len(short) != 2 {
		t.Errorf("lastArgs of too few: %q", short)
	}
	if err := echoChild(short); err == nil || !strings.Contains(err.Error(), "want 5 arguments, got 2") {
		t.Errorf("the echo child with 2 arguments: %v", err)
	}
}

// TestClientLinkNote: the client's counters are said, and every loss is
// named; a clean run says nothing was lost.
func TestClientLinkNote(t *testing.T) {
	clean := clientLinkNote(sovia.LinkCounts{Sent: 230, BulkSent: 10, Received: 12, BulkReceived: 10})
	if want := "the VI client's socket sent 230 frames (10 bulk datagrams among them) and received 12 (10 whole bulk datagrams); nothing lost on the client's side"; clean != want {
		t.Errorf("clean run:\n got %s\nwant %s", clean, want)
	}
	lossy := clientLinkNote(sovia.LinkCounts{Sent: 5, Dropped: 3, BulkAbandoned: 1})
	for _, want := range []string{"3 dropped by the kernel for want of room in the receive ring", "1 VIs that gave bulk datagrams up"} {
		if !strings.Contains(lossy, want) {
			t.Errorf("lossy run: %q lacks %q", lossy, want)
		}
	}
	if strings.Contains(lossy, "nothing lost") {
		t.Errorf("lossy run says nothing was lost: %s", lossy)
	}
}
