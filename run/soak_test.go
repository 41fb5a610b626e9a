package run

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// junk is the flood of TestFloodSoak: a mix of what a hostile peer on the
// segment sends, from made-up addresses. Deterministic (seeded).
func junk(n int) [][]byte {
	rng := rand.New(rand.NewSource(37))
	mac := func() net.HardwareAddr {
		m := make(net.HardwareAddr, 6)
		rng.Read(m)
		if rng.Intn(4) > 0 {
			m[0] &^= 1 // mostly individual addresses, some group ones
		}
		return m
	}
	ip := func() net.IP {
		return net.IP{byte(1 + rng.Intn(250)), byte(rng.Intn(256)), byte(rng.Intn(256)), byte(1 + rng.Intn(254))}
	}
	var out [][]byte
	for len(out) < n {
		h := hostile{srcMAC: mac(), vlan: -1, src: ip(), sport: uint16(1024 + rng.Intn(60000)), dport: uint16(1 + rng.Intn(9000)), payload: strings.Repeat("j", rng.Intn(64))}
		switch rng.Intn(10) {
		case 0: // a closed port: an ICMP error each, were they not limited
			h.dport = 4444
		case 1: // fraggle
			h.dstMAC, h.dst, h.dport = bcastMAC, net.IP{10, 9, 0, 255}, 7
		case 2: // forged echo from our own subnet
			h.src, h.dport = net.IP{10, 9, 0, byte(3 + rng.Intn(200))}, 7
		case 3: // cut short
			h.dport, h.cut = 7, 1+rng.Intn(8)
		case 4:
			h.vlan = rng.Intn(4096)
		case 5:
			out = append(out, arpRequest(mac(), mac(), ip(), stackIP))
			continue
		case 6: // random bytes after a plausible header
			b := make([]byte, 14+rng.Intn(100))
			rng.Read(b)
			copy(b, stackMAC)
			out = append(out, b)
			continue
		}
		out = append(out, build(h))
	}
	return out
}

// rssKB reads a process's resident set.
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// children lists the test process's child processes (the helper that
// serves the stack).
func children() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			out = append(out, pid)
		}
	}
	return out
}

// soakRound runs a legitimate echo client (one request in flight, each
// given 250 ms) for d while w floods the segment with frames, and returns
// the requests sent and answered and the flood frames sent.
func soakRound(w *wire, flood [][]byte, d time.Duration) (sent, answered, flooded int, err error) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// About 20,000 frames a second, in bursts of 100.
		for i := 0; !stop.Load(); {
			for range 100 {
				w.send(flood[i%len(flood)])
				i++
				flooded++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: stackIP, Port: 7})
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	buf := make([]byte, 256)
	for end := time.Now().Add(d); time.Now().Before(end); {
		msg := []byte(fmt.Sprintf("legitimate %d", sent))
		sent++
		if _, err := c.Write(msg); err != nil {
			return sent, answered, flooded, err
		}
		for wait := time.Now().Add(250 * time.Millisecond); ; {
			c.SetReadDeadline(wait)
			n, err := c.Read(buf)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if err != nil {
				// An ICMP error from an earlier forged datagram, say; the
				// request may still be answered.
				continue
			}
			if bytes.Equal(buf[:n], msg) {
				answered++
				break
			}
		}
	}
	return sent, answered, flooded, nil
}

// TestFloodSoak: a legitimate echo client keeps being answered while a
// peer floods the segment with junk from made-up addresses, by the kernel
// (a UDP echo server on the kernel's socket, the reference) and by
// dragonc run on each socket kind, one after the other on the same veth
// with the same flood; the helper's memory stays flat.
func TestFloodSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of 10 s")
	}
	a, b := pair(t)
	flood := junk(2000)
	const d = 3 * time.Second // each of the three rounds: some 50,000 junk frames here
	report := []string{}

	// The kernel: the stack's address on vA and a Go echo server.
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	var conn *net.UDPConn
	if err := inNS(a, func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 7})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			conn.WriteToUDP(buf[:n], from)
		}
	}()
	var kSent, kAnswered, kFlood int
	err := inNS(b, func() error {
		w, err := openWire("vB")
		if err != nil {
			return err
		}
		defer w.close()
		kSent, kAnswered, kFlood, err = soakRound(w, flood, d)
		return err
	})
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	report = append(report, fmt.Sprintf("kernel UDP echo: %d of %d answered (%.2f %%) during %d junk frames", kAnswered, kSent, 100*float64(kAnswered)/float64(kSent), kFlood))
	ip(t, "-n", a, "addr", "flush", "dev", "vA")
	ip(t, "-n", b, "neigh", "flush", "dev", "vB")

	r, st := embedTest(t, testStack)
	for _, socket := range []string{"xdp", "packet"} {
		sv := serveIn(t, a, r, st, socket)
		pids := children()
		var sent, answered, flooded int
		before, after := 0, 0
		err := inNS(b, func() error {
			w, err := openWire("vB")
			if err != nil {
				return err
			}
			defer w.close()
			// Warm up (the peer resolves the stack's address), then
			// measure memory, soak, and measure again.
			if _, _, _, err := soakRound(w, flood[:1], 500*time.Millisecond); err != nil {
				return err
			}
			for _, p := range pids {
				before += rssKB(p)
			}
			sent, answered, flooded, err = soakRound(w, flood, d)
			for _, p := range pids {
				after += rssKB(p)
			}
			return err
		})
		if serr := sv.stop(); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", socket, err, sv.log.String())
		}
		share := float64(answered) / float64(sent)
		report = append(report, fmt.Sprintf("dragonc run --socket %s: %d of %d answered (%.2f %%) during %d junk frames; helper RSS %d -> %d KiB", socket, answered, sent, 100*share, flooded, before, after))
		if share < 0.99 {
			t.Errorf("%s: %d of %d legitimate requests answered during the flood; want 99 %%", socket, answered, sent)
		}
		if len(pids) == 0 || before <= 0 {
			t.Errorf("%s: no helper process found to measure", socket)
		} else if after-before > 20<<10 {
			t.Errorf("%s: the helper grew by %d KiB during the flood", socket, after-before)
		}
		t.Logf("%s final counters:\n%s", socket, sv.final())
	}
	t.Log("flood soak, " + d.String() + " each:\n" + strings.Join(report, "\n"))
}
