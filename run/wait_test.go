package run

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dragonc/dragonc/run/dataplane"
)

// TestWaitModes serves the stack with each way a receive loop waits
// (spinning then sleeping, only sleeping, busy polling) on both socket
// kinds, and checks that each answers a burst after an idle spell long
// enough that the loops went to sleep, that the serving line says which
// mode serves, and that the final counters add up.
func TestWaitModes(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	modes := []struct {
		name string
		set  func(*Options)
		says string
	}{
		{"adaptive", func(o *Options) {}, "adaptive: "},
		{"spin", func(o *Options) { o.Spin = 20 * time.Microsecond }, "spinning 20µs on empty rings"},
		{"sleep", func(o *Options) { o.Spin = -1 }, "no spinning"},
		{"busy-poll", func(o *Options) { o.BusyPoll = true }, "busy polling (SO_PREFER_BUSY_POLL"},
	}
	for _, socket := range []string{"xdp", "packet"} {
		for _, m := range modes {
			t.Run(socket+"/"+m.name, func(t *testing.T) {
				var mu sync.Mutex
				var final dataplane.Report
				sv := serveIn(t, a, r, st, socket, m.set, func(o *Options) {
					o.OnReport = func(r dataplane.Report) {
						mu.Lock()
						defer mu.Unlock()
						if r.Final {
							final = r
						}
					}
				})
				if !strings.Contains(sv.log.String(), m.says) {
					t.Errorf("the run does not say how its loops wait (%q):\n%s", m.says, sv.log.String())
				}
				err := inNS(b, func() error {
					for round := range 2 {
						// Idle longer than any spin, so that the next
						// frame finds the loops asleep.
						time.Sleep(20 * time.Millisecond)
						for i := range 20 {
							time.Sleep(time.Millisecond) // past the spin: asleep again
							msg := []byte(fmt.Sprintf("round %d datagram %d", round, i))
							got, err := udpExchange(7, msg)
							if err != nil {
								return err
							}
							if !bytes.Equal(got, msg) {
								return fmt.Errorf("echo of %q is %q", msg, got)
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := sv.stop(); err != nil {
					t.Fatal(err)
				}
				// Each datagram is answered at its first sending, but for
				// a few a loaded machine delays past udpExchange's 300 ms:
				// a loop that slept through its frames until its time slice
				// ended (a second) would count each about three times.
				mu.Lock()
				defer mu.Unlock()
				echoes := uint64(0)
				for _, q := range final.Queues {
					for _, o := range q.Outcomes {
						if o.Name == "deliver echo" {
							echoes += o.Count
						}
					}
				}
				if echoes < 40 || echoes > 50 {
					t.Errorf("%d echoes delivered, want 40 (one per datagram) and at most 10 sent again:\n%s", echoes, sv.final())
				}
			})
		}
	}
}
