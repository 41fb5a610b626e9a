package run

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	gomaps "maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/backends/linux"
	"github.com/dragonc/dragonc/costmodel"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/embed/embedtest"
	"github.com/dragonc/dragonc/plan"
	"github.com/dragonc/dragonc/prg"
	"github.com/dragonc/dragonc/run/dataplane"
)

// kernelStack mixes a dragonc endpoint (echo) with kernel-socket
// endpoints on one interface: UDP and TCP servers of the test whose
// programs run on core 0 and on core 1, and memcached over UDP and TCP.
const kernelStack = `stack mixed {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint echo udp listen 10.9.0.1:7 { app "echo" rate 100kpps }
    endpoint kudp0 udp listen 10.9.0.1:7100 { app "counter" class gold rate 200kpps cores 0..0 }
    endpoint kudp1 udp listen 10.9.0.1:7101 { app "counter" class gold rate 200kpps cores 1..1 }
    endpoint ktcp0 tcp listen 10.9.0.1:7200 { app "counter" rate 10kpps cores 0..0 }
    endpoint ktcp1 tcp listen 10.9.0.1:7201 { app "counter" rate 10kpps cores 1..1 }
    endpoint mc udp listen 10.9.0.1:11211 { app "memcached" rate 10kpps }
    endpoint mctcp tcp listen 10.9.0.1:11211 { app "memcached" rate 1kpps }
    service icmp-echo
    service arp
}
`

// TestKernelSocketRule: the rule of kernel-socket endpoints, on the
// stack above: every endpoint but echo is the kernel's, the stage tells
// them apart and takes ARP and ping no more.
func TestKernelSocketRule(t *testing.T) {
	r, st := embedTest(t, kernelStack)
	kern, err := kernelSockets(r.Plan, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"kudp0": true, "kudp1": true, "ktcp0": true, "ktcp1": true, "mc": true, "mctcp": true}
	if !gomaps.Equal(kern, want) {
		t.Errorf("kernel-socket endpoints %v, want %v", kern, want)
	}
	// A Go handler serves kudp0 under ServeCode: it is dragonc's then.
	kern, err = kernelSockets(r.Plan, st, map[string]bool{"kudp0": true})
	if err != nil || kern["kudp0"] || !kern["kudp1"] {
		t.Errorf("with a handler for kudp0: %v %v", kern, err)
	}
	s, err := StageOf(r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	if !s.KernelAddr || s.ARP || s.ICMP || len(s.Endpoints) != 7 || len(s.Demux) == 0 {
		t.Errorf("stage: kernel address %v, ARP %v, ICMP %v, %d endpoints, %d demux groups", s.KernelAddr, s.ARP, s.ICMP, len(s.Endpoints), len(s.Demux))
	}
	for _, q := range r.Plan.Queues {
		if s.CPUs[uint32(q.ID)] != q.Core {
			t.Errorf("queue %d: CPU %d, the plan's core %d", q.ID, s.CPUs[uint32(q.ID)], q.Core)
		}
	}
	// Each kernel-socket endpoint's note names the cores to pin its
	// program to, as taskset takes them.
	notes := kernelNotes(kern, r.Plan)
	for _, name := range []string{"kudp1", "ktcp0"} {
		cores := plannedCores(r.Plan.Endpoints, r.Plan.Queues, name)
		if len(cores) != 1 {
			t.Fatalf("%s: planned cores %v", name, cores)
		}
		pin := fmt.Sprintf("taskset -c %d PROGRAM", cores[0])
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "endpoint "+name+":") && strings.Contains(n, pin) }) {
			t.Errorf("no note tells %s's program to start with %q: %q", name, pin, notes)
		}
	}
	// A stack of dragonc's endpoints only keeps the stage as it was.
	r2, st2 := embedTest(t, testStack)
	s2, err := StageOf(r2.Plan, st2)
	if err != nil {
		t.Fatal(err)
	}
	if s2.KernelAddr || !s2.ARP || len(s2.Demux) != 0 {
		t.Errorf("testStack: kernel address %v, ARP %v, %d demux groups", s2.KernelAddr, s2.ARP, len(s2.Demux))
	}
}

// TestServeKernelSockets serves the mixed stack on a veth and checks on
// the server side, with unmodified kernel sockets, that each kernel-socket
// endpoint's datagrams and connections are processed on the core its
// planned queue has: on linux-xdp and on an 82599 plan whose rules the
// veth refuses, on both socket kinds. The clients run on another CPU than
// the planned one, where the veth would otherwise have the kernel process
// them. The echo endpoint is still dragonc's, the kernel answers ARP, ping
// and a closed port, and real memcached answers over TCP and UDP.
func TestServeKernelSockets(t *testing.T) {
	for _, nic := range []string{"", "82599"} {
		for _, socket := range []string{"xdp", "packet"} {
			name := socket
			if nic != "" {
				name = nic + "-" + socket
			}
			t.Run(name, func(t *testing.T) {
				res := serveKernel(t, nic, socket, nil)
				for _, e := range res.failures() {
					t.Error(e)
				}
			})
		}
	}
}

// TestServeKernelSocketsWrongCore: the check above fails when the cpumap
// entries point at the wrong cores (each queue's CPU the other one).
func TestServeKernelSocketsWrongCore(t *testing.T) {
	res := serveKernel(t, "", "xdp", func(s *Stage) {
		for q, c := range s.CPUs {
			s.CPUs[q] = 1 - c
		}
	})
	for _, ep := range []string{"kudp0", "kudp1", "ktcp0", "ktcp1"} {
		if c := res.counts[ep]; c.total() == 0 || c.fraction(res.planned[ep]) >= 0.99 {
			t.Errorf("endpoint %s with its CPU swapped: %v on the planned core %d; the check cannot fail", ep, c, res.planned[ep])
		}
	}
}

