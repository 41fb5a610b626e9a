package run

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	gomaps "maps"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dragonc/dragonc/backends/nicconf"
	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/dragonc/dragonc/run/dataplane"
	"github.com/dragonc/dragonc/sovia"
)

// viaStack has stream endpoints for a VIA NIC: two to a peer on the
// stack's subnet (an echo and a discard, which the mvia plan puts on VIs)
// and one to a host beyond it (kernel TCP: VIA does not route).
const viaStack = `stack vis {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint repl tcp flow 10.9.0.1:5000 -> 10.9.0.2:6000 { app "echo" message 4KiB }
    endpoint drain tcp flow 10.9.0.1:5001 -> 10.9.0.2:6001 { app "discard" message 64B nodelay }
    endpoint far tcp flow 10.9.0.1:5002 -> 192.168.7.1:873 { app "echo" }
    endpoint echo udp listen *:7 { app "echo" }
    service icmp-echo
    service arp
}
`

// TestServeVIA serves an mvia plan on a veth: the stream endpoints the
// plan puts on VIs are served by SOVIA over the software VI on a packet
// socket of their own (the eBPF stage leaves EtherType 0x88B5 to the
// kernel, which hands it to that socket), and a peer with its own raw-socket VI host talks to them: an echo of
// every size of the paper's tables, a 4 MiB transfer checked byte for
// byte, and a discard; the stack's UDP echo keeps working beside them.
func TestServeVIA(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) { testServeVIA(t, socket, 0) })
	}
	// The software VI's reliable delivery: 1% of the frames the stack
	// sends are lost on the way (an XDP program on the peer's veth), and
	// the streams are served all the same.
	t.Run("lossy", func(t *testing.T) { testServeVIA(t, "packet", 0.01) })
}

// viFrames are the software VI's frames and bulk datagrams, which the
// lossy tests drop a share of.
var viFrames = netnstest.Frames{EtherTypes: []uint16{sovia.EtherType}, UDPPort: sovia.BulkPort}

