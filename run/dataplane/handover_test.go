package dataplane

import (
	"reflect"
	"testing"
)

// A handover writes the free transmit chunks as runs of chunk numbers,
// whatever their order on the free list.
func TestChunkRanges(t *testing.T) {
	for _, c := range []struct {
		chunks []uint64
		want   [][2]uint64
	}{
		{nil, nil},
		{[]uint64{4, 5, 6, 7}, [][2]uint64{{4, 4}}},
		{[]uint64{7, 4, 6, 9, 5}, [][2]uint64{{4, 4}, {9, 1}}},
		{[]uint64{8}, [][2]uint64{{8, 1}}},
	} {
		var addrs []uint64
		for _, n := range c.chunks {
			addrs = append(addrs, n*xskChunk)
		}
		if got := chunkRanges(addrs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("chunkRanges(%v) = %v, want %v", c.chunks, got, c.want)
		}
	}
}

// TestXSKOrder: every loop has one socket on each device queue, the
// owner's first, and with as many loops as device queues each loop
// transmits through a socket of its own, which no other loop waits on.
func TestXSKOrder(t *testing.T) {
	for loops := 1; loops <= 4; loops++ {
		for d := range 6 {
			order := xskOrder(d, loops)
			if order[0] != xskOwner(d, loops) {
				t.Errorf("xskOrder(%d, %d) = %v: the owner %d is not first", d, loops, order, xskOwner(d, loops))
			}
			seen := map[int]bool{}
			for _, i := range order {
				if i < 0 || i >= loops || seen[i] {
					t.Errorf("xskOrder(%d, %d) = %v: not each loop once", d, loops, order)
				}
				seen[i] = true
			}
			if len(seen) != loops {
				t.Errorf("xskOrder(%d, %d) = %v: %d loops", d, loops, order, len(seen))
			}
		}
		for i := range loops {
			if o := xskOwner(i, loops); o != i {
				t.Errorf("%d loops on %d device queues: loop %d transmits through loop %d's socket", loops, loops, i, o)
			}
		}
	}
}
