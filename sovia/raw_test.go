//go:build linux

package sovia

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
)

// rawPair opens two software VIs joined by a veth pair between two
// namespaces the test makes, and a SOVIA connection over them.
func rawPair(t testing.TB, p Params) (a, b *Conn, va, vb *RawVI, nsA, nsB string) {
	t.Helper()
	nsA, nsB, macA, macB := vethPair(t)
	va, vb = openVI(t, nsA, "vA", 1, macB, 2), openVI(t, nsB, "vB", 2, macA, 1)
	a, b = connPair(t, va, vb, p)
	return a, b, va, vb, nsA, nsB
}

// connPair makes a SOVIA connection of each end of a VI pair.
func connPair(t testing.TB, va, vb VI, p Params) (a, b *Conn) {
	t.Helper()
	var err error
	if a, err = NewConn(va, p); err != nil {
		t.Fatal(err)
	}
	if b, err = NewConn(vb, p); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestRawEchoAndBulk runs SOVIA over the software VI on a veth pair
// between two namespaces: an echo of messages of every size the paper
// measures (4 B to 32 KB), then 64 MiB written in 1 MiB writes while the
// echo comes back on the same connection, contents checked by SHA-256,
// no message lost.
func TestRawEchoAndBulk(t *testing.T) {
	p := PaperParams()
	p.CombineDelay = time.Millisecond
	a, b, va, vb, _, _ := rawPair(t, p)

	// The echo server: everything back until the client closes.
	served := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := b.Read(buf)
			if n > 0 {
				if _, werr := b.Write(buf[:n]); werr != nil {
					served <- werr
					return
				}
			}
			if err == io.EOF {
				served <- b.Close()
				return
			}
			if err != nil {
				served <- err
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(4, 5))
	for size := 4; size <= 32<<10; size *= 2 {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		if _, err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 0, size)
		buf := make([]byte, size)
		for len(got) < size {
			n, err := a.Read(buf)
			if err != nil {
				t.Fatalf("echo of %d bytes: %v after %d", size, err, len(got))
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes came back different", size)
		}
	}

	// Bulk: 64 MiB, echoed as it goes.
	if err := bulkEcho(a, 64<<20, 6); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if va.Lost()+vb.Lost() != 0 {
		t.Fatalf("%d messages found no descriptor", va.Lost()+vb.Lost())
	}
}

// TestRawDialListen: connection setup over the software VI. A dialer
// reaches a listener by port and both exchange data at once; a port no
// one listens on and other protocol settings are refused.
func TestRawDialListen(t *testing.T) {
	nsA, nsB, _, macB := vethPair(t)
	ha, hb := openHost(t, nsA, "vA"), openHost(t, nsB, "vB")
	p := PaperParams()
	l, err := hb.Listen(7, p)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		c, err := l.AcceptConn()
		if err != nil {
			served <- err
			return
		}
		c.Write([]byte("hello from the listener")) // before reading: the dialer's descriptors are posted
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			served <- err
			return
		}
		c.Write(buf[:n])
		served <- c.Close()
	}()
	c, err := ha.Dial(macB, 7, p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 23)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello from the listener" {
		t.Fatalf("%q %v", buf, err)
	}
	c.Write([]byte("ping"))
	buf = buf[:4]
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("%q %v", buf, err)
	}
	c.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := ha.Dial(macB, 8, p); err == nil {
		t.Error("a dial to a port no one listens on succeeded")
	}
	other := p
	other.Window = 8
	if _, err := ha.Dial(macB, 7, other); err == nil {
		t.Error("a dial with another window succeeded")
	}
}

