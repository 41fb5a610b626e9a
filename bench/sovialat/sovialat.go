// Package sovialat measures byte-stream providers side by side: SOVIA over
// the software VI and kernel TCP, each connected to a peer that echoes
// every byte. For each message size it measures the one-way latency (half
// the round trip of a ping-pong: write a message, read its echo) at the
// 50th and 99th percentiles, and the bandwidth of a stream of such
// messages that the peer echoes back while more are written (both
// directions flow at once). The targets take turns within every round,
// size by size, and the order of the targets rotates from round to round,
// so that a slow moment of a shared host falls on all of them alike.
//
// The package measures whatever connections it is given: like must be
// compared with like by the caller. dragonc pairs SOVIA without combining
// (sovia.Params.NoDelay) with TCP with TCP_NODELAY (Go's default), so
// that neither side holds a small write back.
package sovialat

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Target is one provider's connection to an echoing peer.
type Target struct {
	Name string
	Conn io.ReadWriter
	// Abort, if set, makes a blocked Read or Write of Conn return: the
	// measurement calls it when no exchange finished for Options.Stall.
	Abort func()
}

// Options control Run.
type Options struct {
	// Sizes are the message sizes in bytes, each at least 1.
	Sizes []int
	// Rounds is how many times every target is measured at every size,
	// taking turns; 5 when zero.
	Rounds int
	// Exchanges is how many ping-pongs a target makes per size and round;
	// 200 when zero.
	Exchanges int
	// StreamBytes is about how much a bandwidth measurement writes per
	// target, size and round: StreamBytes/size messages, at least
	// minStream and at most 4096; 1 MiB when zero. Negative: no
	// bandwidth measurement.
	StreamBytes int
	// Stall ends the run with an error when no message completes for this
	// long (a provider that lost a message waits forever otherwise); 10s
	// when zero. A healthy run, however long, is never cut short.
	Stall time.Duration
	// Clock reads the time; time.Now when nil.
	Clock func() time.Time
	// Progress, if set, is called after each round.
	Progress func(round, rounds int)
}

func (o *Options) defaults() error {
	if len(o.Sizes) == 0 {
		return errors.New("no message sizes to measure")
	}
	for _, s := range o.Sizes {
		if s < 1 || s > 64<<20 {
			return fmt.Errorf("message size %d: it must lie in 1..%d bytes", s, 64<<20)
		}
	}
	if o.Rounds < 0 || o.Exchanges < 0 {
		return fmt.Errorf("rounds %d and exchanges %d must not be negative", o.Rounds, o.Exchanges)
	}
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	if o.Exchanges == 0 {
		o.Exchanges = 200
	}
	if o.StreamBytes == 0 {
		o.StreamBytes = 1 << 20
	}
	if o.Stall <= 0 {
		o.Stall = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return nil
}

// Result is a measurement of every target at every size.
type Result struct {
	Rounds    int    `json:"rounds"`
	Exchanges int    `json:"exchanges"`
	Sizes     []Size `json:"sizes"`
}

// Size is the measurements at one message size, one per target in the
// order given to Run.
type Size struct {
	Size int       `json:"size"`
	Of   []Measure `json:"targets"`
}

// Measure is one target's figures at one size.
type Measure struct {
	Target string `json:"target"`
	// P50us and P99us are percentiles of the one-way latency (half a
	// round trip) over every exchange of every round, in microseconds;
	// RoundP50us the lowest and highest median of a single round.
	P50us      float64    `json:"p50_us"`
	P99us      float64    `json:"p99_us"`
	RoundP50us [2]float64 `json:"round_p50_us"`
	Samples    int        `json:"samples"`
	// Mbps is the median over the rounds of the echoed stream's
	// bandwidth, in megabits (10^6 bits) per second of the bytes written;
	// 0 when bandwidth was not measured.
	Mbps float64 `json:"mbps"`
}

// Target returns target name's figures at this size.
func (s Size) Target(name string) (Measure, bool) {
	for _, m := range s.Of {
		if m.Target == name {
			return m, true
		}
	}
	return Measure{}, false
}

// Run measures targets in interleaved rounds.
func Run(targets []Target, opt Options) (*Result, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, errors.New("no targets to measure")
	}
	names := map[string]bool{}
	for _, t := range targets {
		if t.Name == "" || names[t.Name] || t.Conn == nil {
			return nil, fmt.Errorf("target %q: every target needs a connection and a name of its own", t.Name)
		}
		names[t.Name] = true
	}
	w := newWatchdog(opt.Stall, targets)
	defer w.stop()

	n := len(targets)
	samples := make([][][]time.Duration, len(opt.Sizes)) // size, target → round trips
	roundP50 := make([][][2]float64, len(opt.Sizes))
	rates := make([][][]float64, len(opt.Sizes)) // size, target → Mb/s per round
	for i := range opt.Sizes {
		samples[i] = make([][]time.Duration, n)
		roundP50[i] = make([][2]float64, n)
		rates[i] = make([][]float64, n)
	}
	maxSize := slices.Max(opt.Sizes)
	msg, buf := make([]byte, maxSize), make([]byte, maxSize)
	for i := range msg {
		msg[i] = byte(i*7 + 1)
	}
	for round := range opt.Rounds {
		for si, size := range opt.Sizes {
			for k := range n {
				ti := (k + round) % n // the order rotates every round
				t := targets[ti]
				w.at(t.Name, size)
				rt := make([]time.Duration, 0, opt.Exchanges)
				for range opt.Exchanges {
					d, err := pingPong(t.Conn, msg[:size], buf[:size], opt.Clock)
					if err != nil {
						return nil, w.explain(fmt.Errorf("%s, %d B ping-pong: %w", t.Name, size, err))
					}
					w.tick()
					rt = append(rt, d)
				}
				samples[si][ti] = append(samples[si][ti], rt...)
				p := oneWayUs(Percentile(rt, 0.5))
				if r := &roundP50[si][ti]; round == 0 {
					*r = [2]float64{p, p}
				} else {
					r[0], r[1] = min(r[0], p), max(r[1], p)
				}
				if opt.StreamBytes > 0 {
					count := min(4096, max(minStream, opt.StreamBytes/size))
					d, err := stream(t.Conn, msg[:size], count, opt.Clock, w.tick)
					if err != nil {
						return nil, w.explain(fmt.Errorf("%s, %d B stream: %w", t.Name, size, err))
					}
					rates[si][ti] = append(rates[si][ti], float64(size*count)*8/1e6/max(d.Seconds(), 1e-9))
				}
			}
		}
		if opt.Progress != nil {
			opt.Progress(round+1, opt.Rounds)
		}
	}
	res := &Result{Rounds: opt.Rounds, Exchanges: opt.Exchanges}
	for si, size := range opt.Sizes {
		s := Size{Size: size}
		for ti, t := range targets {
			m := Measure{Target: t.Name, Samples: len(samples[si][ti]), RoundP50us: roundP50[si][ti]}
			m.P50us = oneWayUs(Percentile(samples[si][ti], 0.50))
			m.P99us = oneWayUs(Percentile(samples[si][ti], 0.99))
			if r := rates[si][ti]; len(r) > 0 {
				m.Mbps = median(r)
			}
			s.Of = append(s.Of, m)
		}
		res.Sizes = append(res.Sizes, s)
	}
	return res, nil
}

