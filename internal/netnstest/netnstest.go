// Package netnstest makes network namespaces for the tests that send real
// frames (package run's namespace suite, package sovia's VI over a veth):
// each test gets namespaces of its own, removed when it ends, and runs
// code inside one on a thread that joined it.
package netnstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dragonc/dragonc/internal/netns"
)

// IP runs the ip command, stopping the test when it fails.
func IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Ethtool is what ethtool shows of interface ifc in namespace ns: its
// channels, features, indirection table and ntuple rules (-l, -k, -x,
// -n), for a test that checks a run leaves them as it found them.
func Ethtool(ns, ifc string) string {
	var out []string
	for _, opt := range []string{"-l", "-k", "-x", "-n"} {
		o, _ := exec.Command("ip", "netns", "exec", ns, "ethtool", opt, ifc).CombinedOutput()
		out = append(out, string(o))
	}
	return strings.Join(out, "\n")
}

// Two makes two namespaces, removed when the test ends, or skips the
// test where the kernel or the tools refuse (not root, no ip).
func Two(t testing.TB, tools ...string) (a, b string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("this test needs root (ip netns, veth)")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("this test needs %s", tool)
		}
	}
	// A test binary that was killed left its namespaces: remove those of
	// processes that are gone.
	netns.RemoveStale("dragonc-")
	id := fmt.Sprintf("dragonc-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	a, b = id+"-a", id+"-b"
	IP(t, "netns", "add", a)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", a).Run() })
	IP(t, "netns", "add", b)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", b).Run() })
	return a, b
}

// Running waits, up to 5 s, until interface ifc in namespace ns is
// running (IFF_RUNNING: up with its carrier), or stops the test. A veth
// set up is not yet ready to send: the kernel attaches its queueing
// discipline in linkwatch work that runs later (net/core/link_watch.c,
// linkwatch_do_dev calls dev_activate), and until then the device's
// noop_qdisc drops every frame while a packet socket's send reports
// success. A test whose first frames are not repeated waits for this.
func Running(t testing.TB, ns string, ifcs ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, name := range ifcs {
		for {
			var up bool
			err := In(ns, func() error {
				ifc, err := net.InterfaceByName(name)
				if err == nil {
					up = ifc.Flags&net.FlagRunning != 0
				}
				return err
			})
			if err != nil {
				t.Fatalf("interface %s in %s: %v", name, ns, err)
			}
			if up {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("interface %s in %s is not running after 5 s", name, ns)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// In runs f on a thread that has joined namespace name (netns.In).
func In(name string, f func() error) error { return netns.In(name, f) }

// SyncBuffer collects what a server in another goroutine writes (its
// notes, its counters) for the test to read while it runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Main runs a test binary's tests with dragonc run's state directory
// (DRAGONC_RUN_DIR) a temporary one of their own, so that the runs the
// tests start are kept apart from the host's (/run/dragonc), and exits.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "dragonc-run-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("DRAGONC_RUN_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
