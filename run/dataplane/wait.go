package dataplane

import (
	"fmt"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// How a receive loop waits for frames. A loop takes everything its
// rings hold and answers it with one send; with nothing there it waits
// in one of two ways.
//
//   - Adaptive (the default): it keeps looking at its rings for Spin, and
//     then sleeps in poll(2) on its sockets until the kernel has frames.
//     It spins only where the host has a core more than the loops: with
//     as many loops as cores, a spinning loop takes its core from the
//     kernel's softirq work and the programs it serves, which on the
//     2-core development host raised the 1-in-flight p50 from 15 to 20-28
//     µs against a C recvmmsg server's 15.6 (dragonc bench --live).
//   - Busy polling: the sockets ask the kernel to poll the device in
//     their system calls (SO_PREFER_BUSY_POLL, SO_BUSY_POLL,
//     SO_BUSY_POLL_BUDGET) and the loop never sleeps: with nothing on
//     its rings it makes a non-blocking receive call, which runs the
//     device's NAPI poll on the loop's core (napi_busy_loop).
//
// A sleeping loop blocks in poll(2) on its locked thread. Go's sysmon
// takes the P of a thread blocked in a system call away when no other P
// is idle, and then wakes every 20 µs while it does (runtime/proc.go,
// retake), which cost a fifth of the helper's CPU; so the server keeps
// one P more than it has loops (GOMAXPROCS), and sysmon finds an idle P
// and backs off to its 10 ms sleep. The alternatives measured worse
// (bench --live, same run, 2 cores): parking the locked goroutine in
// Go's netpoller costs a thread hand-off per wake-up (p50 at 1 in flight
// 30-65 µs); letting go of the thread while parked and pinning again on
// waking costs a migration (p50 18.6-26 µs, 150-194k transactions/s at
// 64 in flight against poll's 14.9-15.0 µs and 200-233k).
const (
	// DefaultSpin is how long a loop looks for more frames before it
	// sleeps, where a core is free for it: about two round trips of a
	// request at one in flight over a veth.
	DefaultSpin = 50 * time.Microsecond
	// busyPollUsecs and busyPollBudget are what the sockets ask of the
	// kernel when busy polling: poll for up to 20 µs a call, up to a
	// batch (64 frames, the budget xdpsock uses) a poll.
	busyPollUsecs  = 20
	busyPollBudget = batchMax
	// Socket options of include/uapi/asm-generic/socket.h.
	soBusyPoll       = 46
	soPreferBusyPoll = 69
	soBusyPollBudget = 70
	// waitSlice bounds one sleep (Stop wakes the loops at once).
	waitSlice = time.Second
	// eventfd2 flags (include/uapi/linux/eventfd.h).
	efdCloexec  = 0o2000000
	efdNonblock = 0o4000
	pollIn      = 0x1
)

// Mode describes how the loops wait, for the run's output.
func (c Config) Mode() string {
	if c.BusyPoll {
		return fmt.Sprintf("busy polling (SO_PREFER_BUSY_POLL, %d µs, budget %d)", busyPollUsecs, busyPollBudget)
	}
	switch spin := c.spin(); {
	case spin > 0:
		return fmt.Sprintf("adaptive: spinning %v on empty rings, then sleeping in poll(2)", spin)
	case c.Spin == 0:
		return fmt.Sprintf("adaptive: sleeping in poll(2) on empty rings (%d loops on %d cores: no core to spin on)", len(c.Queues), runtime.NumCPU())
	}
	return "sleeping in poll(2) on empty rings (no spinning)"
}

// spin is how long the loops spin on empty rings: Spin if set (negative:
// not at all), else DefaultSpin where the host has a core more than the
// loops.
func (c Config) spin() time.Duration {
	switch {
	case c.Spin < 0:
		return 0
	case c.Spin > 0:
		return c.Spin
	case runtime.NumCPU() > len(c.Queues):
		return DefaultSpin
	}
	return 0
}

// reserveP gives the process one P more than it has loops (see above),
// unless the loops busy-poll (they never block). It says what it did.
func reserveP(cfg Config) string {
	want := len(cfg.Queues) + 1
	if cfg.BusyPoll || runtime.GOMAXPROCS(0) >= want {
		return ""
	}
	runtime.GOMAXPROCS(want)
	return fmt.Sprintf("GOMAXPROCS %d: a P for each loop and one more, so that a loop asleep in poll(2) keeps its own", want)
}

func setBusyPoll(fd, budget int) error {
	for _, o := range []struct {
		name string
		opt  int
		v    int
	}{{"SO_PREFER_BUSY_POLL", soPreferBusyPoll, 1}, {"SO_BUSY_POLL", soBusyPoll, busyPollUsecs}, {"SO_BUSY_POLL_BUDGET", soBusyPollBudget, budget}} {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, o.opt, o.v); err != nil {
			return fmt.Errorf("%s: %w (busy polling needs Linux 5.11)", o.name, err)
		}
	}
	return nil
}

// newStopFD is the eventfd Stop writes to: it is in every loop's poll
// set, so that a sleeping loop wakes at once.
func newStopFD() (int, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, efdCloexec|efdNonblock, 0)
	if e != 0 {
		return -1, fmt.Errorf("eventfd2: %w", e)
	}
	return int(fd), nil
}

// pollFd is struct pollfd.
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// A waiter sleeps until one of a loop's sockets is readable or the
// server stops.
type waiter struct {
	fds []pollFd
}

func newWaiter(p port, stopFD int) (*waiter, error) {
	w := &waiter{}
	for _, fd := range append(p.fds(), stopFD) {
		w.fds = append(w.fds, pollFd{fd: int32(fd), events: pollIn})
	}
	return w, nil
}

// wait returns once a socket has frames or Stop was called, or after d.
func (w *waiter) wait(d time.Duration) error {
	_, _, e := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&w.fds[0])), uintptr(len(w.fds)), uintptr(d.Milliseconds()))
	if e != 0 && e != syscall.EINTR {
		return fmt.Errorf("poll: %w", e)
	}
	return nil
}

func (w *waiter) close() {}
