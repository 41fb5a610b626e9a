package sovialat

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSpinReads: a spinning connection reads what its peer writes, in
// order, whether the bytes are there at the first look, come within the
// spin or after it (a sleep in the poller); it ends with io.EOF when the
// peer closes, and a read deadline still ends a read.
func TestSpinReads(t *testing.T) {
	sc, peer := spinPair(t)
	if same, _ := SpinReads(sc.TCPConn, 0); same != sc.TCPConn {
		t.Errorf("SpinReads with no spin gave %T, not the connection", same)
	}

	// A read deadline ends a read that finds nothing.
	sc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := sc.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v", err)
	}
	sc.SetReadDeadline(time.Time{})

	var want bytes.Buffer
	go func() {
		for i, pause := range []time.Duration{0, 50 * time.Microsecond, 20 * time.Millisecond, 0} {
			msg := bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
			time.Sleep(pause)
			peer.Write(msg)
		}
		peer.CloseWrite()
	}()
	for i := range 4 {
		want.Write(bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1)))
	}
	got, err := io.ReadAll(struct{ io.Reader }{sc})
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("read %d bytes, want the %d the peer wrote", len(got), want.Len())
	}
	if n, err := sc.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("a read after the peer's close: %d, %v; want 0, io.EOF", n, err)
	}
}

// spinPair is a connected pair on the loopback: a spinning end and its
// peer.
func spinPair(t *testing.T) (*spinConn, *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sc, err := SpinReads(c.(*net.TCPConn), 100*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	spin, ok := sc.(*spinConn)
	if !ok {
		t.Fatalf("SpinReads gave a %T", sc)
	}
	return spin, peer.(*net.TCPConn)
}

// TestSpinReadsAsNet: a spinning connection's reads fail as net's do: a
// reset is an OpError "read" around the system call's error, a read of
// nothing reads nothing but still says that the connection is closed,
// and a read after Close says so too.
func TestSpinReadsAsNet(t *testing.T) {
	sc, peer := spinPair(t)
	if n, err := sc.Read(nil); n != 0 || err != nil {
		t.Errorf("a read of nothing: %d, %v", n, err)
	}
	peer.SetLinger(0) // its close resets the connection
	peer.Close()
	_, err := sc.Read(make([]byte, 8))
	var op *net.OpError
	var sys *os.SyscallError
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &op) || op.Op != "read" || !errors.As(err, &sys) {
		t.Errorf("a read of a reset connection: %#v; want net's OpError around a SyscallError of ECONNRESET", err)
	}
	sc.Close()
	if _, err := sc.Read(nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a read of nothing after Close: %v; want net.ErrClosed", err)
	}
	if _, err := sc.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a read after Close: %v; want net.ErrClosed", err)
	}
}

// TestSpinReadsWriteTo: io.Copy from a spinning connection (its WriteTo)
// copies all its peer wrote and ends without an error at the peer's
// close.
func TestSpinReadsWriteTo(t *testing.T) {
	sc, peer := spinPair(t)
	msg := bytes.Repeat([]byte("spin"), 50000)
	go func() {
		peer.Write(msg)
		peer.CloseWrite()
	}()
	var got bytes.Buffer
	n, err := io.Copy(&got, sc)
	if err != nil || n != int64(len(msg)) || !bytes.Equal(got.Bytes(), msg) {
		t.Errorf("io.Copy: %d bytes, %v; want the %d the peer wrote", n, err, len(msg))
	}
}

// TestReadable: the spin's look says readable when bytes wait, and not
// when none come within the spin.
func TestReadable(t *testing.T) {
	sc, peer := spinPair(t)
	look := func() (ok bool) {
		if err := sc.rc.Control(func(fd uintptr) { ok = readable(int(fd), time.Now(), time.Millisecond) }); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if look() {
		t.Error("readable with nothing sent")
	}
	peer.Write([]byte("x"))
	for deadline := time.Now().Add(5 * time.Second); !look(); {
		if time.Now().After(deadline) {
			t.Fatal("not readable with a byte sent")
		}
	}
}

// TestSpinReadsSpins: a read whose bytes come within the spin finds them
// spinning, without a sleep in the poller; one whose bytes come after it
// sleeps once, then reads them.
func TestSpinReadsSpins(t *testing.T) {
	sc, peer := spinPair(t)
	for _, c := range []struct {
		spin, pause time.Duration
		sleeps      int
	}{
		{spin: 10 * time.Second, pause: 5 * time.Millisecond, sleeps: 0},
		{spin: 100 * time.Microsecond, pause: 50 * time.Millisecond, sleeps: 1},
	} {
		sc.spin, sc.sleeps = c.spin, 0
		go func() {
			time.Sleep(c.pause)
			peer.Write([]byte("x"))
		}()
		b := make([]byte, 8)
		if n, err := sc.Read(b); n != 1 || err != nil {
			t.Fatalf("spin %v: read %d, %v", c.spin, n, err)
		}
		if sc.sleeps != c.sleeps {
			t.Errorf("spin %v, bytes after %v: %d sleeps, want %d", c.spin, c.pause, sc.sleeps, c.sleeps)
		}
	}
}
