//go:build linux

package sovia

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordLink is a Link that keeps what the host sends.
type recordLink struct{ sent [][]byte }

func (l *recordLink) SendFrame(f []byte) error {
	if len(l.sent) < 64 {
		l.sent = append(l.sent, append([]byte(nil), f...))
	}
	return nil
}
func (l *recordLink) MTU() int     { return 1500 }
func (l *recordLink) Close() error { return nil }

// viFrame is a software VI frame to VI dvi from VI svi.
func viFrame(dvi, svi uint16, seq uint32, total, at int, imm uint32, data []byte) []byte {
	f := make([]byte, 14+rawHeader+len(data))
	copy(f, []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(f[12:], EtherType)
	binary.BigEndian.PutUint16(f[14:], dvi)
	binary.BigEndian.PutUint16(f[16:], svi)
	binary.BigEndian.PutUint32(f[18:], seq)
	binary.BigEndian.PutUint32(f[26:], uint32(total)) // the acknowledgement (22) is 0: nothing came
	binary.BigEndian.PutUint32(f[30:], uint32(at))
	binary.BigEndian.PutUint32(f[34:], imm)
	copy(f[14+rawHeader:], data)
	return f
}

// FuzzHostInput hands a host arbitrary frames, as the data plane of
// `dragonc run` does with whatever arrives with the VI EtherType: a
// listener and an open VI with posted descriptors take them. Nothing
// panics, a message is completed only whole and within its descriptor,
// and connection setup answers only well-formed requests.
func FuzzHostInput(f *testing.F) {
	p := PaperParams()
	f.Add(viFrame(1, 7, 1, 5, 0, 0x10, []byte("hello")), []byte{})
	f.Add(viFrame(1, 7, 1, 3000, 0, 0, make([]byte, 1480)), viFrame(1, 7, 1, 3000, 1480, 0, make([]byte, 1520)))
	f.Add(viFrame(1, 7, 2, 5, 0, 0, []byte("gap!!")), []byte{})
	f.Add(viFrame(0, 9, 0, setupLen, 0, 0, setupMsg{kind: setupConnect, port: 80, dialer: 9, p: p, nonce: 1}.frame()), viFrame(0, 9, 0, setupLen, 0, 0, setupMsg{kind: setupConnect, port: 81, dialer: 9, p: p, nonce: 2}.frame()))
	f.Add(viFrame(0, 9, 0, setupLen, 0, 0, setupMsg{kind: setupConnect, port: 80, dialer: 9, p: p, nonce: 1}.frame()), viFrame(0, 9, 0, setupLen, 0, 0, setupMsg{kind: setupConfirm, port: 80, dialer: 9, listener: 2, p: p, nonce: 1}.frame()))
	f.Add(viFrame(1, 7, 1, 1<<31, 0, 0, nil), []byte{1, 2, 3})
	// Bulk datagrams (bulk.go): whole and cut by the kernel's
	// segmentation; blocks that overlap; a block of no bytes; blocks
	// for another VI and for connection setup in one datagram; an IPv4
	// length past the frame; an offer of bulk datagrams.
	msg := make([]byte, 2000)
	whole := bulkDatagram(msg, 1444)
	segs := segments(whole, rawHeader+1444)
	f.Add(whole, []byte{})
	f.Add(segs[1], segs[0])
	x := func(at, total uint32) header { return header{dvi: 1, svi: 7, seq: 1, at: at, total: total} }
	f.Add(bulkFrame(block(x(0, 1500), msg[:1000]), block(x(500, 1500), msg[:1000])), bulkFrame(block(x(1000, 1500), msg[:500])))
	f.Add(bulkFrame(block(x(0, 1500), nil), block(x(0, 1500), msg[:1500])), []byte{})
	setup := setupMsg{kind: setupConnect, port: 80, dialer: 9, p: p, nonce: 1}.frame()
	f.Add(bulkFrame(block(header{dvi: 2, svi: 7, seq: 1, total: 5}, msg[:5]), block(header{svi: 9, total: setupLen}, setup), block(x(0, 5), msg[:5])), []byte{})
	huge := bulkDatagram(msg[:100], 1444)
	binary.BigEndian.PutUint16(huge[14+2:], 0xffff)
	f.Add(huge, bulkFrame(block(header{dvi: 1, svi: 7, seq: 2, flags: flagAckOnly | flagBulk}, nil)))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		link := &recordLink{}
		h, err := NewHost(link, net.HardwareAddr{2, 0, 0, 0, 0, 1})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		l, err := h.Listen(80, p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		v, err := h.VI(1, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7)
		if err != nil {
			t.Fatal(err)
		}
		var regions []*Region
		for range 3 {
			r, err := v.Register(make([]byte, 2048))
			if err != nil {
				t.Fatal(err)
			}
			if err := v.PostRecv(r); err != nil {
				t.Fatal(err)
			}
			regions = append(regions, r)
		}
		h.Input(a)
		h.Input(b)
		for {
			c, ok, err := v.Wait(0)
			if err != nil || !ok {
				break
			}
			if !c.Recv || c.N < 0 || c.N > len(c.Region.Buf) {
				t.Fatalf("a completion of %d bytes in a %d-byte descriptor (recv %v)", c.N, len(c.Region.Buf), c.Recv)
			}
		}
		for _, s := range link.sent {
			if len(s) < 14+rawHeader || binary.BigEndian.Uint16(s[12:]) != EtherType {
				t.Fatalf("the host sent %x: not a VI frame", s)
			}
			if dvi := binary.BigEndian.Uint16(s[14:]); dvi != 0 && (dvi != 7 || s[14+24]&flagAckOnly == 0 || len(s) != 14+rawHeader) {
				t.Fatalf("the host sent %x: only setup answers on VI 0 and acknowledgements to VI 7 are expected", s)
			}
		}
	})
}