// kernelResult is what one serving of the mixed stack showed.
type kernelResult struct {
	counts  map[string]cpuCounts // endpoint → connections or datagrams by CPU
	planned map[string]int       // endpoint → its planned core
	errs    []string
}

func (r kernelResult) failures() []string {
	out := slices.Clone(r.errs)
	for _, ep := range slices.Sorted(gomaps.Keys(r.planned)) {
		c := r.counts[ep]
		if f := c.fraction(r.planned[ep]); f < 0.99 {
			out = append(out, fmt.Sprintf("endpoint %s: %.1f%% on its planned core %d (by CPU %v)", ep, 100*f, r.planned[ep], c))
		}
	}
	return out
}

// cpuCounts counts by CPU.
type cpuCounts map[int]int

func (c cpuCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c cpuCounts) fraction(cpu int) float64 {
	if c.total() == 0 {
		return 0
	}
	return float64(c[cpu]) / float64(c.total())
}

// countedEndpoints are the kernel-socket endpoints of kernelStack whose
// servers count by CPU.
var countedEndpoints = []struct {
	name string
	port int
	tcp  bool
}{{"kudp0", 7100, false}, {"kudp1", 7101, false}, {"ktcp0", 7200, true}, {"ktcp1", 7201, true}}

// The exchanges per endpoint: enough that 99 % means one miss at most.
const (
	kernelDatagrams   = 200
	kernelConnections = 100
)

func serveKernel(t *testing.T, nic, socket string, edit func(*Stage)) kernelResult {
	if runtime.NumCPU() < 2 {
		t.Skip("this test needs two CPUs")
	}
	a, b := pair(t)
	// The kernel owns the stack's address.
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	r, st := embedTest(t, kernelStack)
	if nic != "" {
		r, st = embedHardware(t, nic, kernelStack)
	}
	res := kernelResult{counts: map[string]cpuCounts{}, planned: map[string]int{}}
	for _, ep := range countedEndpoints {
		cores := plannedCores(r.Plan.Endpoints, r.Plan.Queues, ep.name)
		if len(cores) != 1 {
			t.Fatalf("endpoint %s: the plan gives it cores %v; the test wants one", ep.name, cores)
		}
		res.planned[ep.name] = cores[0]
	}

	// The servers: ordinary kernel sockets in namespace A.
	srv := &cpuServers{counts: map[string]cpuCounts{}}
	t.Cleanup(srv.close)
	err := inNS(a, func() error {
		for _, ep := range countedEndpoints {
			serve := srv.udp
			if ep.tcp {
				serve = srv.tcp
			}
			if err := serve(ep.name, ep.port); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mc := startMemcached(t, a)

	bg := serveInBackground(t, a, r, st, Options{Iface: "vA", Socket: socket, Force: nic != "", stageEdit: edit})
	out, log := &bg.out, &bg.log

	fail := func(format string, args ...any) { res.errs = append(res.errs, fmt.Sprintf(format, args...)) }
	err = inNS(b, func() error {
		// ARP and ping: the kernel of A answers (the stack's counters
		// show no answer of dragonc's below).
		if err := ping(net.IP{10, 9, 0, 1}, 3, true); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		// The echo endpoint is dragonc's.
		for i := range 10 {
			msg := []byte(fmt.Sprintf("echo %d", i))
			got, err := udpExchange(7, msg)
			if err != nil || !bytes.Equal(got, msg) {
				return fmt.Errorf("echo: %q, %v", got, err)
			}
		}
		// A closed port: the kernel's port unreachable.
		if _, err := udpExchange(4444, []byte("anyone?")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("a datagram to a closed port: got %v, want connection refused", err)
		}
		if mc != nil {
			if err := memcachedSetGet(); err != nil {
				return fmt.Errorf("memcached: %w", err)
			}
		}
		// The counted endpoints, each from a CPU other than its planned
		// one.
		for _, ep := range countedEndpoints {
			if err := onCPU(1-res.planned[ep.name], func() error {
				if ep.tcp {
					return tcpRounds(ep.port, kernelConnections)
				}
				for i := range kernelDatagrams {
					msg := []byte(fmt.Sprintf("%s %d", ep.name, i))
					got, err := udpExchange(ep.port, msg)
					if err != nil || !bytes.Equal(got, msg) {
						return fmt.Errorf("%s: %q, %v", ep.name, got, err)
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fail("%v", err)
	}
	bg.stop(t)
	res.counts = srv.snapshot()
	if mc == nil {
		t.Log("memcached is not installed: its part was skipped")
	}

	// dragonc answered neither ARP nor ping, and sent no port unreachable.
	final := out.String()
	for _, not := range []string{"reply arp", "reply icmp-echo", "sink RxL4UDPPortUnreachable"} {
		if strings.Contains(final, not) {
			fail("the stack's counters show %q: the kernel owns the address\n%s", not, final)
		}
	}
	if !strings.Contains(final, "deliver echo ") {
		fail("the echo endpoint was not delivered to\n%s", final)
	}
	for _, want := range []string{"kernel-socket endpoints (kudp0, kudp1, ktcp0, ktcp1, mc, mctcp)", "the kernel owns the stack's address"} {
		if !strings.Contains(log.String(), want) {
			fail("run does not say %q:\n%s", want, log.String())
		}
	}
	// The stage's counters: each counted endpoint's frames were
	// redirected (the clients ran on another CPU).
	ks := bg.report().KernelSockets
	for _, ep := range []string{"kudp0", "kudp1", "ktcp0", "ktcp1"} {
		i := slices.IndexFunc(ks, func(k dataplane.KernelSocket) bool { return k.Endpoint == ep })
		if i < 0 || ks[i].Redirected == 0 {
			fail("endpoint %s: the stage counted no redirect (%+v)\n%s", ep, ks, final)
		}
	}
	if !strings.Contains(final, "kernel sockets: ") {
		fail("the counters have no kernel sockets line:\n%s", final)
	}
	t.Logf("by CPU: %v; planned %v; stage %+v", res.counts, res.planned, ks)
	return res
}

// plannedCores are the cores of the queues the plan gives endpoint name.
func plannedCores(eps []plan.Endpoint, qs []plan.Queue, name string) []int {
	var out []int
	for _, e := range eps {
		if e.Name != name {
			continue
		}
		for _, q := range e.Queues {
			for _, pq := range qs {
				if pq.ID == q && !slices.Contains(out, pq.Core) {
					out = append(out, pq.Core)
				}
			}
		}
	}
	return out
}

// cpuServers are the test's servers on kernel sockets, counting by the
// CPU that processed each datagram or connection.
type cpuServers struct {
	mu     sync.Mutex
	counts map[string]cpuCounts
	open   []io.Closer
	wg     sync.WaitGroup
}

func (s *cpuServers) count(name string, cpu int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts[name] == nil {
		s.counts[name] = cpuCounts{}
	}
	s.counts[name][cpu]++
}

func (s *cpuServers) snapshot() map[string]cpuCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]cpuCounts{}
	for k, v := range s.counts {
		out[k] = cpuCounts{}
		for c, n := range v {
			out[k][c] = n
		}
	}
	return out
}

func (s *cpuServers) close() {
	for _, c := range s.open {
		c.Close()
	}
	s.wg.Wait()
}

// udp serves port with one SO_REUSEPORT socket per CPU, each with
// SO_INCOMING_CPU set to its CPU: Linux (6.2 on) delivers a datagram to
// the socket of the CPU that processed it (net/core/sock_reuseport.c,
// reuseport_select_sock_by_hash with sk_incoming_cpu). Each socket
// echoes what it receives and counts it for its CPU.
func (s *cpuServers) udp(name string, port int) error {
	for cpu := range runtime.NumCPU() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), fmt.Sprintf("%s-cpu%d", name, cpu))
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU, cpu)
		}
		if err == nil {
			err = unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{10, 9, 0, 1}})
		}
		var c net.PacketConn
		if err == nil {
			c, err = net.FilePacketConn(f) // a duplicate of the socket
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: the socket of CPU %d: %w", name, cpu, err)
		}
		s.open = append(s.open, c)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			buf := make([]byte, 2048)
			// Until the test closes the socket, for 3 minutes at most.
			c.SetReadDeadline(time.Now().Add(3 * time.Minute))
			for {
				n, from, err := c.ReadFrom(buf)
				if err != nil {
					return
				}
				s.count(name, cpu)
				c.WriteTo(buf[:n], from)
			}
		}()
	}
	return nil
}

