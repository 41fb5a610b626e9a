//go:build linux

package sovia

import (
	"encoding/binary"
	"net"
	"testing"
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
	binary.BigEndian.PutUint32(f[22:], uint32(total))
	binary.BigEndian.PutUint32(f[26:], uint32(at))
	binary.BigEndian.PutUint32(f[30:], imm)
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
	f.Add(viFrame(0, 9, 0, setupLen, 0, 0, setupFrame(setupConnect, 80, 9, 0, p)), viFrame(0, 9, 0, setupLen, 0, 0, setupFrame(setupConnect, 81, 9, 0, p)))
	f.Add(viFrame(1, 7, 1, 1<<31, 0, 0, nil), []byte{1, 2, 3})
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
			if len(s) < 14+rawHeader || binary.BigEndian.Uint16(s[12:]) != EtherType || binary.BigEndian.Uint16(s[14:]) != 0 {
				t.Fatalf("the host sent %x: only setup answers on VI 0 are expected", s)
			}
		}
	})
}
