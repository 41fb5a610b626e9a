package dataplane

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// pipePort is a port whose only socket is a pipe's read end: readable
// once something is written to it.
type pipePort struct {
	port
	r *os.File
}

func (p pipePort) fds() []int { return []int{int(p.r.Fd())} }

// TestDrain: Server.drain returns only once each loop has found its
// rings empty since it was called, or sleeps on sockets with nothing to
// read; a sleeping loop whose socket is readable has frames to serve
// first.
func TestDrain(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	quiet, qw, err := os.Pipe() // nothing is written to it
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	defer qw.Close()
	busy, sleeping := &queueLoop{sock: pipePort{r: quiet}}, &queueLoop{sock: pipePort{r: r}}
	sleeping.asleep.Store(true)
	s := &Server{queues: []*queueLoop{busy, sleeping}}
	// drained runs drain (with time enough) and says whether the loops
	// had looked again by the time it returned.
	drained := func(looked *atomic.Bool) <-chan bool {
		done := make(chan bool, 1)
		go func() {
			s.drain(time.Minute)
			done <- looked.Load()
		}()
		return done
	}
	var looked atomic.Bool
	done := drained(&looked)
	time.Sleep(20 * time.Millisecond)
	looked.Store(true)
	busy.empty.Add(1) // the busy loop looks again: its ring is empty
	if ok := <-done; !ok {
		t.Fatal("drain returned before the busy loop looked at its rings again")
	}

	// Frames wait on the sleeping loop's socket: it must look first.
	if _, err := w.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	busy.asleep.Store(true) // nothing to read for it: drained
	looked.Store(false)
	done = drained(&looked)
	time.Sleep(20 * time.Millisecond)
	looked.Store(true)
	sleeping.empty.Add(1)
	if ok := <-done; !ok {
		t.Fatal("drain returned while frames waited on a sleeping loop's socket")
	}
}