// tcp serves port on one listener; each connection counts for the CPU
// that processed its last segment (getsockopt SO_INCOMING_CPU on the
// accepted socket, net/core/sock.c) after it echoed a line.
func (s *cpuServers) tcp(name string, port int) error {
	ln, err := net.Listen("tcp4", fmt.Sprintf("10.9.0.1:%d", port))
	if err != nil {
		return err
	}
	s.open = append(s.open, ln)
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(3 * time.Minute))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 256)
			n, err := c.Read(buf)
			if err == nil {
				cpu := -1
				if raw, err := c.(*net.TCPConn).SyscallConn(); err == nil {
					raw.Control(func(fd uintptr) { cpu, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_INCOMING_CPU) })
				}
				s.count(name, cpu)
				c.Write(buf[:n])
			}
			c.Close()
		}
	}()
	return nil
}

// onCPU runs f on the calling thread (locked to it: a namespace's)
// pinned to cpu, then gives the thread its CPUs back.
func onCPU(cpu int, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return err
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	defer unix.SchedSetaffinity(0, &was)
	return f()
}

// tcpRounds opens n connections to the stack's port, one after another,
// each sending a line and reading it back; a connection that fails is
// tried again until its deadline.
func tcpRounds(port, n int) error {
	addr := fmt.Sprintf("10.9.0.1:%d", port)
	for i := range n {
		msg := []byte(fmt.Sprintf("connection %d\n", i))
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if err = tcpRound(addr, msg); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s, connection %d: %w", addr, i, err)
		}
	}
	return nil
}

func tcpRound(addr string, msg []byte) error {
	c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echoed %q, want %q", got, msg)
	}
	return nil
}

// startMemcached starts memcached in namespace ns on the stack's address,
// UDP and TCP port 11211 (as nobody when root), stopped when the test
// ends; nil when memcached is not installed.
func startMemcached(t *testing.T, ns string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		return nil
	}
	args := []string{"netns", "exec", ns, bin, "-U", "11211", "-p", "11211", "-l", "10.9.0.1", "-t", "1"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	cmd := exec.Command("ip", args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting memcached: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if s := stderr.String(); s != "" {
			t.Logf("memcached said: %s", s)
		}
	})
	return cmd
}

