//go:build linux

package sovia

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/internal/netnstest"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
)

// bulkDatagram is what a host hands the kernel for a message of total
// bytes whose blocks are data's pieces of per bytes (from 02:..:02 to
// 02:..:01, VI 7 to VI 1, message 1), without the virtio_net_hdr: the
// datagram a veth delivers whole.
func bulkDatagram(data []byte, per int) []byte {
	var blocks [][]byte
	for at := 0; at < len(data); at += per {
		x := header{dvi: 1, svi: 7, seq: 1, total: uint32(len(data)), at: uint32(at)}
		blocks = append(blocks, block(x, data[at:min(at+per, len(data))]))
	}
	return bulkFrame(blocks...)
}

// block is a bulk datagram's block: x's header and data.
func block(x header, data []byte) []byte {
	b := make([]byte, rawHeader+len(data))
	(&RawHost{}).putHeader(b, x, len(data))
	copy(b[rawHeader:], data)
	return b
}

// bulkFrame is a bulk datagram from 02:..:02 to 02:..:01 whose payload
// is blocks, as a veth delivers it whole.
func bulkFrame(blocks ...[]byte) []byte {
	payload := bytes.Join(blocks, nil)
	b := make([]byte, bulkHeadLen+len(payload))
	putBulkHead(b, [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}, len(payload), len(payload))
	copy(b[bulkHeadLen:], payload)
	return b[vnetHeader:]
}

// segments cuts a bulk datagram as the kernel's UDP segmentation does
// (__udp_gso_segment): the headers copied before each seg bytes of the
// payload, the lengths set to each piece's.
func segments(d []byte, seg int) [][]byte {
	var out [][]byte
	for p := d[bulkHead:]; len(p) > 0; {
		k := min(seg, len(p))
		f := append(append([]byte(nil), d[:bulkHead]...), p[:k]...)
		binary.BigEndian.PutUint16(f[14+2:], uint16(ipHeader+udpHeader+k))
		binary.BigEndian.PutUint16(f[14+ipHeader+4:], uint16(udpHeader+k))
		out = append(out, f)
		p = p[k:]
	}
	return out
}

// TestBulkInput: a message sent as a bulk datagram completes its
// receive descriptor byte for byte whether the datagram arrives whole or
// cut into segments; the headers are valid IPv4 and UDP (RFC 791 §3.1's
// header checksum sums to all ones); a datagram whose lengths disagree
// with its frame, or whose blocks overrun it, is dropped and counted;
// another IPv4 datagram is not the host's to count; a header's flagBulk
// tells the VI its peer takes bulk datagrams.
func TestBulkInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	const per = 1444 // bulkBlock(1500)
	whole := bulkDatagram(data, per)
	if ip := whole[14:34]; sum16(ip, 0) != 0xffff {
		t.Errorf("IPv4 header checksum: the header sums to %#x, want 0xffff", sum16(ip, 0))
	}
	for _, c := range []struct {
		name   string
		frames [][]byte
	}{
		{"whole", [][]byte{whole}},
		{"segmented", segments(whole, rawHeader+per)},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, v, r := hostPosting(t, net.HardwareAddr{2, 0, 0, 0, 0, 1}, 8192)
			for _, f := range c.frames {
				h.Input(f)
			}
			cp, ok, err := v.Wait(0)
			if !ok || err != nil || cp.N != len(data) || !bytes.Equal(r.Buf[:cp.N], data) {
				t.Fatalf("completion %+v (ok %v, %v): want the %d bytes sent", cp, ok, err, len(data))
			}
			if v.bulk.Load() != bulkUnknown {
				t.Error("the VI took its peer for one that takes bulk datagrams: no header said so")
			}
		})
	}

	h, v := hostWithVI(t, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	long := bulkDatagram([]byte("abc"), per)
	binary.BigEndian.PutUint16(long[14+2:], uint16(len(long)-14+1)) // one byte past the frame
	h.Input(long)
	overrun := bulkDatagram([]byte("abc"), per)
	binary.BigEndian.PutUint16(overrun[bulkHead+26:], 4) // a block of 4 bytes in 3
	h.Input(overrun)
	short := bulkDatagram([]byte("abc"), per)
	short = append(short, make([]byte, rawHeader-1)...) // a second block, cut short
	binary.BigEndian.PutUint16(short[14+2:], uint16(len(short)-14))
	binary.BigEndian.PutUint16(short[14+ipHeader+4:], uint16(len(short)-14-ipHeader))
	h.Input(short) // its first block is good: it completes the receive
	other := bulkDatagram([]byte("abc"), per)
	other[14+ipHeader+3]++ // another port
	h.Input(other)
	c := counts(h)
	if want := map[string]uint64{dropNames[dropBulkLength]: 2, dropNames[dropTruncated]: 1}; !cmp.Equal(c, want) {
		t.Errorf("counts %v, want %v", c, want)
	}
	if cp, ok, _ := v.Wait(0); !ok || string(cp.Region.Buf[:cp.N]) != "abc" {
		t.Errorf("the good block of the datagram cut short: completion %+v, %v", cp, ok)
	}
	offer := viFrame(1, 7, 2, 0, 0, 0, nil)
	offer[14+24] = flagAckOnly | flagBulk
	forged := append([]byte(nil), offer...)
	forged[11] = 3 // from another Ethernet address than the VI's peer
	h.Input(forged)
	if v.bulk.Load() != bulkUnknown {
		t.Error("a header with flagBulk from another host than the VI's peer made the VI send bulk datagrams")
	}
	h.Input(offer)
	if v.bulk.Load() != bulkOffered {
		t.Error("a header with flagBulk did not tell the VI that its peer takes bulk datagrams")
	}
}

