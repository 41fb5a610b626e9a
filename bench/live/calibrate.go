package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/netns"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/run"
	"github.com/dragonc/dragonc/run/dataplane"
	"github.com/dragonc/dragonc/sovia"
	"github.com/dragonc/dragonc/streams"
)

// CalibratePrefix starts the names of the namespaces dragonc calibrate
// makes, followed by its process id (a later run removes those of a
// process that is gone).
const CalibratePrefix = "ca-dragonc-calibrate-"

// CalibrateSizes are the message sizes calibrate measures by default: the
// SOVIA paper's Tables 2 and 3, 4 B to 32 KB by powers of two.
func CalibrateSizes() []int {
	var s []int
	for n := 4; n <= 32<<10; n *= 2 {
		s = append(s, n)
	}
	return s
}

// CalibrateOptions control Calibrate.
type CalibrateOptions struct {
	// Sizes, Rounds, Exchanges, StreamBytes and Stall are sovialat's;
	// Sizes CalibrateSizes when empty.
	Sizes                          []int
	Rounds, Exchanges, StreamBytes int
	Stall                          time.Duration
	// Say, if set, is told what happens.
	Say func(format string, args ...any)
	// Now reads the time the calibration is stamped with; time.Now when
	// nil.
	Now func() time.Time
	// Server is what serves the VI's echo: CalibrateRun (the default),
	// dragonc run on the mvia model, which carries the streams of a plan
	// that is served; or CalibrateSovia, package sovia on a packet socket
	// of its own, as the client is.
	Server string
	// ClientSpin is how long the clients look for the echo before they
	// sleep, both providers alike: the VI's host busy-polls its socket
	// (sovia.HostOptions.BusyPoll) and TCP's reads spin
	// (sovialat.SpinReads). 0, the default, is each library's own: they
	// sleep at once.
	ClientSpin time.Duration
	// SelfCheck, "vi" or "tcp", measures that provider against itself
	// instead of the two against each other: both targets are its one
	// connection, taking turns as the two providers otherwise do, so the
	// ratios show how far one run strays from 1 on this host (the noise a
	// calibration's ratios carry). Calibrate then returns no calibration.
	SelfCheck string
	// Self is how to start this program as calibrate's echo server,
	// which serves kernel TCP's echo (and package sovia's, with
	// CalibrateSovia) in a process of its own, as dragonc run's helper
	// serves the VI's (Child runs first in the program's main); the
	// running executable when nil.
	Self []string
}

// The servers of the VI's echo.
const (
	CalibrateRun   = "run"
	CalibrateSovia = "sovia"
)

// calibrationStack is the stack dragonc run serves for a calibration: an
// echo stream on a VI (the M-VIA model's table puts a 4-byte nodelay flow
// to a peer on the subnet on one) beside the kernel's TCP echo on the
// same port, whose address the kernel owns.
func calibrationStack() string {
	return fmt.Sprintf(`stack calibrate {
    interface eth0 { mac %s ip %s/24 }
    endpoint echo tcp flow %s:%d -> %s:%d { app "echo" message 4B nodelay }
    service arp
}
`, serverMAC, serverAddr, serverAddr, calibrationPort, peerAddr, calibrationPort)
}

// calibrationPlan embeds calibrationStack on mvia as dragonc run does
// (through the driver's interfaces, run.Adapt) and returns the SOVIA
// settings of its VI stream.
func calibrationPlan() (*embed.Result, *lpg.Stack, sovia.Params, error) {
	fail := func(err error) (*embed.Result, *lpg.Stack, sovia.Params, error) {
		return nil, nil, sovia.Params{}, fmt.Errorf("internal error: calibrate's stack: %w", err)
	}
	st, diags := lpg.LoadStack("calibrate.lpg", []byte(calibrationStack()))
	if st == nil || diags.HasErrors() {
		return fail(diags)
	}
	m, mdiags, err := nics.Load("mvia")
	if err != nil || m == nil {
		return fail(errors.Join(err, mdiags))
	}
	in, _, err := embed.NewInput("mvia", m, st, nil, embed.Options{})
	if err != nil {
		return fail(err)
	}
	run.Adapt(in)
	r, err := embed.Run(in)
	if err != nil {
		return fail(err)
	}
	if r.Plan.VIA == nil || len(r.Plan.VIA.Streams) != 1 || r.Plan.VIA.Streams[0].Transport != "vi" {
		return fail(errors.New("the plan puts no stream on a VI"))
	}
	s := r.Plan.VIA.Streams[0]
	p := sovia.Params{Window: s.Window, AckThreshold: s.AckThreshold, ChunkSize: s.Chunk, CopyMax: s.CopyMax, NoDelay: true}
	return r, st, p, nil
}

