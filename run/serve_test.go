package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run/dataplane"
	"github.com/dragonc/dragonc/sovia"
)

// The stack the namespace suite serves: two UDP applications on their
// own queues, one that only counts, ARP and ping.
const testStack = `stack served {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..2
    endpoint echo udp listen *:7 { app "echo" rate 200kpps }
    endpoint echo2 udp listen 10.9.0.1:7007 { app "echo" rate 200kpps }
    endpoint sink udp listen *:9 { app "discard" rate 10kpps }
    endpoint mx openmx 3 { app "echo" }
    service icmp-echo
    service arp
}
`

// hwStack is testStack with echo2 a gold class bound to core 1: on the
// 82599, under the priority cost (embedHardware), its plan gives echo2 a
// Flow Director rule to a queue of its own and leaves echo and sink to
// the default queue.
var hwStack = strings.Replace(testStack, `endpoint echo2 udp listen 10.9.0.1:7007 { app "echo" rate 200kpps }`,
	`endpoint echo2 udp listen 10.9.0.1:7007 { app "echo" class gold rate 1Mpps cores 1 }`, 1)

// netns is a network namespace made for one test and removed after it.
type netns struct{ name string }

func ip(t testing.TB, args ...string) string {
	t.Helper()
	return netnstest.IP(t, args...)
}

// inNS runs f inside namespace name (netnstest.In).
func inNS(name string, f func() error) error { return netnstest.In(name, f) }

// pair makes namespaces A (the stack's, interface vA with the stack's
// address) and B (the peer, vB 10.9.0.2/24), joined by a veth pair.
func pair(t testing.TB) (a, b string) {
	t.Helper()
	a, b = netnstest.Two(t, "ethtool", "go")
	ip(t, "link", "add", "vA", "netns", a, "numrxqueues", "2", "numtxqueues", "2", "type", "veth", "peer", "name", "vB", "netns", b, "numrxqueues", "2", "numtxqueues", "2")
	ip(t, "-n", a, "link", "set", "vA", "address", "02:00:00:00:00:01", "up")
	ip(t, "-n", b, "addr", "add", "10.9.0.2/24", "dev", "vB")
	ip(t, "-n", b, "link", "set", "vB", "up")
	// The peer finishes its UDP checksums itself (a veth would leave
	// them to a NIC that is not there).
	if out, err := exec.Command("ip", "netns", "exec", b, "ethtool", "-K", "vB", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K vB tx off: %v\n%s", err, out)
	}
	return a, b
}

func embedTest(t testing.TB, src string) (*dembed.Result, *lpg.Stack) {
	t.Helper()
	return embedtest.PlanSourceTarget(t, Model, "served.lpg", []byte(src), costmodel.Balance{}, dembed.TargetSilicon)
}

// syncBuffer collects what a server prints.
type syncBuffer = netnstest.SyncBuffer

// TestServeNamespaces serves a stack on a veth in one namespace and talks
// to it from another: ARP, ping, UDP echo, a closed port, steering by
// queue, and clean-up; once on AF_XDP sockets and once on AF_PACKET.
func TestServeNamespaces(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) { testServe(t, socket, "") })
	}
}

// TestServeHardwareFirst serves an 82599 plan on a veth: linux.sh runs
// first and the veth driver refuses every rule, RSS and the channel count
// (a veth has none of them), so the eBPF stage must do the NIC's steering
// (Flow Director rules, then RSS as the plan's indirection table says)
// and the suite must pass as on linux-xdp; the interface's settings are
// the same afterwards.
func TestServeHardwareFirst(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) { testServe(t, socket, "82599") })
	}
}

// embedHardware embeds the test stack on a hardware model as dragonc run
// does: through the Linux driver, adapted by Adapt.
func embedHardware(t testing.TB, nic, src string) (*dembed.Result, *lpg.Stack) {
	return embedDriver(t, nic, src, true)
}