// TestBulkFilter runs the socket's filter in golang.org/x/net/bpf's
// virtual machine on frames: the VI's frames
// and bulk datagrams pass, other IPv4 (another port, group, protocol,
// options, a fragment) and other EtherTypes do not.
func TestBulkFilter(t *testing.T) {
	prog := bulkFilter()
	insns := make([]bpf.Instruction, len(prog))
	for i, r := range prog {
		insns[i] = bpf.RawInstruction{Op: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}.Disassemble()
		if _, raw := insns[i].(bpf.RawInstruction); raw {
			t.Fatalf("instruction %d (%+v) is no classic BPF instruction", i, r)
		}
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	good := bulkDatagram([]byte("abc"), 1444)
	change := func(at int, b byte) []byte {
		f := bytes.Clone(good)
		f[at] = b
		return f
	}
	for _, c := range []struct {
		name  string
		frame []byte
		pass  bool
	}{
		{"VI frame", viFrame(1, 7, 1, 3, 0, 0, []byte("abc")), true},
		{"bulk datagram", good, true},
		{"another port", change(14+ipHeader+3, 1), false},
		{"another group", change(14+19, 1), false},
		{"TCP", change(14+9, 6), false},
		{"IPv4 options", change(14, 0x46), false},
		{"a fragment", change(14+7, 1), false},
		{"more fragments", change(14+6, 0x20), false},
		{"ARP", change(13, 0x06), false},
	} {
		n, err := vm.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (n > 0) != c.pass {
			t.Errorf("%s: the filter returned %d, want it to pass: %v", c.name, n, c.pass)
		}
	}
}

// ipCounters reads counters of namespace ns's IP stack from
// /proc/net/snmp (proto "Icmp", "Udp", ...).
func ipCounters(t *testing.T, ns, proto string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	if err := netnstest.In(ns, func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		var names []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != proto+":" {
				continue
			}
			if names == nil {
				names = fields[1:]
				continue
			}
			for i, v := range fields[1:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				m[names[i]] = n
			}
		}
		return sc.Err()
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBulkOverVeth sends 32 KiB messages both ways between two hosts on
// a veth pair: bulk datagrams both ways when both take them (a veth
// delivers them whole to the packet socket), frames to a host that
// does not (HostOptions.NoBulkReceive), frames from a host that does not
// send them (NoBulkSend); every byte arrives, checked by SHA-256; and
// the receiver's IP stack drops the datagrams to 224.0.0.0 without
// answering (its ICMP destination-unreachable and UDP no-port counters,
// RFC 1122 §3.2.2.1 and §4.1.3.1, stay where they were).
func TestBulkOverVeth(t *testing.T) {
	for _, c := range []struct {
		name     string
		a, b     HostOptions
		aTo, bTo bool // bulk datagrams sent a to b, b to a
	}{
		{"both", HostOptions{}, HostOptions{}, true, true},
		{"b takes none", HostOptions{}, HostOptions{NoBulkReceive: true}, false, true},
		{"a sends none", HostOptions{NoBulkSend: true}, HostOptions{}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			nsA, nsB, macA, macB := vethPair(t)
			netnstest.IP(t, "-n", nsB, "addr", "add", "10.77.0.2/24", "dev", "vB")
			open := func(ns, ifc string, mac net.HardwareAddr, o HostOptions) *RawHost {
				var h *RawHost
				if err := netnstest.In(ns, func() (err error) {
					h, err = OpenHostWith(ifc, mac, o)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { h.Close() })
				return h
			}
			ha, hb := open(nsA, "vA", macA, c.a), open(nsB, "vB", macB, c.b)
			icmp, udp := ipCounters(t, nsB, "Icmp"), ipCounters(t, nsB, "Udp")
			va, err := ha.VI(1, macB, 2)
			if err != nil {
				t.Fatal(err)
			}
			vb, err := hb.VI(2, macA, 1)
			if err != nil {
				t.Fatal(err)
			}
			a, b := connPair(t, va, vb, PaperParams())
			const n = 64
			send := func(c *Conn, seed uint64) ([32]byte, error) {
				rng := rand.New(rand.NewPCG(seed, 9))
				sum := sha256.New()
				msg := make([]byte, 32<<10)
				for range n {
					for i := range msg {
						msg[i] = byte(rng.Uint32())
					}
					sum.Write(msg)
					if _, err := c.Write(msg); err != nil {
						return [32]byte{}, err
					}
				}
				return [32]byte(sum.Sum(nil)), nil
			}
			recv := func(c *Conn) ([32]byte, error) {
				sum := sha256.New()
				_, err := io.CopyN(sum, c, n*32<<10)
				return [32]byte(sum.Sum(nil)), err
			}
			type result struct {
				sum [32]byte
				err error
			}
			sent, got := make(chan result, 2), make(chan result, 2)
			go func() { s, err := send(a, 1); sent <- result{s, err} }()
			go func() { s, err := recv(b); got <- result{s, err} }()
			go func() { s, err := send(b, 2); sent <- result{s, err} }()
			go func() { s, err := recv(a); got <- result{s, err} }()
			var sums [2][]string
			for range 2 {
				s, g := <-sent, <-got
				if s.err != nil || g.err != nil {
					t.Fatalf("send: %v, receive: %v", s.err, g.err)
				}
				sums[0], sums[1] = append(sums[0], fmt.Sprintf("%x", s.sum)), append(sums[1], fmt.Sprintf("%x", g.sum))
			}
			if !cmp.Equal(sortPair(sums[0]), sortPair(sums[1])) {
				t.Fatalf("sent %v, received %v", sums[0], sums[1])
			}
			ca, cb := ha.LinkCounts(), hb.LinkCounts()
			t.Logf("a: %+v", ca)
			t.Logf("b: %+v", cb)
			if (ca.BulkSent > 0) != c.aTo || (cb.BulkSent > 0) != c.bTo {
				t.Errorf("bulk datagrams sent a to b %d, b to a %d; want some: %v, %v", ca.BulkSent, cb.BulkSent, c.aTo, c.bTo)
			}
			// A veth passes a datagram on whole (the receiver's
			// side has no XDP program, which would make the sender
			// segment). One the veth drops on the way (its backlog
			// full on a loaded host: no socket counts it) is sent
			// again, a 32 KiB message being one datagram: each side
			// takes whole every datagram the other sent but those it
			// had to send again.
			whole := func(got, sent uint64, resent int) bool { return got <= sent && got+uint64(resent) >= sent }
			if !whole(cb.BulkReceived, ca.BulkSent, va.Resent()) || !whole(ca.BulkReceived, cb.BulkSent, vb.Resent()) {
				t.Errorf("received whole: b %d of a's %d (%d resent), a %d of b's %d (%d resent)", cb.BulkReceived, ca.BulkSent, va.Resent(), ca.BulkReceived, cb.BulkSent, vb.Resent())
			}
			if ca.Oversize+cb.Oversize+ca.BulkRefused+cb.BulkRefused != 0 {
				t.Errorf("oversize or refused: a %+v, b %+v", ca, cb)
			}
			icmp2, udp2 := ipCounters(t, nsB, "Icmp"), ipCounters(t, nsB, "Udp")
			if icmp2["OutDestUnreachs"] != icmp["OutDestUnreachs"] || udp2["NoPorts"] != udp["NoPorts"] || udp2["InDatagrams"] != udp["InDatagrams"] {
				t.Errorf("b's IP stack saw the datagrams: ICMP destination unreachable %d→%d, UDP no port %d→%d, UDP in %d→%d",
					icmp["OutDestUnreachs"], icmp2["OutDestUnreachs"], udp["NoPorts"], udp2["NoPorts"], udp["InDatagrams"], udp2["InDatagrams"])
			}
		})
	}
}

func sortPair(s []string) []string {
	if len(s) == 2 && s[0] > s[1] {
		return []string{s[1], s[0]}
	}
	return s
}

// TestBulkAbandoned: bulk datagrams that never arrive (an XDP program
// on the receiver's veth drops every one, as a program that takes the
// interface's IPv4 frames for a stack of its own would) make the VI give
// them up after bulkTries timeouts and send its messages as frames:
// every byte arrives, the host counts the VI, and the other direction,
// whose datagrams arrive, keeps them.
func TestBulkAbandoned(t *testing.T) {
	a, b, va, vb, _, nsB := rawPair(t, PaperParams())
	netnstest.Drop(t, nsB, "vB", netnstest.Frames{UDPPort: BulkPort}, 1)
	go echo(b)
	if err := bulkEcho(a, 4<<20, 5); err != nil {
		t.Fatalf("%v (a resent %d, b %d)", err, va.Resent(), vb.Resent())
	}
	ca, cb := va.host.LinkCounts(), vb.host.LinkCounts()
	if ca.BulkAbandoned != 1 || cb.BulkAbandoned != 0 || cb.BulkSent == 0 || ca.BulkReceived == 0 {
		t.Errorf("a %+v, b %+v: want a's one VI to give bulk datagrams up, and b's to reach a whole", ca, cb)
	}
	if va.bulk.Load() != bulkAbandoned {
		t.Errorf("a's VI: bulk state %d, want abandoned", va.bulk.Load())
	}
}

// TestReassemblyMixedCuts: a message cut one way and sent again cut
// another (bulk datagrams given up for frames) completes once every byte
// came, whichever pieces brought it; pieces that overlap what came count
// only their new bytes, so overlapping fragments (a forged one among
// them) never make a message whole with a hole in it.
func TestReassemblyMixedCuts(t *testing.T) {
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	piece := func(at, n int) []byte { return viFrame(1, 7, 1, len(data), at, 0, data[at:at+n]) }
	for _, c := range []struct {
		name   string
		frames [][]byte
		whole  bool
	}{
		{"frames", [][]byte{piece(0, 1472), piece(1472, 1472), piece(2944, 56)}, true},
		{"blocks, then a frame", [][]byte{piece(0, 1444), piece(2888, 112), piece(1472, 1472)}, false}, // 1444..1472 missing
		{"blocks and frames", [][]byte{piece(0, 1444), piece(2888, 112), piece(1472, 1472), piece(0, 1472)}, true},
		{"overlaps counted once", [][]byte{piece(0, 2000), piece(1000, 1000), piece(1500, 1400)}, false}, // 2900..3000 missing
		{"nested", [][]byte{piece(100, 100), piece(0, 3000)}, true},
		{"an overlap hides no hole", [][]byte{piece(0, 1500), piece(1000, 1500)}, false}, // 2500..3000 missing: 3000 bytes came
	} {
		t.Run(c.name, func(t *testing.T) {
			h, v, r := hostPosting(t, net.HardwareAddr{2, 0, 0, 0, 0, 1}, 4096)
			for _, f := range c.frames {
				h.Input(f)
			}
			cp, ok, _ := v.Wait(0)
			if ok != c.whole {
				t.Fatalf("completed: %v, want %v", ok, c.whole)
			}
			if ok && (cp.N != len(data) || !bytes.Equal(r.Buf[:cp.N], data)) {
				t.Errorf("completed with %d bytes, not the message", cp.N)
			}
		})
	}
	// A message of no bytes (SOVIA's control messages carry only
	// immediate data) is whole with its one frame.
	h, v := hostWithVI(t, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	h.Input(viFrame(1, 7, 1, 0, 0, 0x42, nil))
	if cp, ok, _ := v.Wait(0); !ok || cp.N != 0 || cp.Imm != 0x42 {
		t.Errorf("an empty message: completion %+v, %v", cp, ok)
	}
}

// TestBulkBlock: a block fills a segment of an MTU's IPv4 datagram (RFC
// 791: 20 bytes of IPv4 header, RFC 768: 8 of UDP, then the VI header);
// none fits below 57 bytes, nor above what one datagram holds.
func TestBulkBlock(t *testing.T) {
	for mtu, want := range map[int]int{1500: 1444, 9000: 8944, 56: 0, 57: 1, 65535: 65479, 65536: 0} {
		if got := bulkBlock(mtu); got != want {
			t.Errorf("bulkBlock(%d) = %d, want %d", mtu, got, want)
		}
	}
}

// TestReassemblyBounded: fragments a byte long a byte apart (a hostile
// peer's) keep a message in at most maxSpans pieces; those beyond are
// dropped, counted, and the message, sent again whole, still completes
// byte for byte.
func TestReassemblyBounded(t *testing.T) {
	const extra = 100
	data := make([]byte, 2*(maxSpans+extra)+1000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	h, v, r := hostPosting(t, net.HardwareAddr{2, 0, 0, 0, 0, 1}, len(data))
	piece := func(at, n int) []byte { return viFrame(1, 7, 1, len(data), at, 0, data[at:at+n]) }
	for i := range maxSpans + extra {
		h.Input(piece(2*i, 1))
	}
	v.mu.Lock()
	spans := -1 // no message being put together
	if len(v.rx.slots) > 0 && v.rx.slots[0] != nil {
		spans = len(v.rx.slots[0].spans)
	}
	v.mu.Unlock()
	if spans < 0 || spans > maxSpans {
		t.Errorf("the message is kept in %d pieces, more than %d", spans, maxSpans)
	}
	if c, want := counts(h), map[string]uint64{dropNames[dropPieces]: extra}; !cmp.Equal(c, want) {
		t.Errorf("counts %v, want %v", c, want)
	}
	for at := 0; at < len(data); at += 1472 {
		h.Input(piece(at, min(1472, len(data)-at)))
	}
	cp, ok, _ := v.Wait(0)
	if !ok || cp.N != len(data) || !bytes.Equal(r.Buf[:cp.N], data) {
		t.Fatalf("sent again whole: completion %+v, %v; want the %d bytes", cp, ok, len(data))
	}
}

// bulkRecordLink is a Link that takes bulk datagrams too (bulkLink) and
// counts them.
type bulkRecordLink struct {
	recordLink
	datagrams int
}

func (l *bulkRecordLink) sendBulk(to, from [6]byte, hdrs, parts [][]byte, seg int) error {
	l.datagrams++
	return nil
}

// TestBulkAbandonedWhileSending: a message that was going out as bulk
// datagrams when its VI gave them up (PostSend sends it without the VI's
// lock, so the VI's retransmission timer may give them up meanwhile)
// goes as frames the next time it is sent, not as bulk datagrams for
// good.
func TestBulkAbandonedWhileSending(t *testing.T) {
	link := &bulkRecordLink{}
	h, err := NewHost(link, net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.SetClock(NewFakeClock()) // no retransmission but the test's
	h.bulkOut = true
	v, err := h.VI(1, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	v.bulk.Store(bulkOffered)
	r, _ := v.Register(make([]byte, 5000))
	if err := v.PostSend(r, 0, len(r.Buf), 0); err != nil {
		t.Fatal(err)
	}
	if link.datagrams != 1 || len(link.sent) != 0 {
		t.Fatalf("sent first as %d bulk datagrams and %d frames, want one datagram", link.datagrams, len(link.sent))
	}
	tx := &v.tx
	tx.mu.Lock()
	m := tx.unacked[0]
	m.busy = true // still going out when the VI gives bulk datagrams up
	v.abandonBulk()
	m.busy = false
	err = v.transmit(m)
	tx.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if link.datagrams != 1 || len(link.sent) != 4 {
		t.Errorf("sent again as %d more bulk datagrams and %d frames, want 4 frames of up to 1472 bytes", link.datagrams-1, len(link.sent))
	}
}

// TestCover checks reasm.cover against a map of the bytes taken: random
// fragments of a message (never empty, as fragment passes them) each
// count the bytes no fragment before brought, and the ranges kept are
// the runs of bytes taken, apart.
func TestCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const total = 300
	for round := range 200 {
		var m reasm
		var taken [total]bool
		for range 1 + rng.IntN(40) {
			at := rng.IntN(total)
			end := at + 1 + rng.IntN(min(60, total-at))
			want := 0
			for i := at; i < end; i++ {
				if !taken[i] {
					taken[i], want = true, want+1
				}
			}
			if got, ok := m.cover(uint32(at), uint32(end)); !ok || int(got) != want {
				t.Fatalf("round %d: [%d, %d) counted %d new bytes (%v), want %d", round, at, end, got, ok, want)
			}
		}
		var runs [][2]uint32
		for i := range total {
			switch {
			case !taken[i]:
			case i > 0 && taken[i-1]:
				runs[len(runs)-1][1]++
			default:
				runs = append(runs, [2]uint32{uint32(i), uint32(i + 1)})
			}
		}
		spans := slices.Clone(m.spans)
		slices.SortFunc(spans, func(a, b [2]uint32) int { return int(a[0]) - int(b[0]) })
		if !slices.Equal(spans, runs) {
			t.Fatalf("round %d: ranges %v, want the runs %v", round, spans, runs)
		}
	}
}

// TestBulkAbandonedAfterAcked: a VI whose bulk datagrams were
// acknowledged gives them up too when the path starts dropping them (an
// XDP program attached in front of its peer's socket), after
// bulkTriesAcked timeouts in a row, rather than break: every byte
// arrives.
func TestBulkAbandonedAfterAcked(t *testing.T) {
	a, b, va, _, _, nsB := rawPair(t, PaperParams())
	go echo(b)
	// A first window goes as frames: a hears b's offer with b's answers.
	if err := bulkEcho(a, 4<<20, 6); err != nil {
		t.Fatal(err)
	}
	if ca := va.host.LinkCounts(); ca.BulkSent == 0 || ca.BulkAbandoned != 0 {
		t.Fatalf("before the drops: %+v; want bulk datagrams sent, none given up", ca)
	}
	netnstest.Drop(t, nsB, "vB", netnstest.Frames{UDPPort: BulkPort}, 1)
	if err := bulkEcho(a, 1<<20, 7); err != nil {
		t.Fatalf("%v (a resent %d)", err, va.Resent())
	}
	if ca := va.host.LinkCounts(); ca.BulkAbandoned != 1 || va.bulk.Load() != bulkAbandoned {
		t.Errorf("after the drops: %+v, bulk state %d; want a's VI to give bulk datagrams up", ca, va.bulk.Load())
	}
}

// TestSpareKeepsLargeBuffers: a VI that sent 64 small messages and
// then large ones reuses the large ones' buffers. Before, the small
// records filled the spares for good and every 32 KiB message after
// them took a buffer of its own (in calibrate, a 32 KiB stream after
// small ones was a fifth slower and its p99 twice as long).
func TestSpareKeepsLargeBuffers(t *testing.T) {
	var tx txState
	small := make([]*outMsg, maxSpare)
	for i := range small {
		small[i] = tx.message(4)
	}
	for _, m := range small {
		tx.recycle(m)
	}
	big := tx.message(32 << 10)
	tx.recycle(big)
	if got := tx.message(32 << 10); got != big {
		t.Fatalf("a 32 KiB message after %d small ones got a new buffer, not the one acknowledged", maxSpare)
	}
	if len(tx.spare) != maxSpare-1 {
		t.Errorf("%d spares, want %d (the large one taken again)", len(tx.spare), maxSpare-1)
	}
	// A smaller buffer does not push a larger one out.
	tx.recycle(big)
	tx.recycle(tx.message(4))
	tx.recycle(&outMsg{data: make([]byte, 4)})
	found := false
	for _, m := range tx.spare {
		found = found || m == big
	}
	if !found {
		t.Error("a small record pushed the large one out of the spares")
	}
	// A busy message is kept once its frames are out, not now.
	busy := &outMsg{data: make([]byte, 64<<10), busy: true}
	tx.recycle(busy)
	if !busy.settled || slices.Contains(tx.spare, busy) {
		t.Errorf("a busy message: settled %v, among the spares %v", busy.settled, slices.Contains(tx.spare, busy))
	}
}