// memcachedSetGet stores a value over memcached's TCP text protocol and
// gets it over its UDP protocol: each datagram starts with an 8-byte
// frame header (request id, sequence number 0, total datagrams 1,
// reserved 0; memcached's protocol.txt, "UDP protocol").
func memcachedSetGet() error {
	const addr = "10.9.0.1:11211"
	var c net.Conn
	var err error
	// memcached may still be starting.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err = net.DialTimeout("tcp4", addr, time.Second); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("set dragonc 0 0 6\r\nkernel\r\n")); err != nil {
		return err
	}
	line := make([]byte, 64)
	n, err := c.Read(line)
	if err != nil || string(line[:n]) != "STORED\r\n" {
		return fmt.Errorf("set over TCP: %q, %v", line[:n], err)
	}
	u, err := net.Dial("udp4", addr)
	if err != nil {
		return err
	}
	defer u.Close()
	req := binary.BigEndian.AppendUint16(nil, 0x2a2a)
	req = append(req, 0, 0, 0, 1, 0, 0)
	req = append(req, "get dragonc\r\n"...)
	want := "VALUE dragonc 0 6\r\nkernel\r\nEND\r\n"
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if _, err := u.Write(req); err != nil {
			return err
		}
		u.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := u.Read(buf)
		if err != nil {
			continue
		}
		if n < 8 || binary.BigEndian.Uint16(buf) != 0x2a2a || string(buf[8:n]) != want {
			return fmt.Errorf("get over UDP: % x", buf[:n])
		}
		return nil
	}
	return errors.New("get over UDP: no answer within 3 s")
}

// TestKernelSocketStage runs the programs of the mixed stack's stages
// (linux-xdp's, and an 82599 plan's with everything refused) on frames
// in the kernel (BPF_PROG_TEST_RUN), from each CPU in turn: a
// kernel-socket endpoint's frame is redirected to its planned core's CPU
// (XDP_REDIRECT) or, from that CPU, passed up (XDP_PASS), and counted
// for its endpoint; the socket programs leave it to the kernel; the echo
// endpoint's frame is the loops'; ARP, ping, a closed port and fragments
// are the kernel's.
func TestKernelSocketStage(t *testing.T) {
	onKernelStages(t, testKernelStage)
}

// onKernelStages runs test on the mixed stack's stages (linux-xdp's, and
// an 82599 plan's with everything refused), each made afresh.
func onKernelStages(t *testing.T, test func(*testing.T, *Stage, *plan.Plan)) {
	needBPF(t)
	if runtime.NumCPU() < 2 {
		t.Skip("this test needs two CPUs")
	}
	r, st := embedTest(t, kernelStack)
	s, err := StageOf(r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	rh, sth := embedHardware(t, "82599", kernelStack)
	sh, _, err := HardwareStage(rh, sth, linux.Steps(rh))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    *Stage
		pl   *plan.Plan
	}{{"linux-xdp", s, r.Plan}, {"82599", sh, rh.Plan}} {
		t.Run(c.name, func(t *testing.T) { test(t, c.s, c.pl) })
	}
}

