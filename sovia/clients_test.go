//go:build linux

package sovia

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
)

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
)

// echoParams are the settings of the echo stream the live tests serve.
func echoParams() Params {
	p := PaperParams()
	p.NoDelay, p.CombineMax, p.CombineDelay = true, 0, 0
	return p
}

// serveEcho serves an echo stream on port 5000 of a host on vB in nsB as
// `dragonc run` does (ServeStreams: one connection at a time, one more
// waiting).
func serveEcho(t *testing.T, nsB string) *RawHost {
	t.Helper()
	var h *RawHost
	if err := netnstest.In(nsB, func() (err error) {
		h, err = OpenHost("vB")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	st := Stream{Name: "echo", Local: netip.MustParseAddrPort("10.0.0.2:5000"), Transport: "vi", VI: 1, Params: echoParams()}
	if err := ServeStreams(h, []Stream{st}, func(string) func(*Conn) { return Apps["echo"] }); err != nil {
		t.Fatal(err)
	}
	return h
}

// echoOnce sends msg on c and reads it back.
func echoOnce(c *Conn, msg []byte) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// TestRawClientProcess is one client of TestRawClientsInARow, in a
// process of its own: it opens a host, dials, echoes, closes and exits
// at once, as a client program does.
func TestRawClientProcess(t *testing.T) {
	spec := os.Getenv("SOVIA_TEST_CLIENT") // IFACE PEER-MAC PORT MESSAGE
	if spec == "" {
		t.Skip("a client process of TestRawClientsInARow")
	}
	// A client that hangs (the failure this guards against) is ended
	// instead of holding the namespaces' lock.
	time.AfterFunc(20*time.Second, func() {
		fmt.Println("the client hung for 20 s")
		os.Exit(2)
	})
	f := strings.Fields(spec)
	peer, err := net.ParseMAC(f[1])
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	h, err := OpenHost(f[0])
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Dial(peer, uint16(port), echoParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := echoOnce(c, []byte(f[3])); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestRawClientsInARow: twenty client processes in a row, each dialing
// an echo stream, echoing and closing, are all served (the failure was
// every other one timing out: the listener took a new process's request,
// from the VI number the previous process had used, for a repetition and
// handed it the previous connection's closing VI).
func TestRawClientsInARow(t *testing.T) {
	nsA, nsB, _, _ := vethPair(t)
	h := serveEcho(t, nsB)
	for i := range 20 {
		cmd := exec.Command("ip", "netns", "exec", nsA, os.Args[0], "-test.run=^TestRawClientProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("SOVIA_TEST_CLIENT=vA %s 5000 client-%d", macB, i))
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestRawClientProcess")) {
			t.Fatalf("client %d: %v\n%s\nthe listener's setup counts: %v", i, err, out, h.SetupCounts())
		}
	}
	t.Logf("the listener's setup counts after 20 clients: %v", h.SetupCounts())
}

// forgedConnects are n connection requests for port to macB, each from a
// random unicast address and VI with a random nonce.
func forgedConnects(rng *rand.Rand, n int, port uint16) [][]byte {
	frames := make([][]byte, n)
	for i := range frames {
		var src [6]byte
		for j := range src {
			src[j] = byte(rng.Uint32())
		}
		src[0] = src[0]&^1 | 2 // unicast, locally administered
		vi := uint16(1 + rng.IntN(1<<16-1))
		f := viFrame(0, vi, 0, setupLen, 0, 0, setupMsg{kind: setupConnect, port: port, dialer: vi, p: echoParams(), nonce: rng.Uint32()}.frame())
		copy(f[0:6], macB)
		copy(f[6:12], src[:])
		frames[i] = f
	}
	return frames
}

// rawSocket is a packet socket on vA in nsA that sends whole frames.
func rawSocket(t *testing.T, nsA string) (send func([]byte) error) {
	t.Helper()
	var fd, ifindex int
	if err := netnstest.In(nsA, func() error {
		ifc, err := net.InterfaceByName("vA")
		if err != nil {
			return err
		}
		ifindex = ifc.Index
		fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, int(htons(EtherType)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	sa := &syscall.SockaddrLinklayer{Protocol: htons(EtherType), Ifindex: ifindex, Halen: 6}
	copy(sa.Addr[:], macB)
	return func(f []byte) error {
		for {
			err := syscall.Sendto(fd, f, 0, sa)
			if err != syscall.ENOBUFS && err != syscall.EAGAIN {
				return err
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// TestRawForgedConnects: 1,000 connection requests from random addresses,
// sent from a raw socket in the client's namespace while a real client
// dials, do not keep it from connecting and being served; nor do they
// once all are in. The times are logged, not asserted.
func TestRawForgedConnects(t *testing.T) {
	nsA, nsB, _, _ := vethPair(t)
	server := serveEcho(t, nsB)
	send := rawSocket(t, nsA)
	var client *RawHost
	if err := netnstest.In(nsA, func() (err error) {
		client, err = OpenHost("vA")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rng := rand.New(rand.NewPCG(41, 1))
	for _, when := range []string{"during", "after"} {
		frames := forgedConnects(rng, 1000, 5000)
		started, flooded := make(chan struct{}), make(chan time.Duration, 1)
		go func() {
			t0 := time.Now()
			for i, f := range frames {
				if i == 100 {
					close(started)
				}
				if err := send(f); err != nil {
					t.Error(err)
					break
				}
			}
			flooded <- time.Since(t0)
		}()
		var floodTime time.Duration
		if when == "during" {
			<-started
		} else {
			floodTime = <-flooded
		}
		t0 := time.Now()
		c, err := client.Dial(macB, 5000, echoParams())
		took := time.Since(t0)
		if err != nil {
			t.Fatalf("a real client dialing %s 1,000 forged requests: %v after %v (setup counts %v)", when, err, took, server.SetupCounts())
		}
		if err := echoOnce(c, []byte("still served "+when)); err != nil {
			t.Fatalf("echo %s the forged requests: %v", when, err)
		}
		c.Close()
		if when == "during" {
			floodTime = <-flooded
		}
		t.Logf("%s the flood (1,000 frames sent in %v): connected in %v", when, floodTime, took)
	}
	n, _ := server.halfOpenCount()
	if n > DefaultSetupLimits().HalfOpen {
		t.Errorf("%d half-open connections, over the limit of %d", n, DefaultSetupLimits().HalfOpen)
	}
	c := counts(server)
	if c[dropNames[dropEvictedTotal]] == 0 {
		t.Errorf("no half-open connection evicted after 2,000 forged requests: the flood did not reach the listener (counts %v)", c)
	}
	t.Logf("the listener's setup counts: %v", server.SetupCounts())
}
