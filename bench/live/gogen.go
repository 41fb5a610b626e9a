package live

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/dragonc/dragonc/internal/netns"
)

// childEnv names the benchmark's child program when a process re-executes
// itself to run it (the Go load generator, where there is no C compiler;
// calibrate's echo server, childEcho).
const (
	childEnv       = "DRAGONC_LIVE_CHILD"
	childGenerator = "generator"
)

// genArgs is how many arguments the Go load generator takes.
const genArgs = 11

// lastArgs are a child's arguments: the last n of args, after whatever
// starts this program (a test binary's flags), or all of them when there
// are fewer, which the child then refuses with a diagnostic.
func lastArgs(args []string, n int) []string {
	return args[max(len(args)-n, 0):]
}

// Child runs the benchmark's child program and exits, if this process was
// started as one; otherwise it returns at once. Programs that run the
// benchmark call it first thing in main (and tests in TestMain), so that
// the Go load generator can be this same program in a process of its own,
// whose CPU time is then its own.
func Child() {
	switch os.Getenv(childEnv) {
	case childEcho:
		if err := echoChild(lastArgs(os.Args[1:], echoArgs)); err != nil {
			fmt.Fprintf(os.Stderr, "calibrate's echo server: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	case childGenerator:
	default:
		return
	}
	r, err := goGenerator(lastArgs(os.Args[1:], genArgs))
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

// goGenerator is gen.c in Go, for hosts without a C compiler: the same
// arguments, slots, sockets, timeouts, histogram and report, but in one
// locked thread whatever the THREADS argument says, with epoll and a
// system call per datagram (the syscall package has no recvmmsg or
// sendmmsg), so it spends more CPU per request than the C one and puts
// the softirq work a veth runs in the sender's calls on one core.
func goGenerator(args []string) (*genResult, error) {
	runtime.LockOSThread()
	if len(args) != genArgs {
		return nil, fmt.Errorf("want %d arguments, got %d", genArgs, len(args))
	}
	if args[10] != "udp" {
		return nil, fmt.Errorf("the Go load generator echoes UDP only, not %s", args[10])
	}
	args = args[:10]
	nums := make([]int, 0, 8)
	for _, a := range args[2:] {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad argument %q", a)
		}
		nums = append(nums, n)
	}
	port, inflight, nsock := nums[0], nums[1], nums[2]
	duration, count := time.Duration(nums[3])*time.Millisecond, uint64(nums[4])
	timeout, warmup := time.Duration(nums[5])*time.Millisecond, time.Duration(nums[6])*time.Millisecond
	dst, err := netip.ParseAddr(args[1])
	if err != nil || !dst.Is4() || inflight < 1 || nsock < 1 || nsock > inflight || duration == 0 || timeout == 0 {
		return nil, fmt.Errorf("bad arguments %v", args)
	}
	if args[0] != "-" {
		if err := netns.Join(args[0]); err != nil {
			return nil, err
		}
	}
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	fds := make([]int, nsock)
	for s := range fds {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: dst.As4()}); err != nil {
			return nil, err
		}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(s)}); err != nil {
			return nil, err
		}
		fds[s] = fd
	}
	type slot struct {
		sock         int
		out, pending bool
		seq          uint64
		sent         time.Duration
	}
	slots := make([]slot, inflight)
	for i := range slots {
		slots[i] = slot{sock: i % nsock, pending: true}
	}
	t0 := time.Now()
	mono := func() time.Duration { return time.Since(t0) }
	var h histogram
	var r genResult
	var seq uint64
	mstart, mend := warmup, time.Duration(0)
	var busy0, self0 uint64
	nextScan := time.Duration(0)
	phase := 0
	var msg, buf [64]byte
	evs := make([]syscall.EpollEvent, 64)
	for {
		now := mono()
		if phase == 0 && now >= mstart {
			phase, r, h, mstart = 1, genResult{}, histogram{}, now
			busy0, self0 = busyNs(), selfNs()
		}
		if phase == 1 && (now-mstart >= duration || count > 0 && r.Answered >= count) {
			phase, mend = 2, now
			r.BusyNs, r.SelfNs = busyNs()-busy0, selfNs()-self0
			r.WindowNs = uint64(mend - mstart)
		}
		if now >= nextScan {
			nextScan = now + time.Millisecond
			outstanding := 0
			for i := range slots {
				sl := &slots[i]
				if sl.out && now-sl.sent > timeout {
					if phase != 0 {
						r.Lost++
					}
					sl.out, sl.pending = false, phase != 2
				}
				if sl.out {
					outstanding++
				}
			}
			if phase == 2 && (outstanding == 0 || now-mend > timeout) {
				break
			}
		}
		for i := range slots {
			sl := &slots[i]
			if !sl.pending || phase == 2 {
				continue
			}
			seq++
			binary.NativeEndian.PutUint32(msg[0:], genMagic)
			binary.NativeEndian.PutUint32(msg[4:], uint32(i))
			binary.NativeEndian.PutUint64(msg[8:], seq)
			sent := mono() // before the call, as gen.c reads it
			if err := syscall.Sendto(fds[sl.sock], msg[:genPayload], 0, nil); err != nil {
				continue // the slot tries again
			}
			sl.seq, sl.pending, sl.out, sl.sent = seq, false, true, sent
		}
		n, err := syscall.EpollWait(ep, evs, 1)
		if err != nil && err != syscall.EINTR {
			return nil, err
		}
		for _, ev := range evs[:max(n, 0)] {
			s := int(ev.Fd)
			for {
				k, _, err := syscall.Recvfrom(fds[s], buf[:], syscall.MSG_DONTWAIT)
				if err == syscall.ECONNREFUSED {
					r.Refused++
					continue
				}
				if err != nil {
					break
				}
				now := mono()
				id := binary.NativeEndian.Uint32(buf[4:])
				if k != genPayload || binary.NativeEndian.Uint32(buf[0:]) != genMagic || id >= uint32(inflight) || slots[id].sock != s {
					r.Stray++
					continue
				}
				sl := &slots[id]
				if !sl.out || binary.NativeEndian.Uint64(buf[8:]) != sl.seq {
					r.Late++
					continue
				}
				sl.out = false
				if phase == 2 {
					r.Drained++
					continue
				}
				sl.pending = true
				if phase == 1 {
					r.Answered++
					h.add(uint64(now - sl.sent))
				}
			}
		}
	}
	r.P50Ns, r.P99Ns = h.percentile(0.50), h.percentile(0.99)
	return &r, nil
}

// The request gen.c sends: a magic word, the slot, the sequence number,
// padding to 32 bytes.
const (
	genMagic   = 0x64726763
	genPayload = 32
)

// histogram is gen.c's: 64 sub-buckets per power of two.
type histogram struct {
	b [64 * 64]uint64
	n uint64
}

func (h *histogram) add(v uint64) {
	i := int(v)
	if v >= 64 {
		e := 63 - bits.LeadingZeros64(v)
		i = (e-5)*64 + int(v>>(e-6)&63)
	}
	h.b[i]++
	h.n++
}

func (h *histogram) percentile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := max(uint64(q*float64(h.n)), 1)
	var c uint64
	for i, k := range h.b {
		if c += k; c >= rank {
			if i < 64 {
				return uint64(i)
			}
			e, sub := i/64+5, i%64
			return uint64(64+sub)<<(e-6) + 1<<(e-6)>>1
		}
	}
	return 0
}