// embedDriver is embedHardware; adapted says Adapt must fix something
// (a driver with checksum offloads to turn off).
func embedDriver(t testing.TB, nic, src string, adapted bool) (*dembed.Result, *lpg.Stack) {
	t.Helper()
	st, diags := lpg.LoadStack("served.lpg", []byte(src))
	if st == nil {
		t.Fatal(diags)
	}
	in, warnings, err := dembed.NewInput(nic, embedtest.Model(t, nic), st, nil, dembed.Options{Cost: costmodel.Priority{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 || in.Driver == nil {
		t.Fatalf("no driver facts for %s: %v", nic, warnings)
	}
	if notes := Adapt(in); len(notes) == 0 && adapted {
		t.Fatalf("Adapt fixed nothing on %s", nic)
	}
	r, err := dembed.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

func testServe(t *testing.T, socket, nic string) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	if nic != "" {
		r, st = embedHardware(t, nic, hwStack)
	}
	settings := func() string { return netnstest.Ethtool(a, "vA") }
	before := settings()

	var out, log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	served := make(chan error, 1)
	var ifindex int
	go func() {
		served <- inNS(a, func() error {
			ifc, err := net.InterfaceByName("vA")
			if err != nil {
				return err
			}
			ifindex = ifc.Index
			err = Serve(ctx, r, st, Options{Iface: "vA", Socket: socket, Stdout: &out, Stderr: &log, Force: nic != "", Ready: func() { close(ready) }})
			if err != nil {
				return err
			}
			// Nothing is left attached (read in the namespace).
			progs, qerr := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
			if qerr != nil {
				return fmt.Errorf("querying tc ingress after run: %w", qerr)
			}
			if len(progs.Programs) != 0 {
				return fmt.Errorf("%d tc ingress programs left on vA after run", len(progs.Programs))
			}
			show, serr := exec.Command("ip", "-d", "link", "show", "vA").CombinedOutput()
			if serr != nil || strings.Contains(string(show), "xdp") {
				return fmt.Errorf("ip link show vA after run: %v\n%s", serr, show)
			}
			return nil
		})
	}()
	waitReady(t, ready, served, &log)
	vi := soviaEchoServer(t, a)

	err := inNS(b, func() error {
		// ICMP: five echo requests, five replies (RFC 792).
		if err := ping(net.IP{10, 9, 0, 1}, 5, true); err != nil {
			return err
		}
		// The peer resolved the stack's address (an ARP reply from the
		// stack: the kernel of namespace A has no address on vA).
		neigh, err := exec.Command("ip", "neigh", "show", "10.9.0.1", "dev", "vB").CombinedOutput()
		if err != nil || !strings.Contains(string(neigh), "02:00:00:00:00:01") {
			return fmt.Errorf("ip neigh does not show the stack's MAC: %s %v", neigh, err)
		}
		// The discard endpoint answers nothing, and a ping to an address
		// the stack does not own gets no reply: both silences are
		// awaited at once.
		discard, err := udpSilence(9, []byte("gone"), time.Second)
		if err != nil {
			return err
		}
		if err := ping(net.IP{10, 9, 0, 77}, 1, false); err != nil {
			return err
		}
		if err := <-discard; err != nil {
			return fmt.Errorf("discard: %w", err)
		}
		// UDP: each echo endpoint returns the datagram byte for byte.
		for _, port := range []int{7, 7007} {
			for i := range 20 {
				msg := []byte(fmt.Sprintf("datagram %d to port %d \x00\xff", i, port))
				got, err := udpExchange(port, msg)
				if err != nil {
					return fmt.Errorf("port %d: %w", port, err)
				}
				if !bytes.Equal(got, msg) {
					return fmt.Errorf("port %d echoed %q, want %q", port, got, msg)
				}
			}
		}
		// Open-MX: the echo endpoint returns each message to the
		// endpoint that sent it.
		for i := range 10 {
			msg := []byte(fmt.Sprintf("open-mx message %d, long enough to need no padding", i))
			got, err := omxExchange("vB", 3, 9, msg)
			if err != nil {
				return fmt.Errorf("open-mx: %w", err)
			}
			if !bytes.Equal(got, msg) {
				return fmt.Errorf("open-mx echoed %q, want %q", got, msg)
			}
		}
		// The software VI of package sovia (EtherType 0x88B5) runs beside
		// the stack on the same interface: the stage passes its frames up
		// to the VI's socket, and a SOVIA connection echoes.
		if err := vi(); err != nil {
			return fmt.Errorf("sovia beside run: %w", err)
		}
		// A closed port: ICMP port unreachable, seen as ECONNREFUSED.
		if _, err := udpExchange(4444, []byte("anyone?")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("a datagram to a closed port: got %v, want connection refused", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nrun said:\n%s%s", err, log.String(), out.String())
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}

	// Steering: each endpoint's datagrams were delivered on the queue the
	// plan gave it, and only there (the final counters).
	final := out.String()
	got := deliveries(t, final)
	for _, ep := range r.Plan.Endpoints {
		for q := range got[ep.Name] {
			if !slices.Contains(ep.Queues, q) {
				t.Errorf("endpoint %s delivered on queue %d; the plan says %v\n%s", ep.Name, q, ep.Queues, final)
			}
		}
		if len(got[ep.Name]) == 0 {
			t.Errorf("endpoint %s: no delivery counted\n%s", ep.Name, final)
		}
	}
	if len(r.Plan.Queues) < 2 {
		t.Errorf("the plan has %d queues; the suite wants the endpoints spread", len(r.Plan.Queues))
	}
	for _, want := range []string{"reply arp", "reply icmp-echo ", "sink RxL4UDPPortUnreachable "} {
		if !strings.Contains(final, want) {
			t.Errorf("final counters lack %q:\n%s", want, final)
		}
	}
	if nic != "" {
		for _, want := range []string{"the driver of vA took 0 of the plan's", "refused: ", "filter rule(s)", "the eBPF stage spreads by RSS"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("run does not report %q:\n%s", want, log.String())
			}
		}
		if after := settings(); after != before {
			t.Errorf("vA's settings changed:\nbefore\n%s\nafter\n%s", before, after)
		}
	}
	kind := map[string]string{"xdp": "AF_XDP sockets", "packet": "AF_PACKET sockets"}[socket]
	if !strings.Contains(log.String(), kind) {
		t.Errorf("run does not say it serves on %s:\n%s", kind, log.String())
	}
	t.Logf("run said:\n%s%s", log.String(), final[strings.LastIndex(final, "final:\n"):])
}

// soviaEchoServer opens the software VIs of vA in namespace ns with a
// SOVIA echo listener on port 5000, and returns the client's check, to
// run in the peer's namespace: messages of 4 B to 32 KB and back.
func soviaEchoServer(t *testing.T, ns string) func() error {
	var host *sovia.RawHost
	if err := inNS(ns, func() (err error) {
		host, err = sovia.OpenHost("vA")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	p := sovia.PaperParams()
	p.NoDelay, p.CombineMax, p.CombineDelay = true, 0, 0
	l, err := host.Listen(5000, p)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := l.AcceptConn()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	return func() error {
		peer, err := sovia.OpenHost("vB")
		if err != nil {
			return err
		}
		defer peer.Close()
		c, err := peer.Dial(net.HardwareAddr{2, 0, 0, 0, 0, 1}, 5000, p)
		if err != nil {
			return err
		}
		defer c.Close()
		for size := 4; size <= 32<<10; size *= 2 {
			msg := bytes.Repeat([]byte{byte(size)}, size)
			if _, err := c.Write(msg); err != nil {
				return err
			}
			got := make([]byte, size)
			if _, err := io.ReadFull(c, got); err != nil {
				return fmt.Errorf("%d B: %w", size, err)
			}
			if !bytes.Equal(got, msg) {
				return fmt.Errorf("%d B came back changed", size)
			}
		}
		// Messages of several frames went as bulk datagrams both ways:
		// the stage passes them up, 224.0.0.0 being no address of the
		// stack's, and none was given up for frames.
		hc, pc := host.LinkCounts(), peer.LinkCounts()
		if hc.BulkSent == 0 || pc.BulkSent == 0 || hc.BulkAbandoned+pc.BulkAbandoned != 0 {
			return fmt.Errorf("bulk datagrams: sent beside run %d, by the peer %d; VIs that gave them up %d, %d", hc.BulkSent, pc.BulkSent, hc.BulkAbandoned, pc.BulkAbandoned)
		}
		return nil
	}
}

// deliveries reads the final per-queue counters of a run's output: for
// each endpoint, the deliveries counted on each queue ("queue N: ...,
// deliver NAME COUNT, ...").
func deliveries(t testing.TB, out string) map[string]map[int]int {
	t.Helper()
	i := strings.LastIndex(out, "final:\n")
	if i < 0 {
		t.Fatalf("no final counters:\n%s", out)
	}
	got := map[string]map[int]int{}
	for _, l := range strings.Split(strings.TrimSpace(out[i+len("final:\n"):]), "\n") {
		if strings.HasPrefix(l, "xdp stage: ") {
			continue // what the eBPF stage answered itself (XDP_TX)
		}
		var q int
		if _, err := fmt.Sscanf(l, "queue %d:", &q); err != nil {
			t.Fatalf("bad counter line %q", l)
		}
		for _, item := range strings.Split(l, ", ") {
			var name string
			var n int
			if _, err := fmt.Sscanf(item, "deliver %s %d", &name, &n); err == nil {
				if got[name] == nil {
					got[name] = map[int]int{}
				}
				got[name][q] += n
			}
		}
	}
	return got
}

// waitReady waits for Serve to be ready, or fails the test when it stops
// first or takes more than two minutes.
// background is dragonc run serving a test's stack in a namespace: its
// standard output and error, and the last report of its counters.
type background struct {
	out, log syncBuffer
	cancel   context.CancelFunc
	served   chan error
	mu       sync.Mutex
	last     dataplane.Report
}

// serveInBackground serves r and st in namespace ns with opt (whose
// Stdout, Stderr, Ready and OnReport it sets) and returns once Serve is
// ready; stop ends it.
func serveInBackground(t testing.TB, ns string, r *dembed.Result, st *lpg.Stack, opt Options) *background {
	t.Helper()
	b := &background{served: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	t.Cleanup(cancel)
	ready := make(chan struct{})
	opt.Stdout, opt.Stderr, opt.Ready = &b.out, &b.log, func() { close(ready) }
	opt.OnReport = func(rep dataplane.Report) { b.mu.Lock(); b.last = rep; b.mu.Unlock() }
	go func() { b.served <- inNS(ns, func() error { return Serve(ctx, r, st, opt) }) }()
	waitReady(t, ready, b.served, &b.log)
	return b
}

// stop ends the serving and fails the test if Serve failed.
func (b *background) stop(t testing.TB) {
	t.Helper()
	b.cancel()
	if err := <-b.served; err != nil {
		t.Fatalf("%v\n%s", err, b.log.String())
	}
}

// report is the last report of the counters.
func (b *background) report() dataplane.Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

func waitReady(t testing.TB, ready <-chan struct{}, served <-chan error, log *syncBuffer) {
	t.Helper()
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("Serve stopped before it was ready: %v\n%s", err, log.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("Serve was not ready within 2 minutes\n%s", log.String())
	}
}

// omxExchange sends an Open-MX message from endpoint src to endpoint dst
// of the stack over a raw socket on ifname and returns the payload of the
// answer addressed to src (the Open-MX header as internal/packet builds
// it: type, destination and source endpoint at bytes 2..4).
func omxExchange(ifname string, dst, src uint8, msg []byte) ([]byte, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	et := uint16(packet.EtherTypeOpenMX)
	proto := int(et>>8 | et<<8&0xff00) // network order
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, proto)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifc.Index}); err != nil {
		return nil, err
	}
	tv := syscall.NsecToTimeval(int64(300 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	stack := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	frame := packet.MustBuild(packet.Spec{SrcMAC: ifc.HardwareAddr, DstMAC: stack, EtherType: packet.EtherTypeOpenMX, OMXType: 0x11, OMXDstEP: dst, OMXSrcEP: src, Payload: msg})
	to := &syscall.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifc.Index, Halen: 6}
	copy(to.Addr[:], stack)
	buf := make([]byte, 2048)
	// The message goes again after each read timeout, until the
	// deadline: one frame lost on the way is no failure.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if err := syscall.Sendto(fd, frame, 0, to); err != nil {
			return nil, err
		}
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err == syscall.EAGAIN || err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		b := buf[:n]
		if n < 22 || !bytes.Equal(b[0:6], ifc.HardwareAddr) || b[14+3] != src || b[14+4] != dst {
			continue // our own frame, or someone else's
		}
		return slices.Clone(b[22:min(n, 22+len(msg))]), nil
	}
	return nil, fmt.Errorf("no answer")
}

// udpExchange sends msg to 10.9.0.1:port from a connected socket and
// returns the answer, or the error that came instead (ECONNREFUSED for a
// port unreachable). It sends again every 300 ms until two seconds are
// gone, so that one lost datagram is no failure.
func udpExchange(port int, msg []byte) ([]byte, error) { return udpFrom(0, port, msg) }

// udpFrom sends msg from local port sport (0: any) to the stack's port
// dport and returns the answer, resending on silence for up to two seconds.
func udpFrom(sport, dport int, msg []byte) ([]byte, error) {
	c, err := net.DialUDP("udp4", &net.UDPAddr{Port: sport}, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: dport})
	if err != nil {
		return nil, err
	}
	return udpOn(c, msg, 2*time.Second)
}

// udpSilence starts an exchange that must stay silent for d: the socket
// is made now, in the calling thread's network namespace, and the wait
// goes on in the background while the caller checks something else. The
// channel gives the answer if one came (nil error), else the error.
func udpSilence(dport int, msg []byte, d time.Duration) (<-chan error, error) {
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: dport})
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		got, err := udpOn(c, msg, d)
		if err == nil {
			err = fmt.Errorf("port %d answered %q", dport, got)
		} else {
			err = nil // silence (or a refusal, which the caller's other checks tell apart)
		}
		done <- err
	}()
	return done, nil
}

