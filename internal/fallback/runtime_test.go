package fallback

import (
	"math/rand"
	"os"
	"os/exec"
	"regexp"
	"strings"
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

// fastFrames makes frames in the fixed layout, and near it: transport
// headers whole, cut and missing, lengths that fit and lie, fragments,
// good and bad checksums, frames just long enough and one byte short.
func fastFrames(rng *rand.Rand, n int) [][]byte {
	var out [][]byte
	for len(out) < n {
		b := make([]byte, 34+rng.Intn(80))
		rng.Read(b)
		b[12], b[13], b[14] = 0x08, 0x00, fastHdr
		seg := len(b) - 34
		switch rng.Intn(4) {
		case 0, 1: // a length that fits: all of the frame, or part of it
			total := 20 + seg - rng.Intn(seg/2+1)
			b[16], b[17] = byte(total>>8), byte(total)
		case 2: // a length just past the frame, or below the header
			total := []int{20 + seg + 1, 19, 0}[rng.Intn(3)]
			b[16], b[17] = byte(total>>8), byte(total)
		}
		switch rng.Intn(4) { // flags and fragment offset (RFC 791 section 3.1)
		case 0:
			b[20], b[21] = 0, 0 // not a fragment
		case 1:
			b[20], b[21] = 0x40, 0 // DF
		case 2:
			b[20], b[21] = 0x20, 0 // MF: the first fragment
		}
		b[23] = []byte{1, 6, 17, 17, 6, byte(rng.Intn(256))}[rng.Intn(6)]
		if seg >= 8 && rng.Intn(2) == 0 {
			ulen := 8 + rng.Intn(seg-7)
			if rng.Intn(4) == 0 {
				ulen = rng.Intn(seg + 20)
			}
			b[38], b[39] = byte(ulen>>8), byte(ulen)
		}
		if seg >= 13 {
			b[46] = byte((5 + rng.Intn(11)) << 4)
		}
		if rng.Intn(2) == 0 { // correct checksums: compute over the claimed lengths
			ip := b[14:34]
			ip[10], ip[11] = 0, 0
			c := ^checksum(ip, 0)
			ip[10], ip[11] = byte(c>>8), byte(c)
			total := int(b[16])<<8 | int(b[17])
			if total >= 20 && 14+total <= len(b) {
				l4 := b[34 : 14+total]
				switch {
				case b[23] == 17 && len(l4) >= 8:
					ulen := int(l4[4])<<8 | int(l4[5])
					if ulen >= 8 && ulen <= len(l4) {
						l4[6], l4[7] = 0, 0
						c := ^checksum(l4[:ulen], pseudo(ip[12:16], ip[16:20], 17, ulen))
						l4[6], l4[7] = byte(c>>8), byte(c)
					}
				case b[23] == 6 && len(l4) >= 20:
					l4[16], l4[17] = 0, 0
					c := ^checksum(l4, pseudo(ip[12:16], ip[16:20], 6, len(l4)))
					l4[16], l4[17] = byte(c>>8), byte(c)
				case b[23] == 1 && len(l4) >= 8:
					l4[2], l4[3] = 0, 0
					c := ^checksum(l4, 0)
					l4[2], l4[3] = byte(c>>8), byte(c)
				}
			}
		}
		out = append(out, b)
	}
	return out
}

// The fixed-layout reads give, on every frame of that layout, what the
// decoder stores: the same presence for every header and the same value
// for every field present.
func TestFastLayout(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	frames := append(fastFrames(rng, 20000), udpFrame())
	seen := map[string]int{} // slot present, for the test's own coverage
	for _, b := range frames {
		if !isFast(b) {
			t.Fatalf("frame %x is not in the fixed layout", b)
		}
		for _, m := range []Meta{{CRCOK: true}, {RSSHash: 0x1234, HasRSSHash: true}} {
			var f fields
			f.decode(b, &m)
			x := fast{b, &m}
			for i := range slotNames {
				has := f.has&slotBits[i] != 0
				if got := fastHas[i](x); got != has {
					t.Fatalf("%s: fixed layout says present %v, the decoder %v, on %x", slotNames[i], got, has, b)
				}
				if want, ok := FastHas[bitName(slotBits[i])]; ok && has != want {
					t.Fatalf("%s: present %v in the fixed layout, FastHas says %v", slotNames[i], has, want)
				}
				if !has {
					continue
				}
				if want, ok := FastValues[slotNames[i]]; ok && f.v[i] != want {
					t.Fatalf("%s: %#x in the fixed layout, FastValues says %#x", slotNames[i], f.v[i], want)
				}
				seen[slotNames[i]]++
				if got := fastReads[i](x); got != f.v[i] {
					t.Fatalf("%s: fixed layout reads %#x, the decoder %#x, on %x", slotNames[i], got, f.v[i], b)
				}
			}
		}
	}
	// Every field of the layout's headers was present somewhere, and the
	// checks came out both ways.
	for _, name := range []string{"ip.csum_ok", "udp.csum_ok", "tcp.csum_ok", "icmp.csum_ok", "udp.len_ok", "tcp.hdr_ok", "l4.dport", "rss.hash"} {
		if seen[name] < 100 {
			t.Errorf("%s present on only %d frames", name, seen[name])
		}
	}
	ok := map[string][2]int{}
	for _, b := range frames {
		var f fields
		f.decode(b, &Meta{})
		for _, s := range []int{fIpCsumOk, fIpLenOk, fUdpCsumOk, fUdpLenOk, fTcpCsumOk, fTcpHdrOk, fIcmpCsumOk, fIpFrag} {
			if f.has&slotBits[s] != 0 {
				c := ok[slotNames[s]]
				c[f.v[s]]++
				ok[slotNames[s]] = c
			}
		}
	}
	for name, c := range ok {
		if c[0] < 20 || c[1] < 20 {
			t.Errorf("%s: %d frames fail it and %d pass: the frames do not test it both ways", name, c[0], c[1])
		}
	}
	// Frames of other layouts take the decoder.
	for _, b := range [][]byte{udpFrame()[:33], append(append(append([]byte{}, udpFrame()[:12]...), 0x81, 0, 0, 5), udpFrame()[12:]...)} {
		if isFast(b) {
			t.Errorf("frame %x counted as fixed layout", b)
		}
	}
	b := udpFrame()
	b[14] = 0x46
	if isFast(b) {
		t.Error("an IPv4 header with options counted as fixed layout")
	}
}

// bitName spells a presence bit as FastHas names it.
func bitName(bit uint64) string {
	names := map[uint64]string{
		hasFrame: "hasFrame", hasMeta: "hasMeta", hasEth: "hasEth", hasVlan: "hasVlan", hasEthType: "hasEthType",
		hasArp: "hasArp", hasOmx: "hasOmx", hasIp: "hasIp", hasIcmp: "hasIcmp", hasUdp: "hasUdp", hasTcp: "hasTcp", hasL4: "hasL4",
	}
	return names[bit]
}

// FastHas and FastValues name presence bits and fields that exist.
func TestFastTables(t *testing.T) {
	bits := map[string]bool{}
	for _, b := range slotBits {
		bits[bitName(b)] = true
	}
	for b := range FastHas {
		if !bits[b] {
			t.Errorf("FastHas names %s, not a presence bit of any field", b)
		}
	}
	for f := range FastValues {
		found := false
		for i, n := range slotNames {
			if n == f {
				found = true
				if !FastHas[bitName(slotBits[i])] {
					t.Errorf("FastValues fixes %s, whose header the layout need not have", f)
				}
			}
		}
		if !found {
			t.Errorf("FastValues names %s, not a field", f)
		}
	}
}

// The fixed-layout reads are only fast when the compiler inlines them
// into the generated checks: every method of fast except the checksum
// sums (loops) must stay within the inliner's budget.
func TestFastMethodsInline(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goCmd, "build", "-gcflags=-m", "-o", os.DevNull, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	inlined := map[string]bool{}
	for _, m := range regexp.MustCompile(`fast\.go:\d+:\d+: can inline (fast\.\w+|isFast)`).FindAllStringSubmatch(string(out), -1) {
		inlined[m[1]] = true
	}
	src, err := os.ReadFile("fast.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := regexp.MustCompile(`(?m)^func (?:\(x fast\) (\w+)|(isFast))\(`).FindAllStringSubmatch(string(src), -1)
	if len(methods) < 50 {
		t.Fatalf("found only %d functions in fast.go", len(methods))
	}
	for _, m := range methods {
		name := "fast." + m[1]
		if m[2] != "" {
			name = m[2]
		}
		if !inlined[name] && !strings.HasSuffix(name, "CsumOk") {
			t.Errorf("%s is not inlined", name)
		}
	}
}
