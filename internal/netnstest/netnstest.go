// Package netnstest makes network namespaces for the tests that send real
// frames (package run's namespace suite, package sovia's VI over a veth):
// each test gets namespaces of its own, removed when it ends, and runs
// code inside one on a thread that joined it.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
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
	id := fmt.Sprintf("dragonc-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	a, b = id+"-a", id+"-b"
	IP(t, "netns", "add", a)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", a).Run() })
	IP(t, "netns", "add", b)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", b).Run() })
	return a, b
}

// In runs f on a thread that has joined namespace name, so that sockets
// f opens and interfaces it names are that namespace's. The thread is
// never unlocked: it ends with its goroutine, so no other goroutine ever
// runs in the namespace by accident.
func In(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := syscall.Open("/run/netns/"+name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer syscall.Close(fd)
		if _, _, e := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0); e != 0 {
			errc <- fmt.Errorf("setns %s: %w", name, e)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// sysSetns is setns(2) on amd64 and arm64 (the syscall package lacks it).
var sysSetns = map[string]uintptr{"amd64": 308, "arm64": 268}[runtime.GOARCH]
