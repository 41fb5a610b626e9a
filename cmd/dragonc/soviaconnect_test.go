package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/dragonc/dragonc/sovia"
)

// connectStack is served by TestSoviaConnect: on mvia, with a
// calibration whose VI is the faster for small messages, the plan puts the
// echo stream to the peer's subnet on a VI.
const connectStack = `stack connect {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint repl tcp flow 10.9.0.1:5000 -> 10.9.0.2:6000 { app "echo" message 64B }
    service arp
}
`

// saPair is vethPair with namespaces named sa-PID-a and -b.
func saPair(t *testing.T) (a, b string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("this test needs root (ip netns, veth)")
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("this test needs %s", tool)
		}
	}
	a, b = fmt.Sprintf("sa-%d-a", os.Getpid()), fmt.Sprintf("sa-%d-b", os.Getpid())
	for _, ns := range []string{a, b} {
		netnstest.IP(t, "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	netnstest.IP(t, "link", "add", "vA", "netns", a, "type", "veth", "peer", "name", "vB", "netns", b)
	netnstest.IP(t, "-n", a, "link", "set", "vA", "address", "02:00:00:00:00:01", "up")
	netnstest.IP(t, "-n", b, "addr", "add", "10.9.0.2/24", "dev", "vB")
	netnstest.IP(t, "-n", b, "link", "set", "vB", "address", "02:00:00:00:00:02", "up")
	if out, err := exec.Command("ip", "netns", "exec", b, "ethtool", "-K", "vB", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v\n%s", err, out)
	}
	netnstest.Running(t, a, "vA")
	netnstest.Running(t, b, "vB")
	return a, b
}

// connectIn runs dragonc sovia connect with args in namespace ns, its
// standard input a pipe the test writes: it waits until standard output
// holds want (if any), then ends standard input, and returns the exit
// code and what the command wrote.
func connectIn(t *testing.T, ns, input, want string, args ...string) (int, string, string) {
	t.Helper()
	pr, pw := io.Pipe()
	var out, errs netnstest.SyncBuffer
	done := make(chan int, 1)
	go netnstest.In(ns, func() error {
		done <- run(append([]string{"sovia", "connect"}, args...), pr, &out, &errs)
		return nil
	})
	ended := false
	if input != "" {
		go pw.Write([]byte(input))
	}
	for deadline := time.Now().Add(10 * time.Second); want != "" && !ended && time.Now().Before(deadline); {
		if strings.Contains(out.String(), want) {
			break
		}
		select {
		case code := <-done:
			done <- code
			ended = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	pw.Close()
	select {
	case code := <-done:
		return code, out.String(), errs.String()
	case <-time.After(20 * time.Second):
		t.Fatalf("sovia connect %v still runs 20 s after its input ended; stdout %q, stderr %q", args, out.String(), errs.String())
		return 0, "", ""
	}
}

// captureLink keeps the frames a host sends.
type captureLink struct{ frames [][]byte }

func (l *captureLink) SendFrame(f []byte) error {
	l.frames = append(l.frames, append([]byte(nil), f...))
	return nil
}
func (l *captureLink) MTU() int     { return 1500 }
func (l *captureLink) Close() error { return nil }

// forgedConnects are n connection requests for port to host, as a dialer
// of package sovia sends them (one made on a link that keeps it), each
// then given a random unicast source address, dialer VI and nonce: the
// VI header begins with the destination and source VIs, and the request
// ends the frame with the dialer's VI at 3 and the nonce at 15.
func forgedConnects(t *testing.T, n int, host net.HardwareAddr, port uint16) [][]byte {
	t.Helper()
	link := &captureLink{}
	h, err := sovia.NewHost(link, net.HardwareAddr{2, 0, 0, 0, 0, 0x99})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.DialContext(ctx, host, port, sovia.PaperParams())
	if len(link.frames) == 0 || len(link.frames[0]) < 14+4+19 {
		t.Fatalf("the dial sent %d frames", len(link.frames))
	}
	tmpl := link.frames[0]
	rng := rand.New(rand.NewPCG(41, 2))
	out := make([][]byte, n)
	for i := range out {
		f := append([]byte(nil), tmpl...)
		binary.BigEndian.PutUint32(f[6:10], rng.Uint32())
		binary.BigEndian.PutUint16(f[10:12], uint16(rng.Uint32()))
		f[6] = f[6]&^1 | 2 // unicast, locally administered
		vi := uint16(1 + rng.IntN(1<<16-1))
		binary.BigEndian.PutUint16(f[16:18], vi)
		req := f[len(f)-19:]
		binary.BigEndian.PutUint16(req[3:], vi)
		binary.BigEndian.PutUint32(req[15:], rng.Uint32())
		out[i] = f
	}
	return out
}

// rawSender sends whole frames from a packet socket on ifname in
// namespace ns.
func rawSender(t *testing.T, ns, ifname string) func([]byte) error {
	t.Helper()
	var fd, ifindex int
	if err := netnstest.In(ns, func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		ifindex = ifc.Index
		fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return func(f []byte) error {
		sa := &syscall.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
		copy(sa.Addr[:], f[0:6])
		for {
			err := syscall.Sendto(fd, f, 0, sa)
			if err != syscall.ENOBUFS && err != syscall.EAGAIN {
				return err
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// TestSoviaConnect: dragonc sovia connect against the echo stream of
// dragonc run mvia: by IPv4 address (the neighbour table, filled by ARP,
// which the stack answers), then three sessions in a row by Ethernet
// address, then one while a raw socket sends 1,000 forged connection
// requests from random addresses (the run's counters show the half-open
// connections it evicted); a port with no stream is refused (and
// counted), an address with no neighbour is not found, a malformed peer
// is a usage error.
func TestSoviaConnect(t *testing.T) {
	a, b := saPair(t)
	stack := detachEnv(t, a, "connect.lpg", connectStack)
	// A calibration whose VI beats kernel TCP for small messages, so that
	// the plan puts the stream on a VI (the checked-in one, of this
	// machine, puts none there).
	calibration, err := filepath.Abs("../../testdata/embed/calibrated/fastsmall.json")
	if err != nil {
		t.Fatal(err)
	}
	var code int
	var errs string
	netnstest.In(a, func() error {
		code, _, errs = dragoncIn(t, "run", "--detach", "--force", "--socket", "packet", "--calibration", calibration, "mvia", stack, "vA")
		return nil
	})
	if code != 0 {
		t.Fatalf("run --detach mvia: exit %d:\n%s", code, errs)
	}

	code, out, errs := connectIn(t, b, "hello over a VI\n", "hello over a VI\n", "-v", "-q", "100ms", "vB", "10.9.0.1:5000")
	if code != 0 || out != "hello over a VI\n" || !strings.Contains(errs, "connected to [02:00:00:00:00:01]:5000 from [02:00:00:00:00:02]:0 over vB") {
		t.Fatalf("by IPv4 address: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	for i := range 3 {
		msg := fmt.Sprintf("session %d\n", i)
		code, out, errs := connectIn(t, b, msg, msg, "-q", "100ms", "vB", "[02:00:00:00:00:01]:5000")
		if code != 0 || out != msg || errs != "" {
			t.Fatalf("session %d by Ethernet address: exit %d, stdout %q, stderr:\n%s", i, code, out, errs)
		}
	}
	// 1,000 forged requests from random addresses, sent from a raw
	// socket in the peer's namespace while a real client connects.
	send := rawSender(t, b, "vB")
	forged := forgedConnects(t, 1000, net.HardwareAddr{2, 0, 0, 0, 0, 1}, 5000)
	started, flooded := make(chan struct{}), make(chan error, 1)
	go func() {
		for i, f := range forged {
			if i == 100 {
				close(started)
			}
			if err := send(f); err != nil {
				flooded <- err
				return
			}
		}
		flooded <- nil
	}()
	<-started
	t0 := time.Now()
	code, out, errs = connectIn(t, b, "during the flood\n", "during the flood\n", "-q", "100ms", "vB", "10.9.0.1:5000")
	took := time.Since(t0)
	if err := <-flooded; err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != "during the flood\n" {
		t.Fatalf("a session during 1,000 forged requests: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	t.Logf("a session (connect, echo, 100 ms after input's end, close) during 1,000 forged requests took %v", took)
	evicted := false
	for deadline := time.Now().Add(5 * time.Second); !evicted && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if es := statusOf(t, a); len(es) == 1 && es[0].Report != nil && es[0].Report.VI != nil {
			for _, o := range es[0].Report.VI.SetupDrops {
				evicted = evicted || strings.HasPrefix(o.Name, "half-open connection evicted") && o.Count > 0
			}
		}
	}
	if !evicted {
		t.Errorf("status shows no half-open connection evicted after 1,000 forged requests: %+v", statusOf(t, a))
	}

	code, _, errs = connectIn(t, b, "", "", "vB", "02:00:00:00:00:01:5999")
	if code != 1 || !strings.Contains(errs, "refused port 5999: no listener on the port") {
		t.Errorf("a port with no stream: exit %d, stderr %q", code, errs)
	}
	// The refusal is counted where dragonc run's counters show it.
	counted := false
	for deadline := time.Now().Add(5 * time.Second); !counted && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if es := statusOf(t, a); len(es) == 1 && es[0].Report != nil && es[0].Report.VI != nil {
			for _, o := range es[0].Report.VI.SetupDrops {
				counted = counted || o.Name == "connection request refused" && o.Count >= 1
			}
		}
	}
	if !counted {
		t.Errorf("status shows no refused connection request among the VIs' drops: %+v", statusOf(t, a))
	}
	code, _, errs = connectIn(t, b, "", "", "--timeout", "1500ms", "vB", "10.9.0.99:5000")
	if code != 1 || !strings.Contains(errs, "10.9.0.99 has no neighbour entry on vB") {
		t.Errorf("an address nobody has: exit %d, stderr %q", code, errs)
	}
	code, _, errs = connectIn(t, b, "", "", "vB", "10.9.0.1")
	if code != 2 || !strings.Contains(errs, "is not HOST:PORT") {
		t.Errorf("no port: exit %d, stderr %q", code, errs)
	}
}
