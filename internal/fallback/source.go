package fallback

import "embed"

// Source holds the files every generated module carries verbatim: the
// frame decoder, the lookup tables and the verdict type. The rest of this
// package stays here: zz_all.go declares every field of the vocabulary,
// as a generated module declares the fields its checks read, and this
// file lets dragonc's own tools (internal/packet) decode frames with the
// same code the generated modules run.
//
//go:embed decode.go fast.go table.go verdict.go
var Source embed.FS

// SwapSource is swap.go, which a module whose endpoint tables a reload
// replaces carries besides Source (gofallback's Options.Swappable).
//
//go:embed swap.go
var SwapSource []byte

// Fields is every field of the vocabulary decoded from one frame. Slot i
// holds the field named SlotName(i); the slots are the vocabulary in name
// order, as internal/pred numbers it.
type Fields struct{ f fields }

// NumSlots is the number of slots, one per field of the vocabulary.
const NumSlots = len(slotNames)

// SlotName names the field in slot i.
func SlotName(i int) string { return slotNames[i] }

// Decode reads every field it can from b; m is what the NIC reported.
func (x *Fields) Decode(b []byte, m Meta) {
	x.f = fields{}
	x.f.decode(b, &m)
}

// Get returns the value in a slot and whether the frame has that field.
func (x *Fields) Get(slot int) (uint64, bool) {
	return x.f.v[slot], x.f.has&slotBits[slot] != 0
}

// Set stores a value in a slot and marks the field's header present.
func (x *Fields) Set(slot int, v uint64) {
	x.f.v[slot] = v
	x.f.has |= slotBits[slot]
}

// What the fixed layout (fast.go) settles before a frame arrives, for
// the generator, which leaves out the checks it decides: the headers
// such a frame always or never has (by presence bit), and the fields
// whose values it fixes. The tests hold the fast methods to both.
var (
	FastHas = map[string]bool{
		"hasFrame": true, "hasEth": true, "hasEthType": true, "hasIp": true,
		"hasVlan": false, "hasArp": false, "hasOmx": false,
	}
	FastValues = map[string]uint64{
		"eth.type": 0x0800, "ip.version": 4, "ip.ihl": 5, "ip.options": 0, "ip.hdr_ok": 1,
	}
)
