package sovia

import (
	"sort"
	"sync"
	"time"
)

// Clock is where every timer of the package comes from: the combining
// delay, deadlines, the linger after Close, connection setup's retries
// and the software VI's acknowledgement and retransmission timers. The
// real clock is the default; tests pass a FakeClock and move time
// themselves, so that no test depends on how fast the machine is.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer a Clock made.
type Timer interface {
	// Stop keeps the timer from firing; false when it fired or was
	// stopped already.
	Stop() bool
}

// RealClock is the time package's clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// orReal is c, or the real clock when c is nil.
func orReal(c Clock) Clock {
	if c == nil {
		return RealClock{}
	}
	return c
}

// FakeClock is a Clock whose time moves only when Advance is called.
// Timers whose time comes run in the goroutine that calls Advance, in the
// order of their times (then of their making), so that a test sees their
// effects as soon as Advance returns.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

// NewFakeClock starts a fake clock at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)}
}

type fakeTimer struct {
	c    *FakeClock
	when time.Time
	seq  int
	f    func()
	live bool
}

func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *FakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f, live: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.live = false
	return was
}

// Pending is how many timers are set and have not fired.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.live {
			n++
		}
	}
	return n
}

// Advance moves the clock by d, running every timer whose time comes on
// the way (a timer set by one that runs fires too, if its time is within
// d).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.live {
				live = append(live, t)
			}
		}
		c.timers = live
		sort.Slice(c.timers, func(i, j int) bool {
			a, b := c.timers[i], c.timers[j]
			if !a.when.Equal(b.when) {
				return a.when.Before(b.when)
			}
			return a.seq < b.seq
		})
		if len(c.timers) == 0 || c.timers[0].when.After(end) {
			break
		}
		t := c.timers[0]
		t.live = false
		if t.when.After(c.now) {
			c.now = t.when
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}
