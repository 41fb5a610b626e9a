package run

import (
	"context"
	"errors"
	"fmt"
	gomaps "maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/dragonc/dragonc/backends/gofallback"
	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run/dataplane"
)

// reloadStack is the stack the reload tests start from: UDP echo
// listeners on two cores.
const reloadStack = `stack reload {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint e1 udp listen *:7001 { app "echo" }
    endpoint e2 udp listen *:7002 { app "echo" }
    endpoint e3 udp listen *:7003 { app "discard" }
    service icmp-echo
    service arp
}
`

// withEndpoints is reloadStack with lines added before its services and
// the endpoints named in drop removed.
func withEndpoints(add string, drop ...string) string {
	s := reloadStack
	for _, d := range drop {
		var kept []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "endpoint "+d+" ") {
				kept = append(kept, l)
			}
		}
		s = strings.Join(kept, "\n")
	}
	return strings.Replace(s, "    service icmp-echo", add+"    service icmp-echo", 1)
}

func loadStack(t testing.TB, src string) *lpg.Stack {
	t.Helper()
	st, diags := lpg.LoadStack("reload.lpg", []byte(src))
	if st == nil {
		t.Fatal(diags)
	}
	return st
}

// An endpoint of a kind the stack has, added or removed, is new entries
// in the running code's tables: the code's shape stays. A new protocol
// is new code.
func TestReloadShape(t *testing.T) {
	r, st := embedTest(t, reloadStack)
	code, err := gofallback.GenerateSwappable(r, st, gofallback.Options{NoTest: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, src string
		same      bool
	}{
		{"add", withEndpoints("    endpoint e4 udp listen *:7004 { app \"echo\" }\n"), true},
		{"remove", withEndpoints("", "e2"), true},
		{"add and remove", withEndpoints("    endpoint e9 udp listen *:7009 { app \"echo\" }\n", "e1"), true},
		{"openmx", withEndpoints("    endpoint mx openmx 3 { app \"echo\" }\n"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st2 := loadStack(t, c.src)
			r2, err := Replan(st2, r)
			if err != nil {
				t.Fatal(err)
			}
			code2, err := gofallback.GenerateSwappable(r2, st2, gofallback.Options{NoTest: true})
			if err != nil {
				t.Fatal(err)
			}
			if same := code2.Shape == code.Shape; same != c.same {
				t.Errorf("same shape %v, want %v (%s)", same, c.same, codeDiff(code, code2))
			}
		})
	}
}

// reloadRun serves reloadStack on vA in namespace a on socket kind
// socket, reading its stack
// from a file the test rewrites; it returns the run, the file and the
// run's handle.
func reloadRun(t *testing.T, a, socket string) (*liveRun, string, *Live) {
	t.Helper()
	r, st := embedTest(t, reloadStack)
	path := filepath.Join(t.TempDir(), "reload.lpg")
	if err := os.WriteFile(path, []byte(reloadStack), 0o644); err != nil {
		t.Fatal(err)
	}
	lives := make(chan *Live, 1)
	sv := serveIn(t, a, r, st, socket, func(o *Options) {
		o.Restack = restackFile(path)
		o.Live = func(l *Live) { lives <- l }
	})
	return sv, path, <-lives
}

// restackFile reads the stack of the file path, as dragonc run's reload
// does (Options.Restack).
func restackFile(path string) func() (*lpg.Stack, error) {
	var ld lpg.Loader
	ld.ReadFile(path) // the file as the run starts
	return func() (*lpg.Stack, error) {
		st, diags, err := ld.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if st == nil {
			return nil, diags
		}
		return st, nil
	}
}

// reloadFile rewrites the stack file and reloads it as SIGHUP does.
func reloadFile(t *testing.T, l *Live, path, src string) *ReloadResult {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := l.ReloadSource()
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	return res
}

// udpFirst sends one datagram to the stack's port and waits 300 ms for
// the answer: the first datagram, not a retry, must be answered.
func udpFirst(port int, msg []byte) ([]byte, error) {
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: port})
	if err != nil {
		return nil, err
	}
	return udpOn(c, msg, 0)
}

// TestReloadServes changes the endpoints of a running stack: an added
// endpoint answers its first datagram, a removed one is refused as the
// new LPG says (port unreachable, counted), a stack file with a syntax
// error is refused with its position and the old plan serves on, and
// nothing is rebuilt or restarted; then a new protocol restarts the data
// plane with new code, after which endpoints change without a restart
// again.
func TestReloadServes(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) { testReloadServes(t, socket) })
	}
}

