// Package netns runs code inside a named network namespace (one that
// `ip netns add` made, under /run/netns): on a thread that joined it, so
// that the sockets the code opens, the interfaces it names and the eBPF
// links it attaches are that namespace's. The live benchmark (bench/live)
// and the tests that send real frames (internal/netnstest) share it.
package netns

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Dir is where iproute2 keeps the names of network namespaces.
const Dir = "/run/netns"

// In runs f on a thread that has joined namespace name. The thread is
// never unlocked: it ends with its goroutine, so no other goroutine ever
// runs in the namespace by accident. A panic in f is returned as an
// error rather than ending the program, so that callers still remove
// what they made.
func In(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		sent := false
		defer func() {
			// A panic, or runtime.Goexit (a test's t.Fatal), still
			// answers the caller.
			if p := recover(); p != nil {
				errc <- fmt.Errorf("in namespace %s: panic: %v", name, p)
			} else if !sent {
				errc <- fmt.Errorf("in namespace %s: the function exited without returning", name)
			}
		}()
		runtime.LockOSThread()
		if err := Join(Dir + "/" + name); err != nil {
			sent = true
			errc <- err
			return
		}
		err := f()
		sent = true
		errc <- err
	}()
	return <-errc
}

// Join moves the calling thread into the network namespace of the file
// at path (setns(2)); the caller must have locked its goroutine to the
// thread, which then stays in that namespace.
func Join(path string) error {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if _, _, e := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0); e != 0 {
		return fmt.Errorf("setns %s: %w", path, e)
	}
	return nil
}

// sysSetns is setns(2) on amd64 and arm64 (the syscall package lacks it).
var sysSetns = map[string]uintptr{"amd64": 308, "arm64": 268}[runtime.GOARCH]

// RemoveStale removes the namespaces named PREFIX + PID + "-…" whose
// process PID is gone: those a test or benchmark made and could not
// remove because it was killed. It returns the names it removed, with
// their PIDs. A namespace is removed as `ip netns del` does (lib/namespace.c
// in iproute2): its bind mount detached, then its name unlinked.
func RemoveStale(prefix string) (removed []string, pids []int) {
	ents, _ := os.ReadDir(Dir)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
			continue // alive
		}
		path := Dir + "/" + e.Name()
		if err := syscall.Unmount(path, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL {
			continue
		}
		if os.Remove(path) == nil {
			removed, pids = append(removed, e.Name()), append(pids, pid)
		}
	}
	return removed, pids
}
