package dataplane

import (
	"strings"
	"testing"
	"time"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Duration }

func (c *fakeClock) now() time.Duration { return c.t }

// fixed is a limiter whose host charge is one error each (Linux's 0-2 at
// random is tested apart).
func fixed(lim ICMPLimit, now func() time.Duration) *limiter {
	l := newLimiter(lim, now)
	l.charge = func() int { return 1 }
	return l
}

// count asks the limiter n times for peer and returns how many it allowed.
func count(l *limiter, peer [4]byte, n int) int {
	ok := 0
	for range n {
		if l.allow(peer) {
			ok++
		}
	}
	return ok
}

// TestLimiterPerPeer: with Linux's defaults one peer gets a burst of 6
// (XRLIM_BURST_FACTOR), then one error a second (icmp_ratelimit 1000 ms),
// and its silence earns back at most the burst.
func TestLimiterPerPeer(t *testing.T) {
	c := &fakeClock{}
	l := fixed(DefaultICMPLimit, c.now)
	p := [4]byte{10, 9, 0, 2}
	if got := count(l, p, 100); got != 6 {
		t.Fatalf("burst: %d errors, want 6", got)
	}
	c.t += 999 * time.Millisecond
	if got := count(l, p, 10); got != 0 {
		t.Fatalf("after 999 ms: %d errors, want 0", got)
	}
	c.t += time.Millisecond
	if got := count(l, p, 10); got != 1 {
		t.Fatalf("after 1 s: %d errors, want 1", got)
	}
	c.t += time.Hour
	if got := count(l, p, 100); got != 6 {
		t.Fatalf("after an hour: %d errors, want the burst of 6", got)
	}
	// Another peer has a bucket of its own (unless the keyed hash puts it
	// in the same slot: TestLimiterCollision).
	q := [4]byte{10, 9, 0, 3}
	if l.slot(q) != l.slot(p) {
		if got := count(l, q, 100); got != 6 {
			t.Fatalf("a second peer: %d errors, want 6", got)
		}
	}
}

// TestLimiterCollision: two peers whose addresses share a slot share its
// bucket; one never refills the other's (an attacker alternating with a
// colliding address got 1,000 errors in 5 s for its victim when a new
// address took the slot over).
func TestLimiterCollision(t *testing.T) {
	c := &fakeClock{}
	l := fixed(DefaultICMPLimit, c.now)
	l.slot = func([4]byte) int { return 0 }
	v, w := [4]byte{10, 9, 0, 2}, [4]byte{10, 9, 16, 87}
	got := 0
	for range 5000 {
		c.t += time.Millisecond
		if l.allow(v) {
			got++
		}
		l.allow(w)
	}
	if got > 6+5 {
		t.Fatalf("the victim drew %d errors in 5 s beside a colliding peer; the limit allows 11", got)
	}
}

// TestLimiterRandomCharge: the host's bucket is charged 0, 1 or 2 errors
// at random, as Linux's icmp_global_consume does; on average the rate is
// still the limit's.
func TestLimiterRandomCharge(t *testing.T) {
	c := &fakeClock{}
	l := newLimiter(ICMPLimit{PerSec: 1000, Burst: 50}, c.now)
	sent := 0
	for range 100000 {
		c.t += 10 * time.Microsecond
		if l.allow([4]byte{192, 0, 2, 1}) {
			sent++
		}
	}
	if sent < 800 || sent > 1250 {
		t.Fatalf("a second at 100,000 requests: %d errors, want about 1,000", sent)
	}
}

