package sovialat

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestSpinReads: a spinning connection reads what its peer writes, in
// order, whether the bytes are there at the first look, come within the
// spin or after it (a sleep in the poller); it ends with io.EOF when the
// peer closes, and a read deadline still ends a read.
func TestSpinReads(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := SpinReads(c.(*net.TCPConn), 200*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sc.(*spinConn); !ok {
		t.Fatalf("SpinReads gave a %T", sc)
	}
	if same, _ := SpinReads(c.(*net.TCPConn), 0); same != c {
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
		peer.(*net.TCPConn).CloseWrite()
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