// pipeLink delivers a host's frames to another host's Input in order,
// on a goroutine of its own, as a wire and the receiving loop of
// `dragonc run` would. Its far end may change (setTo).
type pipeLink struct {
	mu     sync.Mutex
	to     *RawHost
	frames chan []byte
}

// newPipeLink starts a link to host to (nil: set it later with setTo).
// The delivering goroutine stays, idle, after the test: a late frame must
// not meet a closed channel.
func newPipeLink(to *RawHost) *pipeLink {
	l := &pipeLink{to: to, frames: make(chan []byte, 4096)}
	go l.deliver()
	return l
}

func (l *pipeLink) SendFrame(f []byte) error {
	l.frames <- append([]byte(nil), f...)
	return nil
}

func (l *pipeLink) deliver() {
	for f := range l.frames {
		l.mu.Lock()
		to := l.to
		l.mu.Unlock()
		if to != nil {
			to.Input(f)
		}
	}
}

// setTo puts another host at the link's far end.
func (l *pipeLink) setTo(h *RawHost) {
	l.mu.Lock()
	l.to = h
	l.mu.Unlock()
}
func (l *pipeLink) MTU() int     { return 1500 }
func (l *pipeLink) Close() error { return nil }

// pipeHosts are two hosts joined by pipe links.
func pipeHosts(t *testing.T) (a, b *RawHost) {
	la, lb := newPipeLink(nil), newPipeLink(nil)
	a, err := NewHost(la, net.HardwareAddr{2, 0, 0, 0, 0, 0xa})
	if err != nil {
		t.Fatal(err)
	}
	b, err = NewHost(lb, net.HardwareAddr{2, 0, 0, 0, 0, 0xb})
	if err != nil {
		t.Fatal(err)
	}
	la.setTo(b)
	lb.setTo(a)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestServeStreamsOneAtATime: a stream served by ServeStreams takes one
// connection at a time and holds one more; a third is refused. When a
// connection's close exchange ends, its VI is closed and its number free.
func TestServeStreamsOneAtATime(t *testing.T) {
	a, b := pipeHosts(t)
	p := PaperParams()
	p.NoDelay, p.CombineMax = true, 0
	st := Stream{Name: "repl", Local: netip.MustParseAddrPort("10.0.0.2:5000"), Remote: netip.MustParseAddrPort("10.0.0.1:6000"), Transport: "vi", VI: 1, Params: p}
	if err := ServeStreams(b, []Stream{st}, func(string) func(*Conn) { return Apps["echo"] }); err != nil {
		t.Fatal(err)
	}
	peer := net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	first, err := a.Dial(peer, 5000, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(first, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q, %v", got, err)
	}
	second, err := a.Dial(peer, 5000, p) // waits in the backlog
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Dial(peer, 5000, p); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a third connection to a stream: %v, want refused", err)
	}
	first.Close()
	if _, err := second.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(second, got); err != nil || string(got) != "pong" {
		t.Fatalf("the waiting connection's echo %q, %v", got, err)
	}
	second.Close()
	// Both ends' VIs close once the close exchanges end (a few round
	// trips; the linger bound is 5 s).
	open := func(h *RawHost) int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.vis) + len(h.setup.byVI) + len(h.setup.halfOpen)
	}
	deadline := time.Now().Add(10 * time.Second)
	for open(a)+open(b) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, m := open(a), open(b); n+m > 0 {
		t.Errorf("after both closes: %d VIs and accepted requests open on the dialer, %d on the listener", n, m)
	}
}