// serveRun serves the calibration's stack with dragonc run in namespace
// ns until stop is called. The first time, run builds its helper with
// the go command.
func serveRun(ctx context.Context, ns string, r *embed.Result, st *lpg.Stack, say func(string, ...any)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	served := make(chan error, 1)
	notes := &prefixWriter{w: sayWriter(say)} // run's notes name it
	go func() {
		served <- netns.In(ns, func() error {
			return run.Serve(ctx, r, st, run.Options{Iface: serverIf, Force: true, Stderr: notes, Ready: func() { close(ready) }})
		})
	}()
	stop = func() {
		cancel()
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			say("dragonc run did not stop within 30s")
		}
	}
	select {
	case <-ready:
		return stop, nil
	case err := <-served:
		cancel()
		if err == nil {
			err = errors.New("dragonc run returned before it served")
		}
		return nil, fmt.Errorf("dragonc run: %w", err)
	case <-time.After(10 * time.Minute):
		stop()
		return nil, errors.New("dragonc run did not serve within 10 minutes")
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// sayWriter hands each line written to it to a say function.
type sayWriter func(string, ...any)

func (s sayWriter) Write(b []byte) (int, error) {
	s("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// calibrationPort is where the VI's echo and kernel TCP's listen;
// calibrationSpinPort where kernel TCP's spinning echo does.
const (
	calibrationPort     = 7
	calibrationSpinPort = 7007
)

// Calibrate measures the software VI beside kernel TCP on one veth pair
// between two namespaces of its own, which it always removes: an echo
// server of each in one namespace (the VI's served by dragonc run, which
// carries the streams of a served plan, or by package sovia on a packet
// socket: Options.Server), a client of each in the other (package sovia
// over AF_PACKET, Go's net), measured in interleaved rounds by sovialat,
// SOVIA without combining against TCP with TCP_NODELAY. It needs root.
func Calibrate(ctx context.Context, opt CalibrateOptions) (*streams.Calibration, *sovialat.Result, error) {
	say := opt.Say
	if say == nil {
		say = func(string, ...any) {}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if len(opt.Sizes) == 0 {
		opt.Sizes = CalibrateSizes()
	}
	if opt.Server == "" {
		opt.Server = CalibrateRun
	}
	if opt.Server != CalibrateRun && opt.Server != CalibrateSovia {
		return nil, nil, fmt.Errorf("no VI echo server %q (%s or %s)", opt.Server, CalibrateRun, CalibrateSovia)
	}
	if err := CheckSelfCheck(opt.SelfCheck); err != nil {
		return nil, nil, err
	}
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("calibrate needs root: it makes two network namespaces and a veth pair, and opens packet sockets")
	}
	removeStaleOf(CalibratePrefix, say)
	p, err := newPairOf(CalibratePrefix, 1)
	if err != nil {
		return nil, nil, err
	}
	defer p.close()
	say("namespaces %s and %s joined by a veth pair", p.a, p.b)
	if err := waitRunning(p.a, serverIf); err != nil {
		return nil, nil, err
	}
	if err := waitRunning(p.b, peerIf); err != nil {
		return nil, nil, err
	}

	params := sovia.PaperParams()
	params.NoDelay, params.CombineMax, params.CombineDelay = true, 0, 0
	if opt.Server == CalibrateRun {
		r, st, sp, err := calibrationPlan()
		if err != nil {
			return nil, nil, err
		}
		params = sp
		say("the VI's echo served by dragonc run on the mvia model (AF_XDP, or AF_PACKET where it cannot)")
		stopRun, err := serveRun(ctx, p.a, r, st, say)
		if err != nil {
			return nil, nil, err
		}
		defer stopRun()
	}

	// What is opened is closed at the end, and at once when the context
	// ends or the measurement stalls (a blocked Read returns).
	var (
		mu      sync.Mutex
		closers []io.Closer
	)
	own := func(c io.Closer) {
		mu.Lock()
		closers = append(closers, c)
		mu.Unlock()
	}
	closeAll := func() {
		mu.Lock()
		cs := closers
		closers = nil
		mu.Unlock()
		for i := len(cs) - 1; i >= 0; i-- {
			cs[i].Close()
		}
	}
	defer closeAll()
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()

	// The servers, in namespace a, each in a process other than the
	// clients' (echoChild says why): kernel TCP's echo, and package
	// sovia's, in a child of this program; dragonc run's is its helper.
	self := opt.Self
	if self == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, err
		}
		self = []string{exe}
	}
	// Kernel TCP at its best: under run, whose VIs spin on their ring
	// before they sleep, two echoes, one whose reads sleep at once and
	// one whose reads spin first for as long (a spin that helped TCP's
	// bandwidth and 99th percentile here, and cost its median: a
	// sleeping echo is woken on the client's core). Package sovia's echo
	// does not spin, and TCP's echo beside it does not either.
	var viEcho *sovia.Params
	var viClient *sovia.RawHost
	tcpSpin, spinAddr := dataplane.Config{}.VISpin(), fmt.Sprintf("%s:%d", serverAddr, calibrationSpinPort)
	if opt.Server == CalibrateSovia {
		viEcho, tcpSpin, spinAddr = &params, 0, ""
	}
	stopEcho, err := startEcho(self, p.a, fmt.Sprintf("%s:%d", serverAddr, calibrationPort), spinAddr, tcpSpin, viEcho)
	if err != nil {
		return nil, nil, err
	}
	defer stopEcho()
	// The clients, in namespace b.
	var targets []sovialat.Target
	err = netns.In(p.b, func() error {
		h, err := sovia.OpenHostWith(peerIf, nil, sovia.HostOptions{BusyPoll: opt.ClientSpin})
		if err != nil {
			return err
		}
		own(h)
		viClient = h
		mac, _ := net.ParseMAC(serverMAC)
		sc, err := h.Dial(mac, calibrationPort, params)
		if err != nil {
			return err
		}
		targets = []sovialat.Target{{Name: "vi", Conn: sc, Abort: func() { h.Close() }}}
		echoes := []struct {
			name string
			port int
		}{{"tcp", calibrationPort}, {tcpSpinning, calibrationSpinPort}}
		if tcpSpin == 0 {
			echoes = echoes[:1]
		}
		for _, t := range echoes {
			d := net.Dialer{Timeout: 5 * time.Second}
			tc, err := d.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", serverAddr, t.port))
			if err != nil {
				return err
			}
			own(tc)
			if err := tc.(*net.TCPConn).SetNoDelay(true); err != nil {
				return err
			}
			conn, err := sovialat.SpinReads(tc.(*net.TCPConn), opt.ClientSpin)
			if err != nil {
				return err
			}
			targets = append(targets, sovialat.Target{Name: t.name, Conn: conn, Abort: func() { tc.Close() }})
		}
		if opt.SelfCheck != "" {
			i := slices.IndexFunc(targets, func(t sovialat.Target) bool { return t.Name == opt.SelfCheck })
			again := targets[i]
			again.Name += "-again"
			targets = []sovialat.Target{targets[i], again}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the clients: %w", err)
	}
	before := sovialat.LoadAverage()
	start := opt.Now().UTC()
	say("measuring %d sizes, %d B to %d B", len(opt.Sizes), opt.Sizes[0], opt.Sizes[len(opt.Sizes)-1])
	res, err := sovialat.Run(targets, sovialat.Options{Sizes: opt.Sizes, Rounds: opt.Rounds, Exchanges: opt.Exchanges, StreamBytes: opt.StreamBytes, Stall: opt.Stall,
		Progress: func(r, n int) { say("round %d of %d done", r, n) }})
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if err != nil {
		return nil, nil, err
	}
	after := sovialat.LoadAverage()
	say("%s", clientLinkNote(viClient.LinkCounts()))
	if opt.SelfCheck != "" {
		return nil, res, nil
	}
	if len(targets) > 2 {
		say("each echo as measured (the calibration takes TCP's figures from one of its two):")
		var b strings.Builder
		res.WriteTable(&b)
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			say("%s", line)
		}
	}
	best, from := bestTCP(res)
	return calibration(best, params, opt.Server, tcpSpin, from, opt.ClientSpin, start, machine(before, after)), best, nil
}

// clientLinkNote says what the VI client's socket carried, and what it
// lost: a ring that overflowed or a frame cut would be behind a slow
// figure (the reliable delivery sends the frame again, silently).
func clientLinkNote(c sovia.LinkCounts) string {
	lost := []struct {
		n    uint64
		what string
	}{
		{c.Dropped, "dropped by the kernel for want of room in the receive ring"},
		{c.NoRoom, "bulk datagrams without room in the socket's buffer"},
		{c.Oversize, "frames too long for the ring, cut"},
		{c.SendErrors, "frames the socket refused to send"},
		{c.BulkRefused, "bulk datagrams the kernel refused"},
		{c.BulkAbandoned, "VIs that gave bulk datagrams up"},
	}
	var bad []string
	for _, l := range lost {
		if l.n > 0 {
			bad = append(bad, fmt.Sprintf("%d %s", l.n, l.what))
		}
	}
	losses := "nothing lost on the client's side"
	if len(bad) > 0 {
		losses = strings.Join(bad, ", ")
	}
	return fmt.Sprintf("the VI client's socket sent %d frames (%d bulk datagrams among them) and received %d (%d whole bulk datagrams); %s",
		c.Sent, c.BulkSent, c.Received, c.BulkReceived, losses)
}

// CheckSelfCheck says whether p names a provider that
// CalibrateOptions.SelfCheck measures against itself: "vi" or "tcp" (the
// echo whose reads sleep), or "" for none.
func CheckSelfCheck(p string) error {
	if p != "" && p != "vi" && p != "tcp" {
		return fmt.Errorf("no provider %q to check against itself (vi or tcp)", p)
	}
	return nil
}

// tcpSpinning names the TCP echo whose reads spin, as a target.
const tcpSpinning = "tcp-spinning"

// bestTCP is res with kernel TCP's two echoes made one target, "tcp":
// for each figure (p50, p99, bandwidth) the echo better at it over all
// the sizes (the lower geometric mean of its latencies, the higher of
// its bandwidths), with that echo's figure at every size. One choice
// per figure, not one per size: the better of two noisy figures at each
// size would be a figure biased in TCP's favour by the noise alone.
// from names the echo each figure came from; a result with one TCP echo
// is left as it is.
func bestTCP(res *sovialat.Result) (best *sovialat.Result, from tcpFrom) {
	from = tcpFrom{"tcp", "tcp", "tcp"}
	a, b := "tcp", tcpSpinning
	fig := func(name string, f func(sovialat.Measure) float64) float64 {
		var v []float64
		for _, s := range res.Sizes {
			m, _ := s.Target(name)
			v = append(v, f(m))
		}
		return geomean(v)
	}
	p50 := func(m sovialat.Measure) float64 { return m.P50us }
	p99 := func(m sovialat.Measure) float64 { return m.P99us }
	mbps := func(m sovialat.Measure) float64 { return m.Mbps }
	if len(res.Sizes) > 0 {
		if _, ok := res.Sizes[0].Target(b); ok {
			if fig(b, p50) < fig(a, p50) {
				from.P50 = b
			}
			if fig(b, p99) < fig(a, p99) {
				from.P99 = b
			}
			if fig(b, mbps) > fig(a, mbps) {
				from.Mbps = b
			}
		}
	}
	best = &sovialat.Result{Rounds: res.Rounds, Exchanges: res.Exchanges}
	for _, s := range res.Sizes {
		vi, _ := s.Target("vi")
		t, _ := s.Target(a)
		m50, _ := s.Target(from.P50)
		m99, _ := s.Target(from.P99)
		mb, _ := s.Target(from.Mbps)
		t.P50us, t.RoundP50us, t.Samples = m50.P50us, m50.RoundP50us, m50.Samples
		t.P99us, t.Mbps = m99.P99us, mb.Mbps
		best.Sizes = append(best.Sizes, sovialat.Size{Size: s.Size, Of: []sovialat.Measure{vi, t}})
	}
	return best, from
}

// tcpFrom names the TCP echo (target) each of TCP's figures came from.
type tcpFrom struct{ P50, P99, Mbps string }

// geomean is the geometric mean of positive figures; 0 when one is not
// positive (bandwidth not measured).
func geomean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		if x <= 0 {
			return 0
		}
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(v)))
}

