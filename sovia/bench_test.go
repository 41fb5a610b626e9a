//go:build linux

package sovia

import (
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/internal/netnstest"
)

var busyPoll = flag.Duration("sovia.busypoll", 0, "BenchmarkVersusTCP: how long the software VI spins on an empty socket before it sleeps, and TCP's reads on theirs")

// BenchmarkVersusTCP measures SOVIA over the software VI against kernel
// TCP (Go's net) on one veth pair between two namespaces, interleaved in
// one run, like with like:
//
//   - nodelay: SOVIA with NoDelay against TCP with TCP_NODELAY (Go's
//     default): every write is a message / a segment;
//   - combining: SOVIA combining small writes against TCP with Nagle's
//     algorithm (SetNoDelay(false)).
//
// latency/SIZE is half a ping-pong round trip, reported as p50 and p99
// over b.N round trips of each (the two alternate, each going first every
// other time); bandwidth/SIZE is the bytes per second of a stream of
// SIZE-byte writes that the peer echoes back (both directions at once).
// A healthy run is never cut short: the software VI retransmits what the
// link loses, and a VI whose peer stops answering breaks with an error.
//
//	go test ./sovia -run XXX -bench VersusTCP -benchtime 2000x
func BenchmarkVersusTCP(b *testing.B) {
	nsA, nsB, macA, macB := vethPair(b)
	netnstest.IP(b, "-n", nsA, "addr", "add", "10.77.0.1/24", "dev", "vA")
	netnstest.IP(b, "-n", nsB, "addr", "add", "10.77.0.2/24", "dev", "vB")
	o := HostOptions{BusyPoll: *busyPoll}
	ha, hb := openHostWith(b, nsA, "vA", o), openHostWith(b, nsB, "vB", o)
	var ln net.Listener
	if err := netnstest.In(nsB, func() (err error) {
		ln, err = net.Listen("tcp4", "10.77.0.2:7777")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()

	for i, mode := range []struct {
		name    string
		nodelay bool
	}{{"nodelay", true}, {"combining", false}} {
		p := PaperParams()
		p.NoDelay = mode.nodelay
		lvi := uint16(1 + i)
		va, err := ha.VI(lvi, macB, lvi)
		if err != nil {
			b.Fatal(err)
		}
		vb, err := hb.VI(lvi, macA, lvi)
		if err != nil {
			b.Fatal(err)
		}
		sa, err := NewConn(va, p)
		if err != nil {
			b.Fatal(err)
		}
		sb, err := NewConn(vb, p)
		if err != nil {
			b.Fatal(err)
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		var ta net.Conn
		if err := netnstest.In(nsA, func() (err error) {
			ta, err = net.Dial("tcp4", "10.77.0.2:7777")
			return err
		}); err != nil {
			b.Fatal(err)
		}
		tb := <-accepted
		for _, c := range []*net.Conn{&ta, &tb} {
			(*c).(*net.TCPConn).SetNoDelay(mode.nodelay)
			// Like with like: TCP's reads spin as the VIs' receivers do.
			if *c, err = sovialat.SpinReads((*c).(*net.TCPConn), *busyPoll); err != nil {
				b.Fatal(err)
			}
		}
		go echo(sb)
		go echo(tb)

		for _, size := range []int{4, 64, 1024, 8 << 10, 32 << 10} {
			b.Run(fmt.Sprintf("%s/latency/%dB", mode.name, size), func(b *testing.B) {
				msg, buf := make([]byte, size), make([]byte, size)
				so, tc := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
				for i := range b.N {
					if i%2 == 0 {
						so = append(so, pingPong(b, sa, msg, buf))
						tc = append(tc, pingPong(b, ta, msg, buf))
					} else {
						tc = append(tc, pingPong(b, ta, msg, buf))
						so = append(so, pingPong(b, sa, msg, buf))
					}
				}
				s50, s99, t50, t99 := quantile(so, 0.5), quantile(so, 0.99), quantile(tc, 0.5), quantile(tc, 0.99)
				b.ReportMetric(s50, "sovia-p50-µs")
				b.ReportMetric(s99, "sovia-p99-µs")
				b.ReportMetric(t50, "tcp-p50-µs")
				b.ReportMetric(t99, "tcp-p99-µs")
				b.ReportMetric(s50/t50, "p50-sovia/tcp")
				b.ReportMetric(s99/t99, "p99-sovia/tcp")
			})
		}
		for _, size := range []int{64, 1024, 32 << 10} {
			b.Run(fmt.Sprintf("%s/bandwidth/%dB", mode.name, size), func(b *testing.B) {
				msg := make([]byte, size)
				count := min(4096, max(64, (1<<20)/size)) // up to 1 MiB a stream
				var soviaT, tcpT time.Duration
				for i := range b.N {
					if i%2 == 0 {
						soviaT += stream(b, sa, msg, count)
						tcpT += stream(b, ta, msg, count)
					} else {
						tcpT += stream(b, ta, msg, count)
						soviaT += stream(b, sa, msg, count)
					}
				}
				mb := float64(size*count*b.N) / 1e6
				s, t := mb/soviaT.Seconds(), mb/tcpT.Seconds()
				b.ReportMetric(s, "sovia-MB/s")
				b.ReportMetric(t, "tcp-MB/s")
				b.ReportMetric(s/t, "sovia/tcp")
			})
		}
		// Both ends' close exchanges end before the next mode: a
		// connection lingering on a host would be one more goroutine
		// waiting there.
		sa.Close()
		ta.Close()
		for i := 0; !sa.Finished(); i++ {
			if i == 10000 {
				b.Fatal("the close exchange did not end in 10 s")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// quantile is the q-quantile of one-way latencies (half the round trips
// ds), in µs.
func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 2e3
}

func pingPong(b *testing.B, c io.ReadWriter, msg, buf []byte) time.Duration {
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// stream writes count messages and waits for the echo of them all.
func stream(b *testing.B, c io.ReadWriter, msg []byte, count int) time.Duration {
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, c, int64(len(msg)*count))
		done <- err
	}()
	for range count {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// echo returns everything it reads until the connection ends, and then
// closes it (so that the peer's close exchange ends and nothing of this
// connection still waits on the host when the next measurement runs).
func echo(c io.ReadWriteCloser) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