// TestLimiterHost: many peers share the host's bucket of 50
// (icmp_msgs_burst), refilled at 1000 a second (icmp_msgs_per_sec).
func TestLimiterHost(t *testing.T) {
	c := &fakeClock{}
	l := fixed(DefaultICMPLimit, c.now)
	sent := 0
	for i := range 1000 {
		if l.allow([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) {
			sent++
		}
	}
	if sent != 50 {
		t.Fatalf("1,000 peers at once: %d errors, want the host's burst of 50", sent)
	}
	// One second of forged sources, a new one every 10 µs: the host's
	// rate bounds them all.
	sent = 0
	for i := range 100000 {
		c.t += 10 * time.Microsecond
		if l.allow([4]byte{172, byte(i >> 16), byte(i >> 8), byte(i)}) {
			sent++
		}
	}
	if sent < 990 || sent > 1050 {
		t.Fatalf("a second of 100,000 forged sources: %d errors, want about 1,000", sent)
	}
	if len(l.peers) != peerSlots {
		t.Fatalf("the peer table grew to %d slots", len(l.peers))
	}
}

// TestLimiterSettings: a stack's own limits are used as given.
func TestLimiterSettings(t *testing.T) {
	c := &fakeClock{}
	l := fixed(ICMPLimit{PerSec: 10, Burst: 2, PeerInterval: 0}, c.now)
	if got := count(l, [4]byte{1, 2, 3, 4}, 10); got != 2 {
		t.Fatalf("burst 2: %d errors", got)
	}
	c.t += 100 * time.Millisecond
	if got := count(l, [4]byte{1, 2, 3, 4}, 10); got != 1 {
		t.Fatalf("10/s after 100 ms: %d errors, want 1", got)
	}
}

// TestEchoRefuses: echo answers a unicast datagram, and neither a
// broadcast one (fraggle) nor one from a port that answers everything.
func TestEchoRefuses(t *testing.T) {
	msg := []byte("hello")
	for _, c := range []struct {
		d    Datagram
		want bool
	}{
		{Datagram{SPort: 40000, Payload: msg}, true},
		{Datagram{SPort: 40000, Payload: msg, Broadcast: true}, false},
		{Datagram{SPort: 7, Payload: msg}, false},
		{Datagram{SPort: 11, Payload: msg}, false},
		{Datagram{SPort: 13, Payload: msg}, false},
		{Datagram{SPort: 17, Payload: msg}, false},
		{Datagram{SPort: 19, Payload: msg}, false},
		{Datagram{SPort: 37, Payload: msg}, false},
		{Datagram{SPort: 9, Payload: msg}, true},
		// Open-MX numbers endpoints, not ports: endpoint 7 is no echo.
		{Datagram{SPort: 7, Payload: msg, OpenMX: true}, true},
		{Datagram{SPort: 0, Payload: msg, OpenMX: true}, true},
		{Datagram{SPort: 0, Payload: msg, OpenMX: true, Broadcast: true}, false},
	} {
		if got := Echo(&c.d) != nil; got != c.want {
			t.Errorf("%+v: answered %v, want %v", c.d, got, c.want)
		}
	}
}

// TestSource: an answer comes from the address the datagram was sent to,
// or, for a broadcast, from our address on the sender's subnet.
func TestSource(t *testing.T) {
	h := &Host{Addrs: []Prefix{{[4]byte{10, 9, 0, 1}, 24}, {[4]byte{192, 0, 2, 1}, 24}}}
	for _, c := range []struct{ dst, peer, want [4]byte }{
		{[4]byte{192, 0, 2, 1}, [4]byte{10, 9, 0, 2}, [4]byte{192, 0, 2, 1}},
		{[4]byte{255, 255, 255, 255}, [4]byte{192, 0, 2, 7}, [4]byte{192, 0, 2, 1}},
		{[4]byte{10, 9, 0, 255}, [4]byte{10, 9, 0, 2}, [4]byte{10, 9, 0, 1}},
		{[4]byte{255, 255, 255, 255}, [4]byte{172, 16, 0, 1}, [4]byte{10, 9, 0, 1}},
	} {
		got, ok := h.source(c.dst, c.peer)
		if !ok || got != c.want {
			t.Errorf("to %v from %v: source %v, want %v", c.dst, c.peer, got, c.want)
		}
	}
	if _, ok := h.source([4]byte{255, 255, 255, 255}, [4]byte{}); ok {
		t.Errorf("an answer to 0.0.0.0 found a source")
	}
	if _, ok := (&Host{}).source([4]byte{255, 255, 255, 255}, [4]byte{1, 2, 3, 4}); ok {
		t.Errorf("a host without addresses found a source")
	}
}

// TestL2: the request's headers are found behind a priority tag.
func TestL2(t *testing.T) {
	untagged := make([]byte, 60)
	untagged[12], untagged[13] = 0x08, 0x00
	tagged := make([]byte, 64)
	tagged[12], tagged[13], tagged[16], tagged[17] = 0x81, 0x00, 0x08, 0x00
	for _, c := range []struct {
		b    []byte
		n    int
		ok   bool
		name string
	}{
		{untagged, 14, true, "untagged"},
		{tagged, 18, true, "tagged"},
		{tagged[:16], 0, false, "a cut tag"},
		{untagged[:13], 0, false, "a cut header"},
	} {
		n, etype, ok := l2(c.b)
		if n != c.n || ok != c.ok || ok && etype != 0x0800 {
			t.Errorf("%s: %d %#x %v", c.name, n, etype, ok)
		}
	}
}

// TestReportText: the kernel's counters show only when it dropped or
// refused frames; an empty transmit ring found on a wake-up is no loss.
func TestReportText(t *testing.T) {
	r := Report{Final: true, Queues: []QueueCounts{{Queue: 1, In: 3, Outcomes: []Outcome{{"deliver echo", 2}, {"drop RxL2EtherValidSource.false", 1}}, Sent: 2, ICMPRateLimited: 4, Kernel: KernelCounts{TxRingEmptyDescs: 9}}}}
	var b strings.Builder
	r.WriteText(&b)
	want := "final:\nqueue 1: in 3, deliver echo 2, drop RxL2EtherValidSource.false 1, icmp errors rate-limited 4, sent 2\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	r.Queues[0].Kernel.RxRingFull, r.Queues[0].Kernel.RxDropped = 5, 5
	b.Reset()
	r.WriteText(&b)
	if !strings.Contains(b.String(), "; kernel: rx dropped 5, rx ring full 5\n") {
		t.Errorf("drops not shown: %q", b.String())
	}
}

// TestReportKernelSockets: the kernel-socket endpoints' counters are a
// line of their own, after the stage's.
func TestReportKernelSockets(t *testing.T) {
	r := Report{Stage: []Outcome{{"drop RxL3IPv4ValidChecksum.false", 1}}, KernelSockets: []KernelSocket{{"mc", 10, 2, 0, 0}, {"web", 0, 3, 4, 5}},
		Cpumap: []CpumapCPU{{1, []string{"mc", "web"}, 9, 1}}, CpumapMissed: 2, Queues: []QueueCounts{{Queue: 0, In: 1, Sent: 1}}}
	var b strings.Builder
	r.WriteText(&b)
	want := "xdp stage: drop RxL3IPv4ValidChecksum.false 1\nkernel sockets: mc 10 redirected to its core, 2 arrived there; web 0 redirected to its core, 3 arrived there, 4 passed up where they arrived (no cpumap entry), 5 dropped by a plan rule\ncpumap: cpu 1 (mc, web) queued 9, dropped 1 with its queue full; 2 flushes not counted (another eBPF tracing program was running)\nqueue 0: in 1, sent 1\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestReportVI: the software VIs' counters are lines of their own after
// the stage's: their socket's frames, then setup's drops by reason; a
// count that is zero is left out, and a stack without VIs has no line.
func TestReportVI(t *testing.T) {
	r := Report{Stage: []Outcome{{"drop x.false", 1}}, VI: &VICounts{VILink: VILink{Received: 7, Sent: 5, Dropped: 3, Oversize: 1, NoRoom: 4},
		SetupDrops: []Outcome{{"half-open connection evicted (host's limit)", 936}, {"setup from a group or zero address", 2}}},
		Queues: []QueueCounts{{Queue: 0, In: 1, Sent: 1}}}
	var b strings.Builder
	r.WriteText(&b)
	want := "xdp stage: drop x.false 1\nvi: received 7, sent 5, kernel dropped 3, dropped 1 longer than the MTU, dropped 4 bulk datagrams with the socket's buffer full\nvi setup drops: half-open connection evicted (host's limit) 936, setup from a group or zero address 2\nqueue 0: in 1, sent 1\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	r.VI = &VICounts{VILink: VILink{Received: 2, SendErrors: 1}}
	b.Reset()
	r.WriteText(&b)
	want = "xdp stage: drop x.false 1\nvi: received 2, sent 0, send errors 1\nqueue 0: in 1, sent 1\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	r.VI = nil
	b.Reset()
	r.WriteText(&b)
	if want = "xdp stage: drop x.false 1\nqueue 0: in 1, sent 1\n"; b.String() != want {
		t.Errorf("without VIs: got %q, want %q", b.String(), want)
	}
}

// TestKernelCountsAdd: adding counters adds each to its own.
func TestKernelCountsAdd(t *testing.T) {
	k := KernelCounts{RxDropped: 1, TxRingEmptyDescs: 2}
	k.add(KernelCounts{RxDropped: 10, RxInvalidDescs: 3, TxInvalidDescs: 4, RxRingFull: 5, RxFillRingEmpty: 6, TxRingEmptyDescs: 7})
	want := KernelCounts{RxDropped: 11, RxInvalidDescs: 3, TxInvalidDescs: 4, RxRingFull: 5, RxFillRingEmpty: 6, TxRingEmptyDescs: 9}
	if k != want {
		t.Errorf("got %+v, want %+v", k, want)
	}
}
