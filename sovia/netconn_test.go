//go:build linux

package sovia

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestParseAddr: both spellings of an address read back, String writes
// the bracketed one, and malformed ones are refused with the reason.
func TestParseAddr(t *testing.T) {
	want := Addr{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xb}, Port: 5000}
	for _, s := range []string{"[02:00:00:00:00:0b]:5000", "02:00:00:00:00:0b:5000", "02-00-00-00-00-0B:5000", "[0200.0000.000b]:5000"} {
		a, err := ParseAddr(s)
		if err != nil || a.String() != want.String() {
			t.Errorf("ParseAddr(%q) = %v, %v; want %v", s, a, err, want)
		}
	}
	if want.String() != "[02:00:00:00:00:0b]:5000" || want.Network() != "sovia" {
		t.Errorf("String %q, Network %q", want.String(), want.Network())
	}
	for _, s := range []string{"02:00:00:00:00:0b", "[02:00:00:00:00:0b]:70000", "[02:00:00:00:00:0b]:x", "[10.0.0.1]:5000",
		"[00:00:00:00:00:00:00:00]:1", "nohost", "[02:00:00:00:00:0b:5000"} {
		if a, err := ParseAddr(s); err == nil {
			t.Errorf("ParseAddr(%q) = %v, want an error", s, a)
		}
	}
}

// TestConnAddrs: a dialed connection and the accepted one name each
// other's ends, and the listener its own.
func TestConnAddrs(t *testing.T) {
	a, b := pipeHosts(t)
	p := PaperParams()
	l, err := b.Listen(80, p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := a.Dial(b.MAC(), 80, p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.AcceptConn()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, x := range []struct {
		what string
		got  net.Addr
		want string
	}{
		{"the listener's Addr", l.Addr(), "[02:00:00:00:00:0b]:80"},
		{"the dialer's LocalAddr", c.LocalAddr(), "[02:00:00:00:00:0a]:0"},
		{"the dialer's RemoteAddr", c.RemoteAddr(), "[02:00:00:00:00:0b]:80"},
		{"the accepted LocalAddr", s.LocalAddr(), "[02:00:00:00:00:0b]:80"},
		{"the accepted RemoteAddr", s.RemoteAddr(), "[02:00:00:00:00:0a]:0"},
	} {
		if x.got.Network() != "sovia" || x.got.String() != x.want {
			t.Errorf("%s: %s %s, want sovia %s", x.what, x.got.Network(), x.got, x.want)
		}
	}
}

// TestAcceptClosed: an AcceptConn waiting when the listener closes, and
// one after, return an error that is net.ErrClosed.
func TestAcceptClosed(t *testing.T) {
	h, err := NewHost(&recordLink{}, hostMAC)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.Listen(80, PaperParams())
	if err != nil {
		t.Fatal(err)
	}
	acceptEnds(t, l, func() { l.Close() })
	if _, err := l.AcceptConn(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if _, err := h.Listen(80, PaperParams()); err != nil {
		t.Errorf("the port is not free after Close: %v", err)
	}
}

// acceptEnds checks that an AcceptConn waiting on l returns ErrClosed, a
// net.ErrClosed, once shut runs.
func acceptEnds(t *testing.T, l *RawListener, shut func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := l.AcceptConn()
		done <- err
	}()
	shut()
	select {
	case err := <-done:
		if err != ErrClosed || !errors.Is(err, net.ErrClosed) {
			t.Errorf("a waiting Accept on closing: %v, want ErrClosed (net.ErrClosed)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits 10 s after the close")
	}
}

// notifyLink is a Link that tells when the host sends.
type notifyLink struct{ sent chan struct{} }

func (l *notifyLink) SendFrame([]byte) error {
	select {
	case l.sent <- struct{}{}:
	default:
	}
	return nil
}
func (l *notifyLink) MTU() int     { return 1500 }
func (l *notifyLink) Close() error { return nil }

// TestDialCancel: a dial nobody answers ends when its context is
// cancelled, with the context's error, and closes its VI.
func TestDialCancel(t *testing.T) {
	link := &notifyLink{sent: make(chan struct{}, 1)}
	h, err := NewHost(link, hostMAC)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-link.sent // the first CONNECT
		cancel()
	}()
	_, err = h.DialContext(ctx, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 80, PaperParams())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled dial: %v, want context.Canceled", err)
	}
	if n := h.openVIs(); n != 0 {
		t.Errorf("%d VIs open after the cancelled dial", n)
	}
	if _, err := h.DialContext(context.Background(), net.HardwareAddr{3, 0, 0, 0, 0, 2}, 80, PaperParams()); err == nil {
		t.Error("a dial to a group address went ahead")
	}
}

// TestDialSettingsRefused: a dial with other protocol settings is
// refused with the listener's, which a second dial adopts.
func TestDialSettingsRefused(t *testing.T) {
	a, b := pipeHosts(t)
	p := PaperParams()
	p.Window, p.AckThreshold, p.ChunkSize = 8, 4, 4096
	if _, err := b.Listen(80, p); err != nil {
		t.Fatal(err)
	}
	_, err := a.Dial(b.MAC(), 80, PaperParams())
	var se *SettingsError
	if !errors.As(err, &se) || se.Listener.Window != 8 || se.Listener.AckThreshold != 4 || se.Listener.ChunkSize != 4096 || se.Port != 80 {
		t.Fatalf("a dial with other settings: %v, want a SettingsError with the listener's", err)
	}
	mine := PaperParams()
	mine.Window, mine.AckThreshold, mine.ChunkSize = se.Listener.Window, se.Listener.AckThreshold, se.Listener.ChunkSize
	mine.CopyMax, mine.CombineMax = min(mine.CopyMax, mine.ChunkSize), min(mine.CombineMax, mine.ChunkSize)
	c, err := a.Dial(b.MAC(), 80, mine)
	if err != nil {
		t.Fatalf("a dial with the listener's settings: %v", err)
	}
	c.Close()
}

// TestDialOwnsHost: a host opened for one connection (package Dial's)
// closes when that connection's VI does, and not before.
func TestDialOwnsHost(t *testing.T) {
	a, b := pipeHosts(t)
	p := PaperParams()
	if _, err := b.Listen(80, p); err != nil {
		t.Fatal(err)
	}
	other, err := a.VI(0, b.MAC(), 9)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Dial(b.MAC(), 80, p)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.setup.owner = c.vi.(*RawVI).lvi
	a.mu.Unlock()
	closed := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.closed
	}
	other.Close()
	if closed() {
		t.Fatal("the host closed with another VI")
	}
	c.vi.(*RawVI).Close()
	for deadline := time.Now().Add(10 * time.Second); !closed() && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
	}
	if !closed() {
		t.Fatal("the host is open 10 s after its connection's VI closed")
	}
}
