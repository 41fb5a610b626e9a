package fallback

import (
	"math/rand"
	"testing"
	"unsafe"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

// The decoder's results are checked against gopacket field by field in
// internal/packet, which decodes with it; generated modules, which read
// fewer fields, are checked against the reference interpreter by the
// gofallback and verify tests.

// udpFrame is an Ethernet/IPv4/UDP frame to 10.0.0.1:53 with correct
// checksums (RFC 791 section 3.1, RFC 768).
func udpFrame() []byte {
	b := []byte{
		0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, // Ethernet
		0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1, // IPv4
		0x30, 0x39, 0, 53, 0, 12, 0, 0, 'p', 'i', 'n', 'g', // UDP
	}
	ip := b[14:34]
	c := ^checksum(ip, 0)
	ip[10], ip[11] = byte(c>>8), byte(c)
	u := b[34:]
	c = ^checksum(u, pseudo(ip[12:16], ip[16:20], 17, len(u)))
	u[6], u[7] = byte(c>>8), byte(c)
	return b
}

func TestDecode(t *testing.T) {
	var f fields
	f.decode(udpFrame(), &Meta{CRCOK: true})
	for _, c := range []struct {
		slot int
		bit  uint64
		want uint64
	}{
		{fFrameLen, hasFrame, 46}, {fEthType, hasEthType, 0x0800}, {fIpDst, hasIp, 0x0a000001},
		{fIpCsumOk, hasIp, 1}, {fUdpDport, hasUdp, 53}, {fL4Sport, hasL4, 12345}, {fUdpCsumOk, hasUdp, 1},
	} {
		if f.has&c.bit == 0 || f.v[c.slot] != c.want {
			t.Errorf("%s: %d (present %v), want %d", slotNames[c.slot], f.v[c.slot], f.has&c.bit != 0, c.want)
		}
	}
	if f.has&(hasTcp|hasIcmp|hasArp|hasVlan|hasMeta) != 0 {
		t.Errorf("presence %b claims headers the frame lacks", f.has)
	}
	var x Fields
	x.Decode(udpFrame()[:40], Meta{})
	if _, ok := x.Get(fUdpDport); ok {
		t.Error("a frame cut inside the UDP header has udp.dport")
	}
	if v, ok := x.Get(fIpDst); !ok || v != 0x0a000001 {
		t.Errorf("a frame cut inside the UDP header: ip.dst %x, %v", v, ok)
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	b := udpFrame()
	if n := testing.AllocsPerRun(100, func() {
		var f fields
		f.decode(b, &Meta{})
	}); n != 0 {
		t.Errorf("decode allocates %v times per frame", n)
	}
}

// Tables: every key finds the verdict of its first entry, and keys that
// are not in the table find nothing.
func TestTables(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, size := range []int{1, 2, 3, 8, 100, 5000} {
		var entries []entry
		want := map[[2]uint64]Verdict{}
		miss := Verdict{Kind: missing}
		for i := 0; i < size; i++ {
			k := [2]uint64{uint64(rng.Intn(4 * size)), uint64(rng.Intn(3))}
			v := Verdict{Kind: Kind(i % 4), Index: uint32(i)} // drops too
			entries = append(entries, entry{k[0], k[1], v})
			if _, ok := want[k]; !ok {
				want[k] = v
			}
		}
		h := newHashed(entries)
		for k := uint64(0); k < uint64(5*size); k++ {
			for k1 := uint64(0); k1 < 4; k1++ {
				w, ok := want[[2]uint64{k, k1}]
				if !ok {
					w = miss
				}
				if got := h.find(k, k1); got != w {
					t.Fatalf("size %d: hashed.find(%d, %d) = %v, want %v", size, k, k1, got, w)
				}
			}
		}
		// Dense tables take one-word keys.
		var one []entry
		wantOne := map[uint64]Verdict{}
		lo, hi := uint64(1<<40), uint64(0)
		for _, e := range entries {
			e.k0 += 1000
			one = append(one, entry{e.k0, 0, e.v})
			if _, ok := wantOne[e.k0]; !ok {
				wantOne[e.k0] = e.v
			}
			lo, hi = min(lo, e.k0), max(hi, e.k0)
		}
		d := newDense(lo, hi, one)
		for k := uint64(0); k < uint64(5*size+2000); k++ {
			w, ok := wantOne[k]
			if !ok {
				w = miss
			}
			if got := d.find(k); got != w {
				t.Fatalf("size %d: dense.find(%d) = %v, want %v", size, k, got, w)
			}
		}
	}
}

func TestVerdictString(t *testing.T) {
	for _, c := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Deliver, 1}, "deliver dns"},
		{Verdict{Reply, 0}, "reply arp"},
		{Verdict{Sink, 0}, "sink RxL3IPv4Fragment"},
		{Verdict{Drop, 0}, "drop"},
		{Verdict{Drop, 1}, "drop RxL2EtherValidDest.false"},
		{Verdict{Deliver, 9}, "(invalid verdict)"},
		{Verdict{Kind(7), 0}, "(invalid verdict)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.v, got, c.want)
		}
	}
	if n := unsafe.Sizeof(Verdict{}); n != 8 {
		t.Errorf("a Verdict takes %d bytes, want 8", n)
	}
}
