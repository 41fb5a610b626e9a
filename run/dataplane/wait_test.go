package dataplane

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestSpinner: a fixed spin is what was asked for; the adaptive one
// spins DefaultSpin until spinMisses spins in a row found nothing, then
// not at all for spinBackoff, then again; a spin that finds frames
// starts the count again.
func TestSpinner(t *testing.T) {
	if got := (Config{Spin: 20 * time.Microsecond}).spinner().budget(time.Now()); got != 20*time.Microsecond {
		t.Errorf("fixed spin: %v", got)
	}
	if got := (Config{Spin: -1}).spinner().budget(time.Now()); got != 0 {
		t.Errorf("no spin: %v", got)
	}
	p := Config{}.spinner()
	now := time.Now()
	for range spinMisses - 1 {
		p.missed(now)
	}
	p.caught()
	for range spinMisses - 1 {
		p.missed(now)
	}
	if got := p.budget(now); got != DefaultSpin {
		t.Fatalf("adaptive, a catch among the misses: %v, want %v", got, DefaultSpin)
	}
	p.missed(now)
	if got := p.budget(now.Add(spinBackoff / 2)); got != 0 {
		t.Errorf("adaptive, %d misses in a row: %v, want no spin", spinMisses, got)
	}
	if got := p.budget(now.Add(spinBackoff)); got != DefaultSpin {
		t.Errorf("adaptive, after the back-off: %v", got)
	}
	fixed := Config{Spin: time.Millisecond}.spinner()
	for range 2 * spinMisses {
		fixed.missed(now)
	}
	if got := fixed.budget(now); got != time.Millisecond {
		t.Errorf("a fixed spin backed off: %v", got)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "adaptive: spinning up to 50µs on empty rings while spins find frames"},
		{Config{Spin: -1}, "no spinning"},
		{Config{Spin: time.Millisecond}, "spinning 1ms"},
		{Config{BusyPoll: true}, "busy polling"},
	} {
		if got := c.cfg.Mode(); !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q, want it to say %q", c.cfg, got, c.want)
		}
	}
}

// TestVISpin: the goroutines waiting on the software VIs wait as the
// loops do: busy polling never sleeps, no spin sleeps at once, a fixed
// spin is theirs too, and the adaptive default spins DefaultSpin a wait.
func TestVISpin(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{BusyPoll: true}, math.MaxInt64},
		{Config{Spin: -1}, 0},
		{Config{Spin: 20 * time.Microsecond}, 20 * time.Microsecond},
		{Config{}, DefaultSpin},
	} {
		if got := c.cfg.VISpin(); got != c.want {
			t.Errorf("%+v: the VIs spin %v, want %v (%s)", c.cfg, got, c.want, c.cfg.VIMode())
		}
	}
	var got time.Duration
	v, err := openVIs(&Stack{OpenVIs: func(_ string, spin time.Duration) (VIs, error) {
		got = spin
		return VIs{Link: func() VILink { return VILink{} }, SetupDrops: func(func(string, uint64)) {}, Close: func() error { return nil }}, nil
	}}, Config{Ifindex: 1, Spin: 7 * time.Microsecond})
	if err != nil || v == nil || got != 7*time.Microsecond {
		t.Errorf("openVIs: %v; the VIs were opened to spin %v, want 7µs", err, got)
	}
}
