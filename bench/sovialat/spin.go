package sovialat

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SpinReads returns c with reads that look at the socket for up to spin
// before they sleep: a read that finds nothing asks poll(2), without
// waiting, whether bytes have come until they have (then it reads them)
// or spin has passed since that first empty look, and only then waits
// in Go's network poller. That is how a software VI's
// receiver under dragonc run waits on its ring (a spin a wait, then a
// sleep), so an echo of kernel TCP that reads this way is like with like
// for a VI echo that spins: neither pays a sleeping thread's wake-up
// where the other does not. The kernel's own busy polling (SO_BUSY_POLL)
// is no match for it on a veth, which has a NAPI context to poll only
// with an XDP program or GRO (veth_napi_add, veth_gro_requested in
// drivers/net/veth.c; GRO is off by default); it made a TCP echo slower
// here. With spin 0 c is returned as it is.
func SpinReads(c *net.TCPConn, spin time.Duration) (net.Conn, error) {
	if spin <= 0 {
		return c, nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &spinConn{TCPConn: c, rc: rc, spin: spin}, nil
}

// spinConn is a TCP connection whose reads spin (SpinReads).
type spinConn struct {
	*net.TCPConn
	rc   syscall.RawConn
	spin time.Duration
	// sleeps counts the reads' spins that ended in a sleep in Go's
	// poller (for tests: a spin that finds the bytes counts none).
	sleeps int
}

func (s *spinConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		// As net's: no read, but a closed connection's error.
		return s.TCPConn.Read(b)
	}
	var (
		n     int
		err   error
		first time.Time // the first empty look
	)
	// RawConn.Read calls look until it returns true, sleeping in the
	// poller until the socket is readable after each false (and
	// returning the read deadline's error if it passes meanwhile). The
	// spin asks poll(2) whether bytes are there rather than calling
	// read(2) again: TCP's receive holds the socket's lock for the call
	// (lock_sock in tcp_recvmsg), and a segment that comes meanwhile
	// waits in the socket's backlog for the reader to process it, where
	// tcp_poll looks without the lock (tcp_recvmsg in net/ipv4/tcp.c;
	// tcp_v4_rcv queues to the backlog while sock_owned_by_user,
	// net/ipv4/tcp_ipv4.c). A spin of reads measured a p50 1-2 µs
	// longer than no spin at all here.
	look := func(fd uintptr) bool {
		for {
			n, err = syscall.Read(int(fd), b)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if !errors.Is(err, syscall.EAGAIN) {
				return true
			}
			if first.IsZero() {
				first = time.Now()
			}
			if !readable(int(fd), first, s.spin) {
				s.sleeps++
				return false
			}
		}
	}
	if rerr := s.rc.Read(look); rerr != nil {
		return 0, rerr
	}
	switch {
	case err != nil:
		// As net's: the system call's error in an OpError.
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: os.NewSyscallError("read", err)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo copies through Read: the promoted TCPConn.WriteTo would read
// the socket without spinning (io.Copy takes it when it finds it).
func (s *spinConn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{s})
}

// readable polls fd without waiting until it is readable (true) or spin
// has passed since first (false).
func readable(fd int, first time.Time, spin time.Duration) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for time.Since(first) < spin {
		if n, err := unix.Poll(pfd, 0); err != nil && !errors.Is(err, unix.EINTR) {
			return true // the read says what is wrong
		} else if n > 0 {
			return true
		}
	}
	return false
}
