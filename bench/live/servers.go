package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/netns"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run"
)

// stackSource is the stack the dragonc rows serve: UDP echo on port 7 on
// every core, with ARP and ping, as a user would declare it.
func stackSource(cores int) string {
	c := fmt.Sprintf("cores 0..%d", max(1, cores)-1)
	return `stack live {
    interface eth0 { mac ` + serverMAC + ` ip ` + serverAddr.String() + `/24 }
    ` + c + `
    endpoint echo udp listen *:7 { app "echo" ` + c + ` }
    service icmp-echo
    service arp
}
`
}

// planStack embeds the stack on dragonc run's model, as dragonc run does.
func planStack(cores int) (string, *embed.Result, *lpg.Stack, error) {
	src := stackSource(cores)
	r, st, err := run.Plan("live.lpg", []byte(src))
	if err != nil {
		return "", nil, nil, fmt.Errorf("internal error: the benchmark's stack: %w", err)
	}
	return src, r, st, nil
}

// running is a server that serves.
type running struct {
	// stop stops it and says whether it stopped cleanly.
	stop func() error
	// pid is its process, 0 when it runs in this one or in the kernel.
	pid func() int
}

// start starts server name.
func (b *bench) start(name string) (*running, error) {
	var stop func() error
	var err error
	pid := func() int { return 0 }
	switch name {
	case "go":
		stop, err = b.startGo()
	case "c":
		var p int
		stop, p, err = b.progs.startServer(b.pair.path(b.pair.a))
		pid = func() int { return p }
	case "xdp", "packet":
		stop, pid, err = b.startDragonc(name)
	case "reflector":
		stop, err = b.startReflector()
	case "kernel":
		// The kernel answers echo requests to vA's address itself.
		stop = func() error { return nil }
	default:
		err = fmt.Errorf("internal error: no server %q", name)
	}
	if err != nil {
		return nil, err
	}
	return &running{stop: stop, pid: pid}, nil
}

// startGo starts the Go kernel server in this process: one UDP socket per
// core on port 7 with SO_REUSEPORT, each read and answered by a goroutine
// of its own.
func (b *bench) startGo() (func() error, error) {
	var conns []*net.UDPConn
	err := netns.In(b.pair.a, func() error {
		lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 15 /* SO_REUSEPORT */, 1) })
			return serr
		}}
		for range b.cores {
			pc, err := lc.ListenPacket(context.Background(), "udp4", net.JoinHostPort(serverAddr.String(), "7"))
			if err != nil {
				return err
			}
			conns = append(conns, pc.(*net.UDPConn))
		}
		return nil
	})
	var wg sync.WaitGroup
	stop := func() error {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
		return nil
	}
	if err != nil {
		stop()
		return nil, err
	}
	for _, c := range conns {
		wg.Add(1)
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
	return stop, nil
}

// startDragonc serves the benchmark's stack with dragonc run on socket
// kind in namespace A. The first time, run builds its helper program with
// the go command, which can take a minute; its notes go to the progress
// writer meanwhile.
func (b *bench) startDragonc(kind string) (func() error, func() int, error) {
	ctx, cancel := context.WithCancel(b.ctx)
	var helper atomic.Int64
	ready := make(chan struct{})
	served := make(chan error, 1)
	notes := &prefixWriter{w: b.progress, prefix: "bench --live:   " + kind + ": "}
	go func() {
		served <- netns.In(b.pair.a, func() error {
			// The peer runs XDP (attachPeerPass): the stage's XDP_TX
			// answers reach it.
			return run.Serve(ctx, b.plan, b.stack, run.Options{Iface: serverIf, Socket: kind, Stderr: notes, BusyPoll: b.opt.BusyPoll, Spin: b.opt.Spin, XDPTX: "on", XDPMode: b.opt.xdpMode(),
				Ready: func() { close(ready) }, Signal: func(p *os.Process) { helper.Store(int64(p.Pid)) }})
		})
	}()
	stop := func() error {
		cancel()
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-time.After(30 * time.Second):
			return fmt.Errorf("dragonc run did not stop within 30s")
		}
	}
	const buildLimit = 10 * time.Minute
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ready:
			return stop, func() int { return int(helper.Load()) }, nil
		case err := <-served:
			cancel()
			if err == nil {
				err = errors.New("dragonc run returned before it served")
			}
			return nil, nil, err
		case <-t.C:
			if time.Since(start) > buildLimit {
				stop()
				return nil, nil, fmt.Errorf("dragonc run did not serve within %v", buildLimit)
			}
			b.say("  %s: waiting for dragonc run to serve (%.0fs; the first time it builds its helper with the go command)", kind, time.Since(start).Seconds())
		case <-b.ctx.Done():
			stop()
			return nil, nil, b.ctx.Err()
		}
	}
}

// attachPeerPass gives vB an XDP program that passes everything, for
// the whole run, so that every server meets the same link. A veth
// transmits an XDP_TX frame into its peer's NAPI ring, which exists only
// while the peer has an XDP program or GRO on, and without a program
// there the frame is dropped (drivers/net/veth.c: veth_xdp_xmit drops
// when the peer queue's napi pointer is NULL, and veth_xdp_flush wakes
// the peer's NAPI only when it has an XDP program): the reflector and
// dragonc's XDP stage, which answers ARP and ping with XDP_TX, need it.
func (b *bench) attachPeerPass() (detach func(), err error) {
	err = netns.In(b.pair.b, func() error {
		detach, err = attachXDP("live_pass", passInsns(), peerIf)
		return err
	})
	return detach, err
}

// startReflector attaches the XDP_TX reflector to vA.
func (b *bench) startReflector() (func() error, error) {
	var detach func()
	err := netns.In(b.pair.a, func() error {
		var err error
		detach, err = attachXDP("live_reflect", reflectorInsns(), serverIf)
		return err
	})
	if err != nil {
		return nil, err
	}
	return func() error { detach(); return nil }, nil
}

// prefixWriter writes each line with a prefix.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	part   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.part = append(p.part, b...)
	for {
		i := strings.IndexByte(string(p.part), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.part[:i])
		p.part = p.part[i+1:]
	}
	return len(b), nil
}
