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
