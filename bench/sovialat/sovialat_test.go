package sovialat

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/sovia"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := Percentile(ds, c.q); got != c.want {
			t.Errorf("Percentile(1..100, %g) = %d, want %d", c.q, got, c.want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("the percentile of nothing is not 0")
	}
	if ds[0] != 100 {
		t.Error("Percentile sorted its argument")
	}
}

// clock is a fake clock that the connections advance.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// echoConn echoes what is written to it; each write costs cost on the
// clock and is logged under the connection's name.
type echoConn struct {
	name string
	cost time.Duration
	clk  *clock
	log  *[]string
	mu   *sync.Mutex
	pipe net.Conn
}

func newEcho(t *testing.T, name string, cost time.Duration, clk *clock, log *[]string, mu *sync.Mutex) *echoConn {
	a, b := net.Pipe()
	go io.Copy(b, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return &echoConn{name: name, cost: cost, clk: clk, log: log, mu: mu, pipe: a}
}

func (c *echoConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.log = append(*c.log, c.name)
	c.mu.Unlock()
	c.clk.add(c.cost)
	return c.pipe.Write(p)
}

func (c *echoConn) Read(p []byte) (int, error) { return c.pipe.Read(p) }

// TestRunInterleaves: each target's samples are its own (a fake clock
// that each connection's writes advance by its own cost gives each a
// latency of half that cost), the targets take turns size by size, and
// the order rotates every round.
func TestRunInterleaves(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	var log []string
	var mu sync.Mutex
	a := newEcho(t, "a", 10*time.Microsecond, clk, &log, &mu)
	b := newEcho(t, "b", 30*time.Microsecond, clk, &log, &mu)
	res, err := Run([]Target{{Name: "a", Conn: a}, {Name: "b", Conn: b}}, Options{Sizes: []int{4, 100}, Rounds: 3, Exchanges: 2, StreamBytes: -1, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("a", 2) + strings.Repeat("b", 2) + "aabb" + // round 1: a first
		"bbaa" + "bbaa" + // round 2: b first
		"aabb" + "aabb" // round 3
	if got := strings.Join(log, ""); got != want {
		t.Errorf("writes in the order %s, want %s", got, want)
	}
	if len(res.Sizes) != 2 || res.Sizes[1].Size != 100 {
		t.Fatalf("sizes %+v", res.Sizes)
	}
	for _, s := range res.Sizes {
		ma, _ := s.Target("a")
		mb, _ := s.Target("b")
		if ma.P50us != 5 || ma.P99us != 5 || mb.P50us != 15 || mb.RoundP50us != [2]float64{15, 15} {
			t.Errorf("size %d: a %+v, b %+v; want 5 µs and 15 µs one way", s.Size, ma, mb)
		}
		if ma.Samples != 6 || ma.Mbps != 0 {
			t.Errorf("size %d: a has %d samples and %g Mb/s, want 6 and none", s.Size, ma.Samples, ma.Mbps)
		}
	}
}

// TestRunBandwidth: a stream's bandwidth is the bytes written over the
// time until their echo is back, on the fake clock.
func TestRunBandwidth(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	var log []string
	var mu sync.Mutex
	a := newEcho(t, "a", time.Microsecond, clk, &log, &mu)
	res, err := Run([]Target{{Name: "a", Conn: a}}, Options{Sizes: []int{1000}, Rounds: 1, Exchanges: 1, StreamBytes: 100_000, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	// 512 messages (100,000 B would be 100; minStream is the fewest)
	// of 1000 B, 1 µs each: 8,000 bits a microsecond.
	if got := res.Sizes[0].Of[0].Mbps; math.Abs(got-8000) > 1e-6 {
		t.Errorf("bandwidth %g Mb/s, want 8000", got)
	}
	if len(log) != 1+minStream { // the one exchange, then the stream
		t.Errorf("%d writes, want %d", len(log), 1+minStream)
	}
}

// TestRunOverSOVIA measures SOVIA over the in-memory VI beside kernel
// TCP on the loopback, both echoed, as dragonc pairs them (no combining,
// TCP_NODELAY).
func TestRunOverSOVIA(t *testing.T) {
	p := sovia.PaperParams()
	p.NoDelay, p.CombineMax, p.CombineDelay = true, 0, 0
	sa, sb, _, _, err := sovia.NewPair(p)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(sb, sb)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	tc, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	res, err := Run([]Target{{Name: "sovia", Conn: sa}, {Name: "tcp", Conn: tc, Abort: func() { tc.Close() }}},
		Options{Sizes: []int{4, 8 << 10, 64 << 10}, Rounds: 2, Exchanges: 20, StreamBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Sizes {
		for _, m := range s.Of {
			if m.Samples != 40 || !(m.P50us > 0) || m.P99us < m.P50us || !(m.Mbps > 0) {
				t.Errorf("%d B, %s: %+v", s.Size, m.Target, m)
			}
		}
	}
}

// stuck never answers until aborted.
type stuck struct{ gone chan struct{} }

func (s *stuck) Write(p []byte) (int, error) { return len(p), nil }
func (s *stuck) Read([]byte) (int, error)    { <-s.gone; return 0, errors.New("aborted") }

func TestRunStall(t *testing.T) {
	s := &stuck{gone: make(chan struct{})}
	_, err := Run([]Target{{Name: "lost", Conn: s, Abort: func() { close(s.gone) }}}, Options{Sizes: []int{64}, Stall: 40 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "nothing completed for 40ms (lost at 64 B)") {
		t.Errorf("a peer that never answers: %v", err)
	}
}

// garble echoes every byte but the first.
type garble struct{ buf []byte }

func (g *garble) Write(p []byte) (int, error) {
	g.buf = append(g.buf, p...)
	g.buf[len(g.buf)-len(p)] ^= 0xff
	return len(p), nil
}
func (g *garble) Read(p []byte) (int, error) { n := copy(p, g.buf); g.buf = g.buf[n:]; return n, nil }

func TestRunChecks(t *testing.T) {
	if _, err := Run([]Target{{Name: "g", Conn: &garble{}}}, Options{Sizes: []int{8}}); err == nil || !strings.Contains(err.Error(), "the echo differs") {
		t.Errorf("a wrong echo: %v", err)
	}
	for _, c := range []struct {
		targets []Target
		opt     Options
		want    string
	}{
		{[]Target{{Name: "g", Conn: &garble{}}}, Options{}, "no message sizes"},
		{[]Target{{Name: "g", Conn: &garble{}}}, Options{Sizes: []int{0}}, "message size 0"},
		{nil, Options{Sizes: []int{4}}, "no targets"},
		{[]Target{{Name: "g", Conn: &garble{}}, {Name: "g", Conn: &garble{}}}, Options{Sizes: []int{4}}, "a name of its own"},
	} {
		if _, err := Run(c.targets, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opt, err, c.want)
		}
	}
}

// TestNeighbour reads an entry out of a neighbour dump built as the kernel
// lays it out (struct ndmsg, then NDA_DST and NDA_LLADDR attributes).
func TestNeighbour(t *testing.T) {
	entry := func(ifindex int, state uint16, ip [4]byte, mac []byte) syscall.NetlinkMessage {
		d := make([]byte, ndmsgLen)
		d[0] = syscall.AF_INET
		binary.NativeEndian.PutUint32(d[4:], uint32(ifindex))
		binary.NativeEndian.PutUint16(d[8:], state)
		attr := func(typ uint16, v []byte) {
			a := make([]byte, 4, 4+len(v)+3)
			binary.NativeEndian.PutUint16(a[0:], uint16(4+len(v)))
			binary.NativeEndian.PutUint16(a[2:], typ)
			a = append(a, v...)
			for len(a)%4 != 0 {
				a = append(a, 0)
			}
			d = append(d, a...)
		}
		attr(ndaDst, ip[:])
		attr(ndaLLAddr, mac)
		return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: syscall.RTM_NEWNEIGH}, Data: d}
	}
	mac := []byte{2, 0, 0, 0, 0, 1}
	ip := netip.MustParseAddr("10.9.0.1")
	msgs := []syscall.NetlinkMessage{
		entry(3, 0x02, [4]byte{10, 9, 0, 1}, []byte{2, 0, 0, 0, 0, 9}), // another interface
		entry(2, nudFailed, [4]byte{10, 9, 0, 1}, []byte{2, 0, 0, 0, 0, 8}),
		entry(2, 0x02, [4]byte{10, 9, 0, 7}, []byte{2, 0, 0, 0, 0, 7}), // another address
		entry(2, 0x80, [4]byte{10, 9, 0, 1}, mac),                      // NUD_PERMANENT
	}
	if got := neighbour(msgs, 2, ip); got.String() != "02:00:00:00:00:01" {
		t.Errorf("neighbour = %v, want 02:00:00:00:00:01", got)
	}
	if got := neighbour(msgs[:3], 2, ip); got != nil {
		t.Errorf("a failed entry gave %v", got)
	}
}

func TestWriteTable(t *testing.T) {
	r := &Result{Sizes: []Size{{Size: 64, Of: []Measure{{Target: "sovia", P50us: 20, P99us: 90, Mbps: 0}, {Target: "tcp", P50us: 10, P99us: 30, Mbps: 400}}}}}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"  size B  sovia p50 µs  p99 µs  Mb/s  tcp p50 µs  p99 µs  Mb/s  sovia/tcp p50   p99  Mb/s\n" +
		"      64          20.0    90.0     -        10.0    30.0   400           2.00  3.00     -\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
