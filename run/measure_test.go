package run

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMeasuredSkew serves skewStack on AF_XDP sockets over a veth of two
// device queues and sends it the load it declares: e0 ten times as many
// datagrams as each of e1..e4, interleaved, each echoed before the next
// goes. The loads run measures add up to the frames delivered, status
// reads the latest, and each queue's measured share of the frames is the
// predicted one within 15% (the goal; the test counts frames, so
// it does not depend on how fast the peer sends). The rebalancer, on,
// finds nothing to move: the plan was made for this load.
func TestMeasuredSkew(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, skewStack)
	var mu sync.Mutex
	var loads []Load
	sv := serveIn(t, a, r, st, "xdp", func(o *Options) {
		// 1,120 frames in a report's 400 ms: enough for the rebalancer.
		o.Every, o.Rebalance = 400*time.Millisecond, true
		o.OnLoad = func(l Load) { mu.Lock(); loads = append(loads, l); mu.Unlock() }
	})
	sent, err := sendSkew(b, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, sv.log.String())
	}
	// status reads the latest load from the state directory while the
	// run lives (a report comes every 400 ms).
	var latest *Load
	for deadline := time.Now().Add(3 * time.Second); latest == nil && time.Now().Before(deadline); {
		inNS(a, func() error {
			latest, _ = LatestLoad("vA")
			return nil
		})
		time.Sleep(50 * time.Millisecond)
	}
	if latest == nil || len(latest.Queues) == 0 {
		t.Errorf("status reads no load: %+v", latest)
	}
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sv.out.String(), "measured share  predicted share") {
		t.Errorf("run prints no load:\n%s", sv.out.String())
	}
	if strings.Contains(sv.log.String(), "rebalance:") {
		t.Errorf("the rebalancer would move endpoints of a plan made for the load it serves:\n%s", sv.log.String())
	}
	// The loads add up, interval by interval, to every frame delivered.
	mu.Lock()
	defer mu.Unlock()
	frames := map[string]uint64{}
	queue := map[int]float64{}
	predicted := map[int]float64{}
	var all float64
	for _, l := range loads {
		for _, e := range l.Endpoints {
			frames[e.Endpoint] += e.Frames
		}
		for _, q := range l.Queues {
			queue[q.Queue] += q.Measured * l.Seconds
			all += q.Measured * l.Seconds
			predicted[q.Queue] = q.PredictedShare
		}
	}
	for _, l := range loads {
		t.Logf("over %.3f s: e0 %.0f fps, e1 %.0f fps (declared 2000, 200)", l.Seconds, l.Endpoints[0].Measured, l.Endpoints[1].Measured)
	}
	final := sv.final()
	for name, n := range frames {
		if want := fmt.Sprintf("deliver %s %d", name, n); n > 0 && !strings.Contains(final, want) {
			t.Errorf("the loads count %d frames of %s; the final counters do not say %q:\n%s", n, name, want, final)
		}
	}
	if frames["e0"] < 10*skewRounds || frames["e1"] < skewRounds {
		t.Fatalf("the loads count %v frames (sent %v) in %d loads:\n%s", frames, sent, len(loads), sv.out.String())
	}
	for _, q := range []int{1, 2} {
		got, want := queue[q]/all, predicted[q]
		t.Logf("queue %d: measured share %.2f%%, predicted %.2f%% (%+.2f%% of it); frames %v, datagrams sent %v", q, 100*got, 100*want, 100*(got-want)/want, frames, sent)
		if want == 0 || math.Abs(got-want) > 0.15*want {
			t.Errorf("queue %d: measured share %.3f, predicted %.3f: more than 15%% apart", q, got, want)
		}
	}
}

// skewRounds are the rounds sendSkew sends.
const skewRounds = 200

// sendSkew sends, from namespace ns, skewStack's declared load: rounds
// of 10 datagrams to e0 and 1 to each of e1..e4, a round every 5 ms
// (2,000 datagrams a second to e0 and 200 to each other, unless the
// exchanges take longer), each echoed before the next goes (resent on
// silence). It sends skewRounds rounds, or with more set, goes on while
// more says so, for up to ten times as many. It returns the datagrams
// sent to each.
func sendSkew(ns string, more func() bool) (map[string]int, error) { return sendHot(ns, 0, more) }

// sendHot is sendSkew with endpoint e<hot> the busy one.
func sendHot(ns string, hot int, more func() bool) (map[string]int, error) {
	sent := map[string]int{}
	err := inNS(ns, func() error {
		var conns [5]*net.UDPConn
		for i := range conns {
			c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IP{10, 9, 0, 2}, Port: 5000 + i}, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: 7000 + i})
			if err != nil {
				return err
			}
			defer c.Close()
			conns[i] = c
		}
		buf := make([]byte, 64)
		// exchange sends until the echo comes back, for up to 2 s.
		exchange := func(i int) error {
			c := conns[i]
			for deadline := time.Now().Add(2 * time.Second); ; {
				sent[fmt.Sprintf("e%d", i)]++
				if _, err := c.Write([]byte("load")); err != nil {
					return err
				}
				c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				_, err := c.Read(buf)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Now().Before(deadline) {
					continue
				}
				return err
			}
		}
		start := time.Now()
		for round := 0; round < skewRounds || more != nil && round < 10*skewRounds && more(); round++ {
			time.Sleep(time.Until(start.Add(time.Duration(round) * 5 * time.Millisecond)))
			for range 9 {
				if err := exchange(hot); err != nil {
					return fmt.Errorf("e%d: %w", hot, err)
				}
			}
			for i := range 5 {
				if err := exchange(i); err != nil {
					return fmt.Errorf("e%d: %w", i, err)
				}
			}
		}
		return nil
	})
	return sent, err
}