func testKernelStage(t *testing.T, s *Stage, pl *plan.Plan) {
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.notes) > 0 {
		t.Fatalf("notes: %q", m.notes)
	}
	// The XDP programs redirect only to the CPUs of the plan's cores:
	// every CPU the block "kernel" jumps to "tocpu" with is one.
	planCores := map[int64]bool{}
	for _, q := range pl.Queues {
		planCores[int64(q.Core)] = true
	}
	for _, kind := range []int{progXDP, progCPU} {
		in, targets := classifier(kind, s, m), 0
		for i := 1; i < len(in); i++ {
			if in[i].OpCode.JumpOp() == asm.Ja && in[i].Reference() == "tocpu" {
				targets++
				if prev := in[i-1]; prev.OpCode.ALUOp() != asm.Mov || prev.Dst != asm.R8 || !planCores[prev.Constant] {
					t.Errorf("program %d redirects to %v, not a plan core's CPU (%v)", kind, prev, planCores)
				}
			}
		}
		if targets == 0 {
			t.Errorf("program %d redirects nowhere", kind)
		}
	}
	progs := map[int]*ebpf.Program{}
	for _, kind := range []int{progXDP, progCPU, progFilter, progTC} {
		p, err := loadProgram(kind, s, m)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		progs[kind] = p
	}
	tcp := func(dport uint16) []byte {
		ip := ip4(ourIP, layers.IPProtocolTCP)
		tc := &layers.TCP{SrcPort: 4000, DstPort: layers.TCPPort(dport), SYN: true, Window: 100}
		tc.SetNetworkLayerForChecksum(ip)
		return frame(t, eth(layers.EthernetTypeIPv4), ip, tc)
	}
	arp := frame(t, &layers.Ethernet{SrcMAC: peerMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: 1, SourceHwAddress: peerMAC, SourceProtAddress: peerIP, DstHwAddress: make([]byte, 6), DstProtAddress: ourIP})
	ping := frame(t, eth(layers.EthernetTypeIPv4), ip4(ourIP, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, gopacket.Payload("ping"))
	// Hostile and unusual frames toward kudp1 (10.9.0.1:7101) and ktcp1.
	// set writes a big-endian half word at off of a copy of f.
	// and, where the frame holds a whole IPv4 header of 20 bytes, makes
	// its checksum right again (RFC 791 §3.1), so that the LPG's checks
	// see the field, not a bad checksum.
	set := func(f []byte, off int, v uint16) []byte {
		f = slices.Clone(f)
		binary.BigEndian.PutUint16(f[off:], v)
		if h := f[14:]; len(h) >= 20 && h[0] == 0x45 {
			binary.BigEndian.PutUint16(h[10:], 0)
			var sum uint32
			for i := 0; i < 20; i += 2 {
				sum += uint32(binary.BigEndian.Uint16(h[i:]))
			}
			for sum > 0xffff {
				sum = sum&0xffff + sum>>16
			}
			binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
		}
		return f
	}
	// The frames the LPG drops: where its checks run in the XDP program
	// (linux-xdp's stage), that program drops them, counted at a site.
	lpgDrops := map[string]bool{
		"kudp1 from our own address": true, "IPv4 header cut": true, "IHL 4": true, "IPv4 version 6": true,
		"UDP header cut after the ports": true, "UDP datagram longer than the frame": true, "UDP total length below the header": true,
	}
	kudp1 := udp(t, ourIP, 5000, 7101, false) // 14 + 20 + 8 + 2 bytes
	udpVia := func(ip *layers.IPv4, ls ...gopacket.SerializableLayer) []byte {
		u := &layers.UDP{SrcPort: 5000, DstPort: 7101}
		return frame(t, append(ls, ip, u, gopacket.Payload("hi"))...)
	}
	options := ip4(ourIP, layers.IPProtocolUDP)
	options.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}} // router alert (RFC 2113)
	spoofed, own := ip4(ourIP, layers.IPProtocolUDP), ip4(ourIP, layers.IPProtocolUDP)
	spoofed.SrcIP, own.SrcIP = net.IP{10, 9, 0, 77}, ourIP
	tagged := func(vid uint16) []byte {
		return udpVia(ip4(ourIP, layers.IPProtocolUDP), eth(layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: vid, Type: layers.EthernetTypeIPv4})
	}
	tcpShort := set(tcp(7201)[:14+20+12], 14+2, 20+12) // a TCP header cut to 12 bytes
	ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP("fe80::2"), DstIP: net.ParseIP("fe80::1")}
	u6 := &layers.UDP{SrcPort: 5000, DstPort: 7101}
	u6.SetNetworkLayerForChecksum(ip6)
	ipv6 := frame(t, eth(layers.EthernetTypeIPv6), ip6, u6)
	cases := []struct {
		name     string
		frame    []byte
		endpoint string // a kernel-socket endpoint's, or "ours", or "" (the kernel's)
		raw      bool   // not padded to 60 bytes: the frame's length is the point
	}{
		{"kudp1 with IP options", udpVia(options, eth(layers.EthernetTypeIPv4)), "kudp1", false},
		{"kudp1 priority-tagged", tagged(0), "kudp1", false},
		{"kudp1 in VLAN 5", tagged(5), "", false},
		{"kudp1 from the subnet", udpVia(spoofed, eth(layers.EthernetTypeIPv4)), "kudp1", false},
		{"kudp1 from our own address", udpVia(own, eth(layers.EthernetTypeIPv4)), "kudp1", false},
		{"kudp1 to the broadcast address", udp(t, net.IP{10, 9, 0, 255}, 5000, 7101, false), "", false},
		{"IPv4 header cut", kudp1[:14+12], "", true},
		{"IHL 4", set(kudp1, 14, 0x4400|uint16(kudp1[15])), "", false},
		{"IPv4 version 6", set(kudp1, 14, 0x6500|uint16(kudp1[15])), "", false},
		{"UDP header cut after the ports", set(kudp1[:14+20+6], 14+2, 26), "", true},
		{"UDP datagram longer than the frame", set(kudp1, 14+2, 200), "", true},
		{"UDP total length below the header", set(kudp1, 14+2, 19), "", false},
		{"TCP header cut", tcpShort, "", true},
		{"kudp1 first fragment", udp(t, ourIP, 5000, 7101, true), "", false},
		{"kudp1 over IPv6", ipv6, "", false},

		{"echo", udp(t, ourIP, 5000, 7, false), "ours", false},
		{"kudp0", udp(t, ourIP, 5000, 7100, false), "kudp0", false},
		{"kudp1", udp(t, ourIP, 5000, 7101, false), "kudp1", false},
		{"ktcp0", tcp(7200), "ktcp0", false},
		{"ktcp1", tcp(7201), "ktcp1", false},
		{"memcached udp", udp(t, ourIP, 5000, 11211, false), "mc", false},
		{"memcached tcp", tcp(11211), "mctcp", false},
		{"arp request", arp, "", false},
		{"echo request", ping, "", false},
		{"udp closed port", udp(t, ourIP, 5000, 4444, false), "", false},
		{"tcp closed port", tcp(4444), "", false},
		{"udp fragment", udp(t, ourIP, 5000, 7100, true), "", false},
		{"udp to another host", udp(t, net.IP{10, 9, 0, 7}, 5000, 7100, false), "", false},
	}
	index := func(name string) int {
		return slices.IndexFunc(s.Endpoints, func(e StageEndpoint) bool { return e.Name == name })
	}
	counter := func(k int) uint64 {
		var per []uint64
		if err := m.kcounts.Lookup(uint32(k), &per); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n
	}
	for cpu := range 2 {
		for _, c := range cases {
			in := c.frame
			if len(in) < 60 && !c.raw {
				in = append(slices.Clone(in), make([]byte, 60-len(in))...)
			}
			want := uint32(2) // XDP_PASS
			k := -1
			if c.endpoint != "" && c.endpoint != "ours" {
				cores := plannedCores(pl.Endpoints, pl.Queues, c.endpoint)
				if len(cores) != 1 {
					t.Fatalf("%s: planned cores %v", c.endpoint, cores)
				}
				if k = kernelSlots*index(c.endpoint) + kRedirected; cores[0] != cpu {
					want = 4 // XDP_REDIRECT
				} else {
					k = kernelSlots*index(c.endpoint) + kOnCore
				}
			}
			before := 0
			if k >= 0 {
				before = int(counter(k))
			}
			all := func() (n uint64) {
				for i := range kernelSlots * len(s.Endpoints) {
					n += counter(i)
				}
				return n
			}
			// The stage's placed checks (linux-xdp's) drop what the LPG
			// drops, each counted at its drop site.
			drops := func() (n uint64) {
				if m.drops == nil {
					return 0
				}
				for i := range len(s.DropSites) {
					var per []uint64
					if err := m.drops.Lookup(uint32(i), &per); err != nil {
						t.Fatal(err)
					}
					for _, v := range per {
						n += v
					}
				}
				return n
			}
			allBefore, dropsBefore := all(), drops()
			var xdp, xcpu uint32
			var meta int
			err := onCPU(cpu, func() error {
				ro := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+64)}
				var err error
				if xdp, err = progs[progXDP].Run(ro); err != nil {
					return err
				}
				meta = len(ro.DataOut) - len(in)
				xcpu, _, err = progs[progCPU].Test(in)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			// The kernel test-runs no skb program on an IPv4 frame
			// shorter than an IPv4 header (net/bpf/test_run.c); only the
			// XDP programs see such a frame here.
			keep, tcv := uint32(0), ^uint32(0)
			if len(in) >= 14+20 {
				if keep, _, err = progs[progFilter].Test(in); err != nil {
					t.Fatalf("%s: filter: %v", c.name, err)
				}
				if tcv, _, err = progs[progTC].Test(in); err != nil {
					t.Fatalf("%s: tc: %v", c.name, err)
				}
			}
			if c.endpoint == "ours" {
				if meta != 4 || keep == 0 || tcv != 2 || xcpu != 2 {
					t.Errorf("CPU %d, %s: XDP %d with %d bytes of metadata, filter %d, tc %d, cpu program %d: not the loops'", cpu, c.name, xdp, meta, keep, tcv, xcpu)
				}
				continue
			}
			// Counters the XDP program moves: 1 when its checks dropped
			// the frame (at a counted site), else 1 for the endpoint.
			xdpCounted := 1
			if len(s.Program) > 0 && lpgDrops[c.name] != (xdp == 1) {
				t.Errorf("CPU %d, %s: XDP %d, and the LPG drops it: %v", cpu, c.name, xdp, lpgDrops[c.name])
			}
			if xdp == 1 {
				if got := drops() - dropsBefore; len(s.Program) == 0 || got != 1 {
					t.Errorf("CPU %d, %s: the XDP program dropped it, %d drop sites counted it", cpu, c.name, got)
				}
				xdp, xdpCounted = want, 0
			}
			if xdp != want || xcpu != want || keep != 0 || tcv != ^uint32(0) {
				t.Errorf("CPU %d, %s: XDP %d, cpu program %d (want %d), filter %d, tc %d: not the kernel's", cpu, c.name, xdp, xcpu, want, keep, tcv)
			}
			if k < 0 && all() != allBefore {
				t.Errorf("CPU %d, %s: the kernel's frame counted for an endpoint (%d -> %d)", cpu, c.name, allBefore, all())
			}
			if k >= 0 {
				if got := int(counter(k)) - before; got != 1+xdpCounted {
					t.Errorf("CPU %d, %s: counter %d grew by %d, want %d (the XDP and the cpu program)", cpu, c.name, k, got, 1+xdpCounted)
				}
			}
		}
	}
}

