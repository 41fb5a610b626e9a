//go:build linux

package sovia

import (
	"bytes"
	"encoding/binary"
	"slices"
	"syscall"
	"testing"
)

// putSlot fills slot i of r as the kernel does: a struct tpacket2_hdr
// (status, the frame's length, the bytes in the slot, where they start)
// and the frame's first bytes.
func putSlot(r *rxRing, i int, status uint32, frame []byte, length int) {
	h := r.slot(i)
	binary.NativeEndian.PutUint32(h[0:], status)
	binary.NativeEndian.PutUint32(h[4:], uint32(length))
	binary.NativeEndian.PutUint32(h[8:], uint32(len(frame)))
	binary.NativeEndian.PutUint16(h[12:], 40)
	copy(h[40:], frame)
}

// TestRxRingTake reads a receive ring laid out as the kernel fills it
// (struct tpacket2_hdr in each slot, slots packed into blocks with the
// block's tail unused): frames in slot order across a block's end and
// the ring's wrap, each slot given back; a frame cut to its slot
// (TP_STATUS_COPY, or a snap length short of the frame) dropped and
// counted; nothing past the first slot the kernel still owns.
func TestRxRingTake(t *testing.T) {
	r := &rxRing{frameSize: 96, blockSize: 256, perBlock: 2, frames: 6, fd: -1} // a socket that queues nothing whole
	r.mem = make([]byte, 3*r.blockSize)
	put := func(i int, status uint32, frame []byte, length int) { putSlot(r, i, status, frame, length) }
	var got [][]byte
	in := func(f []byte) { got = append(got, slices.Clone(f)) }

	r.pos = 4 // the next slot: the third block's first
	put(4, tpStatusUser, []byte("four"), 4)
	put(5, tpStatusUser|tpStatusCopy, []byte("cut"), 300)
	put(0, tpStatusUser, []byte("zero"), 4)
	put(1, tpStatusUser, []byte("short"), 9) // snap length short of the frame
	put(2, 0, []byte("kernel's"), 8)         // not handed over yet
	if n := r.take(in, 10); n != 4 {
		t.Fatalf("took %d slots, want 4 (up to the kernel's)", n)
	}
	if want := [][]byte{[]byte("four"), []byte("zero")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("handed on %q, want %q", got, want)
	}
	if c := r.cut.Load(); c != 2 {
		t.Errorf("%d frames counted as cut, want 2", c)
	}
	for _, i := range []int{4, 5, 0, 1} {
		if s := *r.status(i); s != 0 {
			t.Errorf("slot %d has status %#x after it was read: not given back", i, s)
		}
	}
	if r.pos != 2 || r.ready() {
		t.Errorf("at slot %d (ready %v), want slot 2, the kernel's", r.pos, r.ready())
	}
	// A batch bound: one slot at a time.
	put(2, tpStatusUser, []byte("two"), 3)
	put(3, tpStatusUser, []byte("three"), 5)
	got = nil
	if n := r.take(in, 1); n != 1 || len(got) != 1 || string(got[0]) != "two" || !r.ready() {
		t.Errorf("a batch of one took %d (%q), and the next slot ready: %v", n, got, r.ready())
	}
	// Slots sit at their block's start: the block's tail is not a slot.
	if &r.slot(2)[0] != &r.mem[r.blockSize] || &r.slot(3)[0] != &r.mem[r.blockSize+r.frameSize] {
		t.Error("slots 2 and 3 are not the second block's first two")
	}
}

// TestRxRingWhole: on a socket that queues whole the frames longer than
// a slot (PACKET_COPY_THRESH), a slot marked TP_STATUS_COPY is read
// whole from the socket, in the ring's order; a frame cut to its slot
// without the mark (tpacket_rcv found the socket's buffer full) is
// dropped and counted as no room, not as longer than the MTU; a marked
// slot whose frame cannot be read is counted as cut.
func TestRxRingWhole(t *testing.T) {
	// A datagram socket stands for the packet socket's queue.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	r := &rxRing{frameSize: 96, blockSize: 256, perBlock: 2, frames: 6, fd: fds[0]}
	r.mem = make([]byte, 3*r.blockSize)
	big := bytes.Repeat([]byte("bulk"), 1500)
	if _, err := syscall.Write(fds[1], big); err != nil {
		t.Fatal(err)
	}
	putSlot(r, 0, tpStatusUser|tpStatusCopy, big[:50], len(big))
	putSlot(r, 1, tpStatusUser, []byte("no room"), 3000)
	putSlot(r, 2, tpStatusUser, []byte("two"), 3)
	putSlot(r, 3, tpStatusUser|tpStatusCopy, []byte("gone"), 3000) // nothing queued for it
	var got [][]byte
	if n := r.take(func(f []byte) { got = append(got, slices.Clone(f)) }, 10); n != 4 {
		t.Fatalf("took %d slots, want 4", n)
	}
	if want := [][]byte{big, []byte("two")}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("handed on %d frames, want the %d-byte one whole, then \"two\"", len(got), len(big))
	}
	if w, n, c := r.whole.Load(), r.noRoom.Load(), r.cut.Load(); w != 1 || n != 1 || c != 1 {
		t.Errorf("read whole %d, no room %d, cut %d; want 1 each", w, n, c)
	}
}