func testReloadServes(t *testing.T, socket string) {
	a, b := pair(t)
	sv, path, live := reloadRun(t, a, socket)
	inB := func(f func() error) {
		t.Helper()
		if err := inNS(b, f); err != nil {
			t.Fatal(err)
		}
	}
	inB(func() error {
		if _, err := udpExchange(7001, []byte("before")); err != nil {
			return fmt.Errorf("e1 before any reload: %w", err)
		}
		if _, err := udpExchange(7004, []byte("nobody")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("port 7004 before it is added: %v, want port unreachable", err)
		}
		return nil
	})
	helper := sv.log.String()

	res := reloadFile(t, live, path, withEndpoints("    endpoint e4 udp listen *:7004 { app \"echo\" }\n"))
	if !res.Applied || !slices.Equal(res.Added, []string{"e4"}) || len(res.Removed) > 0 || !res.Short {
		t.Fatalf("add e4: %+v, want applied by the short path", res)
	}
	inB(func() error {
		got, err := udpFirst(7004, []byte("first"))
		if err != nil || string(got) != "first" {
			return fmt.Errorf("e4's first datagram: %q, %v", got, err)
		}
		return nil
	})

	res = reloadFile(t, live, path, withEndpoints("    endpoint e4 udp listen *:7004 { app \"echo\" }\n", "e2"))
	if !res.Applied || !slices.Equal(res.Removed, []string{"e2"}) || len(res.Added) > 0 || !res.Short {
		t.Fatalf("remove e2: %+v, want applied by the short path", res)
	}
	// The plan the rest of the run reads follows the short path's
	// changes once they stop (settle), and its code has the tables
	// served.
	for try := 0; ; try++ {
		live.sv.reloadMu.Lock()
		r, behind := live.sv.r, live.sv.behind
		live.sv.reloadMu.Unlock()
		var names []string
		for _, e := range r.Plan.Endpoints {
			names = append(names, e.Name)
		}
		if behind == 0 && slices.Contains(names, "e4") && !slices.Contains(names, "e2") {
			break
		}
		if try > 200 {
			t.Fatalf("the plan served did not follow the short path: %d changes behind, endpoints %v", behind, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(sv.log.String(), "differ from the plan's") {
		t.Errorf("the short path's tables were not the plan's:\n%s", sv.log.String())
	}
	inB(func() error {
		if _, err := udpFirst(7002, []byte("gone")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("removed e2: %v, want port unreachable", err)
		}
		if got, err := udpFirst(7001, []byte("kept")); err != nil || string(got) != "kept" {
			return fmt.Errorf("e1 after the reloads: %q, %v", got, err)
		}
		return nil
	})

	bad := strings.Replace(reloadStack, "cores 0..1", "cores 0..1 {", 1)
	res = reloadFile(t, live, path, bad)
	if res.Applied || !strings.Contains(res.Error, path+":3:") {
		t.Fatalf("a syntax error: %+v, want refused with its position %s:3:COL", res, path)
	}
	if !strings.Contains(sv.log.String(), "reload 3 refused") {
		t.Errorf("the run's own output does not say the reload was refused:\n%s", sv.log.String())
	}
	inB(func() error {
		if got, err := udpFirst(7004, []byte("still")); err != nil || string(got) != "still" {
			return fmt.Errorf("e4 after a refused reload: %q, %v", got, err)
		}
		if _, err := udpFirst(7002, []byte("still gone")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("e2 after a refused reload: %v, want port unreachable", err)
		}
		return nil
	})
	if strings.Count(sv.log.String(), "building the generated stack") != strings.Count(helper, "building the generated stack") ||
		strings.Count(sv.log.String(), "serving reload") != 1 {
		t.Errorf("the helper was rebuilt or restarted:\n%s", sv.log.String())
	}
	// A new protocol needs new code and another eBPF program: the data
	// plane is handed over to the new plan's (the sockets pass to the
	// new helper, and a client echoing on e1 all along loses nothing),
	// and says for how long the frames waited.
	end := steadyEcho(b, 7001, 2*time.Second)
	res = reloadFile(t, live, path, withEndpoints("    endpoint e4 udp listen *:7004 { app \"echo\" }\n    endpoint mx openmx 3 { app \"echo\" }\n", "e2"))
	// The client goes on a little after the new plan serves.
	time.Sleep(100 * time.Millisecond)
	n, client := end()
	if client != nil {
		t.Fatal(client)
	}
	t.Logf("e1's client across the %s: %d datagrams sent, %d answered, %d lost", map[bool]string{true: "handover", false: "restart"}[res.HandedOver], n.sent, n.answered, n.lost)
	if !res.Applied || res.Restarted == "" || res.PauseMS <= 0 || !slices.Equal(res.Added, []string{"mx"}) || !res.HandedOver {
		t.Fatalf("an Open-MX endpoint: %+v, want applied by a restart that hands the sockets over", res)
	}
	t.Log(res)
	if n.lost > 0 || n.answered != n.sent || n.sent < 2 || res.Lost > 0 {
		t.Errorf("e1 lost %d of %d datagrams across the handover; the kernel counted %d frames lost", n.lost, n.sent, res.Lost)
	}
	inB(func() error {
		if got, err := omxExchange("vB", 3, 9, []byte("new protocol")); err != nil || string(got) != "new protocol" {
			return fmt.Errorf("the Open-MX endpoint after the restart: %q, %v", got, err)
		}
		if got, err := udpFirst(7004, []byte("after")); err != nil || string(got) != "after" {
			return fmt.Errorf("e4 after the restart: %q, %v", got, err)
		}
		return nil
	})
	// Then endpoints come and go on the new plan's code without a
	// restart again.
	res = reloadFile(t, live, path, withEndpoints("    endpoint mx openmx 3 { app \"echo\" }\n", "e2"))
	if !res.Applied || res.Restarted != "" || !slices.Equal(res.Removed, []string{"e4"}) {
		t.Fatalf("removing e4 after the restart: %+v", res)
	}
	inB(func() error {
		if _, err := udpFirst(7004, []byte("gone")); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("e4 removed after the restart: %v, want port unreachable", err)
		}
		return nil
	})
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
	final := sv.final()
	for _, want := range []string{"deliver mx", "sink RxL4UDPPortUnreachable"} {
		if !strings.Contains(final, want) {
			t.Errorf("the final counters have no %q:\n%s", want, final)
		}
	}
}

// TestHandover hands the data plane (AF_XDP, then AF_PACKET) over to new
// code twice (a new protocol, then without it), once through a helper
// that refuses the sockets (the previous plan's helper takes them back
// and serves), while a client echoing on an unchanged endpoint loses
// nothing. On AF_PACKET also with a kernel-socket endpoint, whose XDP
// program (in front of the taps) is swapped on its link as well.
func TestHandover(t *testing.T) {
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket, func(t *testing.T) { testHandover(t, socket, "", false) })
	}
	t.Run("packet-kernel", func(t *testing.T) {
		testHandover(t, "packet", "    endpoint k udp listen 10.9.0.1:7100 { app \"counter\" cores 1..1 }\n", false)
	})
	// A detached run's pins follow the handover: the same link, pinned
	// again, runs the new program, which is pinned beside it.
	for _, socket := range []string{"xdp", "packet"} {
		t.Run(socket+"-pinned", func(t *testing.T) { testHandover(t, socket, "", true) })
	}
}

