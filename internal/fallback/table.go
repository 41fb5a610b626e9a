package fallback

// Demultiplexers with many ports are compiled to lookup tables instead of
// straight-line code: the keys are the packed values of the header fields
// the ports compare for equality, the values the verdicts of the ports.

// entry is one key of a table and the verdict of the first port it names.
type entry struct {
	k0, k1 uint64
	v      Verdict
}

// missing marks an empty slot; find returns it for a key not in a table.
const missing Kind = 0xff

// dense is a table over a narrow range of one-word keys: an array indexed
// by key - lo.
type dense struct {
	lo uint64
	v  []Verdict
}

func newDense(lo, hi uint64, entries []entry) *dense {
	d := &dense{lo: lo, v: make([]Verdict, hi-lo+1)}
	for i := range d.v {
		d.v[i].Kind = missing
	}
	for _, e := range entries {
		if d.v[e.k0-lo].Kind == missing {
			d.v[e.k0-lo] = e.v
		}
	}
	return d
}

func (d *dense) find(k uint64) Verdict {
	if i := k - d.lo; i < uint64(len(d.v)) {
		return d.v[i]
	}
	return Verdict{Kind: missing}
}

// hashed is an open-addressing table with linear probing, at most half
// full, so a miss ends at an empty slot after a few probes.
type hashed struct {
	shift uint
	slots []entry
}

func newHashed(entries []entry) *hashed {
	size, shift := 2, uint(63)
	for size < 2*len(entries) {
		size *= 2
		shift--
	}
	h := &hashed{shift: shift, slots: make([]entry, size)}
	for i := range h.slots {
		h.slots[i].v.Kind = missing
	}
	mask := uint64(size - 1)
	for _, e := range entries {
		for i := h.home(e.k0, e.k1); ; i = (i + 1) & mask {
			s := &h.slots[i]
			if s.v.Kind == missing {
				*s = e
				break
			}
			if s.k0 == e.k0 && s.k1 == e.k1 {
				break // the first port wins
			}
		}
	}
	return h
}

// home is the first slot probed for a key: a multiplicative hash
// (Knuth's golden-ratio constant) of both words, top bits kept.
func (h *hashed) home(k0, k1 uint64) uint64 {
	return ((k0 ^ (k1<<31 | k1>>33)) * 0x9e3779b97f4a7c15) >> h.shift
}

func (h *hashed) find(k0, k1 uint64) Verdict {
	mask := uint64(len(h.slots) - 1)
	for i := h.home(k0, k1); ; i = (i + 1) & mask {
		s := &h.slots[i]
		if s.v.Kind == missing || s.k0 == k0 && s.k1 == k1 {
			return s.v
		}
	}
}