// TestMetricsKernelSockets: the kernel-socket endpoints' counters are
// exported by endpoint and how.
func TestMetricsKernelSockets(t *testing.T) {
	m := NewMetrics("mixed", Model, "vA")
	m.Update(dataplane.Report{KernelSockets: []dataplane.KernelSocket{{Endpoint: "mc", Redirected: 7, OnCore: 3, NoCPUEntry: 2, RuleDropped: 1}},
		Cpumap: []dataplane.CpumapCPU{{CPU: 1, Endpoints: []string{"mc"}, Queued: 5, Dropped: 2}}, CpumapMissed: 4})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() == "dragonc_cpumap_flushes_uncounted_total" {
			got["uncounted"] = f.GetMetric()[0].GetCounter().GetValue()
		}
		if f.GetName() != "dragonc_kernel_socket_frames_total" && f.GetName() != "dragonc_cpumap_frames_total" {
			continue
		}
		for _, x := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range x.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["endpoint"]+labels["cpu"]+" "+labels["how"]] = x.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"mc redirected": 7, "mc on_core": 3, "mc no_cpumap_entry": 2, "mc rule_dropped": 1, "1 queued": 5, "1 dropped": 2, "uncounted": 4}
	if !gomaps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestKernelSocketStageSpreads: an endpoint the plan spreads over queues
// (kudp0 and ktcp0 on cores 0..1 at more than a core's rate: RSS over
// both) goes, flow by flow, to the CPU of the queue the linux-xdp model's
// RSS picks: from CPU 0 the stage passes up a flow whose queue's core is
// 0 and redirects the others.
func TestKernelSocketStageSpreads(t *testing.T) {
	needBPF(t)
	src := strings.Replace(kernelStack, `{ app "counter" class gold rate 200kpps cores 0..0 }`, `{ app "counter" rate 2Mpps cores 0..1 }`, 1)
	src = strings.Replace(src, `{ app "counter" rate 10kpps cores 0..0 }`, `{ app "counter" rate 1Mpps cores 0..1 }`, 1)
	r, st := embedtest.PlanSourceTarget(t, Model, "spread.lpg", []byte(src), costmodel.Balance{}, dembed.TargetSilicon)
	if cores := plannedCores(r.Plan.Endpoints, r.Plan.Queues, "kudp0"); len(cores) != 2 {
		t.Fatalf("the cycles plan gives kudp0 cores %v; the test wants it spread over two", cores)
	}
	interp, err := prg.NewInterp(r.Model(), r.Embedding.Config)
	if err != nil {
		t.Fatal(err)
	}
	s, err := StageOf(r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	_, p := xdpStage(t, s)
	seen := map[uint32]int{}
	for sport := uint16(1000); sport < 1064; sport++ {
		for _, f := range [][]byte{udp(t, ourIP, sport, 7100, false), frame(t, eth(layers.EthernetTypeIPv4), ip4(ourIP, layers.IPProtocolTCP),
			&layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 7200, SYN: true, Window: 100})} {
			q := interp.Run(f, true).Queue
			want := uint32(4) // XDP_REDIRECT
			if s.CPUs[uint32(q)] == 0 {
				want = 2 // XDP_PASS: already on its core
			}
			var got uint32
			if err := onCPU(0, func() (err error) { got, _, err = p.Test(f); return err }); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("source port %d: the model's queue %d (CPU %d); the stage's action %d, want %d", sport, q, s.CPUs[uint32(q)], got, want)
			}
			seen[want]++
		}
	}
	if seen[2] == 0 || seen[4] == 0 {
		t.Errorf("the flows did not reach both cores: %v", seen)
	}
}

