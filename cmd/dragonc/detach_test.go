package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/bench/live"
	"github.com/dragonc/dragonc/internal/netnstest"
)

// TestMain lets the test binary stand in for dragonc: run --detach starts
// its own executable, which here is this binary.
func TestMain(m *testing.M) {
	live.Child()
	if os.Getenv("DRAGONC_TEST_AS_DRAGONC") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// detachStack is served by TestDetachStatusStop.
const detachStack = `stack detached {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint echo udp listen *:7 { app "echo" }
    service arp
    service icmp-echo
}
`

// detachEnv prepares detached runs of stack src on vA in namespace a: a
// bpf file system and a state directory of the test's own, this binary
// standing in for dragonc, and a stop when the test ends. It returns the
// stack file's path (name in a temporary directory).
func detachEnv(t *testing.T, a, name, src string) string {
	t.Helper()
	dir := t.TempDir()
	bpffs := filepath.Join(dir, "bpffs")
	os.Mkdir(bpffs, 0o700)
	if err := syscall.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		t.Skipf("no bpf file system to pin in: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(bpffs, syscall.MNT_DETACH) })
	t.Setenv("DRAGONC_RUN_DIR", filepath.Join(dir, "run"))
	t.Setenv("DRAGONC_BPF_DIR", filepath.Join(bpffs, "dragonc"))
	t.Setenv("DRAGONC_TEST_AS_DRAGONC", "1")
	stack := filepath.Join(dir, name)
	os.WriteFile(stack, []byte(src), 0o644)
	t.Cleanup(func() { netnstest.In(a, func() error { dragoncIn(t, "stop", "vA"); return nil }) })
	return stack
}

// statusOf runs dragonc status --json in namespace ns.
func statusOf(t *testing.T, ns string) []statusEntry {
	t.Helper()
	var code int
	var out, errs string
	netnstest.In(ns, func() error {
		code, out, errs = dragoncIn(t, "status", "--json")
		return nil
	})
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	var es []statusEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return es
}

// dragoncIn is dragonc without the test helper's fatal checks, for use
// inside a namespace's thread.
func dragoncIn(t *testing.T, args ...string) (int, string, string) {
	var out, errs strings.Builder
	code := run(args, strings.NewReader(""), &out, &errs)
	return code, out.String(), errs.String()
}

func xdpAttached(t *testing.T, ns string) bool {
	out, err := exec.Command("ip", "-n", ns, "-d", "link", "show", "vA").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show: %v\n%s", err, out)
	}
	return strings.Contains(string(out), "prog/xdp")
}

// TestDetachStatusStop: run --detach returns once the stack serves, with
// its programs pinned; status shows it with its counters; after SIGKILL
// the pinned program stays attached and status says the run is gone;
// stop removes it all, and stopping again is no error. A second detached
// run stops with SIGTERM.
func TestDetachStatusStop(t *testing.T) {
	a, b := vethPair(t)
	stack := detachEnv(t, a, "detached.lpg", detachStack)

	detachRun := func() int {
		var code int
		var errs string
		netnstest.In(a, func() error {
			code, _, errs = dragoncIn(t, "run", "--detach", "--socket", "xdp", "--every", "100ms", "linux-xdp", stack, "vA")
			return nil
		})
		if code != 0 || !strings.Contains(errs, "detached as pid") {
			t.Fatalf("run --detach: exit %d:\n%s", code, errs)
		}
		es := statusOf(t, a)
		if len(es) != 1 || !es[0].Alive || !es[0].Serving || es[0].Socket != "xdp" || !es[0].Detached || len(es[0].Programs) == 0 {
			t.Fatalf("status after run --detach: %+v", es)
		}
		if _, err := os.Stat(es[0].Pinned); err != nil {
			t.Fatalf("nothing pinned: %v", err)
		}
		return es[0].PID
	}
	pid := detachRun()
	// It serves: an echo, and the counters status shows count it.
	err := netnstest.In(b, func() error { return echoes("detached") })
	if err != nil {
		t.Fatalf("the detached stack does not echo: %v", err)
	}
	counted := false
	for deadline := time.Now().Add(3 * time.Second); !counted && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		es := statusOf(t, a)
		if len(es) == 1 && es[0].Report != nil {
			for _, q := range es[0].Report.Queues {
				for _, o := range q.Outcomes {
					counted = counted || o.Name == "deliver echo" && o.Count > 0
				}
			}
		}
	}
	if !counted {
		t.Errorf("status shows no echo delivered: %+v", statusOf(t, a))
	}

	// SIGKILL: the pinned program outlives the run.
	syscall.Kill(pid, syscall.SIGKILL)
	if !exited(pid) {
		t.Fatalf("pid %d outlived SIGKILL", pid)
	}
	if !xdpAttached(t, a) {
		t.Fatalf("the pinned XDP program went with the killed run")
	}
	if es := statusOf(t, a); len(es) != 1 || es[0].Alive {
		t.Fatalf("status after SIGKILL: %+v", es)
	}
	var code int
	var errs string
	netnstest.In(a, func() error { code, _, errs = dragoncIn(t, "stop", "vA"); return nil })
	if code != 0 || !strings.Contains(errs, "removed the pinned programs") {
		t.Fatalf("stop after SIGKILL: exit %d:\n%s", code, errs)
	}
	if xdpAttached(t, a) {
		t.Fatalf("stop left the XDP program attached")
	}
	if es := statusOf(t, a); len(es) != 0 {
		t.Fatalf("status after stop: %+v", es)
	}
	netnstest.In(a, func() error { code, _, errs = dragoncIn(t, "stop", "vA"); return nil })
	if code != 0 || !strings.Contains(errs, "nothing runs on vA") {
		t.Fatalf("stop again: exit %d:\n%s", code, errs)
	}

	// A hardware plan applied through the driver (the veth refuses its
	// steps; the undo record is kept all the same): after SIGKILL, stop
	// undoes it from the record in the state directory.
	netnstest.In(a, func() error {
		code, _, errs = dragoncIn(t, "run", "--detach", "--force", "--socket", "packet", "82599", stack, "vA")
		return nil
	})
	if code != 0 {
		t.Fatalf("run --detach 82599: exit %d:\n%s", code, errs)
	}
	es := statusOf(t, a)
	if len(es) != 1 || es[0].Hardware == "" || es[0].SocketsPerQueue != 1 {
		t.Fatalf("status of a hardware plan: %+v", es)
	}
	syscall.Kill(es[0].PID, syscall.SIGKILL)
	if !exited(es[0].PID) {
		t.Fatalf("pid %d outlived SIGKILL", es[0].PID)
	}
	netnstest.In(a, func() error { code, _, errs = dragoncIn(t, "stop", "vA"); return nil })
	if code != 0 || !strings.Contains(errs, "restored vA's settings") || !strings.Contains(errs, "removed the pinned programs") {
		t.Fatalf("stop after SIGKILL of a hardware plan: exit %d:\n%s", code, errs)
	}

	// A run stopped as a service is: SIGTERM, everything detached.
	pid = detachRun()
	netnstest.In(a, func() error { code, _, errs = dragoncIn(t, "stop", "vA"); return nil })
	if code != 0 || !strings.Contains(errs, "stopped pid") {
		t.Fatalf("stop: exit %d:\n%s", code, errs)
	}
	if xdpAttached(t, a) || !exited(pid) {
		t.Fatalf("after stop: XDP attached %v, pid %d exited %v", xdpAttached(t, a), pid, exited(pid))
	}
}