// TestPaddedFrames: frames padded to Ethernet's 60-byte minimum, as a
// wire delivers them, carry their messages whole: an acknowledgement (no
// payload) and a short message complete with their own lengths.
func TestPaddedFrames(t *testing.T) {
	h, err := NewHost(&recordLink{}, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.VI(1, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, err := v.Register(make([]byte, 64))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.PostRecv(r); err != nil {
			t.Fatal(err)
		}
	}
	pad := func(f []byte) []byte { return append(f, make([]byte, 60-len(f))...) }
	h.Input(pad(viFrame(1, 7, 1, 0, 0, 0x0201, nil)))
	h.Input(pad(viFrame(1, 7, 2, 3, 0, 0x01, []byte("abc"))))
	for i, want := range []string{"", "abc"} {
		c, ok, err := v.Wait(0)
		if err != nil || !ok {
			t.Fatalf("message %d: %v, %v", i, ok, err)
		}
		if got := string(c.Region.Buf[:c.N]); got != want {
			t.Errorf("message %d: %q, want %q", i, got, want)
		}
	}
}

// hostWithVI is a host of address mac on a link of the test's, with VI
// 1 open to VI 7 of 02:00:00:00:00:02 and one receive posted.
func hostWithVI(t *testing.T, mac net.HardwareAddr) (*RawHost, *RawVI) {
	t.Helper()
	h, v, _ := hostPosting(t, mac, 64)
	return h, v
}

// hostPosting is hostWithVI with a receive descriptor of n bytes.
func hostPosting(t *testing.T, mac net.HardwareAddr, n int) (*RawHost, *RawVI, *Region) {
	t.Helper()
	h, err := NewHost(&recordLink{}, mac)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.VI(1, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := v.Register(make([]byte, n))
	v.PostRecv(r)
	return h, v, r
}

// TestOthersFrames: a frame to another host's address (seen on a
// promiscuous link) reaches none of this host's VIs.
func TestOthersFrames(t *testing.T) {
	h, v := hostWithVI(t, net.HardwareAddr{2, 0, 0, 0, 0, 9})
	h.Input(viFrame(1, 7, 1, 3, 0, 0, []byte("abc"))) // to 02:00:00:00:00:01
	if _, ok, _ := v.Wait(0); ok {
		t.Error("a frame to another address completed a receive")
	}
	f := viFrame(1, 7, 1, 3, 0, 0, []byte("abc"))
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 9})
	h.Input(f)
	if _, ok, _ := v.Wait(0); !ok {
		t.Error("a frame to this host completed no receive")
	}
}

// TestHostCloseClosesListeners: closing a host ends its listeners, so
// that whoever waits in Accept (ServeStreams' goroutines) returns.
func TestHostCloseClosesListeners(t *testing.T) {
	h, err := NewHost(&recordLink{}, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.Listen(80, PaperParams())
	if err != nil {
		t.Fatal(err)
	}
	acceptEnds(t, l, func() { h.Close() })
}

// TestHostileFramesCounted: a frame to this host with the VI EtherType
// but shorter than a VI header, or whose offset lies past its message's
// length, or whose length no descriptor has, is dropped and counted with
// its reason; a frame to another address is not this host's to count;
// the VI receives the next good message.
func TestHostileFramesCounted(t *testing.T) {
	h, v := hostWithVI(t, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	good := viFrame(1, 7, 1, 3, 0, 0, []byte("abc"))
	h.Input(good[:14+rawHeader-1]) // truncated
	h.Input(good[:14])             // an Ethernet header alone
	h.Input(good[:13])             // not even that: no VI frame
	h.Input(viFrame(1, 7, 1, 3, 4, 0, []byte("abc")))
	h.Input(viFrame(1, 7, 1, 1<<30+1, 0, 0, []byte("abc")))
	other := slices.Clone(good)
	other[5] = 9
	h.Input(other[:20])
	c := counts(h)
	if c[dropNames[dropTruncated]] != 2 || c[dropNames[dropBadLength]] != 2 || len(c) != 2 {
		t.Errorf("counts %v, want 2 %q and 2 %q", c, dropNames[dropTruncated], dropNames[dropBadLength])
	}
	h.Input(good)
	if _, ok, _ := v.Wait(0); !ok {
		t.Error("the message after the hostile frames completed no receive")
	}
}