// TestKernelSocketCoreOffline: a queue whose core is not an online CPU
// gets no cpumap entry, and a note says its frames go up where they
// arrive; the program still loads and passes them up.
func TestKernelSocketCoreOffline(t *testing.T) {
	needBPF(t)
	r, st := embedTest(t, kernelStack)
	s, err := StageOf(r.Plan, st)
	if err != nil {
		t.Fatal(err)
	}
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for online[off] {
		off++
	}
	for q := range s.CPUs {
		s.CPUs[q] = off
	}
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.cpus) != 0 || len(m.notes) != len(s.CPUs) || !strings.Contains(m.notes[0], fmt.Sprintf("core %d is not an online CPU", off)) {
		t.Fatalf("CPUs %v, notes %q", m.cpus, m.notes)
	}
	p, err := loadProgram(progXDP, s, m)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if act, _, err := p.Test(udp(t, ourIP, 5000, 7100, false)); err != nil || act != 2 {
		t.Errorf("a kernel-socket frame with no CPU for its queue: %d, %v; want XDP_PASS", act, err)
	}
	// Counted for its endpoint: passed up where it arrived.
	for _, k := range kernelCounts(s, m.kcounts) {
		want := dataplane.KernelSocket{Endpoint: k.Endpoint}
		if k.Endpoint == "kudp0" {
			want.NoCPUEntry = 1
		}
		if k != want {
			t.Errorf("counted %+v, want %+v", k, want)
		}
	}
}

// TestKernelSocketCountsEveryFrame: every frame of a kernel-socket
// endpoint the XDP programs decide on is counted with what became of
// it, on the stages of TestKernelSocketStage: one a plan's rule drops
// (rule_dropped), one whose CPU has no entry in the cpumap when it comes
// (passed up where it arrived: no_cpumap_entry); a frame without ports
// the rule drops is no endpoint's and counts for none.
func TestKernelSocketCountsEveryFrame(t *testing.T) {
	onKernelStages(t, testKernelCounts)
}