// exited says whether process pid has ended, waiting up to 5 s for it to
// be reaped: stop returns once the run is a zombie (run.State.Alive), and
// its reaper (init) takes a moment more.
func exited(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// TestBuildArtefact: dragonc build writes one program that serves the
// stack with `FILE run IFACE` on a host without the go command: run here
// with PATH empty and an empty cache, it echoes, and stops on SIGTERM.
func TestBuildArtefact(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("dragonc build needs the go command")
	}
	a, b := vethPair(t)
	dir := t.TempDir()
	stack := filepath.Join(dir, "detached.lpg")
	os.WriteFile(stack, []byte(detachStack), 0o644)
	server := filepath.Join(dir, "server")
	code, _, errs := dragoncIn(t, "build", "linux-xdp", stack, "-o", server)
	if code != 0 || !strings.Contains(errs, "wrote "+server) {
		t.Fatalf("build: exit %d:\n%s", code, errs)
	}
	// The serving host: no go command, nothing in the build cache.
	cmd := exec.Command(server, "run", "--socket", "xdp", "vA")
	cmd.Env = []string{"PATH=", "HOME=" + dir, "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "DRAGONC_RUN_DIR=" + filepath.Join(dir, "run"), "DRAGONC_TEST_AS_DRAGONC=1"}
	var out, log syncBuf
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := netnstest.In(a, cmd.Start); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	for deadline := time.Now().Add(time.Minute); !strings.Contains(log.String(), "dragonc run: serving"); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the artefact stopped: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the artefact does not serve:\n%s", log.String())
		}
	}
	if !strings.Contains(log.String(), "comes from this artefact") {
		t.Errorf("the artefact does not say where its program comes from:\n%s", log.String())
	}
	err := netnstest.In(b, func() error { return echoes("built") })
	if err != nil {
		t.Fatalf("the artefact does not echo: %v\n%s", err, log.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the artefact stopped with %v:\n%s", err, log.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the artefact did not stop on SIGTERM")
	}
	if !strings.Contains(out.String(), "final:") {
		t.Errorf("no final counters:\n%s", out.String())
	}
}

// syncBuf is a buffer two goroutines may use.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// vethPair makes namespaces a (vA, the stack's MAC, no address) and b
// (vB, 10.9.0.2/24, finishing its own checksums) joined by a veth pair.
func vethPair(t *testing.T) (a, b string) {
	a, b = netnstest.Two(t, "ethtool")
	netnstest.IP(t, "link", "add", "vA", "netns", a, "type", "veth", "peer", "name", "vB", "netns", b)
	netnstest.IP(t, "-n", a, "link", "set", "vA", "address", "02:00:00:00:00:01", "up")
	netnstest.IP(t, "-n", b, "addr", "add", "10.9.0.2/24", "dev", "vB")
	netnstest.IP(t, "-n", b, "link", "set", "vB", "up")
	if out, err := exec.Command("ip", "netns", "exec", b, "ethtool", "-K", "vB", "tx", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v\n%s", err, out)
	}
	return a, b
}

// echoes sends msg to the stack's UDP echo (10.9.0.1:7) from the calling
// thread's namespace until it comes back, resending every 300 ms for 3 s.
func echoes(msg string) error {
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: 7})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 64)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		c.Write([]byte(msg))
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := c.Read(buf); err == nil && string(buf[:n]) == msg {
			return nil
		}
	}
	return os.ErrDeadlineExceeded
}