// udpOn sends msg on connected socket c, resending every 300 ms for up
// to d, and returns the answer; it closes c.
func udpOn(c *net.UDPConn, msg []byte, d time.Duration) ([]byte, error) {
	defer c.Close()
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(d); ; {
		if _, err := c.Write(msg); err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && time.Now().Before(deadline) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// ping sends n echo requests to dst over a raw ICMP socket and checks
// that each is answered (or, with want false, that none is).
func ping(dst net.IP, n int, want bool) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	tv := syscall.NsecToTimeval(int64(300 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	to := &syscall.SockaddrInet4{Addr: [4]byte(dst.To4())}
	got := 0
	for seq := 1; seq <= n; seq++ {
		req := []byte{8, 0, 0, 0, 0x12, 0x34, 0, byte(seq), 'd', 'r', 'a', 'g', 'o', 'n', 'c', '!'}
		binary.BigEndian.PutUint16(req[2:], checksum(req))
		// The request goes again after each 300 ms without its reply,
		// until a deadline: one lost frame is no failure.
		deadline := time.Now().Add(2 * time.Second)
		if !want {
			deadline = time.Now().Add(time.Second)
		}
		for time.Now().Before(deadline) {
			if err := syscall.Sendto(fd, req, 0, to); err != nil {
				return fmt.Errorf("sending echo request %d: %w", seq, err)
			}
			buf := make([]byte, 1500)
			m, _, err := syscall.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // timeout: send again until the deadline
			}
			// A raw socket receives the IPv4 header too.
			ihl := int(buf[0]&0xf) * 4
			if m < ihl+8 || !net.IP(buf[12:16]).Equal(dst) {
				continue
			}
			icmp := buf[ihl:m]
			if icmp[0] == 0 && icmp[7] == byte(seq) && bytes.Equal(icmp[8:], req[8:]) && checksum(icmp) == 0 {
				got++
				break
			}
		}
	}
	switch {
	case want && got != n:
		return fmt.Errorf("ping %s: %d of %d echo requests answered", dst, got, n)
	case !want && got != 0:
		return fmt.Errorf("ping %s: %d answers from an address no one owns", dst, got)
	}
	return nil
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// TestServeRefuses checks the one-line errors for a missing interface, a
// down one and a plan for another NIC.
func TestServeRefuses(t *testing.T) {
	a, _ := pair(t)
	r, st := embedTest(t, testStack)
	ip(t, "-n", a, "link", "add", "vdown", "address", "02:00:00:00:00:01", "type", "veth", "peer", "name", "vdown2")
	cases := []struct{ iface, want string }{
		{"nosuch0", "no interface nosuch0"},
		{"vdown", "interface vdown is down"},
	}
	for _, c := range cases {
		err := inNS(a, func() error { return Serve(context.Background(), r, st, Options{Iface: c.iface}) })
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q", c.iface, err, c.want)
		}
	}
	// Hardware plans: one for the whole silicon, one that trusts the
	// NIC's checksum verdicts, and one for another driver than vA's.
	silicon, st2 := embedtest.PlanSourceTarget(t, "82599", "served.lpg", []byte(testStack), costmodel.Balance{}, dembed.TargetSilicon)
	unadapted, _ := embedtest.PlanSourceTarget(t, "82599", "served.lpg", []byte(testStack), costmodel.Balance{}, dembed.TargetLinux)
	adapted, st3 := embedHardware(t, "82599", hwStack)
	for _, c := range []struct {
		r    *dembed.Result
		st   *lpg.Stack
		want string
	}{
		{silicon, st2, "--target silicon"},
		{unadapted, st2, "checksum verdicts"},
		{adapted, st3, "vA is driven by 'veth', this plan is for ixgbe (use --force"},
	} {
		err := inNS(a, func() error { return Serve(context.Background(), c.r, c.st, Options{Iface: "vA"}) })
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v, want one line with %q", err, c.want)
		}
	}
	// Kernel-socket endpoints: the kernel must own the stack's address.
	rk, stk := embedTest(t, kernelStack)
	err := inNS(a, func() error { return Serve(context.Background(), rk, stk, Options{Iface: "vA"}) })
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "kernel-socket endpoints") || !strings.Contains(err.Error(), "ip addr add 10.9.0.1/24 dev vA") {
		t.Errorf("kernel-socket endpoints without the address on vA: got %v", err)
	}
	ip(t, "-n", a, "link", "set", "vA", "address", "02:00:00:00:00:99")
	err = inNS(a, func() error { return Serve(context.Background(), r, st, Options{Iface: "vA"}) })
	if err == nil || !strings.Contains(err.Error(), "ip link set dev vA address 02:00:00:00:00:01") {
		t.Errorf("a wrong hardware address: got %v", err)
	}
	// The interface of the default route is refused unless forced (with
	// --force, the next check, the wrong address, speaks).
	ip(t, "-n", a, "route", "add", "default", "dev", "vA")
	err = inNS(a, func() error { return Serve(context.Background(), r, st, Options{Iface: "vA"}) })
	if err == nil || !strings.Contains(err.Error(), "vA carries this host's default route") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("the default route's interface: got %v", err)
	}
	err = inNS(a, func() error { return Serve(context.Background(), r, st, Options{Iface: "vA", Force: true}) })
	if err == nil || !strings.Contains(err.Error(), "ip link set dev vA address") {
		t.Errorf("the default route's interface, forced: got %v", err)
	}
}

