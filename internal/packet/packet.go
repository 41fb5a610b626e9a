// Package packet reads the fields of the predicate vocabulary out of raw
// Ethernet frames, builds frames and reads captures. Decoding never panics
// and never allocates: a truncated or hostile frame simply lacks the
// fields it cannot carry.
package packet

import (
	"strconv"

	"github.com/dragonc/dragonc/internal/fallback"
	"github.com/dragonc/dragonc/internal/pred"
)

// Well-known constants (IEEE EtherType registry, IANA protocol numbers).
const (
	EtherTypeIPv4   = 0x0800
	EtherTypeARP    = 0x0806
	EtherTypeVLAN   = 0x8100
	EtherTypeOpenMX = 0x86DF // Open-MX paper, docs/nics.md
	ProtoICMP       = 1
	ProtoTCP        = 6
	ProtoUDP        = 17
	// MinFrame is the Ethernet minimum without the 4-byte FCS (IEEE 802.3).
	MinFrame = 60
)

// Frame holds the decoded fields of one frame. The zero value is an empty
// frame; Decode fills it in place so a caller can reuse one Frame. The
// decoding is the code every generated module runs (internal/fallback):
// one decoder for dragonc's tools and its output alike.
type Frame struct {
	f     fallback.Fields
	Bytes []byte
}

// The decoder's slots are the vocabulary in name order, which is how
// internal/pred numbers the fields; a field ID is a slot.
func init() {
	if fallback.NumSlots != pred.NumFields {
		panic("dragonc: internal error: the decoder has " + strconv.Itoa(fallback.NumSlots) + " slots for " + strconv.Itoa(pred.NumFields) + " fields")
	}
	for i, name := range pred.FieldNames() {
		if fallback.SlotName(i) != name {
			panic("dragonc: internal error: decoder slot " + strconv.Itoa(i) + " holds " + fallback.SlotName(i) + ", not " + name)
		}
	}
}

var (
	fCRCOk   = pred.FieldID("frame.crc_ok")
	fRSSHash = pred.FieldID("rss.hash")
)

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Get returns the value of a field by ID.
func (f *Frame) Get(id int) (uint64, bool) { return f.f.Get(id) }

// Value implements pred.Env.
func (f *Frame) Value(id int) (uint64, bool) { return f.f.Get(id) }

// Field returns a field by name.
func (f *Frame) Field(name string) (uint64, bool) {
	info, ok := pred.Fields[name]
	if !ok {
		return 0, false
	}
	return f.f.Get(info.ID)
}

// Atom implements pred.Env: frames know no node outcomes.
func (f *Frame) Atom(pred.Atom) bool { return false }

// SetMeta records NIC metadata (CRC result, RSS hash) on a decoded frame.
func (f *Frame) SetMeta(crcOK bool, rssHash uint32, hasHash bool) {
	f.f.Set(fCRCOk, b2u(crcOK))
	if hasHash {
		f.f.Set(fRSSHash, uint64(rssHash))
	}
}

// Has reports whether a field is present.
func (f *Frame) Has(id int) bool {
	_, ok := f.f.Get(id)
	return ok
}

// Decode reads every field it can from b. Frames captured without their
// FCS are assumed to have had a good CRC; callers override with SetMeta.
// A truncated or hostile frame lacks the fields it cannot carry: a header
// cut short has none of its fields, and the headers behind it are not
// read.
func (f *Frame) Decode(b []byte) {
	f.Bytes = b
	f.f.Decode(b, fallback.Meta{CRCOK: true})
}