// calibration is a measurement as a calibration file holds it.
func calibration(res *sovialat.Result, p sovia.Params, server string, tcpSpin time.Duration, from tcpFrom, clientSpin time.Duration, at time.Time, machine string) *streams.Calibration {
	vi := "dragonc run serving the mvia model's VI stream (app echo) on one end, a sovia.OpenHost on the other"
	if server == CalibrateSovia {
		vi = "a sovia.OpenHost on each end"
	}
	vi += "; each echo served by a process other than the clients'"
	tcp := "a Go echo server whose reads sleep in Go's poller at once, as the VI echo's receiver does"
	if tcpSpin > 0 {
		which := func(target string) string {
			if target == tcpSpinning {
				return "spinning"
			}
			return "sleeping"
		}
		tcp = fmt.Sprintf("two Go echo servers, one whose reads sleep in Go's poller at once and one whose reads look at the socket for up to %v first, as dragonc run's VIs spin on their ring; "+
			"for each figure TCP's are those of the echo better at it over all the sizes (geometric mean): here p50 the %s echo's, p99 the %s echo's, bandwidth the %s echo's",
			tcpSpin, which(from.P50), which(from.P99), which(from.Mbps))
	}
	clients := "both clients sleep at once when the echo has not come"
	if clientSpin > 0 {
		clients = fmt.Sprintf("both clients look for the echo for up to %v before they sleep (the VI's host busy-polls, TCP's reads spin)", clientSpin)
	}
	c := &streams.Calibration{
		Format:   streams.CalibrationFormat,
		Provider: "software VI",
		// 16-bit VI numbers, VI 0 kept for connection setup
		// (sovia/rawvi.go, sovia/rawsetup.go).
		VIs:      65535,
		Measured: at.Truncate(time.Second).Format(time.RFC3339),
		Machine:  machine,
		Link:     "a veth pair between two network namespaces, MTU 1500",
		Method: fmt.Sprintf("dragonc calibrate: SOVIA over the software VI (%s) and kernel TCP (%s; both echoes read into a 32 KiB buffer and write what they read, TCP's not spliced), each to its echo across the veth; "+
			"%d rounds, each size's targets in turn with the order rotated every round, %d ping-pongs a target, size and round (one way = half the round trip; percentiles over all), "+
			"then an echoed stream (bandwidth of the bytes written, the median of the rounds); SOVIA nodelay (no combining) against TCP_NODELAY; %s",
			vi, tcp, res.Rounds, res.Exchanges, clients),
		Params: streams.CalibratedParams{Window: p.Window, AckThreshold: p.AckThreshold, Chunk: p.ChunkSize, CopyMax: p.CopyMax},
	}
	for _, s := range res.Sizes {
		vi, _ := s.Target("vi")
		tcp, _ := s.Target("tcp")
		c.Sizes = append(c.Sizes, streams.Measured{Size: s.Size,
			VIP50: round1(vi.P50us), VIP99: round1(vi.P99us), VIMbps: round1(vi.Mbps),
			TCPP50: round1(tcp.P50us), TCPP99: round1(tcp.P99us), TCPMbps: round1(tcp.Mbps)})
	}
	return c
}