// TestServeNeedsCapabilities runs itself again without CAP_NET_ADMIN and
// CAP_BPF (setpriv drops them from the bounding set, so the child, root
// or not, lacks them) and checks that Serve names exactly those.
func TestServeNeedsCapabilities(t *testing.T) {
	if os.Getenv("DRAGONC_CAPS_CHILD") == "1" {
		r, st := embedTest(t, testStack)
		err := Serve(context.Background(), r, st, Options{Iface: "lo"})
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("got %v, want a usage error", err)
		}
		fmt.Println("child:", err)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("dropping capabilities with setpriv needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv (util-linux)")
	}
	cmd := exec.Command("setpriv", "--bounding-set", "-net_admin,-bpf,-sys_admin", "--", os.Args[0], "-test.run", "^TestServeNeedsCapabilities$", "-test.v")
	cmd.Env = append(os.Environ(), "DRAGONC_CAPS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	want := "child: dragonc run needs CAP_NET_ADMIN, CAP_BPF ("
	if !strings.Contains(string(out), want) {
		t.Fatalf("the child said:\n%s\nwant a line with %q", out, want)
	}
}

// TestServeFallsBack holds the interface's XDP hook with a program of its
// own: dragonc run on auto must leave that program alone, say why AF_XDP
// cannot be used and serve on AF_PACKET instead.
func TestServeFallsBack(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	served := make(chan error, 1)
	held := make(chan error, 1)
	go func() {
		served <- inNS(a, func() error {
			ifc, err := net.InterfaceByName("vA")
			if err != nil {
				held <- err
				return err
			}
			pass, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
			if err != nil {
				held <- err
				return err
			}
			defer pass.Close()
			l, err := link.AttachXDP(link.XDPOptions{Program: pass, Interface: ifc.Index})
			if err != nil {
				held <- err
				return err
			}
			defer l.Close()
			held <- nil
			return Serve(ctx, r, st, Options{Iface: "vA", Socket: "auto", Stderr: &log, Ready: func() { close(ready) }})
		})
	}()
	if err := <-held; err != nil {
		t.Fatalf("holding the XDP hook: %v", err)
	}
	waitReady(t, ready, served, &log)
	err := inNS(b, func() error {
		msg := []byte("over AF_PACKET")
		got, err := udpExchange(7, msg)
		if err == nil && !bytes.Equal(got, msg) {
			err = fmt.Errorf("echoed %q, want %q", got, msg)
		}
		return err
	})
	cancel()
	if serr := <-served; serr != nil {
		t.Fatalf("%v\n%s", serr, log.String())
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, want := range []string{"AF_XDP could not be used on vA (another XDP program is attached to vA; dragonc leaves it alone)", "falling back to AF_PACKET", "AF_PACKET sockets"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("run's output lacks %q:\n%s", want, log.String())
		}
	}
	t.Logf("run said:\n%s", log.String())
}

// liveRun is a stack served by Serve in a namespace for a test.
type liveRun struct {
	out, log syncBuffer // what run printed: counters, and notes
	cancel   context.CancelFunc
	served   chan error
	stopped  bool
}

// serveIn serves stack st with plan r on vA in namespace ns on the given
// socket kind, waits until it is ready, and stops it when the test ends
// (stop does it earlier).
func serveIn(t testing.TB, ns string, r *dembed.Result, st *lpg.Stack, socket string, opts ...func(*Options)) *liveRun {
	t.Helper()
	sv := &liveRun{served: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	sv.cancel = cancel
	ready := make(chan struct{})
	go func() {
		sv.served <- inNS(ns, func() error {
			opt := Options{Iface: "vA", Socket: socket, Stdout: &sv.out, Stderr: &sv.log, Ready: func() { close(ready) }}
			for _, f := range opts {
				f(&opt)
			}
			return Serve(ctx, r, st, opt)
		})
	}()
	t.Cleanup(func() { sv.stop() })
	waitReady(t, ready, sv.served, &sv.log)
	return sv
}

// stop ends the run and returns its error; the final counters are then in
// out.
func (sv *liveRun) stop() error {
	if sv.stopped {
		return nil
	}
	sv.stopped = true
	sv.cancel()
	return <-sv.served
}

// final returns the run's last counters (from "final:" on).
func (sv *liveRun) final() string {
	s := sv.out.String()
	return s[max(0, strings.LastIndex(s, "final:")):]
}

// TestServeJSON: with Options.JSON, standard output is NDJSON and nothing
// else: the serving event names the socket kind, reports carry the
// counters (the last one final, with the echo delivered), and a stopped
// event ends it; OnReport sees the same reports.
func TestServeJSON(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	var mu sync.Mutex
	var seen []dataplane.Report
	sv := serveIn(t, a, r, st, "xdp", func(o *Options) {
		o.JSON, o.Every = true, 100*time.Millisecond
		o.OnReport = func(r dataplane.Report) { mu.Lock(); seen = append(seen, r); mu.Unlock() }
	})
	if err := inNS(b, func() error {
		_, err := udpExchange(7, []byte("json"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	var events []Event
	dec := json.NewDecoder(strings.NewReader(sv.out.String()))
	dec.DisallowUnknownFields()
	for {
		var e Event
		err := dec.Decode(&e)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("standard output is not NDJSON of events: %v\n%s", err, sv.out.String())
		}
		events = append(events, e)
	}
	kinds := map[string]int{}
	for _, e := range events {
		kinds[e.Event]++
	}
	if kinds["serving"] != 1 || kinds["stopped"] != 1 || kinds["report"] < 1 {
		t.Fatalf("events %v:\n%s", kinds, sv.out.String())
	}
	for _, e := range events {
		if e.Event == "serving" && (e.Socket != "xdp" || e.PlanQueues != len(r.Plan.Queues) || e.Iface != "vA") {
			t.Errorf("serving event %+v", e)
		}
	}
	last := events[len(events)-2]
	if last.Event != "report" || !last.Final {
		t.Fatalf("the event before stopped is %+v, want the final report", last)
	}
	delivered := uint64(0)
	for _, q := range last.Queues {
		for _, o := range q.Outcomes {
			if o.Name == "deliver echo" {
				delivered += o.Count
			}
		}
	}
	if delivered == 0 {
		t.Errorf("the final report counts no echo delivered: %+v", last.Report)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != kinds["report"] || !seen[len(seen)-1].Final {
		t.Errorf("OnReport saw %d reports, the output %d", len(seen), kinds["report"])
	}
	if !strings.Contains(sv.log.String(), "dragonc run: serving served on vA") {
		t.Errorf("the notes are not on standard error:\n%s", sv.log.String())
	}
}

// TestServeMetrics scrapes the Prometheus endpoint of a run: the build
// information, and the echo a peer sent counted as delivered.
func TestServeMetrics(t *testing.T) {
	a, b := pair(t)
	r, st := embedTest(t, testStack)
	ip(t, "-n", a, "link", "set", "lo", "up")
	sv := serveIn(t, a, r, st, "packet", func(o *Options) { o.MetricsAddr, o.Every = "127.0.0.1:0", 50*time.Millisecond })
	m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(sv.log.String())
	if m == nil {
		t.Fatalf("run does not say where its metrics are:\n%s", sv.log.String())
	}
	if err := inNS(b, func() error {
		_, err := udpExchange(7, []byte("counted"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The listener is in the stack's namespace, where run started.
	var families map[string]*dto.MetricFamily
	err := inNS(a, func() error {
		for deadline := time.Now().Add(5 * time.Second); ; {
			resp, err := scrape(m[1])
			if err != nil {
				return err
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			families, err = p.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("the metrics do not parse: %w", err)
			}
			if delivered(families) > 0 || time.Now().After(deadline) {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if delivered(families) == 0 {
		t.Errorf("no echo counted in dragonc_frames_total")
	}
	bi := families["dragonc_build_info"]
	if bi == nil || len(bi.Metric) != 1 {
		t.Fatalf("no dragonc_build_info")
	}
	labels := map[string]string{}
	for _, l := range bi.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["stack"] != "served" || labels["nic"] != r.Plan.NIC || labels["iface"] != "vA" {
		t.Errorf("build info labels %v", labels)
	}
	for _, name := range []string{"dragonc_frames_received_total", "dragonc_frames_sent_total", "dragonc_socket_kernel_total", "dragonc_serving"} {
		if families[name] == nil {
			t.Errorf("no %s", name)
		}
	}
}

// delivered is the echo endpoint's count of delivered frames.
func delivered(fams map[string]*dto.MetricFamily) float64 {
	n := 0.0
	if f := fams["dragonc_frames_total"]; f != nil {
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, p := range m.Label {
				l[p.GetName()] = p.GetValue()
			}
			if l["kind"] == "deliver" && l["name"] == "echo" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// scrape gets url over a connection dialled on the calling thread, so in
// the namespace the thread is in (http.Get would dial on another thread).
func scrape(url string) (*http.Response, error) {
	host := strings.TrimPrefix(url, "http://")
	host, path, _ := strings.Cut(host, "/")
	c, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	return resp, nil
}

// TestChecksumHint: a veth peer that leaves its UDP checksums to offload
// gets its datagrams dropped, and run says why, once.
func TestChecksumHint(t *testing.T) {
	a, b := pair(t)
	exec.Command("ip", "netns", "exec", b, "ethtool", "-K", "vB", "tx", "on").Run()
	r, st := embedTest(t, testStack)
	sv := serveIn(t, a, r, st, "packet", func(o *Options) { o.Every = 50 * time.Millisecond })
	inNS(b, func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: 7})
		if err != nil {
			return err
		}
		defer c.Close()
		for range 5 {
			c.Write([]byte("offloaded"))
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !strings.Contains(sv.log.String(), "ethtool -K PEER tx off"); {
		time.Sleep(50 * time.Millisecond)
	}
	sv.stop()
	if n := strings.Count(sv.log.String(), "ethtool -K PEER tx off"); n != 1 {
		t.Fatalf("the checksum hint appears %d times:\n%s\n%s", n, sv.log.String(), sv.final())
	}
}
