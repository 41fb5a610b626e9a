package run

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkUDPEchoVsKernel measures UDP echo over a veth pair: the stack
// served by dragonc run, on AF_XDP and on AF_PACKET sockets, against a
// Linux kernel UDP echo server (Go
// net.ListenUDP, one socket and goroutine per core with SO_REUSEPORT) on
// the same pair, in alternating rounds. Each round, 64 senders in the peer
// namespace keep one request outstanding each until b.N transactions are
// done; it reports transactions per second and p50/p99 latency of each and
// the ratios dragonc/kernel.
//
//	go test ./run -run XXX -bench UDPEcho -benchtime 50000x
func BenchmarkUDPEchoVsKernel(b *testing.B) {
	a, peer := pair(b)
	// One receive loop per core, as the kernel server has one socket per
	// core: more loops than cores only take turns.
	r, st := embedTest(b, strings.Replace(testStack, "cores 0..2", fmt.Sprintf("cores 0..%d", max(1, runtime.NumCPU())-1), 1))
	// The kernel holds the address too; while dragonc serves, its tc
	// program keeps the stack's frames from the kernel.
	ip(b, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")

	type result struct{ tps, p50, p99 float64 }
	results := map[string][]result{}
	const rounds = 3
	// measure runs b.N transactions from the peer, 64 outstanding.
	measure := func() result {
		var res result
		if err := inNS(peer, func() error {
			var err error
			res.tps, res.p50, res.p99, err = load(7, b.N, 64)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return res
	}
	// serve measures dragonc run on one socket kind.
	serve := func(socket string) result {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ready := make(chan struct{})
		served := make(chan error, 1)
		go func() {
			served <- inNS(a, func() error {
				return Serve(ctx, r, st, Options{Iface: "vA", Socket: socket, Ready: func() { close(ready) }})
			})
		}()
		select {
		case <-ready:
		case err := <-served:
			b.Fatal(err)
		}
		res := measure()
		cancel()
		if err := <-served; err != nil {
			b.Fatal(err)
		}
		return res
	}
	for round := 0; round < rounds; round++ {
		// The kernel's echo server.
		stopK := make(chan struct{})
		var kwg sync.WaitGroup
		if err := inNS(a, func() error { return kernelEcho(stopK, &kwg) }); err != nil {
			b.Fatal(err)
		}
		res := measure()
		close(stopK)
		kwg.Wait()
		results["kernel"] = append(results["kernel"], res)
		results["xdp"] = append(results["xdp"], serve("xdp"))
		results["packet"] = append(results["packet"], serve("packet"))
	}
	med := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	tps := func(r result) float64 { return r.tps }
	kern := med(results["kernel"], tps)
	for _, name := range []string{"kernel", "xdp", "packet"} {
		rs := results[name]
		b.ReportMetric(med(rs, tps), name+"-tx/s")
		b.ReportMetric(med(rs, func(r result) float64 { return r.p50 }), name+"-p50-µs")
		b.ReportMetric(med(rs, func(r result) float64 { return r.p99 }), name+"-p99-µs")
		if name != "kernel" {
			b.ReportMetric(med(rs, tps)/kern, name+"-ratio")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// kernelEcho starts one UDP echo socket per core on port 7 (SO_REUSEPORT),
// each served by its own goroutine, until stop closes.
func kernelEcho(stop <-chan struct{}, wg *sync.WaitGroup) error {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 15 /* SO_REUSEPORT */, 1) })
		return serr
	}}
	for range runtime.NumCPU() {
		pc, err := lc.ListenPacket(context.Background(), "udp4", "10.9.0.1:7")
		if err != nil {
			return err
		}
		c := pc.(*net.UDPConn)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-stop
			c.Close()
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				c.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
	}
	return nil
}

// load runs n transactions over conc connected sockets, each with one
// request outstanding, and returns transactions per second and the 50th
// and 99th percentile latency in microseconds.
func load(port, n, conc int) (tps, p50, p99 float64, err error) {
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		share := n / conc
		if w < n%conc {
			share++
		}
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: port})
		if err != nil {
			return 0, 0, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			msg := []byte(fmt.Sprintf("sender %02d: 32 bytes of payload..", w))[:32]
			buf := make([]byte, 2048)
			mine := make([]time.Duration, 0, share)
			for range share {
				t0 := time.Now()
				c.Write(msg)
				c.SetReadDeadline(t0.Add(200 * time.Millisecond))
				if _, err := c.Read(buf); err != nil {
					continue // a lost datagram: counted as not done
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if len(lat) < n/2 {
		return 0, 0, 0, fmt.Errorf("only %d of %d transactions answered", len(lat), n)
	}
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	return float64(len(lat)) / el.Seconds(), us(lat[len(lat)/2]), us(lat[len(lat)*99/100]), nil
}