// minStream is the fewest messages a bandwidth measurement writes: 16
// windows of SOVIA's 32 messages in flight, so that a stream of large
// messages is measured in its steady state rather than as the burst of
// its first window and the drain of its last (64, two windows, gave
// 32 KiB ratios that moved by a factor of two from run to run here).
const minStream = 512

// oneWayUs is half a round trip in microseconds.
func oneWayUs(rt time.Duration) float64 { return float64(rt.Nanoseconds()) / 2e3 }

// Percentile is the nearest-rank q-quantile of ds (0 < q <= 1): the
// smallest value at least a share q of them do not exceed; 0 of none.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pingPong writes msg and reads its echo into buf, and checks it.
func pingPong(c io.ReadWriter, msg, buf []byte, now func() time.Time) (time.Duration, error) {
	start := now()
	if _, err := c.Write(msg); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, err
	}
	d := now().Sub(start)
	if string(buf) != string(msg) {
		return 0, errors.New("the echo differs from the message")
	}
	return d, nil
}

// stream writes count messages while it reads the echo of them all, and
// returns the time until the last byte is back.
func stream(c io.ReadWriter, msg []byte, count int, now func() time.Time, tick func()) (time.Duration, error) {
	total := int64(len(msg) * count)
	start := now()
	done := make(chan error, 1)
	go func() {
		for range count {
			if _, err := c.Write(msg); err != nil {
				done <- err
				return
			}
			tick()
		}
		done <- nil
	}()
	buf := make([]byte, 64<<10)
	var got int64
	for got < total {
		n, err := c.Read(buf[:min(int64(len(buf)), total-got)])
		got += int64(n)
		tick()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			<-done
			return 0, err
		}
	}
	d := now().Sub(start)
	return d, <-done
}

// watchdog aborts every target when nothing completes for stall, and
// says where the run was.
type watchdog struct {
	progress atomic.Int64
	mu       sync.Mutex
	where    string
	fired    atomic.Bool
	done     chan struct{}
	stall    time.Duration
}

func newWatchdog(stall time.Duration, targets []Target) *watchdog {
	w := &watchdog{done: make(chan struct{}), stall: stall}
	go func() {
		t := time.NewTicker(stall / 4)
		defer t.Stop()
		last, since := w.progress.Load(), time.Now()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
			}
			if p := w.progress.Load(); p != last {
				last, since = p, time.Now()
				continue
			}
			if time.Since(since) >= stall {
				w.fired.Store(true)
				for _, t := range targets {
					if t.Abort != nil {
						t.Abort()
					}
				}
				return
			}
		}
	}()
	return w
}

func (w *watchdog) tick() { w.progress.Add(1) }

func (w *watchdog) at(target string, size int) {
	w.mu.Lock()
	w.where = fmt.Sprintf("%s at %d B", target, size)
	w.mu.Unlock()
	w.tick()
}

func (w *watchdog) explain(err error) error {
	if w.fired.Load() {
		w.mu.Lock()
		defer w.mu.Unlock()
		return fmt.Errorf("nothing completed for %v (%s): a message was lost or the peer stopped echoing; %w", w.stall, w.where, err)
	}
	return err
}

func (w *watchdog) stop() { close(w.done) }
