package netns

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden"
)

// TestIn: f runs in the namespace (its network namespace is not this
// thread's), and a panic or a runtime.Goexit in f comes back as an error
// instead of ending the program or leaving the caller waiting.
func TestIn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (ip netns)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip")
	}
	name := fmt.Sprintf("dragonc-netns-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	host, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	if err := In(name, func() error {
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside == host || !strings.HasPrefix(inside, "net:") {
		t.Errorf("inside %q, host %q", inside, host)
	}
	if err := In(name, func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("a panic: %v", err)
	}
	if err := In(name, func() error { runtime.Goexit(); return nil }); err == nil {
		t.Error("runtime.Goexit: no error")
	}
	if err := In("no-such-namespace-"+name, func() error { return nil }); err == nil {
		t.Error("a namespace that does not exist: no error")
	}
}