// TestRawLossyBulk: the 64 MiB echo of TestRawEchoAndBulk through a relay
// that reorders 1% of the frames of each direction, with XDP programs
// dropping 1% of the VI frames that arrive at either end: the software
// VI's reliable delivery brings every byte, in order, messages sent as
// frames and as bulk datagrams (bulk.go) alike, a message sent again cut
// as it was the first time.
func TestRawLossyBulk(t *testing.T) {
	nsA, nsB := netnstest.Two(t)
	nsR := netnstest.Another(t, nsA)
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	netnstest.IP(t, "link", "add", "vA", "netns", nsA, "type", "veth", "peer", "name", "rA", "netns", nsR)
	netnstest.IP(t, "link", "add", "vB", "netns", nsB, "type", "veth", "peer", "name", "rB", "netns", nsR)
	netnstest.IP(t, "-n", nsA, "link", "set", "vA", "address", macA.String(), "up")
	netnstest.IP(t, "-n", nsB, "link", "set", "vB", "address", macB.String(), "up")
	netnstest.IP(t, "-n", nsR, "link", "set", "rA", "up")
	netnstest.IP(t, "-n", nsR, "link", "set", "rB", "up")
	netnstest.Running(t, nsA, "vA")
	netnstest.Running(t, nsB, "vB")
	netnstest.Running(t, nsR, "rA", "rB")
	relay := netnstest.Relay(t, nsR, "rA", "rB", 0.01, 11)
	vi := netnstest.Frames{EtherTypes: []uint16{EtherType}, UDPPort: BulkPort} // frames and bulk datagrams
	netnstest.Drop(t, nsA, "vA", vi, 0.01)
	netnstest.Drop(t, nsB, "vB", vi, 0.01)
	va, vb := openVI(t, nsA, "vA", 1, macB, 2), openVI(t, nsB, "vB", 2, macA, 1)
	p := PaperParams()
	p.CombineDelay = time.Millisecond
	a, b := connPair(t, va, vb, p)
	go echo(b)
	if err := bulkEcho(a, 64<<20, 12); err != nil {
		t.Fatalf("%v (a resent %d, b %d)", err, va.Resent(), vb.Resent())
	}
	if va.Resent() == 0 || vb.Resent() == 0 || relay.Reordered.Load() == 0 {
		t.Fatalf("resent %d and %d, reordered %d: nothing was lost or reordered", va.Resent(), vb.Resent(), relay.Reordered.Load())
	}
	// Both ends take bulk datagrams: the messages after the first few
	// went, and were sent again, as those (cut into frames before vA
	// and vB, whose XDP programs take a frame at a time).
	ca, cb := va.host.LinkCounts(), vb.host.LinkCounts()
	if ca.BulkSent == 0 || cb.BulkSent == 0 {
		t.Errorf("bulk datagrams sent: a %d, b %d; want some each way", ca.BulkSent, cb.BulkSent)
	}
	t.Logf("relay: %d frames, %d held back; resent: a %d messages, b %d; bulk datagrams a %d, b %d", relay.Frames.Load(), relay.Reordered.Load(), va.Resent(), vb.Resent(), ca.BulkSent, cb.BulkSent)
}

