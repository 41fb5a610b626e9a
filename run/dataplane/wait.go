package dataplane

import (
	"fmt"
	"math"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// How a receive loop waits for frames. A loop takes everything its
// rings hold and answers it with one send; with nothing there it waits
// in one of two ways.
//
//   - Adaptive (the default): it keeps looking at its rings for up to
//     DefaultSpin, and then sleeps in poll(2) on its sockets until the
//     kernel has frames. Spinning pays when the next frame comes within
//     the spin: on a quiet 2-core host it took the p50 at one request in
//     flight from 47-61 µs (the C recvmmsg server's 52-64: a sleeping
//     vCPU wakes slowly) to 11 µs (dragonc bench --live). A spin that
//     ends in sleep anyway is CPU thrown away, so after spinMisses of
//     them in a row the loop does not spin for spinBackoff: an idle or
//     lightly used stack sleeps at once. Where other threads want the
//     core, spinning takes it from them (on the same host under other
//     load it raised the p50 from 15 to 20-28 µs); --spin 0 is for that.
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
	// sleeps: about two round trips of a request at one in flight over a
	// veth.
	DefaultSpin = 50 * time.Microsecond
	// After spinMisses spins in a row that found nothing, a loop does not
	// spin for spinBackoff.
	spinMisses  = 8
	spinBackoff = 100 * time.Millisecond
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
	pollErr     = 0x8
)

// Mode describes how the loops wait, for the run's output.
func (c Config) Mode() string {
	switch {
	case c.BusyPoll:
		return fmt.Sprintf("busy polling (SO_PREFER_BUSY_POLL, %d µs, budget %d)", busyPollUsecs, busyPollBudget)
	case c.Spin < 0:
		return "sleeping in poll(2) on empty rings (no spinning)"
	case c.Spin > 0:
		return fmt.Sprintf("spinning %v on empty rings, then sleeping in poll(2)", c.Spin)
	}
	return fmt.Sprintf("adaptive: spinning up to %v on empty rings while spins find frames (none for %v after %d that found none), then sleeping in poll(2)", DefaultSpin, spinBackoff, spinMisses)
}

// VISpin is how long a goroutine waiting on a software VI looks at the
// VIs' socket before it sleeps, as the loops wait: DefaultSpin when they
// spin adaptively (a VI's goroutine spins only while it waits for a
// message, once a wait), Spin when they spin for Spin, not at all when
// they never spin, and without end when they busy-poll.
func (c Config) VISpin() time.Duration {
	switch {
	case c.BusyPoll:
		return math.MaxInt64
	case c.Spin < 0:
		return 0
	case c.Spin > 0:
		return c.Spin
	}
	return DefaultSpin
}

// VIMode describes how the goroutines waiting on the software VIs wait
// (VISpin), for the run's output.
func (c Config) VIMode() string {
	switch d := c.VISpin(); d {
	case math.MaxInt64:
		return "spinning, never sleeping"
	case 0:
		return "sleeping at once"
	default:
		return fmt.Sprintf("spinning up to %v, then sleeping", d)
	}
}

// spinner says how long a loop spins on an empty ring: Config.Spin, or,
// adaptive, DefaultSpin unless its spins have been finding nothing (see
// above).
type spinner struct {
	spin     time.Duration
	adaptive bool
	misses   int       // spins in a row that ended in sleep
	off      time.Time // no spinning before then
}

func (c Config) spinner() *spinner {
	switch {
	case c.Spin < 0:
		return &spinner{}
	case c.Spin > 0:
		return &spinner{spin: c.Spin}
	}
	return &spinner{spin: DefaultSpin, adaptive: true}
}

// budget is how long to spin from now, the rings being empty.
func (p *spinner) budget(now time.Time) time.Duration {
	if p.adaptive && now.Before(p.off) {
		return 0
	}
	return p.spin
}

// caught says a spin found frames.
func (p *spinner) caught() { p.misses = 0 }

// missed says a spin found nothing and the loop goes to sleep.
func (p *spinner) missed(now time.Time) {
	if p.misses++; p.adaptive && p.misses >= spinMisses {
		p.off, p.misses = now.Add(spinBackoff), 0
	}
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

// setBusyPoll makes a socket's system calls poll the device
// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET; Linux 5.11,
// Documentation/networking/napi.rst "Busy polling").
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

func newWaiter(p port, stopFD int) *waiter {
	return &waiter{fds: readSet(append(p.fds(), stopFD))}
}

// readSet is the poll(2) set that waits for any of fds to be readable.
func readSet(fds []int) []pollFd {
	ps := make([]pollFd, len(fds))
	for i, fd := range fds {
		ps[i] = pollFd{fd: int32(fd), events: pollIn}
	}
	return ps
}

// poll is poll(2) of fds for up to d (0: only look): how many are ready.
func poll(fds []pollFd, d time.Duration) (int, syscall.Errno) {
	if len(fds) == 0 {
		return 0, 0
	}
	n, _, e := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(d.Milliseconds()))
	return int(n), e
}

// readable says whether one of fds has something to read now.
func readable(fds []int) bool {
	n, e := poll(readSet(fds), 0)
	return e != 0 || n > 0 // an error: as if readable, the loop looks
}

// wait returns once a socket has frames or Stop was called, or after d.
// A socket that reports an error takes it back (sockError) and wait
// returns it: the loop counts it and goes on.
func (w *waiter) wait(d time.Duration) (syscall.Errno, error) {
	n, e := poll(w.fds, d)
	if e != 0 && e != syscall.EINTR {
		return 0, fmt.Errorf("poll: %w", e)
	}
	var first syscall.Errno
	for i := 0; n > 0 && i < len(w.fds); i++ {
		if w.fds[i].revents&pollErr == 0 {
			continue
		}
		if se := sockError(int(w.fds[i].fd)); se != 0 && first == 0 {
			first = se
		}
	}
	return first, nil
}

// sockError reads and clears a socket's pending error (SO_ERROR,
// socket(7)). A packet socket whose interface went down has ENETDOWN
// pending (packet_notifier, net/packet/af_packet.c) until something
// reads it: poll(2) reports POLLERR meanwhile, at once, every time, so
// a loop that did not take it back would spin on it for as long as the
// interface stayed down and after, and the socket's next send would
// fail with it (sock_alloc_send_pskb returns the pending error).
func sockError(fd int) syscall.Errno {
	v, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	if err != nil || v == 0 {
		return 0
	}
	return syscall.Errno(v)
}
