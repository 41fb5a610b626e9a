package dataplane

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// How a receive loop waits for frames. The loop never blocks in a system
// call on its locked thread: that makes Go's sysmon thread retake the
// loop's P and wake every 20 µs while the call lasts (runtime/proc.go,
// sysmon and retake), which cost a fifth of the helper's CPU when every
// idle moment was a blocking poll(2).
//
//   - Adaptive (the default): after a batch the loop keeps checking its
//     rings for Spin; then it parks in Go's netpoller on an epoll
//     instance that holds its sockets, and the thread sleeps until the
//     kernel says a ring has frames.
//   - Busy polling: the sockets ask the kernel to poll the device in
//     their system calls (SO_PREFER_BUSY_POLL, SO_BUSY_POLL,
//     SO_BUSY_POLL_BUDGET) and the loop never sleeps: with nothing on
//     its rings it makes a non-blocking receive call, which runs the
//     device's NAPI poll on the loop's core (napi_busy_loop).
const (
	// DefaultSpin is how long a loop looks for more frames before it
	// sleeps: about two round trips of a request at one in flight over
	// a veth pair (bench --live), so that a conversation does not sleep
	// between its requests.
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
	// waitSlice bounds one sleep (Stop also wakes the loops).
	waitSlice = time.Second
)

// Mode describes how the loops wait, for the run's output.
func (c Config) Mode() string {
	if c.BusyPoll {
		return fmt.Sprintf("busy polling (SO_PREFER_BUSY_POLL, %d µs, budget %d)", busyPollUsecs, busyPollBudget)
	}
	spin := c.spin()
	if spin == 0 {
		return "sleeping when the rings are empty (no spinning)"
	}
	return fmt.Sprintf("adaptive: spinning %v on empty rings, then sleeping", spin)
}

func (c Config) spin() time.Duration {
	if c.Spin < 0 {
		return 0
	}
	if c.Spin == 0 {
		return DefaultSpin
	}
	return c.Spin
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

// A waiter parks a loop's goroutine in Go's netpoller until one of the
// loop's sockets is readable: an epoll instance holds the sockets and is
// itself registered with the runtime's epoll (as an *os.File in
// non-blocking mode), so the thread sleeps without a system call of its
// own and the runtime wakes it.
type waiter struct {
	f     *os.File
	rc    syscall.RawConn
	ready func(uintptr) bool // the port's ready, as RawConn.Read takes it
}

func newWaiter(p port) (*waiter, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	for _, fd := range p.fds() {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			syscall.Close(ep)
			return nil, fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	if err := syscall.SetNonblock(ep, true); err != nil {
		syscall.Close(ep)
		return nil, err
	}
	w := &waiter{f: os.NewFile(uintptr(ep), "dataplane-epoll")}
	if w.rc, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return nil, err
	}
	w.ready = func(uintptr) bool { return p.ready() }
	return w, nil
}

// wait returns once the port has frames, or after d.
func (w *waiter) wait(d time.Duration) error {
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if err := w.rc.Read(w.ready); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return nil
}

// wake ends a wait now (Stop).
func (w *waiter) wake() { w.f.SetReadDeadline(time.Now()) }

func (w *waiter) close() { w.f.Close() }
