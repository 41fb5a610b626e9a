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
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/internal/netns"
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
}

// calibrationPort is where both echo servers listen.
const calibrationPort = 7

// Calibrate measures the software VI (package sovia over AF_PACKET on
// both ends) beside kernel TCP on one veth pair between two namespaces of
// its own, which it always removes: an echo server of each in one
// namespace, a client of each in the other, measured in interleaved
// rounds by sovialat, SOVIA without combining against TCP with
// TCP_NODELAY. It needs root.
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

	// The servers, in namespace a.
	err = netns.In(p.a, func() error {
		h, err := sovia.OpenHost(serverIf)
		if err != nil {
			return err
		}
		own(h)
		l, err := h.Listen(calibrationPort, params)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				io.Copy(c, c)
				c.Close()
			}
		}()
		tl, err := net.Listen("tcp4", fmt.Sprintf("%s:%d", serverAddr, calibrationPort))
		if err != nil {
			return err
		}
		own(tl)
		go func() {
			for {
				c, err := tl.Accept()
				if err != nil {
					return
				}
				own(c)
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the echo servers: %w", err)
	}
	// The clients, in namespace b.
	var targets []sovialat.Target
	err = netns.In(p.b, func() error {
		h, err := sovia.OpenHost(peerIf)
		if err != nil {
			return err
		}
		own(h)
		mac, _ := net.ParseMAC(serverMAC)
		sc, err := h.Dial(mac, calibrationPort, params)
		if err != nil {
			return err
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		tc, err := d.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", serverAddr, calibrationPort))
		if err != nil {
			return err
		}
		own(tc)
		if err := tc.(*net.TCPConn).SetNoDelay(true); err != nil {
			return err
		}
		targets = []sovialat.Target{
			{Name: "vi", Conn: sc, Abort: func() { h.Close() }},
			{Name: "tcp", Conn: tc, Abort: func() { tc.Close() }},
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
	return calibration(res, params, start, machine(before, after)), res, nil
}

// calibration is a measurement as a calibration file holds it.
func calibration(res *sovialat.Result, p sovia.Params, at time.Time, machine string) *streams.Calibration {
	c := &streams.Calibration{
		Format:   streams.CalibrationFormat,
		Provider: "software VI (package sovia over AF_PACKET)",
		// 16-bit VI numbers, VI 0 kept for connection setup
		// (sovia/rawvi.go, sovia/rawsetup.go).
		VIs:      65535,
		Measured: at.Truncate(time.Second).Format(time.RFC3339),
		Machine:  machine,
		Link:     "a veth pair between two network namespaces, MTU 1500",
		Method: fmt.Sprintf("dragonc calibrate: SOVIA over the software VI (a sovia.OpenHost on each end) and kernel TCP, each to an echo server across the veth; "+
			"%d rounds, each size's targets in turn with the order rotated every round, %d ping-pongs a target, size and round (one way = half the round trip; percentiles over all), "+
			"then an echoed stream (bandwidth of the bytes written, the median of the rounds); SOVIA nodelay (no combining) against TCP_NODELAY",
			res.Rounds, res.Exchanges),
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