// bulkEcho writes total bytes (a seeded sequence, in 1 MiB writes) on c,
// whose peer echoes them, reads the echo as it comes, and compares the
// two by SHA-256.
func bulkEcho(c *Conn, total int, seed uint64) error {
	want := sha256.New()
	sent := make(chan error, 1)
	go func() {
		block := make([]byte, 1<<20)
		r := rand.New(rand.NewPCG(seed, seed+1))
		for range total / len(block) {
			for i := range block {
				block[i] = byte(r.Uint32())
			}
			want.Write(block)
			if _, err := c.Write(block); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	got := sha256.New()
	buf := make([]byte, 256<<10)
	for n := 0; n < total; {
		k, err := c.Read(buf)
		got.Write(buf[:k])
		n += k
		if err != nil {
			return fmt.Errorf("the echo after %d bytes: %w", n, err)
		}
	}
	if err := <-sent; err != nil {
		return err
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		return fmt.Errorf("the %d bytes came back different", total)
	}
	return nil
}

// openHost opens the software VIs of interface ifc in namespace ns,
// closed when the test ends.
func openHost(t testing.TB, ns, ifc string) *RawHost {
	t.Helper()
	return openHostWith(t, ns, ifc, HostOptions{})
}

// openHostWith is openHost with options.
func openHostWith(t testing.TB, ns, ifc string, o HostOptions) *RawHost {
	t.Helper()
	var h *RawHost
	if err := netnstest.In(ns, func() (err error) {
		h, err = OpenHostWith(ifc, nil, o)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// vethPair makes two namespaces joined by a veth pair, vA (MAC
// 02:00:00:00:00:0a) in nsA and vB (…:0b) in nsB, both running.
func vethPair(t testing.TB) (nsA, nsB string, macA, macB net.HardwareAddr) {
	t.Helper()
	nsA, nsB = netnstest.Two(t)
	macA, macB = net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	netnstest.IP(t, "link", "add", "vA", "netns", nsA, "type", "veth", "peer", "name", "vB", "netns", nsB)
	netnstest.IP(t, "-n", nsA, "link", "set", "vA", "address", macA.String(), "up")
	netnstest.IP(t, "-n", nsB, "link", "set", "vB", "address", macB.String(), "up")
	netnstest.Running(t, nsA, "vA")
	netnstest.Running(t, nsB, "vB")
	return nsA, nsB, macA, macB
}

// openVI opens VI lvi on interface ifc in namespace ns, on a host of its
// own, joined to VI rvi of peer; the host closes when the test ends.
func openVI(t testing.TB, ns, ifc string, lvi uint16, peer net.HardwareAddr, rvi uint16) *RawVI {
	t.Helper()
	var v *RawVI
	if err := netnstest.In(ns, func() (err error) {
		v, err = OpenRaw(ifc, lvi, peer, rvi)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.host.Close() })
	return v
}

// TestOpenHostAs: a host opened as another Ethernet address than its
// interface's (as dragonc run opens a stack's) is reached at that address
// and answers from it; one at the interface's address beside it sees none
// of its frames. The socket's counters count the frames each way, and the
// frames the kernel dropped (none here).
func TestOpenHostAs(t *testing.T) {
	nsA, nsB, macA, _ := vethPair(t)
	stack := net.HardwareAddr{2, 0, 0, 0, 0, 0x77}
	var ha *RawHost
	if err := netnstest.In(nsA, func() (err error) {
		ha, err = OpenHostAs("vA", stack)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ha.Close() })
	if got := ha.MAC(); !bytes.Equal(got, stack) {
		t.Fatalf("the host's address is %s, want %s", got, stack)
	}
	own, hb := openHost(t, nsA, "vA"), openHost(t, nsB, "vB")
	p := PaperParams()
	p.NoDelay = true
	l, err := ha.Listen(7, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Listen(7, p); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		c, err := l.AcceptConn()
		if err != nil {
			served <- err
			return
		}
		_, err = io.Copy(c, c)
		served <- errors.Join(err, c.Close())
	}()
	c, err := hb.Dial(stack, 7, p)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		msg := fmt.Appendf(nil, "message %d", i)
		c.Write(msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("%q, %v; want %q", got, err, msg)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	ha.Close()
	as := ha.LinkCounts()
	// Setup (3 frames at least each way), n messages, the close.
	if as.Received < n+3 || as.Sent < n+3 || as.SendErrors != 0 || as.Dropped != 0 {
		t.Errorf("the host's socket counted %+v", as)
	}
	if o := own.LinkCounts(); o.Sent != 0 || len(own.SetupCounts()) != 0 {
		t.Errorf("the host at the interface's address %s sent %d frames and counted %v: it answered another address's frames", macA, o.Sent, own.SetupCounts())
	}
	// The peer may have sent more (after the host closed), or not yet
	// taken all the host sent; no more can have arrived than was sent.
	if b := hb.LinkCounts(); b.Received > as.Sent || as.Received > b.Sent || b.Received < n+3 {
		t.Errorf("the peer counted %+v, the host %+v", b, as)
	}
}

// watchedEvents reads what the host's epoll instance waits for on its
// socket (/proc/self/fdinfo: "tfd: FD events: HEX").
func watchedEvents(t *testing.T, l *packetLink) uint64 {
	t.Helper()
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", l.epfd))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "tfd:" && f[1] == strconv.Itoa(l.fd) && f[2] == "events:" {
			ev, err := strconv.ParseUint(f[3], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
	}
	t.Fatalf("fd %d is not in epoll instance %d:\n%s", l.fd, l.epfd, info)
	return 0
}

// TestSocketWatchedOnlyWhileSleeping: the socket of a host opened to
// spin wakes Go's poller only while a goroutine sleeps on it. A reader
// that spins has it unwatched, so frames it takes itself wake no idle
// thread (TestSocketWatchedAfterSetBusyPoll has a sleeping one woken). A
// host that sleeps at once has its socket in the poller itself.
func TestSocketWatchedOnlyWhileSleeping(t *testing.T) {
	nsA, nsB, macA, macB := vethPair(t)
	h := openHostWith(t, nsA, "vA", HostOptions{BusyPoll: time.Hour}) // it spins until the frame comes, however slow the test
	r := startReader(t, h, nsB, macA, macB)
	if epfd := r.peer.link.(*packetLink).epfd; epfd != -1 {
		t.Errorf("a host that sleeps at once waits through epoll instance %d", epfd)
	}
	l := h.link.(*packetLink)
	// Spinning: once the reader's receive passes count up (the host's
	// own goroutine, which watched the socket before, has handed it
	// over), the socket is not watched for input while they go on.
	// (The kernel watches every file for errors and hang-ups.)
	deadline := time.Now().Add(10 * time.Second)
	spinning := func(n uint64) {
		for start := h.poll.polls.Load(); h.poll.polls.Load() < start+n; {
			if time.Now().After(deadline) {
				t.Fatal("the reader does not spin")
			}
		}
	}
	spinning(1000)
	for range 20 {
		if ev := watchedEvents(t, l); ev&syscall.EPOLLIN != 0 {
			t.Fatalf("the socket is watched for input (events %#x) while the reader spins", ev)
		}
		spinning(10)
	}
	// The spinning reader takes the frame itself. (A sleeping one is
	// woken by it: TestSocketWatchedAfterSetBusyPoll.)
	r.takes(t, "the spinning reader did not take the frame")
}

// reader is a goroutine reading one byte on a connection of a host's VI,
// and the peer's end of that connection.
type reader struct {
	peer *RawHost // the peer's host, which sleeps at once
	b    *Conn    // the peer's end
	got  chan error
}

// startReader joins VI 1 of h (in the namespace beside nsB) to VI 2 of
// a host of its own on vB in nsB, and starts a goroutine reading one byte
// on h's end.
func startReader(t *testing.T, h *RawHost, nsB string, macA, macB net.HardwareAddr) reader {
	t.Helper()
	p := PaperParams()
	p.NoDelay = true
	va, err := h.VI(1, macB, 2)
	if err != nil {
		t.Fatal(err)
	}
	vb := openVI(t, nsB, "vB", 2, macA, 1)
	a, b := connPair(t, va, vb, p)
	r := reader{peer: vb.host, b: b, got: make(chan error, 1)}
	go func() {
		_, err := io.ReadFull(a, make([]byte, 1))
		r.got <- err
	}()
	return r
}

// wakes waits (until deadline) for h's socket, l, to be watched for
// input, the reader asleep, then sends it a byte: the frame must wake
// it.
func (r reader) wakes(t *testing.T, l *packetLink, deadline time.Time) {
	t.Helper()
	for watchedEvents(t, l)&syscall.EPOLLIN == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the socket is not watched while the reader sleeps")
		}
		time.Sleep(time.Millisecond)
	}
	r.takes(t, "a frame did not wake the sleeping reader")
}

// takes sends the reader a byte and waits for it to have read it,
// failing with slow if it has not in 10 s.
func (r reader) takes(t *testing.T, slow string) {
	t.Helper()
	if _, err := r.b.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(slow)
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestOpenHostLeavesNoFD: a host closes every descriptor it opened (the
// packet sockets, and the epoll instance of a host opened to spin), and
// so does an open that fails after them (here NewHost refusing the
// address), whichever way the host waits.
func TestOpenHostLeavesNoFD(t *testing.T) {
	nsA, _, _, _ := vethPair(t)
	for _, o := range []HostOptions{{}, {BusyPoll: time.Second}} {
		open := func(mac net.HardwareAddr) (h *RawHost, err error) {
			err = netnstest.In(nsA, func() (err error) {
				h, err = OpenHostWith("vA", mac, o)
				return err
			})
			return h, err
		}
		// Once first: the runtime opens its poller's descriptors the
		// first time.
		h, err := open(nil)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		before := openFDs(t)
		if h, err = open(nil); err != nil {
			t.Fatal(err)
		}
		if during := openFDs(t); during <= before {
			t.Errorf("%+v: %d descriptors with a host open, %d without: the count sees none of its own", o, during, before)
		}
		h.Close()
		if after := openFDs(t); after != before {
			t.Errorf("%+v: %d descriptors after a host opened and closed, %d before", o, after, before)
		}
		if _, err := open(net.HardwareAddr{2, 0, 0, 0, 0}); err == nil {
			t.Fatalf("%+v: a 5-byte address opened a host", o)
		}
		if after := openFDs(t); after != before {
			t.Errorf("%+v: %d descriptors after an open that failed, %d before", o, after, before)
		}
	}
}

// TestSocketWatchedAfterSetBusyPoll: a host opened to spin and then told
// not to (SetBusyPoll(0)) keeps its epoll instance: its receivers sleep
// at once, with the socket watched, and a frame wakes them.
func TestSocketWatchedAfterSetBusyPoll(t *testing.T) {
	nsA, nsB, macA, macB := vethPair(t)
	h := openHostWith(t, nsA, "vA", HostOptions{BusyPoll: time.Hour})
	h.SetBusyPoll(0)
	r := startReader(t, h, nsB, macA, macB)
	r.wakes(t, h.link.(*packetLink), time.Now().Add(10*time.Second))
}
