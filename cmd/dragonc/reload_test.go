package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netnstest"
	drun "github.com/dragonc/dragonc/run"
)

// reloadStack is served by TestReloadCommand, then changed.
const reloadStack = `stack reloaded {
    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }
    cores 0..1
    endpoint echo udp listen *:7 { app "echo" }
    endpoint other udp listen *:9 { app "discard" }
    service arp
    service icmp-echo
}
`

// udpAnswer sends msg to the stack's port and returns the answer, or the
// error that came instead (ECONNREFUSED: port unreachable).
func udpAnswer(port int, msg string) (string, error) {
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IP{10, 9, 0, 1}, Port: port})
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 64)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		c.Write([]byte(msg))
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		return string(buf[:n]), err
	}
	return "", os.ErrDeadlineExceeded
}

// TestReloadCommand: dragonc reload makes a detached run read its stack
// file again: an added endpoint answers, a file with a syntax error is
// refused (exit 1, its position) and the old plan serves on, SIGHUP
// reloads too (said in the run's log), a new protocol is handed over to
// a new helper whose programs the detached run pins instead, and reload
// of an interface nothing serves is a usage error.
func TestReloadCommand(t *testing.T) {
	a, b := vethPair(t)
	stack := detachEnv(t, a, "reload.lpg", reloadStack)
	in := func(ns string, args ...string) (int, string, string) {
		var code int
		var out, errs string
		netnstest.In(ns, func() error { code, out, errs = dragoncIn(t, args...); return nil })
		return code, out, errs
	}
	if code, _, errs := in(a, "run", "--detach", "--socket", "xdp", "linux-xdp", stack, "vA"); code != 0 {
		t.Fatalf("run --detach: exit %d:\n%s", code, errs)
	}
	es := statusOf(t, a)
	if len(es) != 1 || es[0].Source == nil || es[0].Source.Stack != stack || es[0].Source.NIC != "linux-xdp" || es[0].Control == "" {
		t.Fatalf("the state does not record the stack to reload: %+v", es)
	}
	peer := func(f func() error) {
		t.Helper()
		if err := netnstest.In(b, f); err != nil {
			t.Fatal(err)
		}
	}
	peer(func() error {
		if _, err := udpAnswer(8, "early"); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("port 8 before the reload: %v, want port unreachable", err)
		}
		return nil
	})

	os.WriteFile(stack, []byte(strings.Replace(reloadStack, "    service arp", "    endpoint late udp listen *:8 { app \"echo\" }\n    service arp", 1)), 0o644)
	code, out, errs := in(a, "reload", "--json", "vA")
	var res drun.ReloadResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || !res.Applied || len(res.Added) != 1 || res.Added[0] != "late" {
		t.Fatalf("reload --json: exit %d, %+v (%v):\n%s%s", code, res, err, out, errs)
	}
	peer(func() error {
		if got, err := udpAnswer(8, "late"); err != nil || got != "late" {
			return fmt.Errorf("the added endpoint: %q, %v", got, err)
		}
		return nil
	})

	os.WriteFile(stack, []byte(strings.Replace(reloadStack, "cores 0..1", "cores 0..1 {", 1)), 0o644)
	code, _, errs = in(a, "reload", "vA")
	if code != 1 || !strings.Contains(errs, "refused") || !strings.Contains(errs, stack+":3:") {
		t.Fatalf("reload of a broken file: exit %d, want 1 with %s:3:COL:\n%s", code, stack, errs)
	}
	peer(func() error {
		if got, err := udpAnswer(8, "kept"); err != nil || got != "kept" {
			return fmt.Errorf("the running plan after a refused reload: %q, %v", got, err)
		}
		return nil
	})

	// SIGHUP: the file without the added endpoint.
	os.WriteFile(stack, []byte(reloadStack), 0o644)
	es = statusOf(t, a)
	syscall.Kill(es[0].PID, syscall.SIGHUP)
	logPath := filepath.Join(os.Getenv("DRAGONC_RUN_DIR"), es[0].Name+".log")
	var log []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if log, _ = os.ReadFile(logPath); strings.Contains(string(log), "reload 3 applied") {
			break
		}
	}
	if !strings.Contains(string(log), "reload 3 applied") || !strings.Contains(string(log), "removed late") {
		t.Fatalf("after SIGHUP the log does not say the reload was applied:\n%s", log)
	}
	peer(func() error {
		if _, err := udpAnswer(8, "gone"); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("port 8 after SIGHUP removed it: %v, want port unreachable", err)
		}
		if got, err := udpAnswer(7, "still"); err != nil || got != "still" {
			return fmt.Errorf("echo after the reloads: %q, %v", got, err)
		}
		return nil
	})
	if es := statusOf(t, a); len(es) != 1 || es[0].Reloads != 3 {
		t.Errorf("status after 3 reloads: %+v", es)
	}
	// A new protocol needs new code: the detached run hands its sockets
	// to the new helper and pins its programs in place of the old ones.
	before := statusOf(t, a)[0].Programs
	os.WriteFile(stack, []byte(strings.Replace(reloadStack, "    service arp", "    endpoint mx openmx 3 { app \"echo\" }\n    service arp", 1)), 0o644)
	code, out, errs = in(a, "reload", "--json", "vA")
	res = drun.ReloadResult{}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || !res.Applied || !res.HandedOver || res.Lost != 0 {
		t.Fatalf("reload --json of a new protocol: exit %d, %+v (%v), want handed over:\n%s%s", code, res, err, out, errs)
	}
	t.Logf("a new protocol: %v", &res)
	es = statusOf(t, a)
	if after := es[0].Programs; len(after) != 1 || len(before) != 1 || after[0].ID == before[0].ID || es[0].Pinned == "" {
		t.Errorf("the detached run's programs before the handover %+v, after %+v (pinned in %q): want the new one", before, after, es[0].Pinned)
	}
	peer(func() error {
		if got, err := udpAnswer(7, "handed over"); err != nil || got != "handed over" {
			return fmt.Errorf("echo after the handover: %q, %v", got, err)
		}
		return nil
	})
	if code, _, errs := in(a, "reload", "vNone"); code != 2 || !strings.Contains(errs, "nothing runs on vNone") {
		t.Errorf("reload of an interface nothing serves: exit %d:\n%s", code, errs)
	}
}