func testServeVIA(t *testing.T, socket string, loss float64) {
	a, b := pair(t)
	if loss > 0 {
		netnstest.Drop(t, b, "vB", viFrames, loss)
	}
	// far is a kernel-socket endpoint: the kernel owns the address.
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	r, st := embedDriver(t, "mvia", viaStack, false)
	if r.Plan.VIA == nil {
		t.Fatal("the mvia plan has no VI decisions")
	}
	params := map[string]sovia.Params{}
	for _, s := range nicconf.Streams(r.Plan.VIA) {
		if s.Transport == "vi" {
			params[s.Name] = s.Params
		}
	}
	if len(params) != 2 || params["repl"].Window == 0 || params["drain"].Window == 0 {
		t.Fatalf("the plan puts %v on VIs; the test wants repl and drain", params)
	}

	var out, log syncBuffer
	stop := serveInNS(t, a, &log, func(ctx context.Context, ready func()) error {
		return Serve(ctx, r, st, Options{Iface: "vA", Socket: socket, Stdout: &out, Stderr: &log, Force: true, Ready: ready})
	})

	var peerCounts sovia.LinkCounts
	err := inNS(b, func() error {
		peer, err := sovia.OpenHost("vB")
		if err != nil {
			return err
		}
		defer func() {
			peerCounts = peer.LinkCounts()
			peer.Close()
		}()
		// A VI whose peer stops answering breaks after its retransmissions;
		// should anything else hang, fail after two minutes.
		watchdog := time.AfterFunc(2*time.Minute, func() { peer.Close() })
		defer watchdog.Stop()
		stack := net.HardwareAddr{2, 0, 0, 0, 0, 1}
		c, err := peer.Dial(stack, 5000, params["repl"])
		if err != nil {
			return fmt.Errorf("dialing repl: %w", err)
		}
		for size := 4; size <= 32<<10; size *= 2 {
			msg := bytes.Repeat([]byte{byte(size), 0xa5}, size/2)
			if _, err := c.Write(msg); err != nil {
				return err
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				return fmt.Errorf("repl, %d B: %w", size, err)
			}
			if !bytes.Equal(got, msg) {
				return fmt.Errorf("repl, %d B came back changed", size)
			}
		}
		// A bulk transfer, echoed as it goes.
		bulk := make([]byte, 4<<20)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range bulk {
			bulk[i] = byte(rng.Uint32())
		}
		werr := make(chan error, 1)
		go func() {
			_, err := c.Write(bulk)
			werr <- err
		}()
		got := make([]byte, len(bulk))
		if _, err := io.ReadFull(c, got); err != nil {
			return fmt.Errorf("repl, bulk: %w", err)
		}
		if err := <-werr; err != nil {
			return err
		}
		if !bytes.Equal(got, bulk) {
			return fmt.Errorf("repl: the 4 MiB came back changed")
		}
		if err := c.Close(); err != nil {
			return err
		}
		d, err := peer.Dial(stack, 5001, params["drain"])
		if err != nil {
			return fmt.Errorf("dialing drain: %w", err)
		}
		if _, err := d.Write(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
			return err
		}
		if err := d.Close(); err != nil {
			return err
		}
		// The stack's own endpoints are served beside the VIs.
		msg := []byte("udp beside the VIs")
		echo, err := udpExchange(7, msg)
		if err != nil || !bytes.Equal(echo, msg) {
			return fmt.Errorf("udp echo beside the VIs: %q, %v", echo, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nrun said:\n%s%s", err, log.String(), out.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	// The VIs' goroutines wait as the loops do (adaptive by default).
	if want := "a goroutine waiting on a VI: spinning up to 50µs, then sleeping"; !strings.Contains(log.String(), want) {
		t.Errorf("run did not say %q:\n%s", want, log.String())
	}
	final := out.String()
	i := strings.LastIndex(final, "final:\n")
	if i < 0 {
		t.Fatalf("no final counters:\n%s", final)
	}
	final = final[i:]
	var in, sent int
	if _, err := fmt.Sscanf(final, "final:\nvi: received %d, sent %d", &in, &sent); err != nil {
		t.Fatalf("no VI counters first in the final counters (%v):\n%s", err, final)
	}
	// 4 MiB each way at most 1,500 bytes a frame, and 1 MiB in: the
	// peer's bulk datagrams reach the stack cut into frames (the XDP
	// program on vA makes vB's side of the veth segment them).
	if in < 5<<20/1500 || sent < 4<<20/1500 {
		t.Errorf("run counted %d VI frames in and %d out:\n%s", in, sent, final)
	}
	// Both ends take bulk datagrams: the stage passes the peer's to the
	// VIs' socket (224.0.0.0 is no address of the stack's).
	var stackBulk int
	if j := strings.Index(final, "bulk datagrams sent "); j < 0 {
		t.Errorf("the stack sent no bulk datagrams:\n%s", final)
	} else if _, err := fmt.Sscanf(final[j:], "bulk datagrams sent %d", &stackBulk); err != nil || stackBulk == 0 {
		t.Errorf("the stack sent %d bulk datagrams (%v):\n%s", stackBulk, err, final)
	}
	// Whole unless vB has the loss program, which makes vA segment.
	if peerCounts.BulkSent == 0 || (peerCounts.BulkReceived == 0) != (loss > 0) {
		t.Errorf("the peer sent %d bulk datagrams and received %d whole; want some sent, and some received whole without loss", peerCounts.BulkSent, peerCounts.BulkReceived)
	}
	// The receive loops never see a VI frame: the stage leaves them to
	// the VIs' own socket. The loops took the UDP echo and what else
	// came (ARP, IPv6 neighbour discovery), far fewer than the VIs'.
	loops := 0
	for _, l := range strings.Split(final, "\n") {
		var q, n int
		if _, err := fmt.Sscanf(l, "queue %d: in %d", &q, &n); err == nil {
			loops += n
		}
	}
	if loops > 200 {
		t.Errorf("the receive loops took %d frames: VI frames reached them:\n%s", loops, final)
	}
	for _, want := range []string{"endpoint repl: over VI 1 with SOVIA", "endpoint drain: over VI 2 with SOVIA", "kernel-socket endpoints (far)", "endpoint far: app \"echo\" on a kernel socket"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("run does not say %q:\n%s", want, log.String())
		}
	}
	t.Logf("run said:\n%s%s", log.String(), final)
}

// TestServeCodeStreams serves the mvia plan with ServeCode and a stream
// handler of the program's own for repl (it answers each read in upper
// case): the handler runs on connections that arrive over the software
// VI served beside the data plane. The generated code is not what is tested here (it
// drops every frame; VI frames never reach it); TestServeVIA runs it.
func TestServeCodeStreams(t *testing.T) {
	a, b := pair(t)
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA") // for far, on kernel TCP
	r, st := embedDriver(t, "mvia", viaStack, false)
	var names []string
	for _, e := range st.Endpoints {
		names = append(names, e.Name)
	}
	code := Code{Process: func(int, []byte) Verdict { return Verdict{} }, Endpoints: names}
	upper := func(c *sovia.Conn) {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				c.Write(bytes.ToUpper(buf[:n]))
			}
			if err != nil {
				return
			}
		}
	}
	// A handler for a stream the plan leaves on kernel TCP is refused.
	err := inNS(a, func() error {
		return ServeCode(t.Context(), r, st, code, nil, Options{Iface: "vA", Force: true, Streams: map[string]func(*sovia.Conn){"far": upper}})
	})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "stream handler for far, which the plan does not put on a VI") {
		t.Fatalf("a handler for far: got %v", err)
	}

	var log syncBuffer
	stop := serveInNS(t, a, &log, func(ctx context.Context, ready func()) error {
		return ServeCode(ctx, r, st, code, nil, Options{Iface: "vA", Force: true, Stdout: &log, Stderr: &log,
			Streams: map[string]func(*sovia.Conn){"repl": upper}, Ready: ready})
	})
	params := map[string]sovia.Params{}
	for _, s := range nicconf.Streams(r.Plan.VIA) {
		params[s.Name] = s.Params
	}
	err = inNS(b, func() error {
		peer, err := sovia.OpenHost("vB")
		if err != nil {
			return err
		}
		defer peer.Close()
		watchdog := time.AfterFunc(time.Minute, func() { peer.Close() })
		defer watchdog.Stop()
		c, err := peer.Dial(net.HardwareAddr{2, 0, 0, 0, 0, 1}, 5000, params["repl"])
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range 5 {
			msg := fmt.Sprintf("message %d over a vi", i)
			if _, err := c.Write([]byte(msg)); err != nil {
				return err
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				return err
			}
			if string(got) != strings.ToUpper(msg) {
				return fmt.Errorf("repl answered %q to %q", got, msg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
}

// serveInNS runs serve in namespace ns until the returned stop is called,
// and waits for it to be ready (waitReady, with log for its failure).
// stop ends it and returns its error.
func serveInNS(t *testing.T, ns string, log *syncBuffer, serve func(ctx context.Context, ready func()) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- inNS(ns, func() error { return serve(ctx, func() { close(ready) }) })
	}()
	waitReady(t, ready, served, log)
	return func() error {
		cancel()
		return <-served
	}
}

// TestServeVIALossyReordered: a bulk transfer to dragonc run's echo
// stream arrives byte for byte through a relay (a third namespace) that
// reorders 1% of the frames of each direction, with XDP programs dropping
// 1% of the VI frames of each direction (those the stack sends on the
// peer's veth, the peer's on the relay's veth toward the stack), and run
// keeps serving: a second connection is echoed afterwards, and the UDP
// echo answers. 64 MiB, as issue 41's goal has it (about 5 s here).
func TestServeVIALossyReordered(t *testing.T) {
	const total = 64 << 20
	a, b := netnstest.Two(t, "ethtool", "go")
	r := netnstest.Another(t, a)
	ip(t, "link", "add", "vA", "netns", a, "type", "veth", "peer", "name", "rA", "netns", r)
	ip(t, "link", "add", "vB", "netns", b, "type", "veth", "peer", "name", "rB", "netns", r)
	ip(t, "-n", a, "link", "set", "vA", "address", "02:00:00:00:00:01", "up")
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA") // far is on kernel TCP
	ip(t, "-n", b, "addr", "add", "10.9.0.2/24", "dev", "vB")
	ip(t, "-n", b, "link", "set", "vB", "up")
	// The peer finishes its UDP checksums itself (a veth would leave
	// them to a NIC that is not there), as pair's does.
	if out, err := exec.Command("ip", "netns", "exec", b, "ethtool", "-K", "vB", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K vB tx off: %v\n%s", err, out)
	}
	ip(t, "-n", r, "link", "set", "rA", "up")
	ip(t, "-n", r, "link", "set", "rB", "up")
	netnstest.Running(t, a, "vA")
	netnstest.Running(t, b, "vB")
	netnstest.Running(t, r, "rA", "rB")
	relay := netnstest.Relay(t, r, "rA", "rB", 0.01, 41)
	netnstest.Drop(t, b, "vB", viFrames, 0.01) // the stack's frames
	netnstest.Drop(t, r, "rB", viFrames, 0.01) // the peer's

	rs, st := embedDriver(t, "mvia", viaStack, false)
	var params sovia.Params
	for _, s := range nicconf.Streams(rs.Plan.VIA) {
		if s.Name == "repl" && s.Transport == "vi" {
			params = s.Params
		}
	}
	if params.Window == 0 {
		t.Fatal("the mvia plan does not put repl on a VI")
	}
	var out, log syncBuffer
	stop := serveInNS(t, a, &log, func(ctx context.Context, ready func()) error {
		return Serve(ctx, rs, st, Options{Iface: "vA", Stdout: &out, Stderr: &log, Force: true, Ready: ready})
	})
	var peerCounts sovia.LinkCounts
	err := inNS(b, func() error {
		peer, err := sovia.OpenHost("vB")
		if err != nil {
			return err
		}
		defer func() {
			peer.Close()
			peerCounts = peer.LinkCounts() // every frame it sent is counted
		}()
		watchdog := time.AfterFunc(2*time.Minute, func() { peer.Close() })
		defer watchdog.Stop()
		stack := net.HardwareAddr{2, 0, 0, 0, 0, 1}
		c, err := peer.Dial(stack, 5000, params)
		if err != nil {
			return fmt.Errorf("dialing repl: %w", err)
		}
		want, got := sha256.New(), sha256.New()
		werr := make(chan error, 1)
		go func() {
			block := make([]byte, 1<<20)
			rng := rand.New(rand.NewPCG(41, 1))
			for range total / len(block) {
				for i := range block {
					block[i] = byte(rng.Uint32())
				}
				want.Write(block)
				if _, err := c.Write(block); err != nil {
					werr <- err
					return
				}
			}
			werr <- nil
		}()
		if n, err := io.CopyN(got, c, int64(total)); err != nil {
			return fmt.Errorf("repl, bulk: %d of %d bytes came back: %w", n, total, err)
		}
		if err := <-werr; err != nil {
			return err
		}
		if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			return fmt.Errorf("repl: the %d MiB came back changed", total>>20)
		}
		if err := c.Close(); err != nil {
			return err
		}
		// Run still serves the stream, and the stack beside it.
		c, err = peer.Dial(stack, 5000, params)
		if err != nil {
			return fmt.Errorf("dialing repl again: %w", err)
		}
		msg := []byte("still served")
		if _, err := c.Write(msg); err != nil {
			return err
		}
		back := make([]byte, len(msg))
		if _, err := io.ReadFull(c, back); err != nil || !bytes.Equal(back, msg) {
			return fmt.Errorf("repl after the bulk transfer: %q, %v", back, err)
		}
		if err := c.Close(); err != nil {
			return err
		}
		if echo, err := udpExchange(7, msg); err != nil || !bytes.Equal(echo, msg) {
			return fmt.Errorf("udp echo after the bulk transfer: %q, %v", echo, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nrun said:\n%s%s", err, log.String(), out.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	// The peer's frames that the stack's VIs did not receive are those
	// the relay's veth dropped (the peer sent nothing after it closed).
	final := out.String()
	var in, sent uint64
	if i := strings.LastIndex(final, "final:\n"); i < 0 {
		t.Fatalf("no final counters:\n%s", final)
	} else if _, err := fmt.Sscanf(final[i:], "final:\nvi: received %d, sent %d", &in, &sent); err != nil {
		t.Fatalf("no VI counters in the final counters (%v):\n%s", err, final[i:])
	}
	if in >= peerCounts.Sent || relay.Reordered.Load() == 0 {
		t.Fatalf("the peer sent %d VI frames and the stack received %d; the relay held back %d frames: nothing was lost or reordered", peerCounts.Sent, in, relay.Reordered.Load())
	}
	t.Logf("%d MiB; relay: %d frames, %d held back; of the peer's %d VI frames the stack received %d, of the stack's %d the peer %d",
		total>>20, relay.Frames.Load(), relay.Reordered.Load(), peerCounts.Sent, in, sent, peerCounts.Received)
}

// TestMetricsVI: the VIs' socket counters are exported by what they
// count, and setup's drops by reason; a report without VIs exports
// neither.
func TestMetricsVI(t *testing.T) {
	m := NewMetrics("vis", "mvia", "vA")
	gather := func() map[string]float64 {
		fams, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			if f.GetName() != "dragonc_vi_frames_total" && f.GetName() != "dragonc_vi_bulk_datagrams_total" && f.GetName() != "dragonc_via_setup_drops_total" {
				continue
			}
			for _, x := range f.GetMetric() {
				for _, l := range x.GetLabel() {
					got[f.GetName()+" "+l.GetValue()] = x.GetCounter().GetValue()
				}
			}
		}
		return got
	}
	m.Update(dataplane.Report{})
	if got := gather(); len(got) != 0 {
		t.Errorf("without VIs: %v", got)
	}
	m.Update(dataplane.Report{VI: &dataplane.VICounts{VILink: dataplane.VILink{Received: 9, Sent: 8, SendErrors: 2, Dropped: 1, Oversize: 4, NoRoom: 2, BulkSent: 5, BulkReceived: 6, BulkRefused: 7, BulkAbandoned: 1},
		SetupDrops: []dataplane.Outcome{{Name: "connection request refused", Count: 3}}}})
	want := map[string]float64{
		"dragonc_vi_frames_total received": 9, "dragonc_vi_frames_total sent": 8,
		"dragonc_vi_frames_total send_errors": 2, "dragonc_vi_frames_total dropped": 1,
		"dragonc_vi_frames_total oversize":                         4,
		"dragonc_vi_frames_total no_room":                          2,
		"dragonc_vi_bulk_datagrams_total sent":                     5,
		"dragonc_vi_bulk_datagrams_total received":                 6,
		"dragonc_vi_bulk_datagrams_total refused":                  7,
		"dragonc_vi_bulk_datagrams_total abandoned_vis":            1,
		"dragonc_via_setup_drops_total connection request refused": 3,
	}
	if got := gather(); !gomaps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