func testKernelCounts(t *testing.T, s *Stage, pl *plan.Plan) {
	// A rule before the plan's drops what comes from 10.9.0.66.
	hostile := net.IP{10, 9, 0, 66}
	src := netip.AddrFrom4([4]byte(hostile.To4()))
	s.Groups = append([]Group{{Table: "test", Mask: Key(0, netip.MustParseAddr("255.255.255.255"), netip.IPv4Unspecified(), 0, 0), Capacity: 1,
		Rules: []Rule{{Key: Key(0, src, netip.IPv4Unspecified(), 0, 0), Queue: DropQueue}}}}, s.Groups...)
	m, err := newMaps(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var progs []*ebpf.Program
	for _, kind := range []int{progXDP, progCPU} {
		p, err := loadProgram(kind, s, m)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		progs = append(progs, p)
	}
	counts := func() map[string]dataplane.KernelSocket {
		out := map[string]dataplane.KernelSocket{}
		for _, k := range kernelCounts(s, m.kcounts) {
			out[k.Endpoint] = k
		}
		return out
	}
	// run runs both programs on f from cpu, and wants action want.
	run := func(name string, f []byte, cpu int, want uint32) {
		t.Helper()
		if len(f) < 60 {
			f = append(slices.Clone(f), make([]byte, 60-len(f))...)
		}
		for i, p := range progs {
			var got uint32
			if err := onCPU(cpu, func() (err error) { got, _, err = p.Test(f); return err }); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s, program %d from CPU %d: action %d, want %d", name, i, cpu, got, want)
			}
		}
	}
	core := plannedCores(pl.Endpoints, pl.Queues, "kudp1")[0]
	other := 1 - core

	// The rule drops a whole datagram of kudp1's: counted for kudp1.
	ip := ip4(ourIP, layers.IPProtocolUDP)
	ip.SrcIP = hostile
	dropped := frame(t, eth(layers.EthernetTypeIPv4), ip, &layers.UDP{SrcPort: 5000, DstPort: 7101}, gopacket.Payload("hi"))
	before := counts()
	run("a dropped datagram", dropped, other, 1) // XDP_DROP
	after := counts()
	if got := after["kudp1"].RuleDropped - before["kudp1"].RuleDropped; got != 2 {
		t.Errorf("a datagram a rule drops: kudp1 rule_dropped grew by %d, want 2 (one a program): %+v", got, after["kudp1"])
	}

	// A TCP header cut short (no ports by internal/packet's rule) from
	// the same source: dropped, and counted for no endpoint.
	tip := ip4(ourIP, layers.IPProtocolTCP)
	tip.SrcIP = hostile
	cut := frame(t, eth(layers.EthernetTypeIPv4), tip, &layers.TCP{SrcPort: 4000, DstPort: 7201, SYN: true, Window: 100})
	cut = cut[:14+20+12]
	binary.BigEndian.PutUint16(cut[14+2:], 20+12)
	cut[14+10], cut[14+11] = 0, 0
	var sum uint32
	for i := 14; i < 34; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(cut[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(cut[14+10:], ^uint16(sum))
	before = counts()
	run("a dropped TCP header cut short", cut, other, 1)
	if after := counts(); !gomaps.Equal(before, after) {
		t.Errorf("a frame without ports a rule drops was counted for an endpoint: %+v -> %+v", before, after)
	}

	// kudp1's CPU has no entry in the cpumap any more: the frame passes
	// up where it arrived, counted no_cpumap_entry.
	if err := m.cpumap.Delete(uint32(core)); err != nil {
		t.Fatal(err)
	}
	before = counts()
	run("kudp1 with no entry for its CPU", udp(t, ourIP, 5000, 7101, false), other, 2) // XDP_PASS
	after = counts()
	if got := after["kudp1"].NoCPUEntry - before["kudp1"].NoCPUEntry; got != 2 || after["kudp1"].Redirected != before["kudp1"].Redirected {
		t.Errorf("a frame whose CPU has no entry: kudp1 no_cpumap_entry grew by %d, want 2: %+v -> %+v", got, before["kudp1"], after["kudp1"])
	}
}

// TestServeKernelSocketsRPS: with an RPS mask on the veth's receive
// queue 0 (CPU 0), the kernel would move every frame the cpumap
// redirects to CPU 0 (such a frame carries no receive queue, so RPS reads
// queue 0's map); run empties that mask while it serves, and restores it.
// The masks are the namespace's own under /sys only in a process that
// `ip netns exec` started, so the test runs Serve in a copy of itself
// started that way.
func TestServeKernelSocketsRPS(t *testing.T) {
	if os.Getenv("DRAGONC_RPS_CHILD") == "1" {
		rpsChild(t)
		return
	}
	if runtime.NumCPU() < 2 {
		t.Skip("this test needs two CPUs")
	}
	a, b := pair(t)
	ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	r, _ := embedTest(t, kernelStack)
	planned := map[string]int{}
	for _, ep := range countedEndpoints {
		planned[ep.name] = plannedCores(r.Plan.Endpoints, r.Plan.Queues, ep.name)[0]
	}
	// Queue 0's RPS mask: the CPU the clients run on, other than the
	// planned one.
	client := 1 - planned["kudp1"]
	mask := fmt.Sprintf("%x", 1<<client)
	rps := func(write string) string {
		cmd := "cat /sys/class/net/vA/queues/rx-0/rps_cpus"
		if write != "" {
			cmd = "echo " + write + " > /sys/class/net/vA/queues/rx-0/rps_cpus && " + cmd
		}
		out, err := exec.Command("ip", "netns", "exec", a, "sh", "-c", cmd).CombinedOutput()
		if err != nil {
			t.Skipf("no RPS mask to set here (CONFIG_RPS?): %v %s", err, out)
		}
		return strings.TrimLeft(strings.TrimSpace(string(out)), "0,")
	}
	if got := rps(mask); got != mask {
		t.Fatalf("rx-0's rps_cpus reads %q after writing %s", got, mask)
	}
	srv := &cpuServers{counts: map[string]cpuCounts{}}
	t.Cleanup(srv.close)
	if err := inNS(a, func() error { return srv.udp("kudp1", 7101) }); err != nil {
		t.Fatal(err)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", a, self, "-test.run=^TestServeKernelSocketsRPS$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "DRAGONC_RPS_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() error {
		stdin.Close()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			return fmt.Errorf("the serving copy did not stop: %v", <-done)
		}
	}
	defer func() {
		if cmd.ProcessState == nil {
			stop()
		}
	}()
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(out.String(), "dragonc run: serving "); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("the serving copy is not serving:\n%s", out.String())
		}
	}
	if got := rps(""); got != "" {
		t.Errorf("rx-0's rps_cpus reads %q while serving; want it empty", got)
	}
	err = inNS(b, func() error {
		return onCPU(client, func() error {
			for i := range kernelDatagrams {
				msg := []byte(fmt.Sprintf("kudp1 %d", i))
				got, err := udpExchange(7101, msg)
				if err != nil || !bytes.Equal(got, msg) {
					return fmt.Errorf("kudp1: %q, %v", got, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Errorf("%v\n%s", err, out.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("the serving copy: %v\n%s", err, out.String())
	}
	if got := rps(""); got != mask {
		t.Errorf("rx-0's rps_cpus reads %q after the run; want %s back", got, mask)
	}
	if !strings.Contains(out.String(), "receive queue 0 ("+mask) {
		t.Errorf("run does not say it emptied queue 0's RPS mask:\n%s", out.String())
	}
	c := srv.snapshot()["kudp1"]
	if f := c.fraction(planned["kudp1"]); f < 0.99 {
		t.Errorf("kudp1: %.1f%% on its planned core %d (by CPU %v)\n%s", 100*f, planned["kudp1"], c, out.String())
	}
	t.Logf("kudp1 by CPU %v, planned %d, clients on %d, rx-0's RPS mask %s", c, planned["kudp1"], client, mask)
}

// rpsChild serves the mixed stack on vA of the namespace it was started
// in until its standard input closes.
func rpsChild(t *testing.T) {
	r, st := embedTest(t, kernelStack)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := Serve(ctx, r, st, Options{Iface: "vA", Socket: "xdp", Stdout: os.Stdout, Stderr: os.Stderr}); err != nil {
		t.Fatal(err)
	}
}
