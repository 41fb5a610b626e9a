//go:build linux

package sovia

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
)

// TestLinkDownAndUp: an interface that goes down and comes up again
// (sooner than the VIs' retransmissions give up) does not end the VIs of
// a host that sleeps at once, though the kernel leaves ENETDOWN pending
// on its packet socket (packet_notifier in net/packet/af_packet.c): the
// socket also reports itself writable then, so Go's poller wakes the
// reader, which finds nothing and waits again. A message written while
// the link is down is retransmitted and echoed once it is up.
func TestLinkDownAndUp(t *testing.T) {
	a, b, va, _, nsA, _ := rawPair(t, PaperParams())
	go func() { // the echo
		buf := make([]byte, 64)
		for {
			n, err := b.Read(buf)
			if err != nil {
				return
			}
			if _, err := b.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	read := func(want string) {
		t.Helper()
		got := make([]byte, len(want))
		a.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := io.ReadFull(a, got); err != nil {
			t.Fatalf("reading the echo of %q: %v (socket %+v)", want, err, va.host.LinkCounts())
		}
		if !bytes.Equal(got, []byte(want)) {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	if _, err := a.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	read("before")
	// A goroutine waits for an echo while the interface goes down.
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		read("during")
	}()
	time.Sleep(50 * time.Millisecond) // let it go to sleep; it need not have
	netnstest.IP(t, "-n", nsA, "link", "set", "vA", "down")
	time.Sleep(300 * time.Millisecond)
	if _, err := a.Write([]byte("during")); err != nil {
		t.Fatal(err)
	}
	netnstest.IP(t, "-n", nsA, "link", "set", "vA", "up")
	netnstest.Running(t, nsA, "vA")
	<-echoed
}