// testHandover runs TestHandover on socket kind socket, with the
// endpoint lines kernel added to the stack, pinned (Options.Pin) or not.
func testHandover(t *testing.T, socket, kernel string, pinned bool) {
	a, b := pair(t)
	var pins *pinChecker
	if pinned {
		pins = newPinChecker(t, socket)
	}
	base := withEndpoints(kernel)
	if kernel != "" {
		// The kernel owns the stack's address.
		ip(t, "-n", a, "addr", "add", "10.9.0.1/24", "dev", "vA")
	}
	r, st := embedTest(t, base)
	if kernel != "" {
		if s, err := StageOf(r.Plan, st); err != nil || len(s.Demux) == 0 {
			t.Fatalf("the stack's stage: %v; want a kernel-socket endpoint to steer", err)
		}
	}
	path := filepath.Join(t.TempDir(), "reload.lpg")
	if err := os.WriteFile(path, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	lives := make(chan *Live, 1)
	var refuse atomic.Bool
	sv := serveIn(t, a, r, st, socket, func(o *Options) {
		o.Restack = restackFile(path)
		o.Live = func(l *Live) { lives <- l }
		o.Pin = pinned
		o.adoptEdit = func(h *dataplane.Handover) {
			if refuse.Swap(false) {
				h.Ring = 3 // no ring of either kind: the helper refuses
			}
		}
	})
	live := <-lives
	if pins != nil {
		if err := pins.check(); err != nil {
			t.Fatalf("as the run starts: %v", err)
		}
	}
	mx := withEndpoints(kernel + "    endpoint mx openmx 3 { app \"echo\" }\n")
	end := steadyEcho(b, 7001, 2*time.Second)
	steps := []struct {
		name, src string
		refuse    bool
	}{
		{"a new protocol", mx, false},
		{"without it", base, false},
		{"a helper that refuses the sockets", mx, true},
		{"the new protocol after all", mx, false},
	}
	for _, step := range steps {
		refuse.Store(step.refuse)
		if err := os.WriteFile(path, []byte(step.src), 0o644); err != nil {
			t.Fatal(err)
		}
		// From the run's namespace, where a reload looks for the address
		// the kernel owns (kernel-socket endpoints).
		var res *ReloadResult
		reload := func() (err error) {
			nerr := inNS(a, func() error {
				res, err = live.ReloadSource()
				return nil
			})
			if nerr != nil {
				return nerr
			}
			return err
		}
		err := reload()
		// After a refused handover the previous plan's helper takes the
		// sockets back in the background.
		for deadline := time.Now().Add(30 * time.Second); err == nil && strings.Contains(res.Error, "not served yet") && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			err = reload()
		}
		t.Logf("%s: %v", step.name, res)
		switch {
		case step.refuse && (err != nil || res.Applied || !strings.Contains(res.Error, "previous plan serves again")):
			end()
			t.Fatalf("%s: %+v, %v; want refused, the previous plan serving", step.name, res, err)
		case !step.refuse && (err != nil || !res.Applied || !res.HandedOver || res.Lost > 0):
			end()
			t.Fatalf("%s: %+v, %v; want handed over, nothing lost", step.name, res, err)
		}
		if pins != nil && !step.refuse {
			if err := pins.check(); err != nil {
				end()
				t.Fatalf("%s: %v", step.name, err)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	n, client := end()
	if client != nil {
		t.Fatal(client)
	}
	t.Logf("e1's client across %d reloads with new code: %d datagrams sent, %d answered, %d lost", len(steps), n.sent, n.answered, n.lost)
	if n.lost > 0 || n.answered != n.sent || n.sent < len(steps) {
		t.Errorf("e1 lost %d of %d datagrams", n.lost, n.sent)
	}
	if err := inNS(b, func() error {
		got, err := omxExchange("vB", 3, 9, []byte("after"))
		if err != nil || string(got) != "after" {
			return fmt.Errorf("the Open-MX endpoint after the handovers: %q, %v", got, err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := sv.stop(); err != nil {
		t.Fatal(err)
	}
}

// pinChecker follows a pinned run's pins (Options.Pin) in a bpf file
// system of the test's own.
type pinChecker struct {
	dir  string // BPFDir: the run pins in a directory of its own there
	runs string // the pin of the program link0 runs
	prog ebpf.ProgramID
	link link.ID
}

// newPinChecker mounts a bpf file system for the pins of a run on socket
// kind socket and points DRAGONC_BPF_DIR into it.
func newPinChecker(t *testing.T, socket string) *pinChecker {
	t.Helper()
	fs := filepath.Join(t.TempDir(), "bpffs")
	if err := os.Mkdir(fs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("bpf", fs, "bpf", 0, ""); err != nil {
		t.Skipf("no bpf file system to pin in: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(fs, syscall.MNT_DETACH) })
	t.Setenv("DRAGONC_BPF_DIR", filepath.Join(fs, "dragonc"))
	// AF_XDP's link0 is the XDP link and prog0 its program; AF_PACKET's
	// link0 the tc link, which runs prog2 (after fanout and filter).
	runs := "prog0"
	if socket == "packet" {
		runs = "prog2"
	}
	return &pinChecker{dir: filepath.Join(fs, "dragonc"), runs: runs}
}

// check says whether the pinned link is the one pinned before (a
// handover keeps it) and runs the program pinned beside it, which is not
// the one pinned before (a handover brings the new plan's).
func (p *pinChecker) check() error {
	runs, err := filepath.Glob(filepath.Join(p.dir, "*"))
	if err != nil || len(runs) != 1 {
		return fmt.Errorf("pins of %d run(s) in %s (%v), want 1", len(runs), p.dir, err)
	}
	dir := runs[0]
	l, err := link.LoadPinnedLink(filepath.Join(dir, "link0"), nil)
	if err != nil {
		return fmt.Errorf("the pinned link: %w", err)
	}
	defer l.Close()
	li, err := l.Info()
	if err != nil {
		return err
	}
	prog, err := ebpf.LoadPinnedProgram(filepath.Join(dir, p.runs), nil)
	if err != nil {
		return fmt.Errorf("the pinned program: %w", err)
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		return err
	}
	pid, _ := pi.ID()
	switch {
	case li.Program != pid:
		return fmt.Errorf("the pinned link runs program %d, the pinned %s is %d", li.Program, p.runs, pid)
	case p.link != 0 && li.ID != p.link:
		return fmt.Errorf("the pinned link is link %d, was %d: not the one carried", li.ID, p.link)
	case p.prog != 0 && pid == p.prog:
		return fmt.Errorf("the pinned program is still %d", pid)
	}
	p.link, p.prog = li.ID, pid
	return nil
}

// TestReloadChurn: a client that echoes on an unchanged endpoint, one
// datagram after the other, loses none of them while 200 reloads add and
// remove other endpoints.
func TestReloadChurn(t *testing.T) {
	a, b := pair(t)
	_, _, live := reloadRun(t, a, "xdp")
	stacks := []*lpg.Stack{
		loadStack(t, withEndpoints("    endpoint e8 udp listen *:7008 { app \"echo\" }\n")),
		loadStack(t, withEndpoints("    endpoint e9 udp listen *:7009 { app \"echo\" }\n", "e2")),
		loadStack(t, reloadStack),
	}
	end := steadyEcho(b, 7001, time.Second)
	const ops = 200
	for i := range ops {
		res, err := live.Reload(stacks[i%len(stacks)])
		if err != nil || !res.Applied {
			end()
			t.Fatalf("reload %d: %+v, %v", i+1, res, err)
		}
	}
	n, client := end()
	if client != nil {
		t.Fatal(client)
	}
	t.Logf("%d reloads; the client sent %d datagrams, %d answered, %d lost", ops, n.sent, n.answered, n.lost)
	if n.lost > 0 || n.answered != n.sent || n.sent < ops {
		t.Errorf("the unchanged endpoint lost %d of %d datagrams across %d reloads", n.lost, n.sent, ops)
	}
}

// echoTally counts a steady client's datagrams.
type echoTally struct{ sent, answered, lost int }

// steadyEcho starts a client in namespace b that echoes on the stack's
// port, one datagram after the other, each sent once: one not answered
// within wait is lost. The function it returns stops the client and
// counts.
func steadyEcho(b string, port int, wait time.Duration) func() (echoTally, error) {
	stop := make(chan struct{})
	done := make(chan echoTally, 1)
	var client error
	go func() {
		var n echoTally
		client = inNS(b, func() error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: port})
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, 64)
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				msg := fmt.Sprintf("steady %d", n.sent)
				n.sent++
				if _, err := c.Write([]byte(msg)); err != nil {
					return err
				}
				c.SetReadDeadline(time.Now().Add(wait))
				for {
					k, err := c.Read(buf)
					if err != nil {
						n.lost++
						break
					}
					if string(buf[:k]) == msg {
						n.answered++
						break
					}
				}
			}
		})
		done <- n
	}()
	return func() (echoTally, error) {
		close(stop)
		n := <-done
		return n, client
	}
}

// applyRules leaves a group's map holding the new rules, counting what it
// added, changed and removed, also when old and new together would not
// fit the map.
func TestApplyRules(t *testing.T) {
	needBPF(t)
	key := func(port uint16) [16]byte {
		return Key(17, netip.IPv4Unspecified(), netip.MustParseAddr("10.9.0.1"), 0, port)
	}
	rules := func(qs map[uint16]uint32) []Rule {
		var out []Rule
		for _, p := range slices.Sorted(gomaps.Keys(qs)) {
			out = append(out, Rule{Key: key(p), Queue: qs[p]})
		}
		return out
	}
	group := func(qs map[uint16]uint32) []Group {
		return []Group{{Table: "t", Capacity: 4, Rules: rules(qs)}}
	}
	cur := group(map[uint16]uint32{1: 0, 2: 1, 3: 1})
	m, err := newMaps(&Stage{Groups: cur}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, step := range []struct {
		next                    map[uint16]uint32
		added, changed, removed int
	}{
		{map[uint16]uint32{1: 0, 2: 0, 4: 1}, 1, 1, 1},       // 4 in, 2 moves, 3 out
		{map[uint16]uint32{1: 0, 5: 1, 6: 1, 7: 0}, 3, 0, 2}, // 7 rules together: the removed go first
	} {
		next := group(step.next)
		a, c, r, err := m.applyRules(cur, next)
		if err != nil {
			t.Fatal(err)
		}
		if a != step.added || c != step.changed || r != step.removed {
			t.Errorf("to %v: +%d ~%d -%d, want +%d ~%d -%d", step.next, a, c, r, step.added, step.changed, step.removed)
		}
		got := map[[16]byte]uint32{}
		var k [16]byte
		var q uint32
		it := m.groups[0].Iterate()
		for it.Next(&k, &q) {
			got[k] = q
		}
		if want := firstRules(next[0].Rules); !gomaps.Equal(got, want) {
			t.Errorf("to %v: the map holds %v", step.next, got)
		}
		cur = next
	}
}

// A table that loses an endpoint the new stack keeps (it moves to another
// queue) keeps it until the rules point elsewhere: the union.
func TestTableUpdates(t *testing.T) {
	e := func(k uint64, ep string) gofallback.TableEntry {
		return gofallback.TableEntry{K0: k, Kind: dataplane.Deliver, Endpoint: ep}
	}
	cur := []gofallback.Table{{Name: "table0", Entries: []gofallback.TableEntry{e(1, "a"), e(2, "b"), e(3, "c")}}, {Name: "table1", Entries: []gofallback.TableEntry{e(9, "z")}}}
	next := []gofallback.Table{{Name: "table0", Entries: []gofallback.TableEntry{e(1, "a"), e(4, "d")}}, {Name: "table1", Entries: []gofallback.TableEntry{e(9, "z")}}}
	union, exact := tableUpdates(cur, next, map[string]bool{"a": true, "b": true, "d": true, "z": true})
	if len(exact) != 1 || exact[0].Name != "table0" || len(exact[0].Entries) != 2 {
		t.Errorf("exact: %+v", exact)
	}
	if len(union) != 1 || !slices.Equal(union[0].Entries, []gofallback.TableEntry{e(1, "a"), e(4, "d"), e(2, "b")}) {
		t.Errorf("union: %+v (b moves and stays until its rule moves; c is gone)", union)
	}
}

// The helper's answers reach the update that waits for them.
func TestHelperControl(t *testing.T) {
	var sent strings.Builder
	h := &helperControl{w: &sent, waiting: map[int]chan controlAnswer{}}
	errs := make(chan error, 2)
	go func() { errs <- h.send(&dataplane.Update{Seq: 1}) }()
	for !strings.Contains(sentString(h, &sent), `"seq":1`) {
		time.Sleep(time.Millisecond)
	}
	if !h.answer("applied 1") {
		t.Fatal("applied 1 not taken")
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	go func() { errs <- h.send(&dataplane.Update{Seq: 2}) }()
	for !strings.Contains(sentString(h, &sent), `"seq":2`) {
		time.Sleep(time.Millisecond)
	}
	h.answer("failed 2: no such table")
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("a failed update: %v", err)
	}
	// A handover's answer carries its state.
	payloads := make(chan string, 1)
	go func() {
		p, err := h.ask(&dataplane.Update{Seq: 3, Handover: true})
		errs <- err
		payloads <- p
	}()
	for !strings.Contains(sentString(h, &sent), `"seq":3,"handover":true`) {
		time.Sleep(time.Millisecond)
	}
	if !h.answer(`handover 3 {"ring":2048}`) {
		t.Fatal("handover 3 not taken")
	}
	if err, p := <-errs, <-payloads; err != nil || p != `{"ring":2048}` {
		t.Errorf("a handover's answer: %q, %v", p, err)
	}
	if h.answer("report {}") || h.answer("applied x") || h.answer("handover x {}") {
		t.Error("a line that is no answer was taken")
	}
}

func sentString(h *helperControl, b *strings.Builder) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return b.String()
}

// bigStack is a stack of n UDP echo listeners on two cores, and, with
// extra, one more on port 40000.
func bigStack(n int, extra bool) string {
	var b strings.Builder
	b.WriteString("stack big {\n    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }\n    cores 0..1\n")
	for i := range n {
		fmt.Fprintf(&b, "    endpoint e%d udp listen *:%d { app \"echo\" }\n", i, 20000+i)
	}
	if extra {
		b.WriteString("    endpoint extra udp listen *:40000 { app \"echo\" }\n")
	}
	// Every refusal is an ICMP error the measurement waits for: no limit
	// in the way.
	b.WriteString("    service icmp-errors { rate 1000000pps burst 10000 peer-rate 1000000pps peer-burst 10000 }\n")
	b.WriteString("    service icmp-echo\n    service arp\n}\n")
	return b.String()
}

// serveBig serves plan r of stack st on vA in namespace a on AF_XDP
// until the benchmark ends, rereading the stack with restack, and
// returns its Live.
func serveBig(b *testing.B, a string, r *dembed.Result, st *lpg.Stack, restack func() (*lpg.Stack, error)) *Live {
	b.Helper()
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	lives := make(chan *Live, 1)
	served := make(chan error, 1)
	go func() {
		served <- inNS(a, func() error {
			return Serve(ctx, r, st, Options{Iface: "vA", Socket: "xdp", Stderr: &log, Restack: restack, Live: func(l *Live) { lives <- l }})
		})
	}()
	select {
	case live := <-lives:
		return live
	case err := <-served:
		b.Fatalf("Serve stopped: %v\n%s", err, log.String())
	case <-time.After(5 * time.Minute):
		b.Fatalf("not serving within 5 minutes\n%s", log.String())
	}
	return nil
}

// BenchmarkReloadEndpoint is issue 39's goal on a 10,000-endpoint stack
// served on AF_XDP in namespaces: each operation adds one endpoint (then
// removes it again) with Live.Reload, and the time counted is from the
// reload's start until a datagram to it is answered (added) or refused
// with port unreachable (removed), polling every millisecond. It reports
// the p50 and p99 of that time, the p50 of the reload alone and of its
// planning, and the share of additions whose first datagram was the one
// answered. DRAGONC_RELOAD_ENDPOINTS changes the stack's size;
// DRAGONC_RELOAD_API=1 changes the endpoint with Live.Add and
// Live.Remove instead (no stack to check and diff);
// DRAGONC_RELOAD_FILE=1 writes the stack file before each operation and
// reloads it as dragonc reload does (Live.ReloadSource: the file read,
// parsed and checked as dragonc run's reload does, with an lpg.Loader),
// and reports that part's p50 and p99 as well.
func BenchmarkReloadEndpoint(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("DRAGONC_RELOAD_ENDPOINTS")); err == nil && v > 0 {
		n = v
	}
	a, peer := pair(b)
	r, st := embedTest(b, bigStack(n, false))
	stacks := []*lpg.Stack{loadStack(b, bigStack(n, true)), st}
	extra := stacks[0].Endpoints[n]
	api := os.Getenv("DRAGONC_RELOAD_API") == "1"
	file := os.Getenv("DRAGONC_RELOAD_FILE") == "1"
	srcs := [][]byte{[]byte(bigStack(n, true)), []byte(bigStack(n, false))} // written as they are: no garbage of the benchmark's own
	path := filepath.Join(b.TempDir(), "big.lpg")
	if err := os.WriteFile(path, srcs[1], 0o644); err != nil {
		b.Fatal(err)
	}
	var parsing []time.Duration
	read := restackFile(path)
	restack := func() (*lpg.Stack, error) {
		t := time.Now()
		st, err := read()
		parsing = append(parsing, time.Since(t))
		return st, err
	}
	live := serveBig(b, a, r, st, restack)
	var effect, reload, planning, coding, swapping []time.Duration
	first := 0
	b.ResetTimer()
	err := inNS(peer, func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: 40000})
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 64)
		for i := range b.N {
			add := i%2 == 0
			if file {
				if err := os.WriteFile(path, srcs[i%2], 0o644); err != nil {
					return err
				}
			}
			start := time.Now()
			var res *ReloadResult
			var err error
			switch {
			case file:
				res, err = live.ReloadSource()
			case !api:
				res, err = live.Reload(stacks[i%2])
			case add:
				res, err = live.Add(*extra)
			default:
				res, err = live.Remove("extra")
			}
			if err != nil || !res.Applied {
				return fmt.Errorf("reload %d: %+v, %v", i+1, res, err)
			}
			reload = append(reload, time.Since(start))
			planning = append(planning, time.Duration(res.PlanMS*float64(time.Millisecond)))
			coding = append(coding, time.Duration(res.CodeMS*float64(time.Millisecond)))
			swapping = append(swapping, time.Duration(res.SwapMS*float64(time.Millisecond)))
			// Probes name the operation and the try: an answer says which
			// probe was answered.
			for try := 0; ; try++ {
				if try > 5000 {
					return fmt.Errorf("operation %d (add %v) took no effect within 5 s", i+1, add)
				}
				probe := []byte(fmt.Sprintf("%d/%d", i, try))
				if _, err := c.Write(probe); errors.Is(err, syscall.ECONNREFUSED) {
					// A port unreachable for an earlier probe, which
					// the socket reports once instead of sending.
					c.Write(probe)
				}
				c.SetReadDeadline(time.Now().Add(time.Millisecond))
				k, err := c.Read(buf)
				got := string(buf[:max(k, 0)])
				if add && err == nil && strings.HasPrefix(got, fmt.Sprintf("%d/", i)) {
					if got == fmt.Sprintf("%d/0", i) {
						first++
					}
					break
				}
				if !add && errors.Is(err, syscall.ECONNREFUSED) {
					break
				}
			}
			effect = append(effect, time.Since(start))
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	pct := percentileMS
	b.ReportMetric(pct(effect, 0.5), "p50-ms")
	b.ReportMetric(pct(effect, 0.99), "p99-ms")
	b.ReportMetric(pct(reload, 0.5), "reload-p50-ms")
	b.ReportMetric(pct(planning, 0.5), "plan-p50-ms")
	b.ReportMetric(pct(coding, 0.5), "code-p50-ms")
	b.ReportMetric(pct(swapping, 0.5), "swap-p50-ms")
	b.ReportMetric(float64(first)/float64((b.N+1)/2), "first-answered")
	if file {
		b.ReportMetric(pct(parsing, 0.5), "parse-p50-ms")
		b.ReportMetric(pct(parsing, 0.99), "parse-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// percentileMS is the p-th percentile of ds (0 < p < 1), in milliseconds.
func percentileMS(ds []time.Duration, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
}

// The helper is sent differences: new endpoints numbered after its own,
// a table in full the first time, then only its changed entries.
func TestHelperUpdates(t *testing.T) {
	st := loadStack(t, reloadStack)
	h := newHelperState(st)
	e := func(k uint64, ep string) gofallback.TableEntry {
		return gofallback.TableEntry{K0: k, Kind: dataplane.Deliver, Endpoint: ep}
	}
	st2 := loadStack(t, withEndpoints("    endpoint e4 udp listen *:7004 { app \"echo\" }\n", "e1"))
	u, commit := h.update(st2, []gofallback.Table{{Name: "table0", Entries: []gofallback.TableEntry{e(7002, "e2"), e(7003, "e3"), e(7004, "e4")}}})
	want := &dataplane.Update{Endpoints: []dataplane.UpdateEndpoint{{Name: "e4", App: "echo"}},
		Tables: []dataplane.UpdateTable{{Name: "table0", Full: true, Set: []dataplane.TableEntry{
			{K0: 7002, Kind: dataplane.Deliver, Index: 1}, {K0: 7003, Kind: dataplane.Deliver, Index: 2}, {K0: 7004, Kind: dataplane.Deliver, Index: 3}}}}}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("first update: %+v, want %+v", u, want)
	}
	commit()
	// e3 becomes an echo, e4 goes, e1 comes back with its old number.
	st3 := loadStack(t, strings.Replace(withEndpoints("", "e4"), `*:7003 { app "discard" }`, `*:7003 { app "echo" }`, 1))
	u, commit = h.update(st3, []gofallback.Table{{Name: "table0", Entries: []gofallback.TableEntry{e(7001, "e1"), e(7002, "e2"), e(7003, "e3")}}})
	want = &dataplane.Update{Endpoints: []dataplane.UpdateEndpoint{{Name: "e3", App: "echo"}},
		Tables: []dataplane.UpdateTable{{Name: "table0", Set: []dataplane.TableEntry{{K0: 7001, Kind: dataplane.Deliver, Index: 0}}, Delete: []dataplane.TableKey{{K0: 7004}}}}}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("second update: %+v, want %+v", u, want)
	}
	commit()
	if u, _ := h.update(st3, []gofallback.Table{{Name: "table0", Entries: []gofallback.TableEntry{e(7001, "e1"), e(7002, "e2"), e(7003, "e3")}}}); len(u.Endpoints)+len(u.Tables) > 0 {
		t.Errorf("nothing changed, yet the update is %+v", u)
	}
}

// BenchmarkReloadChurn is issue 39's second goal: a client sends a
// steady 10,000 requests a second (10 every millisecond, none retried)
// to an endpoint no reload changes, on a 10,000-endpoint stack served on
// AF_XDP, while b.N operations add and remove other endpoints (Live.Add
// and Live.Remove, one after another). It reports the requests sent,
// answered and lost (not answered within a second of the last), the
// rate sent at, and the operations a second.
func BenchmarkReloadChurn(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("DRAGONC_RELOAD_ENDPOINTS")); err == nil && v > 0 {
		n = v
	}
	a, peer := pair(b)
	r, st := embedTest(b, bigStack(n, false))
	live := serveBig(b, a, r, st, nil)
	template := *st.Endpoints[0]
	stop := make(chan struct{})
	type tally struct {
		sent, answered int
		took           time.Duration
	}
	done := make(chan tally, 1)
	var client error
	started := make(chan struct{})
	go func() {
		var t tally
		client = inNS(peer, func() error {
			c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: 20000})
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetReadBuffer(8 << 20)
			got := make(chan int, 1)
			go func() {
				seen := map[uint64]bool{}
				buf := make([]byte, 64)
				for {
					c.SetReadDeadline(time.Now().Add(time.Second))
					k, err := c.Read(buf)
					if err != nil {
						var ne net.Error
						if errors.As(err, &ne) && ne.Timeout() {
							select {
							case <-stop:
								got <- len(seen)
								return
							default:
								continue
							}
						}
						continue
					}
					if seq, err := strconv.ParseUint(string(buf[:k]), 10, 64); err == nil {
						seen[seq] = true
					}
				}
			}()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			start := time.Now()
			close(started)
			for {
				select {
				case <-stop:
					t.took = time.Since(start)
					t.answered = <-got
					return nil
				case <-tick.C:
				}
				// As many as keep the rate at 10 a millisecond since the
				// start (a late tick sends what it missed).
				for want := int(time.Since(start) / (100 * time.Microsecond)); t.sent < want; t.sent++ {
					if _, err := c.Write([]byte(strconv.Itoa(t.sent))); err != nil {
						return err
					}
				}
			}
		})
		done <- t
	}()
	<-started
	time.Sleep(200 * time.Millisecond) // the client is sending
	b.ResetTimer()
	t0 := time.Now()
	for i := range b.N {
		name := fmt.Sprintf("churn%d", i/2)
		var res *ReloadResult
		var err error
		if i%2 == 0 {
			e := template
			e.Name, e.Ident, e.Port = name, name, uint16(40000+(i/2)%20000)
			res, err = live.Add(e)
		} else {
			res, err = live.Remove(name)
		}
		if err != nil || !res.Applied {
			close(stop)
			b.Fatalf("operation %d: %+v, %v", i+1, res, err)
		}
	}
	churn := time.Since(t0)
	b.StopTimer()
	time.Sleep(200 * time.Millisecond)
	close(stop)
	t := <-done
	if client != nil {
		b.Fatal(client)
	}
	b.ReportMetric(float64(t.sent), "sent")
	b.ReportMetric(float64(t.answered), "answered")
	b.ReportMetric(float64(t.sent-t.answered), "lost")
	b.ReportMetric(float64(t.sent)/t.took.Seconds(), "req/s")
	b.ReportMetric(float64(b.N)/churn.Seconds(), "ops/s")
	b.ReportMetric(0, "ns/op")
	if t.sent != t.answered {
		b.Errorf("the unchanged endpoint lost %d of %d requests across %d operations", t.sent-t.answered, t.sent, b.N)
	}
}