func round1(x float64) float64 {
	r := math.Round(x*10) / 10
	if r == 0 && x > 0 {
		return 0.1 // a positive figure stays positive
	}
	return r
}

// machine describes this host for a calibration: its name, kernel,
// processor count and the load average before and after.
func machine(before, after [3]float64) string {
	host, _ := os.Hostname()
	var u unix.Utsname
	kernel := "Linux"
	if unix.Uname(&u) == nil {
		kernel = "Linux " + unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("%s (%s, %s, %d CPUs; load average %.2f %.2f %.2f before, %.2f %.2f %.2f after)",
		host, kernel, runtime.GOARCH, runtime.NumCPU(), before[0], before[1], before[2], after[0], after[1], after[2])
}

// waitRunning waits up to 5 s until interface ifc of namespace ns is
// running: until the kernel attaches a veth's queueing discipline
// (linkwatch, net/core/link_watch.c), its noop_qdisc drops every frame
// while a packet socket's send reports success, and the software VI does
// not retransmit.
func waitRunning(ns, ifc string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var up bool
		if err := netns.In(ns, func() error {
			i, err := net.InterfaceByName(ifc)
			if err == nil {
				up = i.Flags&net.FlagRunning != 0
			}
			return err
		}); err != nil {
			return err
		}
		if up {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("interface %s in %s is not running after 5 s", ifc, ns)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
