//go:build linux

package sovia

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
)

// BenchmarkVersusTCP measures, for each message size of the paper's
// Tables 2 and 3 and Figures 7 and 8 (4 B ... 32 KB), SOVIA over the
// software VI against kernel TCP (Go's net, TCP_NODELAY as Go sets it) on
// the same veth pair between two namespaces, interleaved in one run:
// latency as half a ping-pong round trip, and bandwidth as the bytes per
// second of a stream of such messages that the peer echoes back (both
// directions flow at once, unlike the paper's one-way test).
//
//	go test ./sovia -run XXX -bench VersusTCP -benchtime 2000x
func BenchmarkVersusTCP(b *testing.B) {
	p := PaperParams()
	sa, sb, _, _, nsA, nsB := rawPair(b, p)
	netnstest.IP(b, "-n", nsA, "addr", "add", "10.77.0.1/24", "dev", "vA")
	netnstest.IP(b, "-n", nsB, "addr", "add", "10.77.0.2/24", "dev", "vB")
	var ln net.Listener
	if err := netnstest.In(nsB, func() (err error) {
		ln, err = net.Listen("tcp4", "10.77.0.2:7777")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
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
	defer ta.Close()
	tb := <-accepted
	defer tb.Close()
	// Both servers echo: a ping-pong returns the message, a stream's end
	// marker (one byte) returns one byte.
	go echo(sb)
	go echo(tb)

	for size := 4; size <= 32<<10; size *= 2 {
		b.Run(fmt.Sprintf("latency/%dB", size), func(b *testing.B) {
			msg, buf := make([]byte, size), make([]byte, size)
			var soviaT, tcpT time.Duration
			for range b.N {
				soviaT += pingPong(b, sa, msg, buf)
				tcpT += pingPong(b, ta, msg, buf)
			}
			s, t := us(soviaT, 2*b.N), us(tcpT, 2*b.N)
			b.ReportMetric(s, "sovia-µs")
			b.ReportMetric(t, "tcp-µs")
			b.ReportMetric(t/s, "tcp/sovia")
		})
	}
	for size := 4; size <= 32<<10; size *= 2 {
		b.Run(fmt.Sprintf("bandwidth/%dB", size), func(b *testing.B) {
			msg := make([]byte, size)
			count := min(4096, max(64, (1<<20)/size)) // up to 1 MiB a stream
			var soviaT, tcpT time.Duration
			for range b.N {
				soviaT += stream(b, sa, msg, count)
				tcpT += stream(b, ta, msg, count)
			}
			mb := float64(size*count*b.N) / 1e6
			b.ReportMetric(mb/soviaT.Seconds(), "sovia-MB/s")
			b.ReportMetric(mb/tcpT.Seconds(), "tcp-MB/s")
		})
	}
}

func us(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }

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

// echo returns everything it reads until the connection ends.
func echo(c io.ReadWriter) {
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