// TestRebalanceMoves serves evenStack's plan (every endpoint declared
// at 200 pps: e0 shares queue 1 with e1 and e3) and sends it skewStack's
// load: with --rebalance, run measures e0 ten times busier, says once
// that it gives e0 its queue alone, and serves the moves as a reload's
// short path does.
func TestRebalanceMoves(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, evenStack)
	sv := serveIn(t, a, r, st, "xdp", func(o *Options) { o.Every, o.Rebalance = 400*time.Millisecond, true })
	// Until run says it: at least 1,000 frames must come within one
	// report's 400 ms, which a busy machine may take longer to send.
	notYet := func() bool { return !strings.Contains(sv.log.String(), "rebalance:") }
	if _, err := sendSkew(b, notYet); err != nil {
		t.Fatalf("%v\n%s", err, sv.log.String())
	}
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	log := sv.log.String()
	// The moves are served from the run's session, without a restart or
	// new code.
	if n := strings.Count(log, "rebalance:"); n != 1 || strings.Contains(log, "not applied") || !strings.Contains(log, "reload 1 applied to stack") || !strings.Contains(log, "without a restart or new code") {
		t.Fatalf("run says %d times what it moves, want once, and applied:\n%s", n, log)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "rebalance:") || strings.Contains(l, "reload 1 applied") {
			t.Logf("%s", l)
		}
	}
}

// BenchmarkRebalanceMovedLoad measures what the goal names: a
// load that moves from one endpoint to another is re-planned within 2 s
// to at most 1.2 times the best imbalance, and no endpoint changes queue
// twice within RebalanceHold. It serves evenStack's plan with
// --rebalance (a report every 400 ms: the rebalancer wants 1,000 frames
// in one), sends skewStack's load with e0 busy until the first re-plan
// is applied, then makes e2 the busy one and counts the seconds until
// the next re-plan is applied (up to 15 s). It then sends e2's load for
// three more reports and sets the busiest queue's measured share beside
// the busiest queue's share in a full re-plan at the rates measured
// (which may move the endpoints the hold keeps where they are).
func BenchmarkRebalanceMovedLoad(b *testing.B) {
	for range b.N {
		a, peer := pair(b)
		r, st := embedTest(b, evenStack)
		var mu sync.Mutex
		var loads []Load
		sv := serveIn(b, a, r, st, "xdp", func(o *Options) {
			o.Every, o.Rebalance = 400*time.Millisecond, true
			o.OnLoad = func(l Load) { mu.Lock(); loads = append(loads, l); mu.Unlock() }
		})
		// busy sends with e<hot> busy until done says so, for up to 15 s.
		busy := func(hot int, done func() bool) {
			deadline := time.Now().Add(15 * time.Second)
			waiting := func() bool { return !done() && time.Now().Before(deadline) }
			for waiting() {
				if _, err := sendHot(peer, hot, waiting); err != nil {
					b.Fatalf("%v\n%s", err, sv.log.String())
				}
			}
		}
		applied := func(n int) func() bool {
			return func() bool { return strings.Contains(sv.log.String(), fmt.Sprintf("reload %d applied", n)) }
		}
		if busy(0, applied(1)); !applied(1)() {
			b.Fatalf("the load on e0 was not re-planned:\n%s", sv.log.String())
		}
		moved := time.Now()
		busy(2, applied(2))
		took := time.Since(moved)
		if !applied(2)() {
			b.Fatalf("the load moved to e2 was not re-planned within 15 s:\n%s", sv.log.String())
		}
		mu.Lock()
		seen := len(loads)
		mu.Unlock()
		busy(2, func() bool { mu.Lock(); defer mu.Unlock(); return len(loads) >= seen+3 })
		if err := sv.stop(); err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(sv.log.String(), "\n") {
			if strings.Contains(l, "rebalance:") {
				b.Logf("%s", l)
			}
		}
		mu.Lock()
		last := loads[len(loads)-1]
		mu.Unlock()
		var share float64
		for _, q := range last.Queues {
			share = max(share, q.MeasuredShare)
		}
		best, err := r.PlanAtRates(last.Rates())
		if err != nil {
			b.Fatal(err)
		}
		var bestShare float64
		for _, q := range best.PredictedLoad().Queues {
			bestShare = max(bestShare, q.Share)
		}
		b.Logf("busiest queue: %.1f%% of the frames measured, %.1f%% in the best plan at the measured rates", 100*share, 100*bestShare)
		b.ReportMetric(took.Seconds(), "s-to-replan")
		b.ReportMetric(share/bestShare, "imbalance/best")
	}
}
