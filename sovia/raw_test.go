//go:build linux

package sovia

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
)

// rawPair opens two software VIs joined by a veth pair between two
// namespaces the test makes, and a SOVIA connection over them.
func rawPair(t testing.TB, p Params) (a, b *Conn, va, vb *RawVI, nsA, nsB string) {
	t.Helper()
	nsA, nsB = netnstest.Two(t)
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	netnstest.IP(t, "link", "add", "vA", "netns", nsA, "type", "veth", "peer", "name", "vB", "netns", nsB)
	netnstest.IP(t, "-n", nsA, "link", "set", "vA", "address", macA.String(), "up")
	netnstest.IP(t, "-n", nsB, "link", "set", "vB", "address", macB.String(), "up")
	netnstest.Running(t, nsA, "vA")
	netnstest.Running(t, nsB, "vB")
	open := func(ns, ifc string, lvi uint16, peer net.HardwareAddr, rvi uint16) *RawVI {
		var v *RawVI
		if err := netnstest.In(ns, func() (err error) {
			v, err = OpenRaw(ifc, lvi, peer, rvi)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	va, vb = open(nsA, "vA", 1, macB, 2), open(nsB, "vB", 2, macA, 1)
	// The software VI does not retransmit: should the link lose the last
	// message of an exchange, both ends would wait for a window credit
	// forever. The test fails then, after two minutes, instead of hanging.
	watchdog := time.AfterFunc(2*time.Minute, func() {
		t.Errorf("the exchange took more than two minutes; closing the VIs (va lost %d, vb lost %d)", va.Lost(), vb.Lost())
		va.Close()
		vb.Close()
	})
	t.Cleanup(func() { watchdog.Stop() })
	var err error
	if a, err = NewConn(va, p); err != nil {
		t.Fatal(err)
	}
	if b, err = NewConn(vb, p); err != nil {
		t.Fatal(err)
	}
	return a, b, va, vb, nsA, nsB
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

	// Bulk: 64 MiB one way, in 1 MiB writes.
	const total = 64 << 20
	want := sha256.New()
	sent := make(chan error, 1)
	go func() {
		block := make([]byte, 1<<20)
		r := rand.New(rand.NewPCG(6, 7))
		for range total / len(block) {
			for i := range block {
				block[i] = byte(r.Uint32())
			}
			want.Write(block)
			if _, err := a.Write(block); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// The echo server returns it all; read it back while writing.
	got := sha256.New()
	buf := make([]byte, 256<<10)
	for n := 0; n < total; {
		k, err := a.Read(buf)
		got.Write(buf[:k])
		n += k
		if err != nil {
			t.Fatalf("bulk after %d bytes: %v", n, err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("the 64 MiB arrived different")
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
	nsA, nsB := netnstest.Two(t)
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	netnstest.IP(t, "link", "add", "vA", "netns", nsA, "type", "veth", "peer", "name", "vB", "netns", nsB)
	netnstest.IP(t, "-n", nsA, "link", "set", "vA", "address", macA.String(), "up")
	netnstest.IP(t, "-n", nsB, "link", "set", "vB", "address", macB.String(), "up")
	netnstest.Running(t, nsA, "vA")
	netnstest.Running(t, nsB, "vB")
	host := func(ns, ifc string) *RawHost {
		var h *RawHost
		if err := netnstest.In(ns, func() (err error) {
			h, err = OpenHost(ifc)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	ha, hb := host(nsA, "vA"), host(nsB, "vB")
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
